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


# ------------------------------------------------------------------- transformer graphs (issue 4)

def _f32(name, value):
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def _layernorm(nodes, inits, x, prefix, hidden, decomposed, opset):
    """LayerNormalization (opset >= 17) or the ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add chain
    torch.onnx.export (TorchScript) writes for nn.LayerNorm before opset 17."""
    w, b = f"{prefix}.weight", f"{prefix}.bias"
    inits += [_w(w, (hidden,)), _w(b, (hidden,))]
    out = f"{prefix}/out"
    if not decomposed:
        nodes.append(helper.make_node("LayerNormalization", [x, w, b], [out], name=f"/{prefix}/LayerNormalization",
                                      axis=-1, epsilon=1e-12))
        return out
    p = f"/{prefix}/"
    inits += [_f32(f"{prefix}.two", 2.0), _f32(f"{prefix}.eps", 1e-12)]
    if opset >= 18:
        inits.append(_i64(f"{prefix}.axes", [-1]))
        rm = lambda i, o, n: helper.make_node("ReduceMean", [i, f"{prefix}.axes"], [o], name=n)  # noqa: E731
    else:
        rm = lambda i, o, n: helper.make_node("ReduceMean", [i], [o], name=n, axes=[-1])  # noqa: E731
    nodes += [
        rm(x, p + "mean", p + "ReduceMean"),
        helper.make_node("Sub", [x, p + "mean"], [p + "d"], name=p + "Sub"),
        helper.make_node("Pow", [p + "d", f"{prefix}.two"], [p + "sq"], name=p + "Pow"),
        rm(p + "sq", p + "var", p + "ReduceMean_1"),
        helper.make_node("Add", [p + "var", f"{prefix}.eps"], [p + "ve"], name=p + "Add"),
        helper.make_node("Sqrt", [p + "ve"], [p + "std"], name=p + "Sqrt"),
        helper.make_node("Div", [p + "d", p + "std"], [p + "n"], name=p + "Div"),
        helper.make_node("Mul", [p + "n", w], [p + "s"], name=p + "Mul"),
        helper.make_node("Add", [p + "s", b], [out], name=p + "Add_1"),
    ]
    return out


def _linear(nodes, inits, x, prefix, n_in, n_out):
    """MatMul by the transposed weight + Add(bias, .), as torch.onnx.export writes nn.Linear on 3-D input."""
    inits += [_w(f"{prefix}.weight_t", (n_in, n_out)), _w(f"{prefix}.bias", (n_out,))]
    p = f"/{prefix}/"
    nodes += [helper.make_node("MatMul", [x, f"{prefix}.weight_t"], [p + "mm"], name=p + "MatMul"),
              helper.make_node("Add", [f"{prefix}.bias", p + "mm"], [p + "out"], name=p + "Add")]
    return p + "out"


