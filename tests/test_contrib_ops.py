"""ONNX Runtime's operators outside ONNX's own set (issue 27, items 2 and 3), as ONNX Runtime GenAI and
Optimum write them (built here with onnx.helper: no exporter here writes them): a kind maps them through
``Kind.contrib`` keyed by (domain, op type), each with a shape rule so the layers after them get shapes
(onnx's inference knows nothing of them); ``SimplifiedLayerNormalization`` in the default domain, which
onnx's checker refuses, loads; ``com.microsoft`` ``SkipSimplifiedLayerNormalization`` is the residual
Add (an Elementwise layer writing input_skip_bias_sum) then the RMSNorm."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.errors import ModelError
from benanza.processing.model import process

MS = "com.microsoft"
F16 = TensorProto.FLOAT16


def _save(path, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    onnx.save(m, path)
    return m


def _vi(name, shape, t=F16):
    return helper.make_tensor_value_info(name, t, shape)


def _weight(name, shape):
    return onnx.numpy_helper.from_array(np.full(shape, 0.5, dtype=np.float16), name)


def _norm_model(path, default_domain=True, bias=False, skip_shape=("batch", "seq", 64), gamma=64):
    """SimplifiedLayerNormalization -> SkipSimplifiedLayerNormalization(residual r) -> Relu, plus an Add of
    the Relu and the skip sum (the next block's residual), as ONNX Runtime's transformer optimizer leaves
    a Llama block's norms."""
    nodes = [helper.make_node("SimplifiedLayerNormalization", ["x", "w"], ["h"], epsilon=1e-6, axis=-1,
                              domain="" if default_domain else MS),
             helper.make_node("SkipSimplifiedLayerNormalization", ["h", "r", "g"] + (["b"] if bias else []),
                              ["h2", "", "", "sum"], epsilon=1e-5, domain=MS),
             helper.make_node("Relu", ["h2"], ["y0"]),
             helper.make_node("Add", ["y0", "sum"], ["y"])]
    inits = [_weight("w", [64]), _weight("g", [gamma])] + ([_weight("b", [64])] if bias else [])
    return _save(path, nodes, [_vi("x", ["batch", "seq", 64]), _vi("r", list(skip_shape))],
                 [_vi("y", ["batch", "seq", 64])], inits)


def test_the_default_domain_simplified_layernorm_loads(tmp_path):
    """onnx's checker refuses ONNX Runtime's default-domain SimplifiedLayerNormalization; benanza
    checks the rest of the model, maps it to RMSNorm and gives the layers after it shapes."""
    m = _norm_model(tmp_path / "m.onnx")
    with pytest.raises(onnx.checker.ValidationError, match="SimplifiedLayerNormalization"):
        onnx.checker.check_model(m)
    ml = process(tmp_path / "m.onnx", 2, {"seq": 16})
    assert ml.unsupported() == {}
    sln = ml.layers[0]
    assert (sln.op_type, sln.config) == ("SimplifiedLayerNormalization",
                                        L.RMSNormConfig(x=(2, 16, 64), axis=2, epsilon=float(np.float32(1e-6))))
    relu = next(ly for ly in ml.layers if ly.op_type == "Relu")
    assert relu.status == "benchmark" and relu.output_shapes == ((2, 16, 64),)
    # the model as it was read: the node keeps its domain (the checker saw it under another one)
    assert onnx.load(tmp_path / "m.onnx").graph.node[0].domain == ""


def test_the_skip_norm_is_the_residual_add_then_the_rmsnorm(tmp_path):
    _norm_model(tmp_path / "m.onnx", default_domain=True)
    ml = process(tmp_path / "m.onnx", 2, {"seq": 16})
    skip = [ly for ly in ml.layers if ly.op_type == "SkipSimplifiedLayerNormalization"]
    assert [ly.config for ly in skip] == [
        L.ElementwiseConfig(op="add", a=(2, 16, 64), b=(2, 16, 64)),
        L.RMSNormConfig(x=(2, 16, 64), axis=2, epsilon=float(np.float32(1e-5)))]
    add, norm = skip
    # the Add writes input_skip_bias_sum (the next block's residual), the RMSNorm reads it and writes output
    assert add.inputs == ("h", "r") and add.outputs == ("sum",)
    assert norm.inputs == ("sum",) and norm.outputs == ("h2",)
    last = ml.layers[-1]
    assert last.op_type == "Add" and sorted(ml.edges[last.index]) == sorted([add.index, last.index - 1])
    assert ml.edges[norm.index] == [add.index]


def test_a_skip_bias_is_a_second_add_and_a_broadcast_skip_is_read_as_such(tmp_path):
    _norm_model(tmp_path / "m.onnx", bias=True, skip_shape=("seq", 64))
    ml = process(tmp_path / "m.onnx", 3, {"seq": 8})
    skip = [ly.config for ly in ml.layers if ly.op_type == "SkipSimplifiedLayerNormalization"]
    assert skip == [L.ElementwiseConfig(op="add", a=(3, 8, 64), b=(1, 8, 64)),
                    L.ElementwiseConfig(op="add", a=(3, 8, 64), b=(1, 1, 64)),
                    L.RMSNormConfig(x=(3, 8, 64), axis=2, epsilon=float(np.float32(1e-5)))]
    assert ml.unsupported() == {}


def test_the_microsoft_default_epsilon(tmp_path):
    """SkipSimplifiedLayerNormalization without epsilon: ONNX Runtime's kDefaultSkipLayerNormEpsilon 1e-12."""
    nodes = [helper.make_node("SkipSimplifiedLayerNormalization", ["x", "r", "g"], ["y"], domain=MS)]
    _save(tmp_path / "m.onnx", nodes, [_vi("x", ["batch", 4, 64]), _vi("r", ["batch", 4, 64])],
          [_vi("y", ["batch", 4, 64])], [_weight("g", [64])])
    ml = process(tmp_path / "m.onnx", 1)
    assert ml.layers[-1].config.epsilon == 1e-12


def test_bad_skip_norms_are_unsupported_with_a_reason(tmp_path):
    _norm_model(tmp_path / "m.onnx", gamma=32)
    ml = process(tmp_path / "m.onnx", 1, {"seq": 4})
    bad = next(ly for ly in ml.layers if ly.op_type == "SkipSimplifiedLayerNormalization")
    assert bad.status == "unsupported" and "gamma [32]" in bad.reason and "\n" not in bad.reason
    _norm_model(tmp_path / "m2.onnx", skip_shape=("batch", 3, 64))
    ml = process(tmp_path / "m2.onnx", 1, {"seq": 4})
    bad = next(ly for ly in ml.layers if ly.op_type == "SkipSimplifiedLayerNormalization")
    assert bad.status == "unsupported" and "does not broadcast" in bad.reason


def test_an_unknown_contrib_op_is_unsupported_and_names_its_domain(tmp_path):
    nodes = [helper.make_node("FastGelu", ["x"], ["h"], domain=MS), helper.make_node("Relu", ["h"], ["y"])]
    _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 64])], [_vi("y", [2, 64])])
    ml = process(tmp_path / "m.onnx", 2)
    assert ml.layers[0].status == "unsupported" and ml.layers[0].reason == "operator com.microsoft.FastGelu is not benchmarked"


