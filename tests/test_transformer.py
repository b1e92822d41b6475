"""The transformer layers (issue 4): LayerNorm, unary ops (Gelu, Erf, Pow, Sqrt, Cast...), Gather,
Where, and the attention / decomposed-LayerNorm / erf-GELU fusion candidates; on vit_b_16 (shared
models), on a BERT-style encoder built like torch.onnx.export writes one (tests/onnx_builders.py),
and on a graph with every new kind under hostile node names. No GPU needed; the compile test builds
the generated suite against the real cuDNN / cudnn-frontend / cuBLAS wheels."""
import collections
import json
import shutil
import subprocess

import numpy as np
import onnx
import pytest
import sqlalchemy as sa
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.analysis.analyzer import analyze
from benanza.database.store import LayerConfigRow, Measurement, open_db
from benanza.generation.generator import generate, load_suite, plan_jobs
from benanza.kinds.cpp import cpp_string
from benanza.kinds.unary import unary_input_range
from benanza.kinds.where import collapse_where
from benanza.processing.model import process
from benanza.runner.run import RunOptions, run_suite
from conftest import HERE, scenario_of
from onnx_builders import HOSTILE, bert_encoder_model, transformer_ops_model

# what torch.onnx.export (TorchScript, torch 2.13) wrote for the BERT-style encoder of
# onnx_builders.bert_encoder_model at opset 14, 2 layers, by op type (non-folded layers)
BERT14_BY_TYPE = {"Add": 32, "Cast": 1, "Div": 9, "Erf": 2, "Gather": 3, "Gemm": 1, "MatMul": 16, "Mul": 10,
                  "Pow": 5, "ReduceMean": 10, "Reshape": 8, "Softmax": 2, "Sqrt": 5, "Sub": 6, "Tanh": 1,
                  "Transpose": 8, "Unsqueeze": 2}


def _by_type(ml):
    return {op: v["count"] for op, v in ml.summary()["by_type"].items()}


def _fusion_ops(ml, f):
    return [ml.layers[i].op_type for i in f.layers]


# ----------------------------------------------------------------------------------- vit_b_16

def test_vit_b_16_maps_every_compute_layer(models):
    ml = process(models / "vit_b_16.onnx", 1)
    s = ml.summary()
    assert s["unsupported"] == {}
    assert s["coverage"] == {"compute_layers": 343, "benchmarked": 343, "unsupported": 0, "percent": 100.0}
    assert (s["layers"], s["unique_layers"], s["benchmarked_layers"], s["unique_benchmarked"],
            s["zero_cost_layers"]) == (476, 38, 343, 29, 133)
    by = s["by_type"]
    assert by["Gather"] == {"count": 37, "unique": 4}
    assert by["Gelu"] == {"count": 12, "unique": 1}
    assert by["LayerNormalization"] == {"count": 25, "unique": 1}
    assert by["MatMul"] == {"count": 60, "unique": 5} and by["Softmax"] == {"count": 12, "unique": 1}
    ln = {ly.config for ly in ml.layers if ly.op_type == "LayerNormalization"}
    assert ln == {L.LayerNormConfig(x=(1, 197, 768), axis=2, epsilon=float(np.float32(1e-6)), bias=True)}
    gelu = {ly.config for ly in ml.layers if ly.op_type == "Gelu"}
    assert gelu == {L.UnaryConfig(shape=(1, 197, 3072), op="gelu")}
    gathers = collections.Counter(ly.config for ly in ml.layers if ly.op_type == "Gather")
    # Q, K and V picked out of the packed in-projection (12 each), and the class token at the end
    assert gathers == {L.GatherConfig(data=(3, 197, 1, 768), indices=(), axis=0, values=(i,)): 12 for i in range(3)} \
        | {L.GatherConfig(data=(1, 197, 768), indices=(), axis=1, values=(0,)): 1}
    assert all(g.output_shape() == (197, 1, 768) for g in gathers if g.axis == 0)


