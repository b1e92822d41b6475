"""An ONNX LSTM / GRU in a training step (issue 26): the RNNTrain kind (the training-mode
cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8) as the RNN kind's backward.
The zoo's lstm_lm planned with no layer left without a backward; configs from real ONNX nodes (keys,
describe, shapes, FLOPs and minimum bytes by arithmetic); the PyTorch candidates built against a
recorder (nothing runs here); the generated suite renders and passes g++ -fsyntax-only; one slow
build of an LSTM + GRU + Where model's training suite proves it compiles and links."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
import pytest
from torch_recorder import Recorder as Rec
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.framework import Ctx, NotSupported
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from onnx_builders import HOSTILE, rnn_model

LSTM_LM = REPO / "tests" / "data" / "zoo" / "models" / "lstm_lm.onnx"
CALLS = ("forward", "backward_data", "backward_weight")


def test_lstm_lm_has_every_backward():
    """lstm_lm at batch 32 (Gather embedding -> 2 LSTM(1024 -> 1024, seq 35) -> decoder): no layer
    left without a backward; each LSTM's training forward replaces its inference call, and its data
    and weight gradients are RNNTrain calls of the same parameters."""
    ml = process(LSTM_LM, 32)
    plan = training_plan(ml)
    assert plan.no_backward == []
    lstms = [ly for ly in ml.layers if ly.op_type == "LSTM"]
    assert len(lstms) == 2
    for ly in lstms:
        calls = [(c.phase, c.config) for c in plan.calls if c.layer == ly.index]
        assert calls == [(p, L.RNNTrainConfig.of(ly.config, p)) for p in CALLS]
        assert [c.config.call for c in plan.train_forward()[ly.index]] == ["forward"]
    cfg = lstms[0].config
    assert (cfg.cell, cfg.seq_len, cfg.batch, cfg.input_size, cfg.hidden_size) == ("lstm", 35, 32, 1024, 1024)
    # 2 * seq * batch * gates * hidden * (input + hidden), each call the forward's GEMMs transposed
    for p in CALLS:
        assert L.RNNTrainConfig.of(cfg, p).flops() == 2 * 35 * 32 * 4 * 1024 * 2048 == cfg.flops()


def test_configs_of_a_real_gru_node(tmp_path):
    """A bidirectional batch-major GRU (W (2, 96, 24), R (2, 96, 32), B (2, 192)) at batch 5: the
    three calls' shapes, keys, describe(), the weight count of its initializers, the parameters that
    rebuild it, and the minimum bytes of each call."""
    ml = process(rnn_model(tmp_path / "gru.onnx", op="GRU", layout=1), 5)
    fwd = ml.layers[0].config
    assert isinstance(fwd, L.RNNConfig) and fwd.layout == "batch_major" and fwd.direction == "bidirectional"
    cfgs = {p: L.RNNTrainConfig.of(fwd, p) for p in CALLS}
    x, y = (5, 7, 24), (5, 7, 2, 32)
    assert cfgs["forward"].input_shapes() == [x] and cfgs["forward"].output_shape() == y
    assert cfgs["backward_data"].input_shapes() == [y, y] and cfgs["backward_data"].output_shape() == x
    w = 2 * 96 * 24 + 2 * 96 * 32 + 2 * 192  # W, R and B as the node's initializers hold them
    assert cfgs["backward_weight"].weight_count == w
    assert cfgs["backward_weight"].input_shapes() == [x, y] and cfgs["backward_weight"].output_shape() == (w,)
    assert cfgs["forward"].forward == fwd
    # kept where the input needs no gradient: the weight gradient needs it (and GRU's x is the
    # model's input here)
    assert [c.computes_weight_gradients for c in cfgs.values()] == [False, True, False]
    plan = training_plan(ml)
    assert plan.data_not_needed == [0]
    assert [c.phase for c in plan.calls if c.layer == 0] == list(CALLS)
    assert len({c.key for c in cfgs.values()} | {fwd.key}) == 4
    assert all(c.key.startswith("rnntrain-") for c in cfgs.values())
    assert [c.describe() for c in cfgs.values()] == [
        f"RNNTrain({w_} GRU seq7 b5 in24 h32 bidir batch-major)" for w_ in ("fwd-train", "bwd-data", "bwd-weights")]
    for c in cfgs.values():
        assert L.config_from_params("RNNTrain", c.params()) == c
    nx, ny = 5 * 7 * 24, 5 * 7 * 2 * 32
    # fp16: 2 bytes an element; forward x + weights read, y written; data dy + weights read, dx
    # written; weights x + y read, the weight gradient read and written (CUDNN_WGRAD_MODE_ADD)
    assert min_bytes(cfgs["forward"], "fp16") == 2 * (nx + w) + 2 * ny
    assert min_bytes(cfgs["backward_data"], "fp16") == 2 * (ny + w) + 2 * nx
    assert min_bytes(cfgs["backward_weight"], "fp16") == 2 * (nx + ny + w) + 2 * w
    assert min_bytes(cfgs["forward"], "fp32") == 4 * (nx + w) + 4 * ny
    with pytest.raises(ValueError):
        L.RNNTrainConfig.of(fwd, "optimizer")


def test_the_pytorch_candidates_are_the_cudnn_rnn_ops():
    """On a CUDA device aten::_cudnn_rnn(train=True) for the forward and aten::_cudnn_rnn_backward on
    the set-up forward's output and reserve, with output mask (dx, dhx, dcx) or (dw) only; elsewhere
    the module's training forward, and NotSupported for a gradient (built against a recorder)."""
    calls = []

    class Cuda:
        type = "cuda"

    fwd = L.RNNConfig(cell="lstm", seq_len=35, input_size=64, hidden_size=128, batch=4)
    for call, op, mask in (("forward", "_cudnn_rnn", None),
                           ("backward_data", "_cudnn_rnn_backward", [True, True, True, False]),
                           ("backward_weight", "_cudnn_rnn_backward", [False, False, False, True])):
        cfg = L.RNNTrainConfig.of(fwd, call)
        calls.clear()
        cand = L.REGISTRY["RNNTrain"].torch(Ctx(cfg, Rec(calls), Cuda(), Rec(calls), False))
        assert cand.call == f"torch:aten::{op}" and cand.out_numel == np.prod(cfg.output_shape())
        set_up = [a for name, a in calls if name == "ops.aten._cudnn_rnn"]
        assert len(set_up) == 1 and set_up[0][3] is None  # the weight buffer made by the first forward
        # mode CUDNN_LSTM, hidden, proj_size 0, 1 layer, seq-major, no dropout, train, unidirectional
        assert set_up[0][6:15] == (2, 128, 0, 1, False, 0.0, True, False, [])
        calls.clear()
        cand.fn()
        name, args = next((n, a) for n, a in calls if n.startswith("ops.aten."))
        assert name == f"ops.aten.{op}"
        if mask is not None:
            assert args[21] == mask and args[16] is True
        assert ("includes" in cand.note) == (call == "backward_weight")
    cpu = L.REGISTRY["RNNTrain"].torch(Ctx(L.RNNTrainConfig.of(fwd, "forward"), Rec(calls), Rec(calls), Rec(calls), False))
    assert cpu.call == "torch:aten::lstm" and cpu.algorithm == "train"
    with pytest.raises(NotSupported):
        L.REGISTRY["RNNTrain"].torch(Ctx(L.RNNTrainConfig.of(fwd, "backward_data"), Rec(calls), Rec(calls), Rec(calls), False))


