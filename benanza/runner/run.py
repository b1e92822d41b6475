"""Runner: executes a built suite on the GPU in a worker process and stores what it measures.

The suite prints JSON lines (system, job_start, measurement, choice, job_end, fatal). The runner
writes each finished job to the database in one transaction, so a run stopped at any point keeps
every finished job and the next run resumes with the rest. A worker that crashes (signal), reports
a sticky CUDA error or exceeds the per-job timeout marks its in-flight job failed with the reason
and is restarted for the remaining jobs.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from benanza import kinds as L
from benanza.build.builder import suite_executable
from benanza.kinds.backend import Backend
from benanza.kinds.base import JobId
from benanza.kinds.bounds import implausible_fma, min_bytes
from benanza.database.query import Serves
from benanza.database.store import Database, system_fingerprint
from benanza.errors import DeviceError, UsageError
from benanza.database.records import RECORD_TYPES, MeasurementLine, Record, RecordError, parse_record
from benanza.generation.generator import Suite
from benanza.spec import COLD_POLICIES, HARNESS_PHASES, TIMING  # noqa: F401 (the vocabulary: benanza.spec)



@dataclass
class RunOptions:
    """Timing policy passed to the suite (see cpp/include/benanza/harness.hpp) and runner limits;
    the defaults are :data:`benanza.spec.TIMING`'s (:meth:`of` makes one from a :class:`benanza.spec.Timing`)."""

    device: int = TIMING.device
    warmup_ms: float = TIMING.warmup_ms
    sample_ms: float = TIMING.sample_ms
    rse: float = TIMING.rse
    min_samples: int = TIMING.min_samples
    max_samples: int = TIMING.max_samples
    max_time_ms: float = TIMING.max_time_ms
    workspace_limit_mb: float = TIMING.workspace_mb
    cold: str = TIMING.cold  # COLD_POLICIES: cold figures for each job's contenders, all calls or none
    # the time cap of one cold measurement with racing on (harness.hpp, Options::cold_max_time_ms:
    # cold samples seldom reach the rse target and ran to the 1 s cap); racing off keeps max_time_ms
    cold_max_time_ms: float = TIMING.cold_max_time_ms
    graphs: bool = True
    race: bool = True  # racing (cpp/include/benanza/stats.hpp, RaceRule); False: every call to the stopping rule
    job_timeout_s: float = TIMING.job_timeout
    force: bool = False
    retry_failed: bool = False
    devices: tuple[int, ...] = ()  # several identical GPUs: one worker each; empty: (device,)
    screen: float = TIMING.screen  # racing off only: calls slower than this x the job's best at their first replay are not sampled further
    max_engines: int = TIMING.max_engines  # engine / cuBLASLt configs timed per call and job, heuristics order; 0 = all
    # where the time goes (benchmarks/speed.py): a JSON-lines file that gets one line per job (its
    # wall time, database write, the harness's cost per phase from ``--profile``) and per worker start
    phases_log: Path | None = None
    # suite processes per GPU, sharing it through a lock (harness.hpp, Context::gpu_acquire): one
    # builds engine plans and queries heuristics (CPU work) while another times calls on the GPU
    # (three: the run stage of resnet50's quick start on an H100, 47.5 s with two, 42.7 s with three,
    # 43.6 s with four; docs/timing.md, "Scheduling")
    workers_per_gpu: int = TIMING.workers_per_gpu
    # A GPU lock shared with another run on the same GPUs (``bench``: the framework's kernels, timed
    # beside the compile, go on beside the suite's run): every worker of this run, one per GPU too,
    # takes ``{gpu_lock}-gpu{N}.lock``; "" = a lock of this run's own when it has several workers per GPU
    gpu_lock: str = ""
    # the prior (docs/timing.md, "Prior"; :mod:`benanza.runner.prior`): a database (file, URL, or
    # ``self``: the target database) whose measurements of this GPU name rank each job's candidates; only
    # the contenders within ``prior_margin`` of its best, and a sample of the others, are timed. "": none
    prior: str = ""
    prior_margin: float = TIMING.prior_margin

    @classmethod
    def of(cls, timing, devices: tuple[int, ...], phases_log: Path | None = None) -> "RunOptions":
        """The options of a checked :class:`benanza.spec.Timing` (:meth:`benanza.spec.Timing.check`),
        on ``devices`` (:func:`benanza.spec.parse_devices`); ``phases_log``: where the time goes."""
        t = timing.check()
        return cls(device=t.device, warmup_ms=t.warmup_ms, rse=t.rse, min_samples=t.min_samples,
                   max_samples=t.max_samples, max_time_ms=t.max_time_ms, workspace_limit_mb=t.workspace_mb,
                   cold=t.cold_policy, job_timeout_s=t.job_timeout, force=t.force, retry_failed=t.retry_failed,
                   devices=devices, screen=t.screen, max_engines=t.max_engines, race=not t.exhaustive,
                   workers_per_gpu=t.workers_per_gpu, phases_log=phases_log, prior=t.prior or "",
                   prior_margin=t.prior_margin)

    def gpus(self) -> tuple[int, ...]:
        return tuple(self.devices) or (self.device,)

    def suite_args(self, device: int | None = None) -> list[str]:
        args = ["--device", str(self.device if device is None else device), "--warmup-ms", str(self.warmup_ms), "--sample-ms", str(self.sample_ms),
                "--rse", str(self.rse), "--min-samples", str(self.min_samples), "--max-samples",
                str(self.max_samples), "--max-time-ms", str(self.max_time_ms), "--workspace-limit-mb",
                str(self.workspace_limit_mb), "--screen", str(self.screen)]
        if self.max_engines:
            args += ["--max-engines", str(self.max_engines)]
        args += ["--cold-policy", self.cold]
        if not self.race:
            args.append("--no-race")
        elif self.cold_max_time_ms > 0:
            args += ["--cold-max-time-ms", str(self.cold_max_time_ms)]
        if not self.graphs:
            args.append("--no-graphs")
        if self.phases_log is not None:
            args.append("--profile")
        return args


