"""Hardware counters per layer (issue 18, item 4) without a GPU: parsing Nsight Compute's CSV, the
ncu command line, storage (schema 5) and the display in analyze and roofline.

The fixture tests/data/ncu/resnet50_conv_nhwc_details.csv is written in the exact layout of
``ncu --csv --page details`` of Nsight Compute 2023-2025 as a real report shows it
(github.com/brycelelbach/nsightful, tests/copy_blocked.csv: the 20-column header with the five rule
columns, quoted cells, thousands separators, metric rows ending in one comma with their rule cells
empty, ``==PROF==`` lines before the header), with the metrics benanza asks for in the section
"Command line profiler metrics" and base units (``--print-units base``: byte, ns). Its values are
written for the test (a cuDNN NHWC fprop kernel and a layout transform), not captured on a GPU.
"""
import gzip
import json
import os
import shutil
import stat
import subprocess
import sys
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from benanza.analysis.analyzer import analyze, resolve_system
from benanza.database.counters import read_counters, summarize, write_counters
from benanza.database.store import open_db
from benanza.errors import DeviceError, UsageError
from benanza.generation.generator import plan_jobs
from benanza.processing.model import process
from benanza.runner import counters as C
from conftest import REPO, scenario_of

FIXTURE = REPO / "tests" / "data" / "ncu" / "resnet50_conv_nhwc_details.csv"
REF = REPO / "db" / "reference" / "h200.sqlite.gz"
RESNET50 = REPO / "tests" / "data" / "zoo" / "models" / "resnet50.onnx"


REAL = REPO / "tests" / "data" / "ncu"


def test_parse_real_reports_of_nsight_compute_2025_3():
    """Reports captured on an H100 by `bench --counters` (Nsight Compute 2025.3.1,
    BENANZA_NCU_REPORTS; benchmarks/gpu_counters.sh with squeezenet1_1 at batch 32 fp16, 2026-11-25;
    only the host name replaced): 15 columns, no rule columns, `==WARNING==` lines before the header.
    The NCHW fp16 convolution's best engine transforms its input and its filter to NHWC, then runs its
    implicit-GEMM kernel."""
    conv = C.parse_ncu_csv((REAL / "h100_squeezenet_conv_fp16_real.csv").read_text())
    assert [k.index for k in conv] == [0, 1, 2]
    assert "nchwToNhwcKernel" in conv[0].name and "nchwToNhwcKernel" in conv[1].name
    assert conv[2].name.startswith("sm90_xmma_fprop_implicit_gemm_f16f16") and conv[2].grid == "(15, 8, 1)"
    assert conv[0].dram_bytes > 300 * conv[1].dram_bytes  # the activations, then the small filter
    for k in conv:
        assert all(v is not None for v in (k.dram_pct, k.dram_bytes, k.sm_pct, k.occupancy_pct, k.duration_ns))
        assert 0 <= k.dram_pct <= 100 and 0 <= k.sm_pct <= 100 and 0 < k.occupancy_pct <= 100
        assert k.duration_ns > 1000 and k.block.startswith("(") and k.grid.startswith("(")
    relu, = C.parse_ncu_csv((REAL / "h100_squeezenet_relu_fp16_real.csv").read_text())
    assert "activation_kernel_k<__half, 8>" in relu.name and relu.grid == "(3025, 1, 1)"
    assert relu.dram_bytes == 12_441_856 and relu.dram_pct == 39.47 and relu.duration_ns == 9_472


def test_parse_the_details_csv():
    ks = C.parse_ncu_csv(FIXTURE.read_text())
    assert [k.index for k in ks] == [0, 1]
    a, b = ks
    assert a.name.startswith("sm90_xmma_fprop_implicit_gemm_f16f16") and a.block == "(128, 1, 1)" and a.grid == "(98, 2, 1)"
    assert (a.dram_pct, a.dram_bytes, a.sm_pct, a.occupancy_pct, a.duration_ns) == (61.17, 21894528, 78.42, 24.81, 27488)
    # a demangled name with commas inside its quotes stays whole
    assert b.name == ("void cudnn::ops::nhwcToNchwKernel<__half, __half, float, true, false, (cudnnKernelDataType_t)0>"
                      "(cudnn::ops::nhwc2nchw_params_t<float>, const T1 *, T2 *)")
    assert (b.dram_pct, b.dram_bytes, b.duration_ns) == (87.35, 51384320, 13120)


