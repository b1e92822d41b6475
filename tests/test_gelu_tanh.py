"""GELU's tanh approximation found as one group (issue 27): GPT-2's NewGELUActivation as torch.export and
TorchScript write it (Pow 3, Mul 0.044715, Add, Mul sqrt(2/pi), Tanh, Add 1, Mul, Mul 0.5) becomes one
UnaryConfig gelu_tanh fusion candidate (timed by the Unary kind: benanza's kernel, cuDNN's
GELU_APPROX_TANH_FWD, torch's gelu(approximate="tanh"); its backward is gelu_backward's tanh form); a chain
with another constant is no GELU."""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.kinds.unary import GELU_TANH_C, GELU_TANH_K
from benanza.processing.model import process
from conftest import REPO

DEC = REPO / "tests" / "data" / "decoders"
OPS = ["Mul", "Pow", "Mul", "Add", "Mul", "Tanh", "Add", "Mul"]


@pytest.mark.parametrize("name", ["gpt2_prefill_dynamo20", "gpt2_prefill_torchscript"])
def test_gpt2s_gelus_are_one_group_each(name):
    ml = process(DEC / f"{name}.onnx", 2, {"seq": 128})
    groups = [f for f in ml.fusions if isinstance(f.config, L.UnaryConfig)]
    assert len(groups) == 2  # one per decoder layer's MLP
    for f in groups:
        assert f.config == L.UnaryConfig(shape=(2, 128, 512), op="gelu_tanh")
        assert [ml.layers[i].op_type for i in f.layers] == OPS
    assert not [ly for ly in ml.layers if ly.op_type == "Tanh" and ly.fusion is None]
    assert L.REGISTRY["Unary"].backward(groups[0].config)  # gelu_backward (approximate tanh)


def _chain(c: float, k: float):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])
    consts = [helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in
              (("three", 3.0), ("c", c), ("k", k), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("Pow", ["x", "three"], ["p"]), helper.make_node("Mul", ["p", "c"], ["pc"]),
             helper.make_node("Add", ["x", "pc"], ["i"]), helper.make_node("Mul", ["i", "k"], ["s"]),
             helper.make_node("Tanh", ["s"], ["t"]), helper.make_node("Add", ["t", "one"], ["a"]),
             helper.make_node("Mul", ["x", "a"], ["xa"]), helper.make_node("Mul", ["xa", "half"], ["y"])]
    g = helper.make_graph(nodes, "g", [x], [y], initializer=consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("c,k,found", [(GELU_TANH_C, GELU_TANH_K, True), (0.05, GELU_TANH_K, False),
                                       (GELU_TANH_C, 0.8 * GELU_TANH_K, False)])
def test_the_x_times_then_half_form_and_wrong_constants(tmp_path, c, k, found):
    onnx.save(_chain(c, k), tmp_path / "m.onnx")
    ml = process(tmp_path / "m.onnx", 2)
    assert [f.config for f in ml.fusions] == ([L.UnaryConfig(shape=(2, 8), op="gelu_tanh")] if found else [])


def test_the_constants_are_the_tanh_approximation_of_erf_gelu():
    """0.5 x (1 + tanh(k (x + c x^3))) with the module's k and c is within 1e-3 of x Phi(x) = 0.5 x (1 +
    erf(x / sqrt 2)) (Hendrycks and Gimpel, 2016): the constants are the approximation's."""
    x = np.linspace(-6, 6, 2001)
    approx = 0.5 * x * (1 + np.tanh(GELU_TANH_K * (x + GELU_TANH_C * x ** 3)))
    exact = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    assert np.max(np.abs(approx - exact)) < 1e-3
