"""The analysis workflow (benanza.analysis.insights, benanza.reports.report, `analyze --profile`, `report`) on real data:
PyTorch 2.11's trace and cuDNN/cuBLASLt logs of torchvision resnet50 (BN not folded, batch 1, FP32,
cudnn.benchmark, H200; tests/data/zoo/samples) against resnet50_bnkept.onnx and the reference database
measured on an H200 (db/reference/h200.sqlite.gz).

The samples carry no latency measured outside the profiler: the profile.json written here states
one, LATENCY_MS = 3.1 ms (a test value, chosen above the GPU kernel time 0.810 ms and the fp32 LBL).
"""
import json
import shutil
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from benanza.analysis.analyzer import analyze, resolve_system
from benanza.cli import app
from benanza.database.store import open_db
from benanza.analysis.insights import build_insights
from benanza.processing.model import process
from benanza.profiles import load_profile
from benanza.reports.report import load_documents, render_comparison, render_html
from conftest import REPO, scenario_of

REF_DB = REPO / "db" / "reference" / "h200.sqlite.gz"
LATENCY_MS = 3.1  # a test value: the samples have no latency measured outside the profiler
SAMPLES = {"trace.json.gz": "pytorch_resnet50_b1_fp32_trace.json.gz",
           "cudnn.log.gz": "pytorch_resnet50_b1_fp32_cudnn_log_head.txt.gz",
           "cublaslt.log.gz": "pytorch_resnet50_b1_fp32_cublaslt_log_head.txt.gz"}


@pytest.fixture(scope="module")
def prof_dir(shared, tmp_path_factory):
    s = shared / "samples"
    if not all((s / f).exists() for f in SAMPLES.values()):
        pytest.skip("the test samples (tests/data/zoo/samples) are not available")
    d = tmp_path_factory.mktemp("prof")
    for dst, src in SAMPLES.items():
        shutil.copy(s / src, d / dst)
    doc = {"format": "benanza-profile", "version": 1, "batch": 1, "dtype": "fp32",
           "model_path": str(shared / "models" / "resnet50_bnkept.onnx"),
           "files": {"trace": "trace.json.gz", "cudnn_log": "cudnn.log.gz", "cublaslt_log": "cublaslt.log.gz"},
           "latency": {"median_ms": LATENCY_MS, "method": "test value"},
           "settings": {"framework": "pytorch", "framework_version": "2.11.0", "cudnn_benchmark": True,
                        "allow_tf32_matmul": False, "allow_tf32_cudnn": True}}
    (d / "profile.json").write_text(json.dumps(doc))
    return d


@pytest.fixture(scope="module")
def ins(prof_dir, models):
    db = open_db(str(REF_DB), create=False)
    system, _ = resolve_system(db, None)
    ml = process(models / "resnet50_bnkept.onnx", 1)
    a = analyze(ml, db, system, "fp32")
    tf32 = analyze(ml, db, system, "tf32")
    p = load_profile(prof_dir, models / "resnet50_bnkept.onnx")
    return build_insights(a, p, db, system.id, tensor_core=tf32), a


def _finding(ins, kind):
    hits = [f for f in ins.findings if f.kind == kind]
    assert hits, f"no {kind} finding in {[f.kind for f in ins.findings]}"
    return hits[0]


def test_headline_numbers(ins):
    i, a = ins
    assert i.latency_ms == LATENCY_MS
    assert i.gpu_kernel_ms == pytest.approx(0.810142, abs=1e-6)
    assert i.host_overhead_ms == pytest.approx(LATENCY_MS - 0.810142, abs=1e-6)
    assert i.complete and i.lbl_sequential_ms == pytest.approx(a.lbl_sequential_ms)
    assert 0 < i.benanza_ratio < 1
    # the Benanza ratio is the headline LBL (fused, critical path) over the measured latency
    assert i.benanza_ratio == pytest.approx(i.lbl_fused_parallel_ms / LATENCY_MS)
    assert i.lbl_fused_sequential_ms <= i.lbl_sequential_ms and i.lbl_fused_parallel_ms <= i.lbl_parallel_ms
    assert i.parallel_potential_ms == pytest.approx(i.lbl_sequential_ms - i.lbl_parallel_ms)
    assert i.parallel_potential_ms > 0  # resnet50's downsample branches
    # Q6 on the reference database: TF32 Tensor Cores beat FP32 FMA at batch 1
    assert i.tensor_cores["precision"] == "tf32" and i.tensor_cores["profit_ms"] > 0.5
    assert i.joint["speedup"] == pytest.approx(LATENCY_MS / i.lbl_fused_parallel_ms)
    assert i.joint["speedup"] > 1 and i.joint["speedup_tensor_cores"] > i.joint["speedup"]


