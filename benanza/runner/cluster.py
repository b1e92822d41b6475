"""Runner over a fleet of GPUs: a suite's jobs spread over the GPUs of several hosts through Dask
distributed (``pip install benanza[cluster]``; imported only when a cluster is asked for).

A *worker* is one ``distributed.Nanny`` per local GPU (``benanza worker --scheduler ADDRESS``), its
process pinned to that GPU (``CUDA_VISIBLE_DEVICES`` = the GPU's uuid, so the suite runs on device 0)
and declaring the Dask resources ``{"gpu": 1, <kind>: S}``, <kind> the GPU's name made an identifier
(:func:`gpu_kind`: ``NVIDIA H100 80GB HBM3`` -> ``NVIDIA_H100_80GB_HBM3``) and S its slots (``--workers-per-gpu``,
default 3: S threads). A *task* is a chunk of jobs of one suite for one GPU kind (``resources={kind: 1}``:
only a worker of that kind takes it, S tasks at a time), run on the worker by the local runner's own code
(:func:`benanza.runner.run.drive_jobs`: one suite process fed the jobs, a crashed, hung or sticky-error job
recorded failed with the reason and the process restarted for the rest). The S suite processes of one
worker share its GPU through one lock file, as the local runner's ``--workers-per-gpu`` processes do
(harness.hpp, ``Context::gpu_acquire``): one builds engine plans while another times calls. The task writes nothing: it returns each job's records with where
it ran (host, GPU uuid, SM clocks during its measurements), and the client stores every finished job in
one transaction (:meth:`benanza.database.store.Database.write_job`), so the database is written by one
process and each job exactly once: a job already stored in this run is skipped, never written twice.

A worker lost mid-task (killed, its host gone): the scheduler runs the task again on another worker of
the kind (``distributed.scheduler.allowed-failures`` times, Dask's default 3), and past that its jobs
are stored failed with the reason, never retried forever. The suite binary must be reachable by every
worker at the path the client sees (same host or a shared file system); a worker that lacks it fails
the run with one line saying so.
"""
from __future__ import annotations

import math
import os
import re
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from benanza.build.builder import suite_executable
from benanza.database.records import MeasurementLine, Record
from benanza.database.store import CONNECT_TIMEOUT_S, Database, connect_timeout, system_fingerprint  # noqa: F401 (the bound's one reader)
from benanza.spec import TIMING
from benanza.errors import BenanzaError, DeviceError, UsageError
from benanza.generation.generator import Suite
from benanza.runner.run import (JobQueue, RunOptions, RunSummary, Worker, drive_jobs, SharedRun, job_cost, query_system,
                                register_suite)

#: the one line of ``--cluster`` without Dask distributed installed
MISSING = "--cluster needs Dask distributed: pip install benanza[cluster]"

#: the most jobs in one task: a suite process starts once per task (CUDA context, cuDNN and cuBLAS
#: load: about a second, overlapped by the worker's other slots), and a worker lost mid-task costs its
#: whole chunk again
MAX_CHUNK = 16

#: how long the client waits for the first worker to register (s)
WORKER_WAIT_S = 30.0


def require_distributed():
    """The ``distributed`` module, or :class:`UsageError` :data:`MISSING` when it is not installed."""
    try:
        import distributed
    except ImportError:
        raise UsageError(MISSING) from None
    return distributed


