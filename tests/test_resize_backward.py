"""Resize's backward in a training step (issue 26): the ResizeBwd kind (benanza::resize_backward_kernel, a
zero fill and an atomicAdd scatter of dy into the taps) as the Resize kind's ``Kind.backward``; the numpy
scatter of the kernel's taps (resize_backward_reference) against the transpose of onnx's reference
Resize (built column by column) and against a 2x2-block sum for a nearest x2 upsample; FLOPs and minimum
bytes by arithmetic; a training plan of Conv -> Resize -> Conv is whole; PyTorch's upsample_*_backward
arguments and the profile join's ATen ops; one suite that renders, with a hostile node name, and whose
source passes g++ -fsyntax-only (the kernel file itself is compiled by nvcc in the session's harness
build, conftest.harness: tests/test_harness_build.py)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.framework import Ctx, NotSupported
from benanza.kinds.resize_backward import backward_args, resize_backward_reference
from benanza.processing.model import Layer, ModelLayers, process
from benanza.processing.training import training_plan
from onnx_builders import HOSTILE
from test_resize import CASES, _config, _onnx_resize
from test_unary_backward import syntax_check


def _bwd(case) -> L.ResizeBwdConfig:
    return L.ResizeBwdConfig.of(_config(*case))


@pytest.mark.parametrize("case", [CASES[i] for i in (0, 2, 4, 5, 6, 8, 9, 12, 13)],
                         ids=lambda c: f"{c[3]}-{c[4]}-{len(c[0])}d")
def test_the_scatter_is_the_transpose_of_onnx_resize(case):
    """dx = R^T dy with R read off onnx's reference Resize one unit vector at a time: the scatter of
    the kernel's taps (resize_backward_reference) equals it, nearest, linear and cubic, 1-3 spatial dims."""
    cfg = _bwd(case)
    x, y, scales, mode, coord, nearest, a = case
    ref = ReferenceEvaluator(_onnx_resize(x, y, scales, mode, coord, nearest, a))
    n_in, n_out = int(np.prod(cfg.x)), int(np.prod(cfg.y))
    R = np.zeros((n_out, n_in))
    for i in range(n_in):
        e = np.zeros(n_in, np.float32)
        e[i] = 1
        R[:, i] = ref.run(None, {"x": e.reshape(cfg.x)})[0].reshape(-1)
    dy = np.random.default_rng(1).standard_normal(cfg.y)
    got = resize_backward_reference(cfg, dy)
    assert got.shape == cfg.x
    np.testing.assert_allclose(got.reshape(-1), R.T @ dy.reshape(-1), rtol=1e-5, atol=1e-5)


def test_nearest_x2_gradient_sums_each_2x2_block():
    """Upsample nearest x2 (asymmetric floor: y[i, j] = x[i // 2, j // 2]): dx is the sum of each 2x2
    block of dy."""
    cfg = _bwd(CASES[0])  # (1, 2, 5, 7) -> (1, 2, 10, 14)
    dy = np.random.default_rng(2).standard_normal(cfg.y)
    want = dy.reshape(1, 2, 5, 2, 7, 2).sum(axis=(3, 5))
    np.testing.assert_allclose(resize_backward_reference(cfg, dy), want, rtol=1e-12)


def test_the_backward_call_flops_and_bytes():
    fwd = L.ResizeConfig(x=(2, 3, 8, 8), y=(2, 3, 16, 16), mode="nearest", coord="asymmetric", nearest_mode="floor",
                         scales=(2.0, 2.0))
    (phase, cfg), = L.REGISTRY["Resize"].backward(fwd)
    assert phase == "backward_data" and cfg.kind == "ResizeBwd" and cfg.forward == fwd
    assert cfg.input_shapes() == [(2, 3, 16, 16)] and cfg.output_shape() == (2, 3, 8, 8)
    assert cfg.flops() == 1536  # one addition per element of dy
    # dy read, dx written once (its zero fill is not compulsory traffic)
    assert min_bytes(cfg, "fp16") == 2 * 1536 + 2 * 384 and min_bytes(cfg, "fp32") == 4 * 1536 + 4 * 384
    lin = L.ResizeBwdConfig.of(L.ResizeConfig(x=(1, 1, 4, 4, 4), y=(1, 1, 8, 8, 8), mode="linear",
                                              coord="half_pixel", scales=(2.0,) * 3))
    assert lin.flops() == 2 * 512 * 8
    with pytest.raises(ValueError, match="nearest_mode"):
        L.ResizeBwdConfig(x=(1, 1, 4, 4), y=(1, 1, 8, 8), mode="linear", coord="half_pixel", nearest_mode="floor",
                          scales=(2.0, 2.0))


