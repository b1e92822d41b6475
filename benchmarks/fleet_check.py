"""Issue 28's goal on one host with two GPUs: a zoo benched on one GPU (the local runner) and through
``--cluster local`` on two (Dask distributed, one worker per GPU), the run stage's speed-up and the two
databases compared job for job.

    python3 benchmarks/fleet_check.py --out DIR --models resnet18,mobilenet_v2,... --batch 32 --dtype fp16 \\
        --devices 0,1 -- --no-cold --max-engines 4

Steps (each result written into ``--out`` as it comes, so a cut run still returns what finished):

1. exports the zoo models (``benchmarks/zoo.py``, dynamic batch) into ``DIR/models`` and lists them in
   ``models.txt`` (``--models-dir``: ONNX files already there instead);
2. ``benanza bench --models-file models.txt -o SUITE --db one.db --device D0 --no-torch --json`` (one GPU,
   the local runner with its default three suite processes per GPU); the fresh harness compile
   happens here and is not part of the run stage;
3. ``benanza bench ... -o SUITE --db two.db --cluster local --devices D0,D1 --no-torch --json`` (the same
   suite folder: nothing to compile again);
4. ``--cluster-one``: also ``--cluster local --devices D0`` into ``cluster1.db`` (the cluster's own cost
   on one GPU);
5. the table: per run, the run stage (s, ``stages.run_s``) and the whole bench (s), the speed-up of the
   run stage; the databases job for job: the same jobs, the same status per job, the same measured calls
   (call, algorithm, math, data type, layout; warm, and cold apart: with ``--cold contenders`` the cold
   set is the calls within 5 % of the job's best, which noise moves), the best warm time per job (two / one: median and
   90th percentile of |ratio - 1|, two GPUs of one kind differ by their clocks and noise), and each
   model's LBL from both.

``--resume`` keeps a run an earlier call into the same work folder (``$FLEET_WORK``, default
``/tmp/fleet``) finished, and ``--only one`` stops after the first: the lent machine's 10-minute calls.
Everything after ``--`` goes to both benches (``--no-cold --max-engines 4``...). Needs a GPU, PyTorch
and torchvision (the exports) and Dask distributed (``pip install benanza[cluster]``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from json_docs import scenarios_of  # noqa: E402  (bench --json: its scenarios, schema 1 or before)


def export_zoo(names: list[str], folder: Path, log) -> list[Path]:
    """The zoo's ONNX exports (dynamic batch, weights stripped), skipping a model whose export fails
    (said in the log)."""
    sys.path.insert(0, str(HERE))
    import zoo

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for e in zoo.select(",".join(names)):
        path = folder / f"{e.name}.onnx"
        if not path.exists():
            try:
                zoo.export_model(e, path)
            except RuntimeError as err:
                log(f"export failed, left out: {err}")
                continue
        out.append(path)
    return out


def bench(models_file: Path, suite: Path, db: Path, where: list[str], args: argparse.Namespace, extra: list[str],
          log, env: dict | None = None) -> dict | None:
    """One ``benanza bench`` of the zoo; its JSON document with ``wall_s`` added, or None (logged)."""
    cmd = [sys.executable, "-m", "benanza", "bench", "--models-file", str(models_file), "-o", str(suite),
           "--db", str(db), "--batch", args.batch, "--dtype", args.dtype, "--no-torch", "--no-layers", "--json",
           *where, *extra]
    log("$ " + " ".join(cmd))
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd="/tmp", env=dict(os.environ, **(env or {})))
    wall = time.perf_counter() - t
    if p.returncode != 0:
        log(f"bench failed (exit {p.returncode}) after {wall:.1f} s: {p.stderr.strip()[-800:]}")
        return None
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        log(f"bench printed no JSON document: {p.stdout[-400:]}")
        return None
    return {"docs": [doc], "wall_s": wall}


def _lbls(run: dict) -> dict:
    """(model, batch, dtype) -> (LBL ms, complete) from a bench's JSON documents."""
    out = {}
    for d in run["docs"]:
        for a in scenarios_of(d, "bench --json"):  # its "scenarios" (a saved run's before schema 1: "analyses")
            if a.get("lbl_ms") is not None:
                out[(Path(str(a.get("model"))).stem, a.get("batch"), a.get("precision"))] = \
                    (float(a["lbl_ms"]), bool(a.get("complete")))
    return out