def test_vit_b_16_attention_is_a_fusion_candidate(models):
    ml = process(models / "vit_b_16.onnx", 1)
    # (and the 12 MLP blocks' MatMul -> Add(bias) -> Gelu: GemmAct candidates, see test_gemm_act; the
    # in-projection's and the second MLP MatMul's Add(bias): Gemm candidates with a bias epilogue; each
    # residual Add and the LayerNorm after it, 24 of the 25 norms: LayerNorm candidates with the residual)
    assert ml.summary()["fusions_by_kind"] == {"Gemm": 24, "GemmAct": 12, "SDPA": 12, "Add+LayerNorm": 24}
    residual = [f.config for f in ml.fusions if f.config.kind == "LayerNorm"]
    # the sum is kept (the next residual Add reads it) but before the last norm (ln, the class token's)
    assert all(c.residual for c in residual) and sum(c.keep_sum for c in residual) == 23
    cfgs = {f.config for f in ml.fusions if f.config.kind == "SDPA"}
    # Q, K and V read in place from the packed in-projection output, laid out (s, b, 3, h, d) by the
    # seq-first MHA (197 x 1 x 2304), and O written as (s, b, h, d), the out-projection's input
    # (b has size 1: its stride is the packed one, 12 x 197 x 64)
    qkv = (12 * 197 * 64, 64, 2304, 1)
    assert cfgs == {L.SdpaConfig(b=1, h=12, s_q=197, s_kv=197, d=64, d_v=64, scale=0.125, q_strides=qkv,
                                 k_strides=qkv, v_strides=qkv, o_strides=(12 * 197 * 64, 64, 768, 1))}
    f = next(f for f in ml.fusions if f.config.kind == "SDPA")
    # the head split (Reshape, Unsqueeze, Transpose, Squeeze, 3 Gathers, per head Reshape + Transpose),
    # torch's SDPA decomposition (K^T = Transpose(0,2,1) of K, Q and K^T each scaled by sqrt(1/8),
    # MatMul, Softmax, MatMul) and the head merge (Transpose, Reshape)
    assert _fusion_ops(ml, f) == ["Reshape", "Unsqueeze", "Transpose", "Squeeze", "Gather", "Gather", "Gather",
                                  "Reshape", "Transpose", "Reshape", "Transpose", "Reshape", "Transpose",
                                  "Reshape", "Reshape", "Transpose", "Reshape", "Mul", "Mul", "MatMul", "Softmax",
                                  "MatMul", "Transpose", "Reshape"]
    assert ml.layers[f.layers[-1]].op_type == "Reshape" and ml.layers[f.layers[-3]].name == \
        "node_scaled_dot_product_attention"
    # what is left of a block's data movement: the batch-first <-> seq-first Transposes around it
    free = collections.Counter(ly.op_type for ly in ml.layers if ly.fusion is None and ly.status == "benchmark")
    assert free["Transpose"] == 25 and free["Gather"] == 1
    for fu in ml.fusions:
        assert all(ml.layers[i].fusion == ml.fusions.index(fu) for i in fu.layers)
    assert cfgs.pop().flops() == 2 * 12 * 197 * 197 * 128 + 7 * 12 * 197 * 197


# ---------------------------------------------------------------------------- BERT-style encoder

