"""One JSON shape for every command (issue 52): each ``--json`` output is one envelope,
``{"document", "schema", "system", "scenarios" | "records" | the result's keys}``
(:mod:`benanza.reports.documents`). Before, ``analyze``/``predict``/``roofline``/``layers`` printed an
object for one scenario and a list for several, ``torch`` a list, the ``db`` commands a bare list,
and the system was ``system``, ``gpu`` or ``origin`` depending on the command.

Real models and the shipped reference databases; the GPU-side commands (``bench``, ``run``,
``ceilings``) through their printers with the results their use cases return."""
import json
import types

import pytest
from typer.testing import CliRunner

from benanza.cli import app
from benanza.errors import UsageError
from benanza.reports.documents import SCHEMA, envelope, scenarios
from conftest import REPO

TRUTH = REPO / "db" / "reference" / "h200_truth.sqlite.gz"
PAIR = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"
R50 = REPO / "examples" / "resnet50.onnx"
BNKEPT = REPO / "tests" / "data" / "zoo" / "models" / "resnet50_bnkept.onnx"
PROFILE = REPO / "tests" / "data" / "h200_profiles" / "resnet50_bnkept-b32-fp16"

B32 = ["--batch", "32", "--dtype", "fp16"]

# (command line, its document, the list it has or None, how many items at least)
CASES = [
    (["layers", R50, "--batch", "1,32"], "layers", "scenarios", 2),
    (["analyze", R50, *B32, "--db", TRUTH], "analyze", "scenarios", 1),
    (["analyze", R50, "--batch", "1,32", "--dtype", "fp16", "--db", TRUTH], "analyze", "scenarios", 2),
    (["analyze", BNKEPT, *B32, "--db", TRUTH, "--profile", PROFILE], "analyze", "scenarios", 1),
    (["predict", R50, *B32, "--db", TRUTH, "--to", "L4"], "predict", "scenarios", 1),
    (["roofline", R50, *B32, "--db", TRUTH], "roofline", "scenarios", 1),
    (["roofline", R50, *B32, "--db", TRUTH, "--kind", "time"], "roofline", "scenarios", 1),
    (["db", "systems", "--db", PAIR], "db systems", "records", 2),
    (["db", "query", "--db", TRUTH, "--kind", "Gemm", "--limit", "5", "--format", "json"], "db query", "records", 5),
    (["db", "compare", "1", "2", "--db", PAIR, "--dtype", "fp16", "--format", "json"], "db compare", "records", 1),
    (["db", "shared", R50, "--db", TRUTH, "--batch", "32", "--dtype", "fp16"], "db shared", None, 0),
]


