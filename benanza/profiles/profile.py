"""The :class:`Profile`: what a framework did with a model, joined to the model's layers.

Built from a profile folder (:func:`load_profile`; format in :mod:`benanza.profiles`) or from parsed
parts (:func:`build_profile`). Every time is in **milliseconds**; per-iteration values are the
median over the profiled iterations. What the analyzer reads from it:

* Benanza ratio: :meth:`Profile.benanza_ratio` (LBL / measured latency);
* algorithm selection (Q3): :attr:`Profile.conv_engines` (the cuDNN engine config or legacy
  algorithm the framework ran per Conv layer, in the database's naming) and
  :attr:`Profile.gemm_algos` (the cuBLASLt algorithm per GEMM, also for 1x1 convolutions that
  cuDNN runs through cuBLASLt), next to the best measured ones;
* framework inefficiencies (Q4): :meth:`Profile.category_ms` (kernel time by join category:
  layout conversions, fills, copies, unfused batch norms, other), :meth:`Profile.unfused` (layers
  the framework ran as separate kernels where one fused call or a folded batch norm would do),
  :meth:`Profile.launch_gaps` and :meth:`Profile.host_bound_stretches` (from the trace), and
  :attr:`Profile.host_overhead_ms`;
* per layer: :attr:`Profile.layers` (framework kernel time of every layer, with its kernels).
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from benanza.errors import ProfileError
from benanza.profiles import trace as T
from benanza.profiles.cublaslt_log import CublasLtLog, Matmul, read_cublaslt_log
from benanza.profiles.cudnn_log import CudnnLog, read_cudnn_log
from benanza.profiles.join import CATEGORIES, JoinResult, KernelJoin, join

#: the ``format`` value of profile.json
FORMAT = "benanza-profile"
#: the profile.json version this code writes and reads
FORMAT_VERSION = 1
#: file names ``benanza profile`` writes (profile.json's ``files`` may name others)
DEFAULT_FILES = {"trace": "trace.json.gz", "cudnn_log": "cudnn.log", "cublaslt_log": "cublaslt.log"}


@dataclass(frozen=True)
class Latency:
    """End-to-end latency of one inference, measured outside the profiler.

    ``median_ms``, ``q1_ms``, ``q3_ms`` (25th/75th percentiles), ``iqr_ms`` = q3 - q1, ``samples``
    (count), ``method`` (``cuda_events``, ``perf_counter+synchronize``, or what the user says),
    ``samples_ms`` the raw samples when known.
    """

    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    samples: int
    method: str = ""
    samples_ms: tuple[float, ...] = ()

    @classmethod
    def from_samples(cls, samples_ms, method: str = "") -> "Latency":
        """Median and quartiles (numpy, linear interpolation) of the samples (ms). Raises
        :class:`ProfileError` without samples, or with a non-finite or negative one."""
        a = np.asarray(list(samples_ms), dtype=float)
        if a.size == 0:
            raise ProfileError("latency: no samples")
        if not np.all(np.isfinite(a)) or np.any(a < 0):
            raise ProfileError("latency: samples must be finite and >= 0 ms")
        q1, med, q3 = np.percentile(a, [25, 50, 75])
        return cls(median_ms=float(med), q1_ms=float(q1), q3_ms=float(q3), iqr_ms=float(q3 - q1),
                   samples=int(a.size), method=method, samples_ms=tuple(float(x) for x in a))

    @property
    def noisy(self) -> bool:
        """True when the IQR exceeds 10 % of the median (torch.utils.benchmark's warning rule)."""
        return self.iqr_ms > 0.1 * self.median_ms


@dataclass(frozen=True)
class FrameworkSettings:
    """How the framework ran: ``framework`` (``pytorch``), versions, the GPU, the data type and
    the switches that change the libraries' choices: ``cudnn_benchmark`` (autotuning of cuDNN
    engines), ``allow_tf32_matmul`` (``torch.backends.cuda.matmul.allow_tf32``),
    ``allow_tf32_cudnn`` (``torch.backends.cudnn.allow_tf32``); ``converter``: the ONNX-to-framework
    converter that built the module (``onnx2torch 1.5.15``), None for the user's own module;
    ``run``: what ran, ``native`` (the user's ``nn.Module``, torchvision or transformers model:
    ``benanza torch``) or ``onnx2torch`` (the ONNX graph converted: ``benanza profile``);
    ``memory_format`` (``contiguous``, ``channels_last``); ``compiled`` (``torch.compile`` mode, None
    for eager). None where unknown; ``extra`` keeps any other key of profile.json's ``settings``."""

    framework: str | None = None
    framework_version: str | None = None
    cudnn_version: int | None = None
    cuda_version: str | None = None
    gpu_name: str | None = None
    device: str | None = None
    dtype: str | None = None
    cudnn_benchmark: bool | None = None
    allow_tf32_matmul: bool | None = None
    allow_tf32_cudnn: bool | None = None
    converter: str | None = None
    run: str | None = None
    memory_format: str | None = None
    compiled: str | None = None
    extra: dict = field(default_factory=dict, hash=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict) -> "FrameworkSettings":
        names = {f for f in cls.__dataclass_fields__ if f != "extra"}
        return cls(**{k: d[k] for k in names if k in d}, extra={k: v for k, v in d.items() if k not in names})

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "extra"}
        d.update(self.extra)
        return d

    @property
    def run_kind(self) -> str:
        """``native`` or ``onnx2torch``: ``run`` when profile.json says, else ``onnx2torch`` when a
        converter built the module (profiles written before ``run`` existed), else ``unknown``."""
        if self.run:
            return self.run
        return "onnx2torch" if self.converter and self.converter.startswith("onnx2torch") else "unknown"

    @property
    def run_label(self) -> str:
        """What the framework side is, in words, for reports: ``PyTorch 2.11 eager, native module,
        channels_last`` or ``PyTorch 2.11 eager, onnx2torch conversion of the ONNX graph``."""
        what = {"native": "native module", "onnx2torch": "onnx2torch conversion of the ONNX graph"}.get(
            self.run_kind, "unknown module")
        parts = [f"{self.framework or 'framework'} {self.framework_version or ''}".strip(),
                 f"torch.compile({self.compiled})" if self.compiled else "eager", what]
        if self.memory_format and self.memory_format != "contiguous":
            parts.append(self.memory_format)
        return ", ".join(parts)


