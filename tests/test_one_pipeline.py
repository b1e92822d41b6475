"""One pipeline (issue 52): the CLI and the Python API call the same use cases, so they return the same
documents for one request: ``analyze`` (with and without a recorded profile), ``predict`` and
``benanza torch`` on a recorded profile (the PyTorch steps, which need torch, stood in by the
profile the H200 recorded: torch is not installed where this runs).

Real models and the shipped reference database of the truth zoo (H200)."""
import json
import shutil
import types

import pytest
from typer.testing import CliRunner

from benanza import api
from benanza.cli import app
from conftest import REPO, envelope_of

DB = REPO / "db" / "reference" / "h200_truth.sqlite.gz"
RESNET50 = REPO / "examples" / "resnet50.onnx"
BNKEPT = REPO / "tests" / "data" / "zoo" / "models" / "resnet50_bnkept.onnx"
PROFILE = REPO / "tests" / "data" / "h200_profiles" / "resnet50_bnkept-b32-fp16"


def cli_json(*args):
    """The scenarios of the command's ``--json`` envelope (one shape for every command)."""
    r = CliRunner().invoke(app, [*map(str, args), "--json"])
    assert r.exit_code == 0, r.output
    return envelope_of(r.stdout, str(args[0]))["scenarios"]


def same(doc):
    """A document as JSON gives it back (tuples as lists, paths as text)."""
    return json.loads(json.dumps(doc, default=str))


def test_analyze_gives_one_document_to_the_cli_and_the_api():
    req = api.AnalyzeRequest((api.Scenario.of(RESNET50, 32, "fp16"),), str(DB))
    (doc,) = api.analyze(req).documents()
    assert cli_json("analyze", RESNET50, "--batch", "32", "--dtype", "fp16", "--db", DB) == [same(doc)]
    assert doc["lbl_ms"] == pytest.approx(1.2304, abs=5e-5) and doc["complete"]


def test_analyze_with_a_profile_gives_one_insights_document():
    req = api.AnalyzeRequest((api.Scenario.of(BNKEPT, 32, "fp16"),), str(DB), profile=PROFILE)
    (doc,) = api.analyze(req).documents()
    cli = cli_json("analyze", BNKEPT, "--batch", "32", "--dtype", "fp16", "--db", DB, "--profile", PROFILE)
    assert cli == [same(doc)] and doc["format"] == "benanza-insights" and doc["missing_layers"] == 55


def test_predict_gives_one_document_to_the_cli_and_the_api():
    doc = api.predict(api.Scenario.of(RESNET50, 32, "fp16"), "H100-SXM", str(DB)).document()
    cli = cli_json("predict", RESNET50, "--batch", "32", "--dtype", "fp16", "--db", DB, "--to", "H100-SXM")
    assert cli == [same(doc)] and doc["origin_lbl_ms"] == pytest.approx(1.2304, abs=5e-5)


@pytest.fixture
def recorded_torch(monkeypatch, tmp_path):
    """``benanza torch resnet50 --dtype fp16 --batch 32`` with its PyTorch steps (resolving the module,
    exporting and profiling it) replaced by the export and the profile the H200 recorded for it: the
    rest, the join, the analysis and the insights document, is the use case's own."""
    import benanza.processing.modules as modules
    import benanza.profiles.pytorch as pt

    monkeypatch.setattr(modules, "resolve", lambda *a, **k: types.SimpleNamespace(name="resnet50_bnkept", attention=None))

    def recorded(src, folder, batches, dtype, *a, on_run=None, **k):
        folder.mkdir(parents=True, exist_ok=True)
        onnx = folder / "resnet50_bnkept.onnx"
        shutil.copy(BNKEPT, onnx)
        runs = pt.profile_runs(folder, batches, dtype, False, None)
        for r in runs:
            shutil.copytree(PROFILE, r.folder)
            on_run(onnx, r)
        return onnx, runs

    monkeypatch.setattr(pt, "prepare", recorded)
    return tmp_path


def test_torch_gives_one_document_to_the_cli_and_the_api(recorded_torch):
    req = api.TorchRequest("resnet50", (32,), "fp16", str(DB), recorded_torch / "api", bench=False)
    (doc,) = api.torch(req).documents
    cli = cli_json("torch", "resnet50", "--batch", "32", "--dtype", "fp16", "--db", DB, "--no-bench",
                   "-o", recorded_torch / "cli")
    assert len(cli) == 1
    # the same document but for where each command worked
    for d in (cli[0], doc):
        for k in ("folder", "export"):
            d["run"][k] = d["run"][k].replace(str(recorded_torch / "cli"), "W").replace(str(recorded_torch / "api"), "W")
        d["framework"]["folder"] = "W"
    assert cli[0] == same(doc)
    # and the same insights as `analyze --profile` of that export and profile
    req = api.AnalyzeRequest((api.Scenario.of(BNKEPT, 32, "fp16"),), str(DB), profile=PROFILE)
    (ins,) = api.analyze(req).documents()
    assert doc["lbl_ms"] == ins["lbl_ms"] and doc["benanza_ratio"] == ins["benanza_ratio"]
    assert (recorded_torch / "cli" / "report-b32-fp16.html").exists()  # the CLI's HTML report beside it


@pytest.mark.parametrize("cmd", [["analyze", RESNET50, "--db", DB], ["predict", RESNET50, "--db", DB, "--to", "H100-SXM"],
                                 ["bench", RESNET50, "--db", "x.db"], ["generate", RESNET50, "-o", "suite"],
                                 ["torch", "resnet50", "--no-bench"]])
def test_optimizer_without_train_is_an_error_in_every_command(cmd, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, [*map(str, cmd), "--optimizer", "adam"])
    assert r.exit_code == 2 and "--optimizer goes with --train" in r.output
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "suite").exists()


def test_roofline_and_predict_take_analyzes_scenario_options():
    """--cache, --conv-tf32, --dim and --batch-dim on roofline and predict as on analyze: the same
    scenario, the same LBL (cold measurements: the shipped database has none for resnet50 fp32 here, so
    each says so the same way)."""
    common = ["--batch", "32", "--dtype", "fp32", "--conv-tf32", "--db", DB]
    (a,) = cli_json("analyze", RESNET50, *common)
    (r,) = cli_json("roofline", RESNET50, *common)
    (p,) = cli_json("predict", RESNET50, *common, "--to", "H100-SXM")
    assert a["lbl_ms"] == r["lbl_ms"] == p["origin_lbl_ms"] and a["conv_precision"] == "tf32"
    errs = [CliRunner().invoke(app, [c, str(RESNET50), "--db", str(DB), "--cache", "hot", *x])
            for c, x in (("analyze", []), ("roofline", []), ("predict", ["--to", "H100-SXM"]))]
    assert all(e.exit_code == 2 and "--cache must be warm or cold" in e.output for e in errs)


def test_a_bare_benanza_prints_its_help():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "benanza"], capture_output=True, text=True)
    assert r.returncode == 2 and not r.stderr.startswith("benanza: ")
    assert "Usage: benanza [OPTIONS] COMMAND" in r.stderr and "\n  analyze " in r.stderr
