"""Build benanza: the pure-Python package, its templates and C++ harness as package data, and the
pybind11 module benanza._native compiled with CMake (CMakeLists.txt).

The native module needs the CUDA runtime's headers and static library only (it has no device code):
from a system CUDA toolkit when there is one, else from the nvidia-cuda-runtime wheel, a
[build-system] requirement, so a machine with only a driver builds it too (:func:`cuda_cmake_args`)."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """Configure and build CMakeLists.txt; the module lands where setuptools expects it."""

    def build_extension(self, ext):
        import pybind11

        out = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        args = [f"-DPython_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"]
        args += cuda_cmake_args()
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        cmake_build(shutil.which("cmake") or "cmake", args, out)


def cmake_build(cmake: str, args: list[str], out: Path, run=subprocess.run) -> None:
    """Configure and build CMakeLists.txt with ``args`` in a fresh temporary build folder (a cache
    from an earlier, isolated build environment would point at tools that no longer exist), the
    module written to ``out``; the folder is removed when the build ends, built or failed. Exits
    with one line when CMake fails."""
    tmp = Path(tempfile.mkdtemp(prefix="benanza-cmake-"))
    try:
        run([cmake, "-S", str(ROOT), "-B", str(tmp), "-DCMAKE_BUILD_TYPE=Release",
             f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out}"] + args, check=True)
        run([cmake, "--build", str(tmp), "--parallel", str(os.cpu_count() or 2)], check=True)
    except subprocess.CalledProcessError:
        sys.exit("benanza: building the native module failed; it needs the CUDA runtime (a CUDA "
                 "toolkit, CUDA_HOME, or the nvidia-cuda-runtime wheel), a C++17 compiler and CMake >= 3.24")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cuda_cmake_args() -> list[str]:
    """The CMake arguments that name the CUDA runtime for CMakeLists.txt: ``-DCUDAToolkit_ROOT=DIR``
    for a system toolkit (found as ``benanza.build.cudalibs.find_cuda_home`` finds it: CUDA_HOME,
    CUDA_PATH, /usr/local/cuda, nvcc on PATH), else ``-DBENANZA_CUDA_RUNTIME_ROOT=DIR`` for the
    nvidia-cuda-runtime wheel's ``nvidia/cu13`` folder (``include/cuda_runtime.h``,
    ``lib/libcudart_static.a``; CMakeLists.txt makes the ``CUDA::cudart_static`` target from them,
    since CMake's FindCUDAToolkit insists on nvcc). ``BENANZA_CUDA_TOOLKIT=system|wheels`` allows
    only one of the two. Exits with a one-line message when neither is there."""
    sys.path.insert(0, str(ROOT))
    try:
        from benanza.build.cudalibs import find_cuda_home, find_runtime_wheel, toolkit_choice
        from benanza.errors import LibraryError

        try:
            home = find_cuda_home()
            runtime = find_runtime_wheel() if home is None and toolkit_choice() != "system" else None
        except LibraryError as e:
            sys.exit(f"benanza: {e}")
    finally:
        sys.path.remove(str(ROOT))
    if home is not None:
        return [f"-DCUDAToolkit_ROOT={home}"]
    if runtime is not None:
        print(f"benanza: no CUDA toolkit found; the native module builds with the CUDA runtime wheel in {runtime}")
        return [f"-DBENANZA_CUDA_RUNTIME_ROOT={runtime}"]
    sys.exit("benanza: CUDA runtime not found: no CUDA toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda, nvcc on "
             "PATH) and no nvidia-cuda-runtime wheel in the build environment (pip install nvidia-cuda-runtime)")


class BuildPyWithData(build_py):
    """Ship templates/, cpp/, db/migrations, the prediction's error tables
    (db/reference/predict_errors.json and predict_train_errors.json: `benanza predict`'s and
    `benanza predict --train`'s error bars) and the cross-architecture GEMM ratio grids with their
    errors and NeuSight's fp32 table the fp32 model is fitted on (db/reference/xgpu) inside the package
    (benanza/_data/...)."""

    def run(self):
        super().run()
        for name, src in (("templates", "templates"), ("cpp", "cpp"), ("migrations", "db/migrations")):
            dst = Path(self.build_lib) / "benanza" / "_data" / name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(ROOT / src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        for table in ("predict_errors.json", "predict_train_errors.json"):
            shutil.copy2(ROOT / "db" / "reference" / table, Path(self.build_lib) / "benanza" / "_data" / table)
        xgpu = Path(self.build_lib) / "benanza" / "_data" / "xgpu"  # ratio grids, errors, the fp32 model's table
        xgpu.mkdir(parents=True, exist_ok=True)
        for name in ("ratio_grids.npz", "xgpu_errors.json", "neusight_fp32_linear_bmm.csv.gz", "README.md"):
            shutil.copy2(ROOT / "db" / "reference" / "xgpu" / name, xgpu / name)


if __name__ == "__main__":  # as pip, setuptools' build backend and `python setup.py` run it
    setup(ext_modules=[CMakeExtension("benanza._native")],
          cmdclass={"build_ext": CMakeBuild, "build_py": BuildPyWithData})
