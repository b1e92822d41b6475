"""Fault injection (issue 53): what the project keeps running so that nothing is lost, nothing rewritten.

(a) ``db import`` killed at random points (SIGKILL and SIGINT, a fixed seed), into an existing
    database from a plain source and from a compressed one with an empty cache: the database passes
    ``PRAGMA integrity_check`` and holds the old content or the whole new one (row counts); no
    temporary file is left beside it or in the cache (a SIGKILLed unpack's is removed by the next
    use); SIGINT ends the process within 5 s. ``db export`` killed likewise: its output is absent or
    the whole export, a SIGKILLed export's hidden temporary file is removed by the next export into
    the folder. ``run`` (the runner's writes, as ``bench`` makes them) killed likewise: each job is
    stored whole or not at all, nothing stored before is lost, the next run completes the rest.
    Write faults (the disk full, as SQLite says it) injected at random statements of an import roll
    it back whole.
(b) Every command that reads a source database (analyze, roofline, predict, db systems, db export,
    db import SRC, db compare) leaves its bytes as they were (sha256 before and after), and nothing
    beside it.
(c) 16 processes' concurrent first use of every shipped ``db/reference/*.sqlite.gz`` with an empty
    cache (`benanza db systems`, forked from one server that imported benanza: seconds, not minutes,
    on two cores) all exit 0 with the same output.

(d) A PostgreSQL server that accepts and never answers: every command that opens a database (analyze,
    db systems, db import into it and from it, db export) prints one line within
    ``BENANZA_CONNECT_TIMEOUT`` (2 s here) and exits 3.
(e) Ctrl-C (SIGINT) a quarter second into each long-ish command (analyze, layers, predict, roofline,
    generate, bench, run, db import, db export, a db import waiting for a silent server; torch when
    installed): exit 130 within 5 s, one line, no traceback, nothing left.

The counts (kills, faults injected, inputs tried, lost, changed sources, hangs) are printed at the end
of the module (and written to ``$BENANZA_FAULTS_JSON`` when set)."""
import contextlib
import gzip
import hashlib
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from benanza.database.store import reference_digest
from conftest import REPO

REF = REPO / "db" / "reference"
SHIPPED = sorted(REF.glob("*.sqlite.gz"))
MODEL = REPO / "examples" / "resnet50.onnx"
SEED = 53
COUNTS = {"kills": 0, "sigkill": 0, "sigint": 0, "faults": 0, "inputs": 0, "lost": 0, "changed_sources": 0,
          "hangs": 0}
TABLES = ("systems", "layer_configs", "jobs", "measurements", "choices", "models", "model_configs")


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    yield
    line = "benanza fault injection: " + ", ".join(f"{k} {v}" for k, v in COUNTS.items())
    rep = request.config.pluginmanager.get_plugin("terminalreporter")
    cap = request.config.pluginmanager.get_plugin("capturemanager")
    if rep is not None:
        with cap.global_and_fixture_disabled() if cap is not None else contextlib.nullcontext():
            rep.write_line(line)  # shown with or without -s
    if os.environ.get("BENANZA_FAULTS_JSON"):
        Path(os.environ["BENANZA_FAULTS_JSON"]).write_text(json.dumps(COUNTS))


def gunzipped(gz: Path, folder: Path) -> Path:
    out = folder / gz.name[:-3]
    with gzip.open(gz) as f, open(out, "wb") as o:
        shutil.copyfileobj(f, o)
    return out


def rows(path: Path) -> tuple:
    """(row counts of :data:`TABLES`, integrity_check) of a SQLite file, read and closed."""
    c = sqlite3.connect(path)
    try:
        return tuple(c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES), \
            c.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        c.close()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: the processes the tests start and kill: `benanza` (its entry point, :func:`benanza.cli.main`) in
#: processes forked from one server that imported benanza once (an interpreter's start and imports
#: take seconds of CPU each on two cores; the command's own work is what the faults hit)
CTX = mp.get_context("forkserver")
CTX.set_forkserver_preload(["benanza.cli", "benanza.database.sharing", "benanza.database.store"])


