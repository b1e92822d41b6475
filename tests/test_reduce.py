"""benanza::reduce without a GPU: its plan (cpp/include/benanza/reduce_plan.hpp, host code,
compiled here with the C++ compiler) replayed in numpy gives ReduceSum/Max over the same axes for
last-axis, middle-axis, several-axes, all-axes and extent-1 reductions, with launch shapes the
kernels accept; the generated reduce benchmark times it beside cudnnReduceTensor and compiles."""
import json
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.kinds import Job

_reduce_case = L.REGISTRY["Reduce"].case
from benanza.processing.model import process
from conftest import HERE, REPO

SHAPES = [  # (x, reduced axes)
    ((64, 768), (1,)), ((40, 3072), (1,)), ((256, 96), (1,)), ((1000, 3), (1,)), ((5, 197), (1,)),
    ((3, 197, 5), (1,)), ((6, 32, 128), (1,)), ((8, 64, 7, 7), (2, 3)), ((4, 16, 9, 5), (0, 2)),
    ((2, 3, 4, 5, 6), (0, 2, 4)), ((1, 2000003), (0, 1)), ((2, 50000, 8), (1,)), ((16, 96, 1), (2,)),
    ((3, 1, 4, 1, 5, 1, 6, 7), (1, 3, 4, 7)), ((7,), (0,)), ((2, 1024, 4096), (0,)),
]


@pytest.fixture(scope="module")
def plan_dump(tmp_path_factory):
    cxx = shutil.which("c++") or shutil.which("g++")
    if not cxx:
        pytest.skip("no C++ compiler")
    exe = tmp_path_factory.mktemp("rp") / "reduce_plan_dump"
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{REPO / 'cpp' / 'include'}",
                    str(HERE / "data" / "reduce_plan_dump.cpp"), "-o", str(exe)], check=True)
    return exe


