"""The ``db`` commands: the performance database's systems, measurements, sharing (what a model still
has to measure), two systems compared, export, import and schema upgrade."""
from __future__ import annotations

from pathlib import Path

from benanza import kinds as L
from benanza.database import public_tables, query, sharing
from benanza.database.store import Database, open_db
from benanza.errors import UsageError
from benanza.spec import Precision
from benanza.usecases.progress import SILENT, Progress


def open_read(db: str | None, progress: Progress = SILENT) -> Database:
    """An existing database (never created), its notices to ``progress``."""
    database = open_db(db, create=False)
    for n in database.notices:
        progress.notice(n)
    return database


def systems(db: str | None, progress: Progress = SILENT) -> tuple[Database, list[dict]]:
    """The systems measured (:func:`benanza.database.query.systems`), fingerprints shortened to 12."""
    database = open_read(db, progress)
    rows = query.systems(database)
    for r in rows:
        r["fingerprint"] = r["fingerprint"][:12]
    return database, rows


def measurements(db: str | None, f: query.Filters, best: bool, dtype: str | None,
                 progress: Progress = SILENT) -> tuple[str, list]:
    """Measurement records by ``f`` (``best``: only the fastest valid per layer config, in ``dtype``
    or in each data type); returns the table's title and the records."""
    if dtype:
        Precision.of(dtype)
    database = open_read(db, progress)
    if not best:
        recs = query.measurements(database, f)
        return f"{len(recs)} measurements", recs
    keys = query.config_keys(database, f)
    if f.sort not in query.SORTABLE:
        raise UsageError(f"cannot sort by {f.sort!r} (choose from {', '.join(query.SORTABLE)})")
    # no --dtype: every data type, the best per config in each
    found = [r for p in ([dtype] if dtype else L.PRECISIONS)
             for r in query.best_per_config(database, f.system, p, f.cache or "warm", keys).values()
             if dtype or r.precision == p]  # a precision's fallback rows (fp8 -> fp16) once
    recs = query.sort_records(found, f.sort, f.descending, f.limit)
    return f"{len(recs)} best measurements per config in {dtype or 'each data type'}", recs


def shared(db: str | None, model: str, batch: int | None, system: str | None, dtype: str,
           progress: Progress = SILENT) -> dict:
    """How many of ``model``'s unique layer configs are already measured
    (:func:`benanza.database.query.shared_configs`)."""
    return query.shared_configs(open_read(db, progress), model, batch, system, dtype)


def compare(db: str | None, system_a: str, system_b: str, dtype: str, cache: str,
            progress: Progress = SILENT) -> list[dict]:
    """Per layer config measured on both systems, the best times and their ratio (B / A). Raises
    UsageError when the two have nothing in common in ``dtype``."""
    database = open_read(db, progress)
    Precision.of(dtype)
    rows = query.compare_systems(database, system_a, system_b, dtype, cache)
    if not rows:
        raise UsageError(f"systems {system_a} and {system_b} have no layer config measured in {dtype} ({cache}) "
                         f"on both: nothing to compare (try another --dtype)")
    return rows


def export(db: str | None, output: Path, system: str | None, model: list[str] | None, batch: int | None, fmt: str,
           progress: Progress = SILENT):
    """Chosen systems and models to a portable SQLite file (a :class:`benanza.database.sharing`
    export's counts), or one system's measurements as Google Benchmark or NVBench JSON (the document;
    an NVBench document's warnings are in its ``meta.benanza.warnings``, for the printer)."""
    if fmt not in ("sqlite", "gbench", "nvbench"):
        raise UsageError(f"--format must be sqlite, gbench or nvbench, not {fmt!r}")
    if output.exists():
        raise UsageError(f"-o {output}: exists; export writes a new file")
    database = open_read(db, progress)
    if fmt == "sqlite":
        return sharing.export(database, output, system, model, batch)
    from benanza.database.exports import gbench_doc, nvbench_doc, write_json

    keys = sorted({k for m in model for k in query.model_keys(database, m, batch)}) if model else None
    # an NVBench document's warnings are in its meta.benanza.warnings; the printer shows them
    doc = gbench_doc(database, system, keys) if fmt == "gbench" else nvbench_doc(database, system, keys,
                                                                                 warn=lambda m: None)
    write_json(doc, output)
    return doc


