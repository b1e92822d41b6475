"""ONNX Resize / Upsample as a layer of its own kind (issue 27, item 3): the numpy arithmetic of its taps
(:func:`benanza.kinds.resize.resize_taps`) against onnx's reference Resize, the kernel's own tap
function (``resize_taps`` of cpp/include/benanza/resize.hpp, compiled for the host) against numpy, the
mapping of Resize-10/13/19 and Upsample with its refusals, minimum bytes and FLOPs, PyTorch's
F.interpolate arguments, one generated suite through the compiler's syntax check and the harness's
kernel file through nvcc (in the session's harness build, conftest.harness, which compiles every cpp/src file: tests/test_harness_build.py)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.kinds.framework import NotSupported
from benanza.kinds.resize import interpolate_args, resize_reference, resize_taps, touched
from benanza.processing.model import process
from conftest import REPO
from test_copy_backward import _suite_model
from test_unary_backward import syntax_check

# (x, y or None, scales or None, mode, coord, nearest_mode, cubic A)
CASES = [
    ((1, 2, 5, 7), None, (2.0, 2.0), "nearest", "asymmetric", "floor", -0.75),
    ((1, 2, 5, 7), None, (2.0, 3.0), "nearest", "half_pixel", "round_prefer_floor", -0.75),
    ((1, 2, 6, 9), None, (0.5, 1.0 / 3), "nearest", "half_pixel", "round_prefer_ceil", -0.75),
    ((1, 1, 8, 8), (1, 1, 3, 5), None, "nearest", "align_corners", "ceil", -0.75),
    ((2, 1, 4, 6), (2, 1, 7, 11), None, "nearest", "pytorch_half_pixel", "round_prefer_floor", -0.75),
    ((1, 2, 5, 7), None, (2.0, 2.0), "linear", "half_pixel", "", -0.75),
    ((1, 2, 5, 7), (1, 2, 9, 3), None, "linear", "align_corners", "", -0.75),
    ((1, 2, 5, 7), None, (1.5, 0.6), "linear", "asymmetric", "", -0.75),
    ((1, 1, 6, 4), (1, 1, 4, 9), None, "linear", "pytorch_half_pixel", "", -0.75),
    ((1, 2, 5, 7), None, (2.0, 2.0), "cubic", "half_pixel", "", -0.75),
    ((1, 1, 9, 6), (1, 1, 4, 13), None, "cubic", "align_corners", "", -0.5),
    ((1, 1, 6, 6), None, (1.7, 0.8), "cubic", "asymmetric", "", -0.75),
    ((2, 3, 11), None, (2.5,), "linear", "half_pixel", "", -0.75),
    ((1, 2, 3, 4, 5), None, (2.0, 1.5, 0.6), "linear", "half_pixel", "", -0.75),
    ((1, 2, 3, 4, 5), (1, 2, 6, 2, 9), None, "nearest", "asymmetric", "round_prefer_ceil", -0.75),
]


def _onnx_resize(x, y, scales, mode, coord, nearest, a, opset=19):
    """A one-node Resize model: scales (a constant input) or sizes."""
    ins, inits = ["x", ""], []
    if scales is not None:
        ins.append("scales")
        inits.append(onnx.numpy_helper.from_array(np.asarray((1.0, 1.0) + tuple(scales), np.float32), "scales"))
    else:
        ins += ["", "sizes"]
        inits.append(onnx.numpy_helper.from_array(np.asarray(y, np.int64), "sizes"))
    kw = {"mode": mode, "coordinate_transformation_mode": coord, "cubic_coeff_a": a}
    if nearest:
        kw["nearest_mode"] = nearest
    g = helper.make_graph([helper.make_node("Resize", ins, ["y"], name="up", **kw)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [f"y{i}" for i in range(len(x))])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _config(x, y, scales, mode, coord, nearest, a):
    if y is None:
        y = x[:2] + tuple(int(np.floor(i * s)) for i, s in zip(x[2:], scales))
    else:
        scales = tuple(o / i for o, i in zip(y[2:], x[2:]))
    return L.ResizeConfig(x=x, y=y, mode=mode, coord=coord, nearest_mode=nearest,
                          cubic_coeff_a=a if mode == "cubic" else -0.75,
                          scales=tuple(float(np.float32(s)) for s in scales))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[3]}-{c[4]}-{len(c[0])}d")
def test_numpy_taps_are_onnx_reference_resize(case):
    """resize_reference (from resize_taps) equals onnx.reference's Resize on random data."""
    x, y, scales, mode, coord, nearest, a = case
    cfg = _config(*case)
    data = np.random.default_rng(0).standard_normal(x).astype(np.float32)
    (want,) = ReferenceEvaluator(_onnx_resize(x, y, scales, mode, coord, nearest, a)).run(None, {"x": data})
    got = resize_reference(cfg, data)
    assert got.shape == want.shape == cfg.y
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_kernels_taps_are_numpys(tmp_path):
    """resize_taps of the header the CUDA kernels use, compiled for the host, prints each output index's
    taps: the indices equal numpy's, the weights to float32 rounding."""
    if not shutil.which("g++"):
        pytest.skip("g++ is missing")
    import site
    from pathlib import Path
    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia" / "cu13" / "include").is_dir()), None)
    if sp is None:
        pytest.skip("the CUDA runtime headers of the pip wheels are missing")
    rows, want = [], []
    for case in CASES:
        cfg = _config(*case)
        for d in range(cfg.nsp):
            rows.append("{%d, %d, %d, %r, %d, %d, %r}" % (
                L.resize.MODES.index(cfg.mode), L.resize.COORDS.index(cfg.coord),
                L.resize.NEAREST_MODES.index(cfg.nearest_mode) if cfg.nearest_mode else 0, float(cfg.cubic_coeff_a),
                cfg.x[2 + d], cfg.y[2 + d], float(cfg.scales[d])))
            want.append(resize_taps(cfg, d))
    src = tmp_path / "t.cpp"
    src.write_text('#include <cstdio>\n#include "benanza/resize.hpp"\nstruct R { int m, c, n; float a; long long i, o; float s; };\n'
                   "int main() {\n  const R rs[] = {" + ", ".join(rows) + "};\n"
                   "  for (const R& r : rs) {\n    for (long long o = 0; o < r.o; ++o) {\n"
                   "      long long idx[4]; float w[4];\n"
                   "      const int n = benanza::resize_taps(r.m, r.c, r.n, r.a, o, r.i, r.o, r.s, idx, w);\n"
                   "      for (int k = 0; k < n; ++k) std::printf(\"%lld:%.9g \", idx[k], w[k]);\n    }\n"
                   "    std::printf(\"\\n\");\n  }\n}\n")
    exe = tmp_path / "t"
    subprocess.run(["g++", "-std=c++17", f"-I{REPO / 'cpp' / 'include'}", f"-I{sp / 'nvidia' / 'cu13' / 'include'}",
                    str(src), "-o", str(exe)], check=True, capture_output=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines()
    assert len(lines) == len(want)
    for line, (idx, w) in zip(lines, want):
        pairs = [p.split(":") for p in line.split()]
        assert [int(i) for i, _ in pairs] == idx.reshape(-1).tolist()
        np.testing.assert_allclose([float(v) for _, v in pairs], w.reshape(-1), rtol=1e-6, atol=1e-6)


def _save(tmp_path, model):
    p = tmp_path / "r.onnx"
    onnx.save(model, p)
    return p


@pytest.mark.parametrize("case", [CASES[1], CASES[6], CASES[10], CASES[13]], ids=lambda c: c[3] + "-" + c[4])
def test_mapping_of_resize_19(tmp_path, case):
    x, y, scales, mode, coord, nearest, a = case
    (ly,) = process(_save(tmp_path, _onnx_resize(x, y, scales, mode, coord, nearest, a)), x[0]).layers
    assert ly.status == "benchmark", ly.reason
    assert ly.config == _config(*case)


def test_resize_10_and_upsample_are_asymmetric_floor(tmp_path):
    """Resize-10 (X, scales) and Upsample-9 map as Upsample's spec: asymmetric, nearest rounding down;
    mode linear/bilinear is linear."""
    for op, opset, mode in (("Resize", 10, "nearest"), ("Upsample", 9, "linear"), ("Upsample", 9, "bilinear")):
        sc = onnx.numpy_helper.from_array(np.asarray([1, 1, 2, 2], np.float32), "s")
        g = helper.make_graph([helper.make_node(op, ["x", "s"], ["y"], name="u", mode=mode)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d"])], initializer=[sc])
        (ly,) = process(_save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])), 2).layers
        assert ly.status == "benchmark", (op, ly.reason)
        m = "nearest" if mode == "nearest" else "linear"
        assert ly.config == L.ResizeConfig(x=(2, 3, 4, 5), y=(2, 3, 8, 10), mode=m, coord="asymmetric",
                                           nearest_mode="floor" if m == "nearest" else "", scales=(2.0, 2.0))


