"""Fixed-batch exports processed at another batch (benanza.processing.rebind, issue 14 item 4).

Each pattern graph is built twice with onnx.helper: as a fixed-batch exporter writes it (the
exported batch B0 in constants, the way torch.onnx and torch.export write them) and as a
dynamic-batch export (symbolic N, the batch computed from Shape at run time). Processed at any
batch, the fixed graph must give the same layer configs as the dynamic one; at B0 it is untouched.
The real torch.export files in tests/data (benchmarks/fixed_batch_exports.py) are checked the same
way. No GPU and nothing beside the repo needed.
"""
import collections
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza.errors import ModelError
from benanza.processing.model import _weights_as_inputs, load_graph, process
from benanza.processing.rebind import BatchAxis, _Facts, _reshape_candidates, plan

DATA = Path(__file__).resolve().parent / "data"


class Builder:
    """Nodes and initializers of one graph; ``bshape`` writes a shape operand whose entries are ints
    or ``("B", k)`` (k x batch): a constant holding k x B0 (fixed) or Shape/Gather/Mul/Concat of
    the input's batch (dynamic)."""

    def __init__(self, b0: int, dynamic: bool, first_input: str):
        self.b0, self.dynamic, self.src = b0, dynamic, first_input
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n}"

    def node(self, op: str, ins: list, n_out: int = 1, **attrs) -> str | list:
        outs = [self.name(op.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, ins, outs, name=f"node_{outs[0]}", **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, values, dtype=np.int64) -> str:
        name = self.name("val")
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def weight(self, shape, dtype=TensorProto.FLOAT, name=None) -> str:
        """An initializer whose data is not in the file (external, as the stripped exports have it)."""
        t = TensorProto(name=name or self.name("w"), data_type=dtype, dims=list(shape))
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value="weights-not-kept")
        self.inits.append(t)
        return t.name

    def batch(self, k: int = 1) -> str:
        """The batch (times k) as a 1-element int64 tensor computed at run time (dynamic only)."""
        b = self.node("Gather", [self.node("Shape", [self.src]), self.const([0])], axis=0)
        return b if k == 1 else self.node("Mul", [b, self.const([k])])

    def bshape(self, entries: list) -> str:
        if not self.dynamic:
            return self.const([e[1] * self.b0 if isinstance(e, tuple) else e for e in entries])
        parts = [self.batch(e[1]) if isinstance(e, tuple) else self.const([e]) for e in entries]
        return self.node("Concat", parts, axis=0)

    def model(self, inputs: list, outputs: list, opset: int = 20) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 10
        return m


def _input(name, dims, b: Builder, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, ["N" if d == "B" else d for d in dims] if b.dynamic
                                         else [b.b0 if d == "B" else d for d in dims])


def _out(name, rank, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, [f"{name}_{k}" for k in range(rank)])


