"""A machine with only a driver (issue 17): the CUDA toolkit comes from the pip wheels of the `cuda`
extra (nvcc, crt, NVVM, runtime, CCCL), arranged as a toolkit by benanza.build.cudalibs.wheel_toolkit,
and a generated suite compiles and links against it alone. `.ci/run` also installs the package with
the system toolkit hidden; this file covers the run-time half in the ordinary `pytest`."""
import json
import subprocess
from pathlib import Path

import pytest

from benanza.build.builder import build
from benanza.build.cudalibs import (find_cuda_home, find_toolkit, find_toolkit_wheels, locate, toolkit_choice,
                                    wheel_toolkit)
from benanza.errors import LibraryError
from benanza.generation.generator import generate
from benanza.processing.model import process
from conftest import have_gpu, toolkit_out_of_reach
from onnx_builders import mlp_model

#: what the wheels put in nvidia/cu13 that a build needs (a fake wheel folder for the layout tests)
WHEEL_FILES = ("bin/nvcc", "bin/ptxas", "nvvm/bin/cicc", "include/cuda_runtime.h", "include/crt/host_config.h",
               "include/cccl/cuda/std/version", "include/cuda_profiler_api.h", "lib/libcudart.so.13",
               "lib/libcudart_static.a")


def _fake_wheels(root: Path) -> Path:
    for rel in WHEEL_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    return root


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_the_toolkit_folder_is_symlinks_shaped_like_a_toolkit(tmp_path):
    wheels = _fake_wheels(tmp_path / "site" / "nvidia" / "cu13")
    before = _tree(wheels)
    root = wheel_toolkit(wheels, cache=tmp_path / "cache")
    assert root.parent == tmp_path / "cache" / "cuda-toolkit"
    for name in ("bin", "nvvm", "include"):
        assert (root / name).is_symlink() and (root / name).resolve() == wheels / name
    # the two links a toolkit from NVIDIA's installer has and the wheels lack
    assert (root / "lib" / "libcudart.so").resolve() == wheels / "lib" / "libcudart.so.13"
    assert (root / "lib64").resolve() == (root / "lib").resolve()
    assert (root / "lib" / "libcudart_static.a").resolve() == wheels / "lib" / "libcudart_static.a"
    assert (root / "bin" / "nvcc").read_text() == "bin/nvcc"
    assert _tree(wheels) == before, "nothing is written into the wheels' folder"
    # made once: the same folder again, untouched
    stamp = (root / "lib").stat().st_mtime_ns
    assert wheel_toolkit(wheels, cache=tmp_path / "cache") == root and (root / "lib").stat().st_mtime_ns == stamp


def test_a_changed_wheel_folder_gets_a_fresh_toolkit_folder(tmp_path):
    wheels = _fake_wheels(tmp_path / "nvidia" / "cu13")
    first = wheel_toolkit(wheels, cache=tmp_path / "cache")
    (wheels / "lib" / "libcublas.so.13").write_text("cublas")  # another wheel installed into the folder
    second = wheel_toolkit(wheels, cache=tmp_path / "cache")
    assert second != first and (second / "lib" / "libcublas.so.13").resolve() == wheels / "lib" / "libcublas.so.13"
    # a folder whose links broke (a wheel removed, then put back with the same files) is made again
    (wheels / "lib" / "libcudart.so.13").unlink()
    (wheels / "lib" / "libcudart.so.13").write_text("again")
    (second / "lib" / "libcudart.so").unlink()
    assert wheel_toolkit(wheels, cache=tmp_path / "cache") == second
    assert (second / "lib" / "libcudart.so").read_text() == "again"


def test_an_unwritable_cache_is_one_line_naming_the_folder(tmp_path):
    wheels = _fake_wheels(tmp_path / "nvidia" / "cu13")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(LibraryError, match="cannot make the CUDA toolkit folder .*file/cuda-toolkit.*XDG_CACHE_HOME"):
        wheel_toolkit(wheels, cache=blocker)


def test_the_choice_of_toolkit(monkeypatch):
    monkeypatch.delenv("BENANZA_CUDA_TOOLKIT", raising=False)
    assert toolkit_choice() == "auto"
    monkeypatch.setenv("BENANZA_CUDA_TOOLKIT", "Wheels")
    assert toolkit_choice() == "wheels" and find_cuda_home() is None  # the system toolkit is not looked at
    monkeypatch.setenv("BENANZA_CUDA_TOOLKIT", "cuda12")
    with pytest.raises(LibraryError, match="BENANZA_CUDA_TOOLKIT='cuda12' is not one of auto, system, wheels"):
        locate()


