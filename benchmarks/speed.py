#!/usr/bin/env python3
"""Where `benanza bench` spends its time, and whether racing keeps the answer (issue "The main job in
under a minute").

For each model it runs `benanza bench MODEL --batch B --dtype D --json` on a fresh database with each
policy of `--policies` (:data:`POLICIES`; default: the default policy, racing with cold figures for
contenders), each into a fresh database, the suite compiled once (by the first). Each bench writes its job log (`BENANZA_PHASES_LOG`: per job its
wall time, database write and the harness's own time per phase, from `--profile`), so the tables say:

* stages: process, generate, compile, run (library calls), framework candidates, analyze, wall;
* phases of the run and framework stages, summed over jobs: worker start, set-up (descriptors,
  heuristics queries, engine-config enumeration: the job's wall time less what follows), plan builds,
  first call + output check, warm-up, graph capture, race screen, warm samples, cold samples, kernel
  names (framework), database writes; and the GPU-busy fraction: the GPU time of the samples
  themselves over the stage's wall time (the physical floor of the stage);
* measurements by how they ended (ok, raced_out, not_supported, skipped, failed);
* `--repeat`: a second bench on the same database (no GPU work; goal <= 3 s);
* with `default` and `exhaustive` (or `before`) among the policies: per model, batch and data type the default's LBL against the exhaustive
  one (goal: median <= 1 %, max <= 3 %), and per job whether the default's chosen implementation is
  the exhaustive run's, or within the noise of it (its exhaustive median within max(2 %, the best's
  IQR / median) of the exhaustive best; goal >= 95 % of jobs).

  python3 benchmarks/speed.py --out /tmp/speed --model examples/resnet50.onnx --batch 1,32 \\
      --dtype fp32,fp16 --repeat --policies default,before
  python3 benchmarks/speed.py --out /tmp/speed --zoo resnet50,mobilenet_v2 --policies default,exhaustive
  python3 benchmarks/speed.py --out /tmp/speed --model examples/resnet50.onnx --batch 1,32 --dtype fp32,fp16 \
      --policies default,prior,exhaustive   # the prior (docs/timing.md, "Prior") against both

`--zoo` exports models of `benchmarks/zoo.py` (PyTorch, torchvision, transformers). Everything lands
in `--out` as it comes (`runs.jsonl`, `table.txt`), so a run cut short keeps what finished.
`--table-only` reprints the tables from an earlier `--out`. Needs a GPU (and PyTorch for the
framework candidates and `--zoo`).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from json_docs import scenarios_of  # noqa: E402  (bench --json: its scenarios, schema 1 or before)
PHASES = ("first", "warmup", "capture", "screen", "warm", "cold")


#: the policies a run can time: the default (racing, cold figures for contenders), --exhaustive
#: (every candidate to the stopping rule, cold for all), the default with one, three or four suite
#: processes per GPU ("default-1w", "default-3w", "default-4w"), the policy before racing ("before":
#: the 1.5x one-replay screen, cold for all),
#: the default on GPU 0 alone ("gpu0") or on every GPU of the host ("all-gpus"), for the
#: several-GPU speed-up of the run stage, and the default with the framework's kernels beside the
#: suite's run ("beside": BENANZA_FRAMEWORK_BESIDE_RUN=1, :data:`POLICY_ENV`), and the default with
#: the batch-norm graphs built as dynamic-shape graphs on one kernel cache per process ("kernel-cache":
#: BENANZA_KERNEL_CACHE=1, cpp/src/batchnorm_engines.cpp; for training benches, ``--extra=--train`` on a training export),
#: and the default with a prior ("prior": ``--prior`` of ``--prior-source``, default the shipped H200 truth
#: database; docs/timing.md, "Prior": only each job's contenders and a sample of the others timed)
POLICIES = {"prior": ["--prior", "{prior}"], "default": [], "beside": [], "kernel-cache": [], "default-1w": ["--workers-per-gpu", "1"], "default-3w": ["--workers-per-gpu", "3"],
            "default-4w": ["--workers-per-gpu", "4"], "exhaustive": ["--exhaustive"],
            "before": ["--exhaustive", "--screen", "1.5", "--warmup-ms", "2"],
            "gpu0": ["--devices", "0"], "all-gpus": ["--devices", "all"]}
#: environment a policy's bench runs with (beside its options)
POLICY_ENV = {"beside": {"BENANZA_FRAMEWORK_BESIDE_RUN": "1"}, "kernel-cache": {"BENANZA_KERNEL_CACHE": "1"}}
#: what --fresh removes before each policy's first bench: benanza's caches (the compiled harness, the
#: toolkit links) and CUDA's JIT cache, as on a fresh machine
FRESH_PATHS = (Path.home() / ".cache" / "benanza", Path.home() / ".nv" / "ComputeCache")


def bench(model: Path, args, db: Path, suite: Path, log: Path, policy: str, profile: Path | None = None) -> dict:
    """One `benanza bench --json` in a subprocess (from /tmp: the installed package runs); its JSON
    with `wall_s` added. ``profile``: run it under cProfile and write the 30 costliest calls
    (cumulative) there. Raises RuntimeError with bench's last error line when it fails."""
    prof = ["-m", "cProfile", "-o", str(profile.with_suffix(".pstats"))] if profile else []
    cmd = [sys.executable, *prof, "-m", "benanza", "bench", str(model), "--batch", args.batch, "--dtype", args.dtype,
           "--db", str(db), "-o", str(suite), "--json", *args.extra.split()]
    cmd += [o.format(prior=args.prior_source) for o in POLICIES[policy]]
    env = dict(os.environ, BENANZA_PHASES_LOG=str(log), **POLICY_ENV.get(policy, {}))
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir(), env=env)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"bench {model.name} failed ({p.returncode}): "
                           f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    doc = json.loads(p.stdout)
    doc["wall_s"] = wall
    if profile:
        import io
        import pstats

        buf = io.StringIO()
        pstats.Stats(str(profile.with_suffix(".pstats")), stream=buf).sort_stats("cumulative").print_stats(30)
        profile.write_text(f"wall {wall:.2f} s (under cProfile)\n" + buf.getvalue())
    return doc


