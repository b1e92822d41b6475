"""The data-movement ops of the decoder exports (issue 27, item 3) as layers of the Copy kind: ONNX
Expand (a strided copy with source stride 0 on the broadcast dims; its gradient a ReduceSum) and
Split (every output, sizes as each opset gives them; its gradient a Concat) and Tile (a strided copy
over (repeat, extent) pairs of dims; its gradient a ReduceSum), each
mapped from small onnx.helper graphs and the real decoder exports in tests/data/decoders, its
transfers executed in numpy as the suite's strided-copy kernel runs them (after the kernel's own
plan, ``_native.plan_strided_copy``), its PyTorch candidate and gradient, and one generated suite
with every new case that passes the compiler's syntax check."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.errors import ModelError
from benanza.generation.generator import generate
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from test_copy_backward import _candidate, _suite_model, run_copy
from test_generator import _planned_copy
from test_unary_backward import syntax_check

DECODERS = REPO / "tests" / "data" / "decoders"


def _graph(path, nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _f(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _i64(name, values):
    return onnx.numpy_helper.from_array(np.asarray(values, dtype=np.int64), name)


# ----------------------------------------------------------------------------- Expand

EXPANDS = [  # (x, y): GQA's repeat of K and V, BERT's attention mask, a causal mask over the batch (one
    # 2-D copy of source pitch 0), a broadcast of the last dim
    ((2, 2, 1, 128, 16), (2, 2, 4, 128, 16)),
    ((32, 1, 1, 128), (32, 1, 128, 128)),
    ((1, 1, 128, 128), (32, 1, 128, 128)),
    ((3, 1), (2, 3, 5)),
]


def _expand(x, y):
    return L.CopyConfig(op="Expand", inputs=(x,), y=y, attrs=())


@pytest.mark.parametrize("x,y", EXPANDS)
def test_expand_transfers_are_numpys_broadcast(x, y):
    """The one transfer (source stride 0 on the broadcast dims) writes np.broadcast_to(x, y), in the
    generic index form and after the kernel's plan (dims merged, vectors, 32-bit indexing), fp32 and
    fp16."""
    cfg = _expand(x, y)
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(x)
    np.testing.assert_array_equal(run_copy(cfg, [xv]), np.broadcast_to(xv, y))
    case = L.REGISTRY["Copy"].case(cfg, L.Job("j", cfg, "fp32", "n"))
    (t,) = case.transfers
    for dtype in (np.float32, np.float16):
        xs = xv.astype(dtype)
        out = np.full(L.numel(y), np.nan, dtype)
        plan = _planned_copy(xs.reshape(-1), out, t, np.dtype(dtype).itemsize)
        np.testing.assert_array_equal(out.reshape(y), np.broadcast_to(xs, y))
        assert plan["index32"] and 0 in plan["src_strides"]
    assert case.memcpy == ("true" if x == (1, 1, 128, 128) else "false")
    if case.memcpy == "true":  # the same 128 x 128 rows 32 times: source pitch 0
        assert (t.rows, t.cols, t.src_pitch, t.dst_pitch) == (32, 128 * 128, 0, 128 * 128)
    assert L.REGISTRY["Copy"].min_bytes(cfg, 2, 2) == 2 * (L.numel(x) + L.numel(y))
    assert cfg.flops() == 0 and not cfg.is_identity()


def test_expand_without_a_broadcast_is_an_identity():
    assert _expand((4, 5), (1, 4, 5)).is_identity() and _expand((4, 5), (4, 5)).is_identity()


@pytest.mark.parametrize("x,y", EXPANDS)
def test_expand_gradient_is_a_sum_over_the_broadcast_dims(x, y):
    """autograd's ``expand: self: at::sum_to(grad, self.sym_sizes())``: a ReduceSum of dy to x's
    shape (leading 1s for new dims), whose numpy value is the gradient of the broadcast."""
    (call,) = L.REGISTRY["Copy"].backward(_expand(x, y))
    phase, red = call
    xp = (1,) * (len(y) - len(x)) + x
    assert phase == "backward_data" and isinstance(red, L.ReduceConfig)
    assert red.op == "sum" and red.x == y and red.y == xp
    dy = np.random.default_rng(1).standard_normal(y)
    axes = tuple(i for i, (a, b) in enumerate(zip(xp, y)) if a != b)
    # the gradient of sum(dy * broadcast_to(x)) by x is dy summed over the broadcast dims
    np.testing.assert_allclose(dy.sum(axis=axes, keepdims=True).reshape(x),
                               np.einsum(dy, list(range(len(y))), [i for i in range(len(y)) if i not in axes]
                                         ).reshape(x))


def test_expand_candidate_and_stored_config():
    cfg = _expand((2, 2, 1, 128, 16), (2, 2, 4, 128, 16))
    c = _candidate(cfg)
    assert c.call == "torch:aten::expand+clone" and c.out_numel == L.numel(cfg.y)
    assert L.config_from_params("Copy", cfg.params()) == cfg
    assert "aten::expand" in L.REGISTRY["Copy"].aten["Expand"]


def test_expand_mapping(tmp_path):
    """Expand's output shape comes from shape inference (the shape input may be computed); a float
    input maps to a Copy layer, an int64 one to a Copy layer of int64 data."""
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"], name="kv_repeat"),
             helper.make_node("Expand", ["m", "shape2"], ["z"], name="mask")]
    path = _graph(tmp_path / "e.onnx", nodes, [_f("x", ["N", 2, 1, 8, 16]), _f("m", ["N", 1, 1, 8], TensorProto.INT64)],
                  [_f("y", ["N", 2, 4, 8, 16]), _f("z", ["N", 1, 8, 8], TensorProto.INT64)],
                  [_i64("shape", [1, 2, 4, 8, 16]), _i64("shape2", [1, 1, 8, 8])])
    ml = process(path, 3)
    (e, m) = ml.layers
    assert e.status == "benchmark" and e.config == _expand((3, 2, 1, 8, 16), (3, 2, 4, 8, 16))
    assert m.status == "benchmark" and m.config == L.CopyConfig(op="Expand", inputs=((3, 1, 1, 8),), y=(3, 1, 8, 8),
                                                                attrs=(), dtype="int64")


# ----------------------------------------------------------------------------- Split

def _split_model(tmp_path, opset, d=10, n=3, **how):
    """x [N, 4, d] split on axis -1 into n outputs, the sizes given as ``how`` says (split=[...] as an
    input from opset 13, an attribute before; num_outputs=k; nothing: equal parts)."""
    split, inits, ins = how.pop("split", None), [], ["x"]
    if split is not None and opset >= 13:
        inits, ins = [_i64("sizes", split)], ["x", "sizes"]
    elif split is not None:
        how["split"] = split
    outs = [f"y{i}" for i in range(n)]
    node = helper.make_node("Split", ins, outs, name="qkv", axis=-1, **how)
    return _graph(tmp_path / f"split{opset}.onnx", [node], [_f("x", ["N", 4, d])],
                  [_f(o, ["N", 4, f"d{o}"]) for o in outs], inits, opset)


@pytest.mark.parametrize("opset,how,sizes", [
    (11, {"split": [2, 3, 5]}, (2, 3, 5)),   # attribute
    (13, {"split": [2, 3, 5]}, (2, 3, 5)),   # input
    (13, {}, None),                           # equal parts of 10 by 3: a clear error, no crash
    (18, {"num_outputs": 3}, (4, 4, 2)),      # ceil(10 / 3) = 4, the last one smaller
    (18, {"split": [5, 5, 0]}, (5, 5)),       # an empty part moves nothing
])
def test_split_mapping_in_each_opset(tmp_path, opset, how, sizes):
    if sizes is None:
        with pytest.raises(ModelError, match="not evenly splittable"):
            process(_split_model(tmp_path, opset, **how), 2)
        return
    (ly,) = process(_split_model(tmp_path, opset, **how), 2).layers
    assert ly.status == "benchmark", ly.reason
    assert ly.config == L.CopyConfig(op="Split", inputs=((2, 4, 10),), y=(2, 4, 10),
                                     attrs=(("axis", (2,)), ("sizes", sizes)))
    assert len(ly.outputs) == 3


def test_equal_split_and_its_transfers(tmp_path):
    """Equal parts (no sizes): three parts of 4; executed, the packed output is np.split's parts one
    after another; its gradient is the Concat of the parts, whose transfers rebuild the input."""
    (ly,) = process(_split_model(tmp_path, 13, d=12), 2).layers
    cfg = ly.config
    assert cfg.attr("sizes") == (4, 4, 4)
    x = np.random.default_rng(2).standard_normal((2, 4, 12))
    packed = run_copy(cfg, [x]).reshape(-1)
    np.testing.assert_array_equal(packed, np.concatenate([p.reshape(-1) for p in np.split(x, 3, axis=2)]))
    (phase, cat), = L.REGISTRY["Copy"].backward(cfg)
    assert phase == "backward_data" and cat.op == "Concat" and cat.inputs == ((2, 4, 4),) * 3 and cat.y == (2, 4, 12)
    parts = np.split(x, 3, axis=2)
    np.testing.assert_array_equal(run_copy(cat, parts), x)
    assert _candidate(cfg).call == "torch:aten::split_with_sizes+copy_"
    assert "aten::split_with_sizes" in L.REGISTRY["Copy"].aten["Split"]


# ----------------------------------------------------------------------------- Tile

TILES = [((2, 3, 4), (2, 1, 3)), ((1, 128, 64), (8, 1, 1)), ((5,), (1,))]  # (x, repeats)


def _tile(x, reps):
    return L.CopyConfig(op="Tile", inputs=(x,), y=tuple(d * r for d, r in zip(x, reps)), attrs=(("repeats", reps),))


@pytest.mark.parametrize("x,reps", TILES)
def test_tile_transfers_gradient_and_candidate(x, reps):
    """The transfer writes np.tile (generic form and the kernel's plan); the gradient is
    repeat_backward's sum over the repeat blocks; np.tile with repeats of 1 is an identity."""
    cfg = _tile(x, reps)
    rng = np.random.default_rng(3)
    xv = rng.standard_normal(x).astype(np.float32)
    np.testing.assert_array_equal(run_copy(cfg, [xv]), np.tile(xv, reps))
    (t,) = L.REGISTRY["Copy"].case(cfg, L.Job("j", cfg, "fp32", "n")).transfers
    out = np.full(L.numel(cfg.y), np.nan, np.float32)
    _planned_copy(xv.reshape(-1), out, t, 4)
    np.testing.assert_array_equal(out.reshape(cfg.y), np.tile(xv, reps))
    assert cfg.is_identity() == (reps == (1,) * len(reps))
    if cfg.is_identity():
        return
    (phase, red), = L.REGISTRY["Copy"].backward(cfg)
    assert phase == "backward_data" and red.op == "sum"
    dy = rng.standard_normal(cfg.y)
    axes = tuple(i for i, (a, b) in enumerate(zip(red.x, red.y)) if a != b)
    got = dy.reshape(red.x).sum(axis=axes).reshape(x)
    want = np.zeros(x)  # the adjoint of np.tile: each output element's gradient to its source element
    for idx in np.ndindex(*cfg.y):
        want[tuple(i % d for i, d in zip(idx, x))] += dy[idx]
    np.testing.assert_allclose(got, want)
    assert _candidate(cfg).call == "torch:aten::repeat" and "aten::repeat" in L.REGISTRY["Copy"].aten["Tile"]


def test_tile_mapping(tmp_path):
    node = helper.make_node("Tile", ["x", "reps"], ["y"], name="tile")
    path = _graph(tmp_path / "t.onnx", [node], [_f("x", ["N", 3, 4])], [_f("y", ["N", 6, 4])], [_i64("reps", [1, 2, 1])])
    (ly,) = process(path, 2).layers
    assert ly.status == "benchmark" and ly.config == _tile((2, 3, 4), (1, 2, 1))


# ----------------------------------------------------------------------------- real decoders

@pytest.mark.parametrize("name", ["llama_prefill_dynamo20", "gpt2_prefill_dynamo20"])
def test_decoder_exports_have_no_unsupported_expand_or_split(name):
    ml = process(DECODERS / f"{name}.onnx", 2, dims={"seq": 128})
    unsupported = collections.Counter(ly.op_type for ly in ml.layers if ly.status == "unsupported")
    assert "Expand" not in unsupported, [(ly.op_type, ly.reason) for ly in ml.layers if ly.status == "unsupported"]
    expands = [ly for ly in ml.layers if ly.op_type == "Expand" and ly.status == "benchmark"]
    if name.startswith("llama"):  # GQA's repeat of K and V: 2 layers x (K, V), batch 2, 2 kv heads x 2, head_dim 32
        assert len(expands) == 4, expands
        assert {ly.config.y for ly in expands} == {(2, 2, 2, 128, 32)}, {ly.config.y for ly in expands}
        plan = training_plan(ml)
        assert not {i for i in plan.no_backward if ml.layers[i].op_type == "Expand"}
        sums = [c for c in plan.calls if ml.layers[c.layer].op_type == "Expand"]
        assert len(sums) == 4 and all(c.config.kind == "Reduce" and c.config.y == (2, 2, 1, 128, 32) for c in sums)
    else:  # GPT-2's qkv split (c_attn's output, hidden 128) in each of the 2 blocks; attention still found
        splits = [ly for ly in ml.layers if ly.op_type == "Split"]
        assert len(splits) == 2 and all(ly.status == "benchmark" for ly in splits)
        assert {ly.config.attr("sizes") for ly in splits} == {(128, 128, 128)}, [ly.config for ly in splits]
        assert sum(f.config.kind == "SDPA" for f in ml.fusions) == 2
        plan = training_plan(ml)
        cats = [c for c in plan.calls if ml.layers[c.layer].op_type == "Split"]
        assert len(cats) == 2 and all(c.config.op == "Concat" and len(c.config.inputs) == 3 for c in cats)
    assert not unsupported, unsupported


# ----------------------------------------------------------------------------- the suite

def test_the_suite_renders_and_its_source_compiles(tmp_path):
    """Every new Copy case in one suite (fp32 and fp16); a broadcast skips cudnnTransformTensor and
    cudaMemcpy2DAsync (not its strided_copy and batched_copy2d); g++ -fsyntax-only passes."""
    cfgs = [_expand(x, y) for x, y in EXPANDS] + [
        L.CopyConfig(op="Split", inputs=((2, 128, 192),), y=(2, 128, 192), attrs=(("axis", (2,)), ("sizes", (64, 64, 64)))),
        _tile((2, 3, 4), (2, 1, 3))]
    generate([_suite_model(cfgs)], ["fp32", "fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "copy.cpp").read_text()
    assert src.count('"Expand"}') == len(EXPANDS) * 2 and "if (!broadcast && !c.stored)" in src and src.count('"Split"}') == 2
    assert src.count('"Tile"}') == 2
    assert "{128, 0, 1, 1, 1, 1, 1, 1}" in src  # BERT's mask: (32, 128, 128) with source strides (128, 0, 1)
    syntax_check(tmp_path / "s", "copy.cpp")
