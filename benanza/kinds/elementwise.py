"""Elementwise layers. Binary elementwise op with ONNX (numpy) broadcasting (see :data:`ELEMENTWISE_OPS`).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, OPTIONAL, STORED_TYPES, Shape, channels_last, numel
from benanza.kinds.cpp import Case, CppValue, ELEM_ENUM, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label, functional
from benanza.kinds.onnx_map import (FLOAT_TYPES, STORED_NAMES, MapContext, Unsupported, broadcast_shapes, need,
                                    type_name)
from benanza.kinds.patterns import Graph, Node, Pattern, is_kind


#: binary elementwise ops: their ONNX operators (ONNX operator spec), FLOPs per output element on
#: float data (0 on integer and bool data, which have no floating-point operations; a library
#: function such as pow or fmod counts as one, as in :data:`UNARY_OPS`), and whether the output is
#: bool (1 byte per element)
ELEMENTWISE_OPS = {
    "add": ("Add, Sum of 2 inputs", 1, False),
    "sub": ("Sub", 1, False),
    "mul": ("Mul", 1, False),
    "div": ("Div", 1, False),
    "max": ("Max of 2 inputs", 1, False),
    "min": ("Min of 2 inputs", 1, False),
    "mean": ("Mean of 2 inputs: (a + b) / 2", 2, False),
    "pow": ("Pow with a tensor exponent", 1, False),
    "mod": ("Mod fmod=0 (integers): the remainder with the sign of the divisor", 1, False),
    "fmod": ("Mod fmod=1: the remainder with the sign of the dividend (C fmod)", 1, False),
    "prelu": ("PRelu: x < 0 ? slope * x : x, slope broadcast to x", 2, False),
    "equal": ("Equal", 1, True),
    "less": ("Less", 1, True),
    "less_equal": ("LessOrEqual", 1, True),
    "greater": ("Greater", 1, True),
    "greater_equal": ("GreaterOrEqual", 1, True),
    "and": ("And (bool)", 0, True),
    "or": ("Or (bool)", 0, True),
    "xor": ("Xor (bool)", 0, True),
    "bitwise_and": ("BitwiseAnd (integers)", 0, False),
    "bitwise_or": ("BitwiseOr (integers)", 0, False),
    "bitwise_xor": ("BitwiseXor (integers)", 0, False),
    "shift_left": ("BitShift direction=LEFT (unsigned integers)", 0, False),
    "shift_right": ("BitShift direction=RIGHT (unsigned integers)", 0, False),
    # SwiGLU's gating (Shazeer, "GLU Variants Improve Transformer", 2020; Llama's MLP): no ONNX op, the
    # fusion candidate of an exported Sigmoid -> Mul -> Mul (benanza.processing.model); FLOPs: UNARY_OPS'
    # swish count and the product
    "swiglu": ("SwiGLU's gate: silu(a) * b = a / (1 + exp(-a)) * b (float; a fusion candidate, no ONNX op)", 6, False),
}


@dataclass(frozen=True)
class ElementwiseConfig(LayerConfig):
    """Binary elementwise op with ONNX (numpy) broadcasting (see :data:`ELEMENTWISE_OPS`).

    a, b: input shapes padded to the output rank (either may broadcast); dtype: the element type
    of a and b when they are not float ("" : the precision's float type; else a key of
    :data:`STORED_TYPES`); the output is bool for comparisons and logical ops, else a's type.
    Timed: the harness's vectorized kernel (``benanza::binary_pointwise``, broadcasting both
    operands) always; cudnnOpTensor for add/sub/mul/div/max/min/mean on float data when one operand
    has the output's shape (Sub is ADD with alpha2 = -1, Mean ADD with both alphas 1/2, Div MUL by
    the reciprocal: same memory traffic, the measurement says so); and a one-node cuDNN pointwise
    graph for the ops cuDNN's pointwise modes have (DIV, POW, MOD, CMP_*, LOGICAL_AND/OR).
    FLOPs: output elements * the op's count (0 on integer or bool data).
    """

    kind: ClassVar[str] = "Elementwise"
    op: str
    a: Shape
    b: Shape
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def fusion_label(self) -> str:
        """SwiGLU's gating (op swiglu) counts as ``SwiGLU``."""
        return "SwiGLU" if self.op == "swiglu" else self.kind

    def input_shapes(self):
        return [self.a, self.b]

    def output_shape(self):
        return tuple(max(x, y) for x, y in zip(self.a, self.b))

    @property
    def out_dtype(self) -> str:
        """The output's element type ("" : the precision's float type)."""
        return "bool" if ELEMENTWISE_OPS[self.op][2] else self.dtype

    def flops(self):
        return 0 if self.dtype else numel(self.output_shape()) * ELEMENTWISE_OPS[self.op][1]

    def describe(self):
        t = f" {self.dtype}" if self.dtype else ""
        return f"Elementwise({self.op}{t} {'x'.join(map(str, self.a))},{'x'.join(map(str, self.b))})"


