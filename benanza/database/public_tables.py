"""Public GEMM tables as systems of the performance database (`benanza db import TABLE.csv[.gz]`).

Two public tables of GEMM times measured on many GPUs ship in ``db/reference/xgpu/`` (its README gives
source, licence and method; users may import the full upstream tables, which have the same columns):

- aiconfigurator (:data:`AICONFIGURATOR`): columns ``device,dtype,m,n,k,ms,gpu``; the op is
  ``F.linear(a[m, k], w[n, k])`` without bias as SGLang 0.5.10 runs it, in ``bfloat16``, ``fp8``
  (per-tensor scales) and ``fp8_block`` (1x128 activation / 128x128 weight block scales);
- NeuSight (:data:`NEUSIGHT`): columns ``op,device,B,M,N,K,ms,kernel,gpu``; ``linear`` is
  ``nn.Linear(N, K, bias=True)`` on an input ``(B, M, N)``, ``bmm`` is ``torch.bmm((B, M, N), (B, N,
  K))``, fp32 with TF32 off (CUDA-core SIMT sgemm kernels, named in ``kernel``).

A table is recognised by its header. Each GPU of a table (its ``device`` string, the name the GPU
reports) becomes one system whose record carries the table's ``provenance`` (that benanza did not
measure it, the source repository, commit, licence, op and method): it is part of the system's
fingerprint (:func:`benanza.database.store.system_fingerprint`), so a table's system never merges
with a GPU benanza measured, two tables of one GPU stay two systems, and importing a table again
(or the full upstream table after the sample) finds the same systems. Each row becomes one
measurement of the layer config benanza's own parsing gives a torch-exported model's layer of that
shape (:func:`aiconfigurator_config`, :func:`neusight_config`), in the job of that config and
precision (status ``ok``), keyed so that a second import of the same rows replaces them: nothing is
ever duplicated. The table's time (a mean: neither table publishes a median or a spread) is stored
as the measurement's ``median_ms`` and ``mean_ms``, its other statistics left empty, its ``note``
saying so. The import is one transaction: a file that cannot be read, or a failed write, leaves the
database as it was.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import math
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy import select

from benanza.database.store import (Database, JobRow, LayerConfigRow, Measurement, System, check_lengths,
                                    db_write_error, insert_new, string_limits, system_row, utc_now)
from benanza.errors import DatabaseError, UsageError
from benanza.kinds.backend import Backend
from benanza.kinds.base import JobId
from benanza.kinds.gemm import GemmConfig

#: every row of a public table is the framework's own call (PyTorch, as SGLang or NeuSight's script
#: runs it), never a library call of benanza's suite: its measurements and jobs carry this backend
BACKEND = Backend.TORCH_EAGER


@dataclass(frozen=True)
class TableFormat:
    """One public table's format: ``name``, its CSV ``columns`` (the header, in order), the
    ``provenance`` its systems' records carry (db/reference/xgpu/README.md), the ``method`` its
    measurements record (at most 32 characters), the ``note`` each measurement carries, and the
    library versions its systems' records say (0: not published)."""

    name: str
    columns: tuple[str, ...]
    provenance: dict = field(hash=False, compare=False)
    method: str = ""
    note: str = ""
    runtime_version: int = 0
    cudnn_version: int = 0
    cublas_version: int = 0


