"""Unary backward layers: the data gradient of a :class:`~benanza.kinds.unary.UnaryConfig` in a training
step (docs/training.md), dx = dy * f'(.), as one pointwise pass of benanza's kernel
(``benanza::unary_backward_kernel``, cpp/src/unary_backward_kernels.cu) beside the ATen backward op
autograd runs where PyTorch has one.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate and its place as the forward kind's backward call (:class:`benanza.kinds.base.Kind`). It maps
no ONNX op: processing makes its configs from the forward layers (``Kind.backward`` of Unary).

Which Unary configs get which backward (:func:`unary_backward`):

- the ops of :data:`UNARY_BACKWARD`: one ``backward_data`` call of this kind;
- no call (the gradient is zero or does not exist, so nothing flows to x): Ceil, Floor, Round and Sign
  (derivatives.yaml: ``self: zeros_like(grad)``: autograd's gradient is all zeros); IsNaN, IsInf and
  Casts to bool or integers (an integer or bool output is not differentiable: autograd gives no
  gradient); Not, BitwiseNot, Abs/Neg/Sign on integers and Casts from integers or bool (an integer or
  bool input cannot require a gradient);
- None (no backward in benanza yet, the step is incomplete): a Cast between float types (its gradient
  is a Cast of dy back to the source type, which the Unary kind does not express).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import STORED_TYPES, Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label
from benanza.kinds.unary import UnaryConfig, UNARY_ENUM, unary_input_range

#: per op: the tensor PyTorch's backward formula reads ("x": the forward's input, "y": its output, "":
#: none), the ATen op autograd runs for it when that is one kernel (else "": PyTorch's backward is a
#: composite of several kernels, and only benanza's kernel is timed), the floating-point operations
#: per element of dy * f'(.) (a transcendental function, a comparison or a division counts as one),
#: and the formula (PyTorch's tools/autograd/derivatives.yaml, or the ATen kernel it names; the same
#: formulas as ``unary_grad_op`` in cpp/src/unary_backward_kernels.cu)
UNARY_BACKWARD = {
    "gelu": ("x", "gelu_backward", 11, "gelu_backward(approximate none): dy * (Phi(x) + x phi(x))"),
    "gelu_tanh": ("x", "gelu_backward", 16,
                  "gelu_backward(approximate tanh): t = tanh(k (x + 0.044715 x^3)), k = sqrt(2/pi); "
                  "dy * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2))"),
    "erf": ("x", "", 4, "composite: 2 / sqrt(pi) * exp(-x^2) * dy"),
    "exp": ("y", "mul", 1, "dy * result (one aten::mul)"),
    "log": ("x", "div", 1, "dy.div(x) (one aten::div)"),
    "sqrt": ("y", "", 2, "composite: dy / (2 result)"),
    "reciprocal": ("y", "", 3, "composite: -dy * result^2"),
    "neg": ("", "neg", 1, "dy.neg() (one aten::neg; reads neither x nor y)"),
    "abs": ("x", "", 2, "composite: dy * x.sgn()"),
    "pow": ("x", "", 3, "composite: pow_backward: exponent 0 -> zeros, else dy * e * x^(e - 1)"),
    "acos": ("x", "", 4, "composite: dy * -(1 - x^2)^(-1/2)"),
    "acosh": ("x", "", 4, "composite: dy * (x^2 - 1)^(-1/2)"),
    "asin": ("x", "", 4, "composite: dy * (1 - x^2)^(-1/2)"),
    "asinh": ("x", "", 4, "composite: dy * (x^2 + 1)^(-1/2)"),
    "atan": ("x", "", 3, "composite: dy / (x^2 + 1)"),
    "atanh": ("x", "", 3, "composite: dy / (1 - x^2)"),
    "cos": ("x", "", 3, "composite: dy * -sin(x)"),
    "cosh": ("x", "", 2, "composite: dy * sinh(x)"),
    "sin": ("x", "", 2, "composite: dy * cos(x)"),
    "sinh": ("x", "", 2, "composite: dy * cosh(x)"),
    "tan": ("y", "", 3, "composite: dy * (1 + result^2)"),
    "hard_swish": ("x", "hardswish_backward", 4, "hardswish_backward: x < -3 ? 0 : x <= 3 ? dy (x / 3 + 1/2) : dy"),
    "mish": ("x", "mish_backward", 12,
             "mish_backward: t = tanh(softplus(x)); dy * (t + x sigmoid(x) (1 - t^2))"),
    "selu": ("x", "elu_backward", 4,
             "elu_backward(alpha, scale = gamma, input_scale 1): x <= 0 ? dy gamma alpha exp(x) : dy gamma"),
    "celu": ("x", "elu_backward", 3, "elu_backward(alpha, 1, input_scale 1/alpha): x <= 0 ? dy exp(x / alpha) : dy"),
    "softplus": ("x", "softplus_backward", 5, "softplus_backward(beta 1, threshold 20): x > 20 ? dy : dy sigmoid(x)"),
    "softsign": ("x", "", 4, "composite: dy / (1 + |x|)^2"),
    "thresholded_relu": ("x", "threshold_backward", 1, "threshold_backward(x, alpha): x <= alpha ? 0 : dy"),
    "shrink": ("x", "softshrink_backward", 2,
               "softshrink_backward / hardshrink_backward(lambd): -lambd <= x <= lambd ? 0 : dy"),
    "clip": ("x", "", 2, "composite: clamp_backward: min <= x <= max ? dy : 0"),
    "swish": ("x", "silu_backward", 9,
              "silu_backward for alpha 1 (else composite): s = sigmoid(alpha x); dy s (1 + alpha x (1 - s))"),
}

#: ops whose gradient autograd gives as zeros (derivatives.yaml ``self: zeros_like(grad)``): no call
ZERO_GRADIENT = ("ceil", "floor", "round", "sign")


@dataclass(frozen=True)
class UnaryBwdConfig(LayerConfig):
    """The data gradient of a unary op: dx = dy * f'(.) on packed tensors of ``shape``.

    Fields as :class:`~benanza.kinds.unary.UnaryConfig` (``op`` a key of :data:`UNARY_BACKWARD`;
    exponent: Pow's; alpha, beta: the op's attributes). Inputs: the tensor PyTorch's formula reads (x
    or y, :data:`UNARY_BACKWARD`; none for neg) and dy; output: dx, all of ``shape`` in the precision's
    type. Timed: ``benanza::unary_backward_kernel``, one read of the saved tensor and dy, one write of
    dx, float32 math; and the op's ATen backward where it is one kernel (:data:`UNARY_BACKWARD`).
    FLOPs: numel * the op's count in :data:`UNARY_BACKWARD`.
    """

    kind: ClassVar[str] = "UnaryBwd"
    shape: Shape
    op: str
    exponent: float = 0.0
    alpha: float = 0.0
    beta: float = 0.0

    def __post_init__(self):
        if self.op not in UNARY_BACKWARD:
            raise ValueError(f"unary backward of {self.op!r}, which has no derivative kernel "
                             f"(one of {', '.join(UNARY_BACKWARD)})")

    @classmethod
    def of(cls, fwd: UnaryConfig) -> "UnaryBwdConfig":
        """The backward call of the forward unary op ``fwd``; ValueError for an op without a derivative."""
        return cls(shape=tuple(fwd.shape), op=fwd.op, exponent=fwd.exponent, alpha=fwd.alpha, beta=fwd.beta)

    @property
    def saved(self) -> str:
        """The forward tensor the derivative reads: ``"x"``, ``"y"`` or ``""`` (none: neg)."""
        return UNARY_BACKWARD[self.op][0]

    def forward(self) -> UnaryConfig:
        """The forward op whose gradient this is."""
        return UnaryConfig(shape=self.shape, op=self.op, exponent=self.exponent, alpha=self.alpha, beta=self.beta)

    def input_shapes(self):
        return [self.shape, self.shape] if self.saved else [self.shape]  # (the saved tensor,) dy

    def output_shape(self):
        return self.shape

    def flops(self):
        return numel(self.shape) * UNARY_BACKWARD[self.op][2]

    def describe(self):
        extra = f" ^{self.exponent:g}" if self.op == "pow" else ""
        extra += "".join(f" {n}={v:g}" for n, v in (("alpha", self.alpha), ("beta", self.beta)) if v)
        return f"UnaryBwd({self.op}{extra} {'x'.join(map(str, self.shape))})"


def unary_backward(cfg: UnaryConfig) -> tuple | None:
    """``Kind.backward`` of the Unary kind (see the module's docstring): one data-gradient call, no
    call where no gradient flows, None for a Cast between float types."""
    if cfg.src in STORED_TYPES or cfg.dst:
        return ()  # an integer or bool input (no gradient to it) or output (not differentiable)
    if cfg.op in ZERO_GRADIENT:
        return ()
    if cfg.op in UNARY_BACKWARD:
        return (("backward_data", UnaryBwdConfig.of(cfg)),)
    return None  # a float-to-float Cast: its gradient is a Cast back, not expressed yet


def _min_bytes(cfg: UnaryBwdConfig, ib: int, ob: int) -> int:
    """The saved tensor (none for neg) and dy read once, dx written once (bytes)."""
    return io_bytes(cfg, ib, ob)


@dataclass(frozen=True)
class UnaryBwdCase(Case):
    """One row of ``templates/unary_backward.cpp.j2``'s case table: the fields of its C++
    ``UnaryBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order
    against the template)."""

    n: CppValue
    op: CppValue
    exponent: CppValue
    alpha: CppValue
    beta: CppValue
    saved: CppValue
    lo: CppValue
    hi: CppValue
    label: CppValue


def _case(cfg: UnaryBwdConfig, job: Job) -> UnaryBwdCase:
    lo, hi = unary_input_range(cfg.forward())
    label = cfg.op + (f" {cfg.exponent:g}" if cfg.op == "pow" else "")
    return UnaryBwdCase(job=job_init(job), n=numel(cfg.shape), op=UNARY_ENUM[cfg.op],
                        exponent=cpp_num(float(cfg.exponent)), alpha=cpp_num(float(cfg.alpha)),
                        beta=cpp_num(float(cfg.beta)), saved={"": "0", "x": "1", "y": "2"}[cfg.saved],
                        lo=cpp_num(float(lo)), hi=cpp_num(float(hi)), label=cpp_string(label))


def _torch(c: Ctx) -> Candidate:
    """The ATen backward op autograd runs for the op (:data:`UNARY_BACKWARD`), on dy and the saved
    tensor (x drawn in the op's domain, or y computed from it in the set-up). NotSupported where
    PyTorch's backward is a composite of several kernels (then only benanza's kernel is timed) or the
    attributes make the forward a composite (Swish with alpha other than 1, Shrink other than soft or
    hard shrink)."""
    cfg, torch = c.cfg, c.torch
    aten = torch.ops.aten
    saved, name, _, formula = UNARY_BACKWARD[cfg.op]
    if not name:
        raise NotSupported(f"PyTorch's backward of {cfg.op} is a composite of several kernels ({formula})")
    lo, hi = unary_input_range(cfg.forward())
    x = (torch.rand(tuple(cfg.shape), device=c.device, dtype=torch.float32) * (hi - lo) + lo).to(c.dtype)
    dy = c.randn(cfg.shape)
    a, b = float(cfg.alpha), float(cfg.beta)
    op = cfg.op
    if op in ("gelu", "gelu_tanh"):
        approx = "none" if op == "gelu" else "tanh"
        fn = (lambda: aten.gelu_backward(dy, x, approximate=approx))
    elif op == "exp":
        y = torch.exp(x)
        fn = (lambda: torch.mul(dy, y))
    elif op == "log":
        fn = (lambda: torch.div(dy, x))
    elif op == "neg":
        fn = (lambda: torch.neg(dy))
    elif op == "hard_swish":
        fn = (lambda: aten.hardswish_backward(dy, x))
    elif op == "mish":
        fn = (lambda: aten.mish_backward(dy, x))
    elif op == "selu":
        fn = (lambda: aten.elu_backward(dy, a, b, 1.0, False, x))
    elif op == "celu":
        fn = (lambda: aten.elu_backward(dy, a, 1.0, 1.0 / a, False, x))
    elif op == "softplus":
        fn = (lambda: aten.softplus_backward(dy, x, 1.0, 20.0))
    elif op == "thresholded_relu":
        fn = (lambda: aten.threshold_backward(dy, x, a))
    elif op == "shrink" and a == b:
        name = "softshrink_backward"
        fn = (lambda: aten.softshrink_backward(dy, x, a))
    elif op == "shrink" and b == 0.0:
        name = "hardshrink_backward"
        fn = (lambda: aten.hardshrink_backward(dy, x, a))
    elif op == "swish" and a == 1.0:
        fn = (lambda: aten.silu_backward(dy, x))
    else:
        raise NotSupported(f"{cfg.describe()}: PyTorch runs it as a composite ({formula})")
    return Candidate(f"torch:aten::{name}", algo_label(c), fn, numel(cfg.shape))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=UnaryBwdConfig(shape=(32, 197, 3072), op="gelu"),
    name="UnaryBwd", config=UnaryBwdConfig, template="unary_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, backward_of={"Unary": unary_backward},
    nhwc=False, image=False)
