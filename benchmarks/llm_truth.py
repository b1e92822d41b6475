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
#: DeepSeek-V2-Lite (MLA + MoE). DeepSeek-V2-Lite's numbers run in transformers' ``deepseek_v3`` type: the
#: ``deepseek_v2`` type's complex-number rotary exports in neither MLA form (docs/limits.md) while V3's
#: builds the same modules and shapes (the same 15,706,484,224 parameters; its router adds a sigmoid and a
#: score-correction buffer, with V2-Lite's unscaled, unnormalized top-k weights set); its decode runs
#: ``--mla absorbed``, the latent cache serving engines keep
DEPLOY_CONFIGS = (
    _cfg("llama3.1-8b", "llama", LLAMA, **LLAMA31_8B),
    _cfg("qwen3-8b", "qwen3", QWEN3_8B, **QWEN3_8B),
    _cfg("mixtral-8x7b", "mixtral", MIXTRAL, **MIXTRAL, max_position_embeddings=40960, sliding_window=None),
    _cfg("qwen3-30b-a3b", "qwen3_moe", QWEN3_MOE, **QWEN3_MOE, max_position_embeddings=40960),
    _cfg("gpt-oss-20b", "gpt_oss", GPT_OSS_20B, **GPT_OSS_20B),
    _cfg("deepseek-v2-lite", "deepseek_v3", DEEPSEEK_V2_LITE, ("--mla", "absorbed"), **DEEPSEEK_V2_LITE,
         n_group=1, topk_group=1, norm_topk_prob=False, routed_scaling_factor=1.0),
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


def torch_command(cfg: LlmConfig, phase: str, length: int, batches: list[int], dtype: str, db: str, out: Path,
                  compile_max_len: int, bench_args: list[str] = (), logs: bool = False) -> list[str]:
    """The ``benanza torch`` command of one (configuration, case, dtype): every batch at once, torch.compile
    (default mode) besides eager when ``length`` <= ``compile_max_len``; without the cuDNN/cuBLASLt log
    runs unless ``logs`` (the table reads kernel times and LBLs only)."""
    size = ["--seq", str(length)] if phase == "prefill" else ["--kv-len", str(length)]
    cmd = [sys.executable, "-m", "benanza", "torch", cfg.spec, "--phase", phase, *size,
           "--batch", ",".join(map(str, batches)), "--dtype", dtype, "--db", db,
           "-o", str(out / "runs" / f"{cfg.name}-{phase}{length}-{dtype}"), "--json"]
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
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--dtype", default="fp16,bf16")
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
    ap.add_argument("--compile-max-len", type=int, default=128, help="torch.compile besides eager up to this "
                    "length (prefill tokens or cache length; default 128; 0: never)")
    ap.add_argument("--logs", action="store_true", help="also the cuDNN/cuBLASLt log runs of benanza torch (the "
                    "framework's engines in the reports; the table needs none: off by default since 2026-11-27f)")
    ap.add_argument("--streams", type=int, default=1, help="commands at once on the GPU, taking turns on it "
                    "through a shared lock (default 1)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU work, no torch: configurations and commands")
    ap.add_argument("--merge", nargs="+", metavar="RUN[@GPU]", help="one table from earlier runs' --out folders "
                    "(or results files); @GPU names the GPU of runs that did not record it, e.g. RUN@H200")
    a, extra = ap.parse_known_args(argv)
    a.configs = select(a.configs)
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
    known = {f"{p}{n}": (p, n) for p, n in CASES}
    if a.cases:
        names = [c.strip() for c in a.cases.split(",") if c.strip()]
        bad = [c for c in names if c not in known]
        if bad or not names:
            raise ValueError(f"--cases {a.cases!r}: choose among {', '.join(known)}")
        a.case_list = [known[c] for c in names]
    else:
        a.case_list = [c for c in CASES if c[0] in a.phases]
    a.only = _only(a.only, known) if a.only else None
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
        for i, (cfg, (phase, length), dtype) in enumerate(runs):
            if i == 0 or runs[i - 1][0] != cfg:
                print(f"== {cfg.name}: {cfg.params / 1e9:.3f} B parameters, {cfg.spec}", flush=True)
            cmd = torch_command(cfg, phase, length, a.batches, dtype, a.db, a.out, a.compile_max_len,
                                a.bench_args, a.logs)
            if a.dry_run:
                write("dry_run", config=cfg.name, params=cfg.params, command=shlex.join(cmd))
                print(f"  would run: {shlex.join(cmd)}", flush=True)
                continue
            todo.append((cfg, phase, length, dtype, cmd))

        def one(cfg, phase, length, dtype, cmd, env=None) -> None:
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
            records.append(_run_one(write, cfg, phase, length, dtype, a.batches, cmd, limit, env))
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
    """``one(*item, env=ENV)`` for every item of ``todo`` ((config, phase, length, dtype, command)), ``streams``
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