@dataclass(frozen=True)
class ConvEngine:
    """The cuDNN implementation the framework ran for one Conv layer (from the cuDNN log).

    ``engine_config``: the graph-API engine config in cudnn-frontend's plan naming (``eng28_k2=4_k3=0``,
    as benanza's database names them) or the legacy algorithm (``CUDNN_CONVOLUTION_FWD_ALGO_...``);
    ``engine_id``: the engine's global index (None for legacy calls); ``knobs``: knob choices
    (``(("TILE_SIZE", 4), ...)``; -1 is what cuDNN logs for an engine's default). The choice is
    the config executed most often for the layer's problem (autotuning tries each candidate a
    few times, the winner then runs every iteration), ties going to the latest.
    ``candidates``: every distinct config executed for the problem, in log order (the
    autotuner's trials when ``cudnn.benchmark`` is on); ``executions``: how often the chosen one
    ran. ``tf32``: TF32 enabled for the call; ``layout``: the input's layout as the framework
    passed it (``NCHW``/``NHWC``); ``data_type``, ``api`` (``graph`` or the legacy function);
    ``line``: the log line of the chosen config's last execution.
    """

    layer: int
    engine_config: str | None
    engine_id: int | None
    knobs: tuple[tuple[str, int], ...]
    candidates: tuple[str, ...]
    executions: int
    tf32: bool | None
    layout: str
    data_type: str | None
    api: str
    line: int

    @property
    def algorithm(self) -> str | None:
        """The algorithm as benanza's database names it: a graph engine config as it is
        (``eng28_k2=4_k3=0``), a legacy algorithm by its short name
        (:func:`benanza.profiles.cudnn_log.legacy_algorithm`: ``CUDNN_CONVOLUTION_BWD_DATA_ALGO_1`` ->
        ``ALGO_1``); None when the log named none."""
        from benanza.profiles.cudnn_log import legacy_algorithm

        return self.engine_config if self.api == "graph" else legacy_algorithm(self.engine_config)


