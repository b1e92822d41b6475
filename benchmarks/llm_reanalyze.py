#!/usr/bin/env python3
"""The LLM truth rows of a GPU run analysed again, here, with this checkout's code: no GPU, the run's own
database and exports. For a change of the analysis (not of the measurements) that must show what it
does to checked-in rows: each row's LBL as the run printed it and as the code prints it now, against the
run's eager and torch.compile kernel times and physical bound.

A run folder (`benchmarks/gpu_decoders.sh`'s SUB, as checked in under benchmarks/results/) holds
``llm-results.jsonl`` (the rows), the run's database (``decoders-db.sqlite``, ``.gz`` or ``.xz``) and
``run-exports.json`` ({run name: export key}, written from the run's ``llm-runs.tar.gz`` by
``--write-exports``); the exports come from the folder's ``exports.tgz`` or the checked-in seeds
(benchmarks/exports/). Each row's LBL is :func:`benanza.analysis.analyzer.analyze` of the export at
the row's batch and data type on the database's one system (warm cache, NCHW and NHWC: `benanza torch`'s
analysis), the headline ``lbl_ms``.

  python3 benchmarks/llm_reanalyze.py benchmarks/results/2026-11-28d/call1/g0 [more folders]

``--records FILE`` also writes the folders' ``llm_run`` records again with each document's ``lbl_ms`` (and
``complete``) this code's, the run's kept as ``run_lbl_ms``, for `truth.py --llm --merge` (listed right after the
folders it stands for, before any later run of the same cells: of several records the merge takes the last).
A STALE row keeps the run's figure.

Prints one line per row (config, phase, length, batch, dtype, eager / compile / bound ms, LBL then and
now) and a summary; exit status 1 when a row now fails (incomplete, above eager or compile, below the
bound) or cannot be judged: STALE, a fusion group this code forms has no measurement in the run's
database (the processing changed since the run: such a row needs a new run, not a new analysis).
"""
from __future__ import annotations

import argparse
import gzip
import json
import lzma
import re
import shlex
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEEDS = REPO / "benchmarks" / "exports"


