"""`benanza db import` of the public GEMM tables of db/reference/xgpu (aiconfigurator's bf16/fp8/fp8_block
sample, NeuSight's fp32 linear/bmm): one system per GPU with the table's provenance, every row a
measurement of the layer config benanza keys for that GEMM, an import repeated changing nothing, a file
of neither format refused in one line with nothing written, and `analyze`, `db compare` and `predict`
reading the table's own times. No GPU; one database per table, imported once per module."""
import csv
import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import api
from benanza.database import public_tables as pt
from benanza.database.store import open_db, system_fingerprint
from benanza.errors import UsageError
from benanza.kinds.gemm import GemmConfig
from benanza.usecases import db as uc
from conftest import REPO, envelope_of, records_of, scenario_of

XGPU = REPO / "db" / "reference" / "xgpu"
AIC = XGPU / "aiconfigurator_gemm_sample.csv.gz"
NEU = XGPU / "neusight_fp32_linear_bmm.csv.gz"
H100 = "NVIDIA H100 80GB HBM3"


def rows_of(path):
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def bz(*args):
    return subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def aic_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("aic") / "aic.db"
    st = uc.import_(str(path), str(AIC))
    assert st.rows == 24000 and st.systems_added == 5 and st.duplicates == 0
    return path


@pytest.fixture(scope="module")
def neu_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("neu") / "neu.db"
    st = uc.import_(str(path), str(NEU))
    assert st.rows == 11172 and st.systems_added == 4
    return path


def contents(path) -> dict:
    """Every row a user reads (ids and timestamps aside), by table."""
    with sqlite3.connect(path) as c:
        return {
            "systems": sorted(c.execute("SELECT fingerprint, gpu_name, info FROM systems")),
            "configs": sorted(c.execute("SELECT key, kind, params, batch, flops FROM layer_configs")),
            "jobs": sorted(c.execute("SELECT s.fingerprint, job, layer_key, precision, status FROM jobs "
                                     "JOIN systems s ON s.id = system_id")),
            "measurements": sorted(c.execute(
                "SELECT s.fingerprint, layer_key, precision, call, backend, algorithm, math, dtype, cache, layout, "
                "status, median_ms, mean_ms, q1_ms, samples, method FROM measurements JOIN systems s ON s.id = system_id")),
        }