def import_(db: str | None, source: str, progress: Progress = SILENT, spinner=None):
    """Merge ``source`` into the database (:func:`benanza.database.sharing.import_db`), or, when
    ``source`` is a public GEMM table (a CSV, :func:`benanza.database.public_tables.looks_like_table`),
    store its GPUs as systems (:func:`import_table`); ``spinner``: a context manager factory
    ``spinner(what)`` around the import."""
    import contextlib

    if public_tables.looks_like_table(source):
        return import_table(db, source, progress, spinner)
    database = open_db(db)
    try:
        for n in database.notices:
            progress.notice(n)
        with (spinner or (lambda what: contextlib.nullcontext()))(f"importing {source} into {database.safe_url}"):
            return sharing.import_db(database, source)
    finally:  # its connections closed: SQLite removes the -wal and -shm files (a failed import's too)
        database.close()


def gpu_figures(device: str, gpu: str) -> dict | None:
    """The figures of benanza's spec table (:mod:`benanza.analysis.gpus`) a public table's system
    record takes for GPU ``device`` (the name it reports), matched by that name, else by the table's
    own spec name ``gpu``: ``spec`` (the table's name of it), ``compute_capability``, ``sm_count``,
    ``memory_bytes``, ``l2_cache_bytes`` (bytes) and ``max_sm_clock_mhz`` (the boost clock, MHz); None
    for a GPU the spec table lacks."""
    from benanza.analysis.gpus import find_gpu

    for name in (device, gpu):
        try:
            g = find_gpu(name)
        except UsageError:
            continue
        return {"spec": g.name, "compute_capability": g.compute_capability, "sm_count": g.sm_count,
                "memory_bytes": g.memory_bytes, "l2_cache_bytes": g.l2_bytes, "max_sm_clock_mhz": g.boost_clock_mhz}
    return None


def import_table(db: str | None, source: str, progress: Progress = SILENT, spinner=None):
    """``db import`` of a public GEMM table (:mod:`benanza.database.public_tables`): the table read and
    checked first (a file of neither format: UsageError, the database not even opened), then one
    system per GPU, its record with the spec table's figures (:func:`gpu_figures`) and the table's
    provenance, written in one transaction. Returns the
    :class:`benanza.database.public_tables.TableImport`; a notice names each GPU the spec table lacks."""
    import contextlib

    table = public_tables.read_table(source)
    records = {}
    for device, gpu in table.devices.items():
        figures = gpu_figures(device, gpu)
        if figures is None:
            progress.notice(f"{source}: GPU {device!r} is not in benanza's spec table (benanza/analysis/gpus.py): "
                            f"its system has no SM count, clock or memory, and `predict` cannot start from it")
        records[device] = public_tables.system_record(table.format, device, figures)
    database = open_db(db)
    try:
        for n in database.notices:
            progress.notice(n)
        with (spinner or (lambda what: contextlib.nullcontext()))(f"importing {source} into {database.safe_url}"):
            return public_tables.import_table(database, table, records)
    finally:
        database.close()


def upgrade(db: str | None) -> tuple[Database, int]:
    """``db upgrade``: the database at ``db`` migrated in place to the current schema (the one command
    that writes into a file it did not create; every other command reads a source read-only), and the
    schema version it now has. Raises DatabaseError as :func:`benanza.database.store.open_db` does."""
    from benanza.database.store import SCHEMA_VERSION

    return open_db(db, create=False, read_only=False), SCHEMA_VERSION
