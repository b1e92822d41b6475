"""The loss of a training step (docs/training.md): cross-entropy with class indices over the model's logits,
its forward and its backward, as ``torch.nn.functional.cross_entropy(logits, target)`` (reduction
mean) computes them; the loss is outside the ONNX model, so its config comes from the model's output
(:func:`benanza.processing.training.loss_config`), and its calls form the ``loss`` phase of the step
(:data:`benanza.kinds.base.STEP_PHASES`), between the forward and the backward pass.

Formulas (PyTorch's aten/src/ATen/native/LossNLL.cpp and SoftMax.cpp; tools/autograd/derivatives.yaml):
the forward is ``logp = _log_softmax(x, -1)`` then ``nll_loss_forward(logp, target, reduction=Mean)``,
``loss = -mean_r logp[r, target_r]``; the backward ``nll_loss_backward`` (the gradient of logp:
``-1/rows`` at each target, zero elsewhere) then ``_log_softmax_backward_data`` (``dx = g -
exp(logp) * sum(g)``), together ``dx = (softmax(x) - onehot(target)) / rows``.

The whole slice of the kind: its config, the case its template renders, its minimum bytes and its
PyTorch candidate (:class:`benanza.kinds.base.Kind`). It maps no ONNX op (its phase is ``loss``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, job_init
from benanza.kinds.framework import Candidate, Ctx


#: the ATen ops of PyTorch's cross-entropy forward and backward (the profile join attributes their
#: kernels to the loss)
ATEN_OPS = ("aten::cross_entropy_loss", "aten::_log_softmax", "aten::log_softmax", "aten::nll_loss",
            "aten::nll_loss_nd", "aten::nll_loss_forward", "aten::nll_loss_backward",
            "aten::_log_softmax_backward_data")


@dataclass(frozen=True)
class CrossEntropyLossConfig(LayerConfig):
    """Cross-entropy with class indices, reduction mean, forward and backward, over ``logits`` whose
    last dim holds the classes (an image classifier's (B, classes); a language model's (B, S, vocab)
    or (S, B, vocab)): rows = numel(logits) / classes. Inputs: the logits and the int64 targets
    (rows,); output: the logits' gradient, of the logits' shape (and the scalar loss).
    FLOPs: 6 per logit (forward: the row's max, the subtraction, exp and the sum; backward: the
    one-hot's subtraction and the 1/rows scale)."""

    kind: ClassVar[str] = "CrossEntropyLoss"
    logits: Shape

    @property
    def classes(self) -> int:
        return self.logits[-1]

    @property
    def rows(self) -> int:
        return numel(self.logits[:-1])

    def input_shapes(self):
        return [self.logits, (self.rows,)]

    def output_shape(self):
        return self.logits

    def flops(self):
        return 6 * numel(self.logits)

    def describe(self):
        return f"CrossEntropyLoss({'x'.join(map(str, self.logits))}, {self.classes} classes)"


@dataclass(frozen=True)
class CrossEntropyLossCase(Case):
    """One row of ``templates/cross_entropy_loss.cpp.j2``'s case table: the fields of its C++
    ``CrossEntropyLossCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the
    order against the template)."""

    rows: CppValue
    classes: CppValue


def _case(cfg: CrossEntropyLossConfig, job: Job) -> CrossEntropyLossCase:
    if cfg.rows * cfg.classes >= 2 ** 31:
        raise ValueError(f"{cfg.describe()}: more than 2^31 logits (cuDNN's tensor dims are int)")
    return CrossEntropyLossCase(job=job_init(job), rows=cfg.rows, classes=cfg.classes)


def _torch(c: Ctx) -> Candidate:
    """What autograd runs for ``F.cross_entropy(x, t)`` and its ``backward()``: ``aten::_log_softmax``,
    ``aten::nll_loss_forward`` (reduction mean = 1, ignore_index -100), ``aten::nll_loss_backward``
    (grad_output 1) and ``aten::_log_softmax_backward_data``, on the logits viewed as (rows, classes)."""
    cfg, torch = c.cfg, c.torch
    aten = torch.ops.aten
    x = c.randn((cfg.rows, cfg.classes))
    t = torch.randint(0, cfg.classes, (cfg.rows,), device=c.device, dtype=torch.int64)
    one = torch.ones((), device=c.device, dtype=c.dtype)

    def step():
        logp = aten._log_softmax(x, 1, False)
        loss, total = aten.nll_loss_forward(logp, t, None, 1, -100)
        g = aten.nll_loss_backward(one, logp, t, None, 1, -100, total)
        return aten._log_softmax_backward_data(g, logp, 1, x.dtype)

    return Candidate("torch:aten::_log_softmax+nll_loss_forward+nll_loss_backward+_log_softmax_backward_data",
                     "default", step, numel(cfg.logits))


def _min_bytes(cfg: CrossEntropyLossConfig, ib: int, ob: int) -> int:
    """The logits read once, the int64 targets once, the gradient written once, the fp32 loss (bytes)."""
    return ib * numel(cfg.logits) + 8 * cfg.rows + ob * numel(cfg.logits) + 4


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=CrossEntropyLossConfig(logits=(32, 1000)),
    name="CrossEntropyLoss", config=CrossEntropyLossConfig, template="cross_entropy_loss.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, phase="loss", nhwc=False, image=False,
    aten={"CrossEntropyLoss": ATEN_OPS})
