"""The model zoo of the truth benchmark (issue 14, item 6): importable factories, example inputs
and a dynamic-batch ONNX export for each model.

* torchvision (0.26 on the GPU machine, 0.29 here): resnet18, resnet50, resnet152, resnext50_32x4d,
  wide_resnet50_2, vgg16, densenet121, googlenet, inception_v3 (299 x 299), mobilenet_v2,
  mobilenet_v3_large, efficientnet_b0, regnet_y_400mf, shufflenet_v2_x1_0, squeezenet1_1,
  convnext_tiny, vit_b_16, swin_t, alexnet, mnasnet1_0; random weights (``weights=None``;
  googlenet and inception_v3 with ``aux_logits=False, init_weights=False``); input
  ``[B, 3, 224, 224]`` float32 (inception_v3 ``[B, 3, 299, 299]``), output the logits ``[B, 1000]``;
* ``bert_base``: transformers ``BertModel(BertConfig())`` (BERT-base: 12 layers, hidden 768,
  12 heads, vocab 30522; random init, the default attention implementation), inputs
  ``input_ids`` and ``attention_mask`` ``[B, 128]`` int64 (all ones: no padding), outputs
  ``last_hidden_state`` and ``pooler_output``;
* ``lstm_lm``: Embedding 32000 x 1024 -> 2-layer LSTM, hidden 1024 -> Linear 1024 -> 32000,
  **sequence-first**: input ids ``[35, B]`` int64, logits ``[35, B, 32000]`` (the ONNX LSTM's own
  layout, so the export has no Transposes around it; the batch is dim 1).

Exports (:meth:`Entry.export`) have a dynamic batch: the TorchScript exporter
(``torch.onnx.export(..., dynamo=False, opset_version=17, dynamic_axes=...)``) for every model but
BERT, which goes through torch.export (``dynamo=True``, opset 20, ``dynamic_shapes``) and falls back
to the TorchScript exporter when onnxscript is missing (said in the result). Weights are written
to an external file that is then deleted: benanza loads ``load_external_data=False`` and never
needs them; the ONNX file keeps the graph and the small constants (tens to hundreds of kB).

    python benchmarks/zoo.py list
    python benchmarks/zoo.py check [--models a,b] [--batch 1,32] [--fixed-batch] [--keep DIR]

``check`` exports every model here on the CPU and runs ``benanza.processing.model.process`` at each batch,
printing layers, unique configs, unsupported ops and fusion candidates per model; with
``--fixed-batch`` it also exports each model at batch 1 with a fixed batch and checks that benanza
rebinds it to the other batches with the dynamic export's unique configs. torch is imported inside
functions: ``list`` and ``--help`` work without it.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.path.append(str(Path(__file__).resolve().parent.parent))  # the repo's benanza only where none is installed

TORCHVISION = ("resnet18", "resnet50", "resnet152", "resnext50_32x4d", "wide_resnet50_2", "vgg16", "densenet121",
               "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
               "regnet_y_400mf", "shufflenet_v2_x1_0", "squeezenet1_1", "convnext_tiny", "vit_b_16", "swin_t",
               "alexnet", "mnasnet1_0")
BERT_SEQ, LSTM_SEQ, LSTM_VOCAB, LSTM_HIDDEN = 128, 35, 32000, 1024
FLOAT_TYPES = (1, 10, 11, 16)  # onnx FLOAT, FLOAT16, DOUBLE, BFLOAT16


@dataclass
class Exported:
    """One ONNX export: the file, the exporter used, opset, seconds, size (bytes) and notes."""

    path: Path
    exporter: str
    opset: int
    seconds: float
    size: int
    notes: list = field(default_factory=list)


@dataclass(frozen=True)
class Entry:
    """A model of the zoo. ``build()`` returns the module (eval mode, random weights, CPU);
    ``inputs(batch)`` a tuple of example CPU tensors; ``names`` the input names; ``batch_dims`` the
    batch dim of each input (the LSTM's is 1); ``outputs`` the output names; ``exporter``
    "torchscript" or "dynamo" (the preferred one)."""

    name: str
    build: Callable
    inputs: Callable
    names: tuple = ("input",)
    batch_dims: tuple = (0,)
    outputs: tuple = ("output",)
    output_batch_dims: tuple = (0,)
    exporter: str = "torchscript"

    def export(self, path: Path, batch: int = 2, dynamic: bool = True, keep_batch_norms: bool = False) -> Exported:
        """Export to ``path`` with a dynamic batch (traced at ``batch``, at least 2 so that no
        exporter specializes the batch to 1), or with a fixed ``batch`` when ``dynamic`` is False;
        weights go to ``path``.data, which is deleted."""
        return export_model(self, Path(path), batch, dynamic, keep_batch_norms)


def _torchvision(name: str) -> Callable:
    def build():
        import torchvision

        kw = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
        return getattr(torchvision.models, name)(weights=None, **kw).eval()
    return build


def _image(size: int) -> Callable:
    def inputs(batch: int):
        import torch

        return (torch.randn(batch, 3, size, size),)
    return inputs


def _bert():
    import torch
    from transformers import BertConfig, BertModel

    class Bert(torch.nn.Module):
        """BertModel called with keyword inputs, returning (last_hidden_state, pooler_output)."""

        def __init__(self):
            super().__init__()
            self.bert = BertModel(BertConfig())

        def forward(self, input_ids, attention_mask):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output

    return Bert().eval()


def _bert_inputs(batch: int):
    import torch

    return (torch.randint(0, 30522, (batch, BERT_SEQ)), torch.ones(batch, BERT_SEQ, dtype=torch.int64))


def _lstm_lm():
    import torch
    from torch import nn

    class LstmLM(nn.Module):
        """Embedding -> 2-layer LSTM -> Linear, sequence-first: ids [seq, batch] -> logits [seq, batch, vocab]."""

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(LSTM_VOCAB, LSTM_HIDDEN)
            self.lstm = nn.LSTM(LSTM_HIDDEN, LSTM_HIDDEN, num_layers=2)
            self.out = nn.Linear(LSTM_HIDDEN, LSTM_VOCAB)

        def forward(self, ids):
            y, _ = self.lstm(self.emb(ids))
            return self.out(y)

    torch.manual_seed(0)
    return LstmLM().eval()


def _lstm_inputs(batch: int):
    import torch

    return (torch.randint(0, LSTM_VOCAB, (LSTM_SEQ, batch)),)


MODELS: dict[str, Entry] = {n: Entry(n, _torchvision(n), _image(299 if n == "inception_v3" else 224))
                            for n in TORCHVISION}
MODELS["bert_base"] = Entry("bert_base", _bert, _bert_inputs, names=("input_ids", "attention_mask"),
                            batch_dims=(0, 0), outputs=("last_hidden_state", "pooler_output"),
                            output_batch_dims=(0, 0), exporter="dynamo")
MODELS["lstm_lm"] = Entry("lstm_lm", _lstm_lm, _lstm_inputs, batch_dims=(1,), output_batch_dims=(1,))


def select(text: str | None) -> list[Entry]:
    """The entries named in ``"a,b,c"`` (all when empty); raises ValueError naming an unknown one."""
    if not text:
        return list(MODELS.values())
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise ValueError(f"unknown model {unknown[0]!r} (known: {', '.join(MODELS)})")
    return [MODELS[n] for n in names]


# ------------------------------------------------------------------------------------ export

def has_onnxscript() -> bool:
    """Whether the torch.export-based exporter can run (it needs onnxscript)."""
    try:
        import onnxscript  # noqa: F401
    except ImportError:
        return False
    return True


def export_model(entry: Entry, path: Path, batch: int = 2, dynamic: bool = True,
                 keep_batch_norms: bool = False) -> Exported:
    """Export ``entry`` to ``path`` (see :meth:`Entry.export`). ``keep_batch_norms`` (a training
    step): every BatchNormalization stays its own node (TorchScript: ``do_constant_folding=False``;
    torch.export: ``optimize=False``), as :func:`benanza.processing.modules.export_onnx` does for
    ``benanza torch --train``. Raises RuntimeError with the exporter's first line when the export
    fails."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    model, inputs, notes = entry.build(), entry.inputs(batch), []
    exporter = entry.exporter
    if exporter == "dynamo" and not has_onnxscript():
        notes.append("onnxscript is not installed: TorchScript exporter (opset 17) instead of torch.export")
        exporter = "torchscript"
    names, outs = list(entry.names), list(entry.outputs)
    try:  # grad mode on: under no_grad nn.MultiheadAttention takes its fused fast path, which no exporter knows
        if exporter == "dynamo":
            b = torch.export.Dim("batch")
            shapes = tuple({d: b} for d in entry.batch_dims) if dynamic else None
            torch.onnx.export(model, inputs, str(path), dynamo=True, external_data=True, opset_version=20,
                              dynamic_shapes=shapes, input_names=names, output_names=outs,
                              **({"optimize": False} if keep_batch_norms else {}))
        else:
            axes = {n: {d: "batch"} for n, d in zip(names + outs, entry.batch_dims + entry.output_batch_dims)}
            torch.onnx.export(model, inputs, str(path), dynamo=False, opset_version=17, input_names=names,
                              output_names=outs, dynamic_axes=axes if dynamic else None,
                              **({"do_constant_folding": False} if keep_batch_norms else {}))
    except Exception as e:
        raise RuntimeError(f"{entry.name}: {exporter} export failed: {str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__}") from None
    size = strip_weights(path)
    return Exported(path=path, exporter=exporter, opset=20 if exporter == "dynamo" else 17,
                    seconds=time.perf_counter() - t, size=size, notes=notes)


def strip_weights(path: Path, threshold: int = 1024) -> int:
    """Leave ``path`` with its graph and small constants only: floating-point initializers of
    ``threshold`` bytes or more (the weights) become external data in ``path``.data, which is
    deleted (as is an external file the exporter wrote); integer and bool tensors (indices, shapes,
    masks) stay. Node metadata (stack traces) and value_info go. Returns the file's size."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_tensor, set_external_data

    m = onnx.load(str(path), load_external_data=False)
    location = path.name + ".data"
    written = {kv.value for t in m.graph.initializer for kv in t.external_data if kv.key == "location"}
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL and t.data_type not in FLOAT_TYPES:
            load_external_data_for_tensor(t, str(path.parent))  # indices the exporter wrote apart: kept
            t.data_location = onnx.TensorProto.DEFAULT
            del t.external_data[:]
        elif t.data_location != onnx.TensorProto.EXTERNAL and t.HasField("raw_data") \
                and len(t.raw_data) >= threshold and t.data_type in FLOAT_TYPES:
            set_external_data(t, location=location)
            t.ClearField("raw_data")
    for n in m.graph.node:
        n.ClearField("metadata_props")
        n.doc_string = ""
    del m.graph.value_info[:]
    onnx.save(m, str(path))
    for name in written | {location}:  # every external file the exporter wrote
        if (path.parent / name).exists():
            (path.parent / name).unlink()
    return path.stat().st_size


# ------------------------------------------------------------------------------------- check

def summarize(path: Path, batch: int) -> dict:
    """benanza's view of an export at one batch: layers, unique configs, unsupported ops, fusion
    candidates by kind, coverage, notices, and the config keys (for comparisons)."""
    from benanza.processing.model import process

    ml = process(path, batch)
    s = ml.summary()
    return {"layers": s["layers"], "unique_configs": len(ml.unique_configs()), "unsupported": s["unsupported"],
            "fusions": s["fusions_by_kind"], "coverage": s["coverage"]["percent"], "notices": s["notices"],
            "keys": sorted(ml.unique_configs()),
            "compute": collections.Counter(ly.signature for ly in ml.layers if ly.status != "zero_cost")}


def _fmt_counts(d: dict) -> str:
    return ", ".join(f"{k} x{v}" for k, v in sorted(d.items())) or "-"


def check_model(entry: Entry, folder: Path, batches: list[int], fixed: bool) -> dict:
    """Export ``entry`` (dynamic batch, and with ``fixed`` also fixed at batch 1) and summarize it
    at each batch; errors are recorded, never raised."""
    row = {"model": entry.name, "batches": {}}
    try:
        ex = entry.export(folder / f"{entry.name}.onnx")
        row.update(exporter=ex.exporter, opset=ex.opset, export_s=ex.seconds, kB=ex.size / 1024, notes=ex.notes)
        for b in batches:
            row["batches"][b] = summarize(ex.path, b)
    except Exception as e:  # one model's failure must not stop the check
        row["error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
        return row
    if fixed:
        row["fixed"] = {}
        try:
            fx = entry.export(folder / f"{entry.name}_fixed1.onnx", batch=1, dynamic=False)
            for b in batches:
                try:
                    f, d = summarize(fx.path, b), row["batches"][b]
                    same = f["keys"] == d["keys"] and f["compute"] == d["compute"]
                    row["fixed"][b] = "same" if same else (
                        f"DIFF ({len(set(f['keys']) ^ set(d['keys']))} keys, "
                        f"{sum(((f['compute'] - d['compute']) + (d['compute'] - f['compute'])).values())} layers)")
                except Exception as e:
                    row["fixed"][b] = "ERROR " + (str(e).splitlines()[0] if str(e) else type(e).__name__)
        except Exception as e:
            row["fixed"] = {"export": "ERROR " + str(e).splitlines()[0]}
    return row


def print_check(rows: list[dict], batches: list[int]) -> None:
    """The check table: one line per model and batch."""
    head = f"{'model':20} {'exporter':11} {'export s':>8} {'kB':>6} {'batch':>5} {'layers':>6} {'unique':>6}  " \
           f"{'unsupported':32} fusion candidates"
    print(head)
    print("-" * len(head))
    for r in rows:
        if "error" in r:
            print(f"{r['model']:20} ERROR {r['error']}")
            continue
        for k, b in enumerate(batches):
            s = r["batches"][b]
            lead = (f"{r['model']:20} {r['exporter']:11} {r['export_s']:8.1f} {r['kB']:6.0f}" if k == 0
                    else " " * 48)
            print(f"{lead} {b:5d} {s['layers']:6d} {s['unique_configs']:6d}  {_fmt_counts(s['unsupported']):32} "
                  f"{_fmt_counts(s['fusions'])}")
        for n in r.get("notes", []):
            print(f"{'':20} note: {n}")
        if "fixed" in r:
            print(f"{'':20} fixed batch 1 export: " + ", ".join(f"at {b}: {v}" for b, v in r["fixed"].items()))


def main(argv: list[str] | None = None) -> int:
    """``list`` and ``check``; returns the exit status (1 when a model failed, 2 for a bad argument)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the models and how each is exported")
    ck = sub.add_parser("check", help="export every model on the CPU and process it with benanza")
    ck.add_argument("--models", help="comma-separated subset (default: all)")
    ck.add_argument("--batch", default="1,32", help="batch sizes to process (default 1,32)")
    ck.add_argument("--fixed-batch", action="store_true", help="also export at a fixed batch 1 and check the rebinding")
    ck.add_argument("--keep", type=Path, help="keep the exports in this folder")
    args = ap.parse_args(argv)
    try:
        entries = select(getattr(args, "models", None))
        batches = [int(b) for b in getattr(args, "batch", "1").split(",") if b.strip()]
        if any(b <= 0 for b in batches):
            raise ValueError("batch sizes must be positive")
    except ValueError as e:
        print(f"benanza: {e}", file=sys.stderr)
        return 2
    if args.cmd == "list":
        for e in entries:
            print(f"{e.name:20} inputs {', '.join(e.names)} (batch dims {e.batch_dims}), exporter {e.exporter}")
        return 0
    folder = args.keep or Path(tempfile.mkdtemp(prefix="zoo-"))
    rows = []
    for e in entries:
        rows.append(check_model(e, folder, batches, args.fixed_batch))
        print(f"[{len(rows)}/{len(entries)}] {e.name}: {rows[-1].get('error', 'ok')}", file=sys.stderr, flush=True)
    print_check(rows, batches)
    if not args.keep:
        for p in folder.glob("*"):
            p.unlink()
        os.rmdir(folder)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
