"""The training step's plan and LBL (issue 26): which backward calls a model needs, that `bench
--train` generates their jobs, and the step's sequential and critical-path sums from measured calls.

The backward kinds are the subject of their own tests; here each forward kind's ``backward`` is
replaced by stand-in configs of known keys, so that the arithmetic can be checked exactly."""
import dataclasses

import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
import numpy as np

from benanza import kinds as L
from benanza.analysis.analyzer import analyze
from benanza.analysis.training import training_step
from benanza.generation.generator import plan_jobs
from benanza.processing.model import process
from benanza.processing.training import training_plan
from test_lbl_truth import _measure, _system_db


def _chain(path):
    """x -> Conv(w1) -> Sigmoid -> Conv(w2) -> y, 16 channels at 8x8 (no fusion candidate)."""
    w1 = numpy_helper.from_array(np.zeros((16, 3, 3, 3), np.float32), "w1")
    w2 = numpy_helper.from_array(np.zeros((16, 16, 3, 3), np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["a"], ["b"], name="act"),
             helper.make_node("Conv", ["b", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 8, 8])], [w1, w2])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _stand_ins(monkeypatch):
    """Conv: data gradient = the conv with a bias, weight gradient = the conv with dilation 2;
    Activation: data gradient = the same activation in tanh mode (distinct keys, real configs)."""
    conv = L.REGISTRY["Conv"]
    act = L.REGISTRY["Activation"]
    monkeypatch.setitem(L.REGISTRY, "Conv", dataclasses.replace(conv, backward=lambda c: (
        ("backward_data", dataclasses.replace(c, bias=True)),
        ("backward_weight", dataclasses.replace(c, dilations=(2, 2), pads=(2, 2, 2, 2))))))
    monkeypatch.setitem(L.REGISTRY, "Activation", dataclasses.replace(act, backward=lambda c: (
        ("backward_data", dataclasses.replace(c, mode="tanh")),)))


def test_the_plan_follows_autograd(tmp_path, monkeypatch):
    _stand_ins(monkeypatch)
    ml = process(_chain(tmp_path / "m.onnx"), 2)
    plan = training_plan(ml)
    names = [(ml.layers[c.layer].name, c.phase) for c in plan.calls]
    # reverse order; the first convolution reads the model input: no data gradient for it
    assert names == [("conv2", "backward_data"), ("conv2", "backward_weight"), ("act", "backward_data"),
                     ("conv1", "backward_weight")]
    assert [ml.layers[i].name for i in plan.data_not_needed] == ["conv1"]
    assert not plan.no_backward
    jobs = plan_jobs([ml], ["fp32"], ["NCHW"], train=True, optimizer="adam")
    keys = {j.config.key for j in jobs}
    assert set(plan.configs()) <= keys
    opt = [j.config for j in jobs if j.kind == "Optimizer"]
    assert len(opt) == 1 and opt[0].algorithm == "adam" and opt[0].parameter_count == 432 + 2304
    assert len(keys) == len(ml.unique_configs()) + len(plan.configs()) + 1
    assert {j.config.key for j in plan_jobs([ml], ["fp32"], ["NCHW"])} == set(ml.unique_configs())


def _conv_then(path, node, inits=()):
    """x -> Conv(w, 8 channels, 8x8) -> ``node`` (reading "a", writing "y") -> y."""
    inits = [numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")] + list(inits)
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]), node]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 8, 8])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_kind_without_backward_leaves_the_step_incomplete(tmp_path):
    """PRelu has no backward in benanza yet: its layer is counted as missing, never taken as free, and
    the step says which kind."""
    slope = numpy_helper.from_array(np.full((8, 1, 1), 0.25, np.float32), "slope")
    path = _conv_then(tmp_path / "prelu.onnx", helper.make_node("PRelu", ["a", "slope"], ["y"], name="prelu"),
                      [slope])
    ml = process(path, 2)
    plan = training_plan(ml)
    assert [ml.layers[i].name for i in plan.no_backward] == ["prelu"]
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in list(ml.unique_configs().values()) + list(plan.configs().values()):
        _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    from benanza.processing.training import optimizer_config

    _measure(db, sid, optimizer_config(ml), "fp32", [("lib", 1.0)])
    system = db.systems()[0]
    t = training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system)
    assert not t.complete and t.missing_count == 1
    assert "1 layers whose backward benanza cannot bound yet (Elementwise)" in t.incomplete_note


