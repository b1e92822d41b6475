"""A run's strings longer than their columns (issue 53, item 12 on the run path): `run`/`bench` store
each job with :meth:`benanza.database.store.Database.write_job`, which checks every string against its
column's declared length before it writes (as `db import` does), on SQLite as on PostgreSQL: one line
``benanza: job JOB: table.column holds a value of N characters, longer than the column's M``, the job
not written (its earlier rows kept), the jobs finished before it whole.

The widths stay as they are (no migration): every name in the shipped databases fits its column with
room to spare (the longest cuDNN engine config and cuBLASLt algorithm names are 75 of 96 characters:
``test_every_string_in_the_shipped_databases_fits_its_column``), so the check refuses no name stored
today."""
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


@pytest.mark.parametrize("field,column,size", [("algorithm", "measurements.algorithm", 200),
                                               ("source", "choices.source", 97),
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


def test_a_run_measuring_an_over_long_engine_name_stops_in_one_line_with_whole_jobs(tmp_path, models):
    """The fake suite gives one job's first algorithm a 200-character name: the run ends with one
    line naming the job, ``measurements.algorithm`` and 200, exit 3; that job is not stored, every
    job stored is whole (its measurements all there), the run is marked failed."""
    from benanza.generation.generator import load_suite
    from benanza.runner.run import job_cost

    suite = make_fake_suite(tmp_path / "suite", models / "alexnet.onnx", (1,), ("fp32",))
    jobs = sorted(load_suite(suite).jobs, key=lambda j: (-job_cost(j), j.id))
    bad = jobs[4].id  # the fifth the runner hands out: some are stored before it
    db = tmp_path / "r.db"
    env = dict(os.environ, PYTHONPATH=str(REPO), FAKE_SUITE_LONG_NAME=bad, FAKE_SUITE_SLOW="0.05")
    p = subprocess.run([sys.executable, "-m", "benanza", "run", str(suite), "--db", str(db)], env=env,
                       capture_output=True, text=True, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    assert lines == [f"benanza: job {bad}: measurements.algorithm holds a value of 200 characters, longer than "
                     f"the column's 96"], p.stderr
    c = sqlite3.connect(db)
    try:
        stored = {r[0] for r in c.execute("SELECT job FROM jobs")}
        per_job = dict(c.execute("SELECT j.job, count(m.id) FROM jobs j LEFT JOIN measurements m ON "
                                 "m.layer_key = j.layer_key AND m.precision = j.precision GROUP BY j.job"))
        orphans = c.execute("SELECT count(*) FROM measurements m WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE "
                            "j.layer_key = m.layer_key AND j.precision = m.precision)").fetchone()[0]
        status = c.execute("SELECT status FROM runs").fetchall()
    finally:
        c.close()
    assert bad not in stored and stored, stored
    assert all(n > 0 for n in per_job.values()) and orphans == 0, (per_job, orphans)
    assert status == [("failed",)]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.db", "suite"]  # no -wal or -shm left
