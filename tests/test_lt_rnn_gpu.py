"""cuBLASLt GEMMs (every precision, FP8 included) and LSTM/GRU through cudnnRNNForward on a real GPU
(skipped without one): every job ends with valid measurements or failures that say why, cuBLASLt's
best is never slower than cublasGemmEx's default, and an fp8 analysis of lstm_lm is complete but
for the embedding Gather.

Run on a GPU machine: pytest tests/test_lt_rnn_gpu.py -s"""
import collections
import subprocess
import sys
import time

import pytest

from benanza.database import query
from benanza.analysis.analyzer import analyze, resolve_system
from benanza.database.store import open_db
from benanza.processing.model import process
from conftest import have_gpu
from onnx_builders import gemm_rnn_model

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU")]

PRECISIONS = "fp32,tf32,fp16,bf16,fp8"


def _bench(model, batches, db, out):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", "bench", str(model), "--batch",
                    batches, "--dtype", PRECISIONS, "--db", str(db), "-o", str(out), "-q", "--no-layers"], check=True)
    return time.perf_counter() - t0


def test_cublaslt_and_rnn_jobs_on_the_gpu(tmp_path, models):
    db_path = tmp_path / "g.db"
    wall = _bench(gemm_rnn_model(tmp_path / "gr.onnx"), "1,8", db_path, tmp_path / "s")
    db = open_db(str(db_path), create=False)
    rows = query.measurements(db, query.Filters(cache="warm"))
    by_job = collections.defaultdict(list)
    for r in rows:
        by_job[(r.layer_key, r.kind, r.precision)].append(r)
    failed = [(r.kind, r.precision, r.call, r.algorithm, r.message) for r in rows if r.status == "failed"]
    print(f"bench wall {wall:.1f} s; {len(rows)} warm rows; failed: {failed[:10]}")
    assert not failed
    system, _ = resolve_system(db, None)
    cc = float(system.compute_capability)
    for (key, kind, prec), rs in by_job.items():
        lt = [r for r in rs if r.call.startswith("cublasLtMatmul")]
        ok = [r for r in lt if r.status == "ok"]
        if kind == "Gemm":
            assert len([r for r in lt if r.algorithm.startswith("lt:algo=")]) <= 16 + 8 + 4, key
            if prec == "fp8" and cc < 8.9:
                continue
            if prec == "fp8" and not ok:
                assert all(r.status == "not_supported" and r.message for r in lt), key
                continue
            assert ok, (key, prec, [(r.algorithm, r.status, r.message) for r in lt])
            assert all(isinstance(r.details.get("algo_id"), int) and r.details.get("tile") for r in ok)
            assert {r.details["source"] for r in ok} <= {"heuristic", "algo_ids"}
            choices = [c for c in db.choices(system.id, [key]) if c.precision == prec
                       and c.source == "cublasLtMatmulAlgoGetHeuristic"]
            assert any(c.rank == 0 and c.status == "ok" for c in choices), key
            default = [r.median_ms for r in rs if r.algorithm == "CUBLAS_GEMM_DEFAULT" and r.status == "ok"]
            if default:  # cuBLASLt's best of the heuristic's list and more vs cublasGemmEx's default
                assert min(r.median_ms for r in ok) <= 1.10 * min(default), key
        if kind == "RNN":
            rnn = {r.algorithm: r for r in rs if r.call == "cudnnRNNForward"}
            assert set(rnn) == {"STANDARD", "PERSIST_STATIC", "PERSIST_STATIC_SMALL_H"}
            assert all(r.status == "ok" or r.message for r in rnn.values())
            if prec in ("fp32", "tf32", "fp16"):
                assert rnn["STANDARD"].status == "ok", (prec, rnn["STANDARD"].message)
    # FP8 where cuBLASLt supports it (sm_89+): the bias-vector Gemm (TN, k = 64, n = 48)
    if cc >= 8.9:
        fp8_ok = [r for r in rows if r.precision == "fp8" and r.status == "ok" and r.dtype == "float8_e4m3"]
        assert fp8_ok and any(r.details.get("epilogue") == "BIAS" for r in fp8_ok)

    # lstm_lm: both LSTMs and the classifier measured; fp8 takes the fp16 LSTMs
    lstm_db = tmp_path / "l.db"
    _bench(models / "lstm_lm.onnx", "1", lstm_db, tmp_path / "l")
    ldb = open_db(str(lstm_db), create=False)
    sysl, _ = resolve_system(ldb, None)
    for prec in ("fp16", "fp8"):
        a = analyze(process(models / "lstm_lm.onnx", 1), ldb, sysl, prec)
        assert {t.layer.op_type for t in a.missing} <= {"Gather"}, [(t.layer.op_type, t.reason) for t in a.missing]
        lstm = [t for t in a.layers if t.layer.op_type == "LSTM"]
        assert len(lstm) == 2 and all(t.call == "cudnnRNNForward" and t.time_ms > 0 for t in lstm)
