"""The training step's what-if composition (benanza/analysis/train_whatif.py) on the recorded
training trace of torchvision's resnet18, batch 2, fp32 (tests/data/traces, joined as
tests/test_train_join.py joins it), against a hand-made benanza step: the arithmetic (savings add up
exactly to the measured step minus the final figure), the floor (never below the step's LBL), the
steps that are None (not 0) without their measurement, the alternatives from database rows, and
the ``torch --train`` report."""
import json
import math
import types
from pathlib import Path

import pytest

from benchmark_modules import load

from benanza.analysis.train_whatif import STEPS, StepAlternatives, compose_step, step_alternatives

DATA = Path(__file__).parent / "data" / "traces"
TRACE = DATA / "resnet18_train_b2_fp32.json.gz"
MODEL = DATA / "resnet18_train.onnx"
WALL = json.loads((DATA / "resnet18_train_b2_fp32.profile.json").read_text())["latency"]["median_ms"]


@pytest.fixture(scope="module")
def joined():
    from benanza.processing.model import process
    from benanza.profiles.join import layer_paths, trace_has_scopes
    from benanza.profiles.trace import read_trace
    from benanza.profiles.train_join import train_join

    ml = process(MODEL, 2)
    tr = read_trace(TRACE)
    return ml, train_join(tr, ml, layer_paths(ml, MODEL) if trace_has_scopes(tr) else None)


def _step(ml, lbl_ms=0.5, fusions=(), calls=None):
    """A benanza training step of ``ml`` with LBL ``lbl_ms``: each Conv's data and weight gradient
    measured (1:3), the fusion groups ``fusions``."""
    from benanza.analysis.analyzer import Analysis
    from benanza.analysis.training import BackwardTime, TrainingStep

    if calls is None:
        calls = [BackwardTime(ly.index, ly.name, ph, "ConvBwd", "", f"k{ly.index}{ph}", ms)
                 for ly in ml.layers if ly.op_type == "Conv"
                 for ph, ms in (("backward_data", 0.001), ("backward_weight", 0.003))]
    fwd = types.SimpleNamespace(missing=[], fusions=list(fusions), layers=[])
    fwd.kind_precision = lambda kind: Analysis.kind_precision(fwd, kind)  # the analysis' own rule
    return TrainingStep(model="resnet18_train", batch=2, precision_label="fp32", layouts=("NCHW",), forward=fwd,
                        phase_ms={"forward": 0.1, "loss": 0.01, "backward_data": 0.1, "backward_weight": 0.2,
                                  "optimizer": 0.05},
                        sequential_ms=lbl_ms * 1.2, critical_path_ms=lbl_ms, calls=calls)


def _cmp(joined, step, wall=WALL):
    from benanza.profiles.train_compare import TrainComparison

    return TrainComparison(joined[1], step, {"step_wall_ms": {"median_ms": wall, "iqr_ms": 0.0}} if wall else {})


def _sums_exactly(w):
    saved = math.fsum(s.saving_ms for s in w.steps if s.saving_ms is not None)
    assert saved == pytest.approx(w.start_ms - w.final_ms, abs=1e-12)
    ms = w.start_ms
    for s in w.steps:  # a chain: each step starts where the one before ended
        assert s.ms_before == pytest.approx(ms, abs=1e-12)
        assert s.ms_after == pytest.approx(ms - (s.saving_ms or 0.0), abs=1e-12)
        assert s.saving_ms is None or s.saving_ms >= 0
        ms = s.ms_after
    assert [s.kind for s in w.steps] == [k for k, _ in STEPS]
    assert w.final_ms >= w.lbl_ms - 1e-12


def _conv_groups(ml):
    """The export's Conv -> BatchNormalization -> Relu groups as fusion groups with a fused time,
    under another kind (ConvBiasAct) than the inference-only fold; and one such fold (ConvBnAct),
    which the step never takes."""
    from benanza.analysis.analyzer import FusionTime

    groups = [f.layers for f in ml.fusions]
    return [FusionTime(g, f"ConvBiasAct-{g[0]}", None, 1e-4) for g in groups[1:]] + \
        [FusionTime(groups[0], f"ConvBnAct-{groups[0][0]}", None, 1e-6)]


