"""Rotary embedding as one layer kind (issue 27, item 3): ONNX opset 23 RotaryEmbedding mapped, the
decomposed Mul/Slice/Slice/Neg/Concat/Mul/Add chain torch.export and TorchScript write for transformers'
apply_rotary_pos_emb found as one fusion candidate with the same config, in the small decoder exports of
tests/data/decoders; the kernel's index arithmetic (ported to numpy item by item) checked against ONNX's
reference implementation; FLOPs and minimum bytes by arithmetic; bad nodes refused with a reason; a suite
that renders and compiles (its source and the harness's two new translation units)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.cpp import cpp_string
from benanza.kinds.onnx_map import Unsupported, node_attrs
from benanza.processing.model import Layer, ModelLayers, process
from conftest import REPO
from onnx_builders import HOSTILE
from test_rmsnorm import _wheels
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
R = L.RotaryConfig


def _llama(batch, seq=128):
    """The small Llama's two rotary configs: q (4 heads) and k (2 KV heads), head_dim 32, full rotation."""
    return {R(x=(batch, 4, seq, 32), num_heads=4, rotary_dim=32), R(x=(batch, 2, seq, 32), num_heads=2, rotary_dim=32)}


def test_the_opset_23_operator_is_one_layer():
    ml = process(DEC / "llama_prefill_dynamo23.onnx", 1, {"seq": 128})
    rot = [ly for ly in ml.layers if ly.op_type == "RotaryEmbedding"]
    assert len(rot) == 4 and all(ly.status == "benchmark" for ly in rot)
    assert {ly.config for ly in rot} == _llama(1)
    assert [ly.config.num_heads for ly in rot] == [4, 2, 4, 2]  # q then k in each decoder layer
    assert "RotaryEmbedding" not in ml.unsupported()


@pytest.mark.parametrize("name,dims,seq", [("llama_prefill_dynamo20", {"seq": 128}, 128),
                                           ("llama_prefill_torchscript", {"seq": 128}, 128),
                                           ("llama_decode_torchscript", {"past": 64, "total": 65}, 1)])
def test_the_decomposed_chain_is_one_fusion_candidate(name, dims, seq):
    """q's and k's rotation in each of the two decoder layers as one candidate each, with the config the
    opset 23 operator of the same model maps to (so they share one measurement); decode rotates one token."""
    ml = process(DEC / f"{name}.onnx", 4, dims)
    groups = [f for f in ml.fusions if f.config.kind == "RotaryEmbedding"]
    assert len(groups) == 4 and {f.config for f in groups} == _llama(4, seq)
    for f in groups:
        assert sorted(ml.layers[i].op_type for i in f.layers) == sorted(
            ["Mul", "Slice", "Slice", "Neg", "Concat", "Mul", "Add"])
    assert ml.summary()["fusions_by_kind"]["RotaryEmbedding"] == 4
    if seq == 128:
        same = process(DEC / "llama_prefill_dynamo23.onnx", 4, {"seq": 128})
        assert {ly.config.key for ly in same.layers if ly.op_type == "RotaryEmbedding"} == {f.config.key for f in groups}


# ----------------------------------------------------------------------------- the kernel's arithmetic

