"""Library versions as people write them (the libraries report integers)."""
from __future__ import annotations


def version_text(library: str, v) -> str:
    """A library's integer version as people write it: cuDNN ``91900`` -> ``9.19.0`` (cuDNN 9:
    ``CUDNN_VERSION = MAJOR * 10000 + MINOR * 100 + PATCHLEVEL``; cuDNN 8 and older:
    ``MAJOR * 1000 + MINOR * 100 + PATCHLEVEL``, cudnn_version.h), cuBLAS ``130100`` -> ``13.1.0``
    (``CUBLAS_VERSION = MAJOR * 10000 + MINOR * 100 + PATCH``, cublas_api.h), CUDA runtime/driver
    ``13000`` -> ``13.0`` (``1000 * major + 10 * minor``, cudaRuntimeGetVersion). Anything else
    (None, 0, text) is returned as text unchanged ("?" for None/0)."""
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        return "?" if v in (None, 0) else str(v)
    if library == "cudnn":
        if v >= 90000:
            return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
        return f"{v // 1000}.{v // 100 % 10}.{v % 100}"
    if library == "cublas":
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else str(v)
    if library == "cuda":
        return f"{v // 1000}.{v // 10 % 100}"
    return str(v)