AICONFIGURATOR = TableFormat(
    "aiconfigurator", ("device", "dtype", "m", "n", "k", "ms", "gpu"),
    {"public_table": True, "measured_by_benanza": False, "source": "aiconfigurator",
     "repository": "ai-dynamo/aiconfigurator", "commit": "095f58a51c4ca8e61b66ec108d86f223f8d559ce",
     "license": "Apache License 2.0, Copyright NVIDIA CORPORATION & AFFILIATES",
     "path": "aic-core/src/aiconfigurator_core/systems/data/<system>/gemm/sglang/0.5.10/gemm_perf.parquet",
     "op": "F.linear(a[m, k], w[n, k]) without bias (output [m, n]), as SGLang 0.5.10 runs it: bfloat16, fp8 "
           "(per-tensor scales), fp8_block (1x128 activation / 128x128 weight block scales)",
     "method": "aiconfigurator's collector: up to 6 independent weight/activation copies, 3 warm-ups, one CUDA "
               "graph over all copies replayed 6 times; the mean time divided by the copies; no launch gap",
     "software": "SGLang 0.5.10",
     "summary": "public table, not measured by benanza: ai-dynamo/aiconfigurator@095f58a51c4c, Apache-2.0; "
                "SGLang 0.5.10 F.linear, mean of CUDA-graph replays"},
    method="public: CUDA graph, mean",
    note="a public table's mean time (aiconfigurator, CUDA-graph replays), not measured by benanza; no "
         "median or spread published")

NEUSIGHT = TableFormat(
    "neusight", ("op", "device", "B", "M", "N", "K", "ms", "kernel", "gpu"),
    {"public_table": True, "measured_by_benanza": False, "source": "NeuSight",
     "repository": "sitar-lab/NeuSight", "commit": "6945927d9afcca2b9daf021f8395e53edc5b4eef",
     "license": "MIT",
     "path": "scripts/asplos/data/dataset/test/{linear,bmm}.csv",
     "paper": "Lee et al., NeuSight: Forecasting GPU Performance for Deep Learning Training and Inference, "
              "ASPLOS 2025",
     "op": "linear: nn.Linear(N, K, bias=True) on an input (B, M, N); bmm: torch.bmm((B, M, N), (B, N, K)); "
           "fp32 with TF32 off (CUDA-core SIMT sgemm kernels)",
     "method": "PyTorch 2.1.0, CUDA 12.1, cuDNN 8.9.2, cudnn.benchmark=True; each shape called eagerly 25 times, "
               "each call between its own CUDA events and a synchronize; the mean of the 5 fastest, host "
               "launch gap included (about 0.05 ms for linear, 0.02 ms for bmm on the H100)",
     "software": "PyTorch 2.1.0, CUDA 12.1, cuDNN 8.9.2",
     "summary": "public table, not measured by benanza: sitar-lab/NeuSight@6945927d9afc, MIT; PyTorch 2.1 "
                "eager fp32 (TF32 off), mean of the 5 fastest of 25 calls, launch gap included"},
    method="public: eager, mean of 5 fastest",
    note="a public table's mean time (NeuSight, eager calls, the host launch gap included), not measured by "
         "benanza; no median or spread published",
    runtime_version=12010, cudnn_version=8902)

#: the formats :func:`read_table` recognises, by their header
FORMATS = (AICONFIGURATOR, NEUSIGHT)

#: aiconfigurator's ``dtype`` -> (precision, math mode, storage data type, algorithm): benanza's own
#: names for the same GEMM (:mod:`benanza.kinds.precision`; block-scaled FP8 is an fp8 measurement of
#: math ``fp8_block128``, as cuBLASLt's block-scaled matmul is recorded, cpp/src/lt.cpp)
AIC_DTYPES = {"bfloat16": ("bf16", "tensor_op", "bfloat16", "default"),
              "fp8": ("fp8", "fp8", "float8_e4m3", "per-tensor scales"),
              "fp8_block": ("fp8", "fp8_block128", "float8_e4m3", "weights 128x128, activations 1x128")}

#: the library call each row is recorded under: the source and the op it times
AIC_CALL = "aiconfigurator:sglang-0.5.10 F.linear"
NEUSIGHT_CALLS = {"linear": "neusight:torch-2.1 nn.Linear", "bmm": "neusight:torch-2.1 torch.bmm"}


