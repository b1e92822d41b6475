"""`db query --model M --batch B` and `db export --model M` on the reference database (issue 16's
two defects): one meaning of batch, and the fused measurements go with the model."""
import sqlite3
import subprocess
import sys

from benanza.generation.generator import _key_counts
from benanza.processing.model import process
from conftest import REPO, records_of

REF = REPO / "db" / "reference" / "h200.sqlite.gz"
RESNET50 = REPO / "tests" / "data" / "zoo" / "models" / "resnet50.onnx"


def bz(*a):
    return subprocess.run([sys.executable, "-m", "benanza", *a], capture_output=True, text=True)


def test_query_with_model_batch_keeps_every_config_of_the_model():
    """--batch with --model is the model's batch: resnet50 at batch 32 has 42 layer configs and 16
    fusion configs (traced to the old record by schema 6's migration: as a new record names them);
    the config-level batch filter used to drop its GEMM (whose dim 0 is not the batch of a convolution)."""
    fresh = _key_counts(process(RESNET50, 32))
    r = bz("db", "query", "--db", str(REF), "--model", "resnet50", "--batch", "32", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = records_of(r.stdout, "db query")
    kinds = {x["kind"] for x in rows}
    assert {x["layer_key"] for x in rows} == set(fresh) and len(fresh) == 58 and "Gemm" in kinds
    r = bz("db", "query", "--db", str(REF), "--model", "resnet50", "--batch", "32", "--best", "--dtype", "fp16",
           "--format", "json")
    assert r.returncode == 0, r.stderr
    assert {x["layer_key"] for x in records_of(r.stdout, "db query")} == set(fresh)


def test_a_model_record_names_its_fusion_candidates():
    ml = process(RESNET50, 32)
    counts = _key_counts(ml)
    fused = {f.config.key for f in ml.fusions}
    assert fused and fused <= set(counts)
    assert sum(counts[k] for k in fused) >= len(ml.fusions) > 0


def test_export_by_onnx_takes_the_fused_measurements_and_by_old_name_says_what_it_cannot(tmp_path):
    out = tmp_path / "r50.db"
    r = bz("db", "export", "--db", str(REF), "--model", str(RESNET50), "--batch", "32", "-o", str(out))
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(out)
    n = con.execute("select count(*) from measurements m join layer_configs l on l.key = m.layer_key "
                    "where l.kind = 'ConvBiasAct'").fetchone()[0]
    con.close()
    assert n > 0
    # the reference database's records predate fusion keys: schema 6's migration traced the fused
    # Conv + bias + ReLU configs to them, so an export by name takes those too, and says what it cannot
    out2 = tmp_path / "r50-name.db"
    r = bz("db", "export", "--db", str(REF), "--model", "resnet50", "--batch", "32", "-o", str(out2))
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(out2)
    by_name = con.execute("select count(*) from measurements m join layer_configs l on l.key = m.layer_key "
                          "where l.kind = 'ConvBiasAct'").fetchone()[0]
    con.close()
    assert by_name == n  # the same fused measurements as the export by .onnx file
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("benanza: note:")]
    assert len(notes) == 1 and "traced" in notes[0] and ".onnx" in notes[0]


def test_compare_with_nothing_in_common_exits_2_and_says_why():
    """It printed "0 layer configs on both systems; median ratio nan" and exited 0."""
    pair = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"
    r = bz("db", "compare", "H100", "H200", "--dtype", "fp32", "--db", str(pair))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("benanza: ") and "nothing to compare" in r.stderr and len(r.stderr.splitlines()) == 1
    r = bz("db", "compare", "H100", "H200", "--dtype", "fp16", "--db", str(pair))
    assert r.returncode == 0 and "in fp16 (warm)" in r.stdout


def test_best_without_a_data_type_covers_every_data_type_once():
    """`db query --best` without --dtype returned fp32 rows only, silently."""
    r = bz("db", "query", "--db", str(REF), "--best", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = records_of(r.stdout, "db query")
    seen = {}
    for x in rows:
        assert (x["layer_key"], x["precision"]) not in seen
        seen[(x["layer_key"], x["precision"])] = 1
    assert {x["precision"] for x in rows} >= {"fp32", "tf32", "fp16"}
    one = records_of(bz("db", "query", "--db", str(REF), "--best", "--dtype", "fp16", "--format", "json").stdout)
    assert {x["precision"] for x in one} == {"fp16"}
    assert len(one) == sum(1 for x in rows if x["precision"] == "fp16")


def test_versions_print_as_people_write_them():
    from benanza.versions import version_text

    assert version_text("cudnn", 91900) == "9.19.0" and version_text("cudnn", 8907) == "8.9.7"
    assert version_text("cublas", 130100) == "13.1.0" and version_text("cuda", 13000) == "13.0"
    assert version_text("cudnn", None) == "?"
    r = bz("db", "systems", "--db", str(REF), "--format", "csv")
    assert r.returncode == 0 and "9.19.0" in r.stdout and "91900" not in r.stdout
    r = bz("db", "systems", "--db", str(REF), "--json")
    assert records_of(r.stdout, "db systems")[0]["cudnn_version"] == 91900  # JSON keeps the library's integer