def test_a_default_domain_op_no_kind_maps_is_still_refused_by_the_checker(tmp_path):
    nodes = [helper.make_node("NoSuchOp", ["x"], ["y"])]
    _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 64])], [_vi("y", [2, 64])])
    with pytest.raises(ModelError, match="invalid ONNX model: No Op registered for NoSuchOp"):
        process(tmp_path / "m.onnx", 2)


# ------------------------------------------------------------------- com.microsoft GroupQueryAttention

def _gqa_model(path, q_width, kv_width=None, past=None, total=None, attrs=None, extra_inputs=None):
    """query [-> key, value] -> GroupQueryAttention(num_heads 8, kv_num_heads 2) -> MatMul(o_proj), as ONNX
    Runtime GenAI writes a Llama block's attention: seqlens_k and total_sequence_length int32 inputs,
    past_key/past_value (batch, kv_num_heads, past, head_size) graph inputs in decode, presents as outputs.
    The node is named with hostile text (kept as data)."""
    ins = [_vi("query", ["batch", "seq", q_width])]
    names = ["query", "", ""]
    if kv_width:
        ins += [_vi("key", ["batch", "seq", kv_width]), _vi("value", ["batch", "seq", kv_width])]
        names[1:] = ["key", "value"]
    outs = ["attn", "present_key", "present_value"]
    if past:
        ins += [_vi("past_key", ["batch", 2, "past", 64]), _vi("past_value", ["batch", 2, "past", 64])]
        names += ["past_key", "past_value"]
    else:
        names += ["", ""]
        outs = ["attn"]
    ins.append(helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]))
    names += ["seqlens_k", "total_len"]
    inits = [_weight("o_w", [512, 512])]
    if total is None:
        ins.append(helper.make_tensor_value_info("total_len", TensorProto.INT32, []))
    else:
        inits.append(onnx.numpy_helper.from_array(np.array(total, dtype=np.int32), "total_len"))
    names += list(extra_inputs or [])
    a = {"num_heads": 8, "kv_num_heads": 2, **(attrs or {})}
    nodes = [helper.make_node("GroupQueryAttention", names, outs, name='att"\\n*/', domain=MS, **a),
             helper.make_node("MatMul", ["attn", "o_w"], ["y"])]
    outputs = [_vi("y", ["batch", "seq", 512])] + [_vi(o, ["batch", 2, "total", 64]) for o in outs[1:]]
    return _save(path, nodes, ins, outputs, inits)