@dataclass
class RunSummary:
    """What a run did. ``skipped``: jobs already in the database for this system."""

    system_id: int
    system: dict
    run_id: int | None
    planned: int
    skipped: int
    ok: int = 0
    failed: int = 0
    measurements: int = 0
    wall_s: float = 0.0
    restarts: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    interrupted: bool = False
    # where a cluster run's time went (s; :func:`benanza.runner.cluster.run_cluster`): empty otherwise
    timeline: dict = field(default_factory=dict)
    # the candidates of the jobs run (one warm record each) and those the prior left out (skipped
    # records whose message starts "prior:"); ``prior``: :meth:`benanza.runner.prior.PriorPlan.summary`
    candidates: int = 0
    prior_skipped: int = 0
    prior: dict | None = None


def query_system(exe: Path, device: int = 0, timeout_s: float = 120.0) -> dict:
    """Run ``suite --system`` and return the system record. Raises :class:`DeviceError` when the
    suite cannot start on a GPU (no CUDA device, driver too old...)."""
    try:
        proc = subprocess.run([str(exe), "--system", "--device", str(device)], capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise DeviceError(f"{exe} --system did not answer within {timeout_s:.0f} s") from None
    except OSError as e:
        raise DeviceError(f"cannot start {exe}: {e.strerror}") from None
    for line in proc.stdout.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if rec.get("type") == "system":
            return rec["system"]
        if rec.get("type") == "fatal":
            raise DeviceError(rec.get("message", "the suite cannot start"))
    err = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    raise DeviceError(f"the suite gave no system record: {err}")


def _relabel_tensor_core_fp32(job, records: list[Record], system: dict | None) -> list[Record]:
    """``records`` with each fp32 GEMM measurement labelled FMA math that is faster than any FP32 FMA
    rate allows (:func:`benanza.kinds.bounds.implausible_fma`) relabelled: it ran on Tensor Cores,
    so its math becomes ``tf32`` and its note says why, and an fp32 analysis never counts it."""
    if job.precision != "fp32" or not system:
        return records
    out = []
    for r in records:
        if isinstance(r, MeasurementLine) and r.status == "ok" and r.math in ("fma", "none"):
            why = implausible_fma(job.config, r.median_ms, system.get("sm_count"),
                                           system.get("max_sm_clock_mhz"))
            if why:
                r = dataclasses.replace(r, math="tf32", note="; ".join(x for x in (r.note, why) if x))
        out.append(r)
    return out


def _reader(stream, q: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        q.put(line)
    q.put(None)


def run_suite(suite: Suite, db: Database, options: RunOptions | None = None,
              progress: Callable[[str, dict], None] | None = None,
              on_system: Callable[[int], None] | None = None) -> RunSummary:
    """Run the suite's pending jobs on the GPU and store the results.

    ``progress(event, info)`` is called with "start" (info: total), "job" (info: job, status,
    done, failed) and "end". Raises :class:`DeviceError` when no GPU can run the suite,
    :class:`UsageError` when the suite is not built. Ctrl-C stops the worker, keeps the finished
    jobs, marks the run interrupted and re-raises KeyboardInterrupt. ``on_system(system_id)``:
    called once the GPU's system is in the database, before any job (bench starts the framework's
    kernels beside the run from it). With ``opt.prior``: the prior's lists written to the suite folder
    (:func:`suite_prior`) and handed to the suite; UsageError when the prior has no measurements of this
    GPU, DatabaseError when it does not open.
    """
    opt = options or RunOptions()
    exe = suite_executable(suite.root)
    if not exe.exists():
        raise UsageError(f"{suite.root}: suite not built (no {exe}); run `benanza build {suite.root}`")
    gpus = opt.gpus()
    systems = [query_system(exe, d) for d in gpus]
    fps = {system_fingerprint(s) for s in systems}
    if len(fps) > 1:
        raise DeviceError("the GPUs " + ", ".join(map(str, gpus)) + " are not identical systems ("
                          + "; ".join(f"{d}: {s.get('gpu_name')}" for d, s in zip(gpus, systems))
                          + "); measure them one at a time with --devices")
    system = systems[0]
    system_id = db.upsert_system(system, authoritative=True)
    register_suite(suite, db)
    plan = suite_prior(suite, db, system, opt) if opt.prior else None
    if on_system is not None:
        on_system(system_id)
    summary = _run_jobs(suite.jobs, db, system, system_id, opt,
                        _suite_worker(exe, opt, suite.root / PRIOR_FILE if plan is not None else None), suite.root,
                        ",".join(sorted({m["model"] for m in suite.manifest.get("models", [])})), progress,
                        per_gpu=max(1, opt.workers_per_gpu))
    if plan is not None:
        summary.prior = plan.summary()
    return summary


#: the prior's file in the suite folder (``suite --prior FILE``)
PRIOR_FILE = "prior.json"


def suite_prior(suite: Suite, db: Database, system: dict, opt: RunOptions):
    """The prior's plan for the suite's jobs on ``system`` (:func:`benanza.runner.prior.prior_plan`), from
    ``opt.prior`` (``self``: ``db``), written to the suite folder's :data:`PRIOR_FILE`. Raises UsageError
    (no measurements of this GPU) or DatabaseError (the prior does not open)."""
    from benanza.runner import prior as P

    pdb, close = P.open_prior(opt.prior, db)
    try:
        plan = P.prior_plan(pdb, opt.prior, system, suite.jobs, margin=opt.prior_margin)
    finally:
        if close:
            pdb.close()
    plan.write(suite.root / PRIOR_FILE)
    return plan


def register_suite(suite: Suite, db: Database) -> None:
    """Store the suite's layer configs (its jobs' and its models' fusion candidates') and its models
    (what measurements and analyses refer to) in the database; idempotent."""
    configs = {j.layer_key: j.config for j in suite.jobs}
    for m in suite.manifest.get("models", []):
        for c in m.get("configs", []):
            cfg = L.config_from_params(c["kind"], c["params"])
            configs.setdefault(cfg.key, cfg)
    db.upsert_configs(list(configs.values()))
    for m in suite.manifest.get("models", []):
        if m.get("key_counts"):
            db.record_model(m["model"], m["sha256"], m["batch"], m["summary"], m["key_counts"])


def framework_available() -> str:
    """"" when PyTorch with a CUDA device is importable here (the framework's kernels can be timed),
    else why not (one line)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    try:
        import torch
    except Exception as e:  # a broken install
        return f"PyTorch does not import: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}"
    if not torch.cuda.is_available():
        return f"PyTorch {torch.__version__} sees no CUDA device"
    return ""


def run_framework_jobs(suite: Suite, db: Database, system_id: int, options: RunOptions | None = None,
                       progress: Callable[[str, dict], None] | None = None,
                       stop: threading.Event | None = None) -> RunSummary:
    """Time the framework's own kernels for the suite's jobs (:mod:`benanza.profiles.torch_candidates`: each
    layer config and fusion candidate as PyTorch runs it), in worker processes that speak the
    suite protocol, into the suite's system ``system_id`` (the same GPU). Incremental like the
    suite's jobs; a framework job's id is the suite job's plus ``.torch``
    (:func:`benanza.generation.generator.framework_job_id`). ``stop``: as in :func:`_run_jobs`."""
    import sys

    from benanza.generation.generator import Job, framework_job_id

    opt = options or RunOptions()
    jobs = [Job(id=framework_job_id(j.id), config=j.config, precision=j.precision, node=j.node, layout=j.layout)
            for j in suite.jobs]
    system = next((s for s in db.systems() if s.id == system_id), None)
    record = json.loads(system.info) if system is not None and system.info else {}
    register_suite(suite, db)  # the framework's jobs may come first (timed while the suite compiles)
    best = library_best(db, system_id, [j.layer_key for j in jobs])
    by_id = {j.id: j for j in jobs}

    def best_of(job) -> float | None:
        # the suite's run may go on beside this one (bench): a job's library best is looked up again
        # when it is handed out, so that it has the contenders' cold policy once the suite measured it
        k = (job.layer_key, job.precision)
        if k not in best:
            best.update(library_best(db, system_id, [job.layer_key]))
        return best.get(k)

    def jobs_text(ids: list[str]) -> str:
        return "".join(json.dumps({"job": i, "kind": by_id[i].kind, "params": by_id[i].config.params(),
                                   "precision": by_id[i].precision, "layout": by_id[i].layout,
                                   "best_ms": best_of(by_id[i])}) + "\n"
                       for i in ids)

    worker = Worker(argv=lambda jobs_file, device: [sys.executable, "-m", "benanza.profiles.torch_candidates", "--jobs",
                                                    jobs_file] + opt.suite_args(device),
                    jobs_text=jobs_text)
    models = ",".join(sorted({m["model"] for m in suite.manifest.get("models", [])}))
    return _run_jobs(jobs, db, record, system_id, opt, worker, suite.root, models + " (framework kernels)", progress,
                     stop=stop)


def framework_pending(suite: Suite, db: Database, system_id: int, options: RunOptions | None = None) -> int:
    """How many of the suite's framework jobs the database does not have yet for ``system_id``
    (:func:`run_framework_jobs` would run them); no PyTorch needed."""
    from benanza.generation.generator import framework_job_id

    opt = options or RunOptions()
    if opt.force:
        return len(suite.jobs)
    done = db.jobs_done(system_id, ("ok",) if opt.retry_failed else ("ok", "failed"))
    return sum(1 for j in suite.jobs if framework_job_id(j.id) not in done)


def library_best(db: Database, system_id: int, keys: list[str]) -> dict[tuple[str, str], float]:
    """The fastest valid warm median (ms) of the library calls (the suite's backend) per (layer key,
    precision) on a system, in either layout: the reference of the framework jobs' cold policy."""
    best: dict[tuple[str, str], float] = {}
    rules = {p: Serves(p, "warm", source="library") for p in L.PRECISIONS}
    for m in db.measurements(system_id, sorted(set(keys)), "warm"):
        if m.precision not in rules or not rules[m.precision](m):
            continue  # the one rule (an fp32 row relabelled tf32 is no fp32 time)
        k = (m.layer_key, m.precision)
        best[k] = min(best.get(k, m.median_ms), m.median_ms)
    return best


def gpu_lock_files(prefix: str, gpus) -> dict[int, str]:
    """The lock file per GPU of a shared lock ``prefix`` (RunOptions.gpu_lock)."""
    return {d: f"{prefix}-gpu{d}.lock" for d in gpus}


#: the environment variable naming a GPU lock prefix that several benanza commands on one machine
#: share: every process that puts work on GPU N (the suite's and the framework's workers, benanza
#: torch's profiling children) takes ``PREFIX-gpuN.lock`` for it, so that two commands may run at
#: once on one GPU (one exporting, compiling or reporting on the CPU while the other measures) and
#: no measurement ever has another process's work beside it. The files are never removed by benanza.
SHARED_GPU_LOCK_ENV = "BENANZA_GPU_LOCK_SHARED"


def shared_gpu_lock() -> str:
    """The shared lock prefix of :data:`SHARED_GPU_LOCK_ENV` ("" when unset)."""
    return os.environ.get(SHARED_GPU_LOCK_ENV, "").strip()


def shared_gpu_turn(device: int | None, sync: Callable[[], None] | None = None):
    """The context in which a process puts work on GPU ``device`` beside other benanza commands: the
    :class:`GpuLock` of :data:`SHARED_GPU_LOCK_ENV`'s file for that GPU (``sync`` synchronises before
    it is taken and given back); a context that does nothing without the variable or for ``device``
    None (the CPU)."""
    import contextlib

    prefix = shared_gpu_lock()
    if device is None or not prefix:
        return contextlib.nullcontext()
    return GpuLock(gpu_lock_files(prefix, [device])[device], sync=sync)


class GpuLock:
    """The GPU lock of a Python worker (the framework's: :mod:`benanza.profiles.torch_candidates`):
    the file named by ``BENANZA_GPU_LOCK`` that the suite's processes on this GPU take too
    (harness.hpp, ``Context::gpu_acquire``: flock, the stream synchronised before the lock is taken
    and before it is given back, so that no two processes ever have work on the GPU at once).
    ``with lock:`` holds it; without the variable it does nothing. ``wait_ms``: time spent waiting."""

    def __init__(self, path: str | None = None, sync: Callable[[], None] | None = None):
        path = os.environ.get("BENANZA_GPU_LOCK", "") if path is None else path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600) if path else -1
        self._sync = sync or (lambda: None)
        self.wait_ms = 0.0

    def __enter__(self) -> "GpuLock":
        if self._fd >= 0:
            import fcntl

            self._sync()
            t = time.perf_counter()
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            self.wait_ms += (time.perf_counter() - t) * 1e3
        return self

    def __exit__(self, *exc) -> None:
        if self._fd >= 0:
            import fcntl

            try:
                self._sync()
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)


