"""Issue 6: the GPU spec table, Habitat wave scaling on the reference H200 database, the roofline
table and chart, and the `predict` / `roofline` commands. No GPU needed."""
import json
import xml.etree.ElementTree as ET

import pytest

from benchmark_modules import load

from benanza.analysis.analyzer import analyze, resolve_system
from benanza.reports.chart import LAUNCH_FLOOR_US, model_roofline, render
from benanza.database.store import open_db
from benanza.errors import UsageError
from benanza.analysis.gpus import GPUS, SPARSE_FACTOR, find_gpu
from benanza.processing.model import process
from benanza.analysis.predict import dram_share, habitat_gamma, mean_model_error, predict, validate
from benanza.analysis import roofline
from conftest import REPO, scenario_of
from test_cli import bz, one_line_error

REF_DB = REPO / "db" / "reference" / "h200.sqlite.gz"
H200, H100, A100 = find_gpu("H200"), find_gpu("h100-sxm"), find_gpu("A100")


# ------------------------------------------------------------------------------------ spec table

@pytest.mark.parametrize("g", GPUS, ids=lambda g: g.name)
def test_spec_table_is_consistent(g):
    # FP32 peak = SMs x FP32 lanes x 2 FLOPs x boost clock (B200, GB200: NVIDIA's 80 and 90 TFLOPS vs
    # 74.4 from the third-party SM count and clock; the notes say so)
    uncertain = {"B200", "GB200", "RTX-PRO-6000"}
    assert g.fp32_from_clock == pytest.approx(g.peak["fp32"], rel=0.20 if g.name in uncertain else 0.01)
    assert (g.name in uncertain) == bool(g.note and "uncertain" in g.note)
    # every figure names its source: the datasheet, a whitepaper, or third-party reports said so
    d = g.to_dict()["sources"]
    assert set(d) == {"sm_count", "boost_clock_mhz", "bandwidth", "memory_bytes", "l2_bytes", "peak", "tdp_w"}
    for fig, src in d.items():
        assert "http" in src or src.startswith("the board datasheet's CUDA core count"), (fig, src)
    assert d["bandwidth"] == d["peak"] == d["memory_bytes"] == g.source  # always the board's datasheet
    if g.name in uncertain - {"RTX-PRO-6000"}:
        assert "third-party" in d["sm_count"] and "third-party" in d["boost_clock_mhz"]
    assert g.ridge("fp32") == pytest.approx(g.peak["fp32"] / g.bandwidth)
    tc = {k: v for k, v in g.peak.items() if k != "fp32" and v is not None}
    assert "fp16" in tc
    for k, v in tc.items():
        assert v > g.peak["fp32"] and g.ridge(k) > g.ridge("fp32")
    if "bf16" in tc:  # Ampere and later: tf32 = fp16 / 2 = bf16 / 2, fp8 = 2 x fp16
        assert tc["bf16"] == tc["fp16"] and tc["tf32"] == pytest.approx(tc["fp16"] / 2, rel=0.03)  # B200: 2.2 vs 4.5 rounded
    if "fp8" in tc:
        assert tc["fp8"] == pytest.approx(2 * tc["fp16"], rel=0.01)
    assert g.source.startswith("NVIDIA") and "http" in g.source
    assert 0 < g.l2_bytes < g.memory_bytes and g.tdp_w > 0


def test_dense_is_half_the_datasheet_sparse_figure():
    # the datasheets' "with sparsity" FP16 figures (TFLOPS)
    sparse = {"A100-SXM4-80GB": 624, "A10": 250, "L4": 242, "L40S": 733, "H100-PCIe": 1513, "H100-SXM": 1979,
              "H200": 1979, "B200": 4500, "A40": 299.4, "RTX-6000-Ada": 728.5, "GB200": 5000, "RTX-PRO-6000": 1000}
    for name, s in sparse.items():
        dense = find_gpu(name).peak["fp16"]
        assert dense <= s * 1e12 and dense * SPARSE_FACTOR == pytest.approx(s * 1e12, rel=0.01)
    assert find_gpu("V100").peak["tf32"] is None  # Volta: FP16 Tensor Cores only