def _sdpa(ml):
    att = [ly for ly in ml.layers if ly.op_type == "GroupQueryAttention"]
    assert len(att) == 1
    return att[0]


def test_gqa_prefill_is_one_causal_sdpa_with_kv_heads(tmp_path):
    _gqa_model(tmp_path / "m.onnx", 512, 128)
    ml = process(tmp_path / "m.onnx", 2, {"seq": 16})
    att = _sdpa(ml)
    assert att.status == "benchmark", att.reason
    assert att.config == L.SdpaConfig(b=2, h=8, s_q=16, s_kv=16, d=64, d_v=64, scale=0.125, mask="causal", h_kv=2,
                                      q_strides=(16 * 512, 64, 512, 1), k_strides=(16 * 128, 64, 128, 1),
                                      v_strides=(16 * 128, 64, 128, 1), o_strides=(16 * 512, 64, 512, 1))
    # the o_proj MatMul after it has its shapes from the op's shape rule
    mm = ml.layers[-1]
    assert mm.op_type == "MatMul" and mm.config == L.GemmConfig(m=32, n=512, k=512)
    assert ml.unsupported() == {}


def test_gqa_packed_qkv_reads_three_views_of_one_tensor(tmp_path):
    _gqa_model(tmp_path / "m.onnx", (8 + 2 * 2) * 64, attrs={"scale": 0.1})
    att = _sdpa(process(tmp_path / "m.onnx", 1, {"seq": 32}))
    w = 12 * 64
    assert (att.config.h, att.config.h_kv, att.config.d, att.config.s_kv, att.config.scale) == (8, 2, 64, 32, 0.1)
    assert att.config.q_strides == att.config.k_strides == att.config.v_strides == (32 * w, 64, w, 1)


@pytest.mark.parametrize("total,s_kv", [(None, 513), (300, 300)])
def test_gqa_decode_reads_the_present_cache_bottom_right(tmp_path, total, s_kv):
    """One new token against a past of 512 (``--dim past=512``): the present cache of past + 1 keys, or
    total_sequence_length's value where it is a constant (a shared past/present buffer)."""
    _gqa_model(tmp_path / "m.onnx", 512, 128, past=True, total=total)
    ml = process(tmp_path / "m.onnx", 4, {"seq": 1, "past": 512})
    cfg = _sdpa(ml).config
    assert (cfg.b, cfg.h, cfg.h_kv, cfg.s_q, cfg.s_kv, cfg.mask) == (4, 8, 2, 1, s_kv, "causal_bottom_right")
    assert cfg.k_strides == cfg.v_strides == ()  # the packed BNSH cache
    assert ml.unsupported() == {}


