"""Typed records of what a benchmark worker prints: one ``measurement`` or ``choice`` JSON line.

The generated suites print these lines from ``cpp/src/harness.cpp`` (``base_record``, ``Bench::record``,
``Bench::choice``, ``Bench::emit_sampled``, ``stats_fields``; the screened record in ``Bench::measure``,
the raced-out one in ``Bench::emit_raced_out``);
the framework's worker (:mod:`benanza.profiles.torch_candidates`) prints the same keys. The runner
parses each line with :meth:`MeasurementLine.from_json` / :meth:`ChoiceLine.from_json` (or
:func:`parse_record`) and the database stores the typed records
(:meth:`benanza.database.store.Database.write_job`), so both sides read one definition of the line.
Times are in ms (``host_us``: µs per call on the host), sizes in bytes, clocks in MHz.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
from dataclasses import dataclass, field

from benanza.kinds.backend import Backend


class RecordError(ValueError):
    """A worker's line that is not a well-formed record: the message names the field and what it held."""


@dataclass(frozen=True)
class MeasurementLine:
    """One library call timed (or not) in one job: a ``"type": "measurement"`` line.

    Identity: ``call``, ``algorithm``, ``math``, ``dtype``, ``cache`` (``warm``: CUDA graph replays
    of ``reps`` calls; ``cold``: one call after flushing L2), ``layout``. ``status``: ``ok``,
    ``not_supported``, ``skipped``, ``raced_out`` (on its screen; or on its warm-up, by the gross
    screen of stats.hpp's ``RaceRule::gross_out``: ``estimate_ms`` is then the warm-up's mean and
    ``message`` begins "raced out on its warm-up"),
    ``screened`` or ``failed`` (``message`` says why). Statistics of
    the samples (ms per call; :func:`benanza.profiles.torch_candidates.summarize` and the harness's
    ``summarize`` compute them the same way): ``median_ms``, ``q1_ms``, ``q3_ms``, ``mean_ms``,
    ``min_ms``, ``max_ms``, ``stddev_ms``, ``rse`` (relative standard error of the median),
    ``samples``, ``converged``. Clock watch (NVML): ``dropped`` samples discarded for a clock
    slowdown, ``power_capped`` kept under the power cap, ``clock_reasons`` (bitmask seen),
    ``sm_clock_min_mhz`` / ``sm_clock_max_mhz``. ``estimate_ms``: a screened call's per-call estimate, or
    a raced-out call's screen median, with ``lcb_ms``/``ucb_ms`` its median's confidence bounds and
    ``best_ms``/``best_ucb_ms`` the job's best so far and its upper bound (stats.hpp, RaceRule);
    ``warmup_ms`` / ``warmup_calls``: the warm-up; ``build_ms``: an engine plan's build time (not
    timed); ``details``: the implementation beyond its name (engine knobs, cuBLASLt tile...);
    ``backend``: the runtime the call ran in (:class:`benanza.kinds.backend.Backend`; the framework's
    worker says ``torch_eager``; a line without one, as the suite prints, takes
    :meth:`Backend.of_call <benanza.kinds.backend.Backend.of_call>` of its call);
    ``cost_ms``: the harness's own time per phase (``--profile``); ``samples_ms``: every sample
    (``--dump-samples``).
    """

    call: str
    algorithm: str
    math: str
    dtype: str
    status: str
    type: str = "measurement"
    job: str = ""
    layer_key: str = ""
    kind: str = ""
    precision: str = ""
    cache: str = "warm"
    layout: str = "NCHW"
    workspace_bytes: int = 0
    message: str = ""
    note: str = ""
    build_ms: float | None = None
    details: dict = field(default_factory=dict)
    method: str = ""
    reps: int | None = None
    host_us: float | None = None
    estimate_ms: float | None = None
    lcb_ms: float | None = None
    ucb_ms: float | None = None
    best_ms: float | None = None
    best_ucb_ms: float | None = None
    warmup_ms: float | None = None
    warmup_calls: int | None = None
    median_ms: float | None = None
    q1_ms: float | None = None
    q3_ms: float | None = None
    mean_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    stddev_ms: float | None = None
    rse: float | None = None
    samples: int | None = None
    converged: bool | None = None
    dropped: int | None = None
    power_capped: int | None = None
    clock_reasons: int | None = None
    sm_clock_min_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    cost_ms: dict | None = None
    samples_ms: tuple[float, ...] | None = None
    backend: Backend | None = None

    def __post_init__(self):
        if self.backend is None:  # never None once built
            object.__setattr__(self, "backend", Backend.of_call(self.call))
        elif not isinstance(self.backend, Backend):
            object.__setattr__(self, "backend", Backend.parse(self.backend))

    @classmethod
    def from_json(cls, d: dict) -> "MeasurementLine":
        """The record of a parsed line. Raises :class:`RecordError` when ``type`` is not
        ``measurement``, a required key (call, algorithm, math, dtype, status) is missing or a value
        has the wrong JSON type. Keys this version does not know are ignored (a newer worker)."""
        return _build(cls, d)

    @property
    def valid(self) -> bool:
        """``status`` ok with a finite, non-negative median (what the database stores as a time)."""
        return self.status == "ok" and _finite(self.median_ms)


