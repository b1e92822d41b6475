"""Issue 26: the training step predicted on another GPU (`benanza predict MODEL --train --to GPU`):
each measured call scaled by Habitat wave scaling, the step's schedule on the target, an incomplete
step kept incomplete, and whether the step's memory fits the target. Synthetic measurements of a
small classifier on an H200 (tests/test_lbl_truth.py's system); no GPU needed."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza.analysis.analyzer import analyze
from benanza.analysis.gpus import find_gpu
from benanza.analysis import roofline
from benanza.analysis.predict import predict, work_units
from benanza.analysis.predict_training import predict_call, predict_training
from benanza.analysis.training import training_step
from benanza.processing.model import process
from benanza.processing.training import loss_config, optimizer_config, training_plan
from test_cli import bz, one_line_error
from test_lbl_truth import _measure, _system_db

from conftest import scenario_of

H200, B200, T4 = find_gpu("H200"), find_gpu("B200"), find_gpu("T4")


def _classifier(path):
    """x (N, 3, 32, 32) -> Conv(16, 3x3) -> Relu -> Flatten -> MatMul (16384 x 10) -> y: logits of
    10 classes, so the step has a cross-entropy loss, a conv weight gradient, a ReLU data gradient
    and the MatMul's two gradients."""
    w = numpy_helper.from_array(np.zeros((16, 3, 3, 3), np.float32), "w")
    fc = numpy_helper.from_array(np.zeros((16 * 32 * 32, 10), np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Flatten", ["b"], ["c"], name="flat", axis=1),
             helper.make_node("MatMul", ["c", "fc"], ["y"], name="fc")]
    g = helper.make_graph(nodes, "clf", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], [w, fc])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


#: measured times (ms) on the H200: the forward layers, the backward calls, the loss, the optimizer
FWD = {"conv": 0.30, "relu": 0.20, "fc": 0.25}
BWD = {("fc", "backward_data"): 0.40, ("fc", "backward_weight"): 0.35, ("relu", "backward_data"): 0.30,
       ("conv", "backward_weight"): 0.60}
LOSS_MS, OPT_MS = 0.05, 0.10


def _measured(tmp_path, batch=64, skip=(), optimizer="sgd"):
    """The classifier at ``batch`` with every call measured on the H200 but those named in
    ``skip`` ((layer name, phase)), the times of :data:`FWD` ... scaled by ``batch`` / 64 (plausible
    FP32 rates at any batch); returns (model path, processed model, database, its path)."""
    f = batch / 64
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = _classifier(tmp_path / "clf.onnx")
    ml = process(path, batch)
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    db, sid = _system_db(url)
    by_name = {ly.name: ly for ly in ml.layers}
    for name, ms in FWD.items():
        _measure(db, sid, by_name[name].config, "fp32", [("lib", ms * f)])
    for c in training_plan(ml).calls:
        k = (ml.layers[c.layer].name, c.phase)
        if k not in skip:
            _measure(db, sid, c.config, "fp32", [("lib", BWD[k] * f)])
    _measure(db, sid, loss_config(ml)[0], "fp32", [("lib", LOSS_MS * f)])
    _measure(db, sid, optimizer_config(ml, optimizer), "fp32", [("lib", OPT_MS * f)])
    return path, ml, db, tmp_path / "perf.db"


def _step(ml, db, optimizer="sgd"):
    system = db.systems()[0]
    return training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system, optimizer)


def test_the_same_gpu_predicts_the_measured_step(tmp_path):
    """Origin = target: every factor is 1, so the predicted step is the measured one, phase by
    phase -- the prediction follows the step's own schedule."""
    _, ml, db, _ = _measured(tmp_path)
    step = _step(ml, db)
    assert step.complete, step.incomplete_note
    tp = predict_training(ml, step, H200, H200)
    assert tp.phase_ms == pytest.approx(step.phase_ms)
    assert tp.sequential_ms == pytest.approx(step.sequential_ms)
    assert tp.critical_path_ms == pytest.approx(step.critical_path_ms)
    assert all(c.factor == pytest.approx(1.0) for c in tp.calls)