@pytest.mark.parametrize("attrs,extra,why", [
    ({"do_rotary": 1}, (), "do_rotary without its cos_cache and sin_cache inputs"),
    ({"local_window_size": 128, "causal": 0}, (), "local_window_size 128 without the causal mask"),
    ({"softcap": -1.0}, (), "softcap -1.0"),
    ({"num_heads": 3}, (), "num_heads 3 not a positive multiple of kv_num_heads 2"),
    ({"num_heads": 6}, (), "do not fit 6 and 2 heads"),
    ({}, ("", "", "", "", "", "k_scale"), "input k_scale"),
])
def test_gqa_terms_the_sdpa_lacks_are_refused_with_a_reason(tmp_path, attrs, extra, why):
    m = _gqa_model(tmp_path / "m.onnx", 512, 128, attrs=attrs, extra_inputs=extra)
    if extra:
        m.graph.input.append(_vi("k_scale", [1]))
        onnx.save(m, tmp_path / "m.onnx")
    att = _sdpa(process(tmp_path / "m.onnx", 1, {"seq": 8}))
    assert att.status == "unsupported" and why in att.reason and "\n" not in att.reason


@pytest.mark.parametrize("packed", [False, True])
def test_gqa_with_the_rotary_inside_is_both_rotaries_then_the_sdpa(tmp_path, packed):
    """ORT GenAI's ``GroupQueryAttention(do_rotary=1)`` (issue 54: it was refused): the queries' and the
    new keys' rotary embeddings over the cos/sin caches (4096 positions, head size 64), then the attention,
    as ONNX Runtime runs them; interleaved pairs where ``rotary_interleaved`` says so."""
    cache = [onnx.numpy_helper.from_array(np.zeros((4096, 32), np.float16), n) for n in ("cos", "sin")]
    m = _gqa_model(tmp_path / "m.onnx", 12 * 64 if packed else 512, None if packed else 128, past=True,
                   attrs={"do_rotary": 1, "rotary_interleaved": int(packed)}, extra_inputs=["cos", "sin"])
    m.graph.initializer.extend(cache)
    onnx.save(m, tmp_path / "m.onnx")
    ml = process(tmp_path / "m.onnx", 4, {"seq": 1, "past": 512})
    calls = [ly for ly in ml.layers if ly.op_type == "GroupQueryAttention"]
    assert [ly.config.kind for ly in calls] == ["RotaryEmbedding", "RotaryEmbedding", "SDPA"]
    q, k, att = (ly.config for ly in calls)
    assert q == L.RotaryConfig(x=(4, 1, 512), num_heads=8, rotary_dim=64, interleaved=packed, layout="bshd",
                               positions=4096)
    assert k == L.RotaryConfig(x=(4, 1, 128), num_heads=2, rotary_dim=64, interleaved=packed, layout="bshd",
                               positions=4096)
    assert (att.h, att.h_kv, att.s_q, att.s_kv, att.mask) == (8, 2, 1, 513, "causal_bottom_right")
    assert calls[-1].outputs[:1] == ("attn",) and ml.unsupported() == {}


def test_the_gqa_suite_compiles(tmp_path):
    """A packed-QKV decode GQA (strided Q view of the packed tensor, h_kv 2, bottom-right causal) renders
    into the SDPA suite, the node's hostile name as an escaped literal, and passes g++ -fsyntax-only."""
    from benanza.generation.generator import generate
    from benanza.kinds.cpp import cpp_string
    from test_unary_backward import syntax_check

    _gqa_model(tmp_path / "m.onnx", 12 * 64, past=True)
    suite = generate([process(tmp_path / "m.onnx", 2, {"seq": 1, "past": 255})], ["fp16"], tmp_path / "s")
    assert [j.kind for j in suite.jobs if j.kind == "SDPA"] == ["SDPA"]
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    assert "2, 8, 1, 256, 64, 64, 0.125, SdpaMask::CAUSAL_BOTTOM_RIGHT" in src and ", 2, false, 64, \"\", false}" in src
    assert cpp_string('att"\\n*/') in src
    syntax_check(tmp_path / "s", "sdpa.cpp")


# ------------------------------------------------------------------- com.microsoft MultiHeadAttention

