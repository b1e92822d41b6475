"""The backward of RMSNorm (issue 26): the RMSNormBwd kind and the RMSNorm kind's ``Kind.backward`` (the
training-mode forward that saves r = 1 / rms, the data gradient dX, the scale's gradient dScale), the
decomposed RMSNorm chain taken as one group in a training step, the Llama-style decoder exports' training
steps complete; the backward formulas the kernels state checked in numpy against finite differences of
the forward; the PyTorch candidate; a suite that renders, whose sources pass g++ -fsyntax-only (with
and without cudnn-frontend) and whose kernels compile with nvcc (in the session's harness build, conftest.harness, which compiles every cpp/src file: tests/test_harness_build.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benanza import kinds as L
from benanza.analysis.analyzer import analyze
from benanza.analysis.roofline import min_bytes
from benanza.analysis.training import training_step
from benanza.generation.generator import generate
from benanza.kinds.cpp import cpp_string
from benanza.kinds.framework import Ctx
from benanza.processing.model import Layer, ModelLayers, process
from benanza.processing.training import fused_alternatives, loss_config, optimizer_config, training_plan
from conftest import REPO
from onnx_builders import HOSTILE
from test_lbl_truth import _measure, _system_db
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
RB = L.RMSNormBwdConfig


def test_the_backward_is_the_training_forward_dx_and_dscale():
    fwd = L.RMSNormConfig(x=(2, 128, 256), axis=2, epsilon=1e-6)
    (p1, train), (p2, dx), (p3, ds) = L.REGISTRY["RMSNorm"].backward(fwd)
    assert (p1, p2, p3) == ("forward", "backward_data", "backward_weight")
    assert train == dataclasses.replace(fwd, stats=True) and train.kind == "RMSNorm" and train.key != fwd.key
    assert dx == RB(x=(2, 128, 256), axis=2, grad="dx") and ds == RB(x=(2, 128, 256), axis=2, grad="dscale")
    rows, cols = 256, 256
    assert dx.input_shapes() == [(2, 128, 256), (2, 128, 256), (256,), (2, 128)] and dx.output_shape() == (2, 128, 256)
    assert ds.input_shapes() == [(2, 128, 256), (2, 128, 256), (2, 128)] and ds.output_shape() == (256,)
    assert dx.flops() == 8 * rows * cols and ds.flops() == 3 * rows * cols
    # fp16: dy, x read, dx written (2 bytes), scale read (4 * cols), r read (4 * rows)
    assert min_bytes(dx, "fp16") == 3 * 2 * rows * cols + 4 * cols + 4 * rows
    # fp32: dy, x read (4 bytes), r read, dscale written (4 * cols)
    assert min_bytes(ds, "fp32") == 2 * 4 * rows * cols + 4 * rows + 4 * cols
    # the training forward writes r: 4 bytes a row more than inference
    assert min_bytes(train, "fp16") == min_bytes(fwd, "fp16") + 4 * rows
    assert train.describe().endswith("+stats)") and dx.describe() == "RMSNormBwd(dx of 2x128x256 axis 2)"
    with pytest.raises(ValueError):
        RB(x=(2, 3), axis=2)
    with pytest.raises(ValueError):
        RB(x=(2, 3), axis=1, grad="dbias")


def _rms(x, w, eps):
    r = 1 / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)
    return x * r * w, r


def test_the_stated_backward_formulas_are_the_forwards_gradients():
    """dx = r * (g - xhat * mean(g * xhat)), dscale = sum dy * xhat (g = scale * dy, xhat = x * r) equal
    the gradients of sum(dy * RMSNorm(x)) by central finite differences; the kernels compute them."""
    rng = np.random.default_rng(0)
    rows, cols, eps = 3, 7, 1e-5
    x, dy, w = rng.standard_normal((rows, cols)), rng.standard_normal((rows, cols)), rng.uniform(0.5, 1.5, cols)
    _, r = _rms(x, w, eps)
    xhat, g = x * r, w * dy
    dx = r * (g - xhat * (g * xhat).mean(-1, keepdims=True))
    dscale = (dy * xhat).sum(0)

    def loss(x_=x, w_=w):
        return float((dy * _rms(x_, w_, eps)[0]).sum())

    def fd(arr, which, h=1e-6):
        out = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            p, m = arr.copy(), arr.copy()
            p[i] += h
            m[i] -= h
            out[i] = (loss(**{which: p}) - loss(**{which: m})) / (2 * h)
        return out

    np.testing.assert_allclose(dx, fd(x, "x_"), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dscale, fd(w, "w_"), rtol=1e-5, atol=1e-7)
    kernel = (REPO / "cpp" / "src" / "rmsnorm_backward_kernels.cu").read_text()
    assert "s += to_f(dyr[c]) * scale[c] * to_f(xr[c]) * r;" in kernel
    assert "dxr[c] = from_f<T>(r * (to_f(dyr[c]) * scale[c] - xhat * m));" in kernel
    assert "a += to_f(dy[r * cols + c]) * to_f(x[r * cols + c]) * rinv[r];" in kernel
    fwd = (REPO / "cpp" / "src" / "rmsnorm_kernels.cu").read_text()
    assert "if (inv_variance && threadIdx.x == 0) inv_variance[row] = r;" in fwd


def test_the_pytorch_candidates():
    from test_kinds_registry import _Recorder

    for grad, n in (("dx", 80), ("dscale", 8)):
        c = L.REGISTRY["RMSNormBwd"].torch(Ctx(RB(x=(2, 5, 8), axis=2, grad=grad), _Recorder(), _Recorder(),
                                               _Recorder(), False))
        assert c.call == "torch:aten::_fused_rms_norm_backward" and c.out_numel == n
    train = L.RMSNormConfig(x=(2, 5, 8), axis=2, epsilon=1e-6, stats=True)
    c = L.REGISTRY["RMSNorm"].torch(Ctx(train, _Recorder(), _Recorder(), _Recorder(), False))
    assert c.call == "torch:aten::_fused_rms_norm"


def _complete_step(ml, tmp_path):
    """The training step of ``ml`` with every forward layer, fusion, backward, fused, loss and optimizer call
    measured at 1 ms (fp32): complete unless a layer has no backward that any call computes."""
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    plan = training_plan(ml)
    cfgs = {ly.config.key: ly.config for ly in ml.layers if ly.config is not None and ly.status == "benchmark"}
    cfgs.update({f.config.key: f.config for f in ml.fusions})
    cfgs.update(plan.configs())
    for extra in (optimizer_config(ml, "sgd"), loss_config(ml)[0]):
        cfgs[extra.key] = extra
    for cfg in cfgs.values():
        _measure(db, sid, cfg, "fp32", [("lib", 1.0)])
    system = db.systems()[0]
    return training_step(ml, analyze(ml, db, system, "fp32", layouts=("NCHW",)), db, system)


@pytest.mark.parametrize("name,groups", [("llama_prefill_dynamo20.onnx", 5), ("llama_prefill_dynamo23.onnx", 0)])
def test_a_llama_prefill_training_step_is_complete(name, groups, tmp_path):
    """torch.export's decomposed RMSNorm is a fused alternative with its training forward, dX and dScale
    (its layers' own gradients, the ReduceMean's an Expand, stay the op-by-op way); opset 23's
    RMSNormalization has them as its own backward. Nothing in these exports (GQA SDPA, rotary, SwiGLU,
    the Where/IsNaN guards) lacks a backward."""
    ml = process(DEC / name, 1, dims={"seq": 128})
    plan = training_plan(ml)
    rms = {a.layers: a for a in fused_alternatives(ml, plan) if a.kind == "RMSNorm"}
    assert len(rms) == groups
    assert list(plan.no_backward) == []
    reduce_means = [i for i, ly in enumerate(ml.layers) if ly.op_type == "ReduceMean"]
    assert len(reduce_means) == groups and all(
        any(c.layer == i and c.config.kind == "Copy" and c.config.op == "Expand" for c in plan.calls) for i in reduce_means)
    for a in rms.values():
        assert a.forward and [c.phase for c in a.calls] == ["forward", "backward_data", "backward_weight"]
        assert a.calls[0].config.stats and a.calls[1].config == RB(x=(1, 128, 128), axis=2, grad="dx")
    bwd = [c for c in plan.calls + plan.fused if c.config.kind == "RMSNormBwd"]
    assert len(bwd) == 10  # 5 RMSNorms (2 layers x 2 + the final one), dx and dscale each
    t = _complete_step(ml, tmp_path)
    assert t.complete, t.incomplete_note


def _suite_model(batch):
    cfgs = [RB(x=(batch, 128, 4096), axis=2), RB(x=(batch, 128, 4096), axis=2, grad="dscale"),
            RB(x=(batch, 7, 96), axis=1), L.RMSNormConfig(x=(batch, 128, 4096), axis=2, epsilon=1e-6, stats=True)]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"rmsbwd{i}", op_type="Backward", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="rmsbwd", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=23,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_suite_renders_and_compiles(tmp_path):
    suite = generate([_suite_model(1), _suite_model(8)], ["fp32", "fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"RMSNormBwd", "RMSNorm"}
    assert len([j for j in suite.jobs if j.kind == "RMSNormBwd"]) == 3 * 2 * 2
    src = (tmp_path / "s" / "src" / "rmsnormbwd.cpp").read_text()
    assert "rmsnorm_backward_dx_kernel(" in src and "rmsnorm_backward_dscale_kernel(" in src
    assert "run_rmsnorm_backward_engines(" in src
    assert "1024, 4096, false," in src and "1024, 4096, true," in src and "8, 672, false," in src
    assert cpp_string(HOSTILE) in src
    fwd = (tmp_path / "s" / "src" / "rmsnorm.cpp").read_text()
    assert "1024, 4096, 1e-06, true," in fwd  # the training forward: stats
    syntax_check(tmp_path / "s", "rmsnormbwd.cpp")
    syntax_check(tmp_path / "s", "rmsnorm.cpp")
