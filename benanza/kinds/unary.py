"""Unary layers. Unary elementwise op ``y = f(x)`` on a packed tensor (see :data:`UNARY_OPS`).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
import math
import numpy as np
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, OPTIONAL, STORED_TYPES, Shape, numel
from benanza.kinds.cpp import Case, CppValue, ELEM_ENUM, cpp_num, cpp_string, job_init
from benanza.kinds.elementwise import elem_name, map_elementwise
from benanza.kinds.framework import Candidate, Ctx, NotSupported, functional
from benanza.kinds.onnx_map import STORED_NAMES, TP, Unsupported, need, type_name
from benanza.kinds.patterns import Graph, Node, Pattern, is_kind


#: unary elementwise ops, their ONNX operators (ONNX operator spec) and FLOPs per element
#: (transcendental functions count as one operation)
UNARY_OPS = {
    "gelu": ("Gelu approximate='none' (opset 20): x/2 (1 + erf(x/sqrt 2))", 5),
    "gelu_tanh": ("Gelu approximate='tanh' (opset 20): x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))", 9),
    "erf": ("Erf", 1),
    "exp": ("Exp", 1),
    "log": ("Log", 1),
    "sqrt": ("Sqrt", 1),
    "reciprocal": ("Reciprocal", 1),
    "neg": ("Neg", 1),
    "abs": ("Abs", 1),
    "pow": ("Pow with a constant scalar exponent", 1),
    "cast": ("Cast (CastLike) to the float type of the precision, to bool or to an integer type", 0),
    "acos": ("Acos", 1),
    "acosh": ("Acosh", 1),
    "asin": ("Asin", 1),
    "asinh": ("Asinh", 1),
    "atan": ("Atan", 1),
    "atanh": ("Atanh", 1),
    "ceil": ("Ceil", 1),
    "cos": ("Cos", 1),
    "cosh": ("Cosh", 1),
    "floor": ("Floor", 1),
    "hard_swish": ("HardSwish: x * max(0, min(1, x / 6 + 1/2))", 5),
    "is_inf": ("IsInf (alpha: detect_negative, beta: detect_positive, 0 or 1): bool output", 1),
    "is_nan": ("IsNaN: bool output", 1),
    "mish": ("Mish: x * tanh(log(1 + exp(x)))", 5),
    "not": ("Not: bool input and output", 0),
    "round": ("Round (half to even)", 1),
    "selu": ("Selu (alpha, gamma as beta): x > 0 ? gamma * x : gamma * (alpha * exp(x) - alpha)", 5),
    "sign": ("Sign", 1),
    "sin": ("Sin", 1),
    "sinh": ("Sinh", 1),
    "softplus": ("Softplus: log(exp(x) + 1)", 3),
    "softsign": ("Softsign: x / (1 + |x|)", 3),
    "tan": ("Tan", 1),
    "thresholded_relu": ("ThresholdedRelu (alpha): x > alpha ? x : 0", 1),
    "celu": ("Celu (alpha): max(0, x) + min(0, alpha * (exp(x / alpha) - 1))", 7),
    "shrink": ("Shrink (alpha: lambd, beta: bias): x < -lambd ? x + bias : x > lambd ? x - bias : 0", 3),
    "bitwise_not": ("BitwiseNot: integer input and output", 0),
    "clip": ("Clip (alpha: min, beta: max; an absent bound is -/+ FLT_MAX) other than Clip(0, max)", 2),
    "swish": ("Swish (alpha): x * sigmoid(alpha * x)", 5),
}


#: the largest finite float32: Clip's absent bound
FLT_MAX = 3.4028234663852886e38


#: element types a Cast may read (ONNX TensorProto names, lower case) and their size in bytes
CAST_SOURCES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, **STORED_TYPES}


@dataclass(frozen=True)
class UnaryConfig(LayerConfig):
    """Unary elementwise op ``y = f(x)`` on a packed tensor (see :data:`UNARY_OPS`).

    shape: x and y; op: a key of :data:`UNARY_OPS`; exponent: Pow's constant scalar exponent (0 for
    other ops); src: the element type x is stored as when it is not the precision's float type
    (Cast's source; "bool" for Not; an integer type for BitwiseNot and Abs/Neg/Sign on integers;
    "" otherwise); dst: y's element type when it is not the precision's float type ("bool" for
    IsNaN/IsInf/Not and Cast to bool, the integer type for integer ops and Casts to it, "" otherwise);
    alpha, beta: the op's
    attributes (see :data:`UNARY_OPS`; 0 for ops without any).
    Timed: a benanza CUDA kernel (16-byte vectors, float32 math, integer math on integers; always),
    cudnnOpTensor SQRT / NOT for Sqrt / Not, and for the ops the cuDNN graph API has a pointwise
    mode for (GELU_FWD, GELU_APPROX_TANH_FWD, ERF, EXP, LOG, SQRT, RECIPROCAL, NEG, ABS, POW, CEIL,
    COS, FLOOR, SIN, TAN, SOFTPLUS_FWD, SWISH_FWD, LOGICAL_NOT; cudnn-frontend ``Graph::pointwise``) every
    engine config of that one-node graph. FLOPs: numel * the per-element count of
    :data:`UNARY_OPS` (0 for ops on integer or bool data and for Cast).
    """

    kind: ClassVar[str] = "Unary"
    shape: Shape
    op: str
    exponent: float = 0.0
    src: str = ""
    alpha: float = dataclasses.field(default=0.0, metadata=OPTIONAL)
    beta: float = dataclasses.field(default=0.0, metadata=OPTIONAL)
    dst: str = dataclasses.field(default="", metadata=OPTIONAL)

    def fusion_label(self) -> str:
        """A GELU chain's fusion candidate counts as ``Gelu`` (the erf and tanh forms alike)."""
        return "Gelu" if self.op in ("gelu", "gelu_tanh") else self.kind

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        if self.src in STORED_TYPES:
            return 0
        return numel(self.shape) * UNARY_OPS[self.op][1]

    def describe(self):
        if self.op == "pow":
            extra = f" ^{self.exponent:g}"
        elif self.op == "cast":
            extra = (f" from {self.src}" if self.src else "") + (f" to {self.dst}" if self.dst else "")
        else:
            extra = f" {self.src or self.dst}" if (self.src or self.dst) else ""
            extra += "".join(f" {n}={v:g}" for n, v in (("alpha", self.alpha), ("beta", self.beta)) if v)
        return f"Unary({self.op}{extra} {'x'.join(map(str, self.shape))})"


