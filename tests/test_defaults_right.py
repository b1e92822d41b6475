"""Right answers by default (issue 52, "Wrong answers by default"): each test reproduces one defect on
the shipped reference databases or the recorded data of tests/data, and asserts what a user relies on."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benanza.analysis.analyzer import resolve_system
from benanza.database import query
from benanza.database.store import open_db
from benanza.errors import UsageError

from conftest import scenario_of

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


def bz(*args, cwd=None):
    """``benanza ARGS`` as a user runs it (in ``cwd``): (exit code, stdout, stderr)."""
    r = subprocess.run([sys.executable, "-m", "benanza", *map(str, args)], capture_output=True, text=True, timeout=600,
                       cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize("system", [[], ["--system", "NVIDIA H100 80GB HBM3"], ["--system", "H100"]])
def test_analyze_on_the_partitions_database_gives_the_whole_gpus_lbl(system):
    rc, out, err = bz("analyze", RESNET50, "--batch", 32, "--dtype", "fp16", "--db", PARTITIONS, "--json", *system)
    assert rc == 0, err
    a = scenario_of(out, "analyze")
    assert a["system"]["sm_count"] == 132
    assert round(a["lbl_ms"], 4) == 2.2353  # was 5.9129 ms, the [32 SMs] partition's


# ------------------------------------------------------------------ 2. a layout asked for and not measured

RESNET50_BNKEPT = ROOT / "tests" / "data" / "zoo" / "models" / "resnet50_bnkept.onnx"


def _analysis(db_path, spec, model, batch, precision, layouts, cache="warm"):
    from benanza.analysis.analyzer import analyze
    from benanza.processing.model import process

    db = open_db(str(db_path), create=False)
    system, _ = resolve_system(db, spec)
    return analyze(process(model, batch), db, system, precision, cache, layouts)


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
    d = scenario_of(out, "analyze")
    assert len(row) == len(cols) and float(row[-2]) == pytest.approx(d["lbl_ms"], abs=6e-5)  # 3.3004 ms
    assert float(row[cols.index("unfused-seq")]) == pytest.approx(d["lbl_sequential_ms"], abs=6e-5)  # 3.9652 ms


# ------------------------------------------------------------------ 4. a model's export, and db shared

TRUTH = REF / "h200_truth.sqlite.gz"


@pytest.fixture(scope="module")
def vgg16_export(tmp_path_factory):
    from benanza.database.sharing import export

    out = tmp_path_factory.mktemp("export") / "vgg16.sqlite"
    export(open_db(str(TRUTH), create=False), out, models=["vgg16"], batch=32)
    return out


def _record_sizes(path) -> dict:
    import sqlite3

    with sqlite3.connect(path) as c:
        return {(n, b): k for n, b, k in c.execute(
            "SELECT m.name, m.batch, count(mc.layer_key) FROM models m JOIN model_configs mc ON mc.model_id = m.id "
            "GROUP BY m.id")}


def test_a_model_export_carries_that_models_record_only_and_whole(vgg16_export):
    truth = open_db(str(TRUTH), create=False)
    whole = _record_sizes(truth.url.split("///", 1)[1])[("vgg16", 32)]
    assert whole == 35
    # was: vgg16 and 9 other models' partial records (resnet50 exported: vgg16 with 3 of its 35 configs)
    assert _record_sizes(vgg16_export) == {("vgg16", 32): whole}


def test_db_shared_on_the_export_of_another_model_does_not_claim_it_complete(vgg16_export):
    rc, out, err = bz("db", "shared", "resnet50", "--db", vgg16_export, "--dtype", "fp16")
    assert rc != 0 and "no model 'resnet50' recorded" in err and "0 to measure" not in out


def test_db_shared_on_a_partial_record_does_not_claim_complete(vgg16_export, tmp_path):
    import shutil
    import sqlite3

    partial = tmp_path / "partial.sqlite"
    shutil.copy(vgg16_export, partial)
    with sqlite3.connect(partial) as c:  # a record as an older export wrote it: 3 of its 35 configs
        keep = [k for (k,) in c.execute("SELECT layer_key FROM model_configs ORDER BY layer_key LIMIT 3")]
        c.execute(f"DELETE FROM model_configs WHERE layer_key NOT IN ({','.join('?' * len(keep))})", keep)
    rc, out, err = bz("db", "shared", "vgg16", "--db", partial, "--dtype", "fp16")
    assert "3 of 3" not in out and "0 to measure" not in out  # was "3 of 3 ... measured (100%); 0 to measure"
    assert rc == 2 and "partial" in err and "3 of its" in err


# ------------------------------------------------------------------ 5. the insights count layers per model, kernels per iteration

PROFILE = ROOT / "tests" / "data" / "h200_profiles" / "resnet50_bnkept-b32-fp16"


@pytest.fixture(scope="module")
def folded_insights():
    """resnet50 with its batch norms folded (the export) against PyTorch's run of the unfolded model
    (5 profiled iterations; each batch norm is 3 kernels: 53 batch norms, 159 kernels, per iteration)."""
    from benanza.analysis.insights import build_insights
    from benanza.profiles import load_profile

    a = _analysis(TRUTH, None, ROOT / "tests" / "data" / "zoo" / "models" / "resnet50.onnx", 32, "fp16", ("NCHW", "NHWC"))
    p = load_profile(PROFILE, ROOT / "tests" / "data" / "zoo" / "models" / "resnet50.onnx", batch=32,
                     allow_mismatch=True)
    assert p.iterations == 5
    db = open_db(str(TRUTH), create=False)
    return build_insights(a, p, db, resolve_system(db, None)[0].id)


def test_the_folded_batch_norms_are_counted_as_layers_not_kernels(folded_insights):
    f = next(f for f in folded_insights.findings if f.kind == "framework_batch_norm")
    assert f.title.startswith("53 batch norms")  # was "159 batch norms" (53 x 3 kernels)
    ev = " ".join(f.evidence)
    assert "159 kernels per iteration" in ev and "batch_norm_transform_input_kernel x53" in ev
    assert "x265" not in ev  # was the sum over the 5 profiled iterations, labelled "per inference"


def test_kernel_counts_are_per_iteration_never_summed_over_iterations(folded_insights):
    for f in folded_insights.findings:
        ev = " ".join(f.evidence)
        assert "kernels per inference" not in ev, f.title
    lay = next(f for f in folded_insights.findings if f.kind == "layout_conversion")
    ev = " ".join(lay.evidence)
    assert "69 kernels per iteration" in ev and "nchwToNhwcKernel x43" in ev  # was x215: 5 iterations summed


# ------------------------------------------------------------------ 6. benanza torch without its packages

def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@pytest.mark.parametrize("spec,package", [("resnet50", "torchvision"), ("torchvision:resnet50", "torchvision"),
                                          ("transformers:bert", "transformers")])
def test_benanza_torch_without_its_packages_says_what_to_install(spec, package, tmp_path):
    if _installed(package) and _installed("torch"):
        pytest.skip(f"{package} and torch are installed here: nothing is missing")
    rc, out, err = bz("torch", spec, "--no-bench", cwd=tmp_path)
    lines = err.strip().splitlines()
    assert rc == 2, err  # was 70, "internal error ... ModuleNotFoundError"
    assert len(lines) == 1 and lines[0].startswith("benanza: ") and "internal error" not in lines[0], err
    assert "is not installed" in lines[0] and 'benanza[torch]' in lines[0]
    assert (package in lines[0]) or ("torch" in lines[0] and not _installed("torch"))
    assert list(tmp_path.iterdir()) == []  # nothing left behind


# ------------------------------------------------------------------ 7. bench and ceilings without a usable GPU

def test_without_a_usable_gpu_the_check_fails_at_once_in_one_line():
    import time

    from benanza.errors import DeviceError
    from benanza.runner.system import gpu_problem, libcuda_problem, require_gpu

    if gpu_problem(0) is None:
        pytest.skip("a usable GPU is here: nothing to refuse")
    t = time.perf_counter()
    with pytest.raises(DeviceError) as e:
        require_gpu(0, "benanza ceilings")
    assert time.perf_counter() - t < 1.0  # was ~4 minutes of compiling the harness first
    msg = str(e.value)
    assert e.value.exit_code == 6 and "\n" not in msg and msg.startswith("benanza ceilings measures on a GPU")
    assert gpu_problem(0) in msg
    assert libcuda_problem(0) is not None  # the driver's own answer (no native module needed) agrees
    with pytest.raises(DeviceError, match="none can run here"):
        require_gpu([0, 1], "benanza bench")


# ------------------------------------------------------------------ 8. an NVBench export without cold measurements

def test_an_nvbench_export_of_a_warm_only_database_warns_that_nvbench_compare_matches_nothing(tmp_path):
    from benanza.database.exports import nvbench_doc

    doc = nvbench_doc(open_db(str(PAIR), create=False), "H200", warn=lambda m: None)
    cold = [s for b in doc["benchmarks"] for st in b["states"] for s in st.get("summaries", [])
            if s["tag"].startswith("nv/cold/")]
    assert cold == []  # the shipped databases are warm-only (--no-cold)
    w = doc["meta"]["benanza"]["warnings"]
    assert len(w) == 1 and "no cold measurement" in w[0] and "nvbench_compare.py" in w[0]
    out = tmp_path / "h200.json"
    rc, _, err = bz("db", "export", "--db", PAIR, "--system", "H200", "--format", "nvbench", "-o", out)
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if ln.startswith("benanza: warning:")]
    assert len(lines) == 1 and "nvbench_compare.py" in lines[0] and "cold" in lines[0]  # was silent
    assert json.loads(out.read_text())["meta"]["benanza"]["warnings"] == w


# ------------------------------------------------------------------ 9. report files honour the umask

@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_report_files_are_written_with_the_users_umask(tmp_path, umask, mode):
    from benanza.database.exports import write_atomic, write_json

    old = os.umask(umask)
    try:
        a = write_atomic(b"<html></html>", tmp_path / "report.html")
        b = write_json({"x": 1}, tmp_path / "trace.json")
    finally:
        os.umask(old)
    assert (a.stat().st_mode & 0o777, b.stat().st_mode & 0o777) == (mode, mode)  # was 0600 whatever the umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "trace.json"]  # no temporary file left


# ------------------------------------------------------------------ 9. roofline rows above 100 %, the cache, unmeasured phases

def _roofline(a):
    from benanza.analysis.gpus import find_gpu
    from benanza.reports.chart import model_roofline

    return model_roofline(a, find_gpu(a.system["gpu_name"]))


def test_no_roofline_row_passes_100_percent_unflagged():
    a = _analysis(TRUTH, None, RESNET50, 32, "fp16", ("NCHW", "NHWC"))
    mr = _roofline(a)
    assert len(mr.layers) == 121
    over = [x for x in mr.layers if x.efficiency > 1]
    assert len(over) == 22  # a DRAM bound for a working set the 50 MiB L2 holds, warm: no bound
    assert all(x.l2_resident and x.limit == "memory, L2-resident" for x in over)  # was "memory", unflagged
    assert all(x.bytes <= mr.gpu.l2_bytes for x in over)
    d = mr.to_dict()
    assert d["cache"] == "warm" and d["l2_resident_layers"] >= 22
    assert sum(1 for x in d["layers"] if x["above_roof"]) == 22


def test_a_cold_analysis_says_cold():
    a = _analysis(REF / "h200.sqlite.gz", None, RESNET50, 32, "fp16", ("NCHW",), cache="cold")
    assert a.cache == "cold" and "cold" in a.lbl_text()  # was "(fused, critical path, nchw)"
    mr = _roofline(a)
    assert mr.to_dict()["cache"] == "cold" and not any(x.l2_resident for x in mr.layers)  # L2 flushed: DRAM holds
    from benanza.reports.lbl_summary import lbl_summary_table

    assert "cold cache" in _table_text(lbl_summary_table([a]))
    warm = _analysis(REF / "h200.sqlite.gz", None, RESNET50, 32, "fp16", ("NCHW",))
    assert "cold" not in warm.lbl_text() and "cold" not in _table_text(lbl_summary_table([warm]))


def test_an_unmeasured_training_phase_is_none_never_zero():
    from benanza.analysis.training import training_step
    from benanza.processing.model import process

    db = open_db(str(TRUTH), create=False)
    system, _ = resolve_system(db, None)
    ml = process(RESNET50, 32)
    from benanza.analysis.analyzer import analyze

    a = analyze(ml, db, system, "fp16", "warm", ("NCHW", "NHWC"))
    step = training_step(ml, a, db, system)
    weight_calls = [c for c in step.calls if c.phase == "backward_weight"]
    assert weight_calls and all(c.time_ms is None for c in weight_calls)  # the database has none of them
    assert step.phase_ms["backward_weight"] is None  # was 0.0, printed 0.0000
    assert step.to_dict()["phase_ms"]["backward_weight"] is None
    assert step.phase_ms["backward_data"] > 0  # a measured phase keeps its (partial) sum
    from benanza.reports.training import training_step_table

    text = _table_text(training_step_table([step]))
    assert "0.0000" not in text and "not measured" in text