@pytest.mark.parametrize("attrs,scales,why", [
    ({"coordinate_transformation_mode": "tf_crop_and_resize"}, (1, 1, 2, 2), "coordinate_transformation_mode"),
    ({"antialias": 1, "mode": "linear"}, (1, 1, 0.5, 0.5), "antialias"),
    ({}, (1, 2, 2, 2), "channel"),
    ({"mode": "cubic", "exclude_outside": 1}, (1, 1, 2, 2), "exclude_outside"),
])
def test_refused_with_a_reason(tmp_path, attrs, scales, why):
    sc = onnx.numpy_helper.from_array(np.asarray(scales, np.float32), "s")
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], name="u", **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c", "d"])], initializer=[sc])
    (ly,) = process(_save(tmp_path, helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])), 1).layers
    assert ly.status == "unsupported" and why in ly.reason, ly.reason


def test_computed_scales_are_refused():
    """Scales that are no constant (the mapper reads them from the context) are refused."""
    from benanza.kinds.onnx_map import Unsupported
    from benanza.kinds.resize import _map_resize

    class Ctx:
        opset = 19

        def shape(self, name):
            return (1, 3, 4, 4) if name == "x" else (1, 3, 8, 8)

        def value(self, name):
            return None

    node = helper.make_node("Resize", ["x", "", "s"], ["y"], name="u")
    with pytest.raises(Unsupported, match="not constants"):
        _map_resize(node, Ctx(), {})
    with pytest.raises(ValueError, match="N, C kept"):
        L.ResizeConfig(x=(1, 2, 4), y=(1, 4, 8), mode="linear", coord="half_pixel", scales=(2.0,))