def vit_pattern(b0: int, dynamic: bool, cls: str = "weight") -> onnx.ModelProto:
    """ViT-B/16 as torch exports it, small: the patch Reshape [B, C, HW], the class token (a
    folded ``expand`` weight [B0, 1, C] or an Expand with a constant shape) concatenated with the
    patches, nn.MultiheadAttention in sequence-first order (in-projection Reshape [T, B, 3, C],
    heads merged with the batch [T, B x heads, hd], the context Reshape [T x B, C] into the
    out-projection Gemm, back to [T, B, C]), the class token row and the head."""
    b = Builder(b0, dynamic, "x")
    C, T, NH, HD = 8, 5, 2, 4
    y = b.node("Conv", ["x", b.weight((C, 3, 2, 2))], kernel_shape=[2, 2], strides=[2, 2])
    p = b.node("Transpose", [b.node("Reshape", [y, b.bshape([("B", 1), C, T - 1])])], perm=[0, 2, 1])
    if dynamic or cls == "expand":
        tok = b.node("Expand", [b.weight((1, 1, C)), b.bshape([("B", 1), 1, C])])
    else:
        tok = b.weight((b0, 1, C), name="expand")
    h = b.node("Add", [b.node("Concat", [tok, p], axis=1), b.weight((1, T, C))])
    h = b.node("LayerNormalization", [h, b.const(np.ones(C), np.float32), b.const(np.zeros(C), np.float32)], axis=-1)
    s = b.node("Transpose", [h], perm=[1, 0, 2])
    qkv = b.node("Add", [b.node("MatMul", [s, b.weight((C, 3 * C))]), b.weight((3 * C,))])
    qkv = b.node("Reshape", [qkv, b.bshape([T, ("B", 1), 3, C])])
    qkv = b.node("Transpose", [b.node("Unsqueeze", [qkv, b.const([0])])], perm=[3, 1, 2, 0, 4])
    qkv = b.node("Squeeze", [qkv, b.const([3])])
    heads = []
    for k in range(3):
        t = b.node("Gather", [qkv, b.const(k)], axis=0)
        t = b.node("Transpose", [b.node("Reshape", [t, b.bshape([T, ("B", NH), HD])])], perm=[1, 0, 2])
        heads.append(b.node("Reshape", [t, b.bshape([("B", 1), NH, T, HD])]))
    q, k, v = heads
    kt = b.node("Transpose", [k], perm=[0, 1, 3, 2])
    sc = b.node("MatMul", [b.node("Mul", [q, b.const([0.5], np.float32)]), b.node("Mul", [kt, b.const([0.5], np.float32)])])
    ctx = b.node("MatMul", [b.node("Softmax", [sc], axis=-1), v])
    ctx = b.node("Reshape", [b.node("Transpose", [ctx], perm=[2, 0, 1, 3]), b.bshape([("B", T), C])])
    o = b.node("Gemm", [ctx, b.weight((C, C)), b.weight((C,))], transB=1)
    o = b.node("Transpose", [b.node("Reshape", [o, b.bshape([T, ("B", 1), C])])], perm=[1, 0, 2])
    r = b.node("Add", [o, h])
    first = b.node("Gather", [r, b.const(0)], axis=1)
    b.nodes.append(helper.make_node("Gemm", [first, b.weight((10, C)), b.weight((10,))], ["logits"], transB=1))
    return b.model([_input("x", ["B", 3, 4, 4], b)], [_out("logits", 2)])


def bert_pattern(b0: int, dynamic: bool) -> onnx.ModelProto:
    """A BERT layer as torch.export writes transformers' BertModel: token-type ids from a buffer by
    GatherElements (torch.export drops their ``expand(batch, seq)`` at batch 1), position
    embeddings of constant ids (shared by the batch: they broadcast), the attention
    mask built by a GatherND whose indices name batch row 0 then And/Where, heads by Reshape
    [B, S, -1, hd] and K^T through [-1, S, hd], softmax guarded by IsNaN/Where."""
    b = Builder(b0, dynamic, "input_ids")
    S, H, NH, HD, V = 6, 8, 2, 4, 20
    tt = b.node("GatherElements", [b.weight((1, 10), TensorProto.INT64), b.const(np.arange(S).reshape(1, S))], axis=1)
    if dynamic or b0 > 1:  # at batch 1 the expand is a no-op that torch.export drops
        tt = b.node("Expand", [tt, b.bshape([("B", 1), S])])
    e = b.node("Add", [b.node("Gather", [b.weight((V, H)), "input_ids"]), b.node("Gather", [b.weight((2, H)), tt])])
    e = b.node("Add", [e, b.node("Gather", [b.weight((10, H)), b.const(np.arange(S).reshape(1, S))])])  # position ids
    x = b.node("LayerNormalization", [e, b.const(np.ones(H), np.float32), b.const(np.zeros(H), np.float32)], axis=-1)
    mask = b.node("Cast", ["attention_mask"], to=TensorProto.BOOL)
    if dynamic:
        rows = b.node("Range", [b.const(0), b.node("Squeeze", [b.batch()]), b.const(1)])
        rows = b.node("Expand", [b.node("Unsqueeze", [rows, b.const([1, 2, 3, 4])]), b.bshape([("B", 1), 1, 1, S, 1])])
        cols = b.node("Expand", [b.const(np.arange(S).reshape(1, 1, 1, S, 1)), b.bshape([("B", 1), 1, 1, S, 1])])
        idx = b.node("Concat", [rows, cols], axis=-1)
    else:
        idx = b.const(np.stack(np.broadcast_arrays(np.arange(b0).reshape(b0, 1, 1, 1),
                                                   np.arange(S).reshape(1, 1, 1, S)), axis=-1))
    keep = b.node("And", [b.const(np.ones((1, 1, S, 1), bool), bool), b.node("GatherND", [mask, idx])])
    bias = b.node("Where", [keep, b.const(0.0, np.float32), b.const(-3.4e38, np.float32)])
    proj = [b.node("Add", [b.node("MatMul", [x, b.weight((H, H))]), b.weight((H,))]) for _ in range(3)]
    q, k, v = [b.node("Transpose", [b.node("Reshape", [t, b.bshape([("B", 1), S, -1, HD])], allowzero=1)],
                      perm=[0, 2, 1, 3]) for t in proj]
    kt = b.node("Transpose", [b.node("Reshape", [k, b.const([-1, S, HD])])], perm=[0, 2, 1])
    kt = b.node("Reshape", [kt, b.bshape([("B", 1), NH, HD, S])])
    sc = b.node("Add", [b.node("MatMul", [q, kt]), bias])
    sm = b.node("Softmax", [sc], axis=-1)
    sm = b.node("Where", [b.node("IsNaN", [sm]), b.const(0.0, np.float32), sm])
    ctx = b.node("Transpose", [b.node("MatMul", [sm, v])], perm=[0, 2, 1, 3])
    ctx = b.node("Reshape", [ctx, b.bshape([("B", 1), S, -1])], allowzero=1)
    b.nodes.append(helper.make_node("MatMul", [ctx, b.weight((H, H))], ["out"]))
    return b.model([_input("input_ids", ["B", S], b, TensorProto.INT64),
                    _input("attention_mask", ["B", S], b, TensorProto.INT64)], [_out("out", 3)])


