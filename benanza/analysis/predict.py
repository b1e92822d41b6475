"""Predict a model's layer times and LBL on a GPU benanza has not measured, by wave scaling.

Method: Habitat (Yu, Gao, Golikov, Pekhimenko, "Habitat: A Runtime-Based Computational Performance
Predictor for Deep Neural Network Training", USENIX ATC 2021), §4.1 "wave scaling", as its authors'
reference implementation computes it (``analyzer/habitat/analysis/wave_scaling/roofline.py`` in
github.com/geoffxy/habitat). A kernel measured at T_o on the origin GPU o is predicted on the
destination d as::

    T_d = T_o * (D_o / D_d) ** gamma * (C_o / C_d) ** (1 - gamma) * (W_o / W_d) ** (1 - gamma)

with D the DRAM bandwidth, C the SM clock, W the wave size (thread blocks resident at once: SMs x
blocks per SM) and gamma in [0, 1] the kernel's memory-boundness. Habitat's gamma interpolates on
the kernel's arithmetic intensity x against the destination's ridge point R (FLOP/byte)::

    gamma = 1 - 0.5 * x / R    if x <= R        (1 at x = 0: all memory; 0.5 at the ridge)
    gamma = 0.5 * R / x        otherwise        (-> 0 for strongly compute-bound kernels)

What benanza changes, and why:

* **Wave size.** benanza times library calls, not kernels: the thread-block count and occupancy
  are unknown. With the same occupancy on both GPUs W_o / W_d = SMs_o / SMs_d (Habitat's own
  "large kernel" case, many waves), each SM count replaced by the SMs the layer keeps busy ("Span"
  below, which stands for Habitat's special case of kernels under one wave). So for a CUDA-core
  layer C x W is the busy-SM x boost-clock throughput, and for an FMA layer (math ``fma``: fp32 GEMMs
  and convolutions on CUDA cores) also x the FP32 FMA units per SM (64 on Volta, Turing and GA100, 128
  on GA10x, Ada, Hopper, Blackwell; the architecture whitepapers, :mod:`benanza.analysis.gpus`): the
  ratio of the fp32 peaks when every SM is busy. Without it an H100's fp32 GEMM predicted on an A100,
  V100 or T4 came out about 0.6 x (0.33 x on the T4) of NeuSight's measured time
  (benchmarks/xgpu_check.py, ``habitat`` rows).
* **Tensor Cores.** A layer whose best measurement ran on Tensor Cores (math ``tensor_op``,
  ``tf32``, ``fp8``) scales its compute term by the ratio of the precision's dense Tensor Core
  peaks (:mod:`benanza.analysis.gpus`) instead: that peak is SMs x clock x per-SM Tensor Core rate, and the
  per-SM rate changes between architectures (Habitat predicted FP32 training only).
* **Intensity.** x is :func:`benanza.analysis.roofline.intensity` (the layer's FLOPs over the fewest bytes it
  must move) instead of Habitat's profiled DRAM bytes and FLOP efficiency; R uses the destination's
  peak for the layer's math (fp32 CUDA-core peak or the precision's Tensor Core peak) over its
  bandwidth, as Habitat uses the destination ridge.
* **Clock.** The datasheet boost clock, not Habitat's base clock (benanza records the max SM clock).

* **L2 residency** (``memory="l2"``, the default; ``memory="dram"`` is Habitat's DRAM-only term).
  benanza's warm-cache measurements repeat a call on the same buffers, so a layer whose working
  set fits in the L2 cache reads it from L2, not DRAM, and its memory term follows the L2's
  throughput, not the DRAM bandwidth. With B the layer's fewest bytes (:func:`benanza.analysis.roofline.min_bytes`)
  and L the smaller of the two GPUs' L2 capacities, the share that must come from DRAM is
  f = max(0, 1 - L / B) (f = 1 for cold-cache analyses), and the memory ratio is
  ``(D_o / D_d) ** f * (S_o / S_d) ** (1 - f)`` with S = SMs x boost clock, the proxy for L2
  throughput (its slices and clock; datasheets give no L2 bandwidth). Checked on an H100 SXM and an
  H200 (same SMs, clocks and L2, 1.43x the DRAM bandwidth): `benchmarks/predict_check.py`.

* **Span** (``span=True``, the default). Habitat's W_o / W_d = SMs_o / SMs_d holds for a kernel
  of many waves; a batch-1 layer of 20 thread blocks runs as fast on 32 SMs as on 132. benanza
  knows no block counts, so it estimates a layer's units of parallel work P
  (:func:`work_units`: 64 x 64 output tiles of a convolution or GEMM -- the smallest CTA tile of
  the cuDNN and CUTLASS implicit-GEMM kernels --, else one unit per 8 KiB the layer moves: a
  256-thread block moving 32 bytes per thread) and replaces each GPU's SM count k by the SMs the
  layer can keep busy, ``k_eff = 1 / (1/k + 1/P)``: Brent's theorem (R. P. Brent, "The parallel
  evaluation of general arithmetic expressions", JACM 21(2), 1974) T_k <= T_1 / k + T_inf with P
  units of equal time, T_1 = P tau and T_inf = tau, so T_k = T_1 / k_eff. Both constants were
  chosen on the SM-partition validation below (tiles of 48-80, units of 4-16 KiB change its mean
  error by under one point); ``span=False`` is Habitat's SM ratio. Between GPUs of one SM count
  (H100 and H200) the term changes nothing.
  A weight gradient (``ConvBwdFilter``) whose call reached under
  :data:`WGRAD_UNSPLIT_EFFICIENCY` (5 %) of its roofline on the origin (``max(F / peak, B /
  bandwidth)`` over its measured time) and whose measured call ends with cuDNN's legacy bias gradient
  (:data:`WGRAD_UNSCALED_BIAS`, ``cudnnConvolutionBackwardBias``) is taken to be one whose time does
  not follow the SMs, its P its output tiles alone (:func:`work_units`, ``unsplit``): measured on one
  H200 at 132, 64 and 32 SMs (fp16; docs/prediction.md, "Validation"), such calls (squeezenet1_1's
  16-channel layers, alexnet's first layer, each with cuDNN's bias gradient) ran 1.1-1.8x slower on a
  quarter of the SMs where those above 10 % ran 2-3x slower; with the split-K count the pooled weight
  gradients were predicted +72 % off (132 -> 32 SMs), with the rule +9 %. The 5 % was chosen on those
  measurements (10 % gave -3 % and +22 % in the two directions). The bias-gradient condition comes from
  the bf16 and fp32 partitions (docs/prediction.md): there a first layer of 3 channels
  without a bias (resnet18's 7x7, 3.6 % of its roofline on 32 SMs) ran 3.4x faster on 132 SMs, and
  so did alexnet's 11x11, whose bias gradient is benanza's reduction in bf16 (cuDNN's has no bf16):
  under 5 % alone, the rule would predict them 3.3x and 3.0x too slow (the bf16 step +19.9 % and
  +19.0 % off, 32 -> 132 SMs). With the condition the mean |step error| over the partition
  validations is 4.57 % (H200 bf16; 6.18 % without), 4.48 % (H100 fp16; 4.66 %), 3.91 % (H200 fp16)
  and 2.33 % (H200 fp32), spec ceilings.
* **Launch shapes** (``launch``; ``benchmarks/predict_check.py --train --launch-shapes``). Where
  ``bench --counters`` stored the origin's kernels of a layer's or call's best implementation (their
  grids, blocks and achieved occupancy), each kernel's SMs kept busy come from them
  (:func:`launch_sms`): a kernel of P SM-fulls of blocks (:func:`launch_units`) keeps busy the SMs of
  its whole waves (:func:`wave_sms`), as Habitat counts a kernel's waves from its profile; a kernel
  whose grid is a whole multiple (at most :data:`PERSISTENT_MAX_PER_SM`) of the origin's SM count is
  a persistent one sized to the GPU (cuBLAS's nvjet kernels of 2 x 66 blocks, cuDNN's SDPA backward
  and Hopper implicit GEMMs of 132 on the H200), which the library sizes to the target's SMs again, so
  it keeps every SM busy on both. The kernels weigh by their durations. Checked with the whole
  H200's counters of all six partition models in bf16 (docs/prediction.md): on MPS partitions the
  mean |step error| is 2.78 % with it and 2.65 % without (spec ceilings), on green contexts (three
  models) 4.62 % and 4.69 %; there, 132 -> 64 SMs, whole waves alone predict the forward pass
  14.0 % too slow, with the persistent rule 0.9 %. No better than the span model's estimate, so it
  stays an option of ``predict_check.py``; ``benanza predict`` does not take them.
* **Measured gamma.** Habitat's gamma comes from the kernel's *profiled* DRAM traffic and FLOP
  efficiency; benanza's intensity counts FLOPs, not instructions, so a CUDA-core layer of few FLOPs
  a byte that is in fact SM-bound (GELU's backward: about 80 lane operations an element against the
  11 FLOPs counted) would get gamma near 1 and scale with the DRAM bandwidth alone. Its measured time says otherwise: a CUDA-core layer's gamma is at most the share
  of its origin time (less the fixed part) that its fewest bytes at the origin's DRAM bandwidth take,
  :func:`memory_share`; the rest of its time scales with busy SMs x clock. Its prediction is never
  below the target's DRAM floor (the share of its fewest bytes that must come from DRAM over the
  target's bandwidth), which the product of the two ratios could otherwise pass when the origin is a
  small GPU. Tensor Core layers keep Habitat's gamma. Checked with `benchmarks/predict_check.py`
  (docs/prediction.md; before -> with it): the training step on SM partitions, spec ceilings,
  7.90 % -> 3.31 % (H200, 3 models) and 6.86 % -> 4.66 % (H100, 6 models), GELU's backward
  132 -> 64 SMs -26.6 % -> -15.7 %; H100 <-> H200 1.84 -> 1.95 %; the inference partitions 4.99 ->
  4.95 % (measured ceilings 4.23 -> 4.20 %, but the pair 32 -> 132 SMs at batch 32 4.52 -> 5.31 %:
  its fp32 elementwise kinds are predicted too fast).
* **Fixed part** (``fixed_us``, default :data:`FIXED_US` = 2 µs). Part of every kernel's time
  does not scale with SMs, clock or bandwidth: the launch and the ramp up and down of its grid
  (benanza's launch floor, :data:`benanza.reports.chart.LAUNCH_FLOOR_US`, is the same 2 µs). A
  layer measured at T_o is predicted as ``F + (T_o - F) * factor`` with F = min(T_o, fixed_us);
  ``fixed_us=0`` is the pure wave scaling above. Found and checked by running one H100 confined to
  132, 64 and 32 SMs (CUDA green contexts, ``BENANZA_SM_COUNT``; `benchmarks/predict_check.py
  --partitions`, docs/prediction.md): layers of a few µs barely change with the SM count
  (a 1.5 µs GELU takes 1.5 µs on 32 SMs), which pure scaling predicts 4x slower.
* **Measured ceilings.** ``predict`` takes whatever :class:`GpuSpec` it is given; the validation
  on partitions passes the ceilings `benanza ceilings` measured on each system
  (:func:`benanza.analysis.gpus.with_measured_ceilings`): 132 SMs of an H100 reach 15 % less FP16
  Tensor Core rate per SM than 64 of them (the power limit lowers the clock under load), which no
  datasheet figure says. A partition's spec (:func:`benanza.analysis.gpus.partition_spec`) scales
  the math peaks by its share of the SMs.

Validated (docs/prediction.md, "Validation"; 8 models at batch 32 and 5 at batch 1, fp16 and fp32, one
H100 at 132, 64 and 32 SMs, every ordered pair): mean model error 3.5 % at batch 32 (every pair under
5 %, the naive "same time" 86 %) and 5.5 % at batch 1 (naive 22 %); pure Habitat scaling with
datasheets gave 12.8 % and 80.4 %. H100 <-> H200: 1.5 %.

Error bars: :func:`error_bar` attaches to a prediction the errors measured per layer kind in that
validation (``db/reference/predict_errors.json``, written by `benchmarks/predict_check.py
--errors-out`) and names the layer kinds it never covered.

Limits: no change of algorithm between GPUs (the origin's best implementation is assumed best on
the target); validated on Hopper only (other architectures are extrapolations, and the error bar
says so); memory-bound fp32 layers streaming beyond the L2 are predicted up to 20-35 % too slow on
fewer SMs (predict_errors.json gives each kind's error). Zero-cost layers stay 0 ms; a layer without an origin
measurement has no prediction and marks the predicted LBL incomplete.
"""
from __future__ import annotations