def test_find_gpu_matches_system_names_and_user_strings():
    assert find_gpu("NVIDIA H200") is H200
    assert find_gpu("NVIDIA H100 80GB HBM3") is H100 and find_gpu("H100_SXM") is H100
    assert find_gpu("NVIDIA A100-SXM4-80GB") is A100
    assert find_gpu("A10").name == "A10" and find_gpu("nvidia a10").name == "A10"  # not A100
    assert find_gpu("Tesla T4").name == "T4" and find_gpu("l40s").name == "L40S"
    assert find_gpu("NVIDIA A40").name == "A40" and find_gpu("NVIDIA RTX 6000 Ada Generation").name == "RTX-6000-Ada"
    assert find_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition").name == "RTX-PRO-6000"
    assert find_gpu("gb200").name == "GB200" and find_gpu("B200").name == "B200"
    assert find_gpu("RTX 6000").name == "RTX-6000-Ada" and find_gpu("rtx pro 6000").name == "RTX-PRO-6000"
    with pytest.raises(UsageError, match="ambiguous: H100-PCIe, H100-SXM"):
        find_gpu("H100")
    with pytest.raises(UsageError, match=r"unknown GPU 'MI300X' \(known GPUs: V100-SXM2, T4, .*RTX-PRO-6000\)"):
        find_gpu("MI300X")


# ---------------------------------------------------------------------------------- wave scaling

@pytest.fixture(scope="module")
def r50(models):
    db = open_db(str(REF_DB), create=False)
    system, _ = resolve_system(db, None)
    return analyze(process(models / "resnet50.onnx", 32), db, system, "fp16")


def test_habitat_gamma():
    assert habitat_gamma(0, 10) == 1.0
    assert habitat_gamma(10, 10) == 0.5
    assert habitat_gamma(5, 10) == 0.75 and habitat_gamma(40, 10) == 0.125
    with pytest.raises(UsageError):
        habitat_gamma(1, 0)


def test_same_gpu_returns_the_measured_times(r50):
    p = predict(r50, H200, H200)
    assert [lp.predicted_ms for lp in p.layers] == [t.time_ms for t in r50.layers]
    assert p.lbl_sequential_ms == pytest.approx(r50.lbl_sequential_ms, rel=1e-12)
    assert p.lbl_parallel_ms == pytest.approx(r50.lbl_parallel_ms, rel=1e-12)
    assert p.critical_path == r50.critical_path and p.complete
    v = validate(p, r50)
    assert v.lbl_sequential_error == pytest.approx(0, abs=1e-12) and v.mean_abs_layer_error == pytest.approx(0, abs=1e-12)
    assert set(v.by_kind) == {"Conv", "Activation", "Elementwise", "Pooling", "Gemm"}
    assert mean_model_error([v]) == pytest.approx(0, abs=1e-12)


def test_h200_to_h100_sxm_on_hand_computed_layers(r50):
    p = predict(r50, H200, H100, memory="dram", fixed_us=0)  # Habitat's DRAM-only memory term, pure scaling
    by_name = {lp.name: lp for lp in p.layers}
    bw = 4.8 / 3.35  # same SMs, clock and Tensor Core peaks: only the bandwidth term moves
    # a ReLU (CUDA cores, fp16): 1 FLOP per 4 bytes; H100 SXM FP32 ridge 66.9 / 3.35 FLOP/B
    relu = by_name["/relu/Relu"]
    t = r50.layers[relu.index].time_ms
    nbytes = 2 * 2 * 32 * 64 * 112 * 112  # fp16 in and out
    # Habitat's gamma, capped by the share of the origin time (no fixed part here: fixed_us=0) the bytes
    # take at the H200's 4.8 TB/s: this ReLU reaches under half of it, so it is not all memory-bound
    share = nbytes / 4.8e12 * 1e3 / t
    g = min(1 - 0.5 * 0.25 / (66.9 / 3.35), share)
    assert share < 0.5 and relu.compute == "cuda_cores" and relu.gamma == pytest.approx(g)
    floor = nbytes / 3.35e12 * 1e3  # the H100's DRAM floor: the prediction never goes below it
    assert relu.predicted_ms == pytest.approx(t * max(bw ** g, floor / t), rel=1e-9)
    # the first conv (BN folded into a bias), fp16 Tensor Cores: x = FLOPs / bytes by hand
    conv = by_name["/conv1/Conv"]
    y = 32 * 64 * 112 * 112
    flops = 2 * y * 3 * 49 + y
    nbytes = 2 * (32 * 3 * 224 * 224 + 64 * 3 * 49 + 64 + y)
    g = 1 - 0.5 * (flops / nbytes) / (989.4 / 3.35)
    assert conv.compute == "fp16" and conv.intensity == pytest.approx(flops / nbytes)
    assert conv.predicted_ms == pytest.approx(conv.origin_ms * bw ** g, rel=1e-9)
    # the model: every layer slower on the 3.35 TB/s part, none by more than the bandwidth ratio
    assert all(1 <= lp.factor <= bw + 1e-12 for lp in p.layers if lp.status == "measured")
    assert r50.lbl_sequential_ms < p.lbl_sequential_ms < bw * r50.lbl_sequential_ms
    assert p.lbl_parallel_ms <= p.lbl_sequential_ms
    assert sum(v["predicted_ms"] for v in p.by_kind().values()) == pytest.approx(p.lbl_sequential_ms)


