"""MLA's weight-absorbed decode step, as serving engines run it (issue 54, item 2; ``benanza torch --mla absorbed``).

tests/data/decoders/deepseek_mla_absorbed_decode.onnx was written by benanza's own export path
(benchmarks/lm_step_exports.py: PyTorch 2.13 CPU, transformers 5.17, torch.export at opset 20, weights
stripped): the DeepSeek-V3-shaped step of deepseek_mla_decode.onnx (4 heads, kv_lora_rank 32,
qk_rope_head_dim 16, qk_nope_head_dim 32, v_head_dim 32, 2 layers, a cache of 64 tokens) in the absorbed
form of :mod:`benanza.processing.mla`. The graph tests need no GPU and no torch; the numerical check of
the absorbed forward against transformers' own runs where torch and transformers are installed."""
from __future__ import annotations

import pytest

from benanza.analysis.llm import kv_cache_bytes
from benanza.errors import UsageError
from benanza.kinds import REGISTRY, SdpaConfig
from benanza.processing.model import process
from benanza.reports.report import llm_answer, llm_table
from benanza.spec import MLA_FORMS, Phase, TorchRequest
from conftest import REPO
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
#: the exports' MLA widths (benchmarks/lm_step_exports.py, MLA): heads, kv_lora_rank, rope, nope, v, layers, cache
H, R, ROPE, NOPE, DV, LAYERS, PAST = 4, 32, 16, 32, 32, 2, 64


def _sdpa(ml):
    return [f.config for f in ml.fusions if isinstance(f.config, SdpaConfig)]


@pytest.mark.parametrize("batch", [1, 8])
def test_the_absorbed_step_is_one_mqa_over_the_latent_per_layer_and_whole(batch):
    """Every layer measured; each layer's attention one SDPA group of the 4 query heads over one K/V head
    (the latent), d_qk = kv_lora_rank + rope = 48, d_v = kv_lora_rank = 32, over the cache and the new
    token, its values read inside the keys' rows (the Slice of the latent absorbed into the group)."""
    ml = process(DEC / "deepseek_mla_absorbed_decode.onnx", batch)
    assert ml.unsupported() == {} and ml.summary()["coverage"]["percent"] == 100.0
    got = _sdpa(ml)
    assert [(c.b, c.h, c.kv_heads, c.s_q, c.s_kv, c.d, c.d_v, c.v_in_k) for c in got] == \
        [(batch, H, 1, 1, PAST + 1, R + ROPE, R, True)] * LAYERS
    assert all(c.v_strides == c.strides()[1] for c in got)  # V read with K's strides: one buffer
    assert got[0].describe().endswith("V in K)")
    # the per-head absorption GEMMs: W_UK (q_nope -> latent) and W_UV (latent -> v) batched over the heads
    bmm = sorted(ly.config.describe() for ly in ml.layers if ly.op_type == "MatMul" and ly.static_inputs
                 and getattr(ly.config, "batch_count", 1) == H)
    assert bmm == [f"Gemm({H}xm{batch} n{R} k{NOPE} NN)", f"Gemm({H}xm{batch} n{DV} k{R} NN)"] * LAYERS


def test_its_cache_inputs_are_the_latent_not_per_head_keys_and_values():
    import onnx

    m = onnx.load(DEC / "deepseek_mla_absorbed_decode.onnx", load_external_data=False)
    dims = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
    assert sorted(dims) == ["attention_mask", "input_ids"] + [f"past_latent_{i}" for i in range(LAYERS)]
    assert all(dims[f"past_latent_{i}"] == ["batch", 1, PAST, R + ROPE] for i in range(LAYERS))


def test_its_minimum_bytes_read_the_latent_cache_once_per_layer():
    """The step's KV-cache bytes (the physical bound's) are the latent's, B x 64 x 48 per layer, read once
    (the values are its first 32 features); transformers' form of the same model reads the re-expanded
    keys and values, 4 heads x (48 + 32) per token. Each group's compulsory bytes count the latent once."""
    batch = 8
    ab, tf = (process(DEC / f"deepseek_mla{s}_decode.onnx", batch) for s in ("_absorbed", ""))
    assert kv_cache_bytes(ab, "fp16") == LAYERS * batch * PAST * (R + ROPE) * 2
    assert kv_cache_bytes(tf, "fp16") == LAYERS * batch * PAST * H * (NOPE + ROPE + DV) * 2
    c = _sdpa(ab)[0]
    q, o = batch * H * (R + ROPE), batch * H * R
    assert REGISTRY["SDPA"].min_bytes(c, 2, 2) == 2 * (q + batch * (PAST + 1) * (R + ROPE) + o)


