"""Data safety on a read-only file system and a full disk (issue "One pipeline, one answer", item
6): an intact database that cannot be written is read as it is (never called damaged), a writer
is refused with the reason; a write that fails half-way leaves nothing behind.

The full disk is RLIMIT_FSIZE in the child process (a write beyond it fails with EFBIG, as one
on a full disk fails with ENOSPC: the same OSError path); the read-only file system is the file
and its folder made immutable (``chattr +i``, as root) or read-only (``chmod``, as another user),
which the kernel refuses to write as it refuses a read-only mount."""
import os
import resource
import shutil
import subprocess
import sys

import pytest

from benanza.database.store import open_db
from conftest import REPO, scenario_of

RESNET50 = REPO / "examples" / "resnet50.onnx"
TRUTH = REPO / "db" / "reference" / "h200_truth.sqlite.gz"
REF = REPO / "db" / "reference" / "h200.sqlite.gz"


def bz(*args, limit: int | None = None):
    def fsize():
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([sys.executable, "-m", "benanza", *map(str, args)], capture_output=True, text=True,
                          preexec_fn=fsize, cwd=REPO)


def _read_only(*paths):
    """Make ``paths`` unwritable as the kernel sees it (os.access says so); returns the undo."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
        return lambda: subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    return lambda: [p.chmod(0o755 if p.is_dir() else 0o644) for p in paths]


def test_an_intact_database_on_a_read_only_file_system_is_read(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "truth.db"
    shutil.copy(open_db(str(TRUTH), create=False).engine.url.database, db)  # the unpacked reference
    assert bz("db", "upgrade", "--db", db).returncode == 0  # at the head schema
    undo = _read_only(db, folder)
    try:
        assert not os.access(db, os.W_OK)
        r = bz("analyze", RESNET50, "--batch", "32", "--dtype", "fp16", "--db", db, "--json")
        assert r.returncode == 0, r.stderr
        assert scenario_of(r.stdout, "analyze")["lbl_ms"] == pytest.approx(1.2304, abs=5e-5)
        w = bz("db", "import", REF, "--db", db)
        assert w.returncode == 3 and w.stderr.strip() == (  # a database error
            f"benanza: database sqlite:///{db}: read-only (no write permission or a read-only file system); "
            "measurements cannot be written into it")
        assert sorted(p.name for p in folder.iterdir()) == ["truth.db"]  # no -wal, -shm or journal
    finally:
        undo()


def test_a_full_disk_leaves_no_database_behind(tmp_path):
    new = tmp_path / "new.db"
    r = bz("db", "import", REF, "--db", new, limit=150_000)
    assert r.returncode != 0 and r.stderr.startswith("benanza: ") and "Traceback" not in r.stderr
    assert list(tmp_path.iterdir()) == []  # no 4 KB database, no -wal, no -shm


def test_a_full_disk_leaves_no_half_written_chart(tmp_path):
    open_db(str(TRUTH), create=False)  # the reference unpacked before the limit
    svg = tmp_path / "r.svg"
    r = bz("roofline", RESNET50, "--batch", "32", "--dtype", "fp16", "--db", TRUTH, "--svg", svg, limit=150_000)
    assert r.returncode == 1 and r.stderr.strip().splitlines()[-1] == f"benanza: {svg}: file too large"
    assert list(tmp_path.iterdir()) == []  # no .r.svg.tmp