def test_framework_inefficiencies(ins):
    i, _ = ins
    lay = _finding(i, "layout_conversion")
    assert lay.title.startswith("51 layout conversions")
    assert lay.saving_ms == pytest.approx(0.152, abs=0.001)
    assert "nchwToNhwcKernel x35" in lay.evidence[0] and "nhwcToNchwKernel x16" in lay.evidence[0]
    assert len(lay.layers) == 19  # around 19 convolutions
    bn = _finding(i, "unfused_batch_norm")
    assert bn.title.startswith("53 batch norms") and "bn_fw_inf_1C11_kernel_NCHW x53" in bn.evidence[0]
    assert bn.saving_ms > 0 and len(bn.layers) == 2 * 53
    fill = _finding(i, "fill")
    assert fill.title.startswith("7 ") and "init_device_workspace_kernel x4" in fill.evidence[0]
    gaps = _finding(i, "launch_gaps")
    assert 0 < gaps.saving_ms <= i.host_overhead_ms  # capped: measured under the profiler
    assert i.breakdown["layout"] == pytest.approx(lay.saving_ms)
    assert i.breakdown["unfused_batch_norm"] == pytest.approx(bn.saving_ms)
    # ranked by saving
    assert [f.saving_ms for f in i.findings] == sorted((f.saving_ms for f in i.findings), reverse=True)


def test_algorithm_selection(ins):
    i, _ = ins
    by = {c.layer: c for c in i.algorithms}
    c0 = by[0]  # conv1: the cuDNN log head has its autotuning
    assert c0.framework_engine.startswith("eng") and len(c0.framework_candidates) > 1
    # the reference database times legacy algorithms only: the engine config is not there, and is said so
    assert not c0.in_db and c0.framework_cost_ms is None
    assert any("have no valid time in the performance database" in n and "never measured" in n for n in i.notices)
    assert c0.best_ms > 0 and c0.heuristic_algorithm
    heur = _finding(i, "heuristic_selection")
    assert heur.saving_ms > 0 and all("heuristic" in e for e in heur.evidence)
    assert heur.saving_ms == pytest.approx(sum(c.heuristic_cost_ms or 0 for c in i.algorithms))


