"""Write the weight-stripped real exports that tests/test_rebind.py checks (needs torch,
torchvision, transformers and onnxscript; not run in CI).

Each model is exported twice with the torch.export-based exporter (``torch.onnx.export(...,
dynamo=True)``, opset 20): at batch 1 with a fixed batch, and with a dynamic batch axis. The files
keep the graph and the small constants only (``zoo.strip_weights``): floating-point initializers
go to an external file that is deleted (the files still name it; benanza loads
``load_external_data=False``), integer constants (indices) stay, node metadata (stack traces) and
value_info are dropped, so each file stays at tens of kB.

* ``vit_b_16_fixed1.onnx`` / ``vit_b_16_dynamic.onnx``: torchvision ``vit_b_16(weights=None)``,
  input ``[B, 3, 224, 224]``;
* ``bert_fixed1.onnx`` / ``bert_dynamic.onnx``: transformers ``BertModel`` with a small config
  (2 layers, hidden 64, 4 heads, intermediate 128, vocab 1000), inputs ``input_ids`` and
  ``attention_mask`` ``[B, 16]``, the default attention implementation.

    python benchmarks/fixed_batch_exports.py [--out tests/data]
"""
import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def strip(src: Path, dst: Path) -> int:
    """Copy ``src`` and its external data into ``dst``'s folder (same names), then strip the weights
    (zoo.strip_weights: the data file goes); return the size."""
    import shutil

    from zoo import strip_weights

    assert src.name == dst.name, "the external data file is named after the model"
    for f in src.parent.glob(src.name + "*"):
        shutil.copy(f, dst.parent / f.name)
    return strip_weights(dst)


def export(module, args: tuple, kwargs: dict, dynamic: dict | None, path: Path, names=None) -> None:
    import torch

    torch.onnx.export(module, args, str(path), kwargs=kwargs, dynamo=True, external_data=True,
                      dynamic_shapes=dynamic, input_names=names, opset_version=20)


def vit(folder: Path, out: Path) -> None:
    import torch
    import torchvision

    m = torchvision.models.vit_b_16(weights=None).eval()
    for name, batch, dyn in (("vit_b_16_fixed1", 1, None), ("vit_b_16_dynamic", 2, {"x": {0: torch.export.Dim("batch")}})):
        export(m, (torch.randn(batch, 3, 224, 224),), {}, dyn, folder / f"{name}.onnx", names=["input"])
        print(name, strip(folder / f"{name}.onnx", out / f"{name}.onnx"), "bytes")


def bert(folder: Path, out: Path) -> None:
    import torch
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=64)
    m = BertModel(cfg).eval()
    for name, batch in (("bert_fixed1", 1), ("bert_dynamic", 2)):
        kw = {"input_ids": torch.randint(0, 1000, (batch, 16)), "attention_mask": torch.ones(batch, 16, dtype=torch.int64)}
        b = torch.export.Dim("batch")
        dyn = {"input_ids": {0: b}, "attention_mask": {0: b}} if batch > 1 else None
        export(m, (), kw, dyn, folder / f"{name}.onnx")
        print(name, strip(folder / f"{name}.onnx", out / f"{name}.onnx"), "bytes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "tests" / "data")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fixed-exports-") as tmp:
        vit(Path(tmp), args.out)
        bert(Path(tmp), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
