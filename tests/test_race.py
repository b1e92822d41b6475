"""The race among a job's candidates (cpp/include/benanza/stats.hpp, RaceRule): its order-statistic
bounds of the median, its decisions on sample series recorded on an H200, what a raced-out candidate
leaves in the database, and the cold-figure policy. No GPU: the rule runs through benanza._native,
the same header the suites compile."""
import json
import math
from collections import OrderedDict

import numpy as np
import pytest

from benanza import _native
from benanza.database import query
from benanza.database.store import Measurement, open_db
from benanza.profiles.torch_candidates import Policy
from benanza.database.records import MeasurementLine, estimated_ms
from conftest import HERE

#: every candidate of 12 convolution jobs of resnet50 (batch 1 and 32, fp32 and fp16), sampled to the
#: stopping rule without racing, every sample kept (benchmarks/gpu_race.sh with SERIES=12, an NVIDIA
#: H200, 2026-11-26): 500 series
SERIES = HERE / "data" / "race_series_h200.jsonl"


def _binomial_rank(n: int, alpha: float) -> int:
    """The largest l with P(Bin(n, 1/2) <= l - 1) <= alpha (0: none), from exact integers."""
    l, cdf = 0, 0
    while l < n:
        cdf += math.comb(n, l)
        if cdf / 2 ** n > alpha:
            break
        l += 1
    return l


@pytest.mark.parametrize("alpha", [0.025, 0.05, 0.005])
def test_bound_ranks_are_the_binomial_rule(alpha):
    for n in range(1, 300):
        assert _native.median_bound_rank(n, alpha) == _binomial_rank(n, alpha), n
    # the textbook values: n = 10 at 2.5 % is x_(2); n = 100 gives the 95 % interval [x_(40), x_(61)]
    assert _native.median_bound_rank(10, 0.025) == 2
    assert _native.median_bound_rank(100, 0.025) == 40
    assert _native.median_bound_rank(5, 0.025) == 0 and _native.median_bound_rank(6, 0.025) == 1


def test_bounds_cover_the_median_at_their_level():
    """Monte Carlo: for skewed (lognormal) and heavy-tailed (t, 2 dof) samples of a known median, the
    lower bound exceeds it and the upper bound falls below it each with frequency <= alpha."""
    rng = np.random.default_rng(11)
    for n in (6, 10, 23, 64):
        for draw in (lambda k: rng.lognormal(0.0, 0.5, k), lambda k: 1.0 + rng.standard_t(2, k)):
            median = 1.0
            above = below = 0
            trials = 4000
            for _ in range(trials):
                lo, hi = _native.median_bounds(list(draw(n)), 0.025)
                above += lo > median
                below += hi < median
            assert above / trials <= 0.025 + 0.008 and below / trials <= 0.025 + 0.008, (n, above, below)
    lo, hi = _native.median_bounds([1.0, 2.0, 3.0, 4.0, 5.0], 0.025)
    assert (lo, hi) == (-math.inf, math.inf)  # 5 samples bound nothing at 2.5 %


def test_race_out_needs_the_lower_bound_above_the_best():
    assert _native.race_defaults() == {"screen_samples": 6, "alpha": 0.025, "check_every": 4, "gross_ratio": 4.0,
                                       "gross_margin_ms": 0.25}
    assert _native.race_out([1.10] * 6, best_ucb_ms=1.05)
    assert not _native.race_out([1.10] * 5 + [1.04], best_ucb_ms=1.05)  # its minimum is below the bound
    assert not _native.race_out([2.0] * 5, best_ucb_ms=1.0)  # too few samples for a bound
    assert not _native.race_out([2.0] * 6, best_ucb_ms=math.inf)  # no best yet


def test_the_gross_screen_needs_both_the_ratio_and_the_margin():
    """A warm-up estimate leaves before any graph is captured only when it is above 4 x the best's
    upper bound and 0.25 ms above it: mobilenet_v2's per-group loops (H100, benchmarks/gpu_capture.sh:
    6.5 ms per call against a best near 0.01 ms) leave; a small call's launch overhead (a 0.004 ms
    kernel read at 0.04 ms on its warm-up) does not, nor a big call 10 % slower than the best."""
    assert _native.race_gross_out(6.5, best_ucb_ms=0.012)
    assert _native.race_gross_out(17.47, best_ucb_ms=0.3)
    assert not _native.race_gross_out(0.04, best_ucb_ms=0.004)  # 10 x, but within 0.25 ms: launch overhead
    assert not _native.race_gross_out(3.0, best_ucb_ms=1.0)  # 2 ms above, but only 3 x
    assert _native.race_gross_out(4.01, best_ucb_ms=1.0)
    assert not _native.race_gross_out(100.0, best_ucb_ms=math.inf)  # no best yet
    assert not _native.race_gross_out(math.nan, best_ucb_ms=0.01)


def _jobs():
    jobs: OrderedDict[str, list[dict]] = OrderedDict()
    for line in SERIES.read_text().splitlines():
        r = json.loads(line)
        jobs.setdefault(r["job"], []).append(r)
    return jobs


