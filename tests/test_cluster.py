"""A fleet of GPUs through Dask distributed (issue 28), without a GPU: a Dask cluster of three worker
processes on this host (two of a fake GPU kind GPU_A, one of GPU_B, as ``benanza worker`` declares
kinds) runs a real generated suite's job list (alexnet, fp32). The workers' GPU step is replaced by
a REPLAY of a recorded suite output: tests/fake_suite.py's output for every job, recorded once into
SUITE/recorded.jsonl, printed back by tests/replay_suite.py installed as the suite binary, so the
workers run the runner's real driver and parser on recorded job outputs. Checked: routing by kind, a
worker killed mid-job (its job re-runs on a live worker), exactly-once writes, the same results as a
plain local run job for job, the one-line errors."""
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")  # the `test` extra installs it (pyproject.toml)

from conftest import HERE, make_fake_suite  # noqa: E402

from benanza.database.store import Database, open_db  # noqa: E402
from benanza.errors import UsageError  # noqa: E402
from benanza.generation.generator import load_suite  # noqa: E402
from benanza.runner import cluster as C  # noqa: E402
from benanza.runner.run import RunOptions, job_cost, run_suite  # noqa: E402


def _replay_suite(tmp_path: Path, models: Path) -> Path:
    """alexnet's real suite whose binary replays the fake suite's recorded output."""
    folder = make_fake_suite(tmp_path / "suite", models / "alexnet.onnx", (1,), ("fp32",))
    exe = folder / "build" / "benanza-suite"
    ids = tmp_path / "all.jobs"
    ids.write_text("\n".join(j.id for j in load_suite(folder).jobs) + "\n")
    rec = subprocess.run([sys.executable, str(exe), "--jobs", str(ids)], capture_output=True, text=True, check=True)
    (folder / "recorded.jsonl").write_text(rec.stdout)
    shutil.copy(HERE / "replay_suite.py", exe)
    exe.chmod(0o755)
    return folder


def _rows(db: Database, sid: int, suite) -> dict:
    """job -> (status, its measurements as (call, algorithm, cache, median ms)), from the database."""
    keys = sorted({j.layer_key for j in suite.jobs})
    ms = {}
    for cache in ("warm", "cold"):
        for m in db.measurements(sid, keys, cache):
            ms.setdefault((m.layer_key, m.precision), set()).add((m.call, m.algorithm, m.cache, m.median_ms))
    return {r.job: (r.status, frozenset(ms.get((r.layer_key, r.precision), ())), r.message)
            for r in db.job_rows(sid, keys)}