def test_a_faster_gpu_is_faster_per_phase_and_the_totals_follow_the_calls(tmp_path):
    _, ml, db, _ = _measured(tmp_path)
    step = _step(ml, db)
    tp = predict_training(ml, step, H200, B200)
    assert tp.complete and tp.incomplete_note == ""
    for ph in ("forward", "backward_data", "backward_weight", "optimizer"):
        assert 0 < tp.phase_ms[ph] < step.phase_ms[ph], ph
    # the loss over 64 x 10 logits is one unit of parallel work in the L2: one SM busy on either
    # GPU, so it follows the clocks (B200's boost is a little below H200's), not the bigger GPU
    assert tp.phase_ms["loss"] / step.phase_ms["loss"] == pytest.approx(
        1 + (1 - 0.002 / LOSS_MS) * (H200.boost_clock_mhz / B200.boost_clock_mhz - 1), rel=0.01)
    # each non-forward call: the wave-scaling factor of its own kind, and the phase sums are theirs
    by = {(ml.layers[c.index].name if c.index >= 0 else "", c.phase): c for c in tp.calls}
    assert {c.kind for c in tp.calls} == {"Gemm", "ActivationBwd", "ConvBwdFilter", "CrossEntropyLoss", "Optimizer"}
    for k, ms in BWD.items():
        c = by[k]
        assert c.origin_ms == pytest.approx(ms)
        assert c.predicted_ms == pytest.approx(c.fixed_ms + (ms - c.fixed_ms) * c.factor)
        # the conv's weight gradient, 0.60 ms for 1.8 MFLOPs, is far under 5 % of its roofline, but its
        # call is not cuDNN's bias gradient: it splits its reduction and is faster on more SMs too
        assert c.predicted_ms < ms
    assert tp.phase_ms["backward_data"] == pytest.approx(by[("fc", "backward_data")].predicted_ms
                                                         + by[("relu", "backward_data")].predicted_ms)
    assert tp.phase_ms["backward_weight"] == pytest.approx(by[("fc", "backward_weight")].predicted_ms
                                                           + by[("conv", "backward_weight")].predicted_ms)
    assert tp.phase_ms["loss"] == pytest.approx(by[("", "loss")].predicted_ms)
    assert tp.phase_ms["optimizer"] == pytest.approx(by[("", "optimizer")].predicted_ms)
    # the forward pass is the forward prediction's (no fusion in this model)
    fwd = predict(step.forward, H200, B200)
    assert tp.phase_ms["forward"] == pytest.approx(fwd.lbl_ms)
    assert tp.sequential_ms == pytest.approx(sum(tp.phase_ms.values()))
    # a chain: forward, loss, fc's gradients (data || weight), relu's, conv's weight gradient, update
    p = tp.phase_ms
    assert tp.critical_path_ms == pytest.approx(
        p["forward"] + p["loss"] + by[("fc", "backward_data")].predicted_ms
        + by[("relu", "backward_data")].predicted_ms + by[("conv", "backward_weight")].predicted_ms + p["optimizer"])
    # a call's FLOPs and bytes are its own kind's: the conv's weight gradient is not the conv
    configs = {(ml.layers[c.layer].name, c.phase): c.config for c in step.calls}
    for k, cfg in configs.items():
        assert by[k].intensity == pytest.approx(roofline.intensity(cfg, "fp32"))
        assert by[k].work_units == pytest.approx(work_units(cfg, "fp32"))
    fc = next(lp for lp in fwd.layers if lp.name == "fc")
    # the MatMul's data gradient: a 64 x 16384 output (256 tiles), not the forward's 64 x 10 (one)
    assert fc.work_units == 1 and by[("fc", "backward_data")].work_units == 256
    # the conv's weight gradient: CUTLASS's Wgrad GEMM (16 x 27 output, one tile), not the forward's
    # 64 x 1024 positions x 16 channels; split over its reduction (no cuDNN bias gradient in its
    # call), its bytes over 8 KiB
    conv = next(lp for lp in fwd.layers if lp.name == "conv")
    wgrad = configs[("conv", "backward_weight")]
    assert conv.work_units == 1024 and by[("conv", "backward_weight")].work_units == pytest.approx(
        roofline.min_bytes(wgrad, "fp32") / 8192) and work_units(wgrad, "fp32", unsplit=True) == 1
    assert tp.fits and tp.memory_bytes == step.memory.total
    d = tp.to_dict()
    assert d["complete"] and d["target"] == "B200" and d["phase_ms"]["loss"] == pytest.approx(p["loss"])


