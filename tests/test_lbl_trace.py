"""`analyze --trace FILE`: the parallel LBL's schedule as a Chrome/Perfetto trace."""
import json
import subprocess
import sys

import pytest

from benanza.analysis.analyzer import analyze, resolve_system
from benanza.database.store import open_db
from benanza.reports.lbl_trace import trace
from benanza.processing.model import process
from conftest import REPO, scenario_of

REF = REPO / "db" / "reference" / "h200.sqlite.gz"
MODEL = REPO / "tests" / "data" / "zoo" / "models" / "googlenet.onnx"


def test_cli_writes_a_trace_whose_schedule_is_the_lbl(tmp_path):
    """The trace draws the headline LBL's schedule (fused, critical path): one slice per layer, one
    per fusion group taken fused (its members inside it), ending at the LBL."""
    out = tmp_path / "lbl.json"
    r = subprocess.run([sys.executable, "-m", "benanza", "analyze", str(MODEL), "--batch", "32", "--dtype", "fp16",
                        "--db", str(REF), "--trace", str(out), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    a = scenario_of(r.stdout, "analyze")
    slices = [e for e in d["traceEvents"] if e["ph"] == "X"]
    groups = [f for f in a["fusions"] if f["applied"]]
    members = {i for f in groups for i in f["layers"][:-1]}
    assert groups and len(slices) == len(a["layers"]) - len(members)  # all measured here
    fused = [e for e in slices if e["name"].startswith("fused: ")]
    assert len(fused) == len(groups) and all(e["args"]["status"] == "fused" for e in fused)
    assert {tuple(e["args"]["layers"]) for e in fused} == {tuple(f["layers"]) for f in groups}
    end = max(e["ts"] + e["dur"] for e in slices) / 1e3
    assert end == pytest.approx(a["lbl_ms"], rel=1e-9) and d["metadata"]["lbl_ms"] == pytest.approx(a["lbl_ms"])
    # the critical path runs on stream 0, in order; no two slices of a stream overlap
    crit = [e["args"]["layer"] for e in sorted(slices, key=lambda e: e["ts"]) if e["tid"] == 0]
    assert crit == [i for i in a["fused_critical_path"] if i not in members]
    by_tid = {}
    for e in slices:
        by_tid.setdefault(e["tid"], []).append(e)
    for es in by_tid.values():
        es.sort(key=lambda e: e["ts"])
        assert all(x["ts"] + x["dur"] <= y["ts"] + 1e-6 for x, y in zip(es, es[1:]))
    assert d["metadata"]["streams"] > 1 and d["metadata"]["complete"]  # googlenet's branches run beside it


def test_a_layer_without_a_measurement_is_never_a_slice():
    """The native resnet50 export's ReduceMean is not in the truth database."""
    native = REPO / "tests" / "data" / "h200_native" / "resnet50-b32-fp16" / "model.onnx"
    db = open_db(str(REPO / "db" / "reference" / "h200_truth.sqlite.gz"), create=False)
    system, _ = resolve_system(db, "H200")
    ml = process(native, 32)
    a = analyze(ml, db, system, "fp16")
    assert a.missing
    d = trace(a, ml.edges)
    missing = [e for e in d["traceEvents"] if e["name"].startswith("missing: ")]
    assert len(missing) == len(a.missing) and all(e["ph"] == "i" and "dur" not in e for e in missing)
    assert d["metadata"]["complete"] is False


def test_trace_into_a_folder_is_refused_before_work(tmp_path):
    r = subprocess.run([sys.executable, "-m", "benanza", "analyze", str(MODEL), "--batch", "32", "--db", str(REF),
                        "--trace", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("benanza: --trace") and not list(tmp_path.iterdir())