def _run_jobs(jobs: list, db: Database, system: dict, system_id: int, opt: RunOptions, worker: "Worker",
              root: Path, models: str, progress, per_gpu: int = 1,
              stop: threading.Event | None = None) -> RunSummary:
    """Run the pending ``jobs`` (not yet in the database unless ``opt.force``) with ``worker``
    processes, ``per_gpu`` per GPU (more than one share the GPU through a lock file named by
    ``BENANZA_GPU_LOCK``; ``opt.gpu_lock``: a lock shared with another run), each job written in
    its own transaction; the run recorded in the database. Shared by the suite's jobs and the
    framework's (:func:`run_framework_jobs`). ``stop``: set from another thread, no worker takes a
    new job (the jobs in flight finish; the rest stay pending for the next run)."""
    gpus = opt.gpus()
    if opt.force:
        pending = list(jobs)
    else:
        done = db.jobs_done(system_id, ("ok",) if opt.retry_failed else ("ok", "failed"))
        pending = [j for j in jobs if j.id not in done]
    summary = RunSummary(system_id=system_id, system=system, run_id=None, planned=len(pending),
                         skipped=len(jobs) - len(pending))
    if not pending:
        return summary
    run_id = db.start_run(system_id, str(root), models, len(pending))
    summary.run_id = run_id
    by_id = {j.id: j for j in pending}
    # one queue for every GPU (work stealing: a worker takes the next job when it finishes one),
    # longest jobs first, so that no GPU is left with a long job at the end
    order = JobQueue([j.id for j in sorted(pending, key=lambda j: (-job_cost(j), j.id))])
    t0 = time.perf_counter()
    if progress:
        progress("start", {"total": len(pending), "skipped": summary.skipped, "gpus": len(gpus)})
    prefix = shared_gpu_lock() or opt.gpu_lock  # a lock other commands take too comes first
    own = not prefix and per_gpu > 1
    locks = gpu_lock_files(prefix, gpus) if prefix else gpu_lock_files(
        str(Path(tempfile.gettempdir()) / f"benanza-{os.getpid()}-{run_id}"), gpus) if own else {}
    ctx = SharedRun(db=db, system_id=system_id, run_id=run_id, summary=summary, progress=progress, by_id=by_id,
                  opt=opt, worker=worker, log_path=root / "run.log", gpu_locks=locks,
                  stop=stop or threading.Event())
    drivers = [d for d in gpus for _ in range(per_gpu)]
    try:
        if len(drivers) == 1:
            drive_jobs(ctx, drivers[0], order)
        else:
            with ThreadPoolExecutor(max_workers=len(drivers)) as pool:
                futures = [pool.submit(drive_jobs, ctx, d, order) for d in drivers]
                try:
                    while any(not f.done() for f in futures):
                        time.sleep(0.2)
                except KeyboardInterrupt:
                    ctx.stop.set()
                    raise
                for f in futures:
                    f.result()
    except KeyboardInterrupt:
        ctx.stop.set()
        summary.interrupted = True
        summary.wall_s = time.perf_counter() - t0
        db.finish_run(run_id, "interrupted", summary.ok + summary.failed, "interrupted by the user")
        raise
    except BaseException as e:
        ctx.stop.set()
        summary.wall_s = time.perf_counter() - t0
        db.finish_run(run_id, "failed", summary.ok + summary.failed, str(e)[:500])
        raise
    summary.wall_s = time.perf_counter() - t0
    for path in locks.values() if own else ():
        Path(path).unlink(missing_ok=True)
    if ctx.stop.is_set():
        summary.interrupted = True
        db.finish_run(run_id, "interrupted", summary.ok + summary.failed, "stopped: the jobs left stay pending")
        return summary
    db.finish_run(run_id, "completed", summary.ok + summary.failed)
    if progress:
        progress("end", {})
    return summary


