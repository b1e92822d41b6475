"""RMSNorm as one layer kind (issue 27): ONNX opset 23 RMSNormalization mapped, the decomposed chain
torch.export (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul) and TorchScript (... Sqrt, Div, Mul, Cast,
Mul) write for transformers' LlamaRMSNorm found as one fusion candidate with the same config, in the
small decoder exports of tests/data/decoders; FLOPs and minimum bytes by arithmetic; the formula the
kernel and cuDNN compute checked against ONNX's reference implementation; bad nodes refused with a
reason; a suite that renders and compiles (its source and the harness's two new translation units)."""
from __future__ import annotations

import dataclasses
import shutil
import site
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.cpp import cpp_string
from benanza.processing.model import Layer, ModelLayers, process
from conftest import REPO
from onnx_builders import HOSTILE
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
R = L.RMSNormConfig
#: LlamaRMSNorm's eps 1e-6 as the exporters store it (float32)
EPS = float(np.float32(1e-6))


@pytest.mark.parametrize("name,eps", [("llama_prefill_dynamo23", EPS), ("phi3_prefill_dynamo23", float(np.float32(1e-5)))])
def test_the_opset_23_operator_is_one_layer(name, eps):
    ml = process(DEC / f"{name}.onnx", 1, {"seq": 128})
    norms = [ly for ly in ml.layers if ly.op_type == "RMSNormalization"]
    assert len(norms) == 5 and all(ly.status == "benchmark" for ly in norms)
    assert {ly.config for ly in norms} == {R(x=(1, 128, 128), axis=2, epsilon=eps)}
    assert "RMSNormalization" not in ml.unsupported()


@pytest.mark.parametrize("name,ops", [
    ("llama_prefill_dynamo20", ["Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal", "Mul", "Mul"]),
    ("llama_prefill_torchscript", ["Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Cast", "Mul"]),
])
def test_the_decomposed_chain_is_one_fusion_candidate(name, ops):
    """Each export's five RMSNorms (two per decoder layer and the final one) as one candidate each, with
    the config the opset 23 operator of the same model maps to (so they share one measurement)."""
    ml = process(DEC / f"{name}.onnx", 4, {"seq": 128})
    groups = [f for f in ml.fusions if f.config.kind == "RMSNorm"]
    assert len(groups) == 5
    for f in groups:
        plain = dataclasses.replace(f.config, residual=False, keep_sum=False)
        assert plain == R(x=(4, 128, 128), axis=2, epsilon=EPS, scale=True)
        # a group after a residual Add takes it in as its first layer (tests/test_residual_norms.py);
        # the final norm also takes the Cast to float32 before it (no other layer reads its output)
        names = [ml.layers[i].op_type for i in f.layers][1 if f.config.residual else 0:]
        assert names in (ops, ["Cast"] + ops)
    assert sum(ml.summary()["fusions_by_kind"].get(k, 0) for k in ("RMSNorm", "Add+RMSNorm")) == 5
    same = process(DEC / "llama_prefill_dynamo23.onnx", 4, {"seq": 128})
    plain = next(f.config for f in groups if not f.config.residual)
    assert {ly.config.key for ly in same.layers if ly.op_type == "RMSNormalization"} == {plain.key}


def _model(nodes, inits, x_shape=(2, 3, 8), opset=23):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x_shape))
    g = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _process(tmp_path, model):
    p = tmp_path / "m.onnx"
    onnx.save(model, p)
    return process(p, 2)


class _Ctx:
    """The mapper's view of a model (benanza.kinds.onnx_map.MapContext): shapes by tensor name."""

    def __init__(self, shapes):
        self.shapes = shapes

    def shape(self, name):
        return self.shapes.get(name)


@pytest.mark.parametrize("attrs,w,reason", [
    ({"axis": 5}, (8,), "axis 5 out of range for rank 3"), ({"stash_type": 10}, (8,), "stash_type 10"),
    ({}, (3,), "a Scale of shape [3] that is not one value per normalised element ([8])"),
    ({}, None, "without its Scale input")])
