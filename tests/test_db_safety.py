"""Data safety of the SQLite database (issue 17, item 5): concurrent first opens of one fresh file
all succeed; a failed command leaves no database file behind; a damaged file is refused in one line."""
import multiprocessing as mp
import subprocess
import sys

import pytest

from conftest import REPO

MODEL = REPO / "tests" / "data" / "zoo" / "models" / "resnet18.onnx"


def bz(*a, cwd=None):
    return subprocess.run([sys.executable, "-m", "benanza", *a], capture_output=True, text=True, cwd=cwd)


def _open(path, q):
    from benanza.database.store import open_db

    try:
        db = open_db(str(path), create=True)
        db.engine.dispose()
        q.put("ok")
    except Exception as e:  # noqa: BLE001 - the test reports it
        q.put(f"{type(e).__name__}: {e}")


def test_four_processes_open_one_fresh_database_at_once(tmp_path):
    """The second of two first opens failed with "table runs already exists"."""
    path = tmp_path / "fresh.db"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_open, args=(path, q)) for _ in range(4)]
    for p in ps:
        p.start()
    for p in ps:
        p.join(120)
    got = [q.get(timeout=5) for _ in ps]
    assert got == ["ok"] * 4, got


def test_a_failed_import_leaves_no_database(tmp_path):
    db = tmp_path / "new.db"
    r = bz("db", "import", str(tmp_path / "missing.db"), "--db", str(db))
    assert r.returncode != 0 and r.stderr.startswith("benanza: ")
    assert not db.exists() and not list(tmp_path.glob("new.db*"))


def test_a_failed_command_keeps_a_database_that_has_data(tmp_path):
    from benanza.database.store import discard_fresh, fresh_mark, open_db

    path = tmp_path / "kept.db"
    mark = fresh_mark()
    db = open_db(str(path), create=True)
    with db.engine.begin() as c:
        cols = [r for r in c.exec_driver_sql("PRAGMA table_info(systems)").fetchall() if r[3] and not r[5]]
        vals = ["'2026-01-01'" if "DATETIME" in r[2] else ("1" if "INT" in r[2] or "FLOAT" in r[2] else "'x'")
                for r in cols]
        c.exec_driver_sql(f"INSERT INTO systems ({', '.join(r[1] for r in cols)}) VALUES ({', '.join(vals)})")
    db.engine.dispose()
    assert discard_fresh(mark) == [] and path.exists()


def test_a_damaged_database_is_refused_in_one_line(tmp_path):
    from benanza.database.store import open_db

    path = tmp_path / "ok.db"
    open_db(str(path), create=True).engine.dispose()
    data = bytearray(path.read_bytes())
    # damage a page in the middle of the file (not the header): the schema's b-tree pages
    page = 4096
    assert len(data) > 3 * page
    data[2 * page + 8: 3 * page] = b"\xff" * (page - 8)
    path.write_bytes(bytes(data))
    r = bz("db", "systems", "--db", str(path))
    assert r.returncode != 0 and r.stderr.startswith("benanza: ") and len(r.stderr.strip().splitlines()) == 1
    assert "damaged" in r.stderr, r.stderr


def test_concurrent_imports_count_what_each_added(tmp_path):
    """Four imports of the same jobs at once each reported every job as added."""
    import json

    src = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"
    dst = tmp_path / "dst.db"
    bz("db", "systems", "--db", str(src))  # unpack the reference once, outside the race
    procs = [subprocess.Popen([sys.executable, "-m", "benanza", "db", "import", str(src), "--db", str(dst), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    stats = [json.loads(o) for o, _ in outs]
    import sqlite3

    con = sqlite3.connect(dst)
    n_jobs = con.execute("select count(*) from jobs").fetchone()[0]
    con.close()
    assert n_jobs > 0
    assert sum(s["jobs_added"] for s in stats) == n_jobs, stats
    assert all(s["jobs_added"] + s["jobs_replaced"] + s["jobs_kept"] == n_jobs for s in stats), stats


def test_an_unchanged_database_is_checked_once(tmp_path, monkeypatch):
    """PRAGMA quick_check (O(file size): 80 ms for 50 MB) runs at the first open of a file and again only
    once the file (or its -wal) changed; a damage written after a clean check is still refused."""
    from benanza.database import store

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    runs = []
    original_connect = store.sa.engine.Engine.connect

    def counting_connect(self, *a, **kw):
        conn = original_connect(self, *a, **kw)
        real_exec = conn.exec_driver_sql

        def exec_driver_sql(sql, *args, **kwargs):
            if "quick_check" in sql:
                runs.append(sql)
            return real_exec(sql, *args, **kwargs)

        conn.exec_driver_sql = exec_driver_sql
        return conn

    monkeypatch.setattr(store.sa.engine.Engine, "connect", counting_connect)
    path = tmp_path / "p.db"
    store.open_db(str(path), create=True).close()
    assert runs == []  # created here: nothing to check
    for _ in range(3):
        store.open_db(str(path), create=False).close()
    assert len(runs) == 1
    db = store.open_db(str(path), create=True)
    db.upsert_system({"gpu_name": "G", "compute_capability": "9.0", "sm_count": 1})
    db.close()
    store.open_db(str(path), create=False).close()
    assert len(runs) == 2  # written since: checked again
    data = bytearray(path.read_bytes())
    data[2 * 4096 + 8: 3 * 4096] = b"\xff" * (4096 - 8)
    path.write_bytes(bytes(data))
    with pytest.raises(store.DatabaseError, match="damaged"):
        store.open_db(str(path), create=False)
