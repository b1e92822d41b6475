"""The framework's own kernels as lower-bound candidates: each layer config and fusion candidate
timed as PyTorch runs it (the ATen call for its shapes, data type and memory format).

In 2026 frameworks run many kernels of their own (flash attention, LayerNorm, reductions, depthwise
convolutions, GEMMs with bias epilogues), and a bound that ignores them can be above what the
framework runs (DESIGN.md, "Analyzer"). Every config kind of :data:`benanza.kinds.CONFIG_KINDS`
has a builder here (:data:`BUILDERS`) that allocates random inputs on the GPU and returns the
callable PyTorch eager would run: ``F.conv2d`` in either memory format, ``F.linear`` with its bias,
``F.layer_norm``, ``F.scaled_dot_product_attention`` on strided views, reductions, elementwise ops,
``torch.cat``... Each is timed with the harness's method (cpp/include/benanza/harness.hpp): a first
call whose output is checked (finite values, the config's element count), warm-up, ``reps``
back-to-back calls captured in a CUDA graph and replayed between CUDA events, sampling until the
relative standard error of the median is under ``--rse`` (with at least ``--min-samples`` and a time
cap), ``torch.backends.cudnn.benchmark = True``; cold samples flush the L2 first. Measurements are
ordinary database rows whose ``call`` starts with ``torch:`` (e.g. ``torch:aten::layer_norm``), so
the analyzer's per-config minimum takes them; ``analyze`` lists where they beat every library call.

Run as a worker (``python -m benanza.profiles.torch_candidates --jobs FILE [timing flags of the suite]``) it
speaks the generated suite's protocol (JSON lines ``job_start``, ``measurement``, ``job_end``,
``fatal`` on stdout; exit code 3 when PyTorch or a CUDA device is missing), so
:mod:`benanza.runner.run` drives it like a suite. The jobs file holds one JSON object per line: ``job``,
``kind``, ``params`` (:meth:`benanza.kinds.LayerConfig.params`), ``precision``, ``layout``.
Precisions: ``fp32`` = float32 with TF32 off for cuDNN and matmuls (math ``fma``), ``tf32`` = on
(``tf32``), ``fp16``/``bf16`` (``tensor_op``); kinds without Tensor Core math record ``none``;
``fp8`` has no PyTorch eager path and is recorded ``not_supported``.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from benanza import kinds as L

#: the ``call`` prefix of these measurements (benanza.database.store.FRAMEWORK_CALL_PREFIX)
CALL_PREFIX = "torch:"


class NotSupported(Exception):
    """PyTorch has no call that computes this config exactly (recorded as not_supported)."""


@dataclass
class Candidate:
    """One framework call for a config: ``fn()`` runs it on preallocated inputs and returns its
    output; ``out_numel`` the element count it must produce (the config's output)."""

    call: str
    algorithm: str
    fn: Callable[[], object]
    out_numel: int
    note: str = ""
    details: dict = field(default_factory=dict)


@dataclass
class Ctx:
    """What a builder needs: the config, torch, the device, the storage dtype and memory format."""

    cfg: L.LayerConfig
    torch: object
    device: object
    dtype: object
    nhwc: bool

    def randn(self, shape, dtype=None, positive: bool = False):
        t = self.torch.randn(tuple(shape), device=self.device, dtype=self.torch.float32)
        if positive:
            t = t.abs() + 0.5
        return t.to(dtype or self.dtype)

    def typed(self, shape, type_name: str = "", positive: bool = False):
        """Random values of ``type_name`` (a key of :data:`benanza.kinds.STORED_TYPES`, or "" for the
        precision's float type): bools half true, integers in [1, 8) (valid shifts and divisors)."""
        torch = self.torch
        if not type_name:
            return self.randn(shape, positive=positive)
        if type_name == "bool":
            return torch.randint(0, 2, tuple(shape), device=self.device).bool()
        return torch.randint(1, 8, tuple(shape), device=self.device, dtype=getattr(torch, type_name))

    def fmt(self, t):
        """Channels-last memory for the image tensors of an NHWC job (rank 4 or 5)."""
        if not self.nhwc or t.dim() not in (4, 5):
            return t
        mf = self.torch.channels_last if t.dim() == 4 else self.torch.channels_last_3d
        return t.contiguous(memory_format=mf)


def _F(c: Ctx):
    return c.torch.nn.functional


def _algo(c: Ctx, extra: str = "") -> str:
    base = "channels_last" if c.nhwc else "contiguous"
    return f"{base}{', ' + extra if extra else ''}"


# ------------------------------------------------------------------------------- the builders

def _conv_fn(c: Ctx, conv: L.ConvConfig):
    """(fn computing conv(x, w) + bias, note): PyTorch's convNd; asymmetric pads by F.pad first."""
    F = _F(c)
    nsp = len(conv.x) - 2
    if nsp not in (1, 2, 3):
        raise NotSupported(f"{nsp}-D convolution")
    op = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp]
    x = c.fmt(c.randn(conv.x))
    w = c.fmt(c.randn(conv.w))
    b = c.randn((conv.w[0],)) if conv.bias else None
    begin, end = conv.pads[:nsp], conv.pads[nsp:]
    if tuple(begin) == tuple(end):
        return (lambda: op(x, w, b, conv.strides, tuple(begin), conv.dilations, conv.group)), ""
    pad = []
    for i in reversed(range(nsp)):
        pad += [begin[i], end[i]]
    return (lambda: op(F.pad(x, pad), w, b, conv.strides, 0, conv.dilations, conv.group)), \
        "asymmetric pads: F.pad, then the convolution"


