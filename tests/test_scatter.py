"""ONNX ScatterND, ScatterElements (the Scatter kind) and GatherElements (its own kind): the mapping of
the nodes mixture-of-experts and MLA decoder exports carry (an inverse permutation, a KV-cache window
write whose index count is '?' in the export, a tokens-per-expert histogram, a router's top-k), built
with onnx.helper, and of the weight-stripped exports where present; what does not fit is Unsupported
with its reason; minimum bytes and FLOPs; the kernels' index map and index fill (scatter_offset and
scatter_indices of cpp/include/benanza/scatter.hpp, compiled for the host) applied sequentially and
checked against the ONNX reference implementation (onnx.reference) and numpy; the PyTorch candidates'
calls; one generated suite whose sources pass the compiler's syntax check; the kernels compile with
nvcc in the harness build (tests/test_harness_build.py)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.processing.model import process
from conftest import REPO
from test_copy_backward import _candidate, _suite_model
from test_unary_backward import syntax_check

MOE = Path(__file__).resolve().parent / "data" / "decoders"  # benanza's own exports (benchmarks/lm_step_exports.py)
DEC = REPO / "tests" / "data" / "decoders"
F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def _save(path, nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs], initializer=list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _layer(path, op, batch=2):
    (ly,) = [ly for ly in process(path, batch).layers if ly.op_type == op]
    return ly


def test_an_inverse_permutation(tmp_path):
    """``inv_perm[perm] = arange``: ScatterND(INT64[S], INT64[S, 1], INT64[S]), reduction none."""
    p = _save(tmp_path / "p.onnx", [helper.make_node("ScatterND", ["base", "perm", "ar"], ["inv"], name="inv")],
              [("base", I64, ["N"]), ("perm", I64, ["N", 1]), ("ar", I64, ["N"])], [("inv", I64, ["N"])])
    ly = _layer(p, "ScatterND", 4)
    assert ly.status == "benchmark", ly.reason
    assert ly.config == L.ScatterConfig(op="ScatterND", data=(4,), indices=(4, 1), updates=(4,), dtype="int64")
    assert ly.config.flops() == 0
    # 4 int64 indices and 4 int64 updates read, 4 int64 elements written (the precision's bytes do not apply)
    assert L.REGISTRY["Scatter"].min_bytes(ly.config, 2, 2) == 8 * 4 * 3


def _cache_write(path):
    """transformers' MLA decode window write: ScatterND(FLOAT[24, 4, 33, batch], INT64[?, 1],
    FLOAT[16, 4, 33, batch]), the index count '?' (a NonZero's) in the export."""
    nodes = [helper.make_node("Transpose", ["past"], ["data"], perm=[1, 2, 3, 0], name="t_data"),
             helper.make_node("Transpose", ["new"], ["upd"], perm=[1, 2, 3, 0], name="t_upd"),
             helper.make_node("NonZero", ["keep"], ["nz"], name="nz"),
             helper.make_node("Squeeze", ["nz", "zero"], ["pos"], name="sq"),
             helper.make_node("Unsqueeze", ["pos", "one"], ["idx"], name="unsq"),
             helper.make_node("ScatterND", ["data", "idx", "upd"], ["out"], name="write", reduction="none")]
    inits = [helper.make_tensor("zero", I64, [1], [0]), helper.make_tensor("one", I64, [1], [1])]
    return _save(path, nodes, [("past", F, ["batch", 24, 4, 33]), ("new", F, ["batch", 16, 4, 33]), ("keep", F, [24])],
                 [("out", F, [24, 4, 33, "batch"])], inits)


def test_a_cache_write_takes_the_unknown_index_count_from_the_updates(tmp_path):
    p = _cache_write(tmp_path / "c.onnx")
    m = onnx.shape_inference.infer_shapes(onnx.load(p))
    (vi,) = [v for v in m.graph.value_info if v.name == "idx"]
    assert not vi.type.tensor_type.shape.dim[0].HasField("dim_value")  # '?' after inference, as in the export
    ly = _layer(p, "ScatterND", 3)
    assert ly.status == "benchmark", ly.reason
    cfg = ly.config
    assert cfg == L.ScatterConfig(op="ScatterND", data=(24, 4, 33, 3), indices=(16, 1), updates=(16, 4, 33, 3))
    assert (cfg.k, cfg.slice, cfg.touched) == (1, 4 * 33 * 3, 16 * 4 * 33 * 3)
    n = 16 * 4 * 33 * 3
    assert L.REGISTRY["Scatter"].min_bytes(cfg, 2, 2) == 8 * 16 + 2 * n + 2 * n  # indices, updates, the window


def test_a_histogram_of_tokens_per_expert(tmp_path):
    """torch's histc as exported: ScatterElements(FLOAT[8], INT64[S], FLOAT[S], axis=0, reduction=add)."""
    nodes = [helper.make_node("Cast", ["experts"], ["idx"], to=I64, name="cast"),
             helper.make_node("ScatterElements", ["bins", "idx", "ones"], ["hist"], name="histc", axis=0,
                              reduction="add")]
    p = _save(tmp_path / "h.onnx", nodes, [("experts", F, ["S"]), ("ones", F, ["S"])], [("hist", F, [8])],
              [onnx.numpy_helper.from_array(np.zeros(8, np.float32), "bins")])
    ly = _layer(p, "ScatterElements", 6)
    assert ly.status == "benchmark", ly.reason
    cfg = ly.config
    assert cfg == L.ScatterConfig(op="ScatterElements", data=(8,), indices=(6,), updates=(6,), axis=0, reduction="add")
    assert cfg.flops() == 6
    # 6 indices, 6 updates read; at most 6 bins read and written
    assert L.REGISTRY["Scatter"].min_bytes(cfg, 4, 4) == 8 * 6 + 4 * 6 + 4 * 6 + 4 * 6


def test_a_routing_mask_takes_the_unknown_updates_shape_from_the_indices(tmp_path):
    """ScatterElements(FLOAT[batch, 2], INT64[batch, 1], FLOAT[?, ?], axis=1): updates reshaped by a
    runtime shape (rank 2, dims unknown) take the indices' shape (the spec makes them equal)."""
    nodes = [helper.make_node("Reshape", ["w", "wshape"], ["upd"], name="r"),
             helper.make_node("ScatterElements", ["mask", "top", "upd"], ["out"], name="scatter", axis=1)]
    p = _save(tmp_path / "m.onnx", nodes, [("mask", F, ["batch", 2]), ("top", I64, ["batch", 1]), ("w", F, ["batch"]),
                                          ("wshape", I64, [2])], [("out", F, ["batch", 2])])
    ly = _layer(p, "ScatterElements", 5)
    assert ly.status == "benchmark", ly.reason
    assert ly.config == L.ScatterConfig(op="ScatterElements", data=(5, 2), indices=(5, 1), updates=(5, 1), axis=1)


def test_a_routers_top_k_weights(tmp_path):
    """GatherElements(FLOAT[batch, 8], INT64[batch, 2], axis=1), the indices a TopK's."""
    nodes = [helper.make_node("TopK", ["scores", "k"], ["vals", "top"], name="topk", axis=1),
             helper.make_node("GatherElements", ["probs", "top"], ["w"], name="gather", axis=1)]
    p = _save(tmp_path / "g.onnx", nodes, [("scores", F, ["batch", 8]), ("probs", F, ["batch", 8])],
              [("w", F, ["batch", 2])], [helper.make_tensor("k", I64, [1], [2])])
    ly = _layer(p, "GatherElements", 4)
    assert ly.status == "benchmark", ly.reason
    assert ly.config == L.GatherElementsConfig(data=(4, 8), indices=(4, 2), axis=1)
    assert ly.config.flops() == 0 and ly.config.output_shape() == (4, 2)
    # 8 indices read, 8 outputs written, 8 data elements read (bytes)
    assert L.REGISTRY["GatherElements"].min_bytes(ly.config, 2, 2) == 8 * 8 + 2 * 8 + 2 * 8


def test_what_does_not_fit_is_unsupported_with_a_reason(tmp_path):
    # indices whose rank and tuple length are unknown (a runtime Reshape's)
    nodes = [helper.make_node("NonZero", ["keep"], ["nz"], name="nz"),
             helper.make_node("Squeeze", ["nz", "zero"], ["ishape"], name="sq"),
             helper.make_node("Reshape", ["i", "ishape"], ["idx"], name="r"),
             helper.make_node("ScatterND", ["data", "idx", "upd"], ["out"], name="s")]
    p = _save(tmp_path / "r.onnx", nodes, [("data", F, ["N", 4]), ("i", I64, ["N"]), ("keep", F, [3]),
                                          ("upd", F, ["N", 4])], [("out", F, ["N", 4])],
              [helper.make_tensor("zero", I64, [1], [0])])
    ly = _layer(p, "ScatterND")
    assert ly.status == "unsupported" and "indices' rank or tuple length unknown" in ly.reason, ly.reason
    # int32 indices of the elements form
    node = helper.make_node("ScatterElements", ["data", "idx", "upd"], ["out"], name="s", axis=1)
    p = _save(tmp_path / "i.onnx", [node], [("data", F, ["N", 4]), ("idx", I32, ["N", 2]), ("upd", F, ["N", 2])],
              [("out", F, ["N", 4])])
    ly = _layer(p, "ScatterElements")
    assert ly.status == "unsupported" and "INT32 indices" in ly.reason, ly.reason
    # bool data
    node = helper.make_node("GatherElements", ["data", "idx"], ["out"], name="g", axis=0)
    p = _save(tmp_path / "b.onnx", [node], [("data", TensorProto.BOOL, ["N", 4]), ("idx", I64, ["N", 4])],
              [("out", TensorProto.BOOL, ["N", 4])])
    ly = _layer(p, "GatherElements")
    assert ly.status == "unsupported" and "bool data" in ly.reason, ly.reason
    with pytest.raises(ValueError, match="indices\\[:-1\\] \\+ data\\[k:\\]"):
        L.ScatterConfig(op="ScatterND", data=(4, 3), indices=(2, 1), updates=(2, 4))
    with pytest.raises(ValueError, match="reduction 'sum'"):
        L.ScatterConfig(op="ScatterElements", data=(4,), indices=(2,), updates=(2,), reduction="sum")
    with pytest.raises(ValueError, match="axis 2"):
        L.GatherElementsConfig(data=(4, 4), indices=(4, 4), axis=2)


#: (op, data, indices, axis, reduction) of the host check; ScatterND's indices end with k
HOST_CASES = [("ScatterND", (24, 4, 3, 2), (16, 1), 0, "none"), ("ScatterND", (6,), (6, 1), 0, "none"),
              ("ScatterND", (3, 4, 5), (2, 3, 2), 0, "none"), ("ScatterND", (3, 4, 5), (7, 3), 0, "add"),
              ("ScatterND", (5, 2), (9, 1), 0, "add"), ("ScatterElements", (8,), (12,), 0, "add"),
              ("ScatterElements", (2, 5), (2, 1), 1, "none"), ("ScatterElements", (3, 4, 5), (2, 3, 5), 1, "none"),
              ("ScatterElements", (3, 4, 5), (3, 6, 2), 1, "add"), ("ScatterElements", (4, 3), (2, 3), 0, "none")]


def _host_program(cfgs) -> str:
    """Per config: fill the indices (scatter_indices), make every other one negative (the same place,
    counted from the end), scatter sequentially through scatter_offset (store or add) and, for the
    elements form, gather through it; print indices | output | gathered."""
    rows = []
    for c in cfgs:
        upd = c.updates
        rows.append("{%d, %d, %d, %d, %d, %s, %s, %d, %d, %d, %d}" % (
            c.op == "ScatterND", len(c.data), c.axis, c.k, c.slice, "{" + ", ".join(map(str, c.data)) + "}",
            "{" + ", ".join(map(str, upd)) + "}", L.numel(c.indices), L.numel(upd), c.reduction == "none",
            c.reduction == "add"))
    return ('#include <cstdio>\n#include <vector>\n#include "benanza/scatter.hpp"\nusing namespace benanza;\n'
            "struct C { int nd, rank, axis, k; long long slice, data[8], upd[8], n_idx, n_upd; int distinct, add; };\n"
            "int main() {\n  const C cs[] = {" + ", ".join(rows) + "};\n"
            "  for (const C& c : cs) {\n"
            "    ScatterMap m{};\n    m.nd = c.nd; m.rank = c.rank; m.axis = c.axis; m.k = c.k; m.slice = c.slice;\n"
            "    long long nd = 1;\n    for (int d = 0; d < c.rank; ++d) { m.data[d] = c.data[d]; m.upd[d] = c.upd[d]; nd *= c.data[d]; }\n"
            "    std::vector<long long> idx(c.n_idx), neg(c.n_idx), out(nd);\n"
            "    scatter_indices(idx.data(), m, c.n_idx, c.distinct, 0x5ca3ULL);\n"
            "    for (long long i = 0; i < c.n_idx; ++i) {\n"
            "      const long long dim = c.nd ? c.data[i % c.k] : c.data[c.axis];\n"
            "      neg[i] = (i / (c.nd ? c.k : 1)) % 2 ? idx[i] - dim : idx[i];\n    }\n"
            "    for (long long i = 0; i < nd; ++i) out[i] = 3 * i + 1;\n"
            "    for (long long p = 0; p < c.n_upd; ++p) {\n"
            "      const long long off = scatter_offset(m, neg.data(), p);\n"
            "      if (c.add) out[off] += 1000 + p; else out[off] = 1000 + p;\n    }\n"
            "    for (long long v : idx) std::printf(\"%lld \", v);\n    std::printf(\"| \");\n"
            "    for (long long v : out) std::printf(\"%lld \", v);\n    std::printf(\"| \");\n"
            "    for (long long p = 0; !c.nd && p < c.n_upd; ++p) std::printf(\"%lld \", 3 * scatter_offset(m, neg.data(), p) + 1);\n"
            "    std::printf(\"\\n\");\n  }\n}\n")


def _onnx_reference(cfg, data, idx, upd):
    """The ONNX reference implementation's output for the config's op (opset 18)."""
    kw = {"reduction": cfg.reduction} | ({"axis": cfg.axis} if cfg.op == "ScatterElements" else {})
    node = helper.make_node(cfg.op, ["d", "i", "u"], ["o"], **kw)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("d", I64, data.shape),
                                        helper.make_tensor_value_info("i", I64, idx.shape),
                                        helper.make_tensor_value_info("u", I64, upd.shape)],
                          [helper.make_tensor_value_info("o", I64, data.shape)])
    ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    return ref.run(None, {"d": data, "i": idx, "u": upd})[0]


