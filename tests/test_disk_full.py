"""A full disk (issue 53, item 10): every writer leaves nothing partial and says so in one line
``benanza: <path>: no space left on device (...)``, exit non-zero, no traceback.

The disk is a real one that fills: a small tmpfs mounted in a mount namespace of the command's own
(``unshare -m``, as root: CI runs as root; the mount disappears with the process, nothing to clean
up), the command and the checks of what it left run inside it. Before the fix ``report --html`` left
a 0-byte file, ``generate`` a partial suite naming no file, ``db import`` into a new database a
database and its WAL; into an existing one it committed its first chunks. A second test fills the
disk by raising ENOSPC from ``os.write`` in this process (runs anywhere, no root)."""
import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benanza.database.store import open_db
from conftest import REPO

REF = REPO / "db" / "reference" / "h200.sqlite.gz"
MODEL = REPO / "examples" / "resnet50.onnx"

INSIDE = r'''
import json, os, sqlite3, subprocess, sys
spec = json.loads(sys.argv[1])
d = spec["dir"]
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={spec['size']}", "none", d], check=True)
for src, dst in spec["copy"]:
    subprocess.run(["cp", "-r", src, os.path.join(d, dst)], check=True)
if spec["fill"]:  # not a byte left
    fd = os.open(os.path.join(d, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        os.close(fd)
def counts(p):
    if not os.path.exists(p):
        return None
    c = sqlite3.connect(p)
    try:
        return [c.execute("SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM measurements), "
                          "(SELECT count(*) FROM models)").fetchone(), c.execute("PRAGMA integrity_check").fetchone()[0]]
    finally:
        c.close()
db = os.path.join(d, spec["db"]) if spec.get("db") else None
before = counts(db) if db else None
r = subprocess.run([sys.executable, "-m", "benanza", *spec["args"]], capture_output=True, text=True)
after = counts(db) if db else None
tree = sorted(os.path.relpath(os.path.join(p, n), d) for p, ds, fs in os.walk(d) for n in ds + fs)
print(json.dumps({"rc": r.returncode, "out": r.stdout, "err": r.stderr, "tree": tree, "before": before,
                  "after": after}))
'''


def _mount_namespace() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None and \
        subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


needs_tmpfs = pytest.mark.skipif(not _mount_namespace(), reason="a full disk (tmpfs) needs root and a mount "
                                 "namespace (unshare -m): CI runs as root")


def on_full_disk(folder: Path, size: str, args: list, copy=(), db: str | None = None, fill: bool = False) -> dict:
    """Run ``benanza ARGS`` with ``folder`` a tmpfs of ``size`` (``copy``: (source, name) put there
    first; ``fill``: then a file ``filler`` takes all the space left); what it printed, the files left
    in ``folder`` and, for ``db`` (a file there), its (jobs, measurements, models) counts and
    integrity_check before and after."""
    folder.mkdir(exist_ok=True)
    spec = {"dir": str(folder), "size": size, "copy": [(str(s), n) for s, n in copy], "db": db, "fill": fill,
            "args": [str(a) for a in args]}
    r = subprocess.run(["unshare", "-m", sys.executable, "-c", INSIDE, json.dumps(spec)], capture_output=True,
                       text=True, timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def one_line(res: dict, path) -> None:
    err = res["err"].strip()
    assert res["rc"] != 0 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith(f"benanza: {path}: no space left on device ("), err


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    """Two `analyze --json` documents (what `report` compares)."""
    d = tmp_path_factory.mktemp("docs")
    out = []
    for dtype in ("fp16", "fp32"):
        r = subprocess.run([sys.executable, "-m", "benanza", "analyze", MODEL, "--batch", "1", "--dtype", dtype,
                            "--db", REF, "--json"], capture_output=True, text=True, cwd=REPO)
        assert r.returncode == 0, r.stderr
        (d / f"{dtype}.json").write_text(r.stdout)
        out.append(d / f"{dtype}.json")
    return out


@needs_tmpfs
def test_report_html_on_a_full_disk_leaves_no_file(analyses, tmp_path):
    html = tmp_path / "full" / "cmp.html"
    res = on_full_disk(tmp_path / "full", "64k", ["report", *analyses, "--html", html], fill=True)
    one_line(res, html)
    assert res["tree"] == ["filler"]  # was: a 0-byte cmp.html


@needs_tmpfs
def test_generate_on_a_full_disk_leaves_no_partial_suite_and_names_the_file(tmp_path):
    suite = tmp_path / "full" / "suite"
    res = on_full_disk(tmp_path / "full", "256k", ["generate", MODEL, "--batch", "1", "-o", suite], fill=True)
    err = res["err"].strip()
    assert res["rc"] != 0 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"benanza: {suite}/") and ": no space left on device (" in err, err  # the file named
    assert res["tree"] == ["filler"]  # was: suite/ with its first sources