def test_a_training_plan_with_a_resize_is_whole(tmp_path):
    """Conv -> Resize(nearest, scales 2) -> Conv: the Resize's data gradient is a ResizeBwd call (its
    scales input gets none), every layer has a backward and none is unsupported."""
    inits = [numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w1"),
             numpy_helper.from_array(np.zeros((4, 8, 3, 3), np.float32), "w2"),
             numpy_helper.from_array(np.asarray([1, 1, 2, 2], np.float32), "scales")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["a", "", "scales"], ["b"], name="up", mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
             helper.make_node("Conv", ["b", "w2"], ["y"], name="conv2", pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 16, 16])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    ml = process(tmp_path / "m.onnx", 2)
    assert [ly.status for ly in ml.layers if ly.name == "up"] == ["benchmark"]
    plan = training_plan(ml)
    assert not plan.no_backward and not [ly for ly in ml.layers if ly.status == "unsupported"]
    up = [c for c in plan.calls if ml.layers[c.layer].name == "up"]
    assert [(c.phase, c.config) for c in up] == [("backward_data", L.ResizeBwdConfig(
        x=(2, 8, 8, 8), y=(2, 8, 16, 16), mode="nearest", coord="asymmetric", nearest_mode="floor", scales=(2.0, 2.0)))]
    compute = {ly.index for ly in ml.layers if ly.status == "benchmark"}
    assert compute <= {c.layer for c in plan.calls}  # every forward layer has its backward calls


def test_the_pytorch_candidate_is_upsample_backward():
    """The op and arguments of native_functions.yaml for each forward F.interpolate computes exactly."""
    op, args = backward_args(_bwd(CASES[0]))
    assert op == "upsample_nearest2d_backward" and args == ([10, 14], [1, 2, 5, 7], 2.0, 2.0)
    op, args = backward_args(_bwd(CASES[6]))  # linear align_corners, given sizes: no scales
    assert op == "upsample_bilinear2d_backward" and args == ([9, 3], [1, 2, 5, 7], True, None, None)
    assert backward_args(_bwd(CASES[9]))[0] == "upsample_bicubic2d_backward"
    op, args = backward_args(_bwd(CASES[13]))
    assert op == "upsample_trilinear3d_backward" and args[2] is False and len(args) == 6
    with pytest.raises(NotSupported):
        backward_args(_bwd(CASES[7]))  # linear asymmetric
    from test_kinds_registry import _Recorder

    cand = L.REGISTRY["ResizeBwd"].torch(Ctx(_bwd(CASES[0]), _Recorder(), _Recorder(), _Recorder(), True))
    assert cand.call == "torch:aten::upsample_nearest2d_backward" and cand.algorithm == "channels_last"
    assert cand.out_numel == 70


def test_the_profile_join_knows_the_backward_ops():
    from benanza.profiles.join import ATEN_TO_ONNX

    for op in ("aten::upsample_nearest2d_backward", "aten::upsample_bilinear2d_backward",
               "aten::upsample_bicubic2d_backward", "aten::_upsample_nearest_exact2d_backward"):
        assert "Resize" in ATEN_TO_ONNX[op] and "Upsample" in ATEN_TO_ONNX[op]


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    cfgs = [_bwd(CASES[0]), _bwd(CASES[10]), _bwd(CASES[13])]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"bwd{i}", op_type="Backward", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    ml = ModelLayers(model="resizebwd", path="", sha256="0" * 64, batch=1, dtype="float32", opset=19, layers=layers,
                     edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})
    suite = generate([ml], ["fp16"], tmp_path / "s", layouts=["NCHW", "NHWC"])
    assert {j.kind for j in suite.jobs} == {"ResizeBwd"} and {j.layout for j in suite.jobs} == {"NCHW", "NHWC"}
    src = (tmp_path / "s" / "src" / "resizebwd.cpp").read_text()
    assert "resize_backward_kernel(dy, dx, p, dt, s)" in src and "atomicAdd scatter (not deterministic)" in src
    assert '2, 1, 2, {5, 7, 1}, {10, 14, 1}, {2.0f, 2.0f}, 0, 3, 2, -0.75f, "floor asymmetric"}' in src
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src
    syntax_check(tmp_path / "s", "resizebwd.cpp")
