"""SDPA layers. Scaled dot-product attention as one fused call: ``O = softmax(scale * Q K^T (+ mask)) V``,

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import math
import re
import warnings

import numpy as np

from benanza.kinds import views as V
from benanza.kinds.base import Job, Kind, LayerConfig, OPTIONAL, Shape, io_bytes, numel
from benanza.kinds.copy import CopyConfig, packed_strides
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, functional
from benanza.kinds.gather import GatherConfig
from benanza.kinds.onnx_map import MS_DOMAIN, ContribOp, MapContext, Part, Unsupported, contrib_doc, need
from benanza.kinds.patterns import Graph, Node, Pattern
from benanza.kinds.softmax import SoftmaxConfig


#: "causal_bottom_right" last: the keys of configs with the first three are unchanged
SDPA_MASKS = ("none", "causal", "bias", "causal_bottom_right")

#: tokens per page of the paged KV cache a decode attention is also timed over (:attr:`SdpaConfig.kv_page`'s
#: default: TensorRT-LLM's ``tokens_per_block`` default; vLLM's block sizes go up to it; docs/llm.md)
PAGED_KV_PAGE = 64

#: the layout of the paged family's records (:data:`benanza.kinds.base.WHATIF_LAYOUTS`: a what-if, never
#: served to an LBL)
PAGED_KV_LAYOUT = "PAGED_KV"

#: the seed of the page table's shuffle (``kPagedKvSeed`` of ``cpp/include/benanza/paged_kv.hpp``)
PAGE_TABLE_SEED = 27

#: the largest page table entry and sequence length cuDNN's int32 tensors hold
_INT32_MAX = 2 ** 31 - 1


@dataclass(frozen=True)
class SdpaConfig(LayerConfig):
    """Scaled dot-product attention as one fused call: ``O = softmax(scale * Q K^T (+ mask)) V``,
    cuDNN's fused flash attention through the cuDNN graph API (cudnn-frontend ``Graph::sdpa``,
    inference: no softmax statistics unless ``stats``; cuDNN developer guide, "Scaled Dot Product
    Attention").

    A layer of its own for ONNX's ``Attention`` (opset 23, :func:`_map_attention`) and ONNX Runtime's
    ``com.microsoft`` ``GroupQueryAttention`` (:func:`_map_gqa`), ``MultiHeadAttention`` (:func:`_map_mha`,
    after its bias adds) and ``Attention`` (:func:`_map_ms_attention`, after its QKV Gemm); otherwise a
    fusion candidate: it stands for the layers MatMul(Q, K^T) -> [Mul/Div by a constant] ->
    [Add mask] -> Softmax(last axis) -> MatMul(., V) of an exported attention (and the Transpose
    that makes K^T from K, and the constant scale of Q and K^T that torch's SDPA decomposition
    emits, when those feed only the pattern), so its measurements are compared with the sum of
    those layers, never with one of them (:func:`find_attention`).

    Q: (b, h, s_q, d); K: (b, h, s_kv, d); V: (b, h, s_kv, d_v); O: (b, h, s_q, d_v), all packed,
    d innermost (the layout cuDNN reads; K^T of the graph is K with d innermost). Leading dims of
    rank-3 tensors are b (h = 1). scale: the product of the pattern's constant factors. mask:
    "none"; "causal" (a constant lower-triangular additive mask: cuDNN's causal masking, no bias
    read; key i sees keys j <= i, aligned top-left: cudnn-frontend ``set_causal_mask``);
    "causal_bottom_right" (key i sees keys j <= i + s_kv - s_q: a query block at the end of the keys,
    decode against a KV cache; cudnn-frontend ``set_causal_mask_bottom_right``, PyTorch's
    ``torch.nn.attention.bias.causal_lower_right``; equal to "causal" where s_q == s_kv, which the
    mappers then write); "bias" (an additive tensor of shape ``bias``, 4-D, each dim 1 or the full size).
    cuDNN has fused engines for FP16/BF16 (and FP8) data only: fp32/tf32 jobs record what cuDNN
    says (not_supported) and the fused LBL then keeps the unfused sum. An fp8 analysis also times
    the group in FP8 (:data:`benanza.kinds.FP8_KINDS`): cudnn-frontend ``Graph::sdpa_fp8``, Q, K, V
    and O in E4M3 with per-tensor descales and scales (of 1: the values do not change the time) and
    the amax of S and O written, beside its fp16 job; the faster one serves the analysis, and a
    config cuDNN's FP8 engines refuse is recorded as not_supported there.
    h_kv: the heads of K and V (grouped-query attention: h a multiple of h_kv, each K/V head serving
    h / h_kv query heads, cuDNN's h_q % h_k == 0; PyTorch's ``enable_gqa``); 0 = h. Set from ONNX
    ``Attention``'s ``kv_num_heads`` or K's heads, and where the finders absorb the repeat of K and V
    (Unsqueeze -> Expand -> Reshape, transformers' ``repeat_kv``) into the group.
    stats: the training-mode forward (docs/training.md): it also writes the softmax statistics, float32
    (b, h, s_q, 1), the logsumexp of every row that the backward reads (cudnn-frontend
    ``SDPA_attributes::set_generate_stats(true)``; PyTorch's SDPA on inputs that require grad,
    whose fused kernels return the logsumexp for autograd).
    FLOPs: 2*b*h*s_q*s_kv*(d + d_v) + 7*b*h*s_q*s_kv (scale, mask, softmax); with a ``window`` over
    the pairs it keeps, with a ``sink`` 4*b*h*s_q more (:meth:`flops`).
    window / sink: a sliding window (the causal mask keeping each query's last ``window`` keys) and
    an attention sink (a learned logit per head in the softmax's normaliser), found in decomposed
    attention (:func:`find_attention`: a band mask, a Concat of the sink column, the Slice dropping it)
    and in ONNX ``Attention``'s mask; cuDNN's left bound and sink token. PyTorch's SDPA has no sink
    (its candidate records not_supported) and takes the window as a boolean band.
    Paged KV cache (docs/llm.md): a decode config (:func:`is_decode`, s_kv > s_q) is also timed over a
    paged cache of ``kv_page`` tokens a page (default :data:`PAGED_KV_PAGE`; containers [b *
    ceil(s_kv / page), h_kv, page, d], :func:`page_table`, bytes :func:`paged_kv_bytes`), cudnn-frontend
    ``set_paged_attention_k_table``/``_v_table``, algorithms ``paged_kv<page>:<engine config>``,
    note "cuDNN SDPA, paged KV cache (page 64)". Its rows carry layout ``PAGED_KV``
    (:data:`benanza.kinds.base.WHATIF_LAYOUTS`): a memory layout of the cache that no exported model
    feeds (ONNX ``Attention`` and the contrib ops read a contiguous cache), so, as the
    analyses take a layer's measurements only in the layouts asked for (NCHW, NHWC; docs/layers.md), they never
    enter the LBL: reported as a what-if. A config the family does not fit records one skipped
    row with the reason (:func:`paged_kv_skip`), never a time.
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
    #: Transposes and Reshapes absorbed, see :func:`find_attention`); () = packed. d's stride
    #: is 1 in every view the pattern finder accepts.
    q_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    k_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    v_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    o_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    h_kv: int = dataclasses.field(default=0, metadata=OPTIONAL)
    stats: bool = dataclasses.field(default=False, metadata=OPTIONAL)
    #: a benchmark knob, not the layer's: tokens per page of the paged KV cache a decode config
    #: (:func:`is_decode`) is also timed over (:func:`paged_kv_skip`), default :data:`PAGED_KV_PAGE`
    kv_page: int = dataclasses.field(default=PAGED_KV_PAGE, metadata=OPTIONAL)
    #: sliding-window attention (Mistral's and GPT-OSS's sliding layers): with a causal mask, query i
    #: sees only the last ``window`` keys its mask keeps, its own diagonal included (key j kept when
    #: i + off - window < j <= i + off, off = 0 top-left, s_kv - s_q bottom-right; transformers'
    #: ``sliding_window``, cudnn-frontend ``set_diagonal_band_left_bound``); 0 = none. Set only where
    #: the window drops keys (:func:`effective_window`), so equal attentions share one key
    window: int = dataclasses.field(default=0, metadata=OPTIONAL)
    #: an attention sink (GPT-OSS): one learned logit per head joins each row of the softmax as an
    #: extra column and is dropped after it, so the row's probabilities sum to less than 1
    #: (transformers' ``models/gpt_oss`` ``eager_attention_forward``; cudnn-frontend ``set_sink_token``,
    #: float32 (1, h, 1, 1), cuDNN 9.13+)
    sink: bool = dataclasses.field(default=False, metadata=OPTIONAL)
    #: logit soft-capping (Gemma-2's ``attn_logit_softcapping``): the scaled scores s become
    #: ``cap * tanh(s / cap)`` before the mask (transformers' ``models/gemma2`` ``eager_attention_forward``;
    #: cudnn-frontend's ``attn::score_modifiers::Softcap`` as the SDPA's score modifier); 0 = none
    softcap: float = dataclasses.field(default=0.0, metadata=OPTIONAL)
    #: V is the first d_v features of K's rows, one memory read once: MLA's latent cache in the weight-absorbed
    #: decode (:mod:`benanza.processing.mla`; FlashMLA's ``kcache`` of head dim 576 whose first 512 features are
    #: the values, vLLM's MLA backend), found where the group's V is a Slice of the tensor its K repeats
    #: (:func:`_sliced_values`); its bytes are not counted again (:func:`_min_bytes`) and the suite and the
    #: PyTorch candidate read V inside K's buffer. Needs d_v <= d and V's strides equal to K's
    v_in_k: bool = dataclasses.field(default=False, metadata=OPTIONAL)

    def __post_init__(self):
        if self.v_in_k and (self.d_v > self.d or self.v_strides != (self.k_strides or
                                                                    view_strides(self, self.input_shapes())[1])):
            raise ValueError(f"SDPA: v_in_k needs d_v {self.d_v} <= d {self.d} and V read with K's strides")
        if self.softcap < 0:
            raise ValueError(f"SDPA: softcap {self.softcap} is not 0 or a positive cap")
        if self.mask not in SDPA_MASKS:
            raise ValueError(f"SDPA: mask {self.mask!r} is not one of {', '.join(SDPA_MASKS)}")
        if self.window < 0 or (self.window and self.mask not in ("causal", "causal_bottom_right")):
            raise ValueError(f"SDPA: window {self.window} is not 0 or a positive number of keys with a causal mask "
                             f"(mask {self.mask!r})")
        if self.kv_page <= 0:
            raise ValueError(f"SDPA: kv_page {self.kv_page} is not a positive number of tokens")
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
        """2*b*h*P*(d + d_v) + 7*b*h*P, P the (query, key) pairs computed: every s_q x s_kv pair (a causal
        half counted in full), but with a ``window`` only the pairs inside it (:func:`kept_pairs`: a
        windowed kernel skips the tiles outside the band, the point of the window); with a ``sink``,
        4*b*h*s_q more (the sink's max, subtract, exp and add in each row's softmax); with a ``softcap``,
        3*b*h*P more (the divide, tanh and multiply of each score)."""
        s = self.b * self.h * (kept_pairs(self) if self.window else self.s_q * self.s_kv)
        return 2 * s * (self.d + self.d_v) + 7 * s + (4 * self.b * self.h * self.s_q if self.sink else 0) + \
            (3 * s if self.softcap else 0)

    def describe(self):
        extra = (f" window {self.window}" if self.window else "") + (" sink" if self.sink else "") + \
            (f" softcap {self.softcap:g}" if self.softcap else "") + (" V in K" if self.v_in_k else "")
        return describe_attention("SDPA", self, extra + (" +stats" if self.stats else ""))


def kept_pairs(cfg) -> int:
    """The (query, key) pairs an attention config's mask keeps, per (batch, head): all s_q x s_kv for
    "none" and "bias"; for "causal" (top-left: query i sees keys j <= i) and "causal_bottom_right"
    (j <= i + s_kv - s_q) the keys up to the diagonal, and with a ``window`` w only the last w of them
    (j > i + off - w; cudnn-frontend's ``set_causal_mask`` / ``set_causal_mask_bottom_right`` /
    ``set_diagonal_band_left_bound``)."""
    sq, skv = cfg.s_q, cfg.s_kv
    if cfg.mask not in ("causal", "causal_bottom_right"):
        return sq * skv
    off = 0 if cfg.mask == "causal" else skv - sq
    w = getattr(cfg, "window", 0)
    total = 0
    for i in range(sq):
        hi = min(i + off, skv - 1)
        lo = max(0, i + off - w + 1) if w else 0
        total += max(hi - lo + 1, 0)
    return total


def effective_window(window: int, s_q: int, s_kv: int, mask: str) -> int:
    """``window`` where it drops keys under the causal ``mask`` of ``s_q`` queries and ``s_kv`` keys, else
    0 (query i keeps keys i + off - window < j <= i + off, off = s_kv - s_q bottom-right, 0 top-left:
    the window drops a key iff i + off - window >= 0 for some i, i.e. window <= s_q - 1 + off; a decode
    step over transformers' sliding cache reads exactly ``window`` keys, none dropped)."""
    off = s_kv - s_q if mask == "causal_bottom_right" else 0
    return window if 0 < window <= s_q - 1 + off else 0


def view_strides(cfg, shapes) -> tuple[Shape, Shape, Shape, Shape]:
    """(Q, K, V, O) element strides of an attention config (its ``q_strides`` ... ``o_strides``, () =
    packed) over ``shapes`` (Q, K, V, O)."""
    return tuple(tuple(given) if given else packed_strides(shape) for given, shape in
                 zip((cfg.q_strides, cfg.k_strides, cfg.v_strides, cfg.o_strides), shapes))


def describe_attention(name: str, cfg, extra: str = "") -> str:
    """``NAME(b.. h.. [hkv..] sq.. skv.. d.. [dv..] scale .. [mask]EXTRA)`` of an attention config
    (SDPA's and SdpaBwd's)."""
    m = {"none": "", "causal": " causal", "causal_bottom_right": " causal bottom-right",
         "bias": " bias " + "x".join(map(str, cfg.bias))}[cfg.mask]
    gqa = f" hkv{cfg.h_kv}" if cfg.h_kv and cfg.h_kv != cfg.h else ""
    return (f"{name}(b{cfg.b} h{cfg.h}{gqa} sq{cfg.s_q} skv{cfg.s_kv} d{cfg.d}"
            f"{'' if cfg.d_v == cfg.d else f' dv{cfg.d_v}'} scale {cfg.scale:.4g}{m}{extra})")


def causal_mask_of(values, past: int = 0, window: int = 0) -> bool:
    """Whether a constant mask (its trailing two dims (s_q, s_kv), any leading ones) is the causal mask
    of query i seeing keys j <= i + ``past`` (with a ``window`` > 0, only keys j > i + past - window: a
    sliding window): a boolean mask True exactly there (ONNX ``Attention``'s and torch's convention,
    True = attend), or an additive one 0 there and <= -1e4 elsewhere (the finite "minus infinity"
    exporters write, e.g. float16's lowest)."""
    v = np.asarray(values)
    if v.ndim < 2 or v.shape[-1] < 2 or v.shape[-2] < 1:
        return False
    v = v.reshape(-1, v.shape[-2], v.shape[-1])
    seen = np.tril(np.ones(v.shape[-2:], dtype=bool), past)
    if window > 0:
        seen &= np.triu(np.ones(v.shape[-2:], dtype=bool), past - window + 1)
    if v.dtype == np.bool_:
        return bool(np.all(v == seen))
    v = v.astype(np.float64)
    return bool(np.all(v[:, seen] == 0) and np.all(v[:, ~seen] <= -1e4))


def causal_window_of(values, past: int = 0) -> int | None:
    """The sliding window of a constant causal mask (:func:`causal_mask_of`) of queries after ``past``
    keys: 0 for the plain causal mask, w > 0 for the causal mask that keeps only each query's last w
    keys and drops some (transformers' sliding-window mask, ``kv_idx > q_idx - sliding_window``),
    None for any other mask. w is read as the most keys a query keeps, then the whole mask checked."""
    if causal_mask_of(values, past):
        return 0
    v = np.asarray(values)
    if v.ndim < 2 or v.shape[-1] < 2:
        return None
    kept = v if v.dtype == np.bool_ else np.asarray(v, dtype=np.float64) == 0
    w = int(np.max(np.sum(kept.reshape(-1, v.shape[-1]), axis=-1), initial=0))
    return w if w > 0 and causal_mask_of(values, past, w) else None


def _static(ctx: MapContext, name: str):
    """The value of static tensor ``name``, evaluated when folding left it without one (a mask of
    more than 1 Mi positions: :meth:`MapContext.static_value`); a constant's value whether or not it
    is static; else None."""
    v = ctx.value(name)
    if v is not None or name not in ctx.static:
        return v
    read = getattr(ctx, "static_value", None)
    return read(name) if read is not None else None


def _key_padding_and_causal(ctx: MapContext, mask: str, s_q: int, past: int) -> int | None:
    """The window (:func:`causal_window_of`) of ``mask`` made by And(constant causal mask, key padding
    mask) (torch.export's SDPA masks, transformers' causal or sliding-window mask and the model's
    ``attention_mask`` input): the padding term has extent 1 over the queries (``(b, 1, 1, s_kv)``),
    cuDNN's padding mask (``set_padding_mask`` with per-sequence key lengths); the benchmark times
    full lengths, i.e. the causal mask alone. None when ``mask`` is not such an And."""
    node = getattr(ctx, "producer", {}).get(mask)
    if node is None or node.op_type != "And" or len(node.input) != 2:
        return None
    consts = [_static(ctx, i) for i in node.input]
    if sum(c is not None for c in consts) != 1:
        return None
    i = 0 if consts[0] is not None else 1
    c, other = consts[i], ctx.shape(node.input[1 - i])
    if c.ndim < 2 or c.shape[-2] != s_q or other is None or (len(other) >= 2 and other[-2] != 1):
        return None
    return causal_window_of(c, past)


def causal_window_tensor(ctx: MapContext, name: str, s_q: int, past: int = 0) -> int | None:
    """The window of tensor ``name`` as a causal mask of ``s_q`` queries after ``past`` keys (0: plain
    causal; w > 0: a sliding window of w keys, :func:`causal_window_of`; None: not a causal mask): its
    constant values, Where(cond, 0, <= -1e4) of such a boolean ``cond`` (the additive mask
    torch.export and TorchScript build), an Expand of one over its leading dims (TorchScript's), or
    :func:`_key_padding_and_causal`'s And."""
    v = _static(ctx, name)
    if v is not None:
        return causal_window_of(v, past) if v.ndim >= 2 and v.shape[-2] == s_q else None
    node = getattr(ctx, "producer", {}).get(name)
    if node is not None and node.op_type == "Where" and len(node.input) == 3:
        x, y = _static(ctx, node.input[1]), _static(ctx, node.input[2])
        if x is not None and y is not None and x.size == 1 and y.size == 1 and float(x.reshape(-1)[0]) == 0.0 \
                and float(y.reshape(-1)[0]) <= -1e4:
            return causal_window_tensor(ctx, node.input[0], s_q, past)
        return None
    if node is not None and node.op_type == "Expand" and node.input:
        # Expand repeats a mask over broadcast dims (TorchScript's causal mask: Expand(And(causal
        # triangle, key padding), (b, 1, s_q, s_kv))): the same values where it is read
        src = ctx.shape(node.input[0])
        ok = src is not None and len(src) >= 2 and src[-2] == s_q
        return causal_window_tensor(ctx, node.input[0], s_q, past) if ok else None
    return _key_padding_and_causal(ctx, name, s_q, past)


def causal_mask_tensor(ctx: MapContext, name: str, s_q: int, past: int = 0) -> bool:
    """Whether tensor ``name`` is the (plain) causal mask of ``s_q`` queries after ``past`` keys
    (:func:`causal_window_tensor` without a window)."""
    return causal_window_tensor(ctx, name, s_q, past) == 0


def sliding_window_of(ctx: MapContext, mask: str, full: Shape, past: int = 0) -> int:
    """The sliding window of an attention's mask tensor ``mask`` over scores of shape ``full`` (b, h,
    s_q, s_kv) whose queries follow ``past`` keys: w > 0 where it is a causal band that drops keys
    (:func:`causal_window_tensor`, :func:`effective_window`), else 0 (no window, or not a band)."""
    shape = ctx.shape(mask)
    b, h, s_q, s_kv = full
    if shape is None or tuple(shape[-2:]) != (s_q, s_kv):
        return 0
    w = causal_window_tensor(ctx, mask, s_q, past)
    return effective_window(w, s_q, s_kv, "causal" if past == 0 else "causal_bottom_right") if w else 0


def mask_kind(ctx: MapContext, mask: str, full: Shape, past: int = 0) -> tuple[str, Shape]:
    """(mask, bias) of an attention's mask tensor ``mask`` over scores of shape ``full`` (b, h, s_q,
    s_kv) whose queries follow ``past`` keys: "causal" (top-left) or "causal_bottom_right" where its
    values are a constant causal mask or :func:`_key_padding_and_causal` proves one, else "bias" of
    its shape broadcast to 4-D (ONNX broadcasting: dims aligned right, each 1 or the full size; a
    boolean mask is read as the additive bias cuDNN takes, 0 or minus infinity). Raises
    :class:`Unsupported` for a shape that does not broadcast."""
    shape = need(ctx.shape(mask), "attn_mask")
    b, h, s_q, s_kv = full
    if tuple(shape[-2:]) == (s_q, s_kv) and causal_mask_tensor(ctx, mask, s_q, past):
        return ("causal" if past == 0 else "causal_bottom_right"), ()
    if len(shape) > 4:
        raise Unsupported(f"attn_mask of rank {len(shape)}")
    m = (1,) * (4 - len(shape)) + tuple(shape)
    if any(d not in (1, f) for d, f in zip(m, full)):
        raise Unsupported(f"attn_mask {list(shape)} does not broadcast to the scores {list(full)}")
    return "bias", m


def _map_attention(node, ctx: MapContext, attrs: dict) -> SdpaConfig:
    """ONNX ``Attention`` (opset 23; onnx.ai/onnx/operators/onnx__Attention.html) as one SDPA call.

    Q (b, h, s_q, d) or 3-D (b, s_q, h*d) with ``q_num_heads``; K (b, h_kv, s_kv, d) or (b, s_kv,
    h_kv*d) with ``kv_num_heads``; V likewise with d_v; 3-D operands and output are read as strided
    (b, h, s, d) views. past_key / past_value (b, h_kv, past, d): the attention reads the present
    cache (past + s_kv keys, packed); the append of the new keys and values into it (present_key,
    present_value) is not timed. ``scale`` (default 1/sqrt(d), the spec's); ``is_causal``: the spec's
    bottom-right alignment (query i sees keys j <= i + past), "causal" when past is 0 and
    "causal_bottom_right" with a past; with an attn_mask besides, the causal frontier folds into a
    bias of the mask's shape with full s_q and s_kv. An attn_mask that is a causal band (a sliding
    window built from the positions, :func:`sliding_window_of`) is the causal mask with its
    ``window``. ``softcap`` is the config's (ONNX caps the scores after adding attn_mask, cuDNN's Softcap
    score modifier before its mask: the same work). Raises :class:`Unsupported` for the
    ``qk_matmul_output`` output, a causal mask with a past and s_kv != s_q (no alignment cuDNN has)
    and shapes that do not fit the spec."""
    softcap = float(attrs.get("softcap", 0.0))
    if softcap < 0:
        raise Unsupported(f"Attention softcap {softcap} (a cap is positive; 0: none)")
    if len(node.output) > 3 and node.output[3]:
        raise Unsupported("Attention's qk_matmul_output (the scores as an output) is not benchmarked")
    ins = list(node.input) + [""] * (6 - len(node.input))
    q, k, v = (need(ctx.shape(ins[i]), what) for i, what in enumerate(("Q", "K", "V")))
    if not (len(q) == len(k) == len(v) and len(q) in (3, 4)):
        raise Unsupported(f"Attention Q, K, V of ranks {len(q)}, {len(k)}, {len(v)}")
    if len(q) == 3:
        h, h_kv = int(attrs.get("q_num_heads", 0)), int(attrs.get("kv_num_heads", 0))
        if h <= 0 or h_kv <= 0 or q[2] % h or k[2] % h_kv or v[2] % h_kv:
            raise Unsupported("3-D Attention without q_num_heads / kv_num_heads dividing the hidden sizes")
        b, s_q, d, s_new, d_v = q[0], q[1], q[2] // h, k[1], v[2] // h_kv
    else:
        b, h, s_q, d = q
        h_kv, s_new, d_v = k[1], k[2], v[3]
    if k[0] != b or v[0] != b or (len(q) == 4 and (k[3] != d or v[1] != h_kv or v[2] != s_new)) \
            or (len(q) == 3 and (k[2] != h_kv * d or v[1] != s_new)) or h % h_kv:
        raise Unsupported(f"Attention Q {list(q)}, K {list(k)}, V {list(v)} do not fit one another")
    past = 0
    if ins[4] or ins[5]:
        pk, pv = need(ctx.shape(ins[4]), "past_key"), need(ctx.shape(ins[5]), "past_value")
        if tuple(pk) != (b, h_kv, pk[2], d) or tuple(pv) != (b, h_kv, pk[2], d_v):
            raise Unsupported(f"Attention past_key {list(pk)} / past_value {list(pv)} do not fit K and V")
        past = pk[2]
    s_kv = past + s_new
    full = (b, h, s_q, s_kv)
    mask, bias = "none", ()
    if int(attrs.get("is_causal", 0)):
        if past and s_new != s_q:
            raise Unsupported("causal Attention with a past and s_kv != s_q: no cuDNN diagonal alignment")
        mask = "causal" if past == 0 else "causal_bottom_right"
    window = 0
    if ins[3]:
        got, shape = mask_kind(ctx, ins[3], full, past)
        window = sliding_window_of(ctx, ins[3], full, past) if got == "bias" else 0
        if window:  # a causal band: the causal mask with a window (cuDNN's left bound), no bias read
            got, shape = ("causal" if past == 0 else "causal_bottom_right"), ()
        if mask == "none" or got == mask:
            mask, bias = got, shape
        else:  # the causal frontier and a mask: one bias over every query and key
            mask, bias, window = "bias", tuple(shape[:2]) + (s_q, s_kv), 0
    if mask == "causal_bottom_right" and s_q == s_kv:
        mask = "causal"
    d_scale = attrs.get("scale")
    scale = float(d_scale) if d_scale is not None else 1.0 / math.sqrt(d)
    cfg = SdpaConfig(b=b, h=h, s_q=s_q, s_kv=s_kv, d=d, d_v=d_v, scale=float(f"{float(np.float32(scale)):.6g}"),
                     mask=mask, bias=bias, h_kv=h_kv if h_kv != h else 0, window=window, softcap=softcap)
    if len(q) == 3:  # (b, s, heads * d) read as (b, heads, s, d): strides (s * heads * d, d, heads * d, 1)
        def bshd(s, heads, dd):
            return (s * heads * dd, dd, heads * dd, 1)
        given = {"q_strides": bshd(s_q, h, d), "o_strides": bshd(s_q, h, d_v)}
        if not past:  # with a past, K and V are read from the packed present cache
            given |= {"k_strides": bshd(s_new, h_kv, d), "v_strides": bshd(s_new, h_kv, d_v)}
        packed = dict(zip(("q_strides", "k_strides", "v_strides", "o_strides"), cfg.strides()))
        cfg = dataclasses.replace(cfg, **{f: st for f, st in given.items() if st != packed[f]})
    return cfg


#: GroupQueryAttention inputs (docs/ContribOperators.md): the index of each
_GQA_IN = {n: i for i, n in enumerate((
    "query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
    "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
    "k_norm_weight"))}


def _gqa_dims(node, ctx, attrs):
    """(b, s_q, h, h_kv, d, s_new, packed, past, total) of a GroupQueryAttention node: total is the
    attended keys (total_sequence_length's value where it is a constant, else past + new keys; with the
    past/present buffer shared, give it as a constant, or the attention is counted over the whole
    buffer and the new keys). Raises :class:`Unsupported` for heads or shapes that do not fit."""
    ins = list(node.input) + [""] * (16 - len(node.input))
    h, h_kv = int(attrs.get("num_heads", 0)), int(attrs.get("kv_num_heads", 0))
    if h <= 0 or h_kv <= 0 or h % h_kv:
        raise Unsupported(f"GroupQueryAttention num_heads {h} not a positive multiple of kv_num_heads {h_kv}")
    q = need(ctx.shape(ins[0]), "query")
    if len(q) != 3:
        raise Unsupported(f"GroupQueryAttention query of rank {len(q)} (3)")
    b, s_q, width = q
    packed = not ins[1]
    if packed:
        if width % (h + 2 * h_kv):
            raise Unsupported(f"packed QKV of width {width} is not (num_heads + 2 kv_num_heads) * head_size")
        d, s_new = width // (h + 2 * h_kv), s_q
    else:
        k, v = need(ctx.shape(ins[1]), "key"), need(ctx.shape(ins[2]), "value")
        d = width // h
        if width % h or tuple(k) != (b, k[1], h_kv * d) or tuple(v) != tuple(k):
            raise Unsupported(f"GroupQueryAttention query {list(q)}, key {list(k)}, value {list(v)} do not fit "
                              f"{h} and {h_kv} heads")
        s_new = k[1]
    past = 0
    if ins[3] or ins[4]:
        pk, pv = need(ctx.shape(ins[3]), "past_key"), need(ctx.shape(ins[4]), "past_value")
        if tuple(pk) != (b, h_kv, pk[2], d) or tuple(pv) != tuple(pk):
            raise Unsupported(f"GroupQueryAttention past_key {list(pk)} / past_value {list(pv)} are not "
                              f"(batch, kv_num_heads, length, head_size) = ({b}, {h_kv}, ., {d})")
        past = pk[2]
    t = ctx.value(ins[6]) if ins[6] else None
    total = int(np.asarray(t).reshape(-1)[0]) if t is not None and np.asarray(t).size == 1 else past + s_new
    if total < s_new:
        raise Unsupported(f"GroupQueryAttention total_sequence_length {total} below the {s_new} new keys")
    return b, s_q, h, h_kv, d, s_new, packed, past, total


def _gqa_rotary(node, ctx: MapContext, attrs: dict, b: int, s_q: int, h: int, h_kv: int, d: int, s_new: int,
                packed: bool) -> tuple[Part, Part]:
    """The rotary embeddings a ``GroupQueryAttention`` with ``do_rotary=1`` applies before its
    attention (ONNX Runtime's ``group_query_attention`` runs ``RunRotaryEmbedding`` on the new queries
    and keys): two :class:`benanza.kinds.rotary.RotaryConfig` calls, the queries' (b, s_q, num_heads *
    d) and the new keys' (b, s_new, kv_num_heads * d), over the first 2 x cos_cache's columns of each
    head (``rotary_interleaved``: even/odd pairs), the cache's rows gathered by the position each
    sequence's seqlens_k gives (``positions``: the cache's rows). Packed QKV's views are timed as
    their own tensors, a contiguous read (at most as slow as the strided one the op makes). Raises
    :class:`Unsupported` without both caches or for a cache that does not fit the head size."""
    from benanza.kinds.rotary import RotaryConfig

    ins = list(node.input) + [""] * (16 - len(node.input))
    if not ins[_GQA_IN["cos_cache"]] or not ins[_GQA_IN["sin_cache"]]:
        raise Unsupported("GroupQueryAttention do_rotary without its cos_cache and sin_cache inputs")
    cos = tuple(need(ctx.shape(ins[_GQA_IN["cos_cache"]]), "cos_cache"))
    sin = ctx.shape(ins[_GQA_IN["sin_cache"]])
    if len(cos) != 2 or (sin is not None and tuple(sin) != cos) or 2 * cos[1] > d or cos[1] < 1:
        raise Unsupported(f"GroupQueryAttention do_rotary: cos_cache {list(cos)} / sin_cache {list(sin or ())} are "
                          f"not two equal (positions, rotary_dim / 2) caches with rotary_dim at most the head size {d}")
    inter = bool(int(attrs.get("rotary_interleaved", 0)))
    rot = [RotaryConfig(x=(b, n, heads * d), num_heads=heads, rotary_dim=2 * cos[1], interleaved=inter,
                        layout="bshd", positions=cos[0]) for n, heads in ((s_q, h), (s_new, h_kv))]
    return Part(rot[0]), Part(rot[1])


def _gqa_window_sink(ins: list, attrs: dict, mask: str, s_q: int, s_kv: int) -> tuple[int, bool]:
    """(window, sink) of a GroupQueryAttention: ``local_window_size`` L > 0 keeps each query's last L + 1
    keys (ONNX Runtime's ``GQAAttentionBase``: the scores before ``seq_causal_length - L - 1`` are zeroed),
    the SDPA's ``window`` of L + 1 where it drops keys (:func:`effective_window`); ``smooth_softmax``
    (a sink logit of 0 per head: 1 added to the softmax's normaliser) or the ``head_sink`` input (a
    logit per head) an attention sink. Raises :class:`Unsupported` for a window without the causal
    mask (with an attention_bias the mask is a bias, and cuDNN's left bound needs the causal one)."""
    sink = bool(int(attrs.get("smooth_softmax", 0))) or bool(ins[_GQA_IN["head_sink"]])
    lws = int(attrs.get("local_window_size", -1))
    if lws in (-1, 0):
        return 0, sink
    if lws < -1 or mask not in ("causal", "causal_bottom_right"):
        raise Unsupported(f"GroupQueryAttention local_window_size {lws} without the causal mask alone "
                          f"(mask {mask}): no cuDNN sliding window for it")
    return effective_window(lws + 1, s_q, s_kv, mask), sink


def _map_gqa(node, ctx: MapContext, attrs: dict):
    """``com.microsoft`` ``GroupQueryAttention`` (ONNX Runtime GenAI's attention;
    :func:`benanza.kinds.onnx_map.contrib_doc`) as one SDPA call with h_kv = kv_num_heads.

    query (b, s_q, num_heads * d), key and value (b, s_new, kv_num_heads * d) read as strided (b, h, s,
    d) views, or packed QKV (b, s_q, (num_heads + 2 kv_num_heads) * d) with key and value absent (the
    three views of one tensor, stride (num_heads + 2 kv_num_heads) * d over s); past_key / past_value
    (b, kv_num_heads, past, d), BNSH: the attention reads the present cache, packed, of ``total`` keys
    (:func:`_gqa_dims`; the append of the new keys is not timed); seqlens_k (ragged lengths) is timed
    at full lengths, as cuDNN's padding mask would run the longest. causal (default 1): the new queries
    at the end of the keys, "causal" where s_q == total, else "causal_bottom_right" (decode; cuDNN's
    bottom-right diagonal), as ONNX ``Attention`` maps; attention_bias as the SDPA's bias (with causal,
    one bias over every query and key). scale: the node's, else 1/sqrt(d) (0 is the default too).
    ``do_rotary=1``: the node's calls are the queries' and the new keys' rotary embeddings, then the
    SDPA (:func:`_gqa_rotary`; three :class:`Part`). local_window_size, smooth_softmax and head_sink:
    the SDPA's sliding window and attention sink (:func:`_gqa_window_sink`). Raises
    ``softcap``: the config's. Raises :class:`Unsupported` for what the SDPA config has no term for: qk_output,
    a window-sized
    or quantized KV cache (sliding_window_cache; k_scale / v_scale, kv_cache_bit_width) and
    q_norm_weight / k_norm_weight."""
    ins = list(node.input) + [""] * (16 - len(node.input))
    refused = [("qk_output", "the scores as an output are not benchmarked"),
               ("sliding_window_cache", "a window-sized KV cache"),
               ("kv_cache_bit_width", "a quantized KV cache")]
    for name, why in refused:
        if int(attrs.get(name, 0)):
            raise Unsupported(f"GroupQueryAttention {name}: {why}")
    softcap = float(attrs.get("softcap", 0.0))
    if softcap < 0:
        raise Unsupported(f"GroupQueryAttention softcap {softcap} (a cap is positive; 0: none)")
    for name in ("k_scale", "v_scale", "q_norm_weight", "k_norm_weight"):
        if ins[_GQA_IN[name]]:
            raise Unsupported(f"GroupQueryAttention input {name} is not benchmarked")
    if len(node.output) > 3 and node.output[3]:
        raise Unsupported("GroupQueryAttention output_qk (the scores as an output) is not benchmarked")
    b, s_q, h, h_kv, d, s_new, packed, past, s_kv = _gqa_dims(node, ctx, attrs)
    mask, bias = "none", ()
    if int(attrs.get("causal", 1)):
        mask = "causal" if s_q == s_kv else "causal_bottom_right"
    if ins[10]:
        got, shape = mask_kind(ctx, ins[10], (b, h, s_q, s_kv), s_kv - s_q)
        mask, bias = (got, shape) if mask == "none" or got == mask else ("bias", tuple(shape[:2]) + (s_q, s_kv))
    window, sink = _gqa_window_sink(ins, attrs, mask, s_q, s_kv)
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(d)
    cfg = SdpaConfig(b=b, h=h, s_q=s_q, s_kv=s_kv, d=d, d_v=d, scale=float(f"{float(np.float32(scale)):.6g}"),
                     mask=mask, bias=bias, h_kv=h_kv if h_kv != h else 0, window=window, sink=sink, softcap=softcap)
    width = (h + 2 * h_kv) * d if packed else h * d
    given = {"q_strides": (s_q * width, d, width, 1), "o_strides": (s_q * h * d, d, h * d, 1)}
    if not past:  # without a past, K and V are read where the node's inputs hold them
        kw = width if packed else h_kv * d
        given |= {"k_strides": (s_new * kw, d, kw, 1), "v_strides": (s_new * kw, d, kw, 1)}
    packed_st = dict(zip(("q_strides", "k_strides", "v_strides", "o_strides"), cfg.strides()))
    cfg = dataclasses.replace(cfg, **{f: st for f, st in given.items() if st != packed_st[f]})
    if int(attrs.get("do_rotary", 0)):
        return _gqa_rotary(node, ctx, attrs, b, s_q, h, h_kv, d, s_new, packed) + (Part(cfg, (0, 1, 2)),)
    return cfg


def _gqa_shapes(node, ctx, attrs):
    """output (b, s_q, num_heads * d); present_key / present_value (b, kv_num_heads, T, d), T the past
    buffer's length where the attended keys fit in it (a shared buffer), else the attended keys
    (ONNX Runtime's shape inference of the op); output_qk (b, num_heads, s_q, T)."""
    try:
        b, s_q, h, h_kv, d, s_new, packed, past, total = _gqa_dims(node, ctx, attrs)
    except Unsupported:
        return [(None, None)] * len(node.output)
    t = max(past, total)
    return [((b, s_q, h * d), None), ((b, h_kv, t, d), None), ((b, h_kv, t, d), None),
            ((b, h, s_q, t), None)][:len(node.output)]


# ------------------------------------------------------------------- com.microsoft MultiHeadAttention

def _bshd(s: int, heads: int, d: int, width: int | None = None) -> Shape:
    """Element strides over (b, h, s, d) of heads read from a (b, s, ..., d) tensor whose rows are
    ``width`` elements apart (heads * d when None): (s * width, d, width, 1)."""
    w = heads * d if width is None else width
    return (s * w, d, w, 1)


def _mha_dims(node, ctx, attrs) -> dict:
    """The sizes of a ``com.microsoft`` ``MultiHeadAttention`` node, read as ONNX Runtime's
    ``multihead_attention_helper::CheckInputs`` reads them: form ("separate": query (B, S, D), key (B,
    L, D), value (B, L, D_v); "packed_qkv": query (B, L, N, 3, H); "packed_kv": key (B, L, N, 2, H);
    "bnsh_kv": key and value (B, N, L, H), a cross-attention cache), b, s_q, h, d, d_v, s_new (L), past
    (past_key's length, or past_sequence_length's value with a shared buffer) and s_kv = past + L.
    Raises :class:`Unsupported` for shapes that fit none of those forms."""
    ins = list(node.input) + [""] * (10 - len(node.input))
    h = int(attrs.get("num_heads", 0))
    if h <= 0:
        raise Unsupported(f"MultiHeadAttention num_heads {h} is not positive")
    q = need(ctx.shape(ins[0]), "query")
    k = need(ctx.shape(ins[1]), "key") if ins[1] else None
    v = need(ctx.shape(ins[2]), "value") if ins[2] else None
    if k is None:
        if len(q) != 5 or q[2] != h or q[3] != 3 or v is not None:
            raise Unsupported(f"MultiHeadAttention query {list(q)} without a key is not packed QKV (batch, seq, "
                              f"{h}, 3, head_size)")
        form, b, s_q, d, d_v, s_new = "packed_qkv", q[0], q[1], q[4], q[4], q[1]
    else:
        if len(q) != 3 or q[2] % h:
            raise Unsupported(f"MultiHeadAttention query {list(q)} with a key is not (batch, seq, {h} * head_size)")
        b, s_q, d = q[0], q[1], q[2] // h
        if len(k) == 5 and tuple(k[2:]) == (h, 2, d) and v is None:
            form, s_new, d_v = "packed_kv", k[1], d
        elif len(k) == 3 and v is not None and len(v) == 3 and k[2] == q[2] and v[1] == k[1] and v[2] % h == 0:
            form, s_new, d_v = "separate", k[1], v[2] // h
        elif len(k) == 4 and v is not None and len(v) == 4 and (k[1], k[3]) == (h, d) and v[1] == h and v[2] == k[2]:
            form, s_new, d_v = "bnsh_kv", k[2], v[3]
        else:
            raise Unsupported(f"MultiHeadAttention query {list(q)}, key {list(k)}, value "
                              f"{list(v) if v is not None else None} fit none of its forms for {h} heads")
        if k[0] != b or (v is not None and v[0] != b):
            raise Unsupported(f"MultiHeadAttention key/value batch differs from the query's {b}")
    past = 0
    if ins[6] or ins[7]:
        if form == "bnsh_kv":
            raise Unsupported("MultiHeadAttention past_key/past_value with a 4-D key and value")
        pk, pv = need(ctx.shape(ins[6]), "past_key"), need(ctx.shape(ins[7]), "past_value")
        if tuple(pk) != (b, h, pk[2], d) or tuple(pv) != (b, h, pk[2], d_v):
            raise Unsupported(f"MultiHeadAttention past_key {list(pk)} / past_value {list(pv)} are not (batch, "
                              f"num_heads, length, head_size) = ({b}, {h}, ., {d})")
        past = pk[2]
        if ins[8]:  # a shared past/present buffer: the attended keys are past_sequence_length + L
            t = ctx.value(ins[8])
            if t is None or np.asarray(t).size != 1:
                raise Unsupported("MultiHeadAttention past_sequence_length is not a constant: the attended "
                                  "keys of the shared buffer are unknown")
            past = int(np.asarray(t).reshape(-1)[0])
    return {"form": form, "b": b, "s_q": s_q, "h": h, "d": d, "d_v": d_v, "s_new": s_new, "past": past,
            "s_kv": past + s_new, "buffer": need(ctx.shape(ins[6]), "past_key")[2] if ins[6] else 0}


def _mha_mask(ctx, ins, dims, causal: bool) -> tuple[str, Shape]:
    """(mask, bias) of a MultiHeadAttention's unidirectional flag, key_padding_mask and attention_bias."""
    b, h, s_q, s_kv, past = dims["b"], dims["h"], dims["s_q"], dims["s_kv"], dims["past"]
    biases = []
    if ins[4]:
        m = need(ctx.shape(ins[4]), "key_padding_mask")
        if len(m) == 1 and m[0] in (b, 3 * b + 2):
            pass  # key lengths (ragged): timed at full lengths, as cuDNN's padding mask runs the longest
        elif len(m) == 2 and m[0] == b and m[1] in (dims["s_new"], s_kv):
            biases.append((b, 1, 1, s_kv))  # read as the additive mask ONNX Runtime makes of it
        elif len(m) == 3 and tuple(m) == (b, s_q, s_kv):
            biases.append((b, 1, s_q, s_kv))
        else:
            raise Unsupported(f"MultiHeadAttention key_padding_mask {list(m)} is none of (batch), (3 * batch + 2), "
                              f"(batch, kv_length), (batch, total_length), (batch, seq, total_length)")
    if ins[5]:
        biases.append(mask_kind(ctx, ins[5], (b, h, s_q, s_kv), past))
        if biases[-1][0] != "bias":
            biases[-1] = None  # a constant causal attention_bias: the causal mask
            causal = True
        else:
            biases[-1] = biases[-1][1]
    biases = [x for x in biases if x is not None]
    mask = ("causal" if s_q == s_kv else "causal_bottom_right") if causal else "none"
    if not biases:
        return mask, ()
    full = tuple(max(x[i] for x in biases) for i in range(4))
    if causal:  # the causal frontier and a bias: one bias over every query and key
        full = full[:2] + (s_q, s_kv)
    return "bias", full


def _map_mha(node, ctx: MapContext, attrs: dict):
    """``com.microsoft`` ``MultiHeadAttention`` (ONNX Runtime's attention after the Q, K, V projections;
    :func:`benanza.kinds.onnx_map.contrib_doc`) as one SDPA call, after the projection bias's
    Elementwise adds where the node has a bias (a tuple of :class:`benanza.kinds.onnx_map.Part`).

    Forms (:func:`_mha_dims`): query (b, s_q, h * d) with key (b, L, h * d) and value (b, L, h * d_v),
    read as strided (b, h, s, d) views; packed QKV query (b, L, h, 3, d) (three views, row stride h * 3
    * d, head stride 3 * d); packed KV key (b, L, h, 2, d); key and value (b, h, L, d) (a
    cross-attention cache, packed). past_key / past_value (b, h, P, d): the attention reads the
    present cache of P + L keys (P past_sequence_length's value with a shared buffer), packed; the
    append is not timed. unidirectional: causal, bottom-right with a past (query i sees keys j <= i +
    P), as ONNX ``Attention`` maps. key_padding_mask: key lengths ((b) or (3b + 2)) timed at full
    lengths; a (b, L or P + L) or (b, s_q, P + L) 0/1 mask as the additive bias ONNX Runtime makes of
    it, (b, 1, 1, P + L) or (b, 1, s_q, P + L); attention_bias (b or 1, h or 1, s_q, P + L) as the
    bias; several: one bias of their broadcast shape (with causal, over every query and key).
    bias (D + D + D_v): Elementwise adds of its Q, K and V thirds onto query, key and value, (b, s,
    D) + (1, 1, D) each, or one add over packed QKV (b, L, 3 D) + (1, 1, 3 D) (the same elements and
    bytes; ONNX Runtime refuses a bias with packed KV or a 4-D key, and so does this mapper).
    scale: the node's, else 1/sqrt(d). Raises :class:`Unsupported` for cache_indirection (beam
    search), the qk output and what ONNX Runtime refuses."""
    from benanza.kinds.elementwise import ElementwiseConfig
    ins = list(node.input) + [""] * (10 - len(node.input))
    if ins[9]:
        raise Unsupported("MultiHeadAttention cache_indirection (beam search's reordered cache) is not benchmarked")
    if len(node.output) > 3 and node.output[3]:
        raise Unsupported("MultiHeadAttention qk (the scores as an output) is not benchmarked")
    dims = _mha_dims(node, ctx, attrs)
    form, b, s_q, h, d, d_v, s_new, past, s_kv = (dims[k] for k in (
        "form", "b", "s_q", "h", "d", "d_v", "s_new", "past", "s_kv"))
    if int(attrs.get("unidirectional", 0)) and past == 0 and s_new != s_q:
        raise Unsupported("unidirectional MultiHeadAttention with s_kv != s_q: no cuDNN diagonal alignment")
    mask, bias = _mha_mask(ctx, ins, dims, bool(int(attrs.get("unidirectional", 0))))
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(d)
    cfg = SdpaConfig(b=b, h=h, s_q=s_q, s_kv=s_kv, d=d, d_v=d_v, scale=float(f"{float(np.float32(scale)):.6g}"),
                     mask=mask, bias=bias)
    given = {"o_strides": _bshd(s_q, h, d_v)}
    if form == "packed_qkv":
        given["q_strides"] = _bshd(s_q, h, d, 3 * h * d)[:1] + (3 * d,) + _bshd(s_q, h, d, 3 * h * d)[2:]
        kv = given["q_strides"]
    else:
        given["q_strides"] = _bshd(s_q, h, d)
        kv = _bshd(s_new, h, d, 2 * h * d)[:1] + (2 * d,) + (2 * h * d, 1) if form == "packed_kv" else None
    if not past and form != "bnsh_kv":  # without a past, K and V are read where the node's inputs hold them
        given |= {"k_strides": kv or _bshd(s_new, h, d), "v_strides": kv or _bshd(s_new, h, d_v)}
    packed_st = dict(zip(("q_strides", "k_strides", "v_strides", "o_strides"), cfg.strides()))
    cfg = dataclasses.replace(cfg, **{f: st for f, st in given.items() if st != packed_st[f]})
    if not ins[3]:
        return cfg
    bshape = need(ctx.shape(ins[3]), "bias")
    if form in ("packed_kv", "bnsh_kv"):
        raise Unsupported(f"MultiHeadAttention bias with {'packed KV' if form == 'packed_kv' else 'a 4-D key'} "
                          f"(ONNX Runtime refuses it)")
    if tuple(bshape) != (h * (2 * d + d_v),):
        raise Unsupported(f"MultiHeadAttention bias {list(bshape)} is not (D + D + D_v) = ({h * (2 * d + d_v)})")
    if form == "packed_qkv":
        adds = [((b, s_new, 3 * h * d), 3 * h * d)]
    else:
        adds = [((b, s_q, h * d), h * d), ((b, s_new, h * d), h * d), ((b, s_new, h * d_v), h * d_v)]
    return tuple(Part(ElementwiseConfig(op="add", a=a, b=(1, 1, n))) for a, n in adds) + (Part(cfg, (0, 1, 2)),)


def _mha_shapes(node, ctx, attrs):
    """output (b, s_q, h * d_v); present_key / present_value (b, h, T, d) / (b, h, T, d_v), T the past
    buffer's length with a shared buffer, else past + L (ONNX Runtime's shape inference of the op);
    qk (b, h, s_q, T)."""
    try:
        dims = _mha_dims(node, ctx, attrs)
    except Unsupported:
        return [(None, None)] * len(node.output)
    b, s_q, h, d, d_v = (dims[k] for k in ("b", "s_q", "h", "d", "d_v"))
    t = max(dims["buffer"], dims["s_kv"])
    return [((b, s_q, h * d_v), None), ((b, h, t, d), None), ((b, h, t, d_v), None),
            ((b, h, s_q, t), None)][:len(node.output)]


# ------------------------------------------------------------------- com.microsoft Attention

def _ms_attention_dims(node, ctx, attrs) -> dict:
    """The sizes of a ``com.microsoft`` ``Attention`` node (ONNX Runtime's ``attention_helper``): input
    (b, s, d_in), weights (d_in, D + D + D_v) with D, D, D_v from ``qkv_hidden_sizes`` (default equal
    thirds), h = num_heads, d = D / h, d_v = D_v / h, past (2, b, h, P, d): P (past_sequence_length's
    value with a shared buffer) and s_kv = P + s. Raises :class:`Unsupported` for shapes that do not fit."""
    ins = list(node.input) + [""] * (7 - len(node.input))
    h = int(attrs.get("num_heads", 0))
    x, w = need(ctx.shape(ins[0]), "input"), need(ctx.shape(ins[1]), "weights")
    if h <= 0 or len(x) != 3 or len(w) != 2 or w[0] != x[2]:
        raise Unsupported(f"Attention input {list(x)} and weights {list(w)} with num_heads {h} are not (batch, seq, "
                          f"input_hidden) and (input_hidden, D + D + D_v) with heads > 0")
    sizes = tuple(int(v) for v in attrs.get("qkv_hidden_sizes", ())) or (w[1] // 3,) * 3
    if len(sizes) != 3 or sum(sizes) != w[1] or sizes[0] != sizes[1] or any(v <= 0 or v % h for v in sizes):
        raise Unsupported(f"Attention qkv_hidden_sizes {list(sizes)} do not split weights of width {w[1]} into "
                          f"D, D, D_v multiples of {h} heads")
    b, s = x[0], x[1]
    d, d_v = sizes[0] // h, sizes[2] // h
    past = buffer = 0
    if ins[4]:
        p = need(ctx.shape(ins[4]), "past")
        if len(p) != 5 or (p[0], p[1], p[2], p[4]) != (2, b, h, d) or d_v != d:
            raise Unsupported(f"Attention past {list(p)} is not (2, batch, num_heads, length, head_size) = "
                              f"(2, {b}, {h}, ., {d}) with equal Q, K and V sizes")
        past = buffer = p[3]
        if int(attrs.get("past_present_share_buffer", 0)):
            t = ctx.value(ins[6]) if ins[6] else None
            if t is None or np.asarray(t).size != 1:
                raise Unsupported("Attention past_sequence_length is not a constant: the attended keys of the "
                                  "shared buffer are unknown")
            past = int(np.asarray(t).reshape(-1)[0])
    return {"b": b, "s": s, "d_in": x[2], "width": w[1], "h": h, "d": d, "d_v": d_v, "past": past,
            "s_kv": past + s, "buffer": buffer}


def _map_ms_attention(node, ctx: MapContext, attrs: dict):
    """``com.microsoft`` ``Attention`` (BERT's and GPT-2's attention in ONNX Runtime's optimized models;
    :func:`benanza.kinds.onnx_map.contrib_doc`) as two calls (:class:`benanza.kinds.onnx_map.Part`):
    the QKV projection, a Gemm (m = b * s, n = D + D + D_v, k = input_hidden; bias "c" with the bias
    input), then one SDPA call reading Q, K and V as strided (b, h, s, d) views of the projection's
    (b, s, D + D + D_v) output (row stride D + D + D_v) and writing (b, s, h * d_v).

    past (2, b, h, P, d): the attention reads the present cache of P + s keys, packed (P
    past_sequence_length's value with past_present_share_buffer); the append is not timed.
    unidirectional: causal, bottom-right with a past (query i sees keys j <= i + P). mask_index: key
    lengths ((b), (2 b) or (3 b + 2): right/left padding) timed at full lengths, as cuDNN's padding
    mask runs the longest; a 0/1 (b, P + s) or (b, s, P + s) mask as the additive bias ONNX Runtime
    makes of it ((b, 1, 1, P + s) or (b, 1, s, P + s)); attention_bias (b or 1, h or 1, s, P + s) as
    the bias; several: one bias of their broadcast shape (with causal, over every query and key).
    scale: the node's, else 1/sqrt(d). Raises :class:`Unsupported` for do_rotary (the rotary
    embedding inside the call), the (b, 1, max, max) mask_index (Megatron's) and shapes that do
    not fit."""
    from benanza.kinds.gemm import GemmConfig
    ins = list(node.input) + [""] * (7 - len(node.input))
    if int(attrs.get("do_rotary", 0)):
        raise Unsupported("Attention do_rotary: the rotary embedding inside the call is not benchmarked")
    dims = _ms_attention_dims(node, ctx, attrs)
    b, s, h, d, d_v, past, s_kv, width = (dims[k] for k in ("b", "s", "h", "d", "d_v", "past", "s_kv", "width"))
    mask_in = ins[3]
    if mask_in:
        m = need(ctx.shape(mask_in), "mask_index")
        if len(m) == 1 and m[0] in (b, 2 * b, 3 * b + 2):
            mask_in = ""  # key lengths: full lengths timed
        elif len(m) == 4:
            raise Unsupported(f"Attention mask_index {list(m)} (batch, 1, max_sequence_length, max_sequence_length) "
                              f"is not benchmarked")
        elif not ((len(m) == 2 and tuple(m) == (b, s_kv)) or (len(m) == 3 and tuple(m) == (b, s, s_kv))):
            raise Unsupported(f"Attention mask_index {list(m)} is none of (batch), (2 * batch), (3 * batch + 2), "
                              f"(batch, total_length), (batch, seq, total_length)")
    mha = {"b": b, "h": h, "s_q": s, "s_kv": s_kv, "past": past, "s_new": s}
    mask, bias = _mha_mask(ctx, ["", "", "", "", mask_in, ins[5]], mha, bool(int(attrs.get("unidirectional", 0))))
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(d)
    cfg = SdpaConfig(b=b, h=h, s_q=s, s_kv=s_kv, d=d, d_v=d_v, scale=float(f"{float(np.float32(scale)):.6g}"),
                     mask=mask, bias=bias)
    given = {"q_strides": _bshd(s, h, d, width), "o_strides": _bshd(s, h, d_v)}
    if not past:  # K and V read from the projection's output
        given |= {"k_strides": _bshd(s, h, d, width), "v_strides": _bshd(s, h, d_v, width)}
    packed_st = dict(zip(("q_strides", "k_strides", "v_strides", "o_strides"), cfg.strides()))
    cfg = dataclasses.replace(cfg, **{f: st for f, st in given.items() if st != packed_st[f]})
    gemm = GemmConfig(m=b * s, n=width, k=dims["d_in"], bias="c" if ins[2] else "none")
    return Part(gemm), Part(cfg, (0, 1))


def _ms_attention_shapes(node, ctx, attrs):
    """output (b, s, h * d_v); present (2, b, h, T, d), T the past buffer's length with a shared buffer,
    else P + s (ONNX Runtime's shape inference of the op)."""
    try:
        dims = _ms_attention_dims(node, ctx, attrs)
    except Unsupported:
        return [(None, None)] * len(node.output)
    b, s, h, d, d_v = (dims[k] for k in ("b", "s", "h", "d", "d_v"))
    return [((b, s, h * d_v), None), ((2, b, h, max(dims["buffer"], dims["s_kv"]), d), None)][:len(node.output)]


#: the C++ SdpaMask of each mask (templates/sdpa.cpp.j2, templates/sdpa_backward.cpp.j2)
SDPA_MASK_CPP = {"none": "SdpaMask::NONE", "causal": "SdpaMask::CAUSAL", "bias": "SdpaMask::BIAS",
                 "causal_bottom_right": "SdpaMask::CAUSAL_BOTTOM_RIGHT"}


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
    window: CppValue
    sink: CppValue
    softcap: CppValue
    h_kv: CppValue
    stats: CppValue
    kv_page: CppValue
    paged_skip: CppValue
    v_in_k: CppValue


def _min_bytes(cfg: SdpaConfig, ib: int, ob: int) -> int:
    """Q, K and V read once at ``ib`` bytes per element (V not again where it lies in K's rows, ``v_in_k``), O
    written once at ``ob`` (:func:`io_bytes`), with
    ``stats`` the float32 (b, h, s_q, 1) statistics written once and with ``sink`` the h float32 sink
    logits read once (bytes; the compulsory traffic, Williams et al., "Roofline", CACM 2009). A window
    does not lower it: every key is still some query's."""
    return io_bytes(cfg, ib, ob) + (4 * cfg.b * cfg.h * cfg.s_q if cfg.stats else 0) + (4 * cfg.h if cfg.sink else 0) \
        - (ib * numel(cfg.input_shapes()[2]) if cfg.v_in_k else 0)


def is_decode(cfg) -> bool:
    """Whether an attention config is a decode step's: its queries read a KV cache, s_kv > s_q (the rule
    of :func:`benanza.analysis.llm.decoder_phase`)."""
    return cfg.s_kv > cfg.s_q


def pages_per_seq(s_kv: int, page: int) -> int:
    """ceil(s_kv / page): the pages one sequence of ``s_kv`` tokens takes, the last one partly filled
    (cudnn-frontend's paged cache: "block table size must equal ceil(s_kv/block_size)")."""
    return -(-s_kv // page)


def _splitmix64(state: int) -> tuple[int, int]:
    """(new state, next value) of splitmix64 (Steele, Lea and Flood, OOPSLA 2014; Vigna's constants),
    ``splitmix64`` of ``cpp/include/benanza/paged_kv.hpp``."""
    m = (1 << 64) - 1
    state = (state + 0x9E3779B97F4A7C15) & m
    z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return state, z ^ (z >> 31)


def page_table(b: int, per_seq: int, seed: int = PAGE_TABLE_SEED) -> np.ndarray:
    """The page table the paged family reads, int32 of shape (b, 1, per_seq, 1) (cudnn-frontend
    ``set_paged_attention_k_table``/``_v_table``): entry (i, 0, j, 0) is the container page of sequence
    i's j-th page. Pages 0 .. b * per_seq - 1 each used once, in the order of a Fisher-Yates shuffle
    (Knuth, TAOCP vol. 2, 3.4.2, algorithm P) driven by splitmix64 from ``seed``: non-contiguous, as a
    server's allocator leaves them. The same construction as ``paged_kv_table`` of
    ``cpp/include/benanza/paged_kv.hpp``, which the suite runs. Raises ValueError for more pages
    than int32 holds."""
    n = b * per_seq
    if n - 1 > _INT32_MAX:
        raise ValueError(f"SDPA: {n} pages do not fit int32 page table entries")
    t = list(range(n))
    state = seed
    for i in range(n - 1, 0, -1):
        state, r = _splitmix64(state)
        j = r % (i + 1)
        t[i], t[j] = t[j], t[i]
    return np.asarray(t, dtype=np.int32).reshape(b, 1, per_seq, 1)


def paged_kv_bytes(cfg: SdpaConfig, ib: int, ob: int) -> dict[str, int]:
    """Bytes of the paged family of a decode config, ``ib``/``ob`` bytes per input/output element:
    ``containers``: the K and V containers allocated, (b * pages_per_seq) pages of (h_kv, page, d) and
    (h_kv, page, d_v) elements; ``tables``: the int32 page table (b, 1, pages_per_seq, 1) read once for K
    and once for V, plus the two int32 (b, 1, 1, 1) sequence lengths; ``min``: the compulsory traffic,
    :func:`_min_bytes` (Q, the s_kv tokens of K and V, O, the stats) plus ``tables`` (the unused tail
    of a sequence's last page is not read)."""
    per = pages_per_seq(cfg.s_kv, cfg.kv_page)
    pages = cfg.b * per
    containers = pages * cfg.kv_heads * cfg.kv_page * (cfg.d + cfg.d_v) * ib
    tables = 2 * cfg.b * per * 4 + 2 * cfg.b * 4
    return {"containers": containers, "tables": tables, "min": _min_bytes(cfg, ib, ob) + tables}


def paged_kv_skip(cfg: SdpaConfig, precision: str) -> str | None:
    """Whether the paged family is timed for ``cfg`` in ``precision``: None for a config that is not a
    decode step's (:func:`is_decode`: no family, no record), "" when it is timed, else why not (the
    suite records it as skipped, never a time): FP16/BF16 data only (cuDNN's fused attention), no
    additive bias (a server's decode masks by sequence length: cuDNN's padding mask), head dims d and
    d_v multiples of 8 and at most 256 (cuDNN developer guide, "Scaled Dot Product Attention",
    supported configurations of the FP16/BF16 forward), page table entries and lengths in int32."""
    if not is_decode(cfg):
        return None
    if precision not in ("fp16", "bf16"):
        return f"paged KV cache: cuDNN's paged SDPA takes FP16/BF16 data, not {precision}"
    if cfg.mask == "bias":
        return "paged KV cache: not timed with an additive bias (a server's decode masks by sequence length)"
    if any(x % 8 or x > 256 for x in (cfg.d, cfg.d_v)):
        return (f"paged KV cache: head dims d {cfg.d} and d_v {cfg.d_v} must be multiples of 8 and at most 256 "
                f"(cuDNN's FP16/BF16 SDPA)")
    if cfg.b * pages_per_seq(cfg.s_kv, cfg.kv_page) - 1 > _INT32_MAX or cfg.s_kv > _INT32_MAX:
        return "paged KV cache: page table entries or sequence lengths beyond int32"
    return ""


def _sdpa_case(cfg: SdpaConfig, job: Job) -> SdpaCase:
    bias = list(cfg.bias) if cfg.mask == "bias" else [1, 1, 1, 1]
    q, k, v, o = cfg.strides()
    skip = paged_kv_skip(cfg, job.precision)
    return SdpaCase(job=job_init(job), b=cfg.b, h=cfg.h, s_q=cfg.s_q, s_kv=cfg.s_kv, d=cfg.d, d_v=cfg.d_v, scale=cpp_num(float(cfg.scale)), mask=SDPA_MASK_CPP[cfg.mask], bias=c_array(bias, 4, 1), strides=c_array(list(q) + list(k) + list(v) + list(o), 16), window=cfg.window, sink=cpp_num(cfg.sink), softcap=cpp_num(float(cfg.softcap)), h_kv=cfg.kv_heads, stats=cpp_num(cfg.stats),
                    kv_page=0 if skip is None else cfg.kv_page, paged_skip=cpp_string(skip or ""),
                    v_in_k=cpp_num(cfg.v_in_k))


def with_autograd(torch, fn):
    """``fn`` run with autograd recording (outside the inference mode the framework's timing runs in,
    grad enabled): the tensors it makes can require grad, and SDPA on them takes PyTorch's training
    path (its fused kernels return the logsumexp autograd saves). Used by the training forward here
    and by :mod:`benanza.kinds.sdpa_backward`'s candidate."""
    return torch.enable_grad()(torch.inference_mode(False)(fn))


def window_mask(c: Ctx, cfg):
    """The boolean (s_q, s_kv) mask of a sliding-window config (True = attend): query i sees keys
    i + off - window < j <= i + off (off = s_kv - s_q bottom-right, 0 top-left), as transformers'
    sliding-window causal mask keeps them; PyTorch's SDPA has no window argument."""
    torch = c.torch
    off = cfg.s_kv - cfg.s_q if cfg.mask == "causal_bottom_right" else 0
    ones = torch.ones((cfg.s_q, cfg.s_kv), dtype=torch.bool, device=c.device)
    return ones.tril(off) & ones.triu(off - cfg.window + 1)


def torch_mask(c: Ctx, cfg) -> tuple:
    """``(attn_mask, is_causal)`` of ``F.scaled_dot_product_attention`` for an attention config's mask:
    a random bias of shape ``bias``; ``is_causal`` (top-left); for "causal_bottom_right" PyTorch's
    ``torch.nn.attention.bias.causal_lower_right(s_q, s_kv)`` (its flash and memory-efficient
    backends run it as a causal mask, no bias read); with a ``window``, :func:`window_mask`."""
    if getattr(cfg, "window", 0):
        return window_mask(c, cfg), False
    if cfg.mask == "bias":
        return c.randn(cfg.bias), False
    if cfg.mask == "causal_bottom_right":
        from torch.nn.attention.bias import causal_lower_right
        return causal_lower_right(cfg.s_q, cfg.s_kv), False
    return None, cfg.mask == "causal"


#: PyTorch's SDPA backends (members of ``torch.nn.attention.SDPBackend``), each timed as a framework
#: candidate of its own under ``torch.nn.attention.sdpa_kernel``, with the ATen op the backend runs
#: (its call label): aten/src/ATen/native/transformers/attention.cpp, ``scaled_dot_product_attention``'s
#: switch over ``_fused_sdp_choice``; the math backend is ``_scaled_dot_product_attention_math``
SDPA_BACKENDS = {"FLASH_ATTENTION": "aten::_scaled_dot_product_flash_attention",
                 "EFFICIENT_ATTENTION": "aten::_scaled_dot_product_efficient_attention",
                 "CUDNN_ATTENTION": "aten::_scaled_dot_product_cudnn_attention",
                 "MATH": "aten::_scaled_dot_product_attention_math"}

#: the suffix PyTorch's C++ warnings carry in Python (c10/util/Exception.cpp, Warning handler)
_TRIGGERED = re.compile(r"\s*\(Triggered internally at [^)]*\)\.?\s*$")

#: PyTorch's error when no enabled backend takes the call (aten/src/ATen/native/transformers/cuda/
#: attention.cu and sdp_utils_cpp.cpp: ``TORCH_CHECK(false, "No available kernel. Aborting execution.")``)
NO_KERNEL = "No available kernel"


def under_backend(torch, backend: str, run):
    """A callable that runs ``run()`` under ``torch.nn.attention.sdpa_kernel(SDPBackend.<backend>)``
    (``backend`` a key of :data:`SDPA_BACKENDS`). The first call records PyTorch's warnings: when the
    backend refuses the call (RuntimeError "No available kernel"), it raises :class:`NotSupported`
    with the reasons PyTorch warned (sdp_utils.cpp's checks, e.g. "Flash attention does not support
    the use of an attn_mask"), recorded as not_supported, never timed; so does a PyTorch without that
    member (``SDPBackend.CUDNN_ATTENTION`` came in 2.4). Any other error propagates."""
    probed = []

    def fn():
        attention = torch.nn.attention
        member = getattr(attention.SDPBackend, backend, None)
        if member is None:
            raise NotSupported(f"this PyTorch has no torch.nn.attention.SDPBackend.{backend}")
        if probed:
            with attention.sdpa_kernel(member):
                return run()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with attention.sdpa_kernel(member):
                    out = run()
            except RuntimeError as e:
                if NO_KERNEL not in str(e):
                    raise
                reasons = []
                for w in caught:
                    text = _TRIGGERED.sub("", str(w.message)).strip()
                    if text and text not in reasons:
                        reasons.append(text)
                why = "; ".join(reasons) or str(e).strip().splitlines()[0]
                raise NotSupported(f"PyTorch's SDPBackend.{backend} refuses this config: {why}"[:600]) from None
        probed.append(True)
        return out
    return fn


def backend_mask(c: Ctx, cfg, mask, causal):
    """``(attn_mask, is_causal)`` for a forced backend: :func:`torch_mask`'s, but a bottom-right causal
    mask as the boolean (s_q, s_kv) tensor ``CausalBias._materialize`` writes for LOWER_RIGHT (True on
    and below diagonal s_kv - s_q; torch/nn/attention/bias.py): ``CausalBias`` picks its kernel itself
    (flash or memory-efficient where they take it, before any backend selection), so under
    ``sdpa_kernel`` it would not be the backend its label names. Flash attention refuses an explicit
    mask: the default candidate times CausalBias's own path. A window's mask is a tensor already."""
    if cfg.mask != "causal_bottom_right" or getattr(cfg, "window", 0):
        return mask, causal
    torch = c.torch
    ones = torch.ones((cfg.s_q, cfg.s_kv), dtype=torch.bool, device=c.device)
    return ones.tril(cfg.s_kv - cfg.s_q), False


def backend_variants(c: Ctx, make, mask, causal, note: str, out_numel: int, details: dict, call_suffix: str = "",
                     algorithm: str = "") -> list[Candidate]:
    """One :class:`Candidate` per PyTorch SDPA backend (:data:`SDPA_BACKENDS`): ``make(mask, causal)``
    returns the call to time with :func:`torch_mask`'s ``(mask, causal)`` as :func:`backend_mask`
    gives them to a forced backend, run under :func:`under_backend`;
    labelled ``torch:<the backend's aten op><call_suffix>``, algorithm ``sdpa_kernel(SDPBackend.X)``
    (prefixed by ``algorithm``)."""
    mask, causal = backend_mask(c, c.cfg, mask, causal)
    out = []
    for backend, op in SDPA_BACKENDS.items():
        label = f"sdpa_kernel(SDPBackend.{backend})"
        out.append(Candidate(f"torch:{op}{call_suffix}", f"{algorithm}, {label}" if algorithm else label,
                             under_backend(c.torch, backend, make(mask, causal)), out_numel,
                             "; ".join(x for x in (note, f"forced with torch.nn.attention.{label}") if x),
                             {**details, "backend": backend}))
    return out


def _sdpa(c: Ctx) -> Candidate:
    """``F.scaled_dot_product_attention`` on Q, K, V as the pattern's views (``enable_gqa`` with h_kv <
    h); with ``stats`` (the training forward) on inputs that require grad, under autograd. PyTorch's
    own choice of backend is the candidate (algorithm ``default``); each backend forced
    (:data:`SDPA_BACKENDS`: flash, memory-efficient, cuDNN, math) is a variant of it
    (:attr:`Candidate.variants`), not_supported with PyTorch's reason where the backend refuses. A
    sliding window is the boolean band of :func:`window_mask`. Raises :class:`NotSupported` for an
    attention sink or a logit soft-cap: ``F.scaled_dot_product_attention`` has neither term."""
    cfg = c.cfg
    if cfg.sink or cfg.softcap:
        what = "attention sink (GPT-OSS's per-head sink logit)" if cfg.sink else "logit soft-capping (Gemma-2's)"
        raise NotSupported(f"torch.nn.functional.scaled_dot_product_attention has no {what}; the group's layers "
                           "stand for PyTorch's eager form")
    F = functional(c)
    qs, ks, vs, os_ = cfg.strides()
    shapes = cfg.input_shapes() + [cfg.output_shape()]

    def view(shape, strides, grad=False):
        extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
        base = c.randn((extent,))
        return (base.requires_grad_() if grad else base).as_strided(shape, strides)

    def setup():
        qkv = [view(s, st, cfg.stats) for s, st in zip(shapes[:3], (qs, ks, vs))]
        if cfg.v_in_k:  # V inside K's rows (MLA's latent cache): one buffer
            qkv[2] = qkv[1][..., :cfg.d_v]
        return {"qkv": qkv, "out": view(shapes[3], os_)}
    t = with_autograd(c.torch, setup)() if cfg.stats else setup()
    q, k, v = (t["qkv"][i] for i in range(3))
    out = t["out"]
    scale = float(cfg.scale)
    o_dims = shapes[3]
    gqa = {"enable_gqa": True} if cfg.kv_heads != cfg.h else {}

    def make(mask, causal):
        def run():
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, **gqa)
            if all(d == 1 or st == want for d, st, want in zip(o_dims, o.stride(), os_)):
                return o  # written where the consumer reads it
            out.copy_(o.detach())  # the layout the consumer reads: PyTorch copies there too
            return out
        return with_autograd(c.torch, run) if cfg.stats else run
    strided = bool(cfg.q_strides or cfg.k_strides or cfg.v_strides or cfg.o_strides)
    notes = ["Q, K, V read as strided views; O copied where its layout differs"] if strided else []
    if cfg.stats:
        notes.append("training forward: Q, K, V require grad (autograd records the call; the fused kernels save the logsumexp)")
    details = {"strided": strided, **({"training": True} if cfg.stats else {})}
    mask, causal = torch_mask(c, cfg)
    cand = Candidate("torch:aten::scaled_dot_product_attention", "default", make(mask, causal),
                     numel(cfg.output_shape()), "; ".join(notes), details)
    cand.variants = backend_variants(c, make, mask, causal, "; ".join(notes), cand.out_numel, details)
    return cand


# ------------------------------------------------------------------- fusion patterns (decomposed attention)

def _gemm_operands(ly: Node) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(A, B) shapes of a MatMul layer whose two operands are both data (not weights)."""
    if ly.op_type != "MatMul" or ly.status != "benchmark" or ly.static_inputs or len(ly.inputs) != 2:
        return None
    a, b = ly.input_shapes
    if a is None or b is None or len(a) < 2 or len(a) != len(b):
        return None
    return tuple(a), tuple(b)


def _attention_bias(mask: tuple[int, ...], scores: tuple[int, ...]) -> tuple[int, ...] | None:
    """The additive mask's shape in cuDNN's (b, h, s_q, s_kv) form (with the leading dims of the
    scores mapped as in :class:`benanza.kinds.SdpaConfig`), or None when it cannot be one."""
    r = len(scores)
    if len(mask) > r:
        return None
    m = (1,) * (r - len(mask)) + tuple(mask)
    if any(d not in (1, full) for d, full in zip(m, scores)):
        return None
    lead_m, lead_s = m[:-2], scores[:-2]
    if len(lead_s) == 0:
        return (1, 1) + m[-2:]
    if len(lead_s) == 1:
        return (lead_m[0], 1) + m[-2:]
    outer_m, outer_s = lead_m[:-1], lead_s[:-1]
    if any(d != 1 for d in outer_m) and outer_m != outer_s:
        return None  # partly broadcast outer dims do not fold into one b
    return (math.prod(outer_m), lead_m[-1]) + m[-2:]


def _causal(values: np.ndarray) -> bool:
    """A constant additive mask that is 0 on and below the diagonal and very negative above it."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim < 2 or v.shape[-1] != v.shape[-2] or v.shape[-1] < 2:
        return False
    v = v.reshape(-1, v.shape[-2], v.shape[-1])
    upper = np.triu(np.ones(v.shape[-2:], dtype=bool), 1)
    return bool(np.all(v[:, ~upper] == 0) and np.all(v[:, upper] <= -1e4))


#: zero-cost ops that only relabel a packed tensor's shape (a reshape of the same memory)
_RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")


def _view_step(ly: Node, v: V.View) -> V.View | None:
    """The view ``ly``'s output is of the memory ``v`` views, when ``ly`` moves data in a way a
    strided reader absorbs (Transpose, the zero-cost reshapes, Dropout in inference, constant
    scalar Gather, constant Slice), else None."""
    out = ly.output_shapes[0] if ly.output_shapes else None
    if out is None:
        return None
    if ly.status == "zero_cost" and ly.op_type in _RESHAPES + ("Dropout",):
        return V.reshape(v, tuple(out))
    if ly.status == "zero_cost" and ly.op_type in ("Slice", "Pad", "Transpose", "Concat", "Cast"):
        return v if v.shape == tuple(out) else None  # an identity (CopyConfig.is_identity)
    cfg = ly.config
    if ly.status != "benchmark":
        return None
    if isinstance(cfg, CopyConfig) and cfg.op == "Transpose":
        return V.permute(v, tuple(cfg.attr("perm")))
    if isinstance(cfg, CopyConfig) and cfg.op == "Slice":
        return V.slice_view(v, tuple(cfg.attr("starts")), tuple(cfg.attr("steps")), tuple(out))
    if isinstance(cfg, GatherConfig) and len(cfg.values) == 1 and len(cfg.indices) <= 1:
        w = V.select(v, cfg.axis, cfg.values[0])
        return V.unsqueeze(w, (cfg.axis,)) if w is not None and len(cfg.indices) == 1 else w
    return None


def _inverse_view_step(ly: Node, v: V.View) -> V.View | None:
    """The view of ``ly``'s input over the memory of its output ``v`` (Transpose, reshapes)."""
    src = ly.input_shapes[0] if ly.input_shapes else None
    if src is None:
        return None
    if ly.status == "zero_cost" and ly.op_type in _RESHAPES + ("Dropout",):
        return V.reshape(v, tuple(src))
    if ly.status == "benchmark" and isinstance(ly.config, CopyConfig) and ly.config.op == "Transpose":
        return V.permute(v, V.inverse_permutation(tuple(ly.config.attr("perm"))))
    return None


def _bhsd(v: V.View) -> tuple[int, int, int, int] | None:
    """The strides over (b, h, s, d) of an attention operand view of shape (lead..., s, d), with
    the lead dims mapped as :class:`benanza.kinds.SdpaConfig` maps them (one lead dim: b; more:
    b = all but the last, h = the last); a dim of size 1 takes its packed stride. None when b, h
    or s has no single stride or d is not contiguous (stride 1), which fused attention needs."""
    if len(v.dims) < 2:
        return None
    lead = list(v.dims[:-2])
    h = lead.pop() if len(lead) >= 2 else ()
    groups = (tuple(m for dim in lead for m in dim), h, v.dims[-2], v.dims[-1])
    sizes = [math.prod(sz for sz, _ in g) for g in groups]
    packed = V.packed_strides(tuple(sizes))
    out = []
    for modes, size, pk in zip(groups, sizes, packed):
        c = V.coalesce(modes)
        if len(c) > 1:
            return None
        out.append(c[0][1] if c and size > 1 else pk)
    if out[3] != 1:
        return None
    return tuple(out)


def _operand_chain(pat: Graph, tensor: str, group: set[int]) -> tuple[list[Node], str]:
    """Walking back from an attention operand: the movement and constant-scale layers that only
    feed it (nearest first) and the tensor they start from."""
    chain: list[Node] = []
    t = pat.made_by(tensor)
    while t is not None and pat.free(t) and t.index not in group and t.inputs and pat.sole_user(t) is not None:
        movement = _view_step(t, V.View.packed(tuple(t.input_shapes[0]))) is not None \
            if t.input_shapes and t.input_shapes[0] is not None else False
        if not movement and pat.scale_of(t) is None:
            break
        chain.append(t)
        tensor = t.inputs[0]
        t = pat.made_by(tensor)
    return chain, tensor


def _absorb_operand(pat: Graph, chain: list[Node], want_t: bool) -> tuple[list[Node], float, tuple | None]:
    """The longest part of ``chain`` (nearest the attention first) that a strided read absorbs:
    (absorbed layers, their constant scale, (b, h, s, d) strides or None when packed).
    ``want_t``: the operand is K^T, whose last two dims the strides swap back to K's."""
    fwd = list(reversed(chain))  # from the source towards the attention
    for i in range(len(fwd) + 1):
        part = fwd[i:]
        src = part[0].input_shapes[0] if part else None
        if part and src is None:
            continue
        v = V.View.packed(tuple(src)) if part else None
        for ly in part:
            v = v if pat.scale_of(ly) is not None else _view_step(ly, v)
            if v is None:
                break
        if part and v is None:
            continue
        scale = math.prod(pat.scale_of(ly) or 1.0 for ly in part)
        if not part:
            return [], 1.0, None
        if want_t:
            r = len(v.shape)
            v = V.permute(v, tuple(range(r - 2)) + (r - 1, r - 2))
        st = _bhsd(v)
        if st is None:
            continue
        return part, scale, st
    return [], 1.0, None


def _absorb_output(pat: Graph, mm2: Node) -> tuple[list[Node], tuple | None]:
    """The Transposes and reshapes after the attention output that only move it, as far as the
    output can be written straight into their final tensor: (layers, O strides or None)."""
    fwd: list[Node] = []
    t = mm2
    while True:
        u = pat.sole_user(t)
        if u is None or not pat.free(u) or _inverse_view_step(u, V.View.packed(tuple(u.output_shapes[0] or ()))) is None:
            break
        fwd.append(u)
        t = u
    for k in range(len(fwd), 0, -1):
        v = V.View.packed(tuple(fwd[k - 1].output_shapes[0]))
        for ly in reversed(fwd[:k]):
            v = _inverse_view_step(ly, v)
            if v is None:
                break
        st = _bhsd(v) if v is not None else None
        if st is not None:
            return fwd[:k], st
    return [], None


def find_attention(pat: Graph, mm1: Node):
    """MatMul(Q, K^T) -> [Mul/Div by constants] -> [Add mask] -> Softmax(last) -> MatMul(., V), with
    the data movement around it that a strided fused kernel reads through: the head-split Reshapes,
    Transposes, Squeezes and constant-index Gathers that make Q, K^T and V out of a projection's
    output (shared by Q, K and V when only they read it), the constant scaling of Q and K^T (torch's
    SDPA export scales both by sqrt(scale)), and the Transposes and Reshapes that merge the heads of
    the output. The absorbed movement becomes the strides of :class:`benanza.kinds.SdpaConfig`."""
    ops = _gemm_operands(mm1)
    if ops is None or not pat.free(mm1):
        return None
    q_shape, kt_shape = ops
    chain = [mm1.index]
    scale = 1.0
    nxt = pat.sole_user(mm1)
    f = pat.scale_of(nxt) if pat.free(nxt) else None
    if f is not None:
        scale *= f
        chain.append(nxt.index)
        nxt = pat.sole_user(nxt)
    softcap, nxt = _softcap(pat, nxt, chain)
    scores = tuple(mm1.output_shapes[0] or ())
    got = _attention_mask(pat, nxt, chain, scores)
    if got is None:
        return None
    mask, bias, window, nxt = got
    sink = _sink_columns(pat, nxt, chain, scores)
    if sink is not None:
        nxt = sink
    if not pat.free(nxt) or nxt.status != "benchmark" or not isinstance(nxt.config, SoftmaxConfig) \
            or nxt.config.log or nxt.config.shape[2] != 1:
        return None
    chain.append(nxt.index)
    mm2 = _drop_sink(pat, nxt, chain, scores) if sink is not None else \
        (pat.sole_user(nxt) or _nan_guard(pat, nxt, chain))
    while mm2 is not None and mm2.status == "zero_cost" and mm2.op_type in ("Dropout", "Identity") and pat.free(mm2):
        chain.append(mm2.index)
        mm2 = pat.sole_user(mm2)
    ops2 = _gemm_operands(mm2) if mm2 is not None else None
    if ops2 is None or not pat.free(mm2) or mm2.inputs[0] != pat.layers[chain[-1]].outputs[0]:
        return None
    p_shape, v_shape = ops2
    lead = q_shape[:-2]
    if kt_shape[:-2] != lead or v_shape[:-2] != lead or kt_shape[-2] != q_shape[-1] or v_shape[-2] != kt_shape[-1]:
        return None
    chain.append(mm2.index)
    strides, absorbed = _absorb_operands(pat, (mm1.inputs[0], mm1.inputs[1], mm2.inputs[1]), set(chain))
    for part, f, _ in absorbed:
        scale *= f
        chain += [ly.index for ly in part]
    strides, h_kv, v_in_k = _gqa_operands(pat, absorbed, strides, chain, lead, kt_shape[-1])
    out_part, o_st = _absorb_output(pat, mm2)
    chain += [ly.index for ly in out_part]
    if len(lead) == 0:
        b, h = 1, 1
    elif len(lead) == 1:
        b, h = lead[0], 1
    else:
        b, h = math.prod(lead[:-1]), lead[-1]
    cfg = SdpaConfig(b=b, h=h, s_q=q_shape[-2], s_kv=kt_shape[-1], d=q_shape[-1], d_v=v_shape[-1],
                       scale=_canonical_scale(scale), mask=mask, bias=bias, h_kv=h_kv, window=window,
                       sink=sink is not None, softcap=softcap)
    given = list(strides) + [o_st]
    packed = cfg.strides()
    fields = ("q_strides", "k_strides", "v_strides", "o_strides")
    cfg = dataclasses.replace(cfg, **{name: tuple(st) for name, st, pk in zip(fields, given, packed)
                                      if st is not None and tuple(st) != tuple(pk)}, v_in_k=v_in_k)
    return chain, cfg


def _softcap(pat: Graph, node: Node | None, chain: list[int]) -> tuple[float, Node | None]:
    """Gemma-2's soft-capping of the scaled scores, ``cap * tanh(s / cap)``: ``node`` a constant scale by
    1 / cap (Div by cap, or Mul by its inverse), read only by a Tanh, read only by a constant scale by
    cap (within 1e-6). Returns (cap, the node after it) with the three joining ``chain``; (0.0, ``node``)
    for any other form."""
    if node is None or not pat.free(node):
        return 0.0, node
    inv = pat.scale_of(node)
    tanh = pat.sole_user(node) if inv else None
    if tanh is None or not pat.free(tanh) or tanh.op_type != "Tanh" or tanh.status != "benchmark":
        return 0.0, node
    mul = pat.sole_user(tanh)
    cap = pat.scale_of(mul) if mul is not None and pat.free(mul) else None
    if not cap or cap <= 0 or abs(cap * inv - 1.0) > 1e-6:
        return 0.0, node
    chain += [node.index, tanh.index, mul.index]
    return float(cap), pat.sole_user(mul)


def _repeat_kv(pat: Graph, tensor: str) -> tuple[list[Node], int] | None:
    """GQA's repeat of K or V heads (transformers' ``repeat_kv``): ``tensor`` (b, h, s, d) made by a
    Reshape of Expand((b, h_kv, 1, s, d) -> (b, h_kv, h / h_kv, s, d)), the Expand's input an Unsqueeze
    of (b, h_kv, s, d) or not, each read only by the next. Returns ([Reshape, Expand, (Unsqueeze)],
    h_kv), or None: a fused attention reads the h_kv heads itself (cuDNN's h_k < h_q)."""
    r = pat.made_by(tensor)
    if r is None or not pat.free(r) or r.op_type != "Reshape" or r.status != "zero_cost" or not r.inputs:
        return None
    e = pat.made_by(r.inputs[0])
    if e is None or not pat.free(e) or e.op_type != "Expand" or pat.sole_user(e) is not r or not e.inputs:
        return None
    src, big, out = e.input_shapes[0], e.output_shapes[0], r.output_shapes[0]
    if src is None or big is None or out is None or len(big) != 5 or len(src) != 5 or len(out) != 4:
        return None
    b, h_kv, n, s, d = big
    if tuple(src) != (b, h_kv, 1, s, d) or tuple(out) != (b, h_kv * n, s, d):
        return None
    layers = [r, e]
    u = pat.made_by(e.inputs[0])
    if u is not None and pat.free(u) and u.op_type == "Unsqueeze" and pat.sole_user(u) is e:
        layers.append(u)
    return layers, h_kv


def _gqa_operands(pat: Graph, absorbed: list, strides: tuple, chain: list[int], lead: tuple, s_kv: int):
    """GQA in a decomposed attention: when K's and V's absorbed movement starts at the Reshape of a
    repeat of fewer heads (:func:`_repeat_kv`, the same h_kv for both) and reads the repeat packed,
    the Expands and Unsqueezes join ``chain`` and K and V are read packed with h_kv heads. A V that is a Slice of
    the features of the latent K repeats (:func:`_sliced_values`, MLA's absorbed decode) joins too, read in
    K's rows. Returns ((q, k, v) strides, h_kv (0 without GQA), whether V lies in K's rows)."""
    if len(lead) < 2:
        return strides, 0, False
    h = lead[-1]
    reps = []
    for i in (1, 2):
        part = absorbed[i][0]
        rep = _repeat_kv(pat, part[0].outputs[0]) if part else None
        if rep is None:
            return strides, 0, False
        d = part[0].output_shapes[0][-1]
        packed = V.packed_strides((math.prod(lead[:-1]), h, s_kv, d))
        if strides[i] is not None and tuple(strides[i]) != tuple(packed):
            return strides, 0, False
        reps.append(rep)
    h_kv = reps[0][1]
    if reps[1][1] != h_kv or h % h_kv or h_kv == h:
        return strides, 0, False
    chain += [ly.index for layers, _ in reps for ly in layers[1:]]
    sliced = _sliced_values(pat, reps[1][0][-1])
    if sliced is None:
        return (strides[0], None, None), h_kv, False
    chain.append(sliced[0].index)
    k_src = reps[0][0][-1].inputs[0] if reps[0][0][-1].inputs else None
    if k_src != sliced[0].inputs[0]:
        return (strides[0], None, sliced[1]), h_kv, False
    # V inside K's rows (MLA's latent): K's own packed strides, one buffer
    k_packed = V.packed_strides((math.prod(lead[:-1]), h_kv, s_kv, sliced[0].input_shapes[0][-1]))
    return (strides[0], None, tuple(k_packed)), h_kv, True


def _sliced_values(pat: Graph, first: Node) -> tuple[Node, tuple] | None:
    """MLA's values in the absorbed form (:mod:`benanza.processing.mla`; vLLM's MLA decode, FlashMLA): V is
    the first d_v features of the latent cache entry K reads whole, a Slice of the last axis that only the
    repeat's first layer ``first`` reads. Returns (the Slice, V's (b, h_kv, s, d_v) strides over the
    latent's memory): a fused kernel reads V out of the cache in place, as FlashMLA does; None otherwise."""
    sl = pat.made_by(first.inputs[0]) if first.inputs else None
    if sl is None or not pat.free(sl) or sl.status != "benchmark" or pat.sole_user(sl) is not first \
            or not isinstance(sl.config, CopyConfig) or sl.config.op != "Slice" or not sl.input_shapes \
            or sl.input_shapes[0] is None or len(sl.input_shapes[0]) != 4:
        return None
    src, out = tuple(sl.input_shapes[0]), tuple(sl.output_shapes[0] or ())
    if out[:-1] != src[:-1]:
        return None  # only the feature axis is cut
    v = _view_step(sl, V.View.packed(src))
    st = _bhsd(v) if v is not None else None
    return (sl, st) if st is not None else None


def find_gqa_attention(pat: Graph, att: Node):
    """ONNX ``Attention`` (an SDPA layer of its own) whose K and V are the repeat of fewer heads
    (:func:`_repeat_kv`): the group of the repeats and the attention as one SDPA call with h_kv K/V
    heads (packed, as the repeats' inputs are)."""
    cfg = att.config
    if att.op_type != "Attention" or att.status != "benchmark" or not isinstance(cfg, SdpaConfig) \
            or cfg.kv_heads != cfg.h or cfg.k_strides or cfg.v_strides or len(att.inputs) < 3:
        return None
    reps = [_repeat_kv(pat, t) for t in att.inputs[1:3]]
    if any(r is None for r in reps) or reps[0][1] != reps[1][1] or att.inputs[1] == att.inputs[2]:
        return None
    chain = [ly.index for layers, _ in reps for ly in layers] + [att.index]
    return chain, dataclasses.replace(cfg, h_kv=reps[0][1])


def _sink_logits(pat: Graph, concat: Node, scores: tuple[int, ...]) -> bool:
    """Whether the second input of the Concat ``concat`` is a sink column: (.., s_q, 1) with the scores'
    leading dims (or 1), a constant whose values differ only over the heads (the sinks reshaped to
    (1, h, 1, 1) and expanded, folded), or an Expand of such a constant read only by ``concat``."""
    tensors = list(concat.inputs) + list(concat.static_inputs)
    if len(tensors) != 2:
        return False
    shape = pat.ctx.shape(tensors[1])
    if shape is None or len(shape) != len(scores) or shape[-1] != 1 \
            or any(d not in (1, f) for d, f in zip(shape[:-1], scores[:-1])):
        return False
    src, exp = tensors[1], pat.made_by(tensors[1])
    if exp is not None:
        if not pat.free(exp) or exp.op_type != "Expand" or pat.sole_user(exp) is not concat or not exp.inputs:
            return False
        src = exp.inputs[0]
    if src not in pat.ctx.static and pat.ctx.value(src) is None:
        return False
    node = getattr(pat.ctx, "producer", {}).get(concat.outputs[0])
    if node is not None and list(node.input)[1:] != [tensors[1]]:
        return False  # the sink's column is the last one (the Slice after the Softmax keeps the first)
    v = _static(pat.ctx, src)
    if v is None:
        return True  # a constant too large to fold: its shape is the sink's
    v = np.asarray(v)
    if v.ndim < 3:
        return v.size == 1  # one sink for every head
    per_head = np.moveaxis(v, -3, 0).reshape(v.shape[-3], -1)
    return bool(np.all(per_head == per_head[:, :1]))


def _sink_columns(pat: Graph, nxt: Node | None, chain: list[int], scores: tuple[int, ...]) -> Node | None:
    """The attention sink of GPT-OSS (transformers' ``models/gpt_oss`` ``eager_attention_forward``):
    the masked scores (b, h, s_q, s_kv) concatenated on the last axis with one column of per-head sink
    logits (:func:`_sink_logits`), then, optionally, the row maximum subtracted (ReduceMax over the last
    axis, Sub: the overflow guard transformers adds, which the softmax's own max makes redundant). When
    ``nxt`` starts that, append its layers (and the sink's Expand) to ``chain`` and return the layer
    after them (the Softmax), else None."""
    if not pat.free(nxt) or nxt.status != "benchmark" or nxt.op_type != "Concat" or not chain:
        return None
    cfg = nxt.config
    prev = pat.layers[chain[-1]].outputs[0]
    if getattr(cfg, "op", None) != "Concat" or not nxt.inputs or nxt.inputs[0] != prev \
            or cfg.attr("axis")[0] % len(scores) != len(scores) - 1 \
            or tuple(cfg.y) != tuple(scores[:-1]) + (scores[-1] + 1,) or not _sink_logits(pat, nxt, scores):
        return None
    added = [nxt.index]
    exp = pat.made_by(nxt.inputs[1]) if len(nxt.inputs) == 2 else None
    if exp is not None:
        added.append(exp.index)
    after = pat.sole_user(nxt)
    users = pat.users(nxt.outputs[0])
    if after is None and len(users) == 2 and nxt.outputs[0] not in pat.graph_outputs:
        red = next((u for u in users if u.op_type == "ReduceMax"), None)
        sub = next((u for u in users if pat.elementwise(u, "sub")), None)
        if red is None or sub is None or not pat.free(red) or not pat.free(sub) or red.status != "benchmark" \
                or pat.sole_user(red) is not sub or list(sub.inputs) != [nxt.outputs[0], red.outputs[0]] \
                or tuple(red.config.y) != tuple(cfg.y[:-1]) + (1,):
            return None
        added += [red.index, sub.index]
        after = pat.sole_user(sub)
    if after is None:
        return None
    chain += added
    return after


def _drop_sink(pat: Graph, softmax: Node, chain: list[int], scores: tuple[int, ...]) -> Node | None:
    """After the Softmax of a sink: the Slice that drops the sink's column (the first s_kv columns of
    the last axis, ``probs[..., :-1]``), appended to ``chain``; the layer after it (the P V MatMul,
    past an inference Dropout or Identity), or None."""
    sl = pat.sole_user(softmax)
    cfg = sl.config if sl is not None else None
    if not pat.free(sl) or sl.status != "benchmark" or getattr(cfg, "op", None) != "Slice" \
            or tuple(cfg.y) != tuple(scores) or any(cfg.attr("starts")) or any(x != 1 for x in cfg.attr("steps")):
        return None
    chain.append(sl.index)
    return pat.sole_user(sl)


def _nan_guard(pat: Graph, softmax: Node, chain: list[int]) -> Node | None:
    """torch.export's SDPA decomposition zeroes the rows a mask left empty: Softmax -> IsNaN ->
    Where(isnan, 0, softmax). When that guard is all that reads the Softmax, append its two layers
    to ``chain`` and return the layer after it (a fused attention returns those rows as zeros too)."""
    users = pat.users(softmax.outputs[0])
    if len(users) != 2 or softmax.outputs[0] in pat.graph_outputs:
        return None
    isnan = next((u for u in users if u.op_type == "IsNaN"), None)
    where = next((u for u in users if u.op_type == "Where"), None)
    if isnan is None or where is None or not pat.free(isnan) or not pat.free(where) \
            or pat.sole_user(isnan) is not where or list(where.inputs) != [isnan.outputs[0], softmax.outputs[0]]:
        return None
    chain += [isnan.index, where.index]
    return pat.sole_user(where)


def _attention_mask(pat: Graph, nxt: Node | None, chain: list[int], scores: tuple[int, ...]):
    """The additive masks between the scores and the Softmax: (mask kind, bias shape, sliding window,
    the layer after them), appending their layers to ``chain``; None when an Add there cannot be a
    mask. One Add of a constant triangular mask (or of a band: a sliding window, :func:`causal_window_of`)
    is cuDNN's causal mask; one Add of a broadcastable
    tensor a bias of its shape; several Adds, or Reshapes between them (Swin's relative position
    bias, then its shifted-window mask added per window), one bias of the scores' full shape (the
    constants summed and broadcast once: data-independent, as a compiler would precompute them)."""
    adds, reshapes = [], []
    while pat.free(nxt) and nxt.status in ("benchmark", "zero_cost"):
        if pat.elementwise(nxt, "add") and math.prod(nxt.config.output_shape()) == math.prod(scores):
            adds.append(nxt)
        elif nxt.status == "zero_cost" and nxt.op_type in ("Reshape", "Identity") and nxt.output_shapes \
                and nxt.output_shapes[0] is not None and math.prod(nxt.output_shapes[0]) == math.prod(scores):
            reshapes.append(nxt)
        else:
            break
        chain.append(nxt.index)
        nxt = pat.sole_user(nxt)
    final = pat.layers[chain[-1]].output_shapes[0] if chain else None
    if final is None or tuple(final[-2:]) != tuple(scores[-2:]):
        return None
    if not adds:
        return "none", (), 0, nxt
    others = []
    for a in adds:
        prev = pat.layers[chain[chain.index(a.index) - 1]].outputs[0]
        other = [i for i in a.inputs if i != prev] + list(a.static_inputs)
        if len(other) != 1 or pat.ctx.shape(other[0]) is None:
            return None
        others.append(other[0])
    if len(adds) == 1 and not reshapes:
        value = pat.ctx.static_value(others[0]) if others[0] in pat.ctx.static else None
        if value is not None and _causal(value):
            return "causal", (), 0, nxt
        mshape = pat.ctx.shape(others[0])
        if value is not None and scores[-1] == scores[-2] and tuple(mshape[-2:]) == tuple(scores[-2:]):
            w = causal_window_of(value, 0)  # a constant sliding-window mask (the plain causal one is above)
            if w:
                return "causal", (), w, nxt
        w = causal_window_tensor(pat.ctx, others[0], scores[-2], scores[-1] - scores[-2]) \
            if value is None and tuple(mshape[-2:]) == tuple(scores[-2:]) and scores[-2] > 1 else None
        if w is not None:
            # a causal mask built from the positions (Where/And of a folded triangle, or of a band: a
            # sliding window): cuDNN's causal masking, aligned bottom-right where the keys outnumber the
            # queries (a KV cache), with the window's left bound where it drops keys
            m = "causal" if scores[-1] == scores[-2] else "causal_bottom_right"
            return m, (), effective_window(w, scores[-2], scores[-1], m), nxt
        b4 = _attention_bias(tuple(pat.ctx.shape(others[0])), scores)
        return (None if b4 is None else ("bias", b4, 0, nxt))
    full = _attention_bias(scores, scores)
    return (None if full is None else ("bias", full, 0, nxt))


def _absorb_operands(pat: Graph, operands: tuple[str, str, str], group: set[int]):
    """Q, K^T and V's movement chains (:func:`_operand_chain`), extended back through the movement
    layers they share when only they read them (a packed QKV projection split into three), and
    what each absorbs (:func:`_absorb_operand`). Returns ((q, k, v) strides, absorbed parts)."""
    chains, sources = [], []
    for t in operands:
        c, src = _operand_chain(pat, t, group)
        chains.append(c)
        sources.append(src)
    shared: list[Node] = []
    members = group | {ly.index for c in chains for ly in c}
    src = sources[0] if len(set(sources)) == 1 else None
    while src is not None:
        t = pat.made_by(src)
        users = pat.users(src)
        if t is None or not pat.free(t) or not t.inputs or src in pat.graph_outputs or not users \
                or any(u.index not in members for u in users) or t.input_shapes[0] is None \
                or _view_step(t, V.View.packed(tuple(t.input_shapes[0]))) is None:
            break
        shared.append(t)
        members.add(t.index)
        src = t.inputs[0]
    absorbed = [_absorb_operand(pat, c + shared, want_t=(i == 1)) for i, c in enumerate(chains)]
    if shared and any(not set(s.index for s in shared) <= {ly.index for ly in part} for part, _, _ in absorbed):
        absorbed = [_absorb_operand(pat, c, want_t=(i == 1)) for i, c in enumerate(chains)]
    return tuple(a[2] for a in absorbed), absorbed


def _canonical_scale(scale: float) -> float:
    """The attention scale to 6 significant digits: sqrt(s) * sqrt(s) in float32 (torch's SDPA export)
    and 1 / sqrt(d) give the same config key."""
    return float(f"{float(np.float32(scale)):.6g}")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=SdpaConfig(b=1, h=24, s_q=49, s_kv=49, d=32, d_v=32, scale=0.176777, mask='bias', bias=(1, 24, 49, 49),
        q_strides=(37632, 32, 2304, 1), k_strides=(37632, 32, 2304, 1), v_strides=(37632, 32, 2304, 1),
        o_strides=(37632, 32, 768, 1)),
    name="SDPA", config=SdpaConfig, template="sdpa.cpp.j2", case=_sdpa_case, min_bytes=_min_bytes,
    torch=_sdpa, onnx={"Attention": _map_attention},
    typed_ops=(), fused_from=('MatMul', 'Softmax', 'MatMul'),
    aten={"Attention": ("aten::scaled_dot_product_attention",)},
    nhwc=False, image=False,
    patterns=(Pattern("MatMul -> [scale] -> [mask] -> Softmax -> MatMul, with its data movement", (20, 0), find_attention),
              Pattern("repeated K/V heads -> Attention (GQA)", (30, 0), find_gqa_attention)),
    contrib={(MS_DOMAIN, "GroupQueryAttention"): ContribOp(_map_gqa, _gqa_shapes, contrib_doc("GroupQueryAttention"),
                                                           ("aten::scaled_dot_product_attention",)),
             (MS_DOMAIN, "Attention"): ContribOp(_map_ms_attention, _ms_attention_shapes, contrib_doc("Attention"),
                                                 ("aten::addmm", "aten::linear", "aten::scaled_dot_product_attention")),
             (MS_DOMAIN, "MultiHeadAttention"): ContribOp(_map_mha, _mha_shapes, contrib_doc("MultiHeadAttention"),
                                                          ("aten::scaled_dot_product_attention",))})