def test_every_step_with_its_measurement(joined):
    ml, tj = joined
    busy = tj.step_ms(("kernel", "memcpy", "memset"))["median_ms"]
    opt = tj.role_ms()["optimizer"]["median_ms"]
    layers = {r["layer"] for r in tj.layer_ms()}
    groups = _conv_groups(ml)
    assert groups
    alt = StepAlternatives(fused_optimizer_ms=opt / 4, fused_optimizer_call="torch:aten::_fused_sgd_",
                           engine={i: 0.001 for i in layers}, channels_last={i: 0.0005 for i in layers},
                           amp_ratio={i: 0.5 for i in layers})
    w = compose_step(_cmp(joined, _step(ml, 0.2, groups)), ml, alt)
    _sums_exactly(w)
    s = {x.kind: x for x in w.steps}
    assert w.start_ms == pytest.approx(WALL) and w.start_is_wall
    assert s["cuda_graphs"].ms_after == pytest.approx(busy)  # the wall time -> the GPU busy time
    assert s["fused_optimizer"].saving_ms == pytest.approx(opt * 3 / 4)
    assert all(x.saving_ms > 0 for x in w.steps), [(x.kind, x.saving_ms) for x in w.steps]
    # AMP halves what the layers take after the steps before it (the timeline: layers + optimizer + rest)
    rest = busy - sum(r["forward_ms"] + r["backward_ms"] for r in tj.layer_ms()) - opt
    assert s["amp"].saving_ms == pytest.approx((s["amp"].ms_before - opt / 4 - rest) / 2)
    assert s["fusion"].layers and set(s["fusion"].layers) == {i for g in groups[:-1] for i in g.layers}
    assert not w.clamped and w.final_ms > w.lbl_ms


def test_steps_without_their_measurement_are_none_not_zero(joined):
    ml, tj = joined
    w = compose_step(_cmp(joined, _step(ml)))
    _sums_exactly(w)
    s = {x.kind: x for x in w.steps}
    assert s["cuda_graphs"].saving_ms > 0  # the wall time is known
    for k in ("fused_optimizer", "algorithm_selection", "channels_last", "amp", "fusion", "parallel_execution"):
        assert s[k].saving_ms is None and s[k].effect_ms is None and s[k].evidence, k
    assert w.final_ms == pytest.approx(tj.step_ms(("kernel", "memcpy", "memset"))["median_ms"])
    # without a wall time, the start is the GPU busy time and CUDA graphs are not estimated
    w = compose_step(_cmp(joined, _step(ml), wall=None), ml)
    assert not w.start_is_wall and w.steps[0].saving_ms is None
    assert w.steps[-1].saving_ms > 0  # resnet18's residual branches and weight gradients overlap
    _sums_exactly(w)
    assert "not estimated: CUDA graphs, fused optimizer" in w.headline("resnet18 batch 2 fp32")


def test_a_change_that_slows_the_step_is_not_taken(joined):
    ml, tj = joined
    opt = tj.role_ms()["optimizer"]["median_ms"]
    layers = {r["layer"] for r in tj.layer_ms()}
    w = compose_step(_cmp(joined, _step(ml)), ml, StepAlternatives(fused_optimizer_ms=opt * 2,
                                                                  amp_ratio={i: 1.5 for i in layers}))
    _sums_exactly(w)
    s = {x.kind: x for x in w.steps}
    for k in ("fused_optimizer", "amp"):
        assert s[k].saving_ms == 0 and s[k].effect_ms < 0 and "not taken" in s[k].evidence[0]
    assert s["fused_optimizer"].effect_ms == pytest.approx(-opt)


def test_never_below_the_step_lbl(joined):
    ml, tj = joined
    layers = {r["layer"] for r in tj.layer_ms()}
    busy = tj.step_ms(("kernel", "memcpy", "memset"))["median_ms"]
    lbl = busy * 0.9  # above what AMP at 1/10 reaches
    w = compose_step(_cmp(joined, _step(ml, lbl)), ml, StepAlternatives(amp_ratio={i: 0.1 for i in layers}))
    _sums_exactly(w)
    assert w.clamped and w.final_ms == pytest.approx(lbl)
    s = {x.kind: x for x in w.steps}
    assert s["parallel_execution"].saving_ms == 0  # the last steps' savings are cut first
    assert s["amp"].saving_ms == pytest.approx(busy - lbl)
    assert "(the lower bound)" in w.headline("x")


class _Rows:
    """A database's measurement rows (what :meth:`Database.measurements` gives)."""

    def __init__(self, rows):
        self.rows = rows

    def measurements(self, system_id, keys, cache="warm"):
        return [r for r in self.rows if r.layer_key in keys and r.cache == cache]


