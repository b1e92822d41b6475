"""The truth benchmark's table, flag and precision-choice logic (benchmarks/truth.py) on
fabricated analyses; and its one-line errors for bad arguments. No GPU, no torch."""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import onnx
import pytest

from benchmark_modules import load
from conftest import envelope_of

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def truth():
    return load("truth")


def _analysis(lbl, seq=None, complete=True, batch=32, precision="fp16"):
    return {"model": "m", "batch": batch, "precision": precision, "lbl_fused_parallel_ms": lbl,
            "lbl_fused_sequential_ms": seq if seq is not None else lbl * 1.1, "lbl_sequential_ms": lbl * 1.3,
            "complete": complete, "missing_by_op": {} if complete else {"IsNaN": 12}}


def _pytorch(median, iqr=0.01):
    return {"kernel_ms": {"median": median, "q1": median - iqr / 2, "q3": median + iqr / 2, "iqr": iqr, "n": 30},
            "wall_ms": {"median": median * 1.2}}


def test_precision_choice(truth):
    assert truth.choose_precision("fp16", 0.99) == "fp16"
    # PyTorch's fp32 defaults: cuDNN convolutions and RNNs in TF32, matmuls in FP32
    assert truth.choose_precision("fp32", 0.97) == "fp32+tf32conv"   # a CNN
    assert truth.choose_precision("fp32", 0.34) == "fp32+tf32conv"   # the LSTM LM: its decoder GEMM stays FP32
    assert truth.choose_precision("fp32", 0.0) == "fp32"             # a transformer: no cuDNN layer
    with pytest.raises(truth.TruthError, match="unknown data type 'bf16'"):
        truth.choose_precision("bf16", 0.9)


def test_cudnn_flop_share_counts_convolutions_and_rnns_among_benchmarked_layers(truth):
    def ly(kind, flops):
        return SimpleNamespace(config=SimpleNamespace(kind=kind, flops=lambda: flops))
    layers = [ly("Conv", 800), ly("RNN", 100), ly("Gemm", 50), ly("Elementwise", 50), SimpleNamespace(config=None)]
    assert truth.cudnn_flop_share(layers) == pytest.approx(0.9)
    assert truth.cudnn_flop_share([SimpleNamespace(config=None)]) == 0.0