def test_jobs_go_to_their_kind_a_killed_worker_reruns_its_job_and_each_is_stored_once(
        tmp_path, models, db_url, monkeypatch):
    """On SQLite only: the client alone writes the database (benanza.runner.cluster), through the
    Database methods the database tests run on both backends (tests/test_db_concurrency.py: several
    processes at once on PostgreSQL)."""
    folder = _replay_suite(tmp_path, models)
    suite = load_suite(folder)
    victim = max(suite.jobs, key=lambda j: (job_cost(j), j.id)).id  # the longest: among the first handed out
    marker = tmp_path / "hung.pid"
    starts = tmp_path / "starts.txt"
    hang = {"REPLAY_HANG_ONCE": f"{victim}:{marker}", "REPLAY_STARTS": str(starts)}
    specs = [C.WorkerSpec("a1", "GPU_A", {"REPLAY_GPU": "GPU A", "REPLAY_UUID": "GPU-a1", **hang}, slots=2),
             C.WorkerSpec("a2", "GPU_A", {"REPLAY_GPU": "GPU A", "REPLAY_UUID": "GPU-a2", **hang}),
             C.WorkerSpec("b1", "GPU_B", {"REPLAY_GPU": "GPU B", "REPLAY_UUID": "GPU-b1", "REPLAY_STARTS": str(starts)})]
    writes: dict = {}
    real_write = Database.write_job

    def counted(self, system_id, run_id, job, *a, **kw):
        writes[(system_id, job)] = writes.get((system_id, job), 0) + 1
        return real_write(self, system_id, run_id, job, *a, **kw)

    monkeypatch.setattr(Database, "write_job", counted)
    killed = []

    def kill_the_worker_in_the_job():  # the Dask worker process running the victim, mid-job
        t = time.monotonic()
        while not marker.exists() or not marker.read_text():
            if time.monotonic() - t > 60:
                return
            time.sleep(0.05)
        pid = int(marker.read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    db = open_db(db_url)
    events = []
    distributed = pytest.importorskip("distributed")
    with C.local_cluster(specs) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(3, timeout=60)
        killer = threading.Thread(target=kill_the_worker_in_the_job, daemon=True)
        killer.start()
        out = C.run_cluster(suite, db, client, RunOptions(), progress=lambda e, i: events.append((e, i)), chunk=2)
        killer.join(1)
        # the killed worker's nanny starts it again; until it is back the scheduler has one GPU_A worker
        client.wait_for_workers(3, timeout=60)
        with pytest.raises(UsageError) as e:
            C.run_cluster(suite, db, client, RunOptions(), kinds=["GPU_C"])
        assert str(e.value) == "--cluster a Dask client: no worker of GPU kind GPU_C; the workers have GPU_A x2, GPU_B x1"
        again = C.run_cluster(suite, db, client, RunOptions())  # incremental: nothing left on either kind
    assert killed, "the worker running the victim job was never killed"
    # a worker's suite processes share its GPU through one lock when it has several slots (a1), none
    # with one (a2, b1); each keeps its process from task to task (chunks of 2 jobs: without that, a
    # process per task)
    lines = [ln.split() for ln in starts.read_text().splitlines()]
    assert {u for u, lock in lines if lock != "-"} == {"GPU-a1"} and all(lock != "-" for u, lock in lines
                                                                          if u == "GPU-a1")
    assert sum(1 for u, _ in lines if u == "GPU-b1") == 1, lines
    assert [(s.system["gpu_name"], s.ok, s.failed) for s in out] == [("GPU A", len(suite.jobs), 0),
                                                                      ("GPU B", len(suite.jobs), 0)]
    assert [(s.skipped, s.run_id) for s in again] == [(len(suite.jobs), None)] * 2
    # exactly once: every job of every kind written by one call, whatever Dask ran again
    assert sorted(writes.values()) == [1] * (2 * len(suite.jobs))
    dones = [i["done"] for e, i in events if e == "job"]
    assert dones == list(range(1, 2 * len(suite.jobs) + 1)) and events[-1][0] == "end"
    # the same results as a plain local run of the same recorded outputs, job for job
    local = open_db(f"sqlite:///{tmp_path / 'local.db'}")
    ls = run_suite(suite, local, RunOptions(workers_per_gpu=1))
    want = {j: (st, ms) for j, (st, ms, _) in _rows(local, ls.system_id, suite).items()}
    assert len(want) == len(suite.jobs)
    for s, uuids in zip(out, (("GPU-a1", "GPU-a2"), ("GPU-b1",))):
        got = _rows(db, s.system_id, suite)
        assert {j: (st, ms) for j, (st, ms, _) in got.items()} == want
        # routing: each job ran on a worker of its kind, and says where
        for j, (_, _, msg) in got.items():
            assert msg.startswith("ran on host ") and any(f", {u}, SM clock 1980-1980 MHz" in msg for u in uuids), msg


def test_cluster_without_distributed_is_one_line(fake_suite, tmp_path):
    code = ("import sys; sys.modules['distributed'] = None\n"  # `import distributed` raises ImportError
            "from benanza.cli import main; main()")
    p = subprocess.run([sys.executable, "-c", code, "run", str(fake_suite), "--db", str(tmp_path / "p.db"),
                        "--cluster", "local"], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.strip() == "benanza: --cluster needs Dask distributed: pip install benanza[cluster]"


def test_gpu_kind_is_the_name_as_an_identifier():
    assert C.gpu_kind("NVIDIA H100 80GB HBM3") == "NVIDIA_H100_80GB_HBM3"
    assert C.gpu_kind("NVIDIA H200 [66 SMs]") == "NVIDIA_H200_66_SMs"
    assert C.gpu_kind("  ") == "GPU"
    assert C.WorkerSpec("h-gpu0", "NVIDIA_H200", {}).resources() == {"gpu": 1, "NVIDIA_H200": 1}
    assert C.WorkerSpec("h-gpu0", "NVIDIA_H200", {}, slots=3).resources() == {"gpu": 1, "NVIDIA_H200": 3}


def test_a_zoo_is_one_suite_its_shared_jobs_measured_once_then_each_models_lbl(tmp_path, models, monkeypatch):
    """bench of several models (tests/fake_suite.py as the built suite): one suite of their unique
    jobs, one run of each (the longest first), an analysis per model; a models file names them."""
    from benanza import api
    from benanza.usecases import bench as bench_case
    from benanza.generation.generator import plan_jobs
    from benanza.processing.model import process

    a, b = models / "vgg16.onnx", models / "vgg16_bn.onnx"  # the same convolutions (BN folded)
    listed = tmp_path / "zoo.txt"
    listed.write_text(f"# the zoo\n{a}\n\n{b}\n{a}\n")
    assert api.model_list([], listed) == [a, b]
    with pytest.raises(UsageError, match="--models-file .*: no such file"):
        api.model_list([], tmp_path / "missing.txt")

    def build(folder, jobs, quiet, progress=None):  # the fake suite where the compile puts the binary
        exe = Path(folder) / "build" / "benanza-suite"
        exe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / "fake_suite.py", exe)
        exe.chmod(0o755)
        return type("B", (), {"executable": exe})()

    monkeypatch.setattr(bench_case, "build_with_progress", build)
    monkeypatch.setattr("benanza.runner.system.require_gpu", lambda *a, **k: None)  # the fake suite's "GPU"
    log = tmp_path / "started.log"
    monkeypatch.setenv("FAKE_SUITE_LOG", str(log))
    r = api.bench(api.model_list([a, b]), output=tmp_path / "zoo", db=f"sqlite:///{tmp_path / 'z.db'}", torch=False,
                  quiet=True, timing=api.Timing(workers_per_gpu=1))
    own = [{j.id for j in plan_jobs([process(m, 1)], ["fp32"], ["NCHW", "NHWC"])} for m in (a, b)]
    assert own[0] & own[1] and {j.id for j in r.suite.jobs} == own[0] | own[1]
    started = [ln.split()[0] for ln in log.read_text().splitlines()]
    assert sorted(started) == sorted(own[0] | own[1])  # each shared job run once
    by_id = {j.id: j for j in r.suite.jobs}
    costs = [job_cost(by_id[j]) for j in started]
    assert costs == sorted(costs, reverse=True)  # the longest first
    assert r.model == "vgg16, vgg16_bn" and [x.model for x in r.analyses] == ["vgg16", "vgg16_bn"]


def test_a_zoo_through_a_cluster_opened_while_the_suite_compiles(tmp_path, models, monkeypatch):
    """bench --cluster ADDRESS of a zoo (tests/fake_suite.py as the built suite, one Dask worker of a
    fake GPU kind): the connection opens in the background before the compile (the compile here
    waits until it is open, so the run stage waits for none of it), each unique job runs once on the
    worker, the same jobs and statuses as a local bench, each model analyzed on the kind's system."""
    from benanza import api
    from benanza.usecases import bench as bench_case

    distributed = pytest.importorskip("distributed")
    a, b = models / "vgg16.onnx", models / "vgg16_bn.onnx"
    opened = threading.Event()

    def build(folder, jobs, quiet, progress=None):  # the fake suite where the compile puts the binary
        opened.wait(60)
        exe = Path(folder) / "build" / "benanza-suite"
        exe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / "fake_suite.py", exe)
        exe.chmod(0o755)
        return type("B", (), {"executable": exe})()

    real_connect = C.ClusterConnection._open

    def connect(self, devices, slots):
        try:
            return real_connect(self, devices, slots)
        finally:
            opened.set()

    monkeypatch.setattr(bench_case, "build_with_progress", build)
    monkeypatch.setattr(C.ClusterConnection, "_open", connect)
    monkeypatch.setenv("FAKE_SUITE_GPU", "GPU Z")
    with C.local_cluster([C.WorkerSpec("z1", "GPU_Z", {}, slots=2)]) as cluster, \
            distributed.Client(cluster) as client:
        client.wait_for_workers(1, timeout=60)
        r = api.bench([a, b], output=tmp_path / "zoo", db=f"sqlite:///{tmp_path / 'c.db'}", torch=False,
                      quiet=True, cluster=cluster.scheduler_address)
    monkeypatch.setattr("benanza.runner.system.require_gpu", lambda *a, **k: None)  # the fake suite's "GPU"
    local = api.bench([a, b], output=tmp_path / "zoo", db=f"sqlite:///{tmp_path / 'l.db'}", torch=False,
                      quiet=True, timing=api.Timing(workers_per_gpu=1))
    (run,) = r.runs
    assert run.system["gpu_name"] == "GPU Z" and run.ok == len(r.suite.jobs) and run.failed == 0
    assert run.timeline["open_s"] > 0 and run.timeline["connect_s"] < 0.5, run.timeline
    assert [x.model for x in r.analyses] == ["vgg16", "vgg16_bn"]
    keys = sorted({j.layer_key for j in r.suite.jobs})
    got = {x.job: x.status for x in r.database.job_rows(run.system_id, keys)}
    want = {x.job: x.status for x in local.database.job_rows(local.run.system_id, keys)}
    assert got == want and len(got) == len(r.suite.jobs)