def _mha_model(path, form="separate", bias=False, past=False, attrs=None, mask=None, attn_bias=None,
               extra=None):
    """MultiHeadAttention(num_heads 8, head_size 64) -> MatMul(o_proj) as ONNX Runtime's transformer
    optimizer and Optimum write it: query/key/value after their projections (separate, packed QKV
    (batch, seq, 8, 3, 64), packed KV (batch, seq, 8, 2, 64), or a BNSH cross-attention cache), the
    projection bias (1536) as an initializer, past_key/past_value (batch, 8, past, 64) graph inputs in
    decode, key_padding_mask an int32 input. The node's name is hostile text (kept as data)."""
    names, ins = ["query", "", ""], []
    if form == "packed_qkv":
        ins.append(_vi("query", ["batch", "seq", 8, 3, 64]))
    else:
        ins.append(_vi("query", ["batch", "seq", 512]))
        if form == "separate":
            ins += [_vi("key", ["batch", "kv", 512]), _vi("value", ["batch", "kv", 512])]
            names[1:] = ["key", "value"]
        elif form == "packed_kv":
            ins.append(_vi("key", ["batch", "kv", 8, 2, 64]))
            names[1] = "key"
        else:
            ins += [_vi("key", ["batch", 8, "kv", 64]), _vi("value", ["batch", 8, "kv", 64])]
            names[1:] = ["key", "value"]
    inits = [_weight("o_w", [512, 512])]
    names.append("qkv_bias" if bias else "")
    if bias:
        inits.append(_weight("qkv_bias", [1536]))
    names.append("mask" if mask else "")
    if mask:
        ins.append(helper.make_tensor_value_info("mask", TensorProto.INT32, list(mask)))
    names.append("attn_bias" if attn_bias else "")
    if attn_bias:
        ins.append(_vi("attn_bias", list(attn_bias)))
    outs = ["attn"]
    if past:
        ins += [_vi("past_key", ["batch", 8, "past", 64]), _vi("past_value", ["batch", 8, "past", 64])]
        names += ["past_key", "past_value"]
        outs += ["present_key", "present_value"]
    names += list(extra or [])
    while names and not names[-1]:
        names.pop()
    nodes = [helper.make_node("MultiHeadAttention", names, outs, name='mha"\\n*/', domain=MS,
                              **{"num_heads": 8, **(attrs or {})}),
             helper.make_node("MatMul", ["attn", "o_w"], ["y"])]
    outputs = [_vi("y", ["batch", "seq", 512])] + [_vi(o, ["batch", 8, "total", 64]) for o in outs[1:]]
    return _save(path, nodes, ins, outputs, inits)


def _mha(ml):
    return [ly for ly in ml.layers if ly.op_type == "MultiHeadAttention"]


def test_mha_with_a_bias_is_three_adds_then_the_sdpa(tmp_path):
    _mha_model(tmp_path / "m.onnx", bias=True, attrs={"unidirectional": 1})
    ml = process(tmp_path / "m.onnx", 2, {"seq": 16, "kv": 16})
    assert ml.unsupported() == {}
    add = L.ElementwiseConfig(op="add", a=(2, 16, 512), b=(1, 1, 512))
    st = (16 * 512, 64, 512, 1)
    assert [ly.config for ly in _mha(ml)] == [add, add, add, L.SdpaConfig(
        b=2, h=8, s_q=16, s_kv=16, d=64, d_v=64, scale=0.125, mask="causal",
        q_strides=st, k_strides=st, v_strides=st, o_strides=st)]
    adds, sdpa = _mha(ml)[:3], _mha(ml)[3]
    # the adds chain into the SDPA, which writes the node's output; the o_proj gets its shape from the rule
    assert adds[0].inputs == ("query", "key", "value") and sdpa.inputs == adds[2].outputs
    assert sdpa.outputs == ("attn",) and ml.edges[sdpa.index] == [adds[2].index]
    assert ml.layers[-1].config == L.GemmConfig(m=32, n=512, k=512)