def test_bert_builder_matches_the_torch_export_and_is_fully_covered(tmp_path):
    ml = process(bert_encoder_model(tmp_path / "bert.onnx", opset=14), 2, dims={"seq": 16})
    assert _by_type(ml) == BERT14_BY_TYPE
    s = ml.summary()
    assert s["unsupported"] == {} and s["coverage"]["percent"] == 100.0
    assert s["folded"]["Gather"] == 2  # the position-embedding lookup of a constant slice, and seq from Shape
    gathers = [ly.config for ly in ml.layers if ly.op_type == "Gather"]
    assert gathers == [L.GatherConfig(data=(100, 64), indices=(2, 16), axis=0),   # word embeddings
                       L.GatherConfig(data=(2, 64), indices=(2, 16), axis=0),     # token types
                       L.GatherConfig(data=(2, 16, 64), indices=(), axis=1, values=(0,))]  # [CLS]
    cast = next(ly.config for ly in ml.layers if ly.op_type == "Cast")
    assert cast == L.UnaryConfig(shape=(2, 1, 1, 16), op="cast", src="int64")
    assert {ly.config for ly in ml.layers if ly.op_type == "Pow"} == {L.UnaryConfig((2, 16, 64), "pow", 2.0)}
    # fusion candidates: 5 decomposed LayerNorms, 2 attentions, 2 FFN MatMul -> Add(bias) -> erf-GELU
    # (the erf-GELU joins the GEMM's candidate: a layer is in one candidate only), and the other 10
    # Linears' MatMul -> Add(bias) (Q, K, V, attention output, FFN output: one GEMM with a bias)
    # (the 4 after a residual Add take it in: Add+LayerNorm)
    assert s["fusions_by_kind"] == {"Add+LayerNorm": 4, "Gemm": 10, "GemmAct": 2, "LayerNorm": 1, "SDPA": 2}
    kinds = collections.defaultdict(list)
    for f in ml.fusions:
        kinds[f.config.kind].append(f)
    ln = kinds["LayerNorm"][0]
    assert _fusion_ops(ml, ln) == ["ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add"]
    assert ln.config == L.LayerNormConfig(x=(2, 16, 64), axis=2, epsilon=float(np.float32(1e-12)), bias=True)
    att = kinds["SDPA"][0]
    # the head split (view + permute of Q, K, V; K^T's extra Transpose) and the head merge (permute +
    # view) are read and written in place: Q, K, V and O are (b, s, h, d) in memory
    assert _fusion_ops(ml, att) == ["Reshape", "Transpose", "Reshape", "Reshape", "Transpose", "Transpose",
                                    "MatMul", "Div", "Add", "Softmax", "MatMul", "Transpose", "Reshape"]
    bshd = (16 * 64, 16, 64, 1)
    assert att.config == L.SdpaConfig(b=2, h=4, s_q=16, s_kv=16, d=16, d_v=16, scale=0.25, mask="bias",
                                      bias=(2, 1, 1, 16), q_strides=bshd, k_strides=bshd, v_strides=bshd,
                                      o_strides=bshd)
    assert collections.Counter(ly.op_type for ly in ml.layers if ly.fusion is None and ly.op_type == "Transpose") \
        == collections.Counter()
    gelu = kinds["GemmAct"][0]
    assert _fusion_ops(ml, gelu) == ["MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"]
    assert gelu.config == L.GemmActConfig(gemm=L.GemmConfig(m=32, n=256, k=64, bias="c"), activation="gelu")
    # no layer in two candidates
    members = [i for f in ml.fusions for i in f.layers]
    assert len(members) == len(set(members))


@pytest.mark.parametrize("opset,gelu,expect", [
    (17, "erf", {"LayerNormalization": 5, "Erf": 2}),
    (18, "erf", {"LayerNormalization": 5, "Erf": 2}),
    (20, "op", {"LayerNormalization": 5, "Gelu": 2}),
])
def test_bert_builder_later_opsets(tmp_path, opset, gelu, expect):
    ml = process(bert_encoder_model(tmp_path / "bert.onnx", opset=opset, gelu=gelu), 4, dims={"seq": 32})
    by = _by_type(ml)
    assert {k: by.get(k) for k in expect} == expect
    assert "Pow" not in by and "ReduceMean" not in by
    s = ml.summary()
    assert s["unsupported"] == {} and s["coverage"]["percent"] == 100.0
    # the FFN's MatMul + bias + GELU (erf or op), the other Linears' MatMul + bias; each residual Add and
    # the LayerNormalization after it (post-norm BERT: 2 per layer; the embeddings' norm has none)
    assert s["fusions_by_kind"] == {"Gemm": 10, "GemmAct": 2, "SDPA": 2, "Add+LayerNorm": 4}
    ln = {ly.config for ly in ml.layers if ly.op_type == "LayerNormalization"}
    assert ln == {L.LayerNormConfig(x=(4, 32, 64), axis=2, epsilon=float(np.float32(1e-12)), bias=True)}
    att = {f.config for f in ml.fusions if f.config.kind == "SDPA"}
    bshd = (32 * 64, 16, 64, 1)
    assert att == {L.SdpaConfig(b=4, h=4, s_q=32, s_kv=32, d=16, d_v=16, scale=0.25, mask="bias", bias=(4, 1, 1, 32),
                                q_strides=bshd, k_strides=bshd, v_strides=bshd, o_strides=bshd)}


# ------------------------------------------------------------------ every new kind, hostile names

