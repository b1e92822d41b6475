"""BatchNormalization in a training step (issue 26): the BatchNormTrain kind (the training-mode forward
that replaces the inference call) and the BatchNormBwd kind (dx, dscale and dbias in one call), made
by the BatchNorm kind's ``backward`` from a real ONNX BatchNormalization; their keys, descriptions,
FLOPs and minimum bytes by arithmetic; the PyTorch candidates' ATen calls; the generated C++ (every
cuDNN call and mode, the graph-API calls), which compiles (-fsyntax-only here; the whole suite builds
and links in test_training_step.py's training suite)."""
from __future__ import annotations

import subprocess

import numpy as np
import onnx
import pytest
from torch_recorder import Recorder as Rec
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.base import numel
from benanza.kinds.framework import Ctx
from benanza.processing.model import process
from onnx_builders import HOSTILE


def _bn_model(path, shape=("N", 64, 56, 56), epsilon=1e-3, name="bn"):
    """x -> Relu -> BatchNormalization(epsilon) -> y, the BN reading a layer's output (so its input
    gradient is needed)."""
    c = shape[1]
    params = [numpy_helper.from_array(np.full((c,), v, np.float32), n)
              for n, v in (("scale", 1.0), ("shift", 0.0), ("mean", 0.0), ("var", 1.0))]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("BatchNormalization", ["r", "scale", "shift", "mean", "var"], ["y"], name=name,
                              epsilon=epsilon, momentum=0.9)]
    g = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], params)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), str(path))
    return path


@pytest.fixture
def bn_layer(tmp_path):
    ml = process(_bn_model(tmp_path / "bn.onnx"), 32)
    return ml, next(ly for ly in ml.layers if ly.name == "bn")


def test_the_backward_of_an_onnx_batch_norm(bn_layer):
    ml, ly = bn_layer
    eps = float(np.float32(1e-3))  # ONNX stores the attribute as a float32
    assert ly.config == L.BatchNormConfig(shape=(32, 64, 56, 56), epsilon=eps)
    calls = L.REGISTRY["BatchNorm"].backward(ly.config)
    assert [(p, c.kind) for p, c in calls] == [("forward", "BatchNormTrain"), ("backward_data", "BatchNormBwd")]
    fwd, bwd = calls[0][1], calls[1][1]
    assert fwd == L.BatchNormTrainConfig(shape=(32, 64, 56, 56), epsilon=eps)
    assert bwd == L.BatchNormBwdConfig(shape=(32, 64, 56, 56), epsilon=eps)
    # keys: of their kinds, distinct, stable through the database's parameters
    assert fwd.key.startswith("batchnormtrain-") and bwd.key.startswith("batchnormbwd-")
    assert len({ly.config.key, fwd.key, bwd.key}) == 3
    for cfg in (fwd, bwd):
        again = L.config_from_params(cfg.kind, cfg.params())
        assert again == cfg and again.key == cfg.key
    assert fwd.describe() == "BatchNormTrain(32x64x56x56)" and bwd.describe() == "BatchNormBwd(32x64x56x56)"
    assert fwd.input_shapes() == [(32, 64, 56, 56)] and bwd.input_shapes() == [(32, 64, 56, 56)] * 2
    assert fwd.output_shape() == bwd.output_shape() == (32, 64, 56, 56)
    # the plan: the relu's output feeds the BN, so its one backward call computes dx too
    from benanza.processing.training import training_plan

    plan = training_plan(ml)
    assert [(ml.layers[c.layer].name, c.phase) for c in plan.calls] == [("bn", "forward"), ("bn", "backward_data")]
    assert [ml.layers[i].name for i in plan.data_not_needed] == ["relu"]  # it reads the model input
    assert plan.train_forward() == {ly.index: [plan.calls[0]]}


def test_rank_and_epsilon_are_checked():
    with pytest.raises(ValueError, match="rank-1"):
        L.BatchNormTrainConfig(shape=(8,), epsilon=1e-5)
    with pytest.raises(ValueError, match="rank-6"):
        L.BatchNormBwdConfig(shape=(2, 3, 4, 5, 6, 7), epsilon=1e-5)
    with pytest.raises(ValueError, match="epsilon"):
        L.BatchNormBwdConfig(shape=(2, 3), epsilon=-1.0)