def test_compute_bound_layers_scale_by_the_tensor_core_peak(r50):
    p = predict(r50, H200, A100, memory="dram", fixed_us=0, span=False)  # Habitat's SM ratio
    conv = next(lp for lp in p.layers if lp.compute == "fp16" and lp.intensity > A100.ridge("fp16"))
    g = 0.5 * (312 / 2039) * 1e3 / conv.intensity  # past the A100 ridge: R / 2x
    assert conv.gamma == pytest.approx(g)
    assert conv.factor == pytest.approx((4800 / 2039) ** g * (989.4 / 312) ** (1 - g))
    relu = next(lp for lp in p.layers if lp.name == "/relu/Relu")  # CUDA cores: SM x clock ratio
    t = r50.layers[relu.index].time_ms
    g = min(1 - 0.5 * 0.25 / (19.5e12 / 2039e9), 2 * 2 * 32 * 64 * 112 * 112 / 4.8e12 * 1e3 / t)  # fixed_us=0
    assert relu.gamma == pytest.approx(g)
    assert relu.factor == pytest.approx((4800 / 2039) ** g * ((132 * 1980) / (108 * 1410)) ** (1 - g))


def test_l2_resident_layers_scale_by_the_sm_throughput(r50):
    """benanza's default memory term: a warm-cache layer whose bytes fit in the smaller L2 (50 MB on
    both) moves at L2 speed, the same on an H100 SXM and an H200 (same SMs and clock); only the
    share beyond the L2 scales by the DRAM bandwidth ratio."""
    p = predict(r50, H200, H100)
    assert p.memory == "l2" and p.to_dict()["memory_model"] == "l2"
    bw = 4.8 / 3.35
    small = [lp for lp in p.layers if lp.status == "measured" and lp.dram_share == 0]
    assert small and all(lp.factor == pytest.approx(1.0) for lp in small)
    for lp in p.layers:
        if lp.status != "measured":
            continue
        nbytes = roofline.min_bytes(r50.layers[lp.index].layer.config, "fp16")
        f = max(0.0, 1 - 50 * 2 ** 20 / nbytes)
        assert lp.dram_share == pytest.approx(f)
        assert lp.factor == pytest.approx(bw ** (f * lp.gamma))  # S ratio and Tensor Core ratio are 1
    assert r50.lbl_sequential_ms <= p.lbl_sequential_ms < predict(r50, H200, H100, memory="dram").lbl_sequential_ms
    # to an A100 (40 MB L2, 108 SMs at 1410 MHz): the L2 share scales by SMs x clock
    a = predict(r50, H200, A100, span=False)
    relu = next(lp for lp in a.layers if lp.name == "/relu/Relu")
    nbytes = roofline.min_bytes(r50.layers[relu.index].layer.config, "fp16")
    f = max(0.0, 1 - 40 * 2 ** 20 / nbytes)
    s_ratio = (132 * 1980) / (108 * 1410)
    m = (4800 / 2039) ** f * s_ratio ** (1 - f)
    assert relu.factor == pytest.approx(m ** relu.gamma * s_ratio ** (1 - relu.gamma))
    assert dram_share(100, H200, H100, "cold") == 1.0 and dram_share(0, H200, H100) == 0.0
    assert dram_share(100 * 2 ** 20, H200, H100) == pytest.approx(0.5)
    with pytest.raises(UsageError, match="memory model must be one of l2, dram"):
        predict(r50, H200, H100, memory="hbm")


def test_predict_refuses_missing_tensor_cores_and_mismatches(r50):
    with pytest.raises(UsageError, match="analysis is in fp16"):
        predict(r50, H200, H100, "tf32")
    other = predict(r50, H200, H100)
    other.batch = 1
    with pytest.raises(UsageError, match="cannot validate"):
        validate(other, r50)


# ------------------------------------------------------------------------------------- roofline

def test_roofline_table_and_chart(r50, tmp_path):
    mr = model_roofline(r50, H200)
    assert len(mr.layers) == sum(1 for t in r50.layers if t.status == "measured")
    assert 0 < mr.bound_parallel_ms <= mr.bound_sequential_ms < mr.lbl_sequential_ms
    assert mr.attainable_sequential_ms >= mr.bound_sequential_ms
    assert 0 < mr.efficiency < 1
    for x in mr.layers:
        assert x.efficiency == pytest.approx(x.bound_ms / x.measured_ms) and x.efficiency <= 1
        assert x.attainable_ms >= LAUNCH_FLOOR_US * 1e-3
    assert sum(x.lbl_share for x in mr.layers) == pytest.approx(1.0)
    d = mr.to_dict()
    assert d["ceilings"] == "spec" and "datasheet" in d["ceilings_source"]
    png, svg = tmp_path / "r.png", tmp_path / "r.svg"
    assert render(mr, png, svg) == [png, svg]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")


