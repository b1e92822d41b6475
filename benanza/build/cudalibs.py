"""Find the CUDA toolkit, cuDNN and cuBLAS: the pip wheels first, then a system install.

The wheels ``nvidia-cudnn-cu13`` (``nvidia/cudnn/{include,lib}``) and ``nvidia-cublas``
(``nvidia/cu13/{include,lib}``) install on machines without a GPU, so generated suites compile and
link anywhere; ``CUDNN_ROOT`` / ``CUBLAS_ROOT`` / ``CUDA_HOME`` override the search.

The CUDA toolkit (nvcc, the runtime headers and ``libcudart``) is a system install when there is one
(:func:`find_cuda_home`); on a machine with only a driver it comes from the toolkit wheels of the
``cuda`` extra (``pip install "benanza[cuda]"``), arranged as a toolkit by :func:`wheel_toolkit`.
``BENANZA_CUDA_TOOLKIT`` picks: ``auto`` (default: the system's, else the wheels), ``system`` or
``wheels``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
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


TOOLKIT_ENV = "BENANZA_CUDA_TOOLKIT"
CUDA_MAJOR = 13  # the toolkit wheels' folder (nvidia/cu13) and the <14 bounds in pyproject.toml


def toolkit_choice() -> str:
    """``$BENANZA_CUDA_TOOLKIT``: ``auto`` (unset or empty), ``system`` or ``wheels``. Raises
    :class:`LibraryError` for anything else."""
    choice = os.environ.get(TOOLKIT_ENV, "").strip().lower() or "auto"
    if choice not in ("auto", "system", "wheels"):
        raise LibraryError(f"{TOOLKIT_ENV}={os.environ[TOOLKIT_ENV]!r} is not one of auto, system, wheels")
    return choice


def _is_toolkit(root: Path) -> bool:
    """A toolkit root has bin/nvcc and the runtime headers (include/ or targets/<arch>/include/)."""
    if not (root / "bin" / "nvcc").is_file():
        return False
    return (root / "include" / "cuda_runtime.h").is_file() or any(root.glob("targets/*/include/cuda_runtime.h"))


def find_cuda_home() -> Path | None:
    """The system CUDA toolkit root (bin/nvcc and include/cuda_runtime.h): CUDA_HOME, CUDA_PATH,
    /usr/local/cuda, nvcc on PATH; None when there is none or ``BENANZA_CUDA_TOOLKIT=wheels``."""
    if toolkit_choice() == "wheels":
        return None
    cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nv = shutil.which("nvcc")
    if nv:
        cands.append(str(Path(nv).resolve().parent.parent))
    for c in cands:
        if c and _is_toolkit(Path(c)):
            return Path(c)
    return None


def find_toolkit_wheels() -> Path | None:
    """The ``nvidia/cu13`` folder of the CUDA toolkit wheels (``nvidia-cuda-nvcc``, ``nvidia-nvvm``,
    ``nvidia-cuda-crt``, ``nvidia-cuda-runtime``, ``nvidia-cuda-cccl``, ``nvidia-cuda-profiler-api``:
    the ``cuda`` extra) in this Python's site-packages, or None when one of them is missing."""
    need = ("bin/nvcc", "nvvm/bin/cicc", "include/crt/host_config.h", "include/cuda_runtime.h",
            f"lib/libcudart.so.{CUDA_MAJOR}", "include/cccl/cuda/std/version", "include/cuda_profiler_api.h")
    for d in _site_dirs():
        root = d / "nvidia" / f"cu{CUDA_MAJOR}"
        if all((root / n).is_file() for n in need):
            return root
    return None


def find_runtime_wheel() -> Path | None:
    """The ``nvidia/cu13`` folder of the ``nvidia-cuda-runtime`` wheel (``include/cuda_runtime.h``,
    ``lib/libcudart_static.a``) on ``sys.path``, or None: what the native module builds with where
    there is no toolkit (setup.py; no nvcc needed, the module has no device code)."""
    for d in _site_dirs():
        root = d / "nvidia" / f"cu{CUDA_MAJOR}"
        if (root / "include" / "cuda_runtime.h").is_file() and (root / "lib" / "libcudart_static.a").is_file():
            return root
    return None


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza"