@dataclass(frozen=True)
class GemmAlgo:
    """The cuBLASLt algorithm that ran one layer's GEMM (from the cuBLASLt log).

    ``algorithm``: ``algo21 tile=64x64 stages=32x6 ...`` (:attr:`Matmul.algorithm`); ``algo_id``;
    ``compute_type`` (``COMPUTE_32F_FAST_TF32`` means TF32 Tensor Cores); ``tensor_core``;
    ``m``/``n``/``k``/``batch`` in cuBLASLt's column-major terms; ``epilogue``; ``via``: ``gemm``
    for a Gemm/MatMul layer, ``cudnn`` for a 1x1 convolution that cuDNN's engine computes with
    cuBLASLt. The choice is the algorithm whose tile and stages name the layer's kernel in the
    trace when one does, else the one run most often (ties: the latest); ``candidates``: every
    distinct algorithm run for the problem, in log order; ``calls``: matmuls of the problem.
    """

    layer: int
    algorithm: str
    algo_id: int | None
    compute_type: str
    tensor_core: bool | None
    m: int
    n: int
    k: int
    batch: int
    epilogue: str
    via: str
    candidates: tuple[str, ...]
    calls: int
    line: int


@dataclass(frozen=True)
class LayerProfile:
    """Framework time of one model layer (median over iterations, ms).

    ``kernel_ms``: its ``layer`` kernels (the computation); ``layout_ms``/``fill_ms``/``copy_ms``:
    helper kernels its framework op launched (layout conversions, memsets and workspace
    initialization, copies); ``kernels``: the names of its kernels in one iteration, in order;
    ``libraries``: where they come from; ``op``: the framework op matched (None: the layer
    matched no op — zero-cost layers often do not); ``inputs_from``: producer layers;
    ``fusion``: index of the model's fusion candidate it belongs to (:class:`benanza.processing.model.Fusion`),
    ``fusion_kind`` that candidate's fused config kind (``ConvBiasAct``, ``GemmAct``, ``SDPA``,
    ``LayerNorm``, ``Unary`` for an erf-GELU, ...); ``covers``: the layers one framework op of
    this layer computes with it (a group found through module scopes, e.g. nn.MultiheadAttention's
    one op for its projections and attention: this layer's times are the group's), ``covered_by``:
    the layer whose times include this one's (its own times are then 0).
    """

    layer: int
    name: str
    op_type: str
    key: str | None
    op: str | None
    kernels: tuple[str, ...]
    libraries: tuple[str, ...]
    kernel_ms: float
    layout_ms: float
    fill_ms: float
    copy_ms: float
    inputs_from: tuple[int, ...]
    fusion: int | None
    fusion_kind: str | None = None
    covers: tuple[int, ...] = ()
    covered_by: int | None = None

    @property
    def total_ms(self) -> float:
        return self.kernel_ms + self.layout_ms + self.fill_ms + self.copy_ms


@dataclass(frozen=True)
class Unfused:
    """Layers the framework ran as separate kernels where one call would do: ``kind`` is
    ``conv_bias_relu`` (a Conv (+ bias) -> Relu fusion candidate), ``fusion_candidate`` (another of
    the model's fusion candidates; ``fusion_kind`` says which), ``batch_norm_after_conv`` (a BatchNormalization
    layer the framework could fold into the preceding Conv), or ``framework_batch_norm`` (batch
    norm kernels where the model has no batch norm layer). ``layers``: the layers involved;
    ``ms``: the kernel time per iteration that fusing or folding removes (the non-Conv kernels)."""

    kind: str
    layers: tuple[int, ...]
    ms: float
    fusion_kind: str | None = None


