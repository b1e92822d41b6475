"""BatchNormTrain layers: BatchNormalization's forward in a training step (docs/training.md), normalising with
the batch's statistics: per channel c, mean and biased variance over N and the spatial dims, y =
(x - mean) / sqrt(var + epsilon) * scale + bias, the running mean and variance updated with the
exponential average factor, and the mean and inverse standard deviation saved for the backward.

Timed: cudnnBatchNormalizationForwardTrainingEx (CUDNN_BATCHNORM_OPS_BN) in modes
CUDNN_BATCHNORM_SPATIAL and CUDNN_BATCHNORM_SPATIAL_PERSISTENT (PyTorch's cudnn_batch_norm picks
the latter for channels-last tensors, aten/src/ATen/native/cudnn/BatchNorm.cpp), and every engine
config of the cuDNN graph API's ``batchnorm`` node (training forward, running statistics updated);
PyTorch's own ``native_batch_norm`` (and ``cudnn_batch_norm`` on a CUDA device) as the framework's.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`). It maps no
ONNX op: its configs come from the BatchNorm kind's ``backward``
(:func:`benanza.kinds.batchnorm_backward.batchnorm_backward`), as the call that replaces the
inference forward in a training step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.batchnorm import BatchNormConfig
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label

#: cuDNN's smallest epsilon (``#define CUDNN_BN_MIN_EPSILON 0.0`` in cuDNN 9's cudnn_ops.h; cuDNN 7
#: had 1e-5): the node's epsilon is passed as it is
CUDNN_BN_MIN_EPSILON = 0.0
#: the exponential average factor of the running statistics the timed calls use: PyTorch's default
#: momentum 0.1 (torch.nn.BatchNorm2d; ONNX's momentum 0.9 is 1 - it). Any factor costs the same.
EXPONENTIAL_AVERAGE_FACTOR = 0.1


def check_bn(shape: Shape, epsilon: float) -> None:
    """Raises ValueError for a rank outside 2 to 5 or an epsilon below cuDNN's minimum."""
    if not 2 <= len(shape) <= 5:
        raise ValueError(f"batch norm of a rank-{len(shape)} tensor (2 to 5)")
    if not epsilon >= CUDNN_BN_MIN_EPSILON:
        raise ValueError(f"batch norm epsilon {epsilon} below CUDNN_BN_MIN_EPSILON {CUDNN_BN_MIN_EPSILON}")


@dataclass(frozen=True)
class BatchNormTrainConfig(LayerConfig):
    """BatchNormalization's training-mode forward on x of ``shape`` (N, C, spatial...; rank 2 to 5),
    statistics per channel (dim 1) over every other dim; scale, bias, running mean and variance,
    saved mean and inverse std float32 of (C,) (cuDNN's cudnnDeriveBNTensorDescriptor type for
    float, half and bfloat16 data). ``epsilon``: the ONNX node's.

    Output: y of ``shape``. FLOPs: 5 per element of x (the statistics: a sum and a sum of squares,
    3; the normalisation folded to y = x * a + b per channel, 2, as the inference BatchNorm kind
    counts it); the per-channel work (O(C)) is not counted.
    """

    kind: ClassVar[str] = "BatchNormTrain"
    shape: Shape
    epsilon: float

    def __post_init__(self):
        check_bn(self.shape, self.epsilon)

    @classmethod
    def of(cls, fwd: BatchNormConfig) -> "BatchNormTrainConfig":
        """The training-mode forward of the inference layer ``fwd``."""
        return cls(shape=tuple(fwd.shape), epsilon=fwd.epsilon)

    @property
    def channels(self) -> int:
        return self.shape[1]

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return 5 * numel(self.shape)

    def describe(self):
        return f"BatchNormTrain({'x'.join(map(str, self.shape))})"


def bn_dims(shape: Shape) -> list[int]:
    """x as cuDNN's 4-D (N, C, H, W): rank 2 and 3 padded with 1s, spatial dims beyond two folded into H
    (the statistics are per channel over every other dim, so the fold keeps the result)."""
    s = list(shape)
    return s + [1] * (4 - len(s)) if len(s) <= 4 else s[:2] + [math.prod(s[2:]), 1]


