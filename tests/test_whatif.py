"""The what-if composition (benanza.analysis.whatif) and the report that answers first, on checked-in data:
resnet50 recorded natively on an H200 (tests/data/h200_native) against the truth runs' database
(db/reference/h200_truth.sqlite.gz), and synthetic timelines for the floor."""
import json
import re
import subprocess
import sys

import pytest

from benanza.analysis.analyzer import analyze, resolve_system
from benanza.database.store import open_db
from benanza.analysis.insights import build_insights
from benanza.processing.model import process
from benanza.profiles import load_profile
from benanza.reports.report import answer, render_html
from benanza.analysis.whatif import STEPS, _clamp, WhatIf, WhatIfStep
from conftest import REPO

NATIVE = REPO / "tests" / "data" / "h200_native" / "resnet50-b32-fp16"
TRUTH_DB = REPO / "db" / "reference" / "h200_truth.sqlite.gz"


@pytest.fixture(scope="module")
def resnet50():
    """The native resnet50 profile against the truth database (the export's ReduceMean, the one
    layer the database lacks, keeps the framework's time)."""
    db = open_db(str(TRUTH_DB), create=False)
    system, _ = resolve_system(db, "H200")
    p = load_profile(NATIVE)
    ml = process(NATIVE / "model.onnx", 32)
    a = analyze(ml, db, system, "fp16", layouts=("NCHW", "NHWC"))
    return a, p, build_insights(a, p, db, system.id)


def test_savings_add_up_to_latency_minus_final_and_never_go_up(resnet50):
    a, p, ins = resnet50
    w = ins.whatif
    assert [s["kind"] for s in w["steps"]] == [k for k, _ in STEPS if k != "tensor_cores"]
    assert w["start_ms"] == pytest.approx(p.latency.median_ms)
    ms = w["start_ms"]
    for s in w["steps"]:
        assert s["ms_before"] == pytest.approx(ms) and s["saving_ms"] >= 0
        assert s["ms_after"] == pytest.approx(s["ms_before"] - s["saving_ms"])
        ms = s["ms_after"]
    assert w["final_ms"] == pytest.approx(ms)
    assert sum(s["saving_ms"] for s in w["steps"]) == pytest.approx(w["start_ms"] - w["final_ms"], abs=1e-12)
    # the findings' marginal savings are the composition's: they add up exactly too
    assert sum(f.marginal_ms for f in ins.findings if f.additive) == pytest.approx(w["start_ms"] - w["final_ms"],
                                                                                    abs=1e-9)
    assert all(f.marginal_ms is None for f in ins.findings if not f.additive)
    # never below the lower bound; the joint table follows the composition and never goes up
    assert w["final_ms"] >= a.lbl_ms - 1e-12
    steps = [s["ms"] for s in ins.joint["steps"]]
    assert steps == sorted(steps, reverse=True)