@dataclass(frozen=True)
class Profile:
    """A framework profile of one model, joined to its layers. Build with :func:`load_profile`
    or :func:`build_profile`.

    ``latency``: measured end-to-end latency (None when the profile has none);
    ``gpu_kernel_ms``: the union of GPU activity intervals per iteration (median, ms);
    ``iteration_ms``: the profiled iterations' span (host start to last GPU end; profiler
    overhead included); ``host_overhead_ms``: latency.median_ms - gpu_kernel_ms (>= 0; None
    without latency or without GPU activity): the time per inference the GPU does not compute; ``layers``: one
    :class:`LayerProfile` per model layer, graph order; ``kernels``: the join of every GPU activity
    (:class:`~benanza.profiles.join.KernelJoin`); ``conv_engines``/``gemm_algos``: per layer
    index; ``unmatched_ops``: framework op name -> count of ops (per iteration) that matched no
    layer; ``unmatched_layers``: layers no framework op matched (in every iteration);
    ``iterations``: profiled iterations; ``notices``: what the user should know (truncated logs...).
    """

    model: str
    batch: int
    dtype: str | None
    latency: Latency | None
    settings: FrameworkSettings
    gpu_kernel_ms: float
    iteration_ms: float
    host_overhead_ms: float | None
    layers: tuple[LayerProfile, ...]
    kernels: tuple[KernelJoin, ...]
    conv_engines: dict
    gemm_algos: dict
    unmatched_ops: dict
    unmatched_layers: tuple[int, ...]
    iterations: int
    notices: tuple[str, ...]
    folder: str | None = None
    trace: T.Trace | None = field(default=None, repr=False, compare=False, hash=False)

    # ------------------------------------------------------------------------------ derived

    def benanza_ratio(self, lbl_ms: float) -> float:
        """Benanza ratio = LBL / measured latency (< 1; the gap is the opportunity). Raises
        :class:`ProfileError` when the profile has no measured latency."""
        if self.latency is None or self.latency.median_ms <= 0:
            raise ProfileError("the profile has no measured latency: cannot compute the Benanza ratio")
        return lbl_ms / self.latency.median_ms

    def category_ms(self) -> dict[str, float]:
        """Kernel time per iteration (ms, mean over iterations) by join category, every category present."""
        out = {c: 0.0 for c in CATEGORIES}
        n = max(self.iterations, 1)
        for k in self.kernels:
            if k.iteration is not None:
                out[k.category] += k.dur_ms / n
        return out

    def category_counts(self) -> dict[str, int]:
        """Kernels per iteration (mean, rounded) by join category."""
        c = Counter(k.category for k in self.kernels if k.iteration is not None)
        n = max(self.iterations, 1)
        return {cat: round(c.get(cat, 0) / n) for cat in CATEGORIES}

    def framework_batch_norms(self) -> int:
        """Batch norms the framework ran that no model layer is (BN folded in the export), per
        iteration: a count of ops (``aten::batch_norm``...), not of their kernels (PyTorch's native
        batch norm is 3 kernels)."""
        from benanza.profiles.join import BATCH_NORM_OPS

        return round(sum(n for name, n in self.unmatched_ops.items() if name in BATCH_NORM_OPS))

    def unfused(self) -> list[Unfused]:
        """Layers run unfused (see :class:`Unfused`), with the kernel time fusing would remove."""
        out: list[Unfused] = []
        by = {lp.layer: lp for lp in self.layers}
        groups: dict[int, list[LayerProfile]] = {}
        for lp in self.layers:
            if lp.fusion is not None:
                groups.setdefault(lp.fusion, []).append(lp)
        for _, lps in sorted(groups.items()):
            if any(lp.op_type == "BatchNormalization" for lp in lps):
                continue  # Conv -> BN [-> Relu]: reported as batch_norm_after_conv below
            if all(lp.kernels for lp in lps) and len({lp.op for lp in lps}) > 1:
                fk = lps[0].fusion_kind
                out.append(Unfused("conv_bias_relu" if fk in (None, "ConvBiasAct") else "fusion_candidate",
                                   tuple(lp.layer for lp in lps), sum(lp.total_ms for lp in lps[1:]), fk))
        for lp in self.layers:
            if lp.op_type == "BatchNormalization" and lp.kernels and lp.inputs_from and \
                    by.get(lp.inputs_from[0]) is not None and by[lp.inputs_from[0]].op_type == "Conv":
                out.append(Unfused("batch_norm_after_conv", (lp.inputs_from[0], lp.layer), lp.total_ms))
        fbn = self.category_ms()["unfused_batch_norm"]
        if fbn > 0:
            out.append(Unfused("framework_batch_norm", (), fbn))
        return out

    def launch_gaps(self, min_gap_ms: float = 0.0) -> list[T.LaunchGap]:
        """:func:`~benanza.profiles.trace.launch_gaps` of every iteration."""
        if self.trace is None:
            raise ProfileError("the profile has no trace loaded")
        return [g for it in self.trace.iterations for g in T.launch_gaps(self.trace, it, min_gap_ms)]

    def host_bound_stretches(self, **kw) -> list[T.HostBoundStretch]:
        """:func:`~benanza.profiles.trace.host_bound_stretches` of every iteration."""
        if self.trace is None:
            raise ProfileError("the profile has no trace loaded")
        return [s for it in self.trace.iterations for s in T.host_bound_stretches(self.trace, it, **kw)]

    def to_dict(self) -> dict:
        """JSON-ready summary (per-kernel join included)."""
        return {
            "model": self.model, "batch": self.batch, "dtype": self.dtype, "folder": self.folder,
            "latency": asdict(self.latency) if self.latency else None,
            "settings": self.settings.to_dict(),
            "gpu_kernel_ms": self.gpu_kernel_ms, "iteration_ms": self.iteration_ms,
            "host_overhead_ms": self.host_overhead_ms, "iterations": self.iterations,
            "category_ms": self.category_ms(), "category_counts": self.category_counts(),
            "layers": [asdict(lp) for lp in self.layers],
            "conv_engines": {str(k): asdict(v) for k, v in self.conv_engines.items()},
            "gemm_algos": {str(k): asdict(v) for k, v in self.gemm_algos.items()},
            "unfused": [asdict(u) for u in self.unfused()],
            "unmatched_ops": dict(self.unmatched_ops), "unmatched_layers": list(self.unmatched_layers),
            "kernels": [asdict(k) for k in self.kernels], "notices": list(self.notices),
        }


