"""The GPU side: ``benanza bench`` (process, generate, compile, run, store, analyze), ``run``,
``build``, ``ceilings`` and ``worker``; the bench's orchestration (the framework's kernels timed
beside the compile or the suite's run on one GPU lock, a Dask cluster's runs) lives here."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from benanza.analysis.analyzer import Analysis
from benanza.analysis.training import TrainingStep, training_step
from benanza.build.builder import BuildResult, build as do_build
from benanza.database.store import Database, System
from benanza.errors import BenanzaError, LibraryError, UsageError
from benanza.generation.generator import Suite
from benanza.processing.cache import process as process_model
from benanza.processing.model import load_graph, symbolic_dims
from benanza.runner.run import RunSummary, run_suite as do_run_suite
from benanza.spec import (TIMING, BenchRequest, RunRequest, Scenario, Timing, batch_size, conv_precision, layouts,
                          parse_devices as spec_devices, parse_precisions)
from benanza.usecases.common import lower_bound
from benanza.usecases.progress import SILENT, Progress

def run_options(timing: Timing):
    """The runner's :class:`benanza.runner.run.RunOptions` of ``timing``; raises UsageError for a bad field."""
    from benanza.runner.run import RunOptions

    log = os.environ.get("BENANZA_PHASES_LOG")
    t = timing.check()
    return RunOptions.of(t, parse_devices(t.devices, t.device), Path(log) if log else None)


@dataclass
class BenchResult:
    """What :func:`bench` did: the model's name, the stages' wall times (``*_s``, s), the suite's run
    and the framework kernels' run (:class:`benanza.runner.run.RunSummary`, or None), the system
    measured, one :class:`benanza.analysis.analyzer.Analysis` per batch and data type, the suite."""

    model: str
    stages: dict[str, float]
    run: RunSummary
    framework_run: RunSummary | None
    system: System
    analyses: list[Analysis]
    suite: Suite
    database: Database
    #: with ``train``: one :class:`benanza.analysis.training.TrainingStep` per analysis
    training: list[TrainingStep] = field(default_factory=list)
    #: every run summary: the suite's run, or one per GPU kind on a cluster (``run`` is the first)
    runs: list[RunSummary] = field(default_factory=list)
    #: the notices met (the models', the database's)
    notices: list[str] = field(default_factory=list)
    #: with ``--counters``: what Nsight Compute profiled (:func:`counters`)
    counters: dict | None = None


def dims_per_model(paths: list, dims: dict[str, int]) -> dict:
    """Each model's ``--dim`` values: one model takes them all (the model checks them:
    :func:`benanza.processing.model.check_dims`); several (a zoo) each take those naming one of its
    symbolic dimensions, and a name that no model has is refused. Raises UsageError, ModelError."""
    if len(paths) < 2 or not dims:
        return {p: dims for p in paths}
    per = {}
    for p in paths:
        g, _ = load_graph(p)
        have = set(symbolic_dims(g, {t.name for t in g.graph.initializer}))
        per[p] = {k: v for k, v in dims.items() if k in have}
    for k, v in dims.items():
        if not any(k in d for d in per.values()):
            raise UsageError(f"--dim {k}={v}: none of the {len(paths)} models has a dimension {k!r}")
    return per


