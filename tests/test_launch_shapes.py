"""A call's waves from its measured launch shapes (``bench --counters``): Habitat's wave scaling with each
kernel's grid and blocks per SM (benanza.analysis.predict.launch_units, wave_sms), in place of the span
model's estimate where the origin has them (`predict_check.py --train --launch-shapes`)."""
from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace as K

import pytest

from benanza.analysis.gpus import find_gpu, partition_spec
from benanza.analysis.predict import MAX_WARPS_PER_SM, busy_sms, launch_sms, launch_units, predict, wave_sms
from benanza.analysis.predict_training import predict_training
from benanza.database.counters import implementation_key, read_counters, write_counters
from conftest import REPO
from test_predict_train import _measured, _step

H200 = find_gpu("H200")


def _kernel(grid, block, occ, ns):
    return K(grid_size=grid, block_size=block, occupancy_pct=occ, duration_ns=ns)


def test_launch_units_count_sm_fulls_of_blocks():
    # 256 threads = 8 warps a block; 50 % of 64 warps = 32 warps = 4 blocks an SM at once: 264 / 4 = 66
    assert MAX_WARPS_PER_SM == 64
    assert launch_units([_kernel("(264, 1, 1)", "(256, 1, 1)", 50.0, 1000)]) == pytest.approx(66)
    # a grid of (x, y, z) counts x y z blocks; an occupancy below one block an SM still holds one
    assert launch_units([_kernel("(10, 2, 3)", "(1024, 1, 1)", 5.0, 1)]) == pytest.approx(60)
    # two kernels weigh by their durations: 3 / 4 of the time at P 100, 1 / 4 at P 20
    two = [_kernel("(400, 1, 1)", "(128, 1, 1)", 25.0, 300), _kernel("(20, 1, 1)", "(32, 1, 1)", 1.5, 100)]
    assert launch_units(two) == pytest.approx(0.75 * 100 + 0.25 * 20)
    # a kernel without a readable shape, occupancy or duration counts for nothing; none at all: None
    assert launch_units([_kernel("n/a", "(128, 1, 1)", 25.0, 300)]) is None
    assert launch_units([_kernel("(8, 1, 1)", "(128, 1, 1)", None, 300)]) is None
    assert launch_units([]) is None and launch_units(None) is None


def test_waves_are_whole():
    # 66 SM-fulls: one wave on 132 SMs (66 busy), two on 64 (33 a wave), three on 32 (22)
    assert [wave_sms(k, 66) for k in (132, 64, 32)] == [66, 33, 22]
    # many waves: close to every SM; Brent's estimate without whole waves is below it
    assert wave_sms(132, 10 * 132) == 132 and busy_sms(132, 10 * 132) < 132


def test_a_persistent_grid_keeps_every_sm_busy_on_both_gpus():
    """A grid of m x the origin's SMs (m <= 4) is a persistent kernel sized to the GPU -- cuBLAS's nvjet
    kernels run 2 x 66 blocks on the H200 -- and the library sizes it to the target again: it keeps
    every SM busy on both (132 -> 64 SMs: 2.06 x slower), where whole waves of its 132 blocks would say
    three waves on 64 SMs (3 x slower)."""
    nvjet = _kernel("(2, 66, 1)", "(384, 1, 1)", 14.5, 1000)  # under one block an SM: P = 132
    ko, kd, p = launch_sms([nvjet], 132, 64)
    assert (ko, kd, p) == (132, 64, 132)
    assert wave_sms(132, 132) / wave_sms(64, 132) == pytest.approx(3)  # what whole waves alone would say
    # 130 blocks are no grid sized to 132 SMs: whole waves, one on 132 SMs, three on 64
    ko, kd, _ = launch_sms([_kernel("(130, 1, 1)", "(384, 1, 1)", 14.5, 1000)], 132, 64)
    assert ko / kd == pytest.approx(3)
    # two kernels: the target's time over the origin's is their duration-weighted mean ratio
    small = _kernel("(40, 1, 1)", "(256, 1, 1)", 12.5, 3000)  # one wave of 40 on both: ratio 1
    ko, kd, _ = launch_sms([nvjet, small], 132, 64)
    assert ko / kd == pytest.approx(0.25 * 132 / 64 + 0.75 * 1)
    assert launch_sms([_kernel("n/a", "(1, 1, 1)", 1.0, 1)], 132, 64) is None


