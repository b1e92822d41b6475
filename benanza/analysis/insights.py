"""Insights: the analysis workflow of a model against a framework profile (Benanza Q3-Q6 and joint).

Joins an :class:`benanza.analysis.analyzer.Analysis` (the model's lower-bound latency, LBL, from the
performance database) with a :class:`benanza.profiles.Profile` (what the framework ran) and
names what stands between them. Definitions from docs/design.md ("Definitions") and Benanza (Li, Dakkak,
Xiong, Hwu, IPDPS 2020); every time is in **milliseconds per inference**:

* Benanza ratio = LBL / measured latency (< 1: the gap is the opportunity);
* parallel-execution potential = LBL_sequential - LBL_parallel (the critical path of the layer DAG);
* Q3 algorithm selection: per Conv layer, the engine config (or legacy algorithm) the framework ran,
  looked up by ``algorithm`` name among the layer's measurements in *our* database (call
  ``cudnnBackendExecute`` for graph-API engine configs), minus the layer's best measurement; and
  cuDNN's heuristic pick (``cudnnGetConvolutionForwardAlgorithm_v7``) minus the best. A framework
  engine the database did not measure is reported as such, never costed;
* Q4 framework inefficiencies: kernels the model does not need (layout conversions, copies,
  fills, batch norms run after their convolution instead of folded into it), unfused
  Conv+bias+Relu layers, launch gaps and host-bound stretches (from the trace) and host overhead
  (latency - GPU kernel time); each costed by the kernel (or idle) time it takes;
* Q5 layer fusion profit = LBL_unfused - LBL_fused (the Analysis' fusion candidates);
* Q6 Tensor Core profit = LBL in fp32 - LBL in the Tensor Core precision (tf32/fp16/bf16);
* joint speedup = measured latency / LBL_fused (parallel, the requested precision): every
  finding above applied at once.

Findings are ranked by estimated saving (ms). :func:`build_insights` computes them; the reports
(terminal, JSON, HTML) are in :mod:`benanza.reports.report`.
"""
from __future__ import annotations

import collections
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from benanza.analysis.analyzer import Analysis
from benanza import kinds as L
from benanza.database.store import Database
from benanza.kinds.backend import Backend
from benanza.database.records import estimated_ms
from benanza.analysis.whatif import Alternatives, WhatIf, compose, headline

#: the insights JSON's ``format`` (the input of ``benanza report``)
FORMAT = "benanza-insights"
FORMAT_VERSION = 1
#: how the unfused-layers finding names each fusion candidate kind (benanza.processing.model.Fusion), and the call
#: that would run the group
FUSION_TEXT = {
    "ConvBiasAct": ("Conv+bias+Relu groups", "cudnnConvolutionBiasActivationForward (or a fused engine) does the group in one call"),
    "Gemm": ("MatMul+bias groups (and SwiGLU's gate and up MatMuls of one input)", "a cuBLASLt BIAS epilogue (as PyTorch's Linear), or one GEMM of the concatenated gate and up weights, does the group in one call"),
    "Elementwise": ("SwiGLU gates (Sigmoid, Mul, Mul)", "one silu(gate) * up kernel (cuBLASLt has no SwiGLU epilogue)"),
    "GemmAct": ("MatMul+bias+activation groups", "a cuBLASLt epilogue (BIAS, RELU_BIAS, GELU_BIAS) or a cuDNN matmul graph does the group in one call"),
    "SDPA": ("attention blocks (MatMul, Softmax, MatMul)", "cuDNN's fused scaled-dot-product attention (or FlashAttention) does the block in one call"),
    "LayerNorm": ("decomposed LayerNormalizations", "one LayerNormalization kernel (cuDNN graph or torch.nn.functional.layer_norm)"),
    "RMSNorm": ("decomposed RMSNorms (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul)", "one RMSNorm kernel (cuDNN graph rmsnorm or torch.nn.functional.rms_norm)"),
    "RotaryEmbedding": ("decomposed rotary embeddings (Mul, Slice, Slice, Neg, Concat, Mul, Add)", "one rotary embedding kernel (cuDNN graph rope or a benanza kernel)"),
    "Unary": ("decomposed GELUs (erf: Div, Erf, Add, Mul, Mul; tanh: Pow, Mul, Add, Mul, Tanh, Add, Mul, Mul)", "one GELU kernel"),
    "Activation": ("SiLUs (Sigmoid, Mul)", "one SiLU kernel (cudnnActivationForward SWISH, torch's silu)"),
}

#: a saving under this (ms) is noise, not a finding
MIN_SAVING_MS = 1e-4


@dataclass(frozen=True)
class Finding:
    """One opportunity: ``kind`` (``algorithm_selection``, ``heuristic_selection``,
    ``layout_conversion``, ``copy``, ``fill``, ``unfused_batch_norm``, ``framework_batch_norm``,
    ``unfused_layers``, ``launch_gaps``, ``host_bound``, ``host_overhead``, ``layer_fusion``,
    ``tensor_cores``, ``parallel_execution``), ``category`` (``Q3`` ... ``Q6``, ``parallel``),
    ``title``; ``saving_ms``: estimated saving per inference (ms); ``layers``: layer indices
    involved; ``evidence``: kernel names, engine names and times that support it; ``detail``."""

    kind: str
    category: str
    title: str
    saving_ms: float
    layers: tuple[int, ...] = ()
    evidence: tuple[str, ...] = ()
    detail: str = ""
    #: its marginal saving in the what-if composition (:mod:`benanza.analysis.whatif`, ms): the additive
    #: findings' marginal savings add up to latency - the composition's final figure; None for an
    #: informational finding (``additive`` False: part of another step, or what no autotuning costs)
    marginal_ms: float | None = None
    additive: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layers"] = list(self.layers)
        d["evidence"] = list(self.evidence)
        return d


@dataclass(frozen=True)
class AlgorithmChoice:
    """Q3 for one layer. ``framework_engine``: the engine config / algorithm the framework ran
    (from the cuDNN or cuBLASLt log); ``framework_db_ms``: its time in our database (None when the
    database did not measure it: ``in_db`` False; from ``framework_db_source`` "screening replay"
    when the harness's screen timed it once and stopped, as slower than 1.5x the job's best); ``framework_trace_ms``: the layer's kernel time
    in the framework's trace; ``best_algorithm``/``best_ms``: the layer's fastest measurement;
    ``heuristic_algorithm``/``heuristic_ms``: cuDNN's (or cuBLASLt's) heuristic pick and its
    measured time; ``framework_cost_ms``/``heuristic_cost_ms``: their time minus the best (ms)."""

    layer: int
    name: str
    op: str
    library: str
    framework_engine: str | None
    framework_candidates: tuple[str, ...]
    framework_db_ms: float | None
    framework_trace_ms: float | None
    in_db: bool
    best_algorithm: str
    best_call: str
    best_ms: float | None
    heuristic_algorithm: str
    heuristic_ms: float | None
    framework_db_source: str = "measured"  # or "screening replay": one replay, stopped as slower than the best

    @property
    def framework_cost_ms(self) -> float | None:
        if self.framework_db_ms is None or self.best_ms is None:
            return None
        return max(0.0, self.framework_db_ms - self.best_ms)

    @property
    def heuristic_cost_ms(self) -> float | None:
        if self.heuristic_ms is None or self.best_ms is None:
            return None
        return max(0.0, self.heuristic_ms - self.best_ms)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["framework_candidates"] = list(self.framework_candidates)
        d["framework_cost_ms"] = self.framework_cost_ms
        d["heuristic_cost_ms"] = self.heuristic_cost_ms
        return d


