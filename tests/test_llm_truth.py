"""The LLM truth benchmark (benchmarks/truth.py --llm, benchmarks/llm_truth.py; issue 27, item 5) without a GPU
or torch: the configurations' parameter counts from their numbers, the commands, the rows and flags on
fabricated `benanza torch --json` documents, --dry-run and --merge."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmark_modules import load

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def lt():
    return load("llm_truth")


def test_parameter_counts_from_the_configurations(lt):
    # published counts of the models whose shapes these are (their model cards / num_parameters())
    assert lt.param_count("gpt2", lt.GPT2) == 124_439_808  # GPT-2 small
    byname = {c.name: c for c in lt.CONFIGS}
    assert byname["llama-1.1b"].params == 1_100_048_384  # TinyLlama-1.1B
    assert byname["qwen2-0.5b"].params == 494_032_768  # Qwen2-0.5B (tied embeddings, q/k/v biases)
    assert byname["gpt2"].params == 124_439_808 + (8192 - 1024) * 768  # positions for a 4096-token cache
    assert len(lt.CONFIGS) >= 5 and {c.arch for c in lt.CONFIGS} == {"gpt2", "llama", "qwen2", "mistral", "phi3"}
    assert all(0.1e9 <= c.params <= 3e9 for c in lt.CONFIGS)
    with pytest.raises(ValueError, match="no parameter count"):
        lt.param_count("bert", {})


def test_commands_and_specs(lt, tmp_path):
    m = next(c for c in lt.CONFIGS if c.arch == "mistral")
    assert "sliding_window=None" in m.spec and m.spec.startswith("transformers:mistral?hidden_size=2048")
    cmd = lt.torch_command(m, "decode", 4096, [1, 8, 32], "bf16", "db.sqlite", tmp_path, 128)
    i = cmd.index("torch")
    assert cmd[i + 1:i + 6] == [m.spec, "--phase", "decode", "--kv-len", "4096"]
    assert "--compile" not in cmd and cmd[cmd.index("--batch") + 1] == "1,8,32"
    short = lt.torch_command(m, "prefill", 128, [1], "fp16", "db", tmp_path, 128, ["--no-cold"])
    assert short[short.index("--seq") + 1] == "128" and short[short.index("--compile") + 1] == "default"
    assert short[-2:] == ["--bench-args", "--no-cold"]


def _doc(batch, label, lbl, kernel, bound, complete=True):
    return {"batch": batch, "run": {"label": label}, "lbl_ms": lbl, "complete": complete, "gpu_kernel_ms": kernel,
            "llm": {"bound_ms": bound, "bound": {"limit": "memory", "ceilings": "measured"}}}


def test_rows_and_flags(lt):
    docs = [lt.slim(d) for d in (_doc(1, "eager", 2.0, 4.0, 1.0), _doc(1, "torch.compile(default)", 2.0, 1.5, 1.0),
                                 _doc(8, "eager", 3.0, 4.0, 3.5, complete=False))]
    r1 = lt.make_row("llama-1.1b", 1_100_048_384, "decode", 128, 1, "fp16", docs)
    assert r1["ratio_eager"] == 0.5 and r1["ratio_compile"] == pytest.approx(2 / 1.5)
    assert r1["flags"] == ["LBL>COMPILE"]
    r8 = lt.make_row("llama-1.1b", 1_100_048_384, "decode", 128, 8, "fp16", docs)
    assert r8["compile_ms"] is None and r8["flags"] == ["BOUND>LBL", "INCOMPLETE"]
    r32 = lt.make_row("llama-1.1b", None, "decode", 128, 32, "fp16", docs)
    assert r32["flags"] == ["NO-LBL", "NO-PYTORCH"]
    lines = lt.table_lines([r1, r8])
    assert lines[0].split()[:5] == ["config", "|", "params", "|", "phase"] and "1.10 B" in lines[2] and "3.000 partial" in lines[3]
    assert lt.summary_line([r1, r8]).startswith("2 rows: 0 hold")


def _truth(*args):
    return subprocess.run([sys.executable, str(BENCHMARKS / "truth.py"), *map(str, args)], capture_output=True,
                          text=True)


def test_dry_run_merge_and_bad_arguments(tmp_path, lt):
    r = _truth("--llm", "--out", tmp_path / "dry", "--configs", "llama,qwen2", "--phases", "decode", "--dtype",
               "bf16", "--dry-run")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in (tmp_path / "dry" / "results.jsonl").read_text().splitlines()]
    cmds = [x["command"] for x in recs if x["type"] == "dry_run"]
    assert len(cmds) == 4 and all("--phase decode" in c and "--dtype bf16" in c for c in cmds)  # 2 configs x 2 caches
    assert "1.100 B parameters" in r.stdout and "0.494 B parameters" in r.stdout
    run = tmp_path / "run"
    run.mkdir()
    rec = {"type": "llm_run", "config": "gpt2", "params": 129_944_832, "phase": "prefill", "len": 128,
           "dtype": "fp16", "batches": [1, 8], "docs": [lt.slim(_doc(1, "eager", 1.0, 2.0, 0.5)),
                                                         lt.slim(_doc(8, "eager", 5.0, 4.0, 0.5))]}
    (run / "results.jsonl").write_text(json.dumps(rec) + "\n{torn")
    r = _truth("--llm", "--out", tmp_path / "merged", "--merge", run)
    assert r.returncode == 0, r.stderr
    rows = json.loads((tmp_path / "merged" / "table.json").read_text())
    assert [x["flags"] for x in rows] == [[], ["LBL>EAGER"]] and "1 hold" in r.stdout
    for bad, msg in ((["--dtype", "fp32"], "fp16 and bf16"), (["--configs", "falcon"], "unknown LLM configuration"),
                     (["--batch", "0"], "positive"), (["--phases", "train"], "prefill, decode")):
        r = _truth("--llm", "--out", tmp_path / "bad", "--dry-run", *bad)
        assert r.returncode == 2 and r.stderr.startswith("benanza: ") and msg in r.stderr, r.stderr
    r = _truth("--llm", "--out", tmp_path / "m2", "--merge", tmp_path / "nothing")
    assert r.returncode == 2 and "no results.jsonl" in r.stderr


def test_cases_pick_the_commands_and_a_timeout_is_an_error_row(tmp_path, lt):
    """--cases runs the named (phase, length) cases in their order; a command past --timeout is an
    error record and rows flagged NO-LBL, never a row that holds."""
    a = lt.parse_args(["--llm", "--out", str(tmp_path), "--configs", "gpt2", "--cases", "decode4096,prefill128",
                       "--dtype", "fp16", "--dry-run"])
    assert a.case_list == [("decode", 4096), ("prefill", 128)]
    with pytest.raises(ValueError, match="choose among prefill128"):
        lt.parse_args(["--llm", "--out", str(tmp_path), "--cases", "decode64"])
    recs = []
    rec = lt._run_one(lambda kind, **kw: recs.append({"type": kind, **kw}) or recs[-1], lt.CONFIGS[0], "decode", 128,
                      "fp16", [1], [sys.executable, "-c", "import time; time.sleep(30)", "-o", str(tmp_path / "r")],
                      timeout=0.5)
    assert recs[0]["type"] == "error" and "timed out after 0.5 s" in recs[0]["message"]
    assert rec["docs"] == [] and lt.rows_from_records([rec])[0]["flags"] == ["NO-LBL", "NO-PYTORCH"]


def test_a_dtype_reuses_the_export_of_the_same_configuration_and_case(tmp_path, lt):
    """The bf16 command of a (configuration, case) gets the fp16 command's ONNX export copied into its
    folder (benanza torch keeps an existing export); another case or configuration gets none."""
    cfg = lt.CONFIGS[0]
    fp16 = lt.torch_command(cfg, "decode", 128, [1], "fp16", "db", tmp_path, 0)
    bf16 = lt.torch_command(cfg, "decode", 128, [1], "bf16", "db", tmp_path, 0)
    other = lt.torch_command(cfg, "decode", 4096, [1], "bf16", "db", tmp_path, 0)
    assert lt.reuse_export(fp16) is None  # nothing exported yet
    done = Path(fp16[fp16.index("-o") + 1])
    done.mkdir(parents=True)
    (done / "gpt2_decode_kv128.onnx").write_bytes(b"onnx")
    (done / "gpt2_decode_kv128.export.json").write_text('{"key": "k"}')
    got = lt.reuse_export(bf16)
    assert got == Path(bf16[bf16.index("-o") + 1]) / "gpt2_decode_kv128.onnx" and got.read_bytes() == b"onnx"
    assert got.with_suffix(".export.json").read_text() == '{"key": "k"}'  # its key comes along
    assert lt.reuse_export(bf16) is None  # it has its export now
    assert lt.reuse_export(other) is None  # decode4096: another export


def test_merged_rows_keep_a_measured_run_over_a_later_failure_and_follow_renames(lt):
    """--merge over several calls: a later timed-out rerun (no documents) does not hide the run that
    measured; a run recorded under a configuration's old name (same spec) takes its current name; the
    rows come in CONFIGS order, prefill before decode, then length, data type, batch."""
    mistral = next(c for c in lt.CONFIGS if c.arch == "mistral")
    gpt2 = next(c for c in lt.CONFIGS if c.arch == "gpt2")

    def run(cfg_name, spec, phase, length, docs):
        return {"type": "llm_run", "config": cfg_name, "spec": spec, "params": 1, "phase": phase, "len": length,
                "dtype": "fp16", "batches": [1], "docs": docs}

    good = [lt.slim(_doc(1, "eager", 1.0, 2.0, 0.5))]
    recs = [run("mistral-1.6b", mistral.spec, "decode", 128, good),
            run(gpt2.name, gpt2.spec, "decode", 4096, good),
            run(gpt2.name, gpt2.spec, "decode", 4096, []),  # the rerun that timed out
            run(gpt2.name, gpt2.spec, "prefill", 2048, good)]
    rows = lt.rows_from_records(recs)
    assert [(r["config"], r["phase"], r["len"]) for r in rows] == [
        ("gpt2", "prefill", 2048), ("gpt2", "decode", 4096), (mistral.name, "decode", 128)]
    assert all(r["flags"] == [] for r in rows)
    assert lt.rows_from_records(recs[2:3])[0]["flags"] == ["NO-LBL", "NO-PYTORCH"]  # alone it is still a row


def test_a_rerun_of_one_batch_replaces_that_batch_only(lt):
    """2026-11-27i: GPT-2 decode 128 fp16 ran at batch 1, 8 and 32, then again at batch 1 alone after a
    fix; the merged table has the rerun's batch 1 and the first run's 8 and 32."""
    gpt2 = next(c for c in lt.CONFIGS if c.arch == "gpt2")

    def run(batches, lbl):
        docs = [lt.slim(_doc(b, "eager", lbl, 2.0, 0.5)) for b in batches]
        return {"type": "llm_run", "config": gpt2.name, "spec": gpt2.spec, "params": 1, "phase": "decode",
                "len": 128, "dtype": "fp16", "batches": batches, "docs": docs}

    rows = lt.rows_from_records([run([1, 8, 32], 1.5), run([1], 1.0)])
    assert [(r["batch"], r["lbl_ms"]) for r in rows] == [(1, 1.0), (8, 1.5), (32, 1.5)]


def test_streams_share_one_gpu_lock_and_never_run_one_case_twice_at_once(lt):
    """--streams 2: every command gets the shared GPU lock in its environment; the first data type of
    each (configuration, case) goes first (the second finds the export cached), and two commands of one
    (configuration, case), whose benches would share a suite folder, never run at once."""
    import threading
    import time as _time

    cfg = lt.CONFIGS[0]
    todo = [(cfg, "prefill", 128, d, ["cmd"]) for d in ("fp16", "bf16")] + \
           [(cfg, "decode", 128, d, ["cmd"]) for d in ("fp16", "bf16")]
    order, running, overlap, envs = [], set(), [], []
    guard = threading.Lock()

    def one(c, phase, length, dtype, cmd, env=None):
        with guard:
            key = (phase, length)
            overlap.append(key in running)
            running.add(key)
            order.append((phase, dtype))
            envs.append(env["BENANZA_GPU_LOCK_SHARED"])
        _time.sleep(0.05)
        with guard:
            running.discard(key)

    lt.run_streams(todo, 2, one)
    assert sorted(order) == sorted((t[1], t[3]) for t in todo) and not any(overlap)
    assert {o[1] for o in order[:2]} == {"fp16"}  # the first dtype of both cases first
    assert len(set(envs)) == 1 and envs[0]


def test_commands_skip_the_log_runs_unless_asked(lt, tmp_path):
    """The table reads kernel times and LBLs only: its benanza torch commands run no cuDNN/cuBLASLt log
    runs (53-67 s of a 181-320 s command, 2026-11-27f) unless --logs."""
    cfg = lt.CONFIGS[0]
    assert "--no-logs" in lt.torch_command(cfg, "prefill", 128, [1], "fp16", "db", tmp_path, 128)
    assert "--no-logs" not in lt.torch_command(cfg, "prefill", 128, [1], "fp16", "db", tmp_path, 128, logs=True)
    assert lt.parse_args(["--llm", "--out", str(tmp_path), "--logs"]).logs is True


def test_each_row_names_its_gpu_and_a_merge_labels_runs_that_did_not_record_it(lt, tmp_path):
    """Rows of one merged table come from H100 and H200 calls: each row says which GPU measured it. A
    document's own GPU (``benanza torch --json``'s ``gpu``) wins; ``--merge RUN@H200`` names it for runs
    recorded before documents carried it."""
    doc = _doc(1, "eager", 1.0, 2.0, 0.5)
    doc["gpu"] = "NVIDIA H100 80GB HBM3"
    assert lt.slim(doc)["gpu"] == "NVIDIA H100 80GB HBM3" and lt.short_gpu("NVIDIA H100 80GB HBM3") == "H100"
    assert lt.short_gpu("NVIDIA H200") == "H200" and lt.short_gpu(None) is None
    gpt2 = next(c for c in lt.CONFIGS if c.arch == "gpt2")
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, length, d in ((old, 128, _doc(1, "eager", 1.0, 2.0, 0.5)), (new, 2048, doc)):
        folder.mkdir()
        rec = {"type": "llm_run", "config": gpt2.name, "spec": gpt2.spec, "params": 1, "phase": "prefill",
               "len": length, "dtype": "fp16", "batches": [1], "docs": [lt.slim(d)]}
        (folder / "results.jsonl").write_text(json.dumps(rec) + "\n")
    r = _truth("--llm", "--out", tmp_path / "merged", "--merge", f"{old}@H200", f"{new}@H200")
    assert r.returncode == 0, r.stderr
    rows = json.loads((tmp_path / "merged" / "table.json").read_text())
    assert [(x["len"], x["gpu"]) for x in rows] == [(128, "H200"), (2048, "H100")]
    head, _, *lines = (tmp_path / "merged" / "table.txt").read_text().splitlines()
    assert "| gpu " in head and " H200 " in lines[0] and " H100 " in lines[1]
    r = _truth("--llm", "--out", tmp_path / "m3", "--merge", old)  # no label: the row says it does not know
    assert r.returncode == 0 and json.loads((tmp_path / "m3" / "table.json").read_text())[0]["gpu"] is None


@pytest.mark.parametrize("shape", ["envelope", "list before schema 1"])
def test_a_command_s_torch_json_gives_its_documents(tmp_path, lt, shape):
    """`benanza torch --json` prints its documents as the `torch` envelope's scenarios
    (benanza/reports/documents.py; a bare list before schema 1): each becomes a slimmed document of the
    record and a row; a document of another command is an error record, never a row."""
    docs = [_doc(1, "eager", 1.0, 2.0, 0.5), _doc(1, "torch.compile(default)", 1.0, 1.5, 0.5)]
    printed = ({"document": "torch", "schema": 1, "system": {"gpu_name": "NVIDIA H100 80GB HBM3"}, "scenarios": docs}
               if shape == "envelope" else docs)
    recs = []

    def run_printing(doc):
        return lt._run_one(lambda kind, **kw: recs.append({"type": kind, **kw}) or recs[-1], lt.CONFIGS[0], "decode",
                           128, "fp16", [1], [sys.executable, "-c", f"print({json.dumps(json.dumps(doc))})", "-o",
                                              str(tmp_path / "r")], timeout=60)
    rec = run_printing(printed)
    assert [r["type"] for r in recs] == ["llm_run"] and "partial" not in rec
    assert [(d["batch"], d["label"], d["lbl_ms"]) for d in rec["docs"]] == [(1, "eager", 1.0),
                                                                             (1, "torch.compile(default)", 1.0)]
    assert lt.rows_from_records([rec])[0]["ratio_compile"] == pytest.approx(1 / 1.5)
    recs.clear()
    rec = run_printing({"document": "db shared", "schema": 1, "system": None, "measured": 2})
    assert recs[0]["type"] == "error" and "no scenarios" in recs[0]["message"] and rec["docs"] == []


def test_a_command_cut_while_it_writes_its_reports_keeps_those_written(tmp_path, lt):
    """2026-11-28: qwen2-0.5b prefill 2048 had written all six reports (three batches, eager and
    torch.compile) when its 500 s timeout cut it, and its rows were lost. Now the reports the command
    wrote (and only those: not an older run's, not a half-written file, not another data type's) make
    its rows, the record says it is partial, and a batch it asked for without a report stays a NO-LBL row."""
    out = tmp_path / "r"
    out.mkdir()
    old = _doc(8, "eager", 9.0, 10.0, 1.0)
    (out / "report-b8-bf16.json").write_text(json.dumps(old))  # an earlier run's report
    os.utime(out / "report-b8-bf16.json", (1.0, 1.0))
    docs = [_doc(1, "eager", 1.0, 2.0, 0.5), _doc(1, "torch.compile(default)", 1.0, 1.5, 0.5),
            _doc(32, "eager", 4.0, 5.0, 1.0)]
    write_them = ("import json, sys, time; d = sys.argv[1]\n"
                  f"docs = json.loads({json.dumps(json.dumps(docs))})\n"
                  "names = ['report-b1-bf16.json', 'report-b1-bf16-compile-default.json', 'report-b32-bf16.json']\n"
                  "for n, x in zip(names, docs): open(d + '/' + n, 'w').write(json.dumps(x))\n"
                  "open(d + '/report-b32-bf16-compile-default.json', 'w').write('{\"batch\": 32, \"lb')\n"
                  "open(d + '/report-b1-fp16.json', 'w').write(json.dumps(docs[0]))\n"
                  "time.sleep(30)\n")
    recs = []
    rec = lt._run_one(lambda kind, **kw: recs.append({"type": kind, **kw}) or recs[-1], lt.CONFIGS[0], "prefill", 2048,
                      "bf16", [1, 8, 32], [sys.executable, "-c", write_them, str(out), "-o", str(out)], timeout=3)
    assert recs[0]["type"] == "error" and "timed out" in recs[0]["message"]
    assert rec["partial"] is True
    assert [(d["batch"], d["label"]) for d in rec["docs"]] == [(1, "eager"), (1, "torch.compile(default)"), (32, "eager")]
    rows = {r["batch"]: r for r in lt.rows_from_records([rec])}
    assert rows[1]["flags"] == [] and rows[1]["ratio_compile"] == pytest.approx(1 / 1.5)
    assert rows[32]["flags"] == [] and rows[32]["compile_ms"] is None  # its compile report was cut mid-file
    assert rows[8]["flags"] == ["NO-LBL", "NO-PYTORCH"]  # its report is the earlier run's: the row is missing


def test_only_runs_the_named_cells_in_their_order(tmp_path, lt):
    """--only CONFIG:CASE:DTYPE,... runs exactly those (configuration, case, dtype) cells, in order (a table's
    missing cells), instead of the cross product; a malformed cell is a one-line error."""
    a = lt.parse_args(["--llm", "--out", str(tmp_path), "--only", "phi3:decode128:fp16,gpt2:prefill2048:bf16",
                       "--compile-max-len", "4096", "--dry-run"])
    lt.run(a)
    recs = [json.loads(ln) for ln in (tmp_path / "results.jsonl").read_text().splitlines()]
    cmds = [r["command"] for r in recs if r["type"] == "dry_run"]
    assert [r["config"] for r in recs] == ["phi3-2b", "gpt2"] and len(cmds) == 2
    assert "--kv-len 128" in cmds[0] and "--dtype fp16" in cmds[0] and "--compile default" in cmds[0]
    assert "--seq 2048" in cmds[1] and "--dtype bf16" in cmds[1] and "--compile default" in cmds[1]
    for bad in ("gpt2:prefill12:bf16", "gpt2:prefill128", "gpt2:prefill128:fp32", "falcon:prefill128:fp16", ","):
        with pytest.raises(ValueError):
            lt.parse_args(["--llm", "--out", str(tmp_path), "--only", bad])


def test_end_limits_every_command_to_the_time_left(tmp_path, lt, monkeypatch):
    """--end S: a command runs at most until S seconds after the start (its process group killed, an error
    record and NO-LBL rows); a command with under 30 s left is skipped, never started."""
    monkeypatch.setattr(lt, "torch_command", lambda cfg, phase, length, batches, dtype, db, out, *rest: [
        sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); time.sleep(60)", "-o", str(out / "runs" / f"{cfg.name}-{phase}{length}-{dtype}")])
    a = lt.parse_args(["--llm", "--out", str(tmp_path), "--only", "gpt2:decode128:fp16,gpt2:decode4096:fp16",
                       "--batch", "1", "--end", "31"])
    t = time.monotonic()
    rows = lt.run(a)
    assert time.monotonic() - t < 45  # the first command cut at about 31 s, its sleeping child with it
    recs = [json.loads(ln) for ln in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["type"] for r in recs] == ["error", "llm_run", "skipped"]
    assert "timed out after" in recs[0]["message"] and "--end 31 s" in recs[2]["reason"]
    assert [r["flags"] for r in rows] == [["NO-LBL", "NO-PYTORCH"]]


def test_the_mixture_of_experts_configurations_are_the_released_widths(lt):
    """Qwen3-30B-A3B and Mixtral-8x7B at their config.json numbers (published totals: 30,532,122,624 and
    46,702,792,704 parameters), run with fewer layers and only when named."""
    assert lt.param_count("qwen3_moe", lt.QWEN3_MOE) == 30_532_122_624
    assert lt.param_count("mixtral", lt.MIXTRAL) == 46_702_792_704
    q, m = lt.select("qwen3-30b-a3b-4l,mixtral-8x7b-2l")
    assert "num_experts=128" in q.spec and "head_dim=128" in q.spec and "num_hidden_layers=4" in q.spec
    assert "num_local_experts=8" in m.spec and "num_hidden_layers=2" in m.spec
    assert q not in lt.select(None) and m not in lt.select(None)  # the default run is the dense five


def test_the_deployment_configurations_are_the_released_models(lt):
    """DEPLOY_CONFIGS at their config.json numbers: param_count equals the model transformers 5.17 builds
    (counted on the meta device) and the published totals (8.03 B, 8.19 B, 46.7 B, 30.5 B, 20.9 B, 15.7 B)."""
    want = {"llama3.1-8b": 8_030_261_248, "qwen3-8b": 8_190_735_360, "mixtral-8x7b": 46_702_792_704,
            "qwen3-30b-a3b": 30_532_122_624, "gpt-oss-20b": 20_914_757_184, "deepseek-v2-lite": 15_706_484_224}
    published = {"llama3.1-8b": 8.03, "qwen3-8b": 8.19, "mixtral-8x7b": 46.7, "qwen3-30b-a3b": 30.5,
                 "gpt-oss-20b": 20.9, "deepseek-v2-lite": 15.7}
    got = {c.name: c.params for c in lt.DEPLOY_CONFIGS}
    assert got == want
    assert all(round(got[k] / 1e9, 1 if published[k] >= 10 else 2) == published[k] for k in want)
    # DeepSeek-V2-Lite runs in its own type (its complex rotary in real numbers during the export); V3's counts the same
    assert lt.param_count("deepseek_v2", lt.DEEPSEEK_V2_LITE) == want["deepseek-v2-lite"]
    ds = lt.select("deepseek-v2-lite")[0]
    assert ds.arch == "deepseek_v2" and "q_lora_rank=None" in ds.spec and ds.decode_args == ("--mla", "absorbed")
    assert all(c not in lt.select(None) for c in lt.DEPLOY_CONFIGS)  # run when named or with --deploy
    cut = lt._with_layers(lt.select("gpt-oss-20b")[0], 10)
    assert cut.name == "gpt-oss-20b-10l" and "num_hidden_layers=10&" in cut.spec + "&"
    assert cut.params == lt.param_count("gpt_oss", {**lt.GPT_OSS_20B, "num_hidden_layers": 10})


def test_the_memory_plan_on_two_rows_computed_by_hand(lt):
    """Llama-3.1-8B, decode against a 32k cache at batch 64, and prefill of 8192 tokens at batch 64: the
    bytes of memory_plan's formula written out, and the layer count each row gets (the most that fit)."""
    llama = lt.select("llama3.1-8b")[0]
    emb_head, layer = 2 * 128256 * 4096 + 4096, 218_112_000  # embedding + LM head + final norm; one layer
    # decode, 1 layer: W = 1,268,789,248; one layer's cache 2 B x 64 x 32768 x (2 x 8 x 128) = 8 GiB
    w = emb_head + layer
    kv1 = 2 * 64 * 32768 * 2048
    assert kv1 == 8 * 2 ** 30
    m = lt.memory_plan(llama, "decode", 32768, 64, 1)
    assert m["build"] == 4 * w and m["inputs"] == 2 * w + 3 * kv1
    assert m["run"] == 2 * w + 2 * kv1 + kv1 + 4 * kv1 + 4 * 64 * 128256 == 62_699_954_176  # repeat_kv: 32/8 heads
    assert m["peak"] == m["run"] and m["fits"]
    two = lt.memory_plan(llama, "decode", 32768, 64, 2)
    assert two["peak"] == 2 * (w + layer) + 2 * 2 * kv1 + kv1 + 4 * kv1 + 4 * 64 * 128256
    assert two["peak"] + 6 * 2 ** 30 > 81559 * 2 ** 20 and not two["fits"]
    n, why = lt.deploy_layers(llama, "decode", 32768, 64)
    assert n == 1 and why.startswith("GPU memory: 2 layers need")
    # prefill 8192 x 64 = 524,288 tokens, 3 layers: the cache, one layer's activations, the causal mask
    t = 64 * 8192
    w3 = emb_head + 3 * layer
    act = 2 * t * (3 * 4096 + 32 * 128 + 2 * 8 * 128 + 3 * 14336)
    m = lt.memory_plan(llama, "prefill", 8192, 64, 3)
    assert m["run"] == 2 * w3 + 2 * t * 3 * 2048 + act + 64 * 8192 ** 2 + 4 * 64 * 128256 == 78_604_787_712
    assert m["fits"] and not lt.memory_plan(llama, "prefill", 8192, 64, 4)["fits"]
    assert lt.deploy_layers(llama, "prefill", 8192, 64)[0] == 3
    # MLA decode keeps the absorbed latent (512 + 64 per token and layer), not per-head keys and values
    ds = lt.select("deepseek-v2-lite")[0]
    assert lt.memory_plan(ds, "decode", 1024, 1, 1)["kv"] == 2 * 1024 * 576
    assert lt.memory_plan(ds, "prefill", 512, 1, 1)["kv"] == 2 * 512 * 16 * (192 + 128)
    # GPT-OSS's eager attention (sinks: no SDPA path) holds B x heads x S^2 scores: 8192 tokens at batch 8 never fit
    oss = lt.select("gpt-oss-20b")[0]
    n, why = lt.deploy_layers(oss, "prefill", 8192, 8)
    assert n == 0 and why.startswith("skipped: not even one layer fits (GPU memory")