@dataclass(frozen=True)
class ChoiceLine:
    """A library heuristic's pick for a job's config: a ``"type": "choice"`` line (``Bench::choice``).
    ``source``: the heuristic (e.g. ``cudnnGetConvolutionForwardAlgorithm_v7``), ``rank``: its order
    (0 first), ``algorithm``/``math``: what it picked, ``status``: the library's status of that pick,
    ``workspace_bytes``: the workspace it asks for."""

    source: str
    rank: int
    algorithm: str
    math: str
    status: str
    type: str = "choice"
    job: str = ""
    layer_key: str = ""
    kind: str = ""
    precision: str = ""
    workspace_bytes: int = 0

    @classmethod
    def from_json(cls, d: dict) -> "ChoiceLine":
        """The record of a parsed line. Raises :class:`RecordError` as :meth:`MeasurementLine.from_json`
        does (required: source, rank, algorithm, math, status)."""
        return _build(cls, d)


#: statuses whose message holds a time estimate (ms per call): a call that left the race
#: (``Bench::emit_raced_out``: its screen's median) or was screened (racing off: its one replay)
ESTIMATED_STATUSES = ("raced_out", "screened")
_ESTIMATE = re.compile(r"^(?:screened|raced out): ([0-9.]+(?:[eE][-+]?[0-9]+)?) ms per call")


def estimated_ms(status: str, message: str | None) -> float | None:
    """The time estimate (ms per call) a raced-out or screened record's message gives, else None."""
    hit = _ESTIMATE.match(message or "") if status in ESTIMATED_STATUSES else None
    return float(hit.group(1)) if hit else None


#: what a worker's ``type`` names
RECORD_TYPES = {"measurement": MeasurementLine, "choice": ChoiceLine}

Record = typing.Union[MeasurementLine, ChoiceLine]


def parse_record(d: dict) -> Record | None:
    """The typed record of a parsed line of ``type`` measurement or choice; None for the other lines
    of the protocol (system, job_start, job_end, fatal). Raises :class:`RecordError` for a malformed one."""
    cls = RECORD_TYPES.get(d.get("type")) if isinstance(d, dict) else None
    return cls.from_json(d) if cls is not None else None


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _allowed(annotation) -> tuple[type, bool]:
    """(the JSON value type a field takes, whether null is allowed) from its annotation."""
    hint = annotation
    args = typing.get_args(hint)
    nullable = type(None) in args
    if args and (typing.get_origin(hint) in (typing.Union, types.UnionType)):
        hint = next(a for a in args if a is not type(None))
    origin = typing.get_origin(hint) or hint
    return origin, nullable


def _check(what: str, name: str, value, annotation):
    """``value`` as a field ``name`` of type ``annotation`` takes it, or RecordError (``what``: the line)."""
    want, nullable = _allowed(annotation)
    if value is None:
        if nullable:
            return None
        raise RecordError(f"{what}: {name!r} is null, expected {_TYPE_NAMES[want]}")
    if not _ACCEPTS[want](value):
        shown = repr(value)
        raise RecordError(f"{what}: {name!r} is {shown[:60]}{'...' if len(shown) > 60 else ''} "
                          f"({type(value).__name__}), expected {_TYPE_NAMES[want]}")
    if want is float:
        return float(value)
    if want is Backend:
        return Backend(value)
    return tuple(float(x) for x in value) if want is tuple else value


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: the JSON values each field type takes (a bool is not a number; a list of numbers is a tuple field)
_ACCEPTS = {str: lambda v: isinstance(v, str), int: lambda v: isinstance(v, int) and not isinstance(v, bool),
            float: _number, bool: lambda v: isinstance(v, bool), dict: lambda v: isinstance(v, dict),
            tuple: lambda v: isinstance(v, list) and all(_number(x) for x in v),
            Backend: lambda v: isinstance(v, str) and v in {b.value for b in Backend}}
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true or false", dict: "an object",
               tuple: "a list of numbers", Backend: f"one of {', '.join(b.value for b in Backend)}"}


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _build(cls, d: dict):
    if not isinstance(d, dict):
        raise RecordError(f"a record is a JSON object, not {type(d).__name__}")
    typ = cls.__dataclass_fields__["type"].default
    if d.get("type") != typ:
        raise RecordError(f"{typ} line: 'type' is {d.get('type')!r}, expected {typ!r}")
    what = f"{typ} line of job {d['job']!r}" if isinstance(d.get("job"), str) and d["job"] else f"{typ} line"
    hints = _hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"{what}: no {f.name!r}")
            continue
        kw[f.name] = _check(what, f.name, d[f.name], hints[f.name])
    return cls(**kw)