# ------------------------------------------------------------------------------------ building

def _median(xs) -> float:
    return float(np.median(xs)) if len(xs) else 0.0


def conv_engines(ml, log: CudnnLog, direction: str = "forward") -> dict[int, ConvEngine]:
    """Per Conv layer of ``ml``, the engine config or algorithm the framework ran (see
    :class:`ConvEngine`) for the layer's ``direction`` (``forward``, or a training step's
    ``backward_data``/``backward_filter``: :attr:`~benanza.profiles.cudnn_log.Execution.direction`),
    matched by the convolution problem (dims, pads, strides, dilations, groups). Layers whose
    problem the log does not have are left out."""
    groups = log.engines_by_conv(direction)
    out: dict[int, ConvEngine] = {}
    for ly in ml.layers:
        cfg = ly.config
        if cfg is None or getattr(cfg, "kind", None) != "Conv":
            continue
        key = (tuple(cfg.x), tuple(cfg.w), tuple(cfg.pads), tuple(cfg.strides), tuple(cfg.dilations), cfg.group)
        ex = [e for e in groups.get(key, []) if e.engine_config is not None]
        if not ex:
            continue
        counts = Counter(e.engine_config for e in ex)
        last = {e.engine_config: i for i, e in enumerate(ex)}
        chosen = max(counts, key=lambda c: (counts[c], last[c]))
        e = ex[last[chosen]]
        cands = tuple(dict.fromkeys(x.engine_config for x in ex))
        out[ly.index] = ConvEngine(layer=ly.index, engine_config=chosen, engine_id=e.engine_id, knobs=e.knobs,
                                   candidates=cands, executions=counts[chosen], tf32=e.tf32, layout=e.layout,
                                   data_type=e.data_type, api=e.api, line=e.line)
    return out


def _gemm_keys(cfg) -> tuple[list[tuple], str]:
    kind = getattr(cfg, "kind", None)
    if kind == "Gemm":
        return [(tuple(sorted((cfg.m, cfg.n))), cfg.k, cfg.batch_count)], "gemm"
    if kind == "Conv":
        nsp = len(cfg.x) - 2
        if cfg.group == 1 and all(d == 1 for d in cfg.w[2:]) and all(s == 1 for s in cfg.strides) and \
                not any(cfg.pads) and all(d == 1 for d in cfg.dilations):
            n, c = cfg.x[0], cfg.x[1]
            hw = int(np.prod(cfg.x[2:2 + nsp]))
            kk = cfg.w[0]
            return [(tuple(sorted((hw, kk))), c, n), (tuple(sorted((n * hw, kk))), c, 1)], "cudnn"
    return [], ""


def gemm_algos(ml, log: CublasLtLog, layer_kernels: dict[int, tuple[str, ...]] | None = None) -> dict[int, GemmAlgo]:
    """Per GEMM layer (Gemm/MatMul, and 1x1 stride-1 convolutions that cuDNN may run through
    cuBLASLt), the cuBLASLt algorithm that ran it (see :class:`GemmAlgo`), matched by the problem
    (m, n, k up to orientation, batch). ``layer_kernels`` (layer -> kernel names from the trace)
    picks, among several algorithms of one problem, the one whose tile and stages name a kernel."""
    groups = log.by_problem()
    out: dict[int, GemmAlgo] = {}
    for ly in ml.layers:
        if ly.config is None:
            continue
        keys, via = _gemm_keys(ly.config)
        mms: list[Matmul] = []
        for k in keys:
            mms = groups.get(k, [])
            if mms:
                break
        if not mms:
            continue
        counts = Counter(m.algorithm for m in mms)
        last = {m.algorithm: i for i, m in enumerate(mms)}
        names = " ".join((layer_kernels or {}).get(ly.index, ()))

        def in_trace(a: str) -> bool:
            m = mms[last[a]]
            d = dict(m.algo)
            tile = d.get("tile", "").replace("MATMUL_TILE_", "")
            stages = d.get("stages", "").replace("MATMUL_STAGES_", "")
            return bool(tile and stages) and f"{tile}_{stages}" in names

        chosen = max(counts, key=lambda a: (in_trace(a), counts[a], last[a]))
        m = mms[last[chosen]]
        out[ly.index] = GemmAlgo(layer=ly.index, algorithm=chosen, algo_id=m.algo_id, compute_type=m.compute_type,
                                 tensor_core=m.tensor_core, m=m.m, n=m.n, k=m.k, batch=m.batch, epilogue=m.epilogue,
                                 via=via, candidates=tuple(dict.fromkeys(x.algorithm for x in mms)),
                                 calls=len(mms), line=m.line)
    return out


