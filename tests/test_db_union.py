"""`db import` merges a model's record as a union, in one transaction (issue 53, items 4 and 12).

Item 4: two exports of one database carry partial records of one model (as a model-filtered export
wrote them before the fix: some of its model configs each); importing them in either order, or at once
in two processes, gave different ``model_configs`` (the first record seen was kept). Now a model's
configs merge as a union keyed by (model, layer config), so the tables hold the same rows whatever the
order. Item 12: a string longer than its column (``String(N)``) failed on PostgreSQL in two lines
naming no column, after the import's earlier chunks were committed (SQLite stored it); now it is one
line naming the table, column and length, and nothing of the import is written (one transaction)."""
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
import sqlalchemy as sa

from benanza import kinds as L
from benanza.database.records import ChoiceLine, MeasurementLine
from benanza.database.store import open_db
from conftest import REPO

SYSTEM = {"gpu_name": "Union GPU", "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 80 << 30,
          "l2_cache_bytes": 50 << 20, "memory_bus_width_bits": 5120, "max_sm_clock_mhz": 1980,
          "max_mem_clock_mhz": 2619, "driver_version": "580.1", "driver_cuda_version": 13000,
          "runtime_version": 13000, "cudnn_version": 91900, "cublas_version": 130100}
SHA = "cd" * 32


