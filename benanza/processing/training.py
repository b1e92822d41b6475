"""The backward calls of a training step (issue 26): which gradient each forward layer needs, from
its kind's :attr:`benanza.kinds.base.Kind.backward`. One plan serves the generator (the backward
jobs of ``benanza bench --train``) and the analysis (the training-step LBL), so both count the same
calls.

A training step is the forward pass, the loss, the backward pass and the optimizer's update
(PyTorch: ``loss.backward()`` then ``optimizer.step()``). Autograd computes, for every layer on the
path from a trainable parameter to the loss, the gradient of its input (``backward_data``) unless
nothing upstream needs it, and the gradient of its weights and bias (``backward_weight``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from benanza import kinds as L
from benanza.processing.model import ModelLayers


@dataclass(frozen=True)
class BackwardCall:
    """One call of the backward pass: the gradient ``phase`` (``backward_data`` or
    ``backward_weight``, :data:`benanza.kinds.TRAINING_PHASES`) of forward layer ``layer`` (its
    index in :attr:`ModelLayers.layers`), computed as ``config`` (a layer config of a backward
    kind, or of a forward kind: a GEMM's gradients are GEMMs)."""

    layer: int
    phase: str
    config: L.LayerConfig


@dataclass
class TrainingPlan:
    """The backward pass of one model at one batch.

    - ``calls``: every backward call, in reverse topological order of the forward layers (the order
      autograd runs them), data gradient before weight gradient;
    - ``no_backward``: layers whose gradient benanza cannot bound yet (their kind has no backward,
      or the layer itself is unsupported): a training step with any is incomplete;
    - ``pass_through``: layers whose gradient costs nothing (zero-cost layers such as Reshape, and
      kinds whose backward is the identity, such as an Add of two same-shape tensors);
    - ``data_not_needed``: layers whose inputs are all model inputs or constants: autograd computes
      no input gradient for them (the first convolution of a CNN), so their ``backward_data`` calls
      are left out.
    """

    calls: list[BackwardCall] = field(default_factory=list)
    no_backward: list[int] = field(default_factory=list)
    pass_through: list[int] = field(default_factory=list)
    data_not_needed: list[int] = field(default_factory=list)

    def configs(self) -> dict[str, L.LayerConfig]:
        """Each distinct backward config by key."""
        return {c.config.key: c.config for c in self.calls}


def training_plan(ml: ModelLayers) -> TrainingPlan:
    """The backward calls of ``ml``'s layers (:class:`TrainingPlan`). A kind's ``backward`` that
    raises (a config it cannot differentiate) counts the layer as ``no_backward``, never as free."""
    plan = TrainingPlan()
    for ly in reversed(ml.layers):
        if ly.status == "zero_cost":
            plan.pass_through.append(ly.index)
            continue
        kind = L.REGISTRY.get(ly.config.kind) if ly.config is not None else None
        if ly.status != "benchmark" or kind is None or kind.backward is None:
            plan.no_backward.append(ly.index)
            continue
        try:
            calls = tuple(kind.backward(ly.config))
        except (ValueError, NotImplementedError):
            plan.no_backward.append(ly.index)
            continue
        if not calls:
            plan.pass_through.append(ly.index)
            continue
        needs_data = bool(ml.edges.get(ly.index))  # some input comes from another layer
        if not needs_data:
            plan.data_not_needed.append(ly.index)
        for phase, cfg in calls:
            if phase not in L.TRAINING_PHASES[1:3]:
                raise ValueError(f"{ly.config.kind}.backward gave phase {phase!r}")
            if phase == "backward_data" and not needs_data:
                continue
            plan.calls.append(BackwardCall(ly.index, phase, cfg))
    return plan
