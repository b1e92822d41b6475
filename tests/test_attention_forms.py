"""Attention in the forms exporters write (issue 27, item 2): ONNX opset 23 ``Attention`` as an SDPA layer
(3-D and 4-D Q/K/V, GQA through ``kv_num_heads``, a KV cache through past_key/past_value with the
spec's bottom-right causal alignment, boolean and additive masks, what cuDNN lacks refused), the
repeat of K and V heads (Unsqueeze -> Expand -> Reshape) absorbed as GQA in front of ``Attention``
and in torch.export's decomposition, causal masks built by Where/And of folded triangles recognised
as causal, and a suite with a GQA and a decode config that renders and compiles (g++ -fsyntax-only)."""
from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.kinds.sdpa import causal_mask_of
from benanza.processing.model import process
from conftest import REPO
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
F16 = TensorProto.FLOAT16


def _sdpa_groups(ml):
    return [f for f in ml.fusions if f.config.kind == "SDPA"]


def _attention_model(path, q, k, v, attrs=None, mask=None, past=None, out=None, mask_type=TensorProto.BOOL):
    """One opset-23 Attention over graph inputs Q, K, V [, attn_mask] [, past_key, past_value]."""
    inputs = [helper.make_tensor_value_info(n, F16, s) for n, s in (("Q", q), ("K", k), ("V", v))]
    names = ["Q", "K", "V"]
    if mask is not None:
        inputs.append(helper.make_tensor_value_info("mask", mask_type, mask))
    names.append("mask" if mask is not None else "")
    outs = ["Y"]
    if past is not None:
        inputs += [helper.make_tensor_value_info(n, F16, s) for n, s in zip(("past_key", "past_value"), past)]
        names += ["past_key", "past_value"]
        outs += ["present_key", "present_value"]
    node = helper.make_node("Attention", names, outs, name='att"\\n*/', **(attrs or {}))
    ranks = [len(q)] + [4] * (len(outs) - 1)
    g = helper.make_graph([node], "att", inputs, [helper.make_tensor_value_info(o, F16, [f"{o}{i}" for i in range(r)])
                                                  for o, r in zip(outs, ranks)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]), path)
    return path


def _attention_layer(ml):
    (ly,) = [ly for ly in ml.layers if ly.op_type == "Attention"]
    return ly


def test_a_4d_gqa_attention_is_one_sdpa_layer(tmp_path):
    p = _attention_model(tmp_path / "a.onnx", (2, 8, 16, 64), (2, 2, 16, 64), (2, 2, 16, 32), {"is_causal": 1})
    ly = _attention_layer(process(p, 2, batch_dim=0))
    assert ly.status == "benchmark"
    assert ly.config == L.SdpaConfig(b=2, h=8, h_kv=2, s_q=16, s_kv=16, d=64, d_v=32, scale=0.125, mask="causal")
    assert ly.config.describe() == "SDPA(b2 h8 hkv2 sq16 skv16 d64 dv32 scale 0.125 causal)"


def test_a_3d_decode_against_a_kv_cache_is_causal_bottom_right(tmp_path):
    # one new token, 8 query heads of 64 over 2 K/V heads, a cache of 511 keys: s_kv = 512
    p = _attention_model(tmp_path / "d.onnx", (4, 1, 512), (4, 1, 128), (4, 1, 128),
                         {"is_causal": 1, "q_num_heads": 8, "kv_num_heads": 2, "scale": 0.1},
                         past=((4, 2, 511, 64), (4, 2, 511, 64)))
    cfg = _attention_layer(process(p, 4, batch_dim=0)).config
    assert (cfg.b, cfg.h, cfg.kv_heads, cfg.s_q, cfg.s_kv, cfg.d, cfg.scale, cfg.mask) == \
        (4, 8, 2, 1, 512, 64, 0.1, "causal_bottom_right")
    # Q and O are (b, s, h*d) read as (b, h, s, d) views; K and V come packed from the present cache
    assert cfg.q_strides == (512, 64, 512, 1) and cfg.o_strides == (512, 64, 512, 1)
    assert not cfg.k_strides and not cfg.v_strides
    assert cfg.describe().endswith("causal bottom-right)")
    # a causal prefill chunk of 4 tokens after 60 cached ones: bottom-right too; no past: top-left
    p = _attention_model(tmp_path / "c.onnx", (1, 2, 4, 16), (1, 2, 4, 16), (1, 2, 4, 16), {"is_causal": 1},
                         past=((1, 2, 60, 16), (1, 2, 60, 16)))
    assert _attention_layer(process(p, 1, batch_dim=0)).config.mask == "causal_bottom_right"


