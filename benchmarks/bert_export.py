"""Check tests/onnx_builders.bert_encoder_model against a real torch.onnx.export (needs torch; not
run in CI).

A HuggingFace-BERT-style encoder in plain torch (the code path of transformers' BertModel with eager
attention: embeddings, extended attention mask, BertSelfAttention, BertIntermediate with erf GELU,
BertOutput, pooler) is exported with the TorchScript exporter at the given opsets; both it and the
builder's graph of the same sizes are processed by benanza and their layers by type and fusion
candidates compared.

    python benchmarks/bert_export.py --opset 14 --opset 17 [--keep DIR]
"""
import argparse
import collections
import math
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from onnx_builders import bert_encoder_model  # noqa: E402

from benanza.processing.model import process  # noqa: E402

V, H, NH, I, LAYERS, P = 1000, 128, 4, 512, 2, 64


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.word, self.pos, self.tok = nn.Embedding(V, H), nn.Embedding(P, H), nn.Embedding(2, H)
        self.ln, self.drop = nn.LayerNorm(H, eps=1e-12), nn.Dropout(0.1)
        self.register_buffer("position_ids", torch.arange(P).expand((1, -1)), persistent=False)

    def forward(self, ids, tt):
        pos = self.position_ids[:, :ids.shape[1]]
        return self.drop(self.ln(self.word(ids) + self.tok(tt) + self.pos(pos)))


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.hd = H // NH
        self.q, self.k, self.v, self.drop = nn.Linear(H, H), nn.Linear(H, H), nn.Linear(H, H), nn.Dropout(0.1)

    def heads(self, x):
        return x.view(x.size()[:-1] + (NH, self.hd)).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.heads(self.q(x)), self.heads(self.k(x)), self.heads(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
        ctx = torch.matmul(self.drop(nn.functional.softmax(scores, dim=-1)), v).permute(0, 2, 1, 3).contiguous()
        return ctx.view(ctx.size()[:-2] + (H,))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.att, self.ao, self.aln = SelfAttention(), nn.Linear(H, H), nn.LayerNorm(H, eps=1e-12)
        self.inter, self.out, self.oln = nn.Linear(H, I), nn.Linear(I, H), nn.LayerNorm(H, eps=1e-12)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, mask):
        a = self.aln(self.drop(self.ao(self.att(x, mask))) + x)
        return self.oln(self.drop(self.out(nn.functional.gelu(self.inter(a)))) + a)


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.layers, self.pool = Embeddings(), nn.ModuleList([Layer() for _ in range(LAYERS)]), nn.Linear(H, H)

    def forward(self, ids, mask, tt):
        ext = (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        x = self.emb(ids, tt)
        for layer in self.layers:
            x = layer(x, ext)
        return x, torch.tanh(self.pool(x[:, 0]))


def export(path: Path, opset: int) -> None:
    ids = torch.randint(0, V, (2, 16))
    mask, tt = torch.ones(2, 16, dtype=torch.int64), torch.zeros(2, 16, dtype=torch.int64)
    axes = {0: "batch", 1: "seq"}
    torch.onnx.export(Bert().eval(), (ids, mask, tt), str(path), opset_version=opset, dynamo=False,
                      input_names=["input_ids", "attention_mask", "token_type_ids"],
                      output_names=["last_hidden_state", "pooler_output"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes})


def profile(path: Path) -> tuple[dict, dict]:
    ml = process(path, 2, dims={"seq": 16})
    by_type = {op: v["count"] for op, v in ml.summary()["by_type"].items()}
    fusions = collections.Counter((f.config.kind, tuple(ml.layers[i].op_type for i in f.layers)) for f in ml.fusions)
    return by_type, dict(fusions)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--opset", type=int, action="append", default=[])
    ap.add_argument("--keep", type=Path, help="keep the exported models in this folder")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bert-export-"))
    folder.mkdir(parents=True, exist_ok=True)
    ok = True
    for opset in args.opset or [14, 17]:
        real, built = folder / f"bert_torch_{opset}.onnx", folder / f"bert_builder_{opset}.onnx"
        export(real, opset)
        bert_encoder_model(built, opset=opset, layers=LAYERS, hidden=H, heads=NH, intermediate=I, vocab=V, max_pos=P)
        (rt, rf), (bt, bf) = profile(real), profile(built)
        same = rt == bt and rf == bf
        ok = ok and same
        print(f"opset {opset}: {'same' if same else 'DIFFERENT'} layers by type and fusion candidates")
        for op in sorted(set(rt) | set(bt)):
            if rt.get(op) != bt.get(op):
                print(f"  {op}: torch {rt.get(op)} builder {bt.get(op)}")
        for f in sorted(set(rf) | set(bf)):
            if rf.get(f) != bf.get(f):
                print(f"  fusion {f}: torch {rf.get(f)} builder {bf.get(f)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
