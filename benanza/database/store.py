"""Performance database: systems, layer configs, measurements (failures included), heuristic choices.

SQLAlchemy models over any SQLAlchemy URL; SQLite by default at :func:`default_url` (the file in
``$BENANZA_DB``, else ``$XDG_DATA_HOME/benanza/perf.db``, i.e. ``~/.local/share/benanza/perf.db``).
A measurement is keyed by system, layer config key, precision, library call, algorithm, math mode,
data type, cache state (warm/cold) and layout; the config's own batch count
(:attr:`benanza.kinds.base.LayerConfig.batch_count`) is part of the layer config and stored on its own
too (``layer_configs.batch``, ``measurements.batch``); a model's batch is ``models.batch``. Each
finished job (one config in one precision) is written in one transaction together with its ``jobs``
row, so a run stopped at any point leaves whole jobs only, and the next run skips the jobs already
done on the same system.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy import event, select
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from benanza import kinds as L
from benanza.errors import DatabaseError, UsageError
from benanza.kinds.backend import Backend
from benanza.kinds.base import row_layouts
from benanza.database.records import ChoiceLine, MeasurementLine, Record
from benanza.versions import version_text

#: the schema this version writes: the number of the newest migration in db/migrations/versions
SCHEMA_VERSION = 7
#: the Alembic revision of that migration (db/migrations/versions/0007_*.py; tests/test_database.py checks
#: it is the scripts' head): a database at it opens without importing Alembic
HEAD_REVISION = f"{SCHEMA_VERSION:04d}"

#: system fields that identify a system (two machines with equal values share measurements)
SYSTEM_IDENTITY = ("gpu_name", "compute_capability", "sm_count", "memory_bytes", "max_sm_clock_mhz",
                   "max_mem_clock_mhz", "driver_version", "driver_cuda_version", "runtime_version",
                   "cudnn_version", "cublas_version")
#: the fields of a system record that ``systems`` keeps in columns of their own (the whole record is ``info``)
SYSTEM_COLUMNS = ("gpu_name", "compute_capability", "sm_count", "memory_bytes", "l2_cache_bytes",
                  "memory_bus_width_bits", "max_sm_clock_mhz", "max_mem_clock_mhz", "driver_version",
                  "driver_cuda_version", "runtime_version", "cudnn_version", "cublas_version")
#: the fields of a system record's ``provenance`` (a public table's system,
#: :mod:`benanza.database.public_tables`) that identify it beside :data:`SYSTEM_IDENTITY`
PROVENANCE_IDENTITY = ("repository", "commit")


def _details(value) -> str:
    """The ``details`` object of a record as canonical JSON text ("" when absent or not an object)."""
    if not isinstance(value, dict) or not value:
        return ""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


#: characters of the ``algorithm`` columns (measurements, choices, kernel_counters)
ALGORITHM_CHARS = 96


def fit_algorithm(name: str, limit: int = ALGORITHM_CHARS) -> str:
    """An implementation's name as its ``algorithm`` column stores it: unchanged when it fits, else its
    first characters, ``~`` and 12 hex digits of the whole name's sha256, ``limit`` characters in all, so
    that equal names stay equal (a heuristic's pick still matches its measurement) and different names
    stay different. A measurement keeps the whole name in its ``details`` (``algorithm``); cuBLASLt's
    FP8 configurations with their scale modes run past 96 characters."""
    if not isinstance(name, str) or len(name) <= limit:
        return name
    return f"{name[:limit - 13]}~{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


#: the column type of a backend: its value as text (VARCHAR(16), no database enum type or CHECK), read
#: back as a :class:`benanza.kinds.backend.Backend`. A new backend comes with a schema version (a
#: migration that changes no table), so that an older benanza refuses a database holding its rows
#: in one line (:func:`_prepare_schema`) instead of failing on a value it does not know.
BACKEND_TYPE = sa.Enum(Backend, native_enum=False, create_constraint=False, length=16,
                       values_callable=lambda e: [b.value for b in e], validate_strings=True)


class SchemaInfo(Base):
    __tablename__ = "schema_info"
    key: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    value: Mapped[str] = mapped_column(sa.String(256))


class System(Base):
    """A GPU with its software stack. ``fingerprint``: sha256 of the identity fields."""

    __tablename__ = "systems"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(sa.String(64), unique=True)
    gpu_name: Mapped[str] = mapped_column(sa.String(128))
    compute_capability: Mapped[str] = mapped_column(sa.String(16))
    sm_count: Mapped[int]
    memory_bytes: Mapped[int] = mapped_column(sa.BigInteger)
    l2_cache_bytes: Mapped[int] = mapped_column(sa.BigInteger)
    memory_bus_width_bits: Mapped[int]
    max_sm_clock_mhz: Mapped[int]
    max_mem_clock_mhz: Mapped[int]
    driver_version: Mapped[str] = mapped_column(sa.String(64))
    driver_cuda_version: Mapped[int]
    runtime_version: Mapped[int]
    cudnn_version: Mapped[int]
    cublas_version: Mapped[int]
    info: Mapped[str] = mapped_column(sa.Text)  # the full system record (JSON)
    created_at: Mapped[_dt.datetime] = mapped_column(default=utc_now)

    @property
    def provenance(self) -> dict | None:
        """Where the system's numbers come from when benanza did not measure them: the ``provenance``
        object of its record (a public table imported by `benanza db import`,
        :mod:`benanza.database.public_tables`: source repository, commit, licence, op, method), else None."""
        try:
            p = json.loads(self.info or "{}").get("provenance")
        except (ValueError, AttributeError):
            return None
        return p if isinstance(p, dict) and p else None

    def label(self) -> str:
        p = self.provenance
        if p is not None:
            return f"{self.gpu_name} ({p.get('summary') or 'a public table, not measured by benanza'})"
        return (f"{self.gpu_name} (sm_{self.compute_capability.replace('.', '')}, {self.sm_count} SMs, "
                f"driver {self.driver_version or self.driver_cuda_version}, "
                f"cuDNN {version_text('cudnn', self.cudnn_version)}, cuBLAS {version_text('cublas', self.cublas_version)})")


class LayerConfigRow(Base):
    """A canonical layer config (see :mod:`benanza.kinds`). ``batch``: the config's own count of
    instances per call (:attr:`benanza.kinds.base.LayerConfig.batch_count`: N of a convolution, a
    GEMM's number of products), not the batch of a model (``models.batch``)."""

    __tablename__ = "layer_configs"
    key: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(32), index=True)
    params: Mapped[str] = mapped_column(sa.Text)
    description: Mapped[str] = mapped_column(sa.Text)
    batch: Mapped[int]
    flops: Mapped[int] = mapped_column(sa.BigInteger)


class Run(Base):
    """One `benanza run`: when, on which system, what it measured, how it ended."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(primary_key=True)
    system_id: Mapped[int | None] = mapped_column(sa.ForeignKey("systems.id"))
    started_at: Mapped[_dt.datetime] = mapped_column(default=utc_now)
    finished_at: Mapped[_dt.datetime | None]
    status: Mapped[str] = mapped_column(sa.String(16), default="running")  # running/completed/interrupted/failed
    suite: Mapped[str] = mapped_column(sa.Text, default="")
    models: Mapped[str] = mapped_column(sa.Text, default="")
    jobs_planned: Mapped[int] = mapped_column(default=0)
    jobs_done: Mapped[int] = mapped_column(default=0)
    message: Mapped[str] = mapped_column(sa.Text, default="")


class JobRow(Base):
    """A finished job: one layer config in one precision on one system (drives incrementality)."""

    __tablename__ = "jobs"
    __table_args__ = (sa.UniqueConstraint("system_id", "job"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    system_id: Mapped[int] = mapped_column(sa.ForeignKey("systems.id"), index=True)
    job: Mapped[str] = mapped_column(sa.String(96))
    layer_key: Mapped[str] = mapped_column(sa.ForeignKey("layer_configs.key"), index=True)
    precision: Mapped[str] = mapped_column(sa.String(8))
    status: Mapped[str] = mapped_column(sa.String(16))  # ok / failed
    message: Mapped[str] = mapped_column(sa.Text, default="")
    run_id: Mapped[int | None] = mapped_column(sa.ForeignKey("runs.id"))
    wall_s: Mapped[float | None]
    finished_at: Mapped[_dt.datetime] = mapped_column(default=utc_now)


class Measurement(Base):
    """One library call timed (or not) for one layer config. Times in ms; status ``ok`` only when
    the call ran and its output was finite; otherwise ``not_supported``, ``skipped`` or ``failed``
    with the message, and no time. ``backend``: the runtime the call ran in
    (:class:`benanza.kinds.backend.Backend`: the generated suite or the framework's own kernels;
    schema 7, backfilled from the call's name in older databases)."""

    __tablename__ = "measurements"
    __table_args__ = (
        sa.UniqueConstraint("system_id", "layer_key", "precision", "call", "algorithm", "math", "dtype",
                            "cache", "layout", name="uq_measurement"),
        sa.Index("ix_measurement_lookup", "system_id", "layer_key", "status"),
        sa.Index("ix_measurement_best", "system_id", "cache", "status", "layer_key", "median_ms"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    system_id: Mapped[int] = mapped_column(sa.ForeignKey("systems.id"))
    layer_key: Mapped[str] = mapped_column(sa.ForeignKey("layer_configs.key"))
    precision: Mapped[str] = mapped_column(sa.String(8))
    call: Mapped[str] = mapped_column(sa.String(96))
    backend: Mapped[Backend] = mapped_column(BACKEND_TYPE, default=lambda ctx: Backend.of_call(
        ctx.get_current_parameters().get("call")), server_default=Backend.SUITE.value)  # unsaid: its call's
    algorithm: Mapped[str] = mapped_column(sa.String(96))
    math: Mapped[str] = mapped_column(sa.String(32))
    dtype: Mapped[str] = mapped_column(sa.String(16))
    cache: Mapped[str] = mapped_column(sa.String(8))  # warm / cold
    layout: Mapped[str] = mapped_column(sa.String(8), default="NCHW")
    batch: Mapped[int]  # the config's batch count (layer_configs.batch), not a model's batch
    status: Mapped[str] = mapped_column(sa.String(16))
    message: Mapped[str] = mapped_column(sa.Text, default="")
    note: Mapped[str] = mapped_column(sa.Text, default="")
    median_ms: Mapped[float | None]
    q1_ms: Mapped[float | None]
    q3_ms: Mapped[float | None]
    mean_ms: Mapped[float | None]
    min_ms: Mapped[float | None]
    max_ms: Mapped[float | None]
    stddev_ms: Mapped[float | None]
    rse: Mapped[float | None]
    samples: Mapped[int | None]
    converged: Mapped[bool | None]
    method: Mapped[str] = mapped_column(sa.String(32), default="")
    reps: Mapped[int | None]
    host_us: Mapped[float | None]
    workspace_bytes: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    sm_clock_min_mhz: Mapped[int | None]
    sm_clock_max_mhz: Mapped[int | None]
    dropped: Mapped[int | None]  # samples discarded for a thermal / hardware clock slowdown
    power_capped: Mapped[int | None]  # samples kept that ran under the SW power cap
    clock_reasons: Mapped[int | None] = mapped_column(sa.BigInteger)  # NVML clock-event reasons seen (bitmask)
    build_ms: Mapped[float | None]  # engine plans: time to build the plan (runtime compilation), not timed
    #: JSON object describing the implementation beyond its name: cuDNN engine global index, knob
    #: choices, numerical / behaviour notes; cuBLASLt algo id, tile, stages, split-K ("" = none)
    details: Mapped[str] = mapped_column(sa.Text, default="")
    run_id: Mapped[int | None] = mapped_column(sa.ForeignKey("runs.id"))
    created_at: Mapped[_dt.datetime] = mapped_column(default=utc_now)

    @property
    def iqr_ms(self) -> float | None:
        if self.q1_ms is None or self.q3_ms is None:
            return None
        return self.q3_ms - self.q1_ms


class Choice(Base):
    """A library heuristic's ranking for a config (e.g. cudnnGetConvolutionForwardAlgorithm_v7)."""

    __tablename__ = "choices"
    __table_args__ = (sa.UniqueConstraint("system_id", "layer_key", "precision", "source", "rank"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    system_id: Mapped[int] = mapped_column(sa.ForeignKey("systems.id"))
    layer_key: Mapped[str] = mapped_column(sa.ForeignKey("layer_configs.key"))
    precision: Mapped[str] = mapped_column(sa.String(8))
    source: Mapped[str] = mapped_column(sa.String(96))
    rank: Mapped[int]
    algorithm: Mapped[str] = mapped_column(sa.String(96))
    math: Mapped[str] = mapped_column(sa.String(32))
    status: Mapped[str] = mapped_column(sa.String(64))
    workspace_bytes: Mapped[int] = mapped_column(sa.BigInteger, default=0)
    run_id: Mapped[int | None] = mapped_column(sa.ForeignKey("runs.id"))


class Ceiling(Base):
    """A machine ceiling measured on a system by `benanza ceilings` (the roofs of the roofline):
    ``value`` in ``unit`` (bytes/s or FLOP/s) = ``work`` / the median time of the measurement."""

    __tablename__ = "ceilings"
    __table_args__ = (sa.UniqueConstraint("system_id", "name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    system_id: Mapped[int] = mapped_column(sa.ForeignKey("systems.id"))
    name: Mapped[str] = mapped_column(sa.String(32))
    unit: Mapped[str] = mapped_column(sa.String(16))
    value: Mapped[float]
    work: Mapped[float]
    median_ms: Mapped[float]
    rse: Mapped[float | None]
    samples: Mapped[int | None]
    converged: Mapped[bool | None]
    method: Mapped[str] = mapped_column(sa.Text, default="")
    created_at: Mapped[_dt.datetime] = mapped_column(default=utc_now)


class ModelRow(Base):
    """A model at a batch size whose layers were sent to the database (for sharing queries)."""

    __tablename__ = "models"
    __table_args__ = (sa.UniqueConstraint("sha256", "batch"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(256))
    sha256: Mapped[str] = mapped_column(sa.String(64))
    batch: Mapped[int]
    layers: Mapped[int]
    unique_layers: Mapped[int]
    summary: Mapped[str] = mapped_column(sa.Text)


class ModelConfig(Base):
    """How many layers of a model use a config."""

    __tablename__ = "model_configs"
    model_id: Mapped[int] = mapped_column(sa.ForeignKey("models.id"), primary_key=True)
    layer_key: Mapped[str] = mapped_column(sa.ForeignKey("layer_configs.key"), primary_key=True)
    count: Mapped[int]


# ------------------------------------------------------------------------------------- connection

def default_url() -> str:
    """``$BENANZA_DB`` (URL or path), else SQLite at ``$XDG_DATA_HOME/benanza/perf.db``."""
    env = os.environ.get("BENANZA_DB")
    if env:
        return env
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return str(base / "benanza" / "perf.db")


def normalize_url(url: str | None) -> str:
    """A SQLAlchemy URL from a URL or a file path (``sqlite:///`` absolute)."""
    url = url or default_url()
    if "://" in url:
        return url
    return "sqlite:///" + str(Path(url).expanduser().resolve())


#: the default bound on reaching a network endpoint (s): a PostgreSQL server here, a Dask scheduler
#: in :mod:`benanza.runner.cluster`; ``$BENANZA_CONNECT_TIMEOUT`` sets another
CONNECT_TIMEOUT_S = 30.0


def connect_timeout() -> float:
    """Seconds allowed to reach a network endpoint and hear it answer (a PostgreSQL server, a Dask
    scheduler): ``$BENANZA_CONNECT_TIMEOUT`` (a positive number), else :data:`CONNECT_TIMEOUT_S`.
    Raises :class:`UsageError` for another value."""
    text = os.environ.get("BENANZA_CONNECT_TIMEOUT", "").strip()
    if not text:
        return CONNECT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"BENANZA_CONNECT_TIMEOUT={text!r}: give the seconds to wait for a scheduler or a "
                         f"database server, a positive number")
    return value


def _connect_args(u) -> dict:
    """The DBAPI's connection arguments for URL ``u``: on PostgreSQL a bound on establishing the
    connection, :func:`connect_timeout` rounded up to whole seconds (libpq's and psycopg's
    ``connect_timeout``; they wait at least 2 s), unless the URL sets its own ``connect_timeout``:
    a server that accepts and never answers is one line within the bound, not a hang."""
    if u.get_backend_name() != "postgresql" or "connect_timeout" in u.query:
        return {}
    return {"connect_timeout": max(2, math.ceil(connect_timeout()))}


def _sqlite_pragmas(dbapi_conn, _record):
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _sqlite_read_only_pragmas(dbapi_conn, _record):
    """A file opened read-only (:func:`_read_only_url`, or a WAL source: :func:`_source_url`): its
    journal mode stays as it is, and SQLite refuses every write (``query_only``)."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA query_only=1")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def retrying(fn):
    """Run a write again when a concurrent writer got in the way: a unique key another process
    inserted first, a deadlock, a serialization failure, or SQLite's "database is locked" past its
    busy timeout. Each attempt is a fresh transaction; after 8 attempts the error stands."""
    import functools
    import random

    from sqlalchemy.exc import IntegrityError

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for attempt in range(8):
            try:
                return fn(*args, **kwargs)
            except DatabaseError as e:
                cause = e.__context__
                transient = isinstance(cause, (IntegrityError, OperationalError)) or any(
                    w in str(e).lower() for w in ("locked", "deadlock", "could not serialize", "duplicate key",
                                                   "unique constraint"))
                if not transient or attempt == 7:
                    raise
                time.sleep(0.02 * (2 ** attempt) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    return wrapper


#: the key of the PostgreSQL advisory lock under which :func:`open_db` checks, creates and migrates the
#: schema: the first 8 bytes of sha256("benanza-schema") as a signed 64-bit integer (the ``bigint`` that
#: ``pg_advisory_xact_lock`` takes; PostgreSQL docs, "Advisory Lock Functions")
SCHEMA_LOCK_KEY = int.from_bytes(hashlib.sha256(b"benanza-schema").digest()[:8], "big", signed=True)


def _schema_lock(conn) -> None:
    """On PostgreSQL, wait for the schema's advisory lock, held until ``conn``'s transaction ends, so
    that processes opening one database at once create or migrate its schema one after another (two
    concurrent ``CREATE TABLE``s of one name fail on ``pg_type_typname_nsp_index``). SQLite needs
    none: :func:`_folder_lock` and its own write lock serialize the schema's writers."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})


def _dialect_name(conn) -> str:
    """The dialect of a Connection or a Session."""
    return (conn.get_bind() if isinstance(conn, Session) else conn).dialect.name


def _dialect_insert(dialect: str, table):
    """The dialect's own INSERT of ``table``, which takes ``ON CONFLICT`` (PostgreSQL, SQLite >= 3.24),
    or None for another dialect."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:
        return None
    return insert(table)


def insert_new(conn, model, rows: list[dict], keys: Sequence[str]) -> int:
    """Insert the ``rows`` (dicts of columns) of ``model``'s table whose unique key ``keys`` is not yet
    there, in the transaction of ``conn`` (a Connection or Session), never failing on a row a
    concurrent writer inserted first: ``INSERT ... ON CONFLICT (keys) DO NOTHING`` on PostgreSQL and
    SQLite (PostgreSQL waits for that writer's transaction), one SAVEPOINT per row elsewhere. Returns
    how many rows this call inserted. Raises :class:`ValueTooLong` (:func:`check_lengths`)."""
    from sqlalchemy.exc import IntegrityError

    if not rows:
        return 0
    table = model.__table__
    check_lengths(table, rows)
    ins = _dialect_insert(_dialect_name(conn), table)
    if ins is not None:
        stmt = ins.on_conflict_do_nothing(index_elements=list(keys)).returning(*(table.c[k] for k in keys))
        return len(conn.execute(stmt, rows).all())
    n = 0
    for r in rows:
        try:
            with conn.begin_nested():
                conn.execute(sa.insert(table).values(**r))
            n += 1
        except IntegrityError:
            pass
    return n


def string_limits(model) -> dict[str, int]:
    """The declared length of each ``String(N)`` column of ``model``'s table (``Enum`` columns
    included): column name -> N characters."""
    table = model.__table__ if hasattr(model, "__table__") else model
    return {c.name: c.type.length for c in table.columns
            if isinstance(c.type, sa.String) and getattr(c.type, "length", None)}


class ValueTooLong(DatabaseError):
    """A string longer than its column's declared length (:func:`check_lengths`)."""


def check_lengths(model, rows: list[dict]) -> list[dict]:
    """``rows`` (dicts of columns of ``model``'s table), checked before they are written: each string
    at most its column's declared length (:func:`string_limits`), on every dialect (SQLite stores
    any length, PostgreSQL refuses it in a message that names no column). Raises
    :class:`ValueTooLong` with one line naming the table, the column and the value's length."""
    table = model.__table__ if hasattr(model, "__table__") else model
    limits = string_limits(table)
    for r in rows:
        for c, n in limits.items():
            v = r.get(c)
            if isinstance(v, str) and len(v) > n:
                raise ValueTooLong(f"{table.name}.{c} holds a value of {len(v)} characters, longer than "
                                   f"the column's {n}")
    return rows


def disk_full(e: BaseException) -> bool:
    """Whether ``e`` (an OSError, or a database error wrapped by SQLAlchemy) says the disk or quota is
    full: ENOSPC, EDQUOT, SQLite's SQLITE_FULL ("database or disk is full"), PostgreSQL's
    ``disk_full`` (SQLSTATE 53100) or its "No space left on device"."""
    import errno

    orig = getattr(e, "orig", None) or e
    if isinstance(orig, OSError) and orig.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if getattr(orig, "sqlite_errorname", None) == "SQLITE_FULL" or getattr(orig, "sqlstate", None) == "53100":
        return True
    text = str(orig).lower()
    return "database or disk is full" in text or "no space left on device" in text


def db_write_error(db: Database, e: BaseException, what: str) -> DatabaseError:
    """The one line of a failed write ``what`` into ``db``: for a full disk (:func:`disk_full`)
    ``<file>: no space left on device (<what>: <the error>; nothing was written)`` (the SQLite file,
    else the URL without its password), else ``<what>: <the error's first line>``."""
    if disk_full(e):
        return DatabaseError(f"{_file_of(db.label, db.url)}: no space left on device ({what}: {_first_line(e)}; "
                             f"nothing was written)")
    return DatabaseError(f"{what}: {_first_line(e)}")


def _file_of(label: str | None, url: str) -> str:
    """What a message calls a database: its label, its SQLite file, or its URL without the password."""
    u = sa.engine.make_url(url)
    if label:
        return label
    return u.database if u.get_backend_name() == "sqlite" and u.database else u.render_as_string(hide_password=True)


def upsert_greater(conn, model, values: dict, keys: Sequence[str], by: Sequence[str]) -> bool:
    """Insert ``values`` into ``model``'s table, or replace the row of the same unique key ``keys``
    when ``values``' columns ``by`` are greater (compared as a tuple, in SQL), so that the row kept
    of several writers, in any order or at once, is the same: the greatest. One ``INSERT ... ON
    CONFLICT (keys) DO UPDATE ... WHERE`` on PostgreSQL and SQLite, a read and a write elsewhere.
    True when it wrote the row. Raises :class:`ValueTooLong` (:func:`check_lengths`)."""
    table = model.__table__
    check_lengths(table, [values])
    ins = _dialect_insert(_dialect_name(conn), table)
    if ins is not None:
        ins = ins.values(**values)
        new = sa.tuple_(*(ins.excluded[c] for c in by))
        stmt = ins.on_conflict_do_update(index_elements=list(keys),
                                         set_={c: ins.excluded[c] for c in values if c not in keys},
                                         where=new > sa.tuple_(*(table.c[c] for c in by)))
        return conn.execute(stmt.returning(*(table.c[k] for k in keys))).first() is not None
    cur = conn.execute(select(*(table.c[c] for c in by)).where(*(table.c[k] == values[k] for k in keys))).first()
    if cur is None:
        conn.execute(sa.insert(table).values(**values))
        return True
    if tuple(values[c] for c in by) <= tuple(cur):
        return False
    conn.execute(sa.update(table).where(*(table.c[k] == values[k] for k in keys)).values(
        **{c: v for c, v in values.items() if c not in keys}))
    return True


def upsert_row(conn, model, values: dict, keys: Sequence[str], newer_only: bool = True) -> bool:
    """Insert ``values`` (every column but ``id``) into ``model``'s table, or replace the row of the
    same unique key ``keys``: always, or with ``newer_only`` only if it is older (``created_at``; a row
    without one is older than any row with one). One ``INSERT ... ON CONFLICT (keys) DO UPDATE [WHERE]``
    statement on PostgreSQL and SQLite, so concurrent writers of one key never fail on each other;
    elsewhere a read, a delete and an insert. True when it wrote the row. Raises
    :class:`ValueTooLong` (:func:`check_lengths`)."""
    table = model.__table__
    check_lengths(table, [values])
    ins = _dialect_insert(_dialect_name(conn), table)
    if ins is not None:
        ins = ins.values(**values)
        new, old = ins.excluded.created_at, table.c.created_at
        stmt = ins.on_conflict_do_update(
            index_elements=list(keys), set_={c: ins.excluded[c] for c in values if c not in keys},
            where=sa.and_(new.is_not(None), sa.or_(old.is_(None), old < new)) if newer_only else None)
        return conn.execute(stmt.returning(table.c.id)).first() is not None  # (rowcount is -1 on psycopg)
    cur = conn.execute(select(table.c.id, table.c.created_at).where(*(table.c[k] == values[k] for k in keys))).first()
    if newer_only and cur is not None and \
            (cur.created_at or _dt.datetime.min) >= (values.get("created_at") or _dt.datetime.min):
        return False
    if cur is not None:
        conn.execute(sa.delete(table).where(table.c.id == cur.id))
    conn.execute(sa.insert(table).values(**values))
    return True


# the kernel_counters table (schema 5; functions in benanza.database.counters)
class KernelCounter(Base):
    """One kernel of one implementation profiled by Nsight Compute: DRAM throughput (% of peak) and
    bytes, SM throughput (% of peak), achieved occupancy (%), duration (ns), name and launch shape;
    ``tool``: the ncu version that read them."""

    __tablename__ = "kernel_counters"
    __table_args__ = (sa.UniqueConstraint("system_id", "layer_key", "precision", "call", "algorithm", "math",
                                          "layout", "kernel_index", name="uq_kernel_counter"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    system_id: Mapped[int] = mapped_column(sa.ForeignKey("systems.id"))
    layer_key: Mapped[str] = mapped_column(sa.ForeignKey("layer_configs.key"))
    precision: Mapped[str] = mapped_column(sa.String(8))
    call: Mapped[str] = mapped_column(sa.String(96))
    algorithm: Mapped[str] = mapped_column(sa.String(96))
    math: Mapped[str] = mapped_column(sa.String(32))
    layout: Mapped[str] = mapped_column(sa.String(8))
    kernel_index: Mapped[int]
    kernel_name: Mapped[str] = mapped_column(sa.Text)
    block_size: Mapped[str] = mapped_column(sa.String(48), default="")
    grid_size: Mapped[str] = mapped_column(sa.String(48), default="")
    dram_pct: Mapped[float | None] = mapped_column(sa.Double)
    dram_bytes: Mapped[float | None] = mapped_column(sa.Double)
    sm_pct: Mapped[float | None] = mapped_column(sa.Double)
    occupancy_pct: Mapped[float | None] = mapped_column(sa.Double)
    duration_ns: Mapped[float | None] = mapped_column(sa.Double)
    tool: Mapped[str] = mapped_column(sa.String(96), default="")
    created_at: Mapped[_dt.datetime] = mapped_column(default=utc_now)


class Database:
    """An open performance database. Create with :func:`open_db`. Writes retry on conflicts with
    concurrent writers (other processes running `benanza run` into the same database)."""

    def __init__(self, engine: sa.Engine, url: str, label: str | None = None):
        self.engine = engine
        self.url = url
        #: what messages call it: the file the user gave (a reference database's .gz, not the
        #: unpacked copy in the cache), else the URL without its password
        self.label = label
        self.notices: list[str] = []
        self._session = sessionmaker(engine, expire_on_commit=False)

    def close(self) -> None:
        """Close every pooled connection (``Engine.dispose``): a SQLite file's last connection checkpoints
        its WAL and removes the -wal and -shm files. A Ctrl-C that lands while it closes them does not
        leave the rest open: they are closed, then the KeyboardInterrupt goes on."""
        try:
            self.engine.dispose()
        except KeyboardInterrupt:
            self.engine.dispose()
            raise

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on any exception."""
        s = self._session()
        try:
            yield s
            s.commit()
        except SQLAlchemyError as e:
            s.rollback()
            err = db_write_error(self, e, "writing") if disk_full(e) else \
                DatabaseError(f"database {self.safe_url}: {_first_line(e)}")
            err.__context__ = e
            raise err from None
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    @property
    def safe_url(self) -> str:
        """The database as messages name it: :attr:`label`, else the URL without its password."""
        return self.label or sa.engine.make_url(self.url).render_as_string(hide_password=True)

    # ---------------------------------------------------------------------------------- writes

    @retrying
    def upsert_system(self, record: dict, authoritative: bool = False) -> int:
        """Insert the system of a system record if new (:func:`insert_new`: a concurrent writer's
        row of the same fingerprint is taken, never a second one); return its id. ``authoritative``: the
        record is the suite's own (every field a suite reports), so it replaces the stored record of
        the same system (written earlier from the native device query, which has fewer fields)."""
        row = system_row(record)
        fp = row["fingerprint"]
        with self.session() as s:
            inserted = insert_new(s, System, [row], ["fingerprint"])
            row = s.scalar(select(System).where(System.fingerprint == fp))
            if not inserted and authoritative:
                row.info = json.dumps(record, sort_keys=True)
                for k in ("l2_cache_bytes", "memory_bus_width_bits"):
                    if record.get(k) is not None:
                        setattr(row, k, record[k])
            return row.id

    @retrying
    def write_ceilings(self, system_id: int, rows: list[dict]) -> None:
        """Store measured ceilings (dicts of :class:`Ceiling`'s fields), replacing earlier ones of
        the same name on the system (:func:`upsert_row`: of two concurrent writers the later one's
        stays), in one transaction."""
        with self.session() as s:
            conn = s.connection()
            for r in rows:
                upsert_row(conn, Ceiling, {"method": "", "rse": None, "samples": None, "converged": None, **r,
                                           "system_id": system_id, "created_at": utc_now()}, ("system_id", "name"),
                           newer_only=False)

    def ceilings(self, system_id: int) -> dict[str, Ceiling]:
        """The ceilings measured on a system, by name."""
        with self.session() as s:
            rows = s.scalars(select(Ceiling).where(Ceiling.system_id == system_id)).all()
            s.expunge_all()
        return {r.name: r for r in rows}

    @retrying
    def upsert_configs(self, configs: list[L.LayerConfig]) -> None:
        """Store layer configs that are not yet known (:func:`insert_new`: one row per key whatever
        concurrent writers do)."""
        if not configs:
            return
        with self.session() as s:
            have = set(s.scalars(select(LayerConfigRow.key).where(
                LayerConfigRow.key.in_([c.key for c in configs]))))
            new = {}
            for c in configs:
                if c.key not in have and c.key not in new:
                    new[c.key] = dict(key=c.key, kind=c.kind, params=json.dumps(c.params(), sort_keys=True),
                                      description=c.describe(), batch=c.batch_count, flops=c.flops())
            insert_new(s, LayerConfigRow, list(new.values()), ["key"])

    @retrying
    def record_model(self, name: str, sha256: str, batch: int, summary: dict, key_counts: dict[str, int]) -> None:
        """Store a model's config usage (replacing an earlier record of the same file and batch). The
        model's row is inserted if new (:func:`insert_new`) and then locked (``SELECT ... FOR UPDATE``;
        SQLite serializes writers anyway), so concurrent writers of one model replace its configs one
        after the other."""
        with self.session() as s:
            insert_new(s, ModelRow, [dict(name=name, sha256=sha256, batch=batch, layers=summary["layers"],
                                          unique_layers=summary["unique_layers"],
                                          summary=json.dumps(summary, sort_keys=True))], ["sha256", "batch"])
            row = s.scalar(select(ModelRow).where(ModelRow.sha256 == sha256, ModelRow.batch == batch).with_for_update())
            s.execute(sa.delete(ModelConfig).where(ModelConfig.model_id == row.id))
            for k, n in key_counts.items():
                s.add(ModelConfig(model_id=row.id, layer_key=k, count=n))

    def start_run(self, system_id: int | None, suite: str, models: str, planned: int) -> int:
        with self.session() as s:
            r = Run(system_id=system_id, suite=suite, models=models, jobs_planned=planned)
            s.add(r)
            s.flush()
            return r.id

    def finish_run(self, run_id: int, status: str, done: int, message: str = "") -> None:
        with self.session() as s:
            r = s.get(Run, run_id)
            if r is not None:
                r.status, r.jobs_done, r.message, r.finished_at = status, done, message, utc_now()

    @retrying
    def write_job(self, system_id: int, run_id: int | None, job: str, layer_key: str, precision: str,
                  status: str, message: str, records: Sequence[Record], wall_s: float | None = None,
                  layout: str = "NCHW") -> None:
        """Write one finished job atomically: its measurement records replace earlier ones of the
        same backend for the same (system, config, precision, layout; an NCHW job also owns its
        :data:`benanza.kinds.base.WHATIF_LAYOUTS` rows), and the job is marked done.
        ``records``: the worker's lines of the job, typed (:class:`benanza.database.records.MeasurementLine`,
        :class:`benanza.database.records.ChoiceLine`); the first of equal identity is kept. Raises
        TypeError for anything else.
        A job owns the measurements of its backend (:attr:`benanza.kinds.base.JobId.backend`: a
        framework job the framework's calls, a suite job the suite's): neither deletes the other's
        (each record is stored with its own backend). The heuristic choices
        of an NCHW suite job replace earlier ones; an NHWC job (the same config channels-last) keeps
        the NCHW job's measurements and choices and stores no choices (choices have no layout).
        Every string is checked against its column's declared length before anything is written
        (:func:`check_lengths`): a longer one raises :class:`ValueTooLong` naming the job, the
        ``table.column`` and the length, and nothing of the job is written."""
        backend = Backend.of_job(job)
        bad = next((r for r in records if not isinstance(r, (MeasurementLine, ChoiceLine))), None)
        if bad is not None:
            raise TypeError(f"write_job takes MeasurementLine and ChoiceLine records, not {type(bad).__name__}")
        keep_choices = layout == "NCHW" and not backend.framework
        rows = _job_rows(system_id, run_id, job, layer_key, precision, status, message, records, wall_s, keep_choices)
        with self.session() as s:
            s.execute(sa.delete(Measurement).where(Measurement.system_id == system_id,
                                                   Measurement.layer_key == layer_key,
                                                   Measurement.precision == precision,
                                                   Measurement.layout.in_(row_layouts(layout)),
                                                   Measurement.backend == backend))
            if keep_choices:
                s.execute(sa.delete(Choice).where(Choice.system_id == system_id, Choice.layer_key == layer_key,
                                                  Choice.precision == precision))
            s.execute(sa.delete(JobRow).where(JobRow.system_id == system_id, JobRow.job == job))
            batch = s.scalar(select(LayerConfigRow.batch).where(LayerConfigRow.key == layer_key)) or 0
            for row in rows:
                if isinstance(row, Measurement):
                    row.batch = batch
                s.add(row)

    # ----------------------------------------------------------------------------------- reads

    def jobs_done(self, system_id: int, statuses: tuple[str, ...] = ("ok", "failed")) -> set[str]:
        with self.session() as s:
            return set(s.scalars(select(JobRow.job).where(JobRow.system_id == system_id,
                                                           JobRow.status.in_(statuses))))

    def systems(self) -> list[System]:
        with self.session() as s:
            return list(s.scalars(select(System).order_by(System.id)))

    def latest_system(self, among: list[int] | None = None) -> System | None:
        """The system of the most recent run that measured something (of the systems ``among``, when given)."""
        with self.session() as s:
            q = select(Measurement.system_id)
            if among is not None:
                q = q.where(Measurement.system_id.in_(among))
            sid = s.scalar(q.order_by(Measurement.created_at.desc(), Measurement.id.desc()).limit(1))
            return s.get(System, sid) if sid is not None else None

    def measurements(self, system_id: int, keys: list[str], cache: str = "warm") -> list[Measurement]:
        """All measurement rows (any status) of ``keys`` on a system for one cache state."""
        out: list[Measurement] = []
        with self.session() as s:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                out += list(s.scalars(select(Measurement).where(
                    Measurement.system_id == system_id, Measurement.layer_key.in_(chunk),
                    Measurement.cache.in_([cache, "warm"] if cache == "cold" else [cache]))))
        return out

    def choices(self, system_id: int, keys: list[str]) -> list[Choice]:
        out: list[Choice] = []
        with self.session() as s:
            for i in range(0, len(keys), 500):
                out += list(s.scalars(select(Choice).where(Choice.system_id == system_id,
                                                           Choice.layer_key.in_(keys[i:i + 500]))))
        return out

    def job_rows(self, system_id: int, keys: list[str]) -> list[JobRow]:
        out: list[JobRow] = []
        with self.session() as s:
            for i in range(0, len(keys), 500):
                out += list(s.scalars(select(JobRow).where(JobRow.system_id == system_id,
                                                           JobRow.layer_key.in_(keys[i:i + 500]))))
        return out

    def counts(self) -> dict[str, int]:
        with self.session() as s:
            return {
                "systems": s.scalar(select(sa.func.count()).select_from(System)),
                "layer_configs": s.scalar(select(sa.func.count()).select_from(LayerConfigRow)),
                "measurements": s.scalar(select(sa.func.count()).select_from(Measurement)),
                "measurements_ok": s.scalar(select(sa.func.count()).select_from(Measurement).where(
                    Measurement.status == "ok")),
                "jobs": s.scalar(select(sa.func.count()).select_from(JobRow)),
                "runs": s.scalar(select(sa.func.count()).select_from(Run)),
            }




def source_filter(source: str):
    """The SQL condition on :attr:`Measurement.backend` for one source's rows (``library``,
    ``framework`` or ``all``: :meth:`benanza.kinds.backend.Backend.of_source`)."""
    return Measurement.backend.in_(Backend.of_source(source))


def _first_line(e: BaseException) -> str:
    msg = str(getattr(e, "orig", None) or e).strip().splitlines()
    return msg[0][:300] if msg else type(e).__name__


def _default(k: str):
    return "" if k in ("gpu_name", "compute_capability", "driver_version") else 0


def _finite(v) -> bool:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return False
    return f == f and f not in (float("inf"), float("-inf")) and f >= 0


def _f(v):
    return float(v) if _finite(v) else None


def _job_rows(system_id: int, run_id: int | None, job: str, layer_key: str, precision: str, status: str,
              message: str, records: Sequence[Record], wall_s: float | None, keep_choices: bool) -> list:
    """The rows :meth:`Database.write_job` adds for one job (measurements without their ``batch``,
    which the transaction reads; choices when ``keep_choices``; the ``jobs`` row last), the first
    record of equal identity kept, each checked against its columns' lengths (:func:`check_lengths`).
    Raises :class:`ValueTooLong` ("job JOB: table.column holds a value of N characters, ...")."""
    out, seen = [], set()
    for r in records:
        if isinstance(r, ChoiceLine):
            k = ("c", r.source, r.rank)
            if keep_choices and k not in seen:
                seen.add(k)
                out.append(_choice_row(r, system_id, layer_key, precision, run_id))
            continue
        k = ("m", r.call, r.algorithm, r.math, r.dtype, r.cache, r.layout)
        if k not in seen:
            seen.add(k)
            out.append(_measurement_row(r, system_id, layer_key, precision, 0, run_id))
    out.append(JobRow(system_id=system_id, job=job, layer_key=layer_key, precision=precision, status=status,
                      message=message[:2000], run_id=run_id, wall_s=wall_s))
    try:
        for row in out:
            table = type(row).__table__
            check_lengths(table, [{c.name: getattr(row, c.key, None) for c in table.columns}])
    except ValueTooLong as e:
        raise ValueTooLong(f"job {job}: {e}") from None
    return out


def _choice_row(r: ChoiceLine, system_id: int, layer_key: str, precision: str, run_id: int | None) -> Choice:
    """The ``choices`` row of a heuristic's pick (status cut to the column's 64 characters; the
    algorithm as :func:`fit_algorithm` stores it)."""
    return Choice(system_id=system_id, layer_key=layer_key, precision=precision, source=r.source, rank=r.rank,
                  algorithm=fit_algorithm(r.algorithm), math=r.math, status=r.status[:64],
                  workspace_bytes=r.workspace_bytes,
                  run_id=run_id)


def _measurement_row(r: MeasurementLine, system_id: int, layer_key: str, precision: str, batch: int,
                     run_id: int | None) -> Measurement:
    """The ``measurements`` row of a measurement line. A line that says ``ok`` without a finite,
    non-negative median is stored ``failed`` ("no valid time recorded"); only a valid line keeps its
    statistics, never a time that was not measured. ``batch``: the config's ``layer_configs.batch``. An
    algorithm name longer than its column is stored by :func:`fit_algorithm`, whole in ``details``."""
    ok = r.valid
    status, message = r.status, r.message
    if status == "ok" and not ok:
        status, message = "failed", "no valid time recorded"
    stats = {k: _f(getattr(r, k)) if ok else None
             for k in ("median_ms", "q1_ms", "q3_ms", "mean_ms", "min_ms", "max_ms", "stddev_ms", "rse")}
    return Measurement(
        system_id=system_id, layer_key=layer_key, precision=precision, call=r.call, backend=r.backend,
        algorithm=fit_algorithm(r.algorithm),
        math=r.math, dtype=r.dtype, cache=r.cache, layout=r.layout, batch=batch, status=status, message=message,
        note=r.note, **stats, samples=r.samples, converged=r.converged, method=r.method, reps=r.reps,
        host_us=_f(r.host_us), workspace_bytes=r.workspace_bytes, sm_clock_min_mhz=r.sm_clock_min_mhz,
        sm_clock_max_mhz=r.sm_clock_max_mhz, dropped=r.dropped, power_capped=r.power_capped,
        clock_reasons=r.clock_reasons, build_ms=_f(r.build_ms), run_id=run_id,
        details=_details({**(r.details or {}), "algorithm": r.algorithm}
                         if fit_algorithm(r.algorithm) != r.algorithm else r.details))


def system_fingerprint(record: dict) -> str:
    """sha256 over the identity fields of a system record (:data:`SYSTEM_IDENTITY`). A record with a
    ``provenance`` (a public table's system, never measured by benanza) adds its
    :data:`PROVENANCE_IDENTITY` fields, so such a system never takes the fingerprint of a GPU benanza
    measured, and two tables of one GPU from different sources stay two systems; a measured system's
    record has none, and its fingerprint is what it always was."""
    ident = {k: record.get(k, _default(k)) for k in SYSTEM_IDENTITY}
    prov = record.get("provenance")
    if isinstance(prov, dict) and prov:
        ident["provenance"] = {k: prov.get(k, "") for k in PROVENANCE_IDENTITY}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def system_row(record: dict) -> dict:
    """The ``systems`` row of a system record: its fingerprint (:func:`system_fingerprint`), the
    record as ``info`` (canonical JSON) and the :data:`SYSTEM_COLUMNS` (absent ones: "" or 0)."""
    return dict(fingerprint=system_fingerprint(record), info=json.dumps(record, sort_keys=True),
                created_at=utc_now(), **{k: record.get(k, _default(k)) for k in SYSTEM_COLUMNS})


def _read_only_url(path: Path, immutable: bool = True) -> str:
    """The SQLAlchemy URL that opens the SQLite file ``path`` read-only (SQLite's URI parameter
    ``mode=ro``: the file's bytes are never written) and, when ``immutable``, immutable
    (``immutable=1``: no lock, journal or shared-memory file is written beside it, as on a read-only
    mount; for a file this process may not write, whose writer cannot be running here)."""
    from urllib.parse import quote

    return f"sqlite:///file:{quote(str(path.resolve()))}?mode=ro{'&immutable=1' if immutable else ''}&uri=true"


class _OlderSchema(DatabaseError):
    """A database opened read-only whose schema is older than this benanza's (:func:`open_db` reads
    it through an upgraded copy)."""


def _source_url(u, safe: str, create: bool, read_only: bool):
    """(URL, read-only?) for an existing SQLite file: read-only when asked or when this process may
    not write it (a read-only file system, no permission; :class:`DatabaseError` when ``create``);
    other URLs as they are."""
    if u.get_backend_name() != "sqlite" or u.database in (None, "", ":memory:") or not Path(u.database).is_file():
        return u, False
    path = Path(u.database)
    writable = _writable(path)
    if not writable and create:
        raise DatabaseError(f"database {safe}: read-only (no write permission or a read-only file system); "
                            f"measurements cannot be written into it")
    if read_only and writable and _wal_mode(path):
        # a WAL database where its writers may be running: opened as they open it, so that SQLite's
        # -wal and -shm files come and go as for them (mode=ro would leave them behind); SQLite
        # refuses every write (query_only) and the schema is not migrated (read-only)
        return u, True
    if read_only or not writable:
        return sa.engine.make_url(_read_only_url(path, immutable=not writable)), True
    return u, False


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _wal_mode(path: Path) -> bool:
    """Whether the SQLite file's header says WAL mode (bytes 18 and 19 are 2)."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[:16] == b"SQLite format 3\x00" and head[18] == 2 and head[19] == 2


def _source_connection(path: Path):
    """A sqlite3 connection that reads ``path`` as :func:`_source_url` opens it: never writing it."""
    import sqlite3

    if _writable(path) and _wal_mode(path):
        con = sqlite3.connect(path)
        con.execute("PRAGMA query_only=1")
        return con
    return sqlite3.connect(_read_only_url(path, immutable=not _writable(path))[len("sqlite:///"):], uri=True)


def _upgraded_copy(path: Path, safe: str, why: str) -> Database:
    """The SQLite file ``path`` (an older schema, opened read-only) read through a copy in a temporary
    folder (removed when this process ends) upgraded to the current schema: ``path`` is unchanged.
    Raises :class:`DatabaseError` when the copy cannot be made (a full disk...)."""
    import atexit
    import shutil
    import sqlite3
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="benanza-source-"))
    atexit.register(shutil.rmtree, folder, True)
    copy = folder / (path.stem + ".sqlite")
    try:
        src = _source_connection(path)
        try:
            dst = sqlite3.connect(copy)
            try:
                src.backup(dst)  # a consistent snapshot, its WAL's committed pages included
            finally:
                dst.close()
        finally:
            src.close()
    except (sqlite3.Error, OSError) as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise DatabaseError(f"{why}; cannot read it through an upgraded copy in {folder.parent} ({e})") from None
    db = open_db(str(copy), create=False, read_only=False)
    db.label = safe
    db.notices = [f"{why}; read through an upgraded temporary copy, the file unchanged "
                  f"(`benanza db upgrade --db {safe}` upgrades it)"]
    return db


#: the smallest cap on a reference database's unpacked size (bytes), and the cap's ratio to its
#: compressed size: the shipped databases unpack to 3.4 to 8.4 times their size (db/reference)
UNPACK_FLOOR = 64 << 20
UNPACK_RATIO = 64


def unpack_limit(compressed: int) -> int:
    """The most bytes a compressed reference database of ``compressed`` bytes may unpack to:
    ``$BENANZA_MAX_UNPACKED_MB`` MiB when set, else the larger of :data:`UNPACK_FLOOR` and
    :data:`UNPACK_RATIO` times ``compressed`` (a gzip bomb: a 194 KB file of 200 MB is refused).
    Raises :class:`DatabaseError` for a setting that is not a positive number."""
    text = os.environ.get("BENANZA_MAX_UNPACKED_MB", "").strip()
    if not text:
        return max(UNPACK_FLOOR, UNPACK_RATIO * compressed)
    try:
        mb = float(text)
    except ValueError:
        mb = 0.0
    if not (mb > 0 and mb != float("inf")):
        raise DatabaseError(f"BENANZA_MAX_UNPACKED_MB={text!r}: give the most MiB a compressed database may "
                            f"unpack to, a positive number")
    return int(mb * (1 << 20))


def reference_digest(path: Path) -> str:
    """The 16 hex digits of the sha256 of a compressed database's bytes that name its unpacked copy."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def unpack_temp(cache: Path, name: str) -> tuple[int, str]:
    """A new temporary file of this process in ``cache`` for the unpacked copy ``name``: (fd, path)."""
    import tempfile

    return tempfile.mkstemp(dir=cache, prefix=f".{name}.", suffix=".part")


def _unpack_reference(path: Path) -> Path:
    """A gzip-compressed SQLite database (how reference databases ship) unpacked once into the
    cache (``$XDG_CACHE_HOME/benanza/db/<name>-<sha256 prefix>.sqlite``). Processes at their first
    use at once: one unpacks (the cache folder's lock) into a temporary file of its own, checked
    (gzip's CRC and length, SQLite's header, at most :func:`unpack_limit` bytes) and synced, then
    moved into place atomically; the others wait and open it, never a partial file. A temporary
    file that a killed process left (SIGKILL) is removed by the next one to unpack. Raises
    :class:`DatabaseError` (nothing left in the cache) for a damaged or oversized file, a full disk
    (``no space left on``) or a cache that cannot be written."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / "db"
    target = cache / f"{path.name[:-3]}-{reference_digest(path)}.sqlite"
    if target.exists():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _cache_error(path, cache, e) from None
    with _folder_lock(target):
        if target.exists():  # another process unpacked it while this one waited
            return target
        for stale in cache.glob(f".{target.name}.*.part"):  # a killed unpacker's (the lock's holder writes alone)
            stale.unlink(missing_ok=True)
        try:
            fd, tmp = unpack_temp(cache, target.name)
        except OSError as e:
            raise _cache_error(path, cache, e) from None
        try:
            _gunzip_into(path, fd, unpack_limit(path.stat().st_size), cache)
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
    return target


def _gunzip_into(path: Path, fd: int, limit: int, cache: Path) -> None:
    """Unpack ``path`` into ``fd`` (closed here, synced), at most ``limit`` bytes, starting with
    SQLite's header; :class:`DatabaseError` otherwise."""
    import gzip
    import zlib

    size = 0
    with os.fdopen(fd, "wb") as dst:
        try:
            with gzip.open(path) as src:
                while True:
                    try:
                        block = src.read(1 << 20)
                    except (OSError, EOFError, zlib.error) as e:
                        raise DatabaseError(f"database {path}: not a gzip-compressed database ({e})") from None
                    if not block:
                        break
                    if size == 0 and not block.startswith(b"SQLite format 3\x00"):
                        raise DatabaseError(f"database {path}: not a gzip-compressed SQLite database")
                    size += len(block)
                    if size > limit:
                        raise DatabaseError(f"database {path}: unpacks to more than {limit / (1 << 20):g} MiB, "
                                            f"refused (a gzip bomb?); the limit is BENANZA_MAX_UNPACKED_MB, by default "
                                            f"{UNPACK_RATIO} times the compressed size and at least "
                                            f"{UNPACK_FLOOR >> 20} MiB")
                    dst.write(block)
            dst.flush()
            os.fsync(dst.fileno())
        except OSError as e:  # writing the copy (reading errors are caught above)
            raise _cache_error(path, cache, e) from None
    if size == 0:
        raise DatabaseError(f"database {path}: empty, not a gzip-compressed SQLite database")


def _cache_error(path: Path, cache: Path, e: OSError) -> DatabaseError:
    import errno

    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return DatabaseError(f"{cache}: no space left on device (unpacking {path}; nothing was left in the cache)")
    return DatabaseError(f"database {path}: cannot unpack it into {cache} ({e.strerror or e})")


def migrations_dir() -> Path:
    """db/migrations of a source checkout, or the copy inside the installed package."""
    pkg = Path(__file__).resolve().parents[1]  # the benanza package
    for p in (pkg / "_data" / "migrations", pkg.parent / "db" / "migrations"):
        if (p / "env.py").is_file():
            return p
    raise DatabaseError("benanza's database migrations are missing (broken install?)")


def _alembic_config(conn):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["connection"] = conn
    return cfg


def _at_head(conn, tables: set[str]) -> bool:
    """The database is benanza's at this version's schema (its ``schema_info`` version and its Alembic
    revision, ``alembic_version``, this version's), read with two queries: the common case needs no
    Alembic import (0.15 s at each command's start)."""
    if not {"schema_info", "alembic_version"} <= tables:
        return False
    row = conn.execute(select(SchemaInfo.value).where(SchemaInfo.key == "schema_version")).first()
    if not row or str(row[0]) != str(SCHEMA_VERSION):
        return False
    revs = [r[0] for r in conn.execute(sa.text("SELECT version_num FROM alembic_version"))]
    return revs == [HEAD_REVISION]


def _prepare_schema(conn, safe: str, create: bool, read_only: bool = False) -> list[str]:
    """Create a new database at the head schema, or bring an existing one to it (Alembic).

    Refuses a database of a newer schema or one that is not benanza's, and a ``read_only`` one
    below the head schema (it cannot be upgraded in place). Returns notices."""
    insp = sa.inspect(conn)
    tables = set(insp.get_table_names())
    if _at_head(conn, tables):
        return []
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    cfg = _alembic_config(conn)
    script = ScriptDirectory.from_config(cfg)
    if not tables:
        if not create:
            raise DatabaseError(f"database {safe}: empty, not a benanza performance database")
        Base.metadata.create_all(conn)
        conn.execute(sa.insert(SchemaInfo).values(key="schema_version", value=str(SCHEMA_VERSION)))
        command.stamp(cfg, "head")
        return []
    if "schema_info" not in tables:
        if tables & {"measurements", "systems"}:
            raise DatabaseError(f"database {safe}: has benanza-like tables but no schema version")
        raise DatabaseError(f"database {safe}: not a benanza performance database (tables: "
                            f"{', '.join(sorted(tables)[:5])})")
    row = conn.execute(select(SchemaInfo.value).where(SchemaInfo.key == "schema_version")).first()
    version = int(row[0]) if row and str(row[0]).isdigit() else 0
    if version > SCHEMA_VERSION:
        raise DatabaseError(f"database {safe}: schema version {version} is newer than this benanza "
                            f"({SCHEMA_VERSION}); upgrade benanza")
    current = MigrationContext.configure(conn).get_current_revision()
    if current is None:
        if version != 1:
            raise DatabaseError(f"database {safe}: schema version {version or '?'} without a migration "
                                f"record; cannot upgrade it")
        command.stamp(cfg, "0001")  # written by benanza 0.1 before migrations were recorded
        current = "0001"
    try:
        known = {r.revision for r in script.walk_revisions()}
    except Exception as e:
        raise DatabaseError(f"database {safe}: migration scripts unreadable ({_first_line(e)})") from None
    if current not in known:
        raise DatabaseError(f"database {safe}: schema revision {current} is unknown to this benanza "
                            f"(written by a newer version?)")
    if current != script.get_current_head():
        if read_only:  # open_db reads it through an upgraded temporary copy
            raise _OlderSchema(f"database {safe}: schema revision {current} is older than this benanza's "
                               f"{script.get_current_head()}")
        command.upgrade(cfg, "head")
        return [f"database {safe}: upgraded the schema from revision {current} to {script.get_current_head()}"]
    return []


def open_db(url: str | None = None, create: bool = True, read_only: bool | None = None) -> Database:
    """Open (and, when ``create``, create) the database at ``url`` (URL or path; default
    :func:`default_url`). A path ending in ``.gz`` is a compressed reference database, opened
    read-only (``create=False``) from an unpacked copy. ``read_only`` (None: ``not create``): a SQLite
    file is a source whose bytes never change: opened with SQLite's ``mode=ro`` (its journal mode
    kept, no schema written), and one of an older schema read through an upgraded temporary copy (a
    notice says so); ``read_only=False`` with ``create=False`` upgrades it in place (``db upgrade``).
    Raises :class:`DatabaseError` with one line when it cannot be opened or was written by a newer
    schema."""
    if read_only is None:
        read_only = not create
    if url and "://" not in url and url.endswith(".gz"):
        path = Path(url).expanduser()
        if create:
            raise DatabaseError(f"database {url}: a compressed reference database is read-only; "
                                f"gunzip a copy to write measurements into it")
        if not path.is_file():
            raise DatabaseError(f"database {url}: no such file")
        label = str(url)
        url = str(_unpack_reference(path))
        read_only = False  # the cache's own copy, upgraded in place when its schema is older
    else:
        label = None
    url = normalize_url(url)
    try:
        u = sa.engine.make_url(url)
    except ArgumentError:
        raise DatabaseError(f"cannot parse database URL {url!r}") from None
    safe = label or u.render_as_string(hide_password=True)
    if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:"):
        path = Path(u.database)
        if path.is_dir():
            raise DatabaseError(f"database {safe}: is a directory")
        if not path.exists():
            if not create:
                raise DatabaseError(f"database {safe}: no such file")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatabaseError(f"database {safe}: cannot create {path.parent}: {e.strerror}") from None
    given = u.database  # the SQLite file's path, before a read-only URL names it
    u, read_only = _source_url(u, safe, create, read_only)
    try:
        engine = sa.create_engine(u, future=True, connect_args=_connect_args(u))
    except (NoSuchModuleError, ImportError) as e:
        raise DatabaseError(f"database {safe}: driver not available ({_first_line(e)})") from None
    except (ArgumentError, TypeError, ValueError) as e:
        raise DatabaseError(f"database {safe}: {_first_line(e)}") from None
    sqlite_file = Path(u.database) if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:") \
        and not read_only else None
    fresh = sqlite_file is not None and not sqlite_file.exists()
    if u.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_read_only_pragmas if read_only else _sqlite_pragmas)
    notices: list[str] = []
    try:
        with _folder_lock(sqlite_file):
            try:
                if (sqlite_file is not None and not fresh) or read_only:
                    _quick_check(engine, safe, given if u.get_backend_name() == "sqlite" else None)
                with engine.begin() as conn:
                    _schema_lock(conn)  # then _prepare_schema looks at the tables (another may have made them)
                    notices = _prepare_schema(conn, safe, create, read_only)
            except BaseException:
                engine.dispose()
                if fresh:  # created by this call, its schema not written (a full disk...): leave nothing
                    for suffix in ("", "-wal", "-shm", "-journal"):
                        Path(str(sqlite_file) + suffix).unlink(missing_ok=True)
                raise
    except _OlderSchema as e:
        return _upgraded_copy(Path(given), safe, str(e))
    except DatabaseError:
        raise
    except (OperationalError, SQLAlchemyError, OSError) as e:
        raise _open_error(given or safe, safe, e) from None
    except BaseException:  # a Ctrl-C as the folder's lock is let go: the connection made is closed too
        engine.dispose()
        raise
    return _opened(engine, url, label, notices, sqlite_file if fresh else None)


def _opened(engine, url: str, label: str | None, notices: list[str], fresh: Path | None) -> Database:
    """:func:`open_db`'s :class:`Database` of ``engine``; ``fresh``: the SQLite file it created. A Ctrl-C
    here closes the engine's connection."""
    try:
        db = Database(engine, url, label)
        db.notices = notices
        if fresh is not None:
            _FRESH.append(fresh)
        return db
    except BaseException:
        engine.dispose()
        raise


def _open_error(path: str, safe: str, e: BaseException) -> DatabaseError:
    """The one line of a database that could not be opened or created: a full disk
    (:func:`disk_full`) names the file ``path``."""
    if disk_full(e):
        return DatabaseError(f"{path}: no space left on device (opening the database: {_first_line(e)}; "
                             f"nothing was written)")
    if type(getattr(e, "orig", None)).__name__ == "ConnectionTimeout":  # psycopg's, past _connect_args' bound
        return DatabaseError(f"cannot open database {safe}: the server did not answer within "
                             f"{max(2, math.ceil(connect_timeout())):g} s (BENANZA_CONNECT_TIMEOUT sets the wait)")
    return DatabaseError(f"cannot open database {safe}: {_first_line(e)}")


#: SQLite files this process created (open_db); :func:`discard_fresh` removes the ones still empty
_FRESH: list[Path] = []


def fresh_mark() -> int:
    """A mark for :func:`discard_fresh`: the files created from now on."""
    return len(_FRESH)


def discard_fresh(since: int = 0) -> list[Path]:
    """Remove the SQLite files this process created (after mark ``since``) that hold no system,
    run, job or measurement (a command that failed must leave nothing behind); returns what it
    removed. Another process that wrote into one meanwhile keeps it (the rows are checked under the
    folder's lock)."""
    gone = []
    for path in list(_FRESH[since:]):
        _FRESH.remove(path)
        if not path.is_file():
            continue
        import sqlite3

        with _folder_lock(path):
            try:
                con = sqlite3.connect(path)
                try:
                    n = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                            for t in ("systems", "runs", "jobs", "measurements"))
                finally:
                    con.close()
            except sqlite3.Error:
                continue
            if n == 0:
                for suffix in ("", "-wal", "-shm"):
                    Path(str(path) + suffix).unlink(missing_ok=True)
                gone.append(path)
    return gone


@contextmanager
def _folder_lock(path: Path | None):
    """An exclusive lock (flock) on the SQLite file's folder while its schema is prepared, so that
    processes opening one fresh file at once create its tables once (no lock file is left)."""
    if path is None:
        yield
        return
    try:
        import fcntl

        fd = os.open(path.parent, os.O_RDONLY)
    except (ImportError, OSError):  # no flock here (another OS, an unreadable folder): SQLite's own locks
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without flock (some network file systems)
            pass
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass
        os.close(fd)


def _quick_check(engine, safe: str, path: str | None = None) -> None:
    """Refuse a damaged SQLite file (``PRAGMA quick_check``, SQLite's O(N) structural check: 80 ms for a
    50 MB file, growing with it). A file ``path`` found intact is remembered by its state (device, inode,
    size and modification time of it and its ``-wal``; :func:`_file_state`) in the user's cache, and
    the check is not run again until that state changes: a command that reads an unchanged database pays
    it once. SQLite still refuses a damaged page it reads ("database disk image is malformed")."""
    state = _file_state(path)
    if state is not None and _checked_states().get(state[0]) == state[1]:
        return
    try:
        with engine.connect() as conn:
            rows = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check").fetchall()]
    except (OperationalError, SQLAlchemyError) as e:
        raise DatabaseError(f"database {safe}: damaged or not a database ({_first_line(e)})") from None
    if rows != ["ok"]:
        raise DatabaseError(f"database {safe}: damaged: PRAGMA quick_check says {rows[0][:120]!r}"
                            f"{f' and {len(rows) - 1} more problems' if len(rows) > 1 else ''}")
    if state is not None:
        _remember_checked(*state)


def _checked_file() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / "checked-databases.json"


def _file_state(path: str | None) -> tuple[str, list[int]] | None:
    """(the file's absolute path, [dev, inode, size, mtime_ns, and the same of its -wal or zeros]); None
    for no file."""
    if not path:
        return None
    try:
        p = Path(path).resolve()
        st = p.stat()
    except OSError:
        return None
    try:
        w = Path(str(p) + "-wal").stat()
        wal = [w.st_size, w.st_mtime_ns]
    except OSError:
        wal = [0, 0]
    return str(p), [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, *wal]


def _checked_states() -> dict:
    try:
        doc = json.loads(_checked_file().read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _remember_checked(path: str, state: list[int]) -> None:
    """Record ``path``'s intact ``state`` (at most 64 files, the newest kept), written atomically; a cache
    that cannot be written is no error (the check simply runs again next time)."""
    import tempfile

    doc = {k: v for k, v in _checked_states().items() if k != path}
    doc = dict(list(doc.items())[-63:]) | {path: state}
    target = _checked_file()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".checked.", suffix=".part")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, target)
    except OSError:
        pass
    finally:
        Path(tmp).unlink(missing_ok=True)


