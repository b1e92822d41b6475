"""The time-based roofline (issue 18, item 3) on the reference database: one point per measured
implementation, the chosen point the fastest valid one (the LBL's pick), the ceilings as lines of
time at the right values, and an escaped SVG <title> per point; the classic chart's L2 roof and
tooltips."""
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from benanza import kinds as L
from benanza.analysis import roofline as R
from benanza.analysis.analyzer import analyze, resolve_system
from benanza.analysis.gpus import find_gpu
from benanza.database.store import open_db
from benanza.processing.model import process
from benanza.reports.chart import add_svg_titles, model_roofline, render
from benanza.reports.time_chart import render_time, roof_times, time_roofline
from conftest import REPO, scenario_of

REF = REPO / "db" / "reference" / "h200.sqlite.gz"
RESNET50 = REPO / "tests" / "data" / "zoo" / "models" / "resnet50.onnx"
SVG = "{http://www.w3.org/2000/svg}"
H200_L2_ESTIMATE = 5120 / 108 * 132 * 1980e6  # A100 whitepaper's bytes/clk per SM x SMs x clock


@pytest.fixture(scope="module")
def setting():
    db = open_db(str(REF), create=False)
    system, _ = resolve_system(db, None, None)
    a = analyze(process(RESNET50, 32), db, system, "fp16", layouts=("NCHW", "NHWC"))
    gpu = find_gpu(system.gpu_name)
    l2 = R.l2_roof(gpu.sm_count, gpu.boost_clock_mhz, db.ceilings(system.id))
    return db, system, a, gpu, l2, time_roofline(a, db, system, gpu, l2)


def test_one_point_per_measured_implementation(setting):
    db, system, a, _, _, tr = setting
    measured = {lt.layer.key for lt in a.layers if lt.status == "measured" and not lt.conversion}
    assert {x.key for x in tr.layers} == measured and len(tr.layers) == 42
    layouts = sorted(a.layouts)
    q = sa.text("SELECT count(*) FROM measurements WHERE system_id = :s AND layer_key = :k AND cache = 'warm' "
                "AND status IN ('ok', 'screened') AND median_ms > 0 AND dtype IN ('float16') "
                "AND math IN :m AND layout IN :l").bindparams(sa.bindparam("m", expanding=True),
                                                                sa.bindparam("l", expanding=True))
    with db.engine.connect() as c:
        for x in tr.layers:
            n = c.execute(q, {"s": system.id, "k": x.key, "m": list(L.ACCEPTED_MATH["fp16"]), "l": layouts}).scalar()
            assert len(x.points) == n > 0, x.what
    assert sum(len(x.points) for x in tr.layers) == 128
    # every layer of a config is named on its points, the config's FLOPs and bytes are the layer's
    by_index = {lt.layer.index: lt for lt in a.layers}
    for x in tr.layers:
        for i, _ in x.layers:
            assert by_index[i].layer.key == x.key
        cfg = by_index[x.layers[0][0]].layer.config
        assert (x.flops, x.bytes) == (cfg.flops(), R.min_bytes(cfg, "fp16"))


def test_the_chosen_point_is_the_fastest_valid_and_the_lbl_pick(setting):
    _, _, a, _, _, tr = setting
    by_index = {lt.layer.index: lt for lt in a.layers}
    for x in tr.layers:
        chosen = [p for p in x.points if p.chosen]
        assert len(chosen) == 1
        assert chosen[0].valid and chosen[0].time_ms == min(p.time_ms for p in x.points if p.valid) == x.best_ms
        lt = by_index[x.layers[0][0]]
        assert (chosen[0].call, chosen[0].algorithm, chosen[0].time_ms) == (lt.call, lt.algorithm, lt.time_ms)
    # the sum over layers of the chosen times is the LBL (layout conversions are not drawn)
    total = sum(next(p for p in x.points if p.chosen).time_ms * len(x.layers) for x in tr.layers)
    assert total == pytest.approx(a.lbl_sequential_ms - sum(t.time_ms or 0 for t in a.layers if t.conversion))


def test_ceilings_are_lines_of_time_at_the_right_values(setting):
    _, _, _, gpu, l2, tr = setting
    assert {r.name for r in tr.roofs} == {"compute_fp32", "compute_fp16", "dram", "l2"}
    assert tr.roof("dram").time_ms(4.8e12) == pytest.approx(1e3)  # H200 datasheet: 4.8 TB/s
    assert tr.roof("compute_fp16").time_ms(989.4e12) == pytest.approx(1e3)  # dense FP16 Tensor Core peak
    assert tr.roof("compute_fp32").time_ms(66.9e12) == pytest.approx(1e3)
    assert l2.source == "estimate" and tr.roof("l2").rate == pytest.approx(H200_L2_ESTIMATE)
    assert "estimate" in tr.roof("l2").label and "12.39 TB/s" in tr.roof("l2").label
    conv = next(x for x in tr.layers if x.kind == "Conv")
    t = roof_times(tr, conv)
    assert t["compute"] == pytest.approx(conv.flops / 989.4e12 * 1e3)  # its chosen call runs on Tensor Cores
    assert t["dram"] == pytest.approx(conv.bytes / 4.8e12 * 1e3)
    assert t["x_roof"] == pytest.approx(conv.best_ms / max(t["compute"], t["dram"]))
    # a measured L2 ceiling replaces the estimate, and the legend says so
    m = R.l2_roof(132, 1980, {"l2_bandwidth": SimpleNamespace(value=9.9e12)})
    assert m.source == "measured" and m.bytes_per_s == 9.9e12 and "measured by `benanza ceilings`" in m.label


