"""Runner: incremental runs, and a worker that crashes, hangs or loses the device (fake suite)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benanza.database.store import JobRow, Measurement, open_db
from benanza.errors import DeviceError
from benanza.generation.generator import load_suite
from benanza.runner.run import RunOptions, run_suite
from benanza.spec import Timing
from benanza.usecases import bench as bench_case
from benanza.usecases.progress import SILENT


def _run(folder, db_url, **kw):
    return run_suite(load_suite(folder), open_db(db_url), RunOptions(**kw))


def test_full_run_then_nothing_to_do(fake_suite, db_url):
    suite = load_suite(fake_suite)
    s = _run(fake_suite, db_url)
    assert (s.ok, s.failed, s.skipped) == (len(suite.jobs), 0, 0)
    again = _run(fake_suite, db_url)
    assert (again.ok, again.failed, again.skipped, again.run_id) == (0, 0, len(suite.jobs), None)
    forced = _run(fake_suite, db_url, force=True)
    assert forced.ok == len(suite.jobs)
    db = open_db(db_url)
    with db.session() as ses:
        n_jobs = ses.query(JobRow).count()
    assert n_jobs == len(suite.jobs)  # --force replaced, did not duplicate


def test_crashing_worker_marks_that_job_failed_and_goes_on(fake_suite, db_url, monkeypatch):
    suite = load_suite(fake_suite)
    victim = next(j.id for j in suite.jobs if j.kind == "Conv")
    monkeypatch.setenv("FAKE_SUITE_CRASH", victim)
    s = _run(fake_suite, db_url)
    assert s.failed == 1 and s.ok == len(suite.jobs) - 1 and s.restarts == 1
    assert s.failures[0][0] == victim and "SIGSEGV" in s.failures[0][1]
    db = open_db(db_url)
    with db.session() as ses:
        row = ses.query(JobRow).filter_by(job=victim).one()
        assert row.status == "failed" and "SIGSEGV" in row.message
        # what the job measured before the crash is kept
        kept = ses.query(Measurement).filter_by(layer_key=row.layer_key, precision=row.precision).count()
        assert kept >= 1
    # failed jobs are not retried by default, but are with --retry-failed
    monkeypatch.delenv("FAKE_SUITE_CRASH")
    assert _run(fake_suite, db_url).ok == 0
    assert _run(fake_suite, db_url, retry_failed=True).ok == 1


def test_hanging_job_times_out(fake_suite, db_url, monkeypatch):
    suite = load_suite(fake_suite)
    victim = next(j.id for j in suite.jobs if j.kind == "Conv")
    monkeypatch.setenv("FAKE_SUITE_HANG", victim)
    t = time.perf_counter()
    s = _run(fake_suite, db_url, job_timeout_s=2)
    assert time.perf_counter() - t < 30
    assert s.failed == 1 and "timed out" in s.failures[0][1]
    assert s.ok == len(suite.jobs) - 1


def test_sticky_error_restarts_the_worker(fake_suite, db_url, monkeypatch):
    suite = load_suite(fake_suite)
    victim = [j.id for j in suite.jobs if j.kind == "Conv"][-1]
    monkeypatch.setenv("FAKE_SUITE_FATAL", victim)
    s = _run(fake_suite, db_url)
    assert s.failed == 1 and "cudaErrorIllegalAddress" in s.failures[0][1]


def test_no_device_is_a_device_error_and_writes_nothing(fake_suite, db_url, monkeypatch):
    monkeypatch.setenv("FAKE_SUITE_NODEVICE", "1")
    with pytest.raises(DeviceError, match="no CUDA device"):
        _run(fake_suite, db_url)
    db = open_db(db_url)
    assert db.counts()["measurements"] == 0 and db.counts()["systems"] == 0


def test_killed_run_resumes_without_losing_or_repeating_jobs(fake_suite, db_url, tmp_path):
    """SIGKILL the whole `benanza run` mid-way; the next run does exactly the jobs not finished."""
    log = tmp_path / "started.log"
    env = dict(os.environ, FAKE_SUITE_SLOW="0.05", FAKE_SUITE_LOG=str(log))
    proc = subprocess.Popen([sys.executable, "-c", "from benanza.cli import main; main()", "run", str(fake_suite),
                             "--db", db_url, "--quiet"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= 15:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    db = open_db(db_url)
    done_first = db.jobs_done(db.systems()[0].id)
    assert 5 <= len(done_first) < len(load_suite(fake_suite).jobs)
    log.write_text("")
    env.pop("FAKE_SUITE_SLOW")
    subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", "run", str(fake_suite), "--db",
                    db_url, "--quiet"], env=env, check=True, stdout=subprocess.DEVNULL)
    second = {line.split()[0] for line in log.read_text().splitlines()}
    all_jobs = {j.id for j in load_suite(fake_suite).jobs}
    assert second.isdisjoint(done_first)  # nothing measured twice
    assert second | done_first == all_jobs  # nothing lost
    with db.session() as ses:
        assert ses.query(JobRow).count() == len(all_jobs)


def test_jobs_are_shared_by_identical_gpus_with_work_stealing(fake_suite, db_url, tmp_path, monkeypatch):
    """One queue for both GPUs: each job runs once, and a GPU that is slower takes fewer jobs (a
    worker takes the next job when it finishes one) instead of holding up the run with a fixed half."""
    log = tmp_path / "started.log"
    monkeypatch.setenv("FAKE_SUITE_LOG", str(log))
    monkeypatch.setenv("FAKE_SUITE_SLOW", "0.05")
    monkeypatch.setenv("FAKE_SUITE_SLOW_DEVICE", "1")
    suite = load_suite(fake_suite)
    s = _run(fake_suite, db_url, devices=(0, 1), workers_per_gpu=1)
    assert s.ok == len(suite.jobs) and s.failed == 0
    started = [line.split() for line in log.read_text().splitlines()]
    assert sorted(j for j, _ in started) == sorted(j.id for j in suite.jobs)  # each job once
    per_gpu = {d: sum(1 for _, dd in started if dd == d) for d in ("0", "1")}
    assert per_gpu["1"] > 0 and per_gpu["0"] > 2 * per_gpu["1"]  # the fast GPU took most of them


def test_longest_jobs_are_handed_out_first(fake_suite, db_url, tmp_path, monkeypatch):
    """The queue's order is the jobs' cost estimate, largest first (runner.run.job_cost): the
    convolutions (tens of candidates) before the pointwise layers (a few)."""
    from benanza.runner.run import job_cost

    log = tmp_path / "started.log"
    monkeypatch.setenv("FAKE_SUITE_LOG", str(log))
    suite = load_suite(fake_suite)
    _run(fake_suite, db_url, workers_per_gpu=1)  # one process: the log is the queue's order
    order = [line.split()[0] for line in log.read_text().splitlines()]
    by_id = {j.id: j for j in suite.jobs}
    costs = [job_cost(by_id[j]) for j in order]
    assert costs == sorted(costs, reverse=True)
    kinds = [by_id[j].kind for j in order]
    assert kinds.index("Conv") < kinds.index("Activation") and costs[0] > 10 * costs[-1]


def test_different_gpus_are_not_mixed(fake_suite, db_url, monkeypatch, tmp_path):
    # a wrapper that reports another GPU name on device 1
    exe = fake_suite / "build" / "benanza-suite"
    real = fake_suite / "build" / "real-suite"
    exe.rename(real)
    exe.write_text("#!/bin/sh\ncase \"$*\" in *'--device 1'*) export FAKE_SUITE_GPU=Other;; esac\n"
                   f"exec {sys.executable} {real} \"$@\"\n")
    exe.chmod(0o755)
    with pytest.raises(DeviceError, match="not identical"):
        _run(fake_suite, db_url, devices=(0, 1))


def test_nhwc_only_suite_into_a_fresh_database(tmp_path, models, db_url):
    """A channels-last-only run has no job for the model's Gemm or Softmax, yet the model's record
    names every layer config: a fresh database must still take it (it failed with a foreign-key error
    on the GPU: `bench resnet50 --layout nhwc`)."""
    from conftest import make_fake_suite

    folder = make_fake_suite(tmp_path / "nhwc", models / "resnet50.onnx", (1,), ("fp16",), layouts=["NHWC"])
    suite = load_suite(folder)
    assert suite.jobs and all(j.layout == "NHWC" for j in suite.jobs)
    job_keys = {j.layer_key for j in suite.jobs}
    used = set(suite.manifest["models"][0]["key_counts"])
    assert used - job_keys, "resnet50 has layers without an NHWC job (its Gemm)"
    s = _run(folder, db_url)
    assert (s.ok, s.failed) == (len(suite.jobs), 0)
    db = open_db(db_url)
    from benanza.database.store import LayerConfigRow, ModelConfig
    with db.session() as ses:
        assert {r.layer_key for r in ses.query(ModelConfig)} == used
        assert used <= {r.key for r in ses.query(LayerConfigRow)}


def test_the_worker_takes_every_flag_the_runner_passes():
    """The framework worker gets the suite's flags (RunOptions.suite_args): an unknown one would
    end every framework job; the cold time cap applies with racing on and not with --exhaustive."""
    import dataclasses

    from benanza.runner.run import RunOptions

    from benanza.profiles import torch_candidates as T

    racing = RunOptions().suite_args()
    exhaustive = dataclasses.replace(RunOptions(), race=False, cold="all").suite_args()
    assert "--cold-max-time-ms" in racing and "--cold-max-time-ms" not in exhaustive
    a = T._args(["--jobs", "-", *racing])
    assert a.cold_max_time_ms == RunOptions().cold_max_time_ms < a.max_time_ms
    assert T._args(["--jobs", "-", *exhaustive]).cold_max_time_ms == 0


# ------------------------------------------- one GPU lock for the suite's and the framework's runs

def test_a_shared_gpu_lock_reaches_every_worker_and_stays(fake_suite, db_url, tmp_path, monkeypatch):
    """bench's framework run and suite run take one lock (RunOptions.gpu_lock): every worker gets
    it, one worker per GPU too, and the run leaves the file to its owner; a run's own lock (several
    workers per GPU) is removed when it ends."""
    from benanza.runner.run import gpu_lock_files

    log = tmp_path / "locks.log"
    monkeypatch.setenv("FAKE_SUITE_LOCK_LOG", str(log))
    prefix = str(tmp_path / "shared")
    shared = gpu_lock_files(prefix, (0,))[0]
    s = _run(fake_suite, db_url, gpu_lock=prefix, workers_per_gpu=1)
    assert s.ok == len(load_suite(fake_suite).jobs)
    assert set(log.read_text().split()) == {shared}
    log.unlink()
    own = _run(fake_suite, db_url, force=True, workers_per_gpu=3)
    (path,) = set(log.read_text().split())
    assert path != shared and path.endswith("-gpu0.lock") and not os.path.exists(path)
    log.unlink()
    _run(fake_suite, db_url, force=True, workers_per_gpu=1)
    assert set(log.read_text().split()) == {"-"}  # one worker, no shared lock: none
    assert own.ok == s.ok


def test_the_lock_several_commands_share_comes_first_and_stays(fake_suite, db_url, tmp_path, monkeypatch):
    """BENANZA_GPU_LOCK_SHARED (two benanza commands on one GPU, each measuring only in its turn): every
    worker takes the shared file, over the run's own lock (several workers) and over bench's lock
    for its framework run, and no run removes it (another command may hold it)."""
    from benanza import api
    from benanza.runner.run import SHARED_GPU_LOCK_ENV, gpu_lock_files

    log = tmp_path / "locks.log"
    monkeypatch.setenv("FAKE_SUITE_LOCK_LOG", str(log))
    prefix = str(tmp_path / "machine")
    monkeypatch.setenv(SHARED_GPU_LOCK_ENV, prefix)
    shared = gpu_lock_files(prefix, (0,))[0]
    Path(shared).write_text("")
    for kw in ({"workers_per_gpu": 3}, {"workers_per_gpu": 1}, {"gpu_lock": str(tmp_path / "bench"), "workers_per_gpu": 2}):
        s = _run(fake_suite, db_url, force=True, **kw)
        assert s.ok == len(load_suite(fake_suite).jobs)
        assert set(log.read_text().split()) == {shared} and os.path.exists(shared)
        log.unlink()
    bench_case._unlink_locks(prefix, RunOptions())
    assert os.path.exists(shared)


def test_a_profiling_child_takes_its_turn_on_the_shared_lock(tmp_path, monkeypatch):
    """benanza torch's profiling children put work on the GPU (the module's build, warm-up, timing,
    profiled iterations) only while holding the shared lock of their device; on the CPU or without
    the variable they take none."""
    import contextlib
    from types import SimpleNamespace

    from benanza.profiles.capture import _gpu_turn
    from benanza.runner.run import SHARED_GPU_LOCK_ENV, GpuLock

    torch = SimpleNamespace(cuda=SimpleNamespace(synchronize=lambda: None))
    gpu1 = SimpleNamespace(type="cuda", index=1)
    assert isinstance(_gpu_turn(torch, gpu1), contextlib.nullcontext)
    monkeypatch.setenv(SHARED_GPU_LOCK_ENV, str(tmp_path / "machine"))
    assert isinstance(_gpu_turn(torch, SimpleNamespace(type="cpu", index=None)), contextlib.nullcontext)
    turn = _gpu_turn(torch, gpu1)
    assert isinstance(turn, GpuLock)
    with turn:
        assert os.path.exists(tmp_path / "machine-gpu1.lock")


def test_a_stopped_run_keeps_its_jobs_and_leaves_the_rest_pending(fake_suite, db_url, monkeypatch):
    """The stop event (bench's framework run when the suite's run fails or is interrupted): the jobs
    in flight finish and are stored, no new job starts, the run is marked interrupted, and the next
    run does exactly the rest."""
    import threading

    from benanza.build.builder import suite_executable
    from benanza.runner.run import _run_jobs, _suite_worker, query_system, register_suite

    suite = load_suite(fake_suite)
    db = open_db(db_url)
    opt = RunOptions(workers_per_gpu=1)
    exe = suite_executable(suite.root)
    system = query_system(exe)
    sid = db.upsert_system(system, authoritative=True)
    register_suite(suite, db)
    monkeypatch.setenv("FAKE_SUITE_SLOW", "0.3")
    stop = threading.Event()
    threading.Timer(0.8, stop.set).start()
    first = _run_jobs(suite.jobs, db, system, sid, opt, _suite_worker(exe, opt), suite.root, "fake", None, stop=stop)
    assert first.interrupted and 0 < first.ok < len(suite.jobs)
    monkeypatch.delenv("FAKE_SUITE_SLOW")
    rest = _run(fake_suite, db_url, workers_per_gpu=1)
    assert rest.skipped == first.ok and rest.ok == len(suite.jobs) - first.ok
    with db.session() as ses:
        assert ses.query(JobRow).count() == len(suite.jobs)


def test_the_python_gpu_lock_waits_for_the_holder_and_synchronises(tmp_path):
    """The framework worker's GPU lock (GpuLock, the harness's Context::gpu_acquire in Python): a
    second holder waits until the first lets go, the stream is synchronised before taking the lock
    and before giving it back, and without a lock file it does nothing."""
    import threading

    from benanza.runner.run import GpuLock

    path = str(tmp_path / "gpu0.lock")
    syncs = []
    first, second = GpuLock(path, sync=lambda: syncs.append("a")), GpuLock(path, sync=lambda: syncs.append("b"))
    held = threading.Event()

    def hold():
        with first:
            held.set()
            time.sleep(0.4)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    with second:
        assert not t.is_alive() or syncs.count("a") == 2
    t.join()
    assert second.wait_ms >= 250 and first.wait_ms < 100
    assert syncs == ["a", "b", "a", "b"]  # a: before taking, b: before taking (then waits), a: giving back, b
    with GpuLock("") as none:
        assert none.wait_ms == 0


def _beside_env(monkeypatch, fake_suite, tmp_path, framework, cached=False):
    """bench's stages 3-4 (usecases.bench.bench_measure) on the fake suite with a stand-in for the framework's
    run (``framework(opts, stop)``) timed beside a compile that is not cached."""
    from benanza.build import builder
    from benanza.usecases import bench as api
    from benanza.runner import system as rsys
    from benanza.runner.run import query_system
    from benanza.build.builder import suite_executable

    suite = load_suite(fake_suite)
    sysrec = query_system(suite_executable(suite.root))
    monkeypatch.setattr(builder, "harness_cached", lambda *a, **k: cached)
    monkeypatch.setattr(rsys, "local_system", lambda device=0: sysrec)
    monkeypatch.setattr(rsys, "partition_excludes_framework", lambda: "")
    monkeypatch.setattr(api, "build_with_progress", lambda *a, **k: type("B", (), {"executable": "suite"})())
    monkeypatch.setattr(api, "run_framework", lambda suite, db, sid, opts, quiet, torch, stop=None, **k:
                        framework(opts, stop, sid, sysrec))
    monkeypatch.setenv("FAKE_SUITE_LOCK_LOG", str(tmp_path / "locks.log"))
    return api, suite


@pytest.mark.parametrize("cached", [False, True], ids=["beside-the-compile", "harness-cached"])
def test_the_framework_goes_on_beside_the_suites_run_on_one_gpu_lock(fake_suite, db_url, tmp_path, monkeypatch,
                                                                      cached):
    """bench no longer runs the framework's kernels before or after the suite's run: started beside
    the compile (harness not cached) or when the run starts (cached), they run beside the suite's
    workers, all on one GPU lock; the framework's wall time is its stage, and the lock files go.
    (BENANZA_FRAMEWORK_BESIDE_RUN=1; by default only when the harness is cached, next test.)"""
    import threading

    from benanza.runner.run import RunSummary, gpu_lock_files

    seen = {}
    log = tmp_path / "locks.log"

    def framework(opts, stop, sid, sysrec):
        seen["lock"] = opts.gpu_lock
        seen["cold"] = opts.cold
        if seen.get("called"):
            return None  # (asked again after the run: nothing pending)
        seen["called"] = True
        deadline = time.time() + 60
        while time.time() < deadline and not (log.exists() and log.read_text().strip()):
            time.sleep(0.05)  # until a suite worker has started a job
        seen["overlapped"] = log.exists() and bool(log.read_text().strip())
        return RunSummary(system_id=sid, system=sysrec, run_id=None, planned=0, skipped=0)

    api, suite = _beside_env(monkeypatch, fake_suite, tmp_path, framework, cached)
    monkeypatch.setenv("BENANZA_FRAMEWORK_BESIDE_RUN", "1")
    stages = {}
    db = open_db(db_url)
    rs, ts = api.bench_measure(suite, db, api.run_options(Timing(workers_per_gpu=1)), True, None, SILENT, stages)
    assert rs.ok == len(suite.jobs) and ts is not None and seen["overlapped"] and seen["cold"] == "contenders"
    shared = gpu_lock_files(seen["lock"], (0,))[0]
    assert set(log.read_text().split()) == {shared}  # every suite worker took the framework's lock
    assert not os.path.exists(shared)
    assert stages["torch_s"] > 0 and {"compile_s", "run_s"} <= set(stages)
    assert threading.active_count() < 10


def test_a_failed_suite_run_stops_the_framework_beside_it(fake_suite, db_url, tmp_path, monkeypatch):
    from benanza.errors import DeviceError

    stopped = {}

    def framework(opts, stop, sid, sysrec):
        stopped["set"] = stop.wait(60)
        return None

    api, suite = _beside_env(monkeypatch, fake_suite, tmp_path, framework)
    monkeypatch.setenv("BENANZA_FRAMEWORK_BESIDE_RUN", "1")
    monkeypatch.setenv("FAKE_SUITE_NODEVICE", "1")
    with pytest.raises(DeviceError):
        api.bench_measure(suite, open_db(db_url), api.run_options(Timing()), True, None, SILENT, {})
    assert stopped["set"]


@pytest.mark.parametrize("mode", ["", "0"], ids=["default", "off"])
@pytest.mark.parametrize("cached", [False, True], ids=["beside-the-compile", "harness-cached"])
def test_where_the_framework_goes_by_default(fake_suite, db_url, tmp_path, monkeypatch, cached, mode):
    """As measured on an H100 (benchmarks/results/2026-11-26g): by default the framework's kernels
    timed beside the compile end before the suite's run starts (the compile stage waits for them, and
    the suite's worker takes no lock), and with the harness cached they go on beside the run on one GPU
    lock. BENANZA_FRAMEWORK_BESIDE_RUN=0: after the run instead, no lock."""
    from benanza.runner.run import RunSummary, gpu_lock_files

    log = tmp_path / "locks.log"
    seen = []

    def framework(opts, stop, sid, sysrec):
        if seen and not (cached and mode == ""):
            return None  # (asked again after the run: nothing pending)
        seen.append((log.exists(), opts.gpu_lock))  # did a suite worker start before?
        time.sleep(0.3)
        return RunSummary(system_id=sid, system=sysrec, run_id=None, planned=0, skipped=0)

    api, suite = _beside_env(monkeypatch, fake_suite, tmp_path, framework, cached)
    monkeypatch.setenv("BENANZA_FRAMEWORK_BESIDE_RUN", mode)
    stages = {}
    rs, ts = api.bench_measure(suite, open_db(db_url), api.run_options(Timing(workers_per_gpu=1)), True, None, SILENT,
                               stages)
    assert rs.ok == len(suite.jobs) and ts is not None and stages["torch_s"] >= 0.3
    if not cached:  # beside the compile, before any suite job; the run takes no lock
        assert [s[0] for s in seen] == [False] and stages["compile_s"] >= 0.3
        assert set(log.read_text().split()) == {"-"}
    elif mode == "0":  # after the run
        assert [s[0] for s in seen] == [True] and set(log.read_text().split()) == {"-"}
    else:  # beside the run, on the lock the suite's worker takes
        assert len(seen) == 1 and seen[0][1]
        assert set(log.read_text().split()) == set(gpu_lock_files(seen[0][1], (0,)).values())