def _race(candidates: list[dict]):
    """The harness's online race replayed on recorded series, in the order the suite timed them:
    each candidate screened with its first 6 samples against the best so far, a contender kept in
    full (its later samples checked every 4 against the best's bound), the best replaced when a
    contender's median is lower. Returns (the kept best, [how each candidate ended])."""
    rr = _native.race_defaults()
    best, best_ucb, best_med, ended = None, math.inf, math.inf, []
    for c in candidates:
        s = c["samples_ms"]
        if _native.race_out(s[:rr["screen_samples"]], best_ucb):
            ended.append("raced_out")
            continue
        n = rr["screen_samples"]
        left = False
        while n < len(s):
            n = min(len(s), n + rr["check_every"])
            if _native.race_out(s[:n], best_ucb):
                left = True
                break
        if left:
            ended.append("raced_out")
            continue
        ended.append("measured")
        med = float(np.median(s))
        if med < best_med:
            best, best_med, best_ucb = c, med, _native.median_bounds(s, rr["alpha"])[1]
    return best, ended


@pytest.mark.skipif(not SERIES.exists(), reason="the recorded series are not in this checkout")
def test_race_keeps_the_best_of_every_recorded_job():
    jobs = _jobs()
    assert len(jobs) == 12 and sum(len(c) for c in jobs.values()) == 500
    raced = total = 0
    for job, cands in jobs.items():
        best, ended = _race(cands)
        assert len(ended) == len(cands)  # every candidate ends one way or the other: none is missing
        truth = min(cands, key=lambda c: np.median(c["samples_ms"]))
        assert best is truth or np.median(best["samples_ms"]) <= 1.01 * np.median(truth["samples_ms"]), job
        raced += ended.count("raced_out")
        total += len(ended)
    # most candidates leave the race on their screen: the GPU time goes to the contenders
    assert raced / total > 0.8


@pytest.mark.skipif(not SERIES.exists(), reason="the recorded series are not in this checkout")
def test_a_slower_candidate_with_its_own_noise_leaves_and_a_tie_stays():
    cands = next(iter(_jobs().values()))
    best = min(cands, key=lambda c: np.median(c["samples_ms"]))
    ucb = _native.median_bounds(best["samples_ms"], 0.025)[1]
    s = np.asarray(best["samples_ms"][:6])
    assert _native.race_out(list(s * 1.05), ucb)  # 5 % slower with the same noise: out
    assert not _native.race_out(list(s * 1.0), ucb)  # itself: a contender


def _raced_out_line(**kw) -> MeasurementLine:
    d = {"type": "measurement", "job": "j", "call": "cudnnBackendExecute", "algorithm": "eng9", "math": "tensor_op",
         "dtype": "float16", "status": "raced_out", "cache": "warm", "estimate_ms": 0.0123, "lcb_ms": 0.0121,
         "ucb_ms": 0.0126, "best_ms": 0.0101, "best_ucb_ms": 0.0103, "samples": 6, "reps": 40,
         "message": "raced out: 0.0123 ms per call (median of 6 screen samples, 95 % bounds [0.0121, 0.0126] ms) "
                    "> the job's best so far 0.0101 ms (upper bound 0.0103 ms in like samples); not sampled further"}
    d.update(kw)
    return MeasurementLine.from_json(d)


def test_a_raced_out_candidate_is_a_row_without_a_time(tmp_path, models):
    """The record says how the candidate ended (its screen time and bounds in the message): stored
    with status raced_out and no median, never counted as a time, and its estimate readable by the
    analyses that cost a framework's choice (insights)."""
    from benanza.processing.model import process

    ml = process(models / "resnet18.onnx", 1)
    cfg = next(ly.config for ly in ml.layers if ly.config is not None and ly.config.kind == "Conv")
    db = open_db(f"sqlite:///{tmp_path / 'p.db'}")
    sid = db.upsert_system({"gpu_name": "H200", "sm_count": 132})
    db.upsert_configs([cfg])
    ok = MeasurementLine.from_json({"type": "measurement", "call": "cudnnBackendExecute", "algorithm": "eng1",
                                    "math": "tensor_op", "dtype": "float16", "status": "ok", "cache": "warm",
                                    "median_ms": 0.0101, "samples": 20})
    db.write_job(sid, None, "j", cfg.key, "fp16", "ok", "", [ok, _raced_out_line()])
    with db.session() as s:
        rows = {r.algorithm: r for r in s.query(Measurement)}
    assert rows["eng9"].status == "raced_out" and rows["eng9"].median_ms is None and rows["eng9"].samples == 6
    assert estimated_ms(rows["eng9"].status, rows["eng9"].message) == pytest.approx(0.0123)
    best = query.best_per_config(db, system=sid, precision="fp16", keys=[cfg.key])
    assert best[cfg.key].algorithm == "eng1"  # the raced-out one is never the layer's time


@pytest.mark.parametrize("policy,warm,best,want", [
    ("contenders", 1.00, 1.00, True),    # the chosen implementation
    ("contenders", 1.04, 1.00, True),    # within 5 %
    ("contenders", 1.06, 1.00, False),   # beyond 5 %: no cold figure
    ("contenders", 0.90, 1.00, True),    # faster than the library's best: it is the layer's best
    ("contenders", 1.30, None, True),    # no library figure yet: its own best
    ("all", 9.00, 1.00, True),
    ("none", 1.00, 1.00, False),
])
def test_cold_figures_for_contenders(policy, warm, best, want):
    assert Policy(cold=policy).wants_cold(warm, best) is want
