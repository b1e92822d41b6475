"""FP8 attention (issue 27: cuDNN's SDPA in fp16, bf16 and FP8 where cuDNN has it): an fp8 analysis
times each attention config also in FP8, through cudnn-frontend's ``Graph::sdpa_fp8`` (E4M3 Q, K, V
and O, per-tensor scales), beside its fp16 job; the faster serves the analysis. Without a GPU: the
jobs, the case table and its compile, the bytes, and an fp8 analysis taking a measured FP8 time."""
from __future__ import annotations


import pytest

from benanza import kinds as L
from benanza.analysis.analyzer import analyze
from benanza.database.records import MeasurementLine
from benanza.generation.generator import generate, job_id
from benanza.kinds.bounds import min_bytes
from benanza.processing.model import process
from conftest import REPO
from test_lbl_truth import _measure, _system_db
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
LLAMA = DEC / "llama_prefill_dynamo23.onnx"  # two opset-23 Attention layers, GQA (h 4, h_kv 2), causal


def _sdpa_configs(ml):
    out = {ly.config for ly in ml.layers if ly.config is not None and ly.config.kind == "SDPA"}
    out |= {f.config for f in ml.fusions if f.config is not None and f.config.kind == "SDPA"}
    return out


def test_fp8_is_an_attention_precision_with_its_fp16_fallback():
    assert "SDPA" in L.FP8_KINDS and "Gemm" in L.FP8_KINDS
    cfg = L.SdpaConfig(b=1, h=4, s_q=128, s_kv=128, d=32, d_v=32, scale=0.176777, mask="causal")
    assert L.precisions_for(cfg, ["fp8"]) == ["fp8", "fp16"]
    # Q, K, V and O of one byte in FP8 (sdpa_fp8 writes O in E4M3), two in fp16
    assert min_bytes(cfg, "fp16") == 2 * min_bytes(cfg, "fp8")
    gemm = L.GemmConfig(m=64, n=64, k=64)
    assert min_bytes(gemm, "fp8") == 2 * 64 * 64 * 1 + 64 * 64 * 2  # A and B in FP8, D in fp16 (cuBLASLt)


def test_an_fp8_suite_times_attention_in_fp8_and_fp16_and_compiles(tmp_path):
    ml = process(LLAMA, 1, dims={"seq": 128})
    suite = generate([ml], ["fp8"], tmp_path / "s")
    sdpa = [j for j in suite.jobs if j.kind == "SDPA"]
    assert {j.precision for j in sdpa} == {"fp8", "fp16"}
    assert len([j for j in sdpa if j.precision == "fp8"]) == len([j for j in sdpa if j.precision == "fp16"])
    src = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    rows = [ln for ln in src.splitlines() if "SdpaMask::" in ln and ln.lstrip().startswith("{")]
    assert any("Precision::FP8" in r for r in rows) and any("Precision::FP16" in r for r in rows)
    syntax_check(tmp_path / "s", "sdpa.cpp")
    # the harness builds the FP8 graph with sdpa_fp8 and its six scaling tensors (compiled with the
    # cudnn-frontend headers in the session's harness build, tests/test_harness_build.py)
    text = (REPO / "cpp" / "src" / "transformer_engines.cpp").read_text()
    assert "g->sdpa_fp8(Q, K, V," in text and text.count("kDescale") >= 8 and "kAmaxO" in text
    graph = (REPO / "cpp" / "include" / "benanza" / "graph_timing.hpp").read_text()
    assert "Precision::FP8  ? cudnn_frontend::DataType_t::FP8_E4M3" in graph


def test_a_decode_attention_in_fp8_records_why_it_has_no_paged_family():
    from benanza.kinds.sdpa import paged_kv_skip

    cfg = L.SdpaConfig(b=2, h=8, s_q=1, s_kv=100, d=64, d_v=64, scale=0.125, mask="causal_bottom_right", h_kv=2)
    assert "FP16/BF16 data, not fp8" in paged_kv_skip(cfg, "fp8") and paged_kv_skip(cfg, "fp16") == ""


def _measure_fp8(db, sid, cfg, ms):
    db.upsert_configs([cfg])
    rec = MeasurementLine.from_json({"type": "measurement", "call": "cudnnBackendExecute", "algorithm": "e",
                                     "math": "fp8", "dtype": L.PRECISION_DTYPE["fp8"], "cache": "warm",
                                     "layout": "NCHW", "status": "ok", "median_ms": ms, "q1_ms": ms, "q3_ms": ms,
                                     "samples": 10, "converged": True})
    db.write_job(sid, None, job_id(cfg, "fp8", "NCHW"), cfg.key, "fp8", "ok", "", [rec])


def test_an_fp8_analysis_takes_the_faster_fp8_attention(tmp_path):
    """Every layer measured in fp16; the attention configs also in FP8, at half their fp16 time: the
    fp8 analysis's LBL falls by exactly the attention's saving, and an FP8 time slower than fp16 is
    not taken (fp16 serves an fp8 analysis)."""
    ml = process(LLAMA, 1, dims={"seq": 128})
    att = _sdpa_configs(ml)
    assert att
    fp16_ms = 0.040

    def db_with(fp8_ms):
        db, sid = _system_db(f"sqlite:///{tmp_path / f'perf{fp8_ms}.db'}")
        for cfg in ml.unique_configs().values():
            _measure(db, sid, cfg, "fp16", [("lib", 0.010)])
        for cfg in att:
            _measure(db, sid, cfg, "fp16", [("lib", fp16_ms)])
            _measure_fp8(db, sid, cfg, fp8_ms)
        return db

    base_db = db_with(fp16_ms)  # FP8 as fast as fp16: no saving
    base = analyze(ml, base_db, base_db.systems()[0], "fp8")
    fast_db = db_with(fp16_ms / 2)
    fast = analyze(ml, fast_db, fast_db.systems()[0], "fp8")
    slow_db = db_with(fp16_ms * 2)
    slow = analyze(ml, slow_db, slow_db.systems()[0], "fp8")
    assert base.complete and fast.complete
    assert fast.lbl_fused_sequential_ms < base.lbl_fused_sequential_ms
    assert slow.lbl_fused_sequential_ms == pytest.approx(base.lbl_fused_sequential_ms)
    assert fast.precision_note == ""  # its FP8-capable layers took FP8 measurements


def test_the_decode_bound_reads_an_fp8_cache_in_one_byte():
    """The physical bound of an fp8 decode step reads the KV cache at one byte an element (an E4M3
    cache, as the FP8 attention reads it), half the fp16 bytes: it stays a bound of an LBL that takes
    the FP8 attention."""
    from benanza.analysis.llm import kv_cache_bytes

    ml = process(DEC / "llama_decode_torchscript.onnx", 2, dims={"past": 64, "total": 65})
    fp16 = kv_cache_bytes(ml, "fp16")
    assert fp16 > 0 and kv_cache_bytes(ml, "fp8") * 2 == fp16 and kv_cache_bytes(ml, "fp32") == 2 * fp16