def aiconfigurator_config(m: int, n: int, k: int) -> GemmConfig:
    """The layer config of aiconfigurator's ``F.linear(a[m, k], w[n, k])`` (no bias): a MatMul of an
    activation ``[m, k]`` by a weight ``[k, n]`` (``GemmConfig(m, n, k)``, trans_b False, bias none).

    Why this key and not ``Gemm`` transB=1, though the weight is stored ``[n, k]``: benanza keys a
    layer by what the ONNX export of the model says, and torch.onnx writes an ``nn.Linear`` (the
    layers these tables time: an LLM's projections) as ``MatMul(X, W^T)`` with the weight an
    initializer already transposed to ``[k, n]``, its leading dims folded into m (the decoder exports
    of tests/data/decoders and the ViT/BERT exports of tests/data, torch 2.11 to 2.14: every Linear on
    a 3-D input); only a Linear on a 2-D input may come out as ``Gemm`` transB=1 (a classifier head),
    which is another config. A weight's layout is free (PyTorch's candidate times ``F.linear`` with
    an ``[n, k]`` weight for this very config, :func:`benanza.kinds.gemm.gemm_fn`)."""
    return GemmConfig(m=m, n=n, k=k)


def neusight_config(op: str, b: int, m: int, n: int, k: int) -> GemmConfig:
    """The layer config of a NeuSight row. ``linear``: ``nn.Linear(N, K, bias=True)`` on ``(B, M, N)``,
    which torch.onnx writes as ``MatMul(X, W^T)`` (``W^T`` an initializer ``[N, K]``, the leading dims
    folded into m = B*M) then ``Add(bias)``; benanza takes the two as one GEMM with a bias (the
    fusion candidate of :func:`benanza.kinds.gemm_act.find_gemm_act`: ``GemmConfig(B*M, K, N, bias
    "c")``), the config NeuSight's time (product and bias, one call) measures. ``bmm``: a MatMul of two
    activations with the batch ``B`` on both: ``GemmConfig(M, K, N, batch_count=B)``
    (:func:`benanza.kinds.gemm` ``_map_matmul``)."""
    if op == "linear":
        return GemmConfig(m=b * m, n=k, k=n, bias="c")
    return GemmConfig(m=m, n=k, k=n, batch_count=b)


@dataclass(frozen=True)
class TableRow:
    """One row of a public table as benanza records it: the GPU (``device``: the name it reports;
    ``gpu``: the table's spec-table name), the layer ``config``, ``precision``, ``math``, storage
    ``dtype``, library ``call``, ``algorithm`` and ``details``, the time ``ms`` (milliseconds, the
    table's mean), ``what`` (the row's group: its data type, and for NeuSight its op) and its ``line``."""

    line: int
    device: str
    gpu: str
    config: GemmConfig
    precision: str
    math: str
    dtype: str
    call: str
    algorithm: str
    ms: float
    what: str
    details: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def identity(self) -> tuple:
        """What a measurement of the database is keyed by (beside its system): two rows of one
        identity are one measurement."""
        return (self.device, self.config.key, self.precision, self.call, self.algorithm, self.math, self.dtype)


@dataclass
class PublicTable:
    """A public table read (:func:`read_table`): its file, its format and its rows, in file order;
    ``duplicates``: rows left out because an earlier row had their identity (the first is kept)."""

    path: Path
    format: TableFormat
    rows: list[TableRow]
    duplicates: int = 0

    @property
    def devices(self) -> dict[str, str]:
        """Each GPU of the table (its ``device`` string) -> the table's spec name of it, in file order."""
        return dict((r.device, r.gpu) for r in self.rows)


def _expected() -> str:
    return "; or ".join(f"{','.join(f.columns)} ({f.provenance['source']})" for f in FORMATS)