def buffer_slice_pattern(b0: int, dynamic: bool, rows: int = 64) -> onnx.ModelProto:
    """Slice ends = batch: the first B rows of a constant buffer (a per-sample table) and of the data,
    a Tile of a constant by the batch and a ConstantOfShape of the batch's shape."""
    b = Builder(b0, dynamic, "x")
    S = 6
    ends = b.bshape([("B", 1)])
    xs = b.node("Slice", ["x", b.const([0]), ends, b.const([0])])
    table = b.node("Slice", [b.const(np.arange(rows * S, dtype=np.float32).reshape(rows, S), np.float32),
                             b.const([0]), ends, b.const([0])])
    tiled = b.node("Tile", [b.const(np.ones((1, S)), np.float32), b.bshape([("B", 1), 1])])
    zeros = b.node("ConstantOfShape", [b.bshape([("B", 1), S])], value=numpy_helper.from_array(np.zeros(1, np.float32)))
    y = b.node("Add", [b.node("Mul", [xs, table]), b.node("Add", [tiled, zeros])])
    b.nodes.append(helper.make_node("Softmax", [y], ["y"], axis=-1))
    return b.model([_input("x", ["B", S], b)], [_out("y", 2)])


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def _configs(ml) -> tuple[set, collections.Counter]:
    return set(ml.unique_configs()), collections.Counter(ly.signature for ly in ml.layers if ly.status != "zero_cost")


def _same_as_dynamic(tmp_path: Path, build, batches=(1, 2, 32), b0=1, **kw):
    fixed = _save(build(b0, False, **kw), tmp_path / "fixed.onnx")
    dyn = _save(build(b0, True, **kw), tmp_path / "dynamic.onnx")
    out = {}
    for batch in batches:
        f, d = process(fixed, batch), process(dyn, batch)
        assert _configs(f) == _configs(d), batch
        assert not [n for n in d.notices if "rebound" in n]
        rebound = [n for n in f.notices if "rebound" in n]
        assert bool(rebound) == (batch != b0), (batch, f.notices)
        out[batch] = f
    return out


# --------------------------------------------------------------------------------- patterns

@pytest.mark.parametrize("cls", ["weight", "expand"])
def test_vit_patterns_match_the_dynamic_export(tmp_path, cls):
    mls = _same_as_dynamic(tmp_path, vit_pattern, cls=cls)
    ml = mls[32]
    assert ml.layers[0].config.x[0] == 32 and ml.summary()["unsupported"] == {}
    gemm = next(ly for ly in ml.layers if ly.op_type == "Gemm")
    assert gemm.config.m == 5 * 32  # the context Reshape [T x B, C]: the batch merged inside the rows
    notice = next(n for n in ml.notices if "rebound" in n)
    assert "fixed batch 1 rebound to 32" in notice and "(Reshape)" in notice
    if cls == "weight":
        assert "'expand'" in notice  # the folded class-token weight, re-declared [32, 1, C]


