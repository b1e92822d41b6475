"""The backward of fused attention (issue 26): the SdpaBwd kind and the SDPA kind's ``Kind.backward`` (the
training-mode forward that writes the softmax statistics, and one call for dQ, dK and dV). A BERT
encoder's and a causal attention's fused SDPA expanded into their training calls (shapes, masks and
layouts kept), GQA kept, FLOPs and minimum bytes by arithmetic, the statistics' formula in numpy, the
PyTorch candidate, a suite that renders and whose sources (and the harness's new translation unit)
pass g++ -fsyntax-only."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess

import numpy as np
import pytest

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate, plan_jobs
from benanza.kinds.framework import Ctx
from benanza.kinds.sdpa_backward import ELEMENTWISE_PER_SCORE, MATMULS_D, MATMULS_DV
from benanza.processing.model import Layer, ModelLayers, process
from benanza.processing.training import training_plan
from conftest import REPO
from onnx_builders import HOSTILE, bert_encoder_model, transformer_ops_model
from test_unary_backward import syntax_check

SB = L.SdpaBwdConfig


def _backward(cfg):
    return L.REGISTRY[cfg.kind].backward(cfg)


def test_a_bert_encoders_attentions_have_their_training_forward_and_backward(tmp_path):
    ml = process(bert_encoder_model(tmp_path / "bert.onnx", opset=14), 2, dims={"seq": 16})
    att = [f for f in ml.fusions if f.config.kind == "SDPA"]
    assert len(att) == 2
    bshd = (16 * 64, 16, 64, 1)
    plan = training_plan(ml)
    # the fused alternative: per attention, its training forward then its backward
    groups = {tuple(f.layers) for f in att}
    assert [(c.layer, c.phase, c.config.kind) for c in plan.fused if c.fusion in groups] == \
        [(f.layers[0], p, k) for f in att for p, k in (("forward", "SDPA"), ("backward_data", "SdpaBwd"))]
    for f in att:
        fwd = f.config
        assert not fwd.stats and fwd.mask == "bias" and fwd.bias == (2, 1, 1, 16)
        (p1, train), (p2, bwd) = _backward(fwd)
        assert p1 == "forward" and train == dataclasses.replace(fwd, stats=True) and train.kind == "SDPA"
        assert p2 == "backward_data" and bwd == SB(b=2, h=4, h_kv=4, s_q=16, s_kv=16, d=16, d_v=16, scale=0.25,
                                                   mask="bias", bias=(2, 1, 1, 16), q_strides=bshd, k_strides=bshd,
                                                   v_strides=bshd, o_strides=bshd)
        q = (2, 4, 16, 16)
        assert bwd.input_shapes() == [q, q, q, q, q, (2, 4, 16, 1)] and bwd.output_shape() == q
        assert bwd.strides() == (bshd,) * 4
    # the layers' own calls are unchanged (the step still counts them); the jobs include the fused ones
    assert not [c for c in plan.calls if c.config.kind in ("SdpaBwd", "SDPA")]
    assert {c.config.key for c in plan.fused} <= set(plan.configs())
    jobs = plan_jobs([ml], ["fp16"], train=True)
    assert {j.config for j in jobs if j.kind == "SdpaBwd"} == {c.config for c in plan.fused if c.config.kind == "SdpaBwd"}
    assert {j.config for j in jobs if j.kind == "SDPA"} == {f.config for f in att} | \
        {c.config for c in plan.fused if c.config.kind == "SDPA"}
    assert not [j for j in plan_jobs([ml], ["fp16"]) if j.kind == "SdpaBwd"]  # inference: none


def test_a_causal_attention_keeps_its_mask(tmp_path):
    ml = process(transformer_ops_model(tmp_path / "t.onnx"), 2, batch_dim=0)
    (f,) = [g for g in ml.fusions if g.config.kind == "SDPA"]
    plan = training_plan(ml)
    train, bwd = (c.config for c in plan.fused)  # the residual Add -> LayerNorm group has none
    assert train == L.SdpaConfig(b=2, h=1, s_q=8, s_kv=8, d=32, d_v=32, scale=0.25, mask="causal", stats=True)
    assert bwd == SB(b=2, h=1, h_kv=1, s_q=8, s_kv=8, d=32, d_v=32, scale=0.25, mask="causal")
    assert bwd.describe() == "SdpaBwd(b2 h1 sq8 skv8 d32 scale 0.25 causal)"
    assert train.describe().endswith("causal +stats)")


def test_gqa_is_kept_and_checked():
    fwd = L.SdpaConfig(b=2, h=8, s_q=64, s_kv=128, d=64, d_v=32, scale=0.125, mask="causal", h_kv=2)
    assert fwd.input_shapes() == [(2, 8, 64, 64), (2, 2, 128, 64), (2, 2, 128, 32)]
    assert fwd.output_shape() == (2, 8, 64, 32)
    (_, train), (_, bwd) = _backward(fwd)
    assert train.h_kv == 2 and train.stats
    assert bwd == SB(b=2, h=8, h_kv=2, s_q=64, s_kv=128, d=64, d_v=32, scale=0.125, mask="causal")
    assert bwd.input_shapes() == [(2, 8, 64, 64), (2, 2, 128, 64), (2, 2, 128, 32), (2, 8, 64, 32), (2, 8, 64, 32),
                                  (2, 8, 64, 1)]
    assert bwd.describe() == "SdpaBwd(b2 h8 hkv2 sq64 skv128 d64 dv32 scale 0.125 causal)"
    assert fwd.describe() == "SDPA(b2 h8 hkv2 sq64 skv128 d64 dv32 scale 0.125 causal)"
    with pytest.raises(ValueError):
        SB(b=1, h=8, h_kv=3, s_q=4, s_kv=4, d=8, d_v=8, scale=1.0)
    with pytest.raises(ValueError):
        L.SdpaConfig(b=1, h=8, s_q=4, s_kv=4, d=8, d_v=8, scale=1.0, h_kv=3)
    with pytest.raises(ValueError):
        SB(b=1, h=8, h_kv=8, s_q=4, s_kv=4, d=8, d_v=8, scale=1.0, mask="padding")
    # the forward's new fields are optional: the keys of stored configs do not change
    assert L.SdpaConfig(b=1, h=12, s_q=197, s_kv=197, d=64, d_v=64, scale=0.125).key == "sdpa-e07dcee3fd8c0cea"
    assert L.SdpaConfig(b=1, h=12, s_q=197, s_kv=197, d=64, d_v=64, scale=0.125, stats=True).key != \
        "sdpa-e07dcee3fd8c0cea"
    round_trip = L.config_from_params("SdpaBwd", bwd.params())
    assert round_trip == bwd and round_trip.key == bwd.key and bwd.key.startswith("sdpabwd-")


def test_flops_and_bytes():
    b, h, hk, sq, skv, d, dv = 2, 4, 2, 16, 32, 16, 8
    cfg = SB(b=b, h=h, h_kv=hk, s_q=sq, s_kv=skv, d=d, d_v=dv, scale=0.25)
    s = b * h * sq * skv
    assert (MATMULS_D, MATMULS_DV, ELEMENTWISE_PER_SCORE) == (3, 2, 7)
    assert cfg.flops() == 2 * s * (3 * d + 2 * dv) + 7 * s + 2 * b * h * sq * dv
    # FlashAttention-2's rule: with d = d_v the backward's products are 2.5x the forward's
    sq_cfg = SB(b=1, h=1, h_kv=1, s_q=64, s_kv=64, d=64, d_v=64, scale=0.125)
    fwd = L.SdpaConfig(b=1, h=1, s_q=64, s_kv=64, d=64, d_v=64, scale=0.125)
    mm = lambda c, elementwise: c.flops() - elementwise  # noqa: E731
    assert mm(sq_cfg, 7 * 64 * 64 + 2 * 64 * 64) == 2.5 * mm(fwd, 7 * 64 * 64)
    q, k, v, o = b * h * sq * d, b * hk * skv * d, b * hk * skv * dv, b * h * sq * dv
    stats = b * h * sq
    # Q, K, V, O, dO read and dQ, dK, dV written (2 bytes each in fp16), the statistics read (float32)
    assert min_bytes(cfg, "fp16") == 2 * (q + k + v + 2 * o) + 4 * stats + 2 * (q + k + v)
    assert min_bytes(cfg, "fp32") == 4 * (q + k + v + 2 * o) + 4 * stats + 4 * (q + k + v)
    biased = dataclasses.replace(cfg, mask="bias", bias=(b, 1, 1, skv))
    assert min_bytes(biased, "fp16") == min_bytes(cfg, "fp16") + 2 * b * skv
    # the training forward writes the statistics beside O
    f = L.SdpaConfig(b=b, h=h, s_q=sq, s_kv=skv, d=d, d_v=dv, scale=0.25, h_kv=hk)
    assert min_bytes(dataclasses.replace(f, stats=True), "fp16") == min_bytes(f, "fp16") + 4 * stats
    assert min_bytes(f, "fp16") == 2 * (q + k + v) + 2 * o


def test_the_stats_the_set_up_computes_are_the_softmax_logsumexp():
    """sdpa_stats_kernel's formula, L_i = max_j s_ij + log(sum_j exp(s_ij - max)), over the visible keys
    (j <= i with the top-left causal mask), GQA's head mapping hk = h / (h / h_kv): exp(s - L) is the
    forward's softmax (each row sums to 1), which is what the backward recomputes from the saved L."""
    rng = np.random.default_rng(0)
    b, h, hk, sq, skv, d, scale = 2, 4, 2, 5, 7, 8, 0.3
    q, k = rng.standard_normal((b, h, sq, d)), rng.standard_normal((b, hk, skv, d))
    kk = np.repeat(k, h // hk, axis=1)  # query head i reads K/V head i // (h / h_kv)
    s = scale * q @ kk.transpose(0, 1, 3, 2)
    s = np.where(np.arange(skv)[None, :] <= np.arange(sq)[:, None], s, -np.inf)  # causal, top-left
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
    p = np.exp(s - lse)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-12)
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(p, e / e.sum(-1, keepdims=True), rtol=1e-12)
    kernel = (REPO / "cpp" / "src" / "sdpa_backward_kernels.cu").read_text()
    assert "stats[row] = m + logf(l);" in kernel and "const long long hk = hh / a.group;" in kernel
    assert "a.mask == static_cast<int>(SdpaMask::CAUSAL) ? i" in kernel  # key j visible to query i when j <= i
    assert "i + a.s_kv - a.s_q" in kernel and "diag < a.s_kv - 1 ? diag : a.s_kv - 1" in kernel  # bottom-right