def test_stats_median_and_iqr(truth):
    s = truth.stats([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s["median"], s["q1"], s["q3"], s["iqr"], s["n"]) == (3.0, 2.0, 4.0, 2.0, 5)
    assert truth.stats([])["median"] is None
    assert truth.stats([1.5])["iqr"] == 0.0


@pytest.mark.parametrize("lbl,complete,flags", [
    (0.95, True, []),
    (1.00, True, []),                      # equal is a bound
    (1.0001, True, ["LBL>PT"]),            # every ratio above 1.00, however slightly
    (1.5, False, ["LBL>PT", "INCOMPLETE"]),
    (0.5, False, ["INCOMPLETE"]),          # a partial sum below is still flagged
])
def test_row_ratio_and_flags(truth, lbl, complete, flags):
    r = truth.make_row("resnet50", 32, "fp16", "fp16", _pytorch(1.0), _analysis(lbl, complete=complete))
    assert r["ratio"] == pytest.approx(lbl)
    assert r["flags"] == flags


def test_missing_sides_are_flagged_not_zero(truth):
    no_lbl = truth.make_row("m", 1, "fp32", "tf32", _pytorch(2.0), None)
    assert no_lbl["ratio"] is None and no_lbl["flags"] == ["NO-LBL"]
    no_pt = truth.make_row("m", 1, "fp32", "tf32", None, _analysis(1.0))
    assert no_pt["ratio"] is None and no_pt["flags"] == ["NO-PYTORCH"]


def test_table_lines_hold_every_column(truth):
    rows = [truth.make_row("vit_b_16", 32, "fp16", "fp16", _pytorch(3.15, 0.02), _analysis(3.0, 3.2), 0.01),
            truth.make_row("resnet50", 1, "fp32", "tf32", _pytorch(1.0), _analysis(1.2, complete=False), 0.97)]
    lines = truth.table_lines(rows)
    assert [c.strip() for c in lines[0].split(" | ")][:5] == ["model", "batch", "dtype", "benanza precision",
                                         "PyTorch kernel ms (median, IQR)"]
    assert "3.150 (0.020)" in lines[2] and "3.000; 3.200" in lines[2] and "0.952" in lines[2] and lines[2].endswith("ok")
    assert "tf32 (cuDNN 97%)" in lines[3] and "partial" in lines[3] and lines[3].endswith("LBL>PT INCOMPLETE")
    md = truth.table_markdown(rows)
    assert md.count("\n") == 4 and md.startswith("| model")
    assert truth.summary_line(rows).startswith("2 rows: 1 ok")


def _step(lbl, seq, complete=True):
    """An analysis with the training step `bench --train --json` gives (benanza.analysis.training)."""
    a = _analysis(lbl / 3)  # the inference LBL: not the one a training row reads
    a["training_step"] = {"lbl_ms": lbl, "sequential_ms": seq, "complete": complete,
                          "phase_ms": {"forward": 0.75, "loss": 0.005, "backward_data": 0.5, "backward_weight": 0.9,
                                       "optimizer": 0.045}}
    return a


def _pytorch_step(median):
    p = _pytorch(median)
    p["phase_ms"] = {k: {"median": v} for k, v in
                     {"forward": 2.09, "loss": 0.012, "backward": 3.83, "optimizer": 0.073, "zero_grad": 0.0}.items()}
    return p


def test_training_rows_hold_the_step_and_its_phases(truth):
    """--train: the ratio is the training step's LBL (critical path) over PyTorch's step kernel time,
    the incomplete step is flagged, and the table shows both phase splits (backward = data + weight)."""
    r = truth.make_row("resnet18", 32, "fp16", "fp16", _pytorch_step(6.0), _step(1.8, 2.3), 0.99, train=True)
    assert r["ratio"] == pytest.approx(0.3) and r["lbl_fused_seq_ms"] == 2.3 and r["flags"] == []
    assert r["lbl_phase_ms"] == pytest.approx({"forward": 0.75, "loss": 0.005, "backward": 1.4, "optimizer": 0.045})
    assert r["pytorch_phase_ms"]["backward"] == 3.83
    inc = truth.make_row("vit_b_16", 32, "fp16", "fp16", _pytorch_step(14.0), _step(9.0, 11.8, complete=False),
                         0.0, train=True)
    assert inc["flags"] == ["INCOMPLETE"]
    no_step = truth.make_row("m", 1, "fp16", "fp16", _pytorch_step(2.0), _analysis(1.0), train=True)
    assert no_step["flags"] == ["NO-LBL"] and no_step["lbl_phase_ms"]["backward"] is None
    lines = truth.table_lines([r, inc])
    assert "step LBL ms (critical path; sequential)" in lines[0] and "fwd / loss / bwd / opt" in lines[0]
    assert "2.090 / 0.012 / 3.830 / 0.073 | 0.750 / 0.005 / 1.400 / 0.045" in lines[2]
    assert "1.800; 2.300" in lines[2] and "0.300" in lines[2]


def test_stage_lines_sum_the_stages(truth):
    lines = truth.stage_lines({"resnet50": {"export_s": 3.0, "process_s": 1.0, "compile_s": 20.0, "run_s": 60.0,
                                            "pytorch_s": 16.0}})
    assert lines[0].split()[:3] == ["model", "export", "process"]
    assert lines[1].split()[-1] == "100.0" and " - " in lines[1]  # the missing stages show as "-"


def test_records_survive_a_truncated_last_line(truth, tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text(json.dumps({"kind": "pytorch", "model": "m"}) + "\n" + '{"kind": "bench", "mod')
    assert [r["kind"] for r in truth.read_records(p)] == ["pytorch"]


@pytest.mark.parametrize("args,message", [
    (["--models", "resnet50,nosuchnet"], "unknown model 'nosuchnet'"),
    (["--batch", "1,0"], "batch sizes must be positive"),
    (["--batch", "x"], "batch sizes must be integers"),
    (["--dtype", "fp16,int8"], "data types are fp16 and fp32"),
    (["--deadline", "-5"], "--deadline must be positive"),
    (["--skip-bench", "--dry-run"], "exclude each other"),
    (["--merge", "nowhere", "--dry-run"], "exclude each other"),
    (["--skip-bench"], "results.jsonl not found"),
    (["--skip-bench", "--no-cold"], "do nothing with --skip-bench"),
])
def test_bad_arguments_are_one_line_errors(truth, tmp_path, capsys, args, message):
    assert truth.main(["--out", str(tmp_path / "out")] + args) == 2
    err = capsys.readouterr().err
    assert err.startswith("benanza: ") and message in err and err.count("\n") == 1


def _fabricated_run(folder: Path, model="resnet50", lbl=(0.8, 1.3), pt=1.0):
    """A results.jsonl as a GPU run writes it: precision, PyTorch and bench records, model_done."""
    folder.mkdir(parents=True, exist_ok=True)
    recs = [{"kind": "precision", "model": model, "precisions": {"share": 0.97, "fp16": "fp16", "fp32": "tf32"}}]
    for b in (1, 32):
        for d in ("fp16", "fp32"):
            recs.append({"kind": "pytorch", "model": model, "batch": b, "dtype": d, **_pytorch(pt)})
    analyses = [_analysis(lbl[0], batch=b, precision=p) for b in (1, 32) for p in ("fp16",)]
    analyses += [_analysis(lbl[1], batch=b, precision="tf32", complete=b == 1) for b in (1, 32)]
    recs.append({"kind": "bench", "model": model, "stages": {"compile_s": 4.0, "run_s": 60.0},
                 "system": {"id": 1}, "analyses": analyses})
    recs.append({"kind": "model_done", "model": model, "stages": {"export_s": 2.0, "pytorch_s": 10.0,
                                                                  "compile_s": 4.0, "run_s": 60.0}})
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def test_merge_builds_one_table_from_earlier_runs(truth, tmp_path):
    a = _fabricated_run(tmp_path / "a", "resnet50")
    b = _fabricated_run(tmp_path / "b", "vit_b_16", lbl=(0.9, 0.95))
    out = tmp_path / "merged"
    assert truth.main(["--out", str(out), "--models", "resnet50,vit_b_16", "--merge", str(a), str(b)]) == 0
    doc = json.loads((out / "table.json").read_text())
    rows = {(r["model"], r["batch"], r["dtype"]): r for r in doc["rows"]}
    assert len(rows) == 8
    assert rows[("resnet50", 32, "fp32")]["flags"] == ["LBL>PT", "INCOMPLETE"]
    assert rows[("resnet50", 1, "fp32")]["precision"] == "tf32" and rows[("resnet50", 1, "fp32")]["flags"] == ["LBL>PT"]
    assert rows[("vit_b_16", 1, "fp16")]["flags"] == [] and rows[("vit_b_16", 1, "fp16")]["ratio"] == pytest.approx(0.9)
    text = (out / "table.txt").read_text()
    assert "8 rows: 5 ok" in text and "2 above 1.00, 2 incomplete" in text and "resnet50" in text.split("stage times")[1]


def test_merge_keeps_the_data_types_of_every_run_of_a_model(truth, tmp_path):
    """Runs split by data type (resnet50's fp16 in one call, its fp32 in the next, as 2026-11-27e did
    for squeezenet1_1 and regnet_y_400mf): the merged table has both, not only the last run's."""
    a = _fabricated_run(tmp_path / "a", "resnet50")
    recs = [json.loads(x) for x in (a / "results.jsonl").read_text().splitlines()]
    fp16 = [r for r in recs if r.get("dtype") != "fp32"]
    fp32 = [r for r in recs if r.get("dtype") != "fp16"]
    fp16[0] = {**recs[0], "precisions": {"share": 0.97, "fp16": "fp16"}}
    fp32[0] = {**recs[0], "precisions": {"share": 0.97, "fp32": "tf32"}}
    for name, part in (("fp16", fp16), ("fp32", fp32)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    out = tmp_path / "merged"
    assert truth.main(["--out", str(out), "--merge", str(tmp_path / "fp16"), str(tmp_path / "fp32")]) == 0
    rows = {(r["model"], r["batch"], r["dtype"]): r for r in json.loads((out / "table.json").read_text())["rows"]}
    assert sorted(rows) == [("resnet50", b, d) for b in (1, 32) for d in ("fp16", "fp32")]
    assert rows[("resnet50", 1, "fp16")]["flags"] == [] and rows[("resnet50", 1, "fp32")]["precision"] == "tf32"


def test_merge_keeps_a_row_an_earlier_run_measured_under_its_own_precision(truth, tmp_path):
    """The fp32 rule changed between runs (2026-11-27d: fp32 -> fp32+tf32conv for a model with cuDNN
    convolutions): an earlier run's fp32 row at batch 32 stays in the merged table under the precision
    it was measured in, while a later run of the same model at batch 1 only shows its own."""
    old = _fabricated_run(tmp_path / "old", "vit_b_16", lbl=(0.5, 0.6))
    recs = [json.loads(x) for x in (old / "results.jsonl").read_text().splitlines()]
    new = [{**recs[0], "precisions": {"share": 0.01, "fp16": "fp16", "fp32": "fp32+tf32conv"}}]
    new += [r for r in recs[1:] if r["kind"] == "pytorch" and r["batch"] == 1]
    new.append({**recs[-2], "analyses": [{**_analysis(0.7, batch=1, precision="fp32"), "conv_precision": "tf32"}]})
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in new))
    out = tmp_path / "merged"
    assert truth.main(["--out", str(out), "--merge", str(old), str(tmp_path / "new")]) == 0
    rows = {(r["model"], r["batch"], r["dtype"]): r for r in json.loads((out / "table.json").read_text())["rows"]}
    assert rows[("vit_b_16", 1, "fp32")]["precision"] == "fp32+tf32conv"
    assert rows[("vit_b_16", 1, "fp32")]["ratio"] == pytest.approx(0.7)
    assert rows[("vit_b_16", 32, "fp32")]["precision"] == "tf32"  # the earlier run's, with its own LBL
    assert rows[("vit_b_16", 32, "fp32")]["ratio"] == pytest.approx(0.6)
    assert "NO-LBL" not in rows[("vit_b_16", 32, "fp32")]["flags"]


def test_pack_splits_large_files_and_keeps_the_table(truth, tmp_path, monkeypatch):
    out = _fabricated_run(tmp_path / "out")
    (out / "table.txt").write_text("table\n")
    db = out / "truth.db"
    db.write_bytes(__import__("os").urandom(300_000))  # incompressible
    monkeypatch.setattr(truth.Packer, "PART", 100_000)
    dest = tmp_path / "pack"
    truth.Packer(dest, out, str(db)).pack()
    names = sorted(p.name for p in dest.iterdir())
    assert "table.txt" in names and "truth-results.tgz" in names
    parts = [n for n in names if n.startswith("truth-db.sqlite.gz.part")]
    assert len(parts) == 4 and not (dest / "truth-db.sqlite.gz").exists()
    import gzip
    assert gzip.decompress(b"".join((dest / n).read_bytes() for n in parts)) == db.read_bytes()


def test_fp32_modes_and_the_bench_calls_they_make(truth):
    assert truth.choose_precision("fp32", 0.9, "fp32") == "fp32"
    assert truth.choose_precision("fp32", 0.1, "tf32") == "tf32"
    assert truth.choose_precision("fp32", 0.9, "conv-tf32") == "fp32+tf32conv"
    assert truth.bench_calls(["fp16", "tf32"]) == [("fp16,tf32", [])]
    assert truth.bench_calls(["fp16", "fp32+tf32conv"]) == [("fp16", []), ("fp32", ["--conv-tf32"])]
    assert truth.bench_calls(["fp32+tf32conv"]) == [("fp32", ["--conv-tf32"])]
    assert truth.analysis_label({"precision": "fp32", "conv_precision": "tf32"}) == "fp32+tf32conv"
    assert truth.analysis_label({"precision": "fp16", "conv_precision": "fp16"}) == "fp16"
    assert truth.analysis_label({"precision": "tf32"}) == "tf32"  # a benanza without conv_precision


def test_kernel_time_per_iteration_from_a_trace(truth, tmp_path):
    """Kernels count in the iteration whose marker encloses their launch; memcpy/memset apart."""
    ev = []
    for k, (t0, kernels) in enumerate([(0, [(10, 30), (45, 20)]), (200, [(210, 50)])]):
        ev.append({"ph": "X", "cat": "user_annotation", "name": truth.MARKER, "ts": t0, "dur": 100, "pid": 1, "tid": 1})
        for j, (ts, dur) in enumerate(kernels):
            corr = 100 * k + j
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t0 + 1 + j, "dur": 1,
                       "pid": 1, "tid": 1, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"gemm_{j}", "ts": t0 + ts, "dur": dur, "pid": 0, "tid": 7,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": 5, "dur": 1, "pid": 1, "tid": 1,
               "args": {"correlation": 999}})
    ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 90, "dur": 4, "pid": 0, "tid": 7,
               "args": {"correlation": 999, "device": 0, "stream": 7}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    from benanza.profiles.trace import read_trace
    st = truth._trace_stats(read_trace(path))
    assert st["kernel_ms"]["n"] == 2 and st["kernel_ms"]["median"] == pytest.approx(0.05)   # 0.050 and 0.050 ms
    assert st["memcpy_ms"]["median"] == pytest.approx(0.002)  # 0.004 ms in the first iteration, none in the second
    assert st["kernels_per_iteration"] == 1.5 and st["top_kernels"][0]["name"] == "gemm_0"


