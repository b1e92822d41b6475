"""BatchNorm layers. BatchNormalization in inference: cudnnBatchNormalizationForwardInference (spatial mode).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need


@dataclass(frozen=True)
class BatchNormConfig(LayerConfig):
    """BatchNormalization in inference: cudnnBatchNormalizationForwardInference (spatial mode).

    FLOPs: 2 per element (scale and shift after folding mean/var, as cuDNN computes it).
    """

    kind: ClassVar[str] = "BatchNorm"
    shape: Shape
    epsilon: float

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return 2 * numel(self.shape)


def _map_bn(node, ctx, attrs):
    if int(attrs.get("training_mode", 0)):
        raise Unsupported("BatchNormalization in training mode")
    if len(node.output) > 1 and any(node.output[1:]):
        raise Unsupported("BatchNormalization with running-statistics outputs")
    x = need(ctx.shape(node.input[0]), "input")
    if len(x) < 2:
        raise Unsupported("BatchNormalization on a rank-1 tensor")
    return BatchNormConfig(shape=tuple(x), epsilon=float(attrs.get("epsilon", 1e-5)))


@dataclass(frozen=True)
class BatchNormCase(Case):
    """One row of ``templates/batchnorm.cpp.j2``'s case table: the fields of its C++ ``BatchNormCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    dims: CppValue
    epsilon: CppValue
    note: CppValue


def _bn_case(cfg: BatchNormConfig, job: Job) -> BatchNormCase:
    s = list(cfg.shape)
    dims = s + [1] * (4 - len(s)) if len(s) <= 4 else s[:2] + [math.prod(s[2:]), 1]
    return BatchNormCase(job=job_init(job), dims=c_array(dims, 4), epsilon=cpp_num(max(cfg.epsilon, 1e-5)), note=cpp_string("" if cfg.epsilon >= 1e-5 else
                               f"epsilon {cfg.epsilon} raised to CUDNN_BN_MIN_EPSILON 1e-5"))


def _batchnorm(c: Ctx) -> Candidate:
    cfg, F = c.cfg, functional(c)
    x = c.fmt(c.randn(cfg.shape))
    ch = cfg.shape[1]
    mean, var, g, b = c.randn((ch,)), c.randn((ch,), positive=True), c.randn((ch,)), c.randn((ch,))
    return Candidate("torch:aten::batch_norm", algo_label(c), lambda: F.batch_norm(x, mean, var, g, b, False, 0.0,
                                                                              cfg.epsilon), numel(cfg.shape))


def _min_bytes(cfg: BatchNormConfig, ib: int, ob: int) -> int:
    """x, the folded per-channel scale and shift read once, y written once (bytes)."""
    return ib * (numel(cfg.shape) + 2 * cfg.shape[1]) + ob * numel(cfg.output_shape())


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
def _nhwc_job(cfg: BatchNormConfig, neighbour: bool) -> bool:
    """A spatial extent above 1 (else both layouts are the same memory)."""
    return len(cfg.shape) >= 3 and math.prod(cfg.shape[2:]) > 1


KIND = Kind(
    example=BatchNormConfig(shape=(1, 160, 7, 7), epsilon=9.999999747378752e-06),
    name="BatchNorm", config=BatchNormConfig, template="batchnorm.cpp.j2", case=_bn_case, min_bytes=_min_bytes,
    torch=_batchnorm, onnx={"BatchNormalization": _map_bn},
    typed_ops=(), fused_from=(),
    aten={"BatchNormalization": ('aten::_batch_norm_impl_index', 'aten::_native_batch_norm_legit', 'aten::_native_batch_norm_legit_no_training', 'aten::batch_norm', 'aten::cudnn_batch_norm', 'aten::instance_norm', 'aten::native_batch_norm')},
    nhwc=True, image=True, nhwc_job=_nhwc_job)