def gpu_kind(gpu_name: str) -> str:
    """A GPU's kind, the Dask resource its workers declare: its name (as ``benanza system`` prints
    it) with every run of characters other than letters and digits made one ``_``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", gpu_name).strip("_") or "GPU"


@dataclass(frozen=True)
class WorkerSpec:
    """One Dask worker: its name, GPU kind and the environment that pins its process to its GPU."""

    name: str
    kind: str
    env: dict = field(default_factory=dict)
    slots: int = 1  # suite processes on the GPU at once (tasks the worker runs at a time)

    def resources(self) -> dict:
        return {"gpu": 1, self.kind: self.slots}


def local_specs(devices: tuple[int, ...] = (), slots: int = TIMING.workers_per_gpu) -> list[WorkerSpec]:
    """One :class:`WorkerSpec` per GPU here (``devices``: these indices; empty: all), from the
    native device query (:func:`benanza.runner.system.describe`): kind from the GPU's name, pinned
    by its uuid, ``slots`` suite processes sharing it (``--workers-per-gpu``). Raises :class:`DeviceError` without a CUDA device, :class:`UsageError` for an
    index that is not one."""
    from benanza.runner import system as sysq

    info = sysq.describe()
    devs = info["devices"]
    if not devs:
        raise DeviceError(info.get("device_error") or "no CUDA device here")
    chosen = tuple(devices) or tuple(range(len(devs)))
    bad = [d for d in chosen if not 0 <= d < len(devs)]
    if bad:
        raise UsageError(f"--devices {','.join(map(str, bad))}: this host has GPUs 0 to {len(devs) - 1}")
    host = socket.gethostname()
    return [WorkerSpec(f"{host}-gpu{d}", gpu_kind(devs[d]["gpu_name"]),
                       {"CUDA_VISIBLE_DEVICES": devs[d].get("uuid") or str(d)}, max(1, slots)) for d in chosen]


def serve_workers(scheduler: str, specs: list[WorkerSpec]) -> None:
    """``benanza worker``: run a Nanny per spec, connected to ``scheduler`` (``tcp://HOST:PORT``),
    until they end or Ctrl-C. The address is checked (:func:`check_address`) and the scheduler asked
    who it is (:func:`probe_scheduler`, within :func:`connect_timeout`) before any Nanny starts; the
    Nannies' scratch space is a temporary folder removed when they end. Raises :class:`UsageError`
    when the address is malformed or no Dask scheduler answers there."""
    import asyncio
    import shutil

    check_address(scheduler, "--scheduler", local=False)
    timeout = connect_timeout()
    distributed = require_distributed()
    probe_scheduler(scheduler, timeout, "--scheduler")
    scratch = tempfile.mkdtemp(prefix="benanza-worker-")

    async def main():
        nannies = [distributed.Nanny(scheduler, nthreads=s.slots, name=s.name, resources=s.resources(), env=dict(s.env),
                                     local_directory=scratch) for s in specs]
        try:
            await asyncio.wait_for(asyncio.gather(*nannies), max(timeout, WORKER_WAIT_S))
        except (OSError, asyncio.TimeoutError) as e:
            raise UsageError(f"--scheduler {scheduler}: cannot reach the scheduler ({_first_line(e)})") from None
        try:
            await asyncio.gather(*(n.finished() for n in nannies))
        finally:
            await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)

    try:
        asyncio.run(main())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def local_cluster(specs: list[WorkerSpec]):
    """A cluster on this host (``--cluster local``): a scheduler and one Nanny process per spec
    (``slots`` threads each), as :func:`serve_workers` starts them. Close it when done."""
    distributed = require_distributed()
    workers = {s.name: {"cls": distributed.Nanny, "options": {"nthreads": s.slots, "resources": s.resources(),
                                                              "env": dict(s.env), "silence_logs": 40}}
               for s in specs}
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
    return distributed.SpecCluster(workers=workers, scheduler=scheduler, silence_logs=40)


# ------------------------------------------------------------------------------- on the worker

@dataclass
class JobOutcome:
    """What a worker did for one job: ``write_job``'s arguments (status ok/failed, message, the
    typed records, wall s) and the SM clock range (MHz) over its measurements."""

    job: str
    status: str
    message: str
    records: list[Record]
    wall_s: float | None
    sm_clock_mhz: tuple[int, int] | None = None


@dataclass
class ChunkResult:
    """A task's answer: where it ran (host, the worker's system record as its suite reports it, with
    the GPU's uuid) and the outcome of every job of the chunk."""

    host: str
    system: dict
    outcomes: list[JobOutcome]
    span: tuple[float, float] = (0.0, 0.0)  # the task's start and end on the worker (time.time(), s)


