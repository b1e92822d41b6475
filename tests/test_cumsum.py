"""ONNX CumSum as a layer of its own kind (issue 27, item 3): the mapping (constant axis, negative
axes, ``exclusive``, ``reverse``, int64 data) on a small graph and on Hugging Face's position ids
(Cast, CumSum, Mul, Sub of the attention mask); the kernel's index map (``cumsum_offset`` of
cpp/include/benanza/cumsum.hpp, compiled for the host) driving a scan checked against numpy's cumsum
for every axis and flag; the gradient (the scan in the other direction), PyTorch's candidate; one
generated suite whose source passes the compiler's syntax check; the harness's kernel file (CUB's
DeviceScan) compiles with nvcc (in the session's harness build, conftest.harness, which compiles every cpp/src file: tests/test_harness_build.py)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from test_copy_backward import _candidate, _suite_model
from test_unary_backward import syntax_check


def _numpy_cumsum(x, axis, exclusive, reverse):
    """The ONNX operator spec's CumSum in numpy: flip for reverse, shift by one for exclusive."""
    v = np.flip(x, axis) if reverse else x
    y = np.cumsum(v, axis=axis)
    if exclusive:
        y = y - v
    return np.flip(y, axis) if reverse else y


def _model(path, x, axis, exclusive=None, reverse=None, elem=TensorProto.FLOAT, axis_elem=TensorProto.INT64):
    """CumSum of x, or for float data of x * w (a parameter, so the CumSum's input has a gradient)."""
    nodes, src = [], "x"
    inits = [helper.make_tensor("axis", axis_elem, [], [axis])]
    if elem == TensorProto.FLOAT:
        inits.append(onnx.numpy_helper.from_array(np.ones(x[1:], np.float32), "w"))
        nodes.append(helper.make_node("Mul", ["x", "w"], ["xw"], name="scale"))
        src = "xw"
    kw = {k: v for k, v in (("exclusive", exclusive), ("reverse", reverse)) if v is not None}
    nodes.append(helper.make_node("CumSum", [src, "axis"], ["y"], name="scan", **kw))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, x)],
                          [helper.make_tensor_value_info("y", elem, x)], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


def _hf_position_ids(path):
    """transformers' position ids from the attention mask (``create_position_ids_from_input_ids``):
    ``(cumsum(mask.int64, -1) * mask) - 1``, on int64 data the exporters do not fold."""
    one = helper.make_tensor("one", TensorProto.INT64, [], [1])
    last = helper.make_tensor("last", TensorProto.INT64, [], [-1])
    nodes = [helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.INT64, name="cast"),
             helper.make_node("CumSum", ["m", "last"], ["c"], name="cumsum"),
             helper.make_node("Mul", ["c", "m"], ["cm"], name="mul"),
             helper.make_node("Sub", ["cm", "one"], ["position_ids"], name="sub")]
    g = helper.make_graph(nodes, "pos", [helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["N", 16])],
                          [helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["N", 16])],
                          initializer=[one, last])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


SCANS = [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), 1), ((2, 3, 4), 2), ((2, 3, 4), 0), ((1, 7, 1), 1)]