def test_an_incomplete_step_stays_incomplete(tmp_path):
    """The conv's weight gradient unmeasured: no prediction for it (never 0 ms scaled), the
    predicted step is a partial sum with the measured step's note."""
    _, ml, db, _ = _measured(tmp_path, skip={("conv", "backward_weight")})
    step = _step(ml, db)
    tp = predict_training(ml, step, H200, B200)
    assert not tp.complete and tp.step.missing_count == 1
    assert "INCOMPLETE: 1 backward calls without a measurement" in tp.incomplete_note
    miss = [c for c in tp.calls if c.predicted_ms is None]
    assert [(c.kind, c.status, c.origin_ms) for c in miss] == [("ConvBwdFilter", "missing", None)]
    d = tp.to_dict()
    assert d["complete"] is False and d["missing_layers"] == 1 and d["incomplete_note"].startswith("INCOMPLETE")
    c = step.calls[0]
    assert predict_call(c, step, H200, B200).predicted_ms is not None


def test_a_step_too_big_for_the_target_does_not_fit(tmp_path):
    """At batch 131,072 the saved activations (the model input x that the conv's weight gradient
    reads, 1.5 GiB; relu's output b that its gradient reads and the flattened c that the MatMul's
    weight gradient reads, 8 GiB each) put the step's memory bound above a T4's 16 GiB, below a
    B200's."""
    n = 131072
    path, ml, db, dbp = _measured(tmp_path, batch=n, optimizer="adam")
    step = _step(ml, db, "adam")
    assert step.complete, step.incomplete_note
    params = 16 * 27 + 16384 * 10
    assert step.memory.total == 4 * (n * (3 * 1024 + 2 * 16 * 1024) + 4 * params)  # + grads, Adam's 2 states
    assert T4.memory_bytes < step.memory.total < B200.memory_bytes
    small = predict_training(ml, step, H200, T4)
    assert small.fits is False and small.memory_bytes == step.memory.total
    assert small.to_dict()["memory"]["fits"] is False
    assert predict_training(ml, step, H200, B200).fits is True
    p = bz("predict", path, "--batch", n, "--db", dbp, "--layout", "nchw", "--to", "T4", "--train",
           "--optimizer", "adam")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    gib = 2 ** 30
    assert (f"memory: peak >= {step.memory.total / gib:.2f} GiB against T4's {T4.memory_bytes / gib:.1f} GiB: "
            "does NOT fit") in text, text


def test_cli_predict_train(tmp_path):
    path, _, _, db = _measured(tmp_path)
    args = ("predict", path, "--batch", "64", "--db", db, "--layout", "nchw", "--to", "B200", "--train")
    p = bz(*args, "--json")
    assert p.returncode == 0, p.stderr
    d = scenario_of(p.stdout, "predict")
    assert d["origin"] == "H200" and d["target"] == "B200" and d["complete"] and d["optimizer"] == "sgd"
    assert d["critical_path_ms"] < d["origin_critical_path_ms"]
    assert d["origin_phase_ms"]["backward_weight"] == pytest.approx(BWD[("fc", "backward_weight")]
                                                                    + BWD[("conv", "backward_weight")])
    assert d["memory"]["fits"] is True and d["memory"]["target_memory_bytes"] == B200.memory_bytes
    # the error bar from the training validation (db/reference/predict_train_errors.json: Hopper only)
    eb = d["error_bar"]
    assert eb["extrapolated"] is True and eb["architectures"] == ["Hopper"] and eb["relative"] > 0
    assert "ConvBwdFilter backward_weight" in eb["by_kind"] and eb["model_mean_abs_error"] > 0
    p = bz(*args)
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    for phase in ("forward", "loss", "backward_data", "backward_weight", "optimizer", "critical path (LBL)"):
        assert phase in text
    assert "measured on H200 ->" in text and "predicted on B200" in text and "may fit" in text
    assert "error bar: +/-" in text and "call kinds and phases in fp32" in text and "validated on Hopper GPUs only" in text
    # relu's data gradient not measured: that phase and the totals are partial sums, marked
    path2, _, _, db2 = _measured(tmp_path / "partial", skip={("relu", "backward_data")})
    p = bz("predict", path2, "--batch", "64", "--db", db2, "--layout", "nchw", "--to", "L4", "--train")
    assert p.returncode == 0, p.stderr
    rows = {ln.split("│")[1].strip(): ln for ln in p.stdout.splitlines() if ln.count("│") > 3}
    assert "incomplete" in rows["backward_data"] and "incomplete" not in rows["backward_weight"]
    assert "INCOMPLETE: 1 backward calls without a measurement" in " ".join(p.stdout.split())
    # adam's update is not measured: the step is incomplete, and the table says so
    p = bz(*args, "--optimizer", "adam")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "not measured" in text and "INCOMPLETE" in text and "adam step over" in text


