"""SDPA layers. Scaled dot-product attention as one fused call: ``O = softmax(scale * Q K^T (+ mask)) V``,

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, OPTIONAL, Shape, io_bytes, numel
from benanza.kinds.copy import packed_strides
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, functional


SDPA_MASKS = ("none", "causal", "bias")


@dataclass(frozen=True)
class SdpaConfig(LayerConfig):
    """Scaled dot-product attention as one fused call: ``O = softmax(scale * Q K^T (+ mask)) V``,
    cuDNN's fused flash attention through the cuDNN graph API (cudnn-frontend ``Graph::sdpa``,
    inference: no softmax statistics; cuDNN developer guide, "Scaled Dot Product Attention").

    A fusion candidate only: it stands for the layers MatMul(Q, K^T) -> [Mul/Div by a constant] ->
    [Add mask] -> Softmax(last axis) -> MatMul(., V) of an exported attention (and the Transpose
    that makes K^T from K, and the constant scale of Q and K^T that torch's SDPA decomposition
    emits, when those feed only the pattern), so its measurements are compared with the sum of
    those layers, never with one of them (``model._find_attention``).

    Q: (b, h, s_q, d); K: (b, h, s_kv, d); V: (b, h, s_kv, d_v); O: (b, h, s_q, d_v), all packed,
    d innermost (the layout cuDNN reads; K^T of the graph is K with d innermost). Leading dims of
    rank-3 tensors are b (h = 1). scale: the product of the pattern's constant factors. mask:
    "none"; "causal" (a constant lower-triangular additive mask: cuDNN's causal masking, no bias
    read); "bias" (an additive tensor of shape ``bias``, 4-D, each dim 1 or the full size).
    cuDNN has fused engines for FP16/BF16 (and FP8) data only: fp32/tf32 jobs record what cuDNN
    says (not_supported) and the fused LBL then keeps the unfused sum.
    FLOPs: 2*b*h*s_q*s_kv*(d + d_v) + 7*b*h*s_q*s_kv (scale, mask, softmax).
    """

    kind: ClassVar[str] = "SDPA"
    tensor_cores: ClassVar[bool] = True
    b: int
    h: int
    s_q: int
    s_kv: int
    d: int
    d_v: int
    scale: float
    mask: str = "none"
    bias: Shape = ()
    #: element strides of Q, K, V and O over (b, h, s, d) when the pattern reads its operands as
    #: views of other tensors and writes its output into one (head-split and head-merge
    #: Transposes and Reshapes absorbed, see ``model._find_attention``); () = packed. d's stride
    #: is 1 in every view the pattern finder accepts.
    q_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    k_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    v_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    o_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)

    def strides(self) -> tuple[Shape, Shape, Shape, Shape]:
        """(Q, K, V, O) element strides over (b, h, s, d): the given ones or packed."""
        out = []
        for given, shape in zip((self.q_strides, self.k_strides, self.v_strides, self.o_strides),
                                self.input_shapes() + [self.output_shape()]):
            out.append(tuple(given) if given else packed_strides(shape))
        return tuple(out)

    def input_shapes(self):
        return [(self.b, self.h, self.s_q, self.d), (self.b, self.h, self.s_kv, self.d),
                (self.b, self.h, self.s_kv, self.d_v)]

    def output_shape(self):
        return (self.b, self.h, self.s_q, self.d_v)

    def flops(self):
        s = self.b * self.h * self.s_q * self.s_kv
        return 2 * s * (self.d + self.d_v) + 7 * s

    def describe(self):
        m = {"none": "", "causal": " causal", "bias": " bias " + "x".join(map(str, self.bias))}[self.mask]
        return (f"SDPA(b{self.b} h{self.h} sq{self.s_q} skv{self.s_kv} d{self.d}"
                f"{'' if self.d_v == self.d else f' dv{self.d_v}'} scale {self.scale:.4g}{m})")


_SDPA_MASK = {"none": "SdpaMask::NONE", "causal": "SdpaMask::CAUSAL", "bias": "SdpaMask::BIAS"}


@dataclass(frozen=True)
class SdpaCase(Case):
    """One row of ``templates/sdpa.cpp.j2``'s case table: the fields of its C++ ``SdpaCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    b: CppValue
    h: CppValue
    s_q: CppValue
    s_kv: CppValue
    d: CppValue
    d_v: CppValue
    scale: CppValue
    mask: CppValue
    bias: CppValue
    strides: CppValue


def _sdpa_case(cfg: SdpaConfig, job: Job) -> SdpaCase:
    bias = list(cfg.bias) if cfg.mask == "bias" else [1, 1, 1, 1]
    q, k, v, o = cfg.strides()
    return SdpaCase(job=job_init(job), b=cfg.b, h=cfg.h, s_q=cfg.s_q, s_kv=cfg.s_kv, d=cfg.d, d_v=cfg.d_v, scale=cpp_num(float(cfg.scale)), mask=_SDPA_MASK[cfg.mask], bias=c_array(bias, 4, 1), strides=c_array(list(q) + list(k) + list(v) + list(o), 16))


def _sdpa(c: Ctx) -> Candidate:
    cfg, F = c.cfg, functional(c)
    qs, ks, vs, os_ = cfg.strides()
    shapes = cfg.input_shapes() + [cfg.output_shape()]

    def view(shape, strides):
        extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
        return c.randn((extent,)).as_strided(shape, strides)
    q, k, v = (view(s, st) for s, st in zip(shapes[:3], (qs, ks, vs)))
    out = view(shapes[3], os_)
    mask = None
    if cfg.mask == "bias":
        mask = c.randn(cfg.bias)
    causal = cfg.mask == "causal"
    scale = float(cfg.scale)
    o_dims = shapes[3]

    def run():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale)
        if all(d == 1 or st == want for d, st, want in zip(o_dims, o.stride(), os_)):
            return o  # written where the consumer reads it
        out.copy_(o)  # the layout the consumer reads: PyTorch copies there too
        return out
    strided = bool(cfg.q_strides or cfg.k_strides or cfg.v_strides or cfg.o_strides)
    return Candidate("torch:aten::scaled_dot_product_attention", "default", run, numel(cfg.output_shape()),
                     "Q, K, V read as strided views; O copied where its layout differs" if strided else "",
                     {"strided": strided})


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=SdpaConfig(b=1, h=24, s_q=49, s_kv=49, d=32, d_v=32, scale=0.176777, mask='bias', bias=(1, 24, 49, 49),
        q_strides=(37632, 32, 2304, 1), k_strides=(37632, 32, 2304, 1), v_strides=(37632, 32, 2304, 1),
        o_strides=(37632, 32, 768, 1)),
    name="SDPA", config=SdpaConfig, template="sdpa.cpp.j2", case=_sdpa_case, min_bytes=io_bytes,
    torch=_sdpa, onnx={},
    typed_ops=(), fused_from=('MatMul', 'Softmax', 'MatMul'),
    aten={},
    nhwc=False, image=False)