def test_a_layer_with_launch_shapes_scales_by_its_waves(tmp_path):
    """The classifier's step predicted from the whole H200 on 64 of its SMs: a call whose counters say
    one wave of 40 SM-fulls keeps its compute time (40 SMs busy on both), where the span model
    estimates its work and scales it; every call without counters is predicted as before."""
    _, ml, db, _ = _measured(tmp_path)
    step = _step(ml, db)
    target = partition_spec(H200, 64)
    plain = predict_training(ml, step, H200, target)
    i, c = next((i, c) for i, c in enumerate(step.calls) if c.kind == "ConvBwdFilter")
    key = implementation_key(c, step.forward.kind_precision(c.kind))
    launch = {key: [_kernel("(40, 1, 1)", "(256, 1, 1)", 12.5, 1000)]}  # 1 block an SM: P = 40
    shaped = predict_training(ml, step, H200, target, launch=launch)
    assert shaped.calls[i].work_units == 40 and plain.calls[i].work_units != 40
    # one wave on both: the compute term does not change; the call is at most its memory term slower
    assert shaped.calls[i].predicted_ms < plain.calls[i].predicted_ms
    others = [(a.predicted_ms, b.predicted_ms) for k, (a, b) in enumerate(zip(plain.calls, shaped.calls)) if k != i]
    assert all(a == pytest.approx(b) for a, b in others)
    # the forward pass takes them too, by its layers' implementations
    lt = next(t for t in step.forward.layers if t.status == "measured")
    fkey = implementation_key(lt, step.forward.kind_precision(lt.layer.config.kind))
    fwd = predict(step.forward, H200, target, launch={fkey: [_kernel("(40, 1, 1)", "(256, 1, 1)", 12.5, 1000)]})
    assert next(p for p in fwd.layers if p.index == lt.layer.index).work_units == 40


def _check():
    spec = importlib.util.spec_from_file_location("predict_check_ls", REPO / "benchmarks" / "predict_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_predict_check_reads_the_origins_launch_shapes(tmp_path):
    """--launch-shapes: the counters stored on the origin (as bench --train --counters writes them) go into
    the prediction of each pair; without them the rows are those of the span model."""
    from test_predict_check_train import PART, WHOLE, _whole_and_partition

    from benanza.generation.generator import job_id
    from test_predict_check_train import SLOWER
    from test_predict_train import BWD

    db, sids, ml, cw, line = _whole_and_partition(tmp_path)
    db.write_job(sids[PART], None, job_id(cw, "fp32", "NCHW"), cw.key, "fp32", "ok", "",
                 [line("lib", "ok", BWD[("conv", "backward_weight")] * SLOWER)], layout="NCHW")
    system = next(s for s in db.systems() if s.id == sids[WHOLE])
    step = _step_on(ml, db, system)
    c = next(c for c in step.calls if c.kind == "ConvBwdFilter")
    key = implementation_key(c, step.forward.kind_precision(c.kind))
    write_counters(db, system.id, key, [{"kernel_index": 0, "kernel_name": "wgrad", "block_size": "(256, 1, 1)",
                                         "grid_size": "(40, 1, 1)", "dram_pct": None, "dram_bytes": None,
                                         "sm_pct": None, "occupancy_pct": 12.5, "duration_ns": 1000.0}])
    assert list(read_counters(db, system.id, [c.key])) == [key]
    args = ["--db", str(tmp_path / "perf.db"), "--models", str(tmp_path), "--model", "clf", "--batch", "64",
            "--dtype", "fp32", "--train"]
    out = tmp_path / "c.json"
    assert _check().main(args + ["--json", str(out)]) == 0
    plain = {(r["origin"], r["target"]): r["predicted_ms"] for r in json.loads(out.read_text())["l2"]["rows"]}
    assert _check().main(args + ["--launch-shapes", "--json", str(out)]) == 0
    shaped = {(r["origin"], r["target"]): r["predicted_ms"] for r in json.loads(out.read_text())["l2"]["rows"]}
    whole = (WHOLE, PART)
    assert shaped[whole] != pytest.approx(plain[whole])  # the whole GPU's counters changed its prediction
    assert shaped[whole[::-1]] == pytest.approx(plain[whole[::-1]])  # the partition has none
    with pytest.raises(SystemExit, match="--launch-shapes goes with --train"):
        _check().main(args[:-1] + ["--launch-shapes"])


def _step_on(ml, db, system):
    from benanza.analysis.analyzer import analyze
    from benanza.analysis.training import training_step

    return training_step(ml, analyze(ml, db, system, "fp32"), db, system)