@dataclass
class SharedRun:
    """What the per-GPU drivers share; ``lock`` guards the summary and the progress callback."""

    db: Database
    system_id: int
    run_id: int
    summary: RunSummary
    progress: Callable[[str, dict], None] | None
    by_id: dict
    opt: RunOptions
    worker: "Worker"
    log_path: Path
    gpu_locks: dict = field(default_factory=dict)  # device -> the lock file its workers share
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def finished(self, job, status: str, message: str, measurements: int) -> None:
        with self.lock:
            s = self.summary
            s.measurements += measurements
            if status == "ok":
                s.ok += 1
            else:
                s.failed += 1
                s.failures.append((job.id, message))
            if self.progress:
                self.progress("job", {"job": job.id, "status": status, "message": message,
                                      "done": s.ok + s.failed, "failed": s.failed})


#: the candidates a job of each kind times, roughly (engine configs, algorithms, cuBLASLt configs,
#: kernels): the weight of :func:`job_cost`; kinds not named time a few calls
_CANDIDATES = {"Conv": 60, "ConvBiasAct": 40, "ConvBnAct": 40, "Gemm": 30, "GemmAct": 30, "GemmActBackward": 30, "Sdpa": 20, "RNN": 6,
               "LayerNorm": 10, "Unary": 4, "Elementwise": 4}


