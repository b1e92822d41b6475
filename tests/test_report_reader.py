"""What a reader of the report sees (issue "One pipeline, one answer", item 7), on resnet50 with its
BatchNorms kept, its recorded H200 profile (PyTorch 2.11, cudnn.benchmark; its cuDNN logs left out of
the test data) and the truth database: no empty section without a word, bars with a scale, engine
configs that wrap, no two findings claiming the same time, the two savings of a finding told apart,
and the critical path of the LBL the page names."""
import re
import subprocess
import sys

import pytest

from conftest import REPO, scenario_of

DB = REPO / "db" / "reference" / "h200_truth.sqlite.gz"
PROFILE = REPO / "tests" / "data" / "h200_profiles" / "resnet50_bnkept-b32-fp16"


@pytest.fixture(scope="module")
def report(models, tmp_path_factory):
    html = tmp_path_factory.mktemp("report") / "r.html"
    args = [sys.executable, "-m", "benanza", "analyze", models / "resnet50_bnkept.onnx", "--batch", "32", "--dtype",
            "fp16", "--db", DB, "--profile", PROFILE]
    r = subprocess.run([*map(str, args), "--html", str(html)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    j = subprocess.run([*map(str, args), "--json"], capture_output=True, text=True)
    assert j.returncode == 0, j.stderr
    return html.read_text(), scenario_of(j.stdout, "analyze"), r.stdout


def test_an_empty_algorithm_section_says_why(report):
    html, d, _ = report
    assert d["algorithms"] == []  # the logs are not in the test data
    section = html[html.index('id="algorithms"'):html.index('id="layers"')]
    assert "No layer's algorithm choice is compared here" in section and "<tbody>" not in section


def test_the_bars_have_a_scale_and_engine_configs_wrap(report):
    html, d, _ = report
    slowest = max(max(r.get("framework_ms") or 0, r.get("lbl_ms") or 0) for r in d["layers"])
    assert f"is {slowest:.4f} ms, the slowest layer" in html and f"bars (0 to {slowest:.4f} ms)" in html
    cells = re.findall(r'<td class="alg">(.*?)</td>', html)
    assert any("eng" in c for c in cells)
    assert all("<wbr>" in c for c in cells if "_" in c)  # a line-break opportunity after each knob


def test_no_two_findings_claim_the_same_time(report):
    _, d, _ = report
    kinds = [f["kind"] for f in d["findings"]]
    assert "host_bound" not in kinds and kinds.count("launch_gaps") == 1
    gaps = next(f for f in d["findings"] if f["kind"] == "launch_gaps")
    assert any(e.startswith("host-bound stretch:") for e in gaps["evidence"])
    claimed = [round(f["saving_ms"], 4) for f in d["findings"] if f["saving_ms"] > 0.01]
    assert len(claimed) == len(set(claimed)), claimed


def test_a_findings_two_savings_are_told_apart(report):
    html, d, text = report
    bn = next(f for f in d["findings"] if f["kind"] == "unfused_batch_norm")
    assert bn["saving_ms"] > 1.0 and not bn["additive"]  # the largest alone; not a what-if step
    assert "not a step of the what-if" in bn["detail"]
    assert "in the what-if (ms)" in html and "saving alone (ms)" in html
    assert "findings, ranked by estimated saving (alone; in the what-if: after the changes before it)" in text


def test_the_critical_path_is_the_lbls(report):
    html, d, _ = report
    assert f"Critical path of the LBL ({len(d['critical_path'])} steps, {d['lbl_fused_parallel_ms']:.4f} ms, partial)" \
        in html
    assert sum(c["lbl_ms"] or 0 for c in d["critical_path"]) == pytest.approx(d["lbl_fused_parallel_ms"], rel=1e-9)