def test_the_kernels_index_map_scans_like_numpy(tmp_path):
    """A sequential scan through cumsum_offset (the header both CUDA paths index with), compiled for
    the host, over (outer, len, inner) of each shape, axis and flag; each equals numpy's cumsum."""
    if not shutil.which("g++"):
        pytest.skip("g++ is missing")
    import site
    from pathlib import Path
    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia" / "cu13" / "include").is_dir()), None)
    if sp is None:
        pytest.skip("the CUDA runtime headers of the pip wheels are missing")
    cases = []
    for shape, axis in SCANS:
        cfg = L.CumSumConfig(x=shape, axis=axis)
        for ex in (0, 1):
            for rev in (0, 1):
                cases.append((shape, axis, ex, rev, cfg.outer, cfg.length, cfg.inner))
    src = tmp_path / "t.cpp"
    src.write_text('#include <cstdio>\n#include "benanza/cumsum.hpp"\nint main() {\n  const long long cs[][5] = {'
                   + ", ".join("{%d, %d, %d, %d, %d}" % c[2:] for c in cases) + "};\n"
                   "  for (const auto& c : cs) {\n"
                   "    const long long n = c[2] * c[3] * c[4];\n    long long y[64];\n"
                   "    for (long long col = 0; col < c[2] * c[4]; ++col) {\n      long long sum = 0;\n"
                   "      for (long long t = 0; t < c[3]; ++t) {\n"
                   "        const long long off = benanza::cumsum_offset(col * c[3] + t, c[3], c[4], c[1] != 0);\n"
                   "        const long long v = off * off + 1;  // x[off], distinct per element\n"
                   "        if (c[0]) { y[off] = sum; sum += v; } else { sum += v; y[off] = sum; }\n      }\n    }\n"
                   "    for (long long k = 0; k < n; ++k) std::printf(\"%lld \", y[k]);\n    std::printf(\"\\n\");\n  }\n}\n")
    exe = tmp_path / "t"
    subprocess.run(["g++", "-std=c++17", f"-I{REPO / 'cpp' / 'include'}", f"-I{sp / 'nvidia' / 'cu13' / 'include'}",
                    str(src), "-o", str(exe)], check=True, capture_output=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip().split("\n")
    assert len(lines) == len(cases)
    for (shape, axis, ex, rev, *_), line in zip(cases, lines):
        x = (np.arange(np.prod(shape), dtype=np.int64) ** 2 + 1).reshape(shape)
        want = _numpy_cumsum(x, axis, ex, rev)
        assert [int(v) for v in line.split()] == want.reshape(-1).tolist(), (shape, axis, ex, rev)


@pytest.mark.parametrize("axis,exclusive,reverse,axis_elem", [(-1, None, None, TensorProto.INT64),
                                                              (1, 1, 0, TensorProto.INT32),
                                                              (0, 0, 1, TensorProto.INT64),
                                                              (-2, 1, 1, TensorProto.INT32)])
def test_mapping_and_gradient(tmp_path, axis, exclusive, reverse, axis_elem):
    """Defaults exclusive=reverse=0 (ONNX spec); the axis from its int32/int64 constant, negative
    counted from the end; float data's gradient is the scan in the other direction."""
    ml = process(_model(tmp_path / "c.onnx", ["N", 6, 8], axis, exclusive, reverse, axis_elem=axis_elem), 2)
    (ly,) = [ly for ly in ml.layers if ly.op_type == "CumSum"]
    assert ly.status == "benchmark", ly.reason
    want = L.CumSumConfig(x=(2, 6, 8), axis=axis % 3, exclusive=bool(exclusive), reverse=bool(reverse))
    assert ly.config == want
    calls = [c for c in training_plan(ml).calls if c.layer == ly.index]
    assert [(c.phase, c.config) for c in calls] == [("backward_data", L.CumSumConfig(
        x=(2, 6, 8), axis=axis % 3, exclusive=bool(exclusive), reverse=not reverse))]


def test_the_gradient_is_the_transposed_scan():
    """dx = Sᵀ dy for y = S x: the scan matrix of the backward config is the forward's transpose,
    for each flag (S built column by column from numpy's reference)."""
    for ex in (False, True):
        for rev in (False, True):
            cfg = L.CumSumConfig(x=(5,), axis=0, exclusive=ex, reverse=rev)
            ((phase, b),) = L.REGISTRY["CumSum"].backward(cfg)
            S = np.stack([_numpy_cumsum(e, 0, ex, rev) for e in np.eye(5)], axis=1)
            Sb = np.stack([_numpy_cumsum(e, 0, b.exclusive, b.reverse) for e in np.eye(5)], axis=1)
            assert phase == "backward_data" and np.array_equal(Sb, S.T), (ex, rev)


def test_hugging_face_position_ids(tmp_path):
    """Cast, CumSum, Mul, Sub of an int64 attention mask: the CumSum is an int64 layer over the
    sequence, measured, with no gradient (integer data)."""
    ml = process(_hf_position_ids(tmp_path / "p.onnx"), 4)
    (ly,) = [ly for ly in ml.layers if ly.op_type == "CumSum"]
    assert ly.status == "benchmark", ly.reason
    assert ly.config == L.CumSumConfig(x=(4, 16), axis=1, dtype="int64")
    assert ly.config.flops() == 4 * 15
    assert L.REGISTRY["CumSum"].min_bytes(ly.config, 2, 2) == 2 * 8 * 64
    assert L.REGISTRY["CumSum"].backward(ly.config) == ()
    assert not [ly for ly in ml.layers if ly.status == "unsupported"], [(ly.op_type, ly.reason) for ly in ml.layers]


def test_what_does_not_fit_is_unsupported_with_a_reason(tmp_path):
    g = helper.make_graph([helper.make_node("CumSum", ["x", "a"], ["y"], name="s")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
                           helper.make_tensor_value_info("a", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    p = tmp_path / "a.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), p)
    (ly,) = process(p, 2).layers
    assert ly.status == "unsupported" and "axis is not a constant" in ly.reason
    p = tmp_path / "v.onnx"
    _model(p, ["N", 4], 1)
    m = onnx.load(p)
    m.graph.initializer[0].CopyFrom(helper.make_tensor("axis", TensorProto.INT64, [2], [0, 1]))
    onnx.save(m, p)
    (ly,) = [ly for ly in process(p, 2).layers if ly.op_type == "CumSum"]
    assert ly.status == "unsupported" and "axis has 2 elements" in ly.reason, ly.reason
    with pytest.raises(ValueError, match="axis 2"):
        L.CumSumConfig(x=(4, 4), axis=2)
    with pytest.raises(ValueError, match="int8"):
        L.CumSumConfig(x=(4, 4), axis=1, dtype="int8")


def test_candidate_and_aten():
    c = _candidate(L.CumSumConfig(x=(2, 16), axis=1, dtype="int64"))
    assert c.call == "torch:aten::cumsum" and c.out_numel == 32
    c = _candidate(L.CumSumConfig(x=(2, 16), axis=0, exclusive=True, reverse=True))
    assert c.call == "torch:aten::flip+aten::cumsum+aten::sub+aten::flip"
    assert "aten::cumsum" in L.REGISTRY["CumSum"].aten["CumSum"]


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    cfgs = [L.CumSumConfig(x=(4, 128), axis=1, dtype="int64"), L.CumSumConfig(x=(2, 8, 16), axis=1, exclusive=True),
            L.CumSumConfig(x=(3, 32), axis=1, reverse=True, dtype="int32")]
    generate([_suite_model(cfgs)], ["fp32", "fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "cumsum.cpp").read_text()
    assert src.count('4, 128, 1, false, false, true, ElemType::I64, "cumsum int64"}') == 2
    assert src.count('2, 8, 16, true, false, false, ElemType::F32, "cumsum exclusive"}') == 2
    assert src.count('3, 32, 1, false, true, true, ElemType::I32, "cumsum reverse int32"}') == 2
    syntax_check(tmp_path / "s", "cumsum.cpp")