def _residual(path):
    """x -> Conv(w) -> a; a -> Sigmoid -> b; y = Add(a, b); and an Equal(a, b) -> bool output z
    (the Conv's output "a" is read by the Sigmoid, the Add and the Equal)."""
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["a"], ["b"], name="act"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add"),
             helper.make_node("Equal", ["a", "b"], ["z"], name="eq")]
    g = helper.make_graph(nodes, "res", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 8, 8]),
                           helper.make_tensor_value_info("z", TensorProto.BOOL, ["N", 8, 8, 8])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_tensor_read_twice_gets_one_gradient_accumulation(tmp_path):
    """autograd adds the gradients of a tensor that several layers differentiate (InputBuffer::add):
    the Conv's output, read by the Sigmoid and the Add, gets one elementwise add of its shape before
    the Conv's own calls; the comparison that also reads it carries no gradient; the step times the
    add in the data-gradient phase, and its memory bound saves nothing for it."""
    ml = process(_residual(tmp_path / "res.onnx"), 2)
    plan = training_plan(ml)
    conv = next(ly.index for ly in ml.layers if ly.name == "conv")
    acc = [c for c in plan.calls if c.accumulation]
    assert len(acc) == 1 and acc[0].layer == conv and acc[0].phase == "backward_data"
    assert acc[0].config == L.ElementwiseConfig(op="add", a=(2, 8, 8, 8), b=(2, 8, 8, 8))
    conv_calls = [k for k, c in enumerate(plan.calls) if c.layer == conv]
    assert conv_calls[0] == plan.calls.index(acc[0])  # before the conv's weight gradient
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in list(ml.unique_configs().values()) + [c.config for c in plan.calls if not c.accumulation]:
        _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    from benanza.processing.training import optimizer_config

    _measure(db, sid, optimizer_config(ml), "fp32", [("lib", 1.0)])
    system = db.systems()[0]
    a = analyze(ml, db, system, "fp32", layouts=("NCHW",))
    assert acc[0].config.key in ml.unique_configs()  # the forward Add's config: measured with it
    t = training_step(ml, a, db, system)
    step = [c for c in t.calls if c.description.startswith("gradient accumulation: ")]
    assert len(step) == 1 and step[0].time_ms == 1.0 and t.complete
    assert t.phase_ms["backward_data"] == sum(c.time_ms for c in t.calls if c.phase == "backward_data")
    # its memory bound saves nothing for the accumulation: the same as without it
    from benanza.analysis.training import memory_bound

    plain = dataclasses.replace(plan, calls=[c for c in plan.calls if not c.accumulation])
    assert t.memory.activations == memory_bound(ml, plain, t.calls, "fp32", "sgd", 216).activations


@pytest.mark.parametrize("model, n", [("resnet18", 8), ("resnet50_bnkept", 16), ("mobilenet_v2", 10),
                                      ("googlenet", 27), ("lstm_lm", 0)])
def test_residual_blocks_and_branches_accumulate_their_gradients(model, n):
    """One accumulation per residual block's input (resnet18: 8 BasicBlocks, resnet50: 16
    Bottlenecks, mobilenet_v2: its 10 inverted residuals with a shortcut), three per inception
    block's input read by four branches (googlenet: 9 blocks), none in a chain (lstm_lm)."""
    from pathlib import Path

    ml = process(Path(__file__).parent / "data" / "zoo" / "models" / f"{model}.onnx", 2)
    assert sum(c.accumulation for c in training_plan(ml).calls) == n