# ------------------------------------------------------------------------------------------- CLI

def test_cli_predict_and_roofline(models, tmp_path):
    m = models / "resnet50.onnx"
    p = bz("predict", m, "--batch", "32", "--dtype", "fp16", "--db", REF_DB, "--from", "H200", "--to", "h100-sxm",
           "--json")
    assert p.returncode == 0, p.stderr
    d = scenario_of(p.stdout, "predict")
    assert d["origin"] == "H200" and d["target"] == "H100-SXM" and d["complete"]
    assert d["lbl_sequential_ms"] > d["origin_lbl_sequential_ms"] > 0 and "Conv" in d["by_kind"]
    assert d["error_bar"]["relative"] > 0 and d["error_bar"]["unvalidated"] == [] and not d["error_bar"]["extrapolated"]
    p = bz("predict", m, "--batch", "32", "--dtype", "fp16", "--db", REF_DB, "--to", "A100")
    assert p.returncode == 0, p.stderr
    # the legacy reference database holds no channels-last measurement: the label says so (issue 52)
    assert "LBL (fused, critical path, nchw (nhwc not measured))" in p.stdout and "A100-SXM4-80GB" in p.stdout
    assert "unfused, per layer: sequential" in p.stdout
    text = " ".join(p.stdout.split())  # rich wraps long lines
    assert "error bar: +/-" in text and "validated on Hopper GPUs only" in text
    p = bz("predict", m, "--batch", "32", "--dtype", "tf32", "--db", REF_DB, "--to", "NVIDIA H200 [64 SMs]")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "never validated in tf32: Conv" in text and "H200 [64 SMs]" in text and "error bar: none" in text
    png, svg = tmp_path / "c.png", tmp_path / "c.svg"
    p = bz("roofline", m, "--batch", "32", "--dtype", "fp16", "--db", REF_DB, "--png", png, "--svg", svg)
    assert p.returncode == 0, p.stderr
    assert "library efficiency" in p.stdout and "datasheet" in p.stdout and png.stat().st_size > 0
    ET.parse(svg)
    p = bz("roofline", m, "--batch", "1", "--dtype", "fp32", "--db", REF_DB, "--json")
    assert p.returncode == 0, p.stderr
    d = scenario_of(p.stdout, "roofline")
    assert d["gpu"] == "H200" and d["ceilings"] == "spec" and 0 < d["library_efficiency"] < 1


@pytest.mark.parametrize("args,msg", [
    (("predict", "--to", "MI300X"), "unknown GPU 'MI300X'"),
    (("predict", "--to", "H100"), "ambiguous"),
    (("predict", "--to", "V100", "--dtype", "tf32"), "V100-SXM2 has no tf32 Tensor Core peak"),
    (("predict", "--to", "L4", "--dtype", "fp64"), "unknown data type 'fp64'"),
    (("predict", "--to", "L4", "--from", "A100"), "no system matches 'A100'"),
    (("roofline", "--ceilings", "measured"), "no measured ceilings for this system"),
    (("roofline", "--ceilings", "guess"), "--ceilings must be spec or measured"),
])
def test_cli_bad_input_is_one_line(models, args, msg):
    p = bz(args[0], models / "resnet50.onnx", "--db", REF_DB, *args[1:])
    assert msg in one_line_error(p, 2)


def test_measured_ceilings_replace_the_datasheet_roofs():
    from types import SimpleNamespace as NS

    from benanza.analysis.gpus import find_gpu, with_measured_ceilings

    h200 = find_gpu("NVIDIA H200")
    m = with_measured_ceilings(h200, {"dram_bandwidth": NS(value=4.1e12), "gemm_fp16": NS(value=700e12),
                                      "fma_fp32": NS(value=58e12), "gemm_fp32": NS(value=52e12)})
    assert m.bandwidth == 4.1e12 and m.peak_flops("fp16") == 700e12 and m.peak_flops("fp32") == 58e12
    assert m.peak_flops("fp8") == h200.peak_flops("fp8") and "measured" in m.source
    assert m.ridge("fp16") == pytest.approx(700e12 / 4.1e12)
    with pytest.raises(UsageError, match="run `benanza ceilings`"):
        with_measured_ceilings(h200, {})


