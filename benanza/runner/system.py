"""The system here: CUDA devices (through benanza._native) and the cuDNN/cuBLAS benanza would use."""
from __future__ import annotations

import os

from benanza.build.cudalibs import find_cublas, find_cudnn, find_toolkit
from benanza.database.store import system_fingerprint
from benanza.errors import BenanzaError, UsageError


#: confines the suites to an SM partition of the GPU (a CUDA green context; cpp/include/benanza/partition.hpp)
SM_COUNT_ENV = "BENANZA_SM_COUNT"
#: how the partition is made: ``green_context`` (default) or ``mps`` (the process is a CUDA MPS client
#: limited to BENANZA_SM_COUNT SMs, benchmarks/gpu_mps.sh; the device reports that count itself)
PARTITION_ENV = "BENANZA_PARTITION"
PARTITION_METHODS = ("green_context", "mps")


def partition_method() -> str:
    """``BENANZA_PARTITION`` (default ``green_context``). Raises UsageError naming the variable for a
    method the suite does not know."""
    m = os.environ.get(PARTITION_ENV, "").strip() or "green_context"
    if m not in PARTITION_METHODS:
        raise UsageError(f"{PARTITION_ENV}={m}: not a partition method ({', '.join(PARTITION_METHODS)})")
    return m


def partition_name(gpu_name: str, sm_count: int, method: str = "green_context") -> str:
    """A partitioned system's GPU name, as the suite writes it: ``"<name> [<N> SMs]"``, or
    ``"<name> [<N> SMs, MPS]"`` for an MPS client's (two kinds of partition, two systems)."""
    return f"{gpu_name} [{sm_count} SMs{', MPS' if method == 'mps' else ''}]"


def requested_sm_count(total: int) -> int | None:
    """``BENANZA_SM_COUNT`` as the suite reads it for a GPU of ``total`` SMs: None when unset, empty
    or ``total`` (the whole GPU). Raises UsageError naming the variable when it is not a positive
    integer or exceeds ``total`` (the suite refuses the same values, and those the driver cannot
    partition: multiples of 8 SMs from 8 on Hopper). Under ``BENANZA_PARTITION=mps`` ``total`` is the
    count the MPS client's device reports, which must be the requested one (UsageError otherwise),
    and the count is returned: the suite names the system a partition."""
    v = os.environ.get(SM_COUNT_ENV, "").strip()
    method = partition_method()
    if not v:
        if method == "mps":
            raise UsageError(f"{PARTITION_ENV}=mps needs {SM_COUNT_ENV}, the SM count the MPS client is limited to")
        return None
    if not v.isdigit() or int(v) <= 0:
        raise UsageError(f"{SM_COUNT_ENV}={v}: not a positive SM count")
    if method == "mps":
        if int(v) != total:
            raise UsageError(f"{SM_COUNT_ENV}={v} with {PARTITION_ENV}=mps: the device reports {total} SMs "
                             "(is this process an MPS client with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE set?)")
        return int(v)
    if int(v) > total:
        raise UsageError(f"{SM_COUNT_ENV}={v}: the GPU has {total} SMs")
    return None if int(v) == total else int(v)


def apply_partition(device: dict) -> dict:
    """``device`` (a :func:`describe` device record) as a suite run under ``BENANZA_SM_COUNT``
    reports it: SM count and name of the partition (so its fingerprint is the suite's)."""
    n = requested_sm_count(int(device.get("sm_count") or 0))
    if n is None:
        return device
    return {**device, "sm_count": n, "gpu_name": partition_name(device.get("gpu_name", ""), n, partition_method())}


def partition_excludes_framework() -> str | None:
    """Why the framework's kernels (``bench --torch``) cannot be timed here, None when they can:
    under ``BENANZA_SM_COUNT`` PyTorch would run on the whole GPU, outside the partition the
    measurements are stored for."""
    v = os.environ.get(SM_COUNT_ENV, "").strip()
    if v and partition_method() == "mps":
        return None  # an MPS client's children are clients of the same limit: PyTorch runs confined too
    return f"{SM_COUNT_ENV}={v} confines benanza's suites, not PyTorch" if v else None


def _native():
    try:
        from benanza import _native
    except ImportError as e:
        raise BenanzaError(f"the native module benanza._native is not built ({e}); install with `pip install .`") from None
    return _native


def device_count() -> int:
    """CUDA devices here (0 when none is usable)."""
    try:
        return int(_native().device_count())
    except RuntimeError:
        return 0


def describe() -> dict:
    """Devices (may be empty, with ``device_error``; under ``BENANZA_SM_COUNT`` each as its
    partition, :func:`apply_partition`), library paths and versions, nvcc."""
    nat = _native()
    info: dict = {"devices": [], "device_error": None}
    try:
        info["devices"] = [apply_partition(d) for d in nat.query_devices()]
    except RuntimeError as e:
        info["device_error"] = str(e)
    info.update(library_versions(nat))
    home = find_toolkit()  # the system's, else the toolkit wheels'
    info["nvcc"] = str(home / "bin" / "nvcc") if home else None
    return info





