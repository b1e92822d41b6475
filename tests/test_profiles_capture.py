"""`benanza profile`'s model side: random weights for a graph whose weight file is gone, weights
behind Identity nodes, and (where PyTorch and onnx2torch are installed; CI has neither) a whole
capture on the CPU: the profile folder, its profile.json, and the join of its trace."""
import collections
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from benanza.cli import app
from benanza.profiles.capture import inline_identity_weights, random_weights


def _tiny_model(path, external=True):
    """Conv -> BN -> Relu -> MaxPool -> Conv -> Add (residual) -> GlobalAveragePool -> Flatten ->
    Gemm, batch 'N'; the conv2 weight reached through an Identity node (as the TorchScript
    exporter writes shared weights). With ``external``, weights go to a file that is then deleted."""
    rng = np.random.default_rng(1)

    def w(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    inits = [w("w1", 8, 3, 3, 3), w("s", 8), w("b", 8), w("m", 8),
             numpy_helper.from_array(np.full(8, 0.9, np.float32), "v"), w("w2", 8, 8, 3, 3),
             w("fcw", 10, 8), w("fcb", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "b", "m", "v"], ["bn"], name="bn1"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu1"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Identity", ["w2"], ["w2_shared"], name="share"),
        helper.make_node("Conv", ["p", "w2_shared"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p"], ["a"], name="residual"),
        helper.make_node("GlobalAveragePool", ["a"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fcw", "fcb"], ["y"], name="fc", transB=1),
    ]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    if external:
        onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=0)
        (path.parent / (path.name + ".data")).unlink()
    else:
        onnx.save_model(m, str(path))
    return path


def test_random_weights_and_identity(tmp_path):
    path = _tiny_model(tmp_path / "tiny.onnx")
    m = onnx.load(str(path), load_external_data=False)
    assert inline_identity_weights(m) == 1
    assert "share" not in {n.name for n in m.graph.node}
    assert {t.name for t in m.graph.initializer} >= {"w2", "w2_shared"}
    filled = random_weights(m, seed=0)
    assert set(filled) == {"w1", "s", "b", "m", "v", "w2", "w2_shared", "fcw", "fcb"}
    arrays = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    assert arrays["w1"].shape == (8, 3, 3, 3) and arrays["w1"].dtype == np.float32
    assert np.all((arrays["v"] >= 0.5) & (arrays["v"] < 1.5))      # BN variance: never negative
    assert abs(float(arrays["w1"].std()) - 1 / np.sqrt(27)) < 0.1    # normal / sqrt(fan-in)
    assert random_weights(m) == []                                  # nothing left to fill


@pytest.fixture(scope="module")
def cpu_profile(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    from benanza.profiles import capture_profile

    d = tmp_path_factory.mktemp("cap")
    model = _tiny_model(d / "tiny.onnx")
    pj = capture_profile(model, 2, "fp32", d / "prof", device="cpu", warmup=2, runs=7, iterations=3)
    return model, pj


def test_capture_cpu_folder(cpu_profile):
    model, pj = cpu_profile
    doc = json.loads(pj.read_text())
    assert doc["format"] == "benanza-profile" and doc["version"] == 1
    assert doc["batch"] == 2 and doc["dtype"] == "fp32" and doc["inputs"] == [[2, 3, 16, 16]]
    assert doc["model_path"] == str(model.resolve()) and len(doc["model_sha256"]) == 64
    assert doc["files"] == {"trace": "trace.json.gz"}               # no library logs on the CPU
    lat = doc["latency"]
    assert len(lat["samples_ms"]) == 7 and lat["method"] == "perf_counter"
    assert lat["median_ms"] == pytest.approx(float(np.median(lat["samples_ms"])))
    s = doc["settings"]
    assert s["framework"] == "pytorch" and s["device"] == "cpu" and s["dtype"] == "fp32"
    assert s["allow_tf32_matmul"] is False and s["allow_tf32_cudnn"] is False and s["cudnn_benchmark"] is True
    assert s["converter"].startswith("onnx2torch ")
    assert sorted(p.name for p in pj.parent.iterdir()) == ["profile.json", "trace.json.gz"]


def test_capture_cpu_join(cpu_profile):
    from benanza.profiles import load_profile

    _, pj = cpu_profile
    p = load_profile(pj.parent)
    assert p.iterations == 3 and p.batch == 2
    assert p.unmatched_layers == ()
    ops = {lp.name: lp.op for lp in p.layers}
    assert ops["conv1"] == ops["conv2"] == "aten::conv2d" and ops["bn1"] == "aten::batch_norm"
    assert ops["fc"] == "aten::linear" and ops["residual"] == "aten::add"
    assert p.gpu_kernel_ms == 0.0 and p.host_overhead_ms is None     # the CPU: no GPU to wait


def test_capture_cpu_cli_force(cpu_profile):
    model, pj = cpu_profile
    r = CliRunner().invoke(app, ["profile", str(model), "--batch", "2", "--device", "cpu", "-o", str(pj.parent)])
    assert r.exit_code == 2 and "already holds a profile" in r.output
    r = CliRunner().invoke(app, ["profile", str(model), "--batch", "2", "--device", "cpu", "-o", str(pj.parent),
                                 "--force", "--runs", "3", "--warmup", "1", "--iterations", "1"])
    assert r.exit_code == 0, r.output
    assert "9 of 9 layers matched a framework op" in r.output


def test_capture_no_cuda_is_one_line(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    model = _tiny_model(tmp_path / "tiny.onnx")
    r = CliRunner().invoke(app, ["profile", str(model), "-o", str(tmp_path / "p"), "--no-logs"])
    last = r.output.strip().splitlines()[-1]
    assert r.exit_code == 6 and last.startswith("benanza: no CUDA device") and "Traceback" not in r.output


def test_log_run_child_cpu(tmp_path):
    """The log run's child on the CPU (no library logs there, but the same code): it traces one
    iteration for the kernel comparison and leaves its result for the parent."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    from benanza.profiles.capture import CaptureSpec, _kernel_names, run_child

    model = _tiny_model(tmp_path / "tiny.onnx")
    res = run_child(CaptureSpec(role="logs", model=str(model), batch=1, dtype="fp32", device="cpu", warmup=1,
                                runs=1, iterations=2, cudnn_benchmark=False, out=str(tmp_path), dims={}))
    assert res["role"] == "logs" and "latency" not in res and res["settings"]["cudnn_benchmark"] is False
    assert (tmp_path / ".capture-logs.json").exists()
    assert _kernel_names(tmp_path / ".trace-logs.json") == []      # CPU: no kernels, but a valid trace


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50_bnkept", "densenet121", "googlenet", "vit_b_16"])
def test_shared_models_on_cpu(models, tmp_path, name):
    """The shared models (no weights in the files) convert, run and join completely; the
    converted vit_b_16 reads no shape, axis or index back from the device (no aten::item)."""
    pytest.importorskip("torch")
    pytest.importorskip("onnx2torch")
    from benanza.profiles import capture_profile, load_profile

    capture_profile(models / f"{name}.onnx", 1, "fp32", tmp_path / "p", device="cpu", warmup=1, runs=2, iterations=1)
    p = load_profile(tmp_path / "p")
    assert p.unmatched_layers == ()
    assert all(lp.op is not None for lp in p.layers if lp.op_type != "Flatten")
    names = collections.Counter(op.name for op in p.trace.cpu_ops)
    assert names["aten::item"] == 0 and names["aten::_local_scalar_dense"] == 0


def test_a_long_step_stops_warming_up_and_timing_at_the_budget(monkeypatch):
    """A profiling child's warm-up and timed calls stop at their time budgets once the fewest calls
    are made (a 0.7 s decoder step made 125 calls, 90 s, before 2026-11-28); a short step makes every
    call asked for; a count below the fewest is kept as asked (no torch needed: fake clock and calls)."""
    from types import SimpleNamespace

    from benanza.profiles import capture as cap

    now, calls, syncs = [0.0], [], []

    def run(step_s):
        def f():
            calls.append(1)
            now[0] += step_s
        return f

    clock = lambda: now[0]  # noqa: E731
    # 0.7 s a call: 3 s of budget -> the call that passes it is the last (5 calls), never fewer than MIN_WARMUP
    assert cap.warm_up(run(0.7), lambda: syncs.append(1), 20, clock=clock) == max(5, cap.MIN_WARMUP)
    assert cap.warm_up(run(0.4), lambda: None, 20, clock=clock) == 8  # 3.2 s after the 8th
    calls.clear()
    assert cap.warm_up(run(5.0), lambda: None, 20, clock=clock) == cap.MIN_WARMUP
    assert cap.warm_up(run(1e-4), lambda: None, 20, clock=clock) == 20  # short: all asked for
    assert cap.warm_up(run(5.0), lambda: None, 1, clock=clock) == 1  # --warmup 1 stays 1
    assert cap.warm_up(run(5.0), lambda: None, 0, clock=clock) == 1  # at least one call

    # the timed calls: perf_counter is the module's; a spent budget leaves MIN_RUNS samples
    spec = SimpleNamespace(role="timed", runs=100, iterations=5, warmup=20)
    result = {}
    monkeypatch.setattr(cap, "TIMED_BUDGET_S", 0.0)
    cap._latency_or_log_iterations(None, spec, SimpleNamespace(type="cpu"), lambda: None, lambda: None, result, 4)
    assert len(result["latency"]["samples_ms"]) == cap.MIN_RUNS and result["latency"]["warmup"] == 4
    monkeypatch.setattr(cap, "TIMED_BUDGET_S", 60.0)
    cap._latency_or_log_iterations(None, spec, SimpleNamespace(type="cpu"), lambda: None, lambda: None, result)
    assert len(result["latency"]["samples_ms"]) == 100 and result["latency"]["warmup"] == 20
