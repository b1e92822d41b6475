"""The LLM truth benchmark (issue 27, item 5): ``python3 benchmarks/truth.py --llm ...``.

Is benanza's lower bound below what PyTorch runs, for decoder LLMs in both phases? Over
:data:`CONFIGS` (GPT-2, Llama-, Qwen2-, Mistral- and Phi-3-style transformers configurations given
as overrides of the model type's defaults, 0.1-3 B parameters, random weights), each phase and
length of :data:`CASES` (prefill of 128 and 2048 tokens: the time to first token; decode of one
token against a KV cache of 128 and 4096: the time per output token), batch 1, 8 and 32, fp16 and
bf16, one ``benanza torch SPEC --phase P --seq S | --kv-len L --batch 1,8,32 --dtype D --json``
per (configuration, case, dtype) exports the model, benches its layers, profiles the module in
PyTorch eager (and ``torch.compile`` (default mode) where cheap: lengths up to
``--compile-max-len``, default 128) and reports per batch the LBL (``lbl_ms``, ``complete``), the
module's GPU kernel time (``gpu_kernel_ms``) and the physical bound (``llm.bound_ms``,
:mod:`benanza.analysis.llm`).

The table: ``config | params | phase | len | batch | dtype | eager kernel ms | compile kernel ms |
LBL ms | bound ms | LBL/eager | LBL/compile | flag``; flags ``LBL>EAGER`` / ``LBL>COMPILE`` (the
lower bound above the framework: a defect of benanza), ``BOUND>LBL`` (the physical bound above the
LBL: a defect of the bound or the measurements), ``INCOMPLETE``, ``NO-LBL``, ``NO-PYTORCH``.

Everything goes into ``--out``: ``results.jsonl`` (``env``, ``llm_run`` per command with its
documents slimmed, ``error``, ``dry_run``), ``table.txt``/``table.md``/``table.json`` and ``runs/``
(each command's ``benanza torch`` folder and its stderr). ``--dry-run`` does no GPU work and needs
no torch: it prints the configurations with their parameter counts (:func:`param_count`, from the
configurations' numbers) and the commands. ``--merge RUN[@GPU]...``: one table from earlier runs' ``--out``
folders.

    python3 benchmarks/truth.py --llm --out OUT [--configs llama,qwen2] [--batch 1,8,32]
        [--dtype fp16,bf16] [--phases prefill,decode | --cases prefill128,decode4096 | --only CONFIG:CASE:DTYPE,...]
        [--compile-max-len 128] [--deadline S] [--timeout S] [--end S] [--streams 2] [--dry-run | --merge RUN...]

``--deploy`` (issue 54, item 5) is the set at deployment size: :data:`DEPLOY_CONFIGS` (the released
configurations of Llama-3.1-8B, Qwen3-8B, Mixtral-8x7B, Qwen3-30B-A3B, GPT-OSS-20B and DeepSeek-V2-Lite) x
:data:`DEPLOY_CASES` x batch 1, 8, 64 x bf16, each row with the most layers that fit one GPU
(:func:`memory_plan`) and one device call (:func:`command_seconds`), stated per row (:func:`deploy_layers`);
its commands in groups of one GPU-call each (:func:`deploy_groups`); ``--dry-run`` lists rows and groups,
``--group N`` runs one (``benchmarks/gpu_deploy.sh OUT N...`` on a lent machine).

    python3 benchmarks/truth.py --llm --deploy --out OUT [--dry-run] [--group N] [--configs ...] [--batch 1,8,64]
        [--call-seconds 480] [--end S]

``--streams N`` runs N commands at once on the GPU; their processes take turns on it through one
shared lock (:func:`run_streams`), so no measurement has another command's work beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_docs import scenarios_of  # noqa: E402  (benanza torch --json: schema 1 and before)

DTYPES = ("fp16", "bf16")
#: (phase, length): prefill of S tokens (--seq), decode against a KV cache of L tokens (--kv-len)
CASES = (("prefill", 128), ("prefill", 2048), ("decode", 128), ("decode", 4096))


@dataclass(frozen=True)
class LlmConfig:
    """One decoder configuration: ``name``, the transformers model type ``arch`` and ``overrides`` of
    its default configuration (``config`` holds every number :func:`param_count` reads: the defaults
    of transformers 4.5x for the type, as in its ``configuration_*.py``, with the overrides applied)."""

    name: str
    arch: str
    overrides: tuple[tuple[str, object], ...]
    config: tuple[tuple[str, object], ...]
    #: more ``benanza torch`` options of its decode commands (DeepSeek's ``--mla absorbed``)
    decode_args: tuple[str, ...] = ()

    @property
    def spec(self) -> str:
        """The ``benanza torch`` spec: ``transformers:ARCH?name=value&...``."""
        q = "&".join(f"{k}={v}" for k, v in self.overrides)
        return f"transformers:{self.arch}" + (f"?{q}" if q else "")

    @property
    def params(self) -> int:
        return param_count(self.arch, dict(self.config))


def _cfg(name: str, arch: str, defaults: dict, decode_args: tuple[str, ...] = (), **overrides) -> LlmConfig:
    return LlmConfig(name, arch, tuple(overrides.items()), tuple({**defaults, **overrides}.items()), decode_args)


#: transformers' defaults of the numbers :func:`param_count` reads (GPT2Config, LlamaConfig,
#: Qwen2Config, MistralConfig, Phi3Config)
GPT2 = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_inner=None, tie_word_embeddings=True)
LLAMA = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
             num_attention_heads=32, num_key_value_heads=None, tie_word_embeddings=False, attention_bias=False)
QWEN2 = dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
             num_attention_heads=32, num_key_value_heads=32, tie_word_embeddings=False)
MISTRAL = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)
PHI3 = dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
            num_attention_heads=32, num_key_value_heads=None, tie_word_embeddings=False)
#: mixtures of experts at their released widths (Qwen3-30B-A3B's and Mixtral-8x7B-v0.1's config.json)
QWEN3_MOE = dict(vocab_size=151936, hidden_size=2048, num_hidden_layers=48, num_attention_heads=32,
                 num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
                 moe_intermediate_size=768, tie_word_embeddings=False)
MIXTRAL = dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, num_local_experts=8, num_experts_per_tok=2,
               tie_word_embeddings=False)

#: the configurations: GPT-2 small with positions for a 4096-token cache, TinyLlama-1.1B's shape,
#: Qwen2-0.5B's, a 1.0 B Mistral (GQA 4, no sliding window; named "mistral-1.6b" until 2026-11-27, a
#: miscount) and a 2 B Phi-3-mini-shaped model
CONFIGS = (
    _cfg("gpt2", "gpt2", GPT2, n_positions=8192),
    _cfg("llama-1.1b", "llama", LLAMA, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
         num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=8192),
    _cfg("qwen2-0.5b", "qwen2", QWEN2, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
         num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True, max_position_embeddings=8192),
    _cfg("mistral-1b", "mistral", MISTRAL, hidden_size=2048, intermediate_size=7168, num_hidden_layers=16,
         num_attention_heads=16, num_key_value_heads=4, sliding_window=None, max_position_embeddings=8192),
    _cfg("phi3-2b", "phi3", PHI3, hidden_size=2560, intermediate_size=8192, num_hidden_layers=20,
         num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=8192),
)


#: mixture-of-experts configurations at their released widths, fewer layers (the weights of the whole model
#: are not built on a CPU for an export): run only when named (``--configs qwen3-30b-a3b-4l``)
MOE_CONFIGS = (
    _cfg("qwen3-30b-a3b-4l", "qwen3_moe", QWEN3_MOE, **{**QWEN3_MOE, "num_hidden_layers": 4},
         max_position_embeddings=40960),
    _cfg("mixtral-8x7b-2l", "mixtral", MIXTRAL, **{**MIXTRAL, "num_hidden_layers": 2}, max_position_embeddings=40960,
         sliding_window=None),
)
#: Deployment size (issue 54, item 5): the released models' config.json numbers (every field that sets a
#: shape; rotary bases and scaling (transformers 5's ``rope_parameters``) and the routers' scaling left at
#: the type's default: they change values, not a shape
#: or a kernel), all of a model's layers, run when named or with ``--deploy`` (each row then with the most
#: layers its memory plan and the call's time allow, :func:`deploy_layers`).
#: meta-llama/Llama-3.1-8B config.json: 8,030,261,248 parameters (the model card's 8.03 B)
LLAMA31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False, attention_bias=False,
                  max_position_embeddings=131072)
#: Qwen/Qwen3-8B config.json (head_dim 128, per-head q/k RMSNorm): 8,190,735,360 (8.19 B)
QWEN3_8B = dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False,
                max_position_embeddings=40960)
#: openai/gpt-oss-20b config.json (attention biases and sinks, 32 experts with biases, top-4, sliding window
#: 128 on every other layer; its MXFP4 experts counted as the bf16 parameters transformers builds):
#: 20,914,757,184 (the model card's 20.9 B, "21B")
GPT_OSS_20B = dict(vocab_size=201088, hidden_size=2880, intermediate_size=2880, num_hidden_layers=24,
                   num_attention_heads=64, num_key_value_heads=8, head_dim=64, num_local_experts=32,
                   num_experts_per_tok=4, sliding_window=128, tie_word_embeddings=False,
                   max_position_embeddings=131072)
#: deepseek-ai/DeepSeek-V2-Lite config.json (MLA: kv_lora_rank 512, no q LoRA, qk 128 + 64 rope, v 128;
#: layer 0 dense, then 64 routed experts of 1408, top-6, and 2 shared): 15,706,484,224 (15.7 B)
DEEPSEEK_V2_LITE = dict(vocab_size=102400, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408,
                        num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16, n_shared_experts=2,
                        n_routed_experts=64, num_experts_per_tok=6, first_k_dense_replace=1, kv_lora_rank=512,
                        q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                        tie_word_embeddings=False, max_position_embeddings=163840)

#: the deployment set: Llama-3.1-8B and Qwen3-8B (dense), Mixtral-8x7B, Qwen3-30B-A3B and GPT-OSS-20B (MoE),
#: DeepSeek-V2-Lite (MLA + MoE, transformers' ``deepseek_v2`` type: its complex-number rotary runs in real
#: numbers while it is exported, benanza/processing/rope.py); its decode runs ``--mla absorbed``, the latent
#: cache serving engines keep
DEPLOY_CONFIGS = (
    _cfg("llama3.1-8b", "llama", LLAMA, **LLAMA31_8B),
    _cfg("qwen3-8b", "qwen3", QWEN3_8B, **QWEN3_8B),
    _cfg("mixtral-8x7b", "mixtral", MIXTRAL, **MIXTRAL, max_position_embeddings=40960, sliding_window=None),
    _cfg("qwen3-30b-a3b", "qwen3_moe", QWEN3_MOE, **QWEN3_MOE, max_position_embeddings=40960),
    _cfg("gpt-oss-20b", "gpt_oss", GPT_OSS_20B, **GPT_OSS_20B),
    _cfg("deepseek-v2-lite", "deepseek_v2", DEEPSEEK_V2_LITE, ("--mla", "absorbed"), **DEEPSEEK_V2_LITE),
)
#: every configuration a run can name
ALL_CONFIGS = CONFIGS + MOE_CONFIGS + DEPLOY_CONFIGS


def param_count(arch: str, c: dict) -> int:
    """Parameters of a decoder from its configuration's numbers (the modules transformers builds):

    * gpt2: wte V x h + wpe P x h + per layer (ln_1, ln_2: 2h each; c_attn h x 3h + 3h; c_proj h x h + h;
      mlp h x I + I and I x h + h, I = n_inner or 4h) + ln_f 2h; lm_head tied to wte;
    * llama, mistral, qwen2, phi3: embed V x h + per layer (q h x h, k and v h x (kv x hd), o h x h,
      gate/up h x I each, down I x h, two RMSNorms h each; qwen2 adds q/k/v biases h + 2 kv hd,
      llama with ``attention_bias`` q/k/v/o biases) + final norm h + lm_head V x h unless tied;
      hd = h / heads, kv = num_key_value_heads or heads (phi3 fuses qkv and gate/up: the same counts);
    * qwen3_moe, mixtral: the same attention (qwen3_moe: heads x head_dim wide, with per-head q/k RMSNorms
      of head_dim each) and per layer a router h x E and E experts of gate/up h x I and down I x h
      (I = moe_intermediate_size or intermediate_size);
    * qwen3: llama's layer with q heads x head_dim wide and per-head q/k RMSNorms (head_dim each);
    * gpt_oss: q/k/v/o with biases (q h x (heads hd) + heads hd, k and v h x kv hd + kv hd, o (heads hd) x h + h),
      one sink per head, a router h x E + E, E experts of gate_up h x 2I + 2I and down I x h + h, two norms;
    * deepseek_v2, deepseek_v3 (MLA): q_proj h x heads (nope + rope) (or q_a h x q_lora, its norm, q_b
      q_lora x heads (nope + rope) with ``q_lora_rank``), kv_a h x (r + rope), its norm r, kv_b r x heads
      (nope + v), o (heads v) x h; the first ``first_k_dense_replace`` layers a dense MLP 3 h I, the others a
      router E x h, E experts 3 h I_moe and shared experts 3 h (n_shared I_moe); two norms h.

    Each matches the count of the model transformers 5.17 builds (``AutoModelForCausalLM.from_config`` on the
    meta device, checked for the released configurations of :data:`DEPLOY_CONFIGS`). Raises ValueError for
    another architecture."""
    if arch in ("qwen3", "gpt_oss", "deepseek_v2", "deepseek_v3"):
        h, v, n = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"]
        return v * h + sum(_layer_params(arch, c, i) for i in range(n)) + h + (0 if c.get("tie_word_embeddings")
                                                                               else v * h)
    if arch in ("qwen3_moe", "mixtral"):
        h, v, n, heads = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"], c["num_attention_heads"]
        kv, hd = c.get("num_key_value_heads") or heads, c.get("head_dim") or h // heads
        e = c["num_experts"] if arch == "qwen3_moe" else c["num_local_experts"]
        i = c["moe_intermediate_size"] if arch == "qwen3_moe" else c["intermediate_size"]
        layer = 2 * h * heads * hd + 2 * h * kv * hd + h * e + e * 3 * h * i + 2 * h
        layer += 2 * hd if arch == "qwen3_moe" else 0
        return v * h + n * layer + h + (0 if c.get("tie_word_embeddings") else v * h)
    if arch == "gpt2":
        h, v, p, n = c["n_embd"], c["vocab_size"], c["n_positions"], c["n_layer"]
        i = c.get("n_inner") or 4 * h
        layer = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * i + i) + (i * h + h)
        return v * h + p * h + n * layer + 2 * h
    if arch not in ("llama", "mistral", "qwen2", "phi3"):
        raise ValueError(f"no parameter count for {arch!r}")
    h, v, n, i = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"], c["intermediate_size"]
    heads = c["num_attention_heads"]
    kv, hd = c.get("num_key_value_heads") or heads, h // heads
    layer = 2 * h * h + 2 * h * kv * hd + 3 * h * i + 2 * h
    if arch == "qwen2":
        layer += h + 2 * kv * hd
    if arch == "llama" and c.get("attention_bias"):
        layer += 2 * h + 2 * kv * hd
    return v * h + n * layer + h + (0 if c.get("tie_word_embeddings") else v * h)


def _layer_params(arch: str, c: dict, i: int) -> int:
    """Parameters of layer ``i`` of a qwen3, gpt_oss or deepseek_v2/v3 decoder (:func:`param_count`)."""
    h, heads = c["hidden_size"], c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or heads
    if arch == "qwen3":
        hd = c.get("head_dim") or h // heads
        return 2 * h * heads * hd + 2 * h * kv * hd + 2 * hd + 3 * h * c["intermediate_size"] + 2 * h
    if arch == "gpt_oss":
        hd, e, i_ = c["head_dim"], c["num_local_experts"], c["intermediate_size"]
        attn = (h * heads * hd + heads * hd) + 2 * (h * kv * hd + kv * hd) + (heads * hd * h + h) + heads
        return attn + (h * e + e) + e * (h * 2 * i_ + 2 * i_ + i_ * h + h) + 2 * h
    nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    q = c.get("q_lora_rank")
    attn = (h * q + q + q * heads * (nope + rope)) if q else h * heads * (nope + rope)
    attn += h * (r + rope) + r + r * heads * (nope + vd) + heads * vd * h
    if i < c.get("first_k_dense_replace", 0):
        mlp = 3 * h * c["intermediate_size"]
    else:
        e, im = c["n_routed_experts"], c["moe_intermediate_size"]
        mlp = e * h + e * 3 * h * im + 3 * h * im * (c.get("n_shared_experts") or 0)
    return attn + mlp + 2 * h


def select(names: str | None) -> list[LlmConfig]:
    """The configurations named (comma-separated; None: all). Raises ValueError naming the known ones."""
    if not names:
        return list(CONFIGS)
    known = {c.name: c for c in ALL_CONFIGS}
    out = []
    for n in (x.strip() for x in names.split(",") if x.strip()):
        hit = known.get(n) or next((c for c in ALL_CONFIGS if c.name.split("-")[0] == n), None)
        if hit is None:
            raise ValueError(f"unknown LLM configuration {n!r} (known: {', '.join(known)})")
        out.append(hit)
    return out


# ------------------------------------------------------------------------- deployment size (issue 54)

#: the deployment set's cases: prefill of 512 and 8,192 tokens, decode against a 1,024- and a 32,768-token cache
DEPLOY_CASES = (("prefill", 512), ("prefill", 8192), ("decode", 1024), ("decode", 32768))
DEPLOY_BATCHES = (1, 8, 64)
#: bf16 only: fp8 rows need an fp8 PyTorch reference (eager and torch.compile running the model's own fp8
#: GEMMs), which this harness has none of (DTYPES: a module cast to fp16 or bf16)
DEPLOY_DTYPES = ("bf16",)

GIB = 2 ** 30
#: one H100 80GB HBM3's memory as nvidia-smi reports it (81,559 MiB); an H200 (143,771 MiB) holds every row too
GPU_BYTES = 81559 * 2 ** 20
#: kept free of the plan: the CUDA context, cuBLAS/cuDNN workspaces, the profiler's buffers and the caching
#: allocator's fragmentation (an allowance, not a measurement)
GPU_RESERVE = 6 * GIB
#: one GPU's share of its host (the lent machines: 128 GiB memory and 64 GiB disk with one H100, 512 GiB and
#: 235 GiB with four): the export builds the module in fp32 on the CPU and writes its weights to disk (deleted after)
HOST_RAM = 128 * GIB - 16 * GIB
HOST_DISK = 235 * GIB // 4 - 8 * GIB
#: H100 SXM datasheet: dense bf16 Tensor Core rate and HBM3 bandwidth (the step-time estimate only)
H100_BF16_FLOPS, H100_BYTES_S = 989.4e12, 3.35e12


def _dims(arch: str, c: dict) -> dict:
    """The numbers the memory plan and the time estimate read from a configuration: hidden ``h``,
    query heads ``heads``, query/key width per head ``dqk``, value width ``dv``, KV heads ``kv``; ``e_dec``
    and ``e_pre``: elements per token and layer of the KV cache in decode (as ``benanza torch --phase
    decode`` feeds it: keys and values of the KV heads; MLA's absorbed latent r + rope) and in prefill (as
    the model's own cache fills: MLA in transformers' form keeps per-head keys and values); ``ffn``: the
    widest MLP output per token (dense I, or k routed experts' I plus the shared ones); ``experts``, ``topk``,
    ``expert_params`` (one expert's), ``window`` (GPT-OSS's sliding layers, every other one) and ``eager``
    (transformers runs its eager attention: GPT-OSS has no SDPA path, for its sinks)."""
    h, heads = c.get("hidden_size") or c.get("n_embd"), c.get("num_attention_heads") or c.get("n_head") or 12
    kv = c.get("num_key_value_heads") or heads
    d = dict(h=h, heads=heads, kv=kv, window=0, eager=False, experts=0, topk=0, expert_params=0,
             vocab=c["vocab_size"])
    if arch in ("deepseek_v2", "deepseek_v3"):
        nope, rope, vd, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
        im, k = c["moe_intermediate_size"], c["num_experts_per_tok"]
        d.update(dqk=nope + rope, dv=vd, e_dec=r + rope, e_pre=heads * (nope + rope + vd),
                 ffn=max(c["intermediate_size"], (k + (c.get("n_shared_experts") or 0)) * im),
                 experts=c["n_routed_experts"], topk=k, expert_params=3 * h * im)
        return d
    hd = c.get("head_dim") or h // heads
    d.update(dqk=hd, dv=hd, e_dec=2 * kv * hd, e_pre=2 * kv * hd)
    if arch in ("mixtral", "qwen3_moe", "gpt_oss"):
        e = c["num_experts"] if arch == "qwen3_moe" else c["num_local_experts"]
        i = c["moe_intermediate_size"] if arch == "qwen3_moe" else c["intermediate_size"]
        d.update(ffn=c["num_experts_per_tok"] * i, experts=e, topk=c["num_experts_per_tok"], expert_params=3 * h * i)
        if arch == "gpt_oss":
            d.update(window=c.get("sliding_window") or 0, eager=True)
    else:
        d["ffn"] = c.get("intermediate_size") or c.get("n_inner") or 4 * h
    return d


def _layers(c: dict) -> int:
    """A configuration's layer count (GPT-2's ``n_layer``, the others' ``num_hidden_layers``)."""
    return c["n_layer"] if "n_layer" in c else c["num_hidden_layers"]


def _at(c: dict, n: int) -> dict:
    """The configuration's numbers with ``n`` layers."""
    return {**c, ("n_layer" if "n_layer" in c else "num_hidden_layers"): n}


def _with_layers(cfg: LlmConfig, layers: int) -> LlmConfig:
    """``cfg`` with its first ``layers`` layers (``NAME-Nl``; itself when that is all of them)."""
    full = dict(cfg.config)["num_hidden_layers"]
    if layers == full:
        return cfg
    return _cfg(f"{cfg.name}-{layers}l", cfg.arch, dict(cfg.config), cfg.decode_args,
                **{**dict(cfg.overrides), "num_hidden_layers": layers})


def memory_plan(cfg: LlmConfig, phase: str, length: int, batch: int, layers: int | None = None) -> dict:
    """Bytes one row needs, on the GPU for PyTorch's module (eager and torch.compile build the same one;
    :func:`benanza.profiles.capture.native_module`) and on the host for the export, with ``layers`` of its
    layers (default all). W: the parameters at that depth (:func:`param_count`); bf16 = 2 bytes; n: layers;
    e: cache elements per token and layer (:func:`_dims`); L: ``length``; B: ``batch``.

    * ``build`` = 4 W: the module is built in fp32 on the GPU, then cast (``module.to(bf16)``);
    * decode, ``inputs`` = 2 W + 3 KV, KV = 2 B L n e: the past keys and values are drawn in fp32 and cast
      one by one while the fp32 tuple is alive (``_decoder_decode``'s inputs);
    * decode, ``run`` = 2 W + 2 KV + KV1 + G + logits: the inputs and the model's cache filled from them
      (``DynamicCache.update`` concatenates: a copy), the step's concatenation of one layer KV1 = 2 B L e,
      and G = KV1 x heads / kv: one layer's keys and values repeated to every query head (``repeat_kv``:
      transformers' SDPA path takes ``enable_gqa`` only without a mask, which torch.compile keeps; GPT-OSS's
      eager attention always repeats). GPT-OSS's sliding layers attend over their 128-token window, but the
      harness feeds every layer's cache at the full length and the cache's first fill copies it (the
      window is a view of the copy), so they are counted at the full length;
    * prefill, ``run`` = 2 W + KV + A, KV = 2 B S n e_pre (the cache the forward fills, every layer), and
      the activation allowance A of one layer at a time (eager frees each layer's tensors), T = B S tokens:
      A = 2 T (3 h + heads dqk + 2 kv dqk + 3 ffn + 2 k h) (the residual, normed and attention outputs, q,
      k, v, the MLP's gate, up and product, an MoE's k routed copies of each token in and out) + the mask
      B S^2 (bool, kept by torch.compile) or, with GPT-OSS's eager attention, 2 B S^2 (an additive bf16
      mask) + 3 x 2 B heads S^2 (scores, the sink-extended logits, the probabilities: ``eager_attention_forward``
      of modeling_gpt_oss) + the last position's fp32 logits 4 B V;
    * ``peak`` = max(build, inputs, run); ``fits``: peak + :data:`GPU_RESERVE` <= :data:`GPU_BYTES`;
    * host: ``export_ram`` = 8 W + the export's example cache (decode: 4 x 2 L n e, at batch 2), the fp32
      module and the ONNX initializers written out; ``export_disk`` = 4 W (its external data, deleted after);
      ``host_fits``: within :data:`HOST_RAM` and :data:`HOST_DISK`.

    Raises ValueError for an unknown phase or architecture."""
    c = dict(cfg.config)
    n = _layers(c) if layers is None else layers
    w = param_count(cfg.arch, _at(c, n))
    d = _dims(cfg.arch, c)
    logits = 4 * batch * d["vocab"]
    if phase == "decode":
        kv1 = 2 * batch * length * d["e_dec"]
        kv = n * kv1
        gqa = kv1 * d["heads"] // d["kv"] if d["kv"] < d["heads"] and d["e_dec"] == 2 * d["kv"] * d["dqk"] else 0
        parts = dict(build=4 * w, inputs=2 * w + 3 * kv, run=2 * w + 2 * kv + kv1 + gqa + logits)
        example = 4 * 2 * length * n * d["e_dec"]
    elif phase == "prefill":
        t, s = batch * length, length
        kv = 2 * t * n * d["e_pre"]
        act = 2 * t * (3 * d["h"] + d["heads"] * d["dqk"] + 2 * d["kv"] * d["dqk"] + 3 * d["ffn"]
                       + 2 * d["topk"] * d["h"])
        attn = (2 * batch * s * s + 3 * 2 * batch * d["heads"] * s * s) if d["eager"] else batch * s * s
        parts = dict(build=4 * w, inputs=0, run=2 * w + kv + act + attn + logits)
        example = 0
    else:
        raise ValueError(f"phase {phase!r}: prefill or decode")
    peak = max(parts.values())
    ram, disk = 8 * w + example, 4 * w
    return dict(layers=n, params=w, weights=2 * w, kv=kv, **parts, peak=peak,
                fits=peak + GPU_RESERVE <= GPU_BYTES, export_ram=ram, export_disk=disk,
                host_fits=ram <= HOST_RAM and disk <= HOST_DISK)


#: Time constants (s) of one ``benanza torch`` command, from the recorded wall times of the LLM truth's
#: commands (benchmarks/results/2026-11-28d/call*/g*/llm-results.jsonl, one command per H200: ``seconds``,
#: ``command_seconds``, each document's ``profile_seconds``), for 0.1-2 B decoders:
#: a profiled run's child (start, build, a short step's warm-up and timed calls): eager ``timed_run``
#: 13-25 s where the step is under 50 ms
RUN_FIXED_S = 20.0
#: torch.compile's first call over eager's (compile ``timed_run`` less eager's, less ``gpu_wait``):
#: 16-20 s at 12 layers (gpt2), 25-35 s at 22-24 (llama-1.1b, qwen2-0.5b): 8 s + 1 s a layer
COMPILE_FIXED_S, COMPILE_LAYER_S = 8.0, 1.0
#: a mixture of experts' routing record per batch before the bench (benanza.profiles.pytorch.record_routing: the
#: module built as a profiled run builds it, ``timed_run_build`` 6-17 s, and one forward)
ROUTING_BUILD_S = 12.0
#: the layers' bench per batch (``command_seconds.bench``: 52-107 s for three batches)
BENCH_BATCH_S = 35.0
#: the rest of a command (start, analysis, reports: ``seconds`` less export, bench and the runs)
COMMAND_OTHER_S = 30.0
#: the ONNX export on the machine's CPU (``command_seconds.export`` of first exports, 2026-11-28b/c:
#: mistral-1b 66-90 s, llama-1.1b 101-119 s, phi3-2b 114-151 s): 3.3 s a layer + 34 s per 10^9 parameters
#: (through llama-1.1b's and phi3-2b's), an extrapolation at deployment size
EXPORT_LAYER_S, EXPORT_GPARAM_S = 3.3, 34.0
#: eager's step over the physical bound (the recorded rows: LBL >= 1.21 x bound, LBL / eager <= 0.65, so eager
#: >= 1.9 x bound; most rows 2-5 x), and its launch cost per layer (~15 kernels of ~20 us)
STEP_OVER_BOUND, STEP_LAYER_S = 3.0, 3e-4
#: a call's time for commands: the device tool's 600 s less the install, the export cache's seeding and the
#: results' packing (``gpu_decoders.sh``: ~90 s on a fresh machine) and a margin
CALL_SECONDS = 480.0


def step_seconds(cfg: LlmConfig, phase: str, length: int, batch: int, layers: int | None = None) -> float:
    """An estimate of PyTorch eager's step (s) on an H100: :data:`STEP_OVER_BOUND` x the roofline bound
    max(FLOPs / :data:`H100_BF16_FLOPS`, bytes / :data:`H100_BYTES_S`) + :data:`STEP_LAYER_S` a layer.
    FLOPs (prefill): 2 x T x (the layers' parameters less the routed experts + k experts' per token) +
    the causal attention 2 B heads (dqk + dv) pairs, pairs = S^2 / 2 (S x window on a sliding layer), +
    the LM head of the last position 2 B V h. Bytes (decode): 2 x (the layers' parameters less the routed
    experts + the experts B tokens x k picks touch, E (1 - (1 - k/E)^B) per layer, + the LM head V h) + the
    cache read 2 B L e (window on a sliding layer)."""
    c = dict(cfg.config)
    n = _layers(c) if layers is None else layers
    d = _dims(cfg.arch, c)
    w_layers = param_count(cfg.arch, _at(c, n)) - param_count(cfg.arch, _at(c, 0))
    e, k, ep = d["experts"], d["topk"], d["expert_params"]
    moe_layers = n - min(n, c.get("first_k_dense_replace", 0)) if e else 0
    dense = w_layers - moe_layers * e * ep
    sliding = n // 2 if d["window"] else 0
    if phase == "prefill":
        t = batch * length
        full_pairs = length * length / 2
        pairs = (n - sliding) * full_pairs + sliding * length * min(length, d["window"] or length)
        flops = 2 * t * (dense + moe_layers * k * ep) + 2 * batch * d["heads"] * (d["dqk"] + d["dv"]) * pairs \
            + 2 * batch * d["vocab"] * d["h"]
        bound = max(flops / H100_BF16_FLOPS, 2 * (dense + moe_layers * e * ep) / H100_BYTES_S)
    else:
        touched = e * (1 - (1 - k / e) ** batch) if e else 0
        cache = 2 * batch * d["e_dec"] * ((n - sliding) * length + sliding * min(length, d["window"] or length))
        nbytes = 2 * (dense + moe_layers * touched * ep + d["vocab"] * d["h"]) + cache
        bound = nbytes / H100_BYTES_S
    return STEP_OVER_BOUND * bound + STEP_LAYER_S * n


def run_seconds(step: float) -> float:
    """A profiled run's seconds for a step of ``step`` s: :data:`RUN_FIXED_S` + its calls (benanza.profiles.capture:
    warm-up min(20, max(5, 3 s)) calls, timed min(100, max(10, 5 s)), 5 profiled iterations)."""
    warm = min(20 * step, max(5 * step, 3.0))
    timed = min(100 * step, max(10 * step, 5.0))
    return RUN_FIXED_S + warm + timed + 5 * step


def command_seconds(cfg: LlmConfig, phase: str, length: int, batches, layers: int | None = None,
                    export: bool = True, compile_: bool = True) -> float:
    """An estimate of one ``benanza torch`` command's seconds: its export (unless ``export`` is False: an
    earlier command of the call made it), the bench of each batch, an eager and a torch.compile run per
    batch (:func:`run_seconds` of :func:`step_seconds`, compile adding its compilation), a mixture of
    experts' routing record per batch and the rest (the
    constants above, derived from recorded wall times: an estimate, never a measurement)."""
    c = dict(cfg.config)
    n = _layers(c) if layers is None else layers
    s = COMMAND_OTHER_S + BENCH_BATCH_S * len(batches)
    if export:
        s += EXPORT_LAYER_S * n + EXPORT_GPARAM_S * param_count(cfg.arch, _at(c, n)) / 1e9
    moe = _dims(cfg.arch, c)["experts"] > 0
    for b in batches:
        step = step_seconds(cfg, phase, length, b, n)
        r = run_seconds(step)
        s += r + ((r + COMPILE_FIXED_S + COMPILE_LAYER_S * n) if compile_ else 0) + ((ROUTING_BUILD_S + step) if moe else 0)
    return s


def deploy_layers(cfg: LlmConfig, phase: str, length: int, batch: int,
                  call_seconds: float = CALL_SECONDS) -> tuple[int, str]:
    """The most layers (of the configuration's, first ones first) with which the row fits: its
    :func:`memory_plan` on the GPU and the host, and its own command (export, bench, eager and compile of
    this batch: :func:`command_seconds`) within ``call_seconds``. Returns (layers, why): all layers and
    "whole model"; fewer and what one layer more would pass (GPU memory, the export's host memory or
    disk, the call's time), with the figure; or 0 and why not even one layer fits (the row is skipped)."""
    full = _layers(dict(cfg.config))
    why = ""
    for n in range(full, 0, -1):
        m = memory_plan(cfg, phase, length, batch, n)
        if not m["fits"]:
            why = (f"GPU memory: {n} layers need {m['peak'] / GIB:.1f} GiB + {GPU_RESERVE // GIB} GiB reserve "
                   f"> {GPU_BYTES / GIB:.1f} GiB")
            continue
        if not m["host_fits"]:
            why = (f"export host: {n} layers need {m['export_ram'] / GIB:.0f} GiB memory, "
                   f"{m['export_disk'] / GIB:.0f} GiB disk > {HOST_RAM // GIB}, {HOST_DISK // GIB} GiB")
            continue
        t = command_seconds(cfg, phase, length, [batch], n)
        if t > call_seconds:
            why = f"call time: {n} layers ~{t:.0f} s > {call_seconds:.0f} s"
            continue
        return n, ("whole model" if n == full else why)
    return 0, f"skipped: not even one layer fits ({why})"


def deploy_rows(configs=DEPLOY_CONFIGS, cases=DEPLOY_CASES, batches=DEPLOY_BATCHES, dtypes=DEPLOY_DTYPES,
                call_seconds: float = CALL_SECONDS) -> list[dict]:
    """Every row of the deployment set: configuration, phase, length, batch, dtype, ``layers`` (0:
    skipped), ``full`` (the model's layers), ``why``, ``peak`` (GPU bytes at that depth; 0 when skipped).
    The batches of one (configuration, case) share one layer count, and so one export, where each batch's
    own (:func:`deploy_layers`) is at least 3/4 of the largest among them: the smallest of theirs (its
    ``why`` names the batch that sets it); a batch far below (a 32k cache at batch 64) keeps its own."""
    rows = []
    for cfg in configs:
        for phase, length in cases:
            own = {b: deploy_layers(cfg, phase, length, b, call_seconds) for b in batches}
            top = max(n for n, _ in own.values())
            shared = [b for b in batches if own[b][0] and own[b][0] * 4 >= top * 3]
            low = min((own[b][0] for b in shared), default=0)
            setter = next((b for b in shared if own[b][0] == low), None)
            for b in batches:
                n, why = own[b]
                if b in shared and n != low:
                    n, why = low, f"shares batch {setter}'s export: {own[setter][1]}"
                peak = memory_plan(cfg, phase, length, b, n)["peak"] if n else 0
                for dtype in dtypes:
                    rows.append(dict(config=cfg, phase=phase, len=length, batch=b, dtype=dtype, layers=n,
                                     full=_layers(dict(cfg.config)), why=why, peak=peak))
    return rows


def deploy_commands(rows: list[dict], call_seconds: float = CALL_SECONDS, carried: bool = False) -> list[dict]:
    """The commands of the rows that run: one per (configuration, case, dtype, layer count), its batches
    together, where together they would pass ``call_seconds`` split into one command per batch, or, with
    ``carried`` (exports carried from call to call), into a first command that makes the export with the
    batches that fit beside it and commands of the other batches without it. Each with its cut
    configuration (``cfg``, :func:`_with_layers`), ``makes`` (whether it counts the export) and ``seconds``
    (:func:`command_seconds`)."""
    out: dict = {}
    for r in rows:
        if r["layers"]:
            key = (r["config"].name, r["phase"], r["len"], r["dtype"], r["layers"])
            out.setdefault(key, dict(cfg=_with_layers(r["config"], r["layers"]), base=r["config"], phase=r["phase"],
                                     len=r["len"], dtype=r["dtype"], layers=r["layers"], batches=[]))
            out[key]["batches"].append(r["batch"])
    cmds = []
    for c in out.values():
        cost = lambda bs, export: command_seconds(c["cfg"], c["phase"], c["len"], bs, export=export)  # noqa: E731
        if cost(c["batches"], True) <= call_seconds:
            parts = [(c["batches"], True)]
        elif not carried:
            parts = [([b], True) for b in c["batches"]]
        else:
            parts = [([c["batches"][0]], True)]
            for b in c["batches"][1:]:
                bs, made = parts[-1]
                if cost(bs + [b], made) <= call_seconds:
                    parts[-1] = (bs + [b], made)
                else:
                    parts.append(([b], False))
        for bs, made in parts:
            cmds.append({**c, "batches": bs, "makes": made, "seconds": cost(bs, made)})
    return cmds


def deploy_groups(cmds: list[dict], call_seconds: float = CALL_SECONDS) -> list[list[dict]]:
    """The commands packed into groups of at most ``call_seconds`` each (first fit, largest first): one
    group is one GPU's work in one call. A command whose export an earlier command of its group made
    (the same cut configuration and case) is counted without it. Commands that do not make their export
    (``makes`` False: :func:`deploy_commands` with exports carried) come in groups after every group of
    those that do, so that a call runs them after the exports were made and carried."""
    groups: list[list[dict]] = []
    for wave in ([c for c in cmds if c.get("makes", True)], [c for c in cmds if not c.get("makes", True)]):
        first, loads = len(groups), []
        for c in sorted(wave, key=lambda c: -c["seconds"]):
            for i, g in enumerate(groups[first:]):
                made = any(o["cfg"].spec == c["cfg"].spec and (o["phase"], o["len"]) == (c["phase"], c["len"])
                           for o in g)
                t = command_seconds(c["cfg"], c["phase"], c["len"], c["batches"], export=False) if made else c["seconds"]
                if loads[i] + t <= call_seconds:
                    g.append(c)
                    loads[i] += t
                    break
            else:
                groups.append([c])
                loads.append(c["seconds"])
    return groups


def torch_command(cfg: LlmConfig, phase: str, length: int, batches: list[int], dtype: str, db: str, out: Path,
                  compile_max_len: int, bench_args: list[str] = (), logs: bool = False) -> list[str]:
    """The ``benanza torch`` command of one (configuration, case, dtype): every batch at once, torch.compile
    (default mode) besides eager when ``length`` <= ``compile_max_len``; without the cuDNN/cuBLASLt log
    runs unless ``logs`` (the table reads kernel times and LBLs only)."""
    size = ["--seq", str(length)] if phase == "prefill" else ["--kv-len", str(length)]
    cmd = [sys.executable, "-m", "benanza", "torch", cfg.spec, "--phase", phase, *size,
           "--batch", ",".join(map(str, batches)), "--dtype", dtype, "--db", db,
           "-o", str(out / "runs" / f"{cfg.name}-{phase}{length}-{dtype}"), "--json"]
    if phase == "decode":
        cmd += list(cfg.decode_args)
    if length <= compile_max_len:
        cmd += ["--compile", "default"]
    if not logs:
        cmd += ["--no-logs"]
    return cmd + [*(["--bench-args", shlex.join(bench_args)] if bench_args else [])]


def reuse_export(cmd: list[str]) -> Path | None:
    """Before a command: the ONNX export an earlier command of the same configuration and case wrote
    (another dtype's folder, ``runs/CONFIG-CASE-*``: the export does not depend on the dtype),
    copied into this command's folder with its key (``NAME.export.json``), where ``benanza torch`` keeps an
    existing export of the same key instead of exporting again (a 1 B-parameter decoder's TorchScript export
    took 157 s on this repository's 2-core machine, 2026-11-27; benanza's export cache,
    :mod:`benanza.processing.cache`, does the same across --out folders). Returns the copy, or None when
    there is none to reuse."""
    import shutil

    folder = Path(cmd[cmd.index("-o") + 1])
    case = folder.name.rsplit("-", 1)[0]
    if folder.exists() and any(folder.glob("*.onnx")):
        return None
    for other in sorted(folder.parent.glob(f"{case}-*")):
        found = sorted(f for f in other.glob("*.onnx") if not f.name.endswith("_train.onnx"))
        if other != folder and other.name.rsplit("-", 1)[0] == case and found:
            folder.mkdir(parents=True, exist_ok=True)
            for f in found:
                shutil.copy2(f, folder / f.name)
                stamp = f.with_suffix(".export.json")  # its key: benanza torch keeps it only with it
                if stamp.exists():
                    shutil.copy2(stamp, folder / stamp.name)
            return folder / found[0].name
    return None


def slim(doc: dict) -> dict:
    """What a row needs of a ``benanza torch --json`` document."""
    llm = doc.get("llm") or {}
    return {"batch": doc.get("batch"), "label": (doc.get("run") or {}).get("label") or "",
            "gpu": doc.get("gpu") or (doc.get("framework") or {}).get("gpu_name"),
            "lbl_ms": doc.get("lbl_ms", doc.get("lbl_fused_parallel_ms")), "complete": doc.get("complete"),
            "gpu_kernel_ms": doc.get("gpu_kernel_ms"), "latency_ms": doc.get("latency_ms"),
            "bound_ms": llm.get("bound_ms"), "bound_limit": (llm.get("bound") or {}).get("limit"),
            "ceilings": (llm.get("bound") or {}).get("ceilings"), "missing_layers": doc.get("missing_layers"),
            "profile_seconds": (doc.get("run") or {}).get("seconds"),
            "command_seconds": (doc.get("run") or {}).get("command_seconds")}


def make_row(cfg_name: str, params: int | None, phase: str, length: int, batch: int, dtype: str,
             docs: list[dict]) -> dict:
    """One table row from the slimmed documents (:func:`slim`) of one command at ``batch``: the eager run's
    and the torch.compile run's kernel time, the LBL (the eager document's; both share it) and the bound."""
    mine = [d for d in docs if d.get("batch") == batch]
    eager = next((d for d in mine if d["label"].startswith("eager")), None)
    comp = next((d for d in mine if d["label"].startswith("torch.compile")), None)
    ref = eager or comp or {}
    lbl, ek, ck = ref.get("lbl_ms"), (eager or {}).get("gpu_kernel_ms"), (comp or {}).get("gpu_kernel_ms")
    row = {"config": cfg_name, "params": params, "phase": phase, "len": length, "batch": batch, "dtype": dtype,
           "gpu": short_gpu(ref.get("gpu")), "eager_ms": ek, "compile_ms": ck, "lbl_ms": lbl, "complete": ref.get("complete"),
           "bound_ms": ref.get("bound_ms"), "ceilings": ref.get("ceilings"),
           "ratio_eager": lbl / ek if lbl is not None and ek else None,
           "ratio_compile": lbl / ck if lbl is not None and ck else None}
    row["flags"] = flags(row)
    return row


def short_gpu(name: str | None) -> str | None:
    """The GPU's model of a CUDA device name: "NVIDIA H100 80GB HBM3" -> "H100"; None stays None."""
    if not name:
        return None
    words = [w for w in str(name).split() if w.upper() != "NVIDIA"]
    return words[0] if words else str(name)


def flags(row: dict) -> list[str]:
    """The row's flags (module doc); empty: the row holds (LBL complete, <= eager and compile, >= bound)."""
    out = []
    if row["ratio_eager"] is not None and row["ratio_eager"] > 1.0:
        out.append("LBL>EAGER")
    if row["ratio_compile"] is not None and row["ratio_compile"] > 1.0:
        out.append("LBL>COMPILE")
    if row["bound_ms"] is not None and row["lbl_ms"] is not None and row["bound_ms"] > row["lbl_ms"]:
        out.append("BOUND>LBL")
    if row["complete"] is False:
        out.append("INCOMPLETE")
    if row["lbl_ms"] is None:
        out.append("NO-LBL")
    if row["eager_ms"] is None:
        out.append("NO-PYTORCH")
    return out


def _f(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


HEAD = ["config", "params", "phase", "len", "batch", "dtype", "gpu", "eager kernel ms", "compile kernel ms", "LBL ms",
        "bound ms", "LBL/eager", "LBL/compile", "flag"]


def table_lines(rows: list[dict]) -> list[str]:
    """The LLM truth table as aligned text: a header, a rule, one line per row."""
    cells = [[r["config"], f"{r['params'] / 1e9:.2f} B" if r.get("params") else "-", r["phase"], str(r["len"]),
              str(r["batch"]), r["dtype"], r.get("gpu") or "-", _f(r["eager_ms"]), _f(r["compile_ms"]),
              _f(r["lbl_ms"]) + ("" if r.get("complete") is not False else " partial"), _f(r["bound_ms"]),
              _f(r["ratio_eager"]), _f(r["ratio_compile"]), " ".join(r["flags"]) or "ok"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(HEAD, *cells)]
    line = lambda c: " | ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip()  # noqa: E731
    return [line(HEAD), "-+-".join("-" * w for w in widths)] + [line(c) for c in cells]


def summary_line(rows: list[dict]) -> str:
    ok = sum(1 for r in rows if not r["flags"])
    return (f"{len(rows)} rows: {ok} hold (complete, LBL <= eager and compile, bound <= LBL); "
            + ", ".join(f"{f} {sum(1 for r in rows if f in r['flags'])}"
                        for f in ("LBL>EAGER", "LBL>COMPILE", "BOUND>LBL", "INCOMPLETE", "NO-LBL", "NO-PYTORCH")))


def rows_from_records(records: list[dict], batches: list[int] | None = None) -> list[dict]:
    """The rows of ``llm_run`` records (each: config, params, phase, len, dtype, batches, docs), in the
    order of :data:`CONFIGS`, then phase, length, data type and batch. Of several records of one
    (config, phase, len, dtype), the last with documents of a batch wins that batch (a rerun, or a later
    merged run, of some of the batches replaces those only); a later run that failed (a timeout: no
    documents) does not hide an earlier one that measured; a batch some run asked for and none measured
    is a row flagged NO-LBL (a cut run's missing batches stay in the table). A record whose
    ``spec`` is a configuration's of :data:`CONFIGS` takes that configuration's name (runs made before a
    rename: ``mistral-1.6b``, the same 1.0 B specification, is ``mistral-1b``)."""
    names = {c.spec: c.name for c in ALL_CONFIGS}
    runs: dict = {}  # key -> {batch: (record, its documents of that batch)}, or {} for runs without documents
    asked: dict = {}  # key -> every batch a run of it asked for
    for r in records:
        if r.get("type") != "llm_run":
            continue
        key = (names.get(r.get("spec"), r["config"]), r["phase"], r["len"], r["dtype"])
        asked.setdefault(key, set()).update(r.get("batches") or ())
        by_batch = runs.setdefault(key, {})
        for b in sorted({d["batch"] for d in r.get("docs") or ()}):
            by_batch[b] = (r, [d for d in r["docs"] if d.get("batch") == b])
        if not r.get("docs") and not by_batch:
            by_batch.setdefault(None, (r, []))  # a failed run, shown as such while nothing measured it
    order = {c.name: i for i, c in enumerate(ALL_CONFIGS)}
    out = []
    for key, by_batch in sorted(runs.items(), key=lambda kv: (
            order.get(kv[0][0], len(order)), kv[0][0], kv[0][1] != "prefill", kv[0][2], kv[0][3])):
        name, phase, length, dtype = key
        measured = sorted(b for b in by_batch if b is not None)
        last = by_batch[measured[-1]][0] if measured else by_batch[None][0]
        for b in batches or sorted(set(measured) | asked[key]):  # a batch asked for and never measured: a NO-LBL row
            r, docs = by_batch.get(b, (last, []))
            out.append(make_row(name, r.get("params"), phase, length, b, dtype, docs))
    return out


def read_records(path: Path | str) -> list[dict]:
    """The records of ``results.jsonl`` (a folder holding one, or the file); a torn last line is skipped.
    ``PATH@GPU`` names the GPU the run measured on, for records made before runs recorded it (their
    documents get ``gpu`` = GPU where they have none; a recorded one wins). Raises ValueError for a
    missing file."""
    path, gpu = str(path), ""
    if not Path(path).exists() and "@" in path:  # a path that holds an @ itself stays whole
        path, _, gpu = path.rpartition("@")
    path = Path(path)
    p = path / "results.jsonl" if path.is_dir() else path
    if not p.exists():
        raise ValueError(f"{p}: no results.jsonl (an earlier `truth.py --llm` run's --out)")
    out = []
    for ln in p.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(ln)
        except json.JSONDecodeError:
            continue
        for d in (rec.get("docs") or ()) if gpu and isinstance(rec, dict) else ():
            if not d.get("gpu"):
                d["gpu"] = gpu
        out.append(rec)
    return out


# ------------------------------------------------------------------------------------------- running

def parse_args(argv: list[str]):
    """``--llm``'s options (unknown ones pass through to ``benanza bench`` via ``--bench-args``). Raises
    ValueError for a bad value."""
    ap = argparse.ArgumentParser(prog="truth.py --llm", description="LLM truth: benanza's LBL of decoder "
                                 "phases against PyTorch's eager and torch.compile kernel time.")
    ap.add_argument("--llm", action="store_true")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--db", help="benanza performance database (default OUT/truth.db)")
    ap.add_argument("--configs", help=f"comma-separated configurations (default all: {', '.join(c.name for c in CONFIGS)})")
    ap.add_argument("--batch", help="batch sizes (default 1,8,32; with --deploy 1,8,64)")
    ap.add_argument("--dtype", help="data types (default fp16,bf16; with --deploy bf16)")
    ap.add_argument("--deploy", action="store_true", help="the deployment-size set (issue 54): DEPLOY_CONFIGS x "
                    "DEPLOY_CASES, each row with the layers its memory plan and the call's time allow, its "
                    "commands in groups of one GPU-call each (--dry-run lists them)")
    ap.add_argument("--group", type=int, default=0, help="with --deploy: run only this group of the plan "
                    "(1-based; 0: every group, one after another)")
    ap.add_argument("--carried-exports", action="store_true", help="with --deploy: plan with each export made "
                    "once and carried to later calls (.exports/): a case's other batches in later groups without it")
    ap.add_argument("--call-seconds", type=float, default=CALL_SECONDS, help="with --deploy: the seconds of "
                    f"commands a group may hold (default {CALL_SECONDS:g}: the device tool's 600 s less install "
                    "and margin)")
    ap.add_argument("--phases", default="prefill,decode")
    ap.add_argument("--cases", help="comma-separated PHASE+LENGTH cases of CASES to run (e.g. prefill128,decode4096; "
                    "default: every case of --phases)")
    ap.add_argument("--only", help="comma-separated CONFIG:CASE:DTYPE runs (e.g. gpt2:prefill128:bf16,phi3-2b:decode128:fp16), "
                    "in this order, instead of every configuration x case x data type (a table's missing cells)")
    ap.add_argument("--deadline", type=float, default=0, help="seconds after which no new command starts "
                    "(0: none); the commands not started are listed as skipped")
    ap.add_argument("--timeout", type=float, default=0, help="seconds one command may run (0: no limit)")
    ap.add_argument("--end", type=float, default=0, help="seconds after the start by which every command has "
                    "ended: a command's time limit is the smaller of --timeout and what is left (0: none); a "
                    "command cut so keeps the batches it reported")
    ap.add_argument("--compile-max-len", type=int, help="torch.compile besides eager up to this "
                    "length (prefill tokens or cache length; default 128, with --deploy every length; 0: never)")
    ap.add_argument("--logs", action="store_true", help="also the cuDNN/cuBLASLt log runs of benanza torch (the "
                    "framework's engines in the reports; the table needs none: off by default since 2026-11-27f)")
    ap.add_argument("--streams", type=int, default=1, help="commands at once on the GPU, taking turns on it "
                    "through a shared lock (default 1)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU work, no torch: configurations and commands")
    ap.add_argument("--merge", nargs="+", metavar="RUN[@GPU]", help="one table from earlier runs' --out folders "
                    "(or results files); @GPU names the GPU of runs that did not record it, e.g. RUN@H200")
    a, extra = ap.parse_known_args(argv)
    a.configs = select(a.configs) if a.configs or not a.deploy else list(DEPLOY_CONFIGS)
    a.batch = a.batch or (",".join(map(str, DEPLOY_BATCHES)) if a.deploy else "1,8,32")
    a.dtype = a.dtype or (",".join(DEPLOY_DTYPES) if a.deploy else "fp16,bf16")
    if a.compile_max_len is None:
        a.compile_max_len = max(n for _, n in DEPLOY_CASES) if a.deploy else 128
    try:
        a.batches = [int(b) for b in a.batch.split(",") if b.strip()]
    except ValueError:
        raise ValueError(f"--batch {a.batch!r}: batch sizes must be positive integers") from None
    if not a.batches or min(a.batches) <= 0:
        raise ValueError(f"--batch {a.batch!r}: batch sizes must be positive integers")
    a.dtypes = [d.strip() for d in a.dtype.split(",") if d.strip()]
    if not a.dtypes or any(d not in DTYPES for d in a.dtypes):
        raise ValueError(f"--dtype {a.dtype!r}: the LLM truth's data types are fp16 and bf16")
    a.phases = [p.strip() for p in a.phases.split(",") if p.strip()]
    if not a.phases or any(p not in ("prefill", "decode") for p in a.phases):
        raise ValueError(f"--phases {','.join(a.phases)!r}: choose prefill, decode")
    known = {f"{p}{n}": (p, n) for p, n in (DEPLOY_CASES if a.deploy else CASES)}
    if a.cases:
        names = [c.strip() for c in a.cases.split(",") if c.strip()]
        bad = [c for c in names if c not in known]
        if bad or not names:
            raise ValueError(f"--cases {a.cases!r}: choose among {', '.join(known)}")
        a.case_list = [known[c] for c in names]
    else:
        a.case_list = [c for c in known.values() if c[0] in a.phases]
    a.only = _only(a.only, known) if a.only else None
    if a.deploy and (a.only or a.merge):
        raise ValueError("--deploy runs its own plan: without --only and --merge")
    if a.group and not a.deploy:
        raise ValueError("--group needs --deploy")
    if a.streams < 1:
        raise ValueError(f"--streams {a.streams}: at least 1")
    if a.dry_run and a.merge:
        raise ValueError("--dry-run and --merge exclude each other")
    a.out = a.out.resolve()
    a.db = a.db or str(a.out / "truth.db")
    a.bench_args = extra
    return a


def _only(text: str, known: dict) -> list[tuple]:
    """``--only``'s runs: (configuration, (phase, length), dtype) per ``CONFIG:CASE:DTYPE``, in their order.
    Raises ValueError for an unknown configuration, case or data type, or an empty list."""
    out = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        parts = item.split(":")
        if len(parts) != 3 or parts[1] not in known or parts[2] not in DTYPES:
            raise ValueError(f"--only {item!r}: write CONFIG:CASE:DTYPE, CASE among {', '.join(known)}, "
                             f"DTYPE among {', '.join(DTYPES)}")
        out.append((select(parts[0])[0], known[parts[1]], parts[2]))
    if not out:
        raise ValueError(f"--only {text!r}: no run named")
    return out


def plan_args(a) -> str:
    """The options of ``a`` that change ``--deploy``'s plan from its defaults (configurations, cases,
    batches, dtypes, ``--carried-exports``, ``--call-seconds``), as a GPU call passes them on
    (``gpu_deploy.sh``'s ``PLAN_ARGS``) so that its group numbers are the dry run's."""
    out = []
    if [c.name for c in a.configs] != [c.name for c in DEPLOY_CONFIGS]:
        out += ["--configs", ",".join(c.name for c in a.configs)]
    if list(a.case_list) != list(DEPLOY_CASES):
        out += ["--cases", ",".join(f"{p}{n}" for p, n in a.case_list)]
    if a.batches != list(DEPLOY_BATCHES):
        out += ["--batch", ",".join(map(str, a.batches))]
    if a.dtypes != list(DEPLOY_DTYPES):
        out += ["--dtype", ",".join(a.dtypes)]
    if a.carried_exports:
        out += ["--carried-exports"]
    if a.call_seconds != CALL_SECONDS:
        out += ["--call-seconds", f"{a.call_seconds:g}"]
    return " ".join(out)


def deploy_plan(a, write) -> list[tuple]:
    """``--deploy``: the rows (:func:`deploy_rows`) of ``a``'s configurations, cases, batches and dtypes, their
    commands (:func:`deploy_commands`) and groups (:func:`deploy_groups`, ``a.call_seconds`` each), printed
    (every row with its layers, why and GPU memory estimate; every group with its estimate and the command a
    GPU call runs) and recorded (``deploy_row``, ``deploy_group``); returns the runs of group ``a.group``
    (every group's with 0) as (cut configuration, (phase, length), dtype, batches). Raises ValueError for a
    group the plan does not have."""
    rows = deploy_rows(a.configs, a.case_list, a.batches, a.dtypes, a.call_seconds)
    cmds = deploy_commands(rows, a.call_seconds, a.carried_exports)
    groups = deploy_groups(cmds, a.call_seconds)
    where = {}
    for gi, g in enumerate(groups, 1):
        for c in g:
            for b in c["batches"]:
                where[(c["base"].name, c["phase"], c["len"], c["dtype"], b)] = gi
    print(f"== deployment size: {len(rows)} rows (configuration x case x batch x dtype), the GPU memory of "
          f"{GPU_BYTES / GIB:.1f} GiB less {GPU_RESERVE // GIB} GiB, groups of <= {a.call_seconds:g} s", flush=True)
    for r in rows:
        g = where.get((r["config"].name, r["phase"], r["len"], r["dtype"], r["batch"]))
        head = f"  {r['config'].name} {r['phase']}{r['len']} b{r['batch']} {r['dtype']}:"
        if r["layers"]:
            print(f"{head} {r['layers']}/{r['full']} layers, ~{r['peak'] / GIB:.1f} GiB, group {g} ({r['why']})")
        else:
            print(f"{head} 0/{r['full']} layers, {r['why']}")
        write("deploy_row", config=r["config"].name, phase=r["phase"], len=r["len"], batch=r["batch"],
              dtype=r["dtype"], layers=r["layers"], full_layers=r["full"], why=r["why"], peak_bytes=r["peak"], group=g)
    extra = plan_args(a)
    plan = f"PLAN_ARGS={shlex.quote(extra)} " if extra else ""
    total = 0.0
    for gi, g in enumerate(groups, 1):
        made: set = set()
        est = 0.0
        for c in g:
            key = (c["cfg"].spec, c["phase"], c["len"])
            est += command_seconds(c["cfg"], c["phase"], c["len"], c["batches"],
                                   export=key not in made and c.get("makes", True))
            made.add(key)
        total += est
        print(f"group {gi} (~{est:.0f} s): {plan}bash benchmarks/gpu_deploy.sh $OUT {gi}", flush=True)
        for c in g:
            print(f"    {c['cfg'].name} {c['phase']}{c['len']} {c['dtype']} batch {','.join(map(str, c['batches']))}")
        write("deploy_group", group=gi, seconds=est, commands=[
            dict(config=c["cfg"].name, phase=c["phase"], len=c["len"], dtype=c["dtype"], batches=c["batches"])
            for c in g])
    reuse = [gi for gi, g in enumerate(groups, 1) if not any(c.get("makes", True) for c in g)]
    if reuse:
        print(f"groups {reuse[0]}-{reuse[-1]} use exports earlier groups made: run them in calls after group "
              f"{reuse[0] - 1}'s, carrying each earlier call's OUT/gN/exports.tgz as .exports/", flush=True)
    runs_ = sum(1 for r in rows if r["layers"])
    print(f"{runs_} rows run ({len(rows) - runs_} skipped), {len(cmds)} commands, {len(groups)} groups: "
          f"~{total:.0f} s of commands estimated on one H100 (an estimate from earlier runs' wall times); "
          f"with the {len(CONFIGS) * len(CASES) * 3 * len(DTYPES)} rows of CONFIGS: "
          f"{runs_ + len(CONFIGS) * len(CASES) * 3 * len(DTYPES)}", flush=True)
    if a.group and not 1 <= a.group <= len(groups):
        raise ValueError(f"--group {a.group}: the plan has groups 1 to {len(groups)}")
    chosen = [groups[a.group - 1]] if a.group else groups
    return [(c["cfg"], (c["phase"], c["len"]), c["dtype"], c["batches"]) for g in chosen for c in g]


def run(a) -> list[dict]:
    """Every command of ``a`` (or their dry run, or the merge); writes the records and tables; the rows."""
    a.out.mkdir(parents=True, exist_ok=True)
    results = a.out / "results.jsonl"

    import threading

    written = threading.Lock()  # --streams: one record at a time

    def write(kind: str, **kw) -> dict:
        rec = {"type": kind, "time": time.time(), **kw}
        with written, results.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec, default=str) + "\n")
        return rec

    if a.merge:
        records = [r for src in a.merge for r in read_records(src)]
    else:
        records = []
        t0 = time.monotonic()
        todo = []
        runs = a.only or [(cfg, case, dtype) for cfg in a.configs for case in a.case_list for dtype in a.dtypes]
        if a.deploy:
            runs = deploy_plan(a, write)
        for i, (cfg, (phase, length), dtype, *own) in enumerate(runs):
            if i == 0 or runs[i - 1][0] != cfg:
                print(f"== {cfg.name}: {cfg.params / 1e9:.3f} B parameters, {cfg.spec}", flush=True)
            batches = own[0] if own else a.batches
            cmd = torch_command(cfg, phase, length, batches, dtype, a.db, a.out, a.compile_max_len,
                                a.bench_args, a.logs)
            if a.dry_run:
                write("dry_run", config=cfg.name, params=cfg.params, command=shlex.join(cmd))
                print(f"  would run: {shlex.join(cmd)}", flush=True)
                continue
            todo.append((cfg, phase, length, dtype, cmd, batches))

        def one(cfg, phase, length, dtype, cmd, batches=None, env=None) -> None:
            if a.deadline and time.monotonic() - t0 > a.deadline:
                write("skipped", config=cfg.name, phase=phase, len=length, dtype=dtype,
                      reason=f"--deadline {a.deadline:g} s passed")
                print(f"  skipped (deadline): {cfg.name} {phase}{length} {dtype}", flush=True)
                return
            limit = a.timeout or None
            if a.end:
                left = a.end - (time.monotonic() - t0)
                if left < 30:
                    write("skipped", config=cfg.name, phase=phase, len=length, dtype=dtype,
                          reason=f"--end {a.end:g} s: {max(left, 0):.0f} s left")
                    print(f"  skipped (end): {cfg.name} {phase}{length} {dtype}", flush=True)
                    return
                limit = min(limit or left, left)
            reused = reuse_export(cmd)
            if reused is not None:
                print(f"  export reused: {reused.parent.name}/{reused.name}", flush=True)
            records.append(_run_one(write, cfg, phase, length, dtype, batches or a.batches, cmd, limit, env))
            print(f"  {cfg.name} {phase}{length} {dtype}: {records[-1]['seconds']:.0f} s", flush=True)

        if a.streams > 1:
            run_streams(todo, a.streams, one)
        else:
            for item in todo:
                one(*item)
    rows = [] if a.dry_run else rows_from_records(records)
    text = "\n".join(table_lines(rows) + ["", summary_line(rows)])
    (a.out / "table.txt").write_text(text + "\n", encoding="utf-8")
    (a.out / "table.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    (a.out / "table.md").write_text("\n".join("| " + ln + " |" for ln in table_lines(rows)) + "\n", encoding="utf-8")
    print(text, flush=True)
    return rows


def run_streams(todo: list[tuple], streams: int, one) -> None:
    """``one(*item, env=ENV)`` for every item of ``todo`` ((config, phase, length, dtype, command, batches)), ``streams``
    at a time on this machine's GPU: each command's processes take turns on the GPU through one shared lock
    (``BENANZA_GPU_LOCK_SHARED``, :data:`benanza.runner.run.SHARED_GPU_LOCK_ENV`: the benches' workers and
    the profiling children measure only while they hold it), so that one command exports, compiles and
    reports on the CPU while another measures. The first data type of every (configuration, case) goes
    first, so that another data type finds its export in benanza's export cache; two commands of one
    (configuration, case) never run at once (their benches would share one suite folder)."""
    import threading

    lock_prefix = os.path.join(tempfile.gettempdir(), f"benanza-llm-truth-{os.getpid()}")
    env = dict(os.environ, BENANZA_GPU_LOCK_SHARED=lock_prefix)
    dtypes = list(dict.fromkeys(item[3] for item in todo))
    queue = sorted(todo, key=lambda it: dtypes.index(it[3]))  # stable: configurations and cases in order
    busy: set = set()
    cond = threading.Condition()

    def worker() -> None:
        while True:
            with cond:
                while True:
                    if not queue:
                        return
                    item = next((it for it in queue if (it[0].name, it[1], it[2]) not in busy), None)
                    if item is not None:
                        queue.remove(item)
                        busy.add((item[0].name, item[1], item[2]))
                        break
                    cond.wait()
            try:
                one(*item, env=env)
            except Exception as e:  # noqa: BLE001 - one command's failure never stops the other stream
                print(f"  error: {item[0].name} {item[1]}{item[2]} {item[3]}: {type(e).__name__}: {e}", flush=True)
            finally:
                with cond:
                    busy.discard((item[0].name, item[1], item[2]))
                    cond.notify_all()

    threads = [threading.Thread(target=worker) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in os.listdir(os.path.dirname(lock_prefix)):
        if f.startswith(os.path.basename(lock_prefix) + "-gpu"):
            try:
                os.unlink(os.path.join(os.path.dirname(lock_prefix), f))
            except OSError:
                pass


def _run_one(write, cfg, phase, length, dtype, batches, cmd, timeout: float | None = None,
             env: dict | None = None) -> dict:
    """One ``benanza torch`` command (in ``env``, default this process's); its documents slimmed into an
    ``llm_run`` record (an ``error`` record and an ``llm_run`` without documents when it fails or runs past
    ``timeout`` seconds)."""
    t, started = time.perf_counter(), time.time()
    # its own process group: a timeout kills its profiling children too (they would hold the GPU and the
    # output pipes)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tempfile.gettempdir(), env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        p = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        p = subprocess.CompletedProcess(cmd, -9, "", (err or "") + f"\nbenanza: timed out after {timeout:g} s")
    log = Path(cmd[cmd.index("-o") + 1])
    log.mkdir(parents=True, exist_ok=True)
    (log / "stderr.txt").write_text(p.stderr, encoding="utf-8")
    try:
        docs = [slim(d) for d in scenarios_of(json.loads(p.stdout), "benanza torch --json")]
    except ValueError as e:  # no JSON (json.JSONDecodeError), or not a torch document (json_docs.scenarios_of)
        last = next((x for x in reversed(p.stderr.strip().splitlines()) if x.strip()), f"exit {p.returncode}")
        if p.returncode == 0 and not isinstance(e, json.JSONDecodeError):
            last = str(e)  # it ran, and printed a document this script cannot read
        write("error", config=cfg.name, phase=phase, len=length, dtype=dtype, message=last[:400])
        print(f"  error: {last[:300]}", flush=True)
        docs = docs_from_reports(log, dtype, started)
        if docs:
            print(f"  kept the {len(docs)} reports the command had written: "
                  + ", ".join(f"b{d['batch']} {d['label']}" for d in docs), flush=True)
    return write("llm_run", config=cfg.name, params=cfg.params, spec=cfg.spec, phase=phase, len=length, dtype=dtype,
                 batches=batches, command=shlex.join(cmd), seconds=time.perf_counter() - t, docs=docs,
                 **({"partial": True} if docs and p.returncode != 0 else {}))


def docs_from_reports(folder: Path, dtype: str, since: float = 0.0) -> list[dict]:
    """The slimmed documents (:func:`slim`) of the reports ``benanza torch`` wrote into ``folder``
    (``report-bB-DTYPE.json``, ``report-bB-DTYPE-compile-MODE.json``, one per profiled run) no earlier
    than ``since`` (s since the epoch; an earlier file is another command's): what a command cut by its
    timeout had finished. ``benanza torch`` writes each run's report as soon as its profile is taken
    (since 2026-11-28b; before, after every profile), each the document ``--json`` prints, so a command
    cut by its timeout keeps the reports of the runs it finished (2026-11-28: qwen2-0.5b prefill 2048
    wrote all six and was cut before it printed them; 2026-11-28b: the same case in fp16 was cut with
    four of six profiles taken and no report). A file that is not a whole JSON document (cut while
    written) is left out. Ordered by batch, eager first."""
    pat = re.compile(rf"report-b(\d+)-{re.escape(dtype)}(-compile-[a-z-]+)?\.json")
    found = []
    for f in folder.glob("report-b*.json") if folder.is_dir() else ():
        m = pat.fullmatch(f.name)
        if not m or f.stat().st_mtime < since:
            continue
        try:
            doc = slim(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        if doc.get("batch") == int(m.group(1)) and doc.get("lbl_ms") is not None:
            found.append((int(m.group(1)), bool(m.group(2)), doc))
    return [d for _, _, d in sorted(found, key=lambda x: x[:2])]


def main(argv: list[str]) -> int:
    """``truth.py --llm``: 2 with one ``benanza: ...`` line for a bad argument."""
    try:
        a = parse_args(argv)
        if not (a.dry_run or a.merge):
            import torch  # noqa: F401  (a clear line here rather than one per command)

            if not torch.cuda.is_available():
                raise ValueError("no CUDA GPU here: use --dry-run, or --merge earlier runs")
        run(a)
    except ImportError:
        print("benanza: truth.py --llm needs torch and transformers (or --dry-run / --merge)", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"benanza: {e}", file=sys.stderr)
        return 2
    return 0