def test_bytes_and_flops():
    """A nearest x2 upsample reads x once; a nearest /2 downsample reads a quarter of it (the picked
    elements); bilinear reads every element; FLOPs 2 per tap (0 for nearest)."""
    up = L.ResizeConfig(x=(2, 3, 8, 8), y=(2, 3, 16, 16), mode="nearest", coord="asymmetric", nearest_mode="floor",
                        scales=(2.0, 2.0))
    down = L.ResizeConfig(x=(2, 3, 8, 8), y=(2, 3, 4, 4), mode="nearest", coord="asymmetric", nearest_mode="floor",
                          scales=(0.5, 0.5))
    lin = L.ResizeConfig(x=(2, 3, 8, 8), y=(2, 3, 16, 16), mode="linear", coord="half_pixel", scales=(2.0, 2.0))
    mb = L.REGISTRY["Resize"].min_bytes
    assert touched(up) == 384 and mb(up, 2, 2) == 2 * 384 + 2 * 1536
    assert touched(down) == 96 and mb(down, 4, 4) == 4 * 96 + 4 * 96
    assert touched(lin) == 384
    assert up.flops() == 0 and lin.flops() == 2 * 1536 * 4
    cub = L.ResizeConfig(x=(1, 1, 8, 8, 8), y=(1, 1, 16, 16, 16), mode="cubic", coord="half_pixel", scales=(2.0,) * 3)
    assert cub.flops() == 2 * 4096 * 64


def test_interpolate_arguments():
    """F.interpolate's mode, align_corners and size or scales for each config PyTorch computes exactly;
    NotSupported for the others."""
    op, kw = interpolate_args(_config(*CASES[0]))
    assert op == "upsample_nearest2d" and kw == {"scale_factor": (2.0, 2.0), "recompute_scale_factor": False,
                                                 "mode": "nearest"}
    op, kw = interpolate_args(_config(*CASES[6]))
    assert op == "upsample_bilinear2d" and kw == {"size": (9, 3), "mode": "bilinear", "align_corners": True}
    assert interpolate_args(_config(*CASES[9]))[0] == "upsample_bicubic2d"
    assert interpolate_args(_config(*CASES[13]))[0] == "upsample_trilinear3d"
    assert interpolate_args(_config(*CASES[12]))[0] == "upsample_linear1d"
    for i in (1, 7, 10):  # nearest half_pixel prefer floor, linear asymmetric, cubic A = -0.5
        with pytest.raises(NotSupported):
            interpolate_args(_config(*CASES[i]))
    assert "aten::upsample_bilinear2d" in L.REGISTRY["Resize"].aten["Resize"]


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    cfgs = [_config(*CASES[0]), _config(*CASES[10]), _config(*CASES[13])]
    suite = generate([_suite_model(cfgs)], ["fp16"], tmp_path / "s", layouts=["NCHW", "NHWC"])
    assert {j.layout for j in suite.jobs} == {"NCHW", "NHWC"}
    src = (tmp_path / "s" / "src" / "resize.cpp").read_text()
    assert '2, 1, 2, {5, 7, 1}, {10, 14, 1}, {2.0f, 2.0f}, 0, 3, 2, -0.75f, "floor asymmetric"}' in src
    assert '3, 1, 2, {3, 4, 5}, {6, 6, 3}, {2.0f, 1.5f, 0.6000000238418579f}, 1, 0, 0, -0.75f, "linear half_pixel"}' in src
    syntax_check(tmp_path / "s", "resize.cpp")
