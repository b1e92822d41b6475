"""The performance database as a shared asset: migrations, queries, export/import, concurrent
writers and crashes -- on SQLite and on PostgreSQL (CI starts a real server)."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import sqlalchemy as sa

from benanza.database import query, sharing
from benanza.analysis.analyzer import analyze
from benanza.database.store import Base, JobRow, Measurement, SCHEMA_VERSION, migrations_dir, open_db
from benanza.errors import DatabaseError, UsageError
from benanza.generation.generator import load_suite
from benanza.processing.model import process
from benanza.runner.run import RunOptions, run_suite
from conftest import REPO, make_fake_suite, records_of, envelope_of

REF_DB = REPO / "db" / "reference" / "h200.sqlite.gz"


def _fill(url, folder, gpu="Fake GPU", **env):
    old = dict(os.environ)
    os.environ.update({"FAKE_SUITE_GPU": gpu, **env})
    try:
        return run_suite(load_suite(folder), open_db(url), RunOptions())
    finally:
        os.environ.clear()
        os.environ.update(old)


@pytest.fixture
def suites(tmp_path, models):
    return {"googlenet": make_fake_suite(tmp_path / "g", models / "googlenet.onnx", (1,), ("fp32", "fp16")),
            "resnet50": make_fake_suite(tmp_path / "r", models / "resnet50.onnx", (1, 32), ("fp32",))}


def test_migrations_build_exactly_the_models_schema(backend_url):
    """Upgrading an empty database through every migration gives the schema the models declare."""
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext

    eng = sa.create_engine(backend_url)
    with eng.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", str(migrations_dir()))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        version = conn.execute(sa.text("select value from schema_info")).scalar()
    eng.dispose()
    assert diff == [] and version == str(SCHEMA_VERSION)
    assert open_db(backend_url).notices == []  # opens as current


def _schema1_database(path) -> None:
    """A database as benanza 0.1 wrote it: the tables of migration 0001 and no alembic_version (the
    shipped reference databases are at the head schema now: db/refresh_reference.py)."""
    from alembic import command
    from alembic.config import Config

    eng = sa.create_engine(f"sqlite:///{path}")
    with eng.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", str(migrations_dir()))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
        conn.exec_driver_sql("DROP TABLE alembic_version")
    eng.dispose()


def test_old_database_is_upgraded_and_newer_refused(tmp_path, models):
    old = tmp_path / "v1.db"
    _schema1_database(old)
    con = sqlite3.connect(old)
    assert "build_ms" not in [r[1] for r in con.execute("pragma table_info(measurements)")]
    con.close()
    db = open_db(str(old))
    assert "upgraded the schema from revision 0001" in db.notices[0]
    con = sqlite3.connect(old)
    assert "build_ms" in [r[1] for r in con.execute("pragma table_info(measurements)")]
    con.execute("update schema_info set value = '99'")
    con.commit()
    con.close()
    with pytest.raises(DatabaseError, match="schema version 99 is newer"):
        open_db(str(old))


def test_queries_filters_and_best(backend_url, suites, models):
    _fill(backend_url, suites["googlenet"])
    db = open_db(backend_url)
    allm = query.measurements(db)
    conv = query.measurements(db, query.Filters(kind=["Conv"], precision="fp16", status="ok", cache="warm"))
    assert conv and all(r.kind == "Conv" and r.precision == "fp16" and r.status == "ok" for r in conv)
    assert [r.median_ms for r in conv] == sorted(r.median_ms for r in conv)
    g1 = query.measurements(db, query.Filters(kind=["Conv"], params={"group": "1", "w": "64x192x1x1"}))
    assert g1 and all("k64 1x1" in r.description for r in g1)
    assert len(query.measurements(db, query.Filters(limit=7, sort="median_ms", descending=True))) == 7
    # filters are bound parameters: SQL in a value matches nothing and harms nothing
    evil = "x'; DROP TABLE measurements; --"
    for f in (query.Filters(algorithm=evil), query.Filters(call=evil), query.Filters(status=evil),
              query.Filters(kind=[evil]), query.Filters(math="%"), query.Filters(algorithm="%_")):
        assert query.measurements(db, f) == []
    assert len(query.measurements(db)) == len(allm)
    # best per config agrees with the analyzer
    ml = process(models / "googlenet.onnx", 1)
    best = query.best_per_config(db, "Fake", "fp16")
    a = analyze(ml, db, db.systems()[0], "fp16")
    for lt in a.layers:
        if lt.status == "measured":
            assert best[lt.layer.key].median_ms == pytest.approx(lt.time_ms)
    shared = query.shared_configs(db, str(models / "resnet50.onnx"), 1, None, "fp16")
    assert 0 < shared["measured"] < shared["unique_configs"]
    assert query.shared_configs(db, "googlenet", None, None, "fp16")["to_measure"] == 0
    with pytest.raises(UsageError):
        query.measurements(db, query.Filters(sort="median_ms; drop table x"))


def test_records_as_a_dataframe(tmp_path, suites):
    pd = pytest.importorskip("pandas")
    url = f"sqlite:///{tmp_path / 'p.db'}"
    _fill(url, suites["googlenet"])
    rows = query.measurements(open_db(url), query.Filters(kind=["Conv"], status="ok"))
    df = query.to_dataframe(rows)
    assert isinstance(df, pd.DataFrame) and len(df) == len(rows) and "median_ms" in df.columns


def test_compare_two_systems(backend_url, suites):
    _fill(backend_url, suites["googlenet"], gpu="GPU A")
    _fill(backend_url, suites["googlenet"], gpu="GPU B")
    db = open_db(backend_url)
    rows = query.compare_systems(db, "GPU A", "GPU B", "fp32")
    assert rows and all(r["ratio"] == pytest.approx(1.0) for r in rows)  # the fake suite is deterministic


def test_export_import_merge_without_duplicates(backend_url, suites, tmp_path):
    _fill(backend_url, suites["googlenet"], gpu="GPU A")
    _fill(backend_url, suites["resnet50"], gpu="GPU B")
    db = open_db(backend_url)
    n = db.counts()
    out = tmp_path / "a.sqlite"
    st = sharing.export(db, out, system="GPU A")
    exported = open_db(str(out), create=False)
    assert [s.gpu_name for s in exported.systems()] == ["GPU A"]
    assert exported.counts()["jobs"] == st.jobs_added > 0
    # importing into a fresh database reproduces it; importing again adds nothing
    fresh_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    fresh = open_db(fresh_url)
    s1 = sharing.import_db(fresh, str(out))
    c1 = fresh.counts()
    s2 = sharing.import_db(fresh, str(out))
    assert s1.jobs_added == st.jobs_added and s2.jobs_added == 0 and s2.jobs_kept == st.jobs_added
    assert fresh.counts() == c1
    # the full database into itself's copy: nothing changes
    full = tmp_path / "full.sqlite"
    sharing.export(db, full)
    sharing.import_db(db, str(full))
    assert db.counts()["measurements"] == n["measurements"] and db.counts()["jobs"] == n["jobs"]


def test_newer_job_wins(backend_url, suites, tmp_path):
    _fill(backend_url, suites["googlenet"])
    db = open_db(backend_url)
    older = tmp_path / "old.sqlite"
    sharing.export(db, older)
    job = load_suite(suites["googlenet"]).jobs[0]
    with db.session() as s:  # the database's copy of one job: newer, and different
        s.execute(sa.update(Measurement).where(Measurement.layer_key == job.layer_key,
                                               Measurement.precision == job.precision).values(median_ms=123.0))
    st = sharing.import_db(db, str(older))  # the file's jobs are not newer (same times): kept
    assert st.jobs_added == 0 and st.jobs_replaced == 0
    assert {m.median_ms for m in query.measurements(db, query.Filters()) if m.layer_key == job.layer_key
            and m.precision == job.precision and m.status == "ok"} == {123.0}
    # make the file's copy newer: it replaces the database's
    con = sqlite3.connect(older)
    con.execute("update jobs set finished_at = '2099-01-01 00:00:00' where job = ?", (job.id,))
    con.commit()
    con.close()
    st = sharing.import_db(db, str(older))
    assert st.jobs_replaced == 1
    assert 123.0 not in {m.median_ms for m in query.measurements(db) if m.layer_key == job.layer_key}

    # a newer copy without a valid time (2026-11-28c: cuDNN's max pooling refused a cooperative launch under
    # an SM partition where it had measured the day before; the job itself finished "ok") does not replace a
    # job that measured
    con = sqlite3.connect(older)
    con.execute("update jobs set finished_at = '2099-06-01 00:00:00' where job = ?", (job.id,))
    con.execute("update measurements set status = 'failed', median_ms = NULL where layer_key = ? and precision = ?",
                (job.layer_key, job.precision))
    con.commit()
    con.close()
    before = {m.median_ms for m in query.measurements(db) if m.layer_key == job.layer_key and m.status == "ok"}
    st = sharing.import_db(db, str(older))
    assert st.jobs_replaced == 0 and st.jobs_kept >= 1
    assert before and {m.median_ms for m in query.measurements(db) if m.layer_key == job.layer_key
                       and m.status == "ok"} == before


def _runner(url, folder, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.Popen([sys.executable, "-c", "from benanza.cli import main; main()", "run", str(folder),
                             "--db", url, "--quiet"], env=e, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def test_concurrent_writers_lose_and_duplicate_nothing(backend_url, tmp_path, models):
    """Four `benanza run` processes at once into one database: two measure the same suite (the same
    jobs, racing), two measure other systems; every job ends up stored exactly once."""
    g = make_fake_suite(tmp_path / "g", models / "googlenet.onnx", (1,), ("fp32", "fp16"))
    r = make_fake_suite(tmp_path / "r", models / "resnet50.onnx", (1,), ("fp32",))
    open_db(backend_url)  # create the schema first, as a team does once
    procs = [_runner(backend_url, g, {"FAKE_SUITE_GPU": "GPU A"}), _runner(backend_url, g, {"FAKE_SUITE_GPU": "GPU A"}),
             _runner(backend_url, r, {"FAKE_SUITE_GPU": "GPU B"}), _runner(backend_url, g, {"FAKE_SUITE_GPU": "GPU C"})]
    for p in procs:
        _, errs = p.communicate(timeout=300)
        assert p.returncode == 0, errs
    db = open_db(backend_url)
    nj = {"GPU A": len(load_suite(g).jobs), "GPU B": len(load_suite(r).jobs), "GPU C": len(load_suite(g).jobs)}
    with db.session() as s:
        for sysrow in db.systems():
            jobs = s.scalars(sa.select(JobRow.job).where(JobRow.system_id == sysrow.id)).all()
            assert len(jobs) == len(set(jobs)) == nj[sysrow.gpu_name]
        dup = s.execute(sa.select(Measurement.system_id, Measurement.layer_key, Measurement.precision, Measurement.call,
                                  Measurement.algorithm, Measurement.cache, sa.func.count()).group_by(
            Measurement.system_id, Measurement.layer_key, Measurement.precision, Measurement.call, Measurement.algorithm,
            Measurement.cache).having(sa.func.count() > 1)).all()
        assert dup == []
        # every job has its measurements: 2 algorithms x (warm, cold) + 1 not supported for convs
        per_job = dict(s.execute(sa.select(JobRow.job, sa.func.count(Measurement.id)).join(
            Measurement, sa.and_(Measurement.system_id == JobRow.system_id, Measurement.layer_key == JobRow.layer_key,
                                 Measurement.precision == JobRow.precision)).group_by(JobRow.id, JobRow.job)).all())
    assert all(v >= 2 for v in per_job.values())


def test_killed_writer_leaves_a_consistent_database(backend_url, tmp_path, models):
    g = make_fake_suite(tmp_path / "g", models / "googlenet.onnx", (1,), ("fp32",))
    log = tmp_path / "log"
    p = _runner(backend_url, g, {"FAKE_SUITE_SLOW": "0.03", "FAKE_SUITE_LOG": str(log)})
    deadline = time.time() + 120
    while time.time() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 20):
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    db = open_db(backend_url)
    with db.session() as s:
        jobs = s.execute(sa.select(JobRow.layer_key, JobRow.precision)).all()
        assert 10 <= len(jobs) < len(load_suite(g).jobs)
        for key, prec in jobs:  # whole jobs only
            assert s.scalar(sa.select(sa.func.count()).select_from(Measurement).where(
                Measurement.layer_key == key, Measurement.precision == prec)) >= 2
        orphans = s.scalar(sa.select(sa.func.count()).select_from(Measurement).where(~sa.exists().where(
            JobRow.layer_key == Measurement.layer_key, JobRow.precision == Measurement.precision)))
        assert orphans == 0
    if backend_url.startswith("sqlite"):
        con = sqlite3.connect(backend_url[len("sqlite:///"):])
        assert con.execute("pragma integrity_check").fetchone()[0] == "ok"
        con.close()
    # and the next run finishes the job list
    assert _fill(backend_url, g).ok == len(load_suite(g).jobs) - len(jobs)


def test_cli_db_commands(tmp_path, suites):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    _fill(url, suites["googlenet"])

    def bz(*a):
        return subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", *map(str, a)],
                               capture_output=True, text=True)

    import csv
    import io

    j = records_of(bz("db", "query", "--db", url, "--kind", "Gemm", "--format", "json").stdout, "db query")
    assert j and {r["kind"] for r in j} == {"Gemm"} and "median_ms" in j[0]
    c = list(csv.DictReader(io.StringIO(bz("db", "query", "--db", url, "--best", "--dtype", "fp16", "--format",
                                              "csv").stdout)))
    assert c and all(r["precision"] == "fp16" for r in c)
    assert "googlenet" in bz("db", "shared", "googlenet", "--db", url).stdout
    assert "Fake GPU" in bz("db", "systems", "--db", url).stdout
    exp = tmp_path / "e.sqlite"
    assert bz("db", "export", "-o", exp, "--db", url).returncode == 0
    r = bz("db", "import", exp, "--db", f"sqlite:///{tmp_path / 'q.db'}", "--json")
    assert envelope_of(r.stdout, "db import")["jobs_added"] == len(load_suite(suites["googlenet"]).jobs)
    bad = bz("db", "query", "--db", url, "--sort", "nope")
    assert bad.returncode == 2 and bad.stderr.startswith("benanza: cannot sort by")
    assert bz("db", "export", "-o", exp, "--db", url).returncode == 2  # exists


def test_import_carries_the_ceilings(suites, tmp_path):
    """`benanza ceilings` results travel with `db import` (per system and name, the newer wins)."""
    src_url = f"sqlite:///{tmp_path / 'src.db'}"
    _fill(src_url, suites["resnet50"], gpu="GPU C")
    src = open_db(src_url)
    sid = src.systems()[0].id
    row = {"name": "dram_bandwidth", "unit": "bytes/s", "value": 3.9e12, "work": 2.0 * 2 ** 30,
           "median_ms": 0.55, "rse": 0.001, "samples": 50, "converged": True, "method": "graph"}
    src.write_ceilings(sid, [row])
    dst = open_db(f"sqlite:///{tmp_path / 'dst.db'}")
    st = sharing.import_db(dst, str(tmp_path / "src.db"))
    assert st.ceilings_written == 1
    got = dst.ceilings(dst.systems()[0].id)
    assert got["dram_bandwidth"].value == 3.9e12
    # again: nothing newer, nothing written
    assert sharing.import_db(dst, str(tmp_path / "src.db")).ceilings_written == 0


def test_import_and_export_carry_the_kernel_counters(suites, tmp_path):
    """`bench --counters` results travel with `db import` and `db export` (per implementation and
    kernel, the newer wins); an export restricted to other configs leaves them out."""
    from benanza.database.counters import read_counters, write_counters

    src_url = f"sqlite:///{tmp_path / 'src.db'}"
    _fill(src_url, suites["resnet50"], gpu="GPU C")
    src = open_db(src_url)
    sid = src.systems()[0].id
    from benanza.database.store import LayerConfigRow
    with src.engine.connect() as c:
        keys = sorted(c.scalars(sa.select(LayerConfigRow.key)))
    key = keys[0]
    kernels = [{"kernel_index": i, "kernel_name": f"k{i}<half>", "block_size": "(128, 1, 1)", "grid_size": "(64, 1, 1)",
                "dram_pct": 70.0 + i, "dram_bytes": 1e6, "sm_pct": 30.0, "occupancy_pct": 50.0, "duration_ns": 2000.0}
               for i in range(2)]
    impl = (key, "fp16", "cudnnBackendExecute", "eng41", "tensor_op", "NCHW")
    write_counters(src, sid, impl, kernels, tool="ncu 2025.3.1")
    dst = open_db(f"sqlite:///{tmp_path / 'dst.db'}")
    assert sharing.import_db(dst, str(tmp_path / "src.db")).counters_written == 2
    got = read_counters(dst, dst.systems()[0].id, [key])[impl]
    assert [(k.kernel_name, k.dram_pct) for k in got] == [("k0<half>", 70.0), ("k1<half>", 71.0)]
    assert sharing.import_db(dst, str(tmp_path / "src.db")).counters_written == 0  # nothing newer
    assert sharing.export(src, tmp_path / "all.db").counters_written == 2
    other = keys[1:2]
    assert sharing.merge(open_db(f"sqlite:///{tmp_path / 'some.db'}"), src, keys=other).counters_written == 0


def test_an_nhwc_job_merges_beside_the_nchw_job(tmp_path, models):
    """The GPU workflow measures NCHW and NHWC into separate files and merges them: importing the
    channels-last jobs must keep the NCHW measurements and heuristic choices of the same configs
    (it deleted them: the unit of a merge is a job, and a job is one layout)."""
    nchw = make_fake_suite(tmp_path / "a", models / "resnet50.onnx", (1,), ("fp16",))
    nhwc = make_fake_suite(tmp_path / "b", models / "resnet50.onnx", (1,), ("fp16",), layouts=["NHWC"])
    dst_url, src_url = f"sqlite:///{tmp_path / 'dst.db'}", f"sqlite:///{tmp_path / 'src.db'}"
    _fill(dst_url, nchw)
    _fill(src_url, nhwc)
    dst, src = open_db(dst_url), open_db(src_url)

    def rows(db):
        out = {}
        for m in query.measurements(db, query.Filters()):
            out.setdefault(m.layout, set()).add((m.layer_key, m.call, m.algorithm, m.cache, m.median_ms))
        return out

    def choices(db):
        with db.session() as s:
            return s.query(sa.func.count()).select_from(sa.table("choices")).scalar()

    before, n_choices = rows(dst), choices(dst)
    assert set(before) == {"NCHW"} and n_choices > 0
    st = sharing.import_db(dst, src_url.removeprefix("sqlite:///"))
    assert st.jobs_added == len(load_suite(nhwc).jobs) and st.jobs_replaced == 0
    after = rows(dst)
    assert after["NCHW"] == before["NCHW"]
    assert after["NHWC"] == rows(src)["NHWC"]
    assert choices(dst) == n_choices
    # and the other way round: NCHW jobs into a database of NHWC jobs
    sharing.import_db(src, str(tmp_path / "dst.db"))
    assert rows(src) == after
