"""Build benanza: the pure-Python package, its templates and C++ harness as package data, and the
pybind11 module benanza._native compiled with CMake (CMakeLists.txt)."""
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
        # a fresh CMake build folder each time: a cache from an earlier (isolated) build environment
        # would point at tools that no longer exist
        tmp = Path(tempfile.mkdtemp(prefix="benanza-cmake-"))
        cmake = shutil.which("cmake") or "cmake"
        args = [cmake, "-S", str(ROOT), "-B", str(tmp), "-DCMAKE_BUILD_TYPE=Release",
                f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out}", f"-DPython_EXECUTABLE={sys.executable}",
                f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"]
        nvcc = shutil.which("nvcc")
        cuda_home = os.environ.get("CUDA_HOME") or (str(Path(nvcc).resolve().parent.parent) if nvcc else
                                                    "/usr/local/cuda")
        args.append(f"-DCUDAToolkit_ROOT={cuda_home}")
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        try:
            subprocess.run(args, check=True)
            subprocess.run([cmake, "--build", str(tmp), "--parallel", str(os.cpu_count() or 2)], check=True)
        except subprocess.CalledProcessError:
            sys.exit("benanza: building the native module failed; it needs the CUDA toolkit "
                     "(nvcc, cuda_runtime.h; set CUDA_HOME), a C++17 compiler and CMake >= 3.24")


class BuildPyWithData(build_py):
    """Ship templates/, cpp/ and db/migrations inside the package (benanza/_data/...)."""

    def run(self):
        super().run()
        for name, src in (("templates", "templates"), ("cpp", "cpp"), ("migrations", "db/migrations")):
            dst = Path(self.build_lib) / "benanza" / "_data" / name
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(ROOT / src, dst, ignore=shutil.ignore_patterns("__pycache__"))


setup(ext_modules=[CMakeExtension("benanza._native")],
      cmdclass={"build_ext": CMakeBuild, "build_py": BuildPyWithData})
