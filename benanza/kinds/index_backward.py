"""The backward calls of the index kinds of a mixture-of-experts router in a training step (docs/training.md):
TopK, Scatter (ScatterND, ScatterElements) and GatherElements. Their gradients are configs of each other's
kinds (a TopK's is a Scatter, a Scatter's a GatherElements or a Gather, a GatherElements' a Scatter), and
the GatherElements module imports the Scatter module, so the functions live here and the registry
(:mod:`benanza.kinds`) installs them as the kinds' ``Kind.backward`` (:data:`BACKWARD`).

Each formula is PyTorch's (tools/autograd/derivatives.yaml), and the calls are the ones PyTorch 2.13 ran for
it on a CPU under a ``TorchDispatchMode`` (the op it logs in brackets):

- ``topk``: ``self: value_selecting_reduction_backward_symint(grad, dim, indices, self.sym_sizes(), true)``,
  zeros of x's shape with the values' gradient scattered at the indices (``new_zeros`` + ``scatter.src``):
  a ScatterElements (reduction none) of dy into zeros along the axis;
- ``scatter.src``: ``self: grad.scatter(dim, index, 0)`` (``scatter.value``: the gradient with the written
  places zeroed, a masked copy), ``src: grad.gather(dim, index)`` (``gather``);
  ``scatter_add``: ``self: grad`` (no call), ``src: grad.gather(dim, index)``;
- ``index_put_`` (ScatterND, PyTorch's ``index_put`` / ``index_copy``): ``self: grad.index_put(indices,
  zeros_like(values), accumulate)`` for a plain put (``index_put``), ``grad`` with accumulate (no call);
  ``values: grad.index(indices)`` (``index.Tensor``: the gradient's slices at the index tuples, a Gather of
  the gradient viewed as ``[prod(data[:k]), *data[k:]]``);
- ``gather``: ``self: gather_backward(grad, self, dim, index, sparse_grad)``, zeros of the data's shape with
  the gradient added at the indices (``new_zeros`` + ``scatter_add``): a ScatterElements add into zeros.

The Scatter kind times the ONNX output (a copy of data, then the scatter) and the scatter alone: for a
gradient into zeros the first stands for PyTorch's zero fill and scatter. A masked copy is timed with an
updates tensor of zeros (PyTorch scatters the scalar 0). Reductions mul, max and min (scatter_reduce's
``prod``/``amax``/``amin``, a dozen calls each in derivatives.yaml's ``scatter_reduce_backward``) have no
backward here: None (the training step says it misses it); no exported decoder has one. Integer data needs
no gradient (``()``; the training plan finds such layers first: :func:`benanza.processing.training.no_gradient`).
"""
from __future__ import annotations

from benanza.kinds.base import numel
from benanza.kinds.gather import GatherConfig
from benanza.kinds.gather_elements import GatherElementsConfig
from benanza.kinds.scatter import ScatterConfig
from benanza.kinds.topk import TopKConfig


def topk_backward(cfg: TopKConfig) -> tuple:
    """``Kind.backward`` of TopK: integer data (a sort of expert ids) carries no gradient, ``()``; float
    data's (a router's scores) is the values' gradient ``[*x[:axis], k]`` scattered into zeros of x's
    shape at the indices along the axis (ScatterElements, reduction none: a row's k indices are
    distinct)."""
    if cfg.dtype:
        return ()
    out = cfg.output_shape()
    return (("backward_data", ScatterConfig(op="ScatterElements", data=tuple(cfg.x), indices=out, updates=out,
                                            axis=cfg.axis)),)


def scatter_backward(cfg: ScatterConfig) -> tuple | None:
    """``Kind.backward`` of Scatter: the data's gradient (reduction none: dy with the written places
    zeroed, a Scatter of the same indices; add: dy itself, no call) and the updates' gradient (dy read at
    the indices: GatherElements for ScatterElements, a Gather of slices for ScatterND). Integer data:
    ``()``; reductions mul, max and min: None (not built)."""
    if cfg.dtype:
        return ()
    if cfg.reduction not in ("none", "add"):
        return None
    calls = []
    if cfg.reduction == "none":
        calls.append(("backward_data", ScatterConfig(op=cfg.op, data=cfg.data, indices=cfg.indices,
                                                     updates=cfg.updates, axis=cfg.axis)))
    if cfg.op == "ScatterElements":
        calls.append(("backward_data", GatherElementsConfig(data=cfg.data, indices=cfg.indices, axis=cfg.axis)))
    else:
        k = cfg.k
        table = (numel(cfg.data[:k]),) + tuple(cfg.data[k:])
        calls.append(("backward_data", GatherConfig(data=table, indices=tuple(cfg.indices[:-1]), axis=0)))
    return tuple(calls)


def gather_elements_backward(cfg: GatherElementsConfig) -> tuple:
    """``Kind.backward`` of GatherElements: the data's gradient, zeros of its shape with dy added at the
    indices along the axis (ScatterElements add: indices may repeat). Integer data: ``()``."""
    if cfg.dtype:
        return ()
    return (("backward_data", ScatterConfig(op="ScatterElements", data=cfg.data, indices=cfg.indices,
                                            updates=cfg.indices, axis=cfg.axis, reduction="add")),)


#: forward kind -> its backward function, installed by the registry (:mod:`benanza.kinds`)
BACKWARD = {"TopK": topk_backward, "Scatter": scatter_backward, "GatherElements": gather_elements_backward}
