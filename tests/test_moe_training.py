"""A mixture-of-experts training step (issue 54): the backward calls of the MoE kinds (GroupedGemm, TopK,
Scatter, GatherElements) and the layers autograd gives no gradient (the routing's integer tensors), on
benanza's own weight-stripped exports of transformers' MoE decoders (tests/data/decoders, see test_moe.py)
at batch 1 and 32; each backward config's shapes, FLOPs and minimum bytes by hand for small cases; the
gradients' orientation checked against the forward's linearity; the generated suite compiles."""
from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.processing.model import process
from benanza.processing.training import NO_GRADIENT_REASONS, optimizer_config, training_plan
from conftest import REPO
from test_copy_backward import _suite_model
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
#: the MoE prefill exports (transformers' default grouped_mm experts, and Qwen3-MoE's batched_mm form)
MODELS = ("qwen3_moe", "mixtral", "qwen2_moe", "deepseek_v3_moe", "gpt_oss", "qwen3_moe_batched_mm")
#: the kinds of the MoE path whose layers must each get their backward calls or no gradient
MOE_KINDS = ("GroupedGemm", "TopK", "Scatter", "GatherElements", "NonZero", "CumSum")
GG = L.GroupedGemmConfig


@pytest.fixture(scope="module", params=[(m, b) for m in MODELS for b in (1, 32)], ids=lambda p: f"{p[0]}-b{p[1]}")
def planned(request):
    model, batch = request.param
    ml = process(DEC / f"{model}_prefill.onnx", batch)
    return model, ml, training_plan(ml)


def test_no_moe_layer_is_left_without_a_backward(planned):
    """Every layer has its calls, passes its gradient through, or takes none (with a reason): the step of
    an MoE prefill is complete. The integer layers of the routing (the sort of the expert ids, the inverse
    permutation, the cumulative counts) are ``no_gradient``, never ``no_backward``."""
    model, ml, plan = planned
    assert plan.no_backward == [], [(i, ml.layers[i].op_type) for i in plan.no_backward]
    called = {c.layer for c in plan.calls}
    for ly in ml.layers:
        if ly.config is not None and ly.config.kind in MOE_KINDS and ly.status == "benchmark":
            assert (ly.index in called) != (ly.index in plan.no_gradient), (ly.index, ly.config.describe())
            if getattr(ly.config, "dtype", ""):  # integer data: no gradient, and why
                assert plan.no_gradient[ly.index] == NO_GRADIENT_REASONS["integer"]
    assert set(plan.no_gradient.values()) <= set(NO_GRADIENT_REASONS.values())
    if "batched_mm" not in model:  # the grouped_mm path: the int64 sort of the expert ids takes no gradient
        sorts = [ly.index for ly in ml.layers if ly.config is not None and ly.config.kind == "TopK" and ly.config.dtype]
        assert sorts and all(i in plan.no_gradient for i in sorts)
        # torch's histc of the expert ids (Cast, Mul, Floor, Min, Where, ScatterElements add on floats)
        hist = [ly for ly in ml.layers if ly.op_type == "ScatterElements"]
        assert hist and all(plan.no_gradient[ly.index] == NO_GRADIENT_REASONS["constant"] for ly in hist)


def test_each_grouped_gemm_gets_its_data_and_weight_gradient(planned):
    """Each GroupedMatMul: dX a grouped GEMM over the same rows and routing with n and k swapped and the
    weight read the other way, dW the weight-gradient form of the weights' shape; the experts' weights are
    parameters of the optimizer's step."""
    model, ml, plan = planned
    grouped = [ly for ly in ml.layers if ly.config is not None and ly.config.kind == "GroupedGemm"]
    if "batched_mm" in model:
        assert not grouped
        gathers = [c for c in plan.calls if ml.layers[c.layer].op_type == "GatherND"
                   and c.phase == "backward_weight"]
        assert len(gathers) == 4  # the experts' weight tables gathered per (token, expert): their gradients
        return
    assert grouped
    by_layer = collections.defaultdict(list)
    for c in plan.calls:
        by_layer[c.layer].append((c.phase, c.config))
    weights = 0
    for ly in grouped:
        f = ly.config
        data = GG(rows=f.rows, n=f.k, k=f.n, experts=f.experts, trans_b=not f.trans_b)
        wk, wn = (f.n, f.k) if f.trans_b else (f.k, f.n)
        weight = GG(rows=f.rows, n=wn, k=wk, experts=f.experts, weight_grad=True)
        assert by_layer[ly.index] == [("backward_data", data), ("backward_weight", weight)]
        assert weight.output_shape() == f.input_shapes()[1]  # dW has W's shape
        assert data.output_shape() == (f.rows, f.k) and data.flops() == weight.flops() == f.flops()
        weights += f.experts * f.n * f.k
    opt = optimizer_config(ml)
    assert opt is not None and opt.parameter_count > weights