class _Chunk:
    """The outcomes one task waits for: set ``done`` when every job of it has one, or ``error``."""

    def __init__(self, ids: list[str]):
        self.left = set(ids)
        self.outcomes: list[JobOutcome] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        if not self.left:
            self.done.set()


class _SlotPool:
    """A worker's suite processes for one suite and set of options: ``slots`` driver threads of the
    local runner (:func:`benanza.runner.run.drive_jobs`) over one open job queue, each keeping its
    suite process (CUDA context, cuDNN and cuBLAS handles, loaded kernels) from task to task; a
    process ends after :data:`IDLE_S` without a job. A task puts its jobs in the queue and waits for
    their outcomes (:meth:`run`); the pool is also the drivers' database (:meth:`write_job`), which
    hands each job's outcome to the task waiting for it."""

    def __init__(self, exe: str, opt: RunOptions, slots: int, system: dict):
        self.queue = JobQueue([], open_for_s=IDLE_S)
        self.lock = threading.Lock()
        self.waiting: dict[str, list[_Chunk]] = {}
        self.by_id: dict = {}
        worker = Worker(argv=lambda jobs_file, device: [exe, "--jobs", jobs_file] + opt.suite_args(device),
                        jobs_text=lambda ids: "\n".join(ids) + "\n")
        lock = {0: str(Path(tempfile.gettempdir()) / f"benanza-worker-{os.getpid()}-{id(self)}-gpu0.lock")} \
            if slots > 1 else {}
        self.ctx = SharedRun(db=self, system_id=0, run_id=0, summary=RunSummary(0, system, None, 0, 0),
                             progress=None, by_id=self.by_id, opt=opt, worker=worker, gpu_locks=lock,
                             log_path=Path(tempfile.gettempdir()) / f"benanza-worker-{os.getpid()}.log")
        self.slots, self.running = slots, 0

    def _start_slots(self) -> None:
        """Driver threads up to ``slots`` (under ``self.lock``): a thread ends after
        :data:`POOL_IDLE_S` without a job, so a long-lived worker keeps none for suites done."""
        while self.running < self.slots:
            self.running += 1
            threading.Thread(target=self._slot, name=f"benanza-slot-{self.running}", daemon=True).start()

    def _slot(self) -> None:
        while True:
            if not self.queue.wait_for_jobs(POOL_IDLE_S):
                with self.lock:  # run() queues and starts threads under this lock: no job is left behind
                    if not len(self.queue):
                        self.running -= 1
                        return
                continue
            try:
                drive_jobs(self.ctx, 0, self.queue)
            except BaseException as e:  # the suite cannot start here: every waiting task fails with it
                with self.lock:
                    chunks = {id(c): c for cs in self.waiting.values() for c in cs}.values()
                    self.waiting.clear()
                    while self.queue.take() is not None:
                        pass
                for c in chunks:
                    c.error = e
                    c.done.set()

    def run(self, jobs: list) -> list[JobOutcome]:
        """The outcomes of ``jobs`` once each has one; raises what stopped the pool's drivers."""
        c = _Chunk([j.id for j in jobs])
        with self.lock:
            for j in jobs:
                self.by_id[j.id] = j
                self.waiting.setdefault(j.id, []).append(c)
            self.queue.put([j.id for j in jobs])
            self._start_slots()
        c.done.wait()
        if c.error is not None:
            raise c.error
        return c.outcomes

    def write_job(self, system_id, run_id, job, layer_key, precision, status, message, records, wall_s=None,
                  layout="NCHW") -> None:
        clocks = [c for r in records if isinstance(r, MeasurementLine)
                  for c in (r.sm_clock_min_mhz, r.sm_clock_max_mhz) if c]
        o = JobOutcome(job, status, message, list(records), wall_s, (min(clocks), max(clocks)) if clocks else None)
        with self.lock:
            for c in self.waiting.pop(job, []):
                c.outcomes.append(o)
                c.left.discard(job)
                if not c.left:
                    c.done.set()


#: seconds a worker's idle suite process waits for the next task's jobs before it ends
IDLE_S = 10.0
#: seconds a worker's idle driver thread waits for jobs of its suite before it ends
POOL_IDLE_S = 60.0

