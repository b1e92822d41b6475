"""Performance database: round trip, incrementality, failures kept, bad URLs."""
import sqlite3

import pytest
import sqlalchemy as sa

from benanza import kinds as L
from benanza.database.store import SCHEMA_VERSION, Choice, open_db, system_fingerprint
from benanza.errors import DatabaseError
from benanza.database.records import ChoiceLine, MeasurementLine, parse_record

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
    return MeasurementLine.from_json(r)


def test_round_trip_and_failures_kept(db_url):
    db = open_db(db_url)
    sid = db.upsert_system(SYSTEM)
    assert db.upsert_system(dict(SYSTEM, current_sm_clock_mhz=1980)) == sid  # clocks now are not identity
    db.upsert_configs([CONV])
    records = [_rec("IMPLICIT_PRECOMP_GEMM", 0.25), _rec("IMPLICIT_PRECOMP_GEMM", 0.31, cache="cold"),
               _rec("FFT", None, status="not_supported", message="CUDNN_STATUS_NOT_SUPPORTED"),
               _rec("GEMM", None, status="skipped", message="workspace exceeds the limit"),
               _rec("DIRECT", float("nan")),  # "ok" without a valid time is never stored as a time
               ChoiceLine.from_json({"type": "choice", "source": "cudnnGetConvolutionForwardAlgorithm_v7", "rank": 0,
                                     "algorithm": "IMPLICIT_PRECOMP_GEMM", "math": "fma", "status": "ok",
                                     "workspace_bytes": 0})]
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
    with pytest.raises(DatabaseError, match="damaged or not a database"):
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


# one record as a suite prints it (cpp/src/lt.cpp): a cuBLASLt config with its details object
LT_LINE = ('{"type":"measurement","job":"JOB","layer_key":"KEY","kind":"Gemm","precision":"fp8",'
           '"call":"cublasLtMatmul(EPILOGUE_BIAS)","algorithm":"lt:algo=66 tile=128x256 stages=64x4 splitK=1",'
           '"math":"fp8","dtype":"float8_e4m3","workspace_bytes":1048576,"note":"",'
           '"details":{"library":"cublasLt","source":"heuristic","heuristic_rank":0,"algo_id":66,"tile":"128x256",'
           '"tile_id":23,"stages":"64x4","stages_id":16,"split_k":1,"reduction_scheme":"none","swizzle":0,'
           '"custom_option":0,"cluster_shape":"auto","inner_shape_id":0,"workspace_bytes":1048576,"waves":0.75,'
           '"epilogue":"BIAS","output_dtype":"float16"},'
           '"cache":"warm","status":"ok","method":"cuda_graph","reps":40,"host_us":4.1,"median_ms":0.0125,'
           '"q1_ms":0.0124,"q3_ms":0.0126,"mean_ms":0.0125,"min_ms":0.0123,"max_ms":0.013,"stddev_ms":0.0001,'
           '"rse":0.003,"samples":12,"converged":true,"dropped":0,"power_capped":0,"clock_reasons":0,'
           '"sm_clock_min_mhz":1980,"sm_clock_max_mhz":1980}')


def test_cublaslt_details_round_trip_through_the_database(db_url):
    import json

    from benanza.database import query

    gemm = L.GemmConfig(m=197, n=768, k=768, trans_b=True, bias="c")
    db = open_db(db_url)
    sid = db.upsert_system(SYSTEM)
    db.upsert_configs([gemm])
    rec = json.loads(LT_LINE.replace("KEY", gemm.key).replace("JOB", f"{gemm.key}.fp8"))
    choice = {"type": "choice", "source": "cublasLtMatmulAlgoGetHeuristic", "rank": 0, "algorithm": rec["algorithm"],
              "math": "fp8", "status": "ok", "workspace_bytes": 1048576}
    db.write_job(sid, None, f"{gemm.key}.fp8", gemm.key, "fp8", "ok", "", [parse_record(rec), parse_record(choice)],
                 0.5)
    rows = query.measurements(db, query.Filters(kind=["Gemm"], precision="fp8"))
    assert len(rows) == 1 and rows[0].details == rec["details"]
    assert rows[0].details["algo_id"] == 66 and rows[0].details["tile"] == "128x256"
    assert rows[0].dtype == "float8_e4m3" and rows[0].median_ms == 0.0125
    assert [c.algorithm for c in db.choices(sid, [gemm.key])] == [rec["algorithm"]]
    # a record without details reads back as an empty object
    plain = dict(rec, algorithm="CUBLAS_GEMM_DEFAULT", call="cublasGemmEx", math="tensor_op", dtype="float16")
    del plain["details"]
    db.write_job(sid, None, f"{gemm.key}.fp16", gemm.key, "fp16", "ok", "", [parse_record(plain)], 0.5)
    assert query.measurements(db, query.Filters(precision="fp16"))[0].details == {}