def test_svg_has_an_escaped_title_per_point(setting, tmp_path):
    tr = setting[-1]
    evil = '<script>alert("x")</script> & \'q\''
    x0 = tr.layers[0]
    x0.layers = ((x0.layers[0][0], evil),) + x0.layers[1:]
    svg, png = tmp_path / "t.svg", tmp_path / "t.png"
    assert render_time(tr, png, svg) == [png, svg]
    raw = svg.read_text(encoding="utf-8")
    assert "<script>" not in raw and "&lt;script&gt;" in raw
    titles = [t.text for t in ET.fromstring(raw).iter(f"{SVG}title")]
    n = sum(len(x.points) for x in tr.layers)
    assert len(titles) == 2 * n  # one per point in each panel
    assert sum(evil in t for t in titles) == 2 * len(x0.points)
    chosen = [t for t in titles if "[CHOSEN]" in t]
    assert len(chosen) == 2 * len(tr.layers)
    c = x0.chosen
    assert any(f"{c.call} / {c.algorithm}" in t and f"{c.time_ms * 1e3:.2f} µs" in t for t in chosen)
    assert png.stat().st_size > 10_000 and raw.count("<title>") == len(titles)


def test_classic_chart_has_the_l2_roof_and_a_title_per_layer(setting, tmp_path):
    _, _, a, gpu, l2, _ = setting
    mr = model_roofline(a, gpu, "spec", l2)
    assert mr.to_dict()["l2_source"] == "estimate" and mr.to_dict()["l2_bytes_per_s"] == pytest.approx(H200_L2_ESTIMATE)
    svg = tmp_path / "c.svg"
    render(mr, svg=svg)
    titles = [t.text for t in ET.fromstring(svg.read_text(encoding="utf-8")).iter(f"{SVG}title")]
    drawn = [x for x in mr.layers if x.flops > 0 and x.bytes > 0]
    assert len(titles) == len(drawn) and all(f"#{x.index} {x.name}" in t for x, t in
                                               zip(sorted(drawn, key=lambda x: (x.kind, x.index)), titles))


def test_add_svg_titles_refuses_a_count_mismatch():
    svg = ('<svg xmlns="http://www.w3.org/2000/svg"><g id="a"><defs><path id="m"/></defs>'
           '<use href="#m"/><use href="#m"/></g></svg>')
    out = add_svg_titles(svg, {"a": ["one", "t<wo>"]})
    assert out.count("<title>") == 2 and "t&lt;wo&gt;" in out
    with pytest.raises(ValueError, match="2 markers for 3 titles"):
        add_svg_titles(svg, {"a": ["1", "2", "3"]})
    with pytest.raises(ValueError, match="not found"):
        add_svg_titles(svg, {"b": []})


def bz(*args):
    return subprocess.run([sys.executable, "-m", "benanza", *args], capture_output=True, text=True)


def test_cli_kind_time_json_and_bad_kind(tmp_path):
    svg = tmp_path / "r.svg"
    r = bz("roofline", str(RESNET50), "-b", "32", "-t", "fp16", "--db", str(REF), "--kind", "time", "--json",
           "--svg", str(svg))
    assert r.returncode == 0, r.stderr
    d = scenario_of(r.stdout, "roofline")
    assert len(d["layers"]) == 42 and d["charts"] == [str(svg)] and svg.stat().st_size < 2_000_000
    assert {x["name"] for x in d["roofs"]} == {"compute_fp32", "compute_fp16", "dram", "l2"}
    assert all(sum(p["chosen"] for p in x["points"]) == 1 for x in d["layers"])
    r = bz("roofline", str(RESNET50), "-b", "32", "-t", "fp16", "--db", str(REF), "--kind", "log")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == ["benanza: --kind must be classic or time, got 'log'"]


def test_cli_layout_nhwc_draws_the_channels_last_implementations_too():
    """--layout nchw,nhwc: the NHWC engine configs of the truth database join each config's column,
    and the chosen point is still the fastest valid of all."""
    truth, model = REPO / "db" / "reference" / "h200_truth.sqlite.gz", REPO / "db" / "reference" / "truth" / "resnet50.onnx"
    docs = {}
    for layout in ("nchw", "nchw,nhwc"):
        r = bz("roofline", str(model), "-b", "32", "-t", "fp16", "--db", str(truth), "--kind", "time", "--json",
               "--layout", layout)
        assert r.returncode == 0, r.stderr
        docs[layout] = scenario_of(r.stdout, "roofline")["layers"]
    one, both = docs["nchw"], docs["nchw,nhwc"]
    assert {p["layout"] for x in one for p in x["points"]} == {"NCHW"}
    assert {p["layout"] for x in both for p in x["points"]} == {"NCHW", "NHWC"}
    assert sum(len(x["points"]) for x in both) > sum(len(x["points"]) for x in one)
    for x in both:
        (chosen,) = [p for p in x["points"] if p["chosen"]]
        assert chosen["time_ms"] == min(p["time_ms"] for p in x["points"] if p["status"] == "ok") == x["best_ms"]