UNARY_ONNX_OPS = {"Erf": "erf", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Reciprocal": "reciprocal", "Neg": "neg",
          "Abs": "abs", "Acos": "acos", "Acosh": "acosh", "Asin": "asin", "Asinh": "asinh", "Atan": "atan",
          "Atanh": "atanh", "Ceil": "ceil", "Cos": "cos", "Cosh": "cosh", "Floor": "floor", "HardSwish": "hard_swish",
          "Mish": "mish", "Round": "round", "Sign": "sign", "Sin": "sin", "Sinh": "sinh", "Softplus": "softplus",
          "Softsign": "softsign", "Tan": "tan"}


#: unary ops ONNX also defines on integers (integer math, same type out)
UNARY_INT_OPS = {"Abs", "Neg", "Sign"}


#: ONNX defaults of Selu (alpha, gamma: float32 values of the spec's constants)
_SELU_ALPHA, _SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def _unary_with_attrs(op: str, x, attrs) -> UnaryConfig:
    """The unary ops with attributes or a bool output (IsNaN, IsInf, Selu, Celu, ThresholdedRelu, Swish,
    Shrink)."""
    f = lambda name, default: float(attrs.get(name, default))  # noqa: E731
    if op == "IsNaN":
        return UnaryConfig(shape=x, op="is_nan", dst="bool")
    if op == "IsInf":
        return UnaryConfig(shape=x, op="is_inf", alpha=f("detect_negative", 1), beta=f("detect_positive", 1),
                             dst="bool")
    if op == "Selu":
        return UnaryConfig(shape=x, op="selu", alpha=f("alpha", _SELU_ALPHA), beta=f("gamma", _SELU_GAMMA))
    if op == "Celu":
        if f("alpha", 1.0) == 0.0:
            raise Unsupported("Celu with alpha 0 (divides by alpha)")
        return UnaryConfig(shape=x, op="celu", alpha=f("alpha", 1.0))
    if op == "ThresholdedRelu":
        return UnaryConfig(shape=x, op="thresholded_relu", alpha=f("alpha", 1.0))
    if op == "Swish":
        return UnaryConfig(shape=x, op="swish", alpha=f("alpha", 1.0))
    return UnaryConfig(shape=x, op="shrink", alpha=f("lambd", 0.5), beta=f("bias", 0.0))


