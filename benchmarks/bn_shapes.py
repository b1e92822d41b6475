"""An ONNX model of the batch norms PyTorch runs after each convolution of models whose export
folded them (torchvision's resnets, mobilenets...): one BatchNormalization per distinct convolution
output shape (dynamic batch), so that ``benanza bench`` times them in both layouts, the framework's
own call included (``torch:aten::batch_norm``), for the what-if's channels_last step
(:class:`benanza.analysis.whatif.Alternatives`).

    python benchmarks/bn_shapes.py --out bn.onnx db/reference/truth/resnet50.onnx ...
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_shapes(models: list[Path]) -> list[tuple[int, int, int]]:
    """The distinct (C, H, W) of every convolution output of ``models`` (processed at batch 1)."""
    from benanza.processing.model import process

    out = set()
    for m in models:
        for ly in process(m, 1).layers:
            if ly.config is not None and ly.config.kind == "Conv":
                out.add(tuple(ly.config.output_shape()[1:]))
    return sorted(out)


def bn_model(shapes: list[tuple[int, int, int]]) -> onnx.ModelProto:
    """One input, BatchNormalization and output per shape; epsilon 1e-5 (torch.nn.BatchNorm2d)."""
    nodes, inputs, outputs, inits = [], [], [], []
    for i, (c, h, w) in enumerate(shapes):
        x, y = f"x{i}", f"y{i}"
        inputs.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", c, h, w]))
        outputs.append(helper.make_tensor_value_info(y, TensorProto.FLOAT, ["N", c, h, w]))
        names = [f"bn{i}_{p}" for p in ("scale", "bias", "mean", "var")]
        for n, v in zip(names, (np.ones(c), np.zeros(c), np.zeros(c), np.ones(c))):
            inits.append(numpy_helper.from_array(v.astype(np.float32), n))
        nodes.append(helper.make_node("BatchNormalization", [x, *names], [y], name=f"bn{i}", epsilon=1e-5))
    g = helper.make_graph(nodes, "bn_shapes", inputs, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("models", type=Path, nargs="+")
    a = ap.parse_args(argv)
    shapes = conv_shapes(a.models)
    onnx.save(bn_model(shapes), a.out)
    print(f"{a.out}: {len(shapes)} batch norms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
