"""Right answers by default (issue 52, "Wrong answers by default"): each test reproduces one defect on
the shipped reference databases or the recorded data of tests/data, and asserts what a user relies on."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benanza.analysis.analyzer import resolve_system
from benanza.database import query
from benanza.database.store import open_db
from benanza.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "db" / "reference"
PARTITIONS = REF / "h100_partitions.sqlite.gz"
PAIR = REF / "h100_h200_fp16.sqlite.gz"
RESNET50 = ROOT / "examples" / "resnet50.onnx"


# ------------------------------------------------------------------ 1. the system a --system selects

@pytest.fixture(scope="module")
def partitions_db():
    return open_db(str(PARTITIONS), create=False)


@pytest.mark.parametrize("spec", [None, "NVIDIA H100 80GB HBM3", "H100", "h100 80gb"])
def test_a_gpu_name_and_the_default_select_the_whole_gpu_not_a_partition(partitions_db, spec):
    system, _ = resolve_system(partitions_db, spec)
    assert system.sm_count == 132 and "[" not in system.gpu_name  # was the [32 SMs] partition
    if spec is not None:
        assert query.resolve_systems(partitions_db, spec) == [system.id]


@pytest.mark.parametrize("spec,sms", [("NVIDIA H100 80GB HBM3 [32 SMs]", 32), ("H100 [64 SMs]", 64),
                                      ("[32 SMs]", 32)])
def test_a_partition_is_selected_by_its_sm_name(partitions_db, spec, sms):
    system, _ = resolve_system(partitions_db, spec)
    assert system.sm_count == sms and system.gpu_name.endswith(f"[{sms} SMs]")
    assert query.resolve_systems(partitions_db, spec) == [system.id]


def test_a_partition_is_selected_by_its_id_or_fingerprint(partitions_db):
    part = next(s for s in partitions_db.systems() if s.sm_count == 32)
    assert resolve_system(partitions_db, str(part.id))[0].id == part.id
    assert resolve_system(partitions_db, part.fingerprint[:8])[0].id == part.id


def test_two_whole_gpus_a_name_matches_are_an_error_naming_both(tmp_path):
    db = open_db(f"sqlite:///{tmp_path / 'two.db'}")
    db.upsert_system({"gpu_name": "NVIDIA H200", "sm_count": 132, "driver_version": "580.159.04"})
    db.upsert_system({"gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver_version": "580.159.04"})
    with pytest.raises(UsageError, match=r"2 systems match 'NVIDIA'.*NVIDIA H200.*NVIDIA H100 80GB HBM3"):
        resolve_system(db, "NVIDIA")


def bz(*args):
    """``benanza ARGS`` as a user runs it: (exit code, stdout, stderr)."""
    r = subprocess.run([sys.executable, "-m", "benanza", *map(str, args)], capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize("system", [[], ["--system", "NVIDIA H100 80GB HBM3"], ["--system", "H100"]])
def test_analyze_on_the_partitions_database_gives_the_whole_gpus_lbl(system):
    rc, out, err = bz("analyze", RESNET50, "--batch", 32, "--dtype", "fp16", "--db", PARTITIONS, "--json", *system)
    assert rc == 0, err
    doc = json.loads(out)
    a = doc["analyses"][0] if "analyses" in doc else doc
    assert a["system"]["sm_count"] == 132
    assert round(a["lbl_ms"], 4) == 2.2353  # was 5.9129 ms, the [32 SMs] partition's
