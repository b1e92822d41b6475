"""Cross-architecture GEMM prediction from the public ratio grids (benanza/analysis/xarch.py, docs/prediction.md
"Across architectures"), without a GPU: the shipped grids and sample (db/reference/xgpu), the validation table
benchmarks/xgpu_check.py reproduces, and `benanza predict --to` on the shipped H100 database."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benanza.analysis import xarch
from benanza.analysis.gpus import find_gpu

REPO = Path(__file__).resolve().parents[1]
XGPU = REPO / "db" / "reference" / "xgpu"
DB = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"
VIT = REPO / "tests" / "data" / "zoo" / "models" / "vit_b_16.onnx"


def test_grids_hold_every_gpu_and_dtype_of_the_table():
    g = xarch.load_grids()
    assert set(g) == {"bfloat16", "fp8", "fp8_block"}
    assert set(g["bfloat16"].gpus) == {"H100-SXM", "H200", "A100-SXM4-80GB", "L40S", "B200"}
    assert set(g["fp8"].gpus) == {"H100-SXM", "H200", "L40S", "B200"}
    assert set(g["fp8_block"].gpus) == {"H100-SXM", "H200", "B200"}
    b = g["bfloat16"]
    assert (b.m[0], b.m[-1], b.n[0], b.n[-1]) == (1, 32768, 32, 65536)
    for dt in g.values():
        for a in dt.ratios.values():
            assert a.shape == (len(dt.m), len(dt.n), len(dt.k)) and np.isfinite(a).all()


def test_factor_is_the_grid_ratio_at_a_grid_point_and_interpolates_between():
    g = xarch.load_grids()["bfloat16"]
    i, j, l = 40, 10, 12
    m, n, k = g.m[i], g.n[j], g.k[l]
    want = math.exp(float(g.ratios["B200"][i, j, l]) - float(g.ratios["A100-SXM4-80GB"][i, j, l]))
    assert xarch.gemm_factor("A100-SXM4-80GB", "B200", "bf16", "tensor_op", m, n, k) == pytest.approx(want, rel=1e-6)
    # between two m points: between their values (log-linear); beyond the edges: the edge
    mid = int(round(math.sqrt(g.m[i] * g.m[i + 1])))
    lo = xarch.gemm_factor("H100-SXM", "B200", "bf16", "tensor_op", g.m[i], n, k)
    hi = xarch.gemm_factor("H100-SXM", "B200", "bf16", "tensor_op", g.m[i + 1], n, k)
    assert min(lo, hi) - 1e-9 <= xarch.gemm_factor("H100-SXM", "B200", "bf16", "tensor_op", mid, n, k) <= max(lo, hi) + 1e-9
    edge = xarch.gemm_factor("H100-SXM", "L40S", "bf16", "tensor_op", 1, 32, 32)
    assert xarch.gemm_factor("H100-SXM", "L40S", "bf16", "tensor_op", 1, 8, 8) == pytest.approx(edge)
    # the origin's own ratio divides out, and the same GPU is 1
    assert xarch.gemm_factor("B200", "B200", "bf16", "tensor_op", 4096, 4096, 4096) == pytest.approx(1.0)


def test_data_types_and_gpus_outside_the_grids_have_no_factor():
    assert xarch.grid_dtype("fp16", "tensor_op") == "bfloat16"
    assert xarch.grid_dtype("fp8", "fp8_block128") == "fp8_block"
    assert xarch.grid_dtype("fp8", "fp8") == "fp8"
    assert xarch.grid_dtype("fp32", "fma") is None and xarch.grid_dtype("fp32", "tf32") is None
    assert xarch.gemm_factor("H100-SXM", "T4", "fp16", "tensor_op", 64, 1024, 1024) is None  # not in the table
    assert xarch.gemm_factor("H100-SXM", "A100-SXM4-80GB", "fp8", "fp8", 64, 1024, 1024) is None  # A100: no fp8
    assert xarch.gemm_factor("H100-SXM", "B200", "fp32", "fma", 64, 1024, 1024) is None


def test_validation_table_is_reproduced_from_the_shipped_files_and_beats_the_baselines():
    """benchmarks/xgpu_check.py recomputes the shipped error table (grid rows on held-out shapes); the grid is
    better than the naive roofline ratio and than wave scaling for every pair of architectures."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import xgpu_check
    finally:
        sys.path.pop(0)
    rows = xgpu_check.gemm_rows(XGPU / "aiconfigurator_gemm_sample.csv.gz")
    shipped = {(r["method"], r["dtype"], r["origin"], r["target"]): r
               for r in json.loads((XGPU / "xgpu_errors.json").read_text())["rows"]}
    for r in rows:
        s = shipped[(r["method"], r["dtype"], r["origin"], r["target"])]
        assert r["n"] == s["n"] == 2000 and r["mean"] == pytest.approx(s["mean"], rel=1e-6), r
    by = {(r["method"], r["dtype"], r["origin"], r["target"]): r["mean"] for r in rows}
    for (method, dt, o, d), mean in by.items():
        if method != "grid":
            continue
        assert mean < 0.11, (dt, o, d, mean)
        if find_gpu(o).architecture != find_gpu(d).architecture:
            assert mean < by[("naive", dt, o, d)] and mean < by[("habitat", dt, o, d)], (dt, o, d)


