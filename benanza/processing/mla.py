"""MLA's weight-absorbed decode step, as serving engines run it (``benanza torch --mla absorbed``).

Multi-head latent attention (DeepSeek-V2/V3; transformers 5's ``DeepseekV2Attention`` and
``DeepseekV3Attention``) caches per token one compressed latent ``c_kv`` ([r], r = ``kv_lora_rank``,
after ``kv_a_layernorm``) and one rotary key ``k_rope`` ([d_rope], ``qk_rope_head_dim``, after the
rotary embedding). transformers' forward re-expands the whole cache every step: ``kv_b_proj``
([H * (d_nope + d_v), r]) over every cached token gives per-head keys and values, then an H-head
attention with d_qk = d_nope + d_rope. Serving engines do not: the DeepSeek-V2 paper (Liu et al.,
arXiv:2405.04434, section 2.1.2, "we can absorb W^UK into W^Q, and W^UV into W^O") and vLLM's MLA
backend (``vllm/v1/attention/backends/mla/common.py``, its module docstring's decode path, the form
FlashMLA and FlashInfer's MLA kernels run) compute, per head h,

* ``q_latent[h] = q_nope[h] @ W_UK[h]``, W_UK[h] = rows h * (d_nope + d_v) ... + d_nope of
  ``kv_b_proj.weight``: [d_nope, r];
* ``scores = [q_latent, q_rope] . [c_kv, k_rope]`` over the cache: one attention of H query heads
  against one key/value head (MQA), d_qk = r + d_rope (576 for DeepSeek-V2/V3), d_v = r (512);
* ``out_latent = softmax(scale * scores) @ c_kv`` ([H, r]) and ``out[h] = out_latent[h] @ W_UV[h]``
  (W_UV[h]: [r, d_v], the value rows of ``kv_b_proj``), then ``o_proj`` as before.

The cache holds the latent as serving engines store it: one tensor per layer, ``[B, 1, T, r + d_rope]``,
``c_kv`` and ``k_rope`` concatenated (vLLM's ``concat_and_cache_mla``; FlashMLA's ``kcache`` of
head dim 576, whose first 512 features are the values). The step appends the new token's entry and
reads the latent once: keys are the whole entry, values its first r features.

:func:`absorb` swaps each MLA attention module of a built model for this form (its class replaced by a
subclass with :func:`absorbed_forward`; ``kv_b_proj`` split into the per-head ``w_uk`` [H, d_nope, r]
and ``w_uv`` [H, r, d_v]); the step equals transformers' own to float rounding (tests/test_mla.py).
torch is imported inside functions.
"""
from __future__ import annotations

import inspect
import sys

#: the transformers attention classes of MLA :func:`absorb` replaces
MLA_CLASSES = ("DeepseekV2Attention", "DeepseekV3Attention")