def test_mha_packed_qkv_and_packed_kv_are_strided_views(tmp_path):
    _mha_model(tmp_path / "m.onnx", form="packed_qkv", bias=True, attrs={"scale": 0.1})
    parts = _mha(process(tmp_path / "m.onnx", 1, {"seq": 32}))
    assert parts[0].config == L.ElementwiseConfig(op="add", a=(1, 32, 1536), b=(1, 1, 1536))
    cfg = parts[1].config
    assert len(parts) == 2 and (cfg.scale, cfg.mask) == (0.1, "none")
    assert cfg.q_strides == cfg.k_strides == cfg.v_strides == (32 * 1536, 192, 1536, 1)
    _mha_model(tmp_path / "kv.onnx", form="packed_kv")
    (att,) = _mha(process(tmp_path / "kv.onnx", 1, {"seq": 4, "kv": 32}))
    assert (att.config.s_q, att.config.s_kv) == (4, 32)
    assert att.config.k_strides == att.config.v_strides == (32 * 1024, 128, 1024, 1)


def test_mha_cross_attention_cache_and_masks_as_the_bias(tmp_path):
    """Whisper's cross attention: key/value (batch, 8, kv, 64), packed; a (batch, kv) key padding mask and
    a (1, 8, seq, kv) attention_bias fold into one bias of their broadcast shape."""
    _mha_model(tmp_path / "m.onnx", form="bnsh_kv", mask=("batch", "kv"), attn_bias=(1, 8, "seq", "kv"))
    (att,) = _mha(process(tmp_path / "m.onnx", 3, {"seq": 5, "kv": 30}))
    assert att.status == "benchmark", att.reason
    c = att.config
    assert (c.s_q, c.s_kv, c.mask, c.bias, c.k_strides, c.v_strides) == (5, 30, "bias", (3, 8, 5, 30), (), ())
    _mha_model(tmp_path / "n.onnx", form="bnsh_kv", mask=("batch",))  # key lengths: full lengths timed
    assert _mha(process(tmp_path / "n.onnx", 3, {"seq": 5, "kv": 30}))[0].config.mask == "none"


def test_mha_decode_reads_the_present_cache_bottom_right(tmp_path):
    _mha_model(tmp_path / "m.onnx", bias=True, past=True, attrs={"unidirectional": 1})
    ml = process(tmp_path / "m.onnx", 4, {"seq": 1, "kv": 1, "past": 511})
    assert ml.unsupported() == {}
    cfg = _mha(ml)[-1].config
    assert (cfg.b, cfg.s_q, cfg.s_kv, cfg.mask, cfg.k_strides, cfg.v_strides) == (4, 1, 512, "causal_bottom_right", (), ())
    # the presents are written by the SDPA part, with the rule's shapes
    sdpa = _mha(ml)[-1]
    assert sdpa.outputs == ("attn", "present_key", "present_value")
    assert sdpa.output_shapes[1] == (4, 8, 512, 64)


@pytest.mark.parametrize("kw,why", [
    ({"form": "packed_kv", "bias": True}, "bias with packed KV"),
    ({"form": "bnsh_kv", "bias": True}, "bias with a 4-D key"),
    ({"extra": ["", "cache_indirection"]}, "cache_indirection"),
    ({"mask": ("batch", 7)}, "key_padding_mask [2, 7] is none of"),
    ({"attrs": {"num_heads": 7}}, "is not (batch, seq, 7 * head_size)"),
    ({"form": "packed_kv", "attrs": {"num_heads": 4}}, "fit none of its forms for 4 heads"),
])
def test_mha_forms_it_cannot_map_are_refused_with_a_reason(tmp_path, kw, why):
    m = _mha_model(tmp_path / "m.onnx", **kw)
    if kw.get("extra"):
        m.graph.input.append(helper.make_tensor_value_info("cache_indirection", TensorProto.INT32, ["batch", 1, 64]))
        m.graph.node[0].input[:] = ["query", "key", "value", "", "", "", "", "", "", "cache_indirection"]
        onnx.save(m, tmp_path / "m.onnx")
    (att,) = _mha(process(tmp_path / "m.onnx", 2, {"seq": 8, "kv": 8}))
    assert att.status == "unsupported" and why in att.reason and "\n" not in att.reason