def _plan(exe, x, y, elem_bytes=2, sms=132):
    out = subprocess.run([str(exe), str(elem_bytes), str(sms), str(len(x))] + [str(d) for d in x + y],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def _replay(plan, x: np.ndarray, op) -> np.ndarray:
    """What the kernels compute, stage by stage: (outer, r, inner) views, chunks of r for a split."""
    cur = x.reshape(-1).astype(np.float64)
    for s in plan["stages"]:
        v = cur.reshape(s["outer"], s["r"], s["inner"])
        parts = [op(v[:, z * s["chunk"]:(z + 1) * s["chunk"], :], axis=1) for z in range(s["split"])]
        cur = np.stack(parts, axis=1).reshape(-1)
    return cur


def _check_launch_shapes(plan, elem_bytes):
    ws = plan["ws"]
    for i, s in enumerate(plan["stages"]):
        assert s["src"] == (-1 if i == 0 else (i - 1) % 2)
        assert s["dst"] == (-1 if i == len(plan["stages"]) - 1 else i % 2)
        if s["dst"] >= 0:
            assert ws[s["dst"]] >= s["outer"] * s["split"] * s["inner"] and ws[s["dst"]] % 64 == 0
        assert 1 <= s["split"] <= 1024 and (s["split"] - 1) * s["chunk"] < s["r"] <= s["split"] * s["chunk"]
        es = elem_bytes if i == 0 else 4
        if s["row"]:
            assert s["inner"] == 1 and s["vec"] == 16 // es
            if s["warp"]:
                assert s["lanes"] in (1, 2, 4, 8, 16, 32) and s["split"] == 1
            else:
                assert s["threads"] in (64, 128, 256, 512)
                assert s["split"] == 1 or s["chunk"] % s["vec"] == 0  # chunks start on whole vectors
        else:
            assert s["bx"] * s["by"] <= 256 and s["by"] & (s["by"] - 1) == 0 and s["bx"] & (s["bx"] - 1) == 0
            assert s["vec"] in (1, 16 // es) and s["inner"] % s["vec"] == 0


@pytest.mark.parametrize("elem_bytes", [2, 4])
@pytest.mark.parametrize("x,axes", SHAPES, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_plan_replayed_is_the_reduction(plan_dump, x, axes, elem_bytes):
    y = tuple(1 if i in axes else d for i, d in enumerate(x))
    plan = _plan(plan_dump, x, y, elem_bytes)
    assert plan["ok"], plan["error"]
    assert plan["total_r"] == int(np.prod([x[a] for a in axes]))
    _check_launch_shapes(plan, elem_bytes)
    data = np.random.default_rng(0).integers(-8, 9, size=x).astype(np.float64)
    for op in (np.sum, np.max):
        want = op(data, axis=axes, keepdims=True).reshape(-1)
        np.testing.assert_array_equal(_replay(plan, data, op), want)


def test_plan_shapes_that_matter(plan_dump):
    # rows of 768 fp16 (96 vectors): one warp per row; rows of 96: two rows per warp
    s = _plan(plan_dump, (1576, 768), (1576, 1))["stages"]
    assert len(s) == 1 and s[0]["warp"] and s[0]["lanes"] == 32
    assert _plan(plan_dump, (100352, 96), (100352, 1))["stages"][0]["lanes"] == 16
    # long rows: a block per row; one long row: split over 264 blocks (132 SMs), then the partials
    assert not _plan(plan_dump, (40, 3072), (40, 1))["stages"][0]["warp"]
    whole = _plan(plan_dump, (5000000,), (1,))["stages"]
    assert [st["split"] for st in whole] == [264, 1] and whole[1]["r"] == 264
    # a middle axis: coalesced columns with 16-byte vectors; two non-adjacent axes: two stages
    mid = _plan(plan_dump, (6, 32, 128), (6, 1, 128))["stages"]
    assert len(mid) == 1 and not mid[0]["row"] and mid[0]["vec"] == 8
    assert len(_plan(plan_dump, (4, 16, 9, 5), (1, 16, 1, 5))["stages"]) == 2
    assert not _plan(plan_dump, (2, 3), (2, 5))["ok"]  # y is not x with reduced dims set to 1
    assert not _plan(plan_dump, (2, 3), (1, 2))["ok"]


def _reduce_model(path):
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], name="mean_last", axes=[-1], keepdims=1),
             helper.make_node("Sub", ["x", "m"], ["d"], name="sub"),
             helper.make_node("ReduceSum", ["d"], ["s"], name="sum_spatial", axes=[2, 3], keepdims=1),
             helper.make_node("ReduceMax", ["d"], ["mx"], name="max_two", axes=[0, 2], keepdims=0),
             helper.make_node("ReduceMin", ["d"], ["mn"], name="min_all", keepdims=0)]
    graph = helper.make_graph(nodes, "reduce", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 9, 24])],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 16, 1, 1]),
                               helper.make_tensor_value_info("mx", TensorProto.FLOAT, [16, 24]),
                               helper.make_tensor_value_info("mn", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])  # axes as attributes
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_reduce_case_times_the_kernel_beside_cudnn(tmp_path):
    cfg = L.ReduceConfig("mean", (8, 197, 768), (8, 197, 1))
    case = _reduce_case(cfg, Job("j", cfg, "fp16", "n"))
    assert case.op == "CUDNN_REDUCE_TENSOR_AVG" and case.kop == "ReduceOp::Mean"
    ml = process(_reduce_model(tmp_path / "r.onnx"), 4)
    assert sorted(ly.config.op for ly in ml.benchmarked() if ly.config.kind == "Reduce") == ["max", "mean", "min",
                                                                                              "sum"]
    generate([ml], ["fp16"], tmp_path / "s", kinds=["Reduce"])
    src = (tmp_path / "s" / "src" / "reduce.cpp").read_text()
    assert "benanza::reduce(x, y, c.x, c.y, c.nd, c.kop, dt, wsp, kws, s)" in src and "cudnnReduceTensor(" in src
    for op in ("Mean", "Sum", "Max", "Min"):
        assert f"ReduceOp::{op}}}" in src


@pytest.mark.slow
def test_reduce_suite_compiles_and_links(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    ml = process(_reduce_model(tmp_path / "r.onnx"), 4)
    suite = generate([ml], ["fp32", "fp16", "bf16"], tmp_path / "s", kinds=["Reduce"])
    r = build(suite.root)
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(ln)["job"] for ln in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
    nm = subprocess.run(["nm", "-C", str(r.executable)], capture_output=True, text=True).stdout
    assert "benanza::reduce(" in nm and "reduce_rows_k" in nm and "reduce_cols_k" in nm