_SYSTEMS: dict[str, dict] = {}  # suite executable -> this worker's system record (queried once)
_POOLS: dict[tuple, _SlotPool] = {}  # (suite executable, its options) -> this worker's suite processes
_SYSTEMS_LOCK = threading.Lock()


def _worker_system(exe: str) -> dict:
    with _SYSTEMS_LOCK:
        if exe not in _SYSTEMS:
            _check_exe(exe)
            _SYSTEMS[exe] = query_system(Path(exe), 0)
        return _SYSTEMS[exe]


def _check_exe(exe: str) -> None:
    if not Path(exe).is_file():
        raise UsageError(f"worker on {socket.gethostname()}: no suite at {exe}; the suite folder must be on a file "
                         f"system every worker shares, at the same path")


def probe_system(exe: str) -> dict:
    """Task: this worker's system record (``suite --system`` on its GPU)."""
    return _worker_system(exe)


def _worker_slots() -> int:
    """The tasks this Dask worker runs at once (its threads; 1 outside a worker)."""
    try:
        from distributed import get_worker

        return max(1, int(get_worker().state.nthreads))
    except (ImportError, ValueError, AttributeError):  # not in a Dask worker (called directly)
        return 1


def _pool(exe: str, opt: RunOptions, system: dict) -> _SlotPool:
    key = (exe, tuple(opt.suite_args(0)), opt.job_timeout_s)
    with _SYSTEMS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = _SlotPool(exe, opt, _worker_slots(), system)
        return _POOLS[key]


def run_chunk(exe: str, jobs: list, opt: RunOptions) -> ChunkResult:
    """Task: run ``jobs`` (:class:`benanza.generation.generator.Job`) with the suite ``exe`` on this
    worker's GPU (device 0 of its ``CUDA_VISIBLE_DEVICES``) through its :class:`_SlotPool` (the local
    runner's drivers: a crashed, hung or sticky-error job recorded failed with the reason and its
    process restarted; the worker's slots share the GPU through one lock); returns their outcomes,
    stores nothing. Raises :class:`UsageError` when the suite is not here, :class:`DeviceError` when
    it cannot start."""
    t0 = time.time()
    system = _worker_system(exe)
    _check_exe(exe)
    opt = replace(opt, device=0, devices=(), phases_log=None)
    outcomes = _pool(exe, opt, system).run(jobs)
    return ChunkResult(socket.gethostname(), system, outcomes, (t0, time.time()))


# ------------------------------------------------------------------------------- on the client

def cluster_kinds(client) -> dict[str, list[str]]:
    """The GPU kinds of the cluster's workers: kind -> worker names (a worker's resources other
    than ``gpu``)."""
    return _kinds_and_slots(client)[0]


def _kinds_and_slots(client) -> tuple[dict[str, list[str]], dict[str, int]]:
    """One scheduler query: kind -> worker names, and kind -> the tasks its workers run at once (the
    sum of their slots, the value of the kind's resource)."""
    kinds: dict[str, list[str]] = {}
    slots: dict[str, int] = {}
    for addr, w in client.scheduler_info(n_workers=-1)["workers"].items():
        for r, n in w.get("resources", {}).items():
            if r != "gpu":
                kinds.setdefault(r, []).append(str(w.get("name", addr)))
                slots[r] = slots.get(r, 0) + max(1, int(n))
    return kinds, slots


#: how often a wait for the connection looks at its deadline and lets Ctrl-C through (s)
POLL_S = 0.2

_ADDRESS = re.compile(r"(?:tcp://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")


def check_address(address: str, flag: str = "--cluster", local: bool = True) -> str:
    """``address`` when it is a scheduler's address ``tcp://HOST:PORT`` (or ``HOST:PORT``; HOST a
    name, an IPv4 or a bracketed IPv6 address; PORT 1 to 65535), or ``local`` where ``local`` is
    allowed; else :class:`UsageError` naming ``flag`` (an empty ``--cluster ''`` too: never a silent
    local run)."""
    if local and address == "local":
        return address
    m = _ADDRESS.fullmatch(address or "")
    if m is None or not 1 <= int(m.group(2)) <= 65535:
        shown = address if address and address.strip() == address and address.isprintable() else repr(address)
        raise UsageError(f"{flag} {shown}: give the scheduler's address as tcp://HOST:PORT (PORT 1 to 65535)"
                         + (" or local" if local else ""))
    return address


