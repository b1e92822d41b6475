"""ONNX TopK as a layer of its own kind: the mapping of a mixture-of-experts router's top-k (float
scores [tokens, E], sorted or not; DeepSeek's group-limited pair [tokens, n_group, E / n_group] then
[tokens, n_group]), of torch.sort's export (an int64 TopK of k = len, largest=0, whose K comes from Shape
nodes), TopK-1's attribute k, and what is Unsupported and why (a K computed at run time, an outer axis);
the TopK nodes of two weight-stripped transformers 5 exports (Mixtral decode, Qwen3-MoE prefill;
tests/data/decoders); bytes, FLOPs and the gradient; the warp kernel's selection (topk_key, topk_consider,
topk_before of cpp/include/benanza/topk.hpp, compiled for the host, run lane by lane) against numpy's
stable sort, NaN, infinities, signed zeros and ties included; the PyTorch candidate; one generated suite
whose source passes the compiler's syntax check; the kernels compile with nvcc (in the harness build, tests/test_harness_build.py); and on a GPU both
calls against a CPU reference (tests/data/topk_check.cu)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.errors import ModelError
from benanza.generation.generator import generate
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import HERE, REPO, have_gpu
from test_copy_backward import _candidate, _suite_model
from test_unary_backward import syntax_check

MOE = HERE / "data" / "decoders"  # benanza's own exports (benchmarks/lm_step_exports.py)


def _save(path, nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _router(path, experts=128, k=8, sorted_=None, opset=18):
    """Softmax over the router's logits, then their top-k (``torch.topk(probs, top_k, dim=-1)``)."""
    kw = {} if sorted_ is None else {"sorted": sorted_}
    nodes = [helper.make_node("Softmax", ["logits"], ["p"], axis=-1, name="softmax"),
             helper.make_node("TopK", ["p", "k"], ["w", "ids"], axis=-1, name="router_topk", **kw)]
    return _save(path, nodes, [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", experts])],
                 [helper.make_tensor_value_info("w", TensorProto.FLOAT, ["N", k]),
                  helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", k])],
                 [helper.make_tensor("k", TensorProto.INT64, [1], [k])], opset)


def _expert_sort(path, top_k=8):
    """transformers' sort of the chosen expert ids: ``ids.view(-1)`` then ``torch.sort``, exported as a
    TopK of k = the flattened length (Shape -> K), largest=0, sorted=1."""
    nodes = [helper.make_node("Reshape", ["ids", "flat"], ["f"], name="flatten"),
             helper.make_node("Shape", ["f"], ["n"], name="shape"),
             helper.make_node("TopK", ["f", "n"], ["sorted_ids", "perm"], axis=-1, largest=0, sorted=1, name="sort")]
    return _save(path, nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", top_k])],
                 [helper.make_tensor_value_info("sorted_ids", TensorProto.INT64, [None]),
                  helper.make_tensor_value_info("perm", TensorProto.INT64, [None])],
                 [helper.make_tensor("flat", TensorProto.INT64, [1], [-1])])


def _topk_layers(ml):
    return [ly for ly in ml.layers if ly.op_type == "TopK"]


@pytest.mark.parametrize("sorted_", [None, 0])
def test_the_router_top_k(tmp_path, sorted_):
    """[tokens, 128] scores, k = 8 from its int64 initializer, axis -1: rows of 128, largest and (by
    default, ONNX's) sorted; x read once and values plus int64 indices written; no FLOPs; a float TopK
    gradient is the values' gradient scattered into zeros of the scores' shape at the indices
    (derivatives.yaml's topk: value_selecting_reduction_backward), a ScatterElements of the Scatter kind."""
    ml = process(_router(tmp_path / "r.onnx", sorted_=sorted_), 4)
    (ly,) = _topk_layers(ml)
    assert ly.status == "benchmark", ly.reason
    want = L.TopKConfig(x=(4, 128), axis=1, k=8, largest=True, sorted=sorted_ is None)
    assert ly.config == want and (want.rows, want.length, want.output_shape()) == (4, 128, (4, 8))
    assert want.flops() == 0
    assert L.REGISTRY["TopK"].min_bytes(want, 2, 2) == 2 * 4 * 128 + (2 + 8) * 4 * 8
    grad = L.ScatterConfig(op="ScatterElements", data=(4, 128), indices=(4, 8), updates=(4, 8), axis=1)
    assert L.REGISTRY["TopK"].backward(want) == (("backward_data", grad),)
    plan = training_plan(ml)
    assert ly.index not in plan.no_backward
    assert [c.config for c in plan.calls if c.layer == ly.index] == [grad]


def test_the_sort_of_expert_ids(tmp_path):
    """torch.sort's export: K is Shape(ids) (static once the batch is bound), int64 keys; a sort of
    4 x 8 ids ascending, 8 bytes read and 16 written per element, no gradient (integer data)."""
    ml = process(_expert_sort(tmp_path / "s.onnx"), 4)
    (ly,) = _topk_layers(ml)
    assert ly.status == "benchmark", ly.reason
    assert ly.config == L.TopKConfig(x=(32,), axis=0, k=32, largest=False, sorted=True, dtype="int64")
    assert ly.config.is_sort and "sort ascending int64" in ly.config.describe()
    assert L.REGISTRY["TopK"].min_bytes(ly.config, 2, 2) == 8 * 32 + (8 + 8) * 32
    assert L.REGISTRY["TopK"].backward(ly.config) == ()


def test_deepseeks_group_limited_router(tmp_path):
    """DeepSeek-V3's router: the top-2 of each group of 32 experts ([tokens, 8, 32], rows of 32), their
    sum, and the top-4 groups ([tokens, 8], unsorted): two TopK layers over the innermost axis."""
    two = helper.make_tensor("two", TensorProto.INT64, [1], [2])
    four = helper.make_tensor("four", TensorProto.INT64, [1], [4])
    last = helper.make_tensor("last", TensorProto.INT64, [1], [-1])
    nodes = [helper.make_node("TopK", ["s", "two"], ["v", "i"], axis=-1, name="in_group"),
             helper.make_node("ReduceSum", ["v", "last"], ["g"], keepdims=0, name="group_score"),
             helper.make_node("TopK", ["g", "four"], ["gv", "gi"], axis=-1, sorted=0, name="groups")]
    p = _save(tmp_path / "d.onnx", nodes, [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 8, 32])],
              [helper.make_tensor_value_info("gi", TensorProto.INT64, ["N", 4])], [two, four, last])
    got = [(ly.status, ly.config) for ly in _topk_layers(process(p, 16))]
    assert got == [("benchmark", L.TopKConfig(x=(16, 8, 32), axis=2, k=2)),
                   ("benchmark", L.TopKConfig(x=(16, 8), axis=1, k=4, sorted=False))]
    assert got[0][1].rows == 128 and got[0][1].length == 32