@dataclass
class Insights:
    """The analysis workflow's result for one model, batch size and precision on one GPU.

    Times in ms per inference. ``latency_ms``: the framework's measured latency (None without one);
    ``gpu_kernel_ms``/``host_overhead_ms``: from the profile; ``lbl_*``: from the analysis;
    ``benanza_ratio`` = LBL_sequential / latency; ``breakdown``: the measured latency split into
    layers / layout / copy / fill / unfused_batch_norm / other kernel time, launch gaps and the
    rest of the host time; ``layers``: per layer, framework kernel time next to its LBL time;
    ``tensor_cores``: fp32 vs Tensor Core LBL when both were analysed; ``joint_speedup`` =
    latency / LBL_fused_parallel; ``findings`` ranked by ``saving_ms``."""

    model: str
    batch: int
    precision: str
    gpu: str
    framework: dict
    latency_ms: float | None
    latency_iqr_ms: float | None
    gpu_kernel_ms: float
    host_overhead_ms: float | None
    lbl_sequential_ms: float
    lbl_parallel_ms: float
    lbl_fused_sequential_ms: float
    lbl_fused_parallel_ms: float
    complete: bool
    breakdown: dict
    layers: list[dict]
    critical_path: list[dict]
    algorithms: list[AlgorithmChoice]
    findings: list[Finding]
    tensor_cores: dict | None = None
    joint: dict = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    whatif: dict = field(default_factory=dict)
    headline: str = ""
    #: the headline LBL (Analysis.lbl_ms), what it is, and its one count of missing layers
    lbl_ms: float = 0.0
    lbl_name: str = ""
    missing_layers: int = 0
    complete_unfused: bool = True
    incomplete_note: str = ""

    @property
    def benanza_ratio(self) -> float | None:
        """LBL / measured latency (docs/design.md), the LBL being the headline one (fused, critical path:
        :attr:`benanza.analysis.analyzer.Analysis.lbl_ms`); None without a latency. Above 1 means the
        framework ran faster than the "bound": a defect of benanza, flagged by ``report``."""
        if not self.latency_ms:
            return None
        return self.lbl_fused_parallel_ms / self.latency_ms

    @property
    def parallel_potential_ms(self) -> float:
        """LBL_sequential - LBL_parallel (ms)."""
        return max(0.0, self.lbl_sequential_ms - self.lbl_parallel_ms)

    @property
    def fusion_profit_ms(self) -> float:
        """LBL_unfused - LBL_fused, sequential (ms)."""
        return max(0.0, self.lbl_sequential_ms - self.lbl_fused_sequential_ms)

    @property
    def joint_speedup(self) -> float | None:
        return self.joint.get("speedup")

    def to_dict(self) -> dict:
        return {
            "format": FORMAT, "version": FORMAT_VERSION,
            "model": self.model, "batch": self.batch, "precision": self.precision, "gpu": self.gpu,
            "framework": self.framework, "latency_ms": self.latency_ms, "latency_iqr_ms": self.latency_iqr_ms,
            "gpu_kernel_ms": self.gpu_kernel_ms, "host_overhead_ms": self.host_overhead_ms,
            "lbl_sequential_ms": self.lbl_sequential_ms, "lbl_parallel_ms": self.lbl_parallel_ms,
            "lbl_fused_sequential_ms": self.lbl_fused_sequential_ms,
            "lbl_fused_parallel_ms": self.lbl_fused_parallel_ms, "complete": self.complete,
            "benanza_ratio": self.benanza_ratio, "parallel_potential_ms": self.parallel_potential_ms,
            "fusion_profit_ms": self.fusion_profit_ms, "tensor_cores": self.tensor_cores,
            "joint": self.joint, "breakdown": self.breakdown,
            "findings": [f.to_dict() for f in self.findings],
            "algorithms": [a.to_dict() for a in self.algorithms],
            "critical_path": self.critical_path, "layers": self.layers, "notices": self.notices,
            "whatif": self.whatif, "headline": self.headline,
            "lbl_ms": self.lbl_ms, "lbl_name": self.lbl_name, "missing_layers": self.missing_layers,
            "complete_unfused": self.complete_unfused,
            "incomplete_note": self.incomplete_note or None,
            # the ratio of a partial LBL is a partial ratio: never above-1-safe, never a bound
            "benanza_ratio_complete": self.complete,
            "layers_above_framework": sum(1 for r in self.layers if r.get("above_framework")),
        }


# --------------------------------------------------------------------------------------- helpers

#: the what-if step (:data:`benanza.analysis.whatif.STEPS`) each finding kind is part of
STEP_OF = {"launch_gaps": "launch_gaps", "host_overhead": "launch_gaps", "layout_conversion": "layout_conversion",
           "copy": "unneeded_kernels", "fill": "unneeded_kernels", "framework_batch_norm": "unneeded_kernels",
           "other_kernels": "unneeded_kernels", "algorithm_selection": "algorithm_selection",
           "implementation": "implementation",
           "layer_fusion": "layer_fusion", "tensor_cores": "tensor_cores", "parallel_execution": "parallel_execution"}
STEP_CATEGORY = {"launch_gaps": "Q4", "layout_conversion": "Q4", "unneeded_kernels": "Q4",
                 "algorithm_selection": "Q3", "implementation": "Q3", "layer_fusion": "Q5", "tensor_cores": "Q6",
                 "parallel_execution": "parallel"}