def _open_text(path: Path):
    """The file as text, gunzipped when it is gzip-compressed (its first two bytes)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return io.TextIOWrapper(gzip.open(path), encoding="utf-8", newline="") if gz else \
        open(path, encoding="utf-8", newline="")


def looks_like_table(path: str) -> bool:
    """Whether ``db import`` should read ``path`` as a public table rather than a database: a file
    named ``.csv`` or ``.csv.gz``, or a file whose first line (gunzipped) is comma-separated text
    and which is not a SQLite database."""
    if "://" in path:
        return False
    p = Path(path)
    if not p.is_file():
        return False
    if p.name.lower().endswith((".csv", ".csv.gz")):
        return True
    try:
        with _open_text(p) as f:
            head = f.readline(4096)
    except (OSError, UnicodeDecodeError, EOFError, ValueError, zlib.error):
        return False
    line = head.strip()
    return not head.startswith("SQLite format 3") and "," in line and line.isprintable()


def read_table(path: str | Path) -> PublicTable:
    """Read the public table at ``path`` (CSV, or gzip-compressed CSV), recognised by its header
    among :data:`FORMATS`. Raises :class:`UsageError` with one line naming the file: a header of
    neither format (naming the columns expected), a row that is not of its format (naming its line
    and field), a table without rows, a file that cannot be read."""
    p = Path(path)
    try:
        with _open_text(p) as f:
            reader = csv.reader(f)
            header = next(reader, None)
            fmt = next((x for x in FORMATS if header is not None and tuple(h.strip() for h in header) == x.columns),
                       None)
            if fmt is None:
                got = ",".join(h.strip() for h in header)[:200] if header else "nothing"
                raise UsageError(f"{path}: not a public GEMM table (its header is {got!r}); expected the "
                                 f"columns {_expected()}")
            parse = _aic_row if fmt is AICONFIGURATOR else _neusight_row
            rows, seen, dup = [], set(), 0
            for i, rec in enumerate(reader, start=2):
                if not rec or not any(c.strip() for c in rec):
                    continue
                if len(rec) != len(fmt.columns):
                    raise UsageError(f"{path}: line {i}: {len(rec)} fields, expected {len(fmt.columns)} "
                                     f"({','.join(fmt.columns)})")
                row = parse(dict(zip(fmt.columns, (c.strip() for c in rec))), i, path)
                if row.identity in seen:
                    dup += 1
                    continue
                seen.add(row.identity)
                rows.append(row)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error, zlib.error) as e:
        raise UsageError(f"{path}: cannot read it as a CSV table ({e})") from None
    if not rows:
        raise UsageError(f"{path}: a {fmt.name} table without rows; nothing to import")
    return PublicTable(p, fmt, rows, dup)


def _int(d: dict, name: str, line: int, path) -> int:
    try:
        v = int(d[name])
    except ValueError:
        v = 0
    if v <= 0:
        raise UsageError(f"{path}: line {line}: {name} is {d[name][:40]!r}, expected a positive integer")
    return v


def _ms(d: dict, line: int, path) -> float:
    try:
        v = float(d["ms"])
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise UsageError(f"{path}: line {line}: ms is {d['ms'][:40]!r}, expected a positive time in milliseconds")
    return v


def _device(d: dict, line: int, path) -> str:
    name = d["device"]
    limit = string_limits(System)["gpu_name"]
    if not name or len(name) > limit or not name.isprintable():
        raise UsageError(f"{path}: line {line}: device {name[:40]!r} is not a GPU name (printable, 1 to "
                         f"{limit} characters)")
    return name


def _aic_row(d: dict, line: int, path) -> TableRow:
    if d["dtype"] not in AIC_DTYPES:
        raise UsageError(f"{path}: line {line}: dtype {d['dtype'][:40]!r}, expected one of {', '.join(AIC_DTYPES)}")
    precision, math_mode, dtype, algorithm = AIC_DTYPES[d["dtype"]]
    cfg = aiconfigurator_config(*(_int(d, x, line, path) for x in ("m", "n", "k")))
    return TableRow(line, _device(d, line, path), d["gpu"], cfg, precision, math_mode, dtype, AIC_CALL, algorithm,
                    _ms(d, line, path), d["dtype"])


def _neusight_row(d: dict, line: int, path) -> TableRow:
    op = d["op"]
    if op not in NEUSIGHT_CALLS:
        raise UsageError(f"{path}: line {line}: op {op[:40]!r}, expected linear or bmm")
    cfg = neusight_config(op, *(_int(d, x, line, path) for x in ("B", "M", "N", "K")))
    kernel = d["kernel"]
    limit = string_limits(Measurement)["algorithm"]
    algorithm = kernel if 0 < len(kernel) <= limit else (kernel[:limit - 1] + "…" if kernel else "default")
    details = {"kernels": [kernel]} if kernel else {}
    return TableRow(line, _device(d, line, path), d["gpu"], cfg, "fp32", "fma", "float32", NEUSIGHT_CALLS[op],
                    algorithm, _ms(d, line, path), f"fp32 {op}", details)


def system_record(fmt: TableFormat, device: str, figures: dict | None) -> dict:
    """The system record of GPU ``device`` in a table of format ``fmt``: the GPU's name as it reports
    it, the figures of benanza's spec table for it (``figures``: ``spec``, ``compute_capability``,
    ``sm_count``, ``memory_bytes``, ``l2_cache_bytes``, ``max_sm_clock_mhz``; None for a GPU the spec
    table lacks: left empty), the library versions the table's method names (0: unknown), no driver
    (unknown), and the table's ``provenance``."""
    rec = {"gpu_name": device, "compute_capability": "", "sm_count": 0, "memory_bytes": 0, "l2_cache_bytes": 0,
           "memory_bus_width_bits": 0, "max_sm_clock_mhz": 0, "max_mem_clock_mhz": 0, "driver_version": "",
           "driver_cuda_version": 0, "runtime_version": fmt.runtime_version, "cudnn_version": fmt.cudnn_version,
           "cublas_version": fmt.cublas_version, "provenance": dict(fmt.provenance)}
    rec.update(figures or {})
    return rec