def test_the_mha_suite_compiles(tmp_path):
    """A packed-QKV MultiHeadAttention with a bias (an Elementwise add, then the SDPA of three strided views)
    renders into the SDPA and Elementwise suites, the node's hostile name as an escaped literal, and the
    SDPA suite passes g++ -fsyntax-only."""
    from benanza.generation.generator import generate
    from benanza.kinds.cpp import cpp_string
    from test_unary_backward import syntax_check

    _mha_model(tmp_path / "m.onnx", form="packed_qkv", bias=True, attrs={"unidirectional": 1})
    suite = generate([process(tmp_path / "m.onnx", 2, {"seq": 16})], ["fp16"], tmp_path / "s")
    assert sorted(j.kind for j in suite.jobs if j.kind in ("SDPA", "Elementwise")) == ["Elementwise", "SDPA"]
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    assert "2, 8, 16, 16, 64, 64, 0.125, SdpaMask::CAUSAL" in src and "24576, 192, 1536, 1" in src
    assert cpp_string('mha"\\n*/') in src
    syntax_check(tmp_path / "s", "sdpa.cpp")


# ------------------------------------------------------------------- com.microsoft Attention

def _ms_attention_model(path, past=False, mask=("batch", "total"), attrs=None, width=1536, bias=True):
    """Attention(num_heads 8) -> MatMul(o_proj) as ONNX Runtime's transformer optimizer writes GPT-2's
    block: input (batch, seq, 512), merged QKV weights (512, width) and bias, a (batch, total) int32
    attention mask, past (2, batch, 8, past, 64) and present in decode, unidirectional."""
    ins = [_vi("x", ["batch", "seq", 512])]
    names = ["x", "w", "b" if bias else "", "mask" if mask else ""]
    inits = [_weight("w", [512, width]), _weight("o_w", [512, 512])] + ([_weight("b", [width])] if bias else [])
    if mask:
        ins.append(helper.make_tensor_value_info("mask", TensorProto.INT32, list(mask)))
    outs = ["attn"]
    if past:
        ins.append(_vi("past", [2, "batch", 8, "past", 64]))
        names.append("past")
        outs.append("present")
    nodes = [helper.make_node("Attention", names, outs, name='att"\\n*/', domain=MS,
                              **{"num_heads": 8, "unidirectional": 1, **(attrs or {})}),
             helper.make_node("MatMul", ["attn", "o_w"], ["y"])]
    outputs = [_vi("y", ["batch", "seq", 512])] + ([_vi("present", [2, "batch", 8, "total", 64])] if past else [])
    return _save(path, nodes, ins, outputs, inits)


def _ms_att(ml):
    return [ly for ly in ml.layers if ly.op_type == "Attention"]


def test_ms_attention_is_the_qkv_gemm_then_the_sdpa_of_its_views(tmp_path):
    _ms_attention_model(tmp_path / "m.onnx", mask=None)
    ml = process(tmp_path / "m.onnx", 2, {"seq": 16})
    assert ml.unsupported() == {}
    gemm, sdpa = _ms_att(ml)
    st = (16 * 1536, 64, 1536, 1)
    assert gemm.config == L.GemmConfig(m=32, n=1536, k=512, bias="c")
    assert sdpa.config == L.SdpaConfig(b=2, h=8, s_q=16, s_kv=16, d=64, d_v=64, scale=0.125, mask="causal",
                                       q_strides=st, k_strides=st, v_strides=st, o_strides=(16 * 512, 64, 512, 1))
    assert gemm.inputs == ("x",) and sdpa.inputs == gemm.outputs and sdpa.outputs == ("attn",)
    assert ml.layers[-1].config == L.GemmConfig(m=32, n=512, k=512)