def test_fp32_analysis_skips_gemms_faster_than_fma(models, tmp_path):
    """A database written before the runner relabelled them: an fp32 GEMM measurement faster than any
    FP32 FMA rate is not counted; the layer takes its fastest plausible measurement."""
    import gzip
    import shutil
    import sqlite3

    path = tmp_path / "ref.sqlite"
    with gzip.open(REF_DB) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    ml = process(models / "resnet50.onnx", 1)  # the classifier has two FMA measurements (GEMM, GEMV)
    fc = next(ly for ly in ml.layers if ly.op_type == "Gemm")
    db = open_db(str(path), create=False)
    system, _ = resolve_system(db, None)
    before = analyze(ml, db, system, "fp32").layers[fc.index]
    con = sqlite3.connect(path)
    con.execute("UPDATE measurements SET median_ms = 1e-6 WHERE id = (SELECT id FROM measurements WHERE "
                "layer_key = ? AND dtype = 'float32' AND math = 'fma' AND status = 'ok' AND cache = 'warm' "
                "ORDER BY median_ms LIMIT 1)", (fc.key,))
    con.commit()
    con.close()
    db = open_db(str(path), create=False)
    after = analyze(ml, db, system, "fp32").layers[fc.index]
    assert after.status == "measured" and after.time_ms > before.time_ms > 1e-3
    assert after.call != before.call  # the other FMA measurement (cublasSgemv)
    # every fp32 measurement implausible: missing, with the reason, never 0 ms
    con = sqlite3.connect(path)
    con.execute("UPDATE measurements SET median_ms = 1e-6 WHERE layer_key = ? AND status = 'ok'", (fc.key,))
    con.commit()
    con.close()
    a = analyze(ml, open_db(str(path), create=False), system, "fp32")
    lt = a.layers[fc.index]
    assert lt.status == "missing" and lt.time_ms is None and "exceeds the FP32 FMA bound" in lt.reason
    assert not a.complete


# ------------------------------------------------- prediction validated on an H100 and an H200

PAIR_DB = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"


@pytest.fixture(scope="module")
def pair(models):
    """fp16 analyses of four shared models at batch 1 and 32 on the H200 and the H100 of the
    reference database (measured, see db/README.md)."""
    db = open_db(str(PAIR_DB), create=False)
    systems = {s.gpu_name: s for s in db.systems()}
    h200, h100 = systems["NVIDIA H200"], systems["NVIDIA H100 80GB HBM3"]
    out = []
    for name in ("lstm_lm", "googlenet", "resnet50_bnkept", "densenet121"):
        for b in (1, 32):
            ml = process(models / f"{name}.onnx", b)
            out.append((analyze(ml, db, h200, "fp16"), analyze(ml, db, h100, "fp16")))
    return db, h200, h100, out


def test_prediction_between_h100_and_h200_meets_the_target(pair):
    """Issue 6's target: mean model-level error under 8 % predicting each GPU from the other. The
    L2-aware memory term meets it; Habitat's DRAM-only term (the H200 has 1.43x the bandwidth)
    overpredicts the difference, since warm-cache layers of these sizes mostly run from L2."""
    db, h200, h100, runs = pair
    assert all(a.complete and b.complete for a, b in runs)
    errs = {"l2": [], "dram": []}
    for a200, a100 in runs:
        for memory in errs:
            errs[memory].append(validate(predict(a200, H200, H100, memory=memory), a100))
            errs[memory].append(validate(predict(a100, H100, H200, memory=memory), a200))
    assert mean_model_error(errs["l2"]) < 0.08
    assert mean_model_error(errs["dram"]) > 2 * mean_model_error(errs["l2"])
    # the measured ceilings came along: the H200's copy bandwidth is the higher
    c200, c100 = db.ceilings(h200.id), db.ceilings(h100.id)
    assert c200["dram_bandwidth"].value > 1.2 * c100["dram_bandwidth"].value


# ------------------------------------------- SM partitions: one H100 confined to 132, 64 and 32 SMs

PART_DB = REPO / "db" / "reference" / "h100_partitions.sqlite.gz"
PART_MODELS = "resnet50,mobilenet_v2,vit_b_16,resnet18,squeezenet1_1,convnext_tiny,bert_base,alexnet"