def test_the_pytorch_candidate_is_autograds_backward():
    from test_kinds_registry import _Recorder

    cfg = SB(b=1, h=4, h_kv=2, s_q=8, s_kv=8, d=16, d_v=16, scale=0.25, mask="causal")
    c = L.REGISTRY["SdpaBwd"].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), False))
    assert c.call == "torch:aten::scaled_dot_product_attention" and c.algorithm == "autograd backward"
    assert c.out_numel == 1 * 4 * 8 * 16 and c.details == {"gqa": True}
    train = L.REGISTRY["SDPA"].torch(Ctx(L.SdpaConfig(b=1, h=4, s_q=8, s_kv=8, d=16, d_v=16, scale=0.25, stats=True),
                                         _Recorder(), _Recorder(), _Recorder(), False))
    assert train.details.get("training") is True
    try:
        import torch
    except ImportError:
        pytest.skip("torch is not installed: the candidate is built, not run")
    from benanza.profiles.torch_candidates import build

    with torch.inference_mode():  # as the framework's timing runs it
        cand = build(cfg, "fp32", device="cpu")
        dq = cand.fn()
    assert tuple(dq.shape) == (1, 4, 8, 16) and bool(torch.isfinite(dq).all())


def _model(batch: int) -> ModelLayers:
    bshd = (16 * 64, 16, 64, 1)
    cfgs = [SB(b=batch, h=4, h_kv=4, s_q=16, s_kv=16, d=16, d_v=16, scale=0.25, mask="bias", bias=(batch, 1, 1, 16),
               q_strides=bshd, k_strides=bshd, v_strides=bshd, o_strides=bshd),
            SB(b=batch, h=8, h_kv=2, s_q=64, s_kv=64, d=64, d_v=64, scale=0.125, mask="causal"),
            L.SdpaConfig(b=batch, h=8, s_q=64, s_kv=64, d=64, d_v=64, scale=0.125, mask="causal", h_kv=2,
                         stats=True)]  # the training forward
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"att{i}", op_type="Backward", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="sdpabwd", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=17,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    suite = generate([_model(1), _model(4)], ["fp16", "bf16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"SdpaBwd", "SDPA"}
    assert len([j for j in suite.jobs if j.kind == "SdpaBwd"]) == 2 * 2 * 2
    src = (tmp_path / "s" / "src" / "sdpabwd.cpp").read_text()
    assert "sdpa_stats_kernel(" in src and "run_sdpa_backward_engines(" in src
    # b h h_kv s_q s_kv d d_v, the mask, and GQA's K/V heads
    assert "4, 8, 2, 64, 64, 64, 64, 0.125, SdpaMask::CAUSAL" in src
    assert "4, 4, 4, 16, 16, 16, 16, 0.25, SdpaMask::BIAS, {4, 1, 1, 16}" in src
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src
    fwd = (tmp_path / "s" / "src" / "sdpa.cpp").read_text()
    assert "SdpaMask::CAUSAL" in fwd and ", 2, true, 0, \"\", false}" in fwd  # h_kv 2, stats written
    syntax_check(tmp_path / "s", "sdpabwd.cpp")
    syntax_check(tmp_path / "s", "sdpa.cpp")


def test_the_harness_translation_unit_compiles():
    """cpp/src/sdpa_backward_engines.cpp without the cudnn-frontend headers (g++ -fsyntax-only); with
    them it compiles in the session's harness build (conftest.harness, tests/test_harness_build.py)."""
    import site
    from pathlib import Path

    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia").is_dir()), None)
    if not shutil.which("g++") or sp is None or not (sp / "nvidia" / "cu13" / "include" / "cublas_v2.h").exists():
        pytest.skip("g++ or the pip wheels' CUDA/cuDNN/cuBLAS headers are missing")
    inc = [REPO / "cpp" / "include", sp / "nvidia" / "cudnn" / "include", sp / "nvidia" / "cu13" / "include",
           sp / "include"]
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DBENANZA_WITH_FRONTEND=0",
                        *[f"-I{p}" for p in inc], str(REPO / "cpp" / "src" / "sdpa_backward_engines.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.mark.slow
def test_the_suite_compiles_and_links(tmp_path, harness, monkeypatch):
    """The SdpaBwd suite (and the SDPA training forward's) compiles and links against the harness
    library (sdpa_backward_engines.cpp, sdpa_backward_kernels.cu) and lists exactly its jobs."""
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    import json

    from benanza.build.builder import build

    suite = generate([_model(1), _model(4)], ["fp32", "fp16", "bf16"], tmp_path / "s")
    r = build(tmp_path / "s")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}


@pytest.mark.parametrize("fused_ms", [0.05, 5.0, None], ids=["fused-faster", "fused-slower", "fused-unmeasured"])
def test_the_step_takes_fused_calls_where_they_are_faster(tmp_path, fused_ms):
    """A BERT encoder at fp16, its two attentions, five decomposed LayerNorms and two erf-GELUs (inside
    GemmAct candidates) each with a fused alternative. The training step takes each where all its
    calls are measured and faster: an attention's training forward with statistics and its one
    backward (in place of the group's forward layers and backward calls), a LayerNorm's training
    forward and LayerNormBwd, a GELU's one gelu_backward (its forward stays the GemmAct's; the
    accumulation of its input, read twice by the decomposition, goes too). The LayerNorms' layers can be
    bounded one by one too (their ReduceMeans' gradient is an Expand), so every group is taken only
    where faster. Not taken, an attention's forward counts layer by layer (the unfused backward reads
    probabilities the fused inference call never writes); an unmeasured alternative is never taken.
    On an H100 the attentions took vit_b_16's b32 fp16 step from 12.03 to 9.14 ms (PyTorch 14.24 ms;
    benchmarks/results/2026-11-26g)."""
    from benanza.analysis.analyzer import analyze
    from benanza.analysis.training import training_step
    from benanza.processing.training import fused_alternatives, loss_config, optimizer_config
    from test_lbl_truth import _measure, _system_db

    ml = process(bert_encoder_model(tmp_path / "bert.onnx", opset=14), 2, dims={"seq": 16})
    plan = training_plan(ml)
    alts = fused_alternatives(ml, plan)
    kinds = sorted(alt.kind for alt in alts)
    assert kinds == ["LayerNorm"] * 5 + ["SDPA"] * 2 + ["erf-GELU"] * 2
    by_kind = {k: [alt for alt in alts if alt.kind == k] for k in set(kinds)}
    assert all(alt.forward and not alt.no_backward for alt in by_kind["SDPA"])
    assert all(alt.forward and not alt.no_backward for alt in by_kind["LayerNorm"])
    gelu = by_kind["erf-GELU"][0]
    assert not gelu.forward and [c.config for c in gelu.calls] == [
        L.UnaryBwdConfig(shape=(2, 16, 256), op="gelu")] and len(gelu.layers) == 5
    assert [plan.calls[k].config.kind for k in gelu.replaced if plan.calls[k].accumulation] == ["Elementwise"]
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in ml.unique_configs().values():
        _measure(db, sid, cfg, "fp16", [("lib", 0.01)])
    for c in plan.calls:
        _measure(db, sid, c.config, "fp16", [("lib", 0.01)])
    _measure(db, sid, optimizer_config(ml, "sgd"), "fp16", [("lib", 0.01)])
    _measure(db, sid, loss_config(ml)[0], "fp16", [("lib", 0.01)])
    if fused_ms is not None:
        for c in plan.fused:
            _measure(db, sid, c.config, "fp16", [("lib", fused_ms)])
    system = db.systems()[0]
    a = analyze(ml, db, system, "fp16", layouts=("NCHW",))
    t = training_step(ml, a, db, system)
    assert not t.missing_calls and not t.forward.missing
    fused = [c for c in t.calls if c.description.startswith("fused: ")]
    note = " ".join(t.notes)
    att = set().union(*(alt.layers for alt in by_kind["SDPA"]))
    taken = {"fused-faster": (2, 5, 2), "fused-slower": (0, 0, 0), "fused-unmeasured": (0, 0, 0)}[
        {0.05: "fused-faster", 5.0: "fused-slower", None: "fused-unmeasured"}[fused_ms]]
    if fused_ms is not None:
        assert f"LayerNorm {taken[1]} of 5 groups taken fused; SDPA {taken[0]} of 2 groups taken fused; " \
               f"erf-GELU {taken[2]} of 2 groups taken fused" in note
    assert sorted(c.kind for c in fused) == sorted(["SDPA", "SdpaBwd"] * taken[0] + ["LayerNorm", "LayerNormBwd"] *
                                                   taken[1] + ["UnaryBwd"] * taken[2])
    replaced = sum(len(alt.replaced) for k, n in zip(("SDPA", "LayerNorm", "erf-GELU"), taken)
                   for alt in by_kind[k][:n])
    assert len(t.calls) == len(plan.calls) - replaced + len(fused)
    # complete either way: the unfused LayerNorms' ReduceMeans have their gradient (an Expand)
    assert t.complete and not t.no_backward
    # the residual Adds the decomposed LayerNorms took in count layer by layer in a training step
    adds = {f.layers[0] for f in ml.fusions if getattr(f.config, "residual", False)}
    assert len(adds) == 4
    outside = sum(w for i, w in enumerate(a.fused_weight) if i not in att | adds) + \
        sum(a.layers[i].bound_ms for i in adds)
    ln = set().union(*(alt.layers for alt in by_kind["LayerNorm"]))
    assert not ln & adds
    if fused_ms == 0.05:  # the attentions' forward: their fused training forwards, 0.05 ms each
        assert t.phase_ms["forward"] == pytest.approx(
            outside - sum(a.fused_weight[i] for i in ln) + 2 * 0.05 + 5 * 0.05)
        # memory: the fused attention keeps Q, K, V and O, not the 2 x 4 x 16 x 16 probabilities
        from benanza.analysis.training import memory_bound

        unfused = memory_bound(ml, plan, t.calls, "fp16", "sgd", 0)
        assert t.memory.activations < unfused.activations
    elif fused_ms == 5.0:  # not taken: the attentions' and the LayerNorms' forward layer by layer
        assert t.phase_ms["forward"] == pytest.approx(
            outside - sum(a.fused_weight[i] for i in ln) + sum(a.layers[i].bound_ms for i in ln | att))
    # `predict --train` to the GPU it was measured on gives the same step (same groups, same forward)
    from benanza.analysis.gpus import find_gpu
    from benanza.analysis.predict_training import predict_training

    h200 = find_gpu("H200")
    tp = predict_training(ml, t, h200, h200)
    assert tp.phase_ms == pytest.approx(t.phase_ms) and tp.critical_path_ms == pytest.approx(t.critical_path_ms)