def _predict(target: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "benanza", "predict", str(VIT), "--batch", "32", "--dtype", "fp16",
                           "--db", str(DB), "--from", "2", "--to", target, *extra],
                          capture_output=True, text=True, timeout=120)


def test_predict_to_another_architecture_takes_the_gemms_from_the_grid_and_says_its_error():
    r = _predict("B200", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)["scenarios"][0]
    grid = [lp for lp in s["layers"] if lp["method"] == "grid"]
    assert grid and all(lp["kind"] == "Gemm" and lp["grid"] == "bfloat16" and lp["fixed_ms"] == 0.0 for lp in grid)
    for lp in grid:
        assert lp["predicted_ms"] == pytest.approx(lp["origin_ms"] * lp["factor"])
    err = next(x for x in json.loads((XGPU / "xgpu_errors.json").read_text())["rows"]
               if (x["method"], x["dtype"], x["origin"], x["target"]) == ("grid", "bfloat16", "H100-SXM", "B200"))
    assert any(f"mean {err['mean']:.1%}" in line and "H100-SXM -> B200" in line for line in s["cross_gpu"])
    text = _predict("B200")
    assert text.returncode == 0 and "ratio of public measurements (bfloat16 grid" in text.stdout
    assert "GEMMs to another architecture: the public ratio grid" in text.stdout


def test_predict_between_hopper_gpus_and_to_unmeasured_architectures_keeps_wave_scaling():
    r = _predict("H200", "--json")
    s = json.loads(r.stdout)["scenarios"][0]
    assert {lp["method"] for lp in s["layers"] if lp["status"] == "measured"} == {"wave"} and s["cross_gpu"] == []
    r = _predict("V100-SXM2")  # Volta: no GPU of the tables, no bf16 row of its architecture
    assert r.returncode == 0, r.stderr
    assert "never validated from Hopper to Volta in fp16" in r.stdout
    r = _predict("L4")  # Ada: the table's L40S row of wave scaling stands for it, named
    assert "to L40S (Ada Lovelace) on the public table" in r.stdout


def test_predict_to_a_gpu_outside_the_table_goes_through_its_architectures_table_gpu():
    """GB200 is not in the table: its GEMMs go H100 -> B200 by the grid, then B200 -> GB200 by wave scaling,
    and the output says both steps and that the second was never validated on Blackwell."""
    from benanza.analysis.xarch import proxy_gpu

    assert proxy_gpu(find_gpu("GB200"), "fp16", "tensor_op") == "B200"
    assert proxy_gpu(find_gpu("L4"), "bf16", "tensor_op") == "L40S"
    assert proxy_gpu(find_gpu("A10"), "fp8", "fp8") is None  # the fp8 grid has no Ampere GPU
    assert proxy_gpu(find_gpu("B200"), "bf16", "tensor_op") is None  # in the grid itself
    r = _predict("GB200", "--json")
    s = json.loads(r.stdout)["scenarios"][0]
    chained = [lp for lp in s["layers"] if lp["method"] == "grid+wave"]
    assert chained and all(lp["via"] == "B200" for lp in chained)
    direct = json.loads(_predict("B200", "--json").stdout)["scenarios"][0]["layers"]
    for lp in chained:  # the same GPU, its datasheet figures: GB200's higher peaks make it no slower than B200
        assert lp["predicted_ms"] <= direct[lp["index"]]["predicted_ms"] * 1.0001
    assert any("then B200 -> GB200 by wave scaling within Blackwell" in x and "never validated on Blackwell" in x
               for x in s["cross_gpu"])


PART = REPO / "db" / "reference" / "h100_partitions.sqlite.gz"
BERT = REPO / "db" / "reference" / "truth" / "bert_base.onnx"