def bench(req: BenchRequest, progress: Progress = SILENT) -> BenchResult:
    """The main job, in this process: process ``req.models`` (several: a zoo) at ``req.batches``,
    generate and compile one suite of their unique jobs (a job several models share is measured once),
    time every implementation of each unique layer (and the framework's own kernels, unless
    ``torch`` is False) into database ``db`` (created if missing), and analyze every batch and data
    type. ``progress``: the stage lines (``say``), notices and bars (none with ``req.quiet``);
    ``train``: the backward calls of a training step too
    (:func:`benanza.processing.training.training_plan`), and the training step's LBL of each
    analysis (:attr:`BenchResult.training`), its memory bound with ``optimizer``'s state.
    ``cluster``: run the jobs on a Dask cluster (``tcp://HOST:PORT`` or ``local``;
    :func:`benanza.runner.cluster.run_cluster`) on each of its GPU kinds ``gpu_kinds`` (None: all), and
    analyze on each kind's system (the framework's kernels are not timed there). Raises UsageError, ModelError, DatabaseError, DeviceError,
    LibraryError as the stages do."""
    say, quiet, timing, cluster, train, optimizer = progress.say, req.quiet, req.timing, req.cluster, req.train, req.optimizer
    stages: dict = {}
    precisions = parse_precisions(req.precisions)
    lays = list(layouts(req.layouts))
    kind_list = list(req.kinds) if req.kinds is not None else None
    opts = run_options(timing)
    if cluster is not None and timing.prior:
        raise UsageError("--prior with --cluster: the prior is read on this machine's GPU runs only (run without "
                         "--cluster)")
    if cluster is not None and req.torch:
        raise UsageError("--torch with --cluster: the framework's kernels are timed on this machine's GPU "
                         "(run without --cluster)")
    conv_p = conv_precision(req.conv_tf32, precisions)
    t = time.perf_counter()
    paths = list(dict.fromkeys(req.models))
    if not paths:
        raise UsageError("bench: no model given")
    dims = dims_per_model(paths, dict(req.dims))
    mls = [process_model(m, batch_size(b), dims[m], req.batch_dim) for m in paths for b in req.batches]
    stages["process_s"] = time.perf_counter() - t
    if not quiet:
        for n in dict.fromkeys(n for ml in mls for n in ml.notices):
            progress.notice(n)
    # the cluster opens while the suite is generated and compiled (run_cluster closes it)
    conn = open_cluster(cluster, timing.devices, opts.workers_per_gpu) if cluster is not None else None
    try:
        database, suite = _bench_suite(mls, precisions, lays, kind_list, conv_p, req.db, req.output, quiet, progress,
                                       stages, compile_now=cluster is not None, train=train, optimizer=optimizer,
                                       gpus=None if cluster is not None else opts.gpus())
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    if cluster is not None:
        t = time.perf_counter()
        runs, ts = run_cluster(suite, database, opts, conn, req.gpu_kinds, quiet, progress=progress), None
        stages["run_s"] = time.perf_counter() - t
        for s in runs:
            say(f"[4/5] {run_line(s)}")
    else:
        library_notice(progress)
        runs = [None]
        runs[0], ts = bench_measure(suite, database, opts, quiet, req.torch, progress, stages)
    system, results, steps = None, [], []
    for rs in runs:  # one system per GPU kind on a cluster
        sys_rs, res = _bench_analyze(mls, precisions, lays, conv_p, database, rs, say, stages)
        system, results = system or sys_rs, results + res
        if train:
            steps += [training_step(ml, a, database, sys_rs, optimizer) for ml in mls for a in res
                      if a.batch == ml.batch]
    return BenchResult(", ".join(dict.fromkeys(ml.model for ml in mls)), stages, runs[0], ts, system, results, suite,
                       database, steps, runs, [n for ml in mls for n in ml.notices] + list(database.notices))


def parse_devices(text: str | None, device: int) -> tuple[int, ...]:
    """``--devices all`` (every GPU here) or ``0,1,...``; none: ``(device,)`` (:func:`benanza.spec.parse_devices`)."""
    def count():
        from benanza.runner import system as sysq

        return sysq.device_count()
    return spec_devices(text, device, count)


def run_suite(suite, db, opts, quiet: bool, on_system=None, progress: Progress = SILENT) -> RunSummary:
    """The suite's jobs on this machine's GPUs (:func:`benanza.runner.run.run_suite`), with a job bar
    unless ``quiet``."""
    prog = progress.jobs("measuring", quiet)
    try:
        return do_run_suite(suite, db, opts, progress=prog, on_system=on_system)
    finally:
        prog.close()


def model_list(models, models_file=None) -> list[Path]:
    """``bench``'s models: the paths given, then those of ``models_file`` (one per line, relative to
    the file's folder; empty lines and lines starting with ``#`` skipped), each once, in order. Raises
    UsageError when the file cannot be read or no model is given."""
    paths = [Path(m) for m in models or []]
    if models_file:
        f = Path(models_file)
        try:
            text = f.read_text()
        except OSError as e:
            raise UsageError(f"--models-file {f}: {(e.strerror or type(e).__name__).lower()}") from None
        for ln in text.splitlines():
            ln = ln.strip()
            if ln and not ln.startswith("#"):
                p = Path(ln).expanduser()
                paths.append(p if p.is_absolute() else f.parent / p)
    if not paths:
        raise UsageError("bench: give a model (MODEL ... or --models-file FILE)")
    return list(dict.fromkeys(paths))