def phase_table(log: Path) -> dict:
    """Per worker kind (suite, framework): the phase sums (s) of the job log, job count, GPU time."""
    out: dict[str, dict] = {}
    starts: list[float] = []
    for line in log.read_text().splitlines() if log.exists() else []:
        r = json.loads(line)
        if r["event"] == "worker_start":
            starts.append(r["start_s"])
            continue
        side = "framework" if r["job"].endswith(".torch") else "suite"
        t = out.setdefault(side, {"jobs": 0, "wall": 0.0, "store": 0.0, "build": 0.0, "gpu": 0.0, "kernels": 0.0,
                                  "wait": 0.0,
                                  **{p: 0.0 for p in PHASES}, "status": {}})
        t["jobs"] += 1
        t["wall"] += r["wall_s"]
        t["store"] += r["store_s"]
        t["gpu"] += r["gpu_ms"] / 1e3
        t["build"] += r["build_ms"] / 1e3
        jc = r.get("job_cost_ms") or {}
        for p in PHASES:
            t[p] += float(jc.get(p, r["phases_ms"].get(p, 0.0))) / 1e3
        t["kernels"] += float(jc.get("kernels", 0.0)) / 1e3
        t["wait"] += float(jc.get("gpu_wait", 0.0)) / 1e3
        for k, v in r["status"].items():
            t["status"][k] = t["status"].get(k, 0) + v
    for t in out.values():
        t["setup"] = max(0.0, t["wall"] - t["build"] - t["kernels"] - t["wait"] - sum(t[p] for p in PHASES))
    out["worker_starts"] = starts
    return out