def test_fp32_model_reproduces_its_cross_validated_errors_and_beats_the_baselines():
    """The fp32 model of NeuSight's table (xarch.fit_fp32), judged by 5-fold cross-validation over shapes,
    gives the shipped ``model`` rows; it is better than the naive ratio and wave scaling on every target."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import xgpu_check
    finally:
        sys.path.pop(0)
    shipped = {(r["method"], r["dtype"], r["target"]): r
               for r in json.loads((XGPU / "xgpu_errors.json").read_text())["rows"] if r["dtype"].startswith("fp32")}
    for op, target in (("linear", "T4"), ("bmm", "V100-PCIe-32GB")):
        pred, meas, big = xgpu_check.fp32_cross_validated(op, target)
        e = np.abs(pred[big] / meas[big] - 1.0)
        s = shipped[("model", f"fp32 {op}", target)]
        assert e.size == s["n"] and e.mean() == pytest.approx(s["mean"], rel=1e-6)
    for (method, dt, target), r in shipped.items():
        if method == "model" and not dt.endswith("all"):
            assert r["mean"] < shipped[("naive", dt, target)]["mean"] / 2, (dt, target)
            assert r["mean"] < shipped[("habitat", dt, target)]["mean"] / 2, (dt, target)
    assert shipped[("model", "fp32 linear", "T4")]["mean"] < 0.08


def test_fp32_model_factor_is_bounded_and_only_for_cuda_core_fp32_from_h100():
    from benanza.kinds.gemm import GemmConfig

    cfg = GemmConfig(m=4096, n=3072, k=768)
    f = xarch.fp32_factor("H100-SXM", "T4", "fp32", "fma", cfg, 1.0)
    model = xarch.load_fp32_models()[("linear", "T4")]
    assert math.exp(model.y_range[0]) <= f <= math.exp(model.y_range[1]) and f > 4  # T4: 8 of H100's 67 TFLOP/s
    assert xarch.fp32_factor("H100-SXM", "T4", "fp32", "tf32", cfg, 1.0) is None  # Tensor Core math: not the table's
    assert xarch.fp32_factor("H200", "T4", "fp32", "fma", cfg, 1.0) is None  # the model's origin is H100-SXM
    assert xarch.fp32_factor("H100-SXM", "L4", "fp32", "fma", cfg, 1.0) is None
    huge = xarch.fp32_factor("H100-SXM", "T4", "fp32", "fma", GemmConfig(m=1, n=8, k=8), 1e-4)
    assert math.exp(model.y_range[0]) - 1e-9 <= huge <= math.exp(model.y_range[1]) + 1e-9  # no extrapolation
    assert xarch.fp32_proxy(find_gpu("V100-SXM2")) == "V100-PCIe-32GB"
    assert xarch.fp32_proxy(find_gpu("L4")) is None


@pytest.mark.parametrize("target", ["T4", "V100-PCIe-32GB"])
def test_predict_fp32_to_t4_and_v100_uses_the_fp32_model_and_prints_its_error(target):
    r = subprocess.run([sys.executable, "-m", "benanza", "predict", str(BERT), "--batch", "32", "--dtype", "fp32",
                        "--db", str(PART), "--from", "1", "--to", target, "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)["scenarios"][0]
    model = [lp for lp in s["layers"] if lp["method"] == "model"]
    assert model and {lp["grid"] for lp in model} == {"fp32 linear", "fp32 bmm"}
    for lp in model:
        assert lp["predicted_ms"] == pytest.approx(lp["origin_ms"] * lp["factor"])
    err = next(x for x in json.loads((XGPU / "xgpu_errors.json").read_text())["rows"]
               if (x["method"], x["dtype"], x["target"]) == ("model", "fp32 linear", target))
    assert any(f"H100-SXM -> {target} by the fp32 model" in line and f"mean {err['mean']:.1%}" in line
               for line in s["cross_gpu"])


def test_wave_scaling_of_an_fma_gemm_counts_the_fp32_units_per_sm():
    """An fp32 GEMM on CUDA cores (math fma) scales its compute term by SMs x FP32 units per SM x clock (128 on
    Hopper, 64 on GA100): twice the SM x clock ratio; a CUDA-core layer of other math by SMs x clock alone."""
    from benanza.analysis.predict import LayerPrediction, scale_layer
    from benanza.kinds.gemm import GemmConfig

    h100, a100 = find_gpu("H100-SXM"), find_gpu("A100-PCIe-80GB")

    class Timed:
        def __init__(self, math_mode):
            self.layer = type("L", (), {"config": GemmConfig(m=8192, n=8192, k=8192)})()
            self.math, self.time_ms = math_mode, 30.0

    fma, other = (LayerPrediction(0, "g", "Gemm", "Gemm", "measured", 30.0, None) for _ in range(2))
    scale_layer(fma, Timed("fma"), h100, a100, "fp32", "l2", "warm", span=False)
    scale_layer(other, Timed("none"), h100, a100, "fp32", "l2", "warm", span=False)
    assert fma.gamma == pytest.approx(other.gamma) and fma.gamma < 0.1
    assert fma.factor / other.factor == pytest.approx(2.0 ** (1.0 - fma.gamma))


def test_leave_one_gpu_out_table_is_stored_and_its_fp32_part_reproduced():
    """The shipped leave-one-GPU-out rows: for every GPU of each table naive, wave and the datasheet blend, fitted
    on GPUs that exclude it; the fp32 part recomputes to the same numbers; the blend does not beat wave scaling on
    fp32 (why predict keeps wave scaling for a GPU outside the tables)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import xgpu_check
    finally:
        sys.path.pop(0)
    stored = json.loads((XGPU / "xgpu_errors.json").read_text())["leave_one_gpu_out"]
    for r in stored:
        assert r["target"] not in r["trained_on"] and r["origin"] in r["trained_on"]
    by = {(r["method"], r["dtype"], r["target"]): r for r in stored}
    assert {t for (_, dt, t) in by if dt == "bfloat16"} == {"H100-SXM", "H200", "A100-SXM4-80GB", "L40S", "B200"}
    fresh = xgpu_check.logo_rows(None, XGPU / "neusight_fp32_linear_bmm.csv.gz")
    assert {r["target"] for r in fresh} == {"H100-SXM", "A100-PCIe-80GB", "V100-PCIe-32GB", "T4"}
    for r in fresh:
        assert r["mean"] == pytest.approx(by[(r["method"], r["dtype"], r["target"])]["mean"], rel=1e-6)
        if r["method"] == "spec-blend":
            assert r["mean"] > by[("wave", r["dtype"], r["target"])]["mean"]


