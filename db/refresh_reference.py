"""Bring the shipped reference databases (db/reference/*.sqlite.gz) to the current schema, as a user's
first use would (Alembic migrations, benanza.database.store.open_db), and write them back compressed:
no upgrade runs (nor notice prints) on each fresh machine. Measurements are not touched; the
reference LBL tables (db/reference/h200.lbl.json, tests/test_analyzer.py) stay exact.

    python db/refresh_reference.py [db/reference/h200.sqlite.gz ...]
"""
from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def refresh(gz: Path) -> str:
    from benanza.database.store import open_db

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / gz.name[:-3]
        with gzip.open(gz) as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst)
        d = open_db(str(db), create=False)  # migrates to the head schema
        notes = list(d.notices)
        d.engine.dispose()
        con = sqlite3.connect(db)
        con.execute("PRAGMA journal_mode=DELETE")  # no -wal beside the shipped file
        con.execute("VACUUM")
        rev = con.execute("SELECT version_num FROM alembic_version").fetchone()[0]
        con.close()
        out = gz.with_suffix(".tmp")
        with open(db, "rb") as src, gzip.GzipFile(out, "wb", compresslevel=9, mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        os.replace(out, gz)
    return f"{gz}: revision {rev}" + (f" ({'; '.join(notes)})" if notes else " (already current)")


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((HERE / "reference").glob("*.sqlite.gz"))
    for p in paths:
        print(refresh(p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