def job_cost(job) -> float:
    """A job's expected run time (s, for ordering only): its kind's candidate count times a fixed
    cost per candidate (first call, warm-up, capture, screen: ~3 ms measured on an H200;
    docs/timing.md, "Scheduling") plus the GPU time of the screen, 6 replays of the config's
    FLOPs at 100 TFLOP/s or its minimum bytes at 3 TB/s; a framework job is one candidate."""
    n = 1 if JobId.parse(job.id).framework else _CANDIDATES.get(job.kind, 3)
    cfg = job.config
    try:
        flops, nbytes = float(cfg.flops()), float(min_bytes(cfg, job.precision))
    except Exception:  # a kind without a cost model: its fixed cost only
        flops = nbytes = 0.0
    return n * (3e-3 + 6 * max(flops / 1e14, nbytes / 3e12))


class JobQueue:
    """The pending job ids of a run in the order they are handed out, shared by the per-GPU drivers
    (thread-safe): :meth:`take` the next, :meth:`give_back` one a lost worker never started.

    ``open_for_s`` > 0 makes it an *open* queue (a cluster worker's: :mod:`benanza.runner.cluster`):
    more jobs may be :meth:`put` later, so a suite process that finds it empty waits for them (its
    CUDA context, libraries and loaded kernels kept) and ends only after ``open_for_s`` seconds
    without a job."""

    def __init__(self, ids: list[str], open_for_s: float = 0.0):
        self._ids = collections.deque(ids)
        self._cond = threading.Condition()
        self.open_for_s = open_for_s

    def take(self) -> str | None:
        with self._cond:
            return self._ids.popleft() if self._ids else None

    def give_back(self, ids: list[str]) -> None:
        with self._cond:
            self._ids.extendleft(reversed(ids))
            self._cond.notify_all()

    def put(self, ids: list[str]) -> None:
        """More jobs, after those queued (an open queue)."""
        with self._cond:
            self._ids.extend(ids)
            self._cond.notify_all()

    @property
    def waiting(self) -> bool:
        """Whether more jobs may still come (an open queue)."""
        return self.open_for_s > 0

    def wait_for_jobs(self, timeout: float | None = None) -> bool:
        """Block until a job is queued (True) or ``timeout`` s pass (False)."""
        with self._cond:
            return bool(self._cond.wait_for(lambda: self._ids, timeout))

    def __len__(self) -> int:
        with self._cond:
            return len(self._ids)


