"""benchmarks/train_step.py's phase attribution (the PyTorch side of `truth.py --train`) on the
recorded H100 training trace of resnet18 (batch 2, fp32, SGD; benchmarks/record_train_trace.py):
it must agree with the training join's own sums (benanza/profiles/train_join.py), which
record_train_trace printed when the trace was recorded: step kernels 1.8515 ms; forward 0.5644,
loss 0.0048, backward 1.1435, optimizer 0.1389 ms."""
from pathlib import Path

import pytest

from benchmark_modules import load

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "tests" / "data" / "traces" / "resnet18_train_b2_fp32.json.gz"


@pytest.fixture(scope="module")
def train_step():
    return load("train_step")


def test_phases_of_a_recorded_training_step(train_step):
    from benanza.profiles.trace import read_trace

    st = train_step.phase_stats(read_trace(TRACE))
    assert st["kernel_ms"]["n"] == 2  # two profiled iterations
    assert st["kernel_ms"]["median"] == pytest.approx(1.8515, abs=5e-4)
    ph = {p: v["median"] for p, v in st["phase_ms"].items()}
    assert ph["forward"] == pytest.approx(0.5644, abs=5e-4)
    assert ph["loss"] == pytest.approx(0.0048, abs=5e-4)
    assert ph["backward"] == pytest.approx(1.1435, abs=5e-4)
    assert ph["optimizer"] == pytest.approx(0.1389, abs=5e-4)
    # every kernel of the step is in one phase: nothing launched outside them
    assert sum(ph.values()) == pytest.approx(st["kernel_ms"]["median"], abs=1e-3)
    assert st["kernels_per_iteration"] > 100 and st["top_kernels"]


def test_stats_of_nothing_is_no_number(train_step):
    assert train_step.stats([]) == {"median": None, "iqr": None, "n": 0}
    assert train_step.stats([1.0, 3.0])["median"] == 2.0