def test_flops_and_min_bytes_by_arithmetic():
    """FLOPs: 5 per element forward (sum, sum of squares: 3; folded scale-shift: 2), 9 backward
    (PyTorch's batch_norm_backward_reduce 4 + batch_norm_backward_elemt 5). Minimum bytes: forward x
    read and y written once, 8 float32 per channel; backward dy and x read, dx written once, 5
    float32 per channel."""
    shape = (32, 64, 56, 56)
    n, c = numel(shape), 64
    fwd, bwd = L.BatchNormTrainConfig(shape, 1e-5), L.BatchNormBwdConfig(shape, 1e-5)
    assert fwd.flops() == 5 * n and bwd.flops() == 9 * n
    assert min_bytes(fwd, "fp16") == 2 * n + 2 * n + 4 * 8 * c
    assert min_bytes(fwd, "fp32") == 4 * n + 4 * n + 4 * 8 * c
    assert min_bytes(bwd, "fp16") == 2 * 2 * n + 2 * n + 4 * 5 * c
    assert min_bytes(bwd, "bf16") == min_bytes(bwd, "fp16")


def test_the_pytorch_candidates_are_the_training_ops():
    """native_batch_norm(training=True, momentum 0.1, eps) and native_batch_norm_backward(train=True,
    output mask all three), with the cuDNN ops as variants on a CUDA device only (built against a
    recorder: nothing runs here)."""
    calls = []

    class Cuda:
        type = "cuda"

    for kind, op, cudnn_op in (("BatchNormTrain", "native_batch_norm", "cudnn_batch_norm"),
                               ("BatchNormBwd", "native_batch_norm_backward", "cudnn_batch_norm_backward")):
        cfg = L.REGISTRY[kind].example
        cpu = L.REGISTRY[kind].torch(Ctx(cfg, Rec(calls), Rec(calls), Rec(calls), False))
        assert cpu.call == f"torch:aten::{op}" and cpu.out_numel == numel(cfg.shape) and not cpu.variants
        calls.clear()
        cand = L.REGISTRY[kind].torch(Ctx(cfg, Rec(calls), Cuda(), Rec(calls), True))
        assert [v.call for v in cand.variants] == [f"torch:aten::{cudnn_op}"]
        cand.fn()
        name, args = calls[-1]
        assert name == f"ops.aten.{op}"
        if kind == "BatchNormTrain":
            assert args[5:] == (True, 0.1, cfg.epsilon)
        else:
            assert args[7:] == (True, cfg.epsilon, [True, True, True])
        cand.variants[0].fn()
        assert calls[-1][0] == f"ops.aten.{cudnn_op}"


def _suite(tmp_path):
    ml = process(_bn_model(tmp_path / "bn.onnx", name=HOSTILE), 32)
    ml5 = process(_bn_model(tmp_path / "bn5.onnx", shape=("N", 8, 4, 4, 4)), 2)
    return generate([ml, ml5], ["fp32", "fp16", "bf16"], tmp_path / "s", layouts=["NCHW", "NHWC"], train=True)


def test_the_generated_suite_has_every_call_and_mode(tmp_path):
    suite = _suite(tmp_path)
    jobs = [j for j in suite.jobs if j.kind in ("BatchNormTrain", "BatchNormBwd")]
    # 2 configs x 3 precisions x 2 layouts per kind
    assert len(jobs) == 2 * 2 * 3 * 2
    src = tmp_path / "s" / "src"
    fwd = (src / "batchnormtrain.cpp").read_text()
    bwd = (src / "batchnormbwd.cpp").read_text()
    for text, call in ((fwd, "cudnnBatchNormalizationForwardTrainingEx("),
                       (bwd, "cudnnBatchNormalizationBackwardEx(")):
        assert call in text and "CUDNN_BATCHNORM_OPS_BN" in text
        assert "CUDNN_BATCHNORM_SPATIAL," in text and "CUDNN_BATCHNORM_SPATIAL_PERSISTENT" in text
        assert '"NHWC"}, {32, 64, 56, 56}' in text and "Precision::BF16" in text
        assert '{2, 8, 64, 1}, 0.0010000000474974513, "3 spatial dims folded into one' in text
    assert "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(" in fwd
    assert "cudnnGetBatchNormalizationTrainingExReserveSpaceSize(" in fwd
    assert "run_batchnorm_train_engines(" in fwd
    assert "cudnnGetBatchNormalizationBackwardExWorkspaceSize(" in bwd and "run_batchnorm_backward_engines(" in bwd
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in fwd and cpp_string(HOSTILE) in bwd