def test_topk_1_takes_k_from_its_attribute(tmp_path):
    nodes = [helper.make_node("TopK", ["x"], ["v", "i"], k=3, axis=1, name="t")]
    p = _save(tmp_path / "t1.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 10])],
              [helper.make_tensor_value_info("v", TensorProto.FLOAT, ["N", 3])], opset=9)
    (ly,) = _topk_layers(process(p, 2))
    assert ly.status == "benchmark" and ly.config == L.TopKConfig(x=(2, 10), axis=1, k=3), ly.reason


def test_what_does_not_fit_is_unsupported_with_a_reason(tmp_path):
    """A K that is a graph input (known at run time only: the reason says so, though shape inference left
    the output unknown), a K of two elements (a bad model), an outer axis of a
    tensor with a dim after it; and configs outside the bounds raise ValueError."""
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], name="t")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])
    p = _save(tmp_path / "a.onnx", nodes, [x, helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
              [helper.make_tensor_value_info("v", TensorProto.FLOAT, [None, None])])
    (ly,) = process(p, 2).layers
    assert ly.status == "unsupported" and "K (input 'k') is not a constant" in ly.reason, ly.reason
    p = _save(tmp_path / "b.onnx", nodes, [x], [helper.make_tensor_value_info("v", TensorProto.FLOAT, [None, None])],
              [helper.make_tensor("k", TensorProto.INT64, [2], [1, 2])])
    with pytest.raises(ModelError, match="K input must be a one-dimensional tensor of size 1"):
        process(p, 2)  # onnx's shape inference refuses the model, naming the node
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, name="t")]
    p = _save(tmp_path / "c.onnx", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 4])],
              [helper.make_tensor_value_info("v", TensorProto.FLOAT, ["N", 2, 4])],
              [helper.make_tensor("k", TensorProto.INT64, [1], [2])])
    (ly,) = process(p, 2).layers
    assert ly.status == "unsupported" and "innermost axis" in ly.reason, ly.reason
    with pytest.raises(ValueError, match="not innermost"):
        L.TopKConfig(x=(2, 16, 4), axis=1, k=2)
    with pytest.raises(ValueError, match="k 17"):
        L.TopKConfig(x=(2, 16), axis=1, k=17)
    with pytest.raises(ValueError, match="int8"):
        L.TopKConfig(x=(2, 16), axis=1, k=2, dtype="int8")


