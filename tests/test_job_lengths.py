"""A run's strings longer than their columns (issue 53, item 12 on the run path): `run`/`bench` store
each job with :meth:`benanza.database.store.Database.write_job`, which checks every string against its
column's declared length before it writes (as `db import` does), on SQLite as on PostgreSQL: one line
``benanza: job JOB: table.column holds a value of N characters, longer than the column's M``, the job
not written (its earlier rows kept), the jobs finished before it whole.

An implementation's name is the exception: cuBLASLt's FP8 configurations with their scale modes run past
the ``algorithm`` columns' 96 characters on an H100 (99 seen), and a run must not stop on a name. It is
stored by :func:`benanza.database.store.fit_algorithm` (its head, ``~`` and a hash of the whole: equal
names stay equal, different ones different), the whole name in the measurement's ``details``."""
import gzip
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from benanza.database.records import ChoiceLine, MeasurementLine
from benanza.database.store import Base, ValueTooLong, open_db, string_limits
from conftest import REPO, make_fake_suite
from test_db_union import SYSTEM, _base, _contents

SHIPPED = sorted((REPO / "db" / "reference").glob("*.sqlite.gz"))
#: a cuDNN-like engine config name of 200 characters (tests/fake_suite.py FAKE_SUITE_LONG_NAME's)
LONG = ("eng29" + "".join(f"_k{k}={k % 7}" for k in range(2, 60)))[:200]


@pytest.mark.parametrize("gz", SHIPPED, ids=[p.name for p in SHIPPED])
def test_every_string_in_the_shipped_databases_fits_its_column(gz, tmp_path):
    db = tmp_path / gz.name[:-3]
    with gzip.open(gz) as f, open(db, "wb") as o:
        shutil.copyfileobj(f, o)
    c = sqlite3.connect(db)
    try:
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        over, widest = [], {}
        for t in Base.metadata.sorted_tables:
            if t.name not in tables:
                continue
            for col, n in string_limits(t).items():
                got = c.execute(f'SELECT max(length("{col}")) FROM {t.name}').fetchone()[0] or 0
                widest[f"{t.name}.{col}"] = (got, n)
                if got > n:
                    over.append((t.name, col, got, n))
    finally:
        c.close()
    assert not over, over
    assert widest["measurements.algorithm"][0] > 0  # real names were read (not an empty table)


def _job(db, sid, key, algorithm="algo0", source="heuristic", job=None):
    lines = [MeasurementLine(call="cudnnX", algorithm=algorithm, math="default", dtype="float", status="ok",
                             median_ms=0.5, samples=10, converged=True),
             ChoiceLine(source=source, rank=0, algorithm="algo0", math="default", status="ok")]
    db.write_job(sid, None, job or f"{key}.fp32", key, "fp32", "ok", "", lines)


def test_an_over_long_algorithm_name_is_stored_fitted_with_the_whole_name_in_details(backend_url):
    import json

    import sqlalchemy as sa

    from benanza.database.store import Choice, Measurement, fit_algorithm

    keys = _base(backend_url.removeprefix("sqlite:///") if backend_url.startswith("sqlite") else backend_url)
    db = open_db(backend_url)
    try:
        sid = db.upsert_system(SYSTEM)
        name = LONG[:99]
        other = LONG[:98] + "Z"
        lines = [MeasurementLine(call="cublasLtMatmul", algorithm=name, math="fp8", dtype="fp8", status="ok",
                                 median_ms=0.5, samples=10, converged=True),
                 MeasurementLine(call="cublasLtMatmul", algorithm=other, math="fp8", dtype="fp8", status="ok",
                                 median_ms=0.6, samples=10, converged=True),
                 ChoiceLine(source="heuristic", rank=0, algorithm=name, math="fp8", status="ok")]
        db.write_job(sid, None, f"{keys[0]}.fp32", keys[0], "fp32", "ok", "", lines)
        with db.engine.connect() as c:
            ms = c.execute(sa.select(Measurement.algorithm, Measurement.details)
                           .where(Measurement.call == "cublasLtMatmul").order_by(Measurement.median_ms)).all()
            ch = c.execute(sa.select(Choice.algorithm).where(Choice.layer_key == keys[0], Choice.source == "heuristic",
                                                             Choice.math == "fp8")).scalars().all()
    finally:
        db.engine.dispose()
    assert [len(a) for a, _ in ms] == [96, 96] and ms[0][0] != ms[1][0]  # different names stay different
    assert ms[0][0] == fit_algorithm(name) and ms[0][0].startswith(name[:83]) and ch == [ms[0][0]]  # pick matches
    assert [json.loads(d)["algorithm"] for _, d in ms] == [name, other]