def test_units_and_missing_values():
    assert C.metric_value("1,234.5", "%") == 1234.5
    assert C.metric_value("21.89", "Mbyte") == pytest.approx(21.89e6)
    assert C.metric_value("27.49", "usecond") == pytest.approx(27490) and C.metric_value("3", "ms") == 3e6
    assert C.metric_value("n/a", "byte") is None and C.metric_value("", "%") is None
    with pytest.raises(ValueError, match="unknown ncu unit"):
        C.metric_value("1", "furlong")
    # a metric ncu leaves out is None, not 0
    text = FIXTURE.read_text().replace(",\"sm__warps_active.avg.pct_of_peak_sustained_active\",", ",\"other\",")
    assert all(k.occupancy_pct is None for k in C.parse_ncu_csv(text))


def test_no_report_says_why():
    err = ("==PROF== Connected to process 7\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to "
           "access NVIDIA GPU Performance Counters on the target device 0.\n")
    with pytest.raises(ValueError, match="ERR_NVGPUCTRPERM"):
        C.parse_ncu_csv(err)
    with pytest.raises(ValueError, match="columns"):
        C.parse_ncu_csv('"ID","Kernel Name"\n"0","k"\n')


def test_verdicts_follow_the_sol_rule():
    ks = C.parse_ncu_csv(FIXTURE.read_text())
    both = summarize([SimpleNamespace(kernel_name=k.name, **{f: getattr(k, f) for f in (
        "dram_pct", "dram_bytes", "sm_pct", "occupancy_pct", "duration_ns")}) for k in ks])
    # duration-weighted: (61.17 * 27488 + 87.35 * 13120) / 40608 = 69.6 % DRAM; SM 60.1 %
    assert both.dram_pct == pytest.approx((61.17 * 27488 + 87.35 * 13120) / 40608)
    assert both.sm_pct == pytest.approx((78.42 * 27488 + 22.06 * 13120) / 40608)
    assert both.bound == "memory" and both.dram_bytes == 21894528 + 51384320 and both.duration_ns == 40608
    row = lambda d, s, o: SimpleNamespace(kernel_name="k", dram_pct=d, dram_bytes=1.0, sm_pct=s,  # noqa: E731
                                          occupancy_pct=o, duration_ns=10.0)
    assert summarize([row(20, 85, 50)]).bound == "compute"
    lat = summarize([row(12, 30, 9)])
    assert lat.bound == "latency" and "occupancy 9 %" in lat.why and "neither unit near its peak" in lat.why


def test_ncu_command_line():
    impl = C.Implementation("job1", "cudnnBackendExecute(conv)", "eng0_k2=1", "tensor_op", "NHWC")
    argv = C.ncu_argv("/x/ncu", "/s/benanza-suite", impl, ["--device", "0", "--max-engines", "3"], "/t/log.csv")
    i = argv.index("/s/benanza-suite")
    ncu_opts, suite = argv[:i], argv[i:]
    assert ncu_opts[ncu_opts.index("--metrics") + 1].split(",") == list(C.METRICS)
    for a, b in (("--csv", None), ("--page", "details"), ("--print-units", "base"), ("--profile-from-start", "off"),
                 ("--target-processes", "all"), ("--log-file", "/t/log.csv"), ("--cache-control", "none")):
        assert a in ncu_opts and (b is None or ncu_opts[ncu_opts.index(a) + 1] == b)
    assert suite[:3] == ["/s/benanza-suite", "--job", "job1"] and "--max-engines" in suite
    for flag, v in (("--profile-call", impl.call), ("--profile-algorithm", impl.algorithm),
                    ("--profile-layout", "NHWC"), ("--profile-math", "tensor_op")):
        assert suite[suite.index(flag) + 1] == v
    assert "--profile-math" not in C.ncu_argv("ncu", "s", impl, [], "l", match_math=False)