def _conv_bn_relu(path, first_bn: bool = False):
    """x -> Conv(w) -> BatchNormalization -> Relu -> y (8 channels at 8x8); ``first_bn``: the
    BatchNormalization reads the model input x (3 channels) and the Conv follows it."""
    params = [numpy_helper.from_array(np.full((8,), v, np.float32), n)
              for n, v in (("scale", 1.0), ("shift", 0.0), ("mean", 0.0), ("var", 1.0))]
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    if first_bn:
        params = [numpy_helper.from_array(np.full((3,), 1.0, np.float32), n) for n in ("scale", "shift", "mean", "var")]
        nodes = [helper.make_node("BatchNormalization", ["x", "scale", "shift", "mean", "var"], ["a"], name="bn"),
                 helper.make_node("Conv", ["a", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("Relu", ["c"], ["y"], name="relu")]
    else:
        nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]),
                 helper.make_node("BatchNormalization", ["a", "scale", "shift", "mean", "var"], ["b"], name="bn",
                                  epsilon=1e-3),
                 helper.make_node("Relu", ["b"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "cbr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 8, 8])], [w] + params)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_conv_bn_relu_step_is_complete_with_the_batch_norms_calls(tmp_path):
    """Conv -> BatchNormalization -> Relu (a ConvBnAct fusion group in inference, undone in training):
    the plan has relu's data gradient, BN's training forward and its one backward call (dx, dscale,
    dbias), and the conv's weight gradient (its input is the model's: no data gradient); no layer
    lacks a backward, and measured, the step is complete with the training forward in place of the
    inference BN."""
    ml = process(_conv_bn_relu(tmp_path / "cbr.onnx"), 4)
    assert [f.config.kind for f in ml.fusions] == ["ConvBnAct"]
    plan = training_plan(ml)
    assert not plan.no_backward
    calls = [(ml.layers[c.layer].name, c.phase, c.config.kind) for c in plan.calls]
    assert calls == [("relu", "backward_data", "ActivationBwd"), ("bn", "forward", "BatchNormTrain"),
                     ("bn", "backward_data", "BatchNormBwd"), ("conv", "backward_weight", "ConvBwdFilter")]
    bn = next(c.config for c in plan.calls if c.config.kind == "BatchNormTrain")
    assert bn == L.BatchNormTrainConfig(shape=(4, 8, 8, 8), epsilon=float(np.float32(1e-3)))  # ONNX keeps a float32
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in ml.unique_configs().values():
        _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    for c in plan.calls:
        _measure(db, sid, c.config, "fp32", [("lib", 2.0 if c.config.kind == "BatchNormTrain" else 0.5)])
    from benanza.processing.training import optimizer_config

    _measure(db, sid, optimizer_config(ml), "fp32", [("lib", 0.25)])
    system = db.systems()[0]
    t = training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system)
    assert t.complete, t.incomplete_note
    # layer by layer: conv 1.0 + BN's training forward 2.0 (not its inference 1.0) + relu 1.0
    assert t.phase_ms["forward"] == pytest.approx(4.0)
    assert t.phase_ms["backward_data"] == pytest.approx(1.0) and t.phase_ms["backward_weight"] == pytest.approx(0.5)


def test_bench_train_plans_no_job_a_training_step_cannot_use(tmp_path):
    """``bench --train`` times no Conv -> BatchNormalization fold (ConvBnAct): the step counts those
    layers one by one, so their jobs (25-64 % of a CNN's bench job-seconds on an H200, 2026-11-27e)
    bought nothing. Inference benches still time them; the step from a database without them is
    the step from one with them."""
    ml = process(_conv_bn_relu(tmp_path / "cbr.onnx"), 4)
    assert [f.config.kind for f in ml.fusions] == ["ConvBnAct"]
    infer = {j.kind for j in plan_jobs([ml], ["fp32"])}
    train = {j.kind for j in plan_jobs([ml], ["fp32"], train=True)}
    assert "ConvBnAct" in infer and "ConvBnAct" not in train
    assert {"Conv", "BatchNorm", "BatchNormTrain", "BatchNormBwd", "ConvBwdFilter"} <= train
    from typer.testing import CliRunner

    from benanza.cli import app

    r = CliRunner().invoke(app, ["generate", str(tmp_path / "cbr.onnx"), "-b", "4", "--train", "-o", str(tmp_path / "s")])
    assert r.exit_code == 0 and "ConvBnAct" not in r.output, r.output
    assert "none for 1 Conv -> BatchNormalization fold: a training step cannot fold" in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["generate", str(tmp_path / "cbr.onnx"), "-b", "4", "-o", str(tmp_path / "i")])
    assert r.exit_code == 0 and "ConvBnAct 2" in r.output and "folds" not in r.output, r.output
    plan = training_plan(ml)
    from benanza.processing.training import optimizer_config

    steps = []
    for with_fold in (True, False):
        db, sid = _system_db(f"sqlite:///{tmp_path / f'perf-{with_fold}.db'}")
        for cfg in ml.unique_configs().values():
            if with_fold or cfg.kind != "ConvBnAct":
                _measure(db, sid, cfg, "fp32", [("lib", 0.1 if cfg.kind == "ConvBnAct" else 1.0)])
        for c in plan.calls:
            _measure(db, sid, c.config, "fp32", [("lib", 0.5)])
        _measure(db, sid, optimizer_config(ml), "fp32", [("lib", 0.25)])
        system = db.systems()[0]
        steps.append(training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system))
    assert all(t.complete for t in steps)
    assert steps[0].critical_path_ms == steps[1].critical_path_ms and steps[0].phase_ms == steps[1].phase_ms