def test_bench_train_json_carries_each_step_in_its_analysis_as_analyze_does(truth, monkeypatch, tmp_path):
    """`bench --train --json` puts each analysis's training step inside it (as `analyze --train
    --json`), which is where truth.py reads it: on an H100 (2026-11-26g) the steps sat in a separate
    list and both training rows came out NO-LBL."""
    from typer.testing import CliRunner

    from benanza.cli import app
    from benanza.usecases import bench as uc

    class Doc(SimpleNamespace):
        def to_dict(self):
            return dict(vars(self))

    run = SimpleNamespace(system_id=1, system={"gpu_name": "H100"}, run_id=1, planned=1, skipped=0, ok=1, failed=0,
                          measurements=3, restarts=0, wall_s=1.0, failures=[])
    analyses = [Doc(**_analysis(0.6, batch=b), system={"gpu_name": "H100"}) for b in (1, 32)]
    steps = [Doc(lbl_ms=1.5 * b, sequential_ms=2.0 * b, complete=True, phase_ms={"forward": 0.5}) for b in (1, 32)]
    monkeypatch.setattr(uc, "bench", lambda *a, **k: SimpleNamespace(
        stages={"run_s": 1.0}, analyses=analyses, system=None, database=None, run=run, framework_run=None,
        training=steps, suite=None, model="m", runs=[run], notices=[], counters=None))
    model = tmp_path / "m.onnx"
    model.write_bytes(onnx.helper.make_model(onnx.helper.make_graph([], "m", [], [])).SerializeToString())
    r = CliRunner().invoke(app, ["bench", str(model), "--batch", "1,32", "--train", "--json", "--db",
                                 str(tmp_path / "p.db")])
    assert r.exit_code == 0, r.output
    doc = envelope_of(r.stdout, "bench")
    assert [a["training_step"]["lbl_ms"] for a in doc["scenarios"]] == [1.5, 48.0] and "training_steps" not in doc
    assert truth.scenarios_of(doc) == doc["scenarios"]
    row = truth.make_row("m", 32, "fp16", "fp16", _pytorch_step(60.0), truth._slim(doc["scenarios"][1]), 0.99,
                         train=True)
    assert row["flags"] == [] and row["ratio"] == pytest.approx(0.8)