def bz(*args):
    """``benanza ARGS`` in this process (typer's runner): (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from benanza.cli import app

    r = CliRunner().invoke(app, list(map(str, args)))
    return r.exit_code, r.stdout, r.stderr


def imported(url, src):
    """``db import SRC --db URL`` in this process (the command's use case)."""
    from benanza.usecases.db import import_

    st = import_(url, str(src))
    return st


def _base(path):
    """One system, 6 configs with one job each (3 measurements, 1 choice), model "union" with all 6."""
    db = open_db(str(path))
    sid = db.upsert_system(SYSTEM)
    cfgs = [k.example for k in list(L.REGISTRY.values())[:6]]
    db.upsert_configs(cfgs)
    run = db.start_run(sid, "suite", "union", len(cfgs))
    for i, c in enumerate(cfgs):
        lines = [MeasurementLine(call="cudnnX", algorithm=f"algo{a}", math="default", dtype="float", status="ok",
                                 median_ms=0.1 * (i + a + 1), samples=10, converged=True) for a in range(3)]
        db.write_job(sid, run, f"{c.key}.fp32", c.key, "fp32", "ok", "",
                     lines + [ChoiceLine(source="heuristic", rank=0, algorithm="algo0", math="default", status="ok")])
    db.record_model("union", SHA, 1, {"layers": 7, "unique_layers": 6}, {c.key: 1 for c in cfgs})
    db.engine.dispose()
    return sorted(c.key for c in cfgs)


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Two exports of one database, each with a partial record of the model (keys 0-2; keys 2-5, key 2
    counted twice), as a model-filtered export of another model wrote them before the fix."""
    d = tmp_path_factory.mktemp("union")
    keys = _base(d / "base.db")
    out = []
    for name, keep, twice in (("a.db", keys[:3], None), ("b.db", keys[2:], keys[2])):
        shutil.copy(d / "base.db", d / name)
        with sqlite3.connect(d / name) as c:
            c.execute(f"DELETE FROM model_configs WHERE layer_key NOT IN ({','.join('?' * len(keep))})", keep)
            c.execute("UPDATE model_configs SET count = 2 WHERE layer_key = ?", (twice,))
        out.append(d / name)
    return out, keys


def _contents(url) -> dict[str, list]:
    """Every table's rows without their surrogate ids (systems by fingerprint, models by sha256 and
    batch), sorted; runs say which file they were imported from, so they are counted only."""
    eng = sa.create_engine(url)
    q = {"systems": "SELECT fingerprint, gpu_name, info FROM systems",
         "layer_configs": "SELECT key, kind, params, batch, flops FROM layer_configs",
         "jobs": "SELECT s.fingerprint, j.job, j.layer_key, j.precision, j.status, j.message, j.finished_at "
                 "FROM jobs j JOIN systems s ON s.id = j.system_id",
         "measurements": "SELECT s.fingerprint, m.layer_key, m.precision, m.call, m.algorithm, m.median_ms, m.status "
                         "FROM measurements m JOIN systems s ON s.id = m.system_id",
         "choices": "SELECT s.fingerprint, c.layer_key, c.source, c.rank, c.algorithm FROM choices c "
                    "JOIN systems s ON s.id = c.system_id",
         "models": "SELECT name, sha256, batch, layers, unique_layers, summary FROM models",
         "model_configs": "SELECT m.sha256, m.batch, mc.layer_key, mc.count FROM model_configs mc "
                          "JOIN models m ON m.id = mc.model_id",
         "runs": "SELECT count(*) FROM runs"}
    try:
        with eng.connect() as c:
            return {t: sorted(tuple(map(str, r)) for r in c.execute(sa.text(s))) for t, s in q.items()}
    finally:
        eng.dispose()


def _url(backend_url, suffix):
    """A second fresh database beside ``backend_url`` (SQLite: another file; PostgreSQL: the same
    server, another database made here)."""
    u = sa.engine.make_url(backend_url)
    if u.get_backend_name() == "sqlite":
        return f"sqlite:///{u.database}.{suffix}"
    eng = sa.create_engine(u, isolation_level="AUTOCOMMIT")
    name = f"{u.database}_{suffix}"
    with eng.connect() as c:
        c.execute(sa.text(f"CREATE DATABASE {name}"))
    eng.dispose()
    return u.set(database=name).render_as_string(hide_password=False)


def _drop(url):
    u = sa.engine.make_url(url)
    if u.get_backend_name() == "postgresql":
        eng = sa.create_engine(u.set(database="postgres"), isolation_level="AUTOCOMMIT")
        with eng.connect() as c:
            c.execute(sa.text(f"DROP DATABASE IF EXISTS {u.database} WITH (FORCE)"))
        eng.dispose()


def test_two_imports_in_either_order_give_the_same_tables_and_the_whole_record(exports, backend_url):
    (a, b), keys = exports
    other = _url(backend_url, "ba")
    try:
        for url, order in ((backend_url, (a, b)), (other, (b, a))):
            for src in order:
                imported(url, src)
        ab, ba = _contents(backend_url), _contents(other)
        # was: a's 3 configs after a then b, b's 4 after b then a
        assert ab == ba
        assert [r[2:] for r in ab["model_configs"]] == sorted((k, "2" if k == keys[2] else "1") for k in keys)
        assert len(ab["models"]) == 1 and len(ab["jobs"]) == 6 and len(ab["measurements"]) == 18
    finally:
        _drop(other)


def test_two_concurrent_imports_give_what_one_after_the_other_gives(exports, backend_url):
    (a, b), _ = exports
    seq = _url(backend_url, "seq")
    try:
        for src in (a, b):
            imported(seq, src)
        # the same two imports at once, as two `benanza db import` processes, into a fresh database
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        ps = [subprocess.Popen([sys.executable, "-m", "benanza", "db", "import", str(src), "--db", backend_url],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
              for src in (a, b)]
        res = [p.communicate(timeout=300) + (p.returncode,) for p in ps]
        assert [r[2] for r in res] == [0, 0], [r[1] for r in res]
        got, want = _contents(backend_url), _contents(seq)
        assert got.pop("runs") == want.pop("runs")
        assert got == want
    finally:
        _drop(seq)


# ------------------------------------------------------------------ 12. a string longer than its column

#: the rows of the job that the bad source finished later (so that the import takes them)
NEWER = "layer_key = (SELECT layer_key FROM jobs WHERE id = (SELECT min(id) FROM jobs))"

@pytest.mark.parametrize("table,column,where,size", [
    ("measurements", "algorithm", f"algorithm = 'algo2' AND {NEWER}", 200),
    ("choices", "source", NEWER, 97),
    ("models", "name", "1", 300),
], ids=["measurement", "choice", "model"])
def test_an_over_long_string_is_one_line_naming_its_column_and_nothing_is_imported(
        exports, backend_url, tmp_path, table, column, where, size):
    (a, _), _ = exports
    bad = tmp_path / "bad.db"
    shutil.copy(a, bad)
    with sqlite3.connect(bad) as c:  # SQLite keeps any length in a VARCHAR(N)
        c.execute(f"UPDATE {table} SET {column} = ? WHERE {where}", ("x" * size,))
        # one more job, so that the import has something new before the bad row
        c.execute("UPDATE jobs SET finished_at = '2099-01-01 00:00:00' WHERE id = (SELECT min(id) FROM jobs)")
    imported(backend_url, a)
    before = _contents(backend_url)
    rc, out, err = bz("db", "import", bad, "--db", backend_url)
    assert rc == 3 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("benanza: ") and f"{table}.{column}" in err and f"{size} characters" in err, err
    assert "nothing imported" in err
    assert _contents(backend_url) == before  # was: the first jobs committed (PostgreSQL), the row stored (SQLite)