def _row(key, call, ms, layout="NCHW", precision="fp32", dtype="float32", status="ok"):
    from benanza.kinds.backend import Backend

    return types.SimpleNamespace(layer_key=key, call=call, median_ms=ms, layout=layout, precision=precision,
                                 dtype=dtype, status=status, cache="warm", backend=Backend.of_call(call))


def test_alternatives_from_database_rows():
    from benanza.analysis.analyzer import Analysis
    from benanza.analysis.training import BackwardTime

    lt = lambda i, key, ms, kind="": types.SimpleNamespace(  # noqa: E731
        layer=types.SimpleNamespace(index=i, key=key, config=types.SimpleNamespace(kind=kind)), time_ms=ms)
    opt = BackwardTime(-1, "", "optimizer", "Optimizer", "", "opt", 0.2,
                       config=types.SimpleNamespace(algorithm="adam"))
    calls = [BackwardTime(0, "conv", "backward_data", "ConvBwdData", "", "c0d", 0.3),
             BackwardTime(0, "conv", "backward_weight", "ConvBwdFilter", "", "c0w", 0.5),
             BackwardTime(1, "relu", "backward_data", "ActivationBwd", "", "r1d", None)]
    fwd = types.SimpleNamespace(layers=[lt(0, "c0", 0.2, "Conv"), lt(1, "r1", 0.1, "Activation")], precision="fp32",
                                conv_precision="tf32", cache="warm")
    fwd.kind_precision = lambda kind: Analysis.kind_precision(fwd, kind)  # the analysis' own rule
    step = types.SimpleNamespace(forward=fwd, calls=calls, optimizer_call=opt)
    db = _Rows([_row("opt", "torch:aten::_fused_adam_", 0.05), _row("opt", "torch:aten::_fused_adam_", 0.04,
                                                                      status="failed"),
                _row("opt", "torch:aten::_foreach_addcdiv_", 0.01),  # for-each: not the fused step
                *[_row(k, "torch:aten::x", ms, lay, "tf32") for k, ms, lay in
                  (("c0", 0.3, "NCHW"), ("c0", 0.2, "NHWC"), ("c0d", 0.5, "NCHW"), ("c0d", 0.3, "NHWC"),
                   ("c0w", 0.6, "NCHW"), ("c0w", 0.7, "NHWC"))],
                # PyTorch's fp32 convolutions run in TF32: its FMA rows (NHWC slower) are not the step's
                *[_row(k, "torch:aten::x", ms, lay, "fp32") for k, ms, lay in
                  (("c0", 0.3, "NCHW"), ("c0", 0.9, "NHWC"), ("c0d", 0.5, "NCHW"), ("c0d", 0.9, "NHWC"),
                   ("c0w", 0.6, "NCHW"), ("c0w", 0.9, "NHWC"))],
                _row("r1", "torch:aten::relu", 0.1, "NCHW")])  # relu: one layout only
    a = step_alternatives(step, db, 1)
    assert a.fused_optimizer_ms == pytest.approx(0.05) and a.fused_optimizer_call == "torch:aten::_fused_adam_"
    assert a.channels_last == {0: pytest.approx(0.1 + 0.2 - 0.1)} and a.engine is None and a.amp_ratio is None
    # AMP: the fp16 step's layer bounds over the fp32 step's, where both are whole
    half = [BackwardTime(0, "conv", ph, "", "", k, ms) for ph, k, ms in
            (("backward_data", "c0d", 0.1), ("backward_weight", "c0w", 0.2))]
    fwd16 = types.SimpleNamespace(layers=[lt(0, "c0", 0.1), lt(1, "r1", 0.05)])
    a = step_alternatives(step, db, 1, types.SimpleNamespace(forward=fwd16, calls=half))
    assert a.amp_ratio == {0: pytest.approx(0.4 / 1.0)}  # layer 1's fp32 backward is unmeasured
    # a batch norm's training-mode forward call stands for its inference config (which the step
    # does not run, here timed in one layout only): the layer counts with that call and its backward
    bn_calls = calls + [BackwardTime(2, "bn", "forward", "BatchNormTrain", "", "b2t", 0.1),
                        BackwardTime(2, "bn", "backward_data", "BatchNormBwd", "", "b2d", 0.2)]
    fwd_bn = types.SimpleNamespace(layers=fwd.layers + [lt(2, "b2", 0.05, "BatchNormalization")], precision="fp32",
                                   conv_precision="tf32", cache="warm")
    fwd_bn.kind_precision = lambda kind: Analysis.kind_precision(fwd_bn, kind)
    db.rows += [_row("b2", "torch:aten::batch_norm", 0.05, "NCHW"),
                *[_row(k, "torch:aten::y", ms, lay) for k, ms, lay in
                  (("b2t", 0.09, "NCHW"), ("b2t", 0.04, "NHWC"), ("b2d", 0.18, "NCHW"), ("b2d", 0.05, "NHWC"))]]
    a = step_alternatives(types.SimpleNamespace(forward=fwd_bn, calls=bn_calls, optimizer_call=opt), db, 1)
    assert a.channels_last == {0: pytest.approx(0.2), 2: pytest.approx(0.05 + 0.13)}
    empty = step_alternatives(types.SimpleNamespace(forward=fwd, calls=[], optimizer_call=None), _Rows([]), 1)
    assert empty.fused_optimizer_ms is None and empty.channels_last is None and empty.notes


