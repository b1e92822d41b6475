"""Small decoder-LLM exports for issue 27's tests: each attention form the exporters write.

Builds transformers decoders with small configurations and random weights (GPT-2, Llama with GQA, RoPE,
RMSNorm and SwiGLU, Qwen2, Mistral, Phi-3), exports each (prefill: ``input_ids`` and ``attention_mask``
``[batch, seq]``; decode: one new token against a KV cache given as inputs) with

* torch.export (``torch.onnx.export(..., dynamo=True)``) at opset 20 and at opset 23 (where the exporter
  writes ONNX ``Attention``, ``RMSNormalization`` and ``RotaryEmbedding`` when it can),
* the TorchScript exporter (opset 17),

and strips the weights (``benanza.processing.modules.strip_weights``: initializers become external
references to a file that does not exist, which benanza never reads), so each file is a few hundred KB.
Runs where torch, transformers and onnxscript are (the lent GPU machine; no GPU needed):

    python3 benchmarks/decoder_exports.py --out DIR [--models gpt2,llama] [--layers 2]

Writes ``DIR/<model>_<phase>_<exporter>.onnx`` and ``DIR/exports.txt`` (one line per export: the file,
seconds, size, the op histogram, or the exporter's error).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import io
import logging
import sys
import time
import traceback
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

#: small configurations of each model type: few layers, narrow, a small vocabulary (the kernels' kinds
#: and the graph's form do not depend on the sizes; the tests rebind nothing)
CONFIGS = {
    "gpt2": dict(n_layer=2, n_embd=128, n_head=4, vocab_size=1000, n_positions=512),
    "llama": dict(num_hidden_layers=2, hidden_size=128, intermediate_size=352, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512),
    "qwen2": dict(num_hidden_layers=2, hidden_size=128, intermediate_size=352, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512),
    "mistral": dict(num_hidden_layers=2, hidden_size=128, intermediate_size=352, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=1000, max_position_embeddings=512, sliding_window=None),
    "phi3": dict(num_hidden_layers=2, hidden_size=128, intermediate_size=352, num_attention_heads=4,
                 num_key_value_heads=4, vocab_size=1000, max_position_embeddings=512, pad_token_id=0),
}


def build(model_type: str, layers: int, attn: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    kw = dict(CONFIGS[model_type])
    key = "n_layer" if model_type == "gpt2" else "num_hidden_layers"
    kw[key] = layers
    cfg = AutoConfig.for_model(model_type, **kw)
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg).eval(), cfg


class Prefill:
    """forward(input_ids, attention_mask) -> logits, no cache"""

    def __new__(cls, model):
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask):
                return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        return M().eval()


class Decode:
    """forward(input_ids [B,1], attention_mask [B,L+1], k_0, v_0, ...) -> logits [B,1,V]: one new token
    against a KV cache of L given as inputs (a DynamicCache built inside from the tensors)."""

    def __new__(cls, model, n_layers):
        import torch
        from transformers import DynamicCache

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, *kv):
                cache = DynamicCache()
                for i in range(n_layers):
                    cache.update(kv[2 * i], kv[2 * i + 1], i)
                return self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache,
                                  use_cache=True).logits
        return M().eval()


def export(module, inputs, names, dyn, path: Path, exporter: str, opset: int) -> str:
    import torch

    quiet = io.StringIO()
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        if exporter == "dynamo":
            dims = {}
            b = torch.export.Dim("batch", min=1, max=1024)
            for n, x in zip(names, inputs):
                d = {0: b}
                if n in dyn:
                    d[dyn[n][0]] = dyn[n][1]
                dims[n] = d
            from benanza.processing.modules import dynamic_shapes

            torch.onnx.export(module, tuple(inputs), str(path), dynamo=True, external_data=True,
                              opset_version=opset, input_names=names, output_names=["logits"],
                              dynamic_shapes=dynamic_shapes(module, [dims[n] for n in names]))
        else:
            axes = {n: {0: "batch"} for n in names}
            for n in names:
                if n in dyn:
                    axes[n][dyn[n][0]] = dyn[n][2]
            axes["logits"] = {0: "batch"}
            torch.onnx.export(module, tuple(inputs), str(path), dynamo=False, opset_version=opset,
                              input_names=names, output_names=["logits"], dynamic_axes=axes)
    from benanza.processing.modules import strip_weights

    strip_weights(path)
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    h = collections.Counter((n.domain + "::" if n.domain else "") + n.op_type for n in m.graph.node)
    return " ".join(f"{k}:{v}" for k, v in sorted(h.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--kv", type=int, default=16)
    ap.add_argument("--forms", default="dynamo20,dynamo23,torchscript")
    a = ap.parse_args()
    import torch

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "exports.txt", "a")
    for mt in a.models.split(","):
        for phase in ("prefill", "decode"):
            for form in a.forms.split(","):
                exporter, opset = ("torchscript", 17) if form == "torchscript" else ("dynamo", int(form[6:]))
                t0 = time.perf_counter()
                path = out / f"{mt}_{phase}_{form}.onnx"
                try:
                    model, cfg = build(mt, a.layers, "sdpa")
                    B = 2
                    if phase == "prefill":
                        mod = Prefill(model)
                        inputs = [torch.randint(0, 1000, (B, a.seq)), torch.ones(B, a.seq, dtype=torch.int64)]
                        names = ["input_ids", "attention_mask"]
                        s = torch.export.Dim("seq", min=2, max=4096)
                        dyn = {"input_ids": (1, s, "seq"), "attention_mask": (1, s, "seq")}
                    else:
                        nl = cfg.num_hidden_layers
                        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
                        hd = cfg.hidden_size // cfg.num_attention_heads
                        mod = Decode(model, nl)
                        kv = []
                        for i in range(nl):
                            kv += [torch.randn(B, heads, a.kv, hd), torch.randn(B, heads, a.kv, hd)]
                        inputs = [torch.randint(0, 1000, (B, 1)), torch.ones(B, a.kv + 1, dtype=torch.int64)] + kv
                        names = ["input_ids", "attention_mask"] + [f"past_{t}_{i}" for i in range(nl) for t in ("key", "value")]
                        L = torch.export.Dim("past", min=2, max=8192)
                        dyn = {n: (2, L, "past") for n in names[2:]}
                        dyn["attention_mask"] = (1, L + 1, "total")
                        if exporter == "torchscript":
                            dyn["attention_mask"] = (1, None, "total")
                    r = export(mod, inputs, names, dyn, path, exporter, opset)
                    line = f"{path.name}\t{time.perf_counter() - t0:.1f}s\t{path.stat().st_size}B\t{r}"
                except Exception as e:  # noqa: BLE001 - each export reports its own failure
                    tb = traceback.format_exc().strip().splitlines()
                    line = f"{path.name}\tFAILED\t{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''} | {tb[-1][:200]}"
                    path.unlink(missing_ok=True)
                print(line, flush=True)
                log.write(line + "\n")
                log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
