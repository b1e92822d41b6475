"""Build a generated suite with CMake (Ninja when available) against the located libraries."""
from __future__ import annotations

import concurrent.futures
import fcntl
import functools
import hashlib
import json
import os
import shutil
import sys
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benanza.build.cudalibs import CudaLibs, locate
from benanza.errors import BuildError
from benanza.generation.generator import check_cmake_path, load_suite


@dataclass
class BuildResult:
    """The suite executable and how long configure and compile took (s)."""

    executable: Path
    configure_s: float
    compile_s: float  # wall time of compiling (and linking), the harness's first build included
    log: Path
    harness_s: float = 0.0  # building the cached harness library (0 when it was cached)


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


def _harness_key(libs: CudaLibs, cuda_architectures: str | None) -> str:
    from benanza import __version__
    from benanza.generation.generator import harness_files, templates_dir

    h = hashlib.sha256()
    for rel, text in harness_files():
        h.update(str(rel).encode() + b"\0" + text.encode() + b"\0")
    h.update((templates_dir() / "CMakeLists.txt.j2").read_bytes())
    h.update(json.dumps([__version__, libs.cmake_args(), cuda_architectures, sys.platform]).encode())
    return h.hexdigest()[:20]


def _harness_root(libs: CudaLibs, cuda_architectures: str | None) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / "harness"
    return base / _harness_key(libs, cuda_architectures)


def harness_library_path(libs: CudaLibs, cuda_architectures: str | None = None) -> Path:
    """Where the cached harness library of this harness version and library set is (or will be)."""
    return _harness_root(libs, cuda_architectures) / "build" / "libbenanza_harness.a"


def build_harness(libs: CudaLibs, jobs: int | None = None, cuda_architectures: str | None = None,
                  progress=None) -> Path:
    """The harness static library, compiled once per harness version and library set into
    ``$XDG_CACHE_HOME/benanza/harness/<key>`` (locked against concurrent builds). Raises
    :class:`BuildError` when it does not compile. ``progress``: as in :func:`build`."""
    from benanza.generation.generator import render_harness_project

    root = check_cmake_path(_harness_root(libs, cuda_architectures), "harness cache folder",
                            "set XDG_CACHE_HOME to another folder")
    lib = harness_library_path(libs, cuda_architectures)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not lib.exists():
            render_harness_project(root)
            _configure_and_compile(root, libs, jobs, cuda_architectures, "harness", progress=progress)
        if not lib.exists():
            raise BuildError(f"harness build finished but {lib} is missing (see {root / 'build' / 'build.log'})")
    return lib


def _configure_and_compile(root: Path, libs: CudaLibs, jobs: int | None, cuda_architectures: str | None,
                           what: str, extra: list[str] | None = None, target: str | None = None, progress=None
                           ) -> tuple[float, float, Path]:
    bdir = root / "build"
    bdir.mkdir(parents=True, exist_ok=True)
    log = bdir / "build.log"
    cmd = [_cmake(), "-S", str(root), "-B", str(bdir), "-DCMAKE_BUILD_TYPE=Release"] + libs.cmake_args() + (extra or [])
    ninja = _ninja()
    if ninja and not (bdir / "CMakeCache.txt").exists():
        cmd += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    if cuda_architectures:
        cmd.append(f"-DCMAKE_CUDA_ARCHITECTURES={cuda_architectures}")
    t0 = time.perf_counter()
    _run(cmd, log, f"{what} configure", progress=progress)
    t1 = time.perf_counter()
    _run([_cmake(), "--build", str(bdir), "--parallel", str(jobs or os.cpu_count() or 2)]
         + (["--target", target] if target else []), log, f"{what} compile", append=True, progress=progress)
    return t1 - t0, time.perf_counter() - t1, log


#: what ``BENANZA_CUDA_ARCHITECTURES=portable`` builds: PTX for Turing and later, SASS for Ampere
#: and Hopper (the CMake template's own default without a GPU is ``75``: sm_75 SASS and PTX)
PORTABLE_ARCHITECTURES = "75-virtual;80-real;90-real"


def local_architectures() -> str | None:
    """The CMake CUDA architectures of the GPUs here, as SASS only (``"90-real"`` on an H100 or
    H200; several GPU kinds give several, ``;``-separated), or None without a usable GPU or native
    module (then the template's portable default applies). One architecture instead of three
    compiles each CUDA translation unit once rather than three times (cuda-c-programming-guide,
    "Just-in-Time Compilation" and nvcc's ``-gencode``: a ``-real`` target is SASS for that
    compute capability only) and nothing is JIT-compiled from PTX when a suite starts (the
    template's default without a GPU, ``75``, leaves an H100 to JIT every harness kernel on a
    fresh machine). ``BENANZA_CUDA_ARCHITECTURES`` overrides: a CMake list, or ``portable`` for
    :data:`PORTABLE_ARCHITECTURES`."""
    env = os.environ.get("BENANZA_CUDA_ARCHITECTURES", "").strip()
    if env:
        return PORTABLE_ARCHITECTURES if env == "portable" else env
    return _device_architectures()


