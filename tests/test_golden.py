"""Golden outputs: every case of tests/golden/cases.py gives, byte for byte, the output recorded in
tests/golden/out/NAME.txt (exit status, stdout, stderr and the files it writes, paths normalized).

The rule: a recording changes only in a commit that names the defect it fixes (issue 52's "Wrong
answers by default", or a later issue). A refactor changes none. To re-record one case after such a
fix: ``python tests/golden/record.py --only NAME`` (it runs the case as a child ``python -m
benanza`` and in one process, and writes only when both agree); commit the new recording with the fix.

The cases run in this process through the public entry ``benanza.cli.main(argv)`` with stdout and
stderr captured (a pipe's view: no terminal, COLUMNS=80), two workers side by side; the terminal
cases (``tty``) and any marked ``child`` run ``python -m benanza`` on a pseudo-terminal or pipes.
The reference databases unpack once into a cache folder of the session.
"""
from __future__ import annotations

import difflib
import multiprocessing
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))

from cases import BY_NAME, CASES  # noqa: E402
from harness import out_path, read_record, run_named, warm_cache  # noqa: E402

#: 2 workers: the CI machine's cores
WORKERS = 2


@pytest.fixture(scope="module")
def pending(request, tmp_path_factory):
    """Every selected case started in a pool of :data:`WORKERS` processes (each runs its cases
    in-process); a test waits for its own."""
    selected = {i.callspec.params["name"] for i in request.session.items
                if getattr(i, "originalname", None) == "test_golden" and hasattr(i, "callspec")}
    cache = tmp_path_factory.mktemp("golden-cache")
    warm_cache(cache)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WORKERS) as pool:
        # the slow cases (children, terminals, many steps) first, so that the pool ends together
        order = sorted((c for c in CASES if c.name in selected and not c.skip_reason()),
                       key=lambda c: (not (c.tty or c.child), -len(c.steps)))
        yield {c.name: pool.apply_async(run_named, (c.name, str(cache))) for c in order}


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_golden(name, pending):
    why = BY_NAME[name].skip_reason()
    if why:
        pytest.skip(why)
    path = out_path(name)
    assert path.exists(), f"no recording for {name}: run `python tests/golden/record.py --only {name}`"
    want = read_record(name)
    got = pending[name].get(timeout=900)
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            f"recorded {path.name}", "now", n=2))
        pytest.fail(f"golden case {name} changed (a recording changes only in a commit that names the "
                    f"defect it fixes; to re-record: python tests/golden/record.py --only {name}):\n"
                    f"{diff[:20000]}", pytrace=False)


def test_every_recording_has_a_case():
    """No recording left behind by a renamed or removed case."""
    names = {c.name for c in CASES}
    stale = sorted(p.stem for p in (GOLDEN / "out").glob("*.txt") if p.stem not in names)
    assert not stale, f"recordings without a case (delete them): {stale}"
