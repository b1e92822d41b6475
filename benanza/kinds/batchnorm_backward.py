"""BatchNormBwd layers: BatchNormalization's backward in a training step (docs/training.md), one call that
computes the gradient of the input, of the scale and of the bias together, from dy, x, the scale
and the mean and inverse standard deviation the training forward saved
(:mod:`benanza.kinds.batchnorm_train`). With xhat = (x - mean) * invstd and M = N * spatial:
dbias = sum(dy), dscale = sum(dy * xhat), dx = scale * invstd * (dy - dbias / M - xhat * dscale / M)
(per channel; PyTorch's batch_norm_backward, aten/src/ATen/native/cuda/Normalization.cuh).

Timed: cudnnBatchNormalizationBackwardEx (CUDNN_BATCHNORM_OPS_BN) in modes CUDNN_BATCHNORM_SPATIAL
and CUDNN_BATCHNORM_SPATIAL_PERSISTENT (each after one training forward of its mode fills the saved
statistics and the reserve space it reads), and every engine config of the cuDNN graph API's
``batchnorm_backward`` node; PyTorch's own ``native_batch_norm_backward`` (and
``cudnn_batch_norm_backward`` on a CUDA device) as the framework's.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate, the ATen ops of the profile join, and its place as the BatchNorm kind's backward
(:func:`batchnorm_backward`, installed through ``Kind.backward_of``). It maps no ONNX op.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Kind, LayerConfig, Shape, numel
from benanza.kinds.batchnorm import BatchNormConfig
from benanza.kinds.batchnorm_train import (EXPONENTIAL_AVERAGE_FACTOR, BatchNormTrainConfig, bn_case, bn_nhwc_job,
                                           bn_tensors, check_bn, on_cuda)
from benanza.kinds.framework import Candidate, Ctx, algo_label


@dataclass(frozen=True)
class BatchNormBwdConfig(LayerConfig):
    """The backward of a training-mode BatchNormalization on x of ``shape`` (N, C, spatial...; rank 2
    to 5), statistics per channel (dim 1). Inputs: dy and x of ``shape`` (and the float32 (C,) scale,
    saved mean and inverse std); outputs: dx of ``shape`` (:meth:`output_shape`) and the float32 (C,)
    dscale and dbias, all three from one call. ``epsilon``: the forward's.

    FLOPs: 9 per element of x (PyTorch's two passes, aten/src/ATen/native/cuda/Normalization.cuh:
    batch_norm_backward_reduce sums dy and dy * (x - mean), 4; batch_norm_backward_elemt computes
    dx = (dy - mean_dy - (x - mean) * proj) * grad_scale, 5); the per-channel work is not counted.
    """

    kind: ClassVar[str] = "BatchNormBwd"
    #: the call computes the weight gradients (dscale, dbias) too: a training plan keeps it where the
    #: input gradient is not needed (:func:`benanza.processing.training.training_plan`)
    computes_weight_gradients: ClassVar[bool] = True
    shape: Shape
    epsilon: float

    def __post_init__(self):
        check_bn(self.shape, self.epsilon)

    @classmethod
    def of(cls, fwd: BatchNormConfig) -> "BatchNormBwdConfig":
        """The backward call of the layer ``fwd``."""
        return cls(shape=tuple(fwd.shape), epsilon=fwd.epsilon)

    @property
    def channels(self) -> int:
        return self.shape[1]

    def input_shapes(self):
        return [self.shape, self.shape]  # dy, x

    def output_shape(self):
        return self.shape  # dx (dscale and dbias: (C,) float32 beside it)

    def flops(self):
        return 9 * numel(self.shape)

    def describe(self):
        return f"BatchNormBwd({'x'.join(map(str, self.shape))})"


def batchnorm_backward(cfg: BatchNormConfig) -> tuple:
    """``Kind.backward`` of the BatchNorm kind: ``(("forward", BatchNormTrainConfig),
    ("backward_data", BatchNormBwdConfig))``. The ``forward`` call is the training-mode forward (the
    batch's statistics, running statistics updated, mean and inverse std saved) that replaces the
    inference call in a training step; the ``backward_data`` call computes dX, dScale and dBias
    together (cudnnBatchNormalizationBackwardEx, the graph API's batchnorm_backward and PyTorch's
    batch_norm_backward are each one call for the three), so the layer has no ``backward_weight``
    call of its own: its weight gradients are inside the data-gradient call's time. For a layer that
    reads only model inputs (no input gradient needed) the plan still keeps the call
    (:attr:`BatchNormBwdConfig.computes_weight_gradients`): autograd runs it for dScale and dBias.
    Raises ValueError for a rank outside 2 to 5 or a negative epsilon."""
    return (("forward", BatchNormTrainConfig.of(cfg)), ("backward_data", BatchNormBwdConfig.of(cfg)))


def instancenorm_backward(cfg) -> tuple:
    """``Kind.backward`` of the InstanceNorm kind, as PyTorch computes it: ``F.instance_norm`` runs
    ``at::batch_norm`` in training mode on x viewed as (1, N*C, spatial...) with the scale and bias
    repeated N times (aten/src/ATen/native/Normalization.cpp, ``instance_norm``). So: the training
    forward :class:`BatchNormTrainConfig` and one :class:`BatchNormBwdConfig` on that view (dx and
    the (N*C,) dscale, dbias), then each of scale's and bias's gradients summed over the N repeats
    (``repeat``'s backward: a ReduceSum of (N, C) to (1, C), phase ``backward_weight``). Raises
    ValueError as the BatchNorm kinds do (rank, epsilon below CUDNN_BN_MIN_EPSILON)."""
    from benanza.kinds.reduce import ReduceConfig

    n, c = cfg.shape[0], cfg.shape[1]
    view = (1, n * c, *cfg.shape[2:])
    check_bn(view, cfg.epsilon)
    repeats = ReduceConfig(op="sum", x=(n, c), y=(1, c))
    return (("forward", BatchNormTrainConfig(shape=view, epsilon=cfg.epsilon)),
            ("backward_data", BatchNormBwdConfig(shape=view, epsilon=cfg.epsilon)),
            ("backward_weight", repeats), ("backward_weight", repeats))


def _case(cfg: BatchNormBwdConfig, job):
    return bn_case(cfg.shape, cfg.epsilon, job)


def _torch(c: Ctx) -> Candidate:
    """``aten::native_batch_norm_backward(dy, x, w, running_mean, running_var, save_mean, save_invstd,
    train=True, eps, [True, True, True])`` on the statistics one ``native_batch_norm`` training
    forward saved in the set-up, and on a CUDA device the variant ``aten::cudnn_batch_norm_backward``
    on those of one ``cudnn_batch_norm`` forward (its reserve space too). Both return dx (dscale and
    dbias are computed by the same call)."""
    cfg = c.cfg
    aten = c.torch.ops.aten
    x, w, b, rm, rv = bn_tensors(c)
    dy = c.fmt(c.randn(cfg.shape))
    eps, f = float(cfg.epsilon), EXPONENTIAL_AVERAGE_FACTOR
    n = numel(cfg.shape)
    saved = aten.native_batch_norm(x, w, b, rm, rv, True, f, eps)  # (y, save_mean, save_invstd)
    sm, si = saved[1], saved[2]
    mask = [True, True, True]
    cand = Candidate("torch:aten::native_batch_norm_backward", algo_label(c, "dx, dscale, dbias"),
                     lambda: aten.native_batch_norm_backward(dy, x, w, rm, rv, sm, si, True, eps, mask)[0], n)
    if on_cuda(c):
        cs = aten.cudnn_batch_norm(x, w, b, rm, rv, True, f, eps)  # (y, save_mean, save_var, reserve)
        csm, csv, reserve = cs[1], cs[2], cs[3]
        cand.variants.append(Candidate(
            "torch:aten::cudnn_batch_norm_backward", algo_label(c, "dx, dscale, dbias"),
            lambda: aten.cudnn_batch_norm_backward(x, dy, w, rm, rv, csm, csv, eps, reserve)[0], n))
    return cand


def _min_bytes(cfg: BatchNormBwdConfig, ib: int, ob: int) -> int:
    """The compulsory traffic (bytes; Williams et al., "Roofline", CACM 2009): dy and x read once (a
    persistent kernel keeps them on chip between the reductions and dx), dx written once, and per
    channel 5 float32 values: scale, saved mean and inverse std read, dscale and dbias written
    (cudnnBatchNormalizationBackwardEx's arguments)."""
    return ib * 2 * numel(cfg.shape) + ob * numel(cfg.shape) + 4 * 5 * cfg.channels


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`); the example: the backward of the
#: BatchNorm kind's example
KIND = Kind(
    example=BatchNormBwdConfig(shape=(1, 160, 7, 7), epsilon=9.999999747378752e-06),
    name="BatchNormBwd", config=BatchNormBwdConfig, template="batchnorm_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, onnx={}, typed_ops=(), fused_from=(),
    aten={"BatchNormalization": ("aten::batch_norm_backward", "aten::native_batch_norm_backward",
                                 "aten::cudnn_batch_norm_backward")},
    nhwc=True, image=False, nhwc_job=bn_nhwc_job, backward_of={"BatchNorm": batchnorm_backward,
                                                                           "InstanceNorm": instancenorm_backward})
