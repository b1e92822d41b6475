"""Analyzer: LBL and critical path on recorded measurements -- the reference database measured on
an H200 (db/reference) and crafted databases where layers are missing or failed."""
import json

import pytest
import sqlalchemy as sa

from benanza.analysis.analyzer import analyze, critical_path, resolve_system
from benanza.database.store import Measurement, open_db
from benanza.errors import UsageError
from benanza.generation.generator import load_suite
from benanza.processing.model import process
from benanza.runner.run import RunOptions, run_suite
from conftest import REPO, make_fake_suite

REF_DB = REPO / "db" / "reference" / "h200.sqlite.gz"
REF_LBL = json.loads((REPO / "db" / "reference" / "h200.lbl.json").read_text())


def test_critical_path_small_dag():
    #   0 -> 1 -> 3, 0 -> 2 -> 3 ; weights make the 0-2-3 branch critical
    edges = {0: [], 1: [0], 2: [0], 3: [1, 2]}
    length, path = critical_path(edges, [1.0, 2.0, 5.0, 1.0])
    assert length == 7.0 and path == [0, 2, 3]
    assert critical_path({0: [], 1: [0], 2: [1]}, [1.0, 2.0, 3.0]) == (6.0, [0, 1, 2])
    assert critical_path({}, []) == (0.0, [])


@pytest.fixture(scope="module")
def ref_db():
    return open_db(str(REF_DB), create=False)


@pytest.mark.parametrize("row", REF_LBL, ids=lambda r: f"{r['model']}-b{r['batch']}-{r['precision']}")
def test_reference_database_reproduces_the_gpu_run(row, ref_db, models):
    """`benanza analyze` on a machine without a GPU gives the LBL that `benanza bench` printed on the H200."""
    ml = process(models / f"{row['model']}.onnx", row["batch"])
    system, _ = resolve_system(ref_db, None)
    a = analyze(ml, ref_db, system, row["precision"])
    assert a.complete == row["complete"] is True
    assert a.lbl_sequential_ms == pytest.approx(row["lbl_sequential_ms"], rel=1e-9)
    assert a.lbl_parallel_ms == pytest.approx(row["lbl_parallel_ms"], rel=1e-9)
    assert a.lbl_fused_sequential_ms == pytest.approx(row["lbl_fused_sequential_ms"], rel=1e-9)
    assert 0 < a.lbl_parallel_ms <= a.lbl_sequential_ms
    assert a.lbl_fused_sequential_ms <= a.lbl_sequential_ms
    assert all(t.time_ms > 0 for t in a.layers if t.status == "measured")
    assert a.system["gpu_name"].startswith("NVIDIA H")


def test_reference_parallel_structure(ref_db, models):
    system, _ = resolve_system(ref_db, None)
    goog = analyze(process(models / "googlenet.onnx", 32), ref_db, system, "fp16")
    assert goog.lbl_parallel_ms < 0.8 * goog.lbl_sequential_ms  # inception branches run side by side
    names = [goog.layers[i].layer.op_type for i in goog.critical_path]
    assert names[0] == "Conv" and names.count("Concat") == 9  # the path crosses every inception block
    vgg = analyze(process(models / "vgg16.onnx", 32), ref_db, system, "fp32")
    assert vgg.lbl_parallel_ms == pytest.approx(vgg.lbl_sequential_ms)  # a chain
    # precision ordering on real H200 data: Tensor Cores help at batch 32
    r = {p: analyze(process(models / "resnet50.onnx", 32), ref_db, system, p).lbl_sequential_ms
         for p in ("fp32", "tf32", "fp16")}
    assert r["fp16"] < r["tf32"] < r["fp32"]


def test_fp8_figures_without_fp8_measurements_say_they_are_fp16(ref_db, models):
    """The reference database has no FP8 GEMM: an fp8 analysis is every layer's fp16 time and says so
    (it printed fp16 figures labelled fp8); with an FP8 measurement taken, no note."""
    import dataclasses

    system, _ = resolve_system(ref_db, None)
    a = analyze(process(models / "resnet50.onnx", 32), ref_db, system, "fp8")
    f16 = analyze(process(models / "resnet50.onnx", 32), ref_db, system, "fp16")
    assert a.lbl_ms == pytest.approx(f16.lbl_ms) and not f16.precision_note
    assert "fp8" in a.precision_note and "fp16 measurement" in a.precision_note
    assert a.to_dict()["precision_note"] == a.precision_note
    gemm = next(i for i, t in enumerate(a.layers) if t.layer.config is not None and t.layer.config.kind == "Gemm")
    a.layers[gemm] = dataclasses.replace(a.layers[gemm], math="fp8_fast_accum")
    assert a.precision_note == ""


def test_cold_cache_is_slower_or_equal(ref_db, models):
    system, _ = resolve_system(ref_db, None)
    ml = process(models / "resnet50.onnx", 1)
    warm = analyze(ml, ref_db, system, "fp32", "warm")
    cold = analyze(ml, ref_db, system, "fp32", "cold")
    assert cold.complete and cold.lbl_sequential_ms > warm.lbl_sequential_ms