def write_exports(folder: Path) -> dict[str, str]:
    """{run name: export key} from ``folder/llm-runs.tar.gz`` (each run's ``*.export.json``), written
    to ``folder/run-exports.json``."""
    out: dict[str, str] = {}
    with tarfile.open(folder / "llm-runs.tar.gz") as t:
        for m in t.getmembers():
            parts = Path(m.name).parts
            if m.isfile() and m.name.endswith(".export.json") and "runs" in parts:
                run = parts[parts.index("runs") + 1]
                out[run] = json.loads(t.extractfile(m).read()).get("key")
    (folder / "run-exports.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return out


def _database(folder: Path, tmp: Path) -> Path:
    for name, opener in (("decoders-db.sqlite", open), ("decoders-db.sqlite.gz", gzip.open),
                         ("decoders-db.sqlite.xz", lzma.open)):
        p = folder / name
        if p.is_file():
            dst = tmp / f"{folder.name}.sqlite"
            with opener(p, "rb") as src, open(dst, "wb") as out:
                shutil.copyfileobj(src, out)
            return dst
    raise SystemExit(f"benanza: {folder}: no decoders-db.sqlite(.gz|.xz)")


def _export(key: str, folder: Path, tmp: Path) -> Path:
    """The export ``key``.onnx from the folder's exports.tgz or a checked-in seed, unpacked in ``tmp``."""
    dst = tmp / f"{key}.onnx"
    if dst.is_file():
        return dst
    archives = [folder / "exports.tgz"] + sorted(SEEDS.glob("*.tgz")) + sorted(SEEDS.glob("*.tar.xz"))
    for a in archives:
        if not a.is_file():
            continue
        with tarfile.open(a) as t:
            for m in t.getmembers():
                if Path(m.name).name == f"{key}.onnx" and m.isfile():
                    dst.write_bytes(t.extractfile(m).read())
                    return dst
    raise SystemExit(f"benanza: export {key} is in neither {folder}/exports.tgz nor {SEEDS}")


def rows(folder: Path, tmp: Path, records: list | None = None) -> list[dict]:
    """Every (run, batch) of ``folder`` with the run's and this code's LBL; ``records``: append each run's
    record with this code's LBL in its documents (``--records``)."""
    from benanza.analysis.analyzer import analyze
    from benanza.database.store import open_db
    from benanza.processing.model import process

    if not (folder / "llm-results.jsonl").is_file():
        raise SystemExit(f"benanza: {folder}: no llm-results.jsonl (a benchmarks/gpu_decoders.sh run folder)")
    exports_path = folder / "run-exports.json"
    exports = json.loads(exports_path.read_text()) if exports_path.is_file() else write_exports(folder)
    db = open_db(str(_database(folder, tmp)), create=False)
    (system,) = db.systems()
    out = []
    for line in (folder / "llm-results.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("type") != "llm_run" or not r.get("docs"):
            continue
        run = Path(re.search(r"-o (\S+)", r["command"]).group(1)).name
        precision = shlex.split(r["command"])[shlex.split(r["command"]).index("--dtype") + 1]
        key = exports.get(run)
        if key is None:
            raise SystemExit(f"benanza: {folder}: run {run} has no export key in run-exports.json")
        by_batch: dict[int, dict] = {}
        for d in r["docs"]:
            row = by_batch.setdefault(d["batch"], {"config": r["config"], "phase": r["phase"], "len": r["len"],
                                                   "batch": d["batch"], "dtype": r["dtype"], "then_ms": d["lbl_ms"],
                                                   "bound_ms": d.get("bound_ms")})
            row["compile_ms" if d["label"].startswith("torch.compile") else "eager_ms"] = d["gpu_kernel_ms"]
        for b, row in sorted(by_batch.items()):
            ml = process(_export(key, folder, tmp), b)
            a = analyze(ml, db, system, precision, layouts=("NCHW", "NHWC"))
            # fusion groups this code forms that the run never planned (no row of any status): its
            # processing has changed since the run (a new group or config key), and the row can no
            # longer be judged from it; a group the run tried and failed is the run's own result
            missing = {f.key for f in a.fusions if f.fused_ms is None}
            tried = {m.layer_key for m in db.measurements(system.id, sorted(missing))} if missing else set()
            unmeasured = sum(1 for f in a.fusions if f.fused_ms is None and f.key not in tried)
            row.update(now_ms=a.lbl_ms, complete=a.complete, folder=str(folder), unmeasured_groups=unmeasured)
            out.append(row)
            if records is not None and not unmeasured:
                for d in r["docs"]:
                    if d["batch"] == b:
                        d.update(run_lbl_ms=d["lbl_ms"], lbl_ms=a.lbl_ms, complete=a.complete)
        if records is not None:
            records.append(dict(r, reanalyzed=True))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--records", type=Path, help="also write the records with this code's LBL here (JSON lines)")
    ap.add_argument("--write-exports", action="store_true",
                    help="only write each folder's run-exports.json from its llm-runs.tar.gz")
    a = ap.parse_args(argv)
    if a.write_exports:
        for f in a.folders:
            print(f"{f}: {len(write_exports(f))} runs")
        return 0
    bad = stale = 0
    print(f"{'config':<12}{'phase':<9}{'len':>5}{'b':>4} {'dtype':<6}{'eager ms':>10}{'compile ms':>11}{'bound ms':>10}"
          f"{'LBL then':>10}{'LBL now':>10}{'change':>8}{'now/compile':>12}  flag")
    records: list | None = [] if a.records else None
    with tempfile.TemporaryDirectory() as tmp:
        for folder in a.folders:
            for r in rows(folder, Path(tmp), records):
                frame = [x for x in (r.get("eager_ms"), r.get("compile_ms")) if x is not None]
                if r["unmeasured_groups"]:
                    stale += 1
                    print(f"{r['config']:<12}{r['phase']:<9}{r['len']:>5}{r['batch']:>4} {r['dtype']:<6}  STALE: "
                          f"{r['unmeasured_groups']} fusion groups of this code are not in the run's database "
                          f"({r['folder']}; LBL then {r['then_ms']:.3f} ms, now {r['now_ms']:.3f} ms without them)")
                    continue
                flags = [f for f, bad_ in (("INCOMPLETE", not r["complete"]),
                                           ("LBL>FRAMEWORK", any(r["now_ms"] > x for x in frame)),
                                           ("BOUND>LBL", r["bound_ms"] is not None and r["bound_ms"] > r["now_ms"]))
                         if bad_]
                bad += bool(flags)
                comp = r.get("compile_ms")
                print(f"{r['config']:<12}{r['phase']:<9}{r['len']:>5}{r['batch']:>4} {r['dtype']:<6}"
                      f"{r.get('eager_ms') or float('nan'):>10.3f}{comp or float('nan'):>11.3f}"
                      f"{r['bound_ms'] or float('nan'):>10.3f}{r['then_ms'] or float('nan'):>10.3f}"
                      f"{r['now_ms']:>10.3f}{(r['now_ms'] / r['then_ms'] - 1) if r['then_ms'] else float('nan'):>+8.1%}{(r['now_ms'] / comp) if comp else float('nan'):>12.3f}"
                      f"  {' '.join(flags) or 'ok'}")
    if a.records:
        a.records.write_text("".join(json.dumps(r) + "\n" for r in records))
    print((f"{bad} rows fail" if bad else "every row judged holds")
          + (f"; {stale} rows stale (the run's database lacks groups this code forms), not judged" if stale else ""))
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
