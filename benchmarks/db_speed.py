#!/usr/bin/env python3
"""Speed of the performance database (no GPU): best-per-layer lookup of a 600-layer model in a
database of 1,000,000 measurements (target < 200 ms on SQLite), import/merge throughput (rows/s)
and concurrent-writer throughput (rows/s). Prints a table.

  python3 benchmarks/db_speed.py [--rows 1000000] [--layers 600] [--url sqlite:////tmp/x.db] [--writers 4]
"""
import argparse
import json
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from benanza import kinds as L
from benanza.database import query, sharing
from benanza.database.store import LayerConfigRow, Measurement, open_db
from benanza.database.records import MeasurementLine

SYSTEM = {"gpu_name": "Synthetic GPU", "compute_capability": "9.0", "sm_count": 132, "memory_bytes": 150 << 30,
          "l2_cache_bytes": 50 << 20, "memory_bus_width_bits": 6144, "max_sm_clock_mhz": 1980,
          "max_mem_clock_mhz": 3201, "driver_version": "580", "driver_cuda_version": 13000, "runtime_version": 13000,
          "cudnn_version": 91900, "cublas_version": 130100}
PRECISIONS = [("fp32", "float32", "fma"), ("tf32", "float32", "tf32"), ("fp16", "float16", "tensor_op")]
ALGOS = [f"ALGO{i}" for i in range(5)]  # x 2 caches x 3 precisions = 30 rows per config