def test_the_exported_moe_graphs_topk_nodes_map():
    """Every TopK of the weight-stripped torch.onnx (dynamo) exports of transformers 5's Mixtral (decode)
    and Qwen3-MoE (prefill, 16 tokens per sequence) maps: the routers' top-2 of 8 experts (the exports'
    tiny configurations: 8 experts) and the int64 ascending sorts of tokens x top-2 expert ids."""
    for name, tokens in (("mixtral_decode.onnx", 4), ("qwen3_moe_prefill.onnx", 64)):
        layers = _topk_layers(process(MOE / name, 4))
        assert len(layers) == 4 and all(ly.status == "benchmark" for ly in layers), [ly.reason for ly in layers]
        routers = [ly.config for ly in layers if not ly.config.dtype]
        sorts = [ly.config for ly in layers if ly.config.dtype]
        assert routers == [L.TopKConfig(x=(tokens, 8), axis=1, k=2)] * 2, (name, routers)
        assert sorts == [L.TopKConfig(x=(2 * tokens,), axis=0, k=2 * tokens, largest=False, dtype="int64")] * 2


#: ONNX element types of the host check: topk_key's TopKType values (benanza/topk.hpp)
F32, F16, BF16, I32, I64 = range(5)


def _reference(v: np.ndarray, largest: bool, k: int) -> list[int]:
    """The first k indices of TopK-11's order, numpy's stable lexsort: PyTorch's rank of NaN (above
    every number), -0.0 equal to 0.0, ties to the lower index."""
    if v.dtype.kind == "f":
        nan = np.isnan(v)
        w = np.where(nan, 0, v).astype(np.float64)
        keys = (-w, ~nan) if largest else (w, nan)
    else:
        keys = (-v.astype(object) if largest else v.astype(object),)
        return sorted(range(len(v)), key=lambda j: (keys[0][j], j))[:k]
    return np.lexsort(keys)[:k].tolist()


def _bits(v: np.ndarray, kind: int) -> np.ndarray:
    if kind == BF16:
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint64)
    return {F32: lambda: v.astype(np.float32).view(np.uint32), F16: lambda: v.astype(np.float16).view(np.uint16),
            I32: lambda: v.astype(np.int32).view(np.uint32), I64: lambda: v.astype(np.int64).view(np.uint64)}[kind]()


def _host_cases():
    rng = np.random.default_rng(3)
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.5, -1.5, 1.5], np.float32)
    out = []
    for kind in (F32, F16, BF16, I32, I64):
        for length, k in ((1, 1), (5, 5), (9, 4), (32, 8), (33, 32), (100, 8), (256, 8), (1000, 32)):
            for largest in (True, False):
                if kind in (I32, I64):
                    big = 2 ** 62 if kind == I64 else 2 ** 30
                    v = rng.integers(-4, 4, length) * rng.choice([1, big], length)
                    v = v.astype(np.int64 if kind == I64 else np.int32)
                else:
                    v = (rng.integers(-16, 16, length) / 4).astype(np.float32)  # ties, exact in bf16 and fp16
                    if length >= len(special):
                        v[rng.choice(length, len(special), replace=False)] = special
                    if kind == F16:
                        v = v.astype(np.float16)
                out.append((kind, largest, k, v))
    return out


