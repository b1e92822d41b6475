"""Measurements in other tools' formats (``benanza db export --format gbench``).

Google Benchmark's JSON (``--benchmark_format=json``; the format its ``tools/compare.py`` reads):
``{"context": {...}, "benchmarks": [{"name", "run_name", "run_type": "iteration", "repetitions",
"repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit"}]}``. One benchmark
per valid measurement of one system: the name is stable across systems and databases
(``<kind>/<description>/<layer key>/<precision>/<layout>/<cache>/<call>/<algorithm>``), so that
``compare.py benchmarks A.json B.json`` pairs the same implementation of the same layer config on
two GPUs; ``real_time`` and ``cpu_time`` are the median GPU time per call in µs (benanza times the
GPU, not the host: CUDA graph replays between CUDA events), ``iterations`` the samples behind it.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from pathlib import Path

from benanza.errors import UsageError


def gbench_doc(db, system: str | None, keys: list[str] | None = None) -> dict:
    """The Google Benchmark JSON document of ``system``'s valid measurements (``keys``: only these
    layer configs). Raises :class:`UsageError` when the database holds several systems and none is
    chosen, or nothing valid."""
    from benanza.database import query

    ids = query.resolve_systems(db, system)
    if len(ids) != 1:
        raise UsageError(f"{len(ids)} systems {'match ' + repr(system) if system else 'are in the database'}; "
                         f"a gbench file holds one: choose it with --system (see `benanza db systems`)")
    sid = ids[0]
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
        us = r.median_ms * 1e3
        benches.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                        "repetition_index": 0, "threads": 1, "iterations": int(r.samples or 1),
                        "real_time": us, "cpu_time": us, "time_unit": "us",
                        "label": f"{r.gpu_name}; median of {r.samples} samples, IQR "
                                 f"{(r.iqr_ms or 0) * 1e3:.3f} us; math {r.math}"})
    ctx = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
           "host_name": sysrow.get("gpu_name"), "executable": "benanza", "num_cpus": 1, "mhz_per_cpu": 0,
           "cpu_scaling_enabled": False, "caches": [], "library_build_type": "release",
           "benanza_system": {k: sysrow.get(k) for k in ("gpu_name", "compute_capability", "sm_count",
                                                         "driver_version", "cudnn_version", "cublas_version")}}
    return {"context": ctx, "benchmarks": benches}


def write_json(doc: dict, path: str | os.PathLike) -> Path:
    """``doc`` as JSON at ``path``, through a temporary file (no partial file on failure)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".benanza-export-", dir=p.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p