def _suite(tmp_path):
    gru = process(rnn_model(tmp_path / "gru.onnx", op="GRU", layout=1), 5)
    lstm = process(_lstm_where_model(tmp_path / "lstm.onnx"), 3)
    return generate([gru, lstm], ["fp32", "fp16"], tmp_path / "s", train=True)


def test_the_generated_suite_has_every_call(tmp_path):
    """Both layers' three calls in fp32 and fp16: the GRU reads the model's input, whose gradient
    nobody needs, yet its data gradient stays (the weight gradient reads what it leaves in the
    reserve space)."""
    suite = _suite(tmp_path)
    jobs = [j for j in suite.jobs if j.kind == "RNNTrain"]
    assert sorted((j.config.cell, j.config.call) for j in jobs if j.precision == "fp16") == [
        ("gru", "backward_data"), ("gru", "backward_weight"), ("gru", "forward"),
        ("lstm", "backward_data"), ("lstm", "backward_weight"), ("lstm", "forward")]
    assert len(jobs) == 6 * 2
    src = (tmp_path / "s" / "src" / "rnntrain.cpp").read_text()
    for text in ("cudnnRNNForward(", "CUDNN_FWD_MODE_TRAINING", "cudnnRNNBackwardData_v8(",
                 "cudnnRNNBackwardWeights_v8(", "CUDNN_WGRAD_MODE_ADD", "cudnnBuildRNNDynamic(",
                 "CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H", "RnnTrainCall::kBackwardWeights, CUDNN_GRU, 7, 5, 24, 32, 1, true, "
                 "true, true", "RnnTrainCall::kBackwardData, CUDNN_LSTM, 6, 3, 16, 32, 1, false, true, false"):
        assert text in src, text
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src


def test_the_generated_source_compiles(tmp_path):
    """The generated rnntrain.cpp passes g++ -fsyntax-only -Wall -Werror against the cuDNN headers."""
    from benanza.build.cudalibs import LibraryError, locate

    try:
        libs = locate()
    except LibraryError as e:
        pytest.skip(f"no CUDA headers: {e}")
    _suite(tmp_path)
    root = tmp_path / "s"
    inc = [f"-I{root / 'harness' / 'include'}", f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}",
           f"-I{libs.cuda_home / 'include'}"]
    subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-Wno-deprecated-declarations", *inc,
                    str(root / "src" / "rnntrain.cpp")], check=True)


