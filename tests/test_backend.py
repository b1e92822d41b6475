"""The backend as a typed value (benanza.kinds.backend.Backend, issue 52 item 4): the suite's calls and
the framework's own kernels are told apart by ``measurements.backend`` (schema 7), never by the text of
a call's name. An old (schema 6) database reads with the right backend per row after the upgrade, a
record of each backend round-trips through the database and an export, and no module but the one that
defines the names tests a call's or a job's name for its backend."""
import ast
import gzip
import shutil
import sqlite3
import subprocess
import sys

import pytest
import sqlalchemy as sa

from benanza import kinds as L
from benanza.database import query
from benanza.database.records import ChoiceLine, MeasurementLine, RecordError
from benanza.database.store import SCHEMA_VERSION, Measurement, migrations_dir, open_db
from benanza.generation.generator import job_backend, job_id
from benanza.kinds.backend import Backend
from benanza.kinds.base import JobId
from conftest import REPO

TRUTH = REPO / "db" / "reference" / "h200_truth.sqlite.gz"
CFG = L.ActivationConfig((2, 8), "relu")


def _alembic(conn):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["connection"] = conn
    return cfg


def _line(call: str, ms: float, **kw) -> MeasurementLine:
    return MeasurementLine.from_json({"type": "measurement", "call": call, "algorithm": "a", "math": "none",
                                      "dtype": "float16", "cache": "warm", "status": "ok", "median_ms": ms,
                                      "q1_ms": ms, "q3_ms": ms, "samples": 10, "converged": True, **kw})


# ------------------------------------------------------------------------------- the value itself

def test_each_backend_names_its_calls_and_jobs_and_maps_them_back():
    for b in Backend:
        assert Backend.parse(b.value) is b and str(b) == b.value
        assert Backend.of_call(b.call_name("aten::relu")) is b
        jid = JobId(CFG.key, "fp16", "NHWC", b)
        assert JobId.parse(str(jid)) == jid and job_backend(str(jid)) is b
        assert jid.framework == b.framework and jid.source == b.source
    assert Backend.TORCH_EAGER.call_name("aten::conv2d") == "torch:aten::conv2d"  # the names users see
    assert str(JobId(CFG.key, "fp16").as_framework()) == job_id(CFG, "fp16") + ".torch"
    assert [b for b in Backend if not b.framework] == [Backend.SUITE]
    assert Backend.of_source("library") == (Backend.SUITE,)
    assert set(Backend.of_source("framework")) == {Backend.TORCH_EAGER, Backend.TORCH_COMPILE}
    with pytest.raises(ValueError, match="unknown backend 'torch'"):
        Backend.parse("torch")


def test_a_line_says_its_backend_or_takes_its_calls():
    assert _line("cudnnActivationForward", 0.1).backend is Backend.SUITE  # the suite says "suite" too
    assert _line("torch:aten::relu", 0.1).backend is Backend.TORCH_EAGER  # a line of an older worker
    assert _line("torch:aten::relu", 0.1, backend="torch_compile").backend is Backend.TORCH_COMPILE
    with pytest.raises(RecordError, match="'backend' is 'cuda'.*one of suite, torch_eager, torch_compile"):
        _line("x", 0.1, backend="cuda")


# ------------------------------------------------------------------------- (b) a round trip each

