"""InstanceNorm layers. ONNX InstanceNormalization: per sample and channel, normalised over the spatial dims.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need


@dataclass(frozen=True)
class InstanceNormConfig(LayerConfig):
    """ONNX InstanceNormalization (opset 6; ONNX operator spec, "Instance Normalization: The Missing
    Ingredient for Fast Stylization", Ulyanov et al. 2016): ``y = scale * (x - mean) / sqrt(var +
    epsilon) + B`` with the mean and (biased) variance of each sample and channel over the spatial dims.
    Used by style-transfer and image-to-image networks, and by GroupNorm as older exporters emit it
    (Reshape, InstanceNormalization, Reshape, Mul, Add in diffusion UNets before opset 18).

    shape: x as (N, C, spatial...), rank >= 3; scale and B are (C,). The call sees x as (1, N*C, spatial),
    N*C instances of prod(spatial) elements each.
    FLOPs: 8 per element (mean 1, variance 3, normalise 2, scale and shift 2), as for LayerNorm.
    """

    kind: ClassVar[str] = "InstanceNorm"
    shape: Shape
    epsilon: float

    @property
    def instances(self) -> int:
        """N * C: the (sample, channel) pairs normalised apart."""
        return self.shape[0] * self.shape[1]

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return 8 * numel(self.shape)

    def describe(self):
        return f"InstanceNorm({'x'.join(map(str, self.shape))} eps {self.epsilon:g})"


def _map_instancenorm(node, ctx, attrs):
    x = need(ctx.shape(node.input[0]), "input")
    if len(x) < 3:
        raise Unsupported(f"InstanceNormalization on a rank-{len(x)} tensor (needs N, C and a spatial dim)")
    if len(node.input) < 3 or not node.input[1] or not node.input[2]:
        raise Unsupported("InstanceNormalization without its scale and B inputs")
    return InstanceNormConfig(shape=tuple(x), epsilon=float(attrs.get("epsilon", 1e-5)))


@dataclass(frozen=True)
class InstanceNormCase(Case):
    """One row of ``templates/instancenorm.cpp.j2``'s case table: the fields of its C++ ``InstanceNormCase``
    in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    dims: CppValue
    epsilon: CppValue


def _instancenorm_case(cfg: InstanceNormConfig, job: Job) -> InstanceNormCase:
    spatial = list(cfg.shape[2:])
    view = [1, cfg.instances] + (spatial + [1] if len(spatial) == 1 else
                                 spatial if len(spatial) == 2 else [math.prod(spatial), 1])
    return InstanceNormCase(job=job_init(job), dims=c_array(view, 4), epsilon=cpp_num(float(cfg.epsilon)))


def _instancenorm(c: Ctx) -> Candidate:
    cfg, F = c.cfg, functional(c)
    x = c.randn(cfg.shape)
    g, b = c.randn((cfg.shape[1],)), c.randn((cfg.shape[1],))
    return Candidate("torch:aten::instance_norm", algo_label(c),
                     lambda: F.instance_norm(x, weight=g, bias=b, eps=cfg.epsilon), numel(cfg.shape))


def _min_bytes(cfg: InstanceNormConfig, ib: int, ob: int) -> int:
    """x, scale and B read once, y written once (bytes): the compulsory traffic of the roofline model
    (Williams et al., "Roofline", CACM 2009); a two-pass kernel that reads x again for the normalisation
    moves more whenever an instance does not stay in cache."""
    return ib * (numel(cfg.shape) + 2 * cfg.shape[1]) + ob * numel(cfg.output_shape())


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    # the first InstanceNormalization of the fast-neural-style network (Johnson et al. 2016; ONNX model
    # zoo's style-transfer models) on a 224x224 image
    example=InstanceNormConfig(shape=(1, 32, 224, 224), epsilon=1e-5),
    name="InstanceNorm", config=InstanceNormConfig, template="instancenorm.cpp.j2", case=_instancenorm_case,
    min_bytes=_min_bytes, torch=_instancenorm, onnx={"InstanceNormalization": _map_instancenorm},
    aten={"InstanceNormalization": ("aten::instance_norm",)},
    nhwc=False, image=False)