import collections
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from benanza.analysis import roofline
from benanza.analysis.analyzer import Analysis, critical_path
from benanza.database.counters import implementation_key
from benanza.errors import UsageError
from benanza.analysis.gpus import GpuSpec

#: how the memory term scales: Habitat's DRAM bandwidth ratio, or L2-aware (module docstring)
MEMORY_MODELS = ("l2", "dram")

#: the part of a layer's time (µs) that no SM count, clock or bandwidth changes (module docstring)
FIXED_US = 2.0

#: output tile (rows = columns) of one unit of a convolution's or GEMM's parallel work (module docstring)
SPAN_TILE = 64
#: bytes one unit of any other layer's parallel work moves (module docstring)
SPAN_UNIT_BYTES = 8192
#: a weight gradient below this share of its roofline on the origin counts its output tiles alone as
#: its parallel work, no split-K (module docstring, "Span")
WGRAD_UNSPLIT_EFFICIENCY = 0.05
#: the bias-gradient call of a weight gradient whose time hardly follows the SM count (module
#: docstring, "Span"): cuDNN's legacy bias gradient, not benanza's reduction kernel
WGRAD_UNSCALED_BIAS = "cudnnConvolutionBackwardBias"

#: math modes (benanza.kinds.ACCEPTED_MATH) that run on Tensor Cores, and the peak they use
TENSOR_MATH = {"tensor_op": None, "tf32": "tf32", "fp8": "fp8", "fp8_fast_accum": "fp8", "fp8_block128": "fp8"}


