"""The physical bound of a decoder step (benanza.analysis.llm; issue 27, items 4 and 6): weight bytes from
the initializers' shapes of the weight-stripped decoder exports, KV-cache bytes, the causal attention's
FLOPs, the phase found, and the step in LLM terms in the terminal table, the JSON and the HTML."""
import os
import subprocess
import sys

import pytest

from conftest import HERE, REPO, run_fake_suite, scenario_of
from benanza.analysis import llm
from benanza.analysis.roofline import Ceilings
from benanza.errors import UsageError
from benanza.kinds import SdpaConfig
from benanza.processing.model import load_graph, process
from benanza.reports.report import PARTS, _from_analysis, answer, llm_table, render_html, terminal_tables

DEC = HERE / "data" / "decoders"
H100 = Ceilings(989.4e12, 3350e9)  # the H100-SXM datasheet's fp16 dense peak and DRAM bandwidth

# the Llama export's parameters, from its configuration (vocab 1000, hidden 128, 2 layers, 4 heads of 32,
# 2 K/V heads, intermediate 352, untied lm_head); TorchScript keeps one of the RMSNorm weights (all ones: the
# exporter merges equal constants), so the graph holds 128 norm elements, not 5 x 128
LLAMA_LAYER = 128 * 128 + 2 * 128 * 64 + 128 * 128 + 3 * 128 * 352
LLAMA_PARAMS = 1000 * 128 + 128 + 2 * LLAMA_LAYER + 128 * 1000


def _bound(name, batch, dims, precision="fp16"):
    path = DEC / name
    ml = process(path, batch, dims)
    model, _ = load_graph(path)
    return ml, llm.physical_bound(model, ml, precision, H100, "datasheet", "H100-SXM")


def test_decode_bytes_from_the_initializer_shapes_and_the_past_inputs():
    ml, b = _bound("llama_decode_torchscript.onnx", 2, {"past": 512, "total": 513})
    assert b.phase == "decode" == llm.decoder_phase(ml)
    assert b.weights.parameters == LLAMA_PARAMS
    # the embedding table is read by one Gather: 2 sequences x 1 token x 128 of its 1000 x 128 rows
    assert b.weights.gathered == 1
    assert b.weights.bytes == 2 * (LLAMA_PARAMS - 1000 * 128 + 2 * 128)
    # past_key_i / past_value_i [batch 2, kv_heads 2, past 512, head_dim 32], 2 layers, fp16
    assert b.kv_bytes == 2 * (2 * 2 * 2 * 512 * 32) * 2
    assert b.memory_ms == pytest.approx((b.weights.bytes + b.kv_bytes) / 3350e9 * 1e3)
    assert b.limit == "memory" and b.bound_ms == b.memory_ms
    _, b32 = _bound("llama_decode_torchscript.onnx", 2, {"past": 512, "total": 513}, "fp32")
    assert b32.weights.bytes == 2 * b.weights.bytes and b32.kv_bytes == 2 * b.kv_bytes


def test_gpt2_decode_kv_cache_has_every_head():
    ml, b = _bound("gpt2_decode_torchscript.onnx", 1, {"past": 100, "total": 101})
    assert b.phase == "decode"
    assert b.kv_bytes == 2 * (2 * 1 * 4 * 100 * 32) * 2  # 2 layers x (K + V) x [1, 4, 100, 32] x 2 bytes
    # wte and wpe are read by Gathers only: wte's one row (1 sequence x 1 token); wpe's Gather of the constant
    # position 100 is folded (nothing read at run time); the lm_head is a separate [128, 1000] MatMul weight
    assert b.weights.gathered == 2
    assert b.weights.bytes == 2 * (b.weights.parameters - 1000 * 128 - 512 * 128 + 128)


@pytest.mark.parametrize("name", ["llama_prefill_dynamo23.onnx", "llama_prefill_dynamo20.onnx",
                                  "llama_prefill_torchscript.onnx"])
def test_prefill_is_found_in_each_export_and_has_no_cache(name):
    ml, b = _bound(name, 1, {"seq": 64})
    assert b.phase == "prefill" and b.kv_bytes == 0
    assert b.flops == llm.step_flops(ml) > 0
    assert b.compute_ms == pytest.approx(b.flops / 989.4e12 * 1e3)
    # every export of the same model: the same GEMMs, so FLOPs within the softmax/mask terms of each other
    ml23, b23 = _bound("llama_prefill_dynamo23.onnx", 1, {"seq": 64})
    gemm = sum(ly.config.flops() for ly in ml23.layers if ly.status == "benchmark" and ly.op_type == "MatMul")
    assert gemm > 0.8 * b23.flops and abs(b.flops - b23.flops) < 0.2 * b23.flops


def test_causal_attention_counts_the_kept_pairs_only():
    full = SdpaConfig(b=2, h=4, s_q=8, s_kv=8, d=16, d_v=16, scale=0.25, mask="none")
    causal = SdpaConfig(b=2, h=4, s_q=8, s_kv=8, d=16, d_v=16, scale=0.25, mask="causal")
    br = SdpaConfig(b=2, h=4, s_q=2, s_kv=10, d=16, d_v=16, scale=0.25, mask="causal_bottom_right")
    per = 2 * (16 + 16) + 7
    assert llm.attention_flops(full) == full.flops() == 2 * 4 * 64 * per
    assert llm.attention_flops(causal) == 2 * 4 * 36 * per  # 1 + 2 + ... + 8 pairs
    assert llm.attention_flops(br) == 2 * 4 * (9 + 10) * per  # query 0 sees 9 keys, query 1 all 10