def _bench_run(truth, out: Path, skip_bench=False):
    """A truth Run of model m at batches 1 and 32 in fp16 (no GPU: the benanza call is faked)."""
    a = SimpleNamespace(out=out, batches=[1, 32], dtypes=["fp16"], db="t.db", train=False, optimizer="adam",
                        skip_bench=skip_bench, dry_run=False, bench_args=[], analyze_args=[], deadline=None,
                        merge=None, entries=[SimpleNamespace(name="m")])
    out.mkdir(parents=True, exist_ok=True)
    run = truth.Run(a, truth.Recorder(out), {}, "truth.py")
    run.stages["m"] = {}  # as run_model starts it
    return run


@pytest.mark.parametrize("shape", ["envelope", "before schema 1"])
def test_bench_stage_reads_the_scenarios_of_bench_json(truth, monkeypatch, tmp_path, shape):
    """truth.py reads `bench --json`'s scenarios (the schema-1 envelope, benanza/reports/documents.py)
    and, from a benanza before it, the bench object's `analyses`: the same LBLs, system and stages
    either way, into the run and its results.jsonl record (whose format stays `analyses`)."""
    system = {"id": 3, "fingerprint": "f", "gpu_name": "NVIDIA H100"}
    scen = [{**_analysis(0.5 * b, batch=b), "system": system} for b in (1, 32)]
    stages = {"compile_s": 4.0, "run_s": 6.0}
    doc = ({"document": "bench", "schema": 1, "system": system, "model": "m", "stages": stages, "run": {},
            "counters": None, "framework_run": None, "cluster_runs": None, "scenarios": scen}
           if shape == "envelope" else {"model": "m", "stages": stages, "system": system, "analyses": scen})
    monkeypatch.setattr(truth, "run_benanza", lambda cmd, timeout, log: json.loads(json.dumps(doc)))
    run = _bench_run(truth, tmp_path / "out")
    truth.bench_stage(run, SimpleNamespace(name="m"), tmp_path / "m.onnx", {"fp16": "fp16"})
    assert {k: v["lbl_fused_parallel_ms"] for k, v in run.analyses.items()} == {("m", 1, "fp16"): 0.5,
                                                                                ("m", 32, "fp16"): 16.0}
    assert run.systems["m"]["id"] == 3 and run.stages["m"] == stages
    rec = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()][-1]
    assert rec["kind"] == "bench" and [x["batch"] for x in rec["analyses"]] == [1, 32]
    again = _bench_run(truth, tmp_path / "again")  # an earlier run's record merges back
    truth.load_records(again, tmp_path / "out" / "results.jsonl")
    assert again.analyses == run.analyses


