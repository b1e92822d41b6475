"""Small ONNX graphs built with onnx.helper for the cases the shared models do not cover:
every layer kind in one model (with hostile node names), a model with nothing to benchmark."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HOSTILE = 'evil"name\\ */ ??= \n#include <x> ); system("rm -rf /"); //'


def _w(name, shape, value=None):
    arr = np.asarray(value if value is not None else np.random.default_rng(0).standard_normal(shape),
                     dtype=np.float32).reshape(shape)
    return numpy_helper.from_array(arr, name)


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


def all_kinds_model(path, opset=13):
    """One graph with a node of every layer kind benanza benchmarks (batch dim symbolic 'N')."""
    nodes, inits = [], []
    inits += [_w("w1", (16, 3, 3, 3)), _w("b1", (16,))]
    nodes.append(helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name=HOSTILE, pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"], name="relu1"))                       # fusion
    inits += [_w("w2", (16, 1, 3, 3))]
    nodes.append(helper.make_node("Conv", ["r1", "w2"], ["c2"], name="depthwise", group=16,
                                  pads=[0, 0, 1, 1], strides=[2, 2]))                           # asym pads
    inits += [_w("w3", (16, 16, 3, 3))]
    nodes.append(helper.make_node("Conv", ["c2", "w3"], ["c3"], name="dilated", dilations=[2, 2],
                                  auto_pad="SAME_UPPER"))
    inits += [_w("s", (16,)), _w("bb", (16,)), _w("m", (16,)), _w("v", (16,), np.ones(16))]
    nodes.append(helper.make_node("BatchNormalization", ["c3", "s", "bb", "m", "v"], ["bn"], name="bn"))
    nodes.append(helper.make_node("LeakyRelu", ["bn"], ["lr"], name="leaky", alpha=0.1))
    nodes.append(helper.make_node("Sigmoid", ["lr"], ["sg"], name="sig"))
    nodes.append(helper.make_node("Tanh", ["sg"], ["th"], name="tanh"))
    inits += [_w("lo", (), 0.0), _w("hi", (), 6.0)]
    nodes.append(helper.make_node("Clip", ["th", "lo", "hi"], ["cl"], name="relu6"))
    nodes.append(helper.make_node("HardSigmoid", ["cl"], ["hs"], name="hsig"))
    nodes.append(helper.make_node("LRN", ["hs"], ["lrn"], name="lrn", size=5))
    nodes.append(helper.make_node("MaxPool", ["lrn"], ["mp"], name="pool_ceil", kernel_shape=[3, 3],
                                  strides=[2, 2], ceil_mode=1))
    nodes.append(helper.make_node("AveragePool", ["mp"], ["ap"], name="avg", kernel_shape=[2, 2],
                                  pads=[1, 1, 1, 1], count_include_pad=1))
    inits += [_w("chan", (1, 16, 1, 1))]
    nodes.append(helper.make_node("Sub", ["ap", "chan"], ["sub"], name="sub_bcast"))
    nodes.append(helper.make_node("Div", ["chan", "sub"], ["div"], name="div_bcast_a"))
    nodes.append(helper.make_node("Add", ["div", "sub"], ["add"], name="add_full"))
    inits += [_i64("pads", [0, 0, 1, 1, 0, 0, 1, 1])]
    nodes.append(helper.make_node("Pad", ["add", "pads"], ["pad"], name="pad"))
    nodes.append(helper.make_node("Transpose", ["pad"], ["tr"], name="transpose", perm=[0, 2, 3, 1]))
    nodes.append(helper.make_node("Transpose", ["tr"], ["tr2"], name="transpose_back", perm=[0, 3, 1, 2]))
    inits += [_i64("st", [0]), _i64("en", [8]), _i64("ax", [1])]
    nodes.append(helper.make_node("Slice", ["tr2", "st", "en", "ax"], ["sl"], name="slice"))
    nodes.append(helper.make_node("Concat", ["sl", "sl"], ["cat"], name="concat", axis=1))
    nodes.append(helper.make_node("Dropout", ["cat"], ["dr_inf"], name="dropout_inference"))
    inits += [_w("ratio", (), 0.25), numpy_helper.from_array(np.array(True), "train")]
    nodes.append(helper.make_node("Dropout", ["dr_inf", "ratio", "train"], ["dr"], name="dropout_training"))
    nodes.append(helper.make_node("ReduceMean", ["dr"], ["rm"], name="reduce", axes=[2, 3], keepdims=1))
    nodes.append(helper.make_node("Flatten", ["rm"], ["fl"], name="flatten"))
    inits += [_w("fcw", (10, 16)), _w("fcb", (10,))]
    nodes.append(helper.make_node("Gemm", ["fl", "fcw", "fcb"], ["fc"], name="fc", transB=1))
    inits += [_w("mw", (10, 12))]
    nodes.append(helper.make_node("MatMul", ["fc", "mw"], ["mm"], name="matmul"))
    nodes.append(helper.make_node("Softmax", ["mm"], ["sm"], name="softmax", axis=-1))
    inits += [_i64("shape3", [-1, 3, 4])]
    nodes.append(helper.make_node("Reshape", ["sm", "shape3"], ["r3"], name="reshape"))
    nodes.append(helper.make_node("Transpose", ["r3"], ["r3t"], name="t3", perm=[0, 2, 1]))
    nodes.append(helper.make_node("MatMul", ["r3", "r3t"], ["bmm"], name="batched_matmul"))
    nodes.append(helper.make_node("Sigmoid", ["bmm"], ["y"], name="out"))
    graph = helper.make_graph(nodes, "all_kinds",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def nothing_to_benchmark_model(path):
    """Only zero-cost ops: Identity, Reshape, Flatten."""
    nodes = [helper.make_node("Identity", ["x"], ["a"], name="id"),
             helper.make_node("Flatten", ["a"], ["y"], name="flat")]
    graph = helper.make_graph(nodes, "nothing", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def rnn_model(path, op="GRU", seq=7, input_size=24, hidden=32, direction="bidirectional", layout=0,
              linear_before_reset=1, bias=True, name=HOSTILE, opset=14, **attrs):
    """One recurrent node (GRU or LSTM) on a symbolic batch 'N' (layout 0: X is [seq, N, input];
    layout 1: [N, seq, input]), weights inline; its Y feeds a Sigmoid so the graph has a consumer."""
    num_dir = 2 if direction == "bidirectional" else 1
    gates = 3 if op == "GRU" else 4
    inits = [_w("W", (num_dir, gates * hidden, input_size)), _w("R", (num_dir, gates * hidden, hidden))]
    ins = ["x", "W", "R"]
    if bias:
        inits.append(_w("B", (num_dir, 2 * gates * hidden)))
        ins.append("B")
    if op == "GRU":
        attrs["linear_before_reset"] = linear_before_reset
    if opset >= 14:
        attrs["layout"] = layout
    node = helper.make_node(op, ins, ["y", "y_h"], name=name, hidden_size=hidden, direction=direction, **attrs)
    x = [seq, "N", input_size] if layout == 0 else ["N", seq, input_size]
    y_shape = [seq, num_dir, "N", hidden] if layout == 0 else ["N", seq, num_dir, hidden]
    graph = helper.make_graph([node, helper.make_node("Sigmoid", ["y"], ["out"], name="after")], "rnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, y_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def gemm_rnn_model(path, opset=13):
    """The GEMM and recurrent kinds with hostile node names: an LSTM (seq 12, input 32, hidden 48)
    whose Y is squeezed, a bidirectional GRU with ONNX's default linear_before_reset=0, Gemms with
    a bias vector (transB, the fully connected layer) and with a C that is not one, and a batched
    MatMul; symbolic batch 'N'."""
    nodes, inits = [], []
    inits += [_w("lw", (1, 4 * 48, 32)), _w("lr", (1, 4 * 48, 48)), _w("lb", (1, 8 * 48))]
    nodes.append(helper.make_node("LSTM", ["x", "lw", "lr", "lb"], ["l_y"], name=HOSTILE, hidden_size=48))
    inits += [_i64("ax1", [1])]
    nodes.append(helper.make_node("Squeeze", ["l_y", "ax1"], ["l_s"], name="squeeze"))
    inits += [_w("gw", (2, 3 * 32, 48)), _w("gr", (2, 3 * 32, 32)), _w("gb", (2, 6 * 32))]
    nodes.append(helper.make_node("GRU", ["l_s", "gw", "gr", "gb"], ["g_y"], name='gru"*/', hidden_size=32,
                                  direction="bidirectional"))
    nodes.append(helper.make_node("Transpose", ["g_y"], ["g_t"], name="to_batch", perm=[0, 2, 1, 3]))
    inits += [_i64("flat", [-1, 64])]
    nodes.append(helper.make_node("Reshape", ["g_t", "flat"], ["g_f"], name="flatten"))
    inits += [_w("fw", (48, 64)), _w("fb", (48,))]
    nodes.append(helper.make_node("Gemm", ["g_f", "fw", "fb"], ["fc"], name="fc_bias_vector", transB=1))
    inits += [_w("f2", (48, 48)), _w("c1", (1,), [0.5])]
    nodes.append(helper.make_node("Gemm", ["fc", "f2", "c1"], ["fc2"], name="fc_scalar_c"))
    inits += [_i64("seq3", [12, -1, 48])]
    nodes.append(helper.make_node("Reshape", ["fc2", "seq3"], ["r3"], name="unflatten"))
    inits += [_w("bw", (12, 48, 16))]
    nodes.append(helper.make_node("MatMul", ["r3", "bw"], ["y"], name="batched"))
    graph = helper.make_graph(nodes, "gemm_rnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [12, "N", 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [12, "N", 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