def probe_scheduler(address: str, timeout: float, flag: str = "--cluster") -> None:
    """Ask the process at ``address`` (checked by :func:`check_address`) who it is, within
    ``timeout`` s in all: a TCP connection, then Dask's ``identity`` message, whose answer must come
    from a Dask scheduler. Raises :class:`UsageError` (one line naming ``flag`` and the address) when
    nothing listens, nothing answers in time (a silent port) or something else answers (an HTTP
    server: its bytes read as a Dask frame header once asked for exabytes)."""
    import asyncio

    from distributed.comm import connect

    deadline = time.monotonic() + timeout
    host, port = _ADDRESS.fullmatch(address).groups()
    where = f"{flag} {address}"
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise UsageError(f"{where}: cannot reach the scheduler ({e.strerror or _first_line(e)})") from None

    async def ask():
        comm = await connect(address if "://" in address else f"tcp://{address}",
                             timeout=max(0.1, deadline - time.monotonic()))
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    try:
        reply = asyncio.run(asyncio.wait_for(ask(), max(0.1, deadline - time.monotonic())))
    except (asyncio.TimeoutError, TimeoutError):
        raise UsageError(f"{where}: no Dask scheduler answered within {timeout:g} s "
                         "(BENANZA_CONNECT_TIMEOUT sets the wait)") from None
    except Exception as e:  # noqa: BLE001 - whatever a stranger's bytes make Dask's reader raise
        why = "its answer is not Dask's protocol" if isinstance(e, MemoryError) else \
            f"{type(e).__name__}: {_first_line(e)}"
        raise UsageError(f"{where}: not a Dask scheduler ({why})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        kind = reply.get("type") if isinstance(reply, dict) else type(reply).__name__
        raise UsageError(f"{where}: not a Dask scheduler (it answered as {str(kind)[:60]!r})")


def _connect(address: str, devices: tuple[int, ...], slots: int = TIMING.workers_per_gpu,
             timeout: float = CONNECT_TIMEOUT_S):
    """(client, cluster or None): ``local`` starts :func:`local_cluster` over this host's GPUs
    (``devices``: these; empty: all), ``slots`` suite processes per GPU; another address is probed
    (:func:`probe_scheduler`, ``timeout`` s) before a client connects."""
    distributed = require_distributed()
    cluster = None
    if address == "local":
        specs = local_specs(tuple(devices), slots)
        cluster = local_cluster(specs)
        client = distributed.Client(cluster)
        client.wait_for_workers(len(specs), timeout=WORKER_WAIT_S * 4)
        return client, cluster
    probe_scheduler(address, timeout)
    try:
        client = distributed.Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--cluster {address}: cannot reach the scheduler ({_first_line(e)})") from None
    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT_S)
    except TimeoutError:
        client.close()
        raise UsageError(f"--cluster {address}: no worker registered within {WORKER_WAIT_S:.0f} s; start "
                         f"`benanza worker --scheduler {address}` on each GPU host") from None
    return client, cluster


