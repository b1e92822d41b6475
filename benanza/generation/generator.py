"""Benchmark generator: unique layer configs -> a C++ benchmark suite and its CMake project.

The suite is rendered from the Jinja templates in ``templates/`` (one translation unit per layer
kind; layer configs are *data* in a table, so compile time does not grow with the model) and the
fixed harness in ``cpp/`` (timing, statistics, device query, entry point), which is copied next to
it so the generated folder builds on its own.

Untrusted text (node names, the model name) reaches the generated code only through
:func:`cpp_string`, an escaped C++ string literal; identifiers and numbers come from configs.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2

from benanza import __version__
from benanza import kinds as L
from benanza.database.store import FRAMEWORK_JOB_SUFFIX
from benanza.errors import UsageError
from benanza.processing.model import ModelLayers

#: where the templates and the C++ harness live: next to the package in a source checkout, inside
#: the package data when installed
_PKG = Path(__file__).resolve().parents[1]  # the benanza package


def _resource_dir(name: str) -> Path:
    for base in (_PKG / "_data", _PKG.parent):
        p = base / name
        if p.is_dir():
            return p
    raise FileNotFoundError(f"benanza resource folder {name!r} not found (broken install?)")


def templates_dir() -> Path:
    return _resource_dir("templates")


def harness_dir() -> Path:
    return _resource_dir("cpp")


_PRECISION_ENUM = {"fp32": "Precision::FP32", "tf32": "Precision::TF32", "fp16": "Precision::FP16",
                   "bf16": "Precision::BF16", "fp8": "Precision::FP8"}


def cpp_string(text: str) -> str:
    """Escape ``text`` as a C++ string literal (with quotes).

    Printable ASCII passes except ``\\``, ``"`` and ``?`` (no trigraphs); everything else,
    including newlines and every byte of non-ASCII UTF-8, becomes a 3-digit octal escape, so no
    input can end the literal, start a comment or splice a line.
    """
    out = ['"']
    for byte in str(text).encode("utf-8"):
        ch = chr(byte)
        if ch in '\\"?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out)


def c_array(values, size: int | None = None, fill: int = 0) -> str:
    """C initializer ``{a, b, c}`` of ints/floats, padded with ``fill`` to ``size``."""
    vals = list(values)
    if size is not None:
        if len(vals) > size:
            raise ValueError(f"{len(vals)} values do not fit an array of {size}")
        vals = vals + [fill] * (size - len(vals))
    return "{" + ", ".join(_num(v) for v in vals) + "}"


def _num(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"non-finite constant {v}")
    return repr(f)


_JOB_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


@dataclass(frozen=True)
class Job:
    """One benchmark job: a layer config measured in one precision."""

    id: str
    config: L.LayerConfig
    precision: str
    node: str  # one ONNX node name using this config (untrusted)
    layout: str = "NCHW"  # NHWC: the layer on channels-last tensors (convolutions and their neighbours)

    @property
    def layer_key(self) -> str:
        return self.config.key

    @property
    def kind(self) -> str:
        return self.config.kind

    def to_dict(self) -> dict:
        return {"job": self.id, "layer_key": self.layer_key, "kind": self.kind,
                "precision": self.precision, "node": self.node, "layout": self.layout,
                "description": self.config.describe(), "params": self.config.params(),
                "batch": self.config.batch}


def job_id(config: L.LayerConfig, precision: str, layout: str = "NCHW") -> str:
    jid = f"{config.key}.{precision}" + ("" if layout == "NCHW" else f".{layout.lower()}")
    assert _JOB_ID.match(jid), jid
    return jid


def job_layout(jid: str) -> str:
    """The tensor layout of a :func:`job_id` (``KEY.PRECISION[.nhwc][.torch]``)."""
    if jid.endswith(FRAMEWORK_JOB_SUFFIX):
        jid = jid[:-len(FRAMEWORK_JOB_SUFFIX)]
    return "NHWC" if jid.endswith(".nhwc") else "NCHW"


def job_source(jid: str) -> str:
    """``framework`` for a job of the framework's own kernels (its id ends in ``.torch``: its
    measurements are the ``torch:`` calls), else ``library`` (the generated suite's job: cuDNN,
    cuBLAS and benanza's kernels)."""
    return "framework" if jid.endswith(FRAMEWORK_JOB_SUFFIX) else "library"


def framework_job_id(jid: str) -> str:
    """The framework job of the same config, precision and layout as the suite job ``jid``."""
    return jid + FRAMEWORK_JOB_SUFFIX


def _parse_choices(text: str, allowed, normalise, what: str, choices: str) -> list[str]:
    """A comma-separated list of ``allowed`` values (after ``normalise``), in order, without
    repeats. Raises :class:`UsageError` for an unknown value or an empty list."""
    out: list[str] = []
    for part in str(text).split(","):
        v = normalise(part.strip())
        if not v:
            continue
        if v not in allowed:
            raise UsageError(f"unknown {what} {part.strip()!r} (choose from {choices})")
        if v not in out:
            out.append(v)
    if not out:
        raise UsageError(f"no {what} given")
    return out


def parse_precisions(text: str) -> list[str]:
    """Parse ``"fp32,fp16"``. Raises :class:`UsageError` for an unknown data type."""
    return _parse_choices(text, L.PRECISIONS, str.lower, "data type", ", ".join(L.PRECISIONS))


#: tensor layouts a suite can time; NHWC applies to convolutions (their graph-API engine configs)
#: and their neighbours (BatchNorm, Pooling, broadcasting Elementwise: the same legacy calls on
#: channels-last tensors)
LAYOUTS = ("NCHW", "NHWC")

#: layer kinds that get an NHWC job when NHWC is asked for (see :func:`nhwc_job`). Activation,
#: Dropout and Unary layers do not: they read and write every element once in memory order, so a
#: channels-last tensor is the same call on the same bytes and their NCHW measurement serves an
#: NHWC analysis as it is (the analyzer accepts NCHW measurements under ``--layout nchw,nhwc``).
#: Elementwise layers get one only where the layout changes how the broadcast operand is read
#: (a per-channel operand, ...) and they read a convolution's output (directly or through other
#: image layers); a full-size or scalar operand is layout-agnostic as activations are.
NHWC_KINDS = ("Conv", "ConvBiasAct", "ConvBnAct", "BatchNorm", "Pooling", "Elementwise")

#: kinds whose output stays an image (N, C, spatial...) when an input is one: how "a convolution's
#: neighbour" propagates through a CNN
_IMAGE_KINDS = ("Conv", "BatchNorm", "Pooling", "Activation", "Elementwise", "LRN", "Dropout", "Unary", "Copy")


def channels_last(shape) -> list[int]:
    """(N, C, s1, s2...) -> (N, s1, s2..., C): the order an NHWC tensor's memory is packed in."""
    s = list(shape)
    return s if len(s) < 3 else [s[0]] + s[2:] + [s[1]]


def _elementwise_layout_matters(cfg: L.ElementwiseConfig) -> bool:
    a, b = list(cfg.a), list(cfg.b)
    if len(a) < 3 or len(a) != len(b):
        return False
    return collapse_broadcast(a, b) != collapse_broadcast(channels_last(a), channels_last(b))


def image_layers(ml: ModelLayers) -> set[int]:
    """Indices of the layers that read an image a convolution made: a Conv's output and what
    image layers (:data:`_IMAGE_KINDS`, zero-cost Identity/Dropout) make of it at rank 3 to 5."""
    images: set[str] = set()
    found: set[int] = set()
    for ly in ml.layers:  # topological order
        rank_ok = bool(ly.output_shapes) and ly.output_shapes[0] is not None and 3 <= len(ly.output_shapes[0]) <= 5
        reads = any(t in images for t in ly.inputs)
        if ly.config is not None and ly.config.kind == "Conv":
            images.update(ly.outputs[:1])
            continue
        if not reads:
            continue
        found.add(ly.index)
        passes = (ly.status == "benchmark" and ly.config is not None and ly.config.kind in _IMAGE_KINDS
                  and ly.op_type != "Transpose") or \
            (ly.status == "zero_cost" and ly.op_type in ("Identity", "Dropout"))
        if passes and rank_ok:
            images.update(ly.outputs[:1])
    return found


def nhwc_job(cfg: L.LayerConfig, neighbour: bool) -> bool:
    """Whether ``cfg`` gets an NHWC job: convolutions always; BatchNorm with a spatial extent > 1
    (else both layouts are the same memory); Pooling of rank >= 3; Elementwise when ``neighbour``
    (it reads a convolution's image) and its broadcast reads memory differently channels-last."""
    if cfg.kind in ("Conv", "ConvBiasAct", "ConvBnAct"):
        return True
    if isinstance(cfg, L.BatchNormConfig):
        return len(cfg.shape) >= 3 and math.prod(cfg.shape[2:]) > 1
    if isinstance(cfg, L.PoolingConfig):
        return len(cfg.x) >= 3
    if isinstance(cfg, L.ElementwiseConfig):
        return neighbour and _elementwise_layout_matters(cfg)
    return False


def parse_layouts(text: str) -> list[str]:
    """Parse ``"nchw,nhwc"``. Raises :class:`UsageError` for an unknown layout."""
    return _parse_choices(text, LAYOUTS, str.upper, "layout", "nchw, nhwc")


def plan_jobs(models: list[ModelLayers], precisions: list[str], layouts: list[str] | None = None,
              conv_precision: str | None = None) -> list[Job]:
    """The jobs for the unique configs of ``models`` (one model at several batch sizes, or several
    models) in the requested analysis precisions (:func:`benanza.kinds.precisions_for`) and layouts
    (``["NCHW"]`` by default; with ``"NHWC"``, convolutions and their neighbours get a second job on
    channels-last tensors, see :func:`nhwc_job`). ``conv_precision``: the convolutions
    (and cuDNN RNNs: :data:`benanza.kinds.CUDNN_TF32_KINDS`) in this precision instead of ``precisions`` (``tf32`` with
    ``["fp32"]``: PyTorch's fp32 default, TF32 convolutions and FP32 matmuls)."""
    layouts = layouts or ["NCHW"]
    jobs: dict[str, Job] = {}
    for ml in models:
        neighbours = set()
        if "NHWC" in layouts:
            neighbours = {ml.layers[i].key for i in image_layers(ml)}
        names = {}
        for ly in ml.benchmarked():
            names.setdefault(ly.config.key, ly.name)
        for f in ml.fusions:
            names.setdefault(f.config.key, ml.layers[f.layers[0]].name)
        for key, cfg in ml.unique_configs().items():
            wanted = [conv_precision] if conv_precision and cfg.kind in L.CUDNN_TF32_KINDS else precisions
            for p in L.precisions_for(cfg, wanted):
                for lay in layouts:
                    if lay != "NCHW" and (cfg.kind not in NHWC_KINDS or not nhwc_job(cfg, key in neighbours)):
                        continue
                    jid = job_id(cfg, p, lay)
                    if jid not in jobs:
                        jobs[jid] = Job(id=jid, config=cfg, precision=p, node=names.get(key, ""), layout=lay)
    return list(jobs.values())


# ----------------------------------------------------------------------------- case construction

def _job_init(job: Job) -> str:
    return ("{" + ", ".join([cpp_string(job.id), cpp_string(job.layer_key), cpp_string(job.kind),
                             cpp_string(job.node), _PRECISION_ENUM[job.precision],
                             cpp_string(job.layout)]) + "}")


def _as4(shape) -> list[int]:
    """A packed tensor viewed with at most 4 dims, keeping dims 0 and 1 (N and C)."""
    s = list(shape)
    if len(s) <= 4:
        return s + [1] * (4 - len(s))
    return s[:2] + [math.prod(s[2:]), 1]


def _conv_case(cfg: L.ConvConfig, job: Job) -> dict:
    x, w = list(cfg.x), list(cfg.w)
    nsp = len(x) - 2
    pads_b, pads_e = list(cfg.pads[:nsp]), list(cfg.pads[nsp:])
    strides, dil = list(cfg.strides), list(cfg.dilations)
    note = ""
    if pads_b != pads_e:
        # cuDNN pads symmetrically: time the convolution on an input that already holds the pads
        x = x[:2] + [x[2 + i] + pads_b[i] + pads_e[i] for i in range(nsp)]
        pads_b = [0] * nsp
        note = "asymmetric pads: timed on an input padded beforehand (pad 0), same output and work"
    if nsp == 1:
        x = x[:2] + [1] + x[2:]
        w = w[:2] + [1] + w[2:]
        pads_b, strides, dil = [0] + pads_b, [1] + strides, [1] + dil
        nsp = 2
        note = (note + "; " if note else "") + "1-D convolution timed as 2-D with H=1"
    return {"job": _job_init(job), "nsp": nsp, "x": c_array(x, 5), "w": c_array(w, 5),
            "pad": c_array(pads_b, 3), "stride": c_array(strides, 3, 1),
            "dilation": c_array(dil, 3, 1), "group": cfg.group, "bias": _num(cfg.bias),
            "note": cpp_string(note)}


def _conv_bias_act_case(cfg: L.ConvBiasActConfig, job: Job) -> dict:
    c = _conv_case(cfg.conv, job)
    c["activation"] = {"relu": "CUDNN_ACTIVATION_RELU"}[cfg.activation]
    return c


def _conv_bn_act_case(cfg: L.ConvBnActConfig, job: Job) -> dict:
    c = _conv_case(cfg.conv, job)
    c["relu"] = _num(cfg.activation == "relu")
    return c


_ACT = {"relu": ("CUDNN_ACTIVATION_RELU", 0), "sigmoid": ("CUDNN_ACTIVATION_SIGMOID", 0),
        "tanh": ("CUDNN_ACTIVATION_TANH", 0), "clipped_relu": ("CUDNN_ACTIVATION_CLIPPED_RELU", 0),
        "elu": ("CUDNN_ACTIVATION_ELU", 0), "leaky_relu": ("CUDNN_ACTIVATION_IDENTITY", 1),
        "hard_sigmoid": ("CUDNN_ACTIVATION_CLIPPED_RELU", 2), "swish": ("CUDNN_ACTIVATION_SWISH", 0)}


def _activation_case(cfg: L.ActivationConfig, job: Job) -> dict:
    mode, variant = _ACT[cfg.mode]
    coef = cfg.alpha
    if cfg.mode in ("hard_sigmoid", "swish"):
        coef = 1.0  # the proxy's clip; swish's beta (SiLU)
    return {"job": _job_init(job), "dims": c_array(_as4(cfg.shape), 4), "mode": mode,
            "variant": variant, "coef": _num(coef), "alpha": _num(float(cfg.alpha)), "beta": _num(float(cfg.beta)),
            "label": cpp_string(cfg.mode)}


def _bn_case(cfg: L.BatchNormConfig, job: Job) -> dict:
    s = list(cfg.shape)
    dims = s + [1] * (4 - len(s)) if len(s) <= 4 else s[:2] + [math.prod(s[2:]), 1]
    return {"job": _job_init(job), "dims": c_array(dims, 4), "epsilon": _num(max(cfg.epsilon, 1e-5)),
            "note": cpp_string("" if cfg.epsilon >= 1e-5 else
                               f"epsilon {cfg.epsilon} raised to CUDNN_BN_MIN_EPSILON 1e-5")}


_POOL = {"max": "CUDNN_POOLING_MAX", "avg_include_pad": "CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING",
         "avg_exclude_pad": "CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING"}


def pooling_cudnn_pads(cfg: L.PoolingConfig) -> tuple[list[int], str]:
    """Symmetric cuDNN pads that give ``cfg.y`` (cuDNN pools with equal pads and floor rounding).

    Asymmetric pads and ceil_mode are expressed as the smallest symmetric pad (< window) whose
    floor-rounded output has the ONNX output size: the same output shape and work. Raises
    ValueError when no such pad exists.
    """
    nsp = len(cfg.kernel)
    pads, notes = [], []
    for i in range(nsp):
        n, k, s = cfg.x[2 + i], cfg.kernel[i], cfg.strides[i]
        want = cfg.y[2 + i]
        b, e = cfg.pads[i], cfg.pads[nsp + i]
        for p in range(max(b, e) if b != e else b, k):
            if (n + 2 * p - k) // s + 1 == want:
                break
        else:
            p = min(b, e)
            if (n + 2 * p - k) // s + 1 != want:
                raise ValueError(f"no symmetric pad gives output {want} for size {n}, window {k}, stride {s}")
        if (p, p) != (b, e):
            notes.append(f"dim {i}: pads ({b},{e}) timed as symmetric pad {p} (same output size)")
        pads.append(p)
    return pads, "; ".join(notes)


def _pool_case(cfg: L.PoolingConfig, job: Job) -> dict:
    nsp = len(cfg.kernel)
    x, y = list(cfg.x), list(cfg.y)
    pads, note = pooling_cudnn_pads(cfg)
    kernel, strides = list(cfg.kernel), list(cfg.strides)
    if nsp == 1:
        x, y = x[:2] + [1] + x[2:], y[:2] + [1] + y[2:]
        kernel, strides, pads = [1] + kernel, [1] + strides, [0] + pads
        nsp = 2
    return {"job": _job_init(job), "nsp": nsp, "x": c_array(x, 5), "y": c_array(y, 5),
            "mode": _POOL[cfg.mode], "window": c_array(kernel, 3, 1), "pad": c_array(pads, 3),
            "stride": c_array(strides, 3, 1), "note": cpp_string(note)}


def _softmax_case(cfg: L.SoftmaxConfig, job: Job) -> dict:
    return {"job": _job_init(job), "dims": c_array(list(cfg.shape) + [1], 4),
            "algo": "CUDNN_SOFTMAX_LOG" if cfg.log else "CUDNN_SOFTMAX_ACCURATE"}


def collapse_broadcast(a: list[int], b: list[int]) -> tuple[list[int], list[int]]:
    """Merge adjacent dims of two equal-rank shapes where both keep the same broadcast pattern
    (each operand is full or broadcast on both dims), dropping dims of size 1 in both."""
    y = [max(p, q) for p, q in zip(a, b)]
    ra, rb = [], []
    prev = None
    for da, db, dy in zip(a, b, y):
        if dy == 1:
            continue
        pat = (da == dy, db == dy)
        if ra and pat == prev:
            ra[-1] *= da
            rb[-1] *= db
        else:
            ra.append(da)
            rb.append(db)
        prev = pat
    return ra or [1], rb or [1]


#: cudnnOpTensor's form of the float ops it has: (op, alpha1, alpha2, note)
_OP_TENSOR = {
    "add": ("CUDNN_OP_TENSOR_ADD", 1.0, 1.0, ""),
    "sub": ("CUDNN_OP_TENSOR_ADD", 1.0, -1.0, "Sub as ADD with alpha2 = -1"),
    "mul": ("CUDNN_OP_TENSOR_MUL", 1.0, 1.0, ""),
    "div": ("CUDNN_OP_TENSOR_MUL", 1.0, 1.0,
            "Div timed as MUL by the reciprocal (cudnnOpTensor has no DIV; same memory traffic)"),
    "max": ("CUDNN_OP_TENSOR_MAX", 1.0, 1.0, ""),
    "min": ("CUDNN_OP_TENSOR_MIN", 1.0, 1.0, ""),
    "mean": ("CUDNN_OP_TENSOR_ADD", 0.5, 0.5, "Mean of 2 as ADD with alpha1 = alpha2 = 1/2"),
}

#: the harness kernel's op for each ElementwiseConfig op (benanza::PointwiseOp, harness.hpp)
_POINTWISE_ENUM = {op: "PointwiseOp::" + "".join(w.capitalize() for w in op.split("_")) for op in L.ELEMENTWISE_OPS}
_POINTWISE_ENUM.update({"fmod": "PointwiseOp::FMod", "prelu": "PointwiseOp::PRelu",
                        "less_equal": "PointwiseOp::LessOrEqual", "greater_equal": "PointwiseOp::GreaterOrEqual",
                        "bitwise_and": "PointwiseOp::BitAnd", "bitwise_or": "PointwiseOp::BitOr",
                        "bitwise_xor": "PointwiseOp::BitXor"})


def elementwise_input_ranges(cfg: L.ElementwiseConfig) -> tuple[tuple[float, float], tuple[float, float]]:
    """The uniform ranges the benchmark fills a and b with: finite outputs (b away from 0 for
    Div/Mod, a positive base for Pow, shift counts below 8) and a mix of outcomes for comparisons;
    integers are drawn from [floor(lo), floor(hi)), bool from {0, 1}."""
    t = cfg.dtype
    if t == "bool":
        return (0.0, 2.0), (0.0, 2.0)
    if t:
        a = (0.0, 100.0) if t.startswith("u") else (-100.0, 100.0)
        return a, ((0.0, 8.0) if cfg.op.startswith("shift") else (1.0, 100.0))
    if cfg.op == "pow":
        return (0.5, 1.5), (-1.0, 1.0)
    if L.ELEMENTWISE_OPS[cfg.op][2]:
        return (-1.0, 1.0), (-1.0, 1.0)
    return (-1.0, 1.0), (0.5, 1.5)


def _cudnn_op_tensor(cfg: L.ElementwiseConfig, a: list[int], b: list[int]) -> dict:
    """cudnnOpTensor's form of the layer (it broadcasts B only: A is the full operand), or none."""
    y = [max(p, q) for p, q in zip(a, b)]
    if cfg.op not in _OP_TENSOR or cfg.dtype or (a != y and b != y) or len(y) > 5:
        return {"cudnn": "false", "cnd": 4, "ca": c_array([1] * 5), "cb": c_array([1] * 5),
                "op": "CUDNN_OP_TENSOR_ADD", "alpha1": "1.0", "alpha2": "1.0", "note": cpp_string("")}
    swap = a != y
    full, bcast = (b, a) if swap else (a, b)
    op, alpha1, alpha2, note = _OP_TENSOR[cfg.op]
    if swap and cfg.op == "sub":
        alpha1, alpha2 = -1.0, 1.0  # a - b with a broadcast: (-1)*b + a
    pad = 4 if len(full) <= 4 else 5
    return {"cudnn": "true", "cnd": pad, "ca": c_array(full + [1] * (pad - len(full)), 5, 1),
            "cb": c_array(bcast + [1] * (pad - len(bcast)), 5, 1), "op": op, "alpha1": _num(alpha1),
            "alpha2": _num(alpha2), "note": cpp_string(note)}


def _elementwise_case(cfg: L.ElementwiseConfig, job: Job) -> dict:
    if job.layout == "NHWC":  # channels-last memory: the dims packed as (N, spatial..., C)
        a, b = collapse_broadcast(channels_last(cfg.a), channels_last(cfg.b))
    else:
        a, b = collapse_broadcast(list(cfg.a), list(cfg.b))
    if len(a) > 8:
        raise ValueError(f"elementwise shapes {cfg.a} x {cfg.b} do not collapse to 8 dims")
    (alo, ahi), (blo, bhi) = elementwise_input_ranges(cfg)
    case = {"job": _job_init(job), "nd": len(a), "a": c_array(a, 8, 1), "b": c_array(b, 8, 1),
            "kop": _POINTWISE_ENUM[cfg.op], "stored": _num(bool(cfg.dtype)),
            "et": _ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32", "out_bool": _num(cfg.out_dtype == "bool"),
            "a_lo": _num(alo), "a_hi": _num(ahi), "b_lo": _num(blo), "b_hi": _num(bhi),
            "graph": _num(cfg.dtype in ("", "bool")), "label": cpp_string(cfg.op + (f" {cfg.dtype}" if cfg.dtype else ""))}
    case.update(_cudnn_op_tensor(cfg, a, b))
    return case


def _gemm_case(cfg: L.GemmConfig, job: Job) -> dict:
    return {"job": _job_init(job), "m": cfg.m, "n": cfg.n, "k": cfg.k, "batch": cfg.batch,
            "trans_a": _num(cfg.trans_a), "trans_b": _num(cfg.trans_b),
            "bias": {"none": 0, "c": 1}.get(cfg.bias, 2)}


_GEMM_ACT = {"relu": ("MatmulAct::RELU", 1), "gelu": ("MatmulAct::GELU", 3), "gelu_tanh": ("MatmulAct::GELU_TANH", 2)}


def _gemm_act_case(cfg: L.GemmActConfig, job: Job) -> dict:
    c = _gemm_case(cfg.gemm, job)
    c["act"], c["lt_activation"] = _GEMM_ACT[cfg.activation]
    return c


def rnn_note(cfg: L.RNNConfig) -> str:
    """How the timed cudnnRNNForward differs from the ONNX node ("" when it does not)."""
    notes = []
    if cfg.cell == "gru" and not cfg.linear_before_reset:
        notes.append("ONNX GRU linear_before_reset=0 timed as cuDNN's GRU, which computes the "
                     "linear_before_reset=1 formula: same FLOPs and memory traffic, different result")
    if cfg.direction == "reverse":
        notes.append("direction reverse timed as forward (cuDNN has no reverse-only mode): the same work")
    if cfg.direction == "bidirectional":
        notes.append("bidirectional: cuDNN writes y as [seq, batch, 2*hidden], ONNX's Y is "
                     "[seq, 2, batch, hidden]: the transpose between them is not timed")
    return "; ".join(notes)


def _rnn_case(cfg: L.RNNConfig, job: Job) -> dict:
    return {"job": _job_init(job), "cell": {"lstm": "CUDNN_LSTM", "gru": "CUDNN_GRU"}[cfg.cell],
            "seq_len": cfg.seq_len, "batch": cfg.batch, "input_size": cfg.input_size,
            "hidden_size": cfg.hidden_size, "num_layers": cfg.num_layers,
            "bidirectional": _num(cfg.direction == "bidirectional"), "bias": _num(cfg.bias),
            "batch_major": _num(cfg.layout == "batch_major"), "note": cpp_string(rnn_note(cfg))}


def _lrn_case(cfg: L.LRNConfig, job: Job) -> dict:
    return {"job": _job_init(job), "dims": c_array(cfg.shape, 4), "size": cfg.size,
            "alpha": _num(cfg.alpha), "beta": _num(cfg.beta), "bias": _num(cfg.bias)}


def _dropout_case(cfg: L.DropoutConfig, job: Job) -> dict:
    return {"job": _job_init(job), "dims": c_array(_as4(cfg.shape), 4), "ratio": _num(cfg.ratio)}


_REDUCE = {"mean": "CUDNN_REDUCE_TENSOR_AVG", "sum": "CUDNN_REDUCE_TENSOR_ADD",
           "max": "CUDNN_REDUCE_TENSOR_MAX", "min": "CUDNN_REDUCE_TENSOR_MIN"}
#: the same ops for the harness's reduction kernel (benanza::reduce)
_REDUCE_KERNEL = {"mean": "ReduceOp::Mean", "sum": "ReduceOp::Sum", "max": "ReduceOp::Max", "min": "ReduceOp::Min"}


def _reduce_case(cfg: L.ReduceConfig, job: Job) -> dict:
    x, y = collapse_broadcast(list(cfg.x), list(cfg.y))
    if len(x) > 8:
        raise ValueError(f"reduction of rank {len(x)}")
    nd = max(4, len(x))
    x, y = x + [1] * (nd - len(x)), y + [1] * (nd - len(y))
    return {"job": _job_init(job), "nd": nd, "x": c_array(x, 8, 1), "y": c_array(y, 8, 1),
            "op": _REDUCE[cfg.op], "kop": _REDUCE_KERNEL[cfg.op]}


def collapse_transfer(t: L.Transfer) -> tuple[list[int], list[int], list[int]]:
    """Drop size-1 dims and merge adjacent dims that are contiguous in both source and destination."""
    dims, ss, ds = [], [], []
    for d, s, o in zip(t.dims, t.src_strides, t.dst_strides):
        if d == 1:
            continue
        if dims and ss[-1] == s * d and ds[-1] == o * d:
            dims[-1] *= d
            ss[-1], ds[-1] = s, o
        else:
            dims.append(d)
            ss.append(s)
            ds.append(o)
    return dims or [1], ss or [1], ds or [1]


def memcpy2d_shape(dims: list[int], ss: list[int], ds: list[int]) -> tuple[int, int, int, int] | None:
    """(rows, cols, src pitch, dst pitch) in elements when a collapsed transfer is a 2-D copy with
    contiguous rows (what cudaMemcpy2DAsync does), else None."""
    if len(dims) == 1 and ss[0] == 1 and ds[0] == 1:
        return 1, dims[0], dims[0], dims[0]
    if len(dims) == 2 and ss[1] == 1 and ds[1] == 1:
        return dims[0], dims[1], ss[0], ds[0]
    return None


def _copy_case(cfg: L.CopyConfig, job: Job) -> dict:
    transfers = []
    memcpy_ok = True
    for t in cfg.transfers():
        dims, ss, ds = collapse_transfer(t)
        if len(dims) > 8:
            raise ValueError(f"copy of rank {len(dims)}")
        m2 = memcpy2d_shape(dims, ss, ds)
        memcpy_ok = memcpy_ok and m2 is not None
        rows, cols, sp, dp = m2 or (0, 0, 0, 0)
        transfers.append({"nd": max(4, len(dims)), "dims": c_array(dims, 8, 1),
                          "src_strides": c_array(ss, 8, 1), "dst_strides": c_array(ds, 8, 1),
                          "src_offset": t.src_offset, "dst_offset": t.dst_offset,
                          "src_index": t.src_index, "rows": rows, "cols": cols, "src_pitch": sp,
                          "dst_pitch": dp})
    return {"job": _job_init(job), "inputs": [L.numel(s) for s in cfg.inputs],
            "out": L.numel(cfg.y), "fill": _num(cfg.fills_output()), "transfers": transfers,
            "memcpy": _num(memcpy_ok), "label": cpp_string(cfg.op)}


# ------------------------------------------------------------------ transformer layers (issue 4)

def _layernorm_case(cfg: L.LayerNormConfig, job: Job) -> dict:
    note = "" if cfg.bias else "no bias input: the cuDNN graph adds a zero bias"
    return {"job": _job_init(job), "rows": cfg.rows, "cols": cfg.cols, "epsilon": _num(float(cfg.epsilon)),
            "bias": _num(cfg.bias), "stats": _num(cfg.stats), "note": cpp_string(note)}


_UNARY_ENUM = {op: "UnaryOp::" + op.upper() for op in L.UNARY_OPS}
_ELEM_ENUM = {"float32": "ElemType::F32", "float16": "ElemType::F16", "bfloat16": "ElemType::BF16",
              "float64": "ElemType::F64", "int64": "ElemType::I64", "int32": "ElemType::I32",
              "int8": "ElemType::I8", "uint8": "ElemType::U8", "bool": "ElemType::I8", "int16": "ElemType::I16",
              "uint16": "ElemType::U16", "uint32": "ElemType::U32", "uint64": "ElemType::U64"}
#: the legacy cudnnOpTensor's unary ops: Sqrt on float data, Not on bool bytes
_UNARY_OP_TENSOR = {"sqrt": "1", "not": "2"}


def unary_input_range(cfg: L.UnaryConfig) -> tuple[float, float]:
    """The uniform range the benchmark fills x with: inside the op's domain (finite outputs);
    integers are drawn from [floor(lo), floor(hi)), bool from {0, 1}."""
    if cfg.op == "pow" and abs(cfg.exponent) > 8:
        return 0.9, 1.1  # x ** e stays finite in float16
    if cfg.op in ("log", "sqrt", "reciprocal", "pow"):
        return 0.5, 1.5
    if cfg.op in ("acos", "asin", "atanh"):
        return -0.9, 0.9
    if cfg.op == "acosh":
        return 1.1, 3.0
    if cfg.op == "cast":
        return (-1.0, 1.0) if cfg.src.startswith(("float", "bfloat")) else (0.0, 2.0)
    if cfg.src == "bool":
        return 0.0, 2.0
    if cfg.src in L.STORED_TYPES:
        return (0.0, 200.0) if cfg.src.startswith("u") else (-100.0, 100.0)
    return -1.0, 1.0


def _unary_case(cfg: L.UnaryConfig, job: Job) -> dict:
    cols = cfg.shape[-1] if cfg.shape else 1
    rows = L.numel(cfg.shape) // max(cols, 1)
    lo, hi = unary_input_range(cfg)
    if cfg.op == "cast":
        label = f"cast from {cfg.src}" + (f" to {cfg.dst}" if cfg.dst else "")
    elif cfg.op == "pow":
        label = f"pow {cfg.exponent:g}"
    else:
        label = cfg.op + (f" {cfg.src or cfg.dst}" if cfg.src or cfg.dst else "")
    op = "UnaryOp::CAST_BOOL" if cfg.op == "cast" and cfg.dst == "bool" else _UNARY_ENUM[cfg.op]
    return {"job": _job_init(job), "rows": rows, "cols": cols, "op": op,
            "exponent": _num(float(cfg.exponent)), "alpha": _num(float(cfg.alpha)), "beta": _num(float(cfg.beta)),
            "x_stored": _num(bool(cfg.src)), "xt": _ELEM_ENUM[cfg.src] if cfg.src else "ElemType::F32",
            "y_stored": _num(bool(cfg.dst)), "yt": _ELEM_ENUM[cfg.dst] if cfg.dst else "ElemType::F32",
            "legacy": _UNARY_OP_TENSOR.get(cfg.op, "0") if cfg.src in ("", "bool") else "0",
            "lo": _num(lo), "hi": _num(hi), "label": cpp_string(label)}


#: constant-index Gathers with at most this many indices are also timed as one cudaMemcpy2DAsync per index
GATHER_MEMCPY_MAX = 64


def _gather_case(cfg: L.GatherConfig, job: Job) -> dict:
    n = L.numel(cfg.indices)
    return {"job": _job_init(job), "outer": cfg.outer, "axis_dim": cfg.data[cfg.axis], "n": n, "inner": cfg.inner,
            "indices": "{" + ", ".join(str(v) for v in cfg.values) + "}",
            "memcpy": _num(bool(cfg.values) and n <= GATHER_MEMCPY_MAX)}


def collapse_where(c: list[int], a: list[int], b: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Merge adjacent dims where each of the three operands keeps its broadcast pattern; drop dims
    of size 1 in the output (the three-operand form of :func:`collapse_broadcast`)."""
    y = [max(t) for t in zip(c, a, b)]
    rc, ra, rb, prev = [], [], [], None
    for dc, da, db, dy in zip(c, a, b, y):
        if dy == 1:
            continue
        pat = (dc == dy, da == dy, db == dy)
        if rc and pat == prev:
            rc[-1] *= dc
            ra[-1] *= da
            rb[-1] *= db
        else:
            rc.append(dc)
            ra.append(da)
            rb.append(db)
        prev = pat
    return rc or [1], ra or [1], rb or [1]


def _broadcast_strides(shape: list[int], y: list[int]) -> list[int]:
    strides, acc = [], 1
    for d, dy in zip(reversed(shape), reversed(y)):
        strides.append(0 if d == 1 and dy != 1 else acc)
        acc *= d
    return list(reversed(strides))


def _where_case(cfg: L.WhereConfig, job: Job) -> dict:
    c, a, b = collapse_where(list(cfg.cond), list(cfg.a), list(cfg.b))
    y = [max(t) for t in zip(c, a, b)]
    return {"job": _job_init(job), "nd": len(y), "dims": c_array(y, 8, 1),
            "cond": c_array(_broadcast_strides(c, y), 8), "a": c_array(_broadcast_strides(a, y), 8),
            "b": c_array(_broadcast_strides(b, y), 8), "nc": L.numel(c), "na": L.numel(a), "nb": L.numel(b)}


_SDPA_MASK = {"none": "SdpaMask::NONE", "causal": "SdpaMask::CAUSAL", "bias": "SdpaMask::BIAS"}


def _sdpa_case(cfg: L.SdpaConfig, job: Job) -> dict:
    bias = list(cfg.bias) if cfg.mask == "bias" else [1, 1, 1, 1]
    q, k, v, o = cfg.strides()
    return {"job": _job_init(job), "b": cfg.b, "h": cfg.h, "s_q": cfg.s_q, "s_kv": cfg.s_kv, "d": cfg.d,
            "d_v": cfg.d_v, "scale": _num(float(cfg.scale)), "mask": _SDPA_MASK[cfg.mask],
            "bias": c_array(bias, 4, 1), "strides": c_array(list(q) + list(k) + list(v) + list(o), 16)}



#: kind -> (template file, case builder)
KIND_TEMPLATES = {
    "Conv": ("conv.cpp.j2", _conv_case),
    "ConvBiasAct": ("conv_bias_act.cpp.j2", _conv_bias_act_case),
    "ConvBnAct": ("conv_bn_act.cpp.j2", _conv_bn_act_case),
    "Activation": ("activation.cpp.j2", _activation_case),
    "BatchNorm": ("batchnorm.cpp.j2", _bn_case),
    "Pooling": ("pooling.cpp.j2", _pool_case),
    "Softmax": ("softmax.cpp.j2", _softmax_case),
    "Elementwise": ("elementwise.cpp.j2", _elementwise_case),
    "Gemm": ("gemm.cpp.j2", _gemm_case),
    "LRN": ("lrn.cpp.j2", _lrn_case),
    "Dropout": ("dropout.cpp.j2", _dropout_case),
    "Reduce": ("reduce.cpp.j2", _reduce_case),
    "Copy": ("copy.cpp.j2", _copy_case),
    "RNN": ("rnn.cpp.j2", _rnn_case),
}
KIND_TEMPLATES.update({
    "LayerNorm": ("layernorm.cpp.j2", _layernorm_case),
    "Unary": ("unary.cpp.j2", _unary_case),
    "Gather": ("gather.cpp.j2", _gather_case),
    "Where": ("where.cpp.j2", _where_case),
    "SDPA": ("sdpa.cpp.j2", _sdpa_case),
    "GemmAct": ("gemm_act.cpp.j2", _gemm_act_case),
})


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir())),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True, autoescape=False)


@dataclass
class Suite:
    """A generated suite on disk: its folder, the job list and the manifest it wrote."""

    root: Path
    jobs: list[Job]
    manifest: dict


def parse_kinds(text: str | None) -> list[str] | None:
    """Parse ``"Activation,Elementwise"`` (layer kinds, as ``benanza layers`` names them; any case).
    None or empty: every kind. Raises :class:`UsageError` for an unknown kind."""
    if not text:
        return None
    by_lower = {k.lower(): k for k in KIND_TEMPLATES}
    return _parse_choices(text, set(KIND_TEMPLATES), lambda v: by_lower.get(v.lower(), v), "layer kind",
                          ", ".join(sorted(KIND_TEMPLATES)))


def generate(models: list[ModelLayers], precisions: list[str], out_dir: str | Path,
             layouts: list[str] | None = None, kinds: list[str] | None = None,
             conv_precision: str | None = None) -> Suite:
    """Write the C++ suite for ``models`` (their unique configs) in ``precisions`` into ``out_dir``.

    Writes ``CMakeLists.txt``, ``src/<kind>.cpp`` per layer kind present, ``src/suite_info.cpp``,
    the harness under ``harness/`` and ``suite.json`` (the manifest: jobs with their configs, the
    models and their layer graphs' summaries). ``kinds``: only the jobs of these layer kinds (to
    measure again what a harness change touched). Returns the :class:`Suite`. Raises
    :class:`UsageError` when no layer of the models can be benchmarked (or none of ``kinds``).
    ``conv_precision``: see :func:`plan_jobs`.
    """
    jobs = plan_jobs(models, precisions, layouts, conv_precision)
    names = ", ".join(sorted({m.model for m in models}))
    if not jobs:
        raise UsageError(f"{names}: no benchmarkable layer (every layer is zero-cost or unsupported)")
    if kinds:
        jobs = [j for j in jobs if j.kind in kinds]
        if not jobs:
            raise UsageError(f"{names}: no layer of kind {', '.join(kinds)} to benchmark")
    root = Path(out_dir)
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    env = _env()
    by_kind: dict[str, list[Job]] = {}
    for j in jobs:
        by_kind.setdefault(j.kind, []).append(j)
    sources = []
    for kind in sorted(by_kind):
        tmpl, build = KIND_TEMPLATES[kind]
        cases = [build(j.config, j) for j in by_kind[kind]]
        text = env.get_template(tmpl).render(cases=cases, version=__version__)
        name = f"{kind.lower()}.cpp"
        _write_if_changed(src / name, text)
        sources.append(f"src/{name}")
    model_label = ", ".join(sorted({m.model for m in models}))
    info = env.get_template("suite_info.cpp.j2").render(
        model=cpp_string(model_label), generator=cpp_string(f"benanza {__version__}"))
    _write_if_changed(src / "suite_info.cpp", info)
    sources.append("src/suite_info.cpp")
    for stale in src.glob("*.cpp"):
        if f"src/{stale.name}" not in sources:
            stale.unlink()
    copy_harness(root)  # the harness travels with the suite
    cmake = env.get_template("CMakeLists.txt.j2").render(sources=sources, version=__version__, harness_only=False,
                                                         **_harness_sources())
    _write_if_changed(root / "CMakeLists.txt", cmake)
    manifest = {
        "benanza_version": __version__,
        "precisions": precisions,
        "layouts": layouts or ["NCHW"],
        "models": [{"model": m.model, "path": m.path, "sha256": m.sha256, "batch": m.batch,
                    "summary": m.summary(), "key_counts": _key_counts(m),
                    # every config the model uses, jobs or not (an NHWC-only suite has no job for
                    # a Gemm), so that the database knows each key the model's record names
                    "configs": [{"kind": c.kind, "params": c.params()} for c in m.unique_configs().values()]}
                   for m in models],
        "jobs": [j.to_dict() for j in jobs],
        "sources": sources,
        "fingerprint": hashlib.sha256(json.dumps(sources + [j.id for j in jobs]).encode()).hexdigest()[:16],
    }
    _write_if_changed(root / "suite.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return Suite(root=root, jobs=jobs, manifest=manifest)


def harness_files() -> list[tuple[Path, str]]:
    """The harness sources a suite is built with: (path relative to ``harness/``, text)."""
    out = []
    for sub in ("include", "src"):
        base = harness_dir() / sub
        for f in sorted(base.rglob("*")):
            if f.is_file() and f.name != "module.cpp":
                out.append((Path(sub) / f.relative_to(base), f.read_text()))
    return out


def _harness_sources() -> dict[str, list[str]]:
    """The harness's compiled sources (``src/*.cpp``, ``src/*.cu``) and those that include
    cudnn-frontend (compiled without optimisation: heavy headers, nothing on the timed path)."""
    srcs = [(str(rel), text) for rel, text in harness_files() if rel.parts[0] == "src"
            and rel.suffix in (".cpp", ".cu")]
    return {"harness_sources": [r for r, _ in srcs],
            "frontend_sources": [r for r, t in srcs if "#include <cudnn_frontend.h>" in t]}


def copy_harness(root: Path) -> None:
    for rel, text in harness_files():
        target = root / "harness" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_if_changed(target, text)


def render_harness_project(root: Path) -> None:
    """The CMake project of the harness library alone (what `benanza build` caches)."""
    copy_harness(root)
    text = _env().get_template("CMakeLists.txt.j2").render(sources=[], version=__version__, harness_only=True,
                                                           **_harness_sources())
    _write_if_changed(root / "CMakeLists.txt", text)


def _key_counts(m: ModelLayers) -> dict[str, int]:
    """How often each config key occurs in the model: its benchmarked layers and its fusion
    candidates (a model's record names both, so that ``db export --model`` takes the fused
    measurements with it)."""
    out: dict[str, int] = {}
    for ly in m.benchmarked():
        out[ly.key] = out.get(ly.key, 0) + 1
    for f in m.fusions:
        out[f.config.key] = out.get(f.config.key, 0) + 1
    return out


def _write_if_changed(path: Path, text: str) -> None:
    """Write only when the content differs, so a rebuild recompiles only what changed."""
    if path.exists() and path.read_text() == text:
        return
    path.write_text(text)


def load_suite(folder: str | Path) -> Suite:
    """Read a generated suite's manifest. Raises :class:`UsageError` if ``folder`` is not one."""
    root = Path(folder)
    mf = root / "suite.json"
    if not mf.is_file():
        raise UsageError(f"{folder}: not a benanza suite (no suite.json); run `benanza generate` first")
    try:
        manifest = json.loads(mf.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UsageError(f"{mf}: unreadable suite manifest ({e})") from None
    jobs = [Job(id=j["job"], config=L.config_from_params(j["kind"], j["params"]), precision=j["precision"],
                node=j.get("node", ""), layout=j.get("layout", "NCHW")) for j in manifest.get("jobs", [])]
    return Suite(root=root, jobs=jobs, manifest=manifest)
