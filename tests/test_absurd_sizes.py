"""Sizes no library or GPU takes are refused when the model is read, naming the node (issue 17):
a 2^31-channel Conv was generated and built; a 2^40 MatMul dimension failed in the C++ compiler
(exit 5); --batch 99999999999 was written into an int."""
import subprocess
import sys

import onnx
from onnx import TensorProto, helper

from conftest import REPO

MODEL = REPO / "tests" / "data" / "zoo" / "models" / "resnet18.onnx"


def bz(*a):
    return subprocess.run([sys.executable, "-m", "benanza", *a], capture_output=True, text=True)


def _one_line(r, code, *words):
    assert r.returncode == code, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("benanza: "), r.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_a_2_to_31_channel_conv(tmp_path):
    c = 2**31
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", c, 8, 8])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [c, 3, 1, 1])
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="huge_conv")], "g", [x, w], [y])
    f = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f)
    _one_line(bz("generate", str(f), "--batch", "1", "-o", str(tmp_path / "s")), 2, "huge_conv", "2^31")
    assert not (tmp_path / "s").exists()


def test_a_2_to_40_matmul_dimension(tmp_path):
    k = 2**40
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", k])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="huge_mm")], "g", [a, b], [y])
    f = tmp_path / "mm.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f)
    _one_line(bz("generate", str(f), "--batch", "1", "-o", str(tmp_path / "s")), 2, "huge_mm")


def test_a_batch_above_int32():
    _one_line(bz("generate", str(MODEL), "--batch", "99999999999", "-o", "/tmp/never-written"), 2, "2^31 - 1")