def _with_marginals(findings: list, w: WhatIf) -> list:
    """The findings with their marginal savings in the composition ``w``: a step's saving split
    among its findings in proportion to their own estimates (exact: the categories are disjoint);
    a step with a saving and no finding gets one; other findings are informational."""
    from dataclasses import replace

    out = []
    by_step: dict[str, list] = collections.defaultdict(list)
    for f in findings:
        st = STEP_OF.get(f.kind)
        if st is None:
            out.append(replace(f, marginal_ms=None, additive=False))
        else:
            by_step[st].append(f)
    for s in w.steps:
        fs = by_step.pop(s.kind, [])
        if not fs:
            if s.saving_ms > MIN_SAVING_MS:
                out.append(Finding(s.kind, STEP_CATEGORY[s.kind], s.title, s.saving_ms, s.layers, s.evidence,
                                   "what-if step (benanza.analysis.whatif)", marginal_ms=s.saving_ms, additive=True))
            continue
        tot = sum(f.saving_ms for f in fs)
        for f in fs:
            share = s.saving_ms * (f.saving_ms / tot if tot > 0 else 1 / len(fs))
            out.append(replace(f, marginal_ms=share, additive=True))
    for fs in by_step.values():  # a step the composition did not take (no Tensor Core analysis)
        out.extend(replace(f, marginal_ms=None, additive=False) for f in fs)
    return out


def _counted(names, per: int = 1) -> str:
    """``a x3, b x1`` of kernel names (most frequent first); ``per``: the profiled iterations the
    names were gathered over, the counts then per iteration (rounded)."""
    c = collections.Counter(names)
    return ", ".join(f"{n} x{k / per:.3g}" if k % per else f"{n} x{k // per}" for n, k in c.most_common())