def _db_copy(tmp_path):
    path = tmp_path / "ref.sqlite"
    with gzip.open(REF) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def test_schema_5_upgrade_and_storage_round_trip(tmp_path):
    """The kernel_counters table (schema 5) on the reference database, now shipped at the head schema
    (db/refresh_reference.py): opened without an upgrade, at the current schema version."""
    from benanza.database.store import SCHEMA_VERSION

    path = _db_copy(tmp_path)
    db = open_db(str(path))
    assert db.notices == []  # already at the head schema
    with db.engine.connect() as c:
        assert c.execute(sa.text("SELECT value FROM schema_info WHERE key = 'schema_version'")).scalar() \
            == str(SCHEMA_VERSION)
        assert "kernel_counters" in sa.inspect(c).get_table_names()
    with db.engine.connect() as c:
        lk = c.execute(sa.text("SELECT layer_key FROM measurements LIMIT 1")).scalar()
    impl = (lk, "fp16", "cudnnConvolutionForward", "IMPLICIT_PRECOMP_GEMM", "tensor_op", "NCHW")
    ks = [k.to_row() for k in C.parse_ncu_csv(FIXTURE.read_text())]
    write_counters(db, 1, impl, ks, "Version 2025.3.1.0")
    got = read_counters(open_db(str(path)), 1, [lk])[impl]
    assert [(r.kernel_index, r.kernel_name, r.dram_bytes, r.occupancy_pct, r.tool) for r in got] == \
        [(k["kernel_index"], k["kernel_name"], k["dram_bytes"], k["occupancy_pct"], "Version 2025.3.1.0") for k in ks]
    write_counters(db, 1, impl, ks[:1])  # profiled again: replaces, never duplicates
    assert len(read_counters(db, 1, [lk])[impl]) == 1
    assert read_counters(db, 2, [lk]) == {}


