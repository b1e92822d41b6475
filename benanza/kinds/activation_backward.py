"""Activation backward layers: the data gradient of an :class:`~benanza.kinds.activation.ActivationConfig`
in a training step (docs/training.md), dx = f'(.) * dy: cudnnActivationBackward and benanza's own pointwise
kernel (``benanza::activation_backward_pointwise``), as the forward kind times cudnnActivationForward and
``benanza::activation_pointwise``.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate (the ATen backward op autograd runs) and its place as the forward kind's backward call
(:class:`benanza.kinds.base.Kind`). It maps no ONNX op: processing makes its configs from the forward
layers (``Kind.backward`` of the Activation kind).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.activation import ACTIVATION_MODES, CUDNN_ACTIVATION, ActivationConfig
from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, as4, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label

#: per mode: the tensor PyTorch's autograd saves for the backward pass and its derivative kernel reads
#: ("y": the forward's output, "x": its input), the ATen backward op autograd runs for the module
#: (tools/autograd/derivatives.yaml: relu -> threshold_backward(grad, result, 0); sigmoid ->
#: sigmoid_backward(grad, result); tanh -> tanh_backward(grad, result); hardtanh -> hardtanh_backward(grad,
#: self, min, max); leaky_relu -> leaky_relu_backward(grad, self, slope, false); elu -> elu_backward(grad,
#: alpha, 1, 1, false, self); hardsigmoid -> hardsigmoid_backward(grad, self); silu -> silu_backward(grad,
#: self)), and the floating-point operations per element of the derivative times dy (the formulas of
#: ``activation_grad_op`` in cpp/src/kernels.cu: a comparison or select counts as one, exp and a division
#: as one each)
BACKWARD_MODES = {
    "relu": ("y", "threshold_backward", 1),  # y <= 0 ? 0 : dy
    "sigmoid": ("y", "sigmoid_backward", 3),  # dy * (1 - y) * y
    "tanh": ("y", "tanh_backward", 3),  # dy * (1 - y * y)
    "clipped_relu": ("x", "hardtanh_backward", 2),  # x <= 0 || x >= max ? 0 : dy
    "leaky_relu": ("x", "leaky_relu_backward", 2),  # x > 0 ? dy : slope * dy
    "elu": ("x", "elu_backward", 4),  # x <= 0 ? dy * alpha * exp(x) : dy
    "hard_sigmoid": ("x", "hardsigmoid_backward", 5),  # 0 < alpha x + beta < 1 ? alpha dy : 0
    "swish": ("x", "silu_backward", 10),  # s = 1 / (1 + exp(-x)); dy * s * (1 + x * (1 - s))
}
assert set(BACKWARD_MODES) == set(ACTIVATION_MODES)


@dataclass(frozen=True)
class ActivationBwdConfig(LayerConfig):
    """The data gradient of an activation: dx = f'(.) * dy on packed tensors of ``shape``.

    Fields as :class:`~benanza.kinds.activation.ActivationConfig` (``mode`` one of
    :data:`~benanza.kinds.activation.ACTIVATION_MODES`; alpha: clip max / leaky slope / hard-sigmoid
    alpha / elu alpha; beta: hard-sigmoid beta). Inputs: the tensor the framework saves for the backward
    pass (y or x, :data:`BACKWARD_MODES`) and dy; output: dx, all of ``shape``.

    Timed: cudnnActivationBackward (reads y, dy and x, writes dx) for relu, sigmoid, tanh,
    clipped_relu, elu and swish; for hard_sigmoid, which cuDNN does not have, CLIPPED_RELU's backward on
    the same tensors as a proxy (as the forward kind does), and its records say so; leaky_relu has no
    cuDNN backward (the forward's cudnnOpTensor MAX has none) and only benanza's kernel. Every mode is
    also timed with ``benanza::activation_backward_pointwise``, one read of the saved tensor and dy and
    one write of dx, PyTorch's formula of the mode (:data:`BACKWARD_MODES`).
    FLOPs: numel * the mode's count in :data:`BACKWARD_MODES`.
    """

    kind: ClassVar[str] = "ActivationBwd"
    shape: Shape
    mode: str
    alpha: float = 0.0
    beta: float = 0.0

    def __post_init__(self):
        if self.mode not in BACKWARD_MODES:
            raise ValueError(f"activation backward of unknown mode {self.mode!r} (one of {', '.join(BACKWARD_MODES)})")

    @classmethod
    def of(cls, fwd: ActivationConfig) -> "ActivationBwdConfig":
        """The backward call of the forward activation ``fwd``."""
        return cls(shape=tuple(fwd.shape), mode=fwd.mode, alpha=fwd.alpha, beta=fwd.beta)

    @property
    def saved(self) -> str:
        """The forward tensor the derivative reads: ``"y"`` (output) or ``"x"`` (input)."""
        return BACKWARD_MODES[self.mode][0]

    def input_shapes(self):
        return [self.shape, self.shape]  # the saved tensor (y or x), dy

    def output_shape(self):
        return self.shape

    def flops(self):
        return numel(self.shape) * BACKWARD_MODES[self.mode][2]

    def describe(self):
        return f"ActivationBwd({self.mode} {'x'.join(map(str, self.shape))})"


def activation_backward(cfg: ActivationConfig) -> tuple:
    """``Kind.backward`` of the Activation kind: one data-gradient call."""
    return (("backward_data", ActivationBwdConfig.of(cfg)),)


def _min_bytes(cfg: ActivationBwdConfig, ib: int, ob: int) -> int:
    """The saved tensor and dy read once, dx written once (bytes): the compulsory traffic of a
    derivative that reads one forward tensor (cuDNN's call reads x and y both; PyTorch's kernels one)."""
    return io_bytes(cfg, ib, ob)


@dataclass(frozen=True)
class ActivationBwdCase(Case):
    """One row of ``templates/activation_backward.cpp.j2``'s case table: the fields of its C++
    ``ActivationBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order
    against the template)."""

    dims: CppValue
    mode: CppValue
    variant: CppValue
    kmode: CppValue
    coef: CppValue
    kcoef: CppValue
    beta: CppValue
    saved_y: CppValue
    label: CppValue


def _case(cfg: ActivationBwdConfig, job: Job) -> ActivationBwdCase:
    mode, variant = CUDNN_ACTIVATION[cfg.mode]
    coef = cfg.alpha
    if cfg.mode in ("hard_sigmoid", "swish"):
        coef = 1.0  # the proxy's clip; swish's beta (SiLU)
    # the kernel's mode: cudnnActivationMode_t's value, -1 leaky relu, -2 hard sigmoid (harness.hpp)
    kmode = {"leaky_relu": "-1", "hard_sigmoid": "-2"}.get(cfg.mode, f"static_cast<int>({mode})")
    kcoef = cfg.alpha if cfg.mode in ("hard_sigmoid", "leaky_relu") else coef
    return ActivationBwdCase(job=job_init(job), dims=c_array(as4(cfg.shape), 4), mode=mode, variant=variant,
                             kmode=kmode, coef=cpp_num(float(coef)), kcoef=cpp_num(float(kcoef)),
                             beta=cpp_num(float(cfg.beta)), saved_y=cpp_num(cfg.saved == "y"),
                             label=cpp_string(cfg.mode))


def _torch(c: Ctx) -> Candidate:
    """The ATen backward op autograd runs for the mode (:data:`BACKWARD_MODES`), on dy and the saved
    tensor (the forward's y computed from a random x in the set-up, or x)."""
    cfg, torch = c.cfg, c.torch
    aten = torch.ops.aten
    x = c.fmt(c.randn(cfg.shape))
    dy = c.fmt(c.randn(cfg.shape))
    a, n = float(cfg.alpha), numel(cfg.shape)
    if cfg.mode == "relu":
        y = torch.relu(x)
        fn = (lambda: aten.threshold_backward(dy, y, 0.0))
    elif cfg.mode == "sigmoid":
        y = torch.sigmoid(x)
        fn = (lambda: aten.sigmoid_backward(dy, y))
    elif cfg.mode == "tanh":
        y = torch.tanh(x)
        fn = (lambda: aten.tanh_backward(dy, y))
    elif cfg.mode == "clipped_relu":
        fn = (lambda: aten.hardtanh_backward(dy, x, 0.0, a))
    elif cfg.mode == "leaky_relu":
        fn = (lambda: aten.leaky_relu_backward(dy, x, a, False))
    elif cfg.mode == "elu":
        fn = (lambda: aten.elu_backward(dy, a, 1.0, 1.0, False, x))
    elif cfg.mode == "swish":
        fn = (lambda: aten.silu_backward(dy, x))
    elif cfg.mode == "hard_sigmoid":
        if not (math.isclose(a, 1 / 6, abs_tol=1e-6) and math.isclose(float(cfg.beta), 0.5, abs_tol=1e-6)):
            raise NotSupported("HardSigmoid backward with alpha, beta other than 1/6, 1/2 "
                               "(autograd of mul+add+clamp, several kernels)")
        fn = (lambda: aten.hardsigmoid_backward(dy, x))
    else:  # pragma: no cover (the config checks its mode)
        raise NotSupported(f"activation backward {cfg.mode}")
    return Candidate(f"torch:aten::{BACKWARD_MODES[cfg.mode][1]}", algo_label(c), fn, n)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ActivationBwdConfig(shape=(1, 64, 112, 112), mode="relu"),
    name="ActivationBwd", config=ActivationBwdConfig, template="activation_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, backward_of={"Activation": activation_backward},
    nhwc=False, image=True)
