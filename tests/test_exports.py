"""`db export --format gbench|nvbench`: Google Benchmark's and NVBench's JSON, one system, names that pair
across systems."""
import json
import subprocess
import sys

import pytest

from conftest import REPO, records_of

PAIR = REPO / "db" / "reference" / "h100_h200_fp16.sqlite.gz"


def bz(*a):
    return subprocess.run([sys.executable, "-m", "benanza", *a], capture_output=True, text=True)


def test_gbench_files_of_two_gpus_pair_up(tmp_path):
    docs = {}
    for gpu in ("H100", "H200"):
        out = tmp_path / f"{gpu}.json"
        r = bz("db", "export", "--db", str(PAIR), "--system", gpu, "--format", "gbench", "-o", str(out))
        assert r.returncode == 0, r.stderr
        docs[gpu] = json.loads(out.read_text())
    for gpu, d in docs.items():
        assert gpu in d["context"]["host_name"]
        b = d["benchmarks"]
        # ns, Google Benchmark's default unit: compare.py prints whole numbers of the time unit
        assert b and all(x["run_type"] == "iteration" and x["time_unit"] == "ns" and x["real_time"] > 100
                         and x["cpu_time"] >= 0 and x["iterations"] >= 1 for x in b)
        assert len({x["name"] for x in b}) == len(b)  # compare.py pairs by name
        assert all(gpu in x["label"] for x in b)
    common = {x["name"] for x in docs["H100"]["benchmarks"]} & {x["name"] for x in docs["H200"]["benchmarks"]}
    assert len(common) > 100


def test_gbench_real_time_is_the_gpu_time_and_cpu_time_the_host_time(tmp_path):
    """real_time: the median GPU time (ns) of the database row; cpu_time: its host API time per call
    (host_us, in ns), not the GPU time again."""
    from benanza.database import query
    from benanza.database.store import open_db

    out = tmp_path / "h200.json"
    assert bz("db", "export", "--db", str(PAIR), "--system", "H200", "--format", "gbench", "-o", str(out)).returncode == 0
    by_name = {x["name"]: x for x in json.loads(out.read_text())["benchmarks"]}
    db = open_db(str(PAIR), create=False)
    rows = [r for r in query.measurements(db, query.Filters(system="H200", status="ok")) if r.median_ms]
    checked = 0
    for r in rows:
        name = "/".join(x.replace("/", "_") for x in (r.kind, r.description, r.layer_key, r.precision, r.layout,
                                                      r.cache, r.call, r.algorithm or "-"))
        x = by_name[name]
        assert x["real_time"] == pytest.approx(r.median_ms * 1e6, rel=1e-12)
        assert x["cpu_time"] == pytest.approx((r.host_us or 0.0) * 1e3, rel=1e-12)
        checked += r.host_us is not None and r.host_us * 1e3 != pytest.approx(r.median_ms * 1e6)
    assert checked > 100  # rows with a host time: the two times differ


