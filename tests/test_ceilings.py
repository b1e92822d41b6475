"""Machine ceilings: the harness's --ceilings records parsed into values, stored per system, and the
ceilings suite compiled and linked against the real wheels (its run needs a GPU)."""
import json
import subprocess

import pytest

from benanza.runner import ceilings as C
from benanza.database.store import open_db
from conftest import have_gpu

SYSTEM = {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 150 << 30,
          "max_sm_clock_mhz": 1980, "max_mem_clock_mhz": 3201, "driver_version": "580.159.04",
          "driver_cuda_version": 13000, "runtime_version": 13000, "cudnn_version": 91900, "cublas_version": 130100}


def _rec(name, median_ms, work, unit, status="ok", message=""):
    return json.dumps({"type": "measurement", "kind": "Ceiling", "cache": "warm", "status": status,
                       "message": message, "call": "cublasGemmEx", "algorithm": name, "math": "none",
                       "dtype": "float32", "median_ms": median_ms,
                       "rse": 0.002, "samples": 12, "converged": True,
                       "details": {"ceiling": name, "work": work, "unit": unit}})


def test_records_become_ceilings_and_failures_never_values(backend_url):
    lines = [json.dumps({"type": "system", "system": SYSTEM}),
             _rec("dram_bandwidth", 0.5, 2.0 * 2 ** 30, "bytes/s"),
             _rec("gemm_fp16", 1.2, 2.0 * 8192 ** 3, "FLOP/s"),
             json.dumps({"type": "measurement", "kind": "Ceiling", "cache": "cold", "status": "ok", "call": "copy",
                         "algorithm": "dram_bandwidth", "math": "none", "dtype": "float32", "median_ms": 9.0,
                         "details": {"ceiling": "dram_bandwidth", "work": 1, "unit": "bytes/s"}}),
             # a malformed record is a failure that names the field, never a value
             _rec("l2_bandwidth", "0.1", 2.0 ** 30, "bytes/s"),
             _rec("gemm_bf16", None, 2.0 * 8192 ** 3, "FLOP/s", status="failed", message="CUBLAS_STATUS_NOT_SUPPORTED"),
             "not json"]
    system, rows, failed = C.parse_records(lines)
    assert system == SYSTEM
    by = {r.name: r for r in rows}
    assert set(by) == {"dram_bandwidth", "gemm_fp16"}  # the cold record does not count
    assert by["dram_bandwidth"].value == pytest.approx(2.0 * 2 ** 30 / 0.5e-3)  # 4.29 TB/s
    assert by["gemm_fp16"].value == pytest.approx(2.0 * 8192 ** 3 / 1.2e-3)
    assert failed[0].startswith("l2_bandwidth: measurement line: 'median_ms' is '0.1' (str)")
    assert failed[1:] == ["gemm_bf16: CUBLAS_STATUS_NOT_SUPPORTED"]
    db = open_db(backend_url)
    sid = db.upsert_system(SYSTEM)
    db.write_ceilings(sid, [r.to_row() for r in rows])
    db.write_ceilings(sid, [rows[0].to_row()])  # measured again: replaced, not duplicated
    stored = db.ceilings(sid)
    assert set(stored) == {"dram_bandwidth", "gemm_fp16"}
    assert stored["gemm_fp16"].unit == "FLOP/s" and stored["gemm_fp16"].value == pytest.approx(by["gemm_fp16"].value)


@pytest.mark.slow
def test_ceilings_suite_builds_and_says_when_there_is_no_gpu(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    r = build(C.generate_suite(tmp_path / "c"))
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert listed.stdout == ""  # no layer jobs: the harness alone
    if have_gpu():
        return
    p = subprocess.run([str(r.executable), "--ceilings"], capture_output=True, text=True)
    assert p.returncode == 3 and "no CUDA device" in p.stdout + p.stderr