def test_analyze_json_of_a_reread_is_read_through_its_envelope(truth, monkeypatch, tmp_path):
    """--skip-bench runs `analyze --json`: one scenario is a list of one in the envelope (a bare object
    before schema 1), and a document without scenarios is an error for the model, not a crash."""
    one = {**_analysis(0.7, batch=32), "system": {"id": 1}}
    env = {"document": "analyze", "schema": 1, "system": {"id": 1}, "scenarios": [one]}
    for doc in (env, one):
        monkeypatch.setattr(truth, "run_benanza", lambda cmd, timeout, log, d=doc: d)
        run = _bench_run(truth, tmp_path / f"o{len(doc)}", skip_bench=True)
        truth.bench_stage(run, SimpleNamespace(name="m"), tmp_path / "m.onnx", {"fp16": "fp16"})
        assert run.analyses[("m", 32, "fp16")]["lbl_fused_parallel_ms"] == 0.7
    monkeypatch.setattr(truth, "run_benanza", lambda cmd, timeout, log: {"document": "db shared", "schema": 1,
                                                                         "system": None, "measured": 3})
    with pytest.raises(Exception, match="no scenarios"):
        truth.bench_stage(_bench_run(truth, tmp_path / "x", skip_bench=True), SimpleNamespace(name="m"),
                          tmp_path / "m.onnx", {"fp16": "fp16"})


