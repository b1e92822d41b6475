"""Hardware counters per measured implementation (table ``kernel_counters``, schema 5:
db/migrations/versions/0005_kernel_counters.py), written by `benanza bench --counters`
(:mod:`benanza.runner.counters`): one row per kernel an implementation launched, keyed like a
measurement (system, layer config, precision, call, algorithm, math, layout) plus the kernel's
launch index. Units: percentages of peak (0-100), bytes, ns.
"""
from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy import select

from benanza.database.store import Database, KernelCounter, retrying  # noqa: F401 (the table, re-exported)


#: what identifies an implementation: (layer key, precision, call, algorithm, math, layout)
ImplKey = tuple[str, str, str, str, str, str]


def implementation_key(t, precision: str) -> ImplKey:
    """The :data:`ImplKey` of a measured layer or call ``t`` in ``precision``: an analysis's LayerTime
    (its layer's config key) or a training step's BackwardTime (its ``key``), with the call, algorithm,
    math and layout of the measurement it took."""
    key = t.key if isinstance(getattr(t, "key", None), str) else t.layer.key
    return (key, precision, t.call, t.algorithm, t.math, t.layout)


@retrying
def write_counters(db: Database, system_id: int, impl: ImplKey, kernels: list[dict], tool: str = "") -> None:
    """Store the kernels of one implementation (dicts of :class:`KernelCounter`'s per-kernel fields:
    kernel_index, kernel_name, block_size, grid_size, dram_pct, dram_bytes, sm_pct, occupancy_pct,
    duration_ns), replacing what was stored for it on the system, in one transaction (run again when a
    concurrent writer of the same implementation got in the way: :func:`benanza.database.store.retrying`)."""
    key, precision, call, algorithm, math, layout = impl
    ident = dict(system_id=system_id, layer_key=key, precision=precision, call=call, algorithm=algorithm,
                 math=math, layout=layout)
    with db.session() as s:
        s.execute(sa.delete(KernelCounter).where(*(getattr(KernelCounter, k) == v for k, v in ident.items())))
        for k in kernels:
            s.add(KernelCounter(**ident, tool=tool, **k))


def read_counters(db: Database, system_id: int, keys: list[str]) -> dict[ImplKey, list[KernelCounter]]:
    """The stored kernels of every implementation of ``keys`` on a system, by implementation, in
    launch order. A database written before schema 5 has none."""
    out: dict[ImplKey, list[KernelCounter]] = {}
    with db.session() as s:
        for i in range(0, len(keys), 500):
            rows = s.scalars(select(KernelCounter).where(KernelCounter.system_id == system_id,
                                                         KernelCounter.layer_key.in_(keys[i:i + 500]))
                             .order_by(KernelCounter.kernel_index)).all()
            for r in rows:
                out.setdefault((r.layer_key, r.precision, r.call, r.algorithm, r.math, r.layout), []).append(r)
        s.expunge_all()
    return out


#: a unit (DRAM or SM) at or above this % of its peak bounds the kernel; below it on both, the kernel
#: is latency-bound: Nsight Compute's SOLBottleneck rule ("Achieved compute throughput and/or memory
#: bandwidth below 60.0% of peak typically indicate latency issues")
BOUND_PCT = 60.0


@dataclass(frozen=True)
class CounterSummary:
    """An implementation's kernels together: their names, DRAM bytes (sum), and DRAM throughput,
    SM throughput and achieved occupancy averaged over the kernels weighted by duration (%),
    total duration (ns); ``bound``: ``memory``, ``compute`` or ``latency`` and ``why`` in words."""

    kernels: tuple[str, ...]
    dram_bytes: float | None
    dram_pct: float | None
    sm_pct: float | None
    occupancy_pct: float | None
    duration_ns: float | None
    bound: str
    why: str

    def to_dict(self) -> dict:
        return dict(self.__dict__, kernels=list(self.kernels))


def _weighted(rows, field: str) -> float | None:
    vals = [(getattr(r, field), r.duration_ns or 0.0) for r in rows if getattr(r, field) is not None]
    if not vals:
        return None
    w = sum(d for _, d in vals)
    return sum(v * d for v, d in vals) / w if w > 0 else sum(v for v, _ in vals) / len(vals)


def summarize(rows) -> CounterSummary:
    """The :class:`CounterSummary` of one implementation's kernel rows (objects with the fields of
    :class:`KernelCounter`). The verdict, after Nsight Compute's SOLBottleneck rule
    (:data:`BOUND_PCT`): the unit at or above 60 % of its peak bounds it (the higher one when both);
    when neither is, it is latency-bound (too few warps or too little work in flight to load either
    unit; the achieved occupancy says how many warps were there)."""
    rows = list(rows)
    dram, sm, occ = _weighted(rows, "dram_pct"), _weighted(rows, "sm_pct"), _weighted(rows, "occupancy_pct")
    d, s_ = dram or 0.0, sm or 0.0
    if max(d, s_) >= BOUND_PCT:
        bound = "memory" if d >= s_ else "compute"
        why = (f"DRAM at {d:.0f} % of peak" if bound == "memory" else f"SM at {s_:.0f} % of peak")
    else:
        bound = "latency"
        why = (f"DRAM {d:.0f} %, SM {s_:.0f} %: neither unit near its peak"
               + (f"; occupancy {occ:.0f} %" if occ is not None else ""))
    total = sum(r.duration_ns for r in rows if r.duration_ns is not None) if any(
        r.duration_ns is not None for r in rows) else None
    nbytes = sum(r.dram_bytes for r in rows if r.dram_bytes is not None) if any(
        r.dram_bytes is not None for r in rows) else None
    return CounterSummary(tuple(r.kernel_name for r in rows), nbytes, dram, sm, occ, total, bound, why)
