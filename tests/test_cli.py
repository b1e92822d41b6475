"""The command line: JSON outputs users script against, and bad input -- one line on stderr, a
non-zero exit, no traceback, and nothing half-written to the database."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, envelope_of, scenario_of
from onnx_builders import nothing_to_benchmark_model

REF_DB = REPO / "db" / "reference" / "h200.sqlite.gz"


def bz(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, env=e, timeout=600)


def one_line_error(p, code=None):
    assert p.returncode != 0
    if code is not None:
        assert p.returncode == code
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("benanza: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], p.stderr  # progress lines may come before it
    assert "Traceback" not in p.stderr + p.stdout
    return errors[0]


def test_layers_json(models):
    p = bz("layers", models / "resnet50.onnx", "--batch", "8", "--json")
    assert p.returncode == 0, p.stderr
    d = scenario_of(p.stdout, "layers")
    assert d["layers"] == 122 and d["unique_layers"] == 43 and d["unsupported"] == {}
    assert d["by_type"]["Conv"] == {"count": 53, "unique": 23}
    assert len(d["layer_list"]) == 122 and d["batch"] == 8
    two = envelope_of(bz("layers", models / "lstm_lm.onnx", "--batch", "1,32", "--json").stdout)["scenarios"]
    assert [x["batch"] for x in two] == [1, 32] and two[0]["unsupported"] == {}


def test_analyze_json_from_the_reference_database(models):
    p = bz("analyze", models / "resnet50.onnx", "--batch", "32", "--dtype", "fp16", "--db", REF_DB, "--json")
    assert p.returncode == 0, p.stderr
    d = scenario_of(p.stdout, "analyze")
    assert d["complete"] is True and d["lbl_parallel_ms"] <= d["lbl_sequential_ms"]
    convs = [l for l in d["layers"] if l["kind"] == "Conv"]
    assert len(convs) == 53 and all(l["algorithm"] and l["time_ms"] > 0 for l in convs)
    table = bz("analyze", models / "googlenet.onnx", "--batch", "1", "--db", REF_DB)
    assert table.returncode == 0 and "lower-bound latency" in table.stdout


@pytest.mark.parametrize("cmd", [["layers"], ["generate", "-o", "OUT"], ["analyze", "--db", "DB"],
                                 ["bench", "--db", "DB", "-o", "OUT"]])
def test_bad_model_files(cmd, tmp_path, models):
    text = tmp_path / "text.onnx"
    text.write_text("this is not an onnx model\n" * 20)
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes((models / "googlenet.onnx").read_bytes()[:20000])
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    db = tmp_path / "perf.db"
    args = [a.replace("OUT", str(tmp_path / "suite")).replace("DB", str(db)) for a in cmd[1:]]
    for bad, what in [(tmp_path / "absent.onnx", "no such file"), (text, "not an ONNX model"),
                      (trunc, "not an ONNX model or truncated"), (empty, "empty file"), (tmp_path, "not a file")]:
        msg = one_line_error(bz(cmd[0], bad, *args), 2)
        assert what in msg and str(bad) in msg
    assert not db.exists() and not (tmp_path / "suite").exists()


@pytest.mark.parametrize("batch", ["0", "-1", "abc", "1,0"])
def test_bad_batch(batch, models, tmp_path):
    for cmd in (["layers"], ["bench", "--db", str(tmp_path / "p.db")]):
        msg = one_line_error(bz(cmd[0], models / "resnet50.onnx", "--batch", batch, *cmd[1:]), 2)
        assert "batch size" in msg
    assert not (tmp_path / "p.db").exists()


def test_bad_dtype(models):
    assert "unknown data type 'fp64'" in one_line_error(bz("generate", models / "resnet50.onnx", "-t", "fp64",
                                                           "-o", "/tmp/never"), 2)


def test_nothing_to_benchmark(tmp_path):
    model = nothing_to_benchmark_model(tmp_path / "n.onnx")
    msg = one_line_error(bz("bench", model, "--db", tmp_path / "p.db", "-o", tmp_path / "s"), 2)
    assert "no benchmarkable layer" in msg
    assert not (tmp_path / "p.db").exists()


def test_unopenable_database(tmp_path, models):
    (tmp_path / "adir").mkdir()
    for url, what in [(tmp_path / "adir", "is a directory"), ("nosuch://host/db", "database"),
                      (tmp_path / "missing.db", "no such file")]:
        msg = one_line_error(bz("analyze", models / "resnet50.onnx", "--db", url), 3)
        assert what in msg
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 500)
    before = junk.read_bytes()
    one_line_error(bz("bench", models / "resnet50.onnx", "--db", junk, "-o", tmp_path / "s"), 3)
    assert junk.read_bytes() == before
    assert not (tmp_path / "s").exists()  # failed before generating anything


def test_bench_without_a_gpu_says_so_and_stores_nothing(tmp_path, models, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from conftest import have_gpu

    if have_gpu():
        pytest.skip("this machine has a GPU")
    db = tmp_path / "p.db"
    msg = one_line_error(bz("bench", REPO / "examples" / "resnet50.onnx", "--db", db, "-o", tmp_path / "s", "-q"), 6)
    # (a machine with a driver and no GPU, or without a driver at all, as CI)
    assert "measures on a GPU, and none can run here" in msg and \
        ("no CUDA device" in msg or "no NVIDIA driver" in msg), msg
    # nothing is created by a command that fails: the database file it opened fresh is gone
    assert not db.exists() and not list(tmp_path.glob("p.db*"))
    # the GPU is checked before the suite is generated and compiled (that took minutes to learn it)
    assert not (tmp_path / "s").exists()


def test_run_on_a_folder_that_is_not_a_suite(tmp_path):
    assert "not a benanza suite" in one_line_error(bz("run", tmp_path, "--db", tmp_path / "p.db"), 2)


def test_reference_db_is_read_only(tmp_path, fake_suite):
    msg = one_line_error(bz("run", fake_suite, "--db", REF_DB), 3)
    assert "read-only" in msg


def test_generate_only_some_layer_kinds(models, tmp_path):
    """--kinds measures again only what a harness change touched (e.g. the pointwise kernels): the
    suite holds only those kinds' jobs, the manifest still every config of the model; an unknown or
    absent kind is a one-line error."""
    p = bz("generate", models / "resnet50_bnkept.onnx", "-b", "1", "-t", "fp16", "--kinds", "activation,Elementwise",
           "-o", tmp_path / "s")
    assert p.returncode == 0, p.stderr
    suite = json.loads((tmp_path / "s" / "suite.json").read_text())
    assert {j["kind"] for j in suite["jobs"]} == {"Activation", "Elementwise"}
    assert len(suite["models"][0]["configs"]) > len(suite["jobs"])
    msg = one_line_error(bz("generate", models / "resnet50_bnkept.onnx", "--kinds", "Relu", "-o", tmp_path / "t"), 2)
    assert "unknown layer kind 'Relu'" in msg and "Activation" in msg
    msg = one_line_error(bz("generate", models / "lstm_lm.onnx", "--kinds", "Conv", "-o", tmp_path / "u"), 2)
    assert "no layer of kind Conv" in msg