def drive_jobs(ctx: SharedRun, device: int, jobs: JobQueue) -> None:
    """Run jobs from ``jobs`` on ``device`` until it is empty: restart the worker after a crash, a
    hang or a sticky error, recording the job in flight as failed with the reason."""
    startup_failures = 0
    while len(jobs) and not ctx.stop.is_set():
        w = _one_worker(ctx, device, jobs)
        if w.crashed is not None:
            job = ctx.by_id[w.crashed]
            ctx.db.write_job(ctx.system_id, ctx.run_id, job.id, job.layer_key, job.precision, "failed", w.reason,
                             w.partial, layout=job.layout)
            ctx.finished(job, "failed", w.reason, sum(1 for r in w.partial if isinstance(r, MeasurementLine)))
        if len(jobs) and not ctx.stop.is_set():
            with ctx.lock:
                ctx.summary.restarts += 1
            startup_failures = 0 if w.started_any or w.idle else startup_failures + 1
            if startup_failures >= 2:
                raise DeviceError(f"the suite failed to start twice on GPU {device}: {w.reason}")


@dataclass
class _WorkerResult:
    finished: set[str]
    crashed: str | None = None  # the job in flight when the worker died or timed out
    reason: str = ""
    started_any: bool = False
    partial: list[Record] = field(default_factory=list)  # what the crashed job measured before
    idle: bool = False  # ended cleanly, never handed a job (an open queue emptied by other workers)


@dataclass(frozen=True)
class Worker:
    """How to start a worker process that speaks the suite protocol (JSON lines: job_start,
    measurement, choice, job_end, fatal; exit code 3: no device): ``argv(jobs_file, device)`` (the
    runner passes ``-``: jobs on standard input, one line each as it hands them out) and the jobs'
    lines for a list of job ids, ``jobs_text(ids)``."""

    argv: Callable[[str, int], list[str]]
    jobs_text: Callable[[list[str]], str]


def _suite_worker(exe: Path, opt: RunOptions, prior_file: Path | None = None) -> Worker:
    """The generated suite: its jobs file lists job ids (the suite has their cases compiled in);
    ``prior_file``: the prior's lists (``--prior``, :func:`suite_prior`)."""
    extra = ["--prior", str(prior_file)] if prior_file is not None else []
    return Worker(argv=lambda jobs_file, device: [str(exe), "--jobs", jobs_file] + opt.suite_args(device) + extra,
                  jobs_text=lambda ids: "\n".join(ids) + "\n")


