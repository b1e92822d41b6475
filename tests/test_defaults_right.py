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


# ------------------------------------------------------------------ 2. a layout asked for and not measured

RESNET50_BNKEPT = ROOT / "tests" / "data" / "zoo" / "models" / "resnet50_bnkept.onnx"


def _analysis(db_path, spec, model, batch, precision, layouts):
    from benanza.analysis.analyzer import analyze
    from benanza.processing.model import process

    db = open_db(str(db_path), create=False)
    system, _ = resolve_system(db, spec)
    return analyze(process(model, batch), db, system, precision, "warm", layouts)


def test_a_layout_asked_for_and_not_measured_is_said():
    # the pair database's H100 has no NHWC convolution row (its H200 has 46)
    a = _analysis(PAIR, "H100", RESNET50_BNKEPT, 32, "fp16", ("NCHW", "NHWC"))
    assert "Conv" in a.unmeasured_layouts["NHWC"]
    assert a.layouts_label == "nchw (nhwc not measured)"  # was "nchw+nhwc", complete yes
    assert "nchw+nhwc" not in a.lbl_text() and "nhwc not measured" in a.lbl_text()
    d = a.to_dict()
    assert d["unmeasured_layouts"]["NHWC"] and d["layouts_label"] == "nchw (nhwc not measured)"


def test_layouts_measured_on_the_system_are_claimed():
    a = _analysis(PAIR, "H200", RESNET50_BNKEPT, 32, "fp16", ("NCHW", "NHWC"))
    assert "Conv" not in a.unmeasured_layouts.get("NHWC", [])
    assert a.layouts_label.startswith("nchw+nhwc")


def test_analyze_says_the_missing_layout_in_its_heading():
    rc, out, err = bz("analyze", RESNET50_BNKEPT, "--batch", 32, "--dtype", "fp16", "--db", PAIR, "--system", "H100")
    assert rc == 0, err
    assert "(fused, critical path, nchw (nhwc not measured))" in out


def _table_text(table) -> str:
    from benanza.reports.tables import console

    c = console(record=True, file=open("/dev/null", "w"))
    c.print(table)
    return c.export_text()


def test_the_lbl_summary_table_names_the_system_and_the_missing_layout():
    from benanza.reports.lbl_summary import lbl_summary_table

    h100 = _analysis(PAIR, "H100", RESNET50_BNKEPT, 32, "fp16", ("NCHW", "NHWC"))
    text = _table_text(lbl_summary_table([h100]))
    assert "on NVIDIA H100 80GB HBM3 (system" in text and "132 SMs" in text
    assert "nchw (nhwc not measured)" in text and "nchw+nhwc" not in text
    h200 = _analysis(PAIR, "H200", RESNET50_BNKEPT, 32, "fp16", ("NCHW", "NHWC"))
    both = _table_text(lbl_summary_table([h100, h200]))
    assert "NVIDIA H200 (system" in both and "NVIDIA H100 80GB HBM3 (system" in both  # a system column


# ------------------------------------------------------------------ 3. db/README.md's first example

def test_db_readmes_first_example_is_the_current_database_and_prints_the_number_it_gives():
    import re
    import shlex

    text = (ROOT / "db" / "README.md").read_text()
    first = re.search(r"```\n(benanza analyze [^\n]+)\n```\n(.*?)\n\n", text, flags=re.S)
    cmd, after = first.group(1), first.group(2)
    assert "h200_truth.sqlite.gz" in cmd and "h200.sqlite.gz" not in cmd  # was the legacy database
    said = re.search(r"(\d+\.\d{4}) ms", after)
    assert said, "the README says what its first command prints"
    rc, out, err = bz(*shlex.split(cmd)[1:])
    assert rc == 0, err
    assert f"LBL {said.group(1)} ms (fused, critical path, nchw+nhwc)" in out  # 1.2304 ms


def test_the_legacy_summary_says_what_its_columns_are_and_gives_todays_lbl():
    """h200.summary.txt's "LBL seq" was the unfused sum (the old meaning of LBL): its columns are
    named for what they are, and the headline LBL (fused, critical path) is there, as analyze gives it."""
    lines = (REF / "h200.summary.txt").read_text().splitlines()
    head = next(ln for ln in lines if ln.startswith("model "))
    cols = head.split()
    assert "LBL seq" not in head and "unfused-seq" in cols and cols[-2] == "LBL"
    row = next(ln.split() for ln in lines if ln.split()[:3] == ["resnet50", "32", "fp16"])
    rc, out, err = bz("analyze", RESNET50, "--batch", 32, "--dtype", "fp16", "--layout", "nchw",
                      "--db", REF / "h200.sqlite.gz", "--json")
    d = json.loads(out)
    assert len(row) == len(cols) and float(row[-2]) == pytest.approx(d["lbl_ms"], abs=6e-5)  # 3.3004 ms
    assert float(row[cols.index("unfused-seq")]) == pytest.approx(d["lbl_sequential_ms"], abs=6e-5)  # 3.9652 ms
