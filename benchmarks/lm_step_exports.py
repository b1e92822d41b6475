"""Decoder steps as `benanza torch` exports them, for the tests: the LM head and the model's own cache.

Each export goes through benanza's own path (``benanza.processing.modules.resolve`` and
``export_onnx``: torch.export at opset 20, weights stripped), so the tests see what a user's
``benanza torch transformers:...`` benches:

* ``qwen3_lm_prefill``: a Qwen3 prefill ending with the LM head of the last position (``logits``
  ``[batch, 1, vocab]``, ``logits_to_keep=1``);
* ``qwen3_lm_decode``: its decode step against a cache of ``past`` tokens, ending with the new
  token's logits;
* ``mistral_window_decode``: a Mistral decode step with a sliding window of 8 tokens over a cache of
  32: the configuration's own cache (``DynamicCache(config=...)``) keeps the window, so the
  attention reads 8 keys, not 33;
* ``mistral_window_prefill``: the same Mistral's prefill of 32 tokens: its mask keeps each query's last
  8 keys (the sliding window, built from comparisons of positions and folded to a band), which
  benanza finds as a causal SDPA with ``window=8``;
* ``deepseek_mla_decode``: a DeepSeek-V3-shaped decode step (MLA, dense MLPs) against the cache
  transformers keeps for it: the compressed latent (1 x 32) and the rotary key (1 x 16) per token;
* ``deepseek_mla_absorbed_decode``: the same step in the weight-absorbed form serving engines run
  (``--mla absorbed``, :mod:`benanza.processing.mla`): one cache input per layer, the latent (1 x 48:
  32 + 16) as vLLM and FlashMLA store it, one attention of the 4 heads over it (MQA, d_qk 48, d_v 32);
* ``<moe>_prefill`` / ``<moe>_decode`` for each of :data:`MOE_SPECS` (Qwen3-MoE, Qwen1.5-MoE, Mixtral,
  DeepSeek-V3 with MLA, DeepSeek-V2-Lite-shaped with MLA, GPT-OSS): transformers' default experts
  (``grouped_mm``), exported through benanza's translations (``benanza.processing.translations``:
  ``benanza.GroupedMatMul``, histc as ScatterElements), prefill of 16 tokens and decode against a cache
  of 32; DeepSeek-V2's complex rotary embedding exported in real numbers (``benanza.processing.rope``);
* ``deepseek_v2_moe_absorbed_decode``: that DeepSeek-V2's decode in MLA's weight-absorbed form (``--mla
  absorbed``): one latent input per layer (1 x 24: 16 + 8), one attention of the 4 heads over it;
* ``gemma2_softcap_prefill``: Gemma-2's attention with its logits soft-capped (``attn_logit_softcapping``
  50: tanh(s / 50) * 50 before the mask), as its eager attention computes them, and alternate sliding layers;
* ``qwen3_moe_batched_mm_prefill`` / ``_decode``: the same Qwen3-MoE with transformers' ``batched_mm``
  experts (``?_experts_implementation=batched_mm``), standard ONNX ops only;
* ``qwen3_moe_eager_prefill`` / ``_decode``: the same Qwen3-MoE with transformers' ``eager`` experts
  (``?_experts_implementation=eager``): the loop over the experts the trace's random routing hit, each
  expert's tokens found by ``NonZero`` (the graph holds only the experts the trace hit);
* ``qwen3_moe_routed_prefill``: the same Qwen3-MoE's prefill with the routing ``benanza torch`` records
  (:data:`ROUTED`: ``benanza.profiles.pytorch.record_routing`` on the CPU in fp32 at batches 1 and 4,
  the router's per-expert counts in the export's ``benanza.routing`` metadata).

Runs where torch, transformers and onnxscript are (no GPU needed)::

    python3 benchmarks/lm_step_exports.py --out tests/data/decoders

Writes ``OUT/<name>.onnx`` and prints one line per export (seconds, bytes, the output's shape).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SMALL = "num_hidden_layers=2&hidden_size=128&intermediate_size=352&num_attention_heads=4&num_key_value_heads=2" \
        "&vocab_size=1000&max_position_embeddings=512"
#: DeepSeek-V3's attention (MLA: a compressed KV latent of 32 and a rotary key of 16 per token) with dense
#: MLPs in both layers (first_k_dense_replace), narrow
MLA = "num_hidden_layers=2&hidden_size=256&intermediate_size=512&moe_intermediate_size=64&num_attention_heads=4" \
      "&num_key_value_heads=4&q_lora_rank=64&kv_lora_rank=32&qk_nope_head_dim=32&qk_rope_head_dim=16&v_head_dim=32" \
      "&first_k_dense_replace=2&vocab_size=1000&n_routed_experts=8&num_experts_per_tok=2"
#: mixture-of-experts decoders, narrow, with transformers' default experts (grouped_mm): 8 experts, top-2
MOE = "num_hidden_layers=2&hidden_size=64&num_attention_heads=4&num_key_value_heads=2&vocab_size=256" \
      "&max_position_embeddings=128"
MOE_SPECS = {
    # Qwen3-MoE (30B-A3B's form: no shared expert, softmax router, top-k renormalised)
    "qwen3_moe": f"transformers:qwen3_moe?{MOE}&intermediate_size=128&moe_intermediate_size=32"
                 "&num_experts=8&num_experts_per_tok=2",
    # Qwen1.5-MoE: a shared expert with its sigmoid gate beside the routed ones
    "qwen2_moe": f"transformers:qwen2_moe?{MOE}&intermediate_size=128&moe_intermediate_size=32"
                 "&shared_expert_intermediate_size=64&num_experts=8&num_experts_per_tok=2",
    # Mixtral-8x7B's form: 8 experts, top-2
    "mixtral": f"transformers:mixtral?{MOE}&intermediate_size=64&num_local_experts=8&num_experts_per_tok=2",
    # DeepSeek-V3: MLA, a dense first layer, sigmoid router with group-limited top-k, a shared expert
    "deepseek_v3_moe": "transformers:deepseek_v3?num_hidden_layers=2&hidden_size=64&intermediate_size=128"
                       "&moe_intermediate_size=32&num_attention_heads=4&num_key_value_heads=4&q_lora_rank=32"
                       "&kv_lora_rank=16&qk_nope_head_dim=16&qk_rope_head_dim=8&v_head_dim=16&first_k_dense_replace=1"
                       "&vocab_size=256&max_position_embeddings=128&n_routed_experts=8&num_experts_per_tok=2"
                       "&n_group=2&topk_group=1&n_shared_experts=1",
    # DeepSeek-V2-Lite's form: MLA without query compression (q_lora_rank none: q_proj directly), its rotary
    # embedding in complex numbers (exported real-valued, benanza.processing.rope), a dense first layer,
    # softmax router with greedy top-k, two shared experts
    "deepseek_v2_moe": "transformers:deepseek_v2?num_hidden_layers=2&hidden_size=64&intermediate_size=128"
                       "&moe_intermediate_size=32&num_attention_heads=4&num_key_value_heads=4&q_lora_rank=none"
                       "&kv_lora_rank=16&qk_nope_head_dim=16&qk_rope_head_dim=8&v_head_dim=16&first_k_dense_replace=1"
                       "&vocab_size=256&max_position_embeddings=128&n_routed_experts=8&num_experts_per_tok=2"
                       "&n_shared_experts=2",
    # GPT-OSS: biased experts with a clamped SwiGLU, attention sinks, sliding-window layers
    "gpt_oss": f"transformers:gpt_oss?{MOE}&intermediate_size=32&num_local_experts=8&num_experts_per_tok=2"
               "&head_dim=16&sliding_window=8",
}
#: name -> (spec, phase, seq or kv_len[, MLA form: benanza.spec.MLA_FORMS])
EXPORTS = {
    "qwen3_lm_prefill": (f"transformers:qwen3?{SMALL}&head_dim=32", "prefill", 16),
    "qwen3_lm_decode": (f"transformers:qwen3?{SMALL}&head_dim=32", "decode", 64),
    "mistral_window_decode": (f"transformers:mistral?{SMALL}&sliding_window=8", "decode", 32),
    "mistral_window_prefill": (f"transformers:mistral?{SMALL}&sliding_window=8", "prefill", 32),
    "deepseek_mla_decode": (f"transformers:deepseek_v3?{MLA}", "decode", 64),
    "deepseek_mla_absorbed_decode": (f"transformers:deepseek_v3?{MLA}", "decode", 64, "absorbed"),
    **{f"{m}_{phase}": (spec, phase, 16 if phase == "prefill" else 32)
       for m, spec in MOE_SPECS.items() for phase in ("prefill", "decode")},
    # DeepSeek-V2-Lite's decode in MLA's weight-absorbed form (--mla absorbed)
    "deepseek_v2_moe_absorbed_decode": (MOE_SPECS["deepseek_v2_moe"], "decode", 32, "absorbed"),
    # Gemma-2: the attention's logits soft-capped (tanh(s / 50) * 50) between the scaling and the mask
    "gemma2_softcap_prefill": ("transformers:gemma2?num_hidden_layers=2&hidden_size=128&intermediate_size=256"
                               "&num_attention_heads=4&num_key_value_heads=2&head_dim=32&vocab_size=1000"
                               "&max_position_embeddings=512&sliding_window=8", "prefill", 16),
    # transformers' batched_mm experts: each (token, expert) pair's weights gathered for a batched GEMV
    **{f"qwen3_moe_batched_mm_{phase}": (MOE_SPECS["qwen3_moe"] + "&_experts_implementation=batched_mm", phase,
                                         16 if phase == "prefill" else 32) for phase in ("prefill", "decode")},
    # transformers' eager experts: a loop over the experts the trace's routing hit (one_hot, NonZero, where)
    **{f"qwen3_moe_eager_{phase}": (MOE_SPECS["qwen3_moe"] + "&_experts_implementation=eager", phase,
                                    16 if phase == "prefill" else 32) for phase in ("prefill", "decode")},
    # the routing benanza torch records on the run's inputs (ROUTED)
    "qwen3_moe_routed_prefill": (MOE_SPECS["qwen3_moe"], "prefill", 16),
}
#: exports whose routing is recorded as `benanza torch` records it (name -> batches; CPU, fp32)
ROUTED = {"qwen3_moe_routed_prefill": [1, 4]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--only", help="comma-separated export names (default: all)")
    a = ap.parse_args(argv)
    import onnx

    from benanza.processing.modules import export_onnx, resolve

    only = set(a.only.split(",")) if a.only else set(EXPORTS)
    for name, (spec, phase, n, *form) in EXPORTS.items():
        if name not in only:
            continue
        src = resolve(spec, seq=n, phase=phase, kv_len=n if phase == "decode" else None,
                      mla_form=form[0] if form else "transformers")
        t = time.perf_counter()
        e = export_onnx(src, a.out / f"{name}.onnx")
        (a.out / f"{name}.onnx.data").unlink(missing_ok=True)
        if name in ROUTED:
            from benanza.profiles.pytorch import record_routing

            record_routing(src, e.path, ROUTED[name], "fp32", "cpu")
        m = onnx.load(str(e.path), load_external_data=False)
        shape = [d.dim_value or d.dim_param for d in m.graph.output[0].type.tensor_type.shape.dim]
        print(f"{name}\t{e.exporter}\t{time.perf_counter() - t:.1f}s\t{e.path.stat().st_size}B\t"
              f"{m.graph.output[0].name} {shape}\t{'; '.join(src.notes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