def cluster_kinds(address: str | None, text: str | None) -> list[str] | None:
    """``--gpu-kinds K1,K2`` (Dask resource names, :func:`benanza.runner.cluster.gpu_kind`); None: all.
    Checked before any work: with ``--cluster`` (``address``) Dask must be installed
    (:class:`UsageError` with :data:`benanza.runner.cluster.MISSING`); without, no kinds may be named."""
    kinds = [k.strip() for k in (text or "").split(",") if k.strip()]
    if address is not None:  # --cluster '' is an error, never a silent local run
        from benanza.runner.cluster import check_address, require_distributed

        check_address(address)
        require_distributed()
    elif kinds:
        raise UsageError("--gpu-kinds goes with --cluster")
    return kinds or None


def open_cluster(address: str, devices: str | None, slots: int = TIMING.workers_per_gpu):
    """:class:`benanza.runner.cluster.ClusterConnection` to ``address`` opened in the background;
    ``devices`` (``--devices``): the GPUs of ``--cluster local`` (None: all). Raises UsageError
    without Dask distributed or for a bad ``devices``."""
    from benanza.runner.cluster import ClusterConnection, require_distributed

    require_distributed()  # before the devices are looked up
    local = () if address != "local" or not devices or devices.strip().lower() == "all" else \
        parse_devices(devices, 0)
    return ClusterConnection(address, local, slots)


def run_cluster(suite, db, opts, address, kinds: list[str] | None, quiet: bool, devices: str | None = None,
                progress: Progress = SILENT) -> list[RunSummary]:
    """The suite's jobs on a Dask cluster (:func:`benanza.runner.cluster.run_cluster`), once per GPU
    kind, with a progress bar over all workers; ``address``: a scheduler's address, ``local``, or a
    connection from :func:`open_cluster` (closed here); ``devices`` (``--devices``): the GPUs of
    ``--cluster local`` (None: all). Returns one run summary per kind."""
    from benanza.runner.cluster import run_cluster

    conn = open_cluster(address, devices, opts.workers_per_gpu) if isinstance(address, str) else address
    prog = progress.jobs("measuring (cluster)", quiet)
    try:
        return run_cluster(suite, db, conn, opts, kinds, progress=prog)
    finally:
        prog.close()


def serve_workers(scheduler: str, devices: str | None, slots: int = TIMING.workers_per_gpu,
                  progress: Progress = SILENT) -> None:
    """``benanza worker``: a Dask worker per GPU here (``devices``: ``all``/None or ``0,1,...``),
    connected to ``scheduler``, ``slots`` suite processes sharing each GPU, until Ctrl-C
    (:func:`benanza.runner.cluster.serve_workers`). Raises UsageError for ``slots`` < 1."""
    from benanza.runner import cluster as C

    C.require_distributed()
    C.check_address(scheduler, "--scheduler", local=False)  # before the GPUs are queried
    if slots < 1:
        raise UsageError(f"--workers-per-gpu {slots}: give at least 1")
    chosen = () if not devices or devices.strip().lower() == "all" else parse_devices(devices, 0)
    specs = C.local_specs(chosen, slots)
    progress.say(f"benanza worker: {len(specs)} GPU worker(s) for {scheduler}, {slots} suite process(es) each: "
                 + ", ".join(f"{s.name} ({s.kind})" for s in specs))
    C.serve_workers(scheduler, specs)


def run_framework(suite, db, system_id, opts, quiet, torch: bool | None, stop=None,
                  progress: Progress = SILENT) -> RunSummary | None:
    """The framework's kernels after the suite's (``torch``: None = when available). Returns the
    run summary, or None (with the reason printed unless quiet) when they are not timed.
    ``stop``: a threading.Event (:func:`benanza.runner.run.run_framework_jobs`)."""
    from benanza.runner.run import framework_available, framework_pending, run_framework_jobs
    from benanza.runner.system import partition_excludes_framework

    if torch is False or not framework_pending(suite, db, system_id, opts):
        return None  # (nothing to time: PyTorch is not even imported)
    why = partition_excludes_framework() or framework_available()
    if why:
        if torch:
            raise LibraryError(f"--torch: {why}")
        if not quiet:
            progress.notice(f"the framework's kernels are not timed: {why}")
        return None
    prog = progress.jobs("framework kernels", quiet)
    try:
        return run_framework_jobs(suite, db, system_id, opts, progress=prog, stop=stop)
    finally:
        prog.close()


