"""Hardware counters of each layer's best implementation, read with Nsight Compute (``ncu``).

For every measured layer of an analysis, the suite's job of that layer config runs once more under
``ncu`` with ``--profile-call/--profile-algorithm/--profile-layout/--profile-math`` (the harness,
cpp/include/benanza/harness.hpp ``Options::profile_call``): only the chosen implementation is
launched, first outside the profiled range (lazy loading, plan set-up), then once between
``cudaProfilerStart`` and ``cudaProfilerStop``; ``ncu --profile-from-start off`` profiles the kernels
of that one launch (one implementation may launch several kernels: each is a row).

ncu options (Nsight Compute CLI documentation, "Command Line Options"): ``--csv --page details``
(one row per kernel and metric: ``"ID","Process ID","Process Name","Host Name","Kernel Name",
"Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",
"Metric Value"`` and, from 2023 on, five rule columns), ``--print-units base`` (bytes, not Mbyte),
``--cache-control none --clock-control none`` (the L2 keeps what the first call left, and clocks are
not locked to base: the conditions of benanza's warm measurements), ``--target-processes all`` and
``--log-file`` (the report apart from the suite's own JSON lines).

Metrics (:data:`METRICS`; Nsight Compute Profiling Guide, "Metrics Reference" and the SOL section):
DRAM throughput as % of its peak and DRAM bytes, SM throughput as % of peak, achieved occupancy
(active warps as % of the SM's maximum) and the kernel's duration.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benanza.errors import DeviceError, UsageError
from benanza.kinds.backend import Backend

#: the metrics read per kernel, and what each is
METRICS = {
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput, % of peak",
    "dram__bytes.sum": "DRAM bytes read and written",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM throughput (the busiest SM unit), % of peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy: active warps, % of the maximum",
    "gpu__time_duration.sum": "kernel duration",
}

#: unit prefixes ncu prints (decimal, as its ``--print-units auto`` scales)
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


@dataclass(frozen=True)
class KernelCounters:
    """One kernel's counters: ``index`` (ncu's ID, launch order), ``name``, launch shape, DRAM
    throughput (% of peak) and bytes, SM throughput (% of peak), achieved occupancy (%), duration (ns).
    A metric ncu did not report is None."""

    index: int
    name: str
    block: str
    grid: str
    dram_pct: float | None
    dram_bytes: float | None
    sm_pct: float | None
    occupancy_pct: float | None
    duration_ns: float | None

    def to_row(self) -> dict:
        return {"kernel_index": self.index, "kernel_name": self.name, "block_size": self.block,
                "grid_size": self.grid, "dram_pct": self.dram_pct, "dram_bytes": self.dram_bytes,
                "sm_pct": self.sm_pct, "occupancy_pct": self.occupancy_pct, "duration_ns": self.duration_ns}


def metric_value(value: str, unit: str) -> float | None:
    """A metric cell of ncu's CSV as a number in base units: thousands separators dropped
    (``1,234.5``), bytes scaled from ``Kbyte``/``Mbyte``/``Gbyte``, times to ns, percentages as
    printed; None for ``n/a`` or an empty cell. Raises ValueError for an unknown unit."""
    v = (value or "").strip().replace(",", "")
    if not v or v.lower() == "n/a":
        return None
    x = float(v)
    u = (unit or "").strip()
    if u in ("", "%"):
        return x
    if u in _TIME_NS:
        return x * _TIME_NS[u]
    if u.endswith("byte") and u[:-4] in _SCALE:
        return x * _SCALE[u[:-4]]
    raise ValueError(f"unknown ncu unit {unit!r}")


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """The kernels of an ``ncu --csv --page details`` report, in ID order, with the :data:`METRICS`
    they carry. Lines before the header (``==PROF==`` notes) are skipped; rows of other metrics and
    rule rows are ignored. Raises ValueError when there is no header (ncu printed no report: an
    error, or no kernel profiled) or a needed column is missing."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",')), None)
    if start is None:
        err = next((ln for ln in lines if "==ERROR==" in ln), "")
        raise ValueError(f"no ncu CSV report{': ' + err.strip() if err else ''}")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    need = {"ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"}
    if not need <= set(reader.fieldnames or ()):
        raise ValueError(f"ncu CSV without the columns {', '.join(sorted(need - set(reader.fieldnames or ())))}")
    kernels: dict[int, dict] = {}
    for row in reader:
        name = row.get("Metric Name") or ""
        if not (row.get("ID") or "").strip().isdigit():
            continue
        k = kernels.setdefault(int(row["ID"]), {"name": row["Kernel Name"], "block": row.get("Block Size") or "",
                                                "grid": row.get("Grid Size") or ""})
        if name in METRICS:
            k[name] = metric_value(row["Metric Value"], row["Metric Unit"])
    return [KernelCounters(i, k["name"], k["block"], k["grid"], k.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
                           k.get("dram__bytes.sum"), k.get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                           k.get("sm__warps_active.avg.pct_of_peak_sustained_active"), k.get("gpu__time_duration.sum"))
            for i, k in sorted(kernels.items())]