def _conv(c: Ctx) -> Candidate:
    fn, note = _conv_fn(c, c.cfg)
    return Candidate(f"torch:aten::conv{len(c.cfg.x) - 2}d", _algo(c, "cudnn.benchmark"), fn,
                     L.numel(c.cfg.output_shape()), note)


def _conv_bias_act(c: Ctx) -> Candidate:
    fn, note = _conv_fn(c, c.cfg.conv)
    F = _F(c)
    return Candidate(f"torch:aten::conv{len(c.cfg.conv.x) - 2}d+relu_", _algo(c, "cudnn.benchmark"),
                     lambda: F.relu_(fn()), L.numel(c.cfg.output_shape()), note)


def _conv_bn_act(c: Ctx) -> Candidate:
    fn, note = _conv_fn(c, c.cfg.conv)
    F = _F(c)
    k = c.cfg.conv.w[0]
    mean, var = c.randn((k,)), c.randn((k,), positive=True)
    gamma, beta = c.randn((k,)), c.randn((k,))
    relu = c.cfg.activation == "relu"

    def run():
        y = F.batch_norm(fn(), mean, var, gamma, beta, False, 0.0, 1e-5)
        return F.relu_(y) if relu else y
    return Candidate(f"torch:aten::conv{len(c.cfg.conv.x) - 2}d+batch_norm" + ("+relu_" if relu else ""),
                     _algo(c, "cudnn.benchmark"), run, L.numel(c.cfg.output_shape()), note)