def test_a_node_it_cannot_time_is_unsupported_with_its_reason(attrs, w, reason):
    from benanza.kinds.onnx_map import Unsupported, node_attrs

    node = helper.make_node("RMSNormalization", ["x", "w" if w else ""], ["y"], name=HOSTILE, **attrs)
    with pytest.raises(Unsupported, match=reason.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        L.REGISTRY["RMSNorm"].onnx["RMSNormalization"](node, _Ctx({"x": (2, 3, 8), "w": w}), node_attrs(node))


def test_axis_and_epsilon_are_read():
    cfg = R(x=(2, 3, 8), axis=1, epsilon=1e-5)
    assert (cfg.rows, cfg.cols) == (2, 24)
    with pytest.raises(ValueError, match="axis 3 out of range"):
        R(x=(2, 3, 8), axis=3, epsilon=1e-5)


def test_an_unscaled_chain_and_a_chain_that_is_not_rmsnorm(tmp_path):
    """x * rsqrt(mean(x^2) + eps) without a weight is an RMSNorm with ``scale`` False; the same chain
    with x - mean (a LayerNorm's variance) or mean over a leading dim is no RMSNorm."""
    def chain(reduce_axes, square_of="x"):
        c = [helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in (("two", 2.0), ("eps", 1e-5))]
        c.append(helper.make_tensor("axes", TensorProto.INT64, [len(reduce_axes)], reduce_axes))
        nodes = [helper.make_node("Pow", [square_of, "two"], ["p"]),
                 helper.make_node("ReduceMean", ["p", "axes"], ["m"], keepdims=1),
                 helper.make_node("Add", ["m", "eps"], ["a"]), helper.make_node("Sqrt", ["a"], ["s"]),
                 helper.make_node("Reciprocal", ["s"], ["r"]), helper.make_node("Mul", ["x", "r"], ["y"])]
        return nodes, c

    nodes, c = chain([-1])
    ml = _process(tmp_path, _model(nodes, c))
    assert [f.config for f in ml.fusions] == [R(x=(2, 3, 8), axis=2, epsilon=float(np.float32(1e-5)), scale=False)]
    assert R(x=(2, 3, 8), axis=2, epsilon=1e-5, scale=False).describe() == "RMSNorm(2x3x8 axis 2 eps 1e-05 no-scale)"
    nodes, c = chain([0])
    assert not _process(tmp_path, _model(nodes, c)).fusions
    nodes, c = chain([-1], square_of="d")
    c.append(helper.make_tensor("mu", TensorProto.FLOAT, [], [0.25]))
    ml = _process(tmp_path, _model([helper.make_node("Sub", ["x", "mu"], ["d"])] + nodes, c))
    assert not [f for f in ml.fusions if f.config.kind == "RMSNorm"]


def test_the_formula_is_onnxs():
    """The kernel's and cuDNN's y = x * rsqrt(mean(x^2) + eps) * scale (float32 statistics), in numpy,
    against ONNX's reference implementation of RMSNormalization (axis 1 of a rank-3 tensor)."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    node = helper.make_node("RMSNormalization", ["x", "w"], ["y"], axis=1, epsilon=1e-3)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
                                        for n, v in (("x", x), ("w", w))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))])
    ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))
    (y,) = ref.run(None, {"x": x, "w": w})
    rows = x.reshape(2, 12)
    ours = rows / np.sqrt((rows * rows).mean(axis=1, keepdims=True) + 1e-3) * w.reshape(1, 12)
    np.testing.assert_allclose(y.reshape(2, 12), ours, rtol=1e-5, atol=1e-6)


def test_flops_and_bytes():
    cfg = R(x=(4, 128, 2048), axis=2, epsilon=EPS)
    n = 4 * 128 * 2048
    assert cfg.flops() == 4 * n and cfg.input_shapes() == [(4, 128, 2048), (2048,)]
    # x read and y written at 2 bytes (fp16), the float32 scale read once
    assert min_bytes(cfg, "fp16") == 2 * n + 2 * n + 4 * 2048
    assert min_bytes(cfg, "fp32") == 4 * n + 4 * n + 4 * 2048


def _suite_model(batch):
    cfgs = [R(x=(batch, 128, 4096), axis=2, epsilon=EPS), R(x=(batch, 7, 96), axis=1, epsilon=1e-5, scale=False)]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"rms{i}", op_type="RMSNormalization", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="rms", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=23,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def _wheels() -> Path | None:
    return next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia" / "cu13" / "include").is_dir()), None)


def test_the_suite_renders_and_compiles(tmp_path):
    """The RMSNorm suite's source (g++ -fsyntax-only, as the other kinds'), the harness's
    rmsnorm_engines.cpp without the cudnn-frontend headers; with them, and rmsnorm_kernels.cu, it compiles in
    the session's harness build (conftest.harness, checked in tests/test_harness_build.py)."""
    suite = generate([_suite_model(1), _suite_model(8)], ["fp32", "fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"RMSNorm"} and len(suite.jobs) == 4 * 2
    src = (tmp_path / "s" / "src" / "rmsnorm.cpp").read_text()
    assert "rmsnorm_kernel(" in src and "run_rmsnorm_engines(" in src
    assert "128, 4096, 9.999999974752427e-07," in src and "1024, 4096, 9.999999974752427e-07," in src
    assert "1, 672, 1e-05," in src and "8, 672, 1e-05," in src  # axis 1: rows the batch, cols 7 * 96
    assert cpp_string(HOSTILE) in src and cpp_string("no scale in the model: timed with a scale vector") in src
    syntax_check(tmp_path / "s", "rmsnorm.cpp")
    sp = _wheels()
    if not shutil.which("g++") or sp is None:
        pytest.skip("g++ or the pip wheels' CUDA/cuDNN/cuBLAS headers are missing")
    inc = [REPO / "cpp" / "include", sp / "nvidia" / "cudnn" / "include", sp / "nvidia" / "cu13" / "include",
           sp / "include"]
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DBENANZA_WITH_FRONTEND=0", *[f"-I{p}" for p in inc],
                        str(REPO / "cpp" / "src" / "rmsnorm_engines.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