def is_mla(cfg) -> bool:
    """Whether a transformers configuration has MLA attention: a ``kv_lora_rank`` and a
    ``qk_rope_head_dim`` (DeepSeek-V2/V3 and the model types built on them)."""
    return all(isinstance(getattr(cfg, k, None), int) and getattr(cfg, k) > 0
               for k in ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"))


def latent_dim(cfg) -> int:
    """Features per token of one layer's latent cache entry: ``kv_lora_rank + qk_rope_head_dim``
    (576 for DeepSeek-V2/V3)."""
    return int(cfg.kv_lora_rank) + int(cfg.qk_rope_head_dim)


def _rotary(attn, q_rot, k_rot, position_embeddings):
    """The rotary embedding of ``attn``'s own model module on the query's and key's rotary parts:
    DeepSeek-V2's complex form (``apply_rotary_emb`` with ``freqs_cis``), DeepSeek-V3's cos/sin form
    (interleaved where ``config.rope_interleave``)."""
    mod = sys.modules[_base(attn).__module__]
    if hasattr(mod, "apply_rotary_emb"):  # DeepSeek-V2
        return mod.apply_rotary_emb(q_rot, k_rot, position_embeddings.to(q_rot.device))
    cos, sin = position_embeddings
    if getattr(attn.config, "rope_interleave", False):
        return mod.apply_rotary_pos_emb_interleave(q_rot, k_rot, cos, sin)
    return mod.apply_rotary_pos_emb(q_rot, k_rot, cos, sin)


def _base(attn) -> type:
    """The transformers class of an MLA attention module (:data:`MLA_CLASSES`), absorbed or not."""
    return next(c for c in type(attn).__mro__ if c.__name__ in MLA_CLASSES)


def _one_head_to(x, heads: int):
    """[B, 1, T, d] -> [B, heads, T, d], transformers' ``repeat_kv`` form (an Unsqueeze, an Expand and a
    Reshape in the export, which benanza's SDPA finder reads as one K/V head: h_kv = 1)."""
    b, one, t, d = x.shape
    return x[:, :, None, :, :].expand(b, one, heads, t, d).reshape(b, one * heads, t, d)


def absorbed_forward(self, hidden_states, *args, **kwargs):
    """The absorbed MLA step (module doc) with the calling convention of the replaced class's
    ``forward`` (V2: ``hidden_states, attention_mask, past_key_values, position_embeddings``; V3:
    ``hidden_states, position_embeddings, attention_mask, past_key_values``). hidden_states [B, S,
    hidden]; the cache layer ``layer_idx`` of ``past_key_values`` holds the latent [B, 1, T, r +
    d_rope] as its keys. Returns (output [B, S, hidden], None)."""
    import torch

    bound = inspect.signature(_base(self).forward).bind(self, hidden_states, *args, **kwargs)
    a = {**bound.arguments, **bound.arguments.get("kwargs", {})}
    mask, cache, pos = a.get("attention_mask"), a.get("past_key_values"), a.get("position_embeddings")
    b, s = hidden_states.shape[:-1]
    h, dn, dr, r = self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim, self.kv_lora_rank
    q = self.q_proj(hidden_states) if self.q_lora_rank is None else \
        self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden_states)))
    q_nope, q_rot = torch.split(q.view(b, s, h, dn + dr).transpose(1, 2), [dn, dr], dim=-1)
    c_kv, k_rot = torch.split(self.kv_a_proj_with_mqa(hidden_states), [r, dr], dim=-1)
    c_kv = self.kv_a_layernorm(c_kv).view(b, 1, s, r)
    q_rot, k_rot = _rotary(self, q_rot, k_rot.view(b, 1, s, dr), pos)
    latent = torch.cat((c_kv, k_rot), dim=-1)  # [B, 1, S, r + d_rope]: the cache entry
    if cache is not None:
        latent, _ = cache.update(latent, latent, self.layer_idx)  # the values' copy is never read
    # per head, q_nope [B*S, d_nope] @ W_UK [d_nope, r]: one GEMM batched over the heads (vLLM's torch.bmm)
    q_lat = torch.matmul(q_nope.permute(1, 0, 2, 3).reshape(h, b * s, dn), self.w_uk)  # [H, B*S, r]
    query = torch.cat((q_lat.reshape(h, b, s, r).permute(1, 0, 2, 3), q_rot), dim=-1)  # [B, H, S, r + d_rope]
    scores = torch.matmul(query, _one_head_to(latent, h).transpose(2, 3)) * self.scaling
    if mask is not None:
        m = mask[:, :, :, :latent.shape[-2]]
        scores = scores + (torch.where(m, 0.0, torch.finfo(scores.dtype).min).to(scores.dtype)
                           if m.dtype == torch.bool else m)
    probs = torch.softmax(scores, dim=-1)
    out_latent = torch.matmul(probs, _one_head_to(latent[..., :r], h))  # [B, H, S, r]
    out = torch.matmul(out_latent.permute(1, 0, 2, 3).reshape(h, b * s, r), self.w_uv)  # [H, B*S, d_v]
    return self.o_proj(out.reshape(h, b, s, -1).permute(1, 2, 0, 3).reshape(b, s, h * self.v_head_dim)), None


def absorb(model) -> int:
    """Swap every MLA attention module of ``model`` (:data:`MLA_CLASSES`) for the absorbed form in
    place: ``kv_b_proj`` ([H * (d_nope + d_v), r]) becomes the parameters ``w_uk`` [H, d_nope, r] and
    ``w_uv`` [H, r, d_v] (the same weights), the module's class a subclass whose ``forward`` is
    :func:`absorbed_forward`. Returns how many modules were swapped (0: no MLA in the model)."""
    import torch

    n = 0
    for m in list(model.modules()):
        cls = type(m)
        if cls.__name__ not in MLA_CLASSES or getattr(m, "_benanza_absorbed", False):
            continue
        h, dn, dv, r = m.num_heads, m.qk_nope_head_dim, m.v_head_dim, m.kv_lora_rank
        w = m.kv_b_proj.weight.detach().view(h, dn + dv, r)
        m.w_uk = torch.nn.Parameter(w[:, :dn].clone())  # [H, d_nope, r]
        m.w_uv = torch.nn.Parameter(w[:, dn:].transpose(1, 2).contiguous())  # [H, r, d_v]
        del m.kv_b_proj
        m.__class__ = type("Absorbed" + cls.__name__, (cls,), {"forward": absorbed_forward, "_benanza_absorbed": True})
        n += 1
    return n
