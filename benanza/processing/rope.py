"""A real-valued form of DeepSeek-V2's complex rotary embedding, swapped in while a model is exported.

transformers 5's DeepSeek-V2 (``transformers/models/deepseek_v2/modeling_deepseek_v2.py``) computes its
rotary embedding in complex numbers: ``DeepseekV2RotaryEmbedding.forward`` returns
``freqs_cis = torch.polar(1, position * inv_freq) * attention_scaling`` ([B, S, d_rope / 2], complex64)
and ``apply_rotary_emb`` views each consecutive feature pair (x0, x1) of the query's and key's rotary
parts as one complex number ``x0 + i x1`` and multiplies it by ``freqs_cis``. Neither ONNX exporter
translates that (torch.export: no ONNX function for a complex ``aten.unsqueeze``; TorchScript:
``aten::polar``).

The same arithmetic in real numbers, by the definition of the complex product
``(x0 + i x1)(c + i s) = (x0 c - x1 s) + i (x0 s + x1 c)`` with ``c + i s = freqs_cis``:

* the rotary embedding returns ``[B, S, d_rope / 2, 2]``: ``cos(position * inv_freq) *
  attention_scaling`` and ``sin(...) * attention_scaling`` stacked last, the ``torch.view_as_real``
  layout of ``freqs_cis`` (``torch.polar(1, a)`` is ``cos a + i sin a`` by its definition);
* ``apply_rotary_emb`` returns ``(x0 c - x1 s, x0 s + x1 c)`` interleaved back into the pairs' places
  (``torch.view_as_real(...).flatten(3)``'s layout), in float32 then cast to the input's dtype, as the
  complex form does.

:func:`real_rotary` applies it for the duration of an export (:func:`benanza.processing.modules.export_onnx`):
each rotary embedding module of :data:`COMPLEX_ROTARY` gets a subclass with the real ``forward``, and
the model module's ``apply_rotary_emb`` is replaced by one that takes either form (complex ``freqs_cis``
goes to transformers' own function), so the weight-absorbed MLA forward (:mod:`benanza.processing.mla`,
which calls the module's ``apply_rotary_emb``) is exported real-valued too. Both are restored on exit.
The model's logits equal transformers' own to float rounding in fp32 (``tests/test_rope.py``).
torch is imported inside functions.
"""
from __future__ import annotations

import contextlib
import sys

#: the transformers rotary embedding classes whose forward returns complex ``freqs_cis``
COMPLEX_ROTARY = ("DeepseekV2RotaryEmbedding",)


def real_forward(self, x, position_ids):
    """``DeepseekV2RotaryEmbedding.forward`` in real numbers: x [B, S, hidden] (its dtype and device
    only), position_ids [B, S] -> [B, S, d_rope / 2, 2] float32, (cos, sin) of ``position *
    inv_freq`` times ``attention_scaling`` (module doc). ``dynamic_rope_update`` (transformers' hook
    that refreshes ``inv_freq`` for a dynamic rope type) runs first, as on the complex forward."""
    import torch

    inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
    with torch.no_grad(), torch.autocast(device_type=x.device.type if x.device.type in ("cuda", "cpu") else "cpu",
                                         enabled=False):
        freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)  # [B, S, d_rope / 2], float32
        return torch.stack((freqs.cos(), freqs.sin()), dim=-1) * self.attention_scaling


def real_apply_rotary_emb(xq, xk, freqs, complex_apply=None):
    """``apply_rotary_emb(xq, xk, freqs)`` with ``freqs`` in the real form of :func:`real_forward`
    ([B, S, d_rope / 2, 2]); xq [B, H, S, d_rope], xk [B, 1, S, d_rope] -> (xq_out, xk_out) of the
    same shapes and dtypes: each feature pair (x0, x1) becomes (x0 c - x1 s, x0 s + x1 c) (module
    doc). A complex ``freqs`` goes to ``complex_apply`` (transformers' own function). Raises
    ValueError for a real ``freqs`` whose last dim is not 2."""
    import torch

    if freqs.is_complex():
        return complex_apply(xq, xk, freqs)
    if freqs.shape[-1] != 2:
        raise ValueError(f"apply_rotary_emb: real freqs [.., d_rope / 2, 2] expected, got {tuple(freqs.shape)}")
    f = freqs.unsqueeze(1).to(xq.device)  # [B, 1, S, d_rope / 2, 2]
    c, s = f[..., 0], f[..., 1]

    def rotate(x):
        p = x.float().reshape(*x.shape[:-1], -1, 2)
        x0, x1 = p[..., 0], p[..., 1]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(3).type_as(x)

    return rotate(xq), rotate(xk)


@contextlib.contextmanager
def real_rotary(model):
    """Within the block, ``model``'s complex rotary embeddings (:data:`COMPLEX_ROTARY`) run in real
    numbers (module doc); restored on exit, also on an error. Yields how many modules were
    swapped (0: the model has none, and nothing is changed)."""
    swapped, patched = [], {}
    for m in model.modules():
        cls = type(m)
        if cls.__name__ not in COMPLEX_ROTARY:
            continue
        from transformers.modeling_rope_utils import dynamic_rope_update  # only a transformers model has one

        mod = sys.modules[cls.__module__]
        if mod.__name__ not in patched and hasattr(mod, "apply_rotary_emb"):
            own = mod.apply_rotary_emb
            patched[mod.__name__] = (mod, own)

            def apply(xq, xk, freqs_cis, _own=own):
                return real_apply_rotary_emb(xq, xk, freqs_cis, _own)

            mod.apply_rotary_emb = apply
        m.__class__ = type("Real" + cls.__name__, (cls,), {"forward": dynamic_rope_update(real_forward)})
        swapped.append((m, cls))
    try:
        yield len(swapped)
    finally:
        for m, cls in swapped:
            m.__class__ = cls
        for mod, own in patched.values():
            mod.apply_rotary_emb = own