#: ONNX binary elementwise operators -> ELEMENTWISE_OPS (Mod and BitShift pick theirs by attribute)
BINARY_OPS = {"Add": "add", "Sum": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "max", "Min": "min",
           "Mean": "mean", "Pow": "pow", "PRelu": "prelu", "Equal": "equal", "Less": "less",
           "LessOrEqual": "less_equal", "Greater": "greater", "GreaterOrEqual": "greater_equal", "And": "and",
           "Or": "or", "Xor": "xor", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or",
           "BitwiseXor": "bitwise_xor"}


#: the element types each family of ops is defined on (ONNX operator spec): logical ops read bool,
#: bitwise ops and BitShift integers, Mod with fmod=0 integers; comparisons also read bool (Equal)
_BOOL_ONLY = {"and", "or", "xor"}


_INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right", "mod"}


#: variadic operators: benchmarked with exactly 2 inputs
_VARIADIC = {"Sum", "Mean", "Max", "Min"}


def elem_name(ctx: MapContext, name: str, op: str) -> str:
    """"" for a float tensor, the stored type's name for bool and integers; Unsupported otherwise."""
    t = ctx.types.get(name)
    if t in FLOAT_TYPES:
        return ""
    if t in STORED_NAMES:
        return STORED_NAMES[t]
    tname = type_name(t)
    raise Unsupported(f"{op} of {tname} data is not benchmarked")


def _binary_op(node, attrs) -> str:
    op = node.op_type
    if op == "Mod":
        return "fmod" if int(attrs.get("fmod", 0)) else "mod"
    if op == "BitShift":
        d = str(attrs.get("direction", ""))
        if d not in ("LEFT", "RIGHT"):
            raise Unsupported(f"BitShift direction {d!r} (LEFT or RIGHT)")
        return "shift_left" if d == "LEFT" else "shift_right"
    return BINARY_OPS[op]


def map_elementwise(node, ctx, attrs):
    """Binary elementwise ops with numpy broadcasting of both operands -> ElementwiseConfig
    (the element types the ONNX operator spec defines the op on; 2-input Sum/Mean/Max/Min)."""
    ins = [i for i in node.input if i]
    if node.op_type in _VARIADIC and len(ins) != 2:
        raise Unsupported(f"{node.op_type} of {len(ins)} input(s): only the 2-input form is benchmarked "
                          f"(1 input is a copy; more would be a chain of 2-input ops)")
    op = _binary_op(node, attrs)
    a = need(ctx.shape(node.input[0]), "input A")
    b = need(ctx.shape(node.input[1]), "input B")
    ta, tb = elem_name(ctx, node.input[0], node.op_type), elem_name(ctx, node.input[1], node.op_type)
    if ta != tb or (not ta and ctx.types.get(node.input[0]) != ctx.types.get(node.input[1])):
        raise Unsupported(f"{node.op_type} of operands with different element types")
    if op in _BOOL_ONLY and ta != "bool":
        raise Unsupported(f"{node.op_type} reads bool tensors, not {ta or 'float'}")
    if op in _INT_ONLY and ta in ("", "bool"):
        raise Unsupported(f"{node.op_type}{' fmod=0' if op == 'mod' else ''} reads integer tensors, not {ta or 'float'}")
    if ta == "bool" and op not in _BOOL_ONLY | {"equal"}:
        raise Unsupported(f"{node.op_type} of bool tensors is not an ONNX operator")
    a, b, y = broadcast_shapes(a, b)
    if op == "prelu" and a != y:
        raise Unsupported(f"PRelu slope {b} does not broadcast to X {a}")
    if len(y) > 8:
        raise Unsupported(f"rank {len(y)} > 8")
    return ElementwiseConfig(op=op, a=a, b=b, dtype=ta)


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
_POINTWISE_ENUM = {op: "PointwiseOp::" + "".join(w.capitalize() for w in op.split("_")) for op in ELEMENTWISE_OPS}
_POINTWISE_ENUM.update({"fmod": "PointwiseOp::FMod", "prelu": "PointwiseOp::PRelu", "swiglu": "PointwiseOp::SwiGlu",
                        "less_equal": "PointwiseOp::LessOrEqual", "greater_equal": "PointwiseOp::GreaterOrEqual",
                        "bitwise_and": "PointwiseOp::BitAnd", "bitwise_or": "PointwiseOp::BitOr",
                        "bitwise_xor": "PointwiseOp::BitXor"})