def bert_encoder_model(path, opset=14, layers=2, hidden=64, heads=4, intermediate=256, vocab=100, max_pos=64,
                       gelu="erf", hostile=False):
    """A HuggingFace-BERT-style encoder as torch.onnx.export (TorchScript exporter) writes BertModel
    with eager attention (checked against a real export of the same architecture with torch 2.13):
    inputs input_ids / attention_mask / token_type_ids (int64, [batch, seq] symbolic); the extended
    mask Unsqueeze/Unsqueeze/Cast/Sub(1, m)/Mul(min); word and token-type embedding Gathers (data
    indices), the position embedding Gather of a constant slice (folded); LayerNorm decomposed before
    opset 17; per layer Q/K/V MatMul+Add, Reshape (0, 0, heads, d) + Transpose (0,2,1,3), K as
    Transpose (0,2,3,1), MatMul -> Div(sqrt d) -> Add(mask) -> Softmax -> MatMul, Transpose back,
    Reshape, output projection, residual Add, LayerNorm; the FFN with erf-GELU (Div(sqrt 2)/Erf/
    Add 1/Mul x/Mul 0.5) or the opset-20 Gelu op (gelu="op"); the pooler: Gather(index 0, axis 1)
    -> Gemm(transB) -> Tanh."""
    d = hidden // heads
    nodes, inits = [], []
    decomposed = opset < 17
    # extended attention mask
    inits += [_i64("ax1", [1]), _i64("ax2", [2]), _f32("one", 1.0), _f32("fmin", np.finfo(np.float32).min)]
    nodes += [helper.make_node("Unsqueeze", ["attention_mask", "ax1"], ["/m1"], name="/Unsqueeze"),
              helper.make_node("Unsqueeze", ["/m1", "ax2"], ["/m2"], name="/Unsqueeze_1"),
              helper.make_node("Cast", ["/m2"], ["/mf"], name=HOSTILE if hostile else "/Cast", to=TensorProto.FLOAT),
              helper.make_node("Sub", ["one", "/mf"], ["/inv"], name="/Sub"),
              helper.make_node("Mul", ["/inv", "fmin"], ["mask"], name="/Mul")]
    # embeddings
    inits += [_w("emb.word", (vocab, hidden)), _w("emb.tok", (2, hidden)), _w("emb.pos", (max_pos, hidden)),
              _i64("position_ids", np.arange(max_pos).reshape(1, max_pos)), _i64("zero1", [0]), _i64("idx1", 1)]
    nodes += [helper.make_node("Shape", ["input_ids"], ["/emb/shape"], name="/emb/Shape"),
              helper.make_node("Gather", ["/emb/shape", "idx1"], ["/emb/seq"], name="/emb/Gather", axis=0),
              helper.make_node("Unsqueeze", ["/emb/seq", "zero1"], ["/emb/seq1"], name="/emb/Unsqueeze"),
              helper.make_node("Slice", ["position_ids", "zero1", "/emb/seq1", "ax1"], ["/emb/pos_ids"],
                               name="/emb/Slice"),
              helper.make_node("Gather", ["emb.word", "input_ids"], ["/emb/w"], name="/emb/word/Gather"),
              helper.make_node("Gather", ["emb.tok", "token_type_ids"], ["/emb/t"], name="/emb/tok/Gather"),
              helper.make_node("Add", ["/emb/w", "/emb/t"], ["/emb/wt"], name="/emb/Add"),
              helper.make_node("Gather", ["emb.pos", "/emb/pos_ids"], ["/emb/p"], name="/emb/pos/Gather"),
              helper.make_node("Add", ["/emb/wt", "/emb/p"], ["/emb/sum"], name="/emb/Add_1")]
    x = _layernorm(nodes, inits, "/emb/sum", "emb.ln", hidden, decomposed, opset)
    inits += [_i64("heads_shape", [0, 0, heads, d]), _i64("merge_shape", [0, 0, hidden]),
              _f32("sqrt_d", np.sqrt(d)), _f32("sqrt2", np.sqrt(2.0)), _f32("half", 0.5)]
    for i in range(layers):
        L_ = f"layers.{i}"
        p = f"/{L_}/att/"
        q = _linear(nodes, inits, x, f"{L_}.att.q", hidden, hidden)
        k = _linear(nodes, inits, x, f"{L_}.att.k", hidden, hidden)
        v = _linear(nodes, inits, x, f"{L_}.att.v", hidden, hidden)
        nodes += [
            helper.make_node("Reshape", [q, "heads_shape"], [p + "q4"], name=p + "Reshape"),
            helper.make_node("Transpose", [p + "q4"], [p + "qh"], name=p + "Transpose", perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [k, "heads_shape"], [p + "k4"], name=p + "Reshape_1"),
            helper.make_node("Reshape", [v, "heads_shape"], [p + "v4"], name=p + "Reshape_2"),
            helper.make_node("Transpose", [p + "v4"], [p + "vh"], name=p + "Transpose_1", perm=[0, 2, 1, 3]),
            helper.make_node("Transpose", [p + "k4"], [p + "kt"], name=p + "Transpose_2", perm=[0, 2, 3, 1]),
            helper.make_node("MatMul", [p + "qh", p + "kt"], [p + "sc"], name=p + "MatMul"),
            helper.make_node("Div", [p + "sc", "sqrt_d"], [p + "scd"], name=p + "Div"),
            helper.make_node("Add", [p + "scd", "mask"], [p + "scm"], name=p + "Add"),
            helper.make_node("Softmax", [p + "scm"], [p + "pr"], name=p + "Softmax", axis=-1),
            helper.make_node("MatMul", [p + "pr", p + "vh"], [p + "ctx"], name=p + "MatMul_1"),
            helper.make_node("Transpose", [p + "ctx"], [p + "ctxt"], name=p + "Transpose_3", perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", [p + "ctxt", "merge_shape"], [p + "merged"], name=p + "Reshape_3"),
        ]
        ao = _linear(nodes, inits, p + "merged", f"{L_}.ao", hidden, hidden)
        nodes.append(helper.make_node("Add", [ao, x], [f"/{L_}/res1"], name=f"/{L_}/Add"))
        a = _layernorm(nodes, inits, f"/{L_}/res1", f"{L_}.aln", hidden, decomposed, opset)
        h = _linear(nodes, inits, a, f"{L_}.inter", hidden, intermediate)
        g = f"/{L_}/"
        if gelu == "op":
            nodes.append(helper.make_node("Gelu", [h], [g + "gelu"], name=g + "Gelu"))
        else:
            nodes += [helper.make_node("Div", [h, "sqrt2"], [g + "hd"], name=g + "Div"),
                      helper.make_node("Erf", [g + "hd"], [g + "erf"], name=g + "Erf"),
                      helper.make_node("Add", [g + "erf", "one"], [g + "erf1"], name=g + "Add_1"),
                      helper.make_node("Mul", [h, g + "erf1"], [g + "xe"], name=g + "Mul"),
                      helper.make_node("Mul", [g + "xe", "half"], [g + "gelu"], name=g + "Mul_1")]
        o = _linear(nodes, inits, g + "gelu", f"{L_}.out", intermediate, hidden)
        nodes.append(helper.make_node("Add", [o, a], [g + "res2"], name=g + "Add_2"))
        x = _layernorm(nodes, inits, g + "res2", f"{L_}.oln", hidden, decomposed, opset)
    inits += [_i64("idx0", 0), _w("pool.weight", (hidden, hidden)), _w("pool.bias", (hidden,))]
    nodes += [helper.make_node("Gather", [x, "idx0"], ["/cls"], name="/Gather", axis=1),
              helper.make_node("Gemm", ["/cls", "pool.weight", "pool.bias"], ["/pool"], name="/pool/Gemm", transB=1),
              helper.make_node("Tanh", ["/pool"], ["pooler_output"], name="/Tanh")]
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
           for n in ("input_ids", "attention_mask", "token_type_ids")]
    outs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "seq", hidden]),
            helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", hidden])]
    graph = helper.make_graph(nodes, "bert_encoder", ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path





def transformer_ops_model(path, opset=20):
    """Every transformer layer kind with hostile node names, fixed shapes [2, 8, 32]: Gelu (tanh),
    LayerNormalization without bias and with its Mean/InvStdDev outputs used, Exp/Log/Sqrt/
    Reciprocal/Neg/Abs/Pow(0.5), Cast from bool, Where with broadcasting, an embedding Gather of
    int32 indices, a constant multi-index Gather, and a causal attention (constant triangular mask)
    with torch's SDPA decomposition (Q and K^T each scaled by sqrt(scale), K^T a Transpose of K)."""
    nodes, inits = [], []
    B, S, H = 2, 8, 32
    inits += [_w("ln.w", (H,)), _w("emb", (50, H)), _f32("p", 0.5), _f32("s", 0.25 ** 0.5)]
    tri = np.triu(np.full((S, S), -np.inf, dtype=np.float32), 1).reshape(1, S, S)
    inits += [numpy_helper.from_array(tri, "causal"), _i64("pick", [0, 3, 5])]
    nodes += [
        helper.make_node("Gather", ["emb", "ids"], ["e"], name=HOSTILE + "gather"),
        helper.make_node("Add", ["x", "e"], ["xe"], name="add"),
        helper.make_node("LayerNormalization", ["xe", "ln.w"], ["ln", "ln_mean", "ln_rstd"], name=HOSTILE + "ln",
                         axis=-1, epsilon=1e-5),
        helper.make_node("Gelu", ["ln"], ["g"], name=HOSTILE + "gelu", approximate="tanh"),
        helper.make_node("Exp", ["g"], ["ex"], name="exp"),
        helper.make_node("Log", ["ex"], ["lg"], name="log"),
        helper.make_node("Abs", ["lg"], ["ab"], name="abs"),
        helper.make_node("Sqrt", ["ab"], ["sq"], name="sqrt"),
        helper.make_node("Pow", ["sq", "p"], ["pw"], name="pow"),
        helper.make_node("Reciprocal", ["pw"], ["rc"], name="reciprocal"),
        helper.make_node("Neg", ["rc"], ["ng"], name="neg"),
        helper.make_node("Cast", ["keep"], ["keepf"], name=HOSTILE + "cast", to=TensorProto.FLOAT),
        helper.make_node("Where", ["keep", "ng", "ln"], ["w"], name=HOSTILE + "where"),
        helper.make_node("Mul", ["w", "keepf"], ["wk"], name="mul_keep"),
        # causal attention on [B, S, H] (one head), scale 0.25 split over Q and K^T as torch does
        helper.make_node("Transpose", ["wk"], ["kt"], name="k_transpose", perm=[0, 2, 1]),
        helper.make_node("Mul", ["wk", "s"], ["qs"], name="q_scale"),
        helper.make_node("Mul", ["kt", "s"], ["ks"], name="k_scale"),
        helper.make_node("MatMul", ["qs", "ks"], ["sc"], name=HOSTILE + "qk"),
        helper.make_node("Add", ["sc", "causal"], ["scm"], name="causal_mask"),
        helper.make_node("Softmax", ["scm"], ["pr"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["pr", "ln"], ["att"], name="pv"),
        helper.make_node("Gather", ["att", "pick"], ["y"], name="select_rows", axis=1),
    ]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, H]),
           helper.make_tensor_value_info("ids", TensorProto.INT32, [B, S]),
           helper.make_tensor_value_info("keep", TensorProto.BOOL, [B, 1, H])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, 3, H]),
            helper.make_tensor_value_info("ln_mean", TensorProto.FLOAT, [B, S, 1]),
            helper.make_tensor_value_info("ln_rstd", TensorProto.FLOAT, [B, S, 1])]
    graph = helper.make_graph(nodes, "transformer_ops", ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def mlp_model(path, opset=20):
    """GEMM -> activation fusion candidates (GemmAct), hostile node names, input [N, 32]: Gemm with
    a bias vector -> Relu; MatMul -> Add(bias) -> Gelu(tanh); MatMul -> Add(bias, .) -> the
    decomposed erf-GELU (Div sqrt 2, Erf, Add 1, Mul x, Mul 0.5); then a MatMul -> Relu without bias
    whose output is also a graph output (no candidate: another reader)."""
    nodes, inits = [], []
    inits += [_w("w1", (64, 32)), _w("b1", (64,)), _w("w2", (64, 48)), _w("b2", (48,)), _w("w3", (48, 40)),
              _w("b3", (40,)), _f32("sqrt2", 2 ** 0.5), _f32("one", 1.0), _f32("half", 0.5), _w("w4", (40, 8))]
    nodes += [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["fc1"], name=HOSTILE + "fc1", transB=1),
        helper.make_node("Relu", ["fc1"], ["h1"], name=HOSTILE + "relu"),
        helper.make_node("MatMul", ["h1", "w2"], ["mm2"], name="mm2"),
        helper.make_node("Add", ["mm2", "b2"], ["a2"], name=HOSTILE + "bias2"),
        helper.make_node("Gelu", ["a2"], ["h2"], name="gelu_tanh", approximate="tanh"),
        helper.make_node("MatMul", ["h2", "w3"], ["mm3"], name="mm3"),
        helper.make_node("Add", ["b3", "mm3"], ["a3"], name="bias3"),
        helper.make_node("Div", ["a3", "sqrt2"], ["d3"], name="div"),
        helper.make_node("Erf", ["d3"], ["e3"], name="erf"),
        helper.make_node("Add", ["e3", "one"], ["e31"], name="add1"),
        helper.make_node("Mul", ["a3", "e31"], ["m3"], name="mul"),
        helper.make_node("Mul", ["m3", "half"], ["h3"], name="mul_half"),
        helper.make_node("MatMul", ["h3", "w4"], ["mm4"], name="mm4"),
        helper.make_node("Relu", ["mm4"], ["y"], name="relu4"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8]),
                               helper.make_tensor_value_info("mm4", TensorProto.FLOAT, ["N", 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def elementwise_ops_model(path, opset=18):
    """Every elementwise operator ONNX defines beyond the ones the first models covered, one node
    each (hostile names on a few), on [N, 4, 8] tensors: float x, bool m and m2, int64 k and k2,
    uint8 u and u2, a broadcast float s [1, 4, 1] and a row r [8]; unary ops with their attributes,
    IsNaN/IsInf (bool out), Not, BitwiseNot and integer Abs/Sign, binary ops with one operand or both
    broadcast, Mod both ways, BitShift both ways, 2-input Sum/Mean/Max/Min, Pow with a tensor exponent,
    Clip other than Clip(0, max), Cast to bool, to an integer type and from uint8, CastLike."""
    nodes, outs = [], []
    floats = ["Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Floor", "HardSwish", "Mish",
              "Round", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Tan", "IsNaN"]
    attrs = {"Selu": {"alpha": 2.0, "gamma": 3.0}, "Celu": {"alpha": 0.5}, "ThresholdedRelu": {"alpha": 0.7},
             "Shrink": {"bias": 0.1, "lambd": 0.3}, "IsInf": {"detect_positive": 0}}
    for op in floats + list(attrs):
        nodes.append(helper.make_node(op, ["x"], [f"o_{op}"], name=(HOSTILE if op == "Mish" else "") + op,
                                      **attrs.get(op, {})))
    typed = [("Not", ["m"]), ("BitwiseNot", ["k"]), ("Abs", ["k"]), ("Sign", ["u"]), ("Neg", ["k"]),
             ("Clip", ["x", "lo", "hi"]), ("Clip", ["col", "", "hi"]), ("CastLike", ["x", "m"])]
    nodes += [helper.make_node("Cast", ["x"], ["o_Cast_bool"], name="Cast_bool", to=TensorProto.BOOL),
              helper.make_node("Cast", ["k"], ["o_Cast_int32"], name="Cast_int32", to=TensorProto.INT32),
              helper.make_node("Cast", ["u"], ["o_Cast_fp16"], name="Cast_fp16", to=TensorProto.FLOAT16)]
    binary = [("Pow", ["x", "x2"], {}), ("PRelu", ["x", "slope"], {}), ("Equal", ["x", "s"], {}),
              ("Less", ["x", "s"], {}), ("LessOrEqual", ["s", "x"], {}), ("Greater", ["x", "r"], {}),
              ("GreaterOrEqual", ["col", "r"], {}), ("And", ["m", "m2"], {}), ("Or", ["m", "m2"], {}),
              ("Xor", ["m", "m2"], {}), ("BitwiseAnd", ["k", "k2"], {}), ("BitwiseOr", ["k", "k2"], {}),
              ("BitwiseXor", ["k", "k2"], {}), ("Sum", ["x", "s"], {}), ("Mean", ["x", "s"], {}),
              ("Max", ["col", "r"], {}), ("Min", ["x", "x2"], {}), ("Mod", ["k", "k2"], {}),
              ("Mod", ["x", "x2"], {"fmod": 1}), ("BitShift", ["u", "u2"], {"direction": "LEFT"}),
              ("BitShift", ["u", "u2"], {"direction": "RIGHT"}), ("Add", ["k", "k2"], {}), ("Equal", ["k", "k2"], {}),
              ("Equal", ["m", "m2"], {}), ("Div", ["x", "x2"], {})]
    for op, ins in typed:
        nodes.append(helper.make_node(op, ins, [f"o_{op}_{ins[0]}"], name=f"{op}_{ins[0]}"))
    for i, (op, ins, at) in enumerate(binary):
        nodes.append(helper.make_node(op, ins, [f"b{i}"], name=(HOSTILE if op == "Xor" else "") + f"{op}{i}", **at))
    vi = helper.make_tensor_value_info
    inits = [_w("s", (1, 4, 1)), _w("r", (8,)), _w("slope", (4, 1)),  # constants: a per-row, a per-column operand
             _w("lo", (), -1.0), _w("hi", (), 1.0)]  # Clip's bounds
    ins = [vi("x", TensorProto.FLOAT, ["N", 4, 8]), vi("x2", TensorProto.FLOAT, ["N", 4, 8]),
           vi("col", TensorProto.FLOAT, ["N", 4, 1]), vi("m", TensorProto.BOOL, ["N", 4, 8]),
           vi("m2", TensorProto.BOOL, ["N", 4, 8]), vi("k", TensorProto.INT64, ["N", 4, 8]),
           vi("k2", TensorProto.INT64, ["N", 4, 8]), vi("u", TensorProto.UINT8, ["N", 4, 8]),
           vi("u2", TensorProto.UINT8, ["N", 4, 8])]
    outs = [helper.make_empty_tensor_value_info(o) for n in nodes for o in n.output]
    graph = helper.make_graph(nodes, "elementwise_ops", ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    model = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    model.graph.output.extend(model.graph.value_info)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def strip_weights(model, keep_elements=64):
    """Drop the data of every initializer with more than ``keep_elements`` elements (benanza reads
    shapes, never weights: ``model._weights_as_inputs`` turns them into typed graph inputs); small
    constants that shape folding needs stay. Returns the model (changed in place)."""
    for t in model.graph.initializer:
        if t.dims and int(np.prod(t.dims)) > keep_elements:
            for f in ("raw_data", "float_data", "int32_data", "int64_data", "double_data"):
                t.ClearField(f)
            t.data_location = TensorProto.EXTERNAL
            del t.external_data[:]
            e = t.external_data.add()
            e.key, e.value = "location", "weights-not-kept.bin"
    return model


def mobilenet_v3_large_export(batch=1):
    """torchvision's mobilenet_v3_large (random weights) exported by torch.onnx (TorchScript
    exporter, opset 17, dynamic batch 'N'), weights stripped: how tests/data/mobilenet_v3_large.onnx
    was made. Needs torch and torchvision."""
    import io

    import torch
    import torchvision

    m = torchvision.models.mobilenet_v3_large(weights=None).eval()
    buf = io.BytesIO()
    torch.onnx.export(m, torch.randn(batch, 3, 224, 224), buf, opset_version=17, dynamo=False, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    return strip_weights(onnx.load_from_string(buf.getvalue()))
