"""Issue 26, item 5: `benchmarks/predict_check.py --train` validates `benanza predict --train` on a
database holding the same training steps measured on two systems -- here one H100 whole (132 SMs)
and confined to 64 SMs (a BENANZA_SM_COUNT partition), with fabricated measurements of a small
classifier (tests/test_predict_train.py's) -- and `benchmarks/gpu_predict.sh TRAIN=1` builds the
bench commands that measure them. No GPU needed."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_modules import load

from benanza.analysis.analyzer import analyze
from benanza.analysis.gpus import find_gpu
from benanza.analysis.predict_training import predict_training
from benanza.analysis.training import training_step
from benanza.database.store import open_db
from benanza.generation.generator import job_id
from benanza.processing.model import process
from benanza.processing.training import loss_config, optimizer_config, training_plan
from test_lbl_truth import _measure
from test_predict_train import BWD, FWD, LOSS_MS, OPT_MS, _classifier

REPO = Path(__file__).resolve().parent.parent
WHOLE, PART = "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 [64 SMs]"
SLOWER = 1.5  # every call on the 64-SM partition takes 1.5 x its time on the whole GPU


def _check():
    return load("predict_check")


def _record(db, sid, ml, f, skip=()):
    """Every call of the classifier's step at ``ml``'s batch measured in fp32 at :data:`FWD`...
    x ``f`` x batch / 64 (the optimizer's update, one config at every batch, x ``f``), but those in
    ``skip`` ((layer name, phase))."""
    _measure(db, sid, optimizer_config(ml, "sgd"), "fp32", [("lib", OPT_MS * f)])
    f *= ml.batch / 64
    by_name = {ly.name: ly for ly in ml.layers}
    for name, ms in FWD.items():
        _measure(db, sid, by_name[name].config, "fp32", [("lib", ms * f)])
    for c in training_plan(ml).calls:
        k = (ml.layers[c.layer].name, c.phase)
        if k not in skip:
            _measure(db, sid, c.config, "fp32", [("lib", BWD[k] * f)])
    _measure(db, sid, loss_config(ml)[0], "fp32", [("lib", LOSS_MS * f)])


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """clf_train.onnx measured at batch 64 on both systems; at batch 32 the partition lacks the
    conv's weight gradient (an incomplete configuration)."""
    d = tmp_path_factory.mktemp("predtrain")
    path = _classifier(d / "clf_train.onnx")
    db = open_db(f"sqlite:///{d / 'perf.db'}")
    sids = {}
    for name, sms in ((WHOLE, 132), (PART, 64)):
        sids[name] = db.upsert_system({"gpu_name": name, "compute_capability": "9.0", "sm_count": sms,
                                       "memory_bytes": 80 << 30, "max_sm_clock_mhz": 1980,
                                       "l2_cache_bytes": 50 << 20, "cudnn_version": 91900,
                                       "cublas_version": 130100})
    for batch in (64, 32):
        ml = process(path, batch)
        _record(db, sids[WHOLE], ml, 1.0)
        _record(db, sids[PART], ml, SLOWER, skip={("conv", "backward_weight")} if batch == 32 else ())
    out = d / "check.json"
    rc = _check().main(["--db", str(d / "perf.db"), "--models", str(d), "--model", "clf", "--batch", "64,32",
                        "--dtype", "fp32", "--train", "--json", str(out)])
    return {"rc": rc, "json": json.loads(out.read_text()), "db": db, "path": path}


def test_a_row_is_the_step_predicted_by_the_documented_formula(measured):
    """The row whole GPU -> 64 SMs at batch 64: origin and measured step LBLs are the classifier's
    chain (forward, loss, fc's data gradient, relu's, conv's weight gradient, update; the fc weight
    gradient runs beside fc's data gradient), and the predicted one is that chain over each call's
    ``fixed + (origin - fixed) x factor`` (benanza.analysis.predict_training)."""
    assert measured["rc"] == 0
    res = measured["json"]["l2"]
    rows = {(r["origin"], r["target"], r["batch"]): r for r in res["rows"]}
    assert set(rows) == {(WHOLE, PART, 64), (PART, WHOLE, 64)}
    r = rows[(WHOLE, PART, 64)]
    assert r["model"] == "clf_train" and r["dtype"] == "fp32"  # --train took NAME_train.onnx
    chain = sum(FWD.values()) + LOSS_MS + BWD[("fc", "backward_data")] + BWD[("relu", "backward_data")] \
        + BWD[("conv", "backward_weight")] + OPT_MS
    assert r["origin_ms"] == pytest.approx(chain)
    assert r["measured_ms"] == pytest.approx(SLOWER * chain)
    assert r["naive_error"] == pytest.approx(1 / SLOWER - 1)
    # the prediction, composed by hand from the per-call formula
    db = measured["db"]
    ml = process(measured["path"], 64)
    whole = next(s for s in db.systems() if s.gpu_name == WHOLE)
    step = training_step(ml, analyze(ml, db, whole, "fp32"), db, whole)
    tp = predict_training(ml, step, find_gpu(WHOLE), find_gpu(PART))

    def pred(c):
        assert c.predicted_ms == pytest.approx(c.fixed_ms + (c.origin_ms - c.fixed_ms) * c.factor)
        return c.fixed_ms + (c.origin_ms - c.fixed_ms) * c.factor

    fwd = sum(pred(lp) for lp in tp.forward.layers if lp.status == "measured")
    by = {(ml.layers[c.index].name if c.index >= 0 else "", c.phase): pred(c) for c in tp.calls}
    hand = fwd + by[("", "loss")] + by[("fc", "backward_data")] + by[("relu", "backward_data")] \
        + by[("conv", "backward_weight")] + by[("", "optimizer")]
    assert hand > chain  # fewer SMs: slower than on the whole GPU
    assert r["predicted_ms"] == pytest.approx(hand)
    assert r["error"] == pytest.approx(hand / (SLOWER * chain) - 1)
    ph = r["phases"]
    assert ph["backward_weight"]["origin_ms"] == pytest.approx(BWD[("fc", "backward_weight")]
                                                              + BWD[("conv", "backward_weight")])
    assert ph["backward_weight"]["measured_ms"] == pytest.approx(SLOWER * ph["backward_weight"]["origin_ms"])
    assert ph["backward_weight"]["predicted_ms"] == pytest.approx(by[("fc", "backward_weight")]
                                                                 + by[("conv", "backward_weight")])
    assert ph["forward"]["predicted_ms"] == pytest.approx(fwd)
    # per phase and per kind, pooled over the one complete configuration of the pair
    pair = f"{WHOLE} -> {PART}"
    pr, me, orig, n = res["by_phase"][pair]["loss"]
    assert (pr, me, orig, n) == pytest.approx((by[("", "loss")], SLOWER * LOSS_MS, LOSS_MS, 1))
    pr, me, orig, n = res["by_kind"][pair]["ConvBwdFilter backward_weight fp32"]
    assert (pr, me, orig, n) == pytest.approx((by[("conv", "backward_weight")], SLOWER * BWD[("conv", "backward_weight")],
                                               BWD[("conv", "backward_weight")], 1))
    assert res["by_kind"][pair]["Gemm backward_data fp32"][1] == pytest.approx(SLOWER * BWD[("fc", "backward_data")])
    assert r["calls_unmatched"] == 0


def test_an_incomplete_configuration_is_listed_and_left_out(measured):
    res = measured["json"]["l2"]
    assert not [r for r in res["rows"] if r["batch"] == 32]
    assert len(res["skipped"]) == 2  # both directions
    for s in res["skipped"]:
        assert "clf_train b32 fp32" in s and f"{PART}: INCOMPLETE: 1 backward calls without a measurement" in s
    s = res["summary"][f"{WHOLE} -> {PART}"]
    assert s["configurations"] == 1  # the batch-32 step is not counted, as 0 ms or otherwise
    # its measured calls are: every configuration's kinds pool the batch-32 calls measured on both
    # systems beside the batch-64 ones, and leave out the one the partition lacks
    pair = f"{WHOLE} -> {PART}"
    complete, every = res["by_kind"][pair], res["by_kind_all_configurations"][pair]
    assert every["Gemm backward_data fp32"][3] == 2 * complete["Gemm backward_data fp32"][3] == 2
    assert every["ConvBwdFilter backward_weight fp32"][3] == complete["ConvBwdFilter backward_weight fp32"][3] == 1
    # batch 32's calls take half the batch-64 time (the fixture scales by batch / 64)
    assert every["Gemm backward_data fp32"][2] == pytest.approx(1.5 * complete["Gemm backward_data fp32"][2])


def test_the_summary_is_the_error_bar_of_the_rows(measured):
    res = measured["json"]["l2"]
    rows = res["rows"]
    alls = res["summary"]["all"]
    errs = [abs(r["error"]) for r in rows]
    assert alls["configurations"] == 2 and alls["mean_abs_error"] == pytest.approx(sum(errs) / 2)
    assert alls["naive_mean_abs_error"] == pytest.approx(((SLOWER - 1) + (1 - 1 / SLOWER)) / 2)
    # both naive errors are above 10 %: the goal is judged over both rows
    assert alls["goal_configurations"] == 2
    assert alls["goal"] == ("met" if sum(errs) / 2 < 0.05 else "not met")


def test_error_bar_and_the_goal_line():
    eb = _check().error_bar
    rows = [{"error": 0.02, "naive_error": 0.20}, {"error": -0.04, "naive_error": 0.05},
            {"error": 0.10, "naive_error": -0.30}]
    e = eb(rows)
    assert e["mean_abs_error"] == pytest.approx(0.16 / 3) and e["median_abs_error"] == pytest.approx(0.04)
    assert (e["min_error"], e["max_error"]) == pytest.approx((-0.04, 0.10))
    assert e["q1_abs_error"] <= 0.04 <= e["q3_abs_error"]
    assert e["goal_configurations"] == 2 and e["goal_mean_abs_error"] == pytest.approx(0.06) and e["goal"] == "not met"
    assert eb(rows[:1])["goal"] == "met" and eb(rows[1:2])["goal"] == "not assessable"


def test_two_labels_of_one_precision_are_refused(measured):
    with pytest.raises(SystemExit, match="--dtype fp16 and amp16 are both benanza's fp16"):
        _check().main(["--db", str(measured["path"].parent / "perf.db"), "--models", str(measured["path"].parent),
                       "--model", "clf", "--batch", "64", "--dtype", "fp16,amp16", "--train"])


def test_gpu_predict_script_train_commands(tmp_path):
    script = REPO / "benchmarks" / "gpu_predict.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    env = {**os.environ, "TRAIN": "1", "DRY_RUN": "1", "WORK": str(tmp_path / "work")}
    # googlenet has no training export in db/reference/truth (made on the machine), resnet18 has one
    p = subprocess.run(["bash", str(script), str(tmp_path / "out"), "googlenet,resnet18", "0,64"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("+ benanza bench")]
    assert len(lines) == 4  # two models at two SM counts, model by model
    w = tmp_path / "work"
    assert lines[0].startswith(f"+ benanza bench {w}/onnx/googlenet_train.onnx --train --optimizer sgd --batch 32 "
                               "--dtype fp16,fp32 --db ")
    assert "--no-torch" in lines[0] and "BENANZA_SM_COUNT=64" in p.stdout
    assert f"{REPO}/db/reference/truth/resnet18_train.onnx" in lines[2]
    exports = [ln for ln in p.stdout.splitlines() if ln.startswith("+ python3") and "keep_batch_norms" in ln]
    assert len(exports) == 1 and "googlenet" in exports[0]
    # inference (TRAIN unset): the truth exports, no --train
    env.pop("TRAIN")
    p = subprocess.run(["bash", str(script), str(tmp_path / "out2"), "resnet18", "0"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("+ benanza bench")]
    assert f"{REPO}/db/reference/truth/resnet18.onnx --batch 32 --dtype fp16,fp32" in line and "--train" not in line
    # PARTITION=mps: each partition an MPS client of N SMs (benchmarks/mps.sh), the whole GPU outside it
    p = subprocess.run(["bash", str(script), str(tmp_path / "out3"), "resnet18", "0,64,32"], cwd=REPO,
                       env={**env, "PARTITION": "mps"}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    steps = [ln for ln in p.stdout.splitlines() if ln.startswith(("+ mps_", "+ benanza bench"))]
    # the ceilings of each partition, then the bench of each, then the whole GPU again at the end
    assert [s.split()[1] for s in steps] == ["mps_release", "mps_confine", "mps_confine", "mps_release", "benanza",
                                            "mps_confine", "benanza", "mps_confine", "benanza", "mps_release"]
    assert [s.split()[2] for s in steps if s.startswith("+ mps_confine")] == ["64", "32"] * 2
    assert subprocess.run(["bash", "-n", str(REPO / "benchmarks" / "mps.sh")]).returncode == 0


def _whole_and_partition(tmp_path, whole_wgrad=True):
    """The classifier's step measured on a whole GPU (132 SMs, every call 1 x) and a partition (64 SMs,
    1.5 x), the conv's weight gradient left out on the partition (and on the whole GPU unless
    ``whole_wgrad``): (database, system ids, model, that call's config, a measurement-line maker)."""
    from benanza.database.records import MeasurementLine

    path = _classifier(tmp_path / "clf_train.onnx")
    db = open_db(f"sqlite:///{tmp_path / 'perf.db'}")
    sids = {name: db.upsert_system({"gpu_name": name, "compute_capability": "9.0", "sm_count": sms,
                                    "memory_bytes": 80 << 30, "max_sm_clock_mhz": 1980, "l2_cache_bytes": 50 << 20,
                                    "cudnn_version": 91900, "cublas_version": 130100})
            for name, sms in ((WHOLE, 132), (PART, 64))}
    ml = process(path, 64)
    wgrad = {("conv", "backward_weight")}
    _record(db, sids[WHOLE], ml, 1.0, skip=() if whole_wgrad else wgrad)
    _record(db, sids[PART], ml, SLOWER, skip=wgrad)
    cw = next(c.config for c in training_plan(ml).calls if (ml.layers[c.layer].name, c.phase) == ("conv", "backward_weight"))

    def line(call, status, ms):
        return MeasurementLine.from_json({
            "type": "measurement", "call": call, "algorithm": "a", "math": "fma", "dtype": "float32", "cache": "warm",
            "layout": "NCHW", "status": status, "message": "err 720" if status == "failed" else "",
            "median_ms": ms, "q1_ms": ms, "q3_ms": ms, "samples": 10 if ms else 0, "converged": bool(ms)})
    return db, sids, ml, cw, line


def test_a_call_whose_implementation_cannot_run_on_the_other_system_is_held_apart(tmp_path):
    """The conv's weight gradient runs as "lib" on the whole GPU; on the partition that call fails
    (as cuDNN's persistent batch norm fails in a green context, err 720) and a slower "slow" call
    is the best. The plain error judges the scaling of "lib" against "slow"; the held-apart error
    takes that call at the partition's measured time in both directions (the whole GPU's fastest
    cannot run on the partition), so what remains is the scaling of the other calls: here exact,
    every other call taking 1.5x on the partition and the prediction's formula fixed."""
    db, sids, ml, cw, line = _whole_and_partition(tmp_path)
    slow = 4 * BWD[("conv", "backward_weight")]
    db.write_job(sids[PART], None, job_id(cw, "fp32", "NCHW"), cw.key, "fp32", "ok", "",
                 [line("lib", "failed", None), line("slow", "ok", slow)], layout="NCHW")
    out = tmp_path / "check.json"
    assert _check().main(["--db", str(tmp_path / "perf.db"), "--models", str(tmp_path), "--model", "clf",
                          "--batch", "64", "--dtype", "fp32", "--train", "--json", str(out)]) == 0
    res = json.loads(out.read_text())["l2"]
    rows = {(r["origin"], r["target"]): r for r in res["rows"]}
    for (o, t), r in rows.items():
        assert r["held_calls"] == 1 and r["held_kinds"] == ["ConvBwdFilter"]
        assert r["held_error"] != pytest.approx(r["error"])  # the plain error scales the other call
        # by hand: the step predicted with that call at its time on the target
        origin = next(s for s in db.systems() if s.gpu_name == o)
        target = next(s for s in db.systems() if s.gpu_name == t)
        so = training_step(ml, analyze(ml, db, origin, "fp32"), db, origin)
        st = training_step(ml, analyze(ml, db, target, "fp32"), db, target)
        i = next(k for k, c in enumerate(so.calls) if c.kind == "ConvBwdFilter")
        tc = next(c for c in st.calls if c.kind == "ConvBwdFilter")
        assert tc.time_ms == pytest.approx(slow if t == PART else BWD[("conv", "backward_weight")])
        tp = predict_training(ml, so, find_gpu(o), find_gpu(t), known_ms={i: tc.time_ms})
        assert [c.status for c in tp.calls].count("given") == 1
        assert r["held_error"] == pytest.approx(tp.critical_path_ms / st.critical_path_ms - 1)
    held = res["summary"]["all"]["held"]
    assert held["configurations"] == 2
    assert held["mean_abs_error"] == pytest.approx(sum(abs(r["held_error"]) for r in rows.values()) / 2)


def test_the_training_error_table_and_the_error_bar_predict_train_reads(measured, tmp_path):
    """`--train --errors-out` writes `benanza predict --train`'s error table: per call kind and phase
    the |error| of each complete configuration (the rows' ``by_kind``, which sum to the pooled
    table), the mean |step error|; ``--errors-append`` keeps the earlier validation's errors beside
    the new ones. The error bar of a prediction weights each kind and phase by its predicted time,
    and names what the table never covered (bf16 here: nothing)."""
    from benanza.analysis.predict_training import load_train_error_table, training_error_bar
    from benanza.errors import UsageError

    mod = _check()
    d = measured["path"].parent
    out = tmp_path / "train_errors.json"
    args = ["--db", str(d / "perf.db"), "--models", str(d), "--model", "clf", "--batch", "64,32", "--dtype", "fp32",
            "--train", "--errors-out", str(out)]
    assert mod.main(args) == 0
    t = json.loads(out.read_text())
    rows = measured["json"]["l2"]["rows"]
    assert t["what_kind"] == "training" and len(rows) == 2 and len(t["commands"]) == 1
    assert t["step"]["fp32"]["configurations"] == 2
    assert t["step"]["fp32"]["mean_abs_error"] == pytest.approx(sum(abs(r["error"]) for r in rows) / 2)
    key = "ConvBwdFilter backward_weight"
    assert sorted(t["kinds"][key]["fp32"]["abs_errors"]) == pytest.approx(sorted(abs(r["by_kind"][key]) for r in rows),
                                                                          abs=1e-6)
    pr, me, _o, _n = measured["json"]["l2"]["by_kind"][f"{WHOLE} -> {PART}"][f"{key} fp32"]
    row = next(r for r in rows if r["origin"] == WHOLE)
    assert row["by_kind"][key] == pytest.approx(pr / me - 1)  # one configuration per pair: the pooled error
    assert {"Conv forward", "Gemm backward_data", "CrossEntropyLoss loss", "Optimizer optimizer"} <= set(t["kinds"])
    assert mod.main(args + ["--errors-append"]) == 0
    t2 = json.loads(out.read_text())
    assert t2["step"]["fp32"]["configurations"] == 4 and len(t2["commands"]) == 2
    assert t2["kinds"][key]["fp32"]["configurations"] == 4
    assert t2["step"]["fp32"]["mean_abs_error"] == pytest.approx(t["step"]["fp32"]["mean_abs_error"], abs=1e-6)

    db = measured["db"]
    ml = process(measured["path"], 64)
    whole = next(s for s in db.systems() if s.gpu_name == WHOLE)
    tp = predict_training(ml, training_step(ml, analyze(ml, db, whole, "fp32"), db, whole), find_gpu(WHOLE),
                          find_gpu(PART))
    eb = training_error_bar(tp, load_train_error_table(out))
    assert not eb.unvalidated and eb.unvalidated_share == 0.0
    errs = list(eb.by_kind.values())
    assert set(eb.by_kind) >= {"Conv forward", "ConvBwdFilter backward_weight", "Optimizer optimizer"}
    assert min(errs) <= eb.relative <= max(errs) and eb.worst >= eb.relative
    assert eb.model_mean_abs_error == pytest.approx(t["step"]["fp32"]["mean_abs_error"], abs=1e-6)
    assert eb.extrapolated is False  # validated on Hopper, predicted on Hopper
    t2["step"] = {"bf16": t2["step"]["fp32"]}
    t2["kinds"] = {k: {"bf16": v["fp32"]} for k, v in t2["kinds"].items()}
    out.write_text(json.dumps(t2))
    eb = training_error_bar(tp, load_train_error_table(out))
    assert eb.relative is None and eb.unvalidated_share == pytest.approx(1.0)
    out.write_text(json.dumps({"kinds": {}}))  # the inference table's shape: refused with its name
    with pytest.raises(UsageError, match="not a training error table"):
        load_train_error_table(out)


def test_a_missing_model_file_is_one_line(tmp_path, measured):
    """A --models folder without the model: `benanza: ... no such file`, no traceback."""
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "predict_check.py"),
                        "--db", str(measured["path"].parent / "perf.db"), "--models", str(tmp_path), "--model", "clf",
                        "--batch", "32", "--dtype", "fp32", "--train"], capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("benanza: ") and r.stderr.strip().count("\n") == 0
    assert "no such file" in r.stderr and "clf" in r.stderr


def test_same_implementation_times_a_held_call_like_for_like(tmp_path):
    """--same-implementation: the held-apart call is predicted from the origin's time of an
    implementation both systems ran ("slow", 4 x on the whole GPU / 1.5 on the partition) and judged
    against the target's time of that same implementation, not given. Without the option the rows have
    no such error."""
    db, sids, ml, cw, line = _whole_and_partition(tmp_path, whole_wgrad=False)
    base = BWD[("conv", "backward_weight")]
    slow = 4 * base
    db.upsert_configs([cw])
    db.write_job(sids[WHOLE], None, job_id(cw, "fp32", "NCHW"), cw.key, "fp32", "ok", "",
                 [line("lib", "ok", base), line("slow", "ok", slow / SLOWER)], layout="NCHW")
    db.write_job(sids[PART], None, job_id(cw, "fp32", "NCHW"), cw.key, "fp32", "ok", "",
                 [line("lib", "failed", None), line("slow", "ok", slow)], layout="NCHW")
    args = ["--db", str(tmp_path / "perf.db"), "--models", str(tmp_path), "--model", "clf", "--batch", "64",
            "--dtype", "fp32", "--train"]
    out = tmp_path / "check.json"
    assert _check().main(args + ["--json", str(out)]) == 0
    assert all("same_error" not in r or r["same_error"] is None for r in json.loads(out.read_text())["l2"]["rows"])
    assert _check().main(args + ["--same-implementation", "--json", str(out)]) == 0
    res = json.loads(out.read_text())["l2"]
    for r in res["rows"]:
        assert r["held_calls"] == 1 and r["same_calls"] == 1 and r["same_unshared"] == 0
        origin = next(s for s in db.systems() if s.gpu_name == r["origin"])
        target = next(s for s in db.systems() if s.gpu_name == r["target"])
        so = training_step(ml, analyze(ml, db, origin, "fp32"), db, origin)
        st = training_step(ml, analyze(ml, db, target, "fp32"), db, target)
        i = next(k for k, c in enumerate(so.calls) if c.kind == "ConvBwdFilter")
        j = next(k for k, c in enumerate(st.calls) if c.kind == "ConvBwdFilter")
        # by hand: both steps with the call as "slow"
        import dataclasses

        o_ms, t_ms = (slow / SLOWER, slow) if origin.gpu_name == WHOLE else (slow, slow / SLOWER)
        so2 = dataclasses.replace(so, calls=[dataclasses.replace(c, time_ms=o_ms, call="slow") if k == i else c
                                             for k, c in enumerate(so.calls)])
        pred = predict_training(ml, so2, find_gpu(r["origin"]), find_gpu(r["target"])).critical_path_ms
        meas = predict_training(ml, st, find_gpu(r["target"]), find_gpu(r["target"]), known_ms={j: t_ms}).critical_path_ms
        assert r["same_error"] == pytest.approx(pred / meas - 1)
    assert res["summary"]["all"]["same"]["configurations"] == 2