def _activation(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, _F(c), c.torch
    x = c.fmt(c.randn(cfg.shape))
    a = float(cfg.alpha)
    ops = {"relu": ("relu", lambda: F.relu(x)), "sigmoid": ("sigmoid", lambda: torch.sigmoid(x)),
           "tanh": ("tanh", lambda: torch.tanh(x)), "clipped_relu": ("hardtanh", lambda: F.hardtanh(x, 0.0, a)),
           "leaky_relu": ("leaky_relu", lambda: F.leaky_relu(x, a)), "elu": ("elu", lambda: F.elu(x, a)),
           "swish": ("silu", lambda: F.silu(x))}
    note = ""
    if cfg.mode == "hard_sigmoid":
        if abs(a - 1 / 6) < 1e-6 and abs(float(cfg.beta) - 0.5) < 1e-6:
            ops["hard_sigmoid"] = ("hardsigmoid", lambda: F.hardsigmoid(x))
        else:  # torch's hardsigmoid has alpha 1/6, beta 1/2 fixed
            ops["hard_sigmoid"] = ("mul+add+clamp", lambda: torch.clamp(x * a + float(cfg.beta), 0.0, 1.0))
            note = "HardSigmoid with alpha, beta other than 1/6, 1/2: x * alpha + beta, clamped"
    if cfg.mode not in ops:
        raise NotSupported(f"activation {cfg.mode}")
    name, fn = ops[cfg.mode]
    return Candidate(f"torch:aten::{name}", _algo(c), fn, L.numel(cfg.shape), note)


def _batchnorm(c: Ctx) -> Candidate:
    cfg, F = c.cfg, _F(c)
    x = c.fmt(c.randn(cfg.shape))
    ch = cfg.shape[1]
    mean, var, g, b = c.randn((ch,)), c.randn((ch,), positive=True), c.randn((ch,)), c.randn((ch,))
    return Candidate("torch:aten::batch_norm", _algo(c), lambda: F.batch_norm(x, mean, var, g, b, False, 0.0,
                                                                              cfg.epsilon), L.numel(cfg.shape))


def _pooling(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, _F(c), c.torch
    nsp = len(cfg.kernel)
    if nsp not in (1, 2, 3):
        raise NotSupported(f"{nsp}-D pooling")
    x = c.fmt(c.randn(cfg.x))
    out_sp = tuple(cfg.y[2:])
    if tuple(cfg.kernel) == tuple(cfg.x[2:]) and all(d == 1 for d in out_sp) and not any(cfg.pads):
        if cfg.mode == "max":  # GlobalMaxPool
            dims = tuple(range(2, 2 + nsp))
            return Candidate("torch:aten::amax", _algo(c), lambda: torch.amax(x, dims, keepdim=True), L.numel(cfg.y))
        ad = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[nsp]
        return Candidate(f"torch:aten::adaptive_avg_pool{nsp}d", _algo(c), lambda: ad(x, 1), L.numel(cfg.y))
    begin, end = list(cfg.pads[:nsp]), list(cfg.pads[nsp:])
    pad_first, note = None, ""
    if begin != end or any(2 * p > k for p, k in zip(begin, cfg.kernel)):
        pad_first = []
        for i in reversed(range(nsp)):
            pad_first += [begin[i], end[i]]
        begin = [0] * nsp
        note = "asymmetric pads: F.pad first"
    # the padded size the pooling sees (pads given to it, or applied by F.pad first); ceil mode where
    # floor rounding would not give the ONNX output size
    padded = [cfg.x[2 + i] + cfg.pads[i] + cfg.pads[nsp + i] for i in range(nsp)]
    ceil = any((n - k) // st + 1 != o for n, k, st, o in zip(padded, cfg.kernel, cfg.strides, out_sp))
    if cfg.mode == "max":
        op = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nsp]
        fill = float("-inf")
        run = (lambda t: op(t, cfg.kernel, cfg.strides, begin, ceil_mode=ceil))
        name = f"max_pool{nsp}d"
    else:
        op = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nsp]
        fill = 0.0
        inc = cfg.mode == "avg_include_pad"
        run = (lambda t: op(t, cfg.kernel, cfg.strides, begin, ceil_mode=ceil, count_include_pad=inc))
        name = f"avg_pool{nsp}d"
    if pad_first is not None:
        return Candidate(f"torch:aten::constant_pad_nd+{name}", _algo(c),
                         lambda: run(F.pad(x, pad_first, value=fill)), L.numel(cfg.y), note)
    return Candidate(f"torch:aten::{name}", _algo(c), lambda: run(x), L.numel(cfg.y))


def _softmax(c: Ctx) -> Candidate:
    cfg, F = c.cfg, _F(c)
    outer, axis, inner = cfg.shape
    op = F.log_softmax if cfg.log else F.softmax
    if inner == 1:  # the last dim: PyTorch's row kernel
        x = c.randn((outer, axis))
        fn = (lambda: op(x, dim=-1))
    else:
        x = c.randn(cfg.shape)
        fn = (lambda: op(x, dim=1))
    return Candidate(f"torch:aten::{'_log_softmax' if cfg.log else '_softmax'}", _algo(c), fn, L.numel(cfg.shape))


#: ElementwiseConfig ops -> the torch function PyTorch runs for them (benanza.kinds.ELEMENTWISE_OPS)
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "maximum", "min": "minimum",
           "pow": "pow", "mod": "remainder", "fmod": "fmod", "equal": "eq", "less": "lt", "less_equal": "le",
           "greater": "gt", "greater_equal": "ge", "and": "logical_and", "or": "logical_or", "xor": "logical_xor",
           "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
           "shift_left": "bitwise_left_shift", "shift_right": "bitwise_right_shift"}


def _elementwise(c: Ctx) -> Candidate:
    cfg, torch, F = c.cfg, c.torch, _F(c)
    dt = getattr(cfg, "dtype", "")
    a = c.typed(cfg.a, dt, positive=cfg.op == "pow")
    b = c.typed(cfg.b, dt)
    a = c.fmt(a) if L.numel(cfg.a) > 1 else a
    b = c.fmt(b) if L.numel(cfg.b) > 1 else b
    y = L.numel(cfg.output_shape())
    if cfg.op == "mean":
        return Candidate("torch:aten::add+div", _algo(c), lambda: torch.add(a, b).div_(2), y)
    if cfg.op == "prelu":
        per_channel = len(cfg.a) >= 2 and L.numel(cfg.b) in (1, cfg.a[1]) and \
            all(d == 1 for i, d in enumerate(cfg.b) if i != 1)
        if per_channel:
            w = b.reshape(-1)
            return Candidate("torch:aten::prelu", _algo(c), lambda: F.prelu(a, w), y)
        return Candidate("torch:aten::lt+mul+where", _algo(c), lambda: torch.where(a < 0, a * b, a), y,
                         "PRelu with a slope that is not per channel: where(x < 0, slope * x, x)")
    if cfg.op not in _BINARY:
        raise NotSupported(f"elementwise op {cfg.op}")
    op = getattr(torch, _BINARY[cfg.op])
    return Candidate(f"torch:aten::{_BINARY[cfg.op]}", _algo(c), lambda: op(a, b), y)