def _map_unary(node, ctx, attrs):
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    op = node.op_type
    t = elem_name(ctx, node.input[0], op)
    if op == "Not":
        if t != "bool":
            raise Unsupported(f"Not reads bool tensors, not {t or 'float'}")
        return UnaryConfig(shape=x, op="not", src="bool", dst="bool")
    if op == "BitwiseNot":
        if t in ("", "bool"):
            raise Unsupported(f"BitwiseNot reads integer tensors, not {t or 'float'}")
        return UnaryConfig(shape=x, op="bitwise_not", src=t, dst=t)
    if op == "Pow":
        v = ctx.value(node.input[1])
        if t or v is None or np.asarray(v).size != 1:
            return map_elementwise(node, ctx, attrs)  # a tensor exponent or integers: the binary op
        e = float(np.asarray(v).reshape(-1)[0])
        if not math.isfinite(e):
            raise Unsupported(f"Pow with a non-finite exponent {e}")
        return UnaryConfig(shape=x, op="pow", exponent=e)
    if t:
        if op in UNARY_INT_OPS and t != "bool":
            return UnaryConfig(shape=x, op=UNARY_ONNX_OPS[op], src=t, dst=t)
        raise Unsupported(f"{op} of {t} data (ONNX defines it on floats)")
    if op == "Gelu":
        approx = attrs.get("approximate", "none")
        if approx not in ("none", "tanh"):
            raise Unsupported(f"Gelu approximate={approx!r} (only 'none' and 'tanh')")
        return UnaryConfig(shape=x, op="gelu" if approx == "none" else "gelu_tanh")
    if op in UNARY_ONNX_OPS:
        return UnaryConfig(shape=x, op=UNARY_ONNX_OPS[op])
    return _unary_with_attrs(op, x, attrs)


_CAST_NAMES = {**STORED_NAMES, TP.DOUBLE: "float64", TP.FLOAT: "float32",
               TP.FLOAT16: "float16", TP.BFLOAT16: "bfloat16"}


def _map_cast(node, ctx, attrs):
    """Cast (and CastLike, to the type of its second input) to a float type (the precision's), to
    bool or to an integer type; x is read as its own type."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    to = attrs.get("to") if node.op_type == "Cast" else ctx.types.get(node.input[1])
    src = _CAST_NAMES.get(ctx.types.get(node.input[0]))
    if src is None:
        raise Unsupported("Cast from an element type that is not benchmarked")
    if to in (TP.FLOAT, TP.FLOAT16, TP.BFLOAT16):
        return UnaryConfig(shape=x, op="cast", src=src)
    if to in STORED_NAMES:  # (a Cast to its own type is a zero-cost layer, see _map_node)
        return UnaryConfig(shape=x, op="cast", src=src, dst=STORED_NAMES[to])
    name = type_name(to)
    raise Unsupported(f"Cast to {name} (casts to float32/16, bfloat16, bool and integer types are benchmarked)")


#: unary op -> its enum in the harness kernels (cpp/src/unary_kernels.cuh), shared with the backward kind
UNARY_ENUM = {op: "UnaryOp::" + op.upper() for op in UNARY_OPS}


#: the legacy cudnnOpTensor's unary ops: Sqrt on float data, Not on bool bytes
_UNARY_OP_TENSOR = {"sqrt": "1", "not": "2"}


def unary_input_range(cfg: UnaryConfig) -> tuple[float, float]:
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
    if cfg.src in STORED_TYPES:
        return (0.0, 200.0) if cfg.src.startswith("u") else (-100.0, 100.0)
    return -1.0, 1.0


@dataclass(frozen=True)
class UnaryCase(Case):
    """One row of ``templates/unary.cpp.j2``'s case table: the fields of its C++ ``UnaryCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    rows: CppValue
    cols: CppValue
    op: CppValue
    exponent: CppValue
    alpha: CppValue
    beta: CppValue
    x_stored: CppValue
    xt: CppValue
    y_stored: CppValue
    yt: CppValue
    legacy: CppValue
    lo: CppValue
    hi: CppValue
    label: CppValue


