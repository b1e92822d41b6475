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
    inference: no softmax statistics unless ``stats``; cuDNN developer guide, "Scaled Dot Product
    Attention").

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
    h_kv: the heads of K and V (grouped-query attention: h a multiple of h_kv, each K/V head serving
    h / h_kv query heads, cuDNN's h_q % h_k == 0; PyTorch's ``enable_gqa``); 0 = h (no pattern the
    finder accepts gives GQA yet: it is set where a config is made directly).
    stats: the training-mode forward (issue 26): it also writes the softmax statistics, float32
    (b, h, s_q, 1), the logsumexp of every row that the backward reads (cudnn-frontend
    ``SDPA_attributes::set_generate_stats(true)``; PyTorch's SDPA on inputs that require grad,
    whose fused kernels return the logsumexp for autograd).
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
    h_kv: int = dataclasses.field(default=0, metadata=OPTIONAL)
    stats: bool = dataclasses.field(default=False, metadata=OPTIONAL)

    def __post_init__(self):
        if self.h_kv and (self.h_kv < 0 or self.h % self.h_kv):
            raise ValueError(f"SDPA: h {self.h} is not a multiple of the K/V heads h_kv {self.h_kv}")

    @property
    def kv_heads(self) -> int:
        """The heads of K and V (h without GQA)."""
        return self.h_kv or self.h

    def strides(self) -> tuple[Shape, Shape, Shape, Shape]:
        """(Q, K, V, O) element strides over (b, h, s, d): the given ones or packed."""
        return view_strides(self, self.input_shapes() + [self.output_shape()])

    def input_shapes(self):
        return [(self.b, self.h, self.s_q, self.d), (self.b, self.kv_heads, self.s_kv, self.d),
                (self.b, self.kv_heads, self.s_kv, self.d_v)]

    def output_shape(self):
        return (self.b, self.h, self.s_q, self.d_v)

    def flops(self):
        s = self.b * self.h * self.s_q * self.s_kv
        return 2 * s * (self.d + self.d_v) + 7 * s

    def describe(self):
        return describe_attention("SDPA", self, " +stats" if self.stats else "")


def view_strides(cfg, shapes) -> tuple[Shape, Shape, Shape, Shape]:
    """(Q, K, V, O) element strides of an attention config (its ``q_strides`` ... ``o_strides``, () =
    packed) over ``shapes`` (Q, K, V, O)."""
    return tuple(tuple(given) if given else packed_strides(shape) for given, shape in
                 zip((cfg.q_strides, cfg.k_strides, cfg.v_strides, cfg.o_strides), shapes))


def describe_attention(name: str, cfg, extra: str = "") -> str:
    """``NAME(b.. h.. [hkv..] sq.. skv.. d.. [dv..] scale .. [mask]EXTRA)`` of an attention config
    (SDPA's and SdpaBwd's)."""
    m = {"none": "", "causal": " causal", "bias": " bias " + "x".join(map(str, cfg.bias))}[cfg.mask]
    gqa = f" hkv{cfg.h_kv}" if cfg.h_kv and cfg.h_kv != cfg.h else ""
    return (f"{name}(b{cfg.b} h{cfg.h}{gqa} sq{cfg.s_q} skv{cfg.s_kv} d{cfg.d}"
            f"{'' if cfg.d_v == cfg.d else f' dv{cfg.d_v}'} scale {cfg.scale:.4g}{m}{extra})")


#: the C++ SdpaMask of each mask (templates/sdpa.cpp.j2, templates/sdpa_backward.cpp.j2)
SDPA_MASK_CPP = {"none": "SdpaMask::NONE", "causal": "SdpaMask::CAUSAL", "bias": "SdpaMask::BIAS"}


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
    h_kv: CppValue
    stats: CppValue


def _min_bytes(cfg: SdpaConfig, ib: int, ob: int) -> int:
    """Q, K and V read once at ``ib`` bytes per element, O written once at ``ob`` (:func:`io_bytes`), and
    with ``stats`` the float32 (b, h, s_q, 1) statistics written once (bytes; the compulsory traffic,
    Williams et al., "Roofline", CACM 2009)."""
    return io_bytes(cfg, ib, ob) + (4 * cfg.b * cfg.h * cfg.s_q if cfg.stats else 0)