def test_attention_masks(tmp_path):
    # a boolean key-padding mask: an additive bias of its shape, broadcast to (b, h, s_q, s_kv)
    p = _attention_model(tmp_path / "m.onnx", (2, 4, 8, 16), (2, 4, 8, 16), (2, 4, 8, 16), mask=(2, 1, 1, 8))
    cfg = _attention_layer(process(p, 2, batch_dim=0)).config
    assert cfg.mask == "bias" and cfg.bias == (2, 1, 1, 8) and cfg.scale == 0.25
    # a constant additive causal mask (a folded triangle) is cuDNN's causal mask
    tri = np.triu(np.full((8, 8), -65504.0, np.float16), 1)
    m = onnx.load(_attention_model(tmp_path / "t.onnx", (1, 4, 8, 16), (1, 4, 8, 16), (1, 4, 8, 16),
                                   mask=(8, 8), mask_type=F16))
    m.graph.input.pop()  # the mask becomes an initializer
    m.graph.initializer.append(numpy_helper.from_array(tri, "mask"))
    onnx.save(m, tmp_path / "t.onnx")
    assert _attention_layer(process(tmp_path / "t.onnx", 1, batch_dim=0)).config.mask == "causal"
    assert causal_mask_of(np.tril(np.ones((2, 5), bool), 3), past=3)
    assert not causal_mask_of(np.tril(np.ones((2, 5), bool), 3), past=0)
    assert not causal_mask_of(np.zeros((4, 4), np.float32))
    # is_causal with a bias besides: one bias over every query and key
    p = _attention_model(tmp_path / "cb.onnx", (2, 4, 8, 16), (2, 4, 8, 16), (2, 4, 8, 16), {"is_causal": 1},
                         mask=(2, 1, 1, 8), mask_type=F16)
    cfg = _attention_layer(process(p, 2, batch_dim=0)).config
    assert cfg.mask == "bias" and cfg.bias == (2, 1, 8, 8)


@pytest.mark.parametrize("shape, attrs, why", [((1, 4, 8, 16), {"softcap": -30.0}, "softcap -30.0")])
def test_what_cudnn_lacks_is_unsupported_with_a_reason(tmp_path, shape, attrs, why):
    p = _attention_model(tmp_path / "u.onnx", shape, shape, shape, attrs)
    ly = _attention_layer(process(p, 1, batch_dim=0))
    assert ly.status == "unsupported" and why in ly.reason, ly.reason
    assert ly.config is None


def test_a_soft_capped_attention_is_the_sdpas_soft_cap(tmp_path):
    """ONNX Attention's ``softcap`` (refused before: "cuDNN's SDPA has no soft capping") is the SDPA's logit
    soft-cap, timed with cudnn-frontend's Softcap score modifier."""
    shape = (1, 4, 8, 16)
    p = _attention_model(tmp_path / "s.onnx", shape, shape, shape, {"softcap": 30.0, "is_causal": 1})
    ly = _attention_layer(process(p, 1, batch_dim=0))
    assert ly.status == "benchmark" and (ly.config.softcap, ly.config.mask) == (30.0, "causal")


def test_a_causal_decode_with_a_past_and_several_new_keys_is_refused(tmp_path):
    p = _attention_model(tmp_path / "x.onnx", (1, 2, 2, 16), (1, 2, 3, 16), (1, 2, 3, 16), {"is_causal": 1},
                         past=((1, 2, 5, 16), (1, 2, 5, 16)))
    ly = _attention_layer(process(p, 1, batch_dim=0))
    assert ly.status == "unsupported" and "alignment" in ly.reason


@pytest.mark.parametrize("name", ["llama_prefill_dynamo23", "phi3_prefill_dynamo23"])
def test_opset23_exports(name):
    ml = process(DEC / f"{name}.onnx", 1, dims={"seq": 128})
    atts = [ly for ly in ml.layers if ly.op_type == "Attention"]
    assert len(atts) == 2 and all(ly.status == "benchmark" for ly in atts)
    # the mask is And(folded causal triangle, the attention_mask input's key padding): causal
    want = L.SdpaConfig(b=1, h=4, s_q=128, s_kv=128, d=32, d_v=32, scale=0.176777, mask="causal")
    assert all(ly.config == want for ly in atts)
    groups = _sdpa_groups(ml)
    if name.startswith("llama"):  # repeat_kv in front of Attention: absorbed as GQA
        assert [f.config for f in groups] == [dataclasses.replace(want, h_kv=2)] * 2
        assert all(f.config.h == 4 and f.config.mask == "causal" for f in groups)
        assert all(ml.layers[f.layers[-1]].op_type == "Attention" for f in groups)
    else:
        assert not groups
    expands = [ly for ly in ml.layers if ly.op_type == "Expand"]
    assert all(ly.fusion is not None for ly in expands)  # every Expand left is a repeat of K or V
    assert "Attention" not in ml.unsupported()