def stripped(name, shape):
    """A float32 initializer whose data is in a file that is not there (a weight-stripped export)."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(shape))
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(int(np.prod(shape)) * 4))):
        t.external_data.add(key=k, value=v)
    return t


def linear_model(path, k, n, more=()):
    """x[N, k] @ W[k, n] (torch.onnx's nn.Linear without bias: the weight stored transposed), then a
    MatMul by each ``more`` (k', n') weight; batch N symbolic (``--batch`` gives m)."""
    nodes, inits, x, width = [], [stripped("w0", (k, n))], "x", n
    nodes.append(helper.make_node("MatMul", ["x", "w0"], ["y0"], name="linear0"))
    for i, (k2, n2) in enumerate(more, start=1):
        assert k2 == width
        inits.append(stripped(f"w{i}", (k2, n2)))
        nodes.append(helper.make_node("MatMul", [f"y{i - 1}", f"w{i}"], [f"y{i}"], name=f"linear{i}"))
        width = n2
    g = helper.make_graph(nodes, "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
                          [helper.make_tensor_value_info(f"y{len(more)}", TensorProto.FLOAT, ["N", width])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


# ------------------------------------------------------------------------------------------ the rows

def test_every_row_is_a_measurement_of_its_gpu_and_dtype(aic_db, neu_db):
    want = Counter((r["device"], r["dtype"]) for r in rows_of(AIC))
    math = {"tensor_op": "bfloat16", "fp8": "fp8", "fp8_block128": "fp8_block"}
    with sqlite3.connect(aic_db) as c:
        got = Counter({(g, math[m]): n for g, m, n in c.execute(
            "SELECT s.gpu_name, math, count(*) FROM measurements JOIN systems s ON s.id = system_id "
            "WHERE status = 'ok' GROUP BY s.gpu_name, math")})
    assert got == want and sum(want.values()) == 24000
    want = Counter((r["device"], r["op"]) for r in rows_of(NEU))
    with sqlite3.connect(neu_db) as c:
        got = Counter({(g, call.rsplit(" ", 1)[1].replace("nn.Linear", "linear").replace("torch.bmm", "bmm")): n
                       for g, call, n in c.execute(
                           "SELECT s.gpu_name, call, count(*) FROM measurements JOIN systems s ON s.id = system_id "
                           "WHERE status = 'ok' AND precision = 'fp32' AND math = 'fma' GROUP BY s.gpu_name, call")})
    assert got == want and sum(want.values()) == 11172


def test_each_row_is_keyed_as_benanza_keys_the_exported_layer(aic_db):
    r = next(x for x in rows_of(AIC) if x["device"] == H100 and x["dtype"] == "fp8_block")
    cfg = GemmConfig(m=int(r["m"]), n=int(r["n"]), k=int(r["k"]))  # MatMul(x[m,k], W^T[k,n])
    with sqlite3.connect(aic_db) as c:
        (got,) = c.execute("SELECT precision, call, math, dtype, median_ms, mean_ms, q1_ms, stddev_ms, samples, note, "
                           "backend FROM measurements m JOIN systems s ON s.id = m.system_id WHERE s.gpu_name = ? "
                           "AND layer_key = ? AND math = 'fp8_block128'", (H100, cfg.key)).fetchall()
        jobs = c.execute("SELECT job, status FROM jobs j JOIN systems s ON s.id = j.system_id WHERE s.gpu_name = ? "
                         "AND layer_key = ?", (H100, cfg.key)).fetchall()
    assert got[:4] == ("fp8", "aiconfigurator:sglang-0.5.10 F.linear", "fp8_block128", "float8_e4m3")
    assert got[4] == got[5] == float(r["ms"]) and got[6:9] == (None, None, None)  # a mean, no spread
    assert "mean" in got[9] and "not measured by benanza" in got[9] and got[10] == "torch_eager"
    assert jobs == [(f"{cfg.key}.fp8.torch", "ok")]


# ---------------------------------------------------------------------------------- systems, provenance

def test_one_system_per_gpu_with_the_tables_provenance(aic_db, neu_db):
    doc = records_of(bz("db", "systems", "--db", neu_db, "--format", "json").stdout, "db systems")
    assert [s["gpu_name"] for s in doc] == ["NVIDIA A100 80GB PCIe", H100, "Tesla T4", "Tesla V100-PCIE-32GB"]
    for s in doc:
        p = s["provenance"]
        assert p["public_table"] is True and p["measured_by_benanza"] is False
        assert p["repository"] == "sitar-lab/NeuSight" and p["commit"] == "6945927d9afcca2b9daf021f8395e53edc5b4eef"
        assert p["license"] == "MIT" and "nn.Linear(N, K, bias=True)" in p["op"] and "5 fastest" in p["method"]
        assert s["source"] == "public: sitar-lab/NeuSight@6945927d9afc"
    assert [(s["sm_count"], s["compute_capability"]) for s in doc] == [(108, "8.0"), (132, "9.0"), (40, "7.5"),
                                                                         (80, "7.0")]
    table = bz("db", "systems", "--db", aic_db).stdout
    assert "public: ai-dynamo/aiconfigurator@095f58a51c4c" in table
    db = open_db(str(aic_db), create=False)
    try:
        (h100,) = [s for s in db.systems() if s.gpu_name == H100]
        p = h100.provenance
        assert p["license"].startswith("Apache License 2.0") and p["commit"].startswith("095f58a5")
        assert "not measured by benanza" in h100.label() and "ai-dynamo/aiconfigurator" in h100.label()
        record = json.loads(h100.info)
        # a table's system never takes a measured GPU's fingerprint (the same record without provenance),
        # and the two tables' H100s are two systems
        assert system_fingerprint({k: v for k, v in record.items() if k != "provenance"}) != h100.fingerprint
    finally:
        db.close()
    with sqlite3.connect(neu_db) as c:
        (neu_h100,) = c.execute("SELECT fingerprint FROM systems WHERE gpu_name = ?", (H100,)).fetchone()
    assert neu_h100 != h100.fingerprint


def test_importing_a_table_again_changes_nothing(neu_db, tmp_path):
    db = tmp_path / "again.db"
    shutil.copy(neu_db, db)
    before = contents(db)
    st = uc.import_(str(db), str(NEU))
    assert (st.systems_added, st.configs_added, st.jobs_added, st.measurements_written) == (0, 0, 0, 11172)
    assert [s["new"] for s in st.systems] == [False] * 4
    assert contents(db) == before


def test_a_file_of_neither_format_is_one_line_and_writes_nothing(neu_db, tmp_path):
    bad = tmp_path / "gemm.csv"
    bad.write_text("gpu,m,n,k,time_us\nH100,1,2,3,4.5\n")
    fresh = tmp_path / "fresh.db"
    p = bz("db", "import", bad, "--db", fresh)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    assert err[0].startswith(f"benanza: {bad}: not a public GEMM table")
    assert "device,dtype,m,n,k,ms,gpu (aiconfigurator)" in err[0]
    assert "op,device,B,M,N,K,ms,kernel,gpu (NeuSight)" in err[0]
    assert not fresh.exists()
    # a table whose 3rd row is wrong: refused before a row is written into an existing database
    rows = rows_of(NEU)
    half = tmp_path / "neu.csv.gz"
    with gzip.open(half, "wt", newline="") as f:
        w = csv.writer(f)
        w.writerow(pt.NEUSIGHT.columns)
        for i, r in enumerate(rows[:5]):
            w.writerow([r[c] if not (i == 2 and c == "ms") else "nan" for c in pt.NEUSIGHT.columns])
    db = tmp_path / "db.db"
    shutil.copy(neu_db, db)
    before = contents(db)
    with pytest.raises(UsageError, match=r"neu\.csv\.gz: line 4: ms is 'nan', expected a positive time"):
        uc.import_(str(db), str(half))
    assert contents(db) == before


# --------------------------------------------------------------------- analyze, compare, predict

def test_analyze_with_the_imported_gpu_gives_the_tables_time(aic_db, tmp_path):
    r = next(x for x in rows_of(AIC) if x["device"] == H100 and x["dtype"] == "bfloat16" and int(x["m"]) >= 8)
    model = linear_model(tmp_path / "linear.onnx", int(r["k"]), int(r["n"]))
    p = bz("analyze", model, "--batch", r["m"], "--dtype", "bf16", "--db", aic_db, "--system", H100, "--json")
    assert p.returncode == 0, p.stderr
    env = envelope_of(p.stdout, "analyze")
    s = scenario_of(p.stdout, "analyze")
    assert s["complete"] is True and s["lbl_ms"] == float(r["ms"])
    (layer,) = s["layers"]
    assert layer["time_ms"] == float(r["ms"]) and layer["call"] == "aiconfigurator:sglang-0.5.10 F.linear"
    assert env["system"]["gpu_name"] == H100 and env["system"]["provenance"]["source"] == "aiconfigurator"
    text = bz("analyze", model, "--batch", r["m"], "--dtype", "bf16", "--db", aic_db, "--system", H100).stdout
    assert f"system: {H100} (public table, not measured by benanza: ai-dynamo/aiconfigurator@" in text


def test_a_layer_the_table_lacks_leaves_the_lbl_incomplete(aic_db, tmp_path):
    r = next(x for x in rows_of(AIC) if x["device"] == H100 and x["dtype"] == "bfloat16" and int(x["m"]) >= 8)
    k, n, m = int(r["k"]), int(r["n"]), int(r["m"])
    model = linear_model(tmp_path / "two.onnx", k, n, more=[(n, 7)])  # n=7: no such shape in the sample
    lb = api.lower_bound(api.Scenario.of(model, batch=m, dtype="bf16", system=H100), db=str(aic_db))
    a = lb.analysis
    assert not a.complete and len(a.missing) == 1 and a.missing[0].time_ms is None
    assert a.lbl_ms == float(r["ms"]) and "INCOMPLETE" in a.lbl_text()


def test_db_compare_shows_the_configs_two_imported_gpus_share(aic_db):
    p = bz("db", "compare", H100, "NVIDIA H200", "--dtype", "bf16", "--db", aic_db, "--format", "json")
    assert p.returncode == 0, p.stderr
    recs = records_of(p.stdout, "db compare")
    rows = rows_of(AIC)
    assert len(recs) == 2000  # the sample's shapes are measured on every GPU
    r = next(x for x in rows if x["device"] == H100 and x["dtype"] == "bfloat16")
    h200 = next(x for x in rows if x["device"] == "NVIDIA H200" and x["dtype"] == "bfloat16"
                and (x["m"], x["n"], x["k"]) == (r["m"], r["n"], r["k"]))
    key = GemmConfig(m=int(r["m"]), n=int(r["n"]), k=int(r["k"])).key
    (row,) = [x for x in recs if x["layer_key"] == key]
    assert (row["a_ms"], row["b_ms"]) == (float(r["ms"]), float(h200["ms"]))


def test_fp8_takes_the_faster_of_per_tensor_and_block_scaled(aic_db, tmp_path):
    rows = rows_of(AIC)
    by = {(x["m"], x["n"], x["k"], x["dtype"]): float(x["ms"]) for x in rows if x["device"] == H100}
    m, n, k = next((m, n, k) for (m, n, k, d) in by if d == "fp8" and (m, n, k, "fp8_block") in by)
    model = linear_model(tmp_path / "fp8.onnx", int(k), int(n))
    a = api.lower_bound(api.Scenario.of(model, batch=int(m), dtype="fp8", system=H100), db=str(aic_db)).analysis
    assert a.complete and a.lbl_ms == min(by[m, n, k, "fp8"], by[m, n, k, "fp8_block"])
    assert a.layers[0].math == ("fp8" if by[m, n, k, "fp8"] <= by[m, n, k, "fp8_block"] else "fp8_block128")


def test_neusight_bmm_and_biased_linear_give_the_tables_time(neu_db, tmp_path):
    rows = [x for x in rows_of(NEU) if x["device"] == H100]
    b = next(x for x in rows if x["op"] == "bmm" and int(x["B"]) > 1)
    B, M, N, K = (int(b[c]) for c in "BMNK")
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"], name="bmm")], "bmm",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", M, N]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", N, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", M, K])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(tmp_path / "bmm.onnx"))
    a = api.lower_bound(api.Scenario.of(tmp_path / "bmm.onnx", batch=B, dtype="fp32", system=H100), db=str(neu_db)).analysis
    assert a.complete and a.lbl_ms == float(b["ms"])
    assert b["kernel"].startswith(a.layers[0].algorithm.rstrip("…"))  # the kernel (cut to the column's 96)
    # nn.Linear(N, K) on (1, M, N) as torch.onnx writes it: MatMul by W^T, then Add of the bias
    li = next(x for x in rows if x["op"] == "linear")
    M, N, K = (int(li[c]) for c in "MNK")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "wt"], ["p"], name="fc.matmul"),
                           helper.make_node("Add", ["p", "bias"], ["y"], name="fc.add")], "linear",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", M, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", M, K])],
                          [stripped("wt", (N, K)), stripped("bias", (K,))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(tmp_path / "fc.onnx"))
    a = api.lower_bound(api.Scenario.of(tmp_path / "fc.onnx", batch=1, dtype="fp32", system=H100), db=str(neu_db)).analysis
    assert a.complete and a.lbl_ms == float(li["ms"])  # the fused GEMM with its bias: the table's one call


def test_predict_starts_from_an_imported_gpu(aic_db, tmp_path):
    r = next(x for x in rows_of(AIC) if x["device"] == H100 and x["dtype"] == "bfloat16" and int(x["m"]) >= 8)
    model = linear_model(tmp_path / "p.onnx", int(r["k"]), int(r["n"]))
    res = api.predict(api.Scenario.of(model, batch=int(r["m"]), dtype="bf16", system=H100), "B200", db=str(aic_db))
    assert res.prediction.origin_lbl_ms == float(r["ms"]) and res.prediction.lbl_ms > 0


def test_the_spec_table_knows_every_gpu_of_the_tables():
    from benanza.analysis.gpus import find_gpu

    for row in (rows_of(AIC), rows_of(NEU)):
        for device, gpu in {(x["device"], x["gpu"]) for x in row}:
            assert find_gpu(device).name == gpu, device
