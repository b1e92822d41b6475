"""Dropout in a training step (issue 26): a Dropout exported for inference is a zero-cost identity,
but in training it draws its mask and scales, and its gradient multiplies by the mask. The plan times
it there as its training-mode forward (the Dropout kind's cudnnDropoutForward config, from
``Layer.train_config``) and the DropoutBwd kind's call; a Dropout exported in training mode has its
forward as a layer already and only the backward call. Ratio 0 drops nothing: still free. The
DropoutBwd kind's FLOPs, bytes, PyTorch candidate and generated C++ (-fsyntax-only)."""
from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest
from torch_recorder import Recorder as Rec
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.analyzer import analyze
from benanza.analysis.roofline import min_bytes
from benanza.analysis.training import training_step
from benanza.generation.generator import generate
from benanza.kinds.base import numel
from benanza.kinds.framework import Ctx
from benanza.processing.model import process
from benanza.processing.training import optimizer_config, training_plan
from test_lbl_truth import _measure, _system_db


def _mlp(path, ratio=0.3, training=False):
    """x (N, 32) -> Gemm(16) -> Dropout(ratio[, training]) -> Relu -> y."""
    inits = [numpy_helper.from_array(np.zeros((16, 32), np.float32), "w"),
             numpy_helper.from_array(np.array(ratio, np.float32), "ratio")]
    drop_in = ["h", "ratio"]
    if training:
        inits.append(numpy_helper.from_array(np.array(True), "training"))
        drop_in.append("training")
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
             helper.make_node("Dropout", drop_in, ["d"], name="drop"),
             helper.make_node("Relu", ["d"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def _calls(ml, plan):
    return [(ml.layers[c.layer].name, c.phase, c.config.kind) for c in plan.calls]


def test_an_inference_dropout_gets_its_training_forward_and_backward(tmp_path):
    ml = process(_mlp(tmp_path / "m.onnx"), 8)
    drop = next(ly for ly in ml.layers if ly.name == "drop")
    assert drop.status == "zero_cost" and drop.config is None  # free in inference
    assert drop.train_config == L.DropoutConfig(shape=(8, 16), ratio=float(np.float32(0.3)))
    plan = training_plan(ml)
    calls = _calls(ml, plan)
    assert ("drop", "forward", "Dropout") in calls and ("drop", "backward_data", "DropoutBwd") in calls
    assert drop.index not in plan.pass_through and not plan.no_backward
    assert plan.train_forward()[drop.index][0].config == drop.train_config
    bwd = next(c.config for c in plan.calls if c.config.kind == "DropoutBwd")
    assert bwd == L.DropoutBwdConfig(shape=(8, 16), ratio=drop.train_config.ratio)


def test_a_ratio_zero_dropout_stays_free(tmp_path):
    ml = process(_mlp(tmp_path / "m.onnx", ratio=0.0), 8)
    drop = next(ly for ly in ml.layers if ly.name == "drop")
    assert drop.train_config is None
    plan = training_plan(ml)
    assert drop.index in plan.pass_through and not any(c.layer == drop.index for c in plan.calls)


def test_a_training_mode_dropout_has_only_its_backward_call(tmp_path):
    ml = process(_mlp(tmp_path / "m.onnx", training=True), 8)
    drop = next(ly for ly in ml.layers if ly.name == "drop")
    assert drop.status == "benchmark" and drop.config.kind == "Dropout"
    plan = training_plan(ml)
    assert [(p, k) for n, p, k in _calls(ml, plan) if n == "drop"] == [("backward_data", "DropoutBwd")]
    assert L.REGISTRY["Dropout"].backward(L.DropoutConfig(shape=(2, 3), ratio=0.0)) is None


def test_the_step_counts_the_dropout_calls_and_its_mask(tmp_path):
    ml = process(_mlp(tmp_path / "m.onnx"), 8)
    plan = training_plan(ml)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in ml.unique_configs().values():
        _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    times = {"Dropout": 0.75, "DropoutBwd": 0.5}
    for c in plan.calls:
        _measure(db, sid, c.config, "fp32", [("lib", times.get(c.config.kind, 0.25))])
    _measure(db, sid, optimizer_config(ml), "fp32", [("lib", 0.125)])
    from benanza.processing.training import loss_config

    loss, _ = loss_config(ml)
    if loss is not None:  # the MLP's (8, 16) output is logits: its cross-entropy is a call of the step
        _measure(db, sid, loss, "fp32", [("lib", 0.25)])
    system = db.systems()[0]
    t = training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system)
    assert t.complete, t.incomplete_note
    fwd = sum(1.0 for ly in ml.layers if ly.status == "benchmark" and ly.fusion is None) + \
        sum(1.0 for _ in ml.fusions)
    assert t.phase_ms["forward"] == pytest.approx(fwd + 0.75)  # the dropout's mask kernel, not free
    # saved: relu's output y (its gradient reads y), the dropout's mask at one byte per element (not
    # its fp32 input), the model input x that the Gemm's weight gradient reads
    assert t.memory.activations == 8 * 16 * 4 + 8 * 16 + 8 * 32 * 4


def test_flops_bytes_and_candidate():
    cfg = L.DropoutBwdConfig(shape=(32, 768), ratio=0.1)
    n = numel(cfg.shape)
    assert cfg.flops() == 2 * n
    assert min_bytes(cfg, "fp16") == 2 * n + n + 2 * n and min_bytes(cfg, "fp32") == 4 * n + n + 4 * n
    with pytest.raises(ValueError):
        L.DropoutBwdConfig(shape=(2,), ratio=1.0)
    calls = []

    cand = L.REGISTRY["DropoutBwd"].torch(Ctx(cfg, Rec(calls), Rec(calls), Rec(calls), False))
    assert cand.call == "torch:aten::native_dropout_backward" and cand.out_numel == n
    cand.fn()
    assert calls[-1][0] == "ops.aten.native_dropout_backward" and calls[-1][1][2] == pytest.approx(1 / 0.9)


def test_the_generated_backward_compiles(tmp_path):
    from benanza.build.cudalibs import LibraryError, locate

    ml = process(_mlp(tmp_path / "m.onnx"), 8)
    suite = generate([ml], ["fp32", "fp16"], tmp_path / "s", train=True)
    assert {j.kind for j in suite.jobs} >= {"Dropout", "DropoutBwd"}
    src = tmp_path / "s" / "src" / "dropoutbwd.cpp"
    text = src.read_text()
    assert "cudnnDropoutBackward(" in text and "cudnnDropoutForward(" in text
    try:
        libs = locate()
    except LibraryError as e:
        pytest.skip(f"no CUDA headers: {e}")
    inc = [f"-I{tmp_path / 's' / 'harness' / 'include'}", f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}",
           f"-I{libs.cuda_home / 'include'}"]
    for f in ("dropout.cpp", "dropoutbwd.cpp"):
        subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-Wno-deprecated-declarations"]
                       + inc + [str(tmp_path / "s" / "src" / f)], check=True)