def _kernel(x, cos, sin, ids, r: R):
    """rotary_k of cpp/src/rotary_kernels.cu in numpy, item by item as its threads run: item i of a head
    row is pair i (< rotary_dim / 2) or the pass-through element rotary_dim + (i - rotary_dim / 2); x, y
    packed (flat), cos/sin (rows, rotary_dim / 2) flat, ids (b * s) or None."""
    heads, d = r.heads_dim()
    b, s, rot = r.batch, r.seq, r.rotary_dim
    half, per_row = rot // 2, d - rot // 2
    x, y = x.reshape(-1).astype(np.float32), np.full(x.size, np.nan, np.float32)
    cs, sn = cos.reshape(-1).astype(np.float32), sin.reshape(-1).astype(np.float32)
    bshd = r.layout == "bshd"
    for i in range(b * heads * s * per_row):
        j, row = i % per_row, i // per_row
        si = (row // heads) % s if bshd else row % s
        bi = row // (heads * s)
        base = row * d
        if j >= half:
            e = base + rot + (j - half)
            y[e] = x[e]
            continue
        crow = ids[bi * s + si] if r.positions else (bi * s + si if r.cache_batch > 1 else si)
        c, sv = cs[crow * half + j], sn[crow * half + j]
        e1, e2 = (base + 2 * j, base + 2 * j + 1) if r.interleaved else (base + j, base + j + half)
        y[e1], y[e2] = x[e1] * c - x[e2] * sv, x[e2] * c + x[e1] * sv
    return y


def _reference(x, cos, sin, ids, **attrs):
    from onnx.reference import ReferenceEvaluator

    names = ["x", "cos", "sin"] + (["ids"] if ids is not None else [])
    vals = [x, cos, sin] + ([ids] if ids is not None else [])
    types = [TensorProto.FLOAT] * 3 + [TensorProto.INT64]
    g = helper.make_graph([helper.make_node("RotaryEmbedding", names, ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info(n, t, list(v.shape)) for n, v, t in zip(names, vals, types)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))])
    ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))
    return ref.run(None, dict(zip(names, vals)))[0]