def test_steps_are_what_the_profile_measured(resnet50):
    a, p, ins = resnet50
    w = {s["kind"]: s for s in ins.whatif["steps"]}
    cat = p.category_ms()
    assert w["launch_gaps"]["saving_ms"] == pytest.approx(p.latency.median_ms - p.gpu_kernel_ms, rel=1e-6)
    # channels_last: each layer's framework call (torch:aten::conv2d, and the batch norm PyTorch
    # runs after it) timed NCHW and NHWC in the database; the NCHW call holds the layout conversions
    # the profile runs one batch norm per convolution per iteration (53; the export folded them): their
    # rows, keyed by the convolution's output shape, change the batch-norm kernels, not the layers';
    # a layer never gets faster than free (its saving is at most its kernels plus its conversions)
    import numpy as np

    from benanza import kinds as L

    rows = _torch_rows()
    by_index = {t.layer.index: t.layer for t in a.layers}
    convs = [ly for ly in by_index.values() if ly.config is not None and ly.config.kind == "Conv"]
    assert p.framework_batch_norms() == len(convs) == 53

    def pair(key):
        t = [rows.get((key, "fp16", lay)) for lay in ("NCHW", "NHWC")]
        return None if None in t else t[0] - t[1]

    want, layout_gone, bn = 0.0, 0.0, 0.0
    for lp in p.layers:
        if lp.covered_by is not None:
            continue
        d, any_pair = 0.0, False
        for i in tuple(lp.covers) or (lp.layer,):
            ly = by_index.get(i)
            if ly is None or ly.config is None or pair(ly.key) is None:
                continue
            d, any_pair = d + pair(ly.key), True
            if ly.config.kind == "Conv":
                bn += pair(L.BatchNormConfig(shape=tuple(ly.config.output_shape()),
                                             epsilon=float(np.float32(1e-5))).key) or 0.0
        if any_pair:
            want += lp.kernel_ms - max(0.0, lp.kernel_ms + lp.layout_ms - d)
            layout_gone += lp.layout_ms
    bn = min(bn, cat["unfused_batch_norm"])
    want += min(layout_gone, cat["layout"]) + bn  # the conversions go with the layers that no longer need them
    assert bn > 0.1
    assert w["layout_conversion"]["effect_ms"] == pytest.approx(want, rel=1e-9)
    assert w["layout_conversion"]["saving_ms"] == pytest.approx(want) and want > cat["layout"] > 0.5
    # step 3 removes what is left of them (never counted twice)
    assert w["unneeded_kernels"]["saving_ms"] == pytest.approx(
        cat["copy"] + cat["fill"] + cat["unfused_batch_norm"] - bn + cat["other"])
    # 53 batch norms PyTorch runs apart (the export folded them): about 1.3 ms of the 3.6 ms of kernels
    assert 1.2 < cat["unfused_batch_norm"] < 1.4
    assert ins.whatif["unmeasured"] == 1  # the export's ReduceMean: not in the database, keeps PyTorch's time


def _torch_rows() -> dict:
    import gzip
    import sqlite3
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".db") as f:
        f.write(gzip.decompress(TRUTH_DB.read_bytes()))
        f.flush()
        con = sqlite3.connect(f.name)
        out = {}
        for key, prec, lay, ms in con.execute(
                "select layer_key, precision, layout, min(median_ms) from measurements where call like 'torch:%' "
                "and status = 'ok' and cache = 'warm' group by layer_key, precision, layout"):
            out[(key, prec, lay)] = ms
        con.close()
    return out


def _timeline(layers: dict[int, float], layout_ms: float = 0.0):
    """A synthetic profile: layers with kernel times (ms), layout kernels, no gaps."""
    from types import SimpleNamespace as NS

    lps = [NS(layer=i, covered_by=None, covers=(), kernel_ms=t, inputs_from=(i - 1,) if i else ())
           for i, t in layers.items()]
    busy = sum(layers.values()) + layout_ms
    cats = {"layout": layout_ms, "copy": 0.0, "fill": 0.0, "unfused_batch_norm": 0.0, "other": 0.0}
    p = NS(latency=NS(median_ms=busy), gpu_kernel_ms=busy, iterations=1, layers=lps, category_ms=lambda: cats)
    a = NS(layers=[NS(layer=NS(index=i), status="measured", time_ms=t / 2) for i, t in layers.items()],
           fusions=[], lbl_ms=sum(layers.values()) / 4)
    return a, p


def test_channels_last_is_signed_and_taken_only_when_it_saves():
    from benanza.analysis.whatif import Alternatives, compose

    a, p = _timeline({0: 1.0, 1: 1.0}, layout_ms=0.2)
    # faster NHWC: the layers change by NCHW - NHWC, their layout kernels go with them
    w = compose(a, p, alternatives=Alternatives({0: 0.5, 1: 0.1}, {0: 0.2}))
    s = w.steps[1]
    assert s.kind == "layout_conversion" and s.effect_ms == pytest.approx(0.6) and s.saving_ms == pytest.approx(0.6)
    # slower NHWC (batch 1 depthwise convolutions): effect negative, step not taken, timeline kept
    w = compose(a, p, alternatives=Alternatives({0: -0.3}, {}))
    s = w.steps[1]
    assert s.effect_ms == pytest.approx(-0.3) and s.saving_ms == 0 and "not taken" in s.evidence[0]
    assert w.steps[4].kind == "implementation" and w.steps[4].saving_ms == pytest.approx(1.0)