@dataclass
class _Progress:
    """What one worker process has done so far: the jobs it finished, the job in flight with its
    records, a ``fatal`` line's message and the first malformed record of the job in flight."""

    finished: set[str] = field(default_factory=set)
    current: str | None = None
    records: list[Record] = field(default_factory=list)
    started_at: float = 0.0
    fatal: str = ""
    started_any: bool = False
    malformed: str = ""
    spawned_at: float = 0.0
    sent: collections.deque = field(default_factory=collections.deque)  # handed to the worker, not finished
    feed: Callable[[], None] | None = None  # hands the worker its next job
    hungry: int = 0  # feeds that found an open queue empty: jobs to hand over when they come
    idle_since: float | None = None  # when the worker last had nothing to do (an open queue)
    refill: Callable[[], None] | None = None  # hands over what came, or ends an idle worker
    handed: bool = False  # handed a job at least once


def _store_job(ctx: SharedRun, p: _Progress, end: dict) -> None:
    """Write the job in flight (its ``job_end`` line ``end``) to the database: failed with the reason
    when the worker said so or printed a malformed record (the well-formed ones are kept)."""
    job = ctx.by_id[p.current]
    status = "ok" if end.get("status") == "ok" and not p.malformed else "failed"
    msg = str(end.get("message") or "")
    if p.malformed:
        msg = "; ".join(x for x in (msg, f"the worker printed a malformed record: {p.malformed}") if x)
    records = _relabel_tensor_core_fp32(job, p.records, ctx.summary.system)
    wall_s = time.perf_counter() - p.started_at
    t_store = time.perf_counter()
    ctx.db.write_job(ctx.system_id, ctx.run_id, job.id, job.layer_key, job.precision, status, msg,
                     records, wall_s, layout=job.layout)
    if ctx.opt.phases_log is not None:
        _log_phases(ctx, {"event": "job", "job": job.id, "kind": job.kind, "precision": job.precision,
                          "layout": job.layout, "wall_s": wall_s, "store_s": time.perf_counter() - t_store,
                          **job_phases(records, end)})
    p.finished.add(p.current)
    if p.current in p.sent:
        p.sent.remove(p.current)
    ctx.finished(job, status, msg, sum(1 for r in records if isinstance(r, MeasurementLine)))
    warm = [r for r in records if isinstance(r, MeasurementLine) and r.cache == "warm"]
    with ctx.lock:
        ctx.summary.candidates += len(warm)
        ctx.summary.prior_skipped += sum(1 for r in warm if r.status == "skipped" and r.message.startswith("prior:"))
    p.current, p.records, p.malformed = None, [], ""
    if p.feed is not None:
        p.feed()




def job_phases(records: list[Record], end: dict) -> dict:
    """Where one job's time went, from its records (``--profile``): the harness's wall ms per phase
    summed over its measurements (``cost_ms``; :data:`benanza.spec.HARNESS_PHASES`), plan builds (``build_ms``), the GPU
    time of the samples themselves (warm: mean ms per call x reps x samples; cold: mean x samples;
    a raced-out or screened call: its screen samples), the measurements by status, and what the
    worker's ``job_end`` line adds (``cost_ms``: the job's own wall time and set-up, ms)."""
    cost = dict.fromkeys(HARNESS_PHASES, 0.0)
    build = gpu = 0.0
    status: dict[str, int] = {}
    for r in records:
        if not isinstance(r, MeasurementLine):
            continue
        status[r.status] = status.get(r.status, 0) + 1
        for k, v in (r.cost_ms or {}).items():
            if k in cost and isinstance(v, (int, float)):
                cost[k] += float(v)
        if r.build_ms is not None and r.build_ms > 0:
            build += r.build_ms
        if r.mean_ms is not None and r.samples:
            gpu += r.mean_ms * (r.reps or 1) * r.samples
        elif r.estimate_ms is not None:  # raced out (its samples and the batch's lead replay) or screened
            gpu += r.estimate_ms * (r.reps or 1) * ((r.samples or 0) + 1)
    job_cost = end.get("cost_ms") if isinstance(end.get("cost_ms"), dict) else {}
    return {"phases_ms": cost, "build_ms": build, "gpu_ms": gpu, "status": status, "job_cost_ms": job_cost}