def best_rows(db: Path) -> dict:
    """(layer key, precision) -> (call, algorithm, math, layout, median, q1, q3) of the fastest valid
    warm measurement, any source and layout."""
    con = sqlite3.connect(db)
    best: dict = {}
    for k, p, c, a, m, lay, med, q1, q3 in con.execute(
            "select layer_key, precision, call, algorithm, math, layout, median_ms, q1_ms, q3_ms from measurements "
            "where status = 'ok' and cache = 'warm' and median_ms is not null"):
        if (k, p) not in best or med < best[(k, p)][4]:
            best[(k, p)] = (c, a, m, lay, med, q1, q3)
    con.close()
    return best


def chosen_agreement(db_default: Path, db_exhaustive: Path) -> dict:
    """How often the default's chosen implementation per (config, precision) is the exhaustive one's,
    or within its noise (see the module docstring)."""
    d, e = best_rows(db_default), best_rows(db_exhaustive)
    con = sqlite3.connect(db_exhaustive)
    times = {(k, p, c, a, m, lay): med for k, p, c, a, m, lay, med in con.execute(
        "select layer_key, precision, call, algorithm, math, layout, median_ms from measurements "
        "where status = 'ok' and cache = 'warm' and median_ms is not null")}
    con.close()
    same = noise = other = 0
    worst = []
    for key, (c, a, m, lay, med, _, _) in d.items():
        if key not in e:
            continue
        ec, ea, em, el, emed, eq1, eq3 = e[key]
        if (c, a, m, lay) == (ec, ea, em, el):
            same += 1
            continue
        t = times.get((*key, c, a, m, lay))
        tol = max(0.02, (eq3 - eq1) / emed if eq1 is not None and eq3 is not None and emed else 0.02)
        if t is not None and t <= emed * (1 + tol):
            noise += 1
        else:
            other += 1
            worst.append((key[0][:40], key[1], c, a, t, emed))
    n = same + noise + other
    return {"jobs": n, "same": same, "within_noise": noise, "other": other,
            "share": (same + noise) / n if n else None, "misses": worst[:10],
            "cold": cold_agreement(db_default, db_exhaustive, d)}


def _cold_rows(db: Path) -> dict:
    con = sqlite3.connect(db)
    rows = {(k, p, c, a, m, lay): med for k, p, c, a, m, lay, med in con.execute(
        "select layer_key, precision, call, algorithm, math, layout, median_ms from measurements "
        "where status = 'ok' and cache = 'cold' and median_ms is not null")}
    con.close()
    return rows


def cold_agreement(db_default: Path, db_exhaustive: Path, chosen: dict) -> dict:
    """The default's cold (L2-flushed) median of each job's chosen implementation against the
    exhaustive run's cold median of the same implementation (the default caps a cold measurement at
    RunOptions.cold_max_time_ms, --exhaustive at max_time_ms): count, median and 90th percentile of
    |diff| in %."""
    import numpy as np

    d, e = _cold_rows(db_default), _cold_rows(db_exhaustive)
    diffs = []
    for key, (c, a, m, lay, *_rest) in chosen.items():
        k = (*key, c, a, m, lay)
        if k in d and k in e and e[k] > 0:
            diffs.append(abs(d[k] / e[k] - 1.0) * 100.0)
    if not diffs:
        return {"n": 0}
    return {"n": len(diffs), "median_pct": float(np.median(diffs)), "p90_pct": float(np.percentile(diffs, 90))}


def _agreements(runs: list[dict], out: Path) -> None:
    """Each default run's chosen-implementation agreement with the exhaustive run of its model (or
    the run before racing) in the same folder."""
    for r in runs:
        if r["policy"] not in ("default", "prior"):
            continue
        for ref in ("exhaustive", "before"):
            a, b = out / f"{r['model']}-{r['policy']}.db", out / f"{r['model']}-{ref}.db"
            if a.exists() and b.exists():
                r["chosen"] = chosen_agreement(a, b)
                break