@dataclass
class TableImport:
    """What importing a public table did: the file and its format, the rows read and left out as
    duplicates, the systems (one per GPU: id, GPU name, fingerprint, whether new, and the rows it
    received per group, e.g. ``bfloat16`` or ``fp32 bmm``), the counts of systems, layer configs and
    jobs added and of measurements written (a row imported again rewrites its measurement), and the
    seconds it took."""

    path: str
    format: str
    rows: int
    duplicates: int = 0
    systems: list[dict] = field(default_factory=list)
    systems_added: int = 0
    configs_added: int = 0
    jobs_added: int = 0
    measurements_written: int = 0
    seconds: float = 0.0
    provenance: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


_CHUNK = 400


def import_table(db: Database, table: PublicTable, records: dict[str, dict]) -> TableImport:
    """Write ``table`` into ``db`` in one transaction: each GPU's system (``records``: device -> its
    system record, :func:`system_record`) unless its fingerprint is there, the layer configs not yet
    there, each row's measurement (replacing the measurement of the same identity on that system:
    an import repeated rewrites, never duplicates) and its job (``KEY.PRECISION.torch``, status ok)
    unless there. Raises :class:`DatabaseError` (nothing written) when the write fails or a string
    is longer than its column."""
    t0 = time.perf_counter()
    st = TableImport(str(table.path), table.format.name, len(table.rows), table.duplicates,
                     provenance=dict(table.format.provenance))
    try:
        with db.engine.begin() as conn:
            sids = _systems(conn, table, records, st)
            st.configs_added = _configs(conn, table)
            st.measurements_written = _measurements(conn, table, sids)
            st.jobs_added = _jobs(conn, table, sids)
    except DatabaseError as e:
        raise DatabaseError(f"import of {table.path}: {e}; nothing imported") from None
    except sa.exc.SQLAlchemyError as e:
        raise db_write_error(db, e, f"import of {table.path} failed (nothing imported)") from None
    st.seconds = time.perf_counter() - t0
    return st


