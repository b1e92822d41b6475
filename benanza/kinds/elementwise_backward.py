"""The backward calls of an Elementwise layer in a training step (docs/training.md): its gradients are configs of
other kinds (Reduce for a broadcast operand, Unary neg for a Sub's second operand, Elementwise mul for
a Mul's, Where for a Max's or Min's), and the Reduce and Unary modules import the Elementwise module,
so the function lives here and the registry (:mod:`benanza.kinds`) installs it as the Elementwise kind's ``Kind.backward``
(:data:`BACKWARD`); likewise the Where kind's (Where and Reduce calls) and the Reduce kind's (a
Copy kind Expand for Sum and Mean: the Copy module imports the Reduce module, for its own Expand's
gradient; Elementwise, Reduce and Where calls for Max and Min)."""
from __future__ import annotations

from benanza.kinds.base import numel
from benanza.kinds.copy import CopyConfig
from benanza.kinds.elementwise import ELEMENTWISE_OPS, ElementwiseConfig
from benanza.kinds.reduce import ReduceConfig
from benanza.kinds.swiglu_backward import SwiGLUBwdConfig
from benanza.kinds.unary import UnaryConfig
from benanza.kinds.where import WhereConfig


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
    - div, max, min, mean, pow: :func:`_more_backward`.
    - swiglu (SwiGLU's gate silu(a) * b, a fusion candidate's config): one SwiGLUBwd call that reads
      a, b and dy and writes both gradients (:mod:`benanza.kinds.swiglu_backward`), ``backward_data``.

    Each operand's calls have phase ``backward_weight`` when it is a parameter
    (:func:`broadcasts_over_batch`: a bias or a scale broadcast over the batch), else ``backward_data``;
    data gradients first. Integer and bool data and the bool outputs of comparisons and logical ops
    carry no gradient: ``()``. Other ops (mod, fmod: piecewise constant in the divisor, no
    differentiable use in the zoo; prelu): None, no backward yet (a training step with them is
    incomplete)."""
    if cfg.dtype or ELEMENTWISE_OPS[cfg.op][2]:
        return ()
    if cfg.op in _MORE:
        return _more_backward(cfg)
    if cfg.op == "swiglu":
        return (("backward_data", SwiGLUBwdConfig(shape=tuple(cfg.output_shape()))),)
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


#: the ops :func:`_more_backward` differentiates
_MORE = ("div", "max", "min", "mean", "pow")


def _more_backward(cfg: ElementwiseConfig) -> tuple:
    """The gradients of Div, Max, Min, Mean and Pow (tensor exponent) as Elementwise, Where, Unary and
    Reduce calls, from PyTorch's formulas (tools/autograd/derivatives.yaml and
    torch/csrc/autograd/FunctionsManual.cpp). Shapes: y the output, g = dY of y's shape, Y the
    forward's output (alive in the step: the next layer's input); every call's output is y-shaped
    unless it is a ReduceSum to a broadcast operand (autograd's ``sum_to``) or a Unary on the reduced
    operand.

    - div (``div.Tensor``: ``self: div_tensor_self_backward(grad, other)`` = grad / other;
      ``other: div_tensor_other_backward(grad, self, other)`` = -grad * ((self / other) / other)):
      dA = g / B (Elementwise div); dB = -(dA * Y), since (g / B) * (A / B) = g * A / B^2: Elementwise
      mul of the y-shaped g / B and Y, reduced when B is broadcast, then Unary neg on B's shape. The
      g / B call serves both operands; it is A's call, and B's when A is a constant.
    - max / min (``maximum``: ``self: at::where(self == other, grad / 2, grad).masked_fill_(self <
      other, 0)``, ``other``: the same with ``self > other``; ``minimum`` mirrored): the mask
      A >= B (A <= B for min; Elementwise greater_equal / less_equal, bool), then dA = where(mask, g, 0)
      and dB = where(mask, 0, g) (Where calls). Ties send the whole gradient to A where PyTorch
      splits it in halves: the same calls and bytes.
    - mean (ONNX Mean of 2: (A + B) / 2; ``div.Scalar``: ``self: grad / other``): dA = dB = g * 0.5,
      one Elementwise mul by a scalar for both, each reduced to its broadcast operand.
    - pow (``pow.Tensor_Tensor``: ``self: pow_backward_self(grad, self, exponent)`` = grad * exponent
      * self^(exponent - 1); ``exponent: pow_backward_exponent(grad, self, exponent, result)`` = grad
      * result * log(self)): dA = (g * E) * Y / A (A^(E-1) = Y / A; Elementwise mul, mul, div),
      dE = (g * Y) * log(A) (Unary log of A, Elementwise mul, mul).

    An operand of one element is a constant (a scalar of the export, as
    :data:`benanza.processing.training.PARAMETER_INPUTS` counts it) and gets no gradient call; its
    partner still gets its own. Phases as :func:`elementwise_backward`'s; a call both gradients
    read (the g / B of div, the mask of max / min, the g * 0.5 of mean) is listed once, with phase
    ``backward_weight`` when a parameter's gradient reads it (a training plan keeps it where the
    data gradient is not needed), else ``backward_data``."""
    y = tuple(cfg.output_shape())
    a, b = tuple(cfg.a), tuple(cfg.b)
    one = (1,) * len(y)
    E = ElementwiseConfig
    shapes = {"a": a, "b": b}
    users = tuple(n for n in ("a", "b") if numel(shapes[n]) > 1)  # the operands that get a gradient
    phases = {n: "backward_weight" if broadcasts_over_batch(shapes[n], y) else "backward_data" for n in users}

    def reduce(n):
        return [ReduceConfig(op="sum", x=y, y=shapes[n])] if shapes[n] != y else []

    # (the operands whose gradient needs the call, the call); a call both gradients read is listed once
    calls: list[tuple[tuple[str, ...], object]] = []
    if cfg.op == "div":
        calls.append((users, E(op="div", a=y, b=b)))
        calls += [(("a",), c) for c in reduce("a")] if "a" in users else []
        if "b" in users:
            calls += [(("b",), c) for c in [E(op="mul", a=y, b=y)] + reduce("b") + [UnaryConfig(shape=b, op="neg")]]
    elif cfg.op in ("max", "min"):
        calls.append((users, E(op="greater_equal" if cfg.op == "max" else "less_equal", a=a, b=b)))
        for n, select in (("a", WhereConfig(cond=y, a=y, b=one)), ("b", WhereConfig(cond=y, a=one, b=y))):
            calls += [((n,), c) for c in [select] + reduce(n)] if n in users else []
    elif cfg.op == "mean":
        calls.append((users, E(op="mul", a=y, b=one)))
        for n in users:
            calls += [((n,), c) for c in reduce(n)]
    else:  # pow
        if "a" in users:
            calls += [(("a",), c) for c in [E(op="mul", a=y, b=b), E(op="mul", a=y, b=y), E(op="div", a=y, b=a)]
                      + reduce("a")]
        if "b" in users:
            calls += [(("b",), c) for c in [UnaryConfig(shape=a, op="log"), E(op="mul", a=y, b=y),
                                            E(op="mul", a=y, b=a)] + reduce("b")]
    # a call a parameter's gradient reads is a weight-gradient call (kept where no data gradient is
    # needed), else a data-gradient call
    out = [("backward_weight" if any(phases[n] == "backward_weight" for n in ns) else "backward_data", c)
           for ns, c in calls if ns]
    return tuple(sorted(out, key=lambda c: c[0] != "backward_data"))


def where_backward(cfg: WhereConfig) -> tuple:
    """``Kind.backward`` of the Where kind: the gradients of a and b, as PyTorch's autograd computes
    them (tools/autograd/derivatives.yaml, ``where.self``: ``self: where(condition, grad, 0)``,
    ``other: where(condition, 0, grad)``): each a Where call of the forward's condition, dy (the
    output's shape) and a scalar zero, ``WhereConfig(cond, y, 1s)`` for a and ``WhereConfig(cond,
    1s, y)`` for b; reduced to a broadcast operand's shape as autograd's ``sum_to`` does (a Reduce
    kind ReduceSum over the broadcast dims). The bool condition has no gradient.

    An operand of one element is taken as a constant and gets no gradient call: the fill value of
    ``masked_fill`` / ``torch.where`` with a Python scalar (a BERT attention mask's -inf or 0), which
    the ONNX export writes as a one-element Constant or initializer (as
    :data:`benanza.processing.training.PARAMETER_INPUTS` counts a one-element elementwise operand as
    a constant, not a parameter). Each operand's calls have phase ``backward_weight`` when it is a
    parameter broadcast over the batch
    (:func:`broadcasts_over_batch`), else ``backward_data``; data
    gradients first. ``()`` when both a and b are such constants: no call."""
    y = tuple(cfg.output_shape())
    one = (1,) * len(y)
    calls = []
    for operand, first in ((tuple(cfg.a), True), (tuple(cfg.b), False)):
        if numel(operand) == 1:
            continue  # a constant fill value: no gradient
        phase = "backward_weight" if broadcasts_over_batch(operand, y) else "backward_data"
        calls.append((phase, WhereConfig(cond=tuple(cfg.cond), a=y if first else one, b=one if first else y)))
        if operand != y:
            calls.append((phase, ReduceConfig(op="sum", x=y, y=operand)))
    return tuple(sorted(calls, key=lambda c: c[0] != "backward_data"))


def reduce_backward(cfg: ReduceConfig) -> tuple:
    """``Kind.backward`` of the Reduce kind, as PyTorch's autograd computes it
    (tools/autograd/derivatives.yaml): ReduceSum ``sum.dim_IntList: self: sum_backward(grad,
    self.sym_sizes(), dim, keepdim)``, dy unsqueezed and expanded to x's shape; ReduceMean
    ``mean.dim: self: mean_backward(grad, self.sym_sizes(), dim, self.sym_numel(), keepdim)``, the
    same expanded gradient divided by the count (FunctionsManual.cpp). Both write x's shape from y's
    elements once: one Copy kind ``Expand`` of dy (y's shape, the reduced axes at 1) to x's shape,
    ``backward_data`` (the mean's division by a constant reads and writes the same bytes in PyTorch's
    one ``div`` kernel over the expanded view, so the Expand is its lower bound). ``()`` for a
    reduction that reduces nothing (y == x: the gradient passes through).

    ReduceMax and ReduceMin: :func:`_extremum_backward`."""
    x, y = tuple(cfg.x), tuple(cfg.y)
    if x == y:
        return ()
    if cfg.op in ("max", "min"):
        return _extremum_backward(cfg)
    return (("backward_data", CopyConfig(op="Expand", inputs=(y,), y=x, attrs=())),)


def _extremum_backward(cfg: ReduceConfig) -> tuple:
    """The gradient of ReduceMax / ReduceMin over x (shape ``x``) with output Y (shape ``y``, the
    reduced axes at 1), as PyTorch's autograd computes it (tools/autograd/derivatives.yaml ``amax`` /
    ``amin``: ``self: scale_grad_by_count(restore_reduced_dims(grad, dim, keepdim),
    restore_reduced_dims(result, dim, keepdim) == self, dim)``; FunctionsManual.cpp
    ``scale_grad_by_count(grad, mask, dims)`` = ``(grad / mask.sum(dims, true)) * mask``): the
    gradient is shared equally among the elements that tie for the extremum. Four calls, the four
    kernels PyTorch runs (aten::eq, aten::sum, aten::div, aten::mul), all ``backward_data``:

    1. mask = (x == Y): an Elementwise ``equal`` of x and Y broadcast to x's shape (bool, x's shape);
    2. count = ReduceSum of the mask over the reduced axes (y's shape). The Reduce kind sums the
       precision's float type, so the call reads the mask at the float width where PyTorch's sum reads
       one byte per bool: it moves (width - 1) bytes per element of x more than aten::sum does;
    3. q = dy / count: an Elementwise ``div`` of two y-shaped tensors;
    4. dx = mask * q: a Where of the mask, q broadcast to x's shape and a scalar 0 (where(mask, q,
       0) is mask * q: the bool read, q read, dx written once, as PyTorch's aten::mul of the bool
       mask and the broadcast quotient)."""
    x, y = tuple(cfg.x), tuple(cfg.y)
    return (("backward_data", ElementwiseConfig(op="equal", a=x, b=y)),
            ("backward_data", ReduceConfig(op="sum", x=x, y=y)),
            ("backward_data", ElementwiseConfig(op="div", a=y, b=y)),
            ("backward_data", WhereConfig(cond=x, a=y, b=(1,) * len(x))))


#: forward kind -> its backward function (installed by the registry)
BACKWARD = {"Elementwise": elementwise_backward, "Where": where_backward, "Reduce": reduce_backward}