def fmt_stage_table(runs: list[dict]) -> str:
    head = f"{'model':22} {'policy':10} {'process':>7} {'gen':>5} {'compile':>7} {'run':>7} {'framework':>9} " \
           f"{'analyze':>7} {'wall':>7} {'repeat':>6}"
    lines = ["stages (s)", head]
    for r in runs:
        st = r["stages"]
        lines.append(f"{r['model'][:22]:22} {r['policy']:10} {st.get('process_s', 0):7.1f} {st.get('generate_s', 0):5.1f} "
                     f"{st.get('compile_s', 0):7.1f} {st.get('run_s', 0):7.1f} {st.get('torch_s', 0):9.1f} "
                     f"{st.get('analyze_s', 0):7.1f} {r['wall_s']:7.1f} "
                     f"{(format(r['repeat_s'], '6.1f') if r.get('repeat_s') is not None else '-'):>6}")
    return "\n".join(lines)


def fmt_phase_table(runs: list[dict]) -> str:
    cols = ("jobs", "start", "wait", "setup", "build", "first", "warmup", "capture", "screen", "warm", "cold",
            "kernels", "store", "gpu", "busy")
    lines = ["phases of the run and framework stages (s, summed over jobs and processes; wait: for the GPU lock of "
             "the other process on the GPU; busy = GPU time of the samples / stage wall)",
             f"{'model':22} {'policy':10} {'side':9} " + " ".join(f"{c:>7}" for c in cols)]
    for r in runs:
        ph = r["phases"]
        for side, stage in (("suite", "run_s"), ("framework", "torch_s")):
            t = ph.get(side)
            if not t:
                continue
            wall = r["stages"].get(stage) or 0.0
            starts = sum(ph.get("worker_starts", [])) if side == "suite" else 0.0
            vals = [t["jobs"], starts, t.get("wait", 0.0), t["setup"], t["build"], *(t[p] for p in PHASES),
                    t["kernels"], t["store"], t["gpu"], (t["gpu"] / wall if wall else 0.0)]
            cells = [f"{v:7d}" if isinstance(v, int) else f"{v:7.2f}" for v in vals]
            lines.append(f"{r['model'][:22]:22} {r['policy']:10} {side:9} " + " ".join(cells))
        st = {}
        for side in ("suite", "framework"):
            for k, v in (ph.get(side) or {}).get("status", {}).items():
                st[k] = st.get(k, 0) + v
        lines.append(f"{'':22} {'':10} {'records':9} " + ", ".join(f"{k} {v}" for k, v in sorted(st.items())))
    return "\n".join(lines)


def analysis_row(a: dict) -> dict:
    """What the tables keep of one analysis of `bench --json`: batch, precision, the LBL (ms) and
    whether it is complete; with ``--extra=--train``, the training step's LBL (critical path, ms) and
    completeness as ``step_ms`` and ``step_complete``."""
    row = {k: a.get(k) for k in ("batch", "precision", "lbl_ms", "complete")}
    step = a.get("training_step")
    if step:
        row["step_ms"], row["step_complete"] = step.get("critical_path_ms"), step.get("complete")
    return row


def run_record(model: str, policy: str, doc: dict, phases: dict, fresh: bool) -> dict:
    """The ``runs.jsonl`` record of one bench: its ``bench --json`` document's stages, wall time, GPU
    name and, under ``analyses`` (this file's key), :func:`analysis_row` of each scenario (the
    envelope's ``scenarios``; a bench document before schema 1 had them as ``analyses``)."""
    return {"model": model, "policy": policy, "stages": doc["stages"], "wall_s": doc["wall_s"],
            "analyses": [analysis_row(a) for a in scenarios_of(doc, f"bench --json of {model}")],
            "phases": phases, "system": (doc.get("system") or {}).get("gpu_name"), "fresh": fresh,
            **({"prior": doc["run"]["prior"]} if (doc.get("run") or {}).get("prior") else {})}