def _sdpa_case(cfg: SdpaConfig, job: Job) -> SdpaCase:
    bias = list(cfg.bias) if cfg.mask == "bias" else [1, 1, 1, 1]
    q, k, v, o = cfg.strides()
    return SdpaCase(job=job_init(job), b=cfg.b, h=cfg.h, s_q=cfg.s_q, s_kv=cfg.s_kv, d=cfg.d, d_v=cfg.d_v, scale=cpp_num(float(cfg.scale)), mask=SDPA_MASK_CPP[cfg.mask], bias=c_array(bias, 4, 1), strides=c_array(list(q) + list(k) + list(v) + list(o), 16), h_kv=cfg.kv_heads, stats=cpp_num(cfg.stats))


def with_autograd(torch, fn):
    """``fn`` run with autograd recording (outside the inference mode the framework's timing runs in,
    grad enabled): the tensors it makes can require grad, and SDPA on them takes PyTorch's training
    path (its fused kernels return the logsumexp autograd saves). Used by the training forward here
    and by :mod:`benanza.kinds.sdpa_backward`'s candidate."""
    return torch.enable_grad()(torch.inference_mode(False)(fn))


def _sdpa(c: Ctx) -> Candidate:
    """``F.scaled_dot_product_attention`` on Q, K, V as the pattern's views (``enable_gqa`` with h_kv <
    h); with ``stats`` (the training forward) on inputs that require grad, under autograd."""
    cfg, F = c.cfg, functional(c)
    qs, ks, vs, os_ = cfg.strides()
    shapes = cfg.input_shapes() + [cfg.output_shape()]

    def view(shape, strides, grad=False):
        extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
        base = c.randn((extent,))
        return (base.requires_grad_() if grad else base).as_strided(shape, strides)

    def setup():
        return {"qkv": [view(s, st, cfg.stats) for s, st in zip(shapes[:3], (qs, ks, vs))],
                "out": view(shapes[3], os_), "mask": c.randn(cfg.bias) if cfg.mask == "bias" else None}
    t = with_autograd(c.torch, setup)() if cfg.stats else setup()
    q, k, v = (t["qkv"][i] for i in range(3))
    out, mask = t["out"], t["mask"]
    causal = cfg.mask == "causal"
    scale = float(cfg.scale)
    o_dims = shapes[3]
    gqa = {"enable_gqa": True} if cfg.kv_heads != cfg.h else {}

    def run():
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, **gqa)
        if all(d == 1 or st == want for d, st, want in zip(o_dims, o.stride(), os_)):
            return o  # written where the consumer reads it
        out.copy_(o.detach())  # the layout the consumer reads: PyTorch copies there too
        return out
    strided = bool(cfg.q_strides or cfg.k_strides or cfg.v_strides or cfg.o_strides)
    notes = ["Q, K, V read as strided views; O copied where its layout differs"] if strided else []
    if cfg.stats:
        notes.append("training forward: Q, K, V require grad (autograd records the call; the fused kernels save the logsumexp)")
    return Candidate("torch:aten::scaled_dot_product_attention", "default",
                     with_autograd(c.torch, run) if cfg.stats else run, numel(cfg.output_shape()),
                     "; ".join(notes), {"strided": strided, **({"training": True} if cfg.stats else {})})


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=SdpaConfig(b=1, h=24, s_q=49, s_kv=49, d=32, d_v=32, scale=0.176777, mask='bias', bias=(1, 24, 49, 49),
        q_strides=(37632, 32, 2304, 1), k_strides=(37632, 32, 2304, 1), v_strides=(37632, 32, 2304, 1),
        o_strides=(37632, 32, 768, 1)),
    name="SDPA", config=SdpaConfig, template="sdpa.cpp.j2", case=_sdpa_case, min_bytes=_min_bytes,
    torch=_sdpa, onnx={},
    typed_ops=(), fused_from=('MatMul', 'Softmax', 'MatMul'),
    aten={},
    nhwc=False, image=False)