def test_ms_attention_decode_with_a_padding_mask(tmp_path):
    """GPT-2 decode: one token against a past of 127; the (batch, total) 0/1 mask and the causal frontier
    are one bias over every query and key; present written by the SDPA part with the rule's shape."""
    _ms_attention_model(tmp_path / "m.onnx", past=True)
    ml = process(tmp_path / "m.onnx", 4, {"seq": 1, "past": 127, "total": 128})
    assert ml.unsupported() == {}
    gemm, sdpa = _ms_att(ml)
    c = sdpa.config
    assert gemm.config == L.GemmConfig(m=4, n=1536, k=512, bias="c")
    assert (c.s_q, c.s_kv, c.mask, c.bias, c.k_strides, c.v_strides) == (1, 128, "bias", (4, 1, 1, 128), (), ())
    assert sdpa.outputs == ("attn", "present") and sdpa.output_shapes[1] == (2, 4, 8, 128, 64)
    # key lengths (batch): timed at full lengths, the causal mask alone
    _ms_attention_model(tmp_path / "n.onnx", past=True, mask=("batch",), bias=False)
    gemm, sdpa = _ms_att(process(tmp_path / "n.onnx", 4, {"seq": 1, "past": 127}))
    assert gemm.config.bias == "none" and sdpa.config.mask == "causal_bottom_right"


def test_ms_attention_qkv_hidden_sizes(tmp_path):
    _ms_attention_model(tmp_path / "m.onnx", mask=None, width=512 + 512 + 256,
                        attrs={"qkv_hidden_sizes": [512, 512, 256], "unidirectional": 0, "scale": 0.2})
    _, sdpa = _ms_att(process(tmp_path / "m.onnx", 1, {"seq": 8}))
    c = sdpa.config
    assert (c.d, c.d_v, c.mask, c.scale) == (64, 32, "none", 0.2)
    assert c.v_strides == (8 * 1280, 32, 1280, 1) and c.o_strides == (8 * 256, 32, 256, 1)


@pytest.mark.parametrize("kw,why", [
    ({"attrs": {"do_rotary": 1}}, "do_rotary"),
    ({"mask": ("batch", 1, 64, 64)}, "(batch, 1, max_sequence_length, max_sequence_length) is not benchmarked"),
    ({"mask": ("batch", 5)}, "mask_index [2, 5] is none of"),
    ({"attrs": {"qkv_hidden_sizes": [512, 256, 768]}}, "qkv_hidden_sizes [512, 256, 768] do not split"),
    ({"width": 1000}, "do not split weights of width 1000"),
])
def test_ms_attention_forms_it_cannot_map_are_refused_with_a_reason(tmp_path, kw, why):
    _ms_attention_model(tmp_path / "m.onnx", **kw)
    # a mask without the total length leaves the model no 'total' to bind (--dim names only the model's own)
    dims = {"seq": 8, "total": 8} if "total" in kw.get("mask", ("batch", "total")) else {"seq": 8}
    (att,) = _ms_att(process(tmp_path / "m.onnx", 2, dims))
    assert att.status == "unsupported" and why in att.reason and "\n" not in att.reason


def test_the_ms_attention_suite_compiles(tmp_path):
    """GPT-2's decode Attention renders into a Gemm job (the QKV projection with its bias) and an SDPA job
    (bias over every query and key), and the SDPA suite passes g++ -fsyntax-only."""
    from benanza.generation.generator import generate
    from test_unary_backward import syntax_check

    _ms_attention_model(tmp_path / "m.onnx", past=True)
    suite = generate([process(tmp_path / "m.onnx", 2, {"seq": 1, "past": 63, "total": 64})], ["fp16"], tmp_path / "s")
    assert sorted(j.kind for j in suite.jobs if j.kind in ("SDPA", "Gemm")) == ["Gemm", "Gemm", "SDPA"]
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    assert "2, 8, 1, 64, 64, 64, 0.125, SdpaMask::BIAS, {2, 1, 1, 64}" in src
    syntax_check(tmp_path / "s", "sdpa.cpp")


def test_gqa_softcap_is_the_sdpas_soft_cap(tmp_path):
    """GroupQueryAttention's ``softcap`` (refused before: "cuDNN's SDPA has no soft capping") is the SDPA's
    logit soft-cap, cudnn-frontend's Softcap score modifier."""
    _gqa_model(tmp_path / "m.onnx", 512, 128, attrs={"softcap": 30.0})
    att = _sdpa(process(tmp_path / "m.onnx", 1, {"seq": 8}))
    assert att.status == "benchmark" and att.config.softcap == 30.0