def _log_phases(ctx: SharedRun, rec: dict) -> None:
    with ctx.lock, open(ctx.opt.phases_log, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


def _take_line(ctx: SharedRun, p: _Progress, line: str) -> None:
    """Act on one line of the worker's output (lines that are not JSON objects are ignored)."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError:
        return
    if not isinstance(rec, dict):
        return
    typ = rec.get("type")
    if not isinstance(typ, str):
        return
    if typ == "job_start":
        p.current, p.records, p.malformed = rec.get("job"), [], ""
        p.started_at = time.perf_counter()
        if not p.started_any and ctx.opt.phases_log is not None:
            _log_phases(ctx, {"event": "worker_start", "start_s": p.started_at - p.spawned_at,
                              "side": "framework" if Backend.of_job(str(rec.get("job"))).framework else "suite"})
        p.started_any = True
    elif typ in RECORD_TYPES and p.current is not None:
        try:
            p.records.append(parse_record(rec))
        except RecordError as e:
            p.malformed = p.malformed or str(e)
    elif typ == "job_end" and p.current is not None and rec.get("job") == p.current:
        _store_job(ctx, p, rec)
    elif typ == "fatal":
        p.fatal = str(rec.get("message") or "")


def _pump(ctx: SharedRun, proc: subprocess.Popen, p: _Progress) -> bool:
    """Read the worker's lines until it ends, the run stops (the worker is killed) or the job in
    flight runs past the per-job timeout (killed too; returns True)."""
    q: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
    while True:
        if ctx.stop.is_set():
            _kill(proc)
            return False
        try:
            line = q.get(timeout=0.05 if p.hungry else 0.5)
        except queue.Empty:
            if p.current is not None and time.perf_counter() - p.started_at > ctx.opt.job_timeout_s:
                _kill(proc)
                return True
            if p.hungry and p.refill is not None:
                p.refill()
            continue
        if line is None:
            return False
        _take_line(ctx, p, line)
        if p.hungry and p.refill is not None:
            p.refill()


def _one_worker(ctx: SharedRun, device: int, jobs: JobQueue) -> _WorkerResult:
    """Run one worker process on ``device``, handing it jobs from ``jobs`` through its standard
    input (one ahead of the job in flight, so it never waits), and store every job it finishes.
    Jobs it was handed but never started go back to the queue when it ends."""
    p = _Progress()
    log = open(ctx.log_path, "a")
    p.spawned_at = time.perf_counter()
    env = dict(os.environ, BENANZA_GPU_LOCK=ctx.gpu_locks[device]) if device in ctx.gpu_locks else None
    proc = subprocess.Popen(ctx.worker.argv("-", device), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=log, text=True, bufsize=1, start_new_session=True, env=env)

    def feed() -> None:
        jid = None if ctx.stop.is_set() else jobs.take()
        if jid is None and jobs.waiting and not ctx.stop.is_set():  # an open queue: more may come
            p.hungry += 1
            return
        try:
            if jid is None:
                proc.stdin.close()
                return
            p.sent.append(jid)
            p.handed = True
            proc.stdin.write(ctx.worker.jobs_text([jid]))
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):  # the worker is gone: _pump sees it end
            pass

    def refill() -> None:
        while p.hungry and len(jobs):
            p.hungry -= 1
            feed()
        idle = p.hungry and p.current is None and not p.sent
        p.idle_since = (p.idle_since or time.perf_counter()) if idle else None
        if idle and time.perf_counter() - p.idle_since > jobs.open_for_s:
            p.hungry = 0
            try:
                proc.stdin.close()  # nothing came for a while: the worker ends
            except OSError:
                pass

    p.feed, p.refill = feed, refill
    feed()
    feed()
    try:
        timed_out = _pump(ctx, proc, p)
    except BaseException:
        _kill(proc)
        raise
    finally:
        proc.wait()
        log.close()
        unstarted = [j for j in p.sent if j != p.current and j not in p.finished]
        if unstarted:
            jobs.give_back(unstarted)
    if ctx.stop.is_set():
        return _WorkerResult(p.finished, None, "stopped", p.started_any)
    res = _worker_outcome(ctx.opt, p, proc.returncode, timed_out)
    res.idle = not p.handed and proc.returncode == 0
    return res


def _worker_outcome(opt: RunOptions, p: _Progress, rc: int | None, timed_out: bool) -> _WorkerResult:
    """How a worker process ended (exit code ``rc``): the job in flight crashed with the reason, the
    device is missing (exit 3: raises :class:`DeviceError`), or it ended (cleanly or not) between jobs."""
    if p.current is not None:
        if timed_out:
            reason = f"timed out after {opt.job_timeout_s:.0f} s"
        elif p.fatal:
            reason = p.fatal
        elif rc is not None and rc < 0:
            reason = f"worker killed by signal {signal.Signals(-rc).name}"
        else:
            reason = f"worker exited with code {rc} during the job"
        return _WorkerResult(p.finished, p.current, reason, p.started_any, p.records)
    if rc == 3:
        raise DeviceError(p.fatal or "no CUDA device")
    if rc != 0:
        return _WorkerResult(p.finished, None, p.fatal or f"worker exited with code {rc}", p.started_any)
    return _WorkerResult(p.finished, None, "", p.started_any)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
