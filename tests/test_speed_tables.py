"""benchmarks/speed.py's tables without a GPU: a policy that changes how the harness builds plans
(``kernel-cache``: BENANZA_KERNEL_CACHE=1) is judged by the training step's LBL as well as the
inference LBL, against --exhaustive, and its bench runs with that environment; --table-only without
earlier runs is a one-line error."""
import subprocess
import sys

import pytest

from benchmark_modules import BENCHMARKS, load


@pytest.fixture(scope="module")
def speed():
    return load("speed")


def _analysis(batch, lbl, step=None, step_complete=True):
    a = {"batch": batch, "precision": "fp16", "lbl_ms": lbl, "complete": True, "name": "x"}
    if step is not None:
        a["training_step"] = {"critical_path_ms": step, "complete": step_complete, "sequential_ms": step * 2}
    return a


def test_a_training_bench_keeps_the_steps_lbl_beside_the_inference_one(speed):
    row = speed.analysis_row(_analysis(32, 1.5, step=4.25, step_complete=False))
    assert row == {"batch": 32, "precision": "fp16", "lbl_ms": 1.5, "complete": True, "step_ms": 4.25,
                   "step_complete": False}
    assert "step_ms" not in speed.analysis_row(_analysis(1, 0.5))


def test_the_kernel_cache_policy_is_compared_on_the_step_against_exhaustive(speed):
    runs = [{"model": "mobilenet_v2_train", "policy": p,
             "analyses": [speed.analysis_row(_analysis(32, lbl, step=step))]}
            for p, lbl, step in (("default", 2.0, 3.00), ("kernel-cache", 2.0, 3.06), ("exhaustive", 2.0, 3.00))]
    text = speed.fmt_compare(runs)
    # the step of the kernel-cache run is 2 % above the exhaustive one: the table says so, per row and summed
    assert "kernel-cache step against exhaustive: |diff| median 2.00 %" in text
    assert "default step against exhaustive: |diff| median 0.00 %" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("mobilenet_v2_train") and "kernel-cache step" in ln)
    assert row.split()[-3:] == ["+2.00", "True", "(exhaustive)"]


@pytest.mark.parametrize("shape", ["envelope", "before schema 1"])
def test_a_run_record_keeps_each_scenario_of_bench_json(speed, shape):
    """`bench --json`'s scenarios (the envelope, benanza/reports/documents.py; `analyses` before schema
    1) become the record's rows; its system's GPU name and stages are kept."""
    scen = [_analysis(1, 0.4), _analysis(32, 1.5, step=4.0)]
    system = {"id": 1, "gpu_name": "NVIDIA H100 80GB HBM3"}
    doc = ({"document": "bench", "schema": 1, "system": system, "model": "m", "stages": {"run_s": 2.0},
            "run": {}, "scenarios": scen} if shape == "envelope"
           else {"model": "m", "stages": {"run_s": 2.0}, "system": system, "analyses": scen})
    rec = speed.run_record("m", "default", {**doc, "wall_s": 9.0}, {}, False)
    assert rec["analyses"] == [speed.analysis_row(a) for a in scen] and rec["analyses"][1]["step_ms"] == 4.0
    assert rec["system"] == "NVIDIA H100 80GB HBM3" and rec["stages"] == {"run_s": 2.0} and rec["wall_s"] == 9.0


def test_the_kernel_cache_policy_runs_bench_with_the_harness_option(speed):
    assert speed.POLICIES["kernel-cache"] == []
    assert speed.POLICY_ENV["kernel-cache"] == {"BENANZA_KERNEL_CACHE": "1"}
    # the option the harness reads (cpp/src/batchnorm_engines.cpp), so the two names cannot drift apart
    src = (BENCHMARKS.parent / "cpp" / "src" / "batchnorm_engines.cpp").read_text()
    assert 'std::getenv("BENANZA_KERNEL_CACHE")' in src


def test_reprinting_the_tables_of_a_folder_without_runs_is_a_clear_error(tmp_path):
    out = tmp_path / "never-ran"
    p = subprocess.run([sys.executable, str(BENCHMARKS / "speed.py"), "--out", str(out), "--table-only"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert "--table-only: no earlier run in" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()  # nothing left behind


def test_the_prior_policy_benches_with_the_prior_and_is_compared_against_exhaustive(speed):
    """The `prior` policy (docs/timing.md, "Prior") passes --prior with --prior-source's database, and its
    LBLs and skipped candidates are in the comparison table."""
    assert speed.POLICIES["prior"] == ["--prior", "{prior}"]
    doc = {"document": "bench", "schema": 1, "stages": {}, "wall_s": 1.0, "scenarios": [_analysis(1, 1.01)],
           "run": {"prior": {"label": "prior (db/h200.sqlite.gz, NVIDIA H200)", "skipped": 9412, "candidates": 14589,
                             "versions": ""}}}
    rec = speed.run_record("resnet50", "prior", doc, {}, False)
    assert rec["prior"]["skipped"] == 9412
    runs = [rec, {"model": "resnet50", "policy": "exhaustive", "analyses": [speed.analysis_row(_analysis(1, 1.0))]}]
    text = speed.fmt_compare(runs)
    assert "prior against exhaustive: |diff| median 1.00 %" in text
    assert "resnet50 (prior): prior (db/h200.sqlite.gz, NVIDIA H200): 9,412 of 14,589 candidates skipped" in text
