"""Find the CUDA toolkit, cuDNN and cuBLAS: the pip wheels first, then a system install.

The wheels ``nvidia-cudnn-cu13`` (``nvidia/cudnn/{include,lib}``) and ``nvidia-cublas``
(``nvidia/cu13/{include,lib}``) install on machines without a GPU, so generated suites compile and
link anywhere; ``CUDNN_ROOT`` / ``CUBLAS_ROOT`` / ``CUDA_HOME`` override the search.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from benanza.errors import LibraryError


@dataclass(frozen=True)
class CudaLibs:
    """Paths to the CUDA toolkit (nvcc), cuDNN and cuBLAS headers and shared libraries."""

    cuda_home: Path
    nvcc: Path
    cudnn_include: Path
    cudnn_library: Path
    cublas_include: Path
    cublas_library: Path
    frontend_include: Path | None = None

    def cmake_args(self) -> list[str]:
        args = [f"-DCMAKE_CUDA_COMPILER={self.nvcc}",
                f"-DCUDAToolkit_ROOT={self.cuda_home}",
                f"-DCUDNN_INCLUDE_DIR={self.cudnn_include}", f"-DCUDNN_LIBRARY={self.cudnn_library}",
                f"-DCUBLAS_INCLUDE_DIR={self.cublas_include}", f"-DCUBLAS_LIBRARY={self.cublas_library}"]
        if self.frontend_include:
            args.append(f"-DCUDNN_FRONTEND_INCLUDE_DIR={self.frontend_include}")
        return args

    def to_dict(self) -> dict:
        return {k: str(v) for k, v in self.__dict__.items()}


def _site_dirs() -> list[Path]:
    import site

    dirs = []
    for p in list(sys.path) + site.getsitepackages() + [site.getusersitepackages()]:
        if p and Path(p).is_dir() and Path(p) not in dirs:
            dirs.append(Path(p))
    return dirs


def _first(candidates: list[Path]) -> Path | None:
    for c in candidates:
        if c.exists():
            return c
    return None


def _lib(dirs: list[Path], names: list[str]) -> Path | None:
    return _first([d / n for d in dirs for n in names])


def find_cudnn() -> tuple[Path, Path] | None:
    """(include dir, libcudnn.so.9) or None."""
    roots = []
    if os.environ.get("CUDNN_ROOT"):
        roots.append(Path(os.environ["CUDNN_ROOT"]))
    roots += [d / "nvidia" / "cudnn" for d in _site_dirs()]
    roots += [Path("/usr/local/cuda"), Path("/usr")]
    for r in roots:
        inc = _first([r / "include" / "cudnn.h", r / "include" / "x86_64-linux-gnu" / "cudnn.h"])
        lib = _lib([r / "lib", r / "lib64", r / "lib" / "x86_64-linux-gnu"], ["libcudnn.so.9", "libcudnn.so"])
        if inc and lib:
            return inc.parent, lib
    return None


def find_cublas() -> tuple[Path, Path] | None:
    """(include dir, libcublas.so.13) or None."""
    roots = []
    if os.environ.get("CUBLAS_ROOT"):
        roots.append(Path(os.environ["CUBLAS_ROOT"]))
    roots += [d / "nvidia" / "cu13" for d in _site_dirs()]
    roots += [d / "nvidia" / "cublas" for d in _site_dirs()]
    home = find_cuda_home()
    if home:
        roots.append(home)
    for r in roots:
        inc = _first([r / "include" / "cublas_v2.h"])
        lib = _lib([r / "lib", r / "lib64"], ["libcublas.so.13", "libcublas.so.12", "libcublas.so"])
        if inc and lib:
            return inc.parent, lib
    return None


def find_frontend() -> Path | None:
    """Include folder of cudnn-frontend (``cudnn_frontend.h``): ``$CUDNN_FRONTEND_INCLUDE``, else the
    ``nvidia-cudnn-frontend`` wheel (``<site-packages>/include``)."""
    cands = [Path(os.environ["CUDNN_FRONTEND_INCLUDE"])] if os.environ.get("CUDNN_FRONTEND_INCLUDE") else []
    cands += [d / "include" for d in _site_dirs()]
    for c in cands:
        if (c / "cudnn_frontend.h").is_file():
            return c
    return None


def find_cuda_home() -> Path | None:
    """The CUDA toolkit root (with bin/nvcc): CUDA_HOME, CUDA_PATH, /usr/local/cuda, nvcc on PATH."""
    cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nv = shutil.which("nvcc")
    if nv:
        cands.append(str(Path(nv).resolve().parent.parent))
    for c in cands:
        if c and (Path(c) / "bin" / "nvcc").exists():
            return Path(c)
    return None


def locate() -> CudaLibs:
    """Find everything a suite build needs. Raises :class:`LibraryError` naming what is missing."""
    home = find_cuda_home()
    if home is None:
        raise LibraryError("CUDA toolkit not found (no nvcc under CUDA_HOME, on PATH or in /usr/local/cuda)")
    cudnn = find_cudnn()
    if cudnn is None:
        raise LibraryError("cuDNN not found: install the wheel with `pip install nvidia-cudnn-cu13` "
                           "or set CUDNN_ROOT")
    cublas = find_cublas()
    if cublas is None:
        raise LibraryError("cuBLAS not found: install the wheel with `pip install nvidia-cublas` "
                           "or set CUBLAS_ROOT")
    return CudaLibs(cuda_home=home, nvcc=home / "bin" / "nvcc", cudnn_include=cudnn[0],
                    cudnn_library=cudnn[1], cublas_include=cublas[0], cublas_library=cublas[1],
                    frontend_include=find_frontend())