def test_fixed_part_of_each_layer_is_kept(r50, models):
    """predicted = F + (T - F) x factor with F = min(T, fixed_us): a layer under the fixed part keeps
    its time; fixed_us=0 is pure wave scaling. A Tensor Core layer's factor does not depend on F; a
    CUDA-core layer's measured gamma is the share of T - F its bytes take, so F moves it."""
    pure, p = predict(r50, H200, A100, fixed_us=0), predict(r50, H200, A100)
    assert p.fixed_us == 2.0 and p.to_dict()["fixed_us"] == 2.0
    for a, b in zip(pure.layers, p.layers):
        if b.status != "measured":
            continue
        if b.method == "grid":  # a GEMM to another architecture: the public grid's ratio of whole times
            assert b.fixed_ms == 0.0 and b.predicted_ms == pytest.approx(b.origin_ms * b.factor)
            continue
        assert b.fixed_ms == pytest.approx(min(b.origin_ms, 2e-3))
        if b.compute != "cuda_cores":
            assert b.factor == a.factor
        elif b.origin_ms > 2e-3:
            assert b.gamma >= a.gamma - 1e-12  # the bytes explain more of T - F than of T: never less memory-bound
        assert b.predicted_ms == pytest.approx(b.fixed_ms + (b.origin_ms - b.fixed_ms) * b.factor)
    db = open_db(str(REF_DB), create=False)
    b1 = analyze(process(models / "resnet50.onnx", 1), db, resolve_system(db, None)[0], "fp16")
    tiny = [lp for lp in predict(b1, H200, A100).layers if lp.status == "measured" and lp.origin_ms <= 2e-3
            and lp.method == "wave"]
    assert tiny and all(lp.predicted_ms == lp.origin_ms for lp in tiny)
    assert r50.lbl_sequential_ms < p.lbl_sequential_ms < pure.lbl_sequential_ms  # A100 is slower: less scaled
    with pytest.raises(UsageError, match="fixed part must be 0"):
        predict(r50, H200, A100, fixed_us=-1)


def test_partition_spec_scales_the_math_not_the_memory():
    from benanza.analysis.gpus import partition_spec

    p = find_gpu("NVIDIA H100 80GB HBM3 [64 SMs]")
    assert p.name == "H100-SXM [64 SMs]" and p.sm_count == 64 and p.partition_of == 132
    for k, v in H100.peak.items():
        assert p.peak[k] == (None if v is None else pytest.approx(v * 64 / 132))
    assert (p.bandwidth, p.l2_bytes, p.memory_bytes, p.boost_clock_mhz) == (
        H100.bandwidth, H100.l2_bytes, H100.memory_bytes, H100.boost_clock_mhz)
    assert "64 of its 132 SMs" in p.source and find_gpu("h100-sxm [32 SMs]").sm_count == 32
    assert partition_spec(H100, 132) is H100
    with pytest.raises(UsageError, match="H100-SXM has 132 SMs: no partition of 200"):
        find_gpu("NVIDIA H100 80GB HBM3 [200 SMs]")


@pytest.fixture(scope="module")
def partition_check(tmp_path_factory):
    """benchmarks/predict_check.py on the checked-in partition database (8 models at batch 32, 5 at
    batch 1, fp16 and fp32, every ordered pair of 132, 64 and 32 SMs, measured ceilings), and the
    model before the validation (Habitat's SM ratio, no fixed part, datasheet figures)."""
    mod = load("predict_check")
    out = tmp_path_factory.mktemp("pc")
    args = ["--db", str(PART_DB), "--partitions", "--models", str(REPO / "db" / "reference" / "truth"),
            "--model", PART_MODELS, "--batch", "1,32", "--dtype", "fp16,fp32"]
    assert mod.main(args + ["--ceilings", "measured", "--json", str(out / "after.json"),
                            "--errors-out", str(out / "errors.json")]) == 0
    assert mod.main(args + ["--ceilings", "spec", "--fixed-us", "0", "--no-span",
                            "--json", str(out / "before.json")]) == 0
    return {k: json.loads((out / f"{k}.json").read_text()) for k in ("after", "before", "errors")}


def test_prediction_across_sm_counts(partition_check):
    """What the validation shows (benchmarks/results/2026-11-25): at batch 32 every pair of SM
    counts under 5.5 % and at least 9x closer than "same time as on the origin"; at batch 1 (layers of
    a few thread blocks) under 9 % and at least 2.9x closer; the model before (Habitat's SM ratio,
    no fixed part) was 13 % off at batch 32 and 80 % at batch 1, worse than the naive guess. The
    measured gamma (benchmarks/results/2026-11-27i) moved the pair 32 -> 132 SMs at batch 32 from
    4.52 % to 5.31 % (its fp32 elementwise kinds predicted too fast) and the whole from 4.23 % to 4.20 %."""
    after, before = partition_check["after"]["l2"]["summary"], partition_check["before"]["l2"]["summary"]
    pairs = [k for k in after if k.startswith("batch 32, ")]
    assert len(pairs) == 6 and all(after[k]["configurations"] == 16 for k in pairs)
    for k in pairs:
        assert after[k]["mean_abs_error"] < 0.055 and 9 * after[k]["mean_abs_error"] < after[k]["naive_mean_abs_error"], k
    for k in [k for k in after if k.startswith("batch 1, ")]:
        assert after[k]["mean_abs_error"] < 0.09 and 2.9 * after[k]["mean_abs_error"] < after[k]["naive_mean_abs_error"], k
    assert after["batch 32"]["mean_abs_error"] < 0.3 * before["batch 32"]["mean_abs_error"]
    assert before["batch 1"]["mean_abs_error"] > before["batch 1"]["naive_mean_abs_error"]
    assert after["batch 1"]["mean_abs_error"] < 0.1 * before["batch 1"]["mean_abs_error"]