@pytest.mark.parametrize("extra,msg", [
    (("--optimizer", "adam"), "--optimizer goes with --train"),
    (("--train", "--optimizer", "lamb"), "--optimizer must be one of sgd, adam, adamw"),
    (("--train", "--to", "MI300X"), "unknown GPU 'MI300X'"),
    (("--train", "--memory", "hbm"), "--memory must be one of l2, dram"),
])
def test_cli_predict_train_bad_input_is_one_line(tmp_path, extra, msg):
    path, _, _, db = _measured(tmp_path)
    to = () if "--to" in extra else ("--to", "B200")
    p = bz("predict", path, "--batch", "64", "--db", db, *to, *extra)
    assert msg in one_line_error(p, 2)


def test_a_weight_gradient_splits_its_reduction_unless_it_ran_far_below_its_roofline(tmp_path):
    """The span of a weight gradient (benanza.analysis.predict, "Span"): split over its long reduction
    (P = its bytes over 8 KiB) when the origin ran it at 5 % of its roofline or more; its output
    tiles alone when under and its call ends with cuDNN's bias gradient (squeezenet1_1's 16-channel
    weight gradients, bias and all, ran 1.1x slower on 32 of an H200's 132 SMs)."""
    from benanza.analysis.predict import WGRAD_UNSPLIT_EFFICIENCY, wgrad_unsplit

    _, ml, db, _ = _measured(tmp_path)
    cfg = next(c.config for c in training_plan(ml).calls if c.config.kind == "ConvBwdFilter")
    floor_ms = max(cfg.flops() / H200.peak_flops("fp32"), roofline.min_bytes(cfg, "fp32") / H200.bandwidth) * 1e3
    split = roofline.min_bytes(cfg, "fp32") / 8192
    assert split > 1
    fast, slow = floor_ms / (2 * WGRAD_UNSPLIT_EFFICIENCY), floor_ms / (0.5 * WGRAD_UNSPLIT_EFFICIENCY)
    assert not wgrad_unsplit(cfg, "fp32", None, fast, H200) and wgrad_unsplit(cfg, "fp32", None, slow, H200)
    assert work_units(cfg, "fp32", unsplit=False) == pytest.approx(split)
    assert work_units(cfg, "fp32", unsplit=True) == 1  # 16 x 27: one 64 x 64 tile
    # another kind, or no time, is never unsplit
    fc = next(c.config for c in training_plan(ml).calls if c.config.kind == "Gemm")
    assert not wgrad_unsplit(fc, "fp32", None, 1e3, H200) and not wgrad_unsplit(cfg, "fp32", None, None, H200)
    # with the measured call known, only cuDNN's legacy bias gradient makes it unsplit: a first layer of
    # 3 channels without a bias (resnet18's 7x7) ran 3.4x faster on 132 than on 32 of an H200's SMs, and
    # alexnet's with benanza's bias reduction (bf16) too (benchmarks/results/2026-11-28b)
    assert wgrad_unsplit(cfg, "fp32", None, slow, H200, "cudnnConvolutionBackwardFilter+cudnnConvolutionBackwardBias")
    assert wgrad_unsplit(cfg, "fp32", None, slow, H200,
                         "cudnnBackendExecute(conv_wgrad)+cudnnConvolutionBackwardBias")
    for call in ("cudnnBackendExecute(conv_wgrad)", "cudnnConvolutionBackwardFilter",
                 "cudnnBackendExecute(conv_wgrad)+benanza::reduce(bias)", ""):
        assert not wgrad_unsplit(cfg, "fp32", None, slow, H200, call)
    assert not wgrad_unsplit(cfg, "fp32", None, fast, H200,
                             "cudnnConvolutionBackwardFilter+cudnnConvolutionBackwardBias")