def fmt_compare(runs: list[dict]) -> str:
    """Each policy's LBLs against --exhaustive's (or the policy before racing) of the same model, and
    the "beside" policy's against the default's (the same measurements scheduled differently: its
    |diff| is run-to-run noise)."""
    by = {(r["model"], r["policy"]): r for r in runs}
    lines = ["LBL (ms, fused critical path): each policy against --exhaustive (or the policy before racing; "
             "'beside' also against 'default')",
             f"{'model':22} {'policy':18} {'batch':>5} {'dtype':6} {'policy':>9} {'reference':>10} {'diff %':>7} "
             f"{'complete':>8}"]
    diffs: dict[str, list[float]] = {}
    agree = []
    for (model, policy), r in by.items():
        refs = [p for p in ("exhaustive", "before") if (model, p) in by][:1]
        if policy == "beside" and (model, "default") in by:
            refs.append("default")
        if policy in ("exhaustive", "before"):
            continue
        for ref in refs:
            x = by[(model, ref)]
            ex = {(a["batch"], a["precision"]): a for a in x["analyses"]}
            for a in r["analyses"]:
                b = ex.get((a["batch"], a["precision"]))
                if b is None:
                    continue
                # the inference LBL, and the training step's where the bench ran --train
                for key, done, what in (("lbl_ms", "complete", ""), ("step_ms", "step_complete", " step")):
                    if a.get(key) is None or b.get(key) is None:
                        continue
                    d = (a[key] - b[key]) / b[key] * 100
                    diffs.setdefault(f"{policy}{what} against {ref}", []).append(abs(d))
                    lines.append(f"{model[:22]:22} {(policy + what)[:18]:18} {a['batch']:5d} {a['precision']:6} "
                                 f"{a[key]:9.4f} {b[key]:10.4f} {d:+7.2f} {str(bool(a[done] and b[done])):>8}  ({ref})")
        if r.get("chosen"):
            agree.append((model if policy == "default" else f"{model} ({policy})", r["chosen"]))
        if r.get("prior"):
            p = r["prior"]
            lines.append(f"{model} ({policy}): {p.get('label')}: {p.get('skipped', 0):,} of "
                         f"{p.get('candidates', 0):,} candidates skipped" + (f"; {p['versions']}" if p.get("versions")
                                                                             else ""))
    for what, ds in diffs.items():
        lines.append(f"{what}: |diff| median {statistics.median(ds):.2f} %, max {max(ds):.2f} % over {len(ds)} rows "
                     "(goals: <= 1 %, <= 3 %)")
    for model, c in agree:
        lines.append(f"{model}: chosen implementation same {c['same']}, within noise {c['within_noise']}, other "
                     f"{c['other']} of {c['jobs']} jobs ({100 * (c['share'] or 0):.1f} %; goal >= 95 %)")
        for m in c["misses"]:
            lines.append(f"    miss: {m}")
        cold = c.get("cold") or {}
        if cold.get("n"):
            lines.append(f"    cold median of the chosen implementation, default against exhaustive: |diff| median "
                         f"{cold['median_pct']:.2f} %, 90th percentile {cold['p90_pct']:.2f} % over {cold['n']} jobs")
    if agree:
        tot = [sum(c[k] for _, c in agree) for k in ("same", "within_noise", "jobs")]
        lines.append(f"all {len(agree)} models: chosen implementation same or within noise on {tot[0] + tot[1]} of "
                     f"{tot[2]} jobs ({100 * (tot[0] + tot[1]) / max(1, tot[2]):.1f} %)")
    return "\n".join(lines)


def tables(runs: list[dict]) -> str:
    speed = [r for r in runs if "stages" in r]
    return "\n\n".join(x for x in (fmt_stage_table(speed), fmt_phase_table(speed), fmt_compare(speed)) if x)