class ClusterConnection:
    """A connection to the cluster at ``address`` (``tcp://HOST:PORT`` or ``local``: a cluster over
    this host's GPUs ``devices``, ``slots`` suite processes each) opened in a background (daemon)
    thread, so that ``bench --cluster`` starts it before it processes, generates and compiles the
    suite (a local cluster's start takes about 2 s on a host with two H100s: docs/fleet.md).
    The address and ``$BENANZA_CONNECT_TIMEOUT`` are checked here, in the caller's thread
    (:class:`UsageError`). :meth:`client` waits for it, at most the connect timeout plus the workers'
    wait, in short steps that let Ctrl-C through, and raises what opening it raised; :meth:`close`
    closes what was opened, without waiting for an open still under way (that one closes itself)."""

    def __init__(self, address: str, devices: tuple[int, ...] = (), slots: int = TIMING.workers_per_gpu):
        check_address(address)
        self.timeout = connect_timeout()
        require_distributed()
        self.address = address
        self.open_s: float | None = None  # how long opening took
        self._t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: tuple | None = None
        self._error: BaseException | None = None
        self._closed = False
        threading.Thread(target=self._run, args=(devices, slots), name="benanza-cluster-connect", daemon=True).start()

    def _run(self, devices, slots):
        try:
            result = self._open(devices, slots)
        except BaseException as e:  # noqa: BLE001 - handed to client()
            self._error = e
        else:
            with self._lock:
                self._result = result
                late = self._closed
            if late:  # closed while opening: nobody will use it
                _close_opened(result)
        finally:
            self._done.set()

    def _open(self, devices, slots):
        try:
            return _connect(self.address, devices, slots, self.timeout)
        finally:
            self.open_s = time.perf_counter() - self._t0

    def _wait_s(self) -> float:
        return self.timeout + (WORKER_WAIT_S * 4 if self.address == "local" else WORKER_WAIT_S) + 5.0

    def client(self):
        deadline = self._t0 + self._wait_s()
        while not self._done.wait(POLL_S):
            if time.perf_counter() > deadline:
                raise UsageError(f"--cluster {self.address}: the cluster did not answer within {self._wait_s():.0f} s "
                                 "(BENANZA_CONNECT_TIMEOUT sets the wait)")
        if self._error is not None:
            raise self._error
        return self._result[0]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            result, self._result = self._result, None
        if result is not None:
            _close_opened(result)


def _close_opened(result: tuple) -> None:
    client, cluster = result
    client.close()
    if cluster is not None:
        cluster.close()


def run_cluster(suite: Suite, db: Database, address, options: RunOptions | None = None,
                kinds: list[str] | None = None, progress: Callable[[str, dict], None] | None = None,
                chunk: int | None = None, devices: tuple[int, ...] = ()) -> list[RunSummary]:
    """Run the suite's pending jobs on every GPU kind ``kinds`` (None: each kind the cluster has) of
    the Dask cluster at ``address`` (``tcp://HOST:PORT``, ``local`` for this host's GPUs, a
    :class:`ClusterConnection` opened earlier (closed here), or a ``distributed.Client``), each job once per kind, the longest first (:func:`job_cost`), in chunks
    of at most ``chunk`` jobs (default: ``$BENANZA_CLUSTER_CHUNK``, else up to :data:`MAX_CHUNK`, at least
    four chunks per worker slot);
    ``devices``: the GPUs of ``local`` (empty: all), each with ``options.workers_per_gpu`` slots.
    Each finished job is stored by this process in one transaction, once, with its host, GPU uuid
    and SM clocks in its message. ``progress`` as :func:`benanza.runner.run.run_suite`'s, over all
    workers. Returns one :class:`RunSummary` per kind. Raises :class:`UsageError` when Dask is
    missing (:data:`MISSING`), the scheduler cannot be reached, a wanted kind has no worker or the
    suite is not built; what a task raised (a worker without the suite, no device) fails the run."""
    if isinstance(address, str):
        check_address(address)
    require_distributed()
    opt = options or RunOptions()
    exe = suite_executable(suite.root)
    if not exe.exists():
        raise UsageError(f"{suite.root}: suite not built (no {exe}); run `benanza build {suite.root}`")
    register_suite(suite, db)
    conn = ClusterConnection(address, devices, opt.workers_per_gpu) if isinstance(address, str) else \
        address if isinstance(address, ClusterConnection) else None
    t = time.perf_counter()
    out = []
    try:
        client = conn.client() if conn is not None else address
        wait_s = time.perf_counter() - t
        out = _run_on(client, suite, db, str(exe), opt, kinds, progress, chunk,
                      conn.address if conn is not None else "a Dask client")
        return out
    finally:
        t = time.perf_counter()
        if conn is not None:
            conn.close()
        for s in out:  # connect_s: the time the run waited for the connection (opened earlier by bench)
            s.timeline.update(connect_s=round(wait_s, 3), close_s=round(time.perf_counter() - t, 3),
                              open_s=round(conn.open_s or 0.0, 3) if conn is not None else 0.0)