def test_merge_refuses_a_training_run_read_as_inference(truth, tmp_path, capsys):
    """A --train run's records merged without --train would print its models' forward LBLs as the
    inference truth (and batch-1 rows it never ran): refused in one line, and the other way round."""
    a = _fabricated_run(tmp_path / "a", "resnet50")
    recs = (a / "results.jsonl").read_text()
    env = {"kind": "env", "command": "python3 benchmarks/truth.py --out /tmp/t --models resnet50 --train"}
    (a / "results.jsonl").write_text(json.dumps(env) + "\n" + recs)
    assert truth.main(["--out", str(tmp_path / "m"), "--merge", str(a)]) != 0
    assert "a training run" in capsys.readouterr().err
    b = _fabricated_run(tmp_path / "b", "vit_b_16")
    env["command"] = "python3 benchmarks/truth.py --out /tmp/t --models vit_b_16"
    (b / "results.jsonl").write_text(json.dumps(env) + "\n" + (b / "results.jsonl").read_text())
    assert truth.main(["--out", str(tmp_path / "n"), "--train", "--merge", str(b)]) != 0
    assert "an inference run" in capsys.readouterr().err


def test_a_reread_folder_holds_the_pytorch_side_it_read(truth, tmp_path, monkeypatch):
    """--skip-bench re-reads the database for an earlier run's exports: its own results.jsonl carries
    the earlier run's PyTorch records, so --merge of re-read folders has both sides of every row."""
    a = _fabricated_run(tmp_path / "a", "resnet50")
    monkeypatch.setattr(truth, "run_all", lambda run, packer: None)
    out = tmp_path / "reread"
    truth.main(["--out", str(out), "--skip-bench", "--from", str(a), "--models", "resnet50"])
    recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    pt = [r for r in recs if r["kind"] == "pytorch"]
    assert len(pt) == 4 and {(r["batch"], r["dtype"]) for r in pt} == {(1, "fp16"), (1, "fp32"), (32, "fp16"), (32, "fp32")}
    assert all(r["reread_from"] == str(a) for r in pt)