def math_peak_key(math: str, precision: str) -> str | None:
    """The :attr:`GpuSpec.peak` key of a measurement's math mode: ``tf32``/``fp16``/``bf16``/``fp8``
    for Tensor Core math, None for CUDA-core math (``fma``, ``none``)."""
    if math not in TENSOR_MATH:
        return None
    key = TENSOR_MATH[math]
    if key is None:  # tensor_op: the precision's half type; fp8 analyses run the rest in fp16
        key = precision if precision in ("fp16", "bf16") else "fp16"
    return key


def habitat_gamma(x: float, ridge: float) -> float:
    """Habitat's memory-boundness of a kernel of arithmetic intensity ``x`` (FLOP/byte) on a GPU
    whose ridge point is ``ridge`` (FLOP/byte): 1 - x / (2R) up to the ridge, R / (2x) past it."""
    if ridge <= 0:
        raise UsageError("ridge point must be positive")
    if x <= 0:
        return 1.0
    return 1.0 - 0.5 * x / ridge if x <= ridge else 0.5 * ridge / x


@dataclass
class LayerPrediction:
    """One layer: its origin time and predicted time (ms), gamma, intensity (FLOP/byte), the peak
    its compute term scales by (``cuda_cores`` or a Tensor Core precision) and the factor T_d/T_o."""

    index: int
    name: str
    op: str
    kind: str | None
    status: str  # measured / zero_cost / missing
    origin_ms: float | None
    predicted_ms: float | None
    gamma: float | None = None
    intensity: float | None = None
    compute: str = ""
    factor: float | None = None
    dram_share: float | None = None
    fixed_ms: float = 0.0  # the part of origin_ms kept as is: predicted = fixed + (origin - fixed) x factor
    work_units: float | None = None  # P (span=True), None for Habitat's SM ratio
    #: how the prediction was made: "wave" (wave scaling), "grid" (the public ratio grid's factor,
    #: benanza.analysis.xarch), "grid+wave" (the grid to the table's GPU of the target's architecture,
    #: then wave scaling), "model" / "model+wave" (the same with the fp32 model of NeuSight's table;
    #: "wave+model..." from a Hopper GPU other than H100-SXM, wave-scaled to it first);
    #: "" for a layer without a prediction of its own (zero-cost, missing)
    method: str = ""
    #: the grid's data type (bfloat16, fp8, fp8_block) or the fp32 model's table (fp32 linear, fp32 bmm)
    grid: str = ""
    via: str = ""  # "grid+wave" / "model+wave": the table's GPU of the target's architecture reached

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Prediction:
    """A model's predicted layer times and LBL (sequential and parallel, ms) on ``target`` from its
    analysis on ``origin``."""

    model: str
    batch: int
    precision: str
    origin: GpuSpec
    target: GpuSpec
    layers: list[LayerPrediction]
    lbl_sequential_ms: float
    lbl_parallel_ms: float
    critical_path: list[int]
    origin_lbl_sequential_ms: float
    origin_lbl_parallel_ms: float
    complete: bool
    memory: str = "l2"
    fixed_us: float = FIXED_US
    span: bool = True
    #: the headline LBL, measured on the origin (:attr:`benanza.analysis.analyzer.Analysis.lbl_ms`:
    #: fused, critical path) and predicted on the target (:func:`fused_weights`), what they are, and
    #: the headline's completeness and missing-layer count (the analysis's)
    origin_lbl_ms: float = 0.0
    lbl_ms: float = 0.0
    lbl_name: str = ""
    fused_critical_path: list[int] = field(default_factory=list)
    lbl_complete: bool = True
    missing_layers: int = 0

    def by_kind(self) -> dict[str, dict]:
        """Per layer kind: layer count, origin and predicted time sums (ms) and their ratio."""
        acc: dict[str, dict] = collections.defaultdict(lambda: {"layers": 0, "origin_ms": 0.0, "predicted_ms": 0.0})
        for lp in self.layers:
            if lp.status != "measured":
                continue
            a = acc[lp.kind or lp.op]
            a["layers"] += 1
            a["origin_ms"] += lp.origin_ms
            a["predicted_ms"] += lp.predicted_ms
        for a in acc.values():
            a["ratio"] = a["predicted_ms"] / a["origin_ms"] if a["origin_ms"] else None
        return dict(sorted(acc.items(), key=lambda kv: -kv[1]["predicted_ms"]))

    def to_dict(self) -> dict:
        return {"model": self.model, "batch": self.batch, "precision": self.precision,
                "origin": self.origin.name, "target": self.target.name, "method": "habitat-wave-scaling",
                "memory_model": self.memory, "fixed_us": self.fixed_us, "span": self.span,
                "lbl_sequential_ms": self.lbl_sequential_ms, "lbl_parallel_ms": self.lbl_parallel_ms,
                "origin_lbl_sequential_ms": self.origin_lbl_sequential_ms,
                "origin_lbl_parallel_ms": self.origin_lbl_parallel_ms, "complete": self.complete,
                "origin_lbl_ms": self.origin_lbl_ms, "lbl_ms": self.lbl_ms, "lbl_name": self.lbl_name,
                "lbl_complete": self.lbl_complete, "missing_layers": self.missing_layers,
                "fused_critical_path": self.fused_critical_path,
                "critical_path": self.critical_path, "by_kind": self.by_kind(),
                "layers": [lp.to_dict() for lp in self.layers]}