def wheel_toolkit(wheels: Path, cache: Path | None = None) -> Path:
    """A private toolkit-shaped folder of symlinks over the toolkit wheels' ``wheels`` folder
    (``nvidia/cu13``, from :func:`find_toolkit_wheels`), made once and reused; nothing is written
    into site-packages. Layout, under ``cache`` (default ``$XDG_CACHE_HOME/benanza``, else
    ``~/.cache/benanza``) ``/cuda-toolkit/<key>/``, the key a hash of the wheel folder's path and
    its ``lib`` file names (a wheel installed or upgraded there gives a new folder)::

        bin     -> wheels/bin      nvcc, ptxas, fatbinary, nvlink, cudafe++ (nvidia-cuda-nvcc)
        nvvm    -> wheels/nvvm     cicc, libdevice (nvidia-nvvm)
        include -> wheels/include  cuda_runtime.h (nvidia-cuda-runtime), crt/ (nvidia-cuda-crt),
                                   cccl/ (nvidia-cuda-cccl; nvcc adds it to the system includes)
        lib/                       one link per file of wheels/lib (libcudart.so.13,
                                   libcudart_static.a, libcudadevrt.a, libnvvm.so.4, and cuBLAS's
                                   libraries, which share the folder), plus
          libcudart.so -> libcudart.so.13   the linker name CMake's FindCUDAToolkit looks for
                                            (the wheel ships only the versioned name)
        lib64   -> lib             where NVIDIA's installer puts x86-64 libraries

    CMake then takes the folder as ``CUDAToolkit_ROOT`` and ``bin/nvcc`` as the CUDA compiler, as it
    would a toolkit installed by NVIDIA's installer. Raises :class:`LibraryError` when the folder
    cannot be written.
    """
    wheels = wheels.resolve()
    libs = sorted(p.name for p in (wheels / "lib").iterdir())
    key = hashlib.sha256("\0".join([str(wheels)] + libs).encode()).hexdigest()[:16]
    base = (cache or _cache_root()) / "cuda-toolkit"
    root = base / key
    if _toolkit_links_ok(root):
        return root

    def fill(tmp: Path) -> None:
        for name in ("bin", "nvvm", "include"):
            (tmp / name).symlink_to(wheels / name, target_is_directory=True)
        (tmp / "lib").mkdir()
        for name in libs:
            (tmp / "lib" / name).symlink_to(wheels / "lib" / name)
        if "libcudart.so" not in libs:
            (tmp / "lib" / "libcudart.so").symlink_to(f"libcudart.so.{CUDA_MAJOR}")
        (tmp / "lib64").symlink_to("lib", target_is_directory=True)
        if root.is_dir() and not _toolkit_links_ok(root):  # a stale one (a wheel removed): replaced
            shutil.rmtree(root, ignore_errors=True)

    _publish(root, fill, f"the CUDA toolkit folder {root} over the wheels in {wheels}")
    if not _toolkit_links_ok(root):
        raise LibraryError(f"the CUDA toolkit folder {root} is incomplete; remove it and try again")
    return root


def _publish(root: Path, fill, what: str) -> None:
    """Make the folder ``root`` whole or not at all: ``fill`` a temporary sibling, then rename it
    (atomic; a process that made the same folder meanwhile wins). Raises :class:`LibraryError`
    naming ``what`` when it cannot be written."""
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
        tmp.chmod(0o755)
        fill(tmp)
        try:
            tmp.rename(root)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        raise LibraryError(f"cannot make {what}: {e.strerror or e} (set XDG_CACHE_HOME to a writable folder)") from None


def _toolkit_links_ok(root: Path) -> bool:
    return all((root / n).exists() for n in ("bin/nvcc", "nvvm/bin/cicc", "include/cuda_runtime.h",
                                             "lib/libcudart.so", "lib64"))


def find_toolkit() -> Path | None:
    """The CUDA toolkit root suites build with: the system's (:func:`find_cuda_home`), else a
    :func:`wheel_toolkit` folder over the toolkit wheels; ``BENANZA_CUDA_TOOLKIT`` restricts it to
    one of the two. None when the allowed ones are missing."""
    home = find_cuda_home()
    if home is None and toolkit_choice() != "system":
        wheels = find_toolkit_wheels()
        if wheels is not None:
            home = wheel_toolkit(wheels)
    return home


