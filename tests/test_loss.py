"""The training step's loss (issue 26): the CrossEntropyLoss kind (forward and backward of
cross-entropy with class indices, reduction mean), the loss config taken from a model's output
(:func:`benanza.processing.training.loss_config`), its job in ``bench --train``'s suite, and its term
in the step: after the forward pass, before the gradients, in ``phase_ms["loss"]``; a model without
logits has its loss not counted (and says so) and stays complete."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.analyzer import analyze
from benanza.analysis.roofline import min_bytes
from benanza.analysis.training import training_step
from benanza.generation.generator import plan_jobs
from benanza.kinds.base import Job
from benanza.kinds.framework import Ctx
from benanza.processing.model import process
from benanza.processing.training import loss_config, optimizer_config, training_plan
from conftest import REPO
from test_kinds_registry import _Recorder
from test_lbl_truth import _measure, _system_db
from test_training_step import _chain, _stand_ins


def _loss(x: np.ndarray, t: np.ndarray) -> float:
    """F.cross_entropy(x, t): mean over rows of logsumexp(x_r) - x_r[t_r] (float64)."""
    m = x.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    return float(np.mean(lse - x[np.arange(len(t)), t]))


def test_the_gradient_formula_is_the_losss_derivative():
    """dx = (softmax(x) - onehot(t)) / rows, what the kernels write, against central differences."""
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((5, 7)) * 3, rng.integers(0, 7, 5)
    p = np.exp(x - x.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    onehot = np.eye(7)[t]
    dx = (p - onehot) / 5
    fd = np.zeros_like(x)
    for k in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[k] = 1e-6
        fd[k] = (_loss(x + e, t) - _loss(x - e, t)) / 2e-6
    np.testing.assert_allclose(dx, fd, atol=1e-8)
    # the log-softmax route (cudnnSoftmaxForward LOG + benanza's nll kernel): the same loss and gradient
    logp = x - (x.max(1, keepdims=True) + np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)))
    assert -np.mean(logp[np.arange(5), t]) == pytest.approx(_loss(x, t))
    np.testing.assert_allclose((np.exp(logp) - onehot) / 5, dx, atol=1e-15)


def test_the_config_case_bytes_and_candidate():
    cfg = L.CrossEntropyLossConfig(logits=(35, 8, 32000))
    assert (cfg.rows, cfg.classes) == (280, 32000) and cfg.input_shapes() == [(35, 8, 32000), (280,)]
    assert cfg.flops() == 6 * 280 * 32000 and cfg.output_shape() == (35, 8, 32000)
    assert min_bytes(cfg, "fp16") == 2 * 280 * 32000 * 2 + 8 * 280 + 4
    case = L.REGISTRY["CrossEntropyLoss"].case(cfg, Job(id="x.fp16", config=cfg, precision="fp16", node="loss"))
    assert (case.rows, case.classes) == (280, 32000)
    with pytest.raises(ValueError, match="2\\^31"):
        L.REGISTRY["CrossEntropyLoss"].case(L.CrossEntropyLossConfig(logits=(1 << 16, 1 << 15)),
                                            Job(id="y.fp16", config=cfg, precision="fp16", node="loss"))
    c = L.REGISTRY["CrossEntropyLoss"].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), False))
    assert c.call == "torch:aten::_log_softmax+nll_loss_forward+nll_loss_backward+_log_softmax_backward_data"
    assert c.out_numel == 280 * 32000
    assert L.REGISTRY["CrossEntropyLoss"].phase == "loss" and "loss" in L.STEP_PHASES


@pytest.mark.parametrize("model,batch,logits", [
    ("tests/data/zoo/models/vit_b_16.onnx", 32, (32, 1000)),
    ("tests/data/zoo/models/densenet121.onnx", 4, (4, 1000)),
    ("tests/data/zoo/models/lstm_lm.onnx", 8, (35, 8, 32000))])
def test_the_loss_of_classifiers_and_a_language_model(model, batch, logits):
    cfg, note = loss_config(process(REPO / model, batch))
    assert cfg == L.CrossEntropyLossConfig(logits=logits) and "taken as logits" in note


def _chain_logits(path):
    """_chain's Conv -> Sigmoid -> Conv, then Flatten to (N, 1024) logits."""
    _chain(path)
    m = onnx.load(str(path))
    m.graph.node.append(helper.make_node("Flatten", ["y"], ["logits"], name="flatten"))
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 1024]))
    onnx.save(m, str(path))
    return path