def edges_of(analysis: Analysis) -> dict[int, list[int]]:
    """The layer DAG (index -> predecessor indices) from the layers' input and output tensor names,
    as :func:`benanza.processing.model.process` builds it."""
    producers = {}
    for lt in analysis.layers:
        for o in lt.layer.outputs:
            producers[o] = lt.layer.index
    return {lt.layer.index: sorted({producers[i] for i in lt.layer.inputs if i in producers})
            for lt in analysis.layers}


def check_precision(spec: GpuSpec, precision: str) -> None:
    """Raise UsageError when ``spec`` has no Tensor Core peak for ``precision`` (tf32, bf16, fp8)."""
    if precision in ("tf32", "bf16", "fp8"):
        spec.peak_flops(precision)  # raises UsageError when the GPU has no such Tensor Cores


def work_units(config, precision: str, unsplit: bool = False) -> float:
    """P, the units of parallel work of a layer (module docstring, "Span"): for a convolution of one
    group (also fused with bias, BatchNorm or activation) the 64 x 64 tiles of its implicit GEMM
    (N x output positions rows, output channels columns), for its data or weight gradient those of
    their own implicit GEMMs (:func:`_conv_backward_units`; ``unsplit``: a weight gradient's output
    tiles alone, no split-K), for a GEMM its 64 x 64 output tiles times its batch, else its fewest
    bytes (:func:`benanza.analysis.roofline.min_bytes`) over 8 KiB; at least 1."""
    t = float(SPAN_TILE)
    if config.kind in ("ConvBwdData", "ConvBwdFilter") and config.conv.group == 1:
        return _conv_backward_units(config, precision, t, unsplit)
    cfg = getattr(config, "conv", None) or getattr(config, "gemm", None) or config
    if cfg.kind == "Conv" and cfg.group == 1:
        nd = len(cfg.x) - 2
        rows = cfg.x[0]
        for i in range(nd):
            rows *= (cfg.x[2 + i] + cfg.pads[i] + cfg.pads[i + nd] - cfg.dilations[i] * (cfg.w[2 + i] - 1) - 1) \
                // cfg.strides[i] + 1
        return max(1.0, rows / t) * max(1.0, cfg.w[0] / t)
    if cfg.kind == "Gemm":
        return max(1.0, cfg.m / t) * max(1.0, cfg.n / t) * cfg.batch_count
    return max(1.0, roofline.min_bytes(config, precision) / SPAN_UNIT_BYTES)


def _conv_backward_units(config, precision: str, t: float, unsplit: bool = False) -> float:
    """P of a convolution's data or weight gradient (one group), from the implicit GEMM CUTLASS
    names for each (``media/docs/implicit_gemm_convolution.md`` in github.com/NVIDIA/cutlass:
    Dgrad GEMM-M = N x H x W input positions, GEMM-N = C input channels; Wgrad GEMM-M = K output
    channels, GEMM-N = C x R x S): its 64 x 64 output tiles. A weight gradient's GEMM output is
    small and its reduction (N x P x Q) long, which libraries split across blocks (split-K), so its
    P is at least the bytes-based count of any other layer (:data:`SPAN_UNIT_BYTES`), unless
    ``unsplit`` (a kernel that does not split it: :func:`wgrad_unsplit`)."""
    c = config.conv
    if config.kind == "ConvBwdData":
        rows = 1
        for d in c.x[2:]:
            rows *= d
        return max(1.0, c.x[0] * rows / t) * max(1.0, c.x[1] / t)
    crs = c.w[1]
    for d in c.w[2:]:
        crs *= d
    tiles = max(1.0, c.w[0] / t) * max(1.0, crs / t)
    return tiles if unsplit else max(tiles, roofline.min_bytes(config, precision) / SPAN_UNIT_BYTES)


def wgrad_unsplit(config, precision: str, key: str | None, origin_ms: float | None, origin: GpuSpec,
                  call: str | None = None) -> bool:
    """Whether a weight gradient (``ConvBwdFilter``) measured at ``origin_ms`` on ``origin`` reached
    under :data:`WGRAD_UNSPLIT_EFFICIENCY` of its roofline there: ``max(F / peak, B / bandwidth)``
    (F its FLOPs, :meth:`benanza.kinds.LayerConfig.flops`; B its fewest bytes,
    :func:`benanza.analysis.roofline.min_bytes`; peak the Tensor Core rate of ``key``, or fp32's for
    CUDA-core math) over ``origin_ms``: :func:`benanza.analysis.roofline.bound`, and, when the
    measured ``call`` is known, that call ends with cuDNN's bias gradient
    (:data:`WGRAD_UNSCALED_BIAS`, module docstring "Span"). False for any other kind or without a
    time."""
    if config.kind != "ConvBwdFilter" or not origin_ms or origin_ms <= 0:
        return False
    if call is not None and WGRAD_UNSCALED_BIAS not in call:
        return False
    floor = roofline.bound(config, precision, roofline.Ceilings(origin.peak_flops(key or "fp32"), origin.bandwidth))
    return floor.bound_ms / origin_ms < WGRAD_UNSPLIT_EFFICIENCY


def memory_share(config, precision: str, origin: GpuSpec, origin_ms: float | None,
                 fixed_us: float = FIXED_US) -> float:
    """The share of a layer's measured time on ``origin`` its fewest bytes explain: the memory floor
    ``min_bytes / bandwidth`` (:func:`benanza.analysis.roofline.min_bytes`, bytes over bytes/s) over
    ``origin_ms`` less its fixed part (``fixed_us``, µs), at most 1; 1 without a time (module docstring,
    "Measured gamma"). Shape-free: ``config`` is any layer config, ``origin_ms`` ms."""
    if not origin_ms:
        return 1.0
    t = origin_ms - min(origin_ms, fixed_us * 1e-3)
    if t <= 0:
        return 1.0
    floor_ms = roofline.min_bytes(config, precision) / origin.bandwidth * 1e3
    return min(1.0, floor_ms / t)


def busy_sms(sm_count: int, units: float) -> float:
    """The SMs a layer of ``units`` units of parallel work keeps busy on ``sm_count`` SMs:
    1 / (1/k + 1/P) (Brent's theorem, module docstring)."""
    return 1.0 / (1.0 / sm_count + 1.0 / units)