def test_checked_in_error_table_is_what_the_validation_gives(partition_check):
    from benanza.analysis.predict import load_error_table

    table, fresh = load_error_table(), partition_check["errors"]
    assert table["path"].endswith("predict_errors.json")
    assert table["kinds"].keys() == fresh["kinds"].keys() and table["ceilings"] == "measured"
    for kind, by_dtype in fresh["kinds"].items():
        for dtype, e in by_dtype.items():
            assert table["kinds"][kind][dtype] == pytest.approx(e), (kind, dtype)
    assert table["model_mean_abs_error"] == pytest.approx(fresh["model_mean_abs_error"])
    assert table["architectures"] == ["Hopper"] and len(table["pairs"]) == 6
    assert {"Conv", "Gemm", "Elementwise"} <= set(table["kinds"])


def test_error_bar_weights_the_validated_kinds(r50, tmp_path):
    from benanza.analysis.predict import error_bar, load_error_table

    table = {"kinds": {"Conv": {"fp16": {"mean_abs_error": 0.1, "p90_abs_error": 0.2}},
                       "Gemm": {"fp32": {"mean_abs_error": 0.5, "p90_abs_error": 0.9}}}, "date": "d",
             "architectures": ["Hopper"]}
    p = predict(r50, H200, H100)
    eb = error_bar(p, table)
    kinds = p.by_kind()
    assert eb.by_kind == {"Conv": 0.1} and eb.relative == pytest.approx(0.1) and eb.worst == pytest.approx(0.2)
    assert set(eb.unvalidated) == set(kinds) - {"Conv"}  # Gemm was validated in fp32 only
    share = sum(v["predicted_ms"] for k, v in kinds.items() if k != "Conv") / p.lbl_sequential_ms
    assert eb.unvalidated_share == pytest.approx(share)
    assert not eb.extrapolated and error_bar(predict(r50, H200, A100), table).extrapolated  # Ampere
    real = error_bar(p, load_error_table())
    assert not real.unvalidated and 0 < real.relative < max(real.by_kind.values()) and real.relative < real.worst
    bad = tmp_path / "e.json"
    bad.write_text("[1]")
    with pytest.raises(UsageError, match="prediction error table .*e.json"):
        load_error_table(bad)