def _short(name: str, n: int = 70) -> str:
    """A kernel's name without return type, template arguments and parameters, at most ``n`` characters."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    base = "".join(out).split("(", 1)[0].split()
    base = base[-1] if base else name
    return base if len(base) <= n else base[: n - 1] + "…"


def _layer_list(idx, names: dict[int, str], n: int = 6) -> str:
    idx = list(idx)
    s = ", ".join(f"{i} {names.get(i, '')}".strip() for i in idx[:n])
    return s + (f" (+{len(idx) - n} more)" if len(idx) > n else "")


def _above_framework(a: Analysis, p, rows: list[dict]) -> str:
    """The notice for an LBL above the framework's GPU kernel time: not a lower bound of what the
    framework ran, and the op types whose benanza time exceeds the framework's kernel time the most
    (a view in the framework, e.g. a Transpose folded into a later copy, has 0 ms there)."""
    over: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    for r in rows:
        if r["lbl_ms"] is None or r["framework_ms"] is None:
            continue
        o = over[r["op"]]
        o[0] += 1
        o[1] += r["lbl_ms"]
        o[2] += r["framework_ms"]
    worst = sorted(((op, n, lbl, fw) for op, (n, lbl, fw) in over.items() if lbl > fw), key=lambda x: x[3] - x[2])
    top = ", ".join(f"{op} x{n} (LBL {lbl:.4f} ms, framework kernels {fw:.4f} ms)" for op, n, lbl, fw in worst[:3])
    return (f"the LBL ({a.lbl_ms:.4f} ms) exceeds the framework's GPU kernel time ({p.gpu_kernel_ms:.4f} ms), "
            f"so it is not a lower bound of what the framework ran: benanza's measurements are slower than the "
            f"framework's kernels for {top or 'no single op type'}")


_UNSET_KNOB = re.compile(r"_k\d+=-1(?=_|$)")
_LT_DEFAULTS = {"tile": "auto", "stages": "auto", "splitK": "1", "red": "none", "swz": "0", "opt": "0", "cl": "auto"}
# cuBLASLt log field (cublasLtMatmulAlgoConfigAttributes_t as CUBLASLT_LOG_LEVEL prints it) -> benanza's name
_LT_LOG_FIELDS = {"tile": "tile", "stages": "stages", "splitK": "splitK", "reduction": "red", "swizzle": "swz",
                  "custom": "opt", "clusterShape": "cl"}
_LT_PREFIXES = ("MATMUL_TILE_", "MATMUL_STAGES_", "REDUCTION_SCHEME_", "CLUSTER_SHAPE_")
_LT_REDUCTION = {"COMPUTE_TYPE": "compute", "OUTPUT_TYPE": "output", "INPLACE": "inplace", "NONE": "none"}


def _lt_key(name: str) -> str | None:
    """A cuBLASLt algorithm as ``lt:algo=ID tile=.. stages=.. splitK=.. red=.. swz=.. opt=.. cl=..``
    with every field spelled out, from benanza's name (``lt:algo=55 tile=64x64 stages=8x3 splitK=1
    red=compute``) or the framework log's (``algo55 tile=64x64 stages=8x3 splitK=4
    reduction=COMPUTE_TYPE clusterShape=CLUSTER_SHAPE_2x1x1``, see
    :attr:`benanza.profiles.cublaslt_log.LtMatmul.algorithm`); None if ``name`` is neither."""
    if name.startswith("lt:algo="):
        toks = name[3:].split()
        fields = dict(t.split("=", 1) for t in toks if "=" in t)
        algo = fields.pop("algo")
    else:
        m = re.match(r"algo(-?\d+)(?:\s|$)", name)
        if m is None:
            return None
        algo = m.group(1)
        fields = {}
        for t in name[m.end():].split():
            if "=" not in t:
                continue
            k, v = t.split("=", 1)
            if k not in _LT_LOG_FIELDS:
                continue
            for pre in _LT_PREFIXES:
                if v.startswith(pre):
                    v = v[len(pre):]
            fields[_LT_LOG_FIELDS[k]] = _LT_REDUCTION.get(v, v.lower()) if k == "reduction" else v
    return "lt:algo=" + algo + "".join(f" {k}={fields.get(k, d)}" for k, d in _LT_DEFAULTS.items())


def engine_key(name: str) -> str:
    """An engine config or cuBLASLt algorithm name in the one spelling the framework's logs and the
    performance database share. cuDNN: unset knobs (choice -1) dropped, since cudnn-frontend lists
    them in some plans and not in others (PyTorch's ``eng1_k2=-1_k3=-1`` is benanza's ``eng1``).
    cuBLASLt: every config attribute with its default filled in (:func:`_lt_key`); attributes a log
    does not print (inner shape, fast accumulation) are left out of the key."""
    if name.startswith("eng"):
        return _UNSET_KNOB.sub("", name)
    return _lt_key(name) or name




def _db_times(db: Database, system_id: int, keys: list[str], cache: str) -> tuple[dict, dict, dict]:
    """Per (layer key, :func:`engine_key` of the algorithm): [(median_ms, call, precision, layout)]
    of every valid measurement; [(ms, call, precision, layout)] of every screened one (its one
    screening replay, from the harness's message); and a Counter of the other rows' statuses
    (not_supported, failed, skipped), which say why a framework's engine has no time."""
    out: dict[tuple[str, str], list[tuple]] = collections.defaultdict(list)
    screened: dict[tuple[str, str], list[tuple]] = collections.defaultdict(list)
    other: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    if not keys:
        return out, screened, other
    for m in db.measurements(system_id, keys, cache=cache):
        k = (m.layer_key, engine_key(m.algorithm))
        est = estimated_ms(m.status, m.message)
        if m.status == "ok" and m.median_ms is not None and np.isfinite(m.median_ms):
            out[k].append((m.median_ms, m.call, m.precision, m.layout))
        elif est is not None:
            screened[k].append((est, m.call, m.precision, m.layout))
        else:
            other[k][m.status] += 1
    return out, screened, other


def _framework_precision(analysis_precision: str, tf32: bool | None) -> list[str]:
    """Precisions whose measurements match what the framework ran: a TF32 cuDNN call in an fp32
    analysis is a tf32 measurement."""
    if analysis_precision == "fp32" and tf32:
        return ["tf32", "fp32"]
    return [analysis_precision]


def framework_rows(db: Database, system_id: int, keys: list[str], cache: str) -> dict:
    """Per (layer key, precision, layout): the fastest valid measurement of the framework's own call
    as PyTorch eager runs it (its ``backend``, :mod:`benanza.profiles.torch_candidates`; ms)."""
    out: dict[tuple[str, str, str], float] = {}
    for m in db.measurements(system_id, keys, cache=cache) if keys else ():
        if m.backend is Backend.TORCH_EAGER and m.status == "ok" and m.median_ms is not None and \
                np.isfinite(m.median_ms) and m.cache == cache:
            k = (m.layer_key, m.precision, m.layout)
            out[k] = min(out.get(k, np.inf), m.median_ms)
    return out


def _alternatives(a: Analysis, p, db: Database, system_id: int, algos: list, dbt: dict) -> Alternatives:
    """The framework's own switches per profile layer (:class:`benanza.analysis.whatif.Alternatives`):
    channels_last from the ``torch:`` rows in both layouts (with the batch norm PyTorch runs after
    each convolution when the export folded them: as many framework batch-norm kernels per
    inference as convolutions), cudnn.benchmark from the engine configs' rows (``dbt``)."""
    s = p.settings
    tf32_conv = bool(s.allow_tf32_cudnn) if s.allow_tf32_cudnn is not None else True
    layout_now = "NHWC" if s.memory_format == "channels_last" else "NCHW"
    by_index = {t.layer.index: t.layer for t in a.layers}
    n_it = max(p.iterations, 1)
    convs = [ly for ly in by_index.values() if ly.config is not None and ly.config.kind == "Conv"]
    bn_after_conv = bool(convs) and p.framework_batch_norms() == len(convs)

    def prec(kind: str) -> str:
        if a.precision in ("fp32", "tf32") and kind in L.CUDNN_TF32_KINDS:
            return "tf32" if tf32_conv else "fp32"
        return "fp32" if a.precision == "tf32" else a.precision

    bn_key = {ly.index: L.BatchNormConfig(shape=tuple(ly.config.output_shape()),
                                          epsilon=float(np.float32(1e-5))).key for ly in convs} if bn_after_conv else {}
    keys = sorted({ly.key for ly in by_index.values() if ly.key} | set(bn_key.values()))
    rows = framework_rows(db, system_id, keys, a.cache)
    cl: dict[int, float] = {}
    lay: dict[int, float] = {}
    missing = 0
    bn_ms = 0.0
    if layout_now == "NCHW":
        for lp in p.layers:
            if lp.covered_by is not None:
                continue
            d, any_pair = 0.0, False
            for i in tuple(lp.covers) or (lp.layer,):
                ly = by_index.get(i)
                if ly is None or ly.config is None:
                    continue
                pr = prec(ly.config.kind)
                t0, t1 = rows.get((ly.key, pr, "NCHW")), rows.get((ly.key, pr, "NHWC"))
                if t0 is None or t1 is None:
                    missing += ly.config.kind == "Conv"
                    continue
                d += t0 - t1
                any_pair = True
                if i in bn_key:
                    b0, b1 = (rows.get((bn_key[i], prec("BatchNorm"), x)) for x in ("NCHW", "NHWC"))
                    if b0 is not None and b1 is not None:
                        bn_ms += b0 - b1
            if any_pair:
                cl[lp.layer] = d
                lay[lp.layer] = lp.layout_ms
    notes = (f"{missing} convolutions without the framework's call timed in both layouts keep their time",) \
        if missing else ()
    # cudnn.benchmark: the framework's engine config against the fastest of the same call
    by_key: dict[str, list] = collections.defaultdict(list)
    for (k, _e), rs in dbt.items():
        by_key[k].extend(rs)
    eng: dict[int, float] = {}
    anchor = {m: lp.layer for lp in p.layers for m in (tuple(lp.covers) or (lp.layer,)) if lp.covered_by is None}
    for c in algos:
        ce = p.conv_engines.get(c.layer)
        if c.library != "cudnn" or ce is None or not ce.engine_config or c.layer not in anchor:
            continue
        want = _framework_precision(a.precision, ce.tf32)
        key = by_index[c.layer].key
        fw = [r for r in dbt.get((key, engine_key(ce.engine_config)), []) if r[2] in want and r[3] == ce.layout]
        if not fw:
            continue
        fw_ms, call, pr, _ = min(fw, key=lambda r: (want.index(r[2]), r[0]))
        best = min(r[0] for r in by_key[key] if r[1] == call and r[2] == pr and r[3] == ce.layout)
        if fw_ms > best:
            eng[anchor[c.layer]] = eng.get(anchor[c.layer], 0.0) + fw_ms - best
    return Alternatives(cl, lay, eng, notes, batch_norm_ms=bn_ms)


# ------------------------------------------------------------------------------------- building

def build_insights(a: Analysis, p, db: Database | None = None, system_id: int | None = None,
                   fp32: Analysis | None = None, tensor_core: Analysis | None = None,
                   min_gap_ms: float = 0.0) -> Insights:
    """The insights of analysis ``a`` against profile ``p`` (a :class:`benanza.profiles.Profile` of
    the same model and batch). ``db``/``system_id``: the performance database ``a`` came from,
    to cost the framework's engine choices (Q3); ``fp32``: the fp32 analysis when ``a`` is in a
    Tensor Core precision, or ``tensor_core``: a tf32/fp16/bf16 analysis when ``a`` is fp32 (Q6).
    One finder per question (:func:`_q3_findings` ... :func:`_parallel_finding`), in this order
    before ranking (the ranking is stable: equal savings keep it)."""
    names = {t.layer.index: t.layer.name for t in a.layers}
    n_it = max(p.iterations, 1)
    notices = list(p.notices)
    lps = {lp.layer: lp for lp in p.layers}
    lat = p.latency.median_ms if p.latency is not None else None

    keys = sorted({t.layer.key for t in a.layers if t.layer.key and (
        t.layer.index in p.conv_engines or t.layer.index in p.gemm_algos)})
    dbt, db_screened, db_other = (_db_times(db, system_id, keys, a.cache) if db is not None and system_id is not None
                                  else ({}, {}, {}))
    algos, why_missing = _algorithm_choices(a, p, lps, dbt, db_screened, db_other)
    findings, q3_notices = _q3_findings(algos, why_missing)
    notices += q3_notices
    cat_ms, kernel_findings = _unneeded_kernel_findings(p, n_it, names)
    bn, unfused_findings = _unfused_findings(p, lps, names)
    gap_ms, rest_host, host_findings, host_notices = _host_findings(p, n_it, lat, min_gap_ms)
    notices += host_notices
    tc, other, tc_findings = _tensor_core_finding(a, fp32, tensor_core, names)
    findings += (kernel_findings + unfused_findings + host_findings + _fusion_finding(a, names) + tc_findings
                 + _parallel_finding(a))

    findings = [f for f in findings if f.saving_ms > MIN_SAVING_MS]
    alt = _alternatives(a, p, db, system_id, algos, dbt) if db is not None and system_id is not None else None
    w = compose(a, p, tensor_core=other if tc and other is not a else None, alternatives=alt) if lat else None
    if w is not None:
        findings = _with_marginals(findings, w)
    findings.sort(key=lambda f: -f.saving_ms)

    rows = _layer_rows(a, lps)
    times = {t.layer.index: t for t in a.layers}
    # the headline LBL's critical path (fused): a fusion group as its last layer, with the group's time
    groups = a.fused_groups()
    members = {i for f in groups.values() for i in f.layers[:-1]}
    cpath = [{"index": i, "name": names.get(i, ""), "op": times[i].layer.op_type,
              "lbl_ms": a.fused_weight[i] if a.fused_weight else times[i].time_ms,
              "fused": list(groups[i].layers) if i in groups else None}
             for i in (a.fused_critical_path or a.critical_path) if i not in members]
    notices += _closing_notices(a, p, rows, lat)
    s = p.settings
    gpu = a.system.get("gpu_name") or ""
    return Insights(
        whatif=w.to_dict() if w is not None else {},
        headline=headline(a.model, a.batch, a.precision_label, gpu, s.run_label, w, a.incomplete_note)
        if w is not None else "", lbl_ms=a.lbl_ms, lbl_name=a.lbl_name, missing_layers=len(a.missing),
        incomplete_note=a.incomplete_note, complete_unfused=a.complete_unfused,
        model=a.model, batch=a.batch, precision=a.precision, gpu=a.system.get("gpu_name") or "",
        framework=_framework_info(p), latency_ms=lat,
        latency_iqr_ms=p.latency.iqr_ms if p.latency is not None else None,
        gpu_kernel_ms=p.gpu_kernel_ms, host_overhead_ms=p.host_overhead_ms,
        lbl_sequential_ms=a.lbl_sequential_ms, lbl_parallel_ms=a.lbl_parallel_ms,
        lbl_fused_sequential_ms=a.lbl_fused_sequential_ms, lbl_fused_parallel_ms=a.lbl_fused_parallel_ms,
        complete=a.complete, breakdown=_breakdown(cat_ms, bn, gap_ms, rest_host), layers=rows,
        critical_path=cpath, algorithms=algos, findings=findings, tensor_cores=tc,
        joint=_joint(a, lat, w, tc, other), notices=notices)


# ---- Q3: algorithm selection

def _algorithm_choices(a: Analysis, p, lps: dict, dbt: dict, db_screened: dict,
                       db_other: dict) -> tuple[list[AlgorithmChoice], collections.Counter]:
    """Q3 per layer, in layer order: the engine config (cuDNN) or algorithm (cuBLASLt) the
    framework ran, looked up in the database's rows (``dbt``: valid, ``db_screened``: one
    screening replay, ``db_other``: statuses; :func:`_db_times`), next to the layer's best and
    heuristic measurements; layers with only a heuristic pick get its half. Also the Counter of
    why framework engines have no time (``never measured`` or the rows' most common status)."""
    times = {t.layer.index: t for t in a.layers}
    why_missing: collections.Counter = collections.Counter()
    algos: list[AlgorithmChoice] = []
    for idx in sorted(set(p.conv_engines) | set(p.gemm_algos)):
        t = times.get(idx)
        if t is None:
            continue
        ce = p.conv_engines.get(idx)
        ga = p.gemm_algos.get(idx)
        if ce is not None and ce.engine_config:
            eng, cands, lib, tf32 = ce.engine_config, ce.candidates, "cudnn", ce.tf32
        elif ga is not None:
            eng, cands, lib, tf32 = ga.algorithm, ga.candidates, "cublaslt", ga.tensor_core
        else:
            continue
        want = _framework_precision(a.precision, tf32)
        ek = (t.layer.key, engine_key(eng))
        rows = [r for r in dbt.get(ek, []) if r[2] in want]
        source = "measured"
        if not rows:
            rows = [r for r in db_screened.get(ek, []) if r[2] in want]
            source = "screening replay"
        if not rows:
            st = db_other.get(ek)
            why_missing[max(st, key=st.get) if st else "never measured"] += 1
        rows.sort(key=lambda r: (want.index(r[2]), r[0]))
        db_ms = rows[0][0] if rows else None
        lp = lps.get(idx)
        algos.append(AlgorithmChoice(
            layer=idx, name=t.layer.name, op=t.layer.op_type, library=lib, framework_engine=eng,
            framework_candidates=tuple(cands), framework_db_ms=db_ms,
            framework_trace_ms=lp.kernel_ms if lp is not None and lp.kernels else None, in_db=db_ms is not None,
            best_algorithm=t.algorithm, best_call=t.call, best_ms=t.time_ms,
            heuristic_algorithm=t.heuristic_algorithm, heuristic_ms=t.heuristic_ms, framework_db_source=source))
    # layers with only a heuristic pick (no framework log) still get Q3's heuristic half
    for t in a.layers:
        if t.layer.index not in p.conv_engines and t.layer.index not in p.gemm_algos and t.heuristic_algorithm:
            algos.append(AlgorithmChoice(
                layer=t.layer.index, name=t.layer.name, op=t.layer.op_type, library="cudnn", framework_engine=None,
                framework_candidates=(), framework_db_ms=None, framework_trace_ms=None, in_db=False,
                best_algorithm=t.algorithm, best_call=t.call, best_ms=t.time_ms,
                heuristic_algorithm=t.heuristic_algorithm, heuristic_ms=t.heuristic_ms))
    algos.sort(key=lambda c: c.layer)
    return algos, why_missing


def _q3_findings(algos: list[AlgorithmChoice], why_missing: collections.Counter) -> tuple[list[Finding], list[str]]:
    """Q3's findings: the framework's engine choices slower than the best (cost = its database
    time - the layer's best, ms), and cuDNN's heuristic picks slower than the best; and the notice
    for framework engines without a valid time in the database."""
    findings: list[Finding] = []
    notices: list[str] = []
    costed = [c for c in algos if c.framework_cost_ms]
    not_in_db = [c for c in algos if c.framework_engine and not c.in_db]
    if costed:
        worst = sorted(costed, key=lambda c: -c.framework_cost_ms)
        findings.append(Finding(
            "algorithm_selection", "Q3", f"framework's engine choice is slower than the best on {len(costed)} layers",
            sum(c.framework_cost_ms for c in costed), tuple(c.layer for c in worst),
            tuple(f"layer {c.layer} {c.name}: ran {c.framework_engine} {c.framework_db_ms:.4f} ms in the database"
                  f"{' (one screening replay)' if c.framework_db_source != 'measured' else ''} vs "
                  f"best {c.best_algorithm} ({c.best_call}) {c.best_ms:.4f} ms: +{c.framework_cost_ms:.4f} ms"
                  for c in worst[:10]),
            "cost = the framework engine config's measured time in the performance database minus the layer's best; "
            f"{sum(c.framework_db_source != 'measured' for c in costed)} of the {len(costed)} from the one replay "
            "of the harness's screen (it stops sampling a call slower than 1.5x the job's best)"))
    if not_in_db:
        reasons = {"never measured": "never measured (not among the configs benanza timed)",
                   "not_supported": "not supported or excluded in this precision's math mode (e.g. a TENSOR_CORE "
                                    "engine for fp32 FMA)",
                   "failed": "failed", "skipped": "skipped (workspace over the limit)"}
        why = "; ".join(f"{n} {reasons.get(k, k)}" for k, n in why_missing.most_common())
        notices.append(f"{len(not_in_db)} framework engine configs have no valid time in the performance database, "
                       f"so their cost is unknown: {why} (e.g. layer {not_in_db[0].layer} {not_in_db[0].name}: "
                       f"{not_in_db[0].framework_engine})")
    heur = [c for c in algos if c.heuristic_cost_ms]
    if heur:
        worst = sorted(heur, key=lambda c: -c.heuristic_cost_ms)
        findings.append(Finding(
            "heuristic_selection", "Q3", f"cuDNN's heuristic pick is slower than the best on {len(heur)} layers",
            sum(c.heuristic_cost_ms for c in heur), tuple(c.layer for c in worst),
            tuple(f"layer {c.layer} {c.name}: heuristic {c.heuristic_algorithm} {c.heuristic_ms:.4f} ms vs best "
                  f"{c.best_algorithm} {c.best_ms:.4f} ms: +{c.heuristic_cost_ms:.4f} ms" for c in worst[:10]),
            "what following the library's heuristic (no autotuning) costs over the best measured algorithm"))
    return findings, notices


# ---- Q4: framework inefficiencies

#: the profile's kernel categories the model does not need: (category, finding kind, title)
UNNEEDED_KERNELS = (("layout", "layout_conversion", "layout conversions around convolutions"),
                    ("copy", "copy", "memory copies"), ("fill", "fill", "memory fills / workspace initialization"),
                    ("unfused_batch_norm", "framework_batch_norm", "batch norms the model folded"),
                    ("other", "other_kernels", "kernels that compute no layer"))


def _unneeded_kernel_findings(p, n_it: int, names: dict[int, str]) -> tuple[dict, list[Finding]]:
    """Q4's kernels the model does not need (:data:`UNNEEDED_KERNELS`), one finding per category,
    each costed by its kernel time per inference (ms); also the profile's time per category
    (:meth:`benanza.profiles.Profile.category_ms`)."""
    cat_ms = p.category_ms()
    by_cat: dict[str, list] = collections.defaultdict(list)
    for k in p.kernels:
        if k.iteration is not None:
            by_cat[k.category].append(k)
    findings = []
    for cat, kind, title in UNNEEDED_KERNELS:
        ks = by_cat.get(cat, [])
        if not ks:
            continue
        lays = tuple(sorted({k.layer for k in ks if k.layer is not None}))
        n = round(len(ks) / n_it)  # kernels per iteration; the folded batch norms count as ops (layers)
        what = p.framework_batch_norms() if cat == "unfused_batch_norm" else n
        findings.append(Finding(
            kind, "Q4", f"{what} {title}", cat_ms[cat], lays,
            (f"{n} kernels per iteration, {cat_ms[cat]:.4f} ms: " + _counted((_short(k.name) for k in ks), n_it),
             *((f"roles: {_counted((k.role for k in ks if k.role), n_it)}",) if any(k.role for k in ks) else ()),
             *((f"layers: {_layer_list(lays, names)}",) if lays else ())),
            "kernel time the model does not need (Benanza, IPDPS 2020: framework inefficiencies)"))
    return cat_ms, findings


def _unfused_findings(p, lps: dict, names: dict[int, str]) -> tuple[list, list[Finding]]:
    """Q4's unfused layers: batch norms run as kernels after their convolution, and each fusion
    candidate kind (:data:`FUSION_TEXT`) run as separate kernels, costed by their kernel time
    (ms); also the batch norms' :meth:`benanza.profiles.Profile.unfused` records."""
    findings = []
    unf = p.unfused()
    bn = [u for u in unf if u.kind == "batch_norm_after_conv"]
    if bn:
        bn_layers = tuple(u.layers[1] for u in bn)
        kn = [n for i in bn_layers for n in lps[i].kernels] if all(i in lps for i in bn_layers) else []
        findings.append(Finding(
            "unfused_batch_norm", "Q4", f"{len(bn)} batch norms run as separate kernels after their convolution",
            sum(u.ms for u in bn), tuple(i for u in bn for i in u.layers),
            (f"{len(bn)} BatchNormalization layers, {sum(u.ms for u in bn):.4f} ms: " + _counted(_short(n) for n in kn),
             f"layers: {_layer_list(bn_layers, names)}"),
            "fold each batch norm into the preceding convolution's weights and bias (inference); not a step "
            "of the what-if, which changes how the model runs, not the model: these are layers of the model "
            "(the LBL has them too), so folding them is an export with BatchNorm folded, then a new analysis"))
    groups: dict[str, list] = collections.defaultdict(list)
    for u in unf:
        if u.kind in ("conv_bias_relu", "fusion_candidate"):
            groups[u.fusion_kind or "ConvBiasAct"].append(u)
    for fk, us in sorted(groups.items()):
        what, how = FUSION_TEXT.get(fk, (f"{fk} groups", "one fused library call does the group"))
        findings.append(Finding(
            "unfused_layers", "Q4", f"{len(us)} {what} run as separate kernels",
            sum(u.ms for u in us), tuple(i for u in us for i in u.layers),
            tuple(f"layers {_layer_list(u.layers, names)}: {u.ms:.4f} ms of separate kernels" for u in us[:10]),
            how))
    return bn, findings


def _host_findings(p, n_it: int, lat: float | None,
                   min_gap_ms: float) -> tuple[float, float | None, list[Finding], list[str]]:
    """Q4's host time: launch gaps of at least ``min_gap_ms`` (GPU idle between kernels, from the
    trace), the host-bound stretches among them, and the host overhead outside GPU work
    (latency - GPU kernel time - gaps). Gaps are measured under the profiler, which slows the
    host: their saving is capped at the host overhead of the latency measured without it (with a
    notice). Returns (gap ms per inference, the rest of the host time in ms or None, findings, notices)."""
    findings, notices = [], []
    gaps = p.launch_gaps(min_gap_ms) if p.trace is not None else []
    gap_ms = sum(g.gap_ms for g in gaps) / n_it
    gap_cap = p.host_overhead_ms
    if gap_cap is not None and gap_ms > gap_cap:
        notices.append(f"launch gaps under the profiler ({gap_ms:.4f} ms) exceed the host overhead of the measured "
                       f"latency ({gap_cap:.4f} ms): their saving is capped at the host overhead")
        gap_ms_raw, gap_ms = gap_ms, gap_cap
    else:
        gap_ms_raw = gap_ms
    if gaps:
        hb = [g for g in gaps if g.host_bound]
        big = sorted(gaps, key=lambda g: -g.gap_ms)[:5]
        kn = p.trace.kernels
        # the host-bound stretches are part of these gaps: evidence of this finding, not a second
        # finding claiming the same time
        stretches = sorted(p.host_bound_stretches(), key=lambda s: -s.idle_ms)[:3]
        findings.append(Finding(
            "launch_gaps", "Q4", f"{len(gaps) // n_it} launch gaps (GPU idle between kernels)", gap_ms, (),
            (f"{len(gaps) // n_it} gaps per inference, {gap_ms_raw:.4f} ms idle, {sum(g.gap_ms for g in hb) / n_it:.4f} ms "
             f"of it host-bound (under the profiler)",
             *(f"{g.gap_ms * 1e3:.1f} µs before {_short(kn[g.after].name, 50)}" for g in big),
             *(f"host-bound stretch: {s.gaps} gaps, {s.idle_ms:.4f} ms idle over {s.span_ms:.4f} ms: "
               f"{' → '.join(s.ops[:6])}" for s in stretches)),
            "GPU idle time inside the inference: launch overhead, framework bookkeeping, synchronization "
            "(host-bound stretches: the GPU finished each kernel before the host launched the next); "
            "CUDA graphs or a compiled runtime remove it"))
    rest_host = None
    if p.host_overhead_ms is not None:
        rest_host = max(0.0, p.host_overhead_ms - gap_ms)
        if rest_host > MIN_SAVING_MS:
            findings.append(Finding(
                "host_overhead", "Q4", "host time outside GPU work (before the first / after the last kernel)",
                rest_host, (),
                (f"latency {lat:.4f} ms - GPU kernel time {p.gpu_kernel_ms:.4f} ms - launch gaps {gap_ms:.4f} ms",),
                "time the inference spends on the host while the GPU is not computing"))
    return gap_ms, rest_host, findings, notices


# ---- Q5, Q6, parallel execution

def _fusion_finding(a: Analysis, names: dict[int, str]) -> list[Finding]:
    """Q5: the fusion candidates faster than their layers; profit = LBL_unfused - LBL_fused (ms)."""
    prof_fus = [f for f in a.fusions if f.profit_ms > 0]
    if not prof_fus:
        return []
    return [Finding(
        "layer_fusion", "Q5", f"{len(prof_fus)} layer fusions are faster than their layers",
        a.lbl_sequential_ms - a.lbl_fused_sequential_ms, tuple(i for f in prof_fus for i in f.layers),
        tuple(f"layers {_layer_list(f.layers, names)} ({f.key.split('-')[0]}): {f.unfused_ms:.4f} → "
              f"{f.fused_ms:.4f} ms with {f.algorithm}" for f in sorted(prof_fus, key=lambda f: -f.profit_ms)[:10]),
        "profit = LBL_unfused - LBL_fused (Benanza, IPDPS 2020: layer fusion)")]


def _tensor_core_finding(a: Analysis, fp32: Analysis | None, tensor_core: Analysis | None,
                         names: dict[int, str]) -> tuple[dict | None, Analysis | None, list[Finding]]:
    """Q6: the fp32 LBL against the Tensor Core precision's (profit = LBL_without_TC - LBL_with_TC,
    ms, sequential). Returns (the ``tensor_cores`` record or None without both analyses, the
    Tensor Core analysis or None, the finding: only when ``a`` is the fp32 run, since a Tensor
    Core run already has the profit)."""
    base, other = (fp32, a) if fp32 is not None else ((a, tensor_core) if tensor_core is not None else (None, None))
    if base is None or other is None or base is other:
        return None, other, []
    tc = {"fp32_lbl_ms": base.lbl_sequential_ms, "precision": other.precision,
          "lbl_ms": other.lbl_sequential_ms, "profit_ms": base.lbl_sequential_ms - other.lbl_sequential_ms,
          "complete": base.complete and other.complete}
    if not (tc["profit_ms"] > MIN_SAVING_MS and other is not a):
        return tc, other, []
    tc_layers = [(tb.layer.index, tb.time_ms - to.time_ms) for tb, to in zip(base.layers, other.layers)
                 if tb.time_ms is not None and to.time_ms is not None and tb.time_ms - to.time_ms > 0]
    tc_layers.sort(key=lambda x: -x[1])
    return tc, other, [Finding(
        "tensor_cores", "Q6", f"Tensor Cores ({other.precision}) instead of fp32 FMA",
        tc["profit_ms"], tuple(i for i, _ in tc_layers),
        (f"LBL fp32 {base.lbl_sequential_ms:.4f} ms vs {other.precision} {other.lbl_sequential_ms:.4f} ms",
         *(f"layer {i} {names.get(i, '')}: -{d:.4f} ms" for i, d in tc_layers[:5])),
        f"profit = LBL_without_TC - LBL_with_TC (Benanza, IPDPS 2020: Tensor Cores); applies when running in {other.precision}")]


def _parallel_finding(a: Analysis) -> list[Finding]:
    """Running independent layers concurrently: potential = LBL_sequential - LBL_parallel (ms)."""
    if a.lbl_sequential_ms - a.lbl_parallel_ms <= MIN_SAVING_MS:
        return []
    return [Finding(
        "parallel_execution", "parallel", "run independent layers concurrently (streams / graphs)",
        a.lbl_sequential_ms - a.lbl_parallel_ms, tuple(a.critical_path),
        (f"LBL sequential {a.lbl_sequential_ms:.4f} ms vs parallel (critical path of "
         f"{len(a.critical_path)} layers) {a.lbl_parallel_ms:.4f} ms",),
        "potential = LBL_sequential - LBL_parallel")]


# ---- the measured latency's breakdown, per-layer rows, joint speedup, notices

def _breakdown(cat_ms: dict, bn: list, gap_ms: float, rest_host: float | None) -> dict:
    """The measured latency split (ms): layers / layout / copies / fills / unfused_batch_norm /
    other kernel time, launch gaps and the rest of the host time. Batch norms run after their
    convolution (``bn``) are layer kernels in the join: shown apart here."""
    bn_ms = sum(u.ms for u in bn)
    return {"layers": max(0.0, cat_ms.get("layer", 0.0) - bn_ms), "layout": cat_ms.get("layout", 0.0),
            "copies": cat_ms.get("copy", 0.0), "fills": cat_ms.get("fill", 0.0),
            "unfused_batch_norm": cat_ms.get("unfused_batch_norm", 0.0) + bn_ms, "other": cat_ms.get("other", 0.0),
            "gaps": gap_ms, "host": rest_host}


def _layer_rows(a: Analysis, lps: dict) -> list[dict]:
    """Per layer (zero-cost layers without framework kernels left out): the framework's kernel time
    (ms, from the profile ``lps``) next to its LBL time and measurement, whether it is on the
    critical path, and ``above_framework`` when its bound is slower than the framework's kernels for
    it. ``status``: measured, zero_cost, missing (no time: the LBL is partial) or covered (no time
    of its own, computed by a fused call the LBL counts)."""
    crit = set(a.critical_path)
    rows = []
    for t in a.layers:
        lp = lps.get(t.layer.index)
        if t.status == "zero_cost" and (lp is None or not lp.kernels):
            continue
        fk = lp.kernel_ms if lp is not None else None
        rows.append({"index": t.layer.index, "name": t.layer.name, "op": t.layer.op_type,
                     "status": "covered" if t.covered else t.status,
                     # the layer's bound is slower than the framework's kernels for it: not a bound there
                     "above_framework": bool(t.time_ms is not None and fk and t.time_ms > fk and not t.conversion),
                     "framework_ms": lp.total_ms if lp is not None else None,
                     "framework_kernel_ms": lp.kernel_ms if lp is not None else None,
                     "framework_helper_ms": (lp.layout_ms + lp.fill_ms + lp.copy_ms) if lp is not None else None,
                     "framework_kernels": list(lp.kernels) if lp is not None else [],
                     "lbl_ms": t.time_ms, "algorithm": t.algorithm or None, "call": t.call or None,
                     "critical": t.layer.index in crit})
    return rows


def _joint(a: Analysis, lat: float | None, w: WhatIf | None, tc: dict | None, other: Analysis | None) -> dict:
    """The joint speedup = measured latency / LBL_fused parallel (every finding applied at once),
    with the what-if composition's steps; also against the Tensor Core analysis ``other`` when
    it is complete. Empty without a latency."""
    if not lat:
        return {}
    target = a.lbl_fused_parallel_ms
    joint = {
        "speedup": lat / target if target > 0 else None, "target_ms": target, "latency_ms": lat,
        "speedup_sequential": lat / a.lbl_fused_sequential_ms if a.lbl_fused_sequential_ms > 0 else None,
        "steps": [{"step": "measured latency", "ms": lat}]
                 + [{"step": st.title, "ms": st.ms_after} for st in w.steps],
        "explanation": (f"measured {lat:.4f} ms / LBL_fused parallel {target:.4f} ms in {a.precision}: "
                        f"removing host overhead and gaps, the kernels the model does not need, slower "
                        f"algorithms, unfused layers and serial execution together"),
    }
    if tc and other is not a and other is not None and other.complete:
        joint["speedup_tensor_cores"] = lat / other.lbl_fused_parallel_ms if other.lbl_fused_parallel_ms else None
        joint["tensor_core_precision"] = other.precision
    return joint


def _closing_notices(a: Analysis, p, rows: list[dict], lat: float | None) -> list[str]:
    """Notices on the comparison itself: TF32 convolutions against an fp32 analysis, an LBL above
    the framework's GPU kernel time (:func:`_above_framework`), an incomplete LBL, no latency."""
    notices = []
    if a.precision == "fp32" and any(e.tf32 for e in p.conv_engines.values()):
        notices.append("the framework ran its convolutions with TF32 enabled (cuDNN log) while this analysis is "
                       "fp32 (FMA only): compare with --dtype tf32 too")
    if a.lbl_ms > p.gpu_kernel_ms > 0:
        notices.append(_above_framework(a, p, rows))
    if not a.complete:
        notices.append(f"the LBL is {a.incomplete_note}: every LBL figure and the Benanza ratio are partial")
    above = [r for r in rows if r.get("above_framework")]
    if above:
        notices.append(f"{len(above)} layers' bound is slower than the framework's kernels for them (e.g. "
                       + ", ".join(f"{r['name'] or r['op']} {r['lbl_ms'] * 1e3:.1f} vs "
                                   f"{r['framework_kernel_ms'] * 1e3:.1f} µs" for r in above[:3])
                       + "): benanza lacks the framework's kernel for them, so the bound is loose there")
    if lat and a.lbl_sequential_ms > lat:
        notices.append(f"the unfused LBL ({a.lbl_sequential_ms:.4f} ms, sequential) is above the measured latency "
                       f"({lat:.4f} ms): only the fused LBL ({a.lbl_ms:.4f} ms) bounds this framework, which fuses")
    if lat is None:
        notices.append("the profile has no measured latency: no Benanza ratio or joint speedup")
    return notices


def _framework_info(p) -> dict:
    """What ran the profile: framework, version, GPU, its cuDNN/TF32 settings, dtype, folder,
    profiled iterations, how the latency was measured and the run's label and kind."""
    s = p.settings
    framework = {"framework": s.framework, "version": s.framework_version, "gpu_name": s.gpu_name,
                 "cudnn_benchmark": s.cudnn_benchmark, "allow_tf32_cudnn": s.allow_tf32_cudnn,
                 "allow_tf32_matmul": s.allow_tf32_matmul, "dtype": p.dtype, "folder": p.folder,
                 "iterations": p.iterations,
                 "latency_method": p.latency.method if p.latency is not None else None}
    framework["run_label"] = s.run_label
    framework["run"] = s.run_kind
    return framework