def test_the_train_report_has_the_whatif(joined, tmp_path, capsys):
    from benanza.reports import framework as cli

    ml, tj = joined
    c = _cmp(joined, _step(ml))
    c.run.update({"label": "eager, training step (sgd)", "folder": str(tmp_path / "profile-b2-fp32-train-sgd"),
                  "batch": 2, "dtype": "fp32", "optimizer": "sgd", "notices": []})
    c.whatif = compose_step(c, ml, StepAlternatives(fused_optimizer_ms=0.01))
    cli.print_train_comparisons([c], "resnet18", json_out=False)
    text = capsys.readouterr().out
    first = text.strip().splitlines()[0]
    assert first.startswith("resnet18 batch 2 fp32: PyTorch's training step takes") and "could take" in first
    assert "what-if over the training step" in text and "not estimated" in text
    d = json.loads((tmp_path / "report-b2-fp32-train-sgd.json").read_text())
    assert [s["kind"] for s in d["whatif"]["steps"]] == [k for k, _ in STEPS]
    assert d["whatif"]["steps"][1]["saving_ms"] > 0 and d["whatif"]["steps"][2]["saving_ms"] is None
    assert d["headline"] == first


# ----------------------------------------------------------- benchmarks/whatif_check.py --train

@pytest.fixture(scope="module")
def check():
    return load("whatif_check")


def test_the_check_rows_and_table(check, joined):
    ml, tj = joined
    w = compose_step(_cmp(joined, _step(ml)), ml, StepAlternatives(fused_optimizer_ms=0.01))
    doc = {"whatif": w.to_dict()}
    plan = check.train_plan([k for k, _ in STEPS], compile_=False)
    assert [k for k, _ in plan] == ["cuda_graphs", "fused_optimizer", "algorithm_selection", "channels_last", "amp"]
    assert plan[2][1] == {"cuda_graphs", "fused_optimizer", "algorithm_selection"}  # each on top of the ones before
    st = lambda m, iqr=0.01: {"median": m, "iqr": iqr, "q1": m, "q3": m, "n": 10}  # noqa: E731
    measured = [("cuda_graphs", st(WALL), st(2.0)), ("fused_optimizer", st(2.0), st(1.9)),
                ("algorithm_selection", st(1.9), st(1.8))]
    rows = check.train_rows("resnet18", 2, doc, measured)
    g, o, a = rows
    assert g["estimate_ms"] == pytest.approx(WALL - w.steps[0].ms_after)
    assert g["error"] == pytest.approx(abs(g["estimate_ms"] - (WALL - 2.0)) / (WALL - 2.0))
    assert o["estimate_ms"] == pytest.approx(w.steps[1].effect_ms)
    assert a["estimate_ms"] is None and a["error"] is None  # not estimated: no error either
    text = check.table(rows, {"gpu": "H100"}, "cmd")
    assert "cudnn.benchmark | -" in text and "median |estimate - measured|" in text and "over 2" not in text


def test_the_check_dry_run(check, tmp_path, capsys):
    assert check.main(["--train", "--dry-run", "--out", str(tmp_path), "--db", "x", "--models", "resnet18,vit_b_16",
                       "--batch", "2,32", "--compile"]) == 0
    text = capsys.readouterr().out
    assert "training step, fp32, optimizer sgd" in text and "6. fusion:" in text and "4 timed" not in text
    assert text.count("profile the start, then 7 timed variants") == 4 and not list(tmp_path.iterdir())
    check.main(["--dry-run", "--out", str(tmp_path), "--db", "x", "--models", "resnet50", "--batch", "1"])
    assert "inference, fp32" in capsys.readouterr().out