def test_sm_partition_names_the_system_as_the_suite_does(monkeypatch):
    """BENANZA_SM_COUNT: the Python side names and fingerprints the device as the suite's system
    record does (cpp/src/partition.cpp: "<name> [<N> SMs]"), and keeps PyTorch's kernels out."""
    from benanza.database.store import system_fingerprint
    from benanza.runner import system as sysq

    dev = {"gpu_name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "compute_capability": "9.0"}
    monkeypatch.delenv("BENANZA_SM_COUNT", raising=False)
    assert sysq.apply_partition(dev) is dev and sysq.partition_excludes_framework() is None
    monkeypatch.setenv("BENANZA_SM_COUNT", "132")
    assert sysq.apply_partition(dev) is dev
    monkeypatch.setenv("BENANZA_SM_COUNT", "64")
    part = sysq.apply_partition(dev)
    assert part == {**dev, "sm_count": 64, "gpu_name": "NVIDIA H100 80GB HBM3 [64 SMs]"}
    assert system_fingerprint(part) != system_fingerprint(dev)
    assert find_gpu(part["gpu_name"]).sm_count == 64
    assert "not PyTorch" in sysq.partition_excludes_framework()
    for bad, msg in (("abc", "not a positive SM count"), ("0", "not a positive SM count"),
                     ("200", "the GPU has 132 SMs")):
        monkeypatch.setenv("BENANZA_SM_COUNT", bad)
        with pytest.raises(UsageError, match=f"BENANZA_SM_COUNT={bad}: {msg}"):
            sysq.apply_partition(dev)


def test_an_mps_client_is_named_a_partition_of_the_count_its_device_reports(monkeypatch):
    """BENANZA_PARTITION=mps (issue 26): an MPS client limited to N SMs reports N itself; benanza names
    it the partition the suite's record names (cpp/src/partition.cpp), requires the report to be the
    requested count, and lets PyTorch's kernels in (they run in the same client's limit)."""
    from benanza.runner import system as sysq

    mps = {"gpu_name": "NVIDIA H200", "sm_count": 64, "compute_capability": "9.0"}
    monkeypatch.setenv("BENANZA_PARTITION", "mps")
    monkeypatch.setenv("BENANZA_SM_COUNT", "64")
    part = sysq.apply_partition(mps)
    assert part == {**mps, "gpu_name": "NVIDIA H200 [64 SMs, MPS]"}  # not the green context's "[64 SMs]"
    assert find_gpu(part["gpu_name"]).sm_count == 64 and sysq.partition_excludes_framework() is None
    # the MPS daemon not running, or another limit: the device reports what it has, and benanza says so
    with pytest.raises(UsageError, match=r"BENANZA_SM_COUNT=64 with BENANZA_PARTITION=mps: the device reports 132 SMs"):
        sysq.apply_partition({**mps, "sm_count": 132})
    monkeypatch.delenv("BENANZA_SM_COUNT")
    with pytest.raises(UsageError, match="BENANZA_PARTITION=mps needs BENANZA_SM_COUNT"):
        sysq.apply_partition(mps)
    monkeypatch.setenv("BENANZA_PARTITION", "mig")
    with pytest.raises(UsageError, match="BENANZA_PARTITION=mig: not a partition method"):
        sysq.apply_partition(mps)


def test_span_keeps_small_layers_off_the_sm_ratio(r50, models):
    """Brent's theorem: a layer of P units of parallel work keeps 1 / (1/k + 1/P) of k SMs busy.
    Large layers scale nearly by the SM ratio (Habitat's), a batch-1 layer of a few tiles hardly."""
    from benanza.analysis.predict import busy_sms, work_units
    from benanza.kinds.conv import ConvConfig
    from benanza.kinds.gemm import GemmConfig

    conv = ConvConfig(x=(32, 64, 56, 56), w=(128, 64, 3, 3), pads=(1, 1, 1, 1), strides=(1, 1),
                      dilations=(1, 1), group=1, bias=False)
    assert work_units(conv, "fp16") == pytest.approx(32 * 56 * 56 / 64 * 2)  # 64 x 64 tiles of the implicit GEMM
    assert work_units(GemmConfig(m=100, n=30, k=8, batch_count=3), "fp16") == pytest.approx(100 / 64 * 1 * 3)
    assert busy_sms(132, 1e12) == pytest.approx(132) and busy_sms(132, 4) == pytest.approx(1 / (1 / 132 + 1 / 4))
    part = find_gpu("NVIDIA H200 [32 SMs]")
    db = open_db(str(REF_DB), create=False)
    b1 = analyze(process(models / "resnet50.onnx", 1), db, resolve_system(db, None)[0], "fp16")
    for a in (r50, b1):
        habitat, p = predict(a, H200, part, span=False), predict(a, H200, part)
        for h, lp in zip(habitat.layers, p.layers):
            if lp.status == "measured":
                k0, k1 = busy_sms(132, lp.work_units), busy_sms(32, lp.work_units)
                assert 1 - 1e-9 <= lp.factor <= h.factor + 1e-9 and k0 / k1 <= 132 / 32
    small = predict(b1, H200, part)
    big = predict(r50, H200, part)
    assert small.lbl_sequential_ms / b1.lbl_sequential_ms < big.lbl_sequential_ms / r50.lbl_sequential_ms


def test_an_sm_bound_cuda_core_layer_scales_with_the_sms():
    """The measured gamma (benchmarks/results/2026-11-27i): GELU's backward over 32x197x3072 fp16 moves
    3 x 38.7 MB, 24.2 µs at the H200's 4.8 TB/s, and took 50.6 µs on 132 SMs: under half of its time
    is memory, so the rest scales with the SMs (measured 97.3 µs on 64 SMs). Habitat's gamma from
    the intensity (11 FLOPs an element counted) had it memory-bound, about as fast on 64 SMs."""
    from types import SimpleNamespace

    from benanza.analysis.gpus import partition_spec
    from benanza import kinds as L
    from benanza.analysis.predict import LayerPrediction, memory_share, scale_layer

    cfg = L.UnaryBwdConfig(shape=(32, 197, 3072), op="gelu")
    t = 0.0506
    share = memory_share(cfg, "fp16", H200, t)
    nbytes = 3 * 2 * 32 * 197 * 3072
    assert share == pytest.approx(nbytes / 4.8e12 * 1e3 / (t - 0.002))
    assert 0.45 < share < 0.55
    assert memory_share(cfg, "fp16", H200, None) == 1.0  # no time: no cap
    lp = LayerPrediction(0, "gelu", "Gelu", "UnaryBwd", "measured", t, None)
    scale_layer(lp, SimpleNamespace(layer=SimpleNamespace(config=cfg), math="none"), H200,
                partition_spec(H200, 64), "fp16", "l2", "warm", True, t)
    assert lp.compute == "cuda_cores" and lp.gamma == pytest.approx(share)
    predicted = 0.002 + (t - 0.002) * lp.factor
    assert 0.070 < predicted < 0.0973  # closer to the measured 97.3 µs than to the origin's 50.6 µs