@pytest.mark.parametrize("shape,attrs,cache,with_ids", [
    ((2, 3, 5, 8), {}, (1, 5, 4), False),                                             # llama: halves, full
    ((2, 3, 5, 8), {"interleaved": 1, "rotary_embedding_dim": 4}, (2, 5, 2), False),  # per-batch cache
    ((2, 5, 12), {"num_heads": 2, "rotary_embedding_dim": 4}, (7, 2), True),          # 3-D, position ids
    ((2, 5, 12), {"num_heads": 2, "interleaved": 1}, (9, 3), True),
])
def test_the_kernels_index_arithmetic_is_onnxs(tmp_path, shape, attrs, cache, with_ids):
    """The kernel's items, pair indices, cache rows and pass-through, against ONNX's reference
    RotaryEmbedding; the config comes from the same node through benanza's mapper."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    cos, sin = (rng.standard_normal(cache).astype(np.float32) for _ in range(2))
    b, s = shape[0], shape[2] if len(shape) == 4 else shape[1]
    ids = rng.integers(0, cache[0], (b, s)).astype(np.int64) if with_ids else None
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"] + (["ids"] if with_ids else []), ["y"], **attrs)
    shapes = {"x": shape, "cos": cache, "sin": cache, "ids": (b, s)}
    cfg = L.REGISTRY["RotaryEmbedding"].onnx["RotaryEmbedding"](node, _Ctx(shapes), node_attrs(node))
    assert cfg.positions == (cache[0] if with_ids else 0) and cfg.interleaved == bool(attrs.get("interleaved"))
    ours = _kernel(x, cos, sin, ids.reshape(-1) if with_ids else None, cfg)
    ref = _reference(x, cos, sin, ids, **attrs)  # a (1, s, d / 2) cache broadcasts over the batch there too
    np.testing.assert_allclose(ours.reshape(shape), ref, rtol=1e-5, atol=1e-6)


def test_the_transformers_form_is_the_same_rotation():
    """The decomposed chain's x * cat(c, c) + cat(-x2, x1) * cat(s, s) is the kernel's rotation with the
    (d / 2) cache (what lets the fusion candidate share the operator's config)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 8)).astype(np.float32)
    c, s = (rng.standard_normal((5, 4)).astype(np.float32) for _ in range(2))
    cc, ss = np.concatenate([c, c], -1), np.concatenate([s, s], -1)
    hf = x * cc + np.concatenate([-x[..., 4:], x[..., :4]], -1) * ss
    ours = _kernel(x, c, s, None, R(x=(2, 3, 5, 8), num_heads=3, rotary_dim=8))
    np.testing.assert_allclose(ours.reshape(x.shape), hf, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- the mapper and the finder

class _Ctx:
    """The mapper's view of a model (benanza.kinds.onnx_map.MapContext): shapes by tensor name."""

    def __init__(self, shapes):
        self.shapes = shapes

    def shape(self, name):
        return self.shapes.get(name)


@pytest.mark.parametrize("x,attrs,cache,ids,reason", [
    ((2, 8), {}, (2, 4), None, "an input of rank 2"),
    ((2, 5, 12), {}, (2, 5, 6), None, "a 3-D input of hidden size 12 with num_heads 0"),
    ((2, 5, 12), {"num_heads": 5}, (2, 5, 6), None, "with num_heads 5"),
    ((2, 3, 5, 8), {"rotary_embedding_dim": 3}, (2, 5, 1), None, "rotary_embedding_dim 3"),
    ((2, 3, 5, 8), {"rotary_embedding_dim": 10}, (2, 5, 5), None, "rotary_embedding_dim 10"),
    ((2, 3, 5, 8), {"num_heads": 2}, (2, 5, 4), None, "num_heads 2 for an input of 3 heads"),
    ((2, 3, 5, 8), {}, (2, 5, 8), None, "a cos_cache of shape [2, 5, 8]"),
    ((2, 3, 5, 8), {}, (3, 5, 4), None, "a cos_cache of shape [3, 5, 4]"),
    ((2, 3, 5, 8), {}, (9, 4), (2, 4), "position_ids [2, 4]"),
])
def test_a_node_it_cannot_time_is_unsupported_with_its_reason(x, attrs, cache, ids, reason):
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"] + (["ids"] if ids else []), ["y"], name=HOSTILE,
                            **attrs)
    with pytest.raises(Unsupported, match=reason.replace("[", r"\[").replace("]", r"\]")):
        L.REGISTRY["RotaryEmbedding"].onnx["RotaryEmbedding"](
            node, _Ctx({"x": x, "cos": cache, "sin": cache, "ids": ids}), node_attrs(node))
    missing = helper.make_node("RotaryEmbedding", ["x", "cos"], ["y"])
    with pytest.raises(Unsupported, match="without its cos_cache and sin_cache"):
        L.REGISTRY["RotaryEmbedding"].onnx["RotaryEmbedding"](missing, _Ctx({"x": (2, 3, 5, 8)}), {})


def test_a_config_that_is_no_rotation_is_refused():
    with pytest.raises(ValueError, match="rotary_dim 7"):
        R(x=(1, 2, 3, 8), num_heads=2, rotary_dim=7)
    with pytest.raises(ValueError, match="5 heads do not divide"):
        R(x=(1, 3, 12), num_heads=5, rotary_dim=2, layout="bshd")
    with pytest.raises(ValueError, match="layout 'bhsd'"):
        R(x=(1, 3, 12), num_heads=3, rotary_dim=2)
    with pytest.raises(ValueError, match="cache of 3 rows for batch 2"):
        R(x=(2, 2, 3, 8), num_heads=2, rotary_dim=8, cache_batch=3)


def _chain_model(cos_values, x_shape=(2, 3, 5, 8)):
    """transformers' apply_rotary_pos_emb on one tensor as torch.export writes it, cos/sin constants."""
    d, half = x_shape[-1], x_shape[-1] // 2
    ints = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in
            (("zero", 0), ("half", half), ("end", d), ("ax", 3))]
    cs = [helper.make_tensor(n, TensorProto.FLOAT, [1, 1, x_shape[2], d], v.reshape(-1).tolist())
          for n, v in (("cos", cos_values), ("sin", cos_values[..., ::-1].copy()))]
    nodes = [helper.make_node("Mul", ["x", "cos"], ["xc"]),
             helper.make_node("Slice", ["x", "zero", "half", "ax"], ["x1"]),
             helper.make_node("Slice", ["x", "half", "end", "ax"], ["x2"]),
             helper.make_node("Neg", ["x2"], ["n2"]), helper.make_node("Concat", ["n2", "x1"], ["rh"], axis=-1),
             helper.make_node("Mul", ["rh", "sin"], ["rs"]), helper.make_node("Add", ["xc", "rs"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x_shape))], initializer=ints + cs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


