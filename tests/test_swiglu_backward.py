"""SwiGLU's gate backward in a training step (issue 26): the SwiGLUBwd kind (benanza::swiglu_backward_kernel,
da and db of silu(a) * b in one pass) as the Elementwise swiglu fusion's backward; the stated gradients
against finite differences; FLOPs and minimum bytes by arithmetic; the Llama export's training plan has
the fused alternative for each SwiGLU group, replacing the Sigmoid / Mul / Mul calls, and no layer
without a backward; the PyTorch candidate (eager autograd's mul, silu_backward, mul); one suite that
renders and whose source passes g++ -fsyntax-only (the kernel file is compiled by nvcc in the session's
harness build, conftest.harness: tests/test_harness_build.py)."""
from __future__ import annotations

import numpy as np

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.framework import Ctx
from benanza.processing.model import process
from benanza.processing.training import fused_alternatives, training_plan
from conftest import REPO
from test_copy_backward import _suite_model
from test_unary_backward import syntax_check


def _swiglu(a, b):
    return a / (1 + np.exp(-a)) * b


def _grads(a, b, dy):
    """The formulas of benanza.kinds.swiglu_backward (and of the kernel's swiglu_grad)."""
    s = 1 / (1 + np.exp(-a))
    return dy * b * s * (1 + a * (1 - s)), dy * a * s


def test_the_stated_gradients_are_the_forwards_derivatives():
    rng = np.random.default_rng(0)
    a, b, dy = (rng.standard_normal((3, 5)) * 3 for _ in range(3))
    da, db = _grads(a, b, dy)
    h = 1e-6
    fa, fb = np.zeros_like(a), np.zeros_like(b)
    for idx in np.ndindex(a.shape):
        e = np.zeros_like(a)
        e[idx] = h
        fa[idx] = ((_swiglu(a + e, b) - _swiglu(a - e, b)) * dy).sum() / (2 * h)
        fb[idx] = ((_swiglu(a, b + e) - _swiglu(a, b - e)) * dy).sum() / (2 * h)
    np.testing.assert_allclose(da, fa, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db, fb, rtol=1e-6, atol=1e-8)


def test_the_backward_call_flops_and_bytes():
    fwd = L.ElementwiseConfig(op="swiglu", a=(2, 128, 352), b=(2, 128, 352))
    (phase, cfg), = L.REGISTRY["Elementwise"].backward(fwd)
    assert phase == "backward_data" and cfg == L.SwiGLUBwdConfig(shape=(2, 128, 352)) and cfg.kind == "SwiGLUBwd"
    n = 2 * 128 * 352
    assert cfg.input_shapes() == [fwd.a] * 3 and cfg.output_shape() == fwd.a
    assert cfg.flops() == 11 * n
    assert min_bytes(cfg, "fp16") == 5 * 2 * n and min_bytes(cfg, "fp32") == 5 * 4 * n  # a, b, dy read; da, db written


def test_the_llama_training_step_has_the_fused_swiglu_backward():
    """llama_prefill_dynamo20 (seq 128): every layer has its backward, and each SwiGLU group (Sigmoid,
    Mul, Mul) has one SwiGLUBwd call as its fused alternative, in place of the three layers' calls and
    the gate tensor's gradient accumulation."""
    ml = process(REPO / "tests" / "data" / "decoders" / "llama_prefill_dynamo20.onnx", 1, {"seq": 128})
    plan = training_plan(ml)
    assert not plan.no_backward and not [ly for ly in ml.layers if ly.status == "unsupported"]
    groups = [f for f in ml.fusions if getattr(f.config, "op", "") == "swiglu"]
    alts = {a.layers: a for a in fused_alternatives(ml, plan) if a.kind == "SwiGLU"}
    assert groups and set(alts) == {tuple(f.layers) for f in groups}
    for f in groups:
        a = alts[tuple(f.layers)]
        assert [c.config for c in a.calls] == [L.SwiGLUBwdConfig(shape=tuple(f.config.a))]
        assert not a.forward and not a.no_backward
        replaced = {plan.calls[k].layer for k in a.replaced if not plan.calls[k].accumulation}
        assert replaced == set(f.layers)
        assert any(plan.calls[k].accumulation for k in a.replaced)  # the gate read by Sigmoid and Mul


def test_the_pytorch_candidate_is_eager_autograds_kernels():
    from test_kinds_registry import _Recorder

    cfg = L.SwiGLUBwdConfig(shape=(1, 128, 352))
    cand = L.REGISTRY["SwiGLUBwd"].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), False))
    assert cand.call == "torch:aten::silu_backward+aten::mul" and cand.out_numel == 128 * 352
    assert "three kernels" in cand.note


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    suite = generate([_suite_model([L.SwiGLUBwdConfig(shape=(1, 128, 352)), L.SwiGLUBwdConfig(shape=(3, 7))])],
                     ["fp32", "bf16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"SwiGLUBwd"} and len(suite.jobs) == 4
    src = (tmp_path / "s" / "src" / "swiglubwd.cpp").read_text()
    assert "swiglu_backward_kernel(a, up, dy, da, db, n, dt, s)" in src and '45056, "da, db of silu(a) * b"}' in src
    syntax_check(tmp_path / "s", "swiglubwd.cpp")