def run_line(s) -> str:
    line = (f"{s.system.get('gpu_name')}: {s.ok + s.failed} jobs run ({s.failed} failed), {s.skipped} already in "
            f"the database, {s.measurements} measurement records, {s.wall_s:.1f} s")
    prior = getattr(s, "prior", None)
    if prior:
        line += (f"\n  {prior['label']}: {s.prior_skipped:,} of {s.candidates:,} candidates skipped "
                 f"({prior['jobs_seen']} jobs ranked, {prior['jobs_unseen']} not in the prior: timed in full)")
        if prior.get("versions"):
            line += f"; {prior['versions']}"
    for j, r in s.failures[:10]:
        line += f"\n  failed {j}: {r}"
    return line


def bench_measure(suite, database, opts, quiet: bool, torch: bool | None, progress: Progress, stages: dict):
    """``bench``'s stages 3-4: compile, run the suite, time the framework's kernels, on one GPU.
    Where the framework's kernels go (docs/timing.md, "Scheduling": one H100, resnet50 and resnet18):

    * harness to compile: beside the compile (:func:`_compile_beside_framework`), and the run waits
      for them. Fresh quick start 75.3-91.0 s (four benches); letting them go on beside the run
      instead took 89.6 and 93.5 s (the run stage 45.8-52.6 -> 63.2-64.6 s: both sides' lock waits
      doubled);
    * harness cached (nothing to overlap): beside the suite's run, both taking turns on one GPU lock
      (``RunOptions.gpu_lock``). resnet18: 48.3 s with them after the run, 38.7 s beside it, LBLs
      within 1.42 % (median 0.58 %).

    ``BENANZA_FRAMEWORK_BESIDE_RUN``: ``1`` puts them beside the run in both cases, ``0`` never (after
    the run when the harness is cached). Returns the run summaries (suite, framework or None)."""
    from concurrent.futures import ThreadPoolExecutor

    from benanza.runner.run import framework_pending

    say = progress.say
    beside = _compile_beside_framework(suite, database, opts, quiet, torch, progress, stages)
    ts = None
    mode = os.environ.get("BENANZA_FRAMEWORK_BESIDE_RUN", "")
    beside_run = mode != "0"
    if beside is not None and mode != "1":  # the compile stage lasts until they are done too
        t = time.perf_counter()
        ts = beside.finish(opts)
        stages["compile_s"] += time.perf_counter() - t
        stages["torch_s"] = beside.wall_s()
        beside = None
        beside_run = False  # nothing left to time beside the run
    t = time.perf_counter()
    started: list[_Beside] = [beside] if beside is not None else []
    lock = beside.lock if beside is not None else _gpu_lock_prefix(suite)
    pool = ThreadPoolExecutor(1)

    def on_system(system_id: int) -> None:
        # the framework's kernels beside the suite's run (both on one GPU lock), when still to time
        if not started and torch is not False and framework_pending(suite, database, system_id, opts):
            started.append(_start_framework(pool, suite, database, system_id, opts, torch, lock))
            say("[4/5] the framework's kernels beside the suite's run (they take turns on the GPU)")

    try:
        rs = run_suite(suite, database, dataclasses.replace(opts, gpu_lock=lock) if beside_run else opts, quiet,
                       on_system=on_system if beside_run else None, progress=progress)
    except BaseException:
        for b in started:
            b.cancel(opts)
        raise
    finally:
        pool.shutdown(wait=False)
    stages["run_s"] = time.perf_counter() - t
    if started:
        ts = started[0].finish(opts)
        stages["torch_s"] = started[0].wall_s()
        if ts is not None:
            say(f"[4/5] framework kernels (beside the run): {run_line(ts)}")
    elif ts is not None:
        say(f"[4/5] framework kernels (beside the compile): {run_line(ts)}")
    say(f"[4/5] {run_line(rs)}")
    if ts is None or ts.system_id != rs.system_id:  # not timed beside (or for another system): after
        t = time.perf_counter()
        ts = run_framework(suite, database, rs.system_id, opts, quiet, torch, progress=progress)
        if ts is not None:
            stages["torch_s"] = time.perf_counter() - t
            say(f"[4/5] framework kernels: {run_line(ts)}")
    return rs, ts