def test_gbench_needs_one_system_and_a_new_file(tmp_path):
    r = bz("db", "export", "--db", str(PAIR), "--format", "gbench", "-o", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "--system" in r.stderr and not (tmp_path / "x.json").exists()
    f = tmp_path / "old.json"
    f.write_text("{}")
    r = bz("db", "export", "--db", str(PAIR), "--system", "H200", "--format", "gbench", "-o", str(f))
    assert r.returncode == 2 and "exists" in r.stderr and f.read_text() == "{}"


# ------------------------------------------------------------------------------------------ NVBench

REF = REPO / "db" / "reference" / "h200.sqlite.gz"


@pytest.fixture(scope="module")
def nvbench_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("nvbench") / "h200.json"
    r = bz("db", "export", "--db", str(REF), "--format", "nvbench", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "as NVBench JSON" in r.stdout
    return json.loads(out.read_text())


def _value(summary):
    """A summary's value as NVBench's reader takes it (python/cuda/bench/results/_benchmark_result.py
    ``parse_summary_value``: int64 and float64 are written as strings)."""
    (d,) = [x for x in summary["data"] if x["name"] == "value"]
    assert d["type"] in ("int64", "float64") and isinstance(d["value"], str)
    return int(d["value"]) if d["type"] == "int64" else float(d["value"])


def test_nvbench_file_has_nvbenchs_structure(nvbench_file):
    """The layout nvbench/json_printer.cu (``do_print_benchmark_results``, ``add_devices_section``,
    ``write_named_values``) writes and NVBench's readers walk (python/scripts/nvbench_json/version.py
    ``check_file_version``: meta.version.json.string; python/cuda/bench/results/_benchmark_result.py:
    devices by id, benchmarks by name with axes and states, a state's axis values looked up in its
    benchmark's axes, summaries by tag with typed ``data``; python/scripts/nvbench_compare.py: states
    paired by name, ``nv/cold/time/gpu/mean`` and ``nv/cold/time/gpu/stdev/relative`` as float64)."""
    d = nvbench_file
    assert list(d) == ["meta", "devices", "benchmarks"]
    assert d["meta"]["version"]["json"]["string"] == "1.0.0" and isinstance(d["meta"]["argv"], list)
    (dev,) = d["devices"]
    assert dev["id"] == 0 and dev["name"] == "NVIDIA H200" and dev["sm_version"] == 900
    assert dev["number_of_sms"] == 132 and dev["l2_cache_size"] > 0 and dev["global_memory_size"] > 100 << 30
    # 2 x 3201 MHz x 6016 bits / 8: H200's ~4.8 TB/s, NVBench's DDR formula
    assert dev["global_memory_bus_bandwidth"] == 2 * 3201_000_000 * 6016 // 8
    names = [b["name"] for b in d["benchmarks"]]
    assert len(names) == len(set(names)) > 1000 and [b["index"] for b in d["benchmarks"]] == list(range(len(names)))
    tags_seen, skipped = set(), 0
    for b in d["benchmarks"]:
        assert b["devices"] == [0]
        axes = {a["name"]: {v["input_string"] for v in a["values"]} for a in b["axes"]}
        assert all(a["type"] == "string" and a["flags"] == "" for a in b["axes"])
        assert len({s["name"] for s in b["states"]}) == len(b["states"])
        for s in b["states"]:
            assert s["device"] == 0 and s["name"].startswith("Device=0 ")
            assert all(v["value"] in axes[v["name"]] and v["type"] == "string" for v in s["axis_values"])
            summ = {x["tag"]: x for x in s["summaries"]}
            tags_seen |= set(summ)
            for x in s["summaries"]:
                assert {"tag", "name", "hint", "description", "data"} <= set(x) and _value(x) >= 0
            if s["is_skipped"]:
                skipped += 1
                assert s["skip_reason"] and "nv/batch/time/gpu/mean" not in summ
                continue
            assert _value(summ["nv/batch/time/gpu/mean"]) > 0 and _value(summ["nv/batch/sample_size"]) >= 1
            if "nv/cold/time/gpu/mean" in summ:  # what nvbench_compare.py reads
                assert summ["nv/cold/time/gpu/stdev/relative"]["data"][0]["type"] == "float64"
                assert _value(summ["nv/cold/sample_size"]) >= 1
                t = [_value(summ[f"nv/cold/time/gpu/{k}"]) for k in ("min", "q1", "median", "q3", "max")]
                assert t == sorted(t) and 1e-7 < t[2] < 1.0  # seconds
    assert {"nv/cold/time/gpu/mean", "nv/cold/time/gpu/median", "nv/cold/time/gpu/stdev/relative",
            "nv/cold/time/gpu/iqr/relative", "nv/batch/time/gpu/mean", "benanza/batch/time/gpu/median"} <= tags_seen
    assert skipped > 100  # the reference database's not-supported algorithms


def test_every_cold_state_has_what_nvbench_compare_reads(nvbench_file):
    """NVBench's python/scripts/nvbench_compare.py (2026-08) pairs states by name and skips a state
    unless both files have ``nv/cold/time/gpu/median`` and ``nv/cold/time/gpu/ir/relative`` (the
    name NVBench's printer used before ``iqr``): benanza wrote only ``iqr``, so the comparison of two
    GPUs' files matched nothing. Every state with a cold measurement now carries both."""
    cold = 0
    for b in nvbench_file["benchmarks"]:
        for s in b["states"]:
            tags = {x["tag"]: x for x in s["summaries"]}
            if "nv/cold/time/gpu/median" not in tags:
                continue
            cold += 1
            ir = tags["nv/cold/time/gpu/ir/relative"]
            assert ir["data"][0]["type"] == "float64" and float(ir["data"][0]["value"]) >= 0
            assert tags["nv/cold/time/gpu/iqr/relative"]["data"] == ir["data"]
    assert cold > 1000


def test_nvbench_times_are_the_databases(nvbench_file):
    """Each valid measurement of the system is in the file, in seconds, under its benchmark and state."""
    from benanza.database.store import Measurement, open_db

    db = open_db(str(REF), create=False)
    with db.session() as s:
        rows = s.query(Measurement).filter(Measurement.status == "ok").all()
    states = {}
    for b in nvbench_file["benchmarks"]:
        for s in b["states"]:
            states[(b["name"].split("/")[2], *b["name"].split("/")[3:], s["name"])] = \
                {x["tag"]: _value(x) for x in s["summaries"]}
    assert len(rows) > 10000
    for m in rows[::97]:
        state = f"Device=0 precision={m.precision} layout={m.layout} math={m.math} dtype={m.dtype}"
        summ = states[(m.layer_key, m.call.replace("/", "_"), m.algorithm.replace("/", "_") or "-", state)]
        if m.cache == "warm":
            assert summ["benanza/batch/time/gpu/median"] == pytest.approx(m.median_ms / 1e3, rel=1e-12)
            assert summ["nv/batch/sample_size"] == m.samples * m.reps
        else:
            assert summ["nv/cold/time/gpu/mean"] == pytest.approx(m.mean_ms / 1e3, rel=1e-12)
            assert summ["nv/cold/sample_size"] == m.samples


def test_nvbench_of_one_model_and_one_system(tmp_path):
    out = tmp_path / "r50.json"
    r = bz("db", "export", "--db", str(REF), "--format", "nvbench", "--model", "resnet50", "--batch", "32",
           "-o", str(out))
    assert r.returncode == 0, r.stderr
    keys = {b["name"].split("/")[2] for b in json.loads(out.read_text())["benchmarks"]}
    # 42 layer configs and the 16 fused ones traced to the record (schema 6's migration)
    assert len(keys) == 58 and all(k.split("-")[0] in ("conv", "gemm", "pooling", "elementwise", "activation",
                                                       "batchnorm", "convbiasact", "softmax") for k in keys)
    r = bz("db", "export", "--db", str(PAIR), "--format", "nvbench", "-o", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "--system" in r.stderr and not (tmp_path / "x.json").exists()


def test_db_query_csv_writes_json_in_its_json_columns():
    """`db query --format csv`: ``details`` (a dict) is JSON text, as in the JSON output, never a
    Python repr (single quotes, True/None) that no CSV consumer can parse."""
    import csv
    import io

    truth = REPO / "db" / "reference" / "h200_truth.sqlite.gz"
    args = ("db", "query", "--db", str(truth), "--kind", "Conv", "--limit", "200", "--sort", "median_ms")
    c = bz(*args, "--format", "csv")
    j = bz(*args, "--format", "json")
    assert c.returncode == 0 and j.returncode == 0, c.stderr + j.stderr
    rows = list(csv.DictReader(io.StringIO(c.stdout)))
    docs = records_of(j.stdout, "db query")
    assert len(rows) == len(docs) == 200
    assert [json.loads(r["details"]) for r in rows] == [d["details"] for d in docs]
    assert any(d["details"] for d in docs)  # some rows carry details (engine knobs, cuBLASLt algos)
