"""Sharing performance databases: export a portable SQLite file of chosen systems and models, and
import (merge) one into another database.

The merge rule (what `benanza db import` documents; machine ceilings: per system and name, the
newer wins): the unit is the *job*, one layer config in one precision and one tensor layout (NCHW,
or NHWC for a channels-last job) on one system. A job present on one side only is copied; a job
present on both sides is taken from the side that finished it later (``jobs.finished_at``), with
all its measurements and heuristic choices, replacing the other side's; on equal times the
existing data is kept, and so is a job that measured against a later one that failed.
Measurement rows that belong to no job (hand-made data) merge row by row, the newer ``created_at``
winning; so do hardware counters (`bench --counters`), per implementation and kernel. Systems are matched by fingerprint, layer configs by key, models by (sha256, batch).
A model's record merges as a union: its configs keyed by (model, layer config), the larger count of
one config winning, and of two ``models`` rows of one key the greater (layers, unique layers, summary,
name); so the result does not depend on the order of imports nor on concurrent ones.
Nothing is ever duplicated: the database's unique keys hold after any sequence of imports. An import
is one transaction of the destination: stopped or failed at any point (Ctrl-C, a kill, a full disk, a
string longer than its column: :func:`benanza.database.store.check_lengths`), it leaves the
destination as it was.
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import select

from benanza.database.store import (Ceiling, Choice, Database, JobRow, LayerConfigRow, Measurement, ModelConfig, ModelRow, Run, System,
                       check_lengths, db_write_error, insert_new, open_db, upsert_greater, upsert_row)
from benanza.errors import DatabaseError, UsageError
from benanza.kinds.backend import Backend
from benanza.kinds.base import owning_layout, row_layouts
from benanza.generation.generator import job_backend, job_layout
from benanza.database.query import model_keys, resolve_systems

_CHUNK = 400


def _cols(model) -> list[str]:
    return [c.name for c in model.__table__.columns]


def _rows(conn, stmt) -> list[dict]:
    return [dict(r._mapping) for r in conn.execute(stmt)]


def _newer_wins(dc, model, keys: tuple[str, ...], values: dict) -> bool:
    """Insert ``values`` (a source row, ``created_at`` included) into ``model``'s table unless the row
    of the same unique key ``keys`` there is as new, replacing an older one, in one statement
    (:func:`benanza.database.store.upsert_row`: concurrent imports never fail on each other's row);
    True when written."""
    return upsert_row(dc, model, values, keys)


@dataclass
class MergeStats:
    """What an import did (counts of rows or jobs) and how fast (rows/s)."""

    systems_added: int = 0
    configs_added: int = 0
    models_added: int = 0
    jobs_added: int = 0
    jobs_replaced: int = 0
    jobs_kept: int = 0
    measurements_written: int = 0
    orphans_written: int = 0
    ceilings_written: int = 0
    counters_written: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def rows_per_s(self) -> float:
        return (self.measurements_written + self.orphans_written) / self.seconds if self.seconds else 0.0

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["rows_per_s"] = self.rows_per_s
        return d


def merge(dst: Database, src: Database, system_ids: list[int] | None = None, keys: list[str] | None = None,
          label: str = "", models: set[tuple[str, int | None]] | None = None) -> MergeStats:
    """Merge ``src`` into ``dst`` (see the module docstring for the rule) in one transaction of
    ``dst`` under its write lock: committed whole or, on any error or interrupt, rolled back.
    ``system_ids`` and ``keys`` restrict what is taken from ``src``; ``models``: (name, batch or None
    for any) of the only model records taken (None: every record whose configs all come along), each
    whole: all its layer configs are copied, measured or not. Raises :class:`DatabaseError` for a
    source string longer than its column (:func:`benanza.database.store.check_lengths`, nothing
    written) and SQLAlchemy's errors as they come (the transaction rolled back)."""
    st = MergeStats()
    t0 = time.perf_counter()
    source = _read_source(src, system_ids, set(keys) if keys is not None else None, models)
    with dst.engine.connect() as dc, _locked_transaction(dc, dst.safe_url):
        sys_map = _merge_systems(dc, source, st)
        _merge_configs_and_models(dc, src, source, st)
        runs = _RunMap(source.runs, sys_map, label)
        take = _candidate_jobs(dc, src, source.jobs, sys_map, st)
        for i in range(0, len(take), _CHUNK):
            _merge_job_chunk(dc, src, take[i:i + _CHUNK], sys_map, runs, st)
        _merge_orphans(dc, src, source, sys_map, runs, st)
        _merge_ceilings(dc, src, source, sys_map, st)
        _merge_counters(dc, src, source, sys_map, st)
    st.seconds = time.perf_counter() - t0
    return st


#: how long an import waits for the destination's write lock that another writer (an import) holds
LOCK_WAIT_S = 900.0


@contextmanager
def _locked_transaction(dc, label: str, wait_s: float = LOCK_WAIT_S):
    """A transaction of ``dc`` that holds the destination's write lock (:func:`_write_lock`),
    committed at the end, rolled back on any exception (Ctrl-C included). Another import holds the
    lock for its whole transaction: on SQLite the lock is tried again every moment from Python (a
    busy wait inside SQLite would not let Ctrl-C in) for at most ``wait_s`` seconds; PostgreSQL
    queues the lock itself. Raises :class:`DatabaseError` when the lock did not come in time."""
    from sqlalchemy.exc import OperationalError

    deadline = time.monotonic() + wait_s
    sqlite = dc.dialect.name == "sqlite"
    if sqlite:
        dc.exec_driver_sql("PRAGMA busy_timeout=200")
        dc.commit()  # (the statement began a transaction of its own)
    while True:
        dc.begin()
        try:
            _write_lock(dc)
            break
        except OperationalError as e:
            dc.rollback()
            if not sqlite or "locked" not in str(e):
                raise
            if time.monotonic() > deadline:
                raise DatabaseError(f"database {label}: its write lock did not come in {wait_s:g} s "
                                    f"(another import?): {str(e.orig).splitlines()[0][:200]}") from None
    try:
        if sqlite:
            dc.exec_driver_sql("PRAGMA busy_timeout=30000")
        yield dc
        dc.commit()
    except BaseException:
        dc.rollback()
        raise


@dataclass
class _Source:
    """What a merge takes from the source database: its systems (those chosen), their jobs (of the
    chosen configs), every run, model record and model config, and the chosen config keys (None: all)."""

    systems: list[dict]
    jobs: list[dict]
    runs: dict[int, dict]
    models: list[dict]
    model_cfgs: list[dict]
    keyset: set[str] | None
    #: (name, batch or None) of the model records to take; None: every one whose configs come along
    model_names: set[tuple[str, int | None]] | None = None

    def takes_model(self, m: dict) -> bool:
        """Whether model record ``m`` (a source ``models`` row) is one the merge may take."""
        return self.model_names is None or (m["name"], m["batch"]) in self.model_names \
            or (m["name"], None) in self.model_names

    @property
    def system_ids(self) -> set[int]:
        return {s["id"] for s in self.systems}


def _read_source(src: Database, system_ids: list[int] | None, keyset: set[str] | None,
                 model_names: set[tuple[str, int | None]] | None = None) -> _Source:
    with src.engine.connect() as sc:
        systems = _rows(sc, select(System.__table__))
        if system_ids is not None:
            systems = [s for s in systems if s["id"] in system_ids]
        jobs = _rows(sc, select(JobRow.__table__))
        runs = {r["id"]: r for r in _rows(sc, select(Run.__table__))}
        models = _rows(sc, select(ModelRow.__table__))
        model_cfgs = _rows(sc, select(ModelConfig.__table__))
    sid_ok = {s["id"] for s in systems}
    jobs = [j for j in jobs if j["system_id"] in sid_ok and (keyset is None or j["layer_key"] in keyset)]
    return _Source(systems, jobs, runs, models, model_cfgs, keyset, model_names)


def _merge_systems(dc, source: _Source, st: MergeStats) -> dict[int, int]:
    """Insert the source's systems the destination (``dc``, under its write lock) lacks, matched by
    fingerprint (concurrent imports insert one; :func:`benanza.database.store.insert_new`: nor does a
    concurrent `bench` or `run` writing the same system fail); returns source system id ->
    destination system id."""
    dst_fp = {r.fingerprint: r.id for r in dc.execute(select(System.id, System.fingerprint))}
    sys_map = {}
    for s in source.systems:
        if s["fingerprint"] not in dst_fp:
            st.systems_added += insert_new(dc, System, [{k: v for k, v in s.items() if k != "id"}],
                                           ["fingerprint"])
            dst_fp[s["fingerprint"]] = dc.scalar(select(System.id).where(System.fingerprint == s["fingerprint"]))
        sys_map[s["id"]] = dst_fp[s["fingerprint"]]
    return sys_map


def _merge_configs_and_models(dc, src: Database, source: _Source, st: MergeStats) -> None:
    """Copy the layer configs the imported jobs and measurements use (by key), then the model records
    whose configs all came along (by sha256 and batch), into the destination ``dc``."""
    sid_ok = list(source.system_ids)
    with src.engine.connect() as sc:
        wanted = {j["layer_key"] for j in source.jobs}
        measured = set(sc.scalars(select(Measurement.layer_key).distinct().where(Measurement.system_id.in_(sid_ok))))
        wanted |= measured if source.keyset is None else measured & source.keyset
        if source.model_names is not None:  # the chosen models' records go whole: every config, measured or not
            ids = {m["id"] for m in source.models if source.takes_model(m)}
            wanted |= {mc["layer_key"] for mc in source.model_cfgs if mc["model_id"] in ids}
        wl = sorted(wanted)
        cfgs = []
        for i in range(0, len(wl), _CHUNK):
            cfgs += _rows(sc, select(LayerConfigRow.__table__).where(LayerConfigRow.key.in_(wl[i:i + _CHUNK])))
    have = set()
    for i in range(0, len(wl), _CHUNK):
        have |= set(dc.scalars(select(LayerConfigRow.key).where(LayerConfigRow.key.in_(wl[i:i + _CHUNK]))))
    new_cfgs = [c for c in cfgs if c["key"] not in have]
    st.configs_added = insert_new(dc, LayerConfigRow, new_cfgs, ["key"])
    _merge_models(dc, source, wanted, have | {c["key"] for c in new_cfgs}, st)


#: the columns that decide which of two ``models`` rows of one (sha256, batch) stays: the greater
MODEL_ORDER = ("layers", "unique_layers", "summary", "name")


def _merge_models(dc, source: _Source, wanted: set[str], present: set[str], st: MergeStats) -> None:
    """Merge each source model record whose configs are all ``present`` in the destination (``wanted``:
    the configs imported, when the import is restricted to some) as a union keyed by natural keys:
    the ``models`` row by (sha256, batch), of two the greater :data:`MODEL_ORDER` staying; its configs
    by (model, layer config), of two counts the larger (:func:`benanza.database.store.upsert_greater`).
    So neither the order of imports nor concurrent ones change the result."""
    existing = {(r.sha256, r.batch) for r in dc.execute(select(ModelRow.sha256, ModelRow.batch))}
    by_model: dict[int, list[dict]] = {}
    for mc in source.model_cfgs:
        by_model.setdefault(mc["model_id"], []).append(mc)
    for m in source.models:
        mk = by_model.get(m["id"], [])
        if not mk or not source.takes_model(m):
            continue
        if any(mc["layer_key"] not in present or (source.keyset is not None and mc["layer_key"] not in wanted)
               for mc in mk):
            continue  # not all the model's configs came along: a record is copied whole or not at all
        upsert_greater(dc, ModelRow, {k: v for k, v in m.items() if k != "id"}, ("sha256", "batch"), MODEL_ORDER)
        new_id = dc.scalar(select(ModelRow.id).where(ModelRow.sha256 == m["sha256"], ModelRow.batch == m["batch"]))
        for mc in mk:
            upsert_greater(dc, ModelConfig, dict(mc, model_id=new_id), ("model_id", "layer_key"), ("count",))
        st.models_added += (m["sha256"], m["batch"]) not in existing


class _RunMap:
    """The destination's copy of each source run a merged row names, inserted on first use (its
    message says where it was imported from)."""

    def __init__(self, runs: dict[int, dict], sys_map: dict[int, int], label: str):
        self.runs, self.sys_map, self.label = runs, sys_map, label
        self.done: dict[int, int] = {}

    def __call__(self, dc, rid: int | None) -> int | None:
        if rid is None or rid not in self.runs:
            return None
        if rid not in self.done:
            r = {k: v for k, v in self.runs[rid].items() if k != "id"}
            r["system_id"] = self.sys_map.get(r["system_id"])
            r["message"] = (f"imported from {self.label}: " if self.label else "imported: ") + (r.get("message") or "")
            check_lengths(Run, [r])
            self.done[rid] = dc.execute(sa.insert(Run.__table__).values(**r)).inserted_primary_key[0]
        return self.done[rid]


def _verdict(j: dict, old, measured: bool = True) -> str:
    """What a source job does to the destination's job of the same id (``old``: its (finished_at, measured:
    it has a valid time), or :data:`_NONE` when there is none; ``measured``: the source job has one): added,
    replaced (the source finished later) or kept. A job without a valid time never replaces one that has
    one: on one system (one fingerprint: GPU, SM partition, driver, cuDNN, cuBLAS) the call ran once, and a
    later failure is no evidence that it cannot (cuDNN's max pooling can refuse its cooperative launch
    under a 32-SM green context, "too many blocks", where the same job measured before: replacing the
    measurement would make a measured training step incomplete; docs/prediction.md, "SM partitions")."""
    if old is _NONE:
        return "added"
    finished, had = old
    if had and not measured:
        return "kept"
    later = j["finished_at"] and finished and (j["finished_at"] > finished or (
        j["finished_at"] == finished and measured and not had))  # a tie: the measured one, in either order
    return "replaced" if later else "kept"


def _job_group(j: dict, system_id: int) -> tuple:
    return (system_id, j["layer_key"], j["precision"], job_layout(j["job"]), job_backend(j["job"]))


def _measured_groups(conn, keys: list[str]) -> set[tuple]:
    """(system, config, precision, layout, backend) of the jobs of ``keys`` with at least one valid time."""
    out: set[tuple] = set()
    for i in range(0, len(keys), _CHUNK):
        for r in conn.execute(select(Measurement.system_id, Measurement.layer_key, Measurement.precision,
                                     Measurement.layout, Measurement.backend).where(
                Measurement.layer_key.in_(keys[i:i + _CHUNK]), Measurement.status == "ok",
                Measurement.median_ms.is_not(None)).distinct()):
            out.add((r.system_id, r.layer_key, r.precision, owning_layout(r.layout), r.backend))
    return out


def _candidate_jobs(dc, src: Database, jobs: list[dict], sys_map: dict[int, int],
                    st: MergeStats) -> list[dict]:
    """A first pass on the destination ``dc``: the jobs that may be added or replaced (the others are
    counted kept). Only candidates move on (:func:`_merge_job_chunk` decides each again). Each
    candidate carries ``_measured``: it has a valid time in the source."""
    keys = sorted({j["layer_key"] for j in jobs})
    with src.engine.connect() as sc:
        src_ok = _measured_groups(sc, keys)
    d_jobs = {(r.system_id, r.job): r.finished_at for r in dc.execute(
        select(JobRow.system_id, JobRow.job, JobRow.finished_at))}
    dst_ok = _measured_groups(dc, keys)
    take = []
    for j in jobs:
        sid = sys_map[j["system_id"]]
        j = {**j, "_measured": _job_group(j, j["system_id"]) in src_ok}
        finished = d_jobs.get((sid, j["job"]), _NONE)
        old = _NONE if finished is _NONE else (finished, _job_group(j, sid) in dst_ok)
        if _verdict(j, old, j["_measured"]) == "kept":
            st.jobs_kept += 1
        else:
            take.append(j)
    return take


def _job_groups(jobs: list[dict]) -> set[tuple]:
    """(system, config, precision, layout, backend) of each job: a job is one layout (an NHWC job's rows
    replace only NHWC rows; heuristic choices, which have no layout, belong to the NCHW job, as in
    Database.write_job) and one backend (a framework job owns the framework's rows, a suite job the others)."""
    return {(j["system_id"], j["layer_key"], j["precision"], job_layout(j["job"]), job_backend(j["job"]))
            for j in jobs}


def _merge_job_chunk(dc, src: Database, chunk: list[dict], sys_map: dict[int, int], runs: _RunMap,
                     st: MergeStats) -> None:
    """Merge one chunk of candidate jobs: read their measurements and choices from the source, then in
    the destination ``dc`` decide each job's verdict and replace the rows of the jobs that are added
    or replaced."""
    groups = _job_groups(chunk)
    ks = sorted({g[1] for g in groups})
    with src.engine.connect() as sc:
        ms = [r for r in _rows(sc, select(Measurement.__table__).where(Measurement.layer_key.in_(ks)))
              if (r["system_id"], r["layer_key"], r["precision"], owning_layout(r["layout"]), r["backend"]) in groups]
        cs = [r for r in _rows(sc, select(Choice.__table__).where(Choice.layer_key.in_(ks)))
              if (r["system_id"], r["layer_key"], r["precision"], "NCHW", Backend.SUITE) in groups]
    now = {(r.system_id, r.job): r.finished_at for r in dc.execute(
        select(JobRow.system_id, JobRow.job, JobRow.finished_at).where(JobRow.job.in_([j["job"] for j in chunk])))}
    dst_ok = _measured_groups(dc, ks)
    fresh = []
    for j in chunk:
        sid = sys_map[j["system_id"]]
        finished = now.get((sid, j["job"]), _NONE)
        v = _verdict(j, _NONE if finished is _NONE else (finished, _job_group(j, sid) in dst_ok), j["_measured"])
        setattr(st, f"jobs_{v}", getattr(st, f"jobs_{v}") + 1)
        if v != "kept":
            fresh.append(j)
    if not fresh:
        return
    groups = _job_groups(fresh)
    ms = [r for r in ms if (r["system_id"], r["layer_key"], r["precision"], owning_layout(r["layout"]),
                            r["backend"]) in groups]
    cs = [r for r in cs if (r["system_id"], r["layer_key"], r["precision"], "NCHW", Backend.SUITE) in groups]
    _replace_job_rows(dc, fresh, groups, ms, cs, sys_map, runs)
    st.measurements_written += len(ms)


def _replace_job_rows(dc, jobs: list[dict], groups: set[tuple], ms: list[dict], cs: list[dict],
                      sys_map: dict[int, int], runs: _RunMap) -> None:
    """Delete the destination's rows of ``groups`` (measurements of the same source and layout; the
    NCHW library job's choices) and ``jobs``, then insert the source's ``ms``, ``cs`` and ``jobs``."""
    mcols = [c for c in _cols(Measurement) if c != "id"]
    ccols = [c for c in _cols(Choice) if c != "id"]
    for (ssid, key, prec, lay, backend) in groups:
        dsid = sys_map[ssid]
        dc.execute(sa.delete(Measurement.__table__).where(
            Measurement.system_id == dsid, Measurement.layer_key == key, Measurement.precision == prec,
            Measurement.layout.in_(row_layouts(lay)), Measurement.backend == backend))
        if lay == "NCHW" and backend is Backend.SUITE:
            dc.execute(sa.delete(Choice.__table__).where(Choice.system_id == dsid, Choice.layer_key == key,
                                                         Choice.precision == prec))
    for j in jobs:
        dc.execute(sa.delete(JobRow.__table__).where(JobRow.system_id == sys_map[j["system_id"]],
                                                     JobRow.job == j["job"]))
    if ms:
        dc.execute(sa.insert(Measurement.__table__), check_lengths(Measurement, [
            {**{c: r[c] for c in mcols}, "system_id": sys_map[r["system_id"]], "run_id": runs(dc, r["run_id"])}
            for r in ms]))
    if cs:
        dc.execute(sa.insert(Choice.__table__), check_lengths(Choice, [
            {**{c: r[c] for c in ccols}, "system_id": sys_map[r["system_id"]], "run_id": runs(dc, r["run_id"])}
            for r in cs]))
    dc.execute(sa.insert(JobRow.__table__), check_lengths(JobRow, [
        {**{k: v for k, v in j.items() if k != "id" and not k.startswith("_")}, "system_id": sys_map[j["system_id"]],
         "run_id": runs(dc, j["run_id"])} for j in jobs]))


def _merge_orphans(dc, src: Database, source: _Source, sys_map: dict[int, int], runs: _RunMap,
                   st: MergeStats) -> None:
    """Measurements that belong to no job (hand-made data): row by row, the newer ``created_at`` wins."""
    with src.engine.connect() as sc:
        all_jobs = {(r.system_id, r.layer_key, r.precision, job_layout(r.job), job_backend(r.job)) for r in sc.execute(
            select(JobRow.system_id, JobRow.layer_key, JobRow.precision, JobRow.job))}
        orphans = [r for r in _rows(sc, select(Measurement.__table__).where(
                       Measurement.system_id.in_(list(source.system_ids))))
                   if (r["system_id"], r["layer_key"], r["precision"], owning_layout(r["layout"]), r["backend"])
                   not in all_jobs and (source.keyset is None or r["layer_key"] in source.keyset)]
    mcols = [c for c in _cols(Measurement) if c != "id"]
    ucols = ("system_id", "layer_key", "precision", "call", "algorithm", "math", "dtype", "cache", "layout")
    for r in orphans:
        if _newer_wins(dc, Measurement, ucols, {**{c: r[c] for c in mcols}, "system_id": sys_map[r["system_id"]],
                                                "run_id": runs(dc, r["run_id"])}):
            st.orphans_written += 1


def _merge_ceilings(dc, src: Database, source: _Source, sys_map: dict[int, int], st: MergeStats) -> None:
    """Machine ceilings (`benanza ceilings`): per system and name, the newer measurement wins."""
    with src.engine.connect() as sc:
        ceils = [r for r in _rows(sc, select(Ceiling.__table__)) if r["system_id"] in source.system_ids]
    for r in ceils:
        if _newer_wins(dc, Ceiling, ("system_id", "name"),
                       {**{k: v for k, v in r.items() if k != "id"}, "system_id": sys_map[r["system_id"]]}):
            st.ceilings_written += 1


def _merge_counters(dc, src: Database, source: _Source, sys_map: dict[int, int], st: MergeStats) -> None:
    """Hardware counters (`bench --counters`) of the chosen systems and configs: per implementation
    and kernel index, the newer profile wins."""
    from benanza.database.counters import KernelCounter

    unique = ("system_id", "layer_key", "precision", "call", "algorithm", "math", "layout", "kernel_index")
    with src.engine.connect() as sc:
        rows = [r for r in _rows(sc, select(KernelCounter.__table__)) if r["system_id"] in source.system_ids
                and (source.keyset is None or r["layer_key"] in source.keyset)]
    for r in rows:
        if _newer_wins(dc, KernelCounter, unique,
                       {**{k: v for k, v in r.items() if k != "id"}, "system_id": sys_map[r["system_id"]]}):
            st.counters_written += 1


def export(db: Database, path: str | Path, system: str | None = None, models: list[str] | None = None,
           batch: int | None = None) -> MergeStats:
    """Write the chosen systems (all by default) and models' configs (all by default) into a new
    SQLite file at ``path``, whole or not at all: written into a temporary file beside it
    (:func:`export_temp`) and given its name when complete (:func:`_publish`); stopped at any point
    (Ctrl-C, a failure) the temporary file is removed, killed (SIGKILL) it stays until the next
    export into the folder removes it (:func:`remove_stale_exports`). Raises :class:`UsageError`
    if ``path`` exists."""
    p = Path(path)
    if p.exists():
        raise UsageError(f"{path}: exists; export writes a new file")
    sids = resolve_systems(db, system)
    keys = None
    notes = []
    names = None
    if models:
        keys = sorted({k for m in models for k in model_keys(db, m, batch)})
        notes = [n for m in models for n in _records_without_fusions(db, m, batch)]
        names = {(_record_name(m), batch) for m in models}
    remove_stale_exports(p.parent)
    tmp, hold = export_temp(p)
    try:
        out = open_db(str(tmp), create=True)
        try:
            st = merge(out, db, sids, keys, label=db.safe_url, models=names)
        finally:
            out.close()  # the file whole on its own: the WAL checkpointed into it, -wal and -shm gone
        st.notes.extend(notes)
        _publish(tmp, p)
    except BaseException:
        _remove_export_temp(tmp)
        raise
    finally:
        os.close(hold)
    return st


#: what an export's temporary file is called beside its output: ``.<output name>.<random>`` + this
EXPORT_TEMP_SUFFIX = ".benanza-export"


def export_temp(path: Path) -> tuple[Path, int]:
    """A new, empty temporary file for the export to ``path``, beside it (hidden:
    ``.<name>.<random>.benanza-export``), and an open descriptor holding an exclusive ``flock`` on it
    for as long as this process writes it (:func:`remove_stale_exports` takes the files whose
    writer is gone). Raises :class:`DatabaseError` when the folder cannot be written."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=EXPORT_TEMP_SUFFIX, dir=path.parent)
    except OSError as e:
        raise DatabaseError(f"-o {path}: cannot write in {path.parent} ({e.strerror or e})") from None
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)  # a new file: nobody else holds it
    except (ImportError, OSError):  # no flock (another OS, some network file systems): never taken as stale
        pass
    mask = os.umask(0)
    os.umask(mask)
    os.fchmod(fd, 0o666 & ~mask)  # the export's mode as `open` gives it, not mkstemp's 0600
    return Path(name), fd


def remove_stale_exports(folder: Path) -> list[Path]:
    """Remove the temporary files of exports into ``folder`` whose process is gone (killed with
    SIGKILL, the machine stopped: their ``flock`` released), with their ``-wal``, ``-shm`` and
    ``-journal`` files; an export still running keeps its own (and every one where ``flock`` is
    missing). Returns what it removed."""
    from benanza.database.exports import abandoned

    gone = abandoned(folder.glob(f".*{EXPORT_TEMP_SUFFIX}"))
    for tmp in gone:
        _remove_export_temp(tmp)
    for side in folder.glob(f".*{EXPORT_TEMP_SUFFIX}-*"):  # a -wal or -shm whose file went first
        base = Path(str(side).rsplit(EXPORT_TEMP_SUFFIX, 1)[0] + EXPORT_TEMP_SUFFIX)
        if not base.exists():
            side.unlink(missing_ok=True)
    return gone


def _remove_export_temp(tmp: Path) -> None:
    for suffix in ("-wal", "-shm", "-journal", ""):
        Path(f"{tmp}{suffix}").unlink(missing_ok=True)


def _publish(tmp: Path, path: Path) -> None:
    """Give the finished export ``tmp`` its name ``path`` in one step, synced: a hard link (which
    fails, leaving ``path`` as it is, when another file took the name meanwhile), then the temporary
    name removed; a rename where the file system has no hard links."""
    import errno

    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise UsageError(f"-o {path}: exists; export writes a new file") from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise DatabaseError(f"-o {path}: cannot write it ({e.strerror or e})") from None
        if path.exists():
            raise UsageError(f"-o {path}: exists; export writes a new file") from None
        os.replace(tmp, path)
    tmp.unlink(missing_ok=True)
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


_NONE = object()


def _write_lock(dc) -> None:
    """Take the destination's write lock at the start of a transaction, before reading what it
    decides on: SQLite's RESERVED lock (an UPDATE that changes nothing still takes it), PostgreSQL's
    lock on the jobs table (SHARE ROW EXCLUSIVE: one importer at a time, readers go on)."""
    if dc.dialect.name == "postgresql":
        dc.exec_driver_sql("LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE")
    else:
        dc.exec_driver_sql("UPDATE jobs SET job = job WHERE 0")


def _record_name(model: str) -> str:
    """The name ``model`` is recorded under: itself, or an ONNX file's recorded name (its stem,
    :func:`benanza.processing.model.process`'s model name)."""
    p = Path(model)
    return p.stem if p.suffix == ".onnx" or p.is_file() else model


def _records_without_fusions(db: Database, model: str, batch: int | None) -> list[str]:
    """Notes for the records of ``model`` (a name, not an .onnx file) that name only its benchmarked
    configs: written before the records named fusion candidates too (benanza.generation.generator
    ``_key_counts``), so an export by name cannot take the fused measurements."""
    if Path(model).suffix == ".onnx" or Path(model).is_file():
        return []
    out = []
    with db.session() as s:
        q = select(ModelRow).where(ModelRow.name == model)
        if batch is not None:
            q = q.where(ModelRow.batch == batch)
        for row in s.scalars(q):
            summ = json.loads(row.summary or "{}")
            n = s.scalar(select(sa.func.count()).select_from(ModelConfig).where(ModelConfig.model_id == row.id))
            if summ.get("fusion_keys") == "traced":  # schema 6's migration traced the Conv/GEMM epilogue fusions
                out.append(f"model {model} batch {row.batch}: its record predates fusion keys; its ConvBiasAct, "
                           f"ConvBnAct and GemmAct measurements were traced to it and are exported, other fusion "
                           f"groups (attention, LayerNorm, GELU) only with the model's .onnx file instead of its name")
            elif summ.get("fusion_candidates") and n <= summ.get("unique_benchmarked", n):
                out.append(f"model {model} batch {row.batch}: its record predates fusion keys, so its "
                           f"{summ['fusion_candidates']} fusion candidates' measurements are not exported; "
                           f"give the model's .onnx file instead of its name to take them")
    return out


def import_db(db: Database, source: str) -> MergeStats:
    """Merge the database at ``source`` (path or URL; benanza schema, any version this one can read)
    into ``db``, in one transaction (:func:`merge`). Raises :class:`DatabaseError` when ``source``
    cannot be read, a source string is longer than its column, or the write fails (a full disk:
    ``no space left on device``); nothing of the import is written then."""
    src = open_db(source, create=False)
    if src.url == db.url:
        raise UsageError("cannot import a database into itself")
    try:
        return merge(db, src, label=src.safe_url)
    except DatabaseError as e:
        raise DatabaseError(f"import from {src.safe_url}: {e}; nothing imported") from None
    except sa.exc.SQLAlchemyError as e:
        raise db_write_error(db, e, f"import from {src.safe_url} failed") from None
    finally:
        src.close()
