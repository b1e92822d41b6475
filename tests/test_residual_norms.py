"""A transformer block's residual Add fused into the norm after it (issue 27): Add(a, b) ->
LayerNormalization / RMSNormalization found as one fusion candidate (the norm's config with
``residual``, and ``keep_sum`` where the next residual Add reads the sum), as TorchInductor's
``fused_add_native_layer_norm`` kernel runs it. Without it the LBL of GPT-2's decode step at batch 1
(0.394 ms) exceeded torch.compile's kernel time (0.383 ms) on an H200 (benchmarks/results/2026-11-27i).
Checked here: the pattern in built models and in the small decoder exports of tests/data/decoders, the
cases it refuses, keys of plain norms unchanged, bytes and FLOPs, a suite that renders with the new
row-in-registers kernel and compiles, and a training step that counts the group layer by layer."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate, plan_jobs
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
H = 768


def _w(name, shape):
    return helper.make_tensor(name, TensorProto.FLOAT, shape, np.full(shape, 0.01, np.float32).ravel().tolist())


def _blocks_model(path, norm="LayerNormalization", opset=17, residual_const=False, broadcast=False):
    """Two pre-norm blocks over (batch, 4, H): h1 = x + a; y1 = norm(h1); h2 = h1 + MatMul(y1, W);
    out = norm(h2). ``residual_const``: the first Add's b a constant (a bias, no residual);
    ``broadcast``: a of shape (1, 1, H), broadcast over the tokens."""
    a_shape = [1, 1, H] if broadcast else ["batch", 4, H]
    inits = [_w("scale", [H]), _w("bias", [H]), _w("W", [H, H])]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, H])]
    if residual_const:
        inits.append(_w("a", [H]))
    else:
        ins.append(helper.make_tensor_value_info("a", TensorProto.FLOAT, a_shape))
    extra = {"epsilon": 1e-5, "axis": -1}
    n_in = ["scale", "bias"] if norm == "LayerNormalization" else ["scale"]
    nodes = [helper.make_node("Add", ["x", "a"], ["h1"], name="add1"),
             helper.make_node(norm, ["h1", *n_in], ["y1"], name="norm1", **extra),
             helper.make_node("MatMul", ["y1", "W"], ["m"], name="mm"),
             helper.make_node("Add", ["h1", "m"], ["h2"], name="add2"),
             helper.make_node(norm, ["h2", *n_in], ["out"], name="norm2", **extra)]
    g = helper.make_graph(nodes, "blocks", ins,
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 4, H])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, path)
    return path


def _norm_fusions(ml):
    return [f for f in ml.fusions if f.config.kind in ("LayerNorm", "RMSNorm")]


def test_each_residual_add_and_its_norm_are_one_candidate(tmp_path):
    ml = process(_blocks_model(tmp_path / "ln.onnx"), 32)
    fs = _norm_fusions(ml)
    assert len(fs) == 2
    by_name = {ml.layers[f.layers[-1]].name: f for f in fs}
    first, second = by_name["norm1"], by_name["norm2"]
    assert [ml.layers[i].name for i in first.layers] == ["add1", "norm1"]
    assert [ml.layers[i].name for i in second.layers] == ["add2", "norm2"]
    # the first sum is read by the second Add too: the fused call writes it; the last one is not
    assert first.config == L.LayerNormConfig(x=(32, 4, H), axis=2, epsilon=float(np.float32(1e-5)), bias=True,
                                             residual=True, keep_sum=True)
    assert second.config.residual and not second.config.keep_sum
    assert "+residual +sum" in first.config.describe()


def test_rmsnorm_at_opset_23_too(tmp_path):
    ml = process(_blocks_model(tmp_path / "rms.onnx", norm="RMSNormalization", opset=23), 1)
    fs = _norm_fusions(ml)
    assert [f.config.kind for f in fs] == ["RMSNorm", "RMSNorm"]
    assert all(f.config.residual for f in fs) and [f.config.keep_sum for f in fs] == [True, False]


def test_a_bias_or_a_broadcast_add_is_no_residual(tmp_path):
    """A constant operand (a bias) or an operand of another shape (a broadcast): the first norm
    stays alone; the second block's residual Add is still found."""
    for kw in ({"residual_const": True}, {"broadcast": True}):
        ml = process(_blocks_model(tmp_path / f"{list(kw)[0]}.onnx", **kw), 8)
        names = [ml.layers[f.layers[-1]].name for f in _norm_fusions(ml)]
        assert names == ["norm2"], kw