def _toolkit_missing() -> str:
    system = "no nvcc under CUDA_HOME, CUDA_PATH, /usr/local/cuda or on PATH"
    wheels = 'no CUDA toolkit wheels in this Python (pip install "benanza[cuda]")'
    why = {"auto": f"{system}, and {wheels}", "system": f"{system} ({TOOLKIT_ENV}=system)",
           "wheels": f"{wheels} ({TOOLKIT_ENV}=wheels)"}
    return f"CUDA toolkit not found: {why[toolkit_choice()]}"


def locate() -> CudaLibs:
    """Find everything a suite build needs. Raises :class:`LibraryError` naming what is missing."""
    home = find_toolkit()
    if home is None:
        raise LibraryError(_toolkit_missing())
    cudnn = find_cudnn()
    if cudnn is None:
        raise LibraryError("cuDNN not found: install the wheel with `pip install nvidia-cudnn-cu13` "
                           "or set CUDNN_ROOT")
    cublas = find_cublas()
    if cublas is None:
        raise LibraryError("cuBLAS not found: install the wheel with `pip install nvidia-cublas` "
                           "or set CUBLAS_ROOT")
    return CudaLibs(cuda_home=home, nvcc=home / "bin" / "nvcc", cudnn_include=cudnn[0],
                    cudnn_library=cudnn[1], cublas_include=cublas_only_include(cublas[0], home),
                    cublas_library=cublas[1], frontend_include=find_frontend())


def cublas_only_include(include: Path, toolkit: Path, cache: Path | None = None) -> Path:
    """The folder to put on the include path for cuBLAS's headers when suites build with ``toolkit``.

    ``nvidia-cublas`` installs its headers into ``nvidia/cu13/include``, the folder the toolkit wheels
    (``nvidia-cuda-runtime``, ``-crt``, ``-cccl``; the ``cuda`` extra) fill with the CUDA runtime's
    headers of *their* version. Put on the include path before a system toolkit's own headers, those
    would shadow them (a 13.5 ``cuda_runtime.h`` read by nvcc 13.0 does not compile). So when the
    folder holds runtime headers that are not the toolkit's, the suite gets a private folder of
    symlinks to its entries less those the toolkit has itself: the ``nvidia-cublas`` distribution's
    headers always stay (they match the library the suite links; file list from
    ``importlib.metadata``, ``cublas*.h`` and ``nvblas.h`` without it), and so do headers the toolkit
    lacks (``nvrtc.h`` of the ``nvidia-cuda-nvrtc`` wheel, which cudnn-frontend includes). Under
    ``cache`` (default ``$XDG_CACHE_HOME/benanza``) ``/cublas-include/<key>/``. Returns ``include``
    itself otherwise. Raises :class:`LibraryError` when the folder cannot be written."""
    import importlib.metadata

    include = include.resolve()
    own = (toolkit / "include").resolve()
    if include == own or not (include / "cuda_runtime.h").exists():
        return include
    try:
        cublas = {Path(str(f)).name for f in importlib.metadata.files("nvidia-cublas") or () if str(f).endswith(".h")}
    except importlib.metadata.PackageNotFoundError:
        cublas = set()
    cublas = cublas or {p.name for p in include.iterdir() if p.name.startswith("cublas") or p.name == "nvblas.h"}
    names = sorted(p.name for p in include.iterdir() if p.name in cublas or not (own / p.name).exists())
    key = hashlib.sha256("\0".join([str(include)] + names).encode()).hexdigest()[:16]
    root = (cache or _cache_root()) / "cublas-include" / key
    if all((root / n).exists() for n in names):
        return root

    def fill(tmp: Path) -> None:
        for n in names:
            (tmp / n).symlink_to(include / n, target_is_directory=(include / n).is_dir())

    _publish(root, fill, f"the cuBLAS include folder {root}")
    return root
    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root.parent))
        tmp.chmod(0o755)
        for n in names:
            (tmp / n).symlink_to(include / n, target_is_directory=(include / n).is_dir())
        try:
            tmp.rename(root)  # atomic; another process may have made the same folder meanwhile
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    except OSError as e:
        raise LibraryError(f"cannot make the cuBLAS include folder {root}: {e.strerror or e} "
                           f"(set XDG_CACHE_HOME to a writable folder)") from None
    return root