def test_transformer_ops_model_maps_every_kind(tmp_path):
    ml = process(transformer_ops_model(tmp_path / "t.onnx"), 2, batch_dim=0)
    assert ml.summary()["unsupported"] == {}
    cfg = {ly.op_type: ly.config for ly in ml.layers}
    assert cfg["LayerNormalization"] == L.LayerNormConfig(x=(2, 8, 32), axis=2, epsilon=float(np.float32(1e-5)), bias=False,
                                                       stats=True)
    assert cfg["Gelu"].op == "gelu_tanh" and cfg["Pow"] == L.UnaryConfig((2, 8, 32), "pow", 0.5)
    assert cfg["Cast"] == L.UnaryConfig((2, 1, 32), "cast", src="bool")
    assert cfg["Where"] == L.WhereConfig(cond=(2, 1, 32), a=(2, 8, 32), b=(2, 8, 32))
    assert [c.op for op, c in cfg.items() if op in ("Exp", "Log", "Abs", "Sqrt", "Reciprocal", "Neg")] == \
        ["exp", "log", "abs", "sqrt", "reciprocal", "neg"]
    gathers = [ly.config for ly in ml.layers if ly.op_type == "Gather"]
    assert gathers[0] == L.GatherConfig(data=(50, 32), indices=(2, 8), axis=0)  # int32 ids
    assert gathers[1] == L.GatherConfig(data=(2, 8, 32), indices=(3,), axis=1, values=(0, 3, 5))
    assert ml.layers[0].name == HOSTILE + "gather"
    # the causal attention: the constant triangular mask is cuDNN's causal masking, no bias read (the
    # model's other candidate: its residual Add and the LayerNormalization after it)
    (f,) = [g for g in ml.fusions if g.config.kind == "SDPA"]
    assert [g.config.residual for g in ml.fusions if g.config.kind == "LayerNorm"] == [True]
    assert f.config == L.SdpaConfig(b=2, h=1, s_q=8, s_kv=8, d=32, d_v=32, scale=0.25, mask="causal")
    assert _fusion_ops(ml, f) == ["Transpose", "Mul", "Mul", "MatMul", "Add", "Softmax", "MatMul"]


