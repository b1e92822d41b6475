"""Measurements in other tools' formats (``benanza db export --format gbench|nvbench``).

Google Benchmark's JSON (``--benchmark_format=json``; the format its ``tools/compare.py`` reads):
``{"context": {...}, "benchmarks": [{"name", "run_name", "run_type": "iteration", "repetitions",
"repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit"}]}``. One benchmark
per valid measurement of one system: the name is stable across systems and databases
(``<kind>/<description>/<layer key>/<precision>/<layout>/<cache>/<call>/<algorithm>``), so that
``compare.py benchmarks A.json B.json`` pairs the same implementation of the same layer config on
two GPUs. Times are in ns (``time_unit: "ns"``, Google Benchmark's default, so that ``compare.py``
prints sub-µs layers with their digits): ``real_time`` is the median GPU time per call (benanza times
the GPU: CUDA graph replays between CUDA events), ``cpu_time`` the host time the timed API takes per
call (the harness's warm-up estimate, ``host_us``; 0 where a row predates it), ``iterations`` the
samples behind the median.

NVBench's JSON (``--json FILE``; :func:`nvbench_doc`): written by ``nvbench/json_printer.cu``
(``json_printer::do_print_benchmark_results``, file version 1.0.0) and read by NVBench's
``python/scripts/nvbench_compare.py`` and ``python/cuda/bench/results/_benchmark_result.py``
(NVIDIA/nvbench, 2026-08). One benchmark per layer config, library call and algorithm; its states
are the precisions, layouts, math modes and data types measured (string axes); a state's summaries
carry the cold measurement (one call after an L2 flush: NVBench's isolated "cold" measurement,
``nv/cold/...``) and the warm one (back-to-back calls: NVBench's "batch", ``nv/batch/...``).
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import sys
import tempfile
from pathlib import Path

from sqlalchemy import select

from benanza import __version__
from benanza.database.store import LayerConfigRow, Measurement
from benanza.errors import UsageError
from benanza.versions import version_text


def gbench_doc(db, system: str | None, keys: list[str] | None = None) -> dict:
    """The Google Benchmark JSON document of ``system``'s valid measurements (``keys``: only these
    layer configs). Raises :class:`UsageError` when the database holds several systems and none is
    chosen, or nothing valid."""
    from benanza.database import query

    sid = one_system(db, system, "a gbench file")
    f = query.Filters(system=str(sid), status="ok")
    recs = [r for r in query.measurements(db, f) if r.system_id == sid and r.median_ms is not None
            and (keys is None or r.layer_key in keys)]
    if not recs:
        raise UsageError(f"no valid measurement of system {sid} in {db.safe_url} to export")
    sysrow = next(s for s in query.systems(db) if s["id"] == sid)
    benches = []
    for r in sorted(recs, key=lambda r: (r.kind, r.description, r.precision, r.layout, r.cache, r.call, r.algorithm)):
        name = "/".join(x.replace("/", "_") for x in (r.kind, r.description, r.layer_key, r.precision, r.layout,
                                                      r.cache, r.call, r.algorithm or "-"))
        ns = r.median_ms * 1e6
        benches.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                        "repetition_index": 0, "threads": 1, "iterations": int(r.samples or 1),
                        "real_time": ns, "cpu_time": (r.host_us or 0.0) * 1e3, "time_unit": "ns",
                        "label": f"{r.gpu_name}; GPU time: median of {r.samples} samples, IQR "
                                 f"{(r.iqr_ms or 0) * 1e6:.1f} ns; CPU time: the host API time per call; "
                                 f"math {r.math}"})
    ctx = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "host_name": sysrow.get("gpu_name"), "executable": "benanza", "num_cpus": 1, "mhz_per_cpu": 0,
           "cpu_scaling_enabled": False, "caches": [], "library_build_type": "release",
           "benanza_system": {k: sysrow.get(k) for k in ("gpu_name", "compute_capability", "sm_count",
                                                         "driver_version", "cudnn_version", "cublas_version")}}
    return {"context": ctx, "benchmarks": benches}


def one_system(db, system: str | None, what: str) -> int:
    """The id of the one system ``system`` names (or the database's only one). Raises
    :class:`UsageError` when none or several match (``what``: the file that holds one)."""
    from benanza.database import query

    ids = query.resolve_systems(db, system)
    if len(ids) != 1:
        raise UsageError(f"{len(ids)} systems {'match ' + repr(system) if system else 'are in the database'}; "
                         f"{what} holds one: choose it with --system (see `benanza db systems`)")
    return ids[0]


def write_json(doc: dict, path: str | os.PathLike) -> Path:
    """``doc`` as JSON at ``path``, through a temporary file (no partial file on failure)."""
    return write_atomic(json.dumps(doc, indent=1).encode(), path)


def write_atomic(data: bytes, path: str | os.PathLike) -> Path:
    """``data`` at ``path`` whole or not at all: written to a temporary file beside it, renamed over
    it; on any failure (a full disk, an interrupt) the temporary file is removed and the error
    raised (an OSError says why: ENOSPC, EACCES...). The file's mode is what ``open`` would give it
    under the process's umask (0644 under the usual 022), not the temporary file's 0600. The
    temporary file (``.NAME.RANDOM.tmp``) is ``flock``-ed while it is written, so a write killed
    with SIGKILL leaves one the next write of ``path`` removes (:func:`_lock_and_sweep`). Returns the path."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        _lock_and_sweep(fd, p)
        mask = os.umask(0)
        os.umask(mask)
        try:
            os.fchmod(fd, 0o666 & ~mask)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(e.errno, e.strerror or str(e), str(p)) from None  # named by the file the user gave
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def _lock_and_sweep(fd: int, p: Path) -> None:
    """Take an exclusive ``flock`` on the temporary file ``fd`` for this write, then remove the
    temporary files of earlier writes of ``p`` whose writer is gone (:func:`abandoned`); a write
    still running keeps its own. Without ``flock`` (another OS, some network file systems) nothing is
    taken as stale."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)
    except (ImportError, OSError):
        return
    for old in abandoned(p.parent.glob(f".{glob_escape(p.name)}.*.tmp")):
        old.unlink(missing_ok=True)


def abandoned(paths) -> list[Path]:
    """Of ``paths`` (temporary files a writer holds an exclusive ``flock`` on while it writes), those
    whose writer is gone (killed with SIGKILL, the machine stopped: the lock released); a writer
    still running keeps its own. Without ``flock``: none."""
    try:
        import fcntl
    except ImportError:
        return []
    gone = []
    for path in sorted(paths):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its writer is running (or this process's own file)
            continue
        finally:
            os.close(fd)  # (a lock taken is released here)
        gone.append(Path(path))
    return gone


def glob_escape(name: str) -> str:
    """``name`` with glob's special characters taken literally (:func:`glob.escape`)."""
    import glob

    return glob.escape(name)


# ---------------------------------------------------------------------------------------- NVBench

#: the JSON file version NVBench writes and its reader expects (nvbench/json_printer.cu
#: ``json_printer::get_json_file_version``; python/scripts/nvbench_json/version.py ``file_version``)
NVBENCH_JSON_VERSION = (1, 0, 0)
#: NVBench's noise estimates need this many samples; below it they are its sentinel, infinity
#: (nvbench/detail/statistics.cuh ``min_samples_for_noise_estimate``, ``standard_deviation_unavailable_sentinel``)
NVBENCH_MIN_NOISE_SAMPLES = 5
#: the string axes of a benchmark's states, in order
NVBENCH_AXES = ("precision", "layout", "math", "dtype")


def cold_warnings(benchmarks: list[dict], where: str) -> list[str]:
    """What NVBench's ``nvbench_compare.py`` will not compare in ``benchmarks`` (an NVBench document's):
    it pairs states by their cold GPU time (``nv/cold/time/gpu/mean``), so states without a cold
    measurement (a database benched with ``--no-cold``, as the shipped reference databases are)
    match nothing. A line for no cold measurement at all, or for the states without one; empty when
    every state has one. ``where``: the system and database, for the message."""
    states = [st for b in benchmarks for st in b["states"] if not st.get("is_skipped")]
    cold = sum(1 for st in states if any(s["tag"].startswith("nv/cold/") for s in st.get("summaries", [])))
    fix = ("measure cold times (`benanza bench` without --no-cold), or compare the warm medians with "
           "`--format gbench` and Google Benchmark's compare.py")
    if states and cold == 0:
        return [f"no cold measurement of {where}: nvbench_compare.py compares cold GPU times "
                f"(nv/cold/time/gpu/mean), so it will match none of these {len(states)} states; {fix}"]
    if cold < len(states):
        return [f"{len(states) - cold} of {len(states)} states of {where} have no cold measurement: "
                f"nvbench_compare.py compares cold GPU times and skips them; {fix}"]
    return []


def nvbench_doc(db, system: str | None, keys: list[str] | None = None, argv: list[str] | None = None,
                warn=None) -> dict:
    """The NVBench JSON document of ``system``'s measurements (``keys``: only these layer configs;
    ``argv``: the command line for ``meta.argv``). Times in seconds, as NVBench writes them.

    ``devices``: one device (id 0) from the system's record, NVBench's fields and units
    (``sm_version`` = 100 * major + 10 * minor; clocks in Hz; sizes in bytes; bus width in bits;
    ``global_memory_bus_bandwidth`` = 2 * memory clock * bus width / 8, NVBench's DDR formula in
    nvbench/device_info.cuh). ``benchmarks``: one per layer config, call and algorithm, named
    ``<kind>/<description>/<layer key>/<call>/<algorithm>`` (stable across systems, so
    nvbench_compare.py pairs two GPUs' files; pass it ``--ignore-devices``). A state per precision,
    layout, math and data type measured; a state whose warm measurement is not ``ok`` is skipped with
    its status and message as the reason. The run policy NVBench writes per benchmark (min_samples,
    timeout...) is left out: the database does not keep it. ``meta.benanza.warnings``: what
    nvbench_compare.py will not compare (:func:`cold_warnings`), each also given to ``warn`` (None: a
    ``benanza: warning: ...`` line on stderr).
    Raises :class:`UsageError` when several systems match (or none), or nothing was measured."""
    sid = one_system(db, system, "an nvbench file")
    rows = _measurement_rows(db, sid, keys)
    if not any(m.status == "ok" and m.median_ms is not None for m, _, _ in rows):
        raise UsageError(f"no valid measurement of system {sid} in {db.safe_url} to export")
    groups: dict[tuple, list] = {}
    for m, kind, desc in rows:
        groups.setdefault((kind, desc, m.layer_key, m.call, m.algorithm), []).append(m)
    benches = [_nvbench_benchmark(i, key, ms) for i, (key, ms) in enumerate(sorted(groups.items()))]
    sysrow = next(s for s in db.systems() if s.id == sid)
    info = json.loads(sysrow.info) if sysrow.info else {}
    json_version = {"major": NVBENCH_JSON_VERSION[0], "minor": NVBENCH_JSON_VERSION[1],
                    "patch": NVBENCH_JSON_VERSION[2], "string": ".".join(map(str, NVBENCH_JSON_VERSION))}
    meta = {"argv": list(argv) if argv is not None else ["benanza"] + sys.argv[1:],
            "version": {"json": json_version},
            "benanza": {"version": __version__, "system_id": sid, "gpu": sysrow.label(),
                        "driver": sysrow.driver_version, "cuda_runtime": version_text("cuda", sysrow.runtime_version),
                        "cudnn": version_text("cudnn", sysrow.cudnn_version),
                        "cublas": version_text("cublas", sysrow.cublas_version)}}
    meta["benanza"]["warnings"] = cold_warnings(benches, f"system {sid} ({sysrow.gpu_name}) in {db.safe_url}")
    for w in meta["benanza"]["warnings"]:
        (warn or (lambda m: print(f"benanza: warning: {m}", file=sys.stderr)))(w)
    return {"meta": meta, "devices": [_nvbench_device(sysrow, info)], "benchmarks": benches}


def _measurement_rows(db, sid: int, keys: list[str] | None) -> list[tuple]:
    """(Measurement, kind, description) of every measurement of system ``sid`` (of ``keys`` only)."""
    q = (select(Measurement, LayerConfigRow.kind, LayerConfigRow.description)
         .join(LayerConfigRow, LayerConfigRow.key == Measurement.layer_key).where(Measurement.system_id == sid))
    out = []
    with db.session() as s:
        for chunk in ([None] if keys is None else [keys[i:i + 500] for i in range(0, len(keys), 500)]):
            qq = q if chunk is None else q.where(Measurement.layer_key.in_(chunk))
            out += [tuple(r) for r in s.execute(qq)]
    return out


def _nvbench_device(sysrow, info: dict) -> dict:
    """The ``devices`` entry of a system (nvbench/json_printer.cu ``add_devices_section``: the fields
    the database knows)."""
    major, _, minor = (sysrow.compute_capability or "0.0").partition(".")
    mem_hz = int(sysrow.max_mem_clock_mhz or 0) * 1_000_000
    return {"id": 0, "name": sysrow.gpu_name,
            "sm_version": int(major or 0) * 100 + int(minor or 0) * 10,
            "sm_default_clock_rate": int(sysrow.max_sm_clock_mhz or 0) * 1_000_000,
            "number_of_sms": sysrow.sm_count, "global_memory_size": sysrow.memory_bytes,
            "global_memory_bus_peak_clock_rate": mem_hz, "global_memory_bus_width": sysrow.memory_bus_width_bits,
            "global_memory_bus_bandwidth": 2 * mem_hz * (int(sysrow.memory_bus_width_bits or 0) // 8),
            "l2_cache_size": sysrow.l2_cache_bytes, "uuid": info.get("uuid", ""),
            "pci_bus_id": info.get("pci_bus_id", "")}


def _nvbench_benchmark(index: int, key: tuple, ms: list) -> dict:
    """One benchmark: a layer config's call and algorithm, its states over :data:`NVBENCH_AXES`."""
    kind, desc, layer_key, call, algorithm = key
    name = "/".join(x.replace("/", "_") for x in (kind, desc, layer_key, call, algorithm or "-"))
    by_state: dict[tuple, dict] = {}
    for m in ms:
        by_state.setdefault(tuple(getattr(m, a) for a in NVBENCH_AXES), {})[m.cache] = m
    axes = [{"name": a, "type": "string", "flags": "",
             "values": [{"input_string": v, "description": "", "value": v}
                        for v in sorted({st[i] for st in by_state})]} for i, a in enumerate(NVBENCH_AXES)]
    states = [_nvbench_state(st, by_state[st]) for st in sorted(by_state)]
    return {"name": name, "index": index, "devices": [0], "axes": axes, "states": states}


def _nvbench_state(values: tuple, by_cache: dict) -> dict:
    """A state: its axis values, the cold and warm measurements' summaries; skipped (with the warm
    measurement's status and message) when the warm one is not valid."""
    st = {"name": "Device=0 " + " ".join(f"{a}={v}" for a, v in zip(NVBENCH_AXES, values)), "device": 0,
          "type_config_index": 0,
          "axis_values": [{"name": a, "type": "string", "value": v} for a, v in zip(NVBENCH_AXES, values)],
          "summaries": []}
    warm, cold = by_cache.get("warm"), by_cache.get("cold")
    if cold is not None and cold.status == "ok" and cold.median_ms is not None:
        st["summaries"] += _cold_summaries(cold)
    if warm is not None and warm.status == "ok" and warm.median_ms is not None:
        st["summaries"] += _batch_summaries(warm)
    lead = warm or cold
    st["is_skipped"] = lead.status != "ok" or lead.median_ms is None
    if st["is_skipped"]:
        st["skip_reason"] = f"{lead.status}: {lead.message}" if lead.message else lead.status
    return st


def _summary(tag: str, name: str, hint: str, description: str, value, hide: bool = False) -> dict:
    """One summary as json_printer.cu writes it: tag, name, description, hint, hide, then ``data``
    with its ``value`` as text (an int64 for an int, else a float64; NVBench writes both as strings)."""
    s = {"tag": tag, "name": name, "description": description, "hint": hint}
    if hide:
        s["hide"] = "Hidden by default."
    typ = "int64" if isinstance(value, int) else "float64"
    s["data"] = [{"name": "value", "type": typ, "value": str(value) if typ == "int64" else repr(float(value))}]
    return s


def _cold_summaries(m) -> list[dict]:
    """NVBench's cold summaries (nvbench/detail/measure_cold.cu ``generate_summaries``: tags, names,
    hints) of benanza's cold measurement (each sample one call after an L2 flush), in seconds; the noise
    estimates are NVBench's: stdev / mean and (q3 - q1) / median, infinity below 5 samples."""
    n = int(m.samples or 0)
    enough = n >= NVBENCH_MIN_NOISE_SAMPLES
    out = [_summary("nv/cold/sample_size", "Samples", "sample_size", "Number of isolated kernel executions", n)]
    times = (("min", "Min GPU Time", m.min_ms, True), ("max", "Max GPU Time", m.max_ms, True),
             ("mean", "GPU Time", m.mean_ms, False))
    for tag, name, v, hide in times:
        if v is not None:
            out.append(_summary(f"nv/cold/time/gpu/{tag}", name, "duration",
                                f"{name} of isolated kernel executions (measured with CUDA events)", v / 1e3, hide))
    if m.stddev_ms is not None and m.mean_ms:
        sd = m.stddev_ms / 1e3 if enough else math.inf
        out.append(_summary("nv/cold/time/gpu/stdev/absolute", "Noise", "duration",
                            "Standard deviation of isolated kernel execution GPU times", sd, True))
        out.append(_summary("nv/cold/time/gpu/stdev/relative", "Noise", "percentage",
                            "Relative standard deviation of isolated kernel execution GPU times",
                            m.stddev_ms / m.mean_ms if enough else math.inf))
    for tag, name, v in (("q1", "Q1 GPU Time", m.q1_ms), ("median", "Median GPU Time", m.median_ms),
                         ("q3", "Q3 GPU Time", m.q3_ms)):
        if v is not None:
            out.append(_summary(f"nv/cold/time/gpu/{tag}", name, "duration",
                                f"{name} of isolated kernel executions", v / 1e3, True))
    if m.q1_ms is not None and m.q3_ms is not None:
        iqr = m.q3_ms - m.q1_ms
        rel = iqr / m.median_ms if enough and m.median_ms else math.inf  # NVBench's sentinel below 5 samples
        # under both names NVBench has used: "iqr" (json_printer since 2026) and "ir", which
        # python/scripts/nvbench_compare.py reads (``nv/cold/time/gpu/ir/relative``: without it every
        # state is skipped and two GPUs' files compare 0 benchmarks)
        for tag in ("iqr", "ir"):
            out.append(_summary(f"nv/cold/time/gpu/{tag}/absolute", "IQR", "duration",
                                "Interquartile range of isolated kernel execution GPU times", iqr / 1e3, True))
            out.append(_summary(f"nv/cold/time/gpu/{tag}/relative", "Rel IQR", "percentage",
                                "Relative interquartile range of isolated kernel execution GPU times", rel, True))
    return out


def _batch_summaries(m) -> list[dict]:
    """NVBench's batch summaries (nvbench/detail/measure_hot.cu ``generate_summaries``) of benanza's
    warm measurement: ``samples`` samples of ``reps`` back-to-back calls (a CUDA graph replay), so
    ``nv/batch/sample_size`` is samples x reps calls and the mean is per call (s). NVBench's batch
    measurement has no median; benanza's figure, the median per call, is ``benanza/batch/time/gpu/median``
    (with its quartiles, hidden)."""
    n, reps = int(m.samples or 0), int(m.reps or 1)
    out = [_summary("nv/batch/sample_size", "Samples", "sample_size", "Number of batch kernel executions",
                    n * reps)]
    if m.mean_ms is not None:
        out.append(_summary("nv/batch/time/gpu/mean", "Batch GPU", "duration",
                            "Mean batch kernel execution time (measured by CUDA events)", m.mean_ms / 1e3))
    out.append(_summary("benanza/batch/time/gpu/median", "Median Batch GPU", "duration",
                        f"Median over {n} samples of the per-call time of {reps} back-to-back calls "
                        f"(benanza's figure)", m.median_ms / 1e3))
    for tag, name, v in (("q1", "Q1 Batch GPU", m.q1_ms), ("q3", "Q3 Batch GPU", m.q3_ms)):
        if v is not None:
            out.append(_summary(f"benanza/batch/time/gpu/{tag}", name, "duration",
                                f"{name} time per call over the batch samples", v / 1e3, True))
    return out