def test_no_decoder_no_bound_and_bad_input(tmp_path):
    from onnx_builders import bert_encoder_model

    ml = process(bert_encoder_model(tmp_path / "bert.onnx", opset=14), 2, dims={"seq": 16})
    model, _ = load_graph(ml.path)
    assert llm.decoder_phase(ml) is None
    assert llm.physical_bound(model, ml, "fp16", H100, "datasheet", "H100-SXM") is None
    assert llm.physical_bound(model, ml, "fp16", H100, "datasheet", "H100-SXM", phase="prefill").phase == "prefill"
    with pytest.raises(UsageError, match="phase 'train'"):
        llm.physical_bound(model, ml, "fp16", H100, "datasheet", "H100-SXM", phase="train")
    with pytest.raises(UsageError, match="positive"):
        llm.physical_bound(model, ml, "fp16", Ceilings(0, 1), "datasheet", "H100-SXM")


def test_llm_terms_fractions_and_the_report():
    _, b = _bound("llama_decode_torchscript.onnx", 2, {"past": 512, "total": 513})
    t = llm.llm_terms(b, lbl_ms=0.004, complete=True, measured_ms=0.010, kernel_ms=0.008)
    assert t["metric"].startswith("time per output token")
    assert t["lbl_fraction"] == pytest.approx(b.bound_ms / 0.004)
    assert t["measured_fraction"] == pytest.approx(b.bound_ms / 0.010)
    assert t["tokens_per_s"]["measured"] == pytest.approx(2 / 0.010 * 1e3)
    d = {"model": "llama", "batch": 2, "precision": "fp16", "gpu": "NVIDIA H100 80GB HBM3", "llm": t,
         "latency_ms": 0.010, "lbl_fused_parallel_ms": 0.004, "layers": [], "findings": []}
    first = answer(d)
    assert "time per output token measured 0.0100 ms" in first and "lower bound 0.0040 ms" in first
    assert f"physical limit {b.bound_ms:.4f} ms (DRAM bandwidth, datasheet)" in first
    tab = llm_table(t)
    assert tab.rows and "datasheet" in tab.caption
    part = llm.llm_terms(b, lbl_ms=0.004, complete=False)
    assert "INCOMPLETE" in answer({**d, "llm": part})
    assert llm_table(None) is None
    doc = _from_analysis({"model": "llama", "batch": 2, "precision": "fp16", "lbl_sequential_ms": 0.005,
                          "lbl_parallel_ms": 0.005, "lbl_fused_sequential_ms": 0.004, "lbl_fused_parallel_ms": 0.004})
    doc["breakdown"] = {k: 0.0 for k, _label, _colour in PARTS}  # the HTML draws the (empty) breakdown
    html = render_html({**doc, "llm": t})
    assert html.index('id="answer">llama decode batch 2 fp16') < html.index('id="llm-table"')
    assert f"{b.bound_ms:.4f}" in html and "100.0 %" in html and "datasheet" in html
    assert terminal_tables({**doc, "llm": t})[1].title.startswith("decode: time per output token")


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, **(env or {})})


def test_analyze_reports_the_decode_step_in_llm_terms(tmp_path, db_url):
    """A decode export measured by the fake suite on a system named as an H100: `analyze` prints the step
    in LLM terms (datasheet roofs, said so) and writes them to the JSON; the bound is below the LBL."""
    path, dims = DEC / "llama_decode_torchscript.onnx", {"past": 64, "total": 65}
    ml = process(path, 1, dims)
    run_fake_suite([ml], ["fp16"], tmp_path / "s", db_url)
    args = ["analyze", path, "--batch", "1", "--dtype", "fp16", "--db", db_url, "--dim", "past=64",
            "--dim", "total=65"]
    r = _cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    d = scenario_of(r.stdout, "analyze")
    lt = d["llm"]
    model, _ = load_graph(path)
    want = llm.physical_bound(model, ml, "fp16", Ceilings(989.4e12, 3350e9), "datasheet", "H100-SXM")
    assert lt["phase"] == "decode" and lt["bound"]["ceilings"] == "datasheet"
    assert lt["bound"]["kv_cache_bytes"] == want.kv_bytes == 2 * 2 * (1 * 2 * 64 * 32) * 2
    assert lt["bound_ms"] == pytest.approx(want.bound_ms)
    assert lt["lbl_ms"] == pytest.approx(d["lbl_fused_parallel_ms"])
    assert 0 < lt["lbl_fraction"] < 1  # the fake suite's times are far above this bound
    r = _cli(*args, "--no-layers")
    assert r.returncode == 0, r.stderr
    assert "time per output token" in r.stdout and "physical limit (memory)" in r.stdout
    assert "datasheet" in r.stdout


@pytest.mark.parametrize("name,batch", [("bert_base.onnx", 1), ("swin_t.onnx", 32)])
def test_an_encoders_attention_bias_is_no_decoder(name, batch):
    """BERT's padding mask expanded to [1, 1, 128, 128] and Swin's relative position bias (one 49 x 49
    plane per head and window) mask their attention by a full (s_q, s_kv) bias: neither is a causal mask,
    so neither model gets a prefill (TTFT) bound."""
    ml = process(REPO / "db" / "reference" / "truth" / name, batch)
    cfgs = llm.attention_configs(ml)
    assert cfgs and all(c.mask == "bias" and c.bias[-2:] == (c.s_q, c.s_kv) for c in cfgs)
    assert llm.decoder_phase(ml) is None