@pytest.mark.parametrize("field,column,size", [("source", "choices.source", 97),
                                               ("job", "jobs.job", 300)])
def test_write_job_refuses_an_over_long_string_in_one_line_and_writes_nothing(backend_url, field, column, size):
    keys = _base(backend_url.removeprefix("sqlite:///") if backend_url.startswith("sqlite") else backend_url)
    db = open_db(backend_url)
    try:
        sid = db.upsert_system(SYSTEM)
        before = _contents(backend_url)
        value = LONG[:size] if field == "algorithm" else "x" * size
        job = value if field == "job" else f"{keys[0]}.fp32"
        with pytest.raises(ValueTooLong) as e:
            _job(db, sid, keys[0], **{field: value} if field != "job" else {}, job=job)
        msg = str(e.value)
        assert msg == f"job {job}: {column} holds a value of {size} characters, longer than the column's " \
                      f"{string_limits(Base.metadata.tables[column.split('.')[0]])[column.split('.')[1]]}", msg
        assert _contents(backend_url) == before  # the job's earlier rows kept, nothing new
        _job(db, sid, keys[0])  # a name that fits is stored
    finally:
        db.engine.dispose()


def test_a_run_measuring_an_over_long_engine_name_stores_it_fitted_and_completes(tmp_path, models):
    """The fake suite gives one job's first algorithm a 200-character cuDNN-like engine config name: the run
    completes (exit 0), that job stored with the name fitted to the column (:func:`fit_algorithm`) and whole
    in its details, every job whole, the run completed."""
    import json

    from benanza.database.store import fit_algorithm
    from benanza.generation.generator import load_suite
    from benanza.runner.run import job_cost

    suite = make_fake_suite(tmp_path / "suite", models / "alexnet.onnx", (1,), ("fp32",))
    jobs = sorted(load_suite(suite).jobs, key=lambda j: (-job_cost(j), j.id))
    bad = jobs[4].id
    db = tmp_path / "r.db"
    env = dict(os.environ, PYTHONPATH=str(REPO), FAKE_SUITE_LONG_NAME=bad, FAKE_SUITE_SLOW="0.05")
    p = subprocess.run([sys.executable, "-m", "benanza", "run", str(suite), "--db", str(db)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    c = sqlite3.connect(db)
    try:
        stored = {r[0] for r in c.execute("SELECT job FROM jobs")}
        long = c.execute("SELECT m.algorithm, m.details FROM measurements m JOIN jobs j ON m.layer_key = j.layer_key "
                         "AND m.precision = j.precision WHERE j.job = ? AND length(m.details) > 100", (bad,)).fetchall()
        status = c.execute("SELECT status FROM runs").fetchall()
    finally:
        c.close()
    assert bad in stored and len(stored) == len(jobs), (bad, len(stored))
    whole = [json.loads(d)["algorithm"] for _, d in long]
    assert long and all(len(w) == 200 and a == fit_algorithm(w) and len(a) == 96 for (a, _), w in zip(long, whole))
    assert status == [("completed",)]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.db", "suite"]  # no -wal or -shm left