@dataclass
class _KindRun:
    kind: str
    system_id: int
    summary: RunSummary
    pending: list


def _plan_kind(client, kind: str, suite: Suite, db: Database, exe: str, opt: RunOptions) -> _KindRun:
    """A kind's system (``suite --system`` on one of its workers) and its pending jobs, longest first."""
    system = client.submit(probe_system, exe, key=f"benanza-system-{kind}-{time.time_ns()}", resources={kind: 1},
                           pure=False).result()
    sid = db.upsert_system(system, authoritative=True)
    done = set() if opt.force else db.jobs_done(sid, ("ok",) if opt.retry_failed else ("ok", "failed"))
    pending = sorted((j for j in suite.jobs if j.id not in done), key=lambda j: (-job_cost(j), j.id))
    return _KindRun(kind, sid, RunSummary(sid, system, None, len(pending), len(suite.jobs) - len(pending)), pending)


def _run_on(client, suite: Suite, db: Database, exe: str, opt: RunOptions, kinds, progress, chunk,
            where: str) -> list[RunSummary]:
    from distributed import as_completed

    have, slots = _kinds_and_slots(client)
    wanted = list(dict.fromkeys(kinds)) if kinds else sorted(have)
    missing = [k for k in wanted if k not in have]
    if missing or not wanted:
        raise UsageError(f"--cluster {where}: no worker of GPU kind {', '.join(missing) or '(any)'}; the workers "
                         f"have {', '.join(f'{k} x{len(v)}' for k, v in sorted(have.items())) or 'no GPU kind'}")
    models = ",".join(sorted({m["model"] for m in suite.manifest.get("models", [])}))
    tp = time.perf_counter()
    runs = [_plan_kind(client, k, suite, db, exe, opt) for k in wanted]
    probe_s = time.perf_counter() - tp
    total = sum(len(r.pending) for r in runs)
    if progress:
        progress("start", {"total": total, "skipped": sum(r.summary.skipped for r in runs),
                           "gpus": sum(len(have[k]) for k in wanted)})
    t0 = time.perf_counter()
    futures = {}
    for r in runs:
        if not r.pending:
            continue
        r.summary.run_id = db.start_run(r.system_id, str(suite.root), f"{models} (cluster, {r.kind})",
                                        len(r.pending))
        n = chunk or int(os.environ.get("BENANZA_CLUSTER_CHUNK") or 0) or \
            max(1, min(MAX_CHUNK, math.ceil(len(r.pending) / (4 * slots.get(r.kind, 1)))))
        parts = [r.pending[i:i + n] for i in range(0, len(r.pending), n)]
        for i, part in enumerate(parts):  # longest first: the scheduler runs higher priorities first
            f = client.submit(run_chunk, exe, part, opt, key=f"benanza-{r.kind}-run{r.summary.run_id}-{i}",
                              resources={r.kind: 1}, priority=len(parts) - i, pure=False, retries=0)
            futures[f] = (r, part)
    store = _Store(db, progress, total)
    try:
        for f in as_completed(list(futures)):
            r, part = futures[f]
            store.chunk(r, part, f)
    except BaseException as e:
        for f in futures:
            f.cancel()
        interrupted = isinstance(e, KeyboardInterrupt)
        for r in runs:
            r.summary.wall_s = time.perf_counter() - t0
            r.summary.interrupted = interrupted
            if r.summary.run_id is not None:
                db.finish_run(r.summary.run_id, "interrupted" if interrupted else "failed",
                              r.summary.ok + r.summary.failed, "interrupted by the user" if interrupted else
                              str(e)[:500])
        raise
    for r in runs:
        r.summary.wall_s = time.perf_counter() - t0
        r.summary.timeline.update(store.timeline(r.kind), probe_s=round(probe_s, 3),
                                  tasks=sum(1 for x in futures.values() if x[0] is r), slots=slots.get(r.kind, 0))
        if r.summary.run_id is not None:
            db.finish_run(r.summary.run_id, "completed", r.summary.ok + r.summary.failed)
    if progress:
        progress("end", {})
    return [r.summary for r in runs]


