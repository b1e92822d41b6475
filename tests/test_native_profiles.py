"""Native PyTorch profiles recorded on an H200 by `benanza torch` (benchmarks/gpu_torch.sh;
benchmarks/results/2026-11-23/torch-check-h200.txt), joined here without a GPU: resnet50, ViT-B/16
(torchvision) and BERT-base (transformers) at batch 32 in fp16, each with its ONNX export (torch.export,
module names kept)."""
import json

import pytest

from benanza.profiles import load_profile
from benanza.profiles.trace import read_trace
from conftest import REPO

DATA = REPO / "tests" / "data" / "h200_native"
CHECK = json.loads((REPO / "benchmarks" / "results" / "2026-11-23" / "torch-check-h200.json").read_text())


@pytest.fixture(scope="module", params=["resnet50", "vit_b_16", "bert"])
def native(request):
    return request.param, load_profile(DATA / f"{request.param}-b32-fp16")


def test_a_native_profile_says_so(native):
    _, p = native
    assert p.settings.run_kind == "native" and p.settings.converter is None
    assert p.settings.run_label.startswith("pytorch 2.11.0+cu130, eager, native module")


def test_the_framework_kernel_time_is_a_plain_profiles(native):
    """The issue's 3 % goal, on the recorded data: the kernel time of the profile benanza recorded
    (module scopes, shapes) against a plain torch.profiler run of the same module."""
    name, p = native
    spec = {"bert": "transformers:bert"}.get(name, name)
    row = next(r for r in CHECK["rows"] if r["model"] == spec)
    tr = read_trace(DATA / f"{name}-b32-fp16" / "trace.json.gz")
    sums = sorted(sum(tr.kernels[i].dur_ms for i in it.kernels if tr.kernels[i].kind == "kernel")
                  for it in tr.iterations)
    assert sums[len(sums) // 2] == pytest.approx(row["report_kernel_sum"]["median"], rel=1e-6)
    assert abs(row["diff"]) <= 0.03
    assert p.gpu_kernel_ms == pytest.approx(row["report_gpu_kernel_ms"], rel=1e-6)


def test_every_computing_layer_gets_framework_time_or_a_group(native):
    _, p = native
    missing = [lp for lp in p.layers if lp.op is None and lp.covered_by is None
               and lp.op_type not in ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")]
    assert not missing, [(lp.name, lp.op_type) for lp in missing[:5]]
    cat = p.category_ms()
    assert cat["layer"] + cat["unfused_batch_norm"] + cat["layout"] >= 0.97 * sum(cat.values())


def test_vit_attention_is_one_framework_op_for_the_whole_module():
    p = load_profile(DATA / "vit_b_16-b32-fp16")
    groups = [lp for lp in p.layers if lp.op == "aten::_native_multi_head_attention" and lp.covers]
    assert len(groups) == 12  # one nn.MultiheadAttention fast path per encoder layer
    by = {lp.layer: lp for lp in p.layers}
    for g in groups:
        kinds = {by[i].op_type for i in g.covers}
        assert {"MatMul", "Softmax", "Gemm"} <= kinds  # projections, attention and output projection
        assert g.kernel_ms > 0 and all(by[i].kernel_ms == 0 and by[i].covered_by == g.layer
                                       for i in g.covers if i != g.layer)
    # the MLP's Linear on 3-D inputs: MatMul + Add in the export, one GEMM with a bias epilogue in PyTorch
    linears = [lp for lp in p.layers if lp.op == "aten::linear" and lp.covers]
    assert len(linears) == 24 and all(by[lp.covers[1]].op_type == "Add" for lp in linears)


def test_bert_sdpa_groups_the_exported_attention():
    p = load_profile(DATA / "bert-b32-fp16")
    groups = [lp for lp in p.layers if lp.op == "aten::scaled_dot_product_attention" and lp.covers]
    assert len(groups) == 12
    by = {lp.layer: lp for lp in p.layers}
    for g in groups:
        assert {"MatMul", "Softmax"} <= {by[i].op_type for i in g.covers}
        assert any("fmha" in k or "attention" in k.lower() or "flash" in k.lower() for k in g.kernels), g.kernels


def test_resnet50_batch_norms_the_export_folded_are_framework_work():
    p = load_profile(DATA / "resnet50-b32-fp16")
    convs = [lp for lp in p.layers if lp.op_type == "Conv"]
    assert len(convs) == 53 and all(lp.op == "aten::conv2d" and lp.kernel_ms > 0 for lp in convs)
    cat = p.category_ms()
    assert cat["unfused_batch_norm"] > 1.0 and p.unmatched_ops == {"aten::batch_norm": 53.0}


def test_iterations_of_one_signature_are_matched_once_and_alike(native, monkeypatch):
    """The join matches the first of the profiled iterations that run the same ops (name, shapes,
    module scope, kernels or none) and replays it for the others: the result equals matching every
    iteration on its own (llama-1.1b's decode reports, 2026-11-27f: 13.4 -> 5.7 s of join for three
    batches here)."""
    import importlib
    import itertools

    J = importlib.import_module("benanza.profiles.join")  # the package's `join` is the function
    name, _ = native
    calls = []
    real = J._match_iteration
    monkeypatch.setattr(J, "_match_iteration", lambda *a, **k: calls.append(1) or real(*a, **k))
    replayed = load_profile(DATA / f"{name}-b32-fp16")
    assert len(calls) == 1 and replayed.iterations > 1  # one matching for all profiled iterations
    counter = itertools.count()
    monkeypatch.setattr(J, "_signature", lambda *a, **k: next(counter))  # every iteration its own
    alone = load_profile(DATA / f"{name}-b32-fp16")
    assert len(calls) == 1 + alone.iterations
    assert [(lp.layer, lp.op, lp.kernel_ms, lp.covered_by, lp.covers) for lp in replayed.layers] == \
           [(lp.layer, lp.op, lp.kernel_ms, lp.covered_by, lp.covers) for lp in alone.layers]
    assert replayed.category_ms() == alone.category_ms() and replayed.gpu_kernel_ms == alone.gpu_kernel_ms