def test_an_unmeasured_inference_batch_norm_does_not_stop_a_measured_step(tmp_path):
    """The step times BatchNormalization by its training-mode call, so the inference call's
    measurement is not needed: in an SM partition cuDNN's inference batch norm fails (err 720, a
    cooperative launch larger than the green context) while the graph API's training one runs
    (benchmarks/results/2026-11-27c/). The inference analysis stays incomplete, the step does not;
    left without its training call too, the step is incomplete and names that call, never 0 ms."""
    ml = process(_conv_bn_relu(tmp_path / "cbr.onnx"), 4)
    plan = training_plan(ml)
    bn = next(ly for ly in ml.layers if ly.name == "bn")
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    unmeasured = {bn.config.key} | {f.config.key for f in ml.fusions}  # the inference batch norm and
    for key, cfg in ml.unique_configs().items():  # its Conv+BN+Relu fusion: no valid measurement
        if key not in unmeasured:
            _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    from benanza.processing.training import optimizer_config

    _measure(db, sid, optimizer_config(ml), "fp32", [("lib", 0.25)])
    for c in plan.calls:
        if c.config.kind != "BatchNormTrain":
            _measure(db, sid, c.config, "fp32", [("lib", 0.5)])
    system = db.systems()[0]
    a = analyze(ml, db, system, "fp32", layouts=("NCHW",))
    assert [t.layer.name for t in a.missing] == ["bn"]  # the inference LBL misses it
    t = training_step(ml, a, db, system)
    assert not t.complete and t.missing_count == 1
    assert "1 training-mode forward calls without a measurement" in t.incomplete_note
    assert "forward layers without" not in t.incomplete_note
    _measure(db, sid, next(c.config for c in plan.calls if c.config.kind == "BatchNormTrain"), "fp32", [("lib", 2.0)])
    t = training_step(ml, a, db, system)
    assert t.complete and t.missing_count == 0, t.incomplete_note
    assert t.phase_ms["forward"] == pytest.approx(1.0 + 2.0 + 1.0)  # conv, BN's training call, relu
    assert t.to_dict()["complete"] is True


def test_a_batch_norm_on_the_model_input_keeps_its_backward_call(tmp_path):
    """A BatchNormalization that reads the model input needs no dx, but its one backward call also
    computes dscale and dbias: the plan keeps it (never a free layer)."""
    ml = process(_conv_bn_relu(tmp_path / "bn_first.onnx", first_bn=True), 2)
    plan = training_plan(ml)
    by_layer = [(ml.layers[c.layer].name, c.config.kind) for c in plan.calls]
    assert ("bn", "BatchNormBwd") in by_layer and ("bn", "BatchNormTrain") in by_layer
    assert "bn" in [ml.layers[i].name for i in plan.data_not_needed]