def test_the_warp_selection_orders_like_numpy(tmp_path):
    """The warp kernel's k rounds (tests/data/topk_select.cpp runs topk_key, topk_consider and the xor
    reduction by topk_before, compiled for the host, over 32 lanes) on rows of 1 to 1,000 elements of
    each type, largest and smallest, give numpy's stable order's first k (NaN largest, -0.0 == 0.0,
    ties to the lower index; int64 keys near +-2^62)."""
    if not shutil.which("g++"):
        pytest.skip("g++ is missing")
    import site
    from pathlib import Path
    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia" / "cu13" / "include").is_dir()), None)
    if sp is None:
        pytest.skip("the CUDA runtime headers of the pip wheels are missing")
    exe = tmp_path / "sel"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{REPO / 'cpp' / 'include'}", f"-I{sp / 'nvidia' / 'cu13' / 'include'}",
                    str(HERE / "data" / "topk_select.cpp"), "-o", str(exe)], check=True, capture_output=True)
    cases = _host_cases()
    stdin = "".join(f"{kind} {int(largest)} {len(v)} {k} " + " ".join(str(int(b)) for b in _bits(v, kind)) + "\n"
                    for kind, largest, k, v in cases)
    r = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True)
    lines = r.stdout.strip("\n").split("\n")
    assert len(lines) == len(cases)
    for (kind, largest, k, v), line in zip(cases, lines):
        ref = v.astype(np.float32) if kind == BF16 else v
        assert [int(i) for i in line.split()] == _reference(ref, largest, k), (kind, largest, k, v.tolist())


def test_candidate_and_aten():
    c = _candidate(L.TopKConfig(x=(4, 128), axis=1, k=8, sorted=False))
    assert c.call == "torch:aten::topk" and c.out_numel == 32 and not c.variants
    c = _candidate(L.TopKConfig(x=(64,), axis=0, k=64, largest=False, dtype="int64"))
    assert [v.call for v in c.variants] == ["torch:aten::sort"] and c.out_numel == 64
    assert L.REGISTRY["TopK"].aten["TopK"] == ("aten::topk", "aten::sort")


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    cfgs = [L.TopKConfig(x=(64, 128), axis=1, k=8), L.TopKConfig(x=(4096,), axis=0, k=4096, largest=False, dtype="int64"),
            L.TopKConfig(x=(16, 8, 32), axis=2, k=2, sorted=False)]
    generate([_suite_model(cfgs)], ["fp32", "fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "topk.cpp").read_text()
    assert src.count('64, 128, 8, true, false, ElemType::F32, "top-8 largest"}') == 2
    assert src.count('1, 4096, 4096, false, true, ElemType::I64, "sort ascending int64"}') == 2
    assert src.count('128, 32, 2, true, false, ElemType::F32, "top-2 largest unsorted"}') == 2
    syntax_check(tmp_path / "s", "topk.cpp")


@pytest.mark.gpu
@pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU")
def test_both_calls_match_the_reference_on_a_gpu(tmp_path):
    """tests/data/topk_check.cu: the sort call and the warp kernel against a CPU stable sort by
    topk_key, fp32/fp16/bf16/int32/int64, routers, short and long rows, k = len, one row, 500,000 ids."""
    from benanza.build.cudalibs import locate

    exe = tmp_path / "topk_check"
    sources = [str(REPO / "cpp" / "src" / f) for f in ("topk_kernels.cu", "topk_sort_f32.cu", "topk_sort_f16.cu",
                                                        "topk_sort_bf16.cu", "topk_sort_i32.cu", "topk_sort_i64.cu")]
    subprocess.run([str(locate().nvcc), "-O2", "-std=c++17", "-arch=native", f"-I{REPO / 'cpp' / 'include'}",
                    f"-I{REPO / 'cpp' / 'src'}", str(HERE / "data" / "topk_check.cu"), *sources, "-o", str(exe)],
                   check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines and all(ln.startswith("ok ") for ln in lines), out.stdout + out.stderr
    assert len(lines) == 8 * 5 * 2 - 5 + 1  # 8 shapes in 5 types by 2 calls, rows of 5000 too long for the warp; 1 sort