def find_ncu() -> str:
    """The ``ncu`` executable on PATH. Raises UsageError (one line) when there is none."""
    path = shutil.which("ncu")
    if path is None:
        raise UsageError("--counters needs Nsight Compute's `ncu` on PATH, and there is none (install Nsight "
                         "Compute, e.g. the CUDA toolkit's nsight-compute package, or leave out --counters)")
    return path


def ncu_version(ncu: str) -> str:
    """``ncu --version``'s last line (e.g. "Version 2025.3.1.0 (build ...)"), "" when it says nothing."""
    try:
        p = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (p.stdout.strip().splitlines() or [""])[-1].strip()


@dataclass(frozen=True)
class Implementation:
    """What to profile: the job (suite job id) and the implementation's call, algorithm, math and
    layout, and the runtime it runs in (:class:`benanza.kinds.backend.Backend`; only the suite's
    implementations have a job to profile)."""

    job: str
    call: str
    algorithm: str
    math: str
    layout: str
    backend: Backend = Backend.SUITE


def ncu_argv(ncu: str, exe: str | Path, impl: Implementation, suite_args: list[str], log: Path,
             match_math: bool = True) -> list[str]:
    """The command that profiles ``impl`` once (module docstring): ncu's options, then the suite
    with ``--job`` and the ``--profile-*`` flags. ``match_math`` False leaves the math out of the
    match (an fp32 GEMM relabelled ``tf32`` by the runner ran under the harness's ``fma`` label)."""
    argv = [ncu, "--csv", "--page", "details", "--print-units", "base", "--metrics", ",".join(METRICS),
            "--profile-from-start", "off", "--target-processes", "all", "--cache-control", "none",
            "--clock-control", "none", "--log-file", str(log), str(exe), "--job", impl.job, *suite_args,
            "--profile-call", impl.call, "--profile-algorithm", impl.algorithm, "--profile-layout", impl.layout]
    return argv + (["--profile-math", impl.math] if match_math else [])


def _profiled(stdout: str) -> dict | None:
    """The suite's ``profiled`` record, None when it printed none."""
    for line in stdout.splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and rec.get("type") == "profiled":
            return rec
    return None