def test_step_sums_and_critical_path(tmp_path, monkeypatch):
    _stand_ins(monkeypatch)
    ml = process(_chain(tmp_path / "m.onnx"), 2)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    by_name = {ly.name: ly for ly in ml.layers}
    fwd = {"conv1": 1.0, "act": 0.5, "conv2": 2.0}
    for name, ms in fwd.items():
        _measure(db, sid, by_name[name].config, "fp32", [("lib", ms)])
    plan = training_plan(ml)
    bwd = {("conv2", "backward_data"): 3.0, ("conv2", "backward_weight"): 4.0, ("act", "backward_data"): 0.5,
           ("conv1", "backward_weight"): 6.0}
    for c in plan.calls:
        _measure(db, sid, c.config, "fp32", [("lib", bwd[(ml.layers[c.layer].name, c.phase)])])
    system = db.systems()[0]
    a = analyze(ml, db, system, "fp32", layouts=("NCHW",))
    t = training_step(ml, a, db, system)
    # the optimizer's update is not measured yet: the step is a partial sum and says so
    assert not t.complete and t.missing_count == 1 and t.phase_ms["optimizer"] is None
    assert "INCOMPLETE" in t.lbl_text() and "sgd step over 2,736 parameters" in t.incomplete_note
    assert t.critical_path_ms == pytest.approx(13.0)
    from benanza.processing.training import optimizer_config

    _measure(db, sid, optimizer_config(ml, "sgd"), "fp32", [("lib", 0.7)])
    t = training_step(ml, a, db, system)
    assert t.phase_ms["forward"] == pytest.approx(3.5)
    assert t.phase_ms["backward_data"] == pytest.approx(3.5)
    assert t.phase_ms["backward_weight"] == pytest.approx(10.0)
    assert t.phase_ms["optimizer"] == pytest.approx(0.7)
    assert t.sequential_ms == pytest.approx(17.7)
    # forward ends at 3.5; conv2's gradients 3.5 -> 6.5 (data) and -> 7.5 (weight); act's data gradient
    # 6.5 -> 7.0; conv1's weight gradient 7.0 -> 13.0; then the optimizer's step -> 13.7
    assert t.critical_path_ms == pytest.approx(13.7)
    assert t.complete and t.missing_count == 0 and "INCOMPLETE" not in t.lbl_text()
    assert t.to_dict()["lbl_ms"] == pytest.approx(13.7) and t.to_dict()["complete"] is True
    # memory: 432 + 2304 parameters in fp32, their gradients and SGD's momentum; the saved
    # activations: conv2's input b and act's input a (2 x 16 x 8 x 8 each) and the model input x
    # that conv1's weight gradient reads (2 x 3 x 8 x 8)
    m = t.memory
    assert m.parameter_count == 2736 and m.parameters == m.gradients == m.optimizer_state == 2736 * 4
    assert m.activations == (2048 + 2048 + 384) * 4
    assert m.total == 3 * 2736 * 4 + 4480 * 4 and m.fits(m.total) and not m.fits(m.total - 1)
    assert m.cannot_fit() == [] and m.to_dict()["cannot_fit"] == []  # a few kB fit every GPU
    from benanza.analysis.training import memory_bound

    adam = memory_bound(ml, plan, t.calls, "fp16", "adam")
    assert adam.optimizer_state == 2 * 2736 * 2 and adam.activations == 4480 * 2


