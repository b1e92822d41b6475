"""The backward calls of an Elementwise layer in a training step (issue 26): its gradients are configs of
other kinds (Reduce for a broadcast operand, Unary neg for a Sub's second operand, Elementwise mul for
a Mul's), and the Reduce and Unary modules import the Elementwise module, so the function lives here
and the registry (:mod:`benanza.kinds`) installs it as the Elementwise kind's ``Kind.backward``
(:data:`BACKWARD`)."""
from __future__ import annotations

from benanza.kinds.elementwise import ELEMENTWISE_OPS, ElementwiseConfig
from benanza.kinds.reduce import ReduceConfig
from benanza.kinds.unary import UnaryConfig


def broadcasts_over_batch(operand, y) -> bool:
    """Whether ``operand`` (padded to the output's rank) is broadcast over dim 0 of the output ``y`` of
    more than one element there: the same for every sample of a batch, as a parameter (a bias, a scale)
    is; a tensor computed from the batch has the batch dim. At batch 1 the two cannot be told apart
    from the shapes, and the operand counts as data."""
    return len(y) >= 2 and y[0] > 1 and operand[0] == 1


def elementwise_backward(cfg: ElementwiseConfig) -> tuple | None:
    """``Kind.backward`` of the Elementwise kind: the gradient calls of each operand, as PyTorch's
    autograd computes them (tools/autograd/derivatives.yaml: add ``self: grad, other: grad * alpha``; sub
    ``other: -grad * alpha``, aten::neg; mul ``self: mul_tensor_backward(grad, other)``, ``other:
    mul_tensor_backward(grad, self)``, aten::mul), reduced to a broadcast operand's shape as autograd's
    ``sum_to`` does (aten::sum over the broadcast dims; here the Reduce kind's ReduceSum).

    - add: a full-shape operand's gradient is dy itself (no call); a broadcast one's is ReduceSum of dy
      over the broadcast dims. Two same-shape operands: ``()``, the gradient passes through.
    - sub: as add for a; b's gradient is negated (Unary neg of dy, or of the reduced dy: the smaller
      tensor).
    - mul: dA = dY * B and dB = dY * A (Elementwise mul of dy and the other operand, broadcasting it),
      each reduced to its operand's shape when that one is broadcast.

    Each operand's calls have phase ``backward_weight`` when it is a parameter
    (:func:`broadcasts_over_batch`: a bias or a scale broadcast over the batch), else ``backward_data``;
    data gradients first. Integer and bool data and the bool outputs of comparisons and logical ops
    carry no gradient: ``()``. Other ops (div, max, min, mean, pow, mod, fmod, prelu): None, no backward
    yet (a training step with them is incomplete)."""
    if cfg.dtype or ELEMENTWISE_OPS[cfg.op][2]:
        return ()
    if cfg.op not in ("add", "sub", "mul"):
        return None
    y = tuple(cfg.output_shape())
    calls = []
    for operand, other, negate in ((tuple(cfg.a), tuple(cfg.b), False), (tuple(cfg.b), tuple(cfg.a), cfg.op == "sub")):
        phase = "backward_weight" if broadcasts_over_batch(operand, y) else "backward_data"
        if cfg.op == "mul":
            calls.append((phase, ElementwiseConfig(op="mul", a=y, b=other)))
        if operand != y:
            calls.append((phase, ReduceConfig(op="sum", x=y, y=operand)))
        if negate:
            calls.append((phase, UnaryConfig(shape=operand, op="neg")))
    return tuple(sorted(calls, key=lambda c: c[0] != "backward_data"))


#: forward kind -> its backward function (installed by the registry)
BACKWARD = {"Elementwise": elementwise_backward}
