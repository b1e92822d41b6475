"""Build a generated suite with CMake (Ninja when available) against the located libraries."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .cudalibs import CudaLibs, locate
from .errors import BuildError
from .generator import load_suite


@dataclass
class BuildResult:
    """The suite executable and how long configure and compile took (s)."""

    executable: Path
    configure_s: float
    compile_s: float
    log: Path


def suite_executable(folder: str | Path) -> Path:
    return Path(folder) / "build" / "benanza-suite"


def _cmake() -> str:
    exe = shutil.which("cmake")
    if exe is None:
        try:
            import cmake  # the PyPI package ships the binary

            exe = str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
        except ImportError:
            raise BuildError("cmake not found: `pip install cmake`") from None
    return exe


def _ninja() -> str | None:
    exe = shutil.which("ninja")
    if exe is None:
        try:
            import ninja

            exe = str(Path(ninja.BIN_DIR) / "ninja")
        except ImportError:
            return None
    return exe


def build(folder: str | Path, libs: CudaLibs | None = None, jobs: int | None = None,
          cuda_architectures: str | None = None) -> BuildResult:
    """Configure and compile the suite in ``folder`` (output in ``folder/build``).

    Incremental: unchanged sources are not recompiled. ``cuda_architectures`` overrides the
    CMAKE_CUDA_ARCHITECTURES default. Raises :class:`BuildError` with the first error line and the
    log path, :class:`LibraryError` when cuDNN/cuBLAS/CUDA are missing.
    """
    suite = load_suite(folder)
    libs = libs or locate()
    root = suite.root
    bdir = root / "build"
    bdir.mkdir(parents=True, exist_ok=True)
    log = bdir / "build.log"
    cmd = [_cmake(), "-S", str(root), "-B", str(bdir), "-DCMAKE_BUILD_TYPE=Release"] + libs.cmake_args()
    ninja = _ninja()
    cache = bdir / "CMakeCache.txt"
    if ninja and not cache.exists():
        cmd += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    if cuda_architectures:
        cmd.append(f"-DCMAKE_CUDA_ARCHITECTURES={cuda_architectures}")
    t0 = time.perf_counter()
    _run(cmd, log, "configure")
    t1 = time.perf_counter()
    njobs = jobs or os.cpu_count() or 2
    _run([_cmake(), "--build", str(bdir), "--parallel", str(njobs)], log, "compile", append=True)
    t2 = time.perf_counter()
    exe = suite_executable(root)
    if not exe.exists():
        raise BuildError(f"{root}: build finished but {exe} is missing (see {log})")
    return BuildResult(executable=exe, configure_s=t1 - t0, compile_s=t2 - t1, log=log)


def _run(cmd: list[str], log: Path, stage: str, append: bool = False) -> None:
    with open(log, "a" if append else "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        f.write(proc.stdout)
    if proc.returncode != 0:
        first = next((ln.strip() for ln in proc.stdout.splitlines()
                      if "error" in ln.lower() and ln.strip()), proc.stdout.strip().splitlines()[-1:] or [""])
        if isinstance(first, list):
            first = first[0] if first else ""
        raise BuildError(f"suite {stage} failed: {first[:300]} (full log: {log})")