def test_bert_patterns_match_the_dynamic_export(tmp_path):
    ml = _same_as_dynamic(tmp_path, bert_pattern)[32]
    nd = next(ly for ly in ml.layers if ly.op_type == "GatherND")
    assert nd.input_shapes == ((32, 6), (32, 1, 1, 6, 2))  # the mask indices name rows 0..31
    adds = [ly.input_shapes for ly in ml.layers if ly.op_type == "Add"][:2]
    # token types carry the batch (as torch.export's dynamic export), position embeddings broadcast
    assert adds == [((32, 6, 8), (32, 6, 8)), ((32, 6, 8), (1, 6, 8))]


def test_bert_pattern_exported_at_batch_2(tmp_path):
    _same_as_dynamic(tmp_path, bert_pattern, batches=(1, 2, 5), b0=2)


@pytest.mark.parametrize("b0", [1, 3])
def test_slice_tile_constant_of_shape_match_the_dynamic_export(tmp_path, b0):
    ml = _same_as_dynamic(tmp_path, buffer_slice_pattern, batches=(1, 3, 32), b0=b0)[32]
    assert all(s is None or s[0] == 32 for ly in ml.layers for s in ly.output_shapes)


def test_at_the_exported_batch_the_model_is_untouched(tmp_path):
    path = _save(vit_pattern(1, False), tmp_path / "v.onnx")
    model, _ = load_graph(path)
    weights = _weights_as_inputs(model)
    before = model.SerializeToString()
    assert plan(model, 1, weights) is None
    assert model.SerializeToString() == before
    assert not [n for n in process(path, 1).notices if "rebound" in n]


def test_dynamic_exports_are_never_rewritten(tmp_path):
    path = _save(vit_pattern(1, True), tmp_path / "v.onnx")
    model, _ = load_graph(path)
    assert plan(model, 32, _weights_as_inputs(model)) is None


# ---------------------------------------------------------------------- ambiguity at batch 1

def _facts(b0=1, batch=32):
    return _Facts(nodes=[], shapes={}, consts={}, weights=set(), static=set(), producer={}, opset=20, b0=b0, batch=batch)


def test_reshape_candidates_rank_a_batch_dim_first_and_outermost():
    f = _facts()
    # [T, B, 3C] -> [T, B, 3, C]: the dim of extent B0 first, then the batch outermost of a merged dim
    assert _reshape_candidates(f, (197, 1, 2304), BatchAxis(1), (197, 1, 3, 768)) == [
        BatchAxis(1), BatchAxis(2), BatchAxis(0, 197)]
    # [T, B, C] -> [T, B x heads, hd]: the heads split merges the batch outside them
    assert _reshape_candidates(f, (197, 1, 768), BatchAxis(1), (197, 12, 64))[0] == BatchAxis(1)
    # [T, B, heads, hd] -> [T x B, C]: both are consistent at B0 = 1; the search decides (Gemm's K)
    assert set(_reshape_candidates(f, (197, 1, 12, 64), BatchAxis(1), (197, 768))) == {BatchAxis(1), BatchAxis(0, 197)}
    # dims of extent 1: the outermost
    assert _reshape_candidates(f, (1, 768), BatchAxis(0), (1, 1, 768))[:2] == [BatchAxis(0), BatchAxis(1)]
    # at B0 = 4 only the dim that holds 4 x something can
    assert _reshape_candidates(_facts(b0=4), (4, 768), BatchAxis(0), (4, 12, 64)) == [BatchAxis(0)]


def test_ambiguous_unsqueeze_reshape_takes_the_outermost_dim(tmp_path):
    b = Builder(1, False, "x")
    r = b.node("Reshape", ["x", b.const([1, 1, 8])])
    b.nodes.append(helper.make_node("Add", [r, b.const(np.ones((1, 1, 8)), np.float32)], ["y"]))
    ml = process(_save(b.model([_input("x", ["B", 8], b)], [_out("y", 3)]), tmp_path / "u.onnx"), 32)
    assert ml.layers[-1].output_shapes[0] == (32, 1, 8)


def test_merged_context_reshape_backtracks_from_the_gemm_reduced_dim(tmp_path):
    """[T, B, heads, hd] -> [T x B, C] at B0 = 1 also fits [T, C x B]; that puts the batch into the
    Gemm's K and the search takes the other candidate."""
    b = Builder(1, False, "x")
    r = b.node("Reshape", ["x", b.const([5, 8])])
    b.nodes.append(helper.make_node("Gemm", [r, b.weight((8, 8))], ["y"], transB=1))
    ml = process(_save(b.model([_input("x", [5, "B", 2, 4], b)], [_out("y", 2)]), tmp_path / "c.onnx"), 32)
    gemm = next(ly for ly in ml.layers if ly.op_type == "Gemm")
    assert (gemm.config.m, gemm.config.k) == (160, 8)


