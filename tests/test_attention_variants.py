"""Attention as deployed decoders compute it, found as one SDPA group and timed with cuDNN's fused attention:

* attention sinks (GPT-OSS: a learned per-head logit concatenated to the scores before the softmax and
  dropped after it; transformers' ``models/gpt_oss`` ``eager_attention_forward``), cudnn-frontend's
  ``set_sink_token`` (cuDNN 9.13+; the frontend refuses it for s_q == 1, which the suite records);
* sliding-window attention in prefill (Mistral's and GPT-OSS's sliding layers: the mask built from
  comparisons of positions, folded to a band by torch.export), cudnn-frontend's
  ``set_diagonal_band_left_bound`` beside the causal right bound.

The exports are tests/data/decoders/{gpt_oss_prefill,gpt_oss_decode,mistral_window_prefill}.onnx, written
by benanza's export path (benchmarks/lm_step_exports.py: torch 2.13 CPU, transformers 5.25, weights
stripped): GPT-OSS with sinks on both layers and sliding_window=8 on the first (layer_types alternate,
sliding first), prefill of 16 tokens and decode against 32; Mistral with sliding_window=8, prefill of 32.
No GPU here: the suite is rendered and compile-checked (g++ -fsyntax-only); cuDNN's answers are the
suite's records on a GPU."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.llm import attention_flops, step_flops
from benanza.generation.generator import generate
from benanza.kinds.sdpa import causal_window_of, effective_window, kept_pairs
from benanza.processing.model import process
from conftest import REPO
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
SINK_OPS = {"Concat", "ReduceMax", "Sub", "Softmax", "Slice"}


def _groups(ml):
    return [f for f in ml.fusions if f.config.kind == "SDPA"]


def _ops(ml, f):
    return [ml.layers[i].op_type for i in f.layers]


def _packed(cfg):
    """``cfg`` without the strides of the views it reads and writes through (checked apart)."""
    return dataclasses.replace(cfg, q_strides=(), k_strides=(), v_strides=(), o_strides=())


@pytest.mark.parametrize("batch", [1, 32])
def test_gpt_oss_prefill_is_one_sdpa_group_per_layer_with_its_sink_and_window(batch):
    ml = process(DEC / "gpt_oss_prefill.onnx", batch)
    groups = _groups(ml)
    base = L.SdpaConfig(b=batch, h=4, h_kv=2, s_q=16, s_kv=16, d=16, d_v=16, scale=0.25, mask="causal", sink=True)
    # layer 0 slides over 8 keys, layer 1 attends over all of them; both carry the sinks
    assert [_packed(f.config) for f in groups] == [dataclasses.replace(base, window=8), base]
    # O written straight into the (b, s, h*d) tensor of the head merge
    assert all(f.config.o_strides == (16 * 64, 16, 64, 1) for f in groups)
    for f in groups:
        ops = _ops(ml, f)
        # the scores, the sink's column and the overflow guard, the softmax, the drop of the sink, P V
        assert SINK_OPS <= set(ops) and ops.count("MatMul") == 2
        assert ops.index("Concat") < ops.index("ReduceMax") < ops.index("Softmax") < ops.index("Slice")
    # no attention layer is left outside a group: every Softmax over s_kv + 1 columns is in one
    loose = [ly for ly in ml.layers if ly.op_type == "Softmax" and ly.fusion is None
             and ly.output_shapes[0][-1] == 17]
    assert not loose
    assert groups[0].config.describe() == \
        f"SDPA(b{batch} h4 hkv2 sq16 skv16 d16 scale 0.25 causal window 8 sink)"


@pytest.mark.parametrize("batch", [1, 32])
def test_gpt_oss_decode_groups_carry_the_sink_and_the_cache_keeps_the_window(batch):
    """In decode transformers' sliding cache holds the window (8 keys: 7 past and the new one): the window
    drops nothing there, so the config has none (one key for equal attentions)."""
    ml = process(DEC / "gpt_oss_decode.onnx", batch)
    cfgs = [f.config for f in _groups(ml)]
    assert [(c.b, c.h, c.kv_heads, c.s_q, c.s_kv, c.d, c.sink, c.window) for c in cfgs] == \
        [(batch, 4, 2, 1, 8, 16, True, 0), (batch, 4, 2, 1, 33, 16, True, 0)]
    # the key padding of the attention_mask input: an additive bias over the keys
    assert [(c.mask, c.bias) for c in cfgs] == [("bias", (batch, 1, 1, 8)), ("bias", (batch, 1, 1, 33))]
    assert all(SINK_OPS <= set(_ops(ml, f)) for f in _groups(ml))


@pytest.mark.parametrize("batch", [1, 32])
def test_a_mistral_prefill_with_a_sliding_window_is_causal_with_its_window(batch):
    ml = process(DEC / "mistral_window_prefill.onnx", batch)
    assert ml.unsupported() == {}
    want = L.SdpaConfig(b=batch, h=4, h_kv=2, s_q=32, s_kv=32, d=32, d_v=32, scale=0.176777, mask="causal", window=8)
    assert [_packed(f.config) for f in _groups(ml)] == [want, want]
    # the mask layers (Where/And of the folded band and the key padding) feed the group, outside it
    assert all("Softmax" in _ops(ml, f) and "Concat" not in _ops(ml, f) for f in _groups(ml))


def _band(s_q, s_kv, past, w):
    seen = np.tril(np.ones((s_q, s_kv), bool), past)
    return seen & np.triu(np.ones((s_q, s_kv), bool), past - w + 1) if w else seen


def test_the_window_is_read_from_the_mask_values():
    assert causal_window_of(_band(16, 16, 0, 8)) == 8
    assert causal_window_of(_band(16, 16, 0, 0)) == 0  # the plain causal mask
    assert causal_window_of(_band(16, 16, 0, 16)) == 0  # a window of every key drops none
    assert causal_window_of(_band(4, 12, 8, 3), past=8) == 3
    additive = np.where(_band(16, 16, 0, 5), 0.0, np.finfo(np.float32).min).astype(np.float32)
    assert causal_window_of(additive[None, None]) == 5
    holed = _band(16, 16, 0, 8)
    holed[12, 9] = False
    assert causal_window_of(holed) is None
    assert causal_window_of(np.ones((16, 16), bool)) is None  # no causal frontier: not a causal mask
    assert effective_window(8, 1, 8, "causal_bottom_right") == 0  # decode over the window's cache
    assert effective_window(8, 1, 9, "causal_bottom_right") == 8
    assert effective_window(8, 16, 16, "causal") == 8 and effective_window(16, 16, 16, "causal") == 0


@pytest.mark.parametrize("s_q, s_kv, mask, w", [
    (16, 16, "causal", 8), (32, 32, "causal", 8), (4, 12, "causal_bottom_right", 3), (16, 16, "causal", 0),
    (1, 33, "causal_bottom_right", 0), (7, 20, "causal_bottom_right", 9)])
def test_the_flops_count_only_the_pairs_the_window_keeps(s_q, s_kv, mask, w):
    cfg = L.SdpaConfig(b=2, h=4, h_kv=2, s_q=s_q, s_kv=s_kv, d=32, d_v=16, scale=0.125, mask=mask, window=w)
    past = s_kv - s_q if mask == "causal_bottom_right" else 0
    pairs = int(_band(s_q, s_kv, past, w).sum())
    assert kept_pairs(cfg) == pairs
    assert attention_flops(cfg) == 2 * 4 * pairs * (2 * (32 + 16) + 7)
    if w:  # the config's own FLOPs: the window's pairs (without one, every pair, as before)
        assert cfg.flops() == 2 * 4 * pairs * (2 * (32 + 16) + 7) < 2 * 4 * s_q * s_kv * (2 * (32 + 16) + 7)
    else:
        assert cfg.flops() == 2 * 4 * s_q * s_kv * (2 * (32 + 16) + 7)
    # a sink adds its max, subtract, exp and add per row; 4 bytes per head read
    sink = dataclasses.replace(cfg, sink=True)
    assert sink.flops() - cfg.flops() == attention_flops(sink) - attention_flops(cfg) == 4 * 2 * 4 * s_q
    kind = L.REGISTRY["SDPA"]
    assert kind.min_bytes(sink, 2, 2) - kind.min_bytes(cfg, 2, 2) == 4 * 4


def test_the_step_flops_of_a_sliding_layer_are_below_the_full_layer():
    ml = process(DEC / "gpt_oss_prefill.onnx", 8)
    sliding, full = (f.config for f in _groups(ml))
    assert attention_flops(sliding) < attention_flops(full)
    assert kept_pairs(sliding) == sum(min(i + 1, 8) for i in range(16)) and kept_pairs(full) == 16 * 17 // 2
    flat = step_flops(ml)
    assert flat > 0 and attention_flops(sliding) + attention_flops(full) < flat


def test_the_new_fields_keep_every_other_key():
    cfg = L.SdpaConfig(b=1, h=4, s_q=16, s_kv=16, d=16, d_v=16, scale=0.25, mask="causal")
    keys = {cfg.key, dataclasses.replace(cfg, window=8).key, dataclasses.replace(cfg, sink=True).key,
            dataclasses.replace(cfg, window=8, sink=True).key}
    assert len(keys) == 4  # and the example's key is unchanged: tests/test_kinds_registry.py EXAMPLE_KEYS
    assert "window" not in cfg.params() and "sink" not in cfg.params()
    with pytest.raises(ValueError, match="window"):
        L.SdpaConfig(b=1, h=4, s_q=16, s_kv=16, d=16, d_v=16, scale=0.25, mask="bias", bias=(1, 1, 16, 16), window=4)


def test_the_backward_of_a_sink_or_window_is_not_faked():
    """No backward config carries the sink or the window yet: the training plan then takes the group's
    layers one by one (benanza.processing.training), never a backward without the term."""
    cfg = L.SdpaConfig(b=1, h=4, s_q=16, s_kv=16, d=16, d_v=16, scale=0.25, mask="causal")
    assert L.REGISTRY["SDPA"].backward(cfg)
    for extra in ({"window": 8}, {"sink": True}):
        with pytest.raises(NotImplementedError):
            L.REGISTRY["SDPA"].backward(dataclasses.replace(cfg, **extra))


def _sink_model(path, sink_const=True, sink_last=True):
    """Q K^T * scale -> Concat(scores, sinks) -> Softmax -> Slice(:s_kv) -> P V, the sink a constant
    (1, h, s_q, 1) or a graph input."""
    b, h, s, d = 2, 4, 16, 32
    f16 = TensorProto.FLOAT16
    inputs = [helper.make_tensor_value_info(n, f16, sh) for n, sh in (("Q", (b, h, s, d)), ("KT", (b, h, d, s)),
                                                                      ("V", (b, h, s, d)))]
    inits = [numpy_helper.from_array(np.array(0.125, np.float16), "scale"),
             numpy_helper.from_array(np.array([0, 0, 0, 0], np.int64), "starts"),
             numpy_helper.from_array(np.array([b, h, s, s], np.int64), "ends")]
    sinks = np.broadcast_to(np.arange(h, dtype=np.float16).reshape(1, h, 1, 1), (b, h, s, 1)).copy()
    if sink_const:
        inits.append(numpy_helper.from_array(sinks, "sinks"))
    else:
        inputs.append(helper.make_tensor_value_info("sinks", f16, (b, h, s, 1)))
    cat_in = ["scaled", "sinks"] if sink_last else ["sinks", "scaled"]
    nodes = [helper.make_node("MatMul", ["Q", "KT"], ["scores"]),
             helper.make_node("Mul", ["scores", "scale"], ["scaled"]),
             helper.make_node("Concat", cat_in, ["cat"], axis=-1),
             helper.make_node("Softmax", ["cat"], ["p"], axis=-1),
             helper.make_node("Slice", ["p", "starts", "ends"], ["p_kv"]),
             helper.make_node("MatMul", ["p_kv", "V"], ["O"])]
    g = helper.make_graph(nodes, "sink", inputs, [helper.make_tensor_value_info("O", f16, (b, h, s, d))], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("const, last, found", [(True, True, True), (False, True, False), (True, False, False)])
def test_only_a_constant_sink_column_after_the_scores_is_a_sink(tmp_path, const, last, found):
    ml = process(_sink_model(tmp_path / "s.onnx", const, last), 2, batch_dim=0)
    groups = _groups(ml)
    if found:
        (f,) = groups
        assert _packed(f.config) == L.SdpaConfig(b=2, h=4, s_q=16, s_kv=16, d=32, d_v=32, scale=0.125, sink=True)
        assert {"Concat", "Softmax", "Slice"} <= set(_ops(ml, f))
    else:  # a sink from the data, or in front of the scores: the layers stay layers, timed one by one
        assert not groups
        assert {ly.op_type for ly in ml.layers if ly.status == "benchmark"} >= {"Concat", "Softmax", "Slice"}


def test_the_suite_renders_the_window_and_the_sink_and_compiles(tmp_path):
    suite = generate([process(DEC / "gpt_oss_prefill.onnx", 2), process(DEC / "mistral_window_prefill.onnx", 2)],
                     ["fp16"], tmp_path / "s")
    sdpa = [j for j in suite.jobs if j.kind == "SDPA"]
    assert len(sdpa) == 3  # GPT-OSS's sliding and full layers, Mistral's (both of its layers alike)
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    # ... strides}, window, sink, softcap, h_kv, stats, kv_page, paged_skip, v_in_k
    assert "}, 8, true, 0.0, 2, false, 0, \"\", false}" in src  # GPT-OSS's sliding layer
    assert "}, 0, true, 0.0, 2, false, 0, \"\", false}" in src  # its full layer
    assert "}, 8, false, 0.0, 2, false, 0, \"\", false}" in src  # Mistral's
    assert "spec.window = c.window;" in src and "spec.sink = c.sink;" in src
    syntax_check(tmp_path / "s", "sdpa.cpp")


@pytest.mark.parametrize("frontend", [0, 1])
def test_the_harness_sets_the_sink_and_the_left_bound(frontend):
    """cpp/src/transformer_engines.cpp builds the sdpa graphs (contiguous and paged) with cuDNN's sink
    token (float32 [1, h, 1, 1]) and left bound; it compiles with and without the cudnn-frontend headers
    (g++ -fsyntax-only)."""
    import site
    from pathlib import Path

    text = (REPO / "cpp" / "src" / "transformer_engines.cpp").read_text()
    assert "set_sink_token(" in text and "set_diagonal_band_left_bound(" in text and "Softcap>" in text
    assert text.count("set_sdpa_mask(c, *g, opts);") == 2  # the contiguous graph and the paged one
    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia").is_dir()), None)
    if not shutil.which("g++") or sp is None or not (sp / "include" / "cudnn_frontend.h").exists():
        pytest.skip("g++ or the pip wheels' CUDA/cuDNN/cudnn-frontend headers are missing")
    inc = [REPO / "cpp" / "include", sp / "nvidia" / "cudnn" / "include", sp / "nvidia" / "cu13" / "include",
           sp / "include"]
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", f"-DBENANZA_WITH_FRONTEND={frontend}",
                        *[f"-I{p}" for p in inc], str(REPO / "cpp" / "src" / "transformer_engines.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def _onnx_attention_model(path, mask_values, is_causal=0):
    """One opset-23 Attention over Q, K, V (2, 4, 16, 32) with a constant boolean attn_mask."""
    f16 = TensorProto.FLOAT16
    inputs = [helper.make_tensor_value_info(n, f16, (2, 4, 16, 32)) for n in ("Q", "K", "V")]
    node = helper.make_node("Attention", ["Q", "K", "V", "mask"], ["Y"], is_causal=is_causal)
    g = helper.make_graph([node], "att", inputs, [helper.make_tensor_value_info("Y", f16, (2, 4, 16, 32))],
                          [numpy_helper.from_array(mask_values, "mask")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]), path)
    return path


@pytest.mark.parametrize("w, causal", [(8, 0), (8, 1), (4, 0), (16, 0)])
def test_an_onnx_attention_with_a_band_mask_is_causal_with_its_window(tmp_path, w, causal):
    ml = process(_onnx_attention_model(tmp_path / "a.onnx", _band(16, 16, 0, w)[None, None], causal), 2, batch_dim=0)
    (ly,) = [ly for ly in ml.layers if ly.op_type == "Attention"]
    # a window of every key (16) is the plain causal mask
    assert (ly.config.mask, ly.config.bias, ly.config.window) == ("causal", (), w if w < 16 else 0)
    holed = _band(16, 16, 0, w)
    holed[10, 10] = False  # no band: a bias, as before
    ml = process(_onnx_attention_model(tmp_path / "b.onnx", holed[None, None]), 2, batch_dim=0)
    (ly,) = [ly for ly in ml.layers if ly.op_type == "Attention"]
    assert (ly.config.mask, ly.config.bias, ly.config.window) == ("bias", (1, 1, 16, 16), 0)


@pytest.mark.parametrize("attrs, sink_input, window, sink", [
    ({"local_window_size": 7}, False, 8, False),      # ONNX Runtime keeps the last local_window_size + 1 keys
    ({"local_window_size": 63}, False, 0, False),     # a window of all 64 keys drops none
    ({"smooth_softmax": 1}, False, 0, True),          # a sink logit of 0 per head
    ({"local_window_size": 3}, True, 4, True),        # head_sink: a logit per head
])
def test_onnx_runtime_group_query_attention_windows_and_sinks(tmp_path, attrs, sink_input, window, sink):
    from test_contrib_ops import _gqa_model, _vi

    m = _gqa_model(tmp_path / "m.onnx", 512, 128, attrs=attrs,
                   extra_inputs=("", "", "", "", "head_sink") if sink_input else None)
    if sink_input:
        m.graph.input.append(_vi("head_sink", [8]))
        onnx.save(m, tmp_path / "m.onnx")
    ml = process(tmp_path / "m.onnx", 2, {"seq": 64})
    (att,) = [ly for ly in ml.layers if ly.op_type == "GroupQueryAttention"]
    assert att.status == "benchmark", att.reason
    c = att.config
    assert (c.h, c.kv_heads, c.s_q, c.s_kv, c.mask) == (8, 2, 64, 64, "causal")
    assert (att.config.window, att.config.sink) == (window, sink)


def test_a_group_cudnn_refuses_is_the_sum_of_its_layers(tmp_path):
    """GPT-OSS's decode: the frontend refuses a sink for one query (s_q == 1), so the groups get only
    not_supported records; the LBL then counts their layers one by one (their sum, never 0 ms). A
    measured fused call faster than the sum replaces it."""
    from benanza.analysis.analyzer import analyze
    from benanza.database.records import MeasurementLine
    from benanza.generation.generator import job_id
    from test_lbl_truth import _measure, _system_db

    ml = process(DEC / "gpt_oss_decode.onnx", 2)
    groups = _groups(ml)
    fused = {f.config.key for f in groups}
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for key, cfg in ml.unique_configs().items():
        if key not in fused:
            _measure(db, sid, cfg, "fp16", [("lib", 0.010)])
    refused = MeasurementLine.from_json({
        "type": "measurement", "call": "cudnnBackendExecute", "algorithm": "*", "math": "tensor_op", "dtype": "float16",
        "cache": "warm", "layout": "NCHW", "status": "not_supported",
        "message": "decode only mode, i.e. s_q == 1, not supported with sink_token"})
    for f in groups:
        db.upsert_configs([f.config])
        db.write_job(sid, None, job_id(f.config, "fp16", "NCHW"), f.config.key, "fp16", "ok", "", [refused])
    a = analyze(ml, db, db.systems()[0], "fp16")
    times = [t for t in a.fusions if t.key in fused]
    assert len(times) == 2
    for t in times:
        timed = [i for i in t.layers if ml.layers[i].status == "benchmark"]
        assert t.fused_ms is None and not t.applied
        assert t.unfused_ms == pytest.approx(0.010 * len(timed)) and t.unfused_ms > 0
    _measure(db, sid, groups[0].config, "fp16", [("cudnnBackendExecute", 0.004)])
    b = analyze(ml, db, db.systems()[0], "fp16")
    assert [t.applied for t in b.fusions if t.key in fused] == [True, False]
    assert b.lbl_ms < a.lbl_ms


@pytest.mark.parametrize("batch", [1, 32])
def test_gemma2_soft_capped_attention_is_one_group_with_its_cap(batch):
    """Gemma-2's attention (benanza's export, tests/data/decoders/gemma2_softcap_prefill.onnx: transformers
    5.25's eager form, the only one Gemma-2 runs) soft-caps its scaled scores, tanh(s / 50) * 50, before the
    mask: the Div, Tanh and Mul join the SDPA group as its ``softcap`` (cuDNN's Softcap score modifier);
    before, no attention of the model was found. Alternate layers keep a sliding window of 8."""
    ml = process(DEC / "gemma2_softcap_prefill.onnx", batch)
    assert ml.unsupported() == {}
    groups = [f.config for f in ml.fusions if f.config.kind == "SDPA"]
    assert [(c.b, c.s_q, c.s_kv, c.softcap, c.window, c.mask) for c in groups] == \
        [(batch, 16, 16, 50.0, 8, "causal"), (batch, 16, 16, 50.0, 0, "causal")]
    g = groups[1]
    assert g.flops() == dataclasses.replace(g, softcap=0.0).flops() + 3 * batch * 4 * 16 * 16
    assert "softcap 50" in g.describe()
    tanh = [ly for ly in ml.layers if ly.op_type == "Tanh"]
    in_groups = {i for f in ml.fusions if f.config.kind == "SDPA" for i in f.layers}
    assert len([ly for ly in tanh if ly.index in in_groups]) == 2  # the final logits' soft-cap stays its own layer


def test_a_soft_capped_group_has_no_pytorch_sdpa_and_no_fused_backward():
    from benanza.kinds.framework import Ctx, NotSupported
    from benanza.kinds.sdpa_backward import sdpa_backward

    cfg = L.SdpaConfig(b=1, h=4, s_q=16, s_kv=16, d=32, d_v=32, scale=0.0625, mask="causal", softcap=50.0)
    with pytest.raises(NotSupported, match="soft-capping"):
        L.REGISTRY["SDPA"].torch(Ctx(cfg, None, None, None, False))
    with pytest.raises(NotImplementedError, match="soft-cap"):
        sdpa_backward(cfg)
    with pytest.raises(ValueError, match="softcap"):
        L.SdpaConfig(b=1, h=4, s_q=16, s_kv=16, d=32, d_v=32, scale=0.0625, softcap=-1.0)
    assert L.SdpaConfig(b=1, h=4, s_q=16, s_kv=16, d=32, d_v=32, scale=0.0625).key == \
        dataclasses.replace(cfg, mask="none", softcap=0.0).key  # an absent cap keeps earlier keys