def test_grouped_gemm_gradients_by_hand():
    """Qwen3-MoE-like 10 rows over 4 experts (3, 3, 2, 2 rows), K = 32, N = 64, bf16 (2 bytes):
    dX = dY W^T: 2 * 10 * 64 * 32 FLOPs, dY and the 4 experts' weights read, dX written; dW = X^T dY:
    the same FLOPs, X and dY read, all 4 experts' 32 x 64 written. With 16 experts for 6 rows (10 idle),
    dW still writes the 10 idle experts' zeros (PyTorch's _grouped_mm writes them) and dX reads only the
    6 active experts' weights."""
    f = GG(rows=10, n=64, k=32, experts=4)
    (pd, dx), (pw, dw) = L.REGISTRY["GroupedGemm"].backward(f)
    assert (pd, pw) == ("backward_data", "backward_weight")
    assert dx == GG(rows=10, n=32, k=64, experts=4, trans_b=True) and dx.counts() == (3, 3, 2, 2)
    assert dw == GG(rows=10, n=64, k=32, experts=4, weight_grad=True)
    assert dx.input_shapes() == [(10, 64), (4, 32, 64)] and dx.output_shape() == (10, 32)
    assert dw.input_shapes() == [(10, 32), (10, 64)] and dw.output_shape() == (4, 32, 64)
    assert dx.flops() == dw.flops() == 40960
    assert min_bytes(dx, "bf16") == 2 * (10 * 64 + 4 * 64 * 32) + 2 * 10 * 32 == 18304
    assert min_bytes(dw, "bf16") == 2 * 10 * (32 + 64) + 2 * 4 * 32 * 64 == 18304
    idle = GG(rows=6, n=64, k=32, experts=16)
    (_, dx6), (_, dw6) = L.REGISTRY["GroupedGemm"].backward(idle)
    assert dw6.active == 6 and dw6.output_shape() == (16, 32, 64)
    assert min_bytes(dw6, "bf16") == 2 * 6 * 96 + 2 * 16 * 32 * 64
    assert min_bytes(dx6, "bf16") == 2 * (6 * 64 + 6 * 64 * 32) + 2 * 6 * 32
    # an nn.Linear-style expert (W [E, N, K]): dX reads W as stored, dW is [E, N, K] = dY^T X
    t = GG(rows=10, n=64, k=32, experts=4, trans_b=True)
    (_, dxt), (_, dwt) = L.REGISTRY["GroupedGemm"].backward(t)
    assert dxt == GG(rows=10, n=32, k=64, experts=4) and dwt.output_shape() == (4, 64, 32)
    assert "weight gradient" in dwt.describe() and L.REGISTRY["GroupedGemm"].backward(dwt) is None
    with pytest.raises(ValueError, match="trans_b"):
        GG(rows=4, n=4, k=4, experts=2, trans_b=True, weight_grad=True)
    assert "weight_grad" not in L.REGISTRY["GroupedGemm"].example.params()  # keys of the forward configs kept


def _grouped(cfg: L.GroupedGemmConfig, a, b):
    """The config's product on numpy arrays: the forward (a = X, b = W as stored) or a weight gradient
    (out[e] = a[r_e]^T b[r_e])."""
    ends = np.cumsum(cfg.counts())
    starts = ends - np.array(cfg.counts())
    if cfg.weight_grad:
        return np.stack([a[s:e].T @ b[s:e] for s, e in zip(starts, ends)])
    ws = [b[i].T if cfg.trans_b else b[i] for i in range(cfg.experts)]
    return np.concatenate([a[s:e] @ ws[i] for i, (s, e) in enumerate(zip(starts, ends))])