def test_cudnn_benchmark_step_is_the_engine_cost_then_any_library():
    from benanza.analysis.whatif import Alternatives, compose

    a, p = _timeline({0: 1.0, 1: 1.0})
    w = compose(a, p, alternatives=Alternatives(engine={0: 0.25}))
    st = {s.kind: s for s in w.steps}
    assert st["algorithm_selection"].saving_ms == pytest.approx(0.25) and st["algorithm_selection"].layers == (0,)
    # then each layer to its best of any library: 0.75 -> 0.5 and 1.0 -> 0.5
    assert st["implementation"].saving_ms == pytest.approx(0.25 + 0.5)


def test_the_headline_answers_first(resnet50, tmp_path):
    _, _, ins = resnet50
    h = ins.headline
    assert h.startswith("model batch 32 fp16 on NVIDIA H200") and "native module runs in" in h and "could run in" in h
    m = re.search(r"runs in ([\d.]+) ms; it could run in ([\d.]+) ms", h)
    assert float(m.group(1)) == pytest.approx(ins.whatif["start_ms"], abs=0.005)
    assert float(m.group(2)) == pytest.approx(ins.whatif["final_ms"], abs=0.005)
    top = sorted(ins.whatif["steps"], key=lambda s: -s["saving_ms"])[:3]
    assert all(f"-{s['saving_ms']:.2f} ms" in h for s in top)
    d = ins.to_dict()
    html = render_html(d)
    # the answer is the first thing after the title, before any notice
    body = html[html.index("<body>"):]
    assert body.index('id="answer"') < body.index("<h2") and body.index('id="answer"') < body.find("notice")
    assert answer(d) == h and "DESIGN.md" not in html


def test_the_script_is_code_and_names_stay_text():
    """autoescape turned the filter script's '<' into '&lt;' (the script failed); a layer name is
    untrusted text and stays escaped."""
    ins = json.loads((NATIVE / "report.json").read_text())
    ins["layers"][0]["name"] = "</script><script>alert(1)</script>"
    html = render_html(ins)
    script = html[html.index("<script>") + 8:html.index("</script>")]
    assert "i<rows.length" in script and "&lt;" not in script
    assert "<script>alert(1)</script>" not in html and "&lt;/script&gt;&lt;script&gt;alert(1)" in html


def test_the_floor_cuts_the_last_steps():
    steps = [WhatIfStep(k, t, 0, 0, s) for (k, t), s in zip(STEPS, (1.0, 0.5, 0.0, 0.1, 0.2, 0.4, 0.0, 0.2))]
    w = _clamp(WhatIf(4.0, steps, 4.0 - 2.4, 2.0, False, 0))
    assert w.clamped and w.final_ms == pytest.approx(2.0)
    got = [s.saving_ms for s in w.steps]
    assert got == pytest.approx([1.0, 0.5, 0.0, 0.1, 0.2, 0.2, 0.0, 0.0])  # parallel, then fusion cut
    assert sum(got) == pytest.approx(4.0 - 2.0)


def test_a_profile_of_another_model_is_refused(tmp_path):
    other = REPO / "tests" / "data" / "h200_native" / "vit_b_16-b32-fp16" / "model.onnx"
    r = subprocess.run([sys.executable, "-m", "benanza", "analyze", str(other), "--batch", "32", "--dtype", "fp16",
                        "--db", str(TRUTH_DB), "--profile", str(NATIVE)], capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.startswith("benanza: ") and len(r.stderr.strip().splitlines()) == 1
    assert "another model" in r.stderr and "--allow-mismatch" in r.stderr
    p = load_profile(NATIVE, other, allow_mismatch=True)
    assert any("--allow-mismatch" in n for n in p.notices)
