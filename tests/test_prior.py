"""The prior (docs/timing.md, "Prior"; benanza/runner/prior.py, cpp/include/benanza/prior.hpp): a job's
contenders within the margin of the prior's best and a deterministic sample of the others; jobs the prior
has not seen timed in full; another GPU's measurements ignored; differing library versions said; the file
the suite reads, parsed by the harness's own reader (compiled here with the host compiler, no GPU); and a
run through the fake suite that stores the skipped candidates with the prior's message and gives the same
LBL as the full run."""
import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from benanza.analysis.analyzer import analyze
from benanza.database.records import MeasurementLine
from benanza.database.store import Measurement, open_db
from benanza.errors import UsageError
from benanza.generation.generator import load_suite
from benanza.kinds.backend import Backend
from benanza.processing.model import process
from benanza.reports.suite import run_doc
from benanza.runner import prior as P
from benanza.runner.run import PRIOR_FILE, RunOptions, register_suite, run_suite
from benanza.usecases.bench import run_line
from conftest import REPO
from fake_suite import system as fake_system

H200 = "NVIDIA H200"


def row(call, algorithm, median, status="ok", layout="NCHW", cache="warm", dtype="float32", math="fma"):
    return SimpleNamespace(call=call, algorithm=algorithm, median_ms=median if status == "ok" else None,
                           status=status, layout=layout, cache=cache, dtype=dtype, math=math, details="",
                           backend=Backend.of_call(call))


def test_contenders_are_those_within_the_margin_of_the_best_and_a_hashed_sample_of_the_others():
    rows = [row("conv", "best", 1.0), row("conv", "near", 1.05), row("conv", "edge", 1.1),
            row("conv", "out", 1.12), row("gemm", "slow", 3.0), row("conv", "raced", None, status="raced_out"),
            row("conv", "nosup", None, status="not_supported"),
            row("conv", "nhwc", 0.5, layout="NHWC"),  # another layout: another job
            row("torch:aten::conv2d", "eager", 0.4),  # the framework's kernel: its own job
            row("conv", "tf32", 0.3, math="tf32"),  # not an fp32 time (the LBL's rule): no best, but known
            row("conv", "capped", None, status="skipped")]  # never measured (--max-engines): unknown, so timed
    others = [c for c in sorted({(r.call, r.algorithm) for r in rows if r.layout == "NCHW"
                                 and not r.call.startswith("torch:") and r.status != "skipped"})
              if c[1] not in ("best", "near", "edge")]
    for every in (1, 2, 8, 1000):
        pj = P.select("k.fp32", rows, "fp32", "NCHW", margin=0.10, sample_every=every)
        assert pj.best_ms == 1.0 and pj.contenders == 3
        time = set(pj.time)
        assert {("conv", "best"), ("conv", "near"), ("conv", "edge")} <= time
        assert set(pj.known) == {("conv", "best"), ("conv", "near"), ("conv", "edge")} | set(others)
        assert ("conv", "capped") not in pj.known
        sample = time - {("conv", "best"), ("conv", "near"), ("conv", "edge")}
        assert sample <= set(others) and pj.sampled == len(sample) >= 1
        if every == 1:
            assert sample == set(others)
        if every == 1000:  # no hash is 0 modulo 1000 here: the one of least hash, as promised
            assert len(sample) == 1
        assert P.select("k.fp32", list(reversed(rows)), "fp32", "NCHW", 0.10, every) == pj  # deterministic
    wide = P.select("k.fp32", rows, "fp32", "NCHW", margin=0.2, sample_every=8)
    assert ("conv", "out") in wide.time and wide.contenders == 4
    # the sample depends on the job: another job id samples by its own hash
    assert any(set(P.select(f"j{i}.fp32", rows, "fp32", "NCHW", 0.1, 3).time) != set(pj.time) for i in range(20))
    nhwc = P.select("k.fp32.nhwc", rows, "fp32", "NHWC")
    assert nhwc.time == (("conv", "nhwc"),) and nhwc.known == (("conv", "nhwc"),)


def test_a_job_without_a_valid_time_in_the_prior_is_timed_in_full():
    assert P.select("k.fp32", [], "fp32", "NCHW") is None
    assert P.select("k.fp32", [row("conv", "a", None, status="raced_out"), row("conv", "b", 0.2, math="tf32"),
                               row("torch:aten::conv2d", "eager", 0.1)], "fp32", "NCHW") is None