@pytest.mark.parametrize("trans_b", [False, True])
def test_the_gradients_are_the_forwards_adjoint(trans_b):
    """The forward is linear in X and in W, so <dY, f(X, W)> = <dX, X> = <dW, W> for the gradients the
    backward configs compute (dX = grouped(dY, W) with its swapped sizes, dW = weight_grad(X, dY) or, for
    W stored [E, N, K], weight_grad(dY, X)): checks each call's orientation, not only its shapes."""
    rng = np.random.default_rng(0)
    f = GG(rows=10, n=6, k=5, experts=4, trans_b=trans_b)
    x = rng.standard_normal((f.rows, f.k))
    w = rng.standard_normal(f.input_shapes()[1])
    dy = rng.standard_normal((f.rows, f.n))
    (_, dxc), (_, dwc) = L.REGISTRY["GroupedGemm"].backward(f)
    dx = _grouped(dxc, dy, w)
    dw = _grouped(dwc, dy, x) if trans_b else _grouped(dwc, x, dy)
    y = _grouped(f, x, w)
    assert dx.shape == x.shape and dw.shape == w.shape
    assert np.isclose((dy * y).sum(), (dx * x).sum()) and np.isclose((dy * y).sum(), (dw * w).sum())
    idle = GG(rows=3, n=6, k=5, experts=4)  # the fourth expert has no rows: its gradient is zeros
    dwi = _grouped(dataclasses.replace(idle, weight_grad=True), x[:3], dy[:3])
    assert dwi.shape == (4, 5, 6) and not dwi[3].any()


def test_index_gradients_by_hand():
    """The router's top-2 of 16 x 8 scores: zeros of 16 x 8 with the 16 x 2 values' gradient scattered
    (bf16: 8-byte indices and 2-byte updates read, 32 places written); a ScatterElements none of 16 x 2
    into 16 x 2 (DeepSeek's group mask): a masked copy and a GatherElements; an add (a histogram) only
    the GatherElements; ScatterND (a KV window, 24 x 4 x 16 x 1 by 16 tuples): a masked copy and a Gather
    of 16 slices of 64; GatherElements (the routing weights, 16 x 8 by 16 x 2): a ScatterElements add
    into zeros; integer data: no call; reductions mul, max, min: not built."""
    topk = L.TopKConfig(x=(16, 8), axis=1, k=2)
    ((p, s),) = L.REGISTRY["TopK"].backward(topk)
    assert p == "backward_data" and s == L.ScatterConfig(op="ScatterElements", data=(16, 8), indices=(16, 2),
                                                         updates=(16, 2), axis=1)
    assert s.flops() == 0 and min_bytes(s, "bf16") == 8 * 32 + 2 * 32 + 2 * 32
    mask = L.ScatterConfig(op="ScatterElements", data=(16, 2), indices=(16, 1), updates=(16, 1), axis=1)
    assert [c for _, c in L.REGISTRY["Scatter"].backward(mask)] == [
        mask, L.GatherElementsConfig(data=(16, 2), indices=(16, 1), axis=1)]
    hist = L.ScatterConfig(op="ScatterElements", data=(8,), indices=(32,), updates=(32,), axis=0, reduction="add")
    assert [c for _, c in L.REGISTRY["Scatter"].backward(hist)] == [L.GatherElementsConfig(data=(8,), indices=(32,),
                                                                                            axis=0)]
    nd = L.ScatterConfig(op="ScatterND", data=(24, 4, 16, 1), indices=(16, 1), updates=(16, 4, 16, 1))
    (_, m), (_, g) = L.REGISTRY["Scatter"].backward(nd)
    assert m == nd and g == L.GatherConfig(data=(24, 4, 16, 1), indices=(16,), axis=0)
    nd2 = L.ScatterConfig(op="ScatterND", data=(4, 6, 8), indices=(5, 2), updates=(5, 8), reduction="add")
    ((_, g2),) = L.REGISTRY["Scatter"].backward(nd2)
    assert g2 == L.GatherConfig(data=(24, 8), indices=(5,), axis=0) and numel_out(g2) == 5 * 8
    ge = L.GatherElementsConfig(data=(16, 8), indices=(16, 2), axis=1)
    ((_, sa),) = L.REGISTRY["GatherElements"].backward(ge)
    assert sa == L.ScatterConfig(op="ScatterElements", data=(16, 8), indices=(16, 2), updates=(16, 2), axis=1,
                                 reduction="add")
    assert sa.flops() == 32 and min_bytes(sa, "bf16") == 8 * 32 + 2 * 32 + 2 * 32 + 2 * 32
    assert L.REGISTRY["Scatter"].backward(L.ScatterConfig(op="ScatterND", data=(32,), indices=(32, 1), updates=(32,),
                                                          dtype="int64")) == ()
    assert L.REGISTRY["TopK"].backward(L.TopKConfig(x=(32,), axis=0, k=32, largest=False, dtype="int64")) == ()
    for red in ("mul", "max", "min"):
        assert L.REGISTRY["Scatter"].backward(L.ScatterConfig(op="ScatterElements", data=(8,), indices=(4,),
                                                              updates=(4,), axis=0, reduction=red)) is None