def test_a_training_mode_forward_replaces_the_inference_call(tmp_path, monkeypatch):
    """A kind whose backward gives a ``forward`` call (BatchNormalization with the batch's
    statistics, Dropout's mask) is timed by that call in the step's forward, not by its inference
    call; unmeasured, the step is incomplete and says which call."""
    _stand_ins(monkeypatch)
    act = L.REGISTRY["Activation"]
    monkeypatch.setitem(L.REGISTRY, "Activation", dataclasses.replace(act, backward=lambda c: (
        ("forward", dataclasses.replace(c, mode="sigmoid", alpha=0.25)),
        ("backward_data", dataclasses.replace(c, mode="tanh")))))
    ml = process(_chain(tmp_path / "m.onnx"), 2)
    plan = training_plan(ml)
    tf = plan.train_forward()
    assert list(tf) == [1] and tf[1][0].phase == "forward"
    keys = {j.config.key for j in plan_jobs([ml], ["fp32"], ["NCHW"], train=True)}
    assert tf[1][0].config.key in keys  # generated as a job of the suite
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    by_name = {ly.name: ly for ly in ml.layers}
    for name, ms in {"conv1": 1.0, "act": 0.5, "conv2": 2.0}.items():
        _measure(db, sid, by_name[name].config, "fp32", [("lib", ms)])
    for c in plan.calls:
        if c.phase != "forward":
            _measure(db, sid, c.config, "fp32", [("lib", 1.0)])
    from benanza.processing.training import optimizer_config

    _measure(db, sid, optimizer_config(ml, "sgd"), "fp32", [("lib", 0.5)])
    system = db.systems()[0]
    a = analyze(ml, db, system, "fp32", layouts=("NCHW",))
    t = training_step(ml, a, db, system)
    assert not t.complete and t.missing_count == 1
    assert "1 training-mode forward calls without a measurement" in t.incomplete_note
    assert "backward calls without" not in t.incomplete_note
    _measure(db, sid, tf[1][0].config, "fp32", [("lib", 1.25)])
    t = training_step(ml, a, db, system)
    assert t.complete
    assert t.phase_ms["forward"] == pytest.approx(1.0 + 1.25 + 2.0)  # 1.25 in place of the inference 0.5
    assert t.phase_ms["backward_data"] + t.phase_ms["backward_weight"] == pytest.approx(4.0)
    assert t.sequential_ms == pytest.approx(4.25 + 4.0 + 0.5)


def test_does_it_fit_names_the_gpus_below_the_bound():
    """The memory bound against the GPUs `benanza predict` knows: a step of 20 GiB cannot run on a
    16 GiB T4, may on a 24 GiB A10 or an 80 GiB H100 (datasheet memory, analysis/gpus.py)."""
    from benanza.analysis.gpus import GPUS, find_gpu
    from benanza.analysis.training import MemoryBound

    gib = 2 ** 30
    m = MemoryBound(parameters=4 * gib, gradients=4 * gib, optimizer_state=8 * gib, activations=4 * gib,
                    workspace=0, parameter_count=gib, optimizer="adam")
    no = {g.name for g in m.cannot_fit()}
    assert no == {g.name for g in GPUS if g.memory_bytes < 20 * gib}
    assert no == {find_gpu("T4").name} and find_gpu("A10").name not in no
    assert m.to_dict()["cannot_fit"] == [g.name for g in GPUS if g.memory_bytes < 20 * gib]
    assert m.cannot_fit([find_gpu("H100-SXM")]) == []


def test_a_missing_backward_measurement_is_never_zero(tmp_path, monkeypatch):
    _stand_ins(monkeypatch)
    ml = process(_chain(tmp_path / "m.onnx"), 2)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in ml.unique_configs().values():
        _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    plan = training_plan(ml)
    for c in plan.calls[1:]:  # conv2's data gradient left unmeasured
        _measure(db, sid, c.config, "fp32", [("lib", 1.0)])
    from benanza.processing.training import optimizer_config

    _measure(db, sid, optimizer_config(ml, "sgd"), "fp32", [("lib", 1.0)])
    system = db.systems()[0]
    t = training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system)
    assert [(c.layer_name, c.phase) for c in t.missing_calls] == [("conv2", "backward_data")]
    assert t.missing_count == 1 and not t.complete
    assert "1 backward calls without a measurement" in t.incomplete_note


RESNET50 = __import__("pathlib").Path(__file__).resolve().parents[1] / "examples" / "resnet50.onnx"


def test_resnet50_parameters():
    """torchvision's resnet50 trains 25,557,032 parameters; the example was exported in inference
    mode with its 53 BatchNormalizations folded into the convolutions: their 2 x 26,560 scales and
    shifts became 26,560 convolution biases."""
    from benanza.processing.training import trainable_parameters

    shapes = trainable_parameters(RESNET50)
    assert len(shapes) == 53 * 2 + 2
    assert sum(int(np.prod(s)) for s in shapes) == 25_557_032 - 2 * 26_560 + 26_560
    assert (1000, 2048) in shapes and (1000,) in shapes