def test_framework_engine_cost_from_database(ins, prof_dir, models, tmp_path):
    """An engine config the database measured is costed: its time minus the layer's best."""
    import sqlalchemy as sa

    from benanza.database.store import Measurement

    i, a = ins
    url = f"sqlite:///{tmp_path / 'copy.db'}"
    import gzip

    (tmp_path / "copy.db").write_bytes(gzip.decompress(REF_DB.read_bytes()))
    db = open_db(url, create=False, read_only=False)
    system, _ = resolve_system(db, None)
    key = a.layers[0].layer.key
    eng = i.algorithms[0].framework_engine
    with db.session() as s:
        m = s.scalars(sa.select(Measurement).where(Measurement.layer_key == key, Measurement.status == "ok",
                                                   Measurement.precision == "fp32")).first()
        s.add(Measurement(system_id=m.system_id, layer_key=key, precision="tf32", call="cudnnBackendExecute",
                          algorithm=eng, math="TF32", dtype=m.dtype, cache="warm", layout="NCHW", batch=1,
                          status="ok", median_ms=a.layers[0].time_ms + 0.01, q1_ms=None, q3_ms=None))
    p = load_profile(prof_dir, models / "resnet50_bnkept.onnx")
    got = build_insights(a, p, db, system.id)
    c0 = next(c for c in got.algorithms if c.layer == 0)
    assert c0.in_db and c0.framework_cost_ms == pytest.approx(0.01)
    f = _finding(got, "algorithm_selection")
    assert eng in f.evidence[0] and f.saving_ms == pytest.approx(0.01)
    # the same engine config screened by the harness (one replay, slower than 1.5x the best): costed
    # from that replay, and said so
    screen_ms = a.layers[0].time_ms * 2
    with db.session() as s:
        row = s.scalars(sa.select(Measurement).where(Measurement.layer_key == key, Measurement.algorithm == eng)).one()
        row.status, row.median_ms = "screened", None
        row.message = (f"screened: {screen_ms:.4f} ms per call (one graph replay, 3 calls) > 1.50 x the job's best "
                       f"so far ({a.layers[0].time_ms:.4f} ms); not sampled further")
    got = build_insights(a, p, db, system.id)
    c0 = next(c for c in got.algorithms if c.layer == 0)
    assert c0.in_db and c0.framework_db_source == "screening replay"
    assert c0.framework_cost_ms == pytest.approx(round(screen_ms, 4) - a.layers[0].time_ms)
    f = _finding(got, "algorithm_selection")
    assert "(one screening replay)" in f.evidence[0] and "1 of the 1 from the one replay" in f.detail
    # not supported in this precision: no time, and the notice says why
    with db.session() as s:
        row = s.scalars(sa.select(Measurement).where(Measurement.layer_key == key, Measurement.algorithm == eng)).one()
        row.status, row.message = "not_supported", "excluded by the math mode: numerical note TENSOR_CORE"
    got = build_insights(a, p, db, system.id)
    c0 = next(c for c in got.algorithms if c.layer == 0)
    assert not c0.in_db and c0.framework_cost_ms is None
    assert any("no valid time" in n and "1 not supported or excluded" in n for n in got.notices)


