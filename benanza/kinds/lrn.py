"""LRN layers. LRN across channels: cudnnLRNCrossChannelForward (same formula as ONNX: alpha/size).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need


@dataclass(frozen=True)
class LRNConfig(LayerConfig):
    """LRN across channels: cudnnLRNCrossChannelForward (same formula as ONNX: alpha/size)."""

    kind: ClassVar[str] = "LRN"
    shape: Shape
    size: int
    alpha: float
    beta: float
    bias: float

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return numel(self.shape) * (2 * self.size + 3)


def _map_lrn(node, ctx, attrs):
    x = need(ctx.shape(node.input[0]), "input")
    if len(x) != 4:
        raise Unsupported("LRN on a tensor that is not 4-D")
    size = int(attrs["size"])
    if not 1 <= size <= 16:
        raise Unsupported(f"LRN size {size} outside cuDNN's 1..16")
    return LRNConfig(shape=tuple(x), size=size, alpha=float(attrs.get("alpha", 1e-4)),
                       beta=float(attrs.get("beta", 0.75)), bias=float(attrs.get("bias", 1.0)))


@dataclass(frozen=True)
class LRNCase(Case):
    """One row of ``templates/lrn.cpp.j2``'s case table: the fields of its C++ ``LRNCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    dims: CppValue
    size: CppValue
    alpha: CppValue
    beta: CppValue
    bias: CppValue


def lrn_case(cfg: LRNConfig, job: Job) -> LRNCase:
    """The row of `templates/lrn.cpp.j2`'s case table of ``cfg`` (also the forward half of an LRN
    gradient job, :mod:`benanza.kinds.lrn_backward`)."""
    return LRNCase(job=job_init(job), dims=c_array(cfg.shape, 4), size=cfg.size, alpha=cpp_num(cfg.alpha), beta=cpp_num(cfg.beta), bias=cpp_num(cfg.bias))


def _lrn(c: Ctx) -> Candidate:
    cfg, F = c.cfg, functional(c)
    x = c.randn(cfg.shape)
    return Candidate("torch:aten::local_response_norm", algo_label(c),
                     lambda: F.local_response_norm(x, cfg.size, cfg.alpha, cfg.beta, cfg.bias), numel(cfg.shape))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=LRNConfig(shape=(1, 64, 56, 56), size=5, alpha=0.0001, beta=0.75, bias=1.0),
    name="LRN", config=LRNConfig, template="lrn.cpp.j2", case=lrn_case, min_bytes=io_bytes,
    torch=_lrn, onnx={"LRN": _map_lrn},
    typed_ops=(), fused_from=(),
    aten={"LRN": ('aten::local_response_norm',)},
    nhwc=False, image=True)
