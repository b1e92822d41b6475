"""A database a command only reads is never changed (issue 53, item 3): ``db import SRC``, ``db systems``
and ``analyze --db`` leave the file's bytes as they were (sha256 before and after), on a database of an
older schema (read through a migrated temporary copy), one in rollback-journal mode (not switched to
WAL) and an empty file (an error, not a 4 KB SQLite database). The databases are copies of the shipped
reference h100_h200_fp16 (db/reference), one taken back to schema revision 0005 with Alembic."""
import hashlib
import shutil
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from benanza.database.store import SCHEMA_VERSION, migrations_dir, open_db

REPO = Path(__file__).resolve().parents[1]
PAIR = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _journal_copy(dst: Path) -> Path:
    """The reference as one file in rollback-journal mode (as sqlite3 or another tool leaves it)."""
    shutil.copy(open_db(str(PAIR), create=False).engine.url.database, dst)
    con = sqlite3.connect(dst)
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    return dst


def _old_schema(dst: Path) -> Path:
    from alembic import command
    from alembic.config import Config

    _journal_copy(dst)
    eng = sa.create_engine(f"sqlite:///{dst}")
    with eng.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", str(migrations_dir()))
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    eng.dispose()
    con = sqlite3.connect(dst)
    con.execute("PRAGMA journal_mode=DELETE")
    assert con.execute("select value from schema_info where key='schema_version'").fetchone()[0] == "5"
    con.close()
    return dst


def _cli(capsys, *args) -> tuple[int, str, str]:
    from benanza.cli import main

    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def sources(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    empty = tmp_path / "empty.db"
    empty.touch()
    wal = tmp_path / "wal.db"  # as benanza writes them: WAL mode (no -wal file beside it)
    shutil.copy(open_db(str(PAIR), create=False).engine.url.database, wal)
    return {"old": _old_schema(tmp_path / "old.db"), "journal": _journal_copy(tmp_path / "journal.db"),
            "wal": wal, "empty": empty}


@pytest.mark.parametrize("kind", ["old", "journal", "wal", "empty"])
def test_reading_commands_leave_the_source_unchanged(kind, sources, tmp_path, capsys, models):
    src = sources[kind]
    before = _sha(src)
    names = sorted(p.name for p in tmp_path.iterdir())
    runs = {"import": _cli(capsys, "db", "import", src, "--db", tmp_path / "dst.db"),
            "systems": _cli(capsys, "db", "systems", "--db", src),
            "analyze": _cli(capsys, "analyze", models / "googlenet.onnx", "--db", src, "--dtype", "fp16")}
    assert _sha(src) == before, f"{kind}: the source's bytes changed"
    assert src.stat().st_size == (0 if kind == "empty" else src.stat().st_size)
    if kind == "empty":
        for what, (code, out, err) in runs.items():
            assert code != 0 and len(err.strip().splitlines()) == 1 and "empty" in err, (what, err)
    else:
        for what, (code, out, err) in runs.items():
            assert code == 0, (what, err)
        assert "H100" in runs["systems"][1] and "H200" in runs["systems"][1]
        con = sqlite3.connect(tmp_path / "dst.db")
        assert con.execute("select count(*) from measurements").fetchone()[0] > 0
        con.close()
    # nothing new beside the source (no -wal, -shm or journal) but the import's destination, once
    # the commands' connections are closed (as at a process's end)
    import gc

    gc.collect()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name not in names)
    assert all(n.startswith("dst.db") for n in left), left
    if kind == "old":  # read as the current schema, through a copy
        assert "5" == sqlite3.connect(src).execute("select value from schema_info where key='schema_version'") \
            .fetchone()[0]
        assert open_db(str(src), create=False).counts()["measurements"] > 0


def test_a_read_only_open_of_an_old_schema_says_the_file_is_unchanged(sources):
    db = open_db(str(sources["old"]), create=False)
    assert db.notices and "unchanged" in db.notices[0] and "db upgrade" in db.notices[0], db.notices
    with db.engine.connect() as c:
        v = c.exec_driver_sql("select value from schema_info where key='schema_version'").scalar()
    assert v == str(SCHEMA_VERSION)


def test_upgrade_in_place_is_explicit(sources):
    """``read_only=False`` (``benanza db upgrade``) still upgrades the file itself."""
    src = sources["old"]
    db = open_db(str(src), create=False, read_only=False)
    assert "upgraded the schema from revision 0005" in db.notices[0]
    db.engine.dispose()
    v = sqlite3.connect(src).execute("select value from schema_info where key='schema_version'").fetchone()[0]
    assert v == str(SCHEMA_VERSION)
