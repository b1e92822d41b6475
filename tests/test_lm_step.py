"""The token as users time it (issue 54, item 4) and the exporter's reason (issue 54, "What was found").

The exports of tests/data/decoders/{qwen3_lm_prefill,qwen3_lm_decode,mistral_window_decode,deepseek_mla_decode}.onnx were
written by benanza's own export path (benchmarks/lm_step_exports.py: PyTorch 2.13 CPU, transformers 5.25,
torch.export at opset 20, weights stripped). Before, `benanza torch transformers:...` exported the base
model (``AutoModel``, ``last_hidden_state``): a decode step without the LM head, whose vocabulary
projection is about a quarter of the weight bytes of a small decoder's token; and the decode step's
``DynamicCache()`` ignored the configuration, so a sliding-window layer attended over the whole cache.
No GPU, no torch: the graphs are read as a user's run benches them."""
from __future__ import annotations

import pytest

from benanza.processing.model import process
from benanza.processing.modules import export_failure
from conftest import REPO

DEC = REPO / "tests" / "data" / "decoders"


def _sdpa(ml):
    return [(c.b, c.h, c.h_kv, c.s_q, c.s_kv, c.d) for c in (f.config for f in ml.fusions) if c.kind == "SDPA"]


@pytest.mark.parametrize("name, s_q, s_kv", [("qwen3_lm_prefill", 16, 16), ("qwen3_lm_decode", 1, 65)])
@pytest.mark.parametrize("batch", [1, 32])
def test_the_step_ends_with_the_lm_head_of_the_new_token(name, s_q, s_kv, batch):
    ml = process(DEC / f"{name}.onnx", batch)
    assert ml.unsupported() == {} and ml.summary()["coverage"]["percent"] == 100.0
    head = [ly for ly in ml.layers if ly.config is not None][-1]
    # the vocabulary projection of one position per sequence (the last prompt token's, or the new one's)
    assert head.op_type == "MatMul" and head.output_shapes == ((batch, 1, 1000),)
    assert head.config.describe() == f"Gemm(m{batch} n1000 k128 NN)"
    assert _sdpa(ml) == [(batch, 4, 2, s_q, s_kv, 32)] * 2


def test_a_sliding_window_layer_attends_over_its_window_in_decode():
    """Mistral with sliding_window=8 over a 32-token cache: the model's own cache keeps the window."""
    ml = process(DEC / "mistral_window_decode.onnx", 8)
    assert ml.unsupported() == {}
    assert _sdpa(ml) == [(8, 4, 2, 1, 8, 32)] * 2  # was 33 keys: the whole cache and the new token


def test_an_mla_decode_step_reads_the_latent_cache_the_model_keeps():
    """DeepSeek-V3's attention caches its compressed latent (kv_lora_rank 32) and rotary key (16) per token,
    not per-head keys and values: `--phase decode` failed to export (it fed per-head K/V). Each layer's
    past is what the model's cache holds, and the step re-expands it, as transformers runs it."""
    import onnx

    m = onnx.load(DEC / "deepseek_mla_decode.onnx", load_external_data=False)
    dims = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
    assert dims["past_key_0"] == ["batch", 1, 64, 32] and dims["past_value_0"] == ["batch", 1, 64, 16]
    ml = process(DEC / "deepseek_mla_decode.onnx", 8)
    assert _sdpa(ml) == [(8, 4, 0, 1, 65, 48)] * 2  # d_qk = 32 + 16 (nope + rope); d_v 32
    # the ScatterND writing the new token's expanded keys and values into the step's window, a Scatter layer
    # (it was the one op without a benchmark): the step is whole
    assert ml.unsupported() == {} and ml.summary()["coverage"]["percent"] == 100.0
    scat = [ly.config for ly in ml.layers if ly.op_type == "ScatterND"]
    assert sorted(c.describe() for c in scat) == ["ScatterND(48x4x65x8 16x1 16x4x65x8)"] * 2 + [
        "ScatterND(48x4x65x8 32x1 32x4x65x8)"] * 2


class _DispatchError(Exception):
    pass


class _ConversionError(Exception):
    pass


def test_an_export_failure_names_its_cause_without_colour_codes():
    """torch.onnx 2.13 on Qwen3-MoE (transformers 5.25): the op it cannot translate sits two causes down,
    under a generic message with terminal colour codes; the TorchScript exporter names aten::histc."""
    root = _DispatchError("No ONNX function found for <OpOverload(op='transformers.grouped_mm_fallback', "
                          "overload='default')>. Failure message: No decompositions registered for the real-valued "
                          "input")
    mid = _ConversionError("Error when translating node %grouped_mm_fallback : [num_users=1] = call_function[...]")
    top = _ConversionError("Failed to convert the exported program to an ONNX model. \x1b[96mThis is step 3/3\x1b[0m "
                           "of exporting the model to ONNX. Next steps:\n- If there is a missing ONNX function, ...")
    mid.__cause__ = root
    top.__cause__ = mid
    why = export_failure(top)
    assert why == ("no ONNX function for transformers.grouped_mm_fallback (the experts' grouped matmul, "
                   "transformers' default form of a mixture-of-experts layer)")
    ts = RuntimeError("Exporting the operator 'aten::histc' to ONNX opset version 17 is not supported")
    assert export_failure(ts).endswith("is not supported (the router's tokens-per-expert histogram of a "
                                       "mixture-of-experts model)")
    plain = ValueError("\x1b[31mred\x1b[0m words\nsecond line")
    assert export_failure(plain) == "red words"