def build_profile(trace: T.Trace, ml, cudnn: CudnnLog | None = None, cublaslt: CublasLtLog | None = None,
                  latency: Latency | None = None, settings: FrameworkSettings | None = None,
                  dtype: str | None = None, folder: str | None = None,
                  notices: tuple[str, ...] = (), paths: dict[int, str] | None = None) -> Profile:
    """Join ``trace`` with the layer graph ``ml`` (:func:`benanza.processing.model.process` at the profiled
    batch) and, when given, the cuDNN and cuBLASLt logs; return the :class:`Profile`. ``paths``:
    layer index -> module name, for a trace with module scopes (:func:`benanza.profiles.join.join`)."""
    jr: JoinResult = join(trace, ml, paths)
    notes = list(notices)
    n_it = max(jr.iterations, 1)
    # per-iteration GPU time
    busy = [T.busy_ms(trace.kernels_of(it)) for it in trace.iterations]
    spans = []
    for it in trace.iterations:
        ks = trace.kernels_of(it)
        end = max([it.end_ms] + [k.end_ms for k in ks])
        spans.append(end - it.start_ms)
    gpu_ms = _median(busy)
    lps, names = _layer_profiles(trace, ml, jr)
    unmatched_ops = Counter(o.name for o in jr.ops if o.layer is None and o.kernels)
    unmatched_ops = {k: round(v / n_it, 2) for k, v in sorted(unmatched_ops.items())}
    never = set.intersection(*(set(u) for u in jr.unmatched_layers)) if jr.unmatched_layers else set()
    never = tuple(sorted(i for i in never if ml.layers[i].status != "zero_cost"))
    if never:
        n_layers = sum(1 for ly in ml.layers if ly.status != "zero_cost")
        notes.append(f"{len(never)} of {n_layers} layers matched no framework op "
                     f"(first: {ml.layers[never[0]].name!r}, {ml.layers[never[0]].op_type})")
    engines = {}
    if cudnn is not None:
        engines = conv_engines(ml, cudnn)
        if cudnn.truncated:
            notes.append(f"{cudnn.path}: the cuDNN log is truncated (last record dropped); "
                         f"engines found for {len(engines)} conv layers")
    algos = {}
    if cublaslt is not None:
        algos = gemm_algos(ml, cublaslt, {i: tuple(v) for i, v in names.items()})
        if cublaslt.truncated:
            notes.append(f"{cublaslt.path}: the cuBLASLt log is truncated (last line dropped)")
    host = None
    if latency is not None and trace.kernels:  # a CPU-only profile has no GPU to wait
        host = max(0.0, latency.median_ms - gpu_ms)
    return Profile(model=ml.model, batch=ml.batch, dtype=dtype or (settings.dtype if settings else None),
                   latency=latency, settings=settings or FrameworkSettings(gpu_name=trace.device_name),
                   gpu_kernel_ms=gpu_ms, iteration_ms=_median(spans), host_overhead_ms=host,
                   layers=tuple(lps), kernels=jr.kernels, conv_engines=engines, gemm_algos=algos,
                   unmatched_ops=unmatched_ops, unmatched_layers=never, iterations=jr.iterations,
                   notices=tuple(notes), folder=folder, trace=trace)


