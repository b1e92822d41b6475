"""Roofline quantities of a layer config: FLOPs, the minimum bytes it must move, arithmetic
intensity, and the roofline bound on a machine with given ceilings.

The roofline model (Williams, Waterman and Patterson, "Roofline: an insightful visual performance
model for multicore architectures", CACM 52(4), 2009): a kernel doing F floating-point operations
and moving B bytes to and from DRAM takes at least ``max(F / peak_flops, B / bandwidth)``.

Minimum bytes, intensity and the FP32 FMA plausibility check live with the layer kinds (:mod:`benanza.kinds.bounds`, re-exported here). FLOPs are the
configs' own :meth:`benanza.kinds.LayerConfig.flops` (a multiply-add is 2 FLOPs).
"""
from __future__ import annotations

from dataclasses import dataclass

from benanza import kinds as L
from benanza.errors import UsageError
from benanza.kinds.bounds import (FMA_PLAUSIBILITY_MARGIN, GEMM_KINDS, MAX_FP32_LANES_PER_SM,  # noqa: F401
                                  fp32_fma_bound, implausible_fma, intensity, min_bytes)


@dataclass(frozen=True)
class Ceilings:
    """A machine's roofs: ``flops_per_s`` the peak rate of the precision's math (FLOP/s) and
    ``bytes_per_s`` the DRAM bandwidth (bytes/s)."""

    flops_per_s: float
    bytes_per_s: float

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOPs/byte) where the two roofs meet."""
        return self.flops_per_s / self.bytes_per_s


@dataclass(frozen=True)
class RooflinePoint:
    """A layer on the roofline: its FLOPs, bytes, intensity, the bound (ms) and which roof sets it."""

    flops: int
    bytes: int
    intensity: float
    bound_ms: float
    limit: str  # "compute" or "memory"


def bound(config: L.LayerConfig, precision: str, ceilings: Ceilings) -> RooflinePoint:
    """The roofline bound of ``config``: max(FLOPs / peak, bytes / bandwidth), in ms
    (Williams et al. 2009). Raises UsageError for non-positive ceilings."""
    if ceilings.flops_per_s <= 0 or ceilings.bytes_per_s <= 0:
        raise UsageError("roofline ceilings must be positive")
    f, b = config.flops(), min_bytes(config, precision)
    t_c, t_m = f / ceilings.flops_per_s, b / ceilings.bytes_per_s
    return RooflinePoint(f, b, f / b if b else 0.0, max(t_c, t_m) * 1e3, "compute" if t_c >= t_m else "memory")


#: L2 read bandwidth per SM per clock (bytes): NVIDIA's A100 whitepaper gives the A100's L2 read
#: bandwidth as 5120 bytes/clk over its 108 SMs ("NVIDIA A100 Tensor Core GPU Architecture", 2020,
#: table "A100 vs V100": V100 2048 bytes/clk). Datasheets give no L2 bandwidth for later GPUs, so
#: without a measurement (`benanza ceilings`, ``l2_bandwidth``) the L2 roof is this per-SM rate times
#: SMs x boost clock: an estimate, and every output that draws it says so.
L2_BYTES_PER_CLOCK_PER_SM = 5120 / 108


@dataclass(frozen=True)
class L2Roof:
    """The L2 roof: ``bytes_per_s`` and where it comes from (``measured``: `benanza ceilings`'
    ``l2_bandwidth``; ``estimate``: :data:`L2_BYTES_PER_CLOCK_PER_SM` x SMs x clock)."""

    bytes_per_s: float
    source: str

    @property
    def label(self) -> str:
        """The legend text: value and source."""
        what = ("measured by `benanza ceilings`" if self.source == "measured" else
                "estimate: A100 whitepaper's 5120 B/clk per 108 SMs x SMs x clock; no datasheet figure")
        return f"L2 {self.bytes_per_s / 1e12:.2f} TB/s ({what})"


def l2_roof(sm_count: int, boost_clock_mhz: float, measured: dict | None = None) -> L2Roof:
    """The L2 roof of a GPU of ``sm_count`` SMs at ``boost_clock_mhz`` MHz: the ``l2_bandwidth``
    ceiling of ``measured`` (name -> row with ``.value`` in bytes/s, as
    :meth:`benanza.database.store.Database.ceilings` returns) when there is one, else the
    :data:`L2_BYTES_PER_CLOCK_PER_SM` estimate. Raises UsageError for a GPU without SMs or clock."""
    row = (measured or {}).get("l2_bandwidth")
    if row is not None and row.value > 0:
        return L2Roof(float(row.value), "measured")
    if sm_count <= 0 or boost_clock_mhz <= 0:
        raise UsageError("the L2 roof needs the GPU's SM count and clock")
    return L2Roof(L2_BYTES_PER_CLOCK_PER_SM * sm_count * boost_clock_mhz * 1e6, "estimate")


def l2_resident(config_bytes: int, l2_bytes: int | None, cache: str) -> bool:
    """Whether a layer's working set (``config_bytes``, its minimum bytes, :func:`min_bytes`) stays in
    the L2 cache of ``l2_bytes`` between the timed calls: warm measurements (back-to-back calls) of a
    working set that fits. Its DRAM roof is then no bound (the data comes from L2: an efficiency above
    100 % against it); cold measurements flush L2 before each call, so their DRAM roof holds."""
    return cache == "warm" and bool(l2_bytes) and 0 < config_bytes <= l2_bytes


def roof_label(limit: str, resident: bool) -> str:
    """The roof a layer's bound comes from, as tables show it: ``compute``, ``memory`` (DRAM), or
    ``memory, L2-resident`` for a memory-bound layer whose working set fits L2 (:func:`l2_resident`:
    its DRAM bound is not a bound)."""
    return "memory, L2-resident" if limit == "memory" and resident else limit