def _unary_case(cfg: UnaryConfig, job: Job) -> UnaryCase:
    cols = cfg.shape[-1] if cfg.shape else 1
    rows = numel(cfg.shape) // max(cols, 1)
    lo, hi = unary_input_range(cfg)
    if cfg.op == "cast":
        label = f"cast from {cfg.src}" + (f" to {cfg.dst}" if cfg.dst else "")
    elif cfg.op == "pow":
        label = f"pow {cfg.exponent:g}"
    else:
        label = cfg.op + (f" {cfg.src or cfg.dst}" if cfg.src or cfg.dst else "")
    op = "UnaryOp::CAST_BOOL" if cfg.op == "cast" and cfg.dst == "bool" else UNARY_ENUM[cfg.op]
    return UnaryCase(job=job_init(job), rows=rows, cols=cols, op=op, exponent=cpp_num(float(cfg.exponent)), alpha=cpp_num(float(cfg.alpha)), beta=cpp_num(float(cfg.beta)), x_stored=cpp_num(bool(cfg.src)), xt=ELEM_ENUM[cfg.src] if cfg.src else "ElemType::F32", y_stored=cpp_num(bool(cfg.dst)), yt=ELEM_ENUM[cfg.dst] if cfg.dst else "ElemType::F32", legacy=_UNARY_OP_TENSOR.get(cfg.op, "0") if cfg.src in ("", "bool") else "0", lo=cpp_num(lo), hi=cpp_num(hi), label=cpp_string(label))