# ------------------------------------------------------------------------------- unsafe cases

def _unsafe(tmp_path, build, batch, match):
    with pytest.raises(ModelError, match=match) as err:
        process(_save(build(), tmp_path / "bad.onnx"), batch)
    msg = str(err.value)
    assert "\n" not in msg and "export the model with a dynamic batch axis" in msg
    return msg


def test_a_buffer_smaller_than_the_new_batch_is_an_error(tmp_path):
    msg = _unsafe(tmp_path, lambda: buffer_slice_pattern(1, False, rows=4), 32, "slices 1 rows of a tensor of 4")
    assert "node 'node_slice_" in msg


def test_a_constant_that_differs_between_batch_rows_is_an_error(tmp_path):
    def build():
        b = Builder(2, False, "x")
        b.nodes.append(helper.make_node("Add", ["x", b.const([[1, 2, 3], [4, 5, 6]], np.float32)], ["y"], name="add_rows"))
        return b.model([_input("x", ["B", 3], b)], [_out("y", 2)])
    _unsafe(tmp_path, build, 4, "constant 'val_1' of node 'add_rows' differs between batch rows")


def test_a_slice_of_part_of_the_batch_is_an_error(tmp_path):
    def build():
        b = Builder(2, False, "x")
        b.nodes.append(helper.make_node("Slice", ["x", b.const([0]), b.const([1]), b.const([0])], ["y"], name="first_row"))
        return b.model([_input("x", ["B", 3], b)], [_out("y", 2)])
    _unsafe(tmp_path, build, 8, "node 'first_row' \\(Slice\\): slices \\[0:1:1\\] of the batch dim")


def test_a_reduction_over_the_batch_is_an_error(tmp_path):
    def build():
        b = Builder(1, False, "x")
        b.nodes.append(helper.make_node("ReduceMean", ["x", b.const([0])], ["y"], name="batch_mean", keepdims=0))
        return b.model([_input("x", ["B", 3], b)], [_out("y", 1)])
    _unsafe(tmp_path, build, 8, "node 'batch_mean' \\(ReduceMean\\): reduces over the batch dim")


# ----------------------------------------------------------------- real exports (tests/data)

@pytest.mark.parametrize("name", ["vit_b_16", "bert"])
def test_real_torch_export_at_batch_32_matches_its_dynamic_export(name):
    """torch.export (dynamo=True, opset 20) at batch 1 with a fixed batch, weight-stripped: at batch
    32 the same unique configs and compute layers as the same model exported with a dynamic batch."""
    fixed, dyn = process(DATA / f"{name}_fixed1.onnx", 32), process(DATA / f"{name}_dynamic.onnx", 32)
    assert _configs(fixed) == _configs(dyn)
    assert fixed.unsupported() == dyn.unsupported()
    assert any("fixed batch 1 rebound to 32" in n for n in fixed.notices)
    assert _configs(process(DATA / f"{name}_fixed1.onnx", 1)) == _configs(process(DATA / f"{name}_dynamic.onnx", 1))
    if name == "vit_b_16":
        assert fixed.unsupported() == {}
        assert fixed.summary()["fusions_by_kind"] == {"Gemm": 24, "GemmAct": 12, "SDPA": 12, "Add+LayerNorm": 24}
    else:  # what stays unsupported: the softmax NaN guard, the mask's bool ops and its index gather
        assert set(fixed.unsupported()) <= {"IsNaN", "And", "Cast", "GatherND"}


def test_a_shape_left_unexplained_names_the_first_node_that_differs():
    """The final check: a tensor whose shape after inference at the new batch is not the predicted
    one is a one-line error naming its node, with the hint."""
    from benanza.processing.rebind import Rebinding

    rb = Rebinding(b0=1, batch=4, info={"a": BatchAxis(0), "y": None}, shapes={"a": (1, 3), "y": (1, 3)},
                   rewrites=[], order=[("ok", "Relu", ["a"]), ("stuck", "Expand", ["y"])])
    g = helper.make_graph([], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])])
    with pytest.raises(ModelError, match=r"node 'stuck' \(Expand\): output 'y' is \[4, 3\] at batch 4, "
                                         r"\[1, 3\] expected .*dynamic batch axis"):
        rb.verify(helper.make_model(g))
