"""Roofline quantities of a layer config: FLOPs, the minimum bytes it must move, arithmetic
intensity, and the roofline bound on a machine with given ceilings.

The roofline model (Williams, Waterman and Patterson, "Roofline: an insightful visual performance
model for multicore architectures", CACM 52(4), 2009): a kernel doing F floating-point operations
and moving B bytes to and from DRAM takes at least ``max(F / peak_flops, B / bandwidth)``.

Minimum bytes: every input tensor read once and the output written once, in the storage data type
of the precision (:data:`BYTES_PER_ELEMENT`; fp8 GEMMs read 1-byte E4M3 inputs and write a 2-byte
output, their other layers run in fp16), with the exceptions that change what a layer must touch:
a Slice or Gather reads only the elements it outputs (plus 8-byte int64 indices), Where's condition
is 1 byte per element, LayerNorm's scale and bias are float32, unary and binary elementwise ops
on bool or integer data move their stored element size (:data:`benanza.kinds.STORED_TYPES`; a
bool output, of IsNaN or a comparison, is 1 byte; a Cast reads its source type), an LSTM/GRU reads its weight matrices
(gates x hidden x (input + hidden) per direction) once. Caches can only lower DRAM traffic below
this when data is reused across layers, which the per-layer model does not count. FLOPs are the
configs' own :meth:`benanza.kinds.LayerConfig.flops` (a multiply-add is 2 FLOPs).
"""
from __future__ import annotations

from dataclasses import dataclass

from benanza import kinds as L
from benanza.errors import UsageError
from benanza.kinds.precision import BYTES_PER_ELEMENT


def _elem(precision: str, config: L.LayerConfig) -> tuple[int, int]:
    """(input bytes, output bytes) per element for ``config`` measured in ``precision``."""
    if precision not in BYTES_PER_ELEMENT:
        raise UsageError(f"unknown data type {precision!r} (choose from {', '.join(BYTES_PER_ELEMENT)})")
    if precision == "fp8":
        return (1, 2) if config.kind in L.FP8_KINDS else (2, 2)
    b = BYTES_PER_ELEMENT[precision]
    return b, b


def min_bytes(config: L.LayerConfig, precision: str = "fp32") -> int:
    """The fewest bytes ``config`` must move to and from memory in ``precision`` (each input read
    once, the output written once; see the module docstring): its kind's
    :attr:`benanza.kinds.base.Kind.min_bytes`. Raises UsageError for an unknown precision."""
    ib, ob = _elem(precision, config)
    return L.REGISTRY[config.kind].min_bytes(config, ib, ob)


def intensity(config: L.LayerConfig, precision: str = "fp32") -> float:
    """Arithmetic intensity, FLOPs per byte of :func:`min_bytes` (0 for a layer without FLOPs)."""
    b = min_bytes(config, precision)
    return config.flops() / b if b else 0.0


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


#: the most FP32 FMA units an NVIDIA SM has (Ampere GA10x, Ada, Hopper, Blackwell: 128; Volta, Turing
#: and GA100: 64; NVIDIA architecture whitepapers), so SMs x 128 x 2 x clock bounds any GPU's FP32 rate
MAX_FP32_LANES_PER_SM = 128
#: tolerance over that bound before a measurement is called impossible (clock reporting, timer noise)
FMA_PLAUSIBILITY_MARGIN = 1.05
#: layer kinds whose every algorithm performs all of its FLOPs (GEMMs: cuBLAS and cuDNN use no
#: Strassen-like reductions), unlike convolutions, where Winograd and FFT algorithms legitimately
#: beat the FMA rate computed from the direct method's FLOPs
GEMM_KINDS = ("Gemm", "GemmAct")


def fp32_fma_bound(sm_count: int, max_sm_clock_mhz: float) -> float:
    """Upper bound (FLOP/s) of any NVIDIA GPU's CUDA-core FP32 rate: SMs x 128 lanes x 2 FLOPs per FMA
    x the maximum SM clock (MHz)."""
    return sm_count * MAX_FP32_LANES_PER_SM * 2 * max_sm_clock_mhz * 1e6


def implausible_fma(config: L.LayerConfig, median_ms: float | None, sm_count: int | None,
                    max_sm_clock_mhz: float | None) -> str | None:
    """Why a GEMM-kind measurement labelled FP32 FMA math cannot be FMA math (None when it can): its
    achieved rate, ``config.flops()`` / ``median_ms``, exceeds :func:`fp32_fma_bound` by more than
    :data:`FMA_PLAUSIBILITY_MARGIN`, so the library ran it on Tensor Cores (e.g. cuDNN's matmul graph
    dispatched to cuBLASLt, which allows TF32 for FLOAT compute unless told otherwise). Other kinds,
    missing system figures or times: None."""
    if config.kind not in GEMM_KINDS or not median_ms or median_ms <= 0 or not sm_count or not max_sm_clock_mhz:
        return None
    rate = config.flops() / (median_ms * 1e-3)
    bound = fp32_fma_bound(sm_count, max_sm_clock_mhz)
    if rate <= FMA_PLAUSIBILITY_MARGIN * bound:
        return None
    return (f"{rate / 1e12:.1f} TFLOP/s exceeds the FP32 FMA bound {bound / 1e12:.1f} TFLOP/s "
            f"({sm_count} SMs x {MAX_FP32_LANES_PER_SM} lanes x 2 x {max_sm_clock_mhz:g} MHz): Tensor Core math (TF32), "
            f"not FMA")



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