def _lines(job, times: dict, math="fma", dtype="float32"):
    return [MeasurementLine(call="fakeConv", algorithm=a, math=math, dtype=dtype, job=job.id,
                            layer_key=job.layer_key, kind=job.kind, precision=job.precision,
                            status="ok" if t is not None else "not_supported", median_ms=t, q1_ms=t, q3_ms=t,
                            mean_ms=t, min_ms=t, max_ms=t, rse=0.004 if t else None, samples=20 if t else None,
                            method="cuda_graph", reps=10)
            for a, t in times.items()]


def _hand_made_prior(path: Path, suite, jobs, cudnn=91900) -> str:
    """A prior database by hand: an H200 (cuDNN ``cudnn``) that measured ``jobs[0:2]`` and an H100 that
    measured ``jobs[0]`` (faster, to be ignored) and ``jobs[2]``."""
    db = open_db(f"sqlite:///{path}")
    register_suite(suite, db)
    h200 = db.upsert_system(dict(fake_system(), gpu_name=H200, cudnn_version=cudnn, uuid="GPU-h200"))
    h100 = db.upsert_system(dict(fake_system(), gpu_name="NVIDIA H100 80GB HBM3", uuid="GPU-h100"))
    times = {"A": 1.0, "B": 1.04, "C": 1.5, "D": 2.0, "E": 4.0, "F": None}
    for j in jobs[:2]:
        db.write_job(h200, None, j.id, j.layer_key, j.precision, "ok", "", _lines(j, times))
    for j in (jobs[0], jobs[2]):
        db.write_job(h100, None, j.id, j.layer_key, j.precision, "ok", "", _lines(j, {"C": 0.1, "A": 0.5}))
    db.close()
    return str(path)