def test_a_record_of_each_backend_round_trips_through_the_database_and_an_export(tmp_path):
    db = open_db(f"sqlite:///{tmp_path / 'p.db'}")
    sid = db.upsert_system({"gpu_name": "G", "compute_capability": "9.0", "sm_count": 1})
    db.upsert_configs([CFG])
    calls = {b: b.call_name("cudnnActivationForward" if b is Backend.SUITE else "aten::relu") for b in Backend}
    choice = ChoiceLine.from_json({"type": "choice", "source": "h", "rank": 0, "algorithm": "x", "math": "none",
                                   "status": "ok"})
    for i, b in enumerate(Backend):
        jid = str(JobId(CFG.key, "fp16", backend=b))
        db.write_job(sid, None, jid, CFG.key, "fp16", "ok", "", [_line(calls[b], 0.01 * (i + 1), backend=b.value),
                                                                 choice])
    assert len(db.choices(sid, [CFG.key])) == 1  # the suite's job's: a framework job stores none
    rows = db.measurements(sid, [CFG.key])
    assert {(m.call, m.backend) for m in rows} == {(c, b) for b, c in calls.items()}
    assert all(type(m.backend) is Backend for m in rows)
    with sqlite3.connect(tmp_path / "p.db") as con:  # stored as the value, in a column of its own
        assert dict(con.execute("select call, backend from measurements")) == {c: b.value for b, c in calls.items()}
    # each job owns its backend's rows: measuring one again replaces its row only
    db.write_job(sid, None, str(JobId(CFG.key, "fp16")), CFG.key, "fp16", "ok", "",
                 [_line(calls[Backend.SUITE], 0.5), choice])
    got = {m.backend: m.median_ms for m in db.measurements(sid, [CFG.key])}
    assert got == {Backend.SUITE: 0.5, Backend.TORCH_EAGER: 0.02, Backend.TORCH_COMPILE: 0.03}
    # the sources of the one serving rule read the column
    for source, want in (("library", {Backend.SUITE}), ("framework", {Backend.TORCH_EAGER, Backend.TORCH_COMPILE})):
        best = query.best_per_config(db, sid, "fp16", keys=[CFG.key], source=source)[CFG.key]
        assert best.backend in want and best.median_ms == min(v for k, v in got.items() if k in want)
        assert query.Serves("fp16", source=source)(best) and "backend" not in best.to_dict()
    # an export carries the column, and the suite job's choices with it
    from benanza.database.sharing import export

    export(db, tmp_path / "x.db")
    x = open_db(str(tmp_path / "x.db"), create=False)
    assert {(m.call, m.backend, m.median_ms) for m in x.measurements(sid, [CFG.key])} == \
        {(c, b, got[b]) for b, c in calls.items()}
    assert [(c.source, c.algorithm) for c in x.choices(sid, [CFG.key])] == [("h", "x")]


# ------------------------------------------------------------------------ (a) an old database

def _schema6_database(path) -> None:
    """A database as benanza wrote it at schema 6 (no backend column): rows of the suite and of the
    framework's kernels, told apart only by the ``torch:`` prefix of their call."""
    eng = sa.create_engine(f"sqlite:///{path}")
    with eng.begin() as conn:
        from alembic import command

        command.upgrade(_alembic(conn), "0006")
        conn.execute(sa.text("INSERT INTO systems (id, fingerprint, gpu_name, compute_capability, sm_count, "
                             "memory_bytes, l2_cache_bytes, memory_bus_width_bits, max_sm_clock_mhz, max_mem_clock_mhz, "
                             "driver_version, driver_cuda_version, runtime_version, cudnn_version, cublas_version, info, "
                             "created_at) VALUES (1, 'f', 'G', '9.0', 1, 0, 0, 0, 0, 0, '', 0, 0, 0, 0, '{}', '2026-01-01')"))
        conn.execute(sa.text("INSERT INTO layer_configs (key, kind, params, description, batch, flops) "
                             "VALUES (:k, 'Activation', '{}', 'relu', 2, 16)"), {"k": CFG.key})
        for i, call in enumerate(("cudnnActivationForward", "torch:aten::relu", "Torch:not_a_framework_call",
                                  "cublasLtMatmul(torch:x)")):
            conn.execute(sa.text(
                "INSERT INTO measurements (system_id, layer_key, precision, call, algorithm, math, dtype, cache, "
                "layout, batch, status, message, note, median_ms, method, workspace_bytes, details, created_at) "
                "VALUES (1, :k, 'fp16', :c, 'a', 'none', 'float16', 'warm', 'NCHW', 2, 'ok', '', '', :ms, '', 0, "
                "'', '2026-01-01')"), {"k": CFG.key, "c": call, "ms": 0.01 * (i + 1)})
    eng.dispose()


