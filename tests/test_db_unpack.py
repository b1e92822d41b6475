"""A compressed reference database unpacked into the cache (issue 53, items 2, 6 and 10): 16
processes at its first use all open it and read the same rows; a gzip bomb is refused with one line
and leaves nothing in the cache; a full disk during the unpack says so. The cache is
``$XDG_CACHE_HOME/benanza/db`` (:func:`benanza.database.store.open_db`), a fresh folder per test."""
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benanza.database import store
from benanza.errors import DatabaseError

REPO = Path(__file__).resolve().parents[1]
TRUTH = REPO / "db" / "reference" / "h200_truth.sqlite.gz"

READER = r"""
import json, os, sys, time
from pathlib import Path
from benanza.database.store import open_db
go = Path(sys.argv[2])
while not go.exists():  # every process imported: they open the database at once
    time.sleep(0.01)
db = open_db(sys.argv[1], create=False)
print(json.dumps({"counts": db.counts(), "systems": sorted(s.gpu_name + "|" + s.fingerprint for s in db.systems())}))
"""


def _cache_files(cache: Path) -> list[str]:
    d = cache / "benanza" / "db"
    return sorted(p.name for p in d.iterdir()) if d.exists() else []


@pytest.mark.slow  # 16 Python processes importing SQLAlchemy: 30 s to minutes on 2 busy cores
def test_sixteen_processes_at_first_use_all_read_the_same(tmp_path):
    cache = tmp_path / "cache"
    go = tmp_path / "go"
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", READER, str(TRUTH), str(go)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(16)]
    time.sleep(3)
    go.touch()
    outs = [p.communicate(timeout=300) for p in procs]
    failed = [(p.returncode, err.strip()[-300:]) for p, (out, err) in zip(procs, outs) if p.returncode]
    assert not failed, f"{len(failed)} of 16 failed: {failed[:3]}"
    docs = {out for out, _ in outs}
    assert len(docs) == 1, docs
    doc = json.loads(docs.pop())
    assert doc["counts"]["measurements"] > 0 and doc["systems"]
    # one unpacked copy (and SQLite's own -wal/-shm beside it); no temporary file
    names = _cache_files(cache)
    assert [n for n in names if n.endswith(".sqlite")] == [f"h200_truth.sqlite-{store.reference_digest(TRUTH)}.sqlite"]
    assert all(n.endswith((".sqlite", ".sqlite-wal", ".sqlite-shm")) for n in names), names


def _bomb(path: Path, mb: int = 200) -> Path:
    """A gzip file of ``mb`` MB of zeros after a real SQLite header (194 KB compressed)."""
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(b"SQLite format 3\x00" + b"\x00" * ((1 << 20) - 16))
        for _ in range(mb - 1):
            f.write(bytes(1 << 20))
    return path


def test_a_gzip_bomb_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("BENANZA_MAX_UNPACKED_MB", raising=False)
    bomb = _bomb(tmp_path / "bomb.sqlite.gz")
    assert bomb.stat().st_size < 300_000
    with pytest.raises(DatabaseError) as e:
        store.open_db(str(bomb), create=False)
    msg = str(e.value)
    assert msg.startswith(f"database {bomb}: ") and "\n" not in msg and "MiB" in msg, msg
    assert _cache_files(tmp_path / "cache") == []


def test_the_unpack_limit_is_configurable(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    small = _bomb(tmp_path / "small.sqlite.gz", mb=3)
    assert store.unpack_limit(small.stat().st_size) == 64 << 20  # the floor: 64 MiB
    assert store.unpack_limit(10 << 20) == 640 << 20  # 64 times the compressed size
    monkeypatch.setenv("BENANZA_MAX_UNPACKED_MB", "2")
    assert store.unpack_limit(10 << 20) == 2 << 20
    with pytest.raises(DatabaseError, match=r"more than 2 MiB, .*BENANZA_MAX_UNPACKED_MB"):
        store.open_db(str(small), create=False)
    assert _cache_files(tmp_path / "cache") == []
    monkeypatch.setenv("BENANZA_MAX_UNPACKED_MB", "many")
    with pytest.raises(DatabaseError, match=r"^BENANZA_MAX_UNPACKED_MB"):
        store.unpack_limit(1)


def test_a_full_disk_during_the_unpack_says_so(tmp_path, monkeypatch):
    """The unpacked copy written to /dev/full: every write fails with ENOSPC."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here to simulate a full disk")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    ref = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"
    real = store.unpack_temp

    def full(cache: Path, name: str):
        fd, path = real(cache, name)
        os.close(fd)
        return os.open("/dev/full", os.O_WRONLY), path

    monkeypatch.setattr(store, "unpack_temp", full)
    with pytest.raises(DatabaseError) as e:
        store.open_db(str(ref), create=False)
    assert "no space left" in str(e.value) and "not a gzip" not in str(e.value), str(e.value)
    assert _cache_files(tmp_path / "cache") == []


def test_a_damaged_gzip_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = (REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz").read_bytes()
    cut = tmp_path / "cut.sqlite.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatabaseError, match=r"not a gzip-compressed database"):
        store.open_db(str(cut), create=False)
    assert _cache_files(tmp_path / "cache") == []
