"""ReduceMax and ReduceMin's backward in a training step (issue 26): PyTorch's ``amax`` / ``amin``
gradient (``scale_grad_by_count``: the gradient shared equally among the elements that tie for the
extremum) as four calls of existing kinds, Elementwise equal, ReduceSum, Elementwise div and Where; the
calls' shapes, their composition computed with numpy against finite differences (no ties) and against
PyTorch's documented equal split (ties), and a training plan of a model with both reductions whole."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.processing.model import process
from benanza.processing.training import training_plan


def _backward(cfg):
    return L.REGISTRY[cfg.kind].backward(cfg)


def test_the_four_calls_and_their_shapes():
    E, R, W = L.ElementwiseConfig, L.ReduceConfig, L.WhereConfig
    x, y = (32, 12, 197, 197), (32, 12, 197, 1)
    for op in ("max", "min"):
        assert _backward(R(op=op, x=x, y=y)) == (
            ("backward_data", E(op="equal", a=x, b=y)),  # mask = x == Y (bool, x's shape)
            ("backward_data", R(op="sum", x=x, y=y)),  # count of the ties
            ("backward_data", E(op="div", a=y, b=y)),  # dy / count
            ("backward_data", W(cond=x, a=y, b=(1, 1, 1, 1))))  # mask ? q : 0, x's shape
    calls = [c for _, c in _backward(R(op="max", x=x, y=y))]
    assert calls[0].out_dtype == "bool" and calls[-1].output_shape() == x and calls[2].output_shape() == y
    assert _backward(R(op="max", x=(4, 1, 3), y=(4, 1, 3))) == ()  # reduces nothing: passes through
    # ReduceSum / ReduceMean keep their Expand
    assert _backward(R(op="mean", x=x, y=y))[0][1].kind == "Copy"


def _compose(x, y_shape_axes, dy, op):
    """The four calls in numpy, as the plan lists them."""
    Y = (x.max if op == "max" else x.min)(axis=y_shape_axes, keepdims=True)
    mask = x == Y  # Elementwise equal
    count = mask.astype(np.float64).sum(axis=y_shape_axes, keepdims=True)  # ReduceSum
    q = dy / count  # Elementwise div
    return np.where(mask, q, 0.0)  # Where


def test_the_calls_compute_the_gradient():
    rng = np.random.default_rng(1)
    axes = (1, 3)
    for op in ("max", "min"):
        x = rng.standard_normal((2, 5, 3, 4))
        dy = rng.standard_normal((2, 1, 3, 1))
        f = (np.max if op == "max" else np.min)
        h, fd = 1e-6, np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[idx] = h
            fd[idx] = ((f(x + e, axis=axes, keepdims=True) - f(x - e, axis=axes, keepdims=True)) * dy).sum() / (2 * h)
        np.testing.assert_allclose(_compose(x, axes, dy, op), fd, atol=1e-8)
    # ties: PyTorch's amax/amin "evenly distribute gradient between equal values"
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0]])
    np.testing.assert_allclose(_compose(x, (1,), np.array([[6.0]]), "max"), [[0, 2, 2, 0, 2]])
    np.testing.assert_allclose(_compose(x, (1,), np.array([[6.0]]), "min"), [[6, 0, 0, 0, 0]])


def test_a_training_plan_with_reduce_max_and_min_is_whole(tmp_path):
    """x -> MatMul(w) -> a; ReduceMax(a, axis 1) and ReduceMin(a, axis 1), added: each reduction has its
    four calls, and nothing is left without a backward."""
    w = numpy_helper.from_array(np.zeros((16, 16), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
             helper.make_node("ReduceMax", ["a"], ["mx"], name="rmax", axes=[1], keepdims=1),
             helper.make_node("ReduceMin", ["a"], ["mn"], name="rmin", axes=[1], keepdims=1),
             helper.make_node("Add", ["mx", "mn"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    ml = process(tmp_path / "m.onnx", 4)
    plan = training_plan(ml)
    assert not plan.no_backward
    for name in ("rmax", "rmin"):
        kinds = [c.config.describe() for c in plan.calls if ml.layers[c.layer].name == name]
        assert kinds == ["Elementwise(equal 4x16,4x1)", "Reduce(4x16 -> 4x1)", "Elementwise(div 4x1,4x1)",
                         "Where(4x16,4x1,1x1)"]