def _attention_graph(path, softmax_axis=-1, extra_reader=False, mask_shape=None):
    """Q K^T / 8 (+ mask) -> Softmax -> . V on [2, 4, 16, 8] tensors (graph inputs)."""
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
             helper.make_node("Div", ["s", "c8"], ["sd"], name="scale")]
    last = "sd"
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
           for n, s in (("q", ["N", 4, 16, 8]), ("kt", ["N", 4, 8, 16]), ("v", ["N", 4, 16, 8]))]
    inits = [onnx.numpy_helper.from_array(np.float32(8.0), "c8")]
    if mask_shape is not None:
        if all(isinstance(d, int) for d in mask_shape):  # a constant (not causal) mask
            inits.append(onnx.numpy_helper.from_array(np.random.default_rng(1).standard_normal(mask_shape)
                                                      .astype(np.float32), "m"))
        else:
            ins.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, mask_shape))
        nodes.append(helper.make_node("Add", ["sd", "m"], ["sm"], name="mask"))
        last = "sm"
    nodes += [helper.make_node("Softmax", [last], ["p"], name="softmax", axis=softmax_axis),
              helper.make_node("MatMul", ["p", "v"], ["y"], name="pv")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 16, 8])]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["s"], ["r"], name="reads_scores"))
        outs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", 4, 16, 16]))
    g = helper.make_graph(nodes, "att", ins, outs, inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_attention_pattern_detection(tmp_path):
    ml = process(_attention_graph(tmp_path / "a.onnx"), 3)
    (f,) = ml.fusions
    assert f.config == L.SdpaConfig(b=3, h=4, s_q=16, s_kv=16, d=8, d_v=8, scale=0.125)
    assert f.layers == (0, 1, 2, 3)
    masked = process(_attention_graph(tmp_path / "m.onnx", mask_shape=["N", 1, 16, 16]), 3)
    assert masked.fusions[0].config.bias == (3, 1, 16, 16)
    # not attention: softmax over another axis, or the scores read by another layer too
    assert process(_attention_graph(tmp_path / "x.onnx", softmax_axis=2), 3).fusions == []
    assert process(_attention_graph(tmp_path / "y.onnx", extra_reader=True), 3).fusions == []
    # a constant per-head mask broadcast over the batch and the query rows
    per_head = process(_attention_graph(tmp_path / "o.onnx", mask_shape=[4, 1, 16]), 3)
    assert per_head.fusions[0].config.bias == (1, 4, 1, 16)


def test_configs_round_trip_through_params_and_the_database(tmp_path, db_url):
    mls = [process(bert_encoder_model(tmp_path / "b.onnx", opset=14), 2, dims={"seq": 16}),
           process(transformer_ops_model(tmp_path / "t.onnx"), 2, batch_dim=0)]
    cfgs = {}
    for ml in mls:
        cfgs.update(ml.unique_configs())
    kinds = {c.kind for c in cfgs.values()}
    assert {"LayerNorm", "Unary", "Gather", "Where", "SDPA"} <= kinds
    for c in cfgs.values():
        assert L.config_from_params(c.kind, json.loads(json.dumps(c.params()))) == c
    db = open_db(db_url)
    db.upsert_configs(list(cfgs.values()))
    with db.session() as s:
        rows = s.scalars(sa.select(LayerConfigRow)).all()
        back = {r.key: L.config_from_params(r.kind, json.loads(r.params)) for r in rows}
        assert {r.key: r.batch for r in rows if r.kind == "Gather"}  # batch of a gather: its output's dim 0
    assert back == cfgs
    # a stable key: changing one would orphan measurements already in databases
    assert L.SdpaConfig(b=1, h=12, s_q=197, s_kv=197, d=64, d_v=64, scale=0.125).key == "sdpa-e07dcee3fd8c0cea"
    assert L.LayerNormConfig(x=(1, 197, 768), axis=2, epsilon=float(np.float32(1e-6))).key == \
        "layernorm-0e953db55cd3427b"


def test_precisions_of_the_new_kinds(tmp_path):
    ml = process(transformer_ops_model(tmp_path / "t.onnx"), 2, batch_dim=0)
    jobs = plan_jobs([ml], ["fp32", "tf32", "fp16", "bf16"])
    by_kind = collections.defaultdict(set)
    for j in jobs:
        by_kind[j.kind].add(j.precision)
    for kind in ("LayerNorm", "Unary", "Gather", "Where"):  # no Tensor Core math: fp32 serves tf32
        assert by_kind[kind] == {"fp32", "fp16", "bf16"}, kind
    assert by_kind["SDPA"] == {"fp32", "tf32", "fp16", "bf16"}  # fp32/tf32 record what cuDNN says


def test_generated_cases_of_the_new_kinds(tmp_path):
    ml = process(transformer_ops_model(tmp_path / "t.onnx"), 2, batch_dim=0)
    generate([ml], ["fp16"], tmp_path / "s")
    src = {k: (tmp_path / "s" / "src" / f"{k}.cpp").read_text() for k in ("layernorm", "unary", "gather", "where",
                                                                          "sdpa")}
    assert "16, 32, 9.999999747378752e-06, false, true" in src["layernorm"]       # rows, cols, eps, no bias, stats
    # exponent, alpha, beta, x stored as, y stored as, cudnnOpTensor form, x's range (inside pow's domain)
    assert "UnaryOp::POW, 0.5, 0.0, 0.0, false, ElemType::F32, false, ElemType::F32, 0, 0.5, 1.5" in src["unary"]
    # Cast reads bool bytes
    assert "UnaryOp::CAST, 0.0, 0.0, 0.0, true, ElemType::I8, false, ElemType::F32, 0, 0.0, 2.0" in src["unary"]
    assert "UnaryOp::SQRT, 0.0, 0.0, 0.0, false, ElemType::F32, false, ElemType::F32, 1, 0.5, 1.5" in src["unary"]
    assert "2, 8, 3, 32, {0, 3, 5}, true" in src["gather"]         # outer, axis, n, inner, indices, memcpy
    assert "1, 50, 16, 32, {}, false" in src["gather"]             # random embedding indices
    assert "2, 1, 8, 8, 32, 32, 0.25, SdpaMask::CAUSAL" in src["sdpa"]  # b h s_q s_kv d d_v
    assert cpp_string(HOSTILE + "gather") in src["gather"]
    assert unary_input_range(L.UnaryConfig((4,), "log")) == (0.5, 1.5)
    # Where: cond broadcast over the middle dim; a and b full -> (2, 8, 32) with zero strides for cond
    assert collapse_where([2, 1, 32], [2, 8, 32], [2, 8, 32]) == ([2, 1, 32], [2, 8, 32], [2, 8, 32])
    assert collapse_where([1, 8, 32], [2, 8, 32], [2, 8, 32]) == ([1, 256], [2, 256], [2, 256])
    assert "{2, 8, 32, 1, 1, 1, 1, 1}, {32, 0, 1, 0, 0, 0, 0, 0}" in src["where"]


# ------------------------------------------------------------------------------------- analyzer

def test_fused_lbl_takes_the_faster_of_the_pattern_and_the_fused_call(tmp_path, db_url):
    ml = process(bert_encoder_model(tmp_path / "bert.onnx", opset=14), 2, dims={"seq": 16})
    folder = tmp_path / "s"
    generate([ml], ["fp32", "fp16"], folder)
    exe = folder / "build" / "benanza-suite"  # the fake suite (tests/fake_suite.py) in place of the build
    exe.parent.mkdir(parents=True)
    shutil.copy(HERE / "fake_suite.py", exe)
    exe.chmod(0o755)
    db = open_db(db_url)
    run_suite(load_suite(folder), db, RunOptions())
    system = db.systems()[0]
    sdpa = next(f for f in ml.fusions if f.config.kind == "SDPA")
    with db.session() as s:
        # fp16: cuDNN's fused attention is fast; fp32: cuDNN has no engine (not_supported)
        s.execute(sa.update(Measurement).where(Measurement.layer_key == sdpa.config.key,
                                               Measurement.precision == "fp16").values(median_ms=1e-4))
        s.execute(sa.update(Measurement).where(Measurement.layer_key == sdpa.config.key,
                                               Measurement.precision == "fp32").values(
            status="not_supported", median_ms=None, message="cuDNN graph API: no engine for FLOAT sdpa"))
    for precision in ("fp16", "fp32"):
        a = analyze(ml, db, system, precision)
        assert a.complete
        ft = next(f for f in a.fusions if f.key == sdpa.config.key)
        unfused = sum(a.layers[i].time_ms for i in sdpa.layers)
        assert ft.unfused_ms == pytest.approx(unfused)
        if precision == "fp16":
            assert ft.fused_ms == pytest.approx(1e-4) and ft.profit_ms == pytest.approx(unfused - 1e-4)
        else:
            assert ft.fused_ms is None and ft.profit_ms == 0.0
        assert a.lbl_fused_sequential_ms == pytest.approx(a.lbl_sequential_ms - sum(f.profit_ms for f in a.fusions))
        assert a.to_dict()["fusions"][0]["kind"] in ("layernorm", "sdpa", "unary")


# ------------------------------------------------------------------------------- compile and link

@pytest.mark.slow
def test_transformer_kinds_compile_and_link_with_hostile_names(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    mls = [process(bert_encoder_model(tmp_path / "b14.onnx", opset=14, hostile=True), 2, dims={"seq": 16}),
           process(bert_encoder_model(tmp_path / "b20.onnx", opset=20, gelu="op"), 2, dims={"seq": 16}),
           process(transformer_ops_model(tmp_path / "t.onnx"), 2, batch_dim=0)]
    suite = generate(mls, ["fp32", "tf32", "fp16", "bf16"], tmp_path / "tf")
    kinds = {j.kind for j in suite.jobs}
    assert {"LayerNorm", "Unary", "Gather", "Where", "SDPA"} <= kinds
    unary = (tmp_path / "tf" / "src" / "unary.cpp").read_text()
    assert cpp_string(HOSTILE) in unary and 'system("rm' not in unary.replace('\\"', "")
    from benanza.build.builder import build

    r = build(tmp_path / "tf")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(ln)["job"] for ln in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
    ldd = subprocess.run(["ldd", str(r.executable)], capture_output=True, text=True).stdout
    assert "libcudnn.so.9" in ldd and "not found" not in ldd
    # the cudnn-frontend graphs are in the harness (not skipped for lack of headers)
    nm = subprocess.run(["nm", "-C", str(r.executable)], capture_output=True, text=True).stdout
    assert "benanza::run_sdpa_engines" in nm and "cudnn_frontend::graph::Graph" in nm


def test_layers_command_prints_the_coverage(models, tmp_path):
    from test_cli import bz, one_line_error

    p = bz("layers", models / "vit_b_16.onnx", "--batch", "1")
    assert p.returncode == 0, p.stderr
    assert "coverage: 100% of compute layers benchmarked (343 of 343, 0 unsupported; 133 zero-cost layers)" in p.stdout
    assert "fusion candidates: 72 (Add+LayerNorm 24, Gemm 24, GemmAct 12, SDPA 12)" in p.stdout and "unsupported:" not in p.stdout
    bert = bert_encoder_model(tmp_path / "bert.onnx", opset=14)
    d = scenario_of(bz("layers", bert, "--batch", "2", "--dim", "seq=16", "--json").stdout, "layers")
    assert d["coverage"]["percent"] == 100.0 and d["fusions_by_kind"] == {"Add+LayerNorm": 4, "Gemm": 10, "GemmAct": 2, "LayerNorm": 1, "SDPA": 2}
    # the symbolic sequence length must be bound: one clear line
    one_line_error(bz("layers", bert, "--batch", "2"), 2)


# ------------------------------------------------------------------- GEMM (+ bias) -> activation

def test_gemm_act_candidates_in_vit_b_16(models):
    ml = process(models / "vit_b_16.onnx", 1)
    acts = [f for f in ml.fusions if f.config.kind == "GemmAct"]
    # the 12 MLP blocks: MatMul (768 -> 3072) -> Add(bias) -> Gelu; not the qkv/out projections
    # (no activation) nor the head
    assert len(acts) == 12
    assert {f.config for f in acts} == {L.GemmActConfig(gemm=L.GemmConfig(m=197, n=3072, k=768, bias="c"),
                                                        activation="gelu")}
    assert all(_fusion_ops(ml, f) == ["MatMul", "Add", "Gelu"] for f in acts)
    assert acts[0].config.flops() == 2 * 197 * 3072 * 768 + 197 * 3072 + 5 * 197 * 3072
    members = [i for f in ml.fusions for i in f.layers]
    assert len(members) == len(set(members))


def test_gemm_act_candidates_in_a_builder_graph(tmp_path):
    from onnx_builders import mlp_model

    ml = process(mlp_model(tmp_path / "mlp.onnx"), 3)
    assert [(_fusion_ops(ml, f), f.config) for f in ml.fusions] == [
        (["Gemm", "Relu"], L.GemmActConfig(L.GemmConfig(m=3, n=64, k=32, trans_b=True, bias="c"), "relu")),
        (["MatMul", "Add", "Gelu"], L.GemmActConfig(L.GemmConfig(m=3, n=48, k=64, bias="c"), "gelu_tanh")),
        (["MatMul", "Add", "Div", "Erf", "Add", "Mul", "Mul"],
         L.GemmActConfig(L.GemmConfig(m=3, n=40, k=48, bias="c"), "gelu")),
    ]  # the last MatMul -> Relu: its product is also a graph output, so no candidate
    for f in ml.fusions:
        cfg = f.config
        assert L.config_from_params(cfg.kind, json.loads(json.dumps(cfg.params()))) == cfg
        assert cfg.key.startswith("gemmact-") and cfg.describe().startswith("GemmAct(")


def test_an_erf_gelu_after_no_gemm_stays_a_gelu_candidate(tmp_path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    c = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.float32), n)  # noqa: E731
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Div", ["a", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["a", "e1"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                          [c("s2", 2 ** 0.5), c("one", 1.0), c("half", 0.5)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, str(tmp_path / "g.onnx"))
    ml = process(tmp_path / "g.onnx", 2, batch_dim=0)
    assert ml.summary()["fusions_by_kind"] == {"Gelu": 1}


def test_a_bias_add_that_writes_the_graph_output_is_one_gemm_with_a_bias(tmp_path):
    """An LSTM language model's output Linear on 3-D inputs, as the TorchScript exporter writes it:
    MatMul -> Add(bias) whose sum is the graph output (either operand order). PyTorch runs it as one
    addmm with a bias epilogue, so the candidate must exist or the forward bound counts a separate Add
    PyTorch never runs (the H200 training truth of 2026-11-27e: lstm_lm b32 fp32 forward phase 2.439 ms
    against PyTorch's 2.373 ms)."""
    from onnx import numpy_helper

    for order in (("p", "b"), ("b", "p")):
        nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", list(order), ["y"])]
        g = helper.make_graph(nodes, "lm_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [35, 4, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [35, 4, 40])],
                              [numpy_helper.from_array(np.zeros((16, 40), np.float32), "w"),
                               numpy_helper.from_array(np.zeros(40, np.float32), "b")])
        path = tmp_path / f"head-{order[0]}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        ml = process(path, 4, batch_dim=1)
        assert [(_fusion_ops(ml, f), f.config) for f in ml.fusions] == [
            (["MatMul", "Add"], L.GemmConfig(m=140, n=40, k=16, bias="c"))]
