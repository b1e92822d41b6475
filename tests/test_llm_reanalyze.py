"""benchmarks/llm_reanalyze.py: a GPU run's LLM rows analysed again here with this checkout's code, from
the run's own database and export (what a change of the analysis does to checked-in rows)."""
from __future__ import annotations

import importlib.util
import json
import lzma
import tarfile

import onnx
import pytest

from benanza.analysis.analyzer import analyze
from benanza.processing.model import process
from conftest import REPO
from test_lbl_truth import _measure, _system_db

KEY = "0123456789abcdef0123456789abcdef"


def _script():
    spec = importlib.util.spec_from_file_location("llm_reanalyze", REPO / "benchmarks" / "llm_reanalyze.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run_folder(tmp_path, compile_ms, group=None):
    """A gpu_decoders.sh folder: the tiny Llama decode export with its cache bound to 16 tokens (as
    `benanza torch --kv-len` exports it), a database measuring every config at 10 us, one run of batch 2."""
    m = onnx.load(REPO / "tests" / "data" / "decoders" / "llama_decode_dynamo20.onnx", load_external_data=False)
    for vi in list(m.graph.input) + list(m.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in ("past", "past + 1"):
                d.dim_value = {"past": 16, "past + 1": 17}[d.dim_param]
    folder = tmp_path / "g0"
    folder.mkdir()
    src = tmp_path / f"{KEY}.onnx"
    onnx.save(m, src)
    with tarfile.open(folder / "exports.tgz", "w:gz") as t:
        t.add(src, arcname=f"{KEY}.onnx")
    ml = process(src, 2)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'db.sqlite'}")
    first = ml.fusions[0].config.key
    for cfg in list(ml.unique_configs().values()) + [f.config for f in ml.fusions]:
        if cfg.key == first and group == "failed":  # the run tried the group, and it failed
            from benanza.database.records import MeasurementLine
            from benanza.generation.generator import job_id

            db.upsert_configs([cfg])
            db.write_job(sid, None, job_id(cfg, "fp16", "NCHW"), cfg.key, "fp16", "failed", "refused", [MeasurementLine.from_json(
                {"type": "measurement", "call": "lib", "algorithm": "a", "math": "tensor_op", "dtype": "float16",
                 "cache": "warm", "layout": "NCHW", "status": "failed", "message": "refused"})], layout="NCHW")
        elif cfg.key != first or group is None:  # "absent": a group the run's code did not form
            _measure(db, sid, cfg, "fp16", [("lib", 0.010)])
    lbl = analyze(ml, db, db.systems()[0], "fp16", layouts=("NCHW", "NHWC")).lbl_ms
    import sqlite3

    with sqlite3.connect(tmp_path / "db.sqlite") as c, sqlite3.connect(tmp_path / "copy.sqlite") as d:
        c.backup(d)  # the database's pages, write-ahead log included
    (folder / "decoders-db.sqlite.xz").write_bytes(lzma.compress((tmp_path / "copy.sqlite").read_bytes()))
    (folder / "run-exports.json").write_text(json.dumps({"tiny-decode16-fp16": KEY}))
    cmd = "python3 -m benanza torch 'transformers:llama' --phase decode --kv-len 16 --batch 2 --dtype fp16 " \
          "--db /tmp/d0/perf.db -o /tmp/d0/llm/runs/tiny-decode16-fp16 --json --compile default"
    docs = [{"batch": 2, "label": "eager", "lbl_ms": lbl * 1.1, "gpu_kernel_ms": 10 * lbl, "bound_ms": lbl / 4,
             "complete": True},
            {"batch": 2, "label": "torch.compile(default)", "lbl_ms": lbl * 1.1, "gpu_kernel_ms": compile_ms(lbl),
             "bound_ms": lbl / 4, "complete": True}]
    (folder / "llm-results.jsonl").write_text(json.dumps(
        {"type": "llm_run", "config": "tiny", "phase": "decode", "len": 16, "dtype": "fp16", "batches": [2],
         "command": cmd, "docs": docs}) + "\n")
    return folder, lbl


@pytest.mark.parametrize("compile_ms,rc,flag", [(lambda lbl: 2 * lbl, 0, "ok"),
                                                (lambda lbl: lbl / 2, 1, "LBL>FRAMEWORK")])
def test_a_row_is_analysed_again_from_its_runs_database_and_export(tmp_path, capsys, compile_ms, rc, flag):
    folder, lbl = _run_folder(tmp_path, compile_ms)
    assert _script().main([str(folder)]) == rc
    out = capsys.readouterr().out
    (row,) = [ln for ln in out.splitlines() if ln.startswith("tiny")]
    cols = row.split()
    assert cols[:5] == ["tiny", "decode", "16", "2", "fp16"]
    assert float(cols[8]) == pytest.approx(lbl * 1.1, abs=1e-3) and float(cols[9]) == pytest.approx(lbl, abs=1e-3)
    assert cols[-1] == flag and float(cols[10].rstrip("%")) == pytest.approx(-100 / 11, abs=0.1)
    # --records: the run's record with this code's LBL, the run's kept, for truth.py --llm --merge
    records = tmp_path / "re.jsonl"
    _script().main([str(folder), "--records", str(records)])
    (rec,) = [json.loads(ln) for ln in records.read_text().splitlines()]
    assert rec["reanalyzed"] and rec["config"] == "tiny" and len(rec["docs"]) == 2
    for d in rec["docs"]:
        assert d["lbl_ms"] == pytest.approx(lbl) and d["run_lbl_ms"] == pytest.approx(lbl * 1.1)


def test_write_exports_reads_the_runs_archive(tmp_path):
    runs = tmp_path / "llm" / "runs" / "gpt2-decode128-fp16"
    runs.mkdir(parents=True)
    (runs / "gpt2.export.json").write_text(json.dumps({"key": KEY}))
    with tarfile.open(tmp_path / "llm-runs.tar.gz", "w:gz") as t:
        t.add(tmp_path / "llm", arcname="llm")
    assert _script().write_exports(tmp_path) == {"gpt2-decode128-fp16": KEY}
    assert json.loads((tmp_path / "run-exports.json").read_text()) == {"gpt2-decode128-fp16": KEY}


@pytest.mark.parametrize("group,rc,stale", [("absent", 1, True), ("failed", 0, False)])
def test_a_row_whose_database_never_planned_a_group_is_stale(tmp_path, capsys, group, rc, stale):
    """A fusion group the run's database has no row of (its code did not form it) makes the row STALE,
    not judged; a group the run tried and failed is the run's own result, judged as it is."""
    folder, _ = _run_folder(tmp_path, lambda lbl: 100 * lbl, group)
    assert _script().main([str(folder)]) == rc
    out = capsys.readouterr().out
    assert ("STALE: " in out and "fusion groups of this code are not in the run" in out) is stale
    assert ("rows stale" in out) is stale and "every row judged holds" in out