@functools.lru_cache(maxsize=1)
def _device_architectures() -> str | None:
    """:func:`local_architectures` from the devices, queried once per process (``bench`` asks
    before and during the compile)."""
    try:
        from benanza import _native

        devices = _native.query_devices()
    except Exception:  # no native module, no GPU, no driver: the portable default
        return None
    ccs = []
    for d in devices:
        cc = str(d.get("compute_capability", "")).replace(".", "")
        if cc.isdigit() and int(cc) >= 75 and cc not in ccs:  # nvcc 13 compiles sm_75 and later
            ccs.append(cc)
    return ";".join(f"{cc}-real" for cc in ccs) or None


def _configured_architectures(folder: Path) -> str | None:
    """CMAKE_CUDA_ARCHITECTURES of an already configured build folder (no device query on a
    rebuild), or None."""
    try:
        text = (folder / "build" / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("CMAKE_CUDA_ARCHITECTURES:"):
            return line.split("=", 1)[1].strip() or None
    return None


def harness_cached(folder: str | Path, libs: CudaLibs | None = None) -> bool:
    """Is the harness library that :func:`build` would link the suite in ``folder`` against
    already compiled (the same architectures :func:`build` picks)? Raises LibraryError as
    :func:`benanza.build.cudalibs.locate` does."""
    arch = _configured_architectures(Path(folder)) or local_architectures()
    return harness_library_path(libs or locate(), arch).exists()


def build(folder: str | Path, libs: CudaLibs | None = None, jobs: int | None = None,
          cuda_architectures: str | None = None, progress=None) -> BuildResult:
    """Configure and compile the suite in ``folder`` (output in ``folder/build``).

    Incremental: unchanged sources are not recompiled. When the harness library of this version is
    not cached yet and the machine has 8 cores or more (``BENANZA_BUILD_OVERLAP=1``/``0`` forces
    the choice), it is built at the same time as the suite's own sources (they do not need it),
    then the suite is linked. ``cuda_architectures`` overrides the
    CMAKE_CUDA_ARCHITECTURES default. ``progress(stage, line)``, when given, gets every output line
    of CMake and the build tool as it comes (stage: ``harness``/``suite`` + ``configure``/``compile``;
    :class:`benanza.reports.progress.BuildProgress` draws ninja's ``[n/m]`` as bars; it may be
    called from two threads). Raises :class:`BuildError` with the first error line and the
    log path, :class:`LibraryError` when cuDNN/cuBLAS/CUDA are missing.
    """
    suite = load_suite(folder)
    check_cmake_path(suite.root, "suite folder", "move the suite to another folder")
    libs = libs or locate()
    t0 = time.perf_counter()
    if cuda_architectures is None:
        cuda_architectures = _configured_architectures(suite.root) or local_architectures()
    lib = harness_library_path(libs, cuda_architectures)
    extra = [f"-DBENANZA_HARNESS_LIBRARY={lib}"]
    overlap = os.environ.get("BENANZA_BUILD_OVERLAP", "") or ("1" if (os.cpu_count() or 1) >= 8 else "0")
    if lib.exists() or overlap != "1":
        # cached, or too few cores for two builds at once: the harness first (if needed), then the suite
        build_harness(libs, jobs, cuda_architectures, progress)
        harness_s = time.perf_counter() - t0
        configure_s, compile_s, log = _configure_and_compile(suite.root, libs, jobs, cuda_architectures, "suite",
                                                             extra, progress=progress)
        compile_s += harness_s
    else:
        # first build of this harness: compile it and the suite's own sources at the same time
        # (the suite's objects do not need the library), then link
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(build_harness, libs, jobs, cuda_architectures, progress)
            configure_s, compile_s, log = _configure_and_compile(suite.root, libs, jobs, cuda_architectures,
                                                                 "suite", extra, target="benanza_suite_objects",
                                                                 progress=progress)
            pending.result()  # raises the harness's BuildError
        harness_s = time.perf_counter() - t0  # wall time until the harness library was ready
        _run([_cmake(), "--build", str(suite.root / "build"), "--parallel", str(jobs or os.cpu_count() or 2)], log,
             "suite compile", append=True, progress=progress)
        compile_s = time.perf_counter() - t0 - configure_s  # the wall time of both builds and the link
    exe = suite_executable(suite.root)
    if not exe.exists():
        raise BuildError(f"{suite.root}: build finished but {exe} is missing (see {log})")
    return BuildResult(executable=exe, configure_s=configure_s, compile_s=compile_s, log=log, harness_s=harness_s)


def _run(cmd: list[str], log: Path, stage: str, append: bool = False, progress=None) -> None:
    with open(log, "a" if append else "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in proc.stdout:  # as it comes, for the progress bar
            f.write(line)
            lines.append(line)
            if progress is not None:
                progress(stage, line)
        proc.wait()
        output = "".join(lines)
    if proc.returncode != 0:
        first = next((ln.strip() for ln in output.splitlines()
                      if "error" in ln.lower() and ln.strip()), output.strip().splitlines()[-1:] or [""])
        if isinstance(first, list):
            first = first[0] if first else ""
        raise BuildError(f"{stage} failed: {first[:300]} (full log: {log})")