def numel_out(cfg) -> int:
    return int(np.prod(cfg.output_shape()))


def _backward_configs():
    f = GG(rows=10, n=64, k=32, experts=4)
    idle = GG(rows=6, n=64, k=32, experts=16, trans_b=True)
    routed = GG(rows=10, n=64, k=32, experts=4, routing="measured", rows_per_expert=(7, 0, 1, 2))
    out = [f, *[c for _, c in L.REGISTRY["GroupedGemm"].backward(f)],
           *[c for _, c in L.REGISTRY["GroupedGemm"].backward(idle)],
           *[c for _, c in L.REGISTRY["GroupedGemm"].backward(routed)]]
    out += [c for _, c in L.REGISTRY["TopK"].backward(L.TopKConfig(x=(16, 8), axis=1, k=2))]
    out += [c for _, c in L.REGISTRY["GatherElements"].backward(L.GatherElementsConfig(data=(16, 8), indices=(16, 2),
                                                                                       axis=1))]
    out += [c for _, c in L.REGISTRY["Scatter"].backward(L.ScatterConfig(
        op="ScatterND", data=(24, 4, 16, 1), indices=(16, 1), updates=(16, 4, 16, 1)))]
    out += [c for _, c in L.REGISTRY["Scatter"].backward(L.ScatterConfig(
        op="ScatterElements", data=(16, 2), indices=(16, 1), updates=(16, 1), axis=1))]
    return out


def test_the_backward_suite_renders_and_its_sources_compile(tmp_path):
    """The gradient configs' suite: the weight-gradient cases of the grouped GEMM (the per-expert loop, the
    grouped call with the rows as k, the idle experts zeroed), the scatters and gathers; each source passes
    the compiler's syntax check against the harness and the CUDA wheels' headers."""
    generate([_suite_model(_backward_configs())], ["bf16", "fp32", "fp8"], tmp_path / "s")
    src = tmp_path / "s" / "src"
    gg = (src / "groupedgemm.cpp").read_text()
    assert gg.count('10, 64, 32, 4, false, true, "balanced, weight gradient", {}}') == 3
    assert gg.count('6, 32, 64, 16, false, true, "balanced, weight gradient", {}}') == 3
    assert gg.count('10, 32, 64, 4, true, false, "balanced", {}}') == 3
    # a measured routing's gradients keep its counts: the idle expert 1 is zeroed between active ones
    assert gg.count('10, 32, 64, 4, true, false, "measured", {7, 0, 1, 2}}') == 3
    assert gg.count('10, 64, 32, 4, false, true, "measured, weight gradient", {7, 0, 1, 2}}') == 3
    assert "run_weight_grad(b, c);" in gg and "cudaMemsetAsync(out + off, 0, bytes, s)" in gg
    for name in ("groupedgemm.cpp", "scatter.cpp", "gatherelements.cpp", "gather.cpp"):
        syntax_check(tmp_path / "s", name)


def test_generate_train_writes_the_moe_steps_jobs(tmp_path, capsys):
    """`benanza generate MODEL --train` on an MoE prefill (no GPU): the suite has the experts' gradient
    GEMMs, the router's scatter and the optimizer's step over the experts' weights."""
    from benanza.cli import main

    try:
        main(["generate", str(DEC / "qwen3_moe_prefill.onnx"), "-b", "32", "-t", "bf16", "--train",
              "-o", str(tmp_path / "g")])
    except SystemExit as e:
        assert not e.code, capsys.readouterr()
    out = capsys.readouterr().out
    assert "GroupedGemm 6" in out and "Scatter" in out and "Optimizer 1" in out
    gg = (tmp_path / "g" / "src" / "groupedgemm.cpp").read_text()
    assert gg.count('true, "balanced, weight gradient", {}}') == 2  # the gate/up and the down products' dW


@pytest.mark.slow
def test_the_backward_suite_builds(tmp_path, monkeypatch, harness):
    """One full build of the gradient configs' suite: compiles and links, and the executable lists every job."""
    import json
    import subprocess

    from benanza.build.builder import build

    harness.use(monkeypatch)
    suite = generate([_suite_model(_backward_configs())], ["bf16", "fp32"], tmp_path / "s")
    r = build(tmp_path / "s")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