@pytest.mark.parametrize("args,document,items,least", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_every_json_output_is_one_envelope(args, document, items, least):
    fmt = [] if "--format" in args else ["--json"]
    r = CliRunner().invoke(app, [*map(str, args), *fmt])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert isinstance(d, dict) and d["document"] == document and d["schema"] == SCHEMA
    assert "system" in d
    if items is None:
        assert "scenarios" not in d and "records" not in d
    else:
        assert isinstance(d[items], list) and len(d[items]) >= least
        assert ({"scenarios", "records"} - {items}).isdisjoint(d)
    if items == "scenarios" and document != "layers":
        # the figures' system, named `system` in every command: the whole H200 the truth zoo was measured on
        assert d["system"]["gpu_name"] == "NVIDIA H200" and d["system"]["sm_count"] == 132
        for s in d["scenarios"]:
            if "lbl_ms" in s:
                assert "complete" in s and "missing_layers" in s


def test_the_predicted_training_step_names_its_missing_layers_as_every_document_does():
    r = CliRunner().invoke(app, ["predict", str(REPO / "db" / "reference" / "truth" / "alexnet_train.onnx"), *B32,
                                 "--db", str(TRUTH), "--to", "h100-sxm", "--train", "--optimizer", "adamw", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    (s,) = d["scenarios"]
    assert d["document"] == "predict" and d["system"]["gpu_name"] == "NVIDIA H200"
    # 29 backward calls, the loss and the adamw update without a measurement in the shipped database
    assert s["missing_layers"] == 31 and s["complete"] is False and "29 backward calls" in s["incomplete_note"]
    assert s["origin"] == "H200" and s["target"] == "H100-SXM"


def test_profile_and_import_give_their_result_keys_in_the_envelope(tmp_path):
    r = CliRunner().invoke(app, ["profile", str(BNKEPT), "--from", str(PROFILE), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["document"] == "profile" and d["schema"] == SCHEMA and "category_counts" in d
    r = CliRunner().invoke(app, ["db", "import", str(PAIR), "--db", f"sqlite:///{tmp_path / 'x.db'}", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["document"] == "db import" and d["system"] is None and d["jobs_added"] > 0


def test_the_gpu_side_commands_print_envelopes_too(capsys):
    """``run``, ``ceilings`` and ``system`` need a GPU to run: their printers, given the results their
    use cases return, print the same envelope (``bench``: tests/test_truth_table.py)."""
    from benanza.reports import suite

    s = types.SimpleNamespace(system_id=1, system={"gpu_name": "NVIDIA H200", "sm_count": 132}, run_id=3, planned=4,
                              skipped=0, ok=4, failed=0, measurements=12, restarts=0, wall_s=1.5, failures=[])
    suite.print_run(types.SimpleNamespace(cluster=None, runs=[s], framework=None), True)
    d = json.loads(capsys.readouterr().out)
    assert d["document"] == "run" and d["system"]["gpu_name"] == "NVIDIA H200" and d["measurements"] == 12
    suite.print_run(types.SimpleNamespace(cluster="tcp://h:8786", runs=[s, s], framework=None), True)
    d = json.loads(capsys.readouterr().out)
    assert d["document"] == "run" and len(d["records"]) == 2 and d["cluster"] == "tcp://h:8786"
    row = types.SimpleNamespace(to_row=lambda: {"name": "dram", "value": 4.1e12})
    suite.print_ceilings(types.SimpleNamespace(system={"gpu_name": "NVIDIA H200"}, rows=[row], failed=[]), True)
    d = json.loads(capsys.readouterr().out)
    assert d["document"] == "ceilings" and d["records"] == [{"name": "dram", "value": 4.1e12}]
    assert d["system"] == {"gpu_name": "NVIDIA H200"}
    suite.print_system({"devices": [], "device_error": "no GPU"}, True)
    d = json.loads(capsys.readouterr().out)
    assert d["document"] == "system" and d["devices"] == [] and d["schema"] == SCHEMA


def test_the_reader_takes_envelopes_and_the_shapes_before_them():
    a = {"model": "m", "lbl_ms": 1.0}
    assert scenarios(envelope("analyze", scenarios=[a, a])) == [a, a]
    assert scenarios(a) == [a] and scenarios([a, a]) == [a, a]  # one document, or a list: benanza before schema 1
    with pytest.raises(UsageError, match="schema 2; this benanza reads schema 1"):
        scenarios({**envelope("analyze", scenarios=[a]), "schema": SCHEMA + 1}, "x.json")
    with pytest.raises(UsageError, match="'db systems' document, which has no scenarios"):
        scenarios(envelope("db systems", records=[]), "x.json")
    with pytest.raises(UsageError, match="scenario 1 is not a JSON object"):
        scenarios([a, 3], "x.json")
    with pytest.raises(UsageError, match="not a benanza JSON document"):
        scenarios("text", "x.json")


def test_report_reads_an_envelope_and_an_older_bare_document(tmp_path):
    r = CliRunner().invoke(app, ["analyze", str(R50), *B32, "--db", str(TRUTH), "--json"])
    assert r.exit_code == 0, r.output
    (tmp_path / "new.json").write_text(r.stdout)
    (tmp_path / "old.json").write_text(json.dumps(json.loads(r.stdout)["scenarios"][0]))
    out = CliRunner().invoke(app, ["report", str(tmp_path / "new.json"), str(tmp_path / "old.json")])
    assert out.exit_code == 0, out.output
    assert out.output.count("resnet50") >= 2
