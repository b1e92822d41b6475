"""LRN's backward in a training step (issue 26): the LRNBwd kind (cudnnLRNCrossChannelBackward with the
forward's descriptor) as the LRN kind's ``Kind.backward``; the gradient formula its docstring states
against finite differences of ONNX LRN's forward; FLOPs and minimum bytes by arithmetic; a training plan
of a model with an LRN is whole; the PyTorch candidate (autograd of F.local_response_norm); a suite that
renders, with a hostile node name, and whose source passes g++ -fsyntax-only."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.base import numel
from benanza.kinds.framework import Ctx
from benanza.processing.model import Layer, ModelLayers, process
from benanza.processing.training import training_plan
from onnx_builders import HOSTILE
from test_unary_backward import syntax_check


def _lrn(x, size, alpha, beta, bias):
    """ONNX LRN-13's reference: square_sum over channels c - floor((size-1)/2) .. c + ceil((size-1)/2)."""
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    sq = np.zeros_like(x)
    for i in range(c):
        sq[:, i] = (x[:, max(0, i - lo):min(c, i + hi + 1)] ** 2).sum(axis=1)
    return x / (bias + alpha / size * sq) ** beta, sq


def _lrn_grad(x, dy, size, alpha, beta, bias):
    """The formula of :class:`benanza.kinds.LRNBwdConfig`'s docstring."""
    y, sq = _lrn(x, size, alpha, beta, bias)
    s = bias + alpha / size * sq
    c = x.shape[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    t = dy * y / s
    acc = np.zeros_like(x)
    for i in range(c):  # the j whose window holds i: j - lo <= i <= j + hi
        acc[:, i] = t[:, max(0, i - hi):min(c, i + lo + 1)].sum(axis=1)
    return dy * s ** -beta - 2 * alpha * beta / size * x * acc


def test_the_stated_gradient_is_the_forwards_derivative():
    rng = np.random.default_rng(0)
    for size in (1, 3, 4, 5):
        x = rng.standard_normal((2, 7, 3, 2))
        dy = rng.standard_normal(x.shape)
        args = (size, 0.3, 0.75, 1.5)
        g = _lrn_grad(x, dy, *args)
        fd = np.zeros_like(x)
        h = 1e-6
        for idx in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[idx] = h
            fd[idx] = ((_lrn(x + e, *args)[0] - _lrn(x - e, *args)[0]) * dy).sum() / (2 * h)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_the_backward_call_flops_and_bytes():
    fwd = L.LRNConfig(shape=(32, 64, 56, 56), size=5, alpha=1e-4, beta=0.75, bias=2.0)
    (phase, cfg), = L.REGISTRY["LRN"].backward(fwd)
    assert phase == "backward_data" and cfg == L.LRNBwdConfig(shape=(32, 64, 56, 56), size=5, alpha=1e-4, beta=0.75,
                                                              bias=2.0)
    assert cfg.forward == fwd and cfg.kind == "LRNBwd"
    n = 32 * 64 * 56 * 56
    assert cfg.input_shapes() == [fwd.shape, fwd.shape] and cfg.output_shape() == fwd.shape
    assert cfg.flops() == n * (2 * 5 + 11)
    assert min_bytes(cfg, "fp16") == 3 * 2 * n and min_bytes(cfg, "fp32") == 3 * 4 * n  # dy, x read; dx written


def test_a_training_plan_with_an_lrn_is_whole(tmp_path):
    """Conv -> LRN: the LRN's data gradient is planned (the input needs none, so the Conv has its
    weight gradient only)."""
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("LRN", ["a"], ["y"], name="lrn", size=3, alpha=0.25, beta=0.5, bias=1.5)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 8, 8])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    ml = process(tmp_path / "m.onnx", 2)
    plan = training_plan(ml)
    assert not plan.no_backward
    lrn = [c.config for c in plan.calls if ml.layers[c.layer].name == "lrn"]
    assert lrn == [L.LRNBwdConfig(shape=(2, 8, 8, 8), size=3, alpha=0.25, beta=0.5, bias=1.5)]


def test_the_pytorch_candidate_is_autograd_of_local_response_norm():
    from test_kinds_registry import _Recorder

    cfg = L.LRNBwdConfig(shape=(2, 8, 5, 5), size=3, alpha=1e-4, beta=0.75, bias=1.0)
    cand = L.REGISTRY["LRNBwd"].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), False))
    assert cand.call == "torch:aten::local_response_norm" and cand.algorithm == "autograd backward"
    assert cand.out_numel == 400 and "no fused LRN backward" in cand.note


def _model(batch: int) -> ModelLayers:
    cfgs = [L.LRNBwdConfig(shape=(batch, 64, 56, 56), size=5, alpha=1e-4, beta=0.75, bias=1.0),
            L.LRNBwdConfig(shape=(batch, 3, 5, 7), size=16, alpha=0.5, beta=0.25, bias=2.0)]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"bwd{i}", op_type="Backward", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="lrnbwd", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=13,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    suite = generate([_model(1), _model(32)], ["fp32", "fp16"], tmp_path / "s", layouts=["NCHW", "NHWC"])
    assert {j.kind for j in suite.jobs} == {"LRNBwd"} and len(suite.jobs) == 2 * 2 * 2
    assert {j.layout for j in suite.jobs} == {"NCHW"}
    src = (tmp_path / "s" / "src" / "lrnbwd.cpp").read_text()
    assert "cudnnLRNCrossChannelBackward(" in src and "{32, 3, 5, 7}, 16, 0.5, 0.25, 2.0" in src
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src
    assert numel(_model(1).layers[0].config.shape) == 64 * 56 * 56
    syntax_check(tmp_path / "s", "lrnbwd.cpp")