def _layer_profiles(trace: T.Trace, ml, jr: JoinResult) -> tuple[list[LayerProfile], dict[int, list[str]]]:
    """Per layer of ``ml``, its :class:`LayerProfile`: the median over iterations of its kernel time
    per category (layer, layout, fill, copy; ms), the framework op it matched (a covered layer's
    is its anchor's), and the kernel names and libraries of the first iteration. Also layer index ->
    those kernel names (for the cuBLASLt join)."""
    sums: dict[tuple[int, int, str], float] = {}
    names: dict[int, list[str]] = {}
    libs: dict[int, list[str]] = {}
    first_it = trace.iterations[0].index if trace.iterations else 0
    for k in jr.kernels:
        if k.layer is None or k.iteration is None:
            continue
        cat = k.category if k.category in ("layer", "layout", "fill", "copy") else "layer"
        sums[(k.layer, k.iteration, cat)] = sums.get((k.layer, k.iteration, cat), 0.0) + k.dur_ms
        if k.iteration == first_it:
            names.setdefault(k.layer, []).append(k.name)
            if k.library not in libs.setdefault(k.layer, []):
                libs[k.layer].append(k.library)
    op_of_layer: dict[int, str] = {}
    for o in jr.ops:
        if o.layer is not None:
            op_of_layer.setdefault(o.layer, o.name)

    def med(layer: int, cat: str) -> float:
        return _median([sums.get((layer, it.index, cat), 0.0) for it in trace.iterations])

    covers = jr.covers or {}
    covered_by = {m: a for a, ms in covers.items() for m in ms if m != a}
    lps = []
    for ly in ml.layers:
        anchor = covered_by.get(ly.index)
        lps.append(LayerProfile(layer=ly.index, name=ly.name, op_type=ly.op_type, key=ly.key,
                                op=op_of_layer.get(ly.index if anchor is None else anchor),
                                covers=tuple(covers.get(ly.index, ())), covered_by=anchor,
                                kernels=tuple(names.get(ly.index, ())),
                                libraries=tuple(libs.get(ly.index, ())), kernel_ms=med(ly.index, "layer"),
                                layout_ms=med(ly.index, "layout"), fill_ms=med(ly.index, "fill"),
                                copy_ms=med(ly.index, "copy"), inputs_from=tuple(ml.edges.get(ly.index, ())),
                                fusion=ly.fusion,
                                fusion_kind=ml.fusions[ly.fusion].config.kind if ly.fusion is not None else None))
    return lps, names


# ------------------------------------------------------------------------------- profile folder

def read_profile_json(folder: str | os.PathLike) -> dict:
    """Read and check ``FOLDER/profile.json`` (format in :mod:`benanza.profiles`). Raises
    :class:`ProfileError` naming the file (and line) when it is missing, not JSON, of another
    format or newer version, or lacks ``batch`` or a trace file."""
    p = Path(folder)
    if not p.exists():
        raise ProfileError(f"{p}: no such profile folder")
    if not p.is_dir():
        raise ProfileError(f"{p}: not a folder (a profile is a folder with profile.json and the trace)")
    f = p / "profile.json"
    try:
        text = f.read_text()
    except FileNotFoundError:
        raise ProfileError(f"{f}: no such file: not a profile folder (run `benanza profile` or see "
                           f"the README's profile folder format)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(f"{f}: cannot read: {e}") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"{f}: line {e.lineno} column {e.colno}: not valid JSON ({e.msg})") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ProfileError(f"{f}: \"format\" must be {FORMAT!r}: not a benanza profile")
    v = d.get("version", 1)
    if not isinstance(v, int) or v > FORMAT_VERSION:
        raise ProfileError(f"{f}: profile version {v!r} is newer than this benanza reads ({FORMAT_VERSION})")
    b = d.get("batch")
    if not isinstance(b, int) or isinstance(b, bool) or b <= 0:
        raise ProfileError(f"{f}: \"batch\" must be a positive integer, got {b!r}")
    files = d.get("files") or {}
    if not isinstance(files, dict) or not all(v is None or isinstance(v, str) for v in files.values()):
        raise ProfileError(f"{f}: \"files\" must map trace/cudnn_log/cublaslt_log to file names")
    for key, name in files.items():
        if name:
            profile_file(p, name, f"{f}: \"files\" \"{key}\"")
    lat = d.get("latency")
    if lat is not None and not isinstance(lat, dict):
        raise ProfileError(f"{f}: \"latency\" must be an object with samples_ms or median_ms")
    return d