def synth(url: str, rows: int, seed: int = 0) -> tuple[int, list[str], float]:
    """Fill ``url`` with ``rows`` measurements over rows/30 Gemm configs; return (system id, keys, s)."""
    db = open_db(url)
    sid = db.upsert_system(dict(SYSTEM, seed=seed))
    n_cfg = rows // (len(PRECISIONS) * len(ALGOS) * 2)
    cfgs = [L.GemmConfig(m=64 + i % 1024, n=64 + (i // 1024) % 1024, k=64 + i // (1024 * 1024) + seed) for i in range(n_cfg)]
    t0 = time.perf_counter()
    with db.engine.begin() as c:
        c.execute(sa.insert(LayerConfigRow.__table__), [
            {"key": g.key, "kind": g.kind, "params": json.dumps(g.params()), "description": g.describe(), "batch": 1,
             "flops": g.flops()} for g in cfgs])
    chunk = []
    for i, g in enumerate(cfgs):
        for p, dt, math in PRECISIONS:
            for a, algo in enumerate(ALGOS):
                for cache in ("warm", "cold"):
                    t = 0.01 + ((i * 7 + a * 13) % 97) / 1000.0
                    chunk.append({"system_id": sid, "layer_key": g.key, "precision": p, "call": "cublasGemmEx",
                                  "algorithm": algo, "math": math, "dtype": dt, "cache": cache, "layout": "NCHW",
                                  "batch": 1, "status": "ok" if a != 4 else "not_supported", "message": "", "note": "",
                                  "median_ms": t if a != 4 else None, "q1_ms": t, "q3_ms": t, "samples": 10,
                                  "converged": True, "method": "cuda_graph", "workspace_bytes": 0})
        if len(chunk) >= 50000:
            with db.engine.begin() as c:
                c.execute(sa.insert(Measurement.__table__), chunk)
            chunk = []
    if chunk:
        with db.engine.begin() as c:
            c.execute(sa.insert(Measurement.__table__), chunk)
    return sid, [g.key for g in cfgs], time.perf_counter() - t0


def timed(fn, repeat=7):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts), min(ts), max(ts)


def _writer(args):
    url, wid, jobs = args
    db = open_db(url)
    sid = db.upsert_system(dict(SYSTEM, gpu_name=f"writer {wid}"))
    cfgs = [L.GemmConfig(m=8 + j, n=16, k=32 + wid) for j in range(jobs)]
    db.upsert_configs(cfgs)
    t = time.perf_counter()
    n = 0
    for g in cfgs:
        recs = [MeasurementLine(call="cublasGemmEx", algorithm=a, math="fma", dtype="float32", cache=c, status="ok",
                                median_ms=0.01, q1_ms=0.01, q3_ms=0.01, samples=10)
                for a in ALGOS for c in ("warm", "cold")]
        db.write_job(sid, None, f"{g.key}.fp32", g.key, "fp32", "ok", "", recs)
        n += len(recs)
    return n, time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--layers", type=int, default=600)
    ap.add_argument("--url", default=None, help="database URL (default: a new SQLite file)")
    ap.add_argument("--import-rows", type=int, default=200_000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--jobs-per-writer", type=int, default=200)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="benanza-dbspeed-"))
    url = args.url or f"sqlite:///{tmp / 'big.db'}"
    sid, keys, fill_s = synth(url, args.rows)
    db = open_db(url)
    total = db.counts()["measurements"]
    model = keys[:: max(1, len(keys) // args.layers)][: args.layers]
    rows = []
    med, lo, hi = timed(lambda: query.best_per_config(db, sid, "fp16", "warm", model))
    best = query.best_per_config(db, sid, "fp16", "warm", model)
    assert len(best) == len(model)
    rows.append((f"best per layer, {len(model)}-layer model, {total:,} rows", f"{med:.1f} ms", f"min {lo:.1f}, max {hi:.1f}"))
    med, lo, hi = timed(lambda: db.measurements(sid, model))
    rows.append(("all rows of the model's configs (analyzer fetch)", f"{med:.1f} ms", f"min {lo:.1f}, max {hi:.1f}"))
    rows.append(("bulk fill", f"{total / fill_s:,.0f} rows/s", f"{total:,} rows in {fill_s:.1f} s"))
    # import / merge throughput
    src_url = f"sqlite:///{tmp / 'src.db'}"
    synth(src_url, args.import_rows, seed=1)
    dst = open_db(f"sqlite:///{tmp / 'dst.db'}")
    # the synthetic rows have no job records: give them jobs so that the merge works by job, as real data does
    src = open_db(src_url)
    with src.engine.begin() as c:
        grp = c.execute(sa.select(Measurement.system_id, Measurement.layer_key, Measurement.precision).distinct()).all()
        c.execute(sa.text("INSERT INTO jobs (system_id, job, layer_key, precision, status, message, finished_at) "
                          "VALUES (:s, :j, :k, :p, 'ok', '', CURRENT_TIMESTAMP)"),
                  [{"s": s, "j": f"{k}.{p}", "k": k, "p": p} for s, k, p in grp])
    st = sharing.import_db(dst, src_url)
    rows.append(("import into an empty database", f"{st.rows_per_s:,.0f} rows/s",
                 f"{st.measurements_written:,} rows, {st.jobs_added:,} jobs in {st.seconds:.1f} s"))
    st2 = sharing.import_db(dst, src_url)
    rows.append(("import again (nothing newer)", f"{(st.measurements_written) / st2.seconds:,.0f} rows/s checked",
                 f"{st2.jobs_kept:,} jobs kept in {st2.seconds:.1f} s"))
    # concurrent writers
    wurl = f"sqlite:///{tmp / 'writers.db'}" if url.startswith("sqlite") else url
    open_db(wurl)
    t = time.perf_counter()
    with mp.get_context("spawn").Pool(args.writers) as pool:
        res = pool.map(_writer, [(wurl, w, args.jobs_per_writer) for w in range(args.writers)])
    wall = time.perf_counter() - t
    n = sum(r[0] for r in res)
    wdb = open_db(wurl)
    got = wdb.counts()
    rows.append((f"{args.writers} concurrent writers (job transactions)", f"{n / wall:,.0f} rows/s",
                 f"{n:,} rows, {got['jobs']:,} jobs in {wall:.1f} s (incl. process start)"))
    assert got["jobs"] >= args.writers * args.jobs_per_writer
    print(f"\n## performance database speed ({url.split(':')[0]}, {os.cpu_count()} cores)")
    w = max(len(r[0]) for r in rows)
    for a, b, c in rows:
        print(f"{a:<{w}}  {b:>18}  {c}")


if __name__ == "__main__":
    main()