def test_a_schema_6_database_reads_with_each_rows_backend_after_the_upgrade(tmp_path):
    old = tmp_path / "v6.db"
    _schema6_database(old)
    with sqlite3.connect(old) as con:
        assert "backend" not in [r[1] for r in con.execute("pragma table_info(measurements)")]
    want = {"cudnnActivationForward": Backend.SUITE, "torch:aten::relu": Backend.TORCH_EAGER,
            "Torch:not_a_framework_call": Backend.SUITE, "cublasLtMatmul(torch:x)": Backend.SUITE}
    before = old.read_bytes()
    db = open_db(str(old), create=False)  # every reading command's open: a source, read through an upgraded copy
    assert db.notices and "0006" in db.notices[0]
    got = {m.call: m.backend for m in db.measurements(1, [CFG.key])}
    assert got == want
    assert got == {c: Backend.of_call(c) for c in got}  # the migration's rule is Backend.of_call's
    db.engine.dispose()
    assert old.read_bytes() == before  # the source itself is unchanged
    db = open_db(str(old), create=False, read_only=False)  # `benanza db upgrade`: in place
    assert db.notices and "from revision 0006 to 0007" in db.notices[0]
    assert {m.call: m.backend for m in db.measurements(1, [CFG.key])} == want
    db.engine.dispose()
    with sqlite3.connect(old) as con:
        assert con.execute("select value from schema_info").fetchone()[0] == str(SCHEMA_VERSION) == "7"
    assert open_db(str(old)).notices == []  # once


def _downgraded_truth(tmp_path):
    """The shipped truth database (PyTorch eager rows beside the suite's) taken back to schema 6."""
    path = tmp_path / "truth.sqlite"
    with gzip.open(TRUTH) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with sqlite3.connect(path) as con:
        before = con.execute("select id, call, backend from measurements order by id").fetchall()
    eng = sa.create_engine(f"sqlite:///{path}")
    with eng.begin() as conn:
        from alembic import command

        command.downgrade(_alembic(conn), "0006")
    eng.dispose()
    return path, before


