"""The harness library the tests' suites link (conftest.harness: compiled once per session, with the
toolkit wheels where the `cuda` extra is installed) holds every harness source, the graph-API ones
compiled with the cudnn-frontend headers; and a system CUDA toolkit, which the session's builds do not
use, compiles a suite's sources and a harness kernel file with the include path benanza gives it."""
import shutil
import subprocess
from pathlib import Path

import pytest

from benanza.build.cudalibs import find_cuda_home, locate
from benanza.generation.generator import generate, harness_sources
from benanza.processing.model import process
from onnx_builders import mlp_model


def _objects(names) -> set[str]:
    return {Path(n).name + ".o" for n in names}


@pytest.mark.slow
def test_every_source_is_in_the_library_the_graph_api_ones_with_the_frontend(harness):
    """Every cpp/src file compiled (nvcc for the kernels, the host compiler with -Wall for the rest),
    and those that include cudnn_frontend.h with it (BENANZA_WITH_FRONTEND=1: their objects hold
    cudnn-frontend graph code; built without the headers they would only record skips). This is the
    compile check of the graph-API translation units with the frontend (batchnorm, layernorm backward,
    RMSNorm, rotary, transformer and SDPA backward engines); the kinds' own tests check them without it."""
    srcs = harness_sources()
    members = subprocess.run(["ar", "t", str(harness.library)], capture_output=True, text=True, check=True).stdout
    assert sorted(members.split()) == sorted(_objects(srcs["harness_sources"]))
    nm = subprocess.run(["nm", "-C", "-A", str(harness.library)], capture_output=True, text=True, check=True).stdout
    with_frontend = {ln.split(":")[1] for ln in nm.splitlines() if "cudnn_frontend::graph::" in ln}
    assert with_frontend == _objects(srcs["frontend_sources"])
    assert {"transformer_engines.cpp.o", "sdpa_backward_engines.cpp.o", "rotary_engines.cpp.o",
            "rmsnorm_engines.cpp.o", "batchnorm_engines.cpp.o"} <= with_frontend


def _tool(name: str) -> str:
    """cmake or ninja: on PATH, else the PyPI package's (both are dependencies)."""
    exe = shutil.which(name)
    if exe is None:
        mod = __import__(name)
        exe = str(Path(mod.CMAKE_BIN_DIR if name == "cmake" else mod.BIN_DIR) / name)
    return exe


@pytest.mark.slow
def test_a_system_toolkit_compiles_a_suite_and_a_harness_kernel_file(tmp_path, monkeypatch):
    """With a system toolkit (BENANZA_CUDA_TOOLKIT=system) beside the `cuda` extra's runtime headers
    in nvidia/cu13/include (where cuBLAS's are): CMake configures a suite with its nvcc, the suite's
    generated sources compile (the harness, cuDNN and cuBLAS headers on the path benanza gives them)
    and its nvcc compiles a harness kernel file with the harness library's include path. A 13.5
    cuda_runtime.h read by nvcc 13.0 broke that build once (cudalibs.cublas_only_include). The
    session's suites and harness build with the wheels (conftest.harness): this is the system
    toolkit's compile, without a second harness library of four minutes."""
    monkeypatch.setenv("BENANZA_CUDA_TOOLKIT", "system")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    home = find_cuda_home()
    if home is None:
        pytest.skip("no system CUDA toolkit (nvcc under CUDA_HOME, CUDA_PATH, /usr/local/cuda or on PATH)")
    libs = locate()
    assert libs.cuda_home == home and libs.nvcc == home / "bin" / "nvcc"
    suite = generate([process(mlp_model(tmp_path / "mlp.onnx"), 2)], ["fp32", "fp16"], tmp_path / "suite")
    bdir = suite.root / "build"
    cmake = _tool("cmake")
    subprocess.run([cmake, "-S", str(suite.root), "-B", str(bdir), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}",
                    "-DCMAKE_BUILD_TYPE=Release", *libs.cmake_args()], capture_output=True, text=True, check=True)
    cache = (bdir / "CMakeCache.txt").read_text()
    assert f"CMAKE_CUDA_COMPILER:FILEPATH={libs.nvcc}" in cache or f"CMAKE_CUDA_COMPILER:STRING={libs.nvcc}" in cache
    kernel = "CMakeFiles/benanza_harness.dir/harness/src/trilu_kernels.cu.o"  # includes cuda_runtime.h
    r = subprocess.run([cmake, "--build", str(bdir), "--target", "benanza_suite_objects", kernel],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:]
    assert (bdir / kernel).is_file()
    objects = {p.name for p in (bdir / "CMakeFiles" / "benanza_suite_objects.dir").rglob("*.o")}
    assert objects == {Path(s).name + ".o" for s in suite.manifest["sources"]} and objects