def profile(ncu: str, exe: str | Path, impl: Implementation, suite_args: list[str], timeout_s: float = 600.0,
            match_math: bool = True) -> list[KernelCounters]:
    """Run ``impl`` once under ncu and return its kernels' counters. Raises DeviceError (one line)
    when the suite does not run it (no ``profiled`` record: the implementation is not in that job),
    its launch fails, ncu reports an error (e.g. no permission for GPU counters) or nothing."""
    with tempfile.TemporaryDirectory(prefix="benanza-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        try:
            p = subprocess.run(ncu_argv(ncu, exe, impl, suite_args, log, match_math), capture_output=True,
                               text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise DeviceError(f"ncu: {impl.call} / {impl.algorithm}: no result after {timeout_s:.0f} s") from None
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    _keep_report(text, impl)
    if '"ID",' not in text and '"ID",' in p.stdout:  # a report printed on stdout (after the suite's lines)
        text = p.stdout
    rec = _profiled(p.stdout)
    where = f"job {impl.job}, {impl.call} / {impl.algorithm} ({impl.layout})"
    if rec is None:
        last = (p.stderr.strip().splitlines() or [f"exit code {p.returncode}"])[-1]
        raise DeviceError(f"ncu: {where}: the suite did not run it ({last})")
    if rec.get("status") != "ok":
        raise DeviceError(f"ncu: {where}: the launch failed ({rec.get('message') or 'no message'})")
    try:
        kernels = parse_ncu_csv(text)
    except ValueError as e:
        raise DeviceError(f"ncu: {where}: {e}") from None
    if not kernels:
        raise DeviceError(f"ncu: {where}: no kernel profiled")
    return kernels


#: environment variable naming a folder where each raw ncu report is kept (``<job>.<n>.csv``): the
#: evidence behind the stored counters, and real fixtures for the parser's tests
KEEP_ENV = "BENANZA_NCU_REPORTS"


def _keep_report(text: str, impl: Implementation) -> None:
    folder = os.environ.get(KEEP_ENV)
    if not folder or not text:
        return
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", impl.job)
    n = len(list(d.glob(f"{safe}.*.csv")))
    (d / f"{safe}.{n}.csv").write_text(text, encoding="utf-8")


#: attempts that may all fail before the rest are not tried (ncu without permission for the GPU's
#: counters, ERR_NVGPUCTRPERM, fails every layer the same way)
GIVE_UP_AFTER = 3


@dataclass
class CountersRun:
    """What `bench --counters` profiled: implementations profiled, already stored, not profilable
    (the framework's own kernels: not a suite job), and failures as (layer, reason)."""

    profiled: int = 0
    stored: int = 0
    framework: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)

    def line(self) -> str:
        fail = self.failures
        return (f"counters: {self.profiled} implementations profiled with ncu, {self.stored} already stored, "
                f"{self.framework} framework kernels not profiled, {len(fail)} failed"
                + (f" (first: {fail[0][0]}: {fail[0][1]})" if fail else ""))


def best_implementations(analyses, jobs, steps=()) -> list[tuple[tuple, Implementation, str]]:
    """The best implementation of every measured layer config of ``analyses`` (one each, in model
    order) with the suite job that times it: (implementation key (layer key, precision, call,
    algorithm, math, layout), :class:`Implementation`, layer name). The framework's calls (their
    ``backend``) get job "" (no suite job runs them). ``jobs``: the suite's :class:`benanza.kinds.Job` list.
    ``steps``: training steps (:class:`benanza.analysis.training.TrainingStep`, ``bench --train``),
    whose measured backward calls, loss and optimizer step follow, named ``LAYER (PHASE)``: their
    kernels' launch shapes are what a prediction of the step on another GPU scales (Habitat's wave
    scaling takes each kernel's grid and occupancy from its profile)."""
    from benanza.database.counters import implementation_key

    by = {(j.config.key, j.precision, j.layout): j.id for j in jobs}
    out, seen = [], set()

    def add(t, precision: str, name: str) -> None:
        key = implementation_key(t, precision)
        if key in seen:
            return
        seen.add(key)
        job = "" if t.backend.framework else by.get((key[0], precision, t.layout), "")
        out.append((key, Implementation(job, t.call, t.algorithm, t.math, t.layout, t.backend), name))

    for a in analyses:
        for lt in a.layers:
            if lt.status == "measured" and not lt.conversion:
                add(lt, a.kind_precision(lt.layer.config.kind), lt.layer.name)
    for st in steps:
        for c in list(st.calls) + [x for x in (st.loss_call, st.optimizer_call) if x is not None]:
            if c.time_ms is not None and c.call:
                add(c, st.forward.kind_precision(c.kind), f"{c.layer_name or c.kind} ({c.phase})")
    return out


def profile_best(analyses, jobs, exe, db, system_id: int, suite_args: list[str], ncu: str, force: bool = False,
                 say=lambda m: None, steps=()) -> CountersRun:
    """Profile the best implementation of every measured layer config of ``analyses`` (and of every
    measured call of the training ``steps``: :func:`best_implementations`) once with ncu
    (:func:`profile`) and store its kernels (:func:`benanza.database.counters.write_counters`);
    what is already stored is kept unless ``force``. ``say`` gets one progress line per layer.
    Never raises for one layer's failure: it is counted with its reason."""
    from benanza.database.counters import read_counters, write_counters

    todo = best_implementations(analyses, jobs, steps)
    have = read_counters(db, system_id, sorted({k[0] for k, _, _ in todo}))
    run, tool = CountersRun(), ncu_version(ncu)
    for n, (key, impl, name) in enumerate(todo, 1):
        if not impl.job:
            if impl.backend.framework:
                run.framework += 1
            else:
                run.failures.append((name, "no suite job times it (generated for another layout or precision)"))
            continue
        if key in have and not force:
            run.stored += 1
            continue
        # the runner relabels fp32 GEMMs whose rate only Tensor Cores reach as tf32 (harness label: fma)
        relabelled = key[1] == "fp32" and impl.math == "tf32"
        try:
            kernels = profile(ncu, exe, impl, suite_args, timeout_s=180.0, match_math=not relabelled)
        except DeviceError as e:
            run.failures.append((name, str(e)))
            say(f"[counters {n}/{len(todo)}] {name}: {e}")
            if run.profiled == 0 and len(run.failures) >= GIVE_UP_AFTER:  # e.g. no permission for counters
                run.failures.append(("the rest", f"not tried: the first {GIVE_UP_AFTER} attempts all failed"))
                break
            continue
        write_counters(db, system_id, key, [k.to_row() for k in kernels], tool)
        run.profiled += 1
        say(f"[counters {n}/{len(todo)}] {name}: {len(kernels)} kernels ({kernels[0].name[:60]})")
    return run