@pytest.mark.slow
def test_a_suite_compiles_with_the_toolkit_wheels_alone(harness, tmp_path, monkeypatch):
    """A suite compiles and links with the toolkit wheels alone; and, as a first build on a fresh
    machine (a cache of its own, no harness yet), `benanza build` compiles the harness library and the
    suite's own sources at the same time (BENANZA_BUILD_OVERLAP=1), caches the library, and the next
    suite's build reuses it. The first build is the session's (conftest.harness: the one harness
    compile every suite the tests build links)."""
    wheels = find_toolkit_wheels()
    if wheels is None:
        # worded so that the skip summary counts it as "other" (BENANZA_CI=1 fails on it): the test
        # extra has these wheels
        pytest.skip("the toolkit wheels of the test extra are not installed (pip install '.[test]')")
    toolkit_out_of_reach(monkeypatch, tmp_path / "no-toolkit")
    harness.use(monkeypatch)
    libs = locate()
    assert libs == harness.libs  # the toolkit and libraries the session's first build had
    wheels = wheels.resolve()
    assert find_toolkit() == libs.cuda_home and wheels not in libs.cuda_home.parents
    assert libs.nvcc.resolve() == wheels / "bin" / "nvcc"
    assert (libs.cuda_home / "lib" / "libcudart.so").resolve() == wheels / "lib" / "libcudart.so.13"

    suite, r = harness.suite, harness.first  # built with BENANZA_BUILD_OVERLAP=1 in a fresh cache
    assert r.harness_s > 0 and r.configure_s + r.compile_s >= r.harness_s  # beside the suite's sources
    assert list((harness.cache / "benanza" / "harness").glob("*/build/libbenanza_harness.a")) == [harness.library]
    cache = (suite.root / "build" / "CMakeCache.txt").read_text()
    assert f"CMAKE_CUDA_COMPILER:FILEPATH={libs.nvcc}" in cache or f"CMAKE_CUDA_COMPILER:STRING={libs.nvcc}" in cache
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
    ldd = subprocess.run(["ldd", str(r.executable)], capture_output=True, text=True, check=True).stdout
    cudart = next(line for line in ldd.splitlines() if "libcudart.so" in line)
    assert Path(cudart.split("=>")[1].split("(")[0].strip()).resolve() == wheels / "lib" / "libcudart.so.13"
    assert "not found" not in ldd
    if not have_gpu():
        run = subprocess.run([str(r.executable)], capture_output=True, text=True)
        assert run.returncode == 3 and "no CUDA device" in run.stderr
    again = build(generate([process(mlp_model(tmp_path / "mlp2.onnx"), 3)], ["fp32"], tmp_path / "b").root, libs,
                  jobs=2)
    assert again.harness_s < r.harness_s  # the cached library


def test_a_system_toolkit_reads_its_own_runtime_headers_not_the_wheels(tmp_path):
    """nvidia-cublas shares nvidia/cu13/include with the runtime wheels of the `cuda` extra: with a
    system toolkit, the suite's include path gets cuBLAS's headers alone (a 13.5 cuda_runtime.h read
    by nvcc 13.0 broke the harness build)."""
    from benanza.build.cudalibs import cublas_only_include

    include = _fake_wheels(tmp_path / "site" / "nvidia" / "cu13") / "include"
    for name in ("cublas_v2.h", "cublas_api.h", "cublasLt.h", "nvblas.h", "nvrtc.h"):
        (include / name).write_text(name)
    system = tmp_path / "cuda"
    for rel in ("include/cuda_runtime.h", "include/crt/host_config.h", "include/cccl/cuda/std/version",
                "include/cublas_v2.h"):
        (system / rel).parent.mkdir(parents=True, exist_ok=True)
        (system / rel).write_text("system")
    private = cublas_only_include(include, system, cache=tmp_path / "cache")
    assert private != include.resolve() and (private / "cublas_v2.h").read_text() == "cublas_v2.h"
    # the toolkit's own headers are not shadowed; cuBLAS's (matching the library) and those it lacks stay
    assert {p.name for p in private.iterdir()} == {"cublas_v2.h", "cublas_api.h", "cublasLt.h", "nvblas.h",
                                                   "nvrtc.h", "cuda_profiler_api.h"}
    assert cublas_only_include(include, system, cache=tmp_path / "cache") == private  # made once
    # the wheels' own toolkit, or a cuBLAS folder without runtime headers: the folder itself
    assert cublas_only_include(include, include.parent, cache=tmp_path / "cache") == include.resolve()
    (include / "cuda_runtime.h").unlink()
    assert cublas_only_include(include, system, cache=tmp_path / "cache") == include.resolve()
