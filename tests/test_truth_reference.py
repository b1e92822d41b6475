"""The truth benchmark's H200 runs (benchmarks/results/2026-11-23), reproduced without a GPU: the
database they wrote (db/reference/h200_truth.sqlite.gz, valid measurements) and the ONNX exports
they benched (db/reference/truth/) give every LBL of the table again, and every one is below the
GPU kernel time of the native PyTorch module measured in the same run."""
import json

import pytest

from benanza.analysis.analyzer import analyze, resolve_system
from benanza.database.store import open_db
from benanza.processing.model import process
from conftest import REPO

REF = REPO / "db" / "reference"
ROWS = json.loads((REF / "truth" / "rows.json").read_text())["rows"]


@pytest.fixture(scope="module")
def truth_db():
    return open_db(str(REF / "h200_truth.sqlite.gz"), create=False)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['model']}-b{r['batch']}-{r['dtype']}")
def test_the_truth_table_is_reproduced_and_below_pytorch(row, truth_db):
    system, _ = resolve_system(truth_db, "H200")
    ml = process(REF / "truth" / f"{row['model']}.onnx", row["batch"])
    precision, conv = ("fp32", "tf32") if row["precision"] == "fp32+tf32conv" else (row["precision"], None)
    a = analyze(ml, truth_db, system, precision, layouts=("NCHW", "NHWC"), conv_precision=conv)
    assert a.complete and a.precision_label == row["precision"]
    # rows.json holds the LBL of this database; a config measured in several runs keeps its latest
    # measurement, so the run's own figure (run_lbl_ms, printed by the run) may differ a little
    assert a.lbl_ms == pytest.approx(row["lbl_ms"], rel=1e-9)
    assert a.lbl_sequential_ms == pytest.approx(row["lbl_seq_ms"], rel=1e-9)
    assert a.lbl_ms == pytest.approx(row["run_lbl_ms"], rel=1e-2)
    assert a.lbl_ms <= row["pytorch_ms"]


def test_the_truth_table_covers_the_zoo():
    """Every model of the truth benchmark's zoo at batch 1 and 32, fp16 and PyTorch's fp32."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    from zoo import MODELS

    have = {(r["model"], r["batch"], r["dtype"]) for r in ROWS}
    assert have == {(m, b, d) for m in MODELS for b in (1, 32) for d in ("fp16", "fp32")}