def test_a_model_without_logits_has_no_loss(tmp_path):
    ml = process(_chain(tmp_path / "m.onnx"), 2)  # its output is (N, 16, 8, 8)
    cfg, why = loss_config(ml)
    assert cfg is None and why.startswith("the loss is not counted")
    assert not [j for j in plan_jobs([ml], ["fp32"], ["NCHW"], train=True) if j.kind == "CrossEntropyLoss"]


def test_an_integer_output_is_no_logits(tmp_path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 5)).astype(np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"], name="fc"),
             helper.make_node("ArgMax", ["y"], ["cls"], name="argmax", axis=1, keepdims=1)]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                          [helper.make_tensor_value_info("cls", TensorProto.INT64, ["N", 1]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], [w])
    path = tmp_path / "i.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    cfg, _ = loss_config(process(path, 3))
    assert cfg == L.CrossEntropyLossConfig(logits=(3, 5))


def test_the_loss_in_the_step(tmp_path, monkeypatch, capsys):
    """test_training_step's chain with its output flattened into logits: the loss runs after the
    forward pass and before the gradients, and counts in the sums."""
    _stand_ins(monkeypatch)
    ml = process(_chain_logits(tmp_path / "m.onnx"), 2)
    loss, _ = loss_config(ml)
    assert loss == L.CrossEntropyLossConfig(logits=(2, 1024))
    jobs = plan_jobs([ml], ["fp32"], ["NCHW"], train=True)
    assert [j.config for j in jobs if j.kind == "CrossEntropyLoss"] == [loss]
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    by_name = {ly.name: ly for ly in ml.layers}
    for name, ms in {"conv1": 1.0, "act": 0.5, "conv2": 2.0}.items():
        _measure(db, sid, by_name[name].config, "fp32", [("lib", ms)])
    plan = training_plan(ml)
    bwd = {("conv2", "backward_data"): 3.0, ("conv2", "backward_weight"): 4.0, ("act", "backward_data"): 0.5,
           ("conv1", "backward_weight"): 6.0}
    for c in plan.calls:
        _measure(db, sid, c.config, "fp32", [("lib", bwd[(ml.layers[c.layer].name, c.phase)])])
    _measure(db, sid, optimizer_config(ml, "sgd"), "fp32", [("lib", 0.7)])
    system = db.systems()[0]
    a = analyze(ml, db, system, "fp32", layouts=("NCHW",))
    t = training_step(ml, a, db, system)
    # the loss unmeasured: incomplete, named, never 0
    assert not t.complete and t.missing_count == 1 and t.phase_ms["loss"] is None
    assert "the loss (CrossEntropyLoss(2x1024, 1024 classes)) has no valid measurement" in t.incomplete_note
    _measure(db, sid, loss, "fp32", [("lib", 0.25)])
    t = training_step(ml, a, db, system)
    assert t.complete and t.phase_ms["loss"] == pytest.approx(0.25)
    assert list(t.phase_ms) == list(L.STEP_PHASES)
    assert t.sequential_ms == pytest.approx(17.7 + 0.25)
    # forward ends at 3.5, the loss at 3.75; conv2's gradients 3.75 -> 6.75 (data) and -> 7.75
    # (weight); act's 6.75 -> 7.25; conv1's weight gradient 7.25 -> 13.25; the optimizer -> 13.95
    assert t.critical_path_ms == pytest.approx(13.95)
    assert any("taken as logits" in n for n in t.notes)
    assert t.to_dict()["phase_ms"]["loss"] == pytest.approx(0.25)
    from benanza.reports.lbl import print_training

    print_training([t], True)  # the table shows the loss column
    assert "0.2500" in capsys.readouterr().out


def test_without_logits_the_loss_is_not_counted_and_the_step_stays_complete(tmp_path, monkeypatch):
    _stand_ins(monkeypatch)
    ml = process(_chain(tmp_path / "m.onnx"), 2)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in list(ml.unique_configs().values()) + list(training_plan(ml).configs().values()):
        _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    _measure(db, sid, optimizer_config(ml, "sgd"), "fp32", [("lib", 1.0)])
    system = db.systems()[0]
    t = training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system)
    assert t.complete and t.phase_ms["loss"] is None
    assert any(n.startswith("the loss is not counted") for n in t.notes)
