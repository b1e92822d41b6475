"""DeepSeek-V2's complex rotary embedding in real numbers, as benanza exports it (issue 54;
:mod:`benanza.processing.rope`).

The numerical checks run where torch and transformers are installed (CPU, fp32): the model's logits and
every layer's hidden states with and without :func:`benanza.processing.rope.real_rotary`, within 1e-5."""
from __future__ import annotations

import pytest

#: a tiny DeepSeek-V2-Lite-shaped configuration (no query compression, a dense first layer, shared experts)
CONFIG = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
              num_attention_heads=4, num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=16,
              qk_rope_head_dim=8, v_head_dim=16, first_k_dense_replace=1, vocab_size=256,
              max_position_embeddings=128, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2)
#: a YaRN scaling (DeepSeek-V2-Lite's rope type, 4 x a 32-token original length) whose attention_scaling is not 1:
#: 0.1 ln(4) + 1 = 1.139 (transformers' ``_compute_yarn_parameters``, mscale 1 and no mscale_all_dim), the factor
#: the complex form multiplies freqs_cis by
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
        "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0}


def _libs():
    torch = pytest.importorskip("torch", reason="the real-valued rotary's check needs torch (CPU)")
    transformers = pytest.importorskip("transformers", reason="the real-valued rotary's check needs transformers")
    return torch, transformers


def _model(transformers, torch, rope=None, **extra):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model("deepseek_v2", **CONFIG, **extra,
                                            **({"rope_parameters": rope} if rope else {}))
    return cfg, transformers.AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.parametrize("rope", [None, YARN], ids=["default", "yarn"])
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_the_real_rotary_gives_the_models_own_numbers(rope, phase):
    """Logits and hidden states of a padded batch with and without the real form: equal within 1e-5; the
    rotary module and apply_rotary_emb are transformers' own again after the block."""
    torch, transformers = _libs()
    from benanza.processing.rope import real_rotary

    cfg, model = _model(transformers, torch, rope)
    assert model.model.rotary_emb.attention_scaling == (1.0 if rope is None else pytest.approx(1.1386, abs=1e-4))
    mod = __import__(type(model).__module__, fromlist=["apply_rotary_emb"])
    own_apply, own_cls = mod.apply_rotary_emb, type(model.model.rotary_emb)
    b, s, t = 3, 7, 10
    ids = torch.randint(0, 256, (b, 1 if phase == "decode" else s))
    mask = torch.ones(b, (t + 1) if phase == "decode" else s, dtype=torch.int64)
    mask[0, :3] = 0

    def run():
        kw = {}
        if phase == "decode":
            cache = transformers.DynamicCache(config=cfg)
            g = torch.Generator().manual_seed(1)
            for i in range(2):
                cache.update(torch.randn(b, 1, t, 16, generator=g), torch.randn(b, 1, t, 8, generator=g), i)
            kw = {"past_key_values": cache, "use_cache": True}
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True, **kw)
        return out.logits, out.hidden_states

    y0, h0 = run()
    with real_rotary(model) as n:
        assert n == 1 and type(model.model.rotary_emb) is not own_cls
        pe = model.model.rotary_emb(torch.zeros(1, 4, 64), torch.arange(4)[None])
        assert not pe.is_complex() and tuple(pe.shape) == (1, 4, 4, 2)
        y1, h1 = run()
    assert mod.apply_rotary_emb is own_apply and type(model.model.rotary_emb) is own_cls
    torch.testing.assert_close(y1, y0, atol=1e-5, rtol=0)
    for a, r in zip(h1, h0):
        torch.testing.assert_close(a, r, atol=1e-5, rtol=0)
    assert float((h0[-1] - h0[0]).abs().max()) > 1e-2  # the layers did something


def test_the_real_product_is_the_complex_one_and_complex_freqs_still_work():
    """apply_rotary_emb on random pairs: the real form's (x0 c - x1 s, x0 s + x1 c) equals the complex product
    within 1e-6; given complex freqs, the patched function is transformers' own."""
    torch, transformers = _libs()
    from benanza.processing.rope import real_apply_rotary_emb
    from transformers.models.deepseek_v2 import modeling_deepseek_v2 as m

    g = torch.Generator().manual_seed(0)
    xq, xk, ang = torch.randn(2, 4, 5, 8, generator=g), torch.randn(2, 1, 5, 8, generator=g), torch.randn(2, 5, 4,
                                                                                                           generator=g)
    freqs_cis = torch.polar(torch.ones_like(ang), ang) * 0.9
    want = m.apply_rotary_emb(xq, xk, freqs_cis)
    got = real_apply_rotary_emb(xq, xk, torch.view_as_real(freqs_cis))
    for a, r in zip(got, want):
        torch.testing.assert_close(a, r, atol=1e-6, rtol=0)
    again = real_apply_rotary_emb(xq, xk, freqs_cis, m.apply_rotary_emb)
    assert all(torch.equal(a, r) for a, r in zip(again, want))
    with pytest.raises(ValueError, match="d_rope / 2, 2"):
        real_apply_rotary_emb(xq, xk, ang)


def test_a_model_without_complex_rotary_is_left_alone():
    torch, transformers = _libs()
    from benanza.processing.rope import real_rotary

    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model("llama", num_hidden_layers=1, hidden_size=32, num_attention_heads=2,
                                            intermediate_size=32, vocab_size=64)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    cls = type(model.model.rotary_emb)
    with real_rotary(model) as n:
        assert n == 0 and type(model.model.rotary_emb) is cls
