"""Runner: incremental runs, and a worker that crashes, hangs or loses the device (fake suite)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from benanza.database.store import JobRow, Measurement, open_db
from benanza.errors import DeviceError
from benanza.generation.generator import load_suite
from benanza.runner.run import RunOptions, run_suite


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