def test_an_unreachable_scheduler_is_one_line(tmp_path, models, monkeypatch):
    """--cluster tcp://HOST:PORT where no scheduler listens: one UsageError line naming the address,
    after the connection's wait (shortened here), and nothing left running."""
    suite = load_suite(_replay_suite(tmp_path, models))
    monkeypatch.setattr(C, "WORKER_WAIT_S", 1.0)
    db = open_db(f"sqlite:///{tmp_path / 'u.db'}")
    t = time.monotonic()
    with pytest.raises(UsageError, match=r"^--cluster tcp://127\.0\.0\.1:9: cannot reach the scheduler \("):
        C.run_cluster(suite, db, "tcp://127.0.0.1:9", RunOptions())
    assert time.monotonic() - t < 20
    assert threading.active_count() < 20


def test_a_workers_driver_threads_end_when_idle_and_come_back_for_new_jobs(tmp_path, models, monkeypatch):
    """run_chunk outside a Dask worker (one slot): a task's jobs run, the pool's driver thread and its
    suite process end after their idle times (shortened here), and the next task's jobs run all the
    same on a new one: a long-lived `benanza worker` keeps no thread for suites it is done with."""
    suite = load_suite(_replay_suite(tmp_path, models))
    monkeypatch.setattr(C, "IDLE_S", 0.2)
    monkeypatch.setattr(C, "POOL_IDLE_S", 0.5)
    exe = str(C.suite_executable(suite.root))
    opt = RunOptions(workers_per_gpu=1)

    def slots():
        return sum(1 for t in threading.enumerate() if t.name.startswith("benanza-slot-"))

    before = slots()
    first = C.run_chunk(exe, suite.jobs[:2], opt)
    assert sorted(o.job for o in first.outcomes) == sorted(j.id for j in suite.jobs[:2])
    assert {o.status for o in first.outcomes} == {"ok"}
    t = time.monotonic()
    while slots() > before and time.monotonic() - t < 10:
        time.sleep(0.05)
    assert slots() == before
    second = C.run_chunk(exe, suite.jobs[2:4], opt)
    assert sorted(o.job for o in second.outcomes) == sorted(j.id for j in suite.jobs[2:4])