#: warps one SM holds at once on the GPUs benanza validates (Hopper, compute capability 9.0: 64; CUDA C++
#: Programming Guide, "Compute Capabilities", "Maximum number of resident warps per SM")
MAX_WARPS_PER_SM = 64


def _dims(text) -> int | None:
    """The product of a launch dimension as ncu prints it, ``(x, y, z)``; None when unreadable."""
    try:
        n = 1
        for x in str(text).strip("() ").split(","):
            n *= int(x)
        return n if n > 0 else None
    except ValueError:
        return None


def launch_units(kernels) -> float | None:
    """P of a call from its kernels' measured launch shapes (``bench --counters``, rows of
    :func:`benanza.database.counters.read_counters`): each kernel's thread blocks over the blocks one
    SM held at once -- its achieved occupancy (% of :data:`MAX_WARPS_PER_SM`) over its warps per block,
    at least one -- weighted by the kernel's duration: the SM-fulls of work Habitat's wave scaling
    counts (Yu et al., ATC'21, §4.1: a kernel's waves from its grid and its blocks per SM). None when
    no kernel has a grid, a block, an occupancy and a duration."""
    num = den = 0.0
    for k in kernels or ():
        blocks, threads = _dims(getattr(k, "grid_size", None)), _dims(getattr(k, "block_size", None))
        occ, dur = getattr(k, "occupancy_pct", None), getattr(k, "duration_ns", None)
        if not (blocks and threads and occ and dur and dur > 0):
            continue
        per_sm = max(1.0, occ / 100.0 * MAX_WARPS_PER_SM / -(-threads // 32))
        num += dur * blocks / per_sm
        den += dur
    return num / den if den > 0 else None


def wave_sms(sm_count: int, units: float) -> float:
    """The SMs a call of ``units`` SM-fulls of work (:func:`launch_units`) keeps busy on ``sm_count``
    SMs, its waves whole: ``P / ceil(P / k)`` (one wave of P under k SMs: P; Habitat's wave quantisation)."""
    return units / max(1.0, -(-units // sm_count))


#: the most blocks an SM a persistent kernel's grid is taken to hold: a grid of m x the origin's SMs,
#: 1 <= m <= 4, is one sized to the GPU (:func:`launch_sms`); chosen on an H200's counters
#: (docs/prediction.md), where such grids are 132 (nvjet 2 x 66 clusters, cuDNN's SDPA backward, sm90 implicit
#: GEMMs) and 264 (cuDNN's batch norm ``*_singleread_spec``)
PERSISTENT_MAX_PER_SM = 4


def launch_sms(kernels, origin_sms: int, target_sms: int) -> tuple[float, float, float] | None:
    """``(k_o, k_d, P)``: the SMs a call keeps busy on the origin (``origin_sms`` SMs) and on the target
    (``target_sms``) from its kernels' launch shapes on the origin (rows of
    :func:`benanza.database.counters.read_counters`), and its SM-fulls of work (:func:`launch_units`).
    Each kernel keeps busy the SMs of its whole waves (:func:`wave_sms`) on each GPU, or every SM of
    both when its grid is a persistent one sized to the origin (a multiple m <= :data:`PERSISTENT_MAX_PER_SM`
    of ``origin_sms`` blocks); the target's time over the origin's is the duration-weighted mean of
    the kernels' ratios, and ``k_d = k_o / that``. None when no kernel has a readable shape."""
    num_o = ratio = units = den = 0.0
    for k in kernels or ():
        p = launch_units([k])
        if p is None:
            continue
        blocks = _dims(k.grid_size)
        if blocks % origin_sms == 0 and blocks // origin_sms <= PERSISTENT_MAX_PER_SM:
            bo, bd = float(origin_sms), float(target_sms)
        else:
            bo, bd = wave_sms(origin_sms, p), wave_sms(target_sms, p)
        num_o += k.duration_ns * bo
        ratio += k.duration_ns * bo / bd
        units += k.duration_ns * p
        den += k.duration_ns
    if den <= 0:
        return None
    return num_o / den, num_o / ratio, units / den


def dram_share(nbytes: float, origin: GpuSpec, target: GpuSpec, cache: str = "warm") -> float:
    """The share of a layer's ``nbytes`` (its fewest bytes) that must come from DRAM on both GPUs:
    ``max(0, 1 - L2 / nbytes)`` with L2 the smaller of the two L2 capacities for warm-cache
    measurements, 1 for cold-cache ones (and for a layer that moves no bytes, 0)."""
    if cache == "cold":
        return 1.0
    if nbytes <= 0:
        return 0.0
    return max(0.0, 1.0 - min(origin.l2_bytes, target.l2_bytes) / nbytes)


def gemm_grid_factor(config, math_mode: str, precision: str, origin: GpuSpec, target: GpuSpec,
                     time_ms: float | None = None) -> tuple[float, GpuSpec | None, str] | None:
    """The public measurements' part of a GEMM layer's prediction (``GemmConfig``;
    :mod:`benanza.analysis.xarch`) when the two GPUs are whole GPUs of different architectures:
    (T_target / T_origin, None, table) when the ratio grid of its precision and math (a single product in
    bf16, fp16, fp8) or the fp32 model (CUDA-core fp32, one product or a batch, from H100-SXM; ``time_ms``
    its origin time, ms) holds both; (T_proxy / T_origin, proxy, table) when it holds the origin but not
    the target, and a GPU of the target's architecture (the proxy, :func:`benanza.analysis.xarch.proxy_gpu`,
    :func:`~benanza.analysis.xarch.fp32_proxy`), from which the caller wave-scales to the target within that
    architecture; else None (wave scaling from the origin, validated between Hopper GPUs and SM partitions).
    ``table``: the grid's data type (``bfloat16``, ``fp8``, ``fp8_block``) or ``fp32 linear`` / ``fp32 bmm``
    (the fp32 model's op)."""
    if getattr(config, "kind", None) != "Gemm":
        return None
    if origin.architecture == target.architecture or origin.partition_of or target.partition_of:
        return None
    from benanza.analysis import xarch
    from benanza.analysis.gpus import find_gpu

    if xarch.grid_dtype(precision, math_mode) is None:  # fp32 on CUDA cores: NeuSight's table, the model
        op = xarch.fp32_op(config)
        f = xarch.fp32_factor(origin.name, target.name, precision, math_mode, config, time_ms)
        if f is not None:
            return f, None, f"fp32 {op}"
        proxy = xarch.fp32_proxy(target, op=op) if origin.name == xarch.FP32_ORIGIN else None
        f = xarch.fp32_factor(origin.name, proxy, precision, math_mode, config, time_ms) if proxy else None
        return (f, find_gpu(proxy), f"fp32 {op}") if f is not None else None
    if getattr(config, "batch_count", 1) != 1:
        return None
    dt = xarch.grid_dtype(precision, math_mode)
    f = xarch.gemm_factor(origin.name, target.name, precision, math_mode, config.m, config.n, config.k)
    if f is not None:
        return f, None, dt
    proxy = xarch.proxy_gpu(target, precision, math_mode)
    if proxy is None:
        return None
    f = xarch.gemm_factor(origin.name, proxy, precision, math_mode, config.m, config.n, config.k)
    return (f, find_gpu(proxy), dt) if f is not None else None


def fp32_origin_proxy(config, math_mode: str, precision: str, origin: GpuSpec, target: GpuSpec) -> GpuSpec | None:
    """For an fp32 CUDA-core GEMM layer measured on a whole Hopper GPU other than the fp32 model's origin
    (H100-SXM: :data:`benanza.analysis.xarch.FP32_ORIGIN`) and predicted to another architecture: H100-SXM,
    to which the caller wave-scales first (within Hopper: docs/prediction.md) before the fp32 model; else
    None."""
    from benanza.analysis import xarch
    from benanza.analysis.gpus import find_gpu

    if getattr(config, "kind", None) != "Gemm" or precision != "fp32" or math_mode not in ("fma", "none"):
        return None
    h100 = find_gpu(xarch.FP32_ORIGIN)
    if origin.name == h100.name or origin.partition_of or origin.architecture != h100.architecture \
            or target.architecture == h100.architecture or target.partition_of:
        return None
    return h100


def predict(analysis: Analysis, origin: GpuSpec, target: GpuSpec, precision: str | None = None,
            memory: str = "l2", fixed_us: float = FIXED_US, span: bool = True, launch: dict | None = None,
            cross_gpu: bool = True) -> Prediction:
    """Predict ``analysis`` (measured on ``origin``) on ``target`` by wave scaling (module
    docstring); ``memory``: ``l2`` (L2-aware memory term, default) or ``dram`` (Habitat's);
    ``fixed_us``: the part of each layer's time (µs) kept as measured (0: pure wave scaling);
    ``span``: each layer keeps only the SMs its parallel work fills busy (False: Habitat's ratio).
    ``launch``: the origin's measured kernels by implementation (:func:`benanza.database.counters.read_counters`,
    ``bench --counters``): a layer whose best implementation has them scales by its waves
    (:func:`launch_units`). ``cross_gpu``: a GEMM predicted to a GPU of another architecture takes the public
    ratio grid's factor where it covers both GPUs, or where it covers a GPU of the target's architecture that
    factor then wave scaling from that GPU (:func:`gemm_grid_factor`; ``LayerPrediction.method`` says which:
    ``grid``, ``grid+wave``, ``wave``), never below the target's compute roof (the layer's FLOPs at its
    datasheet peak). ``precision`` defaults to the analysis's own. Raises UsageError when it differs from the
    analysis's, either GPU lacks Tensor Cores for it, ``memory`` is unknown or ``fixed_us`` < 0."""
    if memory not in MEMORY_MODELS:
        raise UsageError(f"memory model must be one of {', '.join(MEMORY_MODELS)}, not {memory!r}")
    if not fixed_us >= 0:
        raise UsageError(f"the fixed part must be 0 µs or more, not {fixed_us}")
    precision = precision or analysis.precision
    if precision != analysis.precision:
        raise UsageError(f"the analysis is in {analysis.precision}, not {precision}")
    check_precision(origin, precision)
    check_precision(target, precision)
    out: list[LayerPrediction] = []
    for lt in analysis.layers:
        ly = lt.layer
        kind = ly.config.kind if ly.config else None
        lp = LayerPrediction(ly.index, ly.name, ly.op_type, kind, lt.status, lt.time_ms, None)
        if lt.status == "zero_cost":
            lp.predicted_ms = 0.0
        elif lt.status == "measured":
            scale_layer(lp, lt, origin, target, precision, memory, analysis.cache, span, fixed_us=fixed_us,
                        launch=(launch or {}).get(implementation_key(lt, analysis.kind_precision(kind))))
            lp.fixed_ms = min(lt.time_ms, fixed_us * 1e-3)
            lp.method = "wave"
            grid = gemm_grid_factor(ly.config, lt.math, precision, origin, target, lt.time_ms) if cross_gpu else None
            pre, first = 1.0, ""
            if grid is None and cross_gpu:  # fp32 from another Hopper GPU: wave-scaled to the fp32 model's H100
                hop = fp32_origin_proxy(ly.config, lt.math, precision, origin, target)
                if hop is not None:
                    step = LayerPrediction(ly.index, ly.name, ly.op_type, kind, lt.status, lt.time_ms, None)
                    scale_layer(step, lt, origin, hop, precision, memory, analysis.cache, span, fixed_us=fixed_us)
                    t_h = lp.fixed_ms + (lt.time_ms - lp.fixed_ms) * step.factor
                    grid = gemm_grid_factor(ly.config, lt.math, precision, hop, target, t_h)
                    pre, first = (t_h / lt.time_ms, "wave+") if grid is not None and lt.time_ms else (1.0, "")
            if grid is not None:  # a GEMM the public measurements cover: their ratio, the whole time
                factor, proxy, table = grid
                factor *= pre
                if proxy is not None:  # to the table's GPU of the target's architecture, then wave-scaled
                    t_p = lt.time_ms * factor
                    via = LayerPrediction(ly.index, ly.name, ly.op_type, kind, lt.status, t_p, None)
                    scale_layer(via, lt, proxy, target, precision, memory, analysis.cache, span, origin_ms=t_p,
                                fixed_us=fixed_us)
                    fixed = min(t_p, fixed_us * 1e-3)
                    factor = (fixed + (t_p - fixed) * via.factor) / lt.time_ms
                    lp.via = proxy.name
                # never faster than the target's compute roof (its datasheet peak for the layer's math)
                key = math_peak_key(lt.math, precision) or ("fp32" if table.startswith("fp32") else None)
                roof = ly.config.flops() / target.peak_flops(key) * 1e3 if key else 0.0
                factor = max(factor, roof / lt.time_ms) if lt.time_ms else factor
                lp.factor, lp.fixed_ms, lp.grid = factor, 0.0, table
                base = first + ("model" if table.startswith("fp32") else "grid")
                lp.method = f"{base}+wave" if proxy is not None else base
            lp.predicted_ms = lp.fixed_ms + (lt.time_ms - lp.fixed_ms) * lp.factor
        out.append(lp)
    weight = [lp.predicted_ms or 0.0 for lp in out]
    edges = edges_of(analysis)
    par, path = critical_path(edges, weight)
    fpar, fpath = critical_path(edges, fused_weights(analysis, out))
    return Prediction(analysis.model, analysis.batch, precision, origin, target, out, sum(weight), par, path,
                      analysis.lbl_sequential_ms, analysis.lbl_parallel_ms,
                      all(lp.predicted_ms is not None for lp in out), memory, fixed_us, span,
                      analysis.lbl_ms, fpar, analysis.lbl_name, fpath, analysis.complete, len(analysis.missing))


def fused_weights(analysis: Analysis, layers: list[LayerPrediction]) -> list[float]:
    """Each layer's weight (ms) in the predicted headline LBL: its predicted time, except in a
    fusion group the analysis takes fused (:meth:`Analysis.fused_groups`), whose fused time sits on
    its last layer, scaled by the group's own factor: its measured layers' predicted sum over their
    measured sum (the fused call does their work), or the model's, time-weighted, when none of its
    layers has a time of its own; 0 ms on its other layers and on layers without a prediction."""
    w = [lp.predicted_ms or 0.0 for lp in layers]
    timed = [lp for lp in layers if lp.status == "measured" and lp.origin_ms]
    model_factor = (sum(lp.predicted_ms for lp in timed) / sum(lp.origin_ms for lp in timed)) if timed else 1.0
    for last, f in analysis.fused_groups().items():
        parts = [layers[i] for i in f.layers if layers[i].status == "measured" and layers[i].origin_ms]
        o = sum(lp.origin_ms for lp in parts)
        factor = sum(lp.predicted_ms for lp in parts) / o if o > 0 else model_factor
        for i in f.layers:
            w[i] = 0.0
        w[last] = f.fused_ms * factor
    return w


def scale_layer(lp: LayerPrediction, lt, origin: GpuSpec, target: GpuSpec, precision: str, memory: str,
                cache: str, span: bool = True, origin_ms: float | None = None, fixed_us: float = FIXED_US,
                launch: list | None = None) -> None:
    """Fill ``lp``'s compute peak, gamma, intensity, DRAM share, work units and wave-scaling factor
    (module docstring) for the measured layer ``lt`` (anything with ``lt.layer.config``, the
    config, and ``lt.math``, its best measurement's math mode) in ``precision``, measured with
    ``cache`` (warm / cold) in ``origin_ms`` (ms; a weight gradient's span depends on it:
    :func:`wgrad_unsplit`; default ``lt.time_ms``), ``fixed_us`` (µs) the part of it the factor does not
    scale (the measured gamma's and the DRAM floor's, as the caller's prediction keeps it).
    ``launch``: the call's kernels measured on the origin (``bench --counters``): with ``span``, the
    SMs they keep busy (:func:`launch_sms`) in place of the estimated work units. Raises
    UsageError when a GPU lacks the Tensor Core peak it needs."""
    ly = lt.layer
    key = math_peak_key(lt.math, precision)
    x = roofline.intensity(ly.config, precision)
    ko, kd = origin.sm_count, target.sm_count
    shaped = launch_sms(launch, ko, kd) if span and launch else None
    if shaped:  # the call's own launch shapes on the origin: its waves, or a persistent grid's SMs
        ko, kd, lp.work_units = shaped
    elif span:
        unsplit = wgrad_unsplit(ly.config, precision, key, origin_ms, origin, getattr(lt, "call", None))
        lp.work_units = work_units(ly.config, precision, unsplit)
        ko, kd = busy_sms(ko, lp.work_units), busy_sms(kd, lp.work_units)
    # the share of each GPU's SMs the layer keeps busy scales its compute peak and L2 throughput
    busy_o, busy_d = ko / origin.sm_count, kd / target.sm_count
    s_ratio = (ko * origin.boost_clock_mhz) / (kd * target.boost_clock_mhz)
    if key is None:
        ridge = target.ridge("fp32")
        # an FMA layer's (math "fma": fp32 GEMM, convolution) CUDA-core FLOP rate: busy SMs x FP32 FMA units
        # per SM x clock (GpuSpec.fp32_lanes_per_sm); other CUDA-core layers issue more than FMAs: SMs x clock
        lanes = origin.fp32_lanes_per_sm / target.fp32_lanes_per_sm if getattr(lt, "math", "") == "fma" else 1.0
        c_ratio = s_ratio * lanes
        lp.compute = "cuda_cores"
    else:
        ridge = target.ridge(key)
        c_ratio = (origin.peak_flops(key) * busy_o) / (target.peak_flops(key) * busy_d)
        lp.compute = key
    g = habitat_gamma(x, ridge)
    t_o = origin_ms if origin_ms is not None else getattr(lt, "time_ms", None)
    if key is None:  # a CUDA-core layer: no more memory-bound than its origin time shows
        g = min(g, memory_share(ly.config, precision, origin, t_o, fixed_us))
    nbytes = roofline.min_bytes(ly.config, precision)
    m_ratio = origin.bandwidth / target.bandwidth
    f = 1.0
    if memory == "l2":
        f = dram_share(nbytes, origin, target, cache)
        m_ratio = m_ratio ** f * s_ratio ** (1.0 - f)
        lp.dram_share = f
    lp.factor = m_ratio ** g * c_ratio ** (1.0 - g)
    fixed = min(t_o, fixed_us * 1e-3) if t_o else 0.0
    if key is None and t_o and t_o > fixed:  # never below the target's DRAM floor (module docstring)
        lp.factor = max(lp.factor, (f * nbytes / target.bandwidth * 1e3 - fixed) / (t_o - fixed))
    lp.gamma, lp.intensity = g, x


@dataclass
class Validation:
    """A prediction against a measurement on the target: relative errors (predicted / measured - 1)
    of the LBL (sequential, parallel), per layer kind (sum of the kind's layer times), and the mean
    absolute per-layer error."""

    model: str
    batch: int
    precision: str
    lbl_sequential_error: float
    lbl_parallel_error: float
    by_kind: dict[str, float] = field(default_factory=dict)
    mean_abs_layer_error: float = 0.0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def validate(prediction: Prediction, measured: Analysis) -> Validation:
    """Compare ``prediction`` with ``measured``, the same model, batch and precision analyzed from
    measurements on the target GPU. Layers missing on either side are left out of the per-layer
    and per-kind errors. Raises UsageError when the two are not the same model configuration."""
    if (prediction.model, prediction.batch, prediction.precision) != (measured.model, measured.batch, measured.precision):
        raise UsageError(f"cannot validate a prediction of {prediction.model} b{prediction.batch} "
                         f"{prediction.precision} with {measured.model} b{measured.batch} {measured.precision}")
    if len(prediction.layers) != len(measured.layers):
        raise UsageError("prediction and measurement have different layer lists")
    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    errs = []
    for lp, lt in zip(prediction.layers, measured.layers):
        if lp.status != "measured" or lt.status != "measured" or not lt.time_ms:
            continue
        k = kinds[lp.kind or lp.op]
        k[0] += lp.predicted_ms
        k[1] += lt.time_ms
        errs.append(abs(lp.predicted_ms / lt.time_ms - 1.0))
    return Validation(prediction.model, prediction.batch, prediction.precision,
                      prediction.lbl_sequential_ms / measured.lbl_sequential_ms - 1.0,
                      prediction.lbl_parallel_ms / measured.lbl_parallel_ms - 1.0,
                      {k: p / m - 1.0 for k, (p, m) in sorted(kinds.items()) if m},
                      sum(errs) / len(errs) if errs else 0.0)


def mean_model_error(validations: Iterable[Validation]) -> float:
    """Mean absolute model-level (sequential LBL) error over several validations (the target: under
    8 % between H100 and H200; docs/prediction.md)."""
    v = [abs(x.lbl_sequential_error) for x in validations]
    if not v:
        raise UsageError("no validations to average")
    return sum(v) / len(v)


# ---------------------------------------------------------------------------------- error bars

def error_table_path(name: str = "predict_errors.json") -> Path | None:
    """The validation's error table ``name``: ``db/reference/NAME`` of a source checkout, or a copy
    inside the installed package (``benanza/_data/NAME``, setup.py); None when absent. The inference
    table is ``predict_errors.json``, the training step's ``predict_train_errors.json``."""
    pkg = Path(__file__).resolve().parents[1]
    for p in (pkg / "_data" / name, pkg.parent / "db" / "reference" / name):
        if p.is_file():
            return p
    return None


def load_error_table(path: str | Path | None = None) -> dict | None:
    """The error table (``benchmarks/predict_check.py --errors-out``): ``kinds`` -> kind -> precision
    -> ``mean_abs_error`` / ``p90_abs_error`` (fractions), ``configurations``, ``layers``;
    ``architectures`` validated; ``path``: the file (the shipped one as ``db/reference/NAME``). None
    when there is none; raises UsageError naming the file when it is not such a table."""
    path = Path(path) if path else error_table_path()
    if path is None:
        return None
    try:
        table = json.loads(path.read_text())
        if not isinstance(table.get("kinds"), dict):
            raise ValueError("no 'kinds' object")
    except (OSError, ValueError, AttributeError) as e:
        raise UsageError(f"prediction error table {path}: {e}") from None
    # the shipped table (a source checkout's or the installed package's copy of it) is named as the
    # project names it, so that the line is the same on every machine; a table given by path keeps it
    shipped = error_table_path(path.name)
    table.setdefault("path", f"db/reference/{path.name}" if shipped is not None and
                     shipped.resolve() == path.resolve() else str(path))
    return table


@dataclass
class ErrorBar:
    """The error measured for a prediction's layer kinds: ``relative`` is the mean |error| of each
    validated kind (in the prediction's precision) weighted by its predicted time, ``worst`` the
    same with each kind's 90th-percentile |error| (fractions); ``by_kind`` kind -> mean |error|;
    ``unvalidated`` the kinds the validation never covered in this precision and
    ``unvalidated_share`` their share of the predicted sequential time; ``architectures`` those
    validated, ``extrapolated`` when the origin or target GPU is of another."""

    relative: float | None
    worst: float | None
    by_kind: dict[str, float]
    unvalidated: list[str]
    unvalidated_share: float
    source: str
    model_mean_abs_error: float | None = None
    architectures: list[str] = field(default_factory=list)
    extrapolated: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def error_bar(prediction: Prediction, table: dict) -> ErrorBar:
    """The :class:`ErrorBar` of ``prediction`` from the validation ``table`` (:func:`load_error_table`)."""
    times: dict[str, float] = collections.defaultdict(float)
    for lp in prediction.layers:
        if lp.status == "measured":
            times[lp.kind or lp.op] += lp.predicted_ms
    return weighted_error_bar(times, table, prediction.precision, (prediction.origin, prediction.target),
                              f"{table.get('command', 'predict_check.py')}, {table.get('date', '')}",
                              table.get("model_mean_abs_error"))


def weighted_error_bar(times: dict[str, float], table: dict, precision: str, gpus: tuple, provenance: str,
                       model_mean_abs_error: float | None) -> ErrorBar:
    """An :class:`ErrorBar` from the predicted time (ms) of each of the table's keys in ``times``
    (a layer kind; for a training step a call kind and phase): each key's measured mean and 90th
    percentile |error| in ``precision`` (``table["kinds"][key][precision]``) weighted by its time,
    the keys without one named with their share of the time; ``gpus`` the prediction's origin and
    target (``extrapolated`` when either is of an architecture the table does not hold);
    ``provenance`` what made the table, ``model_mean_abs_error`` the validation's mean model (or
    step) error."""
    total = sum(times.values())
    by_key, worst, unvalidated = {}, {}, []
    for key in sorted(times, key=lambda k: -times[k]):
        e = table["kinds"].get(key, {}).get(precision)
        if e is None:
            unvalidated.append(key)
        else:
            by_key[key], worst[key] = float(e["mean_abs_error"]), float(e["p90_abs_error"])
    archs = table.get("architectures") or []
    covered = sum(times[k] for k in by_key)
    rel = sum(times[k] * by_key[k] for k in by_key) / covered if covered else None
    wst = sum(times[k] * worst[k] for k in by_key) / covered if covered else None
    return ErrorBar(rel, wst, by_key, unvalidated, sum(times[k] for k in unvalidated) / total if total else 0.0,
                    f"{table.get('path', 'error table')} ({provenance})", model_mean_abs_error, list(archs),
                    any(g.architecture not in archs for g in gpus))