def _stage(run: dict, name: str) -> float | None:
    vals = [d.get("stages", {}).get(name) for d in run["docs"] if d.get("stages", {}).get(name) is not None]
    return max(vals) if vals else None


def compare_dbs(one: Path, two: Path) -> dict:
    """The two databases job for job (every system of each: one GPU kind here)."""
    from sqlalchemy import select

    from benanza.database.store import JobRow, Measurement, open_db

    def read(path: Path):
        db = open_db(f"sqlite:///{path}")
        with db.session() as s:
            jobs = {r.job: r.status for r in s.scalars(select(JobRow))}
            calls: dict[tuple, set] = {}
            best: dict[tuple, float] = {}
            for m in s.scalars(select(Measurement)):
                k = (m.layer_key, m.precision, m.layout)
                calls.setdefault(k + (m.cache,), set()).add((m.call, m.algorithm, m.math, m.dtype, m.layout))
                if m.status == "ok" and m.cache == "warm" and m.median_ms is not None:
                    best[k] = min(best.get(k, float("inf")), m.median_ms)
        return jobs, calls, best

    j1, c1, b1 = read(one)
    j2, c2, b2 = read(two)
    both = sorted(set(b1) & set(b2))

    def differ(cache: str) -> int:
        return sum(1 for k in set(c1) | set(c2) if k[-1] == cache and c1.get(k) != c2.get(k))

    dev = sorted(abs(b2[k] / b1[k] - 1) for k in both if b1[k] > 0)
    return {"jobs_one": len(j1), "jobs_two": len(j2), "jobs_only_one": len(set(j1) - set(j2)),
            "jobs_only_two": len(set(j2) - set(j1)),
            "status_differs": sum(1 for j in set(j1) & set(j2) if j1[j] != j2[j]),
            # warm: every valid call of a job; cold (--cold contenders): those within 5 % of the job's
            # best, a set that timing noise can change between two runs
            "configs_warm_calls_differ": differ("warm"), "configs_cold_calls_differ": differ("cold"),
            "configs_compared": len(both),
            "best_dev_median": statistics.median(dev) if dev else None,
            "best_dev_p90": dev[int(0.9 * (len(dev) - 1))] if dev else None,
            "best_dev_max": dev[-1] if dev else None}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="resnet18,mobilenet_v2,squeezenet1_1,shufflenet_v2_x1_0,mnasnet1_0,"
                                        "alexnet,googlenet,efficientnet_b0")
    ap.add_argument("--models-dir", type=Path, help="ONNX files to bench instead of exporting the zoo")
    ap.add_argument("--batch", default="32")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--devices", default="0,1")
    ap.add_argument("--cluster-one", action="store_true", help="also the cluster on the first GPU alone")
    ap.add_argument("--chunks", default="", help="cluster runs with these task sizes (jobs per task, "
                                                  "BENANZA_CLUSTER_CHUNK), e.g. 16,64; default: the cluster's own")
    ap.add_argument("--resume", action="store_true", help="keep the runs an earlier call into the same work "
                                                          "folder ($FLEET_WORK) finished")
    ap.add_argument("--only", choices=["one", "two"], help="this run only (with --resume: one call each)")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("FLEET_WORK", "/tmp/fleet"))
    work.mkdir(parents=True, exist_ok=True)
    logf = open(a.out / "fleet.log", "a")

    def log(msg: str) -> None:
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    paths = sorted(a.models_dir.glob("*.onnx")) if a.models_dir else export_zoo(a.models.split(","),
                                                                                   work / "models", log)
    models_file = work / "models.txt"
    models_file.write_text("".join(f"{p}\n" for p in paths))
    log(f"{len(paths)} models: {', '.join(p.stem for p in paths)}")
    d0 = a.devices.split(",")[0]
    suite = work / "suite"
    runs = {}
    plan = [("one GPU (local runner)", "one.db", ["--device", d0], {})]
    for c in [x for x in a.chunks.split(",") if x.strip()] or [""]:
        plan.append((f"cluster, GPUs {a.devices}" + (f", chunk {c}" if c else ""), f"two{c}.db",
                     ["--cluster", "local", "--devices", a.devices], {"BENANZA_CLUSTER_CHUNK": c} if c else {}))
    if a.cluster_one:
        plan.append((f"cluster, GPU {d0}", "cluster1.db", ["--cluster", "local", "--devices", d0], {}))
    if a.only == "one":
        plan = plan[:1]
    for name, db, where, env in plan:
        saved = work / f"{Path(db).stem}.run.json"
        if a.resume and saved.exists() and (work / db).exists():  # finished by an earlier call
            r = json.loads(saved.read_text())
            log(f"{name}: from the earlier call ({saved})")
        else:
            (work / db).unlink(missing_ok=True)
            r = bench(models_file, suite, work / db, where, a, extra, log, env)
            if r is None:
                continue
            saved.write_text(json.dumps(r))
        runs[name] = (r, work / db)
        log(f"{name}: run stage {_stage(r, 'run_s') or float('nan'):.1f} s, compile "
            f"{_stage(r, 'compile_s') or 0:.1f} s, bench {r['wall_s']:.1f} s")
        write_table(a, runs, extra, log)
    return 0 if len(runs) >= 2 else 1


