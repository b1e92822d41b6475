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


#: the cuDNN and cuBLAS benanza is built and tested with (``version_text``'s integers): the newest
#: wheels pip installs for pyproject.toml's ranges (``nvidia-cudnn-cu13>=9,<10``, ``nvidia-cublas>=13,<14``)
#: when this version was made. The ranges are lower bounds only, so this is the reference a loaded
#: library is compared with (:func:`older_libraries`): torch 2.11 pins cuDNN 9.19.0.56 and cuBLAS
#: 13.1.0.3 and pip replaces newer wheels with them (docs/install.md)
BUILT_WITH = {"cudnn": 92801, "cublas": 131000}
LIBRARY_NAMES = {"cudnn": "cuDNN", "cublas": "cuBLAS"}


def older_libraries(loaded: dict, built: dict | None = None) -> str | None:
    """The notice for libraries older than benanza's own: ``loaded`` the versions a measurement loads
    (``{"cudnn_version": 91900, "cublas_version": 130100}``, as
    :func:`benanza.runner.system.library_versions` reads them), ``built`` by library (default
    :data:`BUILT_WITH`). One line naming each older library's version and benanza's, what replaces
    them (torch's pins) and what follows (the timings are of the older libraries, a system of their
    own in the database); None when none is older or a version is unknown (0, None)."""
    built = BUILT_WITH if built is None else built
    old = [lib for lib in ("cudnn", "cublas")
           if isinstance(loaded.get(f"{lib}_version"), int) and 0 < loaded[f"{lib}_version"] < built.get(lib, 0)]
    if not old:
        return None
    here = " and ".join(f"{LIBRARY_NAMES[lib]} {version_text(lib, loaded[f'{lib}_version'])}" for lib in old)
    ours = " and ".join(version_text(lib, built[lib]) for lib in old)
    verb = "is" if len(old) == 1 else "are"
    return (f"{here} here {verb} older than the {ours} benanza is built with (installing torch replaces benanza's "
            f"wheels with its pinned ones, docs/install.md); these timings are of {here}, stored as a system "
            f"of {'its' if len(old) == 1 else 'their'} own")
