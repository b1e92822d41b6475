"""The physical bound of a decoder LLM's phase, beside its lower-bound latency (LBL).

A decoder runs in two phases (docs/llm.md): **prefill** (S prompt tokens per sequence,
no cache: the time to first token, TTFT) and **decode** (one new token per sequence against a KV cache
of L tokens: the time per output token, TPOT). Whatever the kernels, a step cannot take less than the
roofline of the whole step (Williams, Waterman and Patterson, "Roofline", CACM 52(4), 2009):

    bound = max(FLOPs / peak_flops, bytes / DRAM_bandwidth)

with, per step,

* ``bytes`` = the weights the step must read once (every floating-point ONNX initializer, in the
  run's precision: shapes come from the graph even when the weights are stripped; an initializer
  that only Gather nodes read, an untied embedding table, counts the rows gathered) + the KV cache
  read (each attention's past keys and values: b x h_kv x (s_kv - s_q) x (d + d_v) elements, d alone
  where the values lie in the keys' rows, MLA's latent cache in the absorbed decode; in DRAM before the
  step starts). Decode is memory-bound: its floor is this byte count over
  the bandwidth (Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023, section 2:
  per-token latency >= (parameter bytes + KV-cache bytes) / memory bandwidth).
* ``FLOPs`` = the layers' FLOPs (a multiply-add is 2 FLOPs; each layer config's
  :meth:`~benanza.kinds.LayerConfig.flops`), with an attention's score and value products counted
  only over the (query, key) pairs its causal mask keeps (:func:`attention_flops`). Prefill is
  compute-bound: its floor is these FLOPs over the Tensor Core rate of the precision (fp32: the
  CUDA cores').

The ceilings are the system's measured ones (`benanza ceilings`: DRAM bandwidth from the device
copy, the GEMM rate of the precision; :func:`benanza.analysis.gpus.with_measured_ceilings`), else the
datasheet's (:mod:`benanza.analysis.gpus`), and every output says which.

Fractions: ``bound / LBL`` and ``bound / measured`` (the share of the physical limit the lower
bound and the framework reach; 1 = at the limit). The phase of an ONNX file is found by
:func:`decoder_phase`: decode where its attention reads a KV cache, prefill where its attention is
causal (or masked by a full (s_q, s_kv) bias, the form TorchScript exports leave the causal mask in)
and there is no cache; a model without such attention is no decoder and gets no bound. ``benanza
torch --phase`` names the phase itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from benanza import kinds as L
from benanza.analysis.roofline import Ceilings
from benanza.errors import UsageError
from benanza.kinds.onnx_map import TP
from benanza.kinds.precision import DTYPE_BYTES, Precision
from benanza.kinds.sdpa import kept_pairs
from benanza.spec import DECODER_PHASES
from benanza.lazy import LazyModule

onnx = LazyModule("onnx")


#: ONNX floating-point tensor types: the initializers that are weights (int64 shape constants and
#: boolean masks are not)
FLOAT_TYPES = frozenset({TP.FLOAT, TP.FLOAT16, TP.BFLOAT16, TP.DOUBLE, TP.FLOAT8E4M3FN, TP.FLOAT8E5M2})


@dataclass(frozen=True)
class WeightBytes:
    """The weights one step reads: ``parameters`` (elements of the floating-point initializers, each
    counted once), ``bytes`` (those read, in the run's precision: bytes per element x elements, the
    gathered rows only for a table only Gather reads), ``initializers`` (how many) and ``gathered``
    (how many were counted by their gathered rows)."""

    parameters: int
    bytes: int
    initializers: int
    gathered: int


def _numel(dims) -> int:
    return math.prod(int(d) for d in dims)


def weight_bytes(model: onnx.ModelProto, ml, precision: str) -> WeightBytes:
    """The weight bytes a step of ``ml`` (the :class:`benanza.processing.model.ModelLayers` of
    ``model``) reads in ``precision``: every floating-point initializer of ``model``'s main graph
    once, at the precision's bytes per element (:data:`benanza.kinds.precision.TABLE`: fp32/tf32 4,
    fp16/bf16 2, fp8 1), from its ``dims`` (present in weight-stripped files); an initializer every
    consumer of which is a Gather's data input counts the elements its Gather layers output (the rows
    read; also GatherND's, as transformers' ``batched_mm`` experts gather each (token, expert) pair's weights),
    at most its own size, and nothing where the Gather was folded (its indices are constants
    once the dims are bound, e.g. a decode step's position: the layer graph reads none of the table).
    The experts' weights of a mixture of experts (an initializer only ``GroupedMatMul`` nodes read, or ONNX
    Runtime's ``MoE`` as its experts' weights and biases) count the experts the layer's routing gives rows to (:attr:`benanza.kinds.GroupedGemmConfig.active`:
    a decode token reads its top-k experts, not all of them; under a measured routing an expert the
    router left idle is not read), so the bound and the LBL assume the same routing (for the balanced
    what-if, pass :func:`with_balanced_experts` of ``ml``). Raises UsageError for an unknown precision."""
    per = Precision.of(precision).bytes
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for i, x in enumerate(n.input):
            consumers.setdefault(x, []).append((n, i))
    gathered_out: dict[str, int] = {}
    expert_out: dict[str, float] = {}
    for ly in ml.layers:
        if ly.op_type in ("Gather", "GatherND") and ly.status != "zero_cost" and ly.output_shapes \
                and ly.output_shapes[0] is not None:  # zero-cost: an expert's slice the eager loop skips
            for name in (*ly.static_inputs, *ly.inputs[:1]):  # the table: a weight, so a static input
                gathered_out[name] = gathered_out.get(name, 0) + _numel(ly.output_shapes[0])
        if isinstance(ly.config, L.GroupedGemmConfig):
            cfg = ly.config  # the experts the routing gives rows to: an idle expert's weights are not read
            for name in ly.static_inputs or ly.inputs[1:2]:  # the weights: an initializer, so a static input
                expert_out[name] = max(expert_out.get(name, 0.0), cfg.active / cfg.experts)
    params = total = count = gathered = 0
    seen: set[str] = set()
    for t in model.graph.initializer:
        if t.data_type not in FLOAT_TYPES or t.name in seen:
            continue
        seen.add(t.name)
        n = _numel(t.dims)
        params += n
        count += 1
        uses = consumers.get(t.name, [])
        if uses and t.name in expert_out and all(
                (node.op_type == "GroupedMatMul" and i == 1) or (node.op_type == "MoE" and i >= 2) for node, i in uses):
            # the experts' weights (and ONNX Runtime MoE's biases): the active experts' share (GroupedGemm.active)
            n = math.ceil(n * expert_out[t.name])
        if uses and all(node.op_type in ("Gather", "GatherND") and i == 0 for node, i in uses):
            n = min(n, gathered_out.get(t.name, 0))  # no Gather layer: folded, a constant of the bound graph
            gathered += 1
        total += n * per
    return WeightBytes(params, total, count, gathered)


def attention_configs(ml) -> list:
    """The SDPA configs of ``ml``: its attention layers (opset 23 ``Attention``, contrib ops) and its
    attention fusion groups (decomposed forms), one per attention in the model."""
    out = [ly.config for ly in ml.layers if isinstance(ly.config, L.SdpaConfig)]
    out += [f.config for f in ml.fusions if isinstance(f.config, L.SdpaConfig)]
    return out


def kv_cache_bytes(ml, precision: str) -> int:
    """Bytes of KV cache one step reads: over each attention of ``ml``, b x h_kv x (s_kv - s_q) x
    (d + d_v) elements (the keys and values before this step's queries: the past; d only where V lies in
    K's rows, ``v_in_k``: MLA's latent cache in the absorbed decode, read once), at the bytes
    per element of the attention's data type (fp8: 1, an E4M3 cache as cuDNN's FP8 attention reads it,
    :data:`benanza.kinds.FP8_KINDS`; the fewest bytes any counted implementation reads, so that the
    bound stays below an LBL that takes the FP8 attention). 0 without a cache."""
    per = DTYPE_BYTES.get(Precision.of(precision).dtype, 2)
    return sum(c.b * c.kv_heads * max(c.s_kv - c.s_q, 0) * (c.d + (0 if getattr(c, "v_in_k", False) else c.d_v)) * per
               for c in attention_configs(ml))


def attention_flops(cfg) -> int:
    """FLOPs of one SDPA config counting only the (query, key) pairs its mask keeps
    (:func:`benanza.kinds.sdpa.kept_pairs`): all s_q x s_kv for "none" and "bias"; for "causal"
    (top-left: query i sees keys j <= i) and "causal_bottom_right" (j <= i + s_kv - s_q) the keys up
    to the diagonal, and with a sliding ``window`` only the last ``window`` of them (cudnn-frontend's
    ``set_causal_mask`` / ``set_causal_mask_bottom_right`` / ``set_diagonal_band_left_bound``). Per
    kept pair: 2 (d + d_v) for Q K^T and P V, plus the 7 of :meth:`benanza.kinds.sdpa.SdpaConfig.flops`
    for scale, mask and softmax; x b x h; an attention sink adds 4 per row (its max, subtract, exp and
    add in the softmax)."""
    sink = 4 * cfg.s_q if getattr(cfg, "sink", False) else 0
    return cfg.b * cfg.h * (kept_pairs(cfg) * (2 * (cfg.d + cfg.d_v) + 7) + sink)


def step_flops(ml) -> int:
    """FLOPs of one step of ``ml``: each benchmarked layer's config FLOPs, except the layers of an
    attention fusion group, whose SDPA counts by :func:`attention_flops` instead (as do attention
    layers)."""
    in_attention = {i for f in ml.fusions if isinstance(f.config, L.SdpaConfig) for i in f.layers}
    total = 0
    for ly in ml.layers:
        if ly.status != "benchmark" or ly.index in in_attention:
            continue
        total += attention_flops(ly.config) if isinstance(ly.config, L.SdpaConfig) else ly.config.flops()
    return total + sum(attention_flops(f.config) for f in ml.fusions if isinstance(f.config, L.SdpaConfig))


def decoder_phase(ml) -> str | None:
    """The decoder phase ``ml`` is a step of: "decode" when an attention reads a KV cache (s_kv >
    s_q), "prefill" when an attention is causal (``SdpaConfig.mask``: the pattern finds the causal mask of
    every export form, TorchScript's bias included), None when ``ml`` has neither: an encoder. A mask
    left as a bias does not make a decoder: BERT's padding mask expanded to [b, 1, s, s] and Swin's
    relative position bias of [windows, heads, 49, 49] are such biases (``benanza torch --phase`` names
    the phase of an export whose causal mask is not found)."""
    cfgs = attention_configs(ml)
    if any(c.s_kv > c.s_q for c in cfgs):
        return "decode"
    if any(c.mask in ("causal", "causal_bottom_right") for c in cfgs):
        return "prefill"
    return None


@dataclass(frozen=True)
class PhysicalBound:
    """One decoder step's physical bound: ``phase`` (prefill or decode), ``precision``, ``batch``
    (sequences), ``weights`` (:class:`WeightBytes`), ``kv_bytes`` (KV cache read, bytes), ``flops``
    (FLOPs of the step), ``bandwidth`` (DRAM bytes/s) and ``peak`` (FLOP/s of the precision) with
    ``ceilings`` ("measured": `benanza ceilings` on the system; "datasheet": :mod:`gpus`) and
    ``gpu``. ``memory_ms`` = (weight + KV bytes) / bandwidth, ``compute_ms`` = FLOPs / peak (ms);
    ``bound_ms`` their max; ``limit`` which one sets it."""

    phase: str
    precision: str
    batch: int
    weights: WeightBytes
    kv_bytes: int
    flops: int
    bandwidth: float
    peak: float
    ceilings: str
    gpu: str

    @property
    def bytes(self) -> int:
        return self.weights.bytes + self.kv_bytes

    @property
    def memory_ms(self) -> float:
        return self.bytes / self.bandwidth * 1e3

    @property
    def compute_ms(self) -> float:
        return self.flops / self.peak * 1e3

    @property
    def bound_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms)

    @property
    def limit(self) -> str:
        return "memory" if self.memory_ms >= self.compute_ms else "compute"

    def fraction(self, ms: float | None) -> float | None:
        """``bound_ms / ms``: the share of the physical limit a step of ``ms`` reaches (None for no
        time or a non-positive one)."""
        return self.bound_ms / ms if ms is not None and ms > 0 else None

    def ceilings_text(self) -> str:
        """Where the roofs come from, in words."""
        how = ("measured by `benanza ceilings` on this system" if self.ceilings == "measured" else
               f"the {self.gpu} datasheet (no ceilings measured on this system: run `benanza ceilings`)")
        return f"DRAM {self.bandwidth / 1e12:.2f} TB/s, {self.precision} {self.peak / 1e12:.0f} TFLOP/s: {how}"

    def to_dict(self) -> dict:
        return {"phase": self.phase, "precision": self.precision, "batch": self.batch,
                "weight_parameters": self.weights.parameters, "weight_bytes": self.weights.bytes,
                "kv_cache_bytes": self.kv_bytes, "bytes": self.bytes, "flops": self.flops,
                "bandwidth_bytes_per_s": self.bandwidth, "peak_flops_per_s": self.peak,
                "ceilings": self.ceilings, "ceilings_text": self.ceilings_text(), "gpu": self.gpu,
                "memory_ms": self.memory_ms, "compute_ms": self.compute_ms, "bound_ms": self.bound_ms,
                "limit": self.limit}


def physical_bound(model: onnx.ModelProto, ml, precision: str, ceilings: Ceilings, source: str, gpu: str,
                   phase: str | None = None) -> PhysicalBound | None:
    """The :class:`PhysicalBound` of ``ml`` (the layers of ``model``) in ``precision`` under
    ``ceilings`` (``source``: "measured" or "datasheet"; ``gpu``: its name), for ``phase`` (None:
    :func:`decoder_phase`); None when ``ml`` is no decoder. Raises UsageError for an unknown phase or
    non-positive ceilings."""
    if phase is not None and phase not in DECODER_PHASES:
        raise UsageError(f"phase {phase!r}: choose {' or '.join(DECODER_PHASES)}")
    if ceilings.flops_per_s <= 0 or ceilings.bytes_per_s <= 0:
        raise UsageError("the physical bound needs positive ceilings")
    phase = phase or decoder_phase(ml)
    if phase is None:
        return None
    return PhysicalBound(phase, precision, ml.batch, weight_bytes(model, ml, precision),
                         kv_cache_bytes(ml, precision), step_flops(ml), ceilings.bytes_per_s,
                         ceilings.flops_per_s, source, gpu)


def system_ceilings(database, system, precision: str) -> tuple[Ceilings, str, str]:
    """(ceilings, source, GPU name) of ``system`` for ``precision``: the ones `benanza ceilings`
    measured on it (``database.ceilings``; :func:`benanza.analysis.gpus.with_measured_ceilings`),
    source "measured", else its datasheet's (:func:`benanza.analysis.gpus.find_gpu`), source
    "datasheet". Raises UsageError when the GPU is not in the spec table or has no peak for
    ``precision``."""
    from benanza.analysis.gpus import find_gpu, with_measured_ceilings

    spec = find_gpu(system.gpu_name)
    measured = database.ceilings(system.id) if database is not None else {}
    source = "datasheet"
    if "dram_bandwidth" in measured:
        spec, source = with_measured_ceilings(spec, measured), "measured"
    peak = spec.peak_flops("fp16" if precision == "fp8" and spec.peak.get("fp8") is None else precision)
    return Ceilings(peak, spec.bandwidth), source, spec.name


def llm_terms(bound: PhysicalBound, lbl_ms: float, complete: bool, measured_ms: float | None = None,
              kernel_ms: float | None = None) -> dict:
    """The step in a user's terms: ``metric`` (TTFT for prefill, TPOT for decode), the measured
    latency and GPU kernel time (ms; None without a profile), the LBL (ms; ``lbl_complete`` False:
    a partial sum, not a bound), the physical bound (:meth:`PhysicalBound.to_dict`) and the
    fractions of it the LBL, the framework's latency and its kernel time reach (bound / time); for
    decode, tokens per second at each (batch / time)."""
    d = {"phase": bound.phase, "metric": DECODER_PHASES[bound.phase], "batch": bound.batch,
         "measured_ms": measured_ms, "kernel_ms": kernel_ms, "lbl_ms": lbl_ms, "lbl_complete": complete,
         "bound": bound.to_dict(), "bound_ms": bound.bound_ms,
         "lbl_fraction": bound.fraction(lbl_ms), "measured_fraction": bound.fraction(measured_ms),
         "kernel_fraction": bound.fraction(kernel_ms)}
    if bound.phase == "decode":
        d["tokens_per_s"] = {k: (bound.batch / v * 1e3 if v else None) for k, v in
                             (("measured", measured_ms), ("lbl", lbl_ms), ("bound", bound.bound_ms))}
    return d


def llm_doc(ml, analysis, database, system, measured_ms: float | None = None, kernel_ms: float | None = None,
            phase: str | None = None) -> dict | None:
    """:func:`llm_terms` of an analysis of ``ml`` (its LBL, precision) on ``system``: None when ``ml``
    is no decoder (and ``phase`` is None); ``{"phase", "error"}`` when the bound cannot be drawn (a
    GPU outside the spec table without measured ceilings), never raising for it. The model file is
    read again (without external weights) for its initializers' shapes. A mixture of experts adds
    ``experts`` (:func:`experts_share`, with ``routing_note``: the routing the LBL assumes and why,
    the processor's ``routing:`` notice, :func:`benanza.processing.routing.measured_routing`) and, where that routing is measured, its
    ``whatif`` under balanced routing (:func:`balanced_whatif` with that routing's ``bound_ms`` and
    ``weight_bytes``)."""
    from benanza.processing.model import load_graph

    phase = phase or decoder_phase(ml)
    if phase is None:
        return None
    try:
        ceil, source, gpu = system_ceilings(database, system, analysis.precision)
    except UsageError as e:
        return {"phase": phase, "metric": DECODER_PHASES.get(phase, phase), "error": str(e)}
    model, _ = load_graph(ml.path)
    b = physical_bound(model, ml, analysis.precision, ceil, source, gpu, phase)
    d = llm_terms(b, analysis.lbl_ms, analysis.complete, measured_ms, kernel_ms)
    experts = experts_share(analysis)
    if experts:
        experts["routing_note"] = next((n[len("routing: "):] for n in ml.notices if n.startswith("routing: ")),
                                       experts["routing"])
        whatif = balanced_whatif(ml, analysis, database, system)
        if whatif is not None:
            wb = physical_bound(model, whatif.pop("layers"), analysis.precision, ceil, source, gpu, phase)
            whatif.update(bound_ms=wb.bound_ms, weight_bytes=wb.weights.bytes)
            experts["whatif"] = whatif
        d["experts"] = experts
    return d


def with_balanced_experts(ml):
    """``ml`` (:class:`benanza.processing.model.ModelLayers`) with each grouped GEMM timed under a
    measured routing replaced by its balanced twin (:meth:`benanza.kinds.GroupedGemmConfig.balanced`),
    the other layers shared; None when no layer has a measured routing."""
    import dataclasses

    if not any(isinstance(ly.config, L.GroupedGemmConfig) and ly.config.routing == "measured" for ly in ml.layers):
        return None
    layers = [dataclasses.replace(ly, config=ly.config.balanced())
              if isinstance(ly.config, L.GroupedGemmConfig) and ly.config.routing == "measured" else ly
              for ly in ml.layers]
    return dataclasses.replace(ml, layers=layers, notices=list(ml.notices))


def balanced_whatif(ml, analysis, database, system) -> dict | None:
    """The LBL's balanced what-if of a step whose experts are timed under the routing the run measured:
    the same analysis (``analysis``'s precision, cache, layouts and convolution precision, on
    ``system`` from ``database``) of ``ml`` with every measured grouped GEMM balanced
    (:func:`with_balanced_experts`; the suite times those twins, :func:`benanza.processing.routing.balanced_twins`).
    Returns ``{"routing": "balanced", "lbl_ms", "lbl_complete", "experts_ms", "active", "experts",
    "layers"}`` (ms; ``experts_ms`` None when a twin has no valid measurement; ``layers``: the balanced
    ModelLayers, for its physical bound), None without a measured routing (the LBL is then balanced
    already)."""
    from benanza.analysis.analyzer import analyze

    twin = with_balanced_experts(ml)
    if twin is None:
        return None
    a = analyze(twin, database, system, analysis.precision, analysis.cache, tuple(analysis.layouts),
                analysis.conv_precision or None)
    ex = experts_share(a) or {}
    return {"routing": "balanced", "lbl_ms": a.lbl_ms, "lbl_complete": a.complete, "experts_ms": ex.get("lbl_ms"),
            "active": ex.get("active"), "experts": ex.get("experts"), "layers": twin}


def experts_share(analysis) -> dict | None:
    """The experts' part of a mixture-of-experts step: its ``GroupedGemm`` layers (the experts' GEMMs,
    :mod:`benanza.kinds.grouped_gemm`) and ``GroupedGemm`` fusion groups (an eager experts loop's
    per-expert GEMMs, each group at its time in the fused sequential LBL: the fused call where it is faster
    than its layers' sum, else the sum) in ``analysis``: ``layers`` (how many), ``lbl_ms`` (the sum of
    their lower-bound times, ms; None when one has no valid measurement: never a partial sum),
    ``share`` (of the step's sequential lower bound, the sum over every layer, ``lbl_fused_sequential_ms``;
    None with ``lbl_ms``), ``routing`` (the routings the configs are timed under), ``active`` /
    ``experts`` (experts given rows, of all, summed over the layers) and ``per_layer`` (each grouped
    GEMM's ``layer`` name, ``routing``, ``rows``, ``active`` and ``experts``; an eager loop's group is
    named ``group``). None for a model without experts."""
    parts = [(t.layer.name, t.layer.config, t.time_ms) for t in analysis.layers
             if isinstance(t.layer.config, L.GroupedGemmConfig)]
    parts += [("group", f.config, f.fused_ms if f.faster_than_sum else f.unfused_ms) for f in analysis.fusions
              if isinstance(f.config, L.GroupedGemmConfig)]
    if not parts:
        return None
    missing = any(ms is None for _, _, ms in parts)
    ms = None if missing else sum(ms for _, _, ms in parts)
    seq = analysis.lbl_fused_sequential_ms
    return {"layers": len(parts), "lbl_ms": ms, "share": ms / seq if ms is not None and seq else None,
            "routing": ", ".join(sorted({c.routing for _, c, _ in parts})),
            "active": sum(c.active for _, c, _ in parts), "experts": sum(c.experts for _, c, _ in parts),
            "per_layer": [{"layer": name, "routing": c.routing, "rows": c.rows, "active": c.active,
                           "experts": c.experts} for name, c, _ in parts]}