def test_the_decoder_exports_fuse_their_residual_adds():
    """GPT-2 (torch.export, LayerNormalization), the Llama decoder at opset 23 (RMSNormalization) and at
    opset 20 (the decomposed RMSNorm's group takes the Add in as its first layer): every norm after a
    residual Add, 2 blocks each. A training step still takes the decomposed norms' fused training calls,
    without the Add."""
    for name, kind in (("gpt2_decode_dynamo20", "LayerNorm"), ("llama_decode_dynamo23", "RMSNorm"),
                       ("llama_decode_dynamo20", "RMSNorm")):
        ml = process(DEC / f"{name}.onnx", 1, {"past": 128})  # (their total length is the expression past + 1)
        fs = [f for f in _norm_fusions(ml) if f.config.residual]
        assert len(fs) == 4 and {f.config.kind for f in fs} == {kind}, name
        assert sum(f.config.keep_sum for f in fs) == 3, name  # all but the final norm's
        assert all(ml.layers[f.layers[0]].op_type == "Add" for f in fs), name
    plan = training_plan(ml)  # llama_decode_dynamo20
    groups = {c.fusion for c in plan.fused if c.config.kind == "RMSNormBwd"}
    assert len(groups) == 5 and not plan.no_backward
    adds = {f.layers[0] for f in fs}
    assert not adds & set().union(*groups)  # the Adds count layer by layer


def test_plain_norm_keys_are_unchanged():
    """residual and keep_sum are optional fields: keys of the norms stored before are the same."""
    ln = L.LayerNormConfig(x=(1, 1, 768), axis=2, epsilon=1e-5)
    assert "residual" not in ln.params() and "keep_sum" not in ln.params()
    rms = L.RMSNormConfig(x=(1, 1, 768), axis=2, epsilon=1e-5)
    assert "residual" not in rms.params()
    assert L.LayerNormConfig(x=(1, 1, 768), axis=2, epsilon=1e-5, residual=True).key != ln.key


def test_bytes_and_flops_of_the_fused_call():
    n = 32 * 4 * H
    plain = L.LayerNormConfig(x=(32, 4, H), axis=2, epsilon=1e-5)
    fused = L.LayerNormConfig(x=(32, 4, H), axis=2, epsilon=1e-5, residual=True, keep_sum=True)
    # fp16: x and the residual read, y and the sum written, the float32 scale and bias read once
    assert min_bytes(plain, "fp16") == 2 * n + 2 * n + 8 * H
    assert min_bytes(fused, "fp16") == 4 * n + 4 * n + 8 * H
    assert fused.flops() == 9 * n and plain.flops() == 8 * n
    rms = L.RMSNormConfig(x=(32, 4, H), axis=2, epsilon=1e-5, residual=True)
    assert min_bytes(rms, "fp16") == 4 * n + 2 * n + 4 * H and rms.flops() == 5 * n


def test_the_suite_renders_both_kernels_and_compiles(tmp_path):
    """The fused cases time the one-block and the row-in-registers kernels and no cuDNN graph (it has
    no add before its norm); the plain ones all three. norm_rows_kernels.cu itself compiles in the
    session's harness build (tests/test_harness_build.py)."""
    mls = [process(_blocks_model(tmp_path / "ln.onnx"), 1),
           process(_blocks_model(tmp_path / "rms.onnx", norm="RMSNormalization", opset=23), 1)]
    suite = generate(mls, ["fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} >= {"LayerNorm", "RMSNorm"}
    for kind, src_name in (("LayerNorm", "layernorm.cpp"), ("RMSNorm", "rmsnorm.cpp")):
        src = (tmp_path / "s" / "src" / src_name).read_text()
        assert "row_in_registers" in src and "norm_rows_kernel(" in src and "if (!c.residual)" in src
        cases = [j for j in suite.jobs if j.kind == kind]
        assert any(j.config.residual for j in cases) and any(not j.config.residual for j in cases)
        syntax_check(tmp_path / "s", src_name)


def test_a_training_step_counts_the_group_layer_by_layer(tmp_path):
    """No fused training call for the group, and no job for its inference config under --train: the
    step keeps the Add and the norm's own calls."""
    ml = process(_blocks_model(tmp_path / "ln.onnx"), 8)
    assert all(L.training_counts_layers(f.config) for f in _norm_fusions(ml))
    plan = training_plan(ml)
    fused_layers = {i for c in plan.fused for i in c.fusion}
    assert not fused_layers & {i for f in _norm_fusions(ml) for i in f.layers}
    norm_layers = [ly.index for ly in ml.layers if ly.op_type == "LayerNormalization"]
    assert {c.layer for c in plan.calls if c.config.kind == "LayerNormBwd"} >= set(norm_layers) - {0}
    jobs = plan_jobs([ml], ["fp16"], train=True)
    assert not any(getattr(j.config, "residual", False) for j in jobs)
    assert any(getattr(j.config, "residual", False) for j in plan_jobs([ml], ["fp16"]))