def test_the_shipped_database_at_schema_6_upgrades_to_the_same_backends(tmp_path):
    """The truth database as it shipped before schema 7, upgraded by `benanza db upgrade`: every row's
    backend is the one the shipped (refreshed) copy holds, and the framework's rows are there."""
    path, shipped = _downgraded_truth(tmp_path)
    with sqlite3.connect(path) as con:
        assert "backend" not in [r[1] for r in con.execute("pragma table_info(measurements)")]
        assert con.execute("select value from schema_info").fetchone()[0] == "6"
    p = subprocess.run([sys.executable, "-m", "benanza", "db", "upgrade", "--db", str(path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with sqlite3.connect(path) as con:
        after = con.execute("select id, call, backend from measurements order by id").fetchall()
    assert after == shipped
    eager = [r for r in after if r[2] == "torch_eager"]
    assert eager and all(r[1].startswith("torch:aten::") for r in eager)
    assert len(eager) == sum(1 for r in after if Backend.of_call(r[1]) is Backend.TORCH_EAGER) < len(after)


# --------------------------------------------------------------- (c) one module knows the names

#: the string methods and SQL operators that test a text for a part of it
_TESTS = {"startswith", "endswith", "removeprefix", "removesuffix", "find", "rfind", "index", "rindex", "split",
          "rsplit", "partition", "rpartition", "like", "not_like", "ilike", "not_ilike", "contains", "regexp_match"}
#: the old names of the prefix and the suffix, and Backend's own (its module's business)
_NAMES = {"FRAMEWORK_CALL_PREFIX", "FRAMEWORK_JOB_SUFFIX", "CALL_PREFIX", "call_prefix", "job_suffix"}
_BARE = {b.call_prefix for b in Backend if b.framework} | {b.job_suffix for b in Backend if b.framework}


def _names_backend_text(node) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(tuple(_BARE)):
            return True
        if isinstance(n, ast.Name) and n.id in _NAMES or isinstance(n, ast.Attribute) and n.attr in _NAMES:
            return True
    return False


def backend_name_tests(source: str) -> list[int]:
    """Lines of ``source`` that test a text against a backend's name: a string test (:data:`_TESTS`)
    or a ``in`` of a literal that begins with a prefix or suffix or of their names, a comparison with a bare prefix
    or suffix (``call[:6] == "torch:"``), or a ``LIKE`` pattern of one."""
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _TESTS and \
                any(_names_backend_text(a) for a in n.args):
            out.append(n.lineno)
        elif isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in n.ops) and _names_backend_text(n.left) or \
                    any(isinstance(s, ast.Constant) and s.value in _BARE for s in sides):
                out.append(n.lineno)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and any(f"{b}%" in n.value for b in _BARE):
            out.append(n.lineno)
    return sorted(set(out))


def test_the_name_test_finds_what_the_modules_did():
    """The check catches each way the modules told the backends apart before schema 7 (8281073)."""
    for src in ('x = m.call.startswith(FRAMEWORK_CALL_PREFIX)', 'x = impl.call.startswith("torch:")',
                'x = Measurement.call.like(FRAMEWORK_CALL_PREFIX + "%")', 'x = str(j).endswith(FRAMEWORK_JOB_SUFFIX)',
                'x = "torch:" in call', 'x = call[:6] == "torch:"', 'q = "call LIKE \'torch:%\'"',
                'x = t.endswith(".torch")'):
        assert backend_name_tests(src) == [1], src
    for src in ('c = Candidate("torch:aten::relu", "default", fn, n)', 'x = m.call == call',
                'x = m.backend.framework', 'import torch', 'x = name.startswith("aten::")',
                'x = "torch" in sys.modules'):
        assert backend_name_tests(src) == [], src


def test_only_the_backend_module_tells_backends_apart_by_name():
    pkg = REPO / "benanza"  # the source tree (CI imports the installed copy of it)
    found = [f"{p.relative_to(REPO)}:{line}" for p in sorted(pkg.rglob("*.py")) if p != pkg / "kinds" / "backend.py"
             for line in backend_name_tests(p.read_text())]
    assert not found, "test the backend field (benanza.kinds.backend.Backend), not a name:\n" + "\n".join(found)
    assert backend_name_tests((pkg / "kinds" / "backend.py").read_text())  # the mapping lives there


def test_the_column_is_the_models_and_the_migrations():
    col = Measurement.__table__.c.backend
    assert not col.nullable and col.type.length == 16 and col.type.enum_class is Backend


def test_a_row_written_without_a_backend_takes_its_calls(tmp_path):
    """Hand-made rows (the ORM, no backend given) follow the rule old databases were upgraded by."""
    db = open_db(f"sqlite:///{tmp_path / 'p.db'}")
    sid = db.upsert_system({"gpu_name": "G", "compute_capability": "9.0", "sm_count": 1})
    db.upsert_configs([CFG])
    with db.session() as s:
        for call in ("torch:aten::relu", "cudnnActivationForward"):
            s.add(Measurement(system_id=sid, layer_key=CFG.key, precision="fp16", call=call, algorithm="a",
                              math="none", dtype="float16", cache="warm", batch=2, status="ok", median_ms=0.1))
    got = {m.call: m.backend for m in db.measurements(sid, [CFG.key])}
    assert got == {"torch:aten::relu": Backend.TORCH_EAGER, "cudnnActivationForward": Backend.SUITE}