def _gemm_fn(c: Ctx, g: L.GemmConfig):
    """(fn, call) of a GEMM as PyTorch runs it: F.linear (weights (n, k), bias epilogue) for one
    product, torch.matmul / baddbmm for a batch of them."""
    F, torch = _F(c), c.torch
    a_shape, b_shape = g.input_shapes()
    a = c.randn(a_shape)
    a_eff = a.transpose(-1, -2) if g.trans_a else a
    if g.batch == 1:
        w = c.randn((g.n, g.k))  # nn.Linear's weight layout (a weight's layout is free)
        if g.bias == "c_full":
            cmat = c.randn((g.m, g.n))
            return (lambda: torch.addmm(cmat, a_eff, w.t())), "torch:aten::addmm"
        bias = c.randn((g.n,)) if g.bias == "c" else None
        return (lambda: F.linear(a_eff, w, bias)), "torch:aten::linear"
    b = c.randn(b_shape)
    b_eff = b.transpose(-1, -2) if g.trans_b else b
    if g.bias != "none":
        cmat = c.randn((g.n,) if g.bias == "c" else (g.batch, g.m, g.n))
        cb = cmat.expand(g.batch, g.m, g.n)
        return (lambda: torch.baddbmm(cb, a_eff, b_eff)), "torch:aten::baddbmm"
    return (lambda: torch.matmul(a_eff, b_eff)), "torch:aten::bmm"


def _gemm(c: Ctx) -> Candidate:
    fn, call = _gemm_fn(c, c.cfg)
    return Candidate(call, "default", fn, L.numel(c.cfg.output_shape()))


def _gemm_act(c: Ctx) -> Candidate:
    fn, call = _gemm_fn(c, c.cfg.gemm)
    F = _F(c)
    act = c.cfg.activation
    post = {"relu": ("relu", lambda y: F.relu(y)), "gelu": ("gelu", lambda y: F.gelu(y)),
            "gelu_tanh": ("gelu", lambda y: F.gelu(y, approximate="tanh"))}
    if act not in post:
        raise NotSupported(f"activation {act}")
    name, f = post[act]
    return Candidate(f"{call}+{name}", "default", lambda: f(fn()), L.numel(c.cfg.output_shape()))


def _lrn(c: Ctx) -> Candidate:
    cfg, F = c.cfg, _F(c)
    x = c.randn(cfg.shape)
    return Candidate("torch:aten::local_response_norm", _algo(c),
                     lambda: F.local_response_norm(x, cfg.size, cfg.alpha, cfg.beta, cfg.bias), L.numel(cfg.shape))


def _dropout(c: Ctx) -> Candidate:
    cfg, F = c.cfg, _F(c)
    x = c.randn(cfg.shape)
    return Candidate("torch:aten::dropout", "training", lambda: F.dropout(x, cfg.ratio, True), L.numel(cfg.shape))