def zoo_models(names: str, folder: Path) -> list[Path]:
    sys.path.insert(0, str(HERE))
    import zoo

    out = []
    for e in zoo.select(names):
        path = folder / f"{e.name}.onnx"
        if not path.exists():
            zoo.export_model(e, path)
        out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--model", action="append", type=Path, default=[], help="ONNX model (repeatable)")
    ap.add_argument("--zoo", default="", help="benchmarks/zoo.py models to export and bench, e.g. resnet50,vit_b_16")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp32,fp16")
    ap.add_argument("--extra", default="", help="more bench options, e.g. '--conv-tf32 --devices all'")
    ap.add_argument("--repeat", action="store_true", help="time a second bench on the same database")
    ap.add_argument("--profile-repeat", action="store_true",
                    help="with --repeat: a third bench under cProfile, its costliest calls in repeat-MODEL.prof.txt")
    ap.add_argument("--policies", default="default", help="of " + ", ".join(POLICIES) + "; comma-separated")
    ap.add_argument("--prior-source", default=str(HERE.parent / "db" / "reference" / "h200_truth.sqlite.gz"),
                    help="the prior policy's --prior (a database file or URL, or self)")
    ap.add_argument("--fresh", action="store_true",
                    help="before each policy's bench remove benanza's and CUDA's caches and the suite (a fresh "
                         "machine each time; the repeat keeps them)")
    ap.add_argument("--copy-to", type=Path, default=None, help="copy table.txt and runs.jsonl here after each bench")
    ap.add_argument("--deadline", type=float, default=0, help="start no bench after this many seconds")
    ap.add_argument("--table-only", action="store_true", help="reprint the tables of an earlier --out")
    args = ap.parse_args(argv)
    args.out = args.out.resolve()
    log_path = args.out / "runs.jsonl"
    if args.table_only and not log_path.is_file():
        ap.error(f"--table-only: no earlier run in {args.out} ({log_path.name} is missing)")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.table_only:
        runs = [json.loads(x) for x in log_path.read_text().splitlines()]
        print(tables(runs))
        return 0
    t_start = time.perf_counter()
    policies = [p for p in args.policies.split(",") if p]
    bad = [p for p in policies if p not in POLICIES]
    if bad:
        ap.error(f"unknown policy {bad[0]!r} (known: {', '.join(POLICIES)})")
    models = [m.resolve() for m in args.model] + (zoo_models(args.zoo, args.out / "onnx") if args.zoo else [])
    # earlier runs into the same --out (other models or policies) stay in the tables
    runs: list[dict] = [json.loads(x) for x in log_path.read_text().splitlines()] if log_path.exists() else []
    for model in models:
        for policy in policies:
            if args.deadline and time.perf_counter() - t_start > args.deadline:
                print(f"deadline: {model.name} {policy} not started", flush=True)
                continue
            tag = f"{model.stem}-{policy}"
            db, log = args.out / f"{tag}.db", args.out / f"{tag}.phases.jsonl"
            for p in (db, log):
                p.unlink(missing_ok=True)
            if args.fresh:
                for p in (*FRESH_PATHS, args.out / f"suite-{model.stem}"):
                    shutil.rmtree(p, ignore_errors=True)
            try:
                doc = bench(model, args, db, args.out / f"suite-{model.stem}", log, policy)
            except RuntimeError as e:
                print(e, flush=True)
                continue
            rec = run_record(model.stem, policy, doc, phase_table(log), args.fresh)
            if args.repeat and policy in ("default", "beside"):
                rec["repeat_s"] = bench(model, args, db, args.out / f"suite-{model.stem}", log.with_suffix(".repeat"),
                                        policy)["wall_s"]
                if args.profile_repeat:
                    prof = args.out / f"repeat-{model.stem}.prof.txt"
                    bench(model, args, db, args.out / f"suite-{model.stem}", log.with_suffix(".repeat2"), policy,
                          profile=prof)
                    if args.copy_to:
                        args.copy_to.mkdir(parents=True, exist_ok=True)
                        (args.copy_to / prof.name).write_bytes(prof.read_bytes())
            runs = [r for r in runs if (r["model"], r["policy"]) != (model.stem, policy)] + [rec]
            _agreements(runs, args.out)
            with log_path.open("w") as f:
                f.writelines(json.dumps(r) + "\n" for r in runs)
            (args.out / "table.txt").write_text(tables(runs) + "\n")
            if args.copy_to:
                args.copy_to.mkdir(parents=True, exist_ok=True)
                for name in ("table.txt", "runs.jsonl"):
                    (args.copy_to / name).write_bytes((args.out / name).read_bytes())
            print(f"{tag}: {doc['wall_s']:.1f} s", flush=True)
    print(tables(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