class _Store:
    """The client's writes: each job of a finished chunk in one transaction, once."""

    def __init__(self, db: Database, progress, total: int):
        self.db, self.progress, self.total = db, progress, total
        self.stored: set[tuple[str, str]] = set()  # (system fingerprint, job id)
        self.systems: dict[str, int] = {}
        self.done = self.failed = 0
        self.t0 = time.time()
        self.spans: dict[str, list] = {}  # kind -> (task start, task end, its jobs' wall s, store s)

    def timeline(self, kind: str) -> dict:
        """Where the kind's time went (s from the first submission): the first task's start, the last
        one's end, the tasks' busy time summed over the slots, their jobs' wall time, and this
        process's database writes."""
        sp = self.spans.get(kind) or [(self.t0, self.t0, 0.0, 0.0)]
        return {"first_task_start_s": round(min(x[0] for x in sp) - self.t0, 3),
                "last_task_end_s": round(max(x[1] for x in sp) - self.t0, 3),
                "task_busy_s": round(sum(x[1] - x[0] for x in sp), 3),
                "job_wall_s": round(sum(x[2] for x in sp), 3), "store_s": round(sum(x[3] for x in sp), 3),
                "done_s": round(time.time() - self.t0, 3)}

    def chunk(self, r: _KindRun, part: list, future) -> None:
        from distributed import KilledWorker

        by_id = {j.id: j for j in part}
        try:
            res: ChunkResult = future.result()
        except KilledWorker as e:  # its worker died allowed-failures times: failed, not retried again
            why = f"its Dask worker was lost each time it ran ({_first_line(e)})"
            self._write(r, r.summary.system, [JobOutcome(j.id, "failed", why, [], None) for j in part], by_id, "")
            return
        except BenanzaError:
            raise
        except Exception as e:  # what a task raised that benanza did not: one line
            raise DeviceError(f"a cluster task failed: {type(e).__name__}: {_first_line(e)}") from None
        where = f"host {res.host}, {res.system.get('uuid') or 'GPU ?'}"
        t = time.perf_counter()
        self._write(r, res.system, res.outcomes, by_id, where)
        self.spans.setdefault(r.kind, []).append((res.span[0], res.span[1], sum(o.wall_s or 0.0 for o in res.outcomes),
                                                  time.perf_counter() - t))

    def _write(self, r: _KindRun, system: dict, outcomes: list[JobOutcome], by_id: dict, where: str) -> None:
        fp = system_fingerprint(system)
        if fp not in self.systems:  # a worker of the kind may be another system (another driver...)
            self.systems[fp] = r.system_id if fp == system_fingerprint(r.summary.system) else \
                self.db.upsert_system(system, authoritative=True)
        sid = self.systems[fp]
        for o in outcomes:
            if (fp, o.job) in self.stored or o.job not in by_id:
                continue  # a task Dask ran twice: its job is stored once
            job = by_id[o.job]
            ran = where + (f", SM clock {o.sm_clock_mhz[0]}-{o.sm_clock_mhz[1]} MHz" if o.sm_clock_mhz else "")
            msg = "; ".join(x for x in (o.message, f"ran on {ran}" if where else "") if x)
            self.db.write_job(sid, r.summary.run_id, job.id, job.layer_key, job.precision, o.status, msg, o.records,
                              o.wall_s, layout=job.layout)
            self.stored.add((fp, o.job))
            s = r.summary
            s.measurements += sum(1 for x in o.records if isinstance(x, MeasurementLine))
            if o.status == "ok":
                s.ok += 1
            else:
                s.failed += 1
                s.failures.append((job.id, o.message))
                self.failed += 1
            self.done += 1
            if self.progress:
                self.progress("job", {"job": job.id, "status": o.status, "message": o.message, "done": self.done,
                                      "failed": self.failed, "kind": r.kind})


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0][:300] if s else type(e).__name__