def test_the_time_estimate_follows_the_recorded_commands(lt):
    """command_seconds against the recorded wall time of every command of the 120-row table's last runs
    (2026-11-28d, exports cached): within 0.6-1.6 x each, median within 15 %."""
    import statistics

    by = {c.name: c for c in lt.CONFIGS}
    ratios = []
    for f in sorted((BENCHMARKS / "results" / "2026-11-28d").glob("call*/g*/llm-results.jsonl")):
        for r in lt.read_records(f):
            if r.get("type") == "llm_run" and r["docs"]:
                comp = any(d["label"].startswith("torch.compile") for d in r["docs"])
                est = lt.command_seconds(by[r["config"]], r["phase"], r["len"], r["batches"], export=False,
                                         compile_=comp)
                ratios.append(est / r["seconds"])
    assert len(ratios) >= 20
    assert all(0.6 <= x <= 1.6 for x in ratios) and abs(statistics.median(ratios) - 1) <= 0.15


def test_the_deploy_dry_run_lists_every_row_with_its_layers_and_groups_within_a_call(tmp_path, lt):
    r = _truth("--llm", "--deploy", "--dry-run", "--out", tmp_path / "dep")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in (tmp_path / "dep" / "results.jsonl").read_text().splitlines()]
    rows = [x for x in recs if x["type"] == "deploy_row"]
    assert len(rows) == 6 * 4 * 3 and {x["dtype"] for x in rows} == {"bf16"}  # configs x cases x batches 1, 8, 64
    ran = [x for x in rows if x["layers"]]
    skipped = [x for x in rows if not x["layers"]]
    assert len(ran) >= 60 and all(x["why"].startswith("skipped: not even one layer fits") for x in skipped)
    assert all(0 < x["layers"] <= x["full_layers"] and x["why"] and x["group"] for x in ran)
    assert all(x["peak_bytes"] + 6 * 2 ** 30 <= 81559 * 2 ** 20 for x in ran)
    for x in rows:  # each row's line states its layers out of the model's and why
        assert f"{x['config']} {x['phase']}{x['len']} b{x['batch']} bf16: {x['layers']}/{x['full_layers']} layers" in r.stdout
    assert f"{len(ran)} rows run ({len(skipped)} skipped)" in r.stdout and f"of CONFIGS: {len(ran) + 120}" in r.stdout
    groups = [x for x in recs if x["type"] == "deploy_group"]
    assert all(g["seconds"] <= 480 for g in groups)
    planned = sorted((c["config"].rsplit("-", 1)[0] if c["config"][-1] == "l" and c["config"][-2].isdigit() else
                      c["config"], c["phase"], c["len"], b) for g in groups for c in g["commands"] for b in c["batches"])
    assert planned == sorted((x["config"], x["phase"], x["len"], x["batch"]) for x in ran)  # each row in one group
    assert "bash benchmarks/gpu_deploy.sh $OUT 1" in r.stdout
    cmds = [x["command"] for x in recs if x["type"] == "dry_run"]
    assert all("--compile default" in c for c in cmds)  # torch.compile at every deployment length
    assert all(("--mla absorbed" in c) == ("deepseek_v2" in c and "--phase decode" in c) for c in cmds)
    a = lt.parse_args(["--llm", "--deploy", "--group", "2", "--out", str(tmp_path / "g")])
    runs = lt.deploy_plan(a, lambda kind, **kw: None)
    assert runs == [(c, case, d, b) for c, case, d, b in runs] and 1 <= len(runs) <= 3
    with pytest.raises(ValueError, match="the plan has groups 1 to"):
        lt.deploy_plan(lt.parse_args(["--llm", "--deploy", "--group", "999", "--out", str(tmp_path)]),
                       lambda kind, **kw: None)
    r = _truth("--llm", "--group", "1", "--dry-run", "--out", tmp_path / "bad")
    assert r.returncode == 2 and "--group needs --deploy" in r.stderr