@dataclasses.dataclass
class _Beside:
    """The framework's kernels being timed beside the compile or beside the suite's run
    (:func:`_bench_measure`): their run's future (its summary or
    None), its stop event, the GPU lock prefix both runs take (``RunOptions.gpu_lock``), when it
    started and ended (``time.perf_counter``)."""

    future: object
    stop: object
    lock: str
    t0: float
    t1: float | None = None

    def wall_s(self) -> float:
        return (self.t1 if self.t1 is not None else time.perf_counter()) - self.t0

    def finish(self, opts):
        """Wait for the run: its summary or None (raises what it raised); the lock files removed."""
        try:
            return self.future.result()
        finally:
            _unlink_locks(self.lock, opts)

    def cancel(self, opts) -> None:
        """Stop the run (its jobs in flight finish, the rest stay pending) and wait for it."""
        self.stop.set()
        self.future.exception()
        _unlink_locks(self.lock, opts)


def _gpu_lock_prefix(suite) -> str:
    import tempfile

    return str(Path(tempfile.gettempdir()) / f"benanza-{os.getpid()}-{id(suite)}")


def _start_framework(pool, suite, database, system_id: int, opts, torch: bool | None, lock: str = "") -> _Beside:
    """The framework's kernels (:func:`run_framework`, quiet) on ``pool``, taking the GPU lock
    ``lock`` (a new one when empty) that the suite's run shares."""
    import threading

    out = _Beside(future=None, stop=threading.Event(), lock=lock or _gpu_lock_prefix(suite), t0=time.perf_counter())
    fw_opts = dataclasses.replace(opts, gpu_lock=out.lock)

    def framework():
        try:
            return run_framework(suite, database, system_id, fw_opts, True, torch, stop=out.stop)
        finally:
            out.t1 = time.perf_counter()

    out.future = pool.submit(framework)
    return out


def _unlink_locks(prefix: str, opts) -> None:
    from benanza.runner.run import gpu_lock_files, shared_gpu_lock

    if shared_gpu_lock():  # the runs took the shared lock (another command may hold it): never removed
        return
    for f in gpu_lock_files(prefix, opts.gpus()).values():
        Path(f).unlink(missing_ok=True)


def _compile_beside_framework(suite, database, opts, quiet: bool, torch: bool | None, progress: Progress,
                              stages: dict):
    """``bench``'s stage 3 with the framework's kernels (which need PyTorch, not the suite) timed on
    the GPU from the start of the compile, when they are to be timed and pending: their system is
    the GPU as benanza's native module sees it (``runner.system.local_system``, the suite's
    fingerprint); they take a GPU lock (``RunOptions.gpu_lock``) that the suite's run shares when
    they go on beside it (``BENANZA_FRAMEWORK_BESIDE_RUN=1``, :func:`_bench_measure`), so no two
    processes time on the GPU at once. Their cold policy is the run's; a job's library best is
    looked up when the job is handed out (:func:`benanza.runner.run.run_framework_jobs`), unknown
    (cold figures taken) while the suite has not measured it. Returns a :class:`_Beside`, or None when the
    suite was compiled alone (the framework's kernels follow the suite's run, or are not timed).
    Raises BuildError as the build does."""
    from concurrent.futures import ThreadPoolExecutor

    from benanza.build.builder import harness_cached
    from benanza.runner.system import local_system, partition_excludes_framework

    t = time.perf_counter()
    beside = torch is not False and not harness_cached(suite.root) and not partition_excludes_framework()
    system = local_system(opts.device) if beside else None
    pool = ThreadPoolExecutor(2)
    jobs = max(1, (os.cpu_count() or 2) - 1) if system is not None else None  # a core for the framework
    build = pool.submit(build_with_progress, suite.root, jobs, quiet or system is not None, progress)
    out = None
    if system is not None:
        progress.say("[3/5] compiling, and timing the framework's kernels meanwhile")
        out = _start_framework(pool, suite, database, database.upsert_system(system), opts, torch)
    pool.shutdown(wait=False)
    try:
        br = build.result()
    except BaseException:
        if out is not None:
            out.cancel(opts)
        raise
    stages["compile_s"] = time.perf_counter() - t
    progress.say(f"[3/5] compiled {br.executable} in {stages['compile_s']:.1f} s")
    return out