def test_v_in_k_is_refused_where_v_is_not_inside_k():
    with pytest.raises(ValueError, match="v_in_k"):
        SdpaConfig(b=1, h=4, s_q=1, s_kv=8, d=32, d_v=48, scale=0.1, h_kv=1, v_in_k=True)
    with pytest.raises(ValueError, match="v_in_k"):  # V packed on its own: not K's rows
        SdpaConfig(b=1, h=4, s_q=1, s_kv=8, d=48, d_v=32, scale=0.1, h_kv=1, v_in_k=True)


def test_the_suite_reads_v_inside_k(tmp_path):
    from benanza.generation.generator import generate

    suite = generate([process(DEC / "deepseek_mla_absorbed_decode.onnx", 2)], ["fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    assert [j.kind for j in suite.jobs].count("SDPA") == 1  # both layers' attention: one config
    assert "void* v = c.v_in_k ? k :" in src and ", true}" in src
    syntax_check(tmp_path / "s", "sdpa.cpp")


def test_the_form_is_a_word_of_the_one_vocabulary():
    assert set(MLA_FORMS) == {"transformers", "absorbed"}
    with pytest.raises(UsageError, match="--mla 'fused'"):
        TorchRequest("transformers:deepseek_v3", mla="fused")
    with pytest.raises(UsageError, match="only with --phase decode"):
        TorchRequest("transformers:deepseek_v3", mla="absorbed")
    assert TorchRequest("transformers:deepseek_v3", phase=Phase("inference", "decode"), mla="absorbed").mla == "absorbed"


def test_the_report_says_which_form_the_lbl_is_of():
    bound = {"limit": "memory", "bytes": 1e6, "weight_bytes": 9e5, "kv_cache_bytes": 1e5, "bound_ms": 0.1,
             "precision": "fp16", "gpu": "H100", "ceilings": "datasheet", "ceilings_text": "datasheet",
             "flops": 1e9}
    llm = {"phase": "decode", "metric": "time per output token (TPOT)", "batch": 8, "lbl_ms": 0.5, "bound": bound,
           "lbl_fraction": 0.2, "mla": {"form": "absorbed", "what": MLA_FORMS["absorbed"]}}
    t = llm_table(llm)
    assert any("of MLA's absorbed form" in c.plain for row in t.rows for c in row)
    assert llm_answer({"model": "m", "llm": llm}).endswith("The lower bound is of MLA's absorbed form (--mla).")


# ------------------------------------------------------------------ DeepSeek-V2-Lite-shaped exports
#
# tests/data/decoders/deepseek_v2_moe_{prefill,decode,absorbed_decode}.onnx (benchmarks/lm_step_exports.py,
# MOE_SPECS["deepseek_v2_moe"]: PyTorch 2.13 CPU, transformers 5.17, torch.export at opset 20, weights stripped):
# transformers' deepseek_v2 type, its complex rotary embedding exported in real numbers (benanza.processing.rope),
# no query compression (q_lora_rank none), 4 heads, kv_lora_rank 16, rope 8, nope 16, v 16, hidden 64, a dense
# first layer and an MoE second (8 experts top-2, 2 shared), prefill of 16 tokens and decode against 32.

V2 = {"deepseek_v2_moe_prefill": (4, 16, 16, 24, 16, "causal", False),
      "deepseek_v2_moe_decode": (4, 1, 33, 24, 16, "bias", False),
      "deepseek_v2_moe_absorbed_decode": (1, 1, 33, 24, 16, "bias", True)}


@pytest.mark.parametrize("name", list(V2))
@pytest.mark.parametrize("batch", [1, 8])
def test_deepseek_v2_exports_are_measured_whole_with_their_attention_found(name, batch):
    """Every layer measured; each of the 2 layers' attention one SDPA group: prefill causal over the 16 tokens
    (4 heads, d_qk nope + rope = 24, d_v 16), transformers' decode over the re-expanded cache and the new token
    (4 K/V heads), the absorbed decode one MQA over the latent (1 K/V head, d_qk r + rope = 24, d_v r = 16, V in
    K). No query compression: q_proj is one GEMM of hidden 64 to 4 x 24, with no q_a_proj before it."""
    ml = process(DEC / f"{name}.onnx", batch)
    assert ml.unsupported() == {} and ml.summary()["coverage"]["percent"] == 100.0
    kv, s_q, s_kv, d, dv, mask, v_in_k = V2[name]
    assert [(c.b, c.h, c.kv_heads, c.s_q, c.s_kv, c.d, c.d_v, c.mask, c.v_in_k) for c in _sdpa(ml)] == \
        [(batch, 4, kv, s_q, s_kv, d, dv, mask, v_in_k)] * 2
    gemms = [ly.config for ly in ml.layers if ly.op_type in ("MatMul", "Gemm") and ly.static_inputs]
    q = [g for g in gemms if g.n == 4 * 24]
    assert len(q) == 2 and {g.k for g in q} == {64}


def test_deepseek_v2_decode_inputs_are_the_cache_the_model_keeps():
    """transformers' form: the latent (1 x 16) and the rotary key (1 x 8) per layer; the absorbed: the two
    concatenated (1 x 24)."""
    import onnx

    def dims(name):
        m = onnx.load(DEC / f"{name}.onnx", load_external_data=False)
        return {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in m.graph.input}

    tf, ab = dims("deepseek_v2_moe_decode"), dims("deepseek_v2_moe_absorbed_decode")
    assert {k: v for k, v in tf.items() if k.startswith("past")} == \
        {f"past_{t}_{i}": ["batch", 1, 32, w] for i in range(2) for t, w in (("key", 16), ("value", 8))}
    assert {k: v for k, v in ab.items() if k.startswith("past")} == {f"past_latent_{i}": ["batch", 1, 32, 24]
                                                                      for i in range(2)}


# ------------------------------------------------------------------ with torch: the forward's numbers

CONFIG = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
              num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16,
              qk_rope_head_dim=8, v_head_dim=12, first_k_dense_replace=2, vocab_size=256,
              max_position_embeddings=128, n_routed_experts=4, num_experts_per_tok=2)


@pytest.mark.parametrize("model_type", ["deepseek_v3", "deepseek_v2"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_the_absorbed_forward_equals_transformers(model_type, attn):
    """fp32 on the CPU, a tiny DeepSeek-V2/V3 (v_head_dim 12 != qk_nope_head_dim 16, a padded sequence):
    one decode step against a 10-token cache, transformers' own forward vs the absorbed one with the same
    weights and the same cache (the latent c_kv and k_rope concatenated), logits and each layer's output
    within 1e-4."""
    torch = pytest.importorskip("torch", reason="the absorbed forward's check needs torch (CPU)")
    transformers = pytest.importorskip("transformers", reason="the absorbed forward's check needs transformers")
    import copy

    from benanza.processing.mla import absorb

    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(model_type, **CONFIG)
    cfg._attn_implementation = attn
    ref = transformers.AutoModelForCausalLM.from_config(cfg).eval()
    ab = copy.deepcopy(ref)
    assert absorb(ab) == 2 and not hasattr(ab.model.layers[0].self_attn, "kv_b_proj")
    b, t = 3, 10
    c_kv, k_rope = torch.randn(b, 1, t, 16), torch.randn(b, 1, t, 8)
    ids, mask = torch.randint(0, 256, (b, 1)), torch.ones(b, t + 1, dtype=torch.int64)
    mask[0, :3] = 0

    def step(model, keys, values):
        cache = transformers.DynamicCache(config=cfg)
        for i in range(2):
            cache.update(keys.clone(), values.clone(), i)
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True,
                        output_hidden_states=True)
        return out.logits, out.hidden_states

    latent = torch.cat((c_kv, k_rope), dim=-1)
    (y0, h0), (y1, h1) = step(ref, c_kv, k_rope), step(ab, latent, latent)
    torch.testing.assert_close(y1, y0, atol=1e-4, rtol=0)
    for a, r in zip(h1, h0):
        torch.testing.assert_close(a, r, atol=1e-4, rtol=0)
    assert float((h0[-1] - h0[0]).abs().max()) > 1e-2  # the layers did something


def test_absorbed_is_refused_for_a_model_without_mla():
    pytest.importorskip("torch", reason="resolving a transformers spec needs torch")
    pytest.importorskip("transformers", reason="resolving a transformers spec needs transformers")
    from benanza.processing.modules import resolve

    with pytest.raises(UsageError, match="no multi-head latent attention"):
        resolve("transformers:llama?num_hidden_layers=1&hidden_size=64&num_attention_heads=2&vocab_size=64"
                "&intermediate_size=64", phase="decode", kv_len=4, mla_form="absorbed")
    with pytest.raises(UsageError, match="only with --phase decode"):
        resolve("transformers:deepseek_v3", phase="prefill", mla_form="absorbed")