@pytest.fixture
def measured(tmp_path, models, db_url):
    folder = make_fake_suite(tmp_path / "s", models / "googlenet.onnx", (1,), ("fp32",))
    run_suite(load_suite(folder), open_db(db_url), RunOptions())
    return open_db(db_url)


def test_missing_layer_is_never_counted_as_zero(measured, models):
    ml = process(models / "googlenet.onnx", 1)
    system = measured.systems()[0]
    full = analyze(ml, measured, system, "fp32")
    assert full.complete
    victim = next(ly for ly in ml.layers if ly.op_type == "Conv")
    with measured.session() as s:
        s.execute(sa.update(Measurement).where(Measurement.layer_key == victim.key).values(
            status="failed", median_ms=None, message="CUDNN_STATUS_EXECUTION_FAILED from cudnnConvolutionForward"))
    # its Conv+bias+Relu candidate's fused call still computes it: the fused LBL is complete, the
    # unfused figures are partial sums
    covered = analyze(ml, measured, system, "fp32")
    assert covered.complete and not covered.complete_unfused and covered.layers[victim.index].covered
    fusion = ml.fusions[victim.fusion].config.key
    with measured.session() as s:
        s.execute(sa.update(Measurement).where(Measurement.layer_key == fusion).values(
            status="failed", median_ms=None, message="CUDNN_STATUS_EXECUTION_FAILED"))
    a = analyze(ml, measured, system, "fp32")
    assert not a.complete
    lt = a.layers[victim.index]
    assert lt.status == "missing" and lt.time_ms is None and "failed" in lt.reason
    assert "EXECUTION_FAILED" in lt.reason
    d = a.to_dict()
    assert d["complete"] is False and d["missing"][0]["index"] == victim.index
    assert a.lbl_sequential_ms == pytest.approx(full.lbl_sequential_ms - full.layers[victim.index].time_ms)


def test_unmeasured_precision_and_unsupported_ops_are_listed(measured, models, tmp_path):
    system = measured.systems()[0]
    a = analyze(process(models / "googlenet.onnx", 1), measured, system, "fp16")  # only fp32 was run
    assert not a.complete and all("not measured on this system" in t.reason for t in a.missing)
    from onnx import TensorProto, helper, save

    # Det (a determinant per matrix) has no layer kind
    g = helper.make_graph([helper.make_node("Det", ["x"], ["e"], name="det"),
                           helper.make_node("Relu", ["e"], ["y"], name="relu")], "det",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "det.onnx"))
    other = analyze(process(tmp_path / "det.onnx", 1), measured, system, "fp32")
    reasons = {t.layer.op_type: t.reason for t in other.missing}
    assert reasons["Det"].startswith("unsupported: no benchmark for Det")
    assert reasons["Relu"].startswith("not measured on this system")


def test_resolve_system(measured):
    s, note = resolve_system(measured, None)
    assert note == ""
    assert resolve_system(measured, "fake")[0].id == s.id
    with pytest.raises(UsageError, match="no system matches"):
        resolve_system(measured, "A100")


def test_nhwc_neighbours_take_their_channels_last_time(tmp_path, db_url):
    """`analyze --layout nchw,nhwc`: a pooling layer whose NHWC measurement is the faster takes it,
    and the result counts the layers whose best is channels-last."""
    import shutil

    from benanza.generation.generator import generate
    from conftest import HERE
    from onnx_builders import all_kinds_model

    ml = process(all_kinds_model(tmp_path / "all.onnx"), 2)
    folder = tmp_path / "s"
    generate([ml], ["fp32"], folder, ["NCHW", "NHWC"])
    exe = folder / "build" / "benanza-suite"
    exe.parent.mkdir(parents=True)
    shutil.copy(HERE / "fake_suite.py", exe)
    exe.chmod(0o755)
    db = open_db(db_url)
    run_suite(load_suite(folder), db, RunOptions())
    system = db.systems()[0]
    pool = next(ly for ly in ml.layers if ly.op_type == "MaxPool")
    with db.session() as s:
        s.execute(sa.update(Measurement).where(Measurement.layer_key == pool.key,
                                               Measurement.layout == "NHWC").values(median_ms=1e-5))
        bn = next(ly for ly in ml.layers if ly.op_type == "BatchNormalization")
        assert s.execute(sa.select(sa.func.count()).select_from(Measurement).where(
            Measurement.layout == "NHWC", Measurement.layer_key == bn.key)).scalar() > 0
    nchw = analyze(ml, db, system, "fp32")
    both = analyze(ml, db, system, "fp32", layouts=("NCHW", "NHWC"))
    assert nchw.layers[pool.index].layout in ("", "NCHW") and nchw.to_dict()["nhwc_best_layers"] == 0
    assert both.layers[pool.index].layout == "NHWC" and both.layers[pool.index].time_ms == pytest.approx(1e-5)
    assert both.to_dict()["nhwc_best_layers"] >= 1
    assert nchw.complete and both.complete  # the NHWC job keeps the NCHW measurements of the same config
    assert both.lbl_sequential_ms < nchw.lbl_sequential_ms