def _bench_suite(mls, precisions, layouts, kind_list, conv_p, db, output, quiet: bool, progress: Progress, stages: dict,
                 compile_now: bool = True, train: bool = False, optimizer: str = "sgd", gpus=None):
    """``bench``'s stages 1-3: open the database (a bad URL fails before the long stages; nothing is
    created when no layer can be benchmarked), generate the suite into ``output`` (default: a
    cache folder per model) and compile it (unless ``compile_now`` is false), with a progress bar on
    a terminal unless ``quiet``. ``gpus``: the devices the suite will run on here (None: elsewhere, a
    cluster), checked after the database opens and before anything is generated
    (:func:`benanza.runner.system.require_gpu`: DeviceError, exit 6, in well under a second, where
    compiling first took minutes to learn it). Returns (database, suite); the stages' wall times (s)
    go into ``stages``."""
    from benanza.database.store import open_db
    from benanza.generation.generator import generate as gen, plan_jobs, training_folds_note

    if not plan_jobs(mls, precisions):  # fail before creating anything
        raise UsageError(f"{mls[0].model}: no benchmarkable layer (every layer is zero-cost or unsupported)")
    database = open_db(db)  # before the long stages: a bad URL fails now
    if gpus is not None:
        from benanza.runner.system import require_gpu

        require_gpu(list(gpus), "benanza bench")
    if not quiet:
        for n in database.notices:
            progress.notice(n)
    say = progress.say
    for ml in mls:
        s = ml.summary()
        say(f"[1/5] {ml.model} batch {ml.batch}: {s['layers']} layers, {s['unique_layers']} unique, "
            f"{s['unique_benchmarked']} unique to benchmark, unsupported: "
            f"{', '.join(f'{k} x{v}' for k, v in s['unsupported'].items()) or 'none'}")
    t = time.perf_counter()
    shas = sorted({ml.sha256 for ml in mls})
    name = f"{mls[0].model}-{mls[0].sha256[:12]}" if len(shas) == 1 else \
        f"zoo-{len(shas)}-{hashlib.sha256(''.join(shas).encode()).hexdigest()[:12]}"
    folder = output or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / "suites" / name
    suite = gen(mls, precisions, folder, layouts, kind_list, conv_p, train=train, optimizer=optimizer)
    stages["generate_s"] = time.perf_counter() - t
    say(f"[2/5] generated {len(suite.jobs)} jobs in {folder}{training_folds_note(mls, train)}")
    if compile_now:
        t = time.perf_counter()
        br = build_with_progress(folder, None, quiet, progress)
        stages["compile_s"] = time.perf_counter() - t
        say(f"[3/5] compiled {br.executable} in {stages['compile_s']:.1f} s")
    return database, suite


def build_with_progress(folder: Path, jobs: int | None, quiet: bool, progress: Progress = SILENT) -> BuildResult:
    """:func:`benanza.build.builder.build` with ``progress``'s build bars (none when ``quiet``)."""
    with progress.build(quiet) as bar:
        return do_build(folder, jobs=jobs, progress=bar)


def _bench_analyze(mls, precisions, layouts, conv_p, database, rs, say, stages: dict):
    """``bench``'s stage 5: the LBL of every batch and data type on the system just measured ->
    (system, analyses); :class:`UsageError` when a layer table has no measurement at all."""
    from benanza.database.store import system_fingerprint

    t = time.perf_counter()
    fingerprint = system_fingerprint(rs.system)
    lbs = [lower_bound(Scenario(ml.path, ml.batch, p, tuple(layouts), conv_precision=conv_p),
                           database, ml, fingerprint) for ml in mls for p in precisions]
    system, results = lbs[0].system, [lb.analysis for lb in lbs]
    stages["analyze_s"] = time.perf_counter() - t
    say(f"[5/5] analyzed in {stages['analyze_s']:.2f} s")
    return system, results




def find_ncu() -> str:
    """Nsight Compute's ncu for ``bench --counters`` (:func:`benanza.runner.counters.find_ncu`), or
    UsageError in one line: checked before any work."""
    from benanza.runner.counters import find_ncu as do_find

    return do_find()