def _benanza(argv: list[str], cache: str, err: str, env: dict | None = None) -> None:
    """``benanza ARGV`` in this (forked) process: stdout to /dev/null, stderr to the file ``err``;
    ``env``: variables set first (the fork server's environment is the one it started with)."""
    os.environ.update(env or {})
    os.environ["XDG_CACHE_HOME"] = cache
    # imported before ``err`` exists, which tells the caller the command runs: a fork server another test
    # module of the session started has not imported benanza (its preload is this module's), and a
    # Ctrl-C while the modules load is the entry point's case (test_ctrl_c_while_python_m_benanza_loads...)
    from benanza.cli import main

    null, log = os.open(os.devnull, os.O_WRONLY), os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(null, 1)
    os.dup2(log, 2)
    main(argv)


def bz(args, cache: Path, env: dict | None = None) -> tuple[int, str]:
    """``benanza ARGS`` to its end, forked as the faulted ones are: (exit code, stderr)."""
    err = cache.parent / f".err-{time.monotonic_ns()}"
    p = CTX.Process(target=_benanza, args=([str(a) for a in args], str(cache), str(err), env))
    p.start()
    p.join(300)
    text = err.read_text()
    err.unlink()
    return p.exitcode, text


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A gunzipped copy of the shipped h200 database, a smaller source (its googlenet records: the rows
    of the other models' configs deleted), a target with old content (6 jobs of another system) and
    the content a whole import gives."""
    from test_db_union import _base

    d = tmp_path_factory.mktemp("faults")
    h200 = gunzipped(REF / "h200.sqlite.gz", d)
    src = shutil.copy(h200, d / "googlenet.sqlite")
    with sqlite3.connect(src) as c:
        keep = "(SELECT layer_key FROM model_configs WHERE model_id IN (SELECT id FROM models WHERE name = 'googlenet'))"
        for t in ("jobs", "measurements", "choices", "kernel_counters"):
            c.execute(f"DELETE FROM {t} WHERE layer_key NOT IN {keep}")
        c.execute("DELETE FROM model_configs WHERE model_id NOT IN (SELECT id FROM models WHERE name = 'googlenet')")
        c.execute("DELETE FROM models WHERE name != 'googlenet'")
    c.close()
    _base(d / "old.db")
    whole = d / "whole.db"
    shutil.copy(d / "old.db", whole)
    rc, err = bz(["db", "import", src, "--db", whole], d / "cache")
    assert rc == 0, err
    return {"dir": d, "h200": h200, "src": src, "old": rows(d / "old.db"), "new": rows(whole)}


def _start_and_kill(args, ready, sig, delay: float, cache: Path, env: dict | None = None):
    """Start ``benanza ARGS``; once it runs (its stderr file made: the forked process has imported
    this module) and ``ready()`` (its work begun) wait ``delay`` s and send ``sig`` unless it ended; returns (exit code, stderr, whether it was signalled). A process still running
    5 s after SIGINT is a hang (counted, then killed)."""
    err = cache.parent / f".err-{time.monotonic_ns()}"
    p = CTX.Process(target=_benanza, args=([str(a) for a in args], str(cache), str(err), env))
    p.start()
    t0 = time.monotonic()
    while p.is_alive() and not (err.exists() and ready()) and time.monotonic() - t0 < 60:  # in benanza
        time.sleep(0.005)
    time.sleep(delay)
    killed = p.is_alive()
    if killed:
        os.kill(p.pid, sig)
        COUNTS["kills"] += 1
        COUNTS["sigkill" if sig == signal.SIGKILL else "sigint"] += 1
    p.join(5 if sig == signal.SIGINT else 60)
    if p.is_alive():
        COUNTS["hangs"] += 1
        p.kill()
        p.join()
    assert COUNTS["hangs"] == 0, f"benanza {' '.join(map(str, args))} still ran 5 s after {sig.name}"
    text = err.read_text() if err.exists() else ""
    err.unlink(missing_ok=True)
    return p.exitcode, text, killed


def _check_target(target: Path, w: dict) -> None:
    got = rows(target)  # SQLite recovers a killed writer's WAL here, and removes it on close
    assert got[1] == "ok", got
    if got not in (w["old"], w["new"]):
        COUNTS["lost"] += 1
    assert got in (w["old"], w["new"]), (got, w["old"], w["new"])
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # no -wal, -shm, journal, temp


def test_db_import_killed_at_random_points_leaves_the_old_or_the_whole_new_content(work, tmp_path):
    rng = random.Random(SEED)
    for i in range(8):
        sig = (signal.SIGKILL, signal.SIGINT)[i % 2]
        target = tmp_path / f"run{i}" / "target.db"
        target.parent.mkdir()
        shutil.copy(work["dir"] / "old.db", target)
        wal = Path(f"{target}-wal")
        rc, err, killed = _start_and_kill(["db", "import", work["src"], "--db", target], wal.exists, sig,
                                          rng.uniform(0, 1.5), tmp_path / "cache")
        assert "Traceback" not in err, err
        if killed and sig == signal.SIGINT:
            assert rc in (0, 130), err  # 130: interrupted, 0: it had just finished
        _check_target(target, work)


def test_a_compressed_source_killed_while_unpacking_leaves_no_temporary_file(work, tmp_path, monkeypatch):
    from benanza.database.store import open_db

    rng = random.Random(SEED + 1)
    gz = REF / "h200.sqlite.gz"
    for i in range(2):
        sig = (signal.SIGKILL, signal.SIGINT)[i % 2]
        cache = tmp_path / f"cache{i}"
        target = tmp_path / f"run{i}" / "target.db"
        target.parent.mkdir()
        shutil.copy(work["dir"] / "old.db", target)
        folder = cache / "benanza" / "db"
        rc, err, killed = _start_and_kill(["db", "import", gz, "--db", target], folder.exists, sig,
                                          rng.uniform(0, 1.0), cache)
        assert "Traceback" not in err, err
        got = rows(target)
        assert got[1] == "ok" and (got == work["old"] or (rc == 0 and not killed)), got
        if sig == signal.SIGKILL:  # its temporary file, if any, goes at the next use
            monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
            open_db(str(gz), create=False).engine.dispose()
        left = [p.name for p in folder.iterdir()] if folder.exists() else []
        assert not [n for n in left if n.endswith(".part") or n.startswith(".")], left


def test_db_export_killed_at_random_points_leaves_no_file_or_the_whole_export(work, tmp_path):
    """``db export`` (googlenet's records, about 5 s) killed at random points (SIGKILL, SIGINT),
    six exports into one folder: each output is absent or the whole export; SIGINT leaves nothing
    else; a SIGKILLed export's temporary file (hidden, ``.<name>.<random>.benanza-export``) is
    removed by the next export into the folder, never the file of one still running."""
    from benanza.database.sharing import EXPORT_TEMP_SUFFIX, remove_stale_exports

    rng = random.Random(SEED + 2)
    want = rows(work["src"])
    folder = tmp_path / "out"
    folder.mkdir()
    whole = set()
    for i, sig in enumerate((signal.SIGKILL, signal.SIGINT) * 3):
        out = folder / f"export{i}.db"
        started = lambda: any(folder.glob(f".{out.name}.*{EXPORT_TEMP_SUFFIX}"))  # noqa: E731
        rc, err, killed = _start_and_kill(["db", "export", "--db", work["src"], "-o", out], started, sig,
                                          rng.uniform(0, 3.0), tmp_path / "c")
        print(i, sig.name, killed, rc, out.exists())
        assert "Traceback" not in err, err
        if killed and sig == signal.SIGINT:
            assert rc in (0, 130), err
        if out.exists():
            got = rows(out)
            ok = got[1] == "ok" and got[0][2:4] == want[0][2:4]  # every job and measurement
            COUNTS["lost"] += not ok
            assert ok, got
            whole.add(out.name)
        left = {p.name for p in folder.iterdir()} - whole
        # the earlier kills' temporary files went when this export started; its own stays after SIGKILL
        assert all(n.startswith(f".{out.name}.") and sig == signal.SIGKILL for n in left), left
    remove_stale_exports(folder)  # what the next export into the folder does first
    assert {p.name for p in folder.iterdir()} == whole


# ------------------------------------------------------------------ run / bench: each job whole

#: the fake suite's time per job (s): a run of alexnet's 48 jobs takes seconds, long enough to be killed in
FAKE_SLOW_S = "0.3"
JOB_COLS = "j.job, j.layer_key, j.precision, j.status, j.message"
MEAS_COLS = "m.layer_key, m.precision, m.layout, m.call, m.algorithm, m.math, m.dtype, m.cache, m.status, m.median_ms"


def stored(path: Path) -> dict:
    """What a run stored, per system GPU name: its jobs and its measurements (without ids, run ids or
    times), sorted; and the integrity check."""
    c = sqlite3.connect(path)
    try:
        out = {"integrity": c.execute("PRAGMA integrity_check").fetchone()[0]}
        for gpu, in c.execute("SELECT gpu_name FROM systems").fetchall():
            out[gpu] = {
                "jobs": sorted(c.execute(f"SELECT {JOB_COLS} FROM jobs j JOIN systems s ON s.id = j.system_id "
                                         f"WHERE s.gpu_name = ?", (gpu,)).fetchall()),
                "measurements": sorted(c.execute(f"SELECT {MEAS_COLS} FROM measurements m JOIN systems s ON "
                                                 f"s.id = m.system_id WHERE s.gpu_name = ?", (gpu,)).fetchall())}
        return out
    finally:
        c.close()


@pytest.fixture(scope="module")
def runs(work, tmp_path_factory, models):
    """The fake suite (tests/fake_suite.py: the suite's protocol without a GPU) of alexnet in fp32 and
    fp16, and what a whole `benanza run` of it stores into a copy of the old target."""
    from conftest import make_fake_suite

    d = tmp_path_factory.mktemp("runs")
    suite = make_fake_suite(d / "suite", models / "alexnet.onnx", (1,), ("fp32", "fp16"))
    whole = d / "whole.db"
    shutil.copy(work["dir"] / "old.db", whole)
    rc, err = bz(["run", suite, "--db", whole], d / "cache", {"FAKE_SUITE_SLOW": "0"})
    assert rc == 0, err
    got = stored(whole)
    assert len(got["Fake GPU"]["jobs"]) == 48, got.keys()
    return {"suite": suite, "whole": got, "dir": d}


def _each_job_whole(got: dict, whole: dict, before: set) -> None:
    """A killed run's database: integrity ok, the old system's rows as they were, each of the run's
    jobs stored with every measurement the whole run gives it or absent with none, and every job a
    previous run stored still there."""
    assert got["integrity"] == "ok", got["integrity"]
    assert got["Union GPU"] == whole["Union GPU"]
    run, want = got.get("Fake GPU", {"jobs": [], "measurements": []}), whole["Fake GPU"]
    stored_keys = {(j[1], j[2]) for j in run["jobs"]}
    assert set(run["jobs"]) <= set(want["jobs"])
    ok = [m for m in want["measurements"] if (m[0], m[1]) in stored_keys] == run["measurements"] and \
        before <= set(run["jobs"])
    COUNTS["lost"] += not ok
    assert ok, (len(run["jobs"]), len(run["measurements"]))


def test_run_killed_at_random_points_stores_whole_jobs_and_loses_none(work, runs, tmp_path):
    """`benanza run` (the runner storing each job the worker finishes, :meth:`Database.write_job`, as
    `bench` does) killed at random points, SIGKILL and SIGINT, six times into one database with
    content of another system: each job is stored whole or not at all, nothing stored before is
    lost, SIGINT leaves no -wal or -shm beside the database, and the next run completes the rest."""
    rng = random.Random(SEED + 5)
    target = tmp_path / "db" / "target.db"
    target.parent.mkdir()
    shutil.copy(work["dir"] / "old.db", target)
    wal = Path(f"{target}-wal")
    before: set = set()
    env = {"FAKE_SUITE_SLOW": FAKE_SLOW_S}
    for i in range(6):
        sig = (signal.SIGKILL, signal.SIGINT)[i % 2]
        rc, err, killed = _start_and_kill(["run", runs["suite"], "--db", target], wal.exists, sig,
                                          rng.uniform(0, 1.5), tmp_path / "cache", env)
        assert "Traceback" not in err, err
        if sig == signal.SIGINT:
            assert rc in (0, 130), err
            assert sorted(p.name for p in target.parent.iterdir()) == [target.name], (i, rc, err)  # its WAL closed
        got = stored(target)  # (SQLite recovers a SIGKILLed writer's WAL here)
        _each_job_whole(got, runs["whole"], before)
        before = set(got.get("Fake GPU", {"jobs": []})["jobs"])
        print(i, sig.name, killed, rc, len(before))
    rc, err = bz(["run", runs["suite"], "--db", target], tmp_path / "cache", {"FAKE_SUITE_SLOW": "0"})
    assert rc == 0, err
    assert stored(target) == runs["whole"]  # the rest measured, nothing twice
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_write_faults_at_random_statements_roll_the_import_back(work, tmp_path):
    """The disk full (SQLite's SQLITE_FULL, raised at the Nth statement into the target) at 6 random
    points of an import: one line naming the file, the target as it was."""
    import sqlalchemy as sa

    from benanza.database import sharing
    from benanza.database.store import open_db
    from benanza.errors import DatabaseError

    rng = random.Random(SEED + 3)
    for i in range(6):
        target = tmp_path / f"t{i}.db"
        shutil.copy(work["dir"] / "old.db", target)
        n = {"left": rng.randint(5, 120)}

        def full(conn, cursor, statement, params, context, executemany):
            if conn.engine.url.database == str(target) and not statement.lstrip().upper().startswith(
                    ("SELECT", "PRAGMA")):
                n["left"] -= 1
                if n["left"] == 0:
                    raise sqlite3.OperationalError("database or disk is full")

        sa.event.listen(sa.engine.Engine, "before_cursor_execute", full)
        try:
            db = open_db(str(target))
            try:
                sharing.import_db(db, str(work["src"]))
                finished = True
            except DatabaseError as e:
                finished = False
                assert str(e).startswith(f"{target}: no space left on device (") and "\n" not in str(e), str(e)
                COUNTS["faults"] += 1
            db.engine.dispose()
        finally:
            sa.event.remove(sa.engine.Engine, "before_cursor_execute", full)
        got = rows(target)
        ok = got == (work["new"] if finished else work["old"])
        COUNTS["lost"] += not ok
        assert ok, (i, got)
    assert COUNTS["faults"] >= 3


# ------------------------------------------------------------------ (b) a source is never written

def _cli(*args):
    from typer.testing import CliRunner

    from benanza.cli import app

    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.stdout + r.stderr


def test_commands_that_read_a_source_never_change_its_bytes(work, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    h200 = shutil.copy(work["h200"], src / "h200.sqlite")
    pair = gunzipped(REF / "h100_h200_fp16.sqlite.gz", src)
    exp = tmp_path / "out" / "vgg16.db"
    exp.parent.mkdir()
    (tmp_path / "dst").mkdir()
    commands = [
        (h200, ["analyze", MODEL, "--batch", "1", "--dtype", "fp16", "--db", h200, "--json"]),
        (h200, ["roofline", MODEL, "--batch", "1", "--dtype", "fp16", "--db", h200]),
        (h200, ["predict", MODEL, "--batch", "1", "--dtype", "fp16", "--to", "A100", "--db", h200]),
        (h200, ["db", "systems", "--db", h200]),
        (h200, ["db", "export", "--db", h200, "--model", "vgg16", "-o", exp]),
        (pair, ["db", "compare", "1", "2", "--db", pair, "--dtype", "fp16"]),
        (exp, ["db", "import", exp, "--db", tmp_path / "dst" / "dst.db"]),
    ]
    for source, args in commands:
        before, beside = sha(source), sorted(p.name for p in source.parent.iterdir())
        rc, text = _cli(*args)
        COUNTS["inputs"] += 1
        assert rc == 0, (args, text)
        changed = sha(source) != before
        COUNTS["changed_sources"] += changed
        assert not changed, args
        assert sorted(p.name for p in source.parent.iterdir()) == beside, args  # no -wal, -shm left


# ------------------------------------------------------------------ (c) 16 first uses at once

def _first_use(gz: str, cache: str, barrier, q) -> None:
    """`benanza db systems --db GZ` once ``barrier`` lets all go: (exit code, output) to ``q``."""
    import contextlib
    import io

    os.environ["XDG_CACHE_HOME"] = cache
    from benanza.cli import main

    out = io.StringIO()
    barrier.wait(60)
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(["db", "systems", "--db", gz])
        except SystemExit as e:
            code = e.code or 0
    q.put((code, out.getvalue()))


@pytest.mark.parametrize("gz", SHIPPED, ids=[p.name for p in SHIPPED])
def test_sixteen_first_uses_of_a_shipped_database_at_once(gz, tmp_path):
    barrier, q = CTX.Barrier(16), CTX.Queue()
    ps = [CTX.Process(target=_first_use, args=(str(gz), str(tmp_path / "cache"), barrier, q)) for _ in range(16)]
    for p in ps:
        p.start()
    got = [q.get(timeout=120) for _ in ps]
    for p in ps:
        p.join(30)
    COUNTS["inputs"] += len(got)
    assert [c for c, _ in got] == [0] * 16, [t for c, t in got if c]
    assert len({t for _, t in got}) == 1  # the same systems for each
    unpacked = f"{gz.name[:-3]}-{reference_digest(gz)}.sqlite"
    left = {p.name for p in (tmp_path / "cache" / "benanza" / "db").iterdir()}
    assert left - {f"{unpacked}-wal", f"{unpacked}-shm"} == {unpacked}  # unpacked once, no temporary file


# ------------------------------------------------------------------ (d) a silent PostgreSQL server

def _silent_server() -> int:
    """A TCP server on 127.0.0.1 that accepts connections and never answers (for at most a
    minute, in a thread of this process); returns its port."""
    import socket
    import threading

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(32)
    s.settimeout(0.2)

    def serve():
        held, end = [], time.monotonic() + 60
        while time.monotonic() < end:
            with contextlib.suppress(OSError):
                held.append(s.accept()[0])
        for c in held:
            c.close()
        s.close()

    threading.Thread(target=serve, daemon=True).start()
    return s.getsockname()[1]


@pytest.fixture(scope="module")
def silent_pg():
    pytest.importorskip("psycopg")  # the `postgresql` extra's driver (pyproject.toml)
    return f"postgresql+psycopg://u:p@127.0.0.1:{_silent_server()}/x"


#: the bound the tests give (BENANZA_CONNECT_TIMEOUT; psycopg waits at least 2 s)
PG_BOUND_S = 2


def test_a_silent_postgresql_server_is_one_line_within_the_bound(work, silent_pg, tmp_path):
    """Every command that opens a database, given a PostgreSQL server that accepts and never
    answers (as a destination and as a source): one line ``benanza: ...`` naming the database and
    the wait, a non-zero exit, within BENANZA_CONNECT_TIMEOUT (2 s here) and the start; nothing left.
    The five run at once (each forked from the one server)."""
    (tmp_path / "out").mkdir()
    commands = [["analyze", MODEL, "--batch", "1", "--db", silent_pg],
                ["db", "systems", "--db", silent_pg],
                ["db", "import", work["src"], "--db", silent_pg],
                ["db", "import", silent_pg, "--db", tmp_path / "out" / "new.db"],
                ["db", "export", "--db", silent_pg, "-o", tmp_path / "out" / "e.db"]]
    env = {"BENANZA_CONNECT_TIMEOUT": str(PG_BOUND_S)}
    ps = []
    t0 = time.monotonic()
    for i, args in enumerate(commands):
        err = tmp_path / f".err{i}"
        p = CTX.Process(target=_benanza, args=([str(a) for a in args], str(tmp_path / "cache"), str(err), env))
        p.start()
        ps.append((args, p, err))
    for args, p, err in ps:
        p.join(PG_BOUND_S + 20)
        took = time.monotonic() - t0
        COUNTS["inputs"] += 1
        if p.is_alive():
            COUNTS["hangs"] += 1
            p.kill()
            p.join()
        assert COUNTS["hangs"] == 0, f"benanza {args[:2]} still waits for a silent server after {took:.0f} s"
        lines = err.read_text().strip().splitlines()
        assert p.exitcode == 3 and len(lines) == 1, (args, p.exitcode, lines)
        assert lines[0].startswith("benanza: cannot open database postgresql+psycopg://u:***@127.0.0.1:") and \
            f"did not answer within {PG_BOUND_S} s (BENANZA_CONNECT_TIMEOUT" in lines[0], lines
        assert took < PG_BOUND_S + 10, (args, took)  # (five at once on two cores, from the fork)
    assert list((tmp_path / "out").iterdir()) == []


# ------------------------------------------------------------------ (e) Ctrl-C stops every command

ZOO = REPO / "tests" / "data" / "zoo" / "models"
#: batch sizes that make the model commands work for seconds here
BATCHES = "1,2,4,8,16,32,64,128"
#: when the Ctrl-C comes, in seconds after the forked process started benanza (its modules loaded:
#: it is working); the shortest command here works for more than a second on two loaded cores
CTRL_C_AFTER_S = 0.25


def _ctrl_c_commands(work, runs, silent_pg, d: Path) -> dict:
    """Each long-ish command, working well past :data:`CTRL_C_AFTER_S` (its model processed in an empty
    cache, its database read or written, its jobs run): name ->
    (argv, extra environment). Without a GPU `bench` works until it looks for one (after processing its
    models and opening the database) and `run` runs the fake suite."""
    dn = ZOO / "densenet121.onnx"
    return {
        "analyze": (["analyze", dn, "-b", "1,32", "--dtype", "fp32,fp16", "--db", work["h200"]], {}),
        "layers": (["layers", dn, "-b", BATCHES], {}),
        "predict": (["predict", dn, "--to", "A100", "--db", work["h200"]], {}),
        "roofline": (["roofline", dn, "--db", work["h200"], "--svg", d / "roofline.svg", "--png", d / "r.png"], {}),
        "generate": (["generate", dn, "-b", BATCHES, "-o", d / "suite"], {}),
        "bench": (["bench", dn, "-b", BATCHES, "--db", d / "bench.db"], {}),
        "run": (["run", runs["suite"], "--db", d / "target.db"], {"FAKE_SUITE_SLOW": "0.3"}),
        "db import": (["db", "import", work["src"], "--db", d / "target.db"], {}),
        "db export": (["db", "export", "--db", work["src"], "-o", d / "export.db"], {}),
        "db import (silent PostgreSQL)": (["db", "import", silent_pg, "--db", d / "target.db"],
                                          {"BENANZA_CONNECT_TIMEOUT": "60"}),
    }


CTRL_C = ["analyze", "layers", "predict", "roofline", "generate", "bench", "run", "db import", "db export",
          "db import (silent PostgreSQL)", "torch"]


@pytest.mark.parametrize("name", CTRL_C)
def test_ctrl_c_stops_every_command_within_5_s(name, work, runs, silent_pg, tmp_path):
    """SIGINT a quarter second into each command (working: processing models, querying, writing,
    running jobs, waiting for a server): it ends within 5 s with exit 130 and one line on stderr,
    no traceback, and leaves nothing new but the database it was given (as it was, or with whole
    jobs) and the cache's own files."""
    if name == "torch":
        pytest.importorskip("torch", reason="torch is not installed (the `profile` extra): "
                                            "`benanza torch` cannot run here")
        args, env = ["torch", "torchvision:resnet50", "-b", "8", "--db", work["h200"]], {}
    else:
        d = tmp_path / "work"
        d.mkdir()
        args, env = _ctrl_c_commands(work, runs, silent_pg, d)[name]
    d = tmp_path / "work"
    d.mkdir(exist_ok=True)
    given = d / "target.db"
    if "target.db" in map(str, map(lambda a: Path(str(a)).name, args)):
        shutil.copy(work["dir"] / "old.db", given)
    before = sha(given) if given.exists() else None
    rc, err, killed = _start_and_kill(args, lambda: True, signal.SIGINT, CTRL_C_AFTER_S, tmp_path / "cache", env)
    assert killed, f"{name} ended before the Ctrl-C: give it more work"
    lines = err.strip().splitlines()
    assert rc == 130 and "Traceback" not in err, (rc, err)
    assert [ln for ln in lines if not ln.startswith("notice: ")] == [lines[-1]] and \
        lines[-1].startswith("benanza: interrupted"), err
    left = sorted(p.name for p in d.iterdir())
    assert left in ([], ["target.db"]), left  # no partial suite, export, chart, -wal or temporary file
    if given.exists() and name != "run":
        assert sha(given) == before  # an import stopped: the database as it was
    cache = tmp_path / "cache"
    junk = [p for p in cache.rglob("*") if p.name.startswith(".") or p.suffix in (".part", ".tmp")] \
        if cache.exists() else []
    assert not junk, junk


def test_ctrl_c_while_python_m_benanza_loads_is_one_line():
    """`python -m benanza` interrupted while it imports its modules (a real process, not forked from
    the preloaded server): exit 130, ``benanza: interrupted``, no traceback (it was Python's)."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-m", "benanza", "layers", str(MODEL)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(0.15)  # Python has started (tens of ms); benanza's imports take a second or more
    p.send_signal(signal.SIGINT)
    COUNTS["kills"] += 1
    COUNTS["sigint"] += 1
    try:
        out, err = p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        COUNTS["hangs"] += 1
        p.kill()
        p.communicate()
        raise
    assert p.returncode == 130 and err.strip().splitlines() == ["benanza: interrupted"], (p.returncode, err)


_DROPPED = """
import sys, time, weakref
from benanza.cli.app import _stop_on_ctrl_c
_stop_on_ctrl_c()

class Held:  # a pooled connection's stand-in: SQLAlchemy returns one to its pool in a weakref callback
    pass

def returned_to_pool():
    print("finalizer", flush=True)
    time.sleep(2)  # the Ctrl-C lands here: Python drops the KeyboardInterrupt raised in a finalizer

h = Held()
weakref.finalize(h, returned_to_pool)
try:
    del h  # the finalizer runs now, in the main thread
    t0 = time.monotonic()
    while time.monotonic() - t0 < 10:  # the command's work, which a dropped interrupt would not stop
        time.sleep(0.01)
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("unwound", flush=True)  # the command's own cleanup (its databases closed) ran
    sys.exit(130)
"""


def test_ctrl_c_dropped_by_a_finalizer_still_unwinds_the_command():
    """A Ctrl-C that lands in a finalizer or weakref callback (SQLAlchemy's pool returns connections in
    one) is dropped by Python; benanza raises it again in the main thread, so the command unwinds (its
    ``finally`` closes the database: no -wal or -shm stays) instead of running on until the grace
    period's hard exit, which closes nothing."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-c", _DROPPED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    assert p.stdout.readline().strip() == "finalizer"
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    out, err = p.communicate(timeout=8)
    took = time.monotonic() - t0
    assert p.returncode == 130 and out.strip() == "unwound", (p.returncode, out, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert took < 2.9, took  # the finalizer's sleep ended (2 s), not the grace period's exit (3 s)


def test_a_report_write_killed_leaves_a_temporary_file_the_next_write_removes(tmp_path):
    """``write_atomic`` (report --html, the torch reports, db export --format gbench/nvbench): a writer
    killed with SIGKILL between its temporary file and the rename leaves ``.NAME.RANDOM.tmp``; the next
    write of NAME removes it (its lock is gone), and keeps a temporary file whose writer still runs."""
    import subprocess
    import sys

    from benanza.database.exports import write_atomic

    out = tmp_path / "r.html"
    killed = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, tempfile, time; from benanza.database import exports as E\n"
        "real = os.replace\n"
        "os.replace = lambda a, b: (print(a, flush=True), time.sleep(60))\n"
        f"E.write_atomic(b'x' * 1000, {str(out)!r})")], stdout=subprocess.PIPE, text=True)
    left = Path(killed.stdout.readline().strip())
    killed.kill()
    killed.wait()
    COUNTS["kills"] += 1
    COUNTS["sigkill"] += 1
    assert left.exists() and left.name.startswith(".r.html.") and not out.exists()
    live = tmp_path / ".r.html.live.tmp"
    live.write_text("")
    holder = subprocess.Popen([sys.executable, "-c", (
        f"import fcntl, os, time; fd = os.open({str(live)!r}, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); "
        "print(1, flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        write_atomic(b"whole", out)
        assert out.read_bytes() == b"whole" and not left.exists() and live.exists()
        COUNTS["lost"] += out.read_bytes() != b"whole"
        assert sorted(p.name for p in tmp_path.iterdir()) == [".r.html.live.tmp", "r.html"]
    finally:
        holder.kill()
        holder.wait()
