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