def elementwise_input_ranges(cfg: ElementwiseConfig) -> tuple[tuple[float, float], tuple[float, float]]:
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
    if ELEMENTWISE_OPS[cfg.op][2]:
        return (-1.0, 1.0), (-1.0, 1.0)
    return (-1.0, 1.0), (0.5, 1.5)


def _cudnn_op_tensor(cfg: ElementwiseConfig, a: list[int], b: list[int]) -> dict:
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
            "cb": c_array(bcast + [1] * (pad - len(bcast)), 5, 1), "op": op, "alpha1": cpp_num(alpha1),
            "alpha2": cpp_num(alpha2), "note": cpp_string(note)}


@dataclass(frozen=True)
class ElementwiseCase(Case):
    """One row of ``templates/elementwise.cpp.j2``'s case table: the fields of its C++ ``ElementwiseCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    nd: CppValue
    a: CppValue
    b: CppValue
    kop: CppValue
    stored: CppValue
    et: CppValue
    out_bool: CppValue
    a_lo: CppValue
    a_hi: CppValue
    b_lo: CppValue
    b_hi: CppValue
    graph: CppValue
    label: CppValue
    cudnn: CppValue
    cnd: CppValue
    ca: CppValue
    cb: CppValue
    op: CppValue
    alpha1: CppValue
    alpha2: CppValue
    note: CppValue


def _elementwise_case(cfg: ElementwiseConfig, job: Job) -> ElementwiseCase:
    if job.layout == "NHWC":  # channels-last memory: the dims packed as (N, spatial..., C)
        a, b = collapse_broadcast(channels_last(cfg.a), channels_last(cfg.b))
    else:
        a, b = collapse_broadcast(list(cfg.a), list(cfg.b))
    if len(a) > 8:
        raise ValueError(f"elementwise shapes {cfg.a} x {cfg.b} do not collapse to 8 dims")
    (alo, ahi), (blo, bhi) = elementwise_input_ranges(cfg)
    return ElementwiseCase(
        job=job_init(job), nd=len(a), a=c_array(a, 8, 1), b=c_array(b, 8, 1), kop=_POINTWISE_ENUM[cfg.op],
        stored=cpp_num(bool(cfg.dtype)), et=ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32",
        out_bool=cpp_num(cfg.out_dtype == "bool"), a_lo=cpp_num(alo), a_hi=cpp_num(ahi), b_lo=cpp_num(blo),
        b_hi=cpp_num(bhi), graph=cpp_num(cfg.dtype in ("", "bool")),
        label=cpp_string(cfg.op + (f" {cfg.dtype}" if cfg.dtype else "")), **_cudnn_op_tensor(cfg, a, b))


#: ElementwiseConfig ops -> the torch function PyTorch runs for them (benanza.kinds.ELEMENTWISE_OPS)
_TORCH_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "maximum", "min": "minimum",
           "pow": "pow", "mod": "remainder", "fmod": "fmod", "equal": "eq", "less": "lt", "less_equal": "le",
           "greater": "gt", "greater_equal": "ge", "and": "logical_and", "or": "logical_or", "xor": "logical_xor",
           "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
           "shift_left": "bitwise_left_shift", "shift_right": "bitwise_right_shift"}


def _elementwise(c: Ctx) -> Candidate:
    cfg, torch, F = c.cfg, c.torch, functional(c)
    dt = getattr(cfg, "dtype", "")
    a = c.typed(cfg.a, dt, positive=cfg.op == "pow")
    b = c.typed(cfg.b, dt)
    a = c.fmt(a) if numel(cfg.a) > 1 else a
    b = c.fmt(b) if numel(cfg.b) > 1 else b
    y = numel(cfg.output_shape())
    if cfg.op == "mean":
        return Candidate("torch:aten::add+div", algo_label(c), lambda: torch.add(a, b).div_(2), y)
    if cfg.op == "prelu":
        per_channel = len(cfg.a) >= 2 and numel(cfg.b) in (1, cfg.a[1]) and \
            all(d == 1 for i, d in enumerate(cfg.b) if i != 1)
        if per_channel:
            w = b.reshape(-1)
            return Candidate("torch:aten::prelu", algo_label(c), lambda: F.prelu(a, w), y)
        return Candidate("torch:aten::lt+mul+where", algo_label(c), lambda: torch.where(a < 0, a * b, a), y,
                         "PRelu with a slope that is not per channel: where(x < 0, slope * x, x)")
    if cfg.op == "swiglu":  # eager PyTorch (Llama's MLP: act_fn(gate_proj(x)) * up_proj(x)): two kernels
        return Candidate("torch:aten::silu+mul", algo_label(c), lambda: F.silu(a) * b, y,
                         "SwiGLU's gate as PyTorch eager runs it: silu, then mul")
    if cfg.op not in _TORCH_BINARY:
        raise NotSupported(f"elementwise op {cfg.op}")
    op = getattr(torch, _TORCH_BINARY[cfg.op])
    return Candidate(f"torch:aten::{_TORCH_BINARY[cfg.op]}", algo_label(c), lambda: op(a, b), y)


def _min_bytes(cfg: ElementwiseConfig, ib: int, ob: int) -> int:
    """a and b read once in their element type, y written once in its own (bytes)."""
    eb = STORED_TYPES[cfg.dtype] if cfg.dtype else ib
    out = STORED_TYPES[cfg.out_dtype] if cfg.out_dtype else ob
    return eb * (numel(cfg.a) + numel(cfg.b)) + out * numel(cfg.output_shape())


# ------------------------------------------------------------------------ fusion patterns

def swiglu_parts(pat: Graph, mul: Node):
    """``(sigmoid, silu mul, gate tensor, up tensor)`` of SwiGLU's gating written as Sigmoid(g) ->
    Mul(g, sigmoid) -> Mul(silu, u) ending at ``mul`` (float data, g and u of one shape), or None."""
    if not pat.free(mul) or not pat.elementwise(mul, "mul") or mul.config.dtype or len(mul.inputs) != 2 \
            or mul.static_inputs or tuple(mul.config.a) != tuple(mul.config.b):
        return None
    for silu_t, up_t in (mul.inputs, mul.inputs[::-1]):
        silu = pat.made_by(silu_t)
        if not pat.free(silu) or not pat.elementwise(silu, "mul") or pat.sole_user(silu) is not mul \
                or len(silu.inputs) != 2 or up_t == silu_t:
            continue
        for gate_t, sig_t in (silu.inputs, silu.inputs[::-1]):
            sig = pat.made_by(sig_t)
            if pat.free(sig) and sig.status == "benchmark" and is_kind(sig, "Activation") \
                    and sig.config.mode == "sigmoid" and list(sig.inputs) == [gate_t] \
                    and pat.sole_user(sig) is silu and tuple(silu.config.a) == tuple(silu.config.b) \
                    and tuple(sig.config.shape) == tuple(mul.config.a) and gate_t != up_t:
                return sig, silu, gate_t, up_t
    return None


def find_swiglu(pat: Graph, mul: Node):
    """Sigmoid(g) -> Mul(g, sigmoid) -> Mul(silu, u): SwiGLU's gating ``silu(g) * u`` (Llama's MLP,
    ``act_fn(gate_proj(x)) * up_proj(x)``) as one elementwise pass (ElementwiseConfig swiglu: g and u
    read, one output written) where the chain takes three. Runs before :func:`benanza.kinds.activation.find_silu`, which
    would take the Sigmoid -> Mul alone."""
    parts = swiglu_parts(pat, mul)
    if parts is None:
        return None
    sig, silu, gate_t, up_t = parts
    shape = tuple(mul.config.a)
    split = _gate_up_split(pat, gate_t, up_t, {sig.index, silu.index}, {mul.index})
    return [sig.index, silu.index, mul.index] + ([split.index] if split is not None else []), \
        ElementwiseConfig(op="swiglu", a=shape, b=shape)


def _gate_up_split(pat: Graph, gate_t: str, up_t: str, gate_readers: set[int], up_readers: set[int]) -> Node | None:
    """The Split that cuts one fused gate-and-up product (transformers' Phi-3 ``gate_up_proj``, then
    ``chunk(2, dim=-1)``) into the gating's two operands: two equal halves of the last axis, each read by
    the gating only. PyTorch's ``chunk`` is a view: eager's silu and mul and torch.compile's one fused kernel
    (``triton_poi_fused_mul_silu_split``, phi3 prefill on an H200) read the halves in place,
    so the Split joins the gating's group and costs nothing of its own (the group reads a and b, the two
    halves, as the separate tensors it times: the same bytes, rows of ``intermediate`` contiguous
    elements). None when the operands come from anything else."""
    split = pat.made_by(gate_t)
    if split is None or split is not pat.made_by(up_t) or split.op_type != "Split" or not pat.free(split) \
            or split.status not in ("benchmark", "zero_cost") or len(split.inputs) != 1 \
            or sorted(split.outputs) != sorted((gate_t, up_t)) or len(split.input_shapes) < 1:
        return None
    x, outs = split.input_shapes[0], split.output_shapes
    if x is None or len(outs) != 2 or any(o is None for o in outs) or not x or x[-1] % 2:
        return None
    half = tuple(x[:-1]) + (x[-1] // 2,)
    if any(tuple(o) != half for o in outs) or any(t in pat.graph_outputs for t in (gate_t, up_t)):
        return None
    if {ly.index for ly in pat.users(gate_t)} != gate_readers or {ly.index for ly in pat.users(up_t)} != up_readers:
        return None
    return split


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
def _nhwc_job(cfg: ElementwiseConfig, neighbour: bool) -> bool:
    """A neighbour of a convolution whose broadcast reads memory differently channels-last."""
    a, b = list(cfg.a), list(cfg.b)
    if not neighbour or len(a) < 3 or len(a) != len(b):
        return False
    return collapse_broadcast(a, b) != collapse_broadcast(channels_last(a), channels_last(b))


KIND = Kind(
    example=ElementwiseConfig(op='and', a=(1, 1, 128, 1), b=(1, 1, 1, 128), dtype='bool'),
    name="Elementwise", config=ElementwiseConfig, template="elementwise.cpp.j2", case=_elementwise_case, min_bytes=_min_bytes,
    torch=_elementwise, onnx={"Add": map_elementwise, "And": map_elementwise, "BitShift": map_elementwise, "BitwiseAnd": map_elementwise, "BitwiseOr": map_elementwise, "BitwiseXor": map_elementwise, "Div": map_elementwise, "Equal": map_elementwise, "Greater": map_elementwise, "GreaterOrEqual": map_elementwise, "Less": map_elementwise, "LessOrEqual": map_elementwise, "Max": map_elementwise, "Mean": map_elementwise, "Min": map_elementwise, "Mod": map_elementwise, "Mul": map_elementwise, "Or": map_elementwise, "PRelu": map_elementwise, "Sub": map_elementwise, "Sum": map_elementwise, "Xor": map_elementwise},
    typed_ops=('Add', 'And', 'BitShift', 'BitwiseAnd', 'BitwiseOr', 'BitwiseXor', 'Div', 'Equal', 'Greater', 'GreaterOrEqual', 'Less', 'LessOrEqual', 'Max', 'Min', 'Mod', 'Mul', 'Or', 'Sub', 'Sum', 'Xor'), fused_from=(),
    aten={"Add": ('aten::add', 'aten::add_'), "Div": ('aten::div', 'aten::div_'), "Max": ('aten::max', 'aten::maximum'), "Min": ('aten::min', 'aten::minimum'), "Mul": ('aten::mul', 'aten::mul_'), "Sub": ('aten::rsub', 'aten::sub', 'aten::sub_'), "And": ('aten::__and__', 'aten::logical_and'), "BitShift": ('aten::__lshift__', 'aten::__rshift__', 'aten::bitwise_left_shift', 'aten::bitwise_right_shift'), "BitwiseAnd": ('aten::bitwise_and',), "BitwiseOr": ('aten::bitwise_or',), "BitwiseXor": ('aten::bitwise_xor',), "Equal": ('aten::eq',), "Greater": ('aten::gt',), "GreaterOrEqual": ('aten::ge',), "Less": ('aten::lt',), "LessOrEqual": ('aten::le',), "Mean": ('aten::add', 'aten::div_'), "Mod": ('aten::fmod', 'aten::remainder'), "Or": ('aten::__or__', 'aten::logical_or'), "PRelu": ('aten::_prelu_kernel', 'aten::prelu'), "Sum": ('aten::add', 'aten::add_'), "Xor": ('aten::__xor__', 'aten::logical_xor')},
    patterns=(Pattern("SwiGLU: Sigmoid/Mul/Mul [after a Split]", (100, 0), find_swiglu),),
    nhwc=True, image=True, nhwc_job=_nhwc_job)