def _systems(conn, table: PublicTable, records: dict[str, dict], st: TableImport) -> dict[str, int]:
    """Each GPU's system id (inserted when its fingerprint is new), and the per-system counts in ``st``."""
    sids = {}
    counts: dict[str, dict[str, int]] = {}
    for r in table.rows:
        c = counts.setdefault(r.device, {})
        c[r.what] = c.get(r.what, 0) + 1
    for device in table.devices:
        row = system_row(records[device])
        added = insert_new(conn, System, [row], ["fingerprint"])
        st.systems_added += added
        sids[device] = conn.scalar(select(System.id).where(System.fingerprint == row["fingerprint"]))
        st.systems.append({"id": sids[device], "gpu_name": device, "fingerprint": row["fingerprint"][:12],
                           "spec": records[device].get("spec"), "new": bool(added), "rows": counts[device]})
    return sids


def _configs(conn, table: PublicTable) -> int:
    """Insert the layer configs of the table's rows that are not there yet; how many."""
    new = {}
    for r in table.rows:
        c = r.config
        if c.key not in new:
            new[c.key] = dict(key=c.key, kind=c.kind, params=json.dumps(c.params(), sort_keys=True),
                              description=c.describe(), batch=c.batch_count, flops=c.flops())
    rows = list(new.values())
    return sum(insert_new(conn, LayerConfigRow, rows[i:i + _CHUNK * 10], ["key"])
               for i in range(0, len(rows), _CHUNK * 10))


def _measurements(conn, table: PublicTable, sids: dict[str, int]) -> int:
    """Replace the measurements of the rows' identities on their systems by the rows' times."""
    fmt, now = table.format, utc_now()
    groups: dict[tuple, list[str]] = {}
    for r in table.rows:
        groups.setdefault((sids[r.device], r.call, r.math, r.dtype), []).append(r.config.key)
    for (sid, call, math_mode, dtype), keys in groups.items():
        keys = sorted(set(keys))
        for i in range(0, len(keys), _CHUNK):
            conn.execute(sa.delete(Measurement.__table__).where(
                Measurement.system_id == sid, Measurement.call == call, Measurement.math == math_mode,
                Measurement.dtype == dtype, Measurement.cache == "warm", Measurement.layout == "NCHW",
                Measurement.layer_key.in_(keys[i:i + _CHUNK])))
    rows = check_lengths(Measurement, [dict(
        system_id=sids[r.device], layer_key=r.config.key, precision=r.precision, call=r.call, backend=BACKEND,
        algorithm=r.algorithm, math=r.math, dtype=r.dtype, cache="warm", layout="NCHW", batch=r.config.batch_count,
        status="ok", message="", note=fmt.note, median_ms=r.ms, mean_ms=r.ms, method=fmt.method, workspace_bytes=0,
        details=json.dumps(dict(r.details, source=fmt.name), sort_keys=True, separators=(",", ":")),
        run_id=None, created_at=now) for r in table.rows])
    for i in range(0, len(rows), _CHUNK * 10):
        conn.execute(sa.insert(Measurement.__table__), rows[i:i + _CHUNK * 10])
    return len(rows)


def _jobs(conn, table: PublicTable, sids: dict[str, int]) -> int:
    """Insert each (system, config, precision)'s job (status ok) unless there; how many."""
    now = utc_now()
    jobs = {}
    for r in table.rows:
        job = str(JobId(r.config.key, r.precision, "NCHW", BACKEND))
        jobs.setdefault((sids[r.device], job), dict(
            system_id=sids[r.device], job=job, layer_key=r.config.key, precision=r.precision, status="ok",
            message=f"imported from a public table ({table.format.name})", run_id=None, wall_s=None,
            finished_at=now))
    rows = list(jobs.values())
    return sum(insert_new(conn, JobRow, rows[i:i + _CHUNK * 10], ["system_id", "job"])
               for i in range(0, len(rows), _CHUNK * 10))