def test_the_kernels_index_map_scatters_and_gathers_like_onnx(tmp_path):
    """scatter_offset and scatter_indices (the header the CUDA kernels index with), compiled for the
    host: each config's sequential scatter equals the ONNX reference implementation's output for the
    same indices (negative ones included), the elements form's gather equals numpy's take_along_axis,
    and the indices of reduction none are distinct places."""
    if not shutil.which("g++"):
        pytest.skip("g++ is missing")
    import site
    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia" / "cu13" / "include").is_dir()), None)
    if sp is None:
        pytest.skip("the CUDA runtime headers of the pip wheels are missing")
    cfgs = []
    for op, data, idx, axis, red in HOST_CASES:
        upd = idx[:-1] + data[idx[-1]:] if op == "ScatterND" else idx
        cfgs.append(L.ScatterConfig(op=op, data=data, indices=idx, updates=upd, axis=axis, reduction=red))
    src = tmp_path / "t.cpp"
    src.write_text(_host_program(cfgs))
    exe = tmp_path / "t"
    subprocess.run(["g++", "-std=c++17", f"-I{REPO / 'cpp' / 'include'}", f"-I{sp / 'nvidia' / 'cu13' / 'include'}",
                    str(src), "-o", str(exe)], check=True, capture_output=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.strip().split("\n")
    assert len(lines) == len(cfgs)
    for cfg, line in zip(cfgs, lines):
        idx_s, out_s, got_s = (part.split() for part in line.split("|"))
        idx = np.array([int(v) for v in idx_s], np.int64).reshape(cfg.indices)
        data = (3 * np.arange(L.numel(cfg.data), dtype=np.int64) + 1).reshape(cfg.data)
        upd = (1000 + np.arange(L.numel(cfg.updates), dtype=np.int64)).reshape(cfg.updates)
        assert (idx >= 0).all() and (idx < (np.array(cfg.data[:cfg.k]) if cfg.op == "ScatterND" else cfg.data[cfg.axis])).all()
        want = _onnx_reference(cfg, data, idx, upd)
        assert [int(v) for v in out_s] == want.reshape(-1).tolist(), cfg.describe()
        if cfg.reduction == "none" and cfg.op == "ScatterND":
            assert len({tuple(t) for t in idx.reshape(-1, cfg.k)}) == L.numel(cfg.indices[:-1]), cfg.describe()
        if cfg.op == "ScatterElements":
            if cfg.reduction == "none":  # distinct along the axis in each line
                lines_ = np.moveaxis(idx, cfg.axis, -1).reshape(-1, cfg.indices[cfg.axis])
                assert all(len(set(r)) == len(r) for r in lines_.tolist()), cfg.describe()
            sub = data[tuple(slice(0, n) if d != cfg.axis else slice(None) for d, n in enumerate(cfg.indices))]
            gathered = np.take_along_axis(sub, idx, axis=cfg.axis)
            assert [int(v) for v in got_s] == gathered.reshape(-1).tolist(), cfg.describe()


def test_candidates_and_aten():
    nd = L.ScatterConfig(op="ScatterND", data=(24, 4, 33, 2), indices=(16, 1), updates=(16, 4, 33, 2))
    c = _candidate(nd)
    assert c.call == "torch:aten::clone+aten::index_put_" and c.out_numel == 24 * 4 * 33 * 2
    (alone,) = c.variants
    assert alone.call == "torch:aten::index_put_" and alone.algorithm == "in place" and "data reused" in alone.note
    hist = L.ScatterConfig(op="ScatterElements", data=(8,), indices=(6,), updates=(6,), reduction="add")
    assert _candidate(hist).call == "torch:aten::clone+aten::scatter_add_"
    top = L.ScatterConfig(op="ScatterElements", data=(4, 2), indices=(4, 1), updates=(4, 1), axis=1)
    assert _candidate(top).call == "torch:aten::clone+aten::scatter_"
    mx = L.ScatterConfig(op="ScatterND", data=(4, 3), indices=(2, 1), updates=(2, 3), reduction="max", dtype="int32")
    assert _candidate(mx).call == "torch:aten::clone+aten::scatter_reduce_"
    g = _candidate(L.GatherElementsConfig(data=(4, 8), indices=(4, 2), axis=1))
    assert g.call == "torch:aten::gather" and g.out_numel == 8
    aten = L.REGISTRY["Scatter"].aten
    assert "aten::index_put_" in aten["ScatterND"] and "aten::scatter_add_" in aten["ScatterElements"]
    assert L.REGISTRY["GatherElements"].aten["GatherElements"] == ("aten::gather",)


def test_the_suites_render_and_their_sources_compile(tmp_path):
    cfgs = [L.ScatterConfig(op="ScatterND", data=(24, 4, 33, 2), indices=(16, 1), updates=(16, 4, 33, 2)),
            L.ScatterConfig(op="ScatterND", data=(4,), indices=(4, 1), updates=(4,), dtype="int64"),
            L.ScatterConfig(op="ScatterElements", data=(8,), indices=(6,), updates=(6,), reduction="add"),
            L.ScatterConfig(op="ScatterElements", data=(3, 4), indices=(3, 2), updates=(3, 2), axis=1,
                            reduction="max", dtype="int32"),
            L.GatherElementsConfig(data=(2, 8), indices=(2, 2), axis=1),
            L.GatherElementsConfig(data=(2, 8), indices=(2, 2), axis=1, dtype="int64")]
    generate([_suite_model(cfgs)], ["fp32", "fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "scatter.cpp").read_text()
    assert src.count("true, 4, 0, 1, 264, {24, 4, 33, 2, 0, 0, 0, 0}, {16, 4, 33, 2, 0, 0, 0, 0}, 6336, 16, 4224, "
                     'ScatterReduction::None, true, false, ElemType::F32, "ScatterND"}') == 2
    assert src.count('4, 4, 4, ScatterReduction::None, true, true, ElemType::I64, "ScatterND int64"}') == 2
    assert src.count('8, 6, 6, ScatterReduction::Add, false, false, ElemType::F32, "ScatterElements add"}') == 2
    assert src.count('ScatterReduction::Max, false, true, ElemType::I32, "ScatterElements max int32"}') == 2
    syntax_check(tmp_path / "s", "scatter.cpp")
    src = (tmp_path / "s" / "src" / "gatherelements.cpp").read_text()
    assert src.count('2, 1, {2, 8, 0, 0, 0, 0, 0, 0}, {2, 2, 0, 0, 0, 0, 0, 0}, 16, 4, false, ElemType::F32, '
                     '"GatherElements"}') == 2
    syntax_check(tmp_path / "s", "gatherelements.cpp")


@pytest.mark.parametrize("name", ["deepseek_v3_moe_decode", "mixtral_decode"])
def test_the_mixture_of_experts_exports_map(name):
    """benanza's weight-stripped exports of DeepSeek-V3 and Mixtral decode steps: every ScatterND,
    ScatterElements and GatherElements is a benchmark layer."""
    path = MOE / f"{name}.onnx"
    ml = process(path, 2)
    ops = [ly for ly in ml.layers if ly.op_type in ("ScatterND", "ScatterElements", "GatherElements")]
    assert ops and all(ly.status == "benchmark" for ly in ops), [(ly.op_type, ly.reason) for ly in ops]
    hist = [ly.config for ly in ops if ly.op_type == "ScatterElements" and ly.config.reduction == "add"]
    assert hist and all(c.data == (8,) for c in hist)  # tokens per expert: 8 experts