def test_fp8_analysis_takes_fp8_gemms_and_fp16_for_everything_else(db_url, tmp_path):
    from benanza.database import query
    from benanza.analysis.analyzer import analyze
    from benanza.processing.model import process
    from onnx_builders import gemm_rnn_model

    ml = process(gemm_rnn_model(tmp_path / "m.onnx"), 1)
    db = open_db(db_url)
    sid = db.upsert_system(SYSTEM)
    configs = ml.unique_configs()
    db.upsert_configs(list(configs.values()))
    gemms = [k for k, c in configs.items() if c.kind == "Gemm"]
    fp16_ms = {k: 0.010 * (i + 1) for i, k in enumerate(configs)}
    for k in configs:
        r = _rec("X", fp16_ms[k], math="tensor_op", dtype="float16", call="fp16call")
        db.write_job(sid, None, f"{k}.fp16", k, "fp16", "ok", "", [r], 0.1)
    # FP8 faster for the first GEMM, slower for the second, not supported for the third
    fp8 = {gemms[0]: fp16_ms[gemms[0]] / 2, gemms[1]: fp16_ms[gemms[1]] * 2}
    for k in gemms:
        if k in fp8:
            recs = [_rec("lt:algo=1", fp8[k], math="fp8", dtype="float8_e4m3", call="cublasLtMatmul"),
                    ChoiceLine.from_json({"type": "choice", "source": "cublasLtMatmulAlgoGetHeuristic", "rank": 0,
                                          "algorithm": "lt:algo=1", "math": "fp8", "status": "ok",
                                          "workspace_bytes": 0})]
        else:
            recs = [_rec("*", None, status="not_supported", math="fp8", dtype="float8_e4m3", call="cublasLtMatmul",
                         message="k and n multiples of 16")]
        db.write_job(sid, None, f"{k}.fp8", k, "fp8", "ok", "", recs, 0.1)
    system = db.systems()[0]
    a = analyze(ml, db, system, "fp8")
    assert a.complete
    times = {t.layer.key: t for t in a.layers if t.status == "measured"}
    assert times[gemms[0]].time_ms == fp8[gemms[0]] and times[gemms[0]].math == "fp8"
    # cuBLASLt's heuristic pick, with its measured time, as the per-layer table shows it
    assert (times[gemms[0]].heuristic_algorithm, times[gemms[0]].heuristic_ms) == ("lt:algo=1", fp8[gemms[0]])
    assert times[gemms[1]].time_ms == fp16_ms[gemms[1]] and times[gemms[1]].call == "fp16call"
    assert times[gemms[2]].time_ms == fp16_ms[gemms[2]]
    rnn = next(k for k, c in configs.items() if c.kind == "RNN")
    assert times[rnn].time_ms == fp16_ms[rnn]
    # an fp16 analysis never takes an FP8 measurement
    b = analyze(ml, db, system, "fp16")
    assert {t.layer.key: t.time_ms for t in b.layers if t.status == "measured"}[gemms[0]] == fp16_ms[gemms[0]]
    assert a.lbl_sequential_ms < b.lbl_sequential_ms
    best = query.best_per_config(db, sid, "fp8", "warm", gemms)
    assert best[gemms[0]].dtype == "float8_e4m3" and best[gemms[1]].dtype == "float16"


def test_a_database_at_the_head_schema_opens_without_alembic(tmp_path):
    """HEAD_REVISION is the migration scripts' head, and a database already at it is opened with two
    queries (no Alembic import at each command's start); an older one is still upgraded (test_backend)."""
    import subprocess
    import sys

    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from benanza.database.store import HEAD_REVISION, migrations_dir

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD_REVISION
    url = f"sqlite:///{tmp_path / 'p.db'}"
    open_db(url).close()  # created at the head
    code = (f"import sys\nfrom benanza.database.store import open_db\nopen_db({url!r}).close()\n"
            "print('alembic' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["False"], r.stderr[-1500:]