def library_versions(nat=None) -> dict:
    """The cuDNN and cuBLAS a suite here loads: ``cudnn_library`` and ``cublas_library`` (their paths,
    :func:`benanza.build.cudalibs.find_cudnn`, ``find_cublas``; None when missing) and, when both are
    found, ``cudnn_version`` and ``cublas_version`` (the integers the loaded libraries report:
    cudnnGetVersion, cublasGetProperty; :func:`benanza.versions.version_text` writes them)."""
    nat = nat or _native()
    cudnn, cublas = find_cudnn(), find_cublas()
    info = {"cudnn_library": str(cudnn[1]) if cudnn else None, "cublas_library": str(cublas[1]) if cublas else None}
    if cudnn and cublas:
        info.update(nat.library_versions(str(cudnn[1]), str(cublas[1])))
    return info


def libcuda_problem(index: int = 0) -> str | None:
    """Why the NVIDIA driver (``libcuda.so.1``, through ctypes: no native module or toolkit needed)
    cannot run a suite on device ``index``: no driver, ``cuInit`` failing, a driver older than the
    CUDA runtime the suites are built with (:data:`benanza.build.cudalibs.CUDA_MAJOR`; the driver API's
    version, 1000 x major + 10 x minor), or no such device. None when it can."""
    import ctypes

    from benanza.build.cudalibs import CUDA_MAJOR

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver here (libcuda.so.1 cannot be loaded)"
    rc = cuda.cuInit(0)
    if rc != 0:
        return f"the NVIDIA driver cannot start (cuInit error {rc}; 100: no CUDA device)"
    ver = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(ver)) == 0 and ver.value < CUDA_MAJOR * 1000:
        return (f"the NVIDIA driver supports CUDA {ver.value // 1000}.{ver.value % 1000 // 10}; the suites need "
                f"CUDA {CUDA_MAJOR} (a driver of CUDA {CUDA_MAJOR} or newer)")
    n = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value == 0:
        return "no CUDA device"
    return None if index < n.value else f"no CUDA device {index} (this machine has {n.value})"


def gpu_problem(index: int = 0) -> str | None:
    """Why no suite can run on CUDA device ``index`` here, in one line, or None when one can: the
    native module's device query (the CUDA runtime the suites use), else the driver's
    (:func:`libcuda_problem`) when the native module is not built. Takes well under a second."""
    try:
        nat = _native()
    except BenanzaError:
        return libcuda_problem(index)
    try:
        n = int(nat.device_count())
    except RuntimeError as e:
        return str(e).splitlines()[0] if str(e) else "no CUDA device"
    return None if index < n else f"no CUDA device {index} (this machine has {n})"


def require_gpu(devices: int | list[int] = 0, what: str = "this command") -> None:
    """Raise :class:`DeviceError` (one line, exit code 6) when a suite cannot run on ``devices`` (an
    index or several) here, before anything is generated or compiled: `bench`, `run` and `ceilings`
    measure on a GPU, and compiling their suite first took minutes to learn it. ``what`` names the
    command in the message."""
    from benanza.errors import DeviceError

    for d in [devices] if isinstance(devices, int) else list(devices):
        why = gpu_problem(d)
        if why:
            raise DeviceError(f"{what} measures on a GPU, and none can run here: {why} (analyze, roofline and "
                              "predict work without one, on a database)")


def local_system(index: int = 0) -> dict | None:
    """A system record of GPU ``index`` with the cuDNN and cuBLAS found here, as a suite reports it
    (:func:`describe`; the identity fields of :data:`benanza.database.store.SYSTEM_IDENTITY`, so its
    fingerprint is the suite's): what the framework's kernels are stored under when they are timed
    before the suite is built. None without a GPU or without the native module."""
    try:
        nat = _native()
        devices = nat.query_devices()
    except (BenanzaError, RuntimeError):  # no native module (the suite will say which GPU it has), or no GPU
        return None
    if index >= len(devices):
        return None
    rec = dict(apply_partition(devices[index]))
    info = library_versions(nat)  # loads cuDNN and cuBLAS (0.1 s): only where there is a GPU to name
    rec["cudnn_version"] = info.get("cudnn_version", 0)
    rec["cublas_version"] = info.get("cublas_version", 0)
    return rec


def current_fingerprint(index: int = 0) -> str | None:
    """Fingerprint of GPU ``index`` with the libraries found here; None without a GPU."""
    rec = local_system(index)
    return system_fingerprint(rec) if rec is not None else None