def test_parameters_of_norms_tied_weights_and_constants(tmp_path):
    from benanza.processing.training import trainable_parameters

    f = np.zeros
    inits = [numpy_helper.from_array(f((8, 3, 3, 3), np.float32), "w"),
             numpy_helper.from_array(f((8,), np.float32), "scale"), numpy_helper.from_array(f((8,), np.float32), "shift"),
             numpy_helper.from_array(f((8,), np.float32), "mean"), numpy_helper.from_array(f((8,), np.float32), "var"),
             numpy_helper.from_array(f((), np.float32), "half"),
             numpy_helper.from_array(f((512, 8), np.float32), "emb"),
             numpy_helper.from_array(np.array([0, 1], np.int64), "idx")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"]),
             helper.make_node("BatchNormalization", ["a", "scale", "shift", "mean", "var"], ["b"]),
             helper.make_node("Mul", ["b", "half"], ["c"]),
             helper.make_node("Gather", ["emb", "idx"], ["e"]),
             helper.make_node("Gather", ["emb", "idx"], ["e2"])]  # the same table twice: one parameter
    g = helper.make_graph(nodes, "p", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("e", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("e2", TensorProto.FLOAT, None)], inits)
    path = tmp_path / "p.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    # no running statistics, no scalar constant, no index tensor; the tied table once
    assert trainable_parameters(path) == [(8, 3, 3, 3), (8,), (8,), (512, 8)]


def test_a_linear_exported_as_matmul_of_a_transposed_weight_is_a_parameter(tmp_path):
    """torch.onnx exports nn.Linear as MatMul(x, Transpose(W)): W is the parameter, once even when a
    tied head reads it through a second Transpose (vit_b_16's export: 77.9 M of its 86.6 M parameters
    sat behind Transposes and were not counted before)."""
    from benanza.processing.training import trainable_parameters

    w = numpy_helper.from_array(np.zeros((32, 16), np.float32), "w")
    nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "wt"], ["a"]),
             helper.make_node("Transpose", ["w"], ["wt2"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "wt2"], ["b"])]
    g = helper.make_graph(nodes, "lin", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, None)], [w])
    path = tmp_path / "lin.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert trainable_parameters(path) == [(32, 16)]


def test_unreadable_model_is_one_error(tmp_path):
    from benanza.errors import ModelError
    from benanza.processing.training import trainable_parameters

    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError, match="bad.onnx"):
        trainable_parameters(bad)