def test_the_finder_checks_the_cache_halves(tmp_path):
    """cos = cat(freqs, freqs) (halves equal) is a rotation of pairs: one candidate; a cache whose halves
    differ is no rotation the fused kernel computes: no candidate, the seven layers stay."""
    f = np.random.default_rng(2).standard_normal((1, 1, 5, 4)).astype(np.float32)
    p = tmp_path / "m.onnx"
    onnx.save(_chain_model(np.concatenate([f, f], -1)), p)
    ml = process(p, 2)
    assert [fu.config for fu in ml.fusions] == [R(x=(2, 3, 5, 8), num_heads=3, rotary_dim=8)]
    assert len(ml.fusions[0].layers) == 7
    onnx.save(_chain_model(np.concatenate([f, f + 1], -1)), p)
    assert not process(p, 2).fusions


def test_flops_and_bytes():
    cfg = R(x=(4, 32, 128, 128), num_heads=32, rotary_dim=128)
    n = 4 * 32 * 128 * 128
    assert cfg.flops() == 3 * n and cfg.input_shapes() == [cfg.x, (1, 128, 64), (1, 128, 64)]
    # x read and y written at 2 bytes (fp16), cos and sin (1, 128, 64) at 2 bytes
    assert min_bytes(cfg, "fp16") == 2 * n + 2 * n + 2 * 2 * 128 * 64
    ids = R(x=(4, 128, 4096), num_heads=32, rotary_dim=64, layout="bshd", positions=2048)
    assert ids.input_shapes()[1:] == [(2048, 32), (2048, 32), (4, 128)] and ids.flops() == 3 * 4 * 32 * 128 * 64
    # at most batch * seq = 512 cache rows of 32 values read, and the int64 ids
    assert min_bytes(ids, "fp32") == 4 * 4 * 128 * 4096 * 2 + 2 * 4 * 512 * 32 + 8 * 4 * 128