def test_predict_fp32_from_h200_wave_scales_to_the_h100_then_takes_the_fp32_model():
    """An fp32 GEMM measured on the H200 goes H200 -> H100-SXM by wave scaling (within Hopper), then by the fp32
    model, whose H100-SXM -> T4 error the output names."""
    r = subprocess.run([sys.executable, "-m", "benanza", "predict", str(REPO / "examples" / "resnet50.onnx"), "-b", "32",
                        "--dtype", "fp32", "--db", str(REPO / "db" / "reference" / "h200.sqlite.gz"), "--to", "T4",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)["scenarios"][0]
    fc = [lp for lp in s["layers"] if lp["method"] == "wave+model"]
    assert len(fc) == 1 and fc[0]["kind"] == "Gemm" and fc[0]["grid"] == "fp32 linear"
    assert {lp["method"] for lp in s["layers"] if lp["status"] == "measured"} == {"wave", "wave+model"}
    err = next(x for x in json.loads((XGPU / "xgpu_errors.json").read_text())["rows"]
               if (x["method"], x["dtype"], x["origin"], x["target"]) == ("model", "fp32 linear", "H100-SXM", "T4"))
    assert any("H200 -> H100-SXM by wave scaling within Hopper" in x and "then H100-SXM -> T4 by the fp32 model" in x
               and f"mean {err['mean']:.1%}" in x for x in s["cross_gpu"])
    # the fc layer (m 32, n 1000, k 2048) on a T4: slower by about the model's ratio, far from H200's time
    assert 4.0 < fc[0]["factor"] < 20.0 and fc[0]["predicted_ms"] == pytest.approx(fc[0]["origin_ms"] * fc[0]["factor"])
    # the other (wave-scaled) layers name the wave-scaling error the table measured from H100-SXM, the table's
    # GPU of the H200's architecture, not "never validated"
    wave = next(x for x in json.loads((XGPU / "xgpu_errors.json").read_text())["rows"]
                if (x["method"], x["dtype"], x["origin"], x["target"]) == ("habitat", "fp32 linear", "H100-SXM", "T4"))
    other = [x for x in s["cross_gpu"] if x.startswith("other layers")]
    assert len(other) == 1 and "from H100-SXM, the table's GPU of the origin's architecture (Hopper)" in other[0]
    assert f"mean {wave['mean']:.1%}" in other[0] and "never validated" not in other[0]