def counters(r: BenchResult, ncu: str, timing: Timing, force: bool, progress: Progress = SILENT) -> dict:
    """``bench --counters``: the best implementation of every measured layer of ``r`` (with
    ``--train``, of every measured call of its training steps too) profiled once with Nsight Compute
    and stored (:func:`benanza.runner.counters.profile_best`); what was done, as a JSON-ready dict
    (also in ``r.counters``; its wall time in ``r.stages["counters_s"]``)."""
    from benanza.build.builder import suite_executable
    from benanza.runner.counters import profile_best

    opts = run_options(timing)
    t = time.perf_counter()
    run = profile_best(r.analyses, r.suite.jobs, suite_executable(r.suite.root), r.database, r.system.id,
                       opts.suite_args(opts.gpus()[0]), ncu, force, progress.say, r.training)
    r.stages["counters_s"] = time.perf_counter() - t
    progress.say(run.line())
    r.counters = {"profiled": run.profiled, "stored": run.stored, "framework_kernels": run.framework,
                  "failures": [{"layer": n, "reason": w} for n, w in run.failures]}
    return r.counters


@dataclass
class RunResult:
    """What ``benanza run`` did: the suite's run summaries (one, or one per GPU kind on a cluster),
    the framework kernels' run (None when not timed), the cluster's address (None: this machine)."""

    runs: list[RunSummary]
    framework: RunSummary | None
    cluster: str | None


def library_notice(progress: Progress) -> None:
    """Before a measurement on this machine: a notice when its cuDNN or cuBLAS is older than the
    ones benanza is built with (:func:`benanza.versions.older_libraries`; torch's pinned wheels
    replace benanza's); nothing when they cannot be read (the measurement then says why)."""
    from benanza.runner.system import library_versions
    from benanza.versions import older_libraries

    try:
        line = older_libraries(library_versions())
    except (BenanzaError, RuntimeError, OSError):
        return
    if line:
        progress.notice(line)


def run(req: RunRequest, progress: Progress = SILENT) -> RunResult:
    """``benanza run``: a built suite (``req.folder``) on this machine's GPUs, or on a Dask cluster,
    into the database; the framework's kernels after the suite's on this machine. The database is
    closed when it ends, whole or stopped (Ctrl-C), so no -wal or -shm file stays beside it."""
    from benanza.database.store import open_db
    from benanza.generation.generator import load_suite

    kinds = cluster_kinds(req.cluster, ",".join(req.gpu_kinds) if req.gpu_kinds else None)  # before any work
    if req.cluster is not None and req.timing.prior:
        raise UsageError("--prior with --cluster: the prior is read on this machine's GPU runs only (run without "
                         "--cluster)")
    suite = load_suite(req.folder)
    opts = run_options(req.timing)
    database = None
    try:
        database = open_db(req.db)
        for n in database.notices:
            progress.notice(n)
        if req.cluster is not None:
            runs = run_cluster(suite, database, opts, req.cluster, kinds, req.quiet, req.timing.devices, progress)
            return RunResult(runs, None, req.cluster)
        library_notice(progress)
        s = run_suite(suite, database, opts, req.quiet, progress=progress)
        ts = run_framework(suite, database, s.system_id, opts, req.quiet, req.torch, progress=progress)
        return RunResult([s], ts, None)
    finally:  # its connections closed, stopped or not: SQLite removes the -wal and -shm files
        if database is not None:
            database.close()


@dataclass
class CeilingsResult:
    """What ``benanza ceilings`` measured: the system record, the ceiling rows
    (:class:`benanza.runner.ceilings.Ceiling`) and the ceilings that failed."""

    system: dict
    rows: list
    failed: list[str]


def ceilings(db: str | None, device: int, output: Path | None, quiet: bool,
             progress: Progress = SILENT) -> CeilingsResult:
    """Measure this GPU's ceilings (DRAM bandwidth, GEMM rate per data type, FP32 FMA rate) with the
    ceilings suite (compiled into ``output``, default a cache folder) and store them with the system."""
    from benanza.database.store import open_db
    from benanza.runner import ceilings as C

    from benanza.runner.system import require_gpu

    database = open_db(db)
    require_gpu(device, "benanza ceilings")  # before the compile: minutes to learn there is no GPU
    library_notice(progress)
    folder = output or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / "suites" / "ceilings"
    br = build_with_progress(C.generate_suite(folder), None, quiet, progress)
    system, rows, failed = C.measure(br.executable, device)
    sid = database.upsert_system(system)
    database.write_ceilings(sid, [r.to_row() for r in rows])
    return CeilingsResult(system, rows, failed)
