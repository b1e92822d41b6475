"""The system here: CUDA devices (through benanza._native) and the cuDNN/cuBLAS benanza would use."""
from __future__ import annotations

from benanza.build.cudalibs import find_cublas, find_cudnn, find_toolkit
from benanza.database.store import system_fingerprint
from benanza.errors import BenanzaError


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
    """Devices (may be empty, with ``device_error``), library paths and versions, nvcc."""
    nat = _native()
    info: dict = {"devices": [], "device_error": None}
    try:
        info["devices"] = list(nat.query_devices())
    except RuntimeError as e:
        info["device_error"] = str(e)
    cudnn, cublas = find_cudnn(), find_cublas()
    info["cudnn_library"] = str(cudnn[1]) if cudnn else None
    info["cublas_library"] = str(cublas[1]) if cublas else None
    if cudnn and cublas:
        info.update(nat.library_versions(str(cudnn[1]), str(cublas[1])))
    home = find_toolkit()  # the system's, else the toolkit wheels'
    info["nvcc"] = str(home / "bin" / "nvcc") if home else None
    return info


def current_fingerprint(index: int = 0) -> str | None:
    """Fingerprint of GPU ``index`` with the libraries found here; None without a GPU."""
    info = describe()
    if not info["devices"] or index >= len(info["devices"]):
        return None
    rec = dict(info["devices"][index])
    rec["cudnn_version"] = info.get("cudnn_version", 0)
    rec["cublas_version"] = info.get("cublas_version", 0)
    return system_fingerprint(rec)

