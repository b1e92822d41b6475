"""Performance database: round trip, incrementality, failures kept, bad URLs."""
import sqlite3

import pytest
import sqlalchemy as sa

from benanza import layers as L
from benanza.database import SCHEMA_VERSION, Choice, open_db, system_fingerprint
from benanza.errors import DatabaseError

SYSTEM = {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 150 << 30,
          "l2_cache_bytes": 50 << 20, "memory_bus_width_bits": 6144, "max_sm_clock_mhz": 1980,
          "max_mem_clock_mhz": 3201, "driver_version": "580.159.04", "driver_cuda_version": 13000,
          "runtime_version": 13000, "cudnn_version": 91900, "cublas_version": 130100, "current_sm_clock_mhz": 345}
CONV = L.ConvConfig(x=(32, 64, 56, 56), w=(64, 64, 3, 3), pads=(1, 1, 1, 1), strides=(1, 1), dilations=(1, 1),
                    group=1, bias=True)


def _rec(algo, median, status="ok", cache="warm", math="fma", **kw):
    r = {"type": "measurement", "call": "cudnnConvolutionForward", "algorithm": algo, "math": math,
         "dtype": "float32", "cache": cache, "status": status, "workspace_bytes": 1024}
    if status == "ok":
        r.update(median_ms=median, q1_ms=median * 0.99, q3_ms=median * 1.01, mean_ms=median, min_ms=median * 0.98,
                 max_ms=median * 1.1, stddev_ms=0.001, rse=0.002, samples=12, converged=True, method="cuda_graph",
                 reps=8, host_us=40.0, dropped=0, power_capped=3, clock_reasons=4, sm_clock_min_mhz=1980,
                 sm_clock_max_mhz=1980)
    r.update(kw)
    return r


def test_round_trip_and_failures_kept(db_url):
    db = open_db(db_url)
    sid = db.upsert_system(SYSTEM)
    assert db.upsert_system(dict(SYSTEM, current_sm_clock_mhz=1980)) == sid  # clocks now are not identity
    db.upsert_configs([CONV])
    records = [_rec("IMPLICIT_PRECOMP_GEMM", 0.25), _rec("IMPLICIT_PRECOMP_GEMM", 0.31, cache="cold"),
               _rec("FFT", None, status="not_supported", message="CUDNN_STATUS_NOT_SUPPORTED"),
               _rec("GEMM", None, status="skipped", message="workspace exceeds the limit"),
               _rec("DIRECT", float("nan")),  # "ok" without a valid time is never stored as a time
               {"type": "choice", "source": "cudnnGetConvolutionForwardAlgorithm_v7", "rank": 0,
                "algorithm": "IMPLICIT_PRECOMP_GEMM", "math": "fma", "status": "ok", "workspace_bytes": 0}]
    run = db.start_run(sid, "suite", "m", 1)
    db.write_job(sid, run, f"{CONV.key}.fp32", CONV.key, "fp32", "ok", "", records, 1.5)
    rows = db.measurements(sid, [CONV.key])
    assert {(m.algorithm, m.status) for m in rows} == {("IMPLICIT_PRECOMP_GEMM", "ok"), ("FFT", "not_supported"),
                                                         ("GEMM", "skipped"), ("DIRECT", "failed")}
    ok = next(m for m in rows if m.status == "ok")
    assert ok.median_ms == 0.25 and ok.iqr_ms == pytest.approx(0.005) and ok.batch == 32 and ok.run_id == run
    assert ok.power_capped == 3 and ok.clock_reasons == 4
    assert next(m for m in rows if m.algorithm == "DIRECT").median_ms is None
    assert [m.median_ms for m in db.measurements(sid, [CONV.key], cache="cold") if m.cache == "cold"] == [0.31]
    assert [c.algorithm for c in db.choices(sid, [CONV.key])] == ["IMPLICIT_PRECOMP_GEMM"]
    assert db.jobs_done(sid) == {f"{CONV.key}.fp32"}
    # writing the job again replaces, never duplicates
    db.write_job(sid, run, f"{CONV.key}.fp32", CONV.key, "fp32", "ok", "", records[:1], 1.0)
    assert len(db.measurements(sid, [CONV.key])) == 1
    with db.session() as s:
        assert s.scalar(sa.select(sa.func.count()).select_from(Choice)) == 0


def test_system_fingerprint_identity_fields():
    a = system_fingerprint(SYSTEM)
    assert a == system_fingerprint(dict(SYSTEM, current_sm_clock_mhz=1))
    assert a != system_fingerprint(dict(SYSTEM, cudnn_version=91800))
    assert a != system_fingerprint(dict(SYSTEM, gpu_name="NVIDIA H100 80GB HBM3"))


def test_bad_urls_give_one_line_errors(tmp_path):
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(DatabaseError, match="is a directory"):
        open_db(str(tmp_path / "dir.db"))
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(DatabaseError, match="cannot open database"):
        open_db(str(junk))
    with pytest.raises(DatabaseError, match="driver not available|cannot parse|database"):
        open_db("nosuchdialect://x/y")
    with pytest.raises(DatabaseError, match="no such file"):
        open_db(str(tmp_path / "absent.db"), create=False)
    assert not (tmp_path / "absent.db").exists()


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "p.db"
    open_db(str(path))
    con = sqlite3.connect(path)
    con.execute("update schema_info set value = ? where key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(DatabaseError, match="newer than this benanza"):
        open_db(str(path))


def test_foreign_sqlite_database_is_not_misread(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("create table measurements (x int)")
    con.commit()
    con.close()
    with pytest.raises(DatabaseError, match="no schema version"):
        open_db(str(path))
