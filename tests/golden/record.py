"""Record the golden outputs: ``python tests/golden/record.py [--only NAME ...] [--jobs N]``.

Phase 1: each case runs twice in a worker process through ``benanza.cli.main`` (what
tests/test_golden.py runs; the second run finds the model cache warm); the two records must be equal
byte for byte, else the case is reported with a diff and nothing is written for it. Phase 2 (skip it
with ``--no-child``): each case runs as a child ``python -m benanza`` (what a user sees), and its
record must equal phase 1's, else the case is reported (its file is kept: compare by hand).
``--check`` writes nothing and reports the cases whose record differs from the file; ``--verify``
runs phase 2 alone against the files.

A recording changes only in a commit that names the defect of issue 52 it fixes.
"""
from __future__ import annotations

import argparse
import difflib
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import OUT, out_path, read_record, run_named, warm_cache, write_record  # noqa: E402
from cases import BY_NAME, CASES  # noqa: E402


def _twice(job):
    name, cache = job
    t = time.perf_counter()
    first = run_named(name, cache, "inprocess")
    second = run_named(name, cache, "inprocess")
    return name, first, second, time.perf_counter() - t


def _child(job):
    name, cache = job
    t = time.perf_counter()
    return name, run_named(name, cache, "child"), time.perf_counter() - t


def _diff(a: str, b: str, what_a: str, what_b: str) -> None:
    sys.stdout.writelines(list(difflib.unified_diff(a.splitlines(True), b.splitlines(True), what_a, what_b,
                                                    n=1))[:80])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these cases")
    ap.add_argument("--jobs", type=int, default=2, help="cases side by side (default 2)")
    ap.add_argument("--no-child", action="store_true", help="skip phase 2 (the child python -m benanza runs)")
    ap.add_argument("--check", action="store_true", help="write nothing; report records that differ from the files")
    ap.add_argument("--verify", action="store_true", help="phase 2 alone: each child's record against the file")
    a = ap.parse_args()
    names = [c.name for c in CASES]
    if a.only:
        unknown = sorted(set(a.only) - set(names))
        if unknown:
            ap.error(f"unknown case(s): {', '.join(unknown)}")
        names = list(dict.fromkeys(a.only))  # in the order given
    for n in list(names):
        why = BY_NAME[n].skip_reason()
        if why:
            print(f"skip {n}: {why}")
            names.remove(n)
    OUT.mkdir(exist_ok=True)
    cache = tempfile.mkdtemp(prefix="golden-cache-")
    warm_cache(Path(cache))
    bad, records = set(), {}
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(a.jobs) as pool:
        if a.verify:
            records = {n: read_record(n) for n in names if read_record(n) is not None}
            bad = set(names) - set(records)
        for name, first, second, secs in pool.imap_unordered(_twice, [] if a.verify else [(n, cache) for n in names]):
            problems = []
            if second != first:
                problems.append("its two runs differ")
            old = read_record(name)
            if a.check and old != first:
                problems.append("differs from the recording")
                if old is not None:
                    _diff(old, first, "recorded", "now")
            if problems:
                bad.add(name)
                print(f"FAIL {name} ({secs:.1f} s): {'; '.join(problems)}", flush=True)
                if second != first:
                    _diff(first, second, "first", "second")
                continue
            records[name] = first
            if not a.check:
                write_record(name, first)
            print(f"ok   {name} ({secs:.1f} s, {len(first.encode())} bytes)", flush=True)
        if not a.verify:
            print(f"phase 1: {len(names) - len(bad)} of {len(names)} cases {'match' if a.check else 'recorded'} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        if not a.no_child:
            for name, child, secs in pool.imap_unordered(_child, [(n, cache) for n in names if n in records]):
                if child != records[name]:
                    bad.add(name)
                    print(f"FAIL {name} ({secs:.1f} s): python -m benanza differs from benanza.cli.main", flush=True)
                    _diff(child, records[name], "child", "in-process")
                else:
                    print(f"ok   {name}: python -m benanza gives the same ({secs:.1f} s)", flush=True)
    if not a.only and not a.check:
        for s in sorted(p.name for p in OUT.glob("*.txt") if p.stem not in BY_NAME):
            print(f"stale recording (no such case): {s}")
    print(f"{len(names) - len(bad)} of {len(names)} cases pass ({time.perf_counter() - t0:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
