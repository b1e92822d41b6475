"""`db export --format gbench`: Google Benchmark's JSON, one system, names that pair across systems."""
import json
import subprocess
import sys

from conftest import REPO

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
        assert b and all(x["run_type"] == "iteration" and x["time_unit"] == "us" and x["real_time"] > 0
                         and x["iterations"] >= 1 for x in b)
        assert len({x["name"] for x in b}) == len(b)  # compare.py pairs by name
        assert all(gpu in x["label"] for x in b)
    common = {x["name"] for x in docs["H100"]["benchmarks"]} & {x["name"] for x in docs["H200"]["benchmarks"]}
    assert len(common) > 100


def test_gbench_needs_one_system_and_a_new_file(tmp_path):
    r = bz("db", "export", "--db", str(PAIR), "--format", "gbench", "-o", str(tmp_path / "x.json"))
    assert r.returncode == 2 and "--system" in r.stderr and not (tmp_path / "x.json").exists()
    f = tmp_path / "old.json"
    f.write_text("{}")
    r = bz("db", "export", "--db", str(PAIR), "--system", "H200", "--format", "gbench", "-o", str(f))
    assert r.returncode == 2 and "exists" in r.stderr and f.read_text() == "{}"