def _suite_model(batch):
    cfgs = [R(x=(batch, 32, 128, 128), num_heads=32, rotary_dim=128),
            R(x=(batch, 7, 96), num_heads=3, rotary_dim=16, interleaved=True, layout="bshd", positions=64)]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"rope{i}", op_type="RotaryEmbedding", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="rope", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=23,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_suite_renders_and_compiles(tmp_path):
    """The rotary suite's source (g++ -fsyntax-only, as the other kinds'), the harness's rotary_engines.cpp
    without the cudnn-frontend headers; with them, and rotary_kernels.cu, it compiles in the session's harness
    build (conftest.harness, checked in tests/test_harness_build.py)."""
    suite = generate([_suite_model(1), _suite_model(8)], ["fp32", "fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"RotaryEmbedding"} and len(suite.jobs) == 4 * 2
    src = (tmp_path / "s" / "src" / "rotaryembedding.cpp").read_text()
    assert "rotary_kernel(" in src and "run_rotary_engines(" in src and "rotary_positions(" in src
    assert "1, 32, 128, 128, 128, false, false, 1, 0," in src and "8, 32, 128, 128, 128, false, false, 1, 0," in src
    assert "8, 3, 7, 32, 16, true, true, 1, 64," in src  # 3-D (b, s, h * d): heads 3 of 32, 64 cache rows
    assert cpp_string(HOSTILE) in src
    syntax_check(tmp_path / "s", "rotaryembedding.cpp")
    sp = _wheels()
    if not shutil.which("g++") or sp is None:
        pytest.skip("g++ or the pip wheels' CUDA/cuDNN/cuBLAS headers are missing")
    inc = [REPO / "cpp" / "include", sp / "nvidia" / "cudnn" / "include", sp / "nvidia" / "cu13" / "include",
           sp / "include"]
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DBENANZA_WITH_FRONTEND=0", *[f"-I{p}" for p in inc],
                        str(REPO / "cpp" / "src" / "rotary_engines.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_backward_is_the_rotation_by_the_opposite_angle():
    """<R x, dy> == <x, R(-angle) dy> for the kernel's rotation (halves, interleaved, partial, 3-D with
    ids): the data gradient is the same config run with sin negated, one backward_data call."""
    rng = np.random.default_rng(3)
    for cfg in (R(x=(2, 3, 5, 8), num_heads=3, rotary_dim=8), R(x=(2, 3, 5, 8), num_heads=3, rotary_dim=4, interleaved=True),
                R(x=(2, 5, 12), num_heads=2, rotary_dim=4, layout="bshd", positions=7)):
        rows = cfg.positions or cfg.cache_batch * cfg.seq
        c, s = (rng.standard_normal((rows, cfg.rotary_dim // 2)).astype(np.float32) for _ in range(2))
        ids = rng.integers(0, rows, cfg.batch * cfg.seq) if cfg.positions else None
        x, dy = (rng.standard_normal(cfg.x).astype(np.float32) for _ in range(2))
        lhs = float(np.dot(_kernel(x, c, s, ids, cfg), dy.reshape(-1)))
        rhs = float(np.dot(x.reshape(-1), _kernel(dy, c, -s, ids, cfg)))
        assert lhs == pytest.approx(rhs, rel=1e-4)
        assert L.REGISTRY["RotaryEmbedding"].backward(cfg) == (("backward_data", cfg),)


# ----------------------------------------------------------------------------- com.microsoft RotaryEmbedding

MS = "com.microsoft"


class _MsCtx(_Ctx):
    """_Ctx with constant values (a scalar position offset)."""

    def __init__(self, shapes, values=None):
        super().__init__(shapes)
        self.values = values or {}

    def value(self, name):
        return self.values.get(name)


def _ms_map(x, attrs, cache, ids_shape, offset=None):
    node = helper.make_node("RotaryEmbedding", ["x", "ids", "cos", "sin"], ["y"], domain=MS, name=HOSTILE, **attrs)
    ctx = _MsCtx({"x": x, "ids": ids_shape, "cos": cache, "sin": cache},
                 {} if offset is None else {"ids": np.asarray(offset, np.int64)})
    return L.REGISTRY["RotaryEmbedding"].contrib[(MS, "RotaryEmbedding")].mapper(node, ctx, node_attrs(node))


@pytest.mark.parametrize("shape,attrs,cache,offset", [
    ((2, 3, 5, 8), {}, (9, 4), None),                                                # (b, h, s, d), head size from the cache
    ((2, 5, 12), {"num_heads": 2, "rotary_embedding_dim": 4}, (7, 2), None),         # 3-D, partial rotation
    ((2, 5, 12), {"interleaved": 1}, (9, 3), None),                                  # 3-D, heads from the cache
    ((2, 5, 12), {"num_heads": 2, "rotary_embedding_dim": 6, "interleaved": 1}, (9, 3), 3),  # a scalar offset
])
def test_ms_rotary_maps_onto_the_kind_and_rotates_as_onnx(shape, attrs, cache, offset):
    """ONNX Runtime's input order (input, position_ids, cos, sin) mapped onto RotaryConfig: a (b, s) id
    table gathers cache rows (positions = the cache's rows), a scalar offset is the cache's rows offset ..
    offset + s - 1 shared by the batch (positions 0, a (1, s, rot / 2) cache); the kernel's rotation of
    that config equals ONNX's reference RotaryEmbedding with the ids ONNX Runtime means."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    cos, sin = (rng.standard_normal(cache).astype(np.float32) for _ in range(2))
    b, s = shape[0], shape[2] if len(shape) == 4 else shape[1]
    if offset is None:
        ids = rng.integers(0, cache[0], (b, s)).astype(np.int64)
        cfg = _ms_map(shape, attrs, cache, (b, s))
        assert cfg.positions == cache[0]
        ours = _kernel(x, cos, sin, ids.reshape(-1), cfg)
    else:
        ids = np.broadcast_to(offset + np.arange(s, dtype=np.int64), (b, s)).copy()
        cfg = _ms_map(shape, attrs, cache, (1,), offset)
        assert cfg.positions == 0 and cfg.cache_batch == 1
        ours = _kernel(x, cos[offset:offset + s], sin[offset:offset + s], None, cfg)
    assert cfg.rotary_dim == 2 * cache[1] and cfg.interleaved == bool(attrs.get("interleaved"))
    ref_attrs = {"interleaved": int(bool(attrs.get("interleaved"))), "rotary_embedding_dim": cfg.rotary_dim,
                 **({"num_heads": cfg.num_heads} if len(shape) == 3 else {})}
    np.testing.assert_allclose(ours.reshape(shape), _reference(x, cos, sin, ids, **ref_attrs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x,attrs,cache,ids,offset,reason", [
    ((10, 12), {}, (9, 3), (1,), None, "an input of rank 2"),
    ((2, 5, 12), {"is_packed_batching": 1}, (9, 3), (2, 5), None, "is_packed_batching"),
    ((2, 5, 12), {"scale": 0.5}, (9, 3), (2, 5), None, "scale 0.5"),
    ((2, 5, 12), {"rotary_embedding_dim": 4}, (9, 2), (2, 5), None, "without num_heads"),
    ((2, 5, 12), {"num_heads": 5}, (9, 3), (2, 5), None, "num_heads 5 of head size 6 for a hidden size of 12"),
    ((2, 5, 12), {}, (9, 5), (2, 5), None, "a head size of 10 for a hidden size of 12"),
    ((2, 3, 5, 8), {"num_heads": 2, "rotary_embedding_dim": 8}, (9, 4), (2, 5), None, "num_heads 2 and head size"),
    ((2, 5, 12), {"num_heads": 2, "rotary_embedding_dim": 6}, (9, 4), (2, 5), None, "a cos_cache of 4 columns"),
    ((2, 5, 12), {}, (9, 3, 1), (2, 5), None, "two equal 2-D caches"),
    ((2, 5, 12), {}, (9, 3), (2, 4), None, r"position_ids \[2, 4\]"),
    ((2, 5, 12), {}, (9, 3), (), 6, "positions 6 \\+ 5 beyond the cache's 9 rows"),
])
def test_ms_rotary_forms_it_cannot_map_are_refused_with_a_reason(x, attrs, cache, ids, offset, reason):
    with pytest.raises(Unsupported, match=reason):
        _ms_map(x, attrs, cache, ids, offset)


def test_ms_rotary_in_a_model_is_one_layer_and_gives_its_output_a_shape(tmp_path):
    """A com.microsoft RotaryEmbedding of fp16 q (b, s, 64) with int64 position ids: one
    RotaryEmbedding layer, and the Relu after it has the input's shape (the contrib shape rule)."""
    half = 8
    inits = [onnx.numpy_helper.from_array(np.full((64, half), 0.5, np.float16), n) for n in ("cos", "sin")]
    nodes = [helper.make_node("RotaryEmbedding", ["q", "ids", "cos", "sin"], ["qr"], domain=MS, num_heads=4,
                              interleaved=0, name="rope"),
             helper.make_node("Relu", ["qr"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("q", TensorProto.FLOAT16, ["batch", "seq", 64]),
                                       helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", "seq", 64])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]),
              tmp_path / "m.onnx")
    ml = process(tmp_path / "m.onnx", 2, {"seq": 16})
    assert ml.unsupported() == {}
    rope, relu = ml.layers
    assert (rope.op_type, rope.status) == ("RotaryEmbedding", "benchmark")
    assert rope.config == R(x=(2, 16, 64), num_heads=4, rotary_dim=16, layout="bshd", positions=64)
    assert relu.status == "benchmark" and relu.output_shapes == ((2, 16, 64),)