def profile_file(folder: Path, name: str, where: str) -> Path:
    """The file ``name`` of the profile folder ``folder`` (a name from profile.json, ``where``):
    resolved (``..`` and symbolic links followed), it must lie inside the folder. Raises
    :class:`ProfileError` (one line naming ``where``) otherwise: a manifest never makes benanza read
    a file elsewhere."""
    if "\x00" in name:
        raise ProfileError(f"{where}: {name!r} is not a file name")
    root = folder.resolve()
    path = (folder / name).resolve()
    if path == root or not path.is_relative_to(root):
        raise ProfileError(f"{where}: {name!r} is outside the profile folder {folder}; name a file in it")
    return path


def _latency(d: dict, f: Path) -> Latency | None:
    lat = d.get("latency")
    if not lat:
        return None
    try:
        if lat.get("samples_ms"):
            return Latency.from_samples(lat["samples_ms"], str(lat.get("method", "")))
        med = float(lat["median_ms"])
        q1 = float(lat.get("q1_ms", med))
        q3 = float(lat.get("q3_ms", med))
        return Latency(median_ms=med, q1_ms=q1, q3_ms=q3, iqr_ms=q3 - q1, samples=int(lat.get("samples", 0)),
                       method=str(lat.get("method", "")))
    except ProfileError as e:
        raise ProfileError(f"{f}: {e}") from None
    except (KeyError, TypeError, ValueError):
        raise ProfileError(f"{f}: \"latency\" needs samples_ms (a list of ms) or median_ms (a number)") from None


def load_profile(folder: str | os.PathLike, model: str | os.PathLike | None = None, batch: int | None = None,
                 dims: dict[str, int] | None = None, batch_dim: int | None = None,
                 allow_mismatch: bool = False) -> Profile:
    """Load a profile folder and join it with the ONNX model.

    ``model``: the ONNX file (default: profile.json's ``model_path``, relative to the folder if
    not absolute); ``batch``: must equal profile.json's ``batch`` when given. A profile taken of
    another model (profile.json's ``model_sha256`` differs from the model file's SHA-256) is refused
    unless ``allow_mismatch`` (then a notice says so). Raises
    :class:`ProfileError` for a bad folder or file, :class:`~benanza.errors.ModelError` for a bad
    model.
    """
    from benanza.processing.model import process

    p = Path(folder)
    d = read_profile_json(p)
    f = p / "profile.json"
    if batch is not None and batch != d["batch"]:
        raise ProfileError(f"{f}: the profile was taken at batch {d['batch']}, not {batch}")
    if model is None:
        mp = d.get("model_path")
        if not mp:
            raise ProfileError(f"{f}: no model_path: give the ONNX model")
        model = Path(mp) if Path(mp).is_absolute() else p / mp
    files = {**{k: None for k in DEFAULT_FILES}, **(d.get("files") or {})}
    tname = files.get("trace")
    if not tname:
        tname = next((n for n in ("trace.json.gz", "trace.json") if (p / n).exists()), "trace.json.gz")
    trace = T.read_trace(p / tname)
    cudnn = read_cudnn_log(p / files["cudnn_log"]) if files.get("cudnn_log") else None
    lt = read_cublaslt_log(p / files["cublaslt_log"]) if files.get("cublaslt_log") else None
    ml = process(model, d["batch"], dims, batch_dim)
    notes = list(d.get("notices") or []) if isinstance(d.get("notices") or [], list) else d.get("notices")
    want = d.get("model_sha256")
    if want and want != ml.sha256:
        what = (f"{f}: the profile was taken of another model (its model_sha256 {str(want)[:12]}... is not "
                f"{Path(model).name}'s {ml.sha256[:12]}...)")
        if not allow_mismatch:
            raise ProfileError(what + "; give the profiled model, or --allow-mismatch")
        notes = list(notes) + [what + ": compared anyway (--allow-mismatch); the join and every figure may be wrong"]
    elif not want:
        notes = list(notes) + ["the profile does not record its model's hash: benanza cannot check that it is "
                               "a profile of this model"]
    d["notices"] = notes
    from benanza.profiles.join import layer_paths, trace_has_scopes

    paths = layer_paths(ml, model) if trace_has_scopes(trace) else None
    settings = FrameworkSettings.from_dict(d.get("settings") or {})
    if settings.gpu_name is None and trace.device_name:
        settings = FrameworkSettings.from_dict({**settings.to_dict(), "gpu_name": trace.device_name})
    notices = d.get("notices") or []
    if not isinstance(notices, list):
        raise ProfileError(f"{f}: \"notices\" must be a list of strings")
    return build_profile(trace, ml, cudnn, lt, _latency(d, f), settings, d.get("dtype"), str(p),
                         tuple(str(n) for n in notices), paths)