_SRC_DTYPES = {"int64": "int64", "int32": "int32", "int8": "int8", "uint8": "uint8", "bool": "bool",
               "float64": "float64", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def _unary(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, functional(c), c.torch
    n = numel(cfg.shape)
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


def _unary_input(c: Ctx, cfg: UnaryConfig):
    """A random input in the op's domain (positive for log and sqrt, within [-1, 1] for asin...)."""
    src = cfg.src if cfg.src in STORED_TYPES else ""
    if src or cfg.op in ("not", "bitwise_not"):
        return c.typed(cfg.shape, src or ("bool" if cfg.op == "not" else "int32"))
    x = c.randn(cfg.shape, positive=cfg.op in ("log", "sqrt", "reciprocal", "pow", "acosh"))
    if cfg.op in ("acos", "asin", "atanh"):
        x = c.torch.tanh(x)
    if cfg.op == "acosh":
        x = x + 1.0
    return x


def _unary_ops(c: Ctx, cfg: UnaryConfig, x) -> dict:
    """op -> (ATen name, callable) for :data:`benanza.kinds.UNARY_OPS`."""
    F, torch = functional(c), c.torch
    e, a, b = float(cfg.exponent), float(getattr(cfg, "alpha", 0.0)), float(getattr(cfg, "beta", 0.0))
    ops = {"gelu": ("gelu", lambda: F.gelu(x)), "gelu_tanh": ("gelu", lambda: F.gelu(x, approximate="tanh")),
           "pow": ("pow", lambda: torch.pow(x, e)), "hard_swish": ("hardswish", lambda: F.hardswish(x)),
           "is_inf": ("isinf", lambda: torch.isinf(x)), "is_nan": ("isnan", lambda: torch.isnan(x)),
           "mish": ("mish", lambda: F.mish(x)), "not": ("logical_not", lambda: torch.logical_not(x)),
           "softplus": ("softplus", lambda: F.softplus(x)), "softsign": ("softsign", lambda: F.softsign(x)),
           "thresholded_relu": ("threshold", lambda: F.threshold(x, a, 0.0)), "celu": ("celu", lambda: F.celu(x, a)),
           "clip": ("clamp", (lambda: torch.clamp(x, int(a), int(b))) if cfg.src in STORED_TYPES
                    else (lambda: torch.clamp(x, a, b))), "selu": ("selu", lambda: F.selu(x)),
           "swish": ("silu", lambda: F.silu(x)) if a in (0.0, 1.0) else ("mul+sigmoid+mul",
                                                                         lambda: x * torch.sigmoid(x * a)),
           "shrink": ("softshrink", lambda: F.softshrink(x, a)) if a == b else
           ("hardshrink", lambda: F.hardshrink(x, a)) if b == 0 else
           ("where", lambda: torch.where(x < -a, x + b, torch.where(x > a, x - b, torch.zeros_like(x))))}
    for name in ("erf", "exp", "log", "sqrt", "reciprocal", "neg", "abs", "acos", "acosh", "asin", "asinh", "atan",
                 "atanh", "ceil", "cos", "cosh", "floor", "round", "sign", "sin", "sinh", "tan", "bitwise_not"):
        ops[name] = (name, (lambda f: lambda: f(x))(getattr(torch, name)))
    return ops


def _min_bytes(cfg: UnaryConfig, ib: int, ob: int) -> int:
    """x read once in its source type (a Cast's), y written once in its destination type (bytes)."""
    src = CAST_SOURCES.get(cfg.src, ib) if cfg.src else ib
    dst = STORED_TYPES.get(cfg.dst, ob) if cfg.dst else ob
    return src * numel(cfg.shape) + dst * numel(cfg.output_shape())


# ------------------------------------------------------------------------ fusion patterns

def _gelu_half(pat: Graph, x: str, add: Node, mul: Node) -> Node | None:
    """The Mul by 0.5 of a GELU whose ``mul`` multiplies ``add`` (1 + erf or 1 + tanh) by x * 0.5, or
    by x and then by 0.5; None when there is none."""
    other = next(i for i in mul.inputs if i != add.outputs[0]) if mul.inputs.count(add.outputs[0]) == 1 else None
    if other == x:  # (x * (1 + f)) * 0.5
        half = pat.sole_user(mul)
        return half if pat.free(half) and pat.scale_of(half) == 0.5 else None
    half = pat.made_by(other) if other else None  # (x * 0.5) * (1 + f)
    if not pat.free(half) or pat.scale_of(half) != 0.5 or half.inputs[0] != x or pat.sole_user(half) is not mul:
        return None
    return half


#: GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks and Gimpel,
#: "Gaussian Error Linear Units", 2016, eq. 2; torch.nn.functional.gelu(approximate="tanh"))
GELU_TANH_K, GELU_TANH_C = math.sqrt(2 / math.pi), 0.044715


def find_gelu(pat: Graph, erf: Node):
    """x / sqrt(2) (or x * 1/sqrt(2)) -> Erf -> Add 1 -> Mul x -> Mul 0.5 (or x * 0.5 first): the
    erf-GELU exporters before opset 20 write."""
    if not pat.free(erf) or erf.status != "benchmark" or not isinstance(erf.config, UnaryConfig) \
            or erf.config.op != "erf":
        return None
    pre = pat.made_by(erf.inputs[0]) if erf.inputs else None
    f = pat.scale_of(pre) if pat.free(pre) and pat.sole_user(pre) is erf else None
    if f is None or abs(f - 1 / math.sqrt(2)) > 1e-3:
        return None
    x = pre.inputs[0]
    add = pat.sole_user(erf)
    if not pat.free(add) or not pat.elementwise(add, "add") or pat.scalar(add) != 1.0:
        return None
    mul = pat.sole_user(add)
    if not pat.free(mul) or not pat.elementwise(mul, "mul") or len(mul.inputs) != 2 or add.outputs[0] not in mul.inputs:
        return None
    chain = [pre.index, erf.index, add.index, mul.index]
    half = _gelu_half(pat, x, add, mul)
    if half is None:
        return None
    chain.append(half.index)
    shape = tuple(pre.output_shapes[0] or ())
    if not shape or erf.config.shape != shape:
        return None
    return chain, UnaryConfig(shape=shape, op="gelu")


def find_gelu_tanh(pat: Graph, tanh: Node):
    """Pow x 3 -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1 -> Mul (x * 0.5) (or Mul x
    -> Mul 0.5): GELU's tanh approximation as GPT-2's ``NewGELUActivation`` is exported (torch.export
    and TorchScript), one GELU (UnaryConfig gelu_tanh) where the chain is eight elementwise passes."""
    if not pat.free(tanh) or tanh.status != "benchmark" or not is_kind(tanh, "Activation") \
            or tanh.config.mode != "tanh" or len(tanh.inputs) != 1:
        return None
    pre = pat.made_by(tanh.inputs[0])
    k = pat.scale_of(pre) if pat.free(pre) and pat.sole_user(pre) is tanh else None
    if k is None or abs(k - GELU_TANH_K) > 1e-4 * GELU_TANH_K:
        return None
    inner = pat.made_by(pre.inputs[0])
    if not pat.free(inner) or not pat.elementwise(inner, "add") or len(inner.inputs) != 2 \
            or pat.sole_user(inner) is not pre:
        return None
    for x, c_out in (inner.inputs, inner.inputs[::-1]):
        c = pat.made_by(c_out)
        f = pat.scale_of(c) if pat.free(c) and pat.sole_user(c) is inner else None
        if f is None or abs(f - GELU_TANH_C) > 1e-4 * GELU_TANH_C:
            continue
        cube = pat.made_by(c.inputs[0])
        if pat.free(cube) and cube.status == "benchmark" and isinstance(cube.config, UnaryConfig) \
                and cube.config.op == "pow" and cube.config.exponent == 3.0 and cube.inputs[0] == x \
                and pat.sole_user(cube) is c:
            break
    else:
        return None
    add = pat.sole_user(tanh)
    if not pat.free(add) or not pat.elementwise(add, "add") or pat.scalar(add) != 1.0:
        return None
    mul = pat.sole_user(add)
    if not pat.free(mul) or not pat.elementwise(mul, "mul") or len(mul.inputs) != 2:
        return None
    half = _gelu_half(pat, x, add, mul)
    shape = tuple(tanh.config.shape)
    if half is None or tuple(mul.config.output_shape()) != shape or tuple(cube.config.shape) != shape:
        return None
    chain = [cube.index, c.index, inner.index, pre.index, tanh.index, add.index, mul.index, half.index]
    return chain, UnaryConfig(shape=shape, op="gelu_tanh")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=UnaryConfig(shape=(1, 197, 3072), op='gelu'),  # ViT-B/16's MLP activation (its backward: UnaryBwd)
    name="Unary", config=UnaryConfig, template="unary.cpp.j2", case=_unary_case, min_bytes=_min_bytes,
    torch=_unary, onnx={"Abs": _map_unary, "Acos": _map_unary, "Acosh": _map_unary, "Asin": _map_unary, "Asinh": _map_unary, "Atan": _map_unary, "Atanh": _map_unary, "BitwiseNot": _map_unary, "Cast": _map_cast, "CastLike": _map_cast, "Ceil": _map_unary, "Celu": _map_unary, "Cos": _map_unary, "Cosh": _map_unary, "Erf": _map_unary, "Exp": _map_unary, "Floor": _map_unary, "Gelu": _map_unary, "HardSwish": _map_unary, "IsInf": _map_unary, "IsNaN": _map_unary, "Log": _map_unary, "Mish": _map_unary, "Neg": _map_unary, "Not": _map_unary, "Pow": _map_unary, "Reciprocal": _map_unary, "Round": _map_unary, "Selu": _map_unary, "Shrink": _map_unary, "Sign": _map_unary, "Sin": _map_unary, "Sinh": _map_unary, "Softplus": _map_unary, "Softsign": _map_unary, "Sqrt": _map_unary, "Swish": _map_unary, "Tan": _map_unary, "ThresholdedRelu": _map_unary},
    typed_ops=('Abs', 'BitwiseNot', 'Cast', 'CastLike', 'Neg', 'Not', 'Pow', 'Sign'), fused_from=('Erf', 'Mul', 'Add'),
    aten={"Cast": ('aten::_to_copy', 'aten::to'), "Erf": ('aten::erf',), "Gelu": ('aten::gelu', 'aten::gelu_'), "HardSwish": ('aten::hardswish', 'aten::hardswish_'), "Pow": ('aten::pow', 'aten::pow_'), "Sqrt": ('aten::sqrt', 'aten::sqrt_'), "Abs": ('aten::abs',), "Acos": ('aten::acos',), "Acosh": ('aten::acosh',), "Asin": ('aten::asin',), "Asinh": ('aten::asinh',), "Atan": ('aten::atan',), "Atanh": ('aten::atanh',), "BitwiseNot": ('aten::bitwise_not',), "CastLike": ('aten::_to_copy', 'aten::to', 'aten::type_as'), "Ceil": ('aten::ceil',), "Celu": ('aten::celu',), "Cos": ('aten::cos',), "Cosh": ('aten::cosh',), "Exp": ('aten::exp',), "Floor": ('aten::floor',), "IsInf": ('aten::isinf',), "IsNaN": ('aten::isnan',), "Log": ('aten::log',), "Mish": ('aten::mish',), "Neg": ('aten::neg',), "Not": ('aten::logical_not',), "Reciprocal": ('aten::reciprocal',), "Round": ('aten::round',), "Selu": ('aten::selu',), "Shrink": ('aten::hardshrink', 'aten::softshrink'), "Sign": ('aten::sign',), "Sin": ('aten::sin',), "Sinh": ('aten::sinh',), "Softplus": ('aten::softplus',), "Softsign": ('aten::abs', 'aten::add', 'aten::div'), "Swish": ('aten::mul', 'aten::sigmoid', 'aten::silu'), "Tan": ('aten::tan',), "ThresholdedRelu": ('aten::threshold',)},
    patterns=(Pattern("erf-GELU: Div/Erf/Add/Mul/Mul", (80, 0), find_gelu),
              Pattern("tanh-GELU: Pow/Mul/Add/Mul/Tanh/Add/Mul/Mul", (90, 0), find_gelu_tanh)),
    nhwc=False, image=True)