@pytest.mark.parametrize("name, gqa", [("llama_prefill_dynamo20", 2), ("gpt2_prefill_dynamo20", 0)])
def test_torch_export_decompositions(name, gqa):
    ml = process(DEC / f"{name}.onnx", 1, dims={"seq": 128})
    groups = _sdpa_groups(ml)
    assert len(groups) == 2
    for f in groups:
        cfg = f.config
        assert (cfg.b, cfg.h, cfg.h_kv, cfg.s_q, cfg.s_kv, cfg.d, cfg.scale, cfg.mask) == \
            (1, 4, gqa, 128, 128, 32, 0.176777, "causal")
        # GQA's K and V are read packed with h_kv heads; GPT-2's as head views of (b, s, h*d)
        assert (cfg.k_strides, cfg.v_strides) == (((), ()) if gqa else ((16384, 32, 128, 1),) * 2)
    assert "Expand" not in ml.unsupported() or all(
        ly.fusion is not None for ly in ml.layers if ly.op_type == "Expand")
    if gqa:
        ops = [ml.layers[i].op_type for i in groups[0].layers]
        assert ops.count("Expand") == 2 and ops.count("Unsqueeze") >= 2


@pytest.mark.parametrize("name, op", [("llama_prefill_dynamo20", None), ("gpt2_prefill_dynamo20", None),
                                      ("llama_prefill_dynamo23", "Attention"), ("llama_prefill_torchscript", None),
                                      ("gpt2_prefill_torchscript", None)])
@pytest.mark.parametrize("seq", [128, 2048, 4096])
def test_a_causal_mask_too_large_to_fold_is_still_causal(name, op, seq):
    """At 2,048 tokens and more, torch.export's causal triangle (2,048 x 2,048 = 4 Mi booleans) is
    above folding's 1 Mi elements: it is evaluated on demand, so the attention stays cuDNN's causal
    SDPA. Before, it was timed as a bias of (1, 1, s, s), which phi3-2b's prefill 2,048 (bf16, H200,
    2026-11-28b) showed above torch.compile's kernel time. TorchScript's mask is the same And
    wrapped in an Expand to (b, 1, s, s): causal too (it was a bias at every length)."""
    ml = process(DEC / f"{name}.onnx", 1, dims={"seq": seq})
    cfgs = [ly.config for ly in ml.layers if ly.op_type == op] if op else [f.config for f in _sdpa_groups(ml)]
    assert len(cfgs) == 2
    assert all((c.s_q, c.s_kv, c.mask, c.bias) == (seq, seq, "causal", ()) for c in cfgs)


def test_the_suite_with_gqa_and_decode_compiles(tmp_path):
    p = _attention_model(tmp_path / "d.onnx", (2, 1, 512), (2, 1, 128), (2, 1, 128),
                         {"is_causal": 1, "q_num_heads": 8, "kv_num_heads": 2}, past=((2, 2, 255, 64), (2, 2, 255, 64)))
    suite = generate([process(p, 2, batch_dim=0)], ["fp16"], tmp_path / "s")
    assert [j.kind for j in suite.jobs] == ["SDPA"]
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    # b h s_q s_kv d d_v scale, the bottom-right causal mask, Q/O as (b, s, h*d) views, h_kv 2
    assert "2, 8, 1, 256, 64, 64, 0.125, SdpaMask::CAUSAL_BOTTOM_RIGHT" in src and ", 2, false, 64, \"\", false}" in src
    from benanza.kinds.cpp import cpp_string

    assert cpp_string('att"\\n*/') in src
    syntax_check(tmp_path / "s", "sdpa.cpp")


@pytest.mark.parametrize("source", ["transformer_engines.cpp", "sdpa_backward_engines.cpp"])
def test_the_harness_sets_the_bottom_right_alignment(source):
    """The harness's SDPA translation units set cuDNN's bottom-right diagonal alignment for the
    bottom-right causal mask. They compile with the cudnn-frontend headers in the session's harness
    build (conftest.harness; tests/test_harness_build.py), without them in tests/test_sdpa_paged.py and
    tests/test_sdpa_backward.py (g++ -fsyntax-only)."""
    text = (REPO / "cpp" / "src" / source).read_text()
    assert "SdpaMask::CAUSAL_BOTTOM_RIGHT" in text and "DiagonalAlignment_t::BOTTOM_RIGHT" in text
    assert "set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT)" in text
