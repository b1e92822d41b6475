"""One meaning of --system: the commands that read a database (db query/compare/export, analyze,
predict, roofline) resolve a system the same way, and an id is exact (issue "One pipeline, one
answer": on a database of an H200 (id 1) and an H100 (id 2), `db query --system 1` listed the H200's
rows while `analyze --system 1` analysed the H100, whose name holds a 1)."""
import pytest

from benanza.analysis.analyzer import resolve_system
from benanza.database import query
from benanza.database.store import open_db
from benanza.errors import UsageError


@pytest.fixture
def two_gpus(tmp_path):
    db = open_db(f"sqlite:///{tmp_path / 'two.db'}")
    h200 = db.upsert_system({"gpu_name": "NVIDIA H200", "sm_count": 132, "driver_version": "580.159.04"})
    h100 = db.upsert_system({"gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver_version": "580.159.04"})
    return db, h200, h100


def test_an_id_is_exact_for_every_command(two_gpus):
    db, h200, h100 = two_gpus
    assert (h200, h100) == (1, 2)
    assert query.resolve_systems(db, "1") == [h200]
    assert resolve_system(db, "1")[0].id == h200  # was the H100 (its name holds a 1)
    assert resolve_system(db, "2")[0].id == h100
    assert query.resolve_systems(db, "H100") == [h100] and resolve_system(db, "H100")[0].id == h100


def test_a_name_several_systems_share_is_an_error_naming_them(two_gpus):
    db, h200, h100 = two_gpus
    with pytest.raises(UsageError, match=r"2 systems match 'NVIDIA' \(id 1: NVIDIA H200 .*id 2: NVIDIA H100"):
        resolve_system(db, "NVIDIA")
    with pytest.raises(UsageError, match="no system matches 'A100'"):
        resolve_system(db, "A100")