@needs_tmpfs
def test_db_import_into_a_new_database_on_a_full_disk_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    open_db(str(REF), create=False)  # the reference unpacked in the cache before (not on the full disk)
    new = tmp_path / "full" / "new.db"
    res = on_full_disk(tmp_path / "full", "768k", ["db", "import", REF, "--db", new])
    one_line(res, new)
    assert res["tree"] == []  # was: new.db and a 1 MB new.db-wal


@needs_tmpfs
def test_db_import_into_an_existing_database_on_a_full_disk_changes_nothing(tmp_path, monkeypatch):
    from test_db_union import _base

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    open_db(str(REF), create=False)
    _base(tmp_path / "old.db")
    res = on_full_disk(tmp_path / "full", "1m", ["db", "import", REF, "--db", tmp_path / "full" / "old.db"],
                       copy=[(tmp_path / "old.db", "old.db")], db="old.db")
    one_line(res, tmp_path / "full" / "old.db")
    assert res["before"][0] == [6, 18, 1] and res["after"] == res["before"]  # old content, integrity "ok"
    assert res["after"][1] == "ok" and res["tree"] == ["old.db"]


@needs_tmpfs
def test_a_full_cache_disk_is_said_so(tmp_path, monkeypatch):
    cache = tmp_path / "full"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    res = on_full_disk(cache, "64k", ["db", "systems", "--db", REF])
    one_line(res, cache / "benanza" / "db")  # was: "not a gzip-compressed database"
    assert "unpacking" in res["err"] and res["tree"] == ["benanza", "benanza/db"]


# ------------------------------------------------------------------ without root: ENOSPC from os.write

def _full_disk_in(monkeypatch, folder: Path, after: int = 0):
    """``os.write`` fails with ENOSPC for files under ``folder`` once ``after`` writes there succeeded."""
    real = os.write
    n = {"ok": 0}

    def write(fd, data):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            path = ""
        if path.startswith(str(folder)):
            if n["ok"] >= after:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            n["ok"] += 1
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


def _cli(*args):
    from typer.testing import CliRunner

    from benanza.cli import app

    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def test_generate_over_an_existing_suite_on_a_full_disk_keeps_it_as_it_was(tmp_path, monkeypatch):
    suite = tmp_path / "suite"
    assert _cli("generate", MODEL, "--batch", "1", "-o", suite)[0] == 0
    before = {p: p.read_bytes() for p in suite.rglob("*") if p.is_file()}
    _full_disk_in(monkeypatch, tmp_path, after=1)
    rc, out, err = _cli("generate", MODEL, "--batch", "2", "--dtype", "fp16", "-o", suite)
    assert rc == 1 and len(err.strip().splitlines()) == 1 and err.startswith(f"benanza: {suite}/"), err
    assert "no space left on device (ENOSPC; nothing was written)" in err
    assert {p: p.read_bytes() for p in suite.rglob("*") if p.is_file()} == before  # no temporary file either


def test_generate_into_a_new_folder_on_a_full_disk_leaves_nothing(tmp_path, monkeypatch):
    _full_disk_in(monkeypatch, tmp_path, after=3)
    rc, out, err = _cli("generate", MODEL, "--batch", "1", "-o", tmp_path / "a" / "suite")
    assert rc == 1 and err.startswith(f"benanza: {tmp_path}/a/suite/") and "no space left on device" in err, err
    assert list(tmp_path.iterdir()) == []  # no suite, no temporary folder, not even the folder a/ it made


def test_report_html_on_a_full_disk_leaves_nothing(analyses, tmp_path, monkeypatch):
    _full_disk_in(monkeypatch, tmp_path)
    html = tmp_path / "cmp.html"
    rc, out, err = _cli("report", *analyses, "--html", html)
    assert rc == 1 and err.strip() == f"benanza: {html}: no space left on device (ENOSPC; nothing was written)"
    assert list(tmp_path.iterdir()) == []