def test_mixed_precision_training_dtypes(truth, tmp_path, capsys):
    """--train's amp16 and ampbf16 (fp32 parameters under autocast float16 / bfloat16,
    benchmarks/train_step.py) are held against benanza's fp16 and bf16; without --train they are
    refused in one line (the inference profile has no autocast)."""
    assert truth.choose_precision("amp16", 0.9) == "fp16" and truth.choose_precision("ampbf16", 0.1) == "bf16"
    assert truth.TRAIN_DTYPES == ("fp16", "fp32", "amp16", "ampbf16")
    train_step = load("train_step")
    assert train_step.DTYPES == truth.TRAIN_DTYPES
    assert train_step.AUTOCAST == {"amp16": "float16", "ampbf16": "bfloat16"}
    assert set(train_step.AUTOCAST) == set(truth.AMP_PRECISION)
    assert truth.bench_calls(["fp16", "bf16", "fp16"]) == [("bf16,fp16", [])]
    assert truth.main(["--out", str(tmp_path / "out"), "--dtype", "ampbf16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benanza: ") and "amp16 and ampbf16 with --train" in err and err.count("\n") == 1
    row = truth.make_row("m", 32, "ampbf16", "bf16", _pytorch_step(6.0), _step(1.8, 2.3), 0.99, train=True)
    assert row["precision"] == "bf16" and row["ratio"] == pytest.approx(0.3)


def test_resume_keeps_the_pytorch_side_and_redoes_only_what_is_missing(truth, tmp_path, monkeypatch):
    """A truth run cut at its --deadline during the bench (mobilenet_v3_large's six training rows on
    an H200, 2026-11-27f) had measured PyTorch for 159 s; the next call into the same --out measured
    it all again. With --resume the earlier PyTorch records stand and only the missing ones run; a
    model finished at other data types is not taken for done."""
    out = _fabricated_run(tmp_path / "w", "resnet50")  # model_done at b1/b32 x fp16/fp32
    a = truth.parse_args(["--out", str(out), "--db", str(out / "t.db"), "--models", "resnet50", "--batch", "1,32",
                          "--dtype", "fp16,fp32", "--resume"])
    recs = (out / "results.jsonl").read_text().splitlines()  # the earlier run measured fp32 at b1 only
    (out / "results.jsonl").write_text("\n".join(r for r in recs if '"batch": 32, "dtype": "fp32"' not in r) + "\n")
    run = truth.Run(a, truth.Recorder(out), {}, "cmd")
    measured, modeled = [], []
    monkeypatch.setattr(truth, "profile_pytorch", lambda entry, b, d, *x: measured.append((b, d)) or _pytorch(1.0))
    monkeypatch.setattr(truth, "run_model", lambda run, entry: (modeled.append(entry.name),
                                                                truth.pytorch_stage(run, entry)))
    monkeypatch.setattr(truth, "_free_gpu", lambda: None)
    truth.run_all(run, SimpleNamespace(pack=lambda: None))
    assert modeled == ["resnet50"]  # b32 fp32 was never measured: not done
    assert measured == [(32, "fp32")]  # the other three came from the earlier run
    assert {k for k in run.pytorch} == {("resnet50", b, d) for b in (1, 32) for d in ("fp16", "fp32")}
    # every row asked now is measured (this run's record is in results.jsonl too): the model is done
    modeled.clear()
    truth.run_all(truth.Run(a, truth.Recorder(out), {}, "cmd"), SimpleNamespace(pack=lambda: None))
    assert modeled == [] and measured == [(32, "fp32")]


def test_the_pytorch_side_takes_its_turn_on_a_shared_gpu(truth, monkeypatch, tmp_path):
    """Two truth runs on one GPU (benchmarks/gpu_pair.sh with more commands than GPUs): the PyTorch side
    holds the shared lock of GPU 0, as the bench's workers do; without the variable it takes none."""
    import contextlib
    import types

    from benanza.runner.run import SHARED_GPU_LOCK_ENV, GpuLock

    monkeypatch.delenv(SHARED_GPU_LOCK_ENV, raising=False)
    assert isinstance(truth._gpu_turn(), contextlib.nullcontext)
    monkeypatch.setenv(SHARED_GPU_LOCK_ENV, str(tmp_path / "pair"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None)))
    turn = truth._gpu_turn()
    assert isinstance(turn, GpuLock)
    with turn:
        assert (tmp_path / "pair-gpu0.lock").exists()
