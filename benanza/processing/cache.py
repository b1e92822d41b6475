"""Processed models kept between commands: :func:`process` is
:func:`benanza.processing.model.process` with its result stored under the model file's SHA-256.

Processing runs ONNX shape inference and constant folding, seconds for a 600-layer model; an
analysis of the same file at the same batch needs none of it again. An entry's key is the file's
SHA-256, the batch, the bound dims, the batch axis and the fingerprint of the code that processed it
(benanza's version and the source of :mod:`benanza.processing` and :mod:`benanza.kinds`), so an
edited model or an upgraded benanza never reads an old entry. The model's name and path are the
ones given now (two files with one content share an entry).

Entries are pickles in ``$BENANZA_MODEL_CACHE`` (else ``$XDG_CACHE_HOME/benanza/models``, else
``~/.cache/benanza/models``), written by this user's own runs: a file there is trusted as the
harness libraries beside it are; ``BENANZA_MODEL_CACHE=off`` turns the cache off. An entry is
written atomically (a temporary file renamed); an unreadable or stale one is processed again;
a cache folder that cannot be written costs nothing but the saving.

**Exports** of module specs (:func:`cached_export`, :func:`store_export`): ``benanza torch`` exports
a torchvision or transformers model to ONNX before it benches it, 15 s for GPT-2 and 86 s for a
1.1 B-parameter Llama-style decoder on an H200 machine (``run.command_seconds``; docs/torch.md),
and the same model at another data type or batch list has the same
export. Entries are ``KEY.onnx`` (weights stripped) and ``KEY.json`` (exporter, opset, the export's
seconds, notes) in ``$BENANZA_EXPORT_CACHE`` (else ``$XDG_CACHE_HOME/benanza/exports``, else
``~/.cache/benanza/exports``; ``off`` turns it off), under
:func:`benanza.processing.modules.export_key`: the model's identity (torchvision name and input
shape; transformers configuration, phase and length), the versions of torch, torchvision,
transformers, onnx and onnxscript, and benanza's export code. Only sources made of library code
are cached (``ModuleSource.cacheable``): a user's own module can change under the same name.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pickle
import tempfile
from pathlib import Path

from benanza import __version__
from benanza.processing.model import ModelLayers, process as process_model
from benanza.processing.modules import Export


def cache_dir() -> Path | None:
    """The folder of the entries, or None when the cache is off."""
    return _folder("BENANZA_MODEL_CACHE", "models")


def _folder(variable: str, name: str) -> Path | None:
    """The folder ``$variable`` names (None for ``off``), else ``$XDG_CACHE_HOME/benanza/NAME``, else
    ``~/.cache/benanza/NAME``."""
    env = os.environ.get(variable)
    if env == "off":
        return None
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / name


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 (16 hex digits) of benanza's version and the source of the processing and kinds
    packages: what decides a processed model besides the file."""
    h = hashlib.sha256(__version__.encode())
    root = Path(__file__).resolve().parent.parent
    for sub in ("processing", "kinds"):
        for f in sorted((root / sub).glob("*.py")):
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def entry_key(data: bytes, batch: int, dims: dict | None, batch_dim: int | None) -> str:
    """The key of a model file's bytes processed at ``batch`` with ``dims`` and ``batch_dim``."""
    spec = f"{hashlib.sha256(data).hexdigest()}|{batch}|{sorted((dims or {}).items())}|{batch_dim}|{code_fingerprint()}"
    return hashlib.sha256(spec.encode()).hexdigest()[:32]


def process(path: str | os.PathLike, batch: int, dims: dict[str, int] | None = None,
            batch_dim: int | None = None) -> ModelLayers:
    """:func:`benanza.processing.model.process`, read from the cache when this file's content was
    processed the same way before (module doc). Raises as that function does (errors are never
    cached)."""
    folder = cache_dir()
    try:
        data = Path(path).read_bytes() if folder is not None else None
    except OSError:
        data = None  # process() says what is wrong with the path
    if data is None:
        return process_model(path, batch, dims, batch_dim)
    entry = folder / f"{entry_key(data, batch, dims, batch_dim)}.pkl"
    ml = _read(entry)
    if ml is None:
        ml = process_model(path, batch, dims, batch_dim)
        _write(entry, ml)
    return dataclasses.replace(ml, model=Path(path).stem, path=str(path))


def _read(entry: Path) -> ModelLayers | None:
    try:
        ml = pickle.loads(entry.read_bytes())
    except Exception:  # absent, truncated, from an incompatible Python: process again
        return None
    return ml if isinstance(ml, ModelLayers) else None


def _write(entry: Path, ml: ModelLayers) -> None:
    try:
        _atomic_write(entry, pickle.dumps(ml, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError:
        pass  # a read-only or full cache folder: the next run processes again


# ------------------------------------------------------------------------------------ exports

def export_cache_dir() -> Path | None:
    """The folder of the export entries (module doc), or None when that cache is off."""
    return _folder("BENANZA_EXPORT_CACHE", "exports")


def cached_export(key: str, dest: str | os.PathLike) -> Export | None:
    """Copy the export stored under ``key`` to ``dest`` (written whole or not at all) and return it
    (``seconds``: what the export took when it was made); None when there is no readable entry or
    ``dest`` cannot be written."""
    folder = export_cache_dir()
    if folder is None or not key:
        return None
    dest = Path(dest)
    try:
        meta = json.loads((folder / f"{key}.json").read_text())
        data = (folder / f"{key}.onnx").read_bytes()
        if meta.get("key") != key or len(data) != meta.get("size"):
            return None
        _atomic_write(dest, data)
    except (OSError, ValueError, AttributeError):
        return None
    return Export(dest, str(meta["exporter"]), int(meta["opset"]), float(meta["seconds"]), len(data),
                  tuple(meta.get("notes") or ()))


def store_export(key: str, ex: Export) -> None:
    """Keep ``ex`` (a finished export, its weights stripped) under ``key``; a cache folder that
    cannot be written only loses the saving."""
    folder = export_cache_dir()
    if folder is None or not key:
        return
    try:
        data = Path(ex.path).read_bytes()
        _atomic_write(folder / f"{key}.onnx", data)
        _atomic_write(folder / f"{key}.json", json.dumps(
            {"key": key, "exporter": ex.exporter, "opset": ex.opset, "seconds": round(ex.seconds, 3),
             "size": len(data), "notes": list(ex.notes)}).encode())
    except OSError:
        pass


def _atomic_write(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a temporary file in its folder renamed over it. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
