"""Mixture of experts: the experts' grouped GEMM (``GroupedGemm``, benanza's ``GroupedMatMul`` export of
``torch.nn.functional.grouped_mm``), its routing and its suite."""
from __future__ import annotations

import pytest

from benanza import kinds as L
from benanza.generation.generator import generate
from test_copy_backward import _suite_model
from test_unary_backward import syntax_check


@pytest.mark.parametrize("rows,experts,want", [
    (8, 128, (1,) * 8 + (0,) * 120),          # decode, batch 1, top-8: one row on each of 8 experts
    (4096, 8, (512,) * 8),                    # Mixtral prefill 2,048 tokens, top-2
    (10, 4, (3, 3, 2, 2)),                    # the first S % E experts get one more
])
def test_balanced_routing_spreads_rows_evenly(rows, experts, want):
    cfg = L.GroupedGemmConfig(rows=rows, n=64, k=32, experts=experts)
    assert cfg.counts() == want and sum(cfg.counts()) == rows
    assert cfg.active == sum(1 for c in want if c)
    assert cfg.flops() == 2 * rows * 64 * 32


def test_min_bytes_read_only_the_active_experts_weights():
    decode = L.GroupedGemmConfig(rows=8, n=768, k=2048, experts=128)
    # 8 of 128 experts' weights, the 8 rows in and out, 2-byte data
    assert L.REGISTRY["GroupedGemm"].min_bytes(decode, 2, 2) == 2 * (8 * 2048 + 8 * 2048 * 768) + 2 * 8 * 768


def test_a_config_refuses_a_routing_it_cannot_time():
    with pytest.raises(ValueError, match="routing"):
        L.GroupedGemmConfig(rows=8, n=8, k=8, experts=4, routing="skewed")


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    cfgs = [L.GroupedGemmConfig(rows=8, n=768, k=2048, experts=128),
            L.GroupedGemmConfig(rows=10, n=64, k=32, experts=4, trans_b=True)]
    generate([_suite_model(cfgs)], ["fp32", "bf16", "fp8"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "groupedgemm.cpp").read_text()
    assert src.count('8, 768, 2048, 128, false, "balanced"}') == 3
    assert src.count('10, 64, 32, 4, true, "balanced"}') == 3
    assert "cublasGemmGroupedBatchedEx(" in src
    syntax_check(tmp_path / "s", "groupedgemm.cpp")


# ---------------------------------------------------------------- exports as `benanza torch` writes them
#
# tests/data/decoders/<model>_{prefill,decode}.onnx: benanza's own export path (benchmarks/lm_step_exports.py,
# MOE_SPECS: PyTorch 2.13 CPU, transformers 5.25, torch.export opset 20 with benanza.processing.translations,
# weights stripped), transformers' default experts (grouped_mm), 8 experts, top-2, prefill of 16 tokens and
# decode against a cache of 32. Before the translations every one of them failed to export.

from benanza.analysis.llm import weight_bytes  # noqa: E402
from benanza.processing.model import process  # noqa: E402
from conftest import REPO  # noqa: E402

DEC = REPO / "tests" / "data" / "decoders"
#: model -> (MoE layers, hidden, expert intermediate, gate and up fused in one grouped GEMM)
MOE = {"qwen3_moe": (2, 64, 32, True), "qwen2_moe": (2, 64, 32, True), "mixtral": (2, 64, 64, True),
       "deepseek_v3_moe": (1, 64, 32, True), "gpt_oss": (2, 64, 32, True)}
CASES = [(m, p) for m in MOE for p in ("prefill", "decode")]


def _grouped(ml):
    return [ly.config for ly in ml.layers if isinstance(ly.config, L.GroupedGemmConfig)]


@pytest.mark.parametrize("model,phase", CASES)
@pytest.mark.parametrize("batch", [1, 32])
def test_a_mixture_of_experts_exports_and_its_experts_are_grouped_gemms(model, phase, batch):
    """Every model's experts are the GroupedGemm kind: per MoE layer the gate/up product (n = 2 x the
    expert's intermediate) and the down product, over tokens x top-2 rows and the 8 experts."""
    ml = process(DEC / f"{model}_{phase}.onnx", batch)
    layers, hidden, inter, _ = MOE[model]
    tokens = batch * (16 if phase == "prefill" else 1)
    got = sorted((c.rows, c.n, c.k, c.experts) for c in _grouped(ml))
    want = sorted([(2 * tokens, 2 * inter, hidden, 8), (2 * tokens, hidden, inter, 8)] * layers)
    assert got == want
    assert {ly.op_type for ly in ml.layers if isinstance(ly.config, L.GroupedGemmConfig)} == {"GroupedMatMul"}


@pytest.mark.parametrize("model", list(MOE))
def test_a_decode_token_reads_its_top_k_experts_weights_only(model):
    """The physical bound's weight bytes count the experts the routing gives rows to: one token reads
    2 of 8 experts; 32 tokens x top-2 = 64 rows spread over all 8 (balanced) read all 8."""
    import onnx

    path = DEC / f"{model}_decode.onnx"
    m = onnx.load(path, load_external_data=False)
    one, many = (weight_bytes(m, process(path, b), "bf16") for b in (1, 32))
    layers, hidden, inter, _ = MOE[model]
    experts = layers * 8 * (hidden * 2 * inter + inter * hidden)  # elements of every expert's weights
    assert one.parameters == many.parameters
    # the 6 experts idle at batch 1, in bf16, and the 31 more embedding rows gathered at batch 32
    assert many.bytes - one.bytes == 2 * experts * 6 // 8 + 2 * 31 * hidden