def _fake_ncu(tmp_path, status="ok"):
    """An `ncu` that checks its options, writes the fixture as its log and prints what the suite would."""
    script = tmp_path / "bin" / "ncu"
    script.parent.mkdir()
    script.write_text(f"""#!{sys.executable}
import json, shutil, sys
a = sys.argv[1:]
if a == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
assert a[a.index("--profile-from-start") + 1] == "off" and "--csv" in a
open({str(tmp_path / 'calls.txt')!r}, "a").write(json.dumps(a) + "\\n")
shutil.copy({str(FIXTURE)!r}, a[a.index("--log-file") + 1])
v = lambda f: a[a.index(f) + 1]
print(json.dumps({{"type": "profiled", "job": v("--job"), "call": v("--profile-call"),
                  "algorithm": v("--profile-algorithm"), "layout": v("--profile-layout"), "status": {status!r},
                  "message": "" if {status!r} == "ok" else "CUDNN_STATUS_EXECUTION_FAILED"}}))
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_profile_best_stores_and_analyze_and_roofline_show_it(tmp_path):
    path = _db_copy(tmp_path)
    db = open_db(str(path))
    system, _ = resolve_system(db, None, None)
    ml = process(RESNET50, 32)
    a = analyze(ml, db, system, "fp16")
    jobs = plan_jobs([ml], ["fp16"])
    ncu = _fake_ncu(tmp_path)
    run = C.profile_best([a], jobs, "/s/benanza-suite", db, system.id, ["--device", "0"], ncu)
    todo = C.best_implementations([a], jobs)
    assert run.profiled == len(todo) == 42 and not run.failures and run.framework == 0
    calls = [json.loads(x) for x in (tmp_path / "calls.txt").read_text().splitlines()]
    assert len(calls) == 42 and {c[c.index("--job") + 1] for c in calls} == {i.job for _, i, _ in todo}
    again = C.profile_best([a], jobs, "/s/benanza-suite", db, system.id, ["--device", "0"], ncu)
    assert again.stored == 42 and again.profiled == 0  # stored ones are not profiled again
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "benanza", "analyze", str(RESNET50), "-b", "32", "-t", "fp16",
                        "--layout", "nchw", "--db", str(path), "--no-layers"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "hardware counters of the best implementations" in r.stdout
    assert r.stdout.count("DRAM at 70 % of peak") == 42  # (61.17 x 27488 + 87.35 x 13120) / 40608 ns
    r = subprocess.run([sys.executable, "-m", "benanza", "roofline", str(RESNET50), "-b", "32", "-t", "fp16",
                        "--db", str(path), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = scenario_of(r.stdout, "roofline")["counters"]
    assert len(rows) == 42 and all(x["bound"] == "memory" and x["dram_bytes"] == 21894528 + 51384320 for x in rows)
    assert all(x["x_bound"] == pytest.approx(x["time_ms"] / x["bound_ms"]) for x in rows)
    r = subprocess.run([sys.executable, "-m", "benanza", "roofline", str(RESNET50), "-b", "32", "-t", "fp16",
                        "--db", str(path), "--kind", "time", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    layers = scenario_of(r.stdout, "roofline")["layers"]
    assert sum(x["counters"] is not None for x in layers) == 42
    assert all(x["counters"]["bound"] == "memory" and len(x["counters"]["kernels"]) == 2
               for x in layers if x["counters"])


def test_a_failed_launch_is_counted_not_stored(tmp_path):
    impl = C.Implementation("j", "cudnnConvolutionForward", "GEMM", "tensor_op", "NCHW")
    ncu = _fake_ncu(tmp_path, status="failed")
    with pytest.raises(DeviceError, match="the launch failed .CUDNN_STATUS_EXECUTION_FAILED"):
        C.profile(ncu, "/s/suite", impl, [])
    path = _db_copy(tmp_path)
    db = open_db(str(path))
    system, _ = resolve_system(db, None, None)
    ml = process(RESNET50, 32)
    run = C.profile_best([analyze(ml, db, system, "fp16")], plan_jobs([ml], ["fp16"]), "/s/suite", db, system.id, [], ncu)
    assert run.profiled == 0 and len(run.failures) == C.GIVE_UP_AFTER + 1 and "not tried" in run.failures[-1][1]
    assert f"{C.GIVE_UP_AFTER + 1} failed (first: " in run.line() and "the launch failed" in run.line()
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 1 + C.GIVE_UP_AFTER
    with db.engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM kernel_counters")).scalar() == 0


def test_counters_without_ncu_is_one_line_before_any_work(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    env = dict(os.environ, PATH=str(bin_dir))
    db = tmp_path / "perf.db"
    r = subprocess.run([sys.executable, "-m", "benanza", "bench", str(RESNET50), "--counters", "--db", str(db)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and not db.exists()
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and r.stderr.startswith("benanza: --counters needs")
    with pytest.raises(UsageError):
        old = os.environ["PATH"]
        try:
            os.environ["PATH"] = str(bin_dir)
            C.find_ncu()
        finally:
            os.environ["PATH"] = old


def test_bench_train_counters_profile_the_steps_calls_too(tmp_path):
    """--counters with --train: each measured backward call, the loss and the optimizer step of the
    training step are profiled too (their launch shapes are what a prediction of the step on another
    GPU needs), once each, named LAYER (PHASE); the forward layers stay first, as before."""
    from test_predict_train import _measured, _step

    _, ml, db, _ = _measured(tmp_path / "m")
    step = _step(ml, db)
    a = step.forward
    jobs = plan_jobs([ml], ["fp32"], train=True)
    fwd_only = C.best_implementations([a], jobs)
    todo = C.best_implementations([a], jobs, [step])
    assert todo[:len(fwd_only)] == fwd_only
    extra = todo[len(fwd_only):]
    timed = [c for c in step.calls if c.time_ms is not None] + [step.loss_call, step.optimizer_call]
    assert len(extra) == len({(c.key, c.call, c.algorithm, c.layout) for c in timed}) == 6
    names = {n for _, _, n in extra}
    assert {"conv (backward_weight)", "fc (backward_data)", "fc (backward_weight)", "relu (backward_data)"} <= names
    by = {(j.config.key, j.precision, j.layout): j.id for j in jobs}
    for key, impl, _ in extra:
        assert impl.job == by[(key[0], key[1], impl.layout)] and impl.call == key[2] == "lib"
    ncu = _fake_ncu(tmp_path)
    system = db.systems()[0]
    run = C.profile_best([a], jobs, "/s/suite", db, system.id, [], ncu, steps=[step])
    assert run.profiled == len(todo) and not run.failures
    assert C.profile_best([a], jobs, "/s/suite", db, system.id, [], ncu).stored == len(fwd_only)
