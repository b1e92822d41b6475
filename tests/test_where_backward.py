"""The gradients of Where (BERT's attention mask) and of the elementwise ops beyond Add/Sub/Mul (Div,
Max, Min, Mean, Pow with a tensor exponent) in a training step (issue 26): bert_dynamic planned with
no layer left without a backward; the calls of real ONNX nodes (shapes, phases, the constant fill
that gets no gradient, broadcast operands reduced); the Where calls' FLOPs and minimum bytes. (The
calls render and compile in test_rnn_backward.py's suites, which have Where, Max and Div layers.)"""
from __future__ import annotations

import pytest

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.kinds.base import numel
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from onnx_builders import elementwise_ops_model

BERT = REPO / "tests" / "data" / "bert_dynamic.onnx"
E, W, R, U = L.ElementwiseConfig, L.WhereConfig, L.ReduceConfig, L.UnaryConfig


def _backward(cfg):
    return L.REGISTRY[cfg.kind].backward(cfg)


def test_bert_dynamic_has_every_backward():
    """bert_dynamic at batch 32: the mask's Where(cond, 0, -inf) of two constants takes no gradient (its
    inputs are a bool and constants: ``TrainingPlan.no_gradient``); each attention's Where(mask, -inf, scores) differentiates the scores only:
    where(mask, 0, g), one Where call of the forward's shapes."""
    ml = process(BERT, 32)
    plan = training_plan(ml)
    assert plan.no_backward == []
    wheres = {ly.name: ly for ly in ml.layers if ly.op_type == "Where"}
    assert set(wheres) == {"node_Where_110", "node_Where_115", "node_Where_181"}
    assert "constants only" in plan.no_gradient[wheres["node_Where_110"].index]
    for name in ("node_Where_115", "node_Where_181"):
        ly = wheres[name]
        assert ly.config == W(cond=(32, 4, 16, 16), a=(1, 1, 1, 1), b=(32, 4, 16, 16))
        calls = [(c.phase, c.config) for c in plan.calls if c.layer == ly.index]
        assert calls == [("backward_data", W(cond=(32, 4, 16, 16), a=(1, 1, 1, 1), b=(32, 4, 16, 16)))]


def test_where_gradients():
    """derivatives.yaml where.self: self where(c, grad, 0), other where(c, 0, grad); broadcast
    operands reduced (a parameter's with phase backward_weight), one-element operands constants."""
    y = (8, 4, 16)
    both = W(cond=y, a=y, b=y)
    assert _backward(both) == (("backward_data", W(cond=y, a=y, b=(1, 1, 1))),
                               ("backward_data", W(cond=y, a=(1, 1, 1), b=y)))
    bias = W(cond=(8, 1, 16), a=(1, 4, 16), b=y)  # a: a parameter broadcast over the batch
    assert _backward(bias) == (("backward_data", W(cond=(8, 1, 16), a=(1, 1, 1), b=y)),
                               ("backward_weight", W(cond=(8, 1, 16), a=y, b=(1, 1, 1))),
                               ("backward_weight", R(op="sum", x=y, y=(1, 4, 16))))
    assert _backward(W(cond=y, a=(1, 1, 1), b=(1, 1, 1))) == ()
    # the select moves bytes, no FLOPs: the bool condition, dy and the zero read, the gradient written
    g = W(cond=(32, 4, 16, 16), a=(1, 1, 1, 1), b=(32, 4, 16, 16))
    n = 32 * 4 * 16 * 16
    assert g.flops() == 0
    assert min_bytes(g, "fp16") == n + 2 * (1 + n) + 2 * n


@pytest.fixture(scope="module")
def ew(tmp_path_factory):
    ml = process(elementwise_ops_model(tmp_path_factory.mktemp("ew") / "ew.onnx"), 4)
    return ml, training_plan(ml)


def _node(ew, name):
    ml, plan = ew
    ly = next(ly for ly in ml.layers if ly.name == name)
    return ly.config, [(c.phase, c.config) for c in plan.calls if c.layer == ly.index], ly.index in plan.no_backward


