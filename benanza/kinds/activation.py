"""Activation layers. Elementwise activation (Relu, Sigmoid, Tanh, Clip(0, max), LeakyRelu, HardSigmoid, Elu; and

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, as4, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.elementwise import elem_name
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need, scalar_input
from benanza.kinds.patterns import Graph, Node, Pattern
from benanza.kinds.unary import FLT_MAX, UnaryConfig


#: activation modes, their cuDNN call and how the ONNX attributes map
ACTIVATION_MODES = ("relu", "sigmoid", "tanh", "clipped_relu", "leaky_relu", "hard_sigmoid", "elu", "swish")


@dataclass(frozen=True)
class ActivationConfig(LayerConfig):
    """Elementwise activation (Relu, Sigmoid, Tanh, Clip(0, max), LeakyRelu, HardSigmoid, Elu; and
    swish, x * sigmoid(x), PyTorch's SiLU: the fusion candidate of an exported Sigmoid -> Mul).

    cudnnActivationForward for relu/sigmoid/tanh/clipped_relu/elu/swish (beta 1); LeakyRelu is cudnnOpTensor
    MAX(x, alpha*x) (exact for 0 < alpha < 1); HardSigmoid (no cuDNN call) is timed as
    cudnnActivationForward(CLIPPED_RELU) on the same tensor, a proxy with the same memory traffic,
    and its measurements say so.
    """

    kind: ClassVar[str] = "Activation"
    shape: Shape
    mode: str
    alpha: float = 0.0  # clip max / leaky slope / hard-sigmoid alpha / elu alpha
    beta: float = 0.0  # hard-sigmoid beta

    def fusion_label(self) -> str:
        """A Sigmoid -> Mul fusion candidate (mode swish) counts as ``SiLU``."""
        return "SiLU" if self.mode == "swish" else self.kind

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def describe(self):
        return f"Activation({self.mode} {'x'.join(map(str, self.shape))})"


#: the bounds an integer Clip's absent min/max stand for (the unary kernel passes bounds as float32: 2^62)
INT_CLIP_BOUND = float(2**62)


def _map_activation(node, ctx, attrs):
    """Relu, Sigmoid, Tanh, LeakyRelu, HardSigmoid, Elu and Clip of float data; Clip also of int32/int64
    data (the unary kernel's integer clamp)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    op = node.op_type
    t = elem_name(ctx, node.input[0], op)
    if t and op != "Clip":
        raise Unsupported(f"input element type {t.upper()} is not float")
    if op == "Relu":
        return ActivationConfig(shape=x, mode="relu")
    if op == "Sigmoid":
        return ActivationConfig(shape=x, mode="sigmoid")
    if op == "Tanh":
        return ActivationConfig(shape=x, mode="tanh")
    if op == "LeakyRelu":
        a = float(attrs.get("alpha", 0.01))
        if not 0.0 < a < 1.0:
            raise Unsupported(f"LeakyRelu alpha {a} outside (0, 1)")
        return ActivationConfig(shape=x, mode="leaky_relu", alpha=a)
    if op == "HardSigmoid":
        return ActivationConfig(shape=x, mode="hard_sigmoid", alpha=float(attrs.get("alpha", 0.2)),
                                  beta=float(attrs.get("beta", 0.5)))
    if op == "Elu":
        return ActivationConfig(shape=x, mode="elu", alpha=float(attrs.get("alpha", 1.0)))
    if op == "Clip":
        if ctx.opset >= 11:
            lo, hi = scalar_input(ctx, node, 1), scalar_input(ctx, node, 2)
        else:
            lo, hi = attrs.get("min"), attrs.get("max")
        if t:  # integer data (an index clamped to its range): the unary kernel's integer math
            if t not in ("int32", "int64"):
                raise Unsupported(f"Clip of {t} data (benanza times float, int32 and int64 data)")
            lo = -INT_CLIP_BOUND if lo is None else max(float(lo), -INT_CLIP_BOUND)
            hi = INT_CLIP_BOUND if hi is None else min(float(hi), INT_CLIP_BOUND)
            return UnaryConfig(shape=x, op="clip", alpha=lo, beta=hi, src=t, dst=t)
        if lo == 0.0 and hi is None:
            return ActivationConfig(shape=x, mode="relu")
        if lo == 0.0 and hi is not None and math.isfinite(hi) and hi > 0:
            return ActivationConfig(shape=x, mode="clipped_relu", alpha=float(hi))
        # any other bounds: the harness's unary kernel (cuDNN's CLIPPED_RELU clips at 0 only)
        lo = -FLT_MAX if lo is None else max(float(lo), -FLT_MAX)
        hi = FLT_MAX if hi is None else min(float(hi), FLT_MAX)
        return UnaryConfig(shape=x, op="clip", alpha=lo, beta=hi)
    raise Unsupported(f"no activation mapping for {op}")


#: each mode's cuDNN activation mode and the template's variant (0: cudnnActivationForward of the mode;
#: 1: LeakyRelu as cudnnOpTensor MAX; 2: HardSigmoid's CLIPPED_RELU proxy), also the backward kind's
#: (:mod:`benanza.kinds.activation_backward`)
CUDNN_ACTIVATION = {"relu": ("CUDNN_ACTIVATION_RELU", 0), "sigmoid": ("CUDNN_ACTIVATION_SIGMOID", 0),
        "tanh": ("CUDNN_ACTIVATION_TANH", 0), "clipped_relu": ("CUDNN_ACTIVATION_CLIPPED_RELU", 0),
        "elu": ("CUDNN_ACTIVATION_ELU", 0), "leaky_relu": ("CUDNN_ACTIVATION_IDENTITY", 1),
        "hard_sigmoid": ("CUDNN_ACTIVATION_CLIPPED_RELU", 2), "swish": ("CUDNN_ACTIVATION_SWISH", 0)}


@dataclass(frozen=True)
class ActivationCase(Case):
    """One row of ``templates/activation.cpp.j2``'s case table: the fields of its C++ ``ActivationCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    dims: CppValue
    mode: CppValue
    variant: CppValue
    coef: CppValue
    alpha: CppValue
    beta: CppValue
    label: CppValue


def _activation_case(cfg: ActivationConfig, job: Job) -> ActivationCase:
    mode, variant = CUDNN_ACTIVATION[cfg.mode]
    coef = cfg.alpha
    if cfg.mode in ("hard_sigmoid", "swish"):
        coef = 1.0  # the proxy's clip; swish's beta (SiLU)
    return ActivationCase(job=job_init(job), dims=c_array(as4(cfg.shape), 4), mode=mode, variant=variant, coef=cpp_num(coef), alpha=cpp_num(float(cfg.alpha)), beta=cpp_num(float(cfg.beta)), label=cpp_string(cfg.mode))


def _activation(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, functional(c), c.torch
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
    return Candidate(f"torch:aten::{name}", algo_label(c), fn, numel(cfg.shape), note)


# ------------------------------------------------------------------------ fusion patterns

def find_silu(pat: Graph, sig: Node):
    """Sigmoid -> Mul(x, sigmoid(x)): SiLU (swish) as exporters write torch's ``silu`` (EfficientNet,
    and the SE blocks' activations), one elementwise pass where the pair takes two."""
    if not pat.free(sig) or sig.status != "benchmark" or not isinstance(sig.config, ActivationConfig) \
            or sig.config.mode != "sigmoid" or len(sig.inputs) != 1:
        return None
    mul = pat.sole_user(sig)
    if not pat.free(mul) or not pat.elementwise(mul, "mul") \
            or sorted(mul.inputs) != sorted((sig.inputs[0], sig.outputs[0])):
        return None
    cfg = mul.config
    if cfg.a != cfg.b or tuple(cfg.a) != tuple(sig.config.shape):
        return None
    return [sig.index, mul.index], ActivationConfig(shape=tuple(sig.config.shape), mode="swish")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ActivationConfig(shape=(1, 4, 1, 1), mode='swish', alpha=0.0, beta=0.0),
    name="Activation", config=ActivationConfig, template="activation.cpp.j2", case=_activation_case, min_bytes=io_bytes,
    torch=_activation, onnx={"Clip": _map_activation, "Elu": _map_activation, "HardSigmoid": _map_activation, "LeakyRelu": _map_activation, "Relu": _map_activation, "Sigmoid": _map_activation, "Tanh": _map_activation},
    typed_ops=("Clip",), fused_from=(),
    aten={"Clip": ('aten::clamp', 'aten::clamp_', 'aten::clamp_min', 'aten::clamp_min_', 'aten::clip', 'aten::hardtanh', 'aten::hardtanh_', 'aten::relu6'), "Elu": ('aten::elu', 'aten::elu_'), "HardSigmoid": ('aten::hardsigmoid', 'aten::hardsigmoid_'), "LeakyRelu": ('aten::leaky_relu', 'aten::leaky_relu_'), "Relu": ('aten::clamp_min', 'aten::clamp_min_', 'aten::relu', 'aten::relu_', 'aten::threshold', 'aten::threshold_'), "Sigmoid": ('aten::sigmoid', 'aten::sigmoid_'), "Tanh": ('aten::tanh', 'aten::tanh_')},
    patterns=(Pattern("SiLU: Sigmoid -> Mul", (120, 0), find_silu),),
    nhwc=False, image=True)
