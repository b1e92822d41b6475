"""benanza._native: the harness's statistics and stopping rule, checked against numpy on sample
series, and the device query's behaviour without a GPU."""
import json
import math

import numpy as np
import pytest

from benanza import _native
from conftest import HERE, have_gpu

RECORDED = HERE / "data" / "samples_h200.jsonl"


def _series():
    rng = np.random.default_rng(7)
    yield "steady", list(0.0421 + rng.normal(0, 0.0002, 40))
    yield "outliers", list(np.concatenate([0.1 + rng.normal(0, 0.0005, 30), [0.35, 0.5, 0.2]]))
    yield "bimodal", list(np.concatenate([np.full(20, 1.0), np.full(20, 1.2)]) + rng.normal(0, 0.01, 40))
    if RECORDED.exists():
        for line in RECORDED.read_text().splitlines():
            rec = json.loads(line)
            yield f"h200:{rec['kind']}:{rec['algorithm']}:{rec['cache']}", rec["samples_ms"]


@pytest.mark.parametrize("name,samples", list(_series()), ids=lambda v: v if isinstance(v, str) else "")
def test_summary_matches_numpy(name, samples):
    s = _native.summarize(samples, 0.01, 10)
    a = np.asarray(samples)
    assert s["n"] == len(a)
    assert s["median"] == pytest.approx(np.median(a), rel=1e-12)
    assert s["q1"] == pytest.approx(np.percentile(a, 25), rel=1e-12)
    assert s["q3"] == pytest.approx(np.percentile(a, 75), rel=1e-12)
    assert s["mean"] == pytest.approx(a.mean(), rel=1e-12)
    assert s["stddev"] == pytest.approx(a.std(ddof=1), rel=1e-9)
    assert (s["min"], s["max"]) == (a.min(), a.max())
    iqr = np.percentile(a, 75) - np.percentile(a, 25)
    rse = math.sqrt(math.pi / 2) * (iqr / 1.349) / math.sqrt(len(a)) / np.median(a)
    assert s["rse"] == pytest.approx(rse, rel=1e-9)
    assert s["converged"] == (len(a) >= 10 and rse <= 0.01)


def test_stopping_rule():
    steady = [1.0 + 0.001 * (i % 3) for i in range(30)]
    noisy = list(np.random.default_rng(1).uniform(0.5, 1.5, 30))
    # never before the minimum, then as soon as the median is known to 1 %
    assert not _native.should_stop(steady[:9], 1.0, 0.01, 10, 2000, 1000.0)
    assert _native.should_stop(steady[:10], 1.0, 0.01, 10, 2000, 1000.0)
    # noisy series keep sampling until the time cap or the sample cap
    assert not _native.should_stop(noisy, 10.0, 0.01, 10, 2000, 1000.0)
    assert _native.should_stop(noisy, 1000.0, 0.01, 10, 2000, 1000.0)
    assert _native.should_stop(noisy[:25], 10.0, 0.01, 10, 25, 1000.0)
    # a very slow call stops on time after 3 samples, not before
    assert not _native.should_stop([500.0, 500.0], 1500.0, 0.01, 10, 2000, 1000.0)
    assert _native.should_stop([500.0, 500.0, 501.0], 1500.0, 0.01, 10, 2000, 1000.0)


def test_rse_shrinks_with_more_samples():
    rng = np.random.default_rng(3)
    a = list(1.0 + rng.normal(0, 0.05, 400))
    assert _native.summarize(a[:20])["rse"] > _native.summarize(a)["rse"]


@pytest.mark.skipif(have_gpu(), reason="checks the behaviour without a GPU")
def test_device_query_without_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        _native.query_devices()


@pytest.mark.skipif(not RECORDED.exists(), reason="no recorded sample series")
def test_recorded_h200_series_reproduce_the_harness_decisions():
    """Sample series the harness recorded on an H200 (--dump-samples): the statistics recomputed
    here equal what the GPU run stored, and the stopping rule stops exactly where it stopped."""
    series = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    assert len(series) >= 10
    for rec in series:
        s = rec["samples_ms"]
        stats = _native.summarize(s, 0.01, 10)
        assert stats["median"] == pytest.approx(rec["median_ms"], rel=1e-5)
        assert stats["rse"] == pytest.approx(rec["rse"], rel=1e-3, abs=1e-6)
        assert stats["converged"]
        assert _native.should_stop(s, 0.0, 0.01, 10, 2000, 1000.0)
        assert not _native.should_stop(s[:-1], 0.0, 0.01, 10, 2000, 1000.0)


def test_engine_details_name_the_engine_and_its_knobs():
    """The details stored with an engine-config measurement: engine global index and knob choices
    parsed from the cudnn-frontend plan name, knobs named as cudnnBackendKnobType_t."""
    d = json.loads(_native.engine_details("eng51_k2=9_k13=0_k18=0_k25=1_k27=4_k28=1", ["TENSOR_CORE"],
                                          ["RUNTIME_COMPILATION"], 0, 3))
    assert d == {"engine": 51, "knobs": {"TILE_SIZE": 9, "TILEK": 0, "IDX_MODE": 0, "WORKSPACE": 1,
                                         "TILE_CGA_M": 4, "TILE_CGA_N": 1},
                 "numerical_notes": ["TENSOR_CORE"], "behavior_notes": ["RUNTIME_COMPILATION"],
                 "heuristics_a_rank": 0, "heuristics_b_rank": 3}
    assert json.loads(_native.engine_details("eng0")) == {"engine": 0, "knobs": {}, "numerical_notes": [],
                                                          "behavior_notes": []}
    # an unknown knob type keeps its number; a name that is not an engine config keeps the notes only
    assert json.loads(_native.engine_details("eng7_k99=3"))["knobs"] == {"k99": 3}
    assert json.loads(_native.engine_details("plan4")) == {"numerical_notes": [], "behavior_notes": []}