class _Checker(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.external, self.svg_depth, self.svgs, self.stack = set(), [], 0, 0, []

    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        if "id" in d:
            self.ids.add(d["id"])
        for k in ("src", "href"):
            if k in d and not str(d[k]).startswith("#"):
                self.external.append((tag, d[k]))
        if tag == "link" or (tag == "script" and "src" in d):
            self.external.append((tag, d))
        if tag == "svg":
            assert d.get("xmlns") == "http://www.w3.org/2000/svg"
            self.svgs += 1
        if tag in ("svg", "rect", "title", "text", "g"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in ("svg", "rect", "title", "text", "g"):
            assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
            self.stack.pop()


def _check_html(text, sections):
    c = _Checker()
    c.feed(text)
    c.close()
    assert not c.external, c.external[:3]
    assert not c.stack and c.svgs > 0
    assert sections <= c.ids, sections - c.ids
    # namespace names (SVG, and XLink in matplotlib's charts) are identifiers, never fetched
    bare = text.replace("http://www.w3.org/2000/svg", "").replace("http://www.w3.org/1999/xlink", "")
    assert "http://" not in bare and "https://" not in text
    return c


def test_html_report_is_self_contained(ins):
    i, _ = ins
    text = render_html(i.to_dict())
    c = _check_html(text, {"summary", "breakdown", "findings", "algorithms", "layers", "critical-path", "layertab"})
    assert c.svgs >= len([r for r in i.layers]) + 1  # one bar pair per layer + the breakdown
    assert "nchwToNhwcKernel" in text and "Benanza ratio" in text
    cmp = render_comparison([i.to_dict(), i.to_dict()])
    _check_html(cmp, {"summary", "latency", "breakdown", "findings"})


def test_html_opens_in_headless_chromium(ins, tmp_path):
    pw = pytest.importorskip("playwright.sync_api")
    i, _ = ins
    f = tmp_path / "r.html"
    f.write_text(render_html(i.to_dict()))
    errors = []
    try:
        with pw.sync_playwright() as p:
            b = p.chromium.launch()
            page = b.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f.as_uri())
            assert page.locator("#findings").count() == 1
            page.fill("input", "layer4")
            b.close()
    except pw.Error as e:
        if "Executable doesn't exist" in str(e) or "playwright install" in str(e):
            pytest.skip("headless Chromium is not installed")
        raise
    assert not errors


# ------------------------------------------------------------------------------------ the commands

runner = CliRunner()


def test_benanza_torch_writes_a_runs_report_from_its_profile(prof_dir, models, tmp_path, capsys):
    """``benanza torch``'s per-run report (``usecases.torch.run_report``, called as soon as a run's profile is
    taken): the analysis of the export against the profile, ``report-*.json`` and ``.html`` beside the
    profile folder, the run's label and the command's seconds; then the tables (or the JSON list)."""
    import benanza.reports.framework as cli
    from benanza.profiles.pytorch import ProfileRun
    from benanza.spec import TorchRequest
    from benanza.usecases.common import open_database
    from benanza.usecases.torch import run_report

    folder = tmp_path / "w"
    shutil.copytree(prof_dir, folder / "profile-b1-fp32")
    run = ProfileRun(1, False, None, folder / "profile-b1-fp32")
    rep = run_report(TorchRequest("resnet50", dtype="fp32", db=str(REF_DB)), open_database(str(REF_DB)), folder,
                     models / "resnet50_bnkept.onnx", run, None, {"export": 1.5, "bench": 2.0})
    cli.write_html(rep)
    doc = rep.document
    written = json.loads((folder / "report-b1-fp32.json").read_text())
    assert written == json.loads(json.dumps(doc, default=str))
    assert doc["format"] == "benanza-insights" and doc["batch"] == 1 and doc["complete"]
    assert doc["run"]["label"] == "eager" and doc["run"]["command_seconds"] == {"export": 1.5, "bench": 2.0}
    assert "<svg" in (folder / "report-b1-fp32.html").read_text()
    cli.print_torch_reports("resnet50", "fp32", folder, [doc], json_out=True)
    assert scenario_of(capsys.readouterr().out, "torch")["lbl_ms"] == pytest.approx(doc["lbl_ms"])
    import io

    from rich.console import Console

    buf = io.StringIO()
    old = cli.out
    cli.out = Console(file=buf, width=120)
    try:
        cli.print_torch_reports("resnet50", "fp32", folder, [doc], json_out=False)
    finally:
        cli.out = old
    text = buf.getvalue()
    assert "resnet50 batch 1 fp32, eager: report in" in text and "report-b1-fp32.html" in text and "LBL" in text


def test_cli_analyze_profile(prof_dir, models, tmp_path):
    model = str(models / "resnet50_bnkept.onnx")
    html = tmp_path / "r.html"
    r = runner.invoke(app, ["analyze", model, "--db", str(REF_DB), "--profile", str(prof_dir), "--json",
                            "--html", str(html)])
    assert r.exit_code == 0, r.output
    doc = scenario_of(r.stdout, "analyze")
    assert doc["format"] == "benanza-insights" and doc["batch"] == 1 and doc["precision"] == "fp32"
    assert doc["benanza_ratio"] < 1 and doc["tensor_cores"]["precision"] == "tf32"
    kinds = [f["kind"] for f in doc["findings"]]
    assert {"layout_conversion", "unfused_batch_norm", "launch_gaps", "heuristic_selection"} <= set(kinds)
    assert html.exists() and "<svg" in html.read_text()
    # the roofline chart of the model (spec-table roofs of the H200) is part of the report
    _check_html(html.read_text(), {"summary", "findings", "layers", "critical-path", "roofline"})
    assert "the H200 datasheet figures" in html.read_text()
    (tmp_path / "a.json").write_text(r.stdout)
    r = runner.invoke(app, ["analyze", model, "--db", str(REF_DB), "--profile", str(prof_dir)])
    assert r.exit_code == 0, r.output
    assert "51 layout conversions" in r.output and "Benanza ratio" in r.output and "joint speedup" in r.output
    r = runner.invoke(app, ["analyze", model, "--db", str(REF_DB), "--profile", str(prof_dir), "-t", "tf32",
                            "--json"])
    assert r.exit_code == 0, r.output
    b = scenario_of(r.stdout, "analyze")
    assert b["tensor_cores"]["fp32_lbl_ms"] > b["lbl_sequential_ms"]
    (tmp_path / "b.json").write_text(r.stdout)
    out = tmp_path / "cmp.html"
    r = runner.invoke(app, ["report", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--html", str(out)])
    assert r.exit_code == 0, r.output
    assert "comparison" in r.output
    _check_html(out.read_text(), {"summary", "latency", "findings"})
    # a plain analyze --json (no profile) is accepted too
    r = runner.invoke(app, ["analyze", model, "--db", str(REF_DB), "--json"])
    (tmp_path / "plain.json").write_text(r.stdout)
    assert len(load_documents([tmp_path / "plain.json", tmp_path / "a.json"])) == 2


@pytest.mark.parametrize("args,msg", [
    (["analyze", "{model}", "--db", "{db}", "--profile", "{tmp}/nope"], "no such profile folder"),
    (["analyze", "{model}", "--db", "{db}", "--profile", "{tmp}"], "profile.json: no such file"),
    (["analyze", "{model}", "--db", "{db}", "--html", "{tmp}/x.html"], "--html needs --profile"),
    (["analyze", "{model}", "--db", "{db}", "--profile", "{prof}", "-b", "32"], "taken at batch 1"),
    (["report", "{tmp}/missing.json"], "no such file"),
    (["report", "{tmp}/bad.json"], "not valid JSON"),
    (["report", "{tmp}/other.json"], "not the output of `benanza analyze --json`"),
])
def test_cli_bad_input_is_one_line(args, msg, prof_dir, models, tmp_path):
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "other.json").write_text('{"x": 1}')
    args = [a.format(model=models / "resnet50_bnkept.onnx", db=REF_DB, tmp=tmp_path, prof=prof_dir) for a in args]
    r = runner.invoke(app, args)
    assert r.exit_code != 0
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert lines and lines[-1].startswith("benanza: ") and msg in r.output, r.output
    assert "Traceback" not in r.output


def test_an_lbl_above_the_framework_is_called_out():
    """Seen on an H200 (vit_b_16, batch 32): benanza's Transposes cost 7.3 ms where PyTorch runs them
    as views; the LBL then exceeds the framework's kernel time and the analysis must say so, naming
    the op types responsible."""
    from types import SimpleNamespace

    from benanza.analysis.insights import _above_framework

    a = SimpleNamespace(lbl_ms=38.68)
    p = SimpleNamespace(gpu_kernel_ms=35.73)
    rows = [{"op": "Transpose", "lbl_ms": 0.075, "framework_ms": 0.0}] * 97 + \
           [{"op": "MatMul", "lbl_ms": 0.5, "framework_ms": 0.6}] * 48 + \
           [{"op": "Erf", "lbl_ms": 0.069, "framework_ms": 0.037}] * 12 + \
           [{"op": "Reshape", "lbl_ms": None, "framework_ms": 0.05}]
    msg = _above_framework(a, p, rows)
    assert msg.startswith("the LBL (38.6800 ms) exceeds the framework's GPU kernel time (35.7300 ms)")
    assert "Transpose x97 (LBL 7.2750 ms, framework kernels 0.0000 ms), Erf x12" in msg
    assert "MatMul" not in msg


# ------------------------------------------- a real H200 profile and the finding applied in PyTorch

H200_PROFILES = REPO / "tests" / "data" / "h200_profiles"
PAIR_DB = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"


def test_h200_layout_finding_and_channels_last(models):
    """resnet50_bnkept at batch 32 in fp16, profiled with `benanza profile` on an H200 (PyTorch 2.11,
    cudnn.benchmark; traces of benchmarks/gpu_workflow.sh, logs left out), against the H200's fp16
    measurements: the framework's NCHW run converts layouts around its convolutions (69 kernels per
    inference) and runs 53 batch norms apart; the same model in torch.channels_last runs no layout
    conversion and is faster by more than the conversions' kernel time (the convolutions speed up too)."""
    db = open_db(str(PAIR_DB), create=False)
    system = next(s for s in db.systems() if s.gpu_name == "NVIDIA H200")
    model = models / "resnet50_bnkept.onnx"
    ml = process(model, 32)
    a = analyze(ml, db, system, "fp16")
    assert a.complete
    nchw = load_profile(H200_PROFILES / "resnet50_bnkept-b32-fp16", model)
    cl = load_profile(H200_PROFILES / "resnet50_bnkept-b32-fp16-cl", model)
    assert nchw.category_counts()["layout"] == 69 and cl.category_counts()["layout"] == 0
    assert nchw.settings.gpu_name == "NVIDIA H200" and cl.settings.memory_format == "channels_last"
    ins = build_insights(a, nchw, db, system.id)
    kinds = {f.kind: f for f in ins.findings}
    layout = kinds["layout_conversion"]
    assert layout.saving_ms == pytest.approx(nchw.category_ms()["layout"]) and 0.5 < layout.saving_ms < 0.7
    assert len(kinds["unfused_batch_norm"].layers) == 2 * 53
    assert 0.75 < ins.benanza_ratio < 0.8  # LBL (fused, critical path) 3.26 ms vs 4.22 ms measured
    gain = nchw.latency.median_ms - cl.latency.median_ms
    assert gain > layout.saving_ms  # 0.79 ms measured vs 0.59 ms estimated


def test_engine_names_match_across_framework_logs_and_database(shared):
    """The framework's logs and the performance database spell the same engine config or cuBLASLt
    algorithm differently; the join must see them as one (real spellings from the H200 run)."""
    from benanza.analysis.insights import engine_key
    from benanza.profiles.cublaslt_log import read_cublaslt_log
    # cudnn-frontend lists unset knobs in PyTorch's plan names and not in benanza's
    assert engine_key("eng1_k2=-1_k3=-1") == engine_key("eng1")
    assert engine_key("eng3_k2=1_k3=-1_k5=2") == "eng3_k2=1_k5=2"
    assert engine_key("eng3_k2=1") != engine_key("eng3_k2=2")
    # cuBLASLt: the log strips the enum prefixes and leaves defaults out; benanza's name fills some in
    log_names = {
        "algo66 tile=32x64 stages=64xAUTO custom=2 clusterShape=CLUSTER_SHAPE_4x2x1":
            "lt:algo=66 tile=32x64 stages=64xAUTO splitK=1 opt=2 cl=4x2x1",
        "algo21 tile=64x64 stages=32x5 splitK=8 reduction=COMPUTE_TYPE":
            "lt:algo=21 tile=64x64 stages=32x5 splitK=8 red=compute",
        "algo21 tile=64x64 stages=32x6 splitK=2 reduction=INPLACE": "lt:algo=21 tile=64x64 stages=32x6 splitK=2 red=inplace",
        "algo63 tile=32x32 stages=64x3 swizzle=1": "lt:algo=63 tile=32x32 stages=64x3 splitK=1 swz=1",
        "algo13 custom=75": "lt:algo=13 tile=auto stages=auto splitK=1 opt=75",
    }
    for log, db in log_names.items():
        assert engine_key(log) == engine_key(db), (log, db)
    assert engine_key("algo21 tile=64x64 stages=32x5 splitK=8 reduction=COMPUTE_TYPE") != \
        engine_key("lt:algo=21 tile=64x64 stages=32x5 splitK=4 red=compute")
    assert engine_key("CUBLAS_GEMM_DEFAULT") == "CUBLAS_GEMM_DEFAULT"
    # and the names the log parser builds from the shared sample are of that form
    sample = shared / "samples" / SAMPLES["cublaslt.log.gz"]
    if not sample.exists():
        pytest.skip("the test samples (tests/data/zoo/samples) are not available")
    log = read_cublaslt_log(sample)
    keys = {engine_key(m.algorithm) for m in log.matmuls}
    assert "lt:algo=21 tile=64x64 stages=32x5 splitK=16 red=compute swz=0 opt=0 cl=auto" in keys
    assert all(k.startswith("lt:algo=") for k in keys)


def test_the_lbl_runs_both_layouts_by_default_and_layout_narrows_it(models):
    """`analyze` lets convolutions and their neighbours run NHWC by default, whatever the layout the
    framework ran in (the bound is the minimum over both); --layout nchw narrows it to the model's."""
    args = ["analyze", str(models / "resnet50_bnkept.onnx"), "--dtype", "fp16", "--db", str(PAIR_DB), "--system",
            "NVIDIA H200", "--profile", str(H200_PROFILES / "resnet50_bnkept-b32-fp16-cl"), "--json"]
    runner = CliRunner()
    both = runner.invoke(app, args)
    assert both.exit_code == 0, both.output
    narrow = runner.invoke(app, args + ["--layout", "nchw"])
    assert narrow.exit_code == 0, narrow.output
    b, n = scenario_of(both.stdout), scenario_of(narrow.stdout)
    assert b["lbl_fused_parallel_ms"] < n["lbl_fused_parallel_ms"]