def test_div_max_min_mean_pow_of_real_nodes(ew):
    """The elementwise_ops model's Div(x, x2), Min(x, x2), Pow(x, x2), Mean(x, s) with a (1, 4, 1)
    parameter and Max(col, r) with a (8,) parameter, on [N=4, 4, 8]: their gradient calls (the
    model's inputs need none, so only the parameters' gradients stay in the plan)."""
    y = (4, 4, 8)
    one = (1, 1, 1)
    div, calls, _ = _node(ew, "Div24")
    assert div == E(op="div", a=y, b=y)
    # dA = g / B; dB = -(g / B * Y)
    assert _backward(div) == (("backward_data", E(op="div", a=y, b=y)), ("backward_data", E(op="mul", a=y, b=y)),
                              ("backward_data", U(shape=y, op="neg")))
    assert calls == []  # x and x2 are model inputs: no gradient wanted
    mn, _, _ = _node(ew, "Min16")
    assert _backward(mn) == (("backward_data", E(op="less_equal", a=y, b=y)),
                             ("backward_data", W(cond=y, a=y, b=one)), ("backward_data", W(cond=y, a=one, b=y)))
    pw, _, _ = _node(ew, "Pow0")
    # dA = (g * E) * Y / A; dE = log(A) ... (g * Y) * log(A)
    assert [c for _, c in _backward(pw)] == [E(op="mul", a=y, b=y), E(op="mul", a=y, b=y), E(op="div", a=y, b=y),
                                             U(shape=y, op="log"), E(op="mul", a=y, b=y), E(op="mul", a=y, b=y)]
    mean, calls, _ = _node(ew, "Mean14")
    assert mean == E(op="mean", a=y, b=(1, 4, 1))
    # g * 0.5 serves both operands; the parameter's gradient reads it, so it is a weight-gradient call
    assert _backward(mean) == (("backward_weight", E(op="mul", a=y, b=one)),
                               ("backward_weight", R(op="sum", x=y, y=(1, 4, 1))))
    assert calls == list(_backward(mean))
    mx, calls, _ = _node(ew, "Max15")
    assert mx == E(op="max", a=(4, 4, 1), b=(1, 1, 8))
    assert calls == [("backward_weight", E(op="greater_equal", a=(4, 4, 1), b=(1, 1, 8))),
                     ("backward_weight", W(cond=y, a=one, b=y)), ("backward_weight", R(op="sum", x=y, y=(1, 1, 8)))]
    assert ("backward_data", W(cond=y, a=y, b=one)) in _backward(mx)


def test_constants_and_the_ops_without_a_gradient(ew):
    """A one-element operand (x / 2, max(x, 0)) gets no gradient call; PRelu and fmod stay without a
    backward (the plan says so); integer Mod carries no gradient."""
    y = (2, 3, 5)
    one = (1, 1, 1)
    assert _backward(E(op="div", a=y, b=one)) == (("backward_data", E(op="div", a=y, b=one)),)
    assert _backward(E(op="div", a=one, b=y)) == (
        ("backward_data", E(op="div", a=y, b=y)), ("backward_data", E(op="mul", a=y, b=y)),
        ("backward_data", U(shape=y, op="neg")))
    assert _backward(E(op="max", a=y, b=one)) == (("backward_data", E(op="greater_equal", a=y, b=one)),
                                                  ("backward_data", W(cond=y, a=y, b=one)))
    assert _backward(E(op="pow", a=one, b=y)) == (
        ("backward_data", U(shape=one, op="log")), ("backward_data", E(op="mul", a=y, b=y)),
        ("backward_data", E(op="mul", a=y, b=one)))
    assert _backward(E(op="prelu", a=y, b=(1, 3, 1))) is None
    assert _backward(E(op="fmod", a=y, b=y)) is None
    for name, missing in (("PRelu1", True), ("Mod18", True), ("Mod17", False)):
        cfg, calls, no_backward = _node(ew, name)
        assert no_backward is missing and calls == []
    assert _backward(E(op="mod", a=y, b=y, dtype="int64")) == ()
    # every call's output is y-shaped or a reduced operand: no call moves more than the forward's tensors
    for op in ("div", "max", "min", "mean", "pow"):
        for c in (c for _, c in _backward(E(op=op, a=y, b=(1, 3, 1)))):
            assert numel(c.output_shape()) <= numel(y)