def _cnn_mlp(path):
    """A small network with every forward kind resnet50's and an MLP's training step differentiates:
    Conv(+bias) -> Relu -> MaxPool -> Conv -> BatchNormalization -> Transpose(H, W) -> Add(residual) ->
    Sigmoid -> GlobalAveragePool -> Flatten -> Concat(itself) -> Gather(constant permutation) -> Gemm ->
    Relu -> LayerNormalization -> Gelu -> Gemm -> Mul(per-feature scale) -> Softmax, whose (N, 10)
    output the loss takes as logits."""
    rng = np.random.default_rng(0)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    inits = [init("w1", 8, 3, 3, 3), init("b1", 8), init("w2", 8, 8, 3, 3), init("fc1", 16, 16), init("fb1", 16),
             init("fc2", 10, 16), init("fb2", 10), init("scale", 10), init("bn_s", 8), init("bn_b", 8),
             init("bn_m", 8), numpy_helper.from_array(np.full((8,), 1.5, np.float32), "bn_v"),
             numpy_helper.from_array(np.arange(15, -1, -1, dtype=np.int64), "perm"), init("ln_s", 16),
             init("ln_b", 16)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c2", "bn_s", "bn_b", "bn_m", "bn_v"], ["n2"], name="bn2"),
             helper.make_node("Transpose", ["n2"], ["c2t"], name="transpose", perm=[0, 1, 3, 2]),
             helper.make_node("Add", ["c2t", "p1"], ["s"], name="residual"),
             helper.make_node("Sigmoid", ["s"], ["g"], name="gate"),
             helper.make_node("GlobalAveragePool", ["g"], ["gap"], name="gap"),
             helper.make_node("Flatten", ["gap"], ["f"], name="flatten"),
             helper.make_node("Concat", ["f", "f"], ["fc"], name="concat", axis=1),
             helper.make_node("Gather", ["fc", "perm"], ["fp"], name="permute", axis=1),
             helper.make_node("Gemm", ["fp", "fc1", "fb1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["hr"], name="relu2"),
             helper.make_node("LayerNormalization", ["hr", "ln_s", "ln_b"], ["hn"], name="ln", axis=-1),
             helper.make_node("Gelu", ["hn"], ["hg"], name="gelu"),
             helper.make_node("Gemm", ["hg", "fc2", "fb2"], ["o"], name="fc2", transB=1),
             helper.make_node("Mul", ["o", "scale"], ["os"], name="scale"),
             helper.make_node("Softmax", ["os"], ["y"], name="softmax", axis=1)]
    g = helper.make_graph(nodes, "cnn_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), str(path))
    return path


@pytest.mark.slow
def test_the_training_suite_compiles_and_links(tmp_path, harness, monkeypatch):
    """`generate --train` on a small CNN + MLP at batch 1 and 32, fp32 and fp16, both layouts: every
    layer has its backward calls (no layer left without one), the optimizer's step is planned, and
    the suite of forward, backward and optimizer jobs compiles, links and lists exactly its jobs.
    (One build for the backward kinds' templates: ConvBwdData/Filter, ActivationBwd, PoolingBwd,
    SoftmaxBwd, the gradient GEMMs and ReduceSums, Elementwise muls, BatchNormTrain and BatchNormBwd
    with their graph-API source, the Copy gradients (Transpose, Split), GatherBwd, LayerNormBwd and
    LayerNorm's training forward, UnaryBwd, the CrossEntropyLoss, Optimizer.)"""
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    import json
    import subprocess

    from benanza.build.builder import build
    from benanza.generation.generator import generate

    path = _cnn_mlp(tmp_path / "m.onnx")
    models = [process(path, 1), process(path, 32)]
    for ml in models:
        plan = training_plan(ml)
        assert not plan.no_backward, [ml.layers[i].name for i in plan.no_backward]
    suite = generate(models, ["fp32", "fp16"], tmp_path / "s", layouts=["NCHW", "NHWC"], train=True, optimizer="adam")
    kinds = {j.kind for j in suite.jobs}
    assert {"ConvBwdData", "ConvBwdFilter", "ActivationBwd", "PoolingBwd", "SoftmaxBwd", "Reduce", "Optimizer",
            "BatchNormTrain", "BatchNormBwd", "Copy", "GatherBwd", "CrossEntropyLoss", "LayerNormBwd",
            "UnaryBwd"} <= kinds
    assert {j.config.op for j in suite.jobs if j.kind == "Copy"} == {"Transpose", "Concat", "Split"}
    assert json.loads((tmp_path / "s" / "suite.json").read_text())["train"] is True
    r = build(tmp_path / "s")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}


def test_a_scalar_constant_has_no_gradient_a_bias_vector_has(tmp_path):
    """Mul by a scalar constant (GELU's 0.5, an attention's scale) gets no weight gradient (autograd
    computes none, and the optimizer's parameters leave scalars out); an Add of a bias vector keeps its
    ReduceSum (the bias's gradient). On an H100, 24 such calls stood in vit_b_16's step."""
    w = numpy_helper.from_array(np.zeros((16, 16), np.float32), "w")
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    bias = numpy_helper.from_array(np.zeros((16,), np.float32), "bias")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
             helper.make_node("Mul", ["a", "half"], ["b"], name="scale"),
             helper.make_node("Add", ["b", "bias"], ["y"], name="shift")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])], [w, half, bias])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    ml = process(path, 4)
    plan = training_plan(ml)
    # the input needs no gradient (mm's data gradient is left out); shift's bias its ReduceSum; scale
    # passes its data gradient on (times 0.5) and none to its constant
    assert [(ml.layers[c.layer].name, c.phase, c.config.describe()) for c in plan.calls] == [
        ("shift", "backward_weight", "Reduce(4x16 -> 1x16)"), ("scale", "backward_data", "Elementwise(mul 4x16,1x1)"),
        ("mm", "backward_weight", "Gemm(m16 n16 k4 TN)")]
    from benanza.processing.training import trainable_parameters

    assert sorted(trainable_parameters(path)) == [(16,), (16, 16)]