def _reduce(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    dims = tuple(i for i, (a, b) in enumerate(zip(cfg.x, cfg.y)) if b == 1 and a != 1)
    x = c.randn(cfg.x)
    if not dims:
        raise NotSupported("a reduction over dims of size 1 is a copy")
    op = {"mean": torch.mean, "sum": torch.sum, "max": torch.amax, "min": torch.amin}[cfg.op]
    name = {"mean": "mean", "sum": "sum", "max": "amax", "min": "amin"}[cfg.op]
    return Candidate(f"torch:aten::{name}", _algo(c), lambda: op(x, dims, keepdim=True), L.numel(cfg.y))


def _copy(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, _F(c), c.torch
    ins = [c.randn(s) for s in cfg.inputs]
    y = L.numel(cfg.y)
    if cfg.op == "Concat":
        axis = cfg.attr("axis")[0]
        return Candidate("torch:aten::cat", _algo(c), lambda: torch.cat(ins, axis), y)
    x = ins[0]
    if cfg.op == "Transpose":
        perm = tuple(cfg.attr("perm"))
        return Candidate("torch:aten::permute+clone", _algo(c), lambda: x.permute(perm).contiguous(), y)
    if cfg.op == "Slice":
        idx = tuple(slice(st, st + sp * (n - 1) + 1, sp) for st, sp, n in zip(cfg.attr("starts"), cfg.attr("steps"),
                                                                                cfg.y))
        return Candidate("torch:aten::slice+clone", _algo(c), lambda: x[idx].clone(), y)
    if cfg.op == "Pad":
        pads, r = cfg.attr("pads"), len(cfg.inputs[0])
        tp = []
        for i in reversed(range(r)):
            tp += [pads[i], pads[r + i]]
        return Candidate("torch:aten::constant_pad_nd", _algo(c), lambda: F.pad(x, tp), y)
    raise NotSupported(f"copy op {cfg.op}")


def _rnn(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    cls = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[cfg.cell]
    m = cls(cfg.input_size, cfg.hidden_size, num_layers=cfg.num_layers, bias=cfg.bias,
            batch_first=cfg.layout == "batch_major", bidirectional=cfg.direction == "bidirectional")
    m = m.to(device=c.device, dtype=c.dtype).eval()
    m.flatten_parameters()
    x = c.randn(cfg.input_shapes()[0])
    notes = []
    if cfg.direction == "reverse":
        notes.append("reverse direction timed forward (the same work)")
    if cfg.cell == "gru" and not cfg.linear_before_reset:
        notes.append("GRU linear_before_reset=0 timed as PyTorch's GRU (linear_before_reset=1, the same work)")
    return Candidate(f"torch:aten::{cfg.cell}", "cudnn", lambda: m(x)[0], L.numel(cfg.output_shape()), "; ".join(notes))


def _layernorm(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, _F(c), c.torch
    x = c.randn(cfg.x)
    norm = tuple(cfg.x[cfg.axis:])
    w = c.randn(norm)
    b = c.randn(norm) if cfg.bias else None
    if cfg.stats:
        return Candidate("torch:aten::native_layer_norm", _algo(c),
                         lambda: torch.native_layer_norm(x, norm, w, b, cfg.epsilon)[0], L.numel(cfg.x))
    return Candidate("torch:aten::layer_norm", _algo(c), lambda: F.layer_norm(x, norm, w, b, cfg.epsilon),
                     L.numel(cfg.x))


_SRC_DTYPES = {"int64": "int64", "int32": "int32", "int8": "int8", "uint8": "uint8", "bool": "bool",
               "float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def _unary(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, _F(c), c.torch
    n = L.numel(cfg.shape)
    if cfg.op == "cast":
        src = getattr(torch, _SRC_DTYPES.get(cfg.src, "float32"))
        if src.is_floating_point:
            x = c.randn(cfg.shape, dtype=src)
        elif src == torch.bool:
            x = torch.randint(0, 2, cfg.shape, device=c.device).bool()
        else:
            x = torch.randint(0, 100, cfg.shape, device=c.device, dtype=src)
        dst = getattr(torch, cfg.dst) if getattr(cfg, "dst", "") else c.dtype
        return Candidate("torch:aten::_to_copy", "default", lambda: x.to(dst), n)
    x = _unary_input(c, cfg)
    ops = _unary_ops(c, cfg, x)
    if cfg.op not in ops:
        raise NotSupported(f"unary op {cfg.op}")
    name, fn = ops[cfg.op]
    return Candidate(f"torch:aten::{name}", "default", fn, n)


def _unary_input(c: Ctx, cfg: L.UnaryConfig):
    """A random input in the op's domain (positive for log and sqrt, within [-1, 1] for asin...)."""
    src = cfg.src if cfg.src in L.STORED_TYPES else ""
    if src or cfg.op in ("not", "bitwise_not"):
        return c.typed(cfg.shape, src or ("bool" if cfg.op == "not" else "int32"))
    x = c.randn(cfg.shape, positive=cfg.op in ("log", "sqrt", "reciprocal", "pow", "acosh"))
    if cfg.op in ("acos", "asin", "atanh"):
        x = c.torch.tanh(x)
    if cfg.op == "acosh":
        x = x + 1.0
    return x


def _unary_ops(c: Ctx, cfg: L.UnaryConfig, x) -> dict:
    """op -> (ATen name, callable) for :data:`benanza.kinds.UNARY_OPS`."""
    F, torch = _F(c), c.torch
    e, a, b = float(cfg.exponent), float(getattr(cfg, "alpha", 0.0)), float(getattr(cfg, "beta", 0.0))
    ops = {"gelu": ("gelu", lambda: F.gelu(x)), "gelu_tanh": ("gelu", lambda: F.gelu(x, approximate="tanh")),
           "pow": ("pow", lambda: torch.pow(x, e)), "hard_swish": ("hardswish", lambda: F.hardswish(x)),
           "is_inf": ("isinf", lambda: torch.isinf(x)), "is_nan": ("isnan", lambda: torch.isnan(x)),
           "mish": ("mish", lambda: F.mish(x)), "not": ("logical_not", lambda: torch.logical_not(x)),
           "softplus": ("softplus", lambda: F.softplus(x)), "softsign": ("softsign", lambda: F.softsign(x)),
           "thresholded_relu": ("threshold", lambda: F.threshold(x, a, 0.0)), "celu": ("celu", lambda: F.celu(x, a)),
           "clip": ("clamp", lambda: torch.clamp(x, a, b)), "selu": ("selu", lambda: F.selu(x)),
           "swish": ("silu", lambda: F.silu(x)) if a in (0.0, 1.0) else ("mul+sigmoid+mul",
                                                                         lambda: x * torch.sigmoid(x * a)),
           "shrink": ("softshrink", lambda: F.softshrink(x, a)) if a == b else
           ("hardshrink", lambda: F.hardshrink(x, a)) if b == 0 else
           ("where", lambda: torch.where(x < -a, x + b, torch.where(x > a, x - b, torch.zeros_like(x))))}
    for name in ("erf", "exp", "log", "sqrt", "reciprocal", "neg", "abs", "acos", "acosh", "asin", "asinh", "atan",
                 "atanh", "ceil", "cos", "cosh", "floor", "round", "sign", "sin", "sinh", "tan", "bitwise_not"):
        ops[name] = (name, (lambda f: lambda: f(x))(getattr(torch, name)))
    return ops


def _gather(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, _F(c), c.torch
    data = c.randn(cfg.data)
    n_idx = L.numel(cfg.indices)
    if cfg.values and len(cfg.values) == n_idx:
        idx = torch.tensor(cfg.values, device=c.device, dtype=torch.int64).reshape(cfg.indices)
    else:
        idx = torch.randint(0, cfg.data[cfg.axis], cfg.indices, device=c.device, dtype=torch.int64)
    y = L.numel(cfg.output_shape())
    if cfg.indices == ():  # a constant scalar index: a select, made contiguous when it is not
        i = int(idx)
        return Candidate("torch:aten::select+clone", "default", lambda: data.select(cfg.axis, i).contiguous(), y,
                         "a view in PyTorch; its copy is counted only when the view is not contiguous")
    if cfg.axis == 0 and len(cfg.data) == 2:
        return Candidate("torch:aten::embedding", "default", lambda: F.embedding(idx, data), y)
    flat = idx.reshape(-1)
    out = cfg.output_shape()
    return Candidate("torch:aten::index_select", "default",
                     lambda: torch.index_select(data, cfg.axis, flat).view(out), y)


def _where(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    cond = torch.randint(0, 2, cfg.cond, device=c.device).bool()
    a, b = c.randn(cfg.a), c.randn(cfg.b)
    return Candidate("torch:aten::where", "default", lambda: torch.where(cond, a, b), L.numel(cfg.output_shape()))


def _sdpa(c: Ctx) -> Candidate:
    cfg, F = c.cfg, _F(c)
    qs, ks, vs, os_ = cfg.strides()
    shapes = cfg.input_shapes() + [cfg.output_shape()]

    def view(shape, strides):
        extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
        return c.randn((extent,)).as_strided(shape, strides)
    q, k, v = (view(s, st) for s, st in zip(shapes[:3], (qs, ks, vs)))
    out = view(shapes[3], os_)
    mask = None
    if cfg.mask == "bias":
        mask = c.randn(cfg.bias)
    causal = cfg.mask == "causal"
    scale = float(cfg.scale)
    o_dims = shapes[3]

    def run():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
        if all(d == 1 or st == want for d, st, want in zip(o_dims, o.stride(), os_)):
            return o  # written where the consumer reads it
        out.copy_(o)  # the layout the consumer reads: PyTorch copies there too
        return out
    strided = bool(cfg.q_strides or cfg.k_strides or cfg.v_strides or cfg.o_strides)
    return Candidate("torch:aten::scaled_dot_product_attention", "default", run, L.numel(cfg.output_shape()),
                     "Q, K, V read as strided views; O copied where its layout differs" if strided else "",
                     {"strided": strided})


#: every config kind's builder (a test checks that each of :data:`benanza.kinds.CONFIG_KINDS` has one)
BUILDERS: dict[str, Callable[[Ctx], Candidate]] = {
    "Conv": _conv, "ConvBiasAct": _conv_bias_act, "ConvBnAct": _conv_bn_act, "Activation": _activation,
    "BatchNorm": _batchnorm, "Pooling": _pooling, "Softmax": _softmax, "Elementwise": _elementwise,
    "Gemm": _gemm, "GemmAct": _gemm_act, "LRN": _lrn, "Dropout": _dropout, "Reduce": _reduce, "Copy": _copy,
    "RNN": _rnn, "LayerNorm": _layernorm, "Unary": _unary, "Gather": _gather, "Where": _where, "SDPA": _sdpa,
}

_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def math_mode(cfg: L.LayerConfig, precision: str) -> str:
    """The math mode a candidate records (:data:`benanza.kinds.ACCEPTED_MATH`)."""
    if not cfg.tensor_cores:
        return "none"
    return {"fp32": "fma", "tf32": "tf32"}.get(precision, "tensor_op")


def build(cfg: L.LayerConfig, precision: str, layout: str = "NCHW", device: str = "cpu") -> Candidate:
    """The candidate of ``cfg`` in ``precision`` (``fp32``: TF32 off; ``tf32``: on) and ``layout``
    (NHWC: channels-last image tensors), its inputs allocated on ``device``. Sets PyTorch's TF32
    flags for the precision. Raises :class:`NotSupported` (fp8, an op without a PyTorch call) and
    KeyError for a kind without a builder."""
    import torch

    if precision not in _DTYPES:
        raise NotSupported(f"{precision}: no PyTorch eager path")
    if precision in ("fp32", "tf32"):
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    ctx = Ctx(cfg, torch, torch.device(device), getattr(torch, _DTYPES[precision]), layout == "NHWC")
    with torch.inference_mode():
        return BUILDERS[cfg.kind](ctx)


# --------------------------------------------------------------------------------------- timing

@dataclass
class Policy:
    """The harness's timing policy (RunOptions / the suite's flags), in ms and counts."""

    warmup_ms: float = 2.0
    sample_ms: float = 0.25
    rse: float = 0.01
    min_samples: int = 10
    max_samples: int = 2000
    max_time_ms: float = 1000.0
    cold: bool = True
    graphs: bool = True
    max_reps: int = 1000


def median_rse(samples: list[float]) -> float:
    """Relative standard error of the median: sqrt(pi/2) * (IQR / 1.349) / sqrt(n) / median, the
    harness's estimate (cpp/include/benanza/stats.hpp); a Python float."""
    import numpy as np

    if len(samples) < 2:
        return math.inf
    q1, med, q3 = (float(v) for v in np.percentile(samples, [25, 50, 75]))
    if med <= 0:
        return math.inf
    return math.sqrt(math.pi / 2) * ((q3 - q1) / 1.349) / math.sqrt(len(samples)) / med


def summarize(samples: list[float], policy: Policy) -> dict:
    """The harness's statistics of samples (ms per call): quartiles by linear interpolation."""
    import numpy as np

    a = np.asarray(samples, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    rse = median_rse(samples)
    rse = float(rse)
    return {"median_ms": float(med), "q1_ms": float(q1), "q3_ms": float(q3), "mean_ms": float(a.mean()),
            "min_ms": float(a.min()), "max_ms": float(a.max()), "stddev_ms": float(a.std(ddof=1)) if len(a) > 1 else 0.0,
            "rse": rse if math.isfinite(rse) else None, "samples": len(samples),
            "converged": bool(len(samples) >= policy.min_samples and rse <= policy.rse)}


def _sample(timed_once: Callable[[], float], policy: Policy) -> list[float]:
    samples: list[float] = []
    t0 = time.perf_counter()
    while True:
        samples.append(timed_once())
        n = len(samples)
        if n >= policy.max_samples:
            break
        if n >= policy.min_samples and (median_rse(samples) <= policy.rse
                                        or (time.perf_counter() - t0) * 1e3 >= policy.max_time_ms):
            break
    return samples


def _check(torch, out, want: int) -> str:
    """Why ``out`` is not a valid output ("" when it is)."""
    if not isinstance(out, torch.Tensor):
        return f"the call returned {type(out).__name__}, not a tensor"
    if out.numel() != want:
        return f"the call wrote {out.numel()} elements, the config has {want}"
    if out.is_floating_point() and not bool(torch.isfinite(out).all()):
        return "the output holds NaN or Inf"
    return ""


def measure(cand: Candidate, policy: Policy, l2_bytes: int = 0) -> list[dict]:
    """Time ``cand`` (warm, and cold when ``policy.cold``): records with the harness's fields
    (status, statistics, method, reps, host_us). Raises RuntimeError (a CUDA error) to the caller."""
    import torch

    torch.backends.cudnn.benchmark = True
    stream = torch.cuda.current_stream()
    t = time.perf_counter()
    out = cand.fn()
    torch.cuda.synchronize()
    host_us = (time.perf_counter() - t) * 1e6
    why = _check(torch, out, cand.out_numel)
    if why:
        return [{"cache": "warm", "status": "failed", "message": why}]
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, w0 = 0, time.perf_counter()
    while True:  # warm-up: at least 3 calls and warmup_ms
        e0.record(stream)
        cand.fn()
        e1.record(stream)
        e1.synchronize()
        calls += 1
        per_call = e0.elapsed_time(e1)
        if (time.perf_counter() - w0) * 1e3 >= policy.warmup_ms and calls >= 3:
            break
    reps = max(1, min(policy.max_reps, math.ceil(policy.sample_ms / max(per_call, 1e-6))))
    method, graph = "stream", None
    if policy.graphs:
        try:
            side = torch.cuda.Stream()
            side.wait_stream(stream)
            with torch.cuda.stream(side):
                for _ in range(2):
                    cand.fn()
            stream.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(reps):
                    cand.fn()
            graph.replay()
            torch.cuda.synchronize()
            method = "cuda_graph"
        except Exception:  # not capturable: eager calls between events
            graph = None
            torch.cuda.synchronize()

    def warm_once() -> float:
        e0.record(stream)
        if graph is not None:
            graph.replay()
        else:
            for _ in range(reps):
                cand.fn()
        e1.record(stream)
        e1.synchronize()
        return e0.elapsed_time(e1) / reps
    rec = {"cache": "warm", "status": "ok", "method": method, "reps": reps, "host_us": host_us,
           "warmup_calls": calls, **summarize(_sample(warm_once, policy), policy)}
    out = [rec]
    if policy.cold and l2_bytes > 0:
        flush = torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda")

        def cold_once() -> float:
            flush.fill_(1)
            e0.record(stream)
            cand.fn()
            e1.record(stream)
            e1.synchronize()
            return e0.elapsed_time(e1)
        out.append({"cache": "cold", "status": "ok", "method": "stream_l2_flushed", "reps": 1, "host_us": host_us,
                    **summarize(_sample(cold_once, policy), policy)})
    del graph
    return out


# ------------------------------------------------------------------------------- the worker

def _plain(v):
    """JSON for numpy scalars (their Python value) and anything else (its text)."""
    item = getattr(v, "item", None)
    return item() if callable(item) else str(v)


def _emit(rec: dict) -> None:
    sys.stdout.write(json.dumps(rec, default=_plain) + "\n")
    sys.stdout.flush()


def _kernel_names(cand: Candidate) -> list[str]:
    """The GPU kernels one call launches (torch.profiler), for the record's details."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        cand.fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA and e.name not in names:
            names.append(e.name)
    return names[:8]


def run_job(job: dict, policy: Policy, l2_bytes: int, kernels: bool = True) -> list[dict]:
    """The measurement records of one job (a jobs-file line)."""
    import torch

    cfg = L.config_from_params(job["kind"], job["params"])
    precision, layout = job["precision"], job.get("layout", "NCHW")
    base = {"type": "measurement", "job": job["job"], "layer_key": cfg.key, "kind": cfg.kind, "precision": precision,
            "math": math_mode(cfg, precision), "dtype": L.PRECISION_DTYPE.get(precision, ""), "layout": layout,
            "workspace_bytes": 0}
    try:
        with torch.inference_mode():
            cand = build(cfg, precision, layout, "cuda")
            base.update(call=cand.call, algorithm=cand.algorithm, note=cand.note)
            details = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), **cand.details}
            recs = measure(cand, policy, l2_bytes)
            if kernels and recs[0].get("status") == "ok":
                details["kernels"] = _kernel_names(cand)
    except NotSupported as e:
        return [{**base, "call": base.get("call") or f"torch:{cfg.kind}", "algorithm": base.get("algorithm", "*"),
                 "cache": "warm", "status": "not_supported", "message": str(e)}]
    except (RuntimeError, ValueError, TypeError, IndexError) as e:
        if "CUDA error" in str(e) or "illegal memory" in str(e):
            raise
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        return [{**base, "call": base.get("call") or f"torch:{cfg.kind}", "algorithm": base.get("algorithm", "*"),
                 "cache": "warm", "status": "failed", "message": msg}]
    return [{**base, "details": details, **r} for r in recs]


def _args(argv: list[str]) -> argparse.Namespace:
    """The suite's flags (benanza.runner.run.RunOptions.suite_args), with the runner's defaults."""
    from benanza.runner.run import RunOptions

    d = RunOptions()
    ap = argparse.ArgumentParser(prog="python -m benanza.profiles.torch_candidates",
                                 description="Time the framework's own kernels for benanza jobs (a suite-protocol worker).")
    ap.add_argument("--jobs", required=True, help="JSON lines: job, kind, params, precision, layout")
    for flag, default in (("--device", d.device), ("--warmup-ms", d.warmup_ms), ("--sample-ms", d.sample_ms),
                          ("--rse", d.rse), ("--min-samples", d.min_samples), ("--max-samples", d.max_samples),
                          ("--max-time-ms", d.max_time_ms), ("--workspace-limit-mb", d.workspace_limit_mb),
                          ("--screen", d.screen), ("--max-engines", d.max_engines)):
        ap.add_argument(flag, type=type(default), default=default)  # screen, max-engines: one call per job
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--no-graphs", action="store_true")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """The worker: exit 0 when every job ran (failures recorded), 3 without PyTorch or a CUDA
    device (a ``fatal`` line says why), 2 for an unreadable jobs file."""
    a = _args(sys.argv[1:] if argv is None else argv)
    try:
        jobs = [json.loads(line) for line in open(a.jobs, encoding="utf-8") if line.strip()]
    except (OSError, ValueError) as e:
        _emit({"type": "fatal", "message": f"jobs file {a.jobs}: {e}"})
        return 2
    try:
        import torch
    except Exception as e:
        _emit({"type": "fatal", "message": f"PyTorch does not import: {e}"})
        return 3
    if not torch.cuda.is_available() or a.device >= torch.cuda.device_count():
        _emit({"type": "fatal", "message": f"no CUDA device {a.device} for PyTorch"})
        return 3
    torch.cuda.set_device(a.device)
    l2 = int(getattr(torch.cuda.get_device_properties(a.device), "L2_cache_size", 0) or 0)
    policy = Policy(a.warmup_ms, a.sample_ms, a.rse, a.min_samples, a.max_samples, a.max_time_ms, not a.no_cold,
                    not a.no_graphs)
    for job in jobs:
        _emit({"type": "job_start", "job": job["job"]})
        try:
            recs = run_job(job, policy, l2)
        except Exception as e:  # a sticky CUDA error: the runner restarts the worker
            _emit({"type": "fatal", "message": f"{job['job']}: {str(e).splitlines()[0][:300]}"})
            return 1
        for r in recs:
            _emit(r)
        torch.cuda.empty_cache()
        _emit({"type": "job_end", "job": job["job"], "status": "ok"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