def test_the_plan_of_a_hand_made_database_takes_this_gpu_only_and_says_when_versions_differ(fake_suite, tmp_path):
    suite = load_suite(fake_suite)
    jobs = [j for j in suite.jobs if j.precision == "fp32" and j.layout == "NCHW" and j.kind == "Conv"][:3]
    src = _hand_made_prior(tmp_path / "prior.db", suite, jobs)
    here = dict(fake_system(), gpu_name=H200)
    db = open_db(src, create=False)
    plan = P.prior_plan(db, "prior.db", here, suite.jobs)
    assert set(plan.jobs) == {jobs[0].id, jobs[1].id}  # jobs[2]: the H100's only
    assert set(plan.unseen) == {j.id for j in suite.jobs} - set(plan.jobs)
    assert plan.versions == "" and plan.systems == [s.label() for s in db.systems() if s.gpu_name == H200]
    for j in jobs[:2]:
        pj = plan.jobs[j.id]
        assert pj.best_ms == 1.0 and pj.contenders == 2  # A and B (within 10 %), not the H100's C at 0.1 ms
        assert {("fakeConv", "A"), ("fakeConv", "B")} <= set(pj.time)
        assert set(pj.known) == {("fakeConv", a) for a in "ABCDEF"}
        assert pj.sampled >= 1
    # the file the suite reads
    path = plan.write(tmp_path / "prior.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == "benanza-prior" and doc["version"] == 1
    assert doc["message"] == "prior: not a contender on NVIDIA H200 (prior.db)"
    assert doc["jobs"][jobs[0].id]["time"] == [list(c) for c in plan.jobs[jobs[0].id].time]
    assert doc["jobs"][jobs[0].id]["known"] == [list(c) for c in plan.jobs[jobs[0].id].known]
    assert jobs[2].id in doc["unseen"] and doc["margin"] == 0.1 and doc["sample_every"] == 8
    # a GPU the prior has not measured: one line naming the prior's GPUs
    with pytest.raises(UsageError, match="no measurements of NVIDIA A100.*NVIDIA H100 80GB HBM3, NVIDIA H200"):
        P.prior_plan(db, "prior.db", dict(here, gpu_name="NVIDIA A100"), suite.jobs)
    db.close()
    # another cuDNN: the prior still ranks, and says the versions differ
    old = open_db(_hand_made_prior(tmp_path / "old.db", suite, jobs, cudnn=91000), create=False)
    plan = P.prior_plan(old, "old.db", here, suite.jobs)
    assert set(plan.jobs) == {jobs[0].id, jobs[1].id}
    assert plan.versions.startswith("versions differ: the prior's cuDNN 91000") and "this machine's cuDNN 91900" \
        in plan.versions
    old.close()


def test_a_run_with_a_prior_stores_the_skipped_candidates_and_keeps_the_lbl(fake_suite, tmp_path, models,
                                                                            monkeypatch):
    """The fake suite's times are the same on every run (a hash of job and algorithm), so a prior taken
    from one full run must leave the next run's LBL where the full run put it: the best is always a
    contender. The skipped records carry the prior's message and no time."""
    monkeypatch.setenv("FAKE_SUITE_GPU", H200)
    suite = load_suite(fake_suite)
    prior_url = f"sqlite:///{tmp_path / 'prior.db'}"
    full = run_suite(suite, open_db(prior_url), RunOptions())
    assert full.prior is None and full.prior_skipped == 0 and full.candidates > 0
    target = open_db(f"sqlite:///{tmp_path / 'target.db'}")
    s = run_suite(suite, target, RunOptions(prior=str(tmp_path / "prior.db")))
    assert s.ok == len(suite.jobs) and s.failed == 0
    plan = json.loads((fake_suite / PRIOR_FILE).read_text())
    assert s.prior["jobs_seen"] == len(plan["jobs"]) > 0 and s.prior["gpu_name"] == H200
    with target.session() as ses:
        skipped = ses.query(Measurement).filter(Measurement.status == "skipped").all()
    assert len(skipped) == s.prior_skipped > 0 and s.candidates == full.candidates
    by_key = {(j.layer_key, j.precision): j.id for j in suite.jobs if j.layout == "NCHW"}
    for m in skipped:
        assert m.message == f"prior: not a contender on {H200} ({tmp_path / 'prior.db'})"
        assert m.median_ms is None
        lists = plan["jobs"][by_key[(m.layer_key, m.precision)]]
        assert [m.call, m.algorithm] in lists["known"] and [m.call, m.algorithm] not in lists["time"]
    text = run_line(s)
    assert f"prior ({tmp_path / 'prior.db'}, {H200}): {s.prior_skipped:,} of {s.candidates:,} candidates skipped" \
        in text
    assert run_doc(s)["prior"]["skipped"] == s.prior_skipped and run_doc(s)["prior"]["source"] == str(
        tmp_path / "prior.db")
    # the LBL from the contenders is the full run's
    ml = process(models / "googlenet.onnx", 1)
    pdb = open_db(prior_url, create=False)
    for p in ("fp32", "fp16"):
        a = analyze(ml, target, target.systems()[0], p)
        b = analyze(ml, pdb, pdb.systems()[0], p)
        assert a.complete and b.complete and a.lbl_ms == pytest.approx(b.lbl_ms, rel=1e-12)
    pdb.close()
    # ``self``: the target database's own earlier runs (again, --force). The candidates the prior run
    # skipped were never measured: no evidence, so this run times them; the next one skips them again
    again = run_suite(suite, target, RunOptions(prior=P.SELF, force=True))
    assert again.prior["source"] == "self" and again.prior_skipped == 0
    third = run_suite(suite, target, RunOptions(prior=P.SELF, force=True))
    assert third.prior_skipped == s.prior_skipped
    target.close()


_DRIVER = r"""
#include "benanza/prior.hpp"
#include <iostream>
#include <string>
int main(int, char** argv) {
  try {
    const benanza::Prior p = benanza::Prior::load(argv[1]);
    std::cout << p.jobs() << "\n" << p.message() << "\n";
    std::string job, call, algorithm;
    while (std::getline(std::cin, job) && std::getline(std::cin, call) && std::getline(std::cin, algorithm))
      std::cout << benanza::Prior::wanted(p.job(job), call, algorithm) << "\n";
  } catch (const std::exception& e) {
    std::cout << "error: " << e.what() << "\n";
    return 1;
  }
}
"""


def test_the_harness_reads_the_prior_file_as_written(tmp_path):
    """cpp/src/prior.cpp compiled with the host compiler (it includes no CUDA header) reads the file
    :meth:`PriorPlan.write` writes, escapes and non-ASCII names included, and answers wanted() as the
    plan says: a contender or sampled candidate yes, a known other no, one the prior never saw yes, every
    candidate of a job it has not seen yes. A file that is not a prior is one line of error."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    (tmp_path / "driver.cpp").write_text(_DRIVER)
    exe = tmp_path / "driver"
    subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", f"-I{REPO / 'cpp' / 'include'}",
                    str(REPO / "cpp" / "src" / "prior.cpp"), str(tmp_path / "driver.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    odd = 'eng0_k2="q\\uote"\t\u00e9\U0001F600'
    rows = [row("cudnnBackendExecute", odd, 1.0), row("cudnnBackendExecute", "eng1", 1.02),
            row("cublasLtMatmul", "slow", 5.0), row("cublasLtMatmul", "slower", 6.0),
            row("cublasLtMatmul", "slowest", 7.0)]
    pj = P.select("k.fp32", rows, "fp32", "NCHW", sample_every=1000)
    plan = P.PriorPlan(source="db/x \"y\".sqlite.gz", gpu_name=H200, systems=[], versions="", margin=0.1,
                       sample_every=1000, jobs={"k.fp32": pj}, unseen=["u.fp32"])
    path = plan.write(tmp_path / "prior.json")
    queries = [("k.fp32", c, a) for c, a in pj.known] + [("k.fp32", "cublasLtMatmul", "new"),
                                                        ("u.fp32", "cublasLtMatmul", "slow")]
    proc = subprocess.run([str(exe), str(path)], input="".join(f"{j}\n{c}\n{a}\n" for j, c, a in queries),
                          capture_output=True, text=True, check=True)
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["1", plan.message()]
    want = [c in pj.time for c in pj.known] + [True, True]
    assert lines[2:] == [str(int(w)) for w in want]
    assert want.count(False) == 2  # three slow ones, one sampled
    (tmp_path / "bad.json").write_text('{"format": "benanza-prior", "version": 1, "jobs": {"k": {"time": [["a"]]}}}')
    bad = subprocess.run([str(exe), str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert bad.returncode == 1 and "an entry of time is not [call, algorithm]" in bad.stdout
    (tmp_path / "bad.json").write_text('{"format": "benanza-prior", "jobs": {"k": [}')
    bad = subprocess.run([str(exe), str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert bad.returncode == 1 and "not JSON" in bad.stdout


def _bz(*args, env=None):
    import os
    import sys

    return subprocess.run([sys.executable, "-c", "from benanza.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, env=dict(os.environ, **(env or {})), timeout=600)


def test_the_command_line_says_how_many_candidates_the_prior_skipped_and_refuses_a_bad_prior(fake_suite, tmp_path):
    h200 = {"FAKE_SUITE_GPU": H200}
    prior, target = tmp_path / "prior.db", tmp_path / "target.db"
    assert _bz("run", fake_suite, "--db", prior, "--no-torch", "-q", env=h200).returncode == 0
    p = _bz("run", fake_suite, "--db", target, "--no-torch", "-q", "--json", "--prior", prior, env=h200)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)["prior"]
    assert doc["gpu_name"] == H200 and doc["source"] == str(prior) and doc["versions"] == ""
    assert 0 < doc["skipped"] < doc["candidates"] and doc["margin"] == 0.1 and doc["jobs_unseen"] == 0
    p = _bz("run", fake_suite, "--db", target, "--no-torch", "-q", "--force", "--prior", "self",
            "--prior-margin", "0", env=h200)
    assert p.returncode == 0, p.stderr
    assert f"prior (self, {H200}): " in p.stdout and "candidates skipped (" in p.stdout
    # one line for a prior that does not open, a GPU it has not measured, --exhaustive, a bad margin
    for args, env, words in (((("--prior", tmp_path / "nope.sqlite.gz"),), h200, "no such file"),
                             ((("--prior", prior),), {"FAKE_SUITE_GPU": "NVIDIA A100"},
                              "no measurements of NVIDIA A100 in the prior (its GPUs: NVIDIA H200)"),
                             ((("--prior", prior), ("--exhaustive",)), h200, "--prior with --exhaustive"),
                             ((("--prior", prior), ("--prior-margin", "-1")), h200, "--prior-margin must be in")):
        p = _bz("run", fake_suite, "--db", tmp_path / "other.db", "--no-torch", "-q",
                *[a for pair in args for a in pair], env=env)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode != 0 and len(lines) == 1 and lines[0].startswith("benanza: ") and words in lines[0], \
            p.stderr


@pytest.mark.slow
def test_a_built_suite_takes_the_prior_file(harness, tmp_path):
    """The session's first suite (conftest.harness: the whole harness compiled with nvcc and the wheels)
    reads --prior while it parses its arguments, before any GPU work (--list needs none): a prior file it
    lists its jobs with, one that is not a prior a one-line usage error (exit 2)."""
    exe = str(harness.first.executable)
    jobs = [j for j in harness.suite.jobs]
    plan = P.PriorPlan(source="db/reference/h200_truth.sqlite.gz", gpu_name=H200, systems=[], versions="",
                       margin=0.1, sample_every=8,
                       jobs={jobs[0].id: P.PriorJob(time=(("cublasLtMatmul", "a"),), known=(("cublasLtMatmul", "a"),
                                                                                             ("cublasLtMatmul", "b")),
                                                    contenders=1, sampled=0, best_ms=1.0)})
    good = plan.write(tmp_path / "prior.json")
    p = subprocess.run([exe, "--list", "--prior", str(good)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == len(jobs), p.stderr
    (tmp_path / "bad.json").write_text('{"format": "benanza-prior", "version": 1, "jobs": []}')
    p = subprocess.run([exe, "--list", "--prior", str(tmp_path / "bad.json")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and p.stderr.strip() == (f"benanza-suite: {tmp_path / 'bad.json'}: prior: no "
                                                      "\"jobs\" object")