def test_with_exports_carried_each_export_is_made_once_before_the_groups_that_reuse_it(lt, tmp_path):
    """--carried-exports: a case's batches beyond its first call run without the export, in groups after
    every group that makes one; each export is made by exactly one command; every group within the call;
    the GPU call passes the plan's options on (PLAN_ARGS), so its group numbers are the dry run's."""
    a = lt.parse_args(["--llm", "--deploy", "--carried-exports", "--batch", "1,2,4,8,16,32,48,64", "--out",
                       str(tmp_path)])
    rows = lt.deploy_rows(a.configs, a.case_list, a.batches, a.dtypes)
    cmds = lt.deploy_commands(rows, carried=True)
    groups = lt.deploy_groups(cmds)
    key = lambda c: (c["cfg"].spec, c["phase"], c["len"])  # noqa: E731
    makers = [key(c) for c in cmds if c["makes"]]
    assert len(makers) == len(set(makers)) and {key(c) for c in cmds} == set(makers)
    waves = [all(c["makes"] for c in g) for g in groups]
    assert any(not w for w in waves) and waves == sorted(waves, reverse=True)  # makers first, then reusers
    assert all(c["seconds"] <= lt.CALL_SECONDS for c in cmds)
    assert sum(len(c["batches"]) for c in cmds) == sum(1 for r in rows if r["layers"]) >= 180  # 300 with the 120
    assert lt.plan_args(a) == "--batch 1,2,4,8,16,32,48,64 --carried-exports"
    assert lt.plan_args(lt.parse_args(["--llm", "--deploy", "--out", str(tmp_path)])) == ""
    sh = (BENCHMARKS / "gpu_deploy.sh").read_text()
    assert "--deploy --group $g --end ${END:-480} ${PLAN_ARGS:-}" in sh