def _lstm_where_model(path):
    """x (seq 6, N, 16) -> Sigmoid -> LSTM(16 -> 32) -> Y (6, 1, N, 32) ->
    Where(Y > 0, Y, -1e4) (a masked fill: a one-element constant) -> Max(., a (32,) parameter) ->
    Div(., 2 constant) -> Reshape -> Softmax."""
    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    inits = [init("W", 1, 128, 16), init("R", 1, 128, 32), init("B", 1, 256), init("floor", 32),
             numpy_helper.from_array(np.array([-1e4], np.float32), "fill"),
             numpy_helper.from_array(np.array([0.0], np.float32), "zero"),
             numpy_helper.from_array(np.array([2.0], np.float32), "two"),
             numpy_helper.from_array(np.array([6, -1, 32], np.int64), "shape")]
    nodes = [helper.make_node("Sigmoid", ["x"], ["xs"], name="gate"),
             helper.make_node("LSTM", ["xs", "W", "R", "B"], ["y"], name=HOSTILE, hidden_size=32),
             helper.make_node("Greater", ["y", "zero"], ["m"], name="positive"),
             helper.make_node("Where", ["m", "y", "fill"], ["w"], name="masked_fill"),
             helper.make_node("Max", ["w", "floor"], ["mx"], name="max"),
             helper.make_node("Div", ["mx", "two"], ["d"], name="half"),
             helper.make_node("Reshape", ["d", "shape"], ["r"], name="reshape"),
             helper.make_node("Softmax", ["r"], ["out"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, "lstm_where", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, "N", 16])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [6, "N", 32])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), str(path))
    return path


def test_the_lstm_where_model_plan(tmp_path):
    ml = process(_lstm_where_model(tmp_path / "m.onnx"), 4)
    plan = training_plan(ml)
    assert plan.no_backward == []
    by = {ly.name: [(c.phase, c.config.kind) for c in plan.calls if c.layer == ly.index] for ly in ml.layers}
    assert by[HOSTILE] == [("forward", "RNNTrain"), ("backward_data", "RNNTrain"), ("backward_weight", "RNNTrain")]
    assert by["masked_fill"] == [("backward_data", "Where")]  # the fill is a constant: no gradient
    # Max with a (32,) parameter: the select of the data operand; the mask (the parameter's gradient
    # reads it too), the parameter's select and its ReduceSum
    assert by["max"] == [("backward_data", "Where"), ("backward_weight", "Elementwise"),
                         ("backward_weight", "Where"), ("backward_weight", "Reduce")]
    assert by["half"] == [("backward_data", "Elementwise")]  # dx = g / 2; the constant gets none


@pytest.mark.slow
def test_the_lstm_where_training_suite_compiles_and_links(tmp_path, harness, monkeypatch):
    """`generate --train` on the LSTM + Where + Max + Div model at batch 1 and 4, fp32 and fp16: the
    suite with the RNNTrain jobs (forward, data and weight gradients), the Where and Elementwise
    gradients compiles, links and lists exactly its jobs (one full build)."""
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    path = _lstm_where_model(tmp_path / "m.onnx")
    models = [process(path, 1), process(path, 4)]
    for ml in models:
        assert not training_plan(ml).no_backward
    suite = generate(models, ["fp32", "fp16"], tmp_path / "s", train=True)
    assert {"RNNTrain", "Where", "Elementwise", "Reduce"} <= {j.kind for j in suite.jobs}
    r = build(tmp_path / "s")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}


def test_pytorch_fp32_default_times_the_lstm_training_calls_in_tf32():
    """PyTorch's fp32 default (``torch.backends.cudnn.allow_tf32``) sets TF32 math on its cuDNN RNN
    descriptor, which the training forward and both gradients share (ATen ``cudnn/Descriptors.h``):
    ``--dtype fp32 --conv-tf32 --train`` plans lstm_lm's RNNTrain calls in tf32 (and in fp32, as every
    TF32 job gets its FMA twin) while the decoder's GEMMs stay fp32 only. Before, the RNNTrain calls
    were FP32 only, and the H200's fp32 lstm_lm step at batch 32 had a forward phase LBL of 3.889 ms
    against PyTorch's 2.367 ms (benchmarks/results/2026-11-27d)."""
    from benanza.analysis.analyzer import Analysis
    from benanza.generation.generator import plan_jobs

    ml = process(LSTM_LM, 32)
    jobs = plan_jobs([ml], ["fp32"], ["NCHW"], conv_precision="tf32", train=True)
    by_kind: dict[str, set] = {}
    for j in jobs:
        by_kind.setdefault(j.config.kind, set()).add(j.precision)
    assert by_kind["RNNTrain"] == {"tf32", "fp32"} and by_kind["RNN"] == {"tf32", "fp32"}
    assert all(p == {"fp32"} for k, p in by_kind.items() if k not in L.CUDNN_TF32_KINDS), by_kind
    assert Analysis.kind_precision(type("A", (), {"conv_precision": "tf32", "precision": "fp32"})(),
                                   "RNNTrain") == "tf32"
