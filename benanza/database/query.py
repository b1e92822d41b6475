"""Querying the performance database: the Python API behind `benanza db ...`.

Every function takes an open :class:`benanza.database.store.Database` and returns plain objects
(dataclasses with ``to_dict()``); :func:`to_dataframe` turns them into a pandas DataFrame when
pandas is installed. Every filter value reaches the database as a bound parameter.

>>> from benanza.database.store import open_db
>>> from benanza import query
>>> db = open_db("db/reference/h200.sqlite.gz", create=False)
>>> rows = query.measurements(db, query.Filters(kind=["Conv"], batch_count=32, precision="fp16", status="ok"))
>>> best = query.best_per_config(db, system="H200", precision="fp16")
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import func, select

from benanza import kinds as L
from benanza.database.store import Database, LayerConfigRow, Measurement, ModelConfig, ModelRow, System, source_filter
from benanza.errors import UsageError
from benanza.kinds.backend import Backend
from benanza.kinds.precision import Precision

@dataclass(frozen=True)
class Serves:
    """The one rule of which measurements count for an LBL (and for every figure drawn from the
    same rows): a row serves a config in ``precision`` when it is valid (status ``ok`` with a median;
    ``statuses`` widens this for rows drawn with an estimate only), of ``cache``, in one of
    ``layouts``, in a storage data type and a math mode the precision accepts
    (:data:`benanza.kinds.ACCEPTED_DTYPES`, :data:`benanza.kinds.ACCEPTED_MATH`: fp8 takes FP8 GEMMs
    and fp16 for the rest; an fp32 row relabelled tf32 serves tf32, not fp32), and from ``source``
    (``all``, ``library``: not the framework's own kernels, or ``framework``: the row's ``backend``,
    :meth:`benanza.kinds.backend.Backend.of_source`). :meth:`clauses` is the
    rule as SQL (bound parameters), calling the value tests one row in memory. Raises UsageError for
    an unknown precision, cache, layout or source."""

    precision: str
    cache: str = "warm"
    layouts: tuple[str, ...] = ("NCHW", "NHWC")
    source: str = "all"
    statuses: tuple[str, ...] = ("ok",)

    def __post_init__(self):
        Precision.of(self.precision)  # the one validator of a precision name
        if self.cache not in ("warm", "cold"):
            raise UsageError(f"cache must be warm or cold, got {self.cache!r}")
        if not self.layouts or any(x not in ("NCHW", "NHWC") for x in self.layouts):
            raise UsageError(f"layouts must be NCHW and/or NHWC, got {', '.join(self.layouts) or 'none'}")
        if self.source not in ("all", "library", "framework"):
            raise UsageError(f"unknown measurement source {self.source!r}")

    def clauses(self) -> list:
        """The rule as SQLAlchemy conditions on :class:`benanza.database.store.Measurement` (for
        ``ok`` only: a median is required)."""
        out = [Measurement.cache == self.cache, Measurement.status.in_(list(self.statuses)),
               Measurement.dtype.in_(list(L.ACCEPTED_DTYPES[self.precision])),
               Measurement.math.in_(list(L.ACCEPTED_MATH[self.precision])), Measurement.layout.in_(list(self.layouts))]
        if self.statuses == ("ok",):
            out.append(Measurement.median_ms.is_not(None))
        if self.source != "all":
            out.append(source_filter(self.source))
        return out

    def __call__(self, m) -> bool:
        """Whether row ``m`` (a Measurement row, a MeasurementRecord or anything with its fields) serves."""
        if m.cache != self.cache or m.status not in self.statuses or m.layout not in self.layouts:
            return False
        if m.status == "ok" and not m.median_ms:
            return False
        if m.dtype not in L.ACCEPTED_DTYPES[self.precision] or m.math not in L.ACCEPTED_MATH[self.precision]:
            return False
        return self.source == "all" or m.backend.source == self.source


#: columns `--sort` accepts
SORTABLE = ("median_ms", "iqr_ms", "mean_ms", "min_ms", "batch", "kind", "layer_key", "algorithm", "call",
            "precision", "status", "created_at", "system_id", "workspace_bytes")


@dataclass
class MeasurementRecord:
    """One measurement row with its layer config and system (times in ms, sizes in bytes). ``batch``:
    the config's batch count (``layer_configs.batch``), not a model's batch."""

    id: int
    system_id: int
    gpu_name: str
    layer_key: str
    kind: str
    description: str
    batch: int
    precision: str
    call: str
    algorithm: str
    math: str
    dtype: str
    cache: str
    layout: str
    status: str
    message: str
    note: str
    median_ms: float | None
    iqr_ms: float | None
    mean_ms: float | None
    min_ms: float | None
    samples: int | None
    converged: bool | None
    rse: float | None
    workspace_bytes: int
    build_ms: float | None
    details: dict
    created_at: str
    #: host time per call of the timed API (µs; the harness's warm-up estimate), None for older rows
    host_us: float | None = None
    #: the runtime the call ran in (the row's ``backend``); the call's name shows it, so documents
    #: (:meth:`to_dict`) leave it out
    backend: Backend = Backend.SUITE

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        del d["backend"]
        return d


@dataclass
class Filters:
    """What `benanza db query` selects. ``params``: layer-config parameters that must match
    (e.g. ``{"group": "1", "x": "32x64x56x56"}``); ``algorithm``/``call``: substrings.
    Two batches, named apart: ``model_batch`` is a model's batch (with ``model``: the configs of the
    model recorded at that batch); ``batch_count`` is a config's own count of instances per call
    (``layer_configs.batch``, :attr:`benanza.kinds.base.LayerConfig.batch_count`: N of a convolution,
    a GEMM's number of products; a GEMM folds the model's batch into M)."""

    system: str | None = None
    model: str | None = None
    model_batch: int | None = None
    kind: list[str] | None = None
    params: dict[str, str] = field(default_factory=dict)
    precision: str | None = None
    dtype: str | None = None
    math: str | None = None
    call: str | None = None
    algorithm: str | None = None
    batch_count: int | None = None
    status: str | None = None
    cache: str | None = None
    sort: str = "median_ms"
    descending: bool = False
    limit: int | None = None


def systems(db: Database) -> list[dict]:
    """Every system with its versions, measurement counts (total and valid) and where its numbers come
    from: ``source`` (``benanza``, measured by benanza, or the public table's repository and commit)
    and ``provenance`` (the public table's, :attr:`benanza.database.store.System.provenance`; None for
    a measured system)."""
    with db.session() as s:
        total = dict(s.execute(select(Measurement.system_id, func.count()).group_by(Measurement.system_id)).all())
        ok = dict(s.execute(select(Measurement.system_id, func.count()).where(Measurement.status == "ok")
                            .group_by(Measurement.system_id)).all())
        out = []
        for sy in s.scalars(select(System).order_by(System.id)):
            out.append({"id": sy.id, "fingerprint": sy.fingerprint, "gpu_name": sy.gpu_name,
                        "compute_capability": sy.compute_capability, "sm_count": sy.sm_count,
                        "memory_bytes": sy.memory_bytes, "max_sm_clock_mhz": sy.max_sm_clock_mhz,
                        "driver_version": sy.driver_version, "runtime_version": sy.runtime_version,
                        "cudnn_version": sy.cudnn_version, "cublas_version": sy.cublas_version,
                        "measurements": total.get(sy.id, 0), "valid": ok.get(sy.id, 0),
                        "source": _source(sy.provenance), "provenance": sy.provenance})
        return out


def _source(provenance: dict | None) -> str:
    """Where a system's numbers come from, in a few words: ``benanza`` (measured by benanza), else
    ``public: <repository>@<commit, 12 digits>``."""
    if not provenance:
        return "benanza"
    return f"public: {provenance.get('repository', '?')}@{str(provenance.get('commit', ''))[:12]}"


#: a partitioned system's GPU name as the suite records it (``BENANZA_SM_COUNT``, cpp/include/benanza/partition.hpp):
#: ``"<name> [<N> SMs]"``, ``"<name> [<N> SMs, MPS]"`` for an MPS client's; also how a ``--system`` names one
PARTITION_NAME = re.compile(r"^(?P<base>.*?)\s*\[\s*(?P<sms>\d+)\s*SMs?(?P<mps>\s*,\s*MPS)?\s*\]$", re.IGNORECASE)


def is_partition(gpu_name: str) -> bool:
    """Whether ``gpu_name`` is a partition's (a GPU confined to some of its SMs), not a whole GPU's."""
    return PARTITION_NAME.match(gpu_name.strip()) is not None


def _name_key(name: str) -> str:
    return " ".join(name.lower().split())


def match_systems(rows, spec: str) -> list[int]:
    """The one rule of what a ``--system`` selects, for every command that reads a database. ``rows``:
    (id, fingerprint, gpu_name) of each system. In order: an id (exact: "1" is system 1, not every GPU
    whose name holds a 1); a GPU name exactly (case and spacing aside; a partition's full name, ``"NVIDIA
    H100 80GB HBM3 [32 SMs]"``, is exact too); a fingerprint prefix; else a GPU-name substring, which
    selects whole GPUs only (``"H100"`` is the H100, never its ``[32 SMs]`` partition) unless the spec
    ends in ``[N SMs]`` (``"H100 [32 SMs]"``, ``"[32 SMs]"``): then only partitions of N SMs. Returns the
    matching ids (several when a name is shared; empty when none)."""
    rows = list(rows)
    exact = [r[0] for r in rows if str(r[0]) == spec.strip()]
    if exact:
        return exact
    named = [r[0] for r in rows if _name_key(r[2]) == _name_key(spec)]
    if named:
        return named
    low = spec.strip().lower()
    by_print = [r[0] for r in rows if low and r[1].startswith(low)]
    part = PARTITION_NAME.match(spec.strip())
    base = _name_key(part["base"] if part else spec)
    hits = []
    for sid, _fp, name in rows:
        p = PARTITION_NAME.match(name.strip())
        if part:
            ok = p is not None and int(p["sms"]) == int(part["sms"]) and bool(p["mps"]) == bool(part["mps"]) \
                and base in _name_key(p["base"])
        else:
            ok = p is None and base in _name_key(name)
        if ok and sid not in by_print:
            hits.append(sid)
    return by_print + hits


def resolve_systems(db: Database, spec: str | None) -> list[int]:
    """System ids matching ``spec`` by :func:`match_systems`' rule; all if None. Raises
    :class:`UsageError` when nothing matches (naming the partitions a bare GPU name left out)."""
    with db.session() as s:
        rows = [(r.id, r.fingerprint, r.gpu_name) for r in s.execute(select(System.id, System.fingerprint, System.gpu_name))]
    if spec is None:
        return [r[0] for r in rows]
    hits = match_systems(rows, spec)
    if not hits:
        parts = [name for _, _, name in rows if is_partition(name) and _name_key(spec) in _name_key(name)]
        why = (f"; {spec!r} selects whole GPUs only: name a partition by its [N SMs] name ("
               + ", ".join(repr(n) for n in parts) + ") or its id") if parts else ""
        raise UsageError(f"no system matches {spec!r} in {db.safe_url}{why} (see `benanza db systems`)")
    return hits


def model_keys(db: Database, model: str, batch: int | None = None) -> list[str]:
    """Layer config keys of a model: an ONNX file (processed at ``batch``, default 1) or the name of
    a model recorded in the database (every recorded batch, or ``batch``)."""
    p = Path(model)
    if p.suffix == ".onnx" or p.is_file():
        from benanza.processing.model import process

        ml = process(p, batch or 1)
        return sorted(ml.unique_configs())
    with db.session() as s:
        q = select(ModelConfig.layer_key).join(ModelRow, ModelRow.id == ModelConfig.model_id).where(
            ModelRow.name == model)
        if batch is not None:
            q = q.where(ModelRow.batch == batch)
        keys = sorted(set(s.scalars(q)))
    if not keys:
        raise UsageError(f"no model {model!r} recorded in {db.safe_url} (give an .onnx file instead)")
    return keys


def _parse_param(value: str):
    v = value.strip()
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    if "x" in v and all(part.isdigit() for part in v.split("x")):
        return [int(part) for part in v.split("x")]
    if "," in v and all(part.strip().lstrip("-").isdigit() for part in v.split(",")):
        return [int(part) for part in v.split(",")]
    try:
        return int(v)
    except ValueError:
        return v


def config_keys(db: Database, f: Filters) -> list[str] | None:
    """Layer config keys that the config-level filters of ``f`` (model, kind, params, batch count) leave;
    None when ``f`` has no such filter."""
    keys: set[str] | None = None
    if f.model:
        keys = set(model_keys(db, f.model, f.model_batch))
    if f.kind or f.params or f.batch_count is not None:
        with db.session() as s:
            q = select(LayerConfigRow.key, LayerConfigRow.params)
            if f.kind:
                q = q.where(LayerConfigRow.kind.in_(f.kind))
            if f.batch_count is not None:
                q = q.where(LayerConfigRow.batch == f.batch_count)
            rows = list(s.execute(q))
        want = {k: _parse_param(v) for k, v in f.params.items()}
        sel = set()
        for key, params in rows:
            if want:
                p = json.loads(params)
                if any(_norm(p.get(k)) != _norm(v) for k, v in want.items()):
                    continue
            sel.add(key)
        keys = sel if keys is None else keys & sel
    return None if keys is None else sorted(keys)


def _norm(v):
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return v
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def _base_select():
    return (select(Measurement, LayerConfigRow.kind, LayerConfigRow.description, System.gpu_name)
            .join(LayerConfigRow, LayerConfigRow.key == Measurement.layer_key)
            .join(System, System.id == Measurement.system_id))


def _record(m: Measurement, kind: str, desc: str, gpu: str) -> MeasurementRecord:
    return MeasurementRecord(
        id=m.id, system_id=m.system_id, gpu_name=gpu, layer_key=m.layer_key, kind=kind, description=desc,
        batch=m.batch, precision=m.precision, call=m.call, algorithm=m.algorithm, math=m.math, dtype=m.dtype,
        cache=m.cache, layout=m.layout, status=m.status, message=m.message, note=m.note, median_ms=m.median_ms,
        iqr_ms=m.iqr_ms, mean_ms=m.mean_ms, min_ms=m.min_ms, samples=m.samples, converged=m.converged, rse=m.rse,
        workspace_bytes=m.workspace_bytes, build_ms=m.build_ms,
        details=json.loads(m.details) if m.details else {},
        created_at=m.created_at.isoformat() if m.created_at else "", host_us=m.host_us, backend=m.backend)


def record_by_id(db: Database, measurement_id: int) -> MeasurementRecord:
    """One measurement as a :class:`MeasurementRecord`. Raises UsageError for an unknown id."""
    with db.session() as s:
        row = s.execute(_base_select().where(Measurement.id == measurement_id)).first()
    if row is None:
        raise UsageError(f"no measurement with id {measurement_id}")
    return _record(*row)


def _where(q, f: Filters, system_ids: list[int] | None):
    if system_ids is not None:
        q = q.where(Measurement.system_id.in_(system_ids))
    if f.precision:
        q = q.where(Measurement.precision == f.precision)
    if f.dtype:
        q = q.where(Measurement.dtype == f.dtype)
    if f.math:
        q = q.where(Measurement.math == f.math)
    if f.call:
        q = q.where(Measurement.call.contains(f.call, autoescape=True))
    if f.algorithm:
        q = q.where(Measurement.algorithm.contains(f.algorithm, autoescape=True))
    if f.status:
        q = q.where(Measurement.status == f.status)
    if f.cache:
        q = q.where(Measurement.cache == f.cache)
    return q


def measurements(db: Database, f: Filters | None = None) -> list[MeasurementRecord]:
    """Measurement records matching ``f``, sorted by ``f.sort`` (see :data:`SORTABLE`)."""
    f = f or Filters()
    if f.sort not in SORTABLE:
        raise UsageError(f"cannot sort by {f.sort!r} (choose from {', '.join(SORTABLE)})")
    if f.limit is not None and f.limit <= 0:
        raise UsageError("--limit must be positive")
    sys_ids = resolve_systems(db, f.system) if f.system else None
    keys = config_keys(db, f)
    out: list[MeasurementRecord] = []
    with db.session() as s:
        chunks = [None] if keys is None else [keys[i:i + 500] for i in range(0, len(keys), 500)]
        for chunk in chunks:
            q = _where(_base_select(), f, sys_ids)
            if chunk is not None:
                q = q.where(Measurement.layer_key.in_(chunk))
            for m, kind, desc, gpu in s.execute(q):
                out.append(_record(m, kind, desc, gpu))
    return sort_records(out, f.sort, f.descending, f.limit)


def sort_records(records: list, key: str, descending: bool, limit: int | None) -> list:
    """Records sorted by ``key``, rows without a value last in either direction, cut to ``limit``."""
    have = sorted((r for r in records if getattr(r, key) is not None), key=lambda r: getattr(r, key),
                  reverse=descending)
    out = have + [r for r in records if getattr(r, key) is None]
    return out[:limit] if limit else out




def best_per_config(db: Database, system: str | int | None = None, precision: str = "fp32", cache: str = "warm",
                    keys: list[str] | None = None, layouts: tuple[str, ...] = ("NCHW",), source: str = "all"
                    ) -> dict[str, MeasurementRecord]:
    """The fastest measurement of each layer config on one system that serves ``precision``
    (:class:`Serves`, the one rule: valid, of ``cache``, in the ``layouts`` given, a data type and
    math mode the precision accepts, from ``source``), one SQL query per 500 keys (a window
    function: ROW_NUMBER() OVER (PARTITION BY layer_key ORDER BY median_ms))."""
    rule = Serves(precision, cache, tuple(layouts), source)
    if isinstance(system, int):
        sid = system
    else:
        ids = resolve_systems(db, system)
        if len(ids) != 1:
            what = f"match {system!r}" if system else "are in the database"
            raise UsageError(f"{len(ids)} systems {what}; choose one with --system (see `benanza db systems`)")
        sid = ids[0]
    out: dict[str, MeasurementRecord] = {}
    chunks = [None] if keys is None else [keys[i:i + 500] for i in range(0, len(keys), 500)]
    with db.session() as s:
        for chunk in chunks:
            inner = (select(Measurement.id, func.row_number().over(
                partition_by=Measurement.layer_key, order_by=(Measurement.median_ms, Measurement.id)).label("rank"))
                .where(Measurement.system_id == sid, *rule.clauses()))
            if chunk is not None:
                inner = inner.where(Measurement.layer_key.in_(chunk))
            ranked = inner.subquery()
            q = _base_select().join(ranked, ranked.c.id == Measurement.id).where(ranked.c.rank == 1)
            for m, kind, desc, gpu in s.execute(q):
                out[m.layer_key] = _record(m, kind, desc, gpu)
    return out


def partial_records(db: Database, model: str, batch: int | None = None) -> list[str]:
    """For each record of ``model`` (a name; an .onnx file has none to check) that holds fewer layer
    configs than its own summary's unique benchmarked layers (an export restricted to another model
    once copied records truncated), a line saying so; empty when every record is whole."""
    p = Path(model)
    if p.suffix == ".onnx" or p.is_file():
        return []
    out = []
    with db.session() as s:
        q = select(ModelRow.id, ModelRow.batch, ModelRow.summary).where(ModelRow.name == model)
        if batch is not None:
            q = q.where(ModelRow.batch == batch)
        for mid, b, summary in s.execute(q).all():
            n = s.scalar(select(func.count()).select_from(ModelConfig).where(ModelConfig.model_id == mid))
            want = json.loads(summary or "{}").get("unique_benchmarked") or 0
            if n < want:
                out.append(f"the record of model {model} batch {b} in {db.safe_url} is partial: {n} of its "
                           f"{want} or more layer configs")
    return out


def shared_configs(db: Database, model: str, batch: int | None = None, system: str | None = None,
                   precision: str = "fp32") -> dict:
    """How many of a model's unique layer configs the database already has a valid measurement of
    (on ``system`` when given, else on any system) in ``precision``: what a new run still has to
    measure (Benanza: a new model only needs its new layers measured)."""
    keys = model_keys(db, model, batch)
    partial = partial_records(db, model, batch)
    if partial:
        raise UsageError(f"{'; '.join(partial)}: its configs cannot be counted from it (give the model's .onnx "
                         "file instead of its name)")
    sys_ids = resolve_systems(db, system)
    measured: set[str] = set()
    for sid in sys_ids:
        measured |= set(best_per_config(db, sid, precision, "warm", keys))
    return {"model": model, "batch": batch, "precision": precision, "unique_configs": len(keys),
            "measured": len(measured), "to_measure": len(keys) - len(measured),
            "shared_fraction": len(measured) / len(keys) if keys else 0.0,
            "missing": sorted(set(keys) - measured)}


def compare_systems(db: Database, a: str, b: str, precision: str = "fp32", cache: str = "warm") -> list[dict]:
    """Per layer config measured on both systems: best times and the ratio b / a."""
    ia, ib = resolve_systems(db, a), resolve_systems(db, b)
    if len(ia) != 1 or len(ib) != 1:
        raise UsageError("each system must match exactly one system (see `benanza db systems`)")
    ba = best_per_config(db, ia[0], precision, cache)
    bb = best_per_config(db, ib[0], precision, cache)
    names = {s["id"]: s["gpu_name"] for s in systems(db)}
    rows = []
    for k in sorted(set(ba) & set(bb)):
        x, y = ba[k], bb[k]
        rows.append({"layer_key": k, "kind": x.kind, "description": x.description, "batch": x.batch,
                     "a_system": names.get(ia[0], str(ia[0])), "a_ms": x.median_ms,
                     "a_algorithm": f"{x.call} {x.algorithm}", "b_system": names.get(ib[0], str(ib[0])),
                     "b_ms": y.median_ms, "b_algorithm": f"{y.call} {y.algorithm}", "ratio": y.median_ms / x.median_ms})
    return rows


def to_dataframe(records):
    """A pandas DataFrame of records (dataclasses or dicts). Raises :class:`UsageError` without pandas."""
    try:
        import pandas as pd
    except ImportError:
        raise UsageError("pandas is not installed (pip install 'benanza[pandas]')") from None
    return pd.DataFrame([r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in records])