def test_the_generated_sources_compile(tmp_path):
    """The two generated sources and the harness's graph-API source without cudnn-frontend pass
    g++ -fsyntax-only -Wall -Werror against the cuDNN headers (with the frontend, the graph-API source
    compiles in the session's harness build: conftest.harness, tests/test_harness_build.py)."""
    from benanza.build.cudalibs import LibraryError, locate

    try:
        libs = locate()
    except LibraryError as e:
        pytest.skip(f"no CUDA headers: {e}")
    _suite(tmp_path)
    root = tmp_path / "s"
    inc = [f"-I{root / 'harness' / 'include'}", f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}",
           f"-I{libs.cuda_home / 'include'}"]
    base = ["g++", "-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-Wno-deprecated-declarations"] + inc
    for f in ("batchnormtrain.cpp", "batchnormbwd.cpp"):
        subprocess.run(base + [str(root / "src" / f)], check=True)
    engines = root / "harness" / "src" / "batchnorm_engines.cpp"
    subprocess.run(base + ["-DBENANZA_WITH_FRONTEND=0", str(engines)], check=True)


def test_resnet50_with_its_batch_norms_has_every_backward(tmp_path):
    """torchvision resnet50 exported with its 53 BatchNormalizations kept (each in a Conv -> BN [-> Relu]
    fusion group for inference): each BN gets its training forward and its backward call, no layer is
    left without a backward, and `generate --train` writes both kinds' suites."""
    from conftest import REPO
    from benanza.processing.training import training_plan

    path = REPO / "tests" / "data" / "zoo" / "models" / "resnet50_bnkept.onnx"
    ml = process(path, 32)
    plan = training_plan(ml)
    assert not plan.no_backward
    bns = [ly.index for ly in ml.layers if ly.op_type == "BatchNormalization"]
    assert len(bns) == 53
    by_phase = {(c.layer, c.phase, c.config.kind) for c in plan.calls}
    assert all({(i, "forward", "BatchNormTrain"), (i, "backward_data", "BatchNormBwd")} <= by_phase for i in bns)
    suite = generate([ml], ["fp16"], tmp_path / "s", layouts=["NCHW", "NHWC"], train=True)
    kinds = {j.kind for j in suite.jobs}
    assert {"BatchNormTrain", "BatchNormBwd", "ConvBwdData", "ConvBwdFilter", "ActivationBwd"} <= kinds
    assert (tmp_path / "s" / "src" / "batchnormtrain.cpp").is_file() and (tmp_path / "s" / "src" / "batchnormbwd.cpp").is_file()


def test_an_instance_norm_trains_as_pytorch_runs_it(tmp_path):
    """InstanceNormalization in a training step: PyTorch's instance_norm is a training-mode batch norm
    of x viewed as (1, N*C, H, W) with the scale and bias repeated N times (Normalization.cpp). Its
    training forward and one BatchNormBwd on that view (kept for dscale and dbias even on a model
    input), and scale's and bias's gradients summed over the repeats; the jobs of `--train` include
    them. A rank the batch-norm calls do not take (6) has no backward (the step is incomplete, never
    free)."""
    from benanza.generation.generator import plan_jobs
    from benanza.processing.training import training_plan

    def model(eps, spatial=(8, 8)):
        inits = [numpy_helper.from_array(np.ones(4, np.float32), "s"), numpy_helper.from_array(np.zeros(4, np.float32), "b")]
        nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="inorm", epsilon=eps)]
        g = helper.make_graph(nodes, "in", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, *spatial])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, *spatial])], inits)
        path = tmp_path / f"in{len(spatial)}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return process(path, 3)

    ml = model(1e-5)
    assert ml.layers[0].config.kind == "InstanceNorm"
    plan = training_plan(ml)
    view, eps = (1, 12, 8, 8), ml.layers[0].config.epsilon  # (the attribute's float32 value)
    assert eps == pytest.approx(1e-5)
    assert [(c.phase, c.config) for c in plan.calls] == [
        ("forward", L.BatchNormTrainConfig(shape=view, epsilon=eps)),
        ("backward_data", L.BatchNormBwdConfig(shape=view, epsilon=eps)),
        ("backward_weight", L.ReduceConfig(op="sum", x=(3, 4), y=(1, 4))),
        ("backward_weight", L.ReduceConfig(op="sum", x=(3, 4), y=(1, 4)))]
    keys = {j.config.key for j in plan_jobs([ml], ["fp16"], train=True)}
    assert {c.config.key for c in plan.calls} <= keys
    deep = model(1e-5, (2, 2, 2, 2))
    assert deep.layers[0].config.kind == "InstanceNorm" and training_plan(deep).no_backward == [0]