@dataclass(frozen=True)
class BatchNormTrainCase(Case):
    """One row of ``templates/batchnorm_train.cpp.j2``'s case table (and of
    ``batchnorm_backward.cpp.j2``'s, the same fields): the fields of its C++ struct in order, as C++
    literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    dims: CppValue
    epsilon: CppValue
    note: CppValue


def bn_case(shape: Shape, epsilon: float, job: Job) -> BatchNormTrainCase:
    """The case of a batch norm call on x of ``shape``; the note says when spatial dims were folded."""
    note = "" if len(shape) <= 4 else f"{len(shape) - 2} spatial dims folded into one (same per-channel statistics)"
    return BatchNormTrainCase(job=job_init(job), dims=c_array(bn_dims(shape), 4), epsilon=cpp_num(float(epsilon)),
                              note=cpp_string(note))


def _case(cfg: BatchNormTrainConfig, job: Job) -> BatchNormTrainCase:
    return bn_case(cfg.shape, cfg.epsilon, job)


def bn_tensors(c: Ctx):
    """x (in the job's memory format), scale, bias, running mean and variance (float32, (C,)) of a
    batch norm config, as PyTorch's modules keep them (the parameters float32 under autocast)."""
    cfg, torch = c.cfg, c.torch
    ch = cfg.shape[1]
    x = c.fmt(c.randn(cfg.shape))
    f32 = torch.float32
    return (x, c.randn((ch,), f32), c.randn((ch,), f32), c.randn((ch,), f32),
            c.randn((ch,), f32, positive=True))


def on_cuda(c: Ctx) -> bool:
    """Whether the candidate's tensors live on a CUDA device (cuDNN's ATen ops run only there)."""
    return getattr(c.device, "type", None) == "cuda"


def _torch(c: Ctx) -> Candidate:
    """``aten::native_batch_norm(x, w, b, running_mean, running_var, training=True, momentum 0.1,
    eps)`` (PyTorch's own CUDA kernels, aten/src/ATen/native/cuda/Normalization.cu), and on a CUDA
    device the variant ``aten::cudnn_batch_norm`` (what F.batch_norm runs where cuDNN takes the
    tensors: cudnnBatchNormalizationForwardTrainingEx). Both return y (their saved statistics are
    outputs too)."""
    cfg = c.cfg
    aten = c.torch.ops.aten
    x, w, b, rm, rv = bn_tensors(c)
    eps, f = float(cfg.epsilon), EXPONENTIAL_AVERAGE_FACTOR
    n = numel(cfg.shape)
    cand = Candidate("torch:aten::native_batch_norm", algo_label(c, "training"),
                     lambda: aten.native_batch_norm(x, w, b, rm, rv, True, f, eps)[0], n)
    if on_cuda(c):
        cand.variants.append(Candidate("torch:aten::cudnn_batch_norm", algo_label(c, "training"),
                                       lambda: aten.cudnn_batch_norm(x, w, b, rm, rv, True, f, eps)[0], n))
    return cand


def _min_bytes(cfg: BatchNormTrainConfig, ib: int, ob: int) -> int:
    """The compulsory traffic (bytes; Williams et al., "Roofline", CACM 2009): x read once (a
    persistent kernel, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, keeps it on chip between the statistics
    and the normalisation), y written once, and per channel 8 float32 values: scale, bias, running
    mean and variance read; running mean and variance, saved mean and inverse std written
    (cudnnBatchNormalizationForwardTrainingEx's arguments)."""
    return ib * numel(cfg.shape) + ob * numel(cfg.shape) + 4 * 8 * cfg.channels


def bn_nhwc_job(cfg, neighbour: bool) -> bool:
    """A spatial extent above 1 (else both layouts are the same memory), as the inference BatchNorm."""
    return len(cfg.shape) >= 3 and math.prod(cfg.shape[2:]) > 1


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`); the example: the training forward of
#: the BatchNorm kind's example
KIND = Kind(
    example=BatchNormTrainConfig(shape=(1, 160, 7, 7), epsilon=9.999999747378752e-06),
    name="BatchNormTrain", config=BatchNormTrainConfig, template="batchnorm_train.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, onnx={}, typed_ops=(), fused_from=(),
    aten={"BatchNormalization": ("aten::_batch_norm_with_update", "aten::native_batch_norm",
                                 "aten::cudnn_batch_norm")},
    nhwc=True, image=False, nhwc_job=bn_nhwc_job)
