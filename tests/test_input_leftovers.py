"""Bad model input the issue "One pipeline, one answer" found accepted (or answered with the wrong
words): each is now one line ``benanza: ...`` naming what and where, exit 2, or a layer marked
unsupported with its reason; never a number."""
import os

import onnx
from onnx import TensorProto, helper

from benanza.processing.model import process
from conftest import REPO
from test_cli import bz, one_line_error

RESNET50 = REPO / "examples" / "resnet50.onnx"


def test_a_batch_dim_out_of_range_is_refused_on_a_symbolic_batch_too():
    """resnet50's input is (N, 3, 224, 224) with a symbolic N: --batch-dim 99 was ignored."""
    msg = one_line_error(bz("layers", RESNET50, "--batch-dim", "99"), 2)
    assert msg == "benanza: --batch-dim 99 is out of range for input 'input' of rank 4"
    assert bz("layers", RESNET50, "--batch-dim", "0").returncode == 0


def test_an_opset_newer_than_onnx_knows_is_refused(tmp_path):
    m = onnx.load(str(RESNET50), load_external_data=False)
    m.opset_import[0].version = 99
    path = tmp_path / "opset99.onnx"
    onnx.save(m, str(path))
    msg = one_line_error(bz("layers", path), 2)
    assert msg.startswith(f"benanza: {path}: opset 99 is newer than onnx") and "at most" in msg


def test_a_conv_without_input_channels_is_unsupported_with_its_reason(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 0, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 0, 3, 3], [])
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], "g", [x], [y], [w])
    path = tmp_path / "c0.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    ml = process(path, 1)
    (ly,) = ml.layers
    assert ly.status == "unsupported" and "empty tensor" in ly.reason and ly.config is None


def test_a_symbolic_link_loop_is_named(tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    os.symlink(b, a)
    os.symlink(a, b)
    assert one_line_error(bz("layers", a), 2) == f"benanza: {a}: a symbolic link loop, not a file"
    gone = tmp_path / "gone.onnx"
    os.symlink(tmp_path / "nowhere.onnx", gone)
    assert "which does not exist" in one_line_error(bz("analyze", gone, "--db", tmp_path / "x.db"), 2)


def test_error_messages_say_where(tmp_path):
    """A cyclic graph's message is whole (it was cut at ONNX's newline, before the node's name); a
    shape-inference error names the file; a database message names the file the user gave, not the
    unpacked copy in the cache."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4])
    g = helper.make_graph([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                           helper.make_node("Relu", ["a"], ["b"], name="n2")], "cyc", [x], [b])
    cyc = tmp_path / "cyc.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(cyc))
    msg = one_line_error(bz("layers", cyc), 2)
    assert msg.startswith(f"benanza: {cyc}: invalid ONNX model:") and "n1 OpType: Add is not output" in msg
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    g = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"], name="add")], "bad", [x, z], [y])
    bad = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(bad))
    msg = one_line_error(bz("layers", bad), 2)
    assert msg.startswith(f"benanza: {bad}: shape inference failed:") and "Incompatible dimensions" in msg
    pair = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"
    msg = one_line_error(bz("analyze", RESNET50, "--db", pair, "--system", "H100"), 2)
    assert str(pair) in msg and ".cache" not in msg