def write_table(a: argparse.Namespace, runs: dict, extra: list[str], log) -> None:
    lines = [f"fleet_check: batch {a.batch}, {a.dtype}, bench flags: {' '.join(extra) or '(defaults)'}", "",
             f"{'run':28} {'run stage s':>12} {'compile s':>10} {'bench s':>8} {'speed-up (run stage)':>21}"]
    names = list(runs)
    base = _stage(runs[names[0]][0], "run_s")
    for n in names:
        r = runs[n][0]
        rs = _stage(r, "run_s")
        up = f"{base / rs:.2f}x" if base and rs else "-"
        lines.append(f"{n:28} {rs or float('nan'):12.1f} {_stage(r, 'compile_s') or 0:10.1f} {r['wall_s']:8.1f} "
                     f"{up:>21}")
    for n in names:
        for cr in runs[n][0]["docs"][0].get("cluster_runs") or []:
            if cr.get("timeline"):
                lines.append(f"  {n}: timeline {json.dumps(cr['timeline'])}")
    if len(names) >= 2:
        c = compare_dbs(runs[names[0]][1], runs[names[1]][1])
        lines += ["", f"databases, {names[0]} vs {names[1]}: {json.dumps(c)}", "",
                  f"{'model':22} {'batch':>5} {'dtype':>6} {'LBL one ms':>11} {'LBL two ms':>11} {'two/one':>8}"]
        l1, l2 = _lbls(runs[names[0]][0]), _lbls(runs[names[1]][0])
        for k in sorted(set(l1) | set(l2), key=str):
            v1, v2 = l1.get(k), l2.get(k)
            ratio = f"{v2[0] / v1[0]:.4f}" if v1 and v2 and v1[0] else "-"
            fmt = (lambda v: f"{v[0]:.4f}{'' if v[1] else '*'}" if v else "-")
            lines.append(f"{k[0]:22} {str(k[1]):>5} {str(k[2]):>6} {fmt(v1):>11} {fmt(v2):>11} {ratio:>8}")
        lines.append("(* an incomplete LBL)")
    text = "\n".join(lines) + "\n"
    (a.out / "table.txt").write_text(text)
    log(text)


if __name__ == "__main__":
    sys.exit(main())
