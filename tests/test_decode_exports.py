"""A decode step exported by torch.export (issue 27): the exports of tests/data/decoders/*_decode_dynamo*
(benchmarks/decoder_exports.py, PyTorch 2.14.1 on the CPU, 2026-11-27f). Before, every decode export fell back
to the TorchScript exporter: torch.export refused the flat ``dynamic_shapes`` of ``forward(input_ids,
attention_mask, *past)`` ("inputs has 3 elements, but dynamic_shapes has 6"). Checked here: the attention,
RMSNorm and rotary groups are found, nothing is unsupported (the mask's GatherND included), the mask length
``past + 1`` torch.export writes is bound from ``past``, and the suite generates and compiles. No GPU."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.processing.model import dim_expression, process
from benanza.processing.modules import dynamic_shapes
from conftest import REPO
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"


@pytest.mark.parametrize("name, gqa, groups", [
    # (and each residual Add with the norm after it: 4 of the 5 norms of 2 blocks, not the first)
    ("gpt2_decode_dynamo20", 0, {"SDPA": 2, "Unary": 2, "LayerNorm": 4}),
    ("llama_decode_dynamo20", 2, {"SDPA": 2, "RMSNorm": 5, "RotaryEmbedding": 4, "Elementwise": 2, "Gemm": 2}),
    ("llama_decode_dynamo23", 2, {"SDPA": 2, "Elementwise": 2, "Gemm": 2, "RMSNorm": 4}),
])
def test_a_torch_export_decode_step_is_whole(name, gqa, groups):
    ml = process(DEC / f"{name}.onnx", 8, {"past": 128})  # the mask's "past + 1" follows
    assert ml.unsupported() == {}
    found: dict = {}
    for f in ml.fusions:
        found[f.config.kind] = found.get(f.config.kind, 0) + 1
    assert found == groups
    for f in ml.fusions:
        if f.config.kind == "SDPA":
            c = f.config
            assert (c.b, c.h, c.h_kv, c.s_q, c.s_kv, c.d) == (8, 4, gqa, 1, 129, 32)
    if name.endswith("23"):  # opset 23 writes RMSNormalization and RotaryEmbedding nodes: one layer each
        kinds = [ly.config.kind for ly in ml.layers if ly.op_type in ("RMSNormalization", "RotaryEmbedding")]
        assert kinds.count("RMSNorm") == 5 and kinds.count("RotaryEmbedding") == 4
    (g,) = [ly for ly in ml.layers if ly.op_type == "GatherND"]  # the mask's aten.index
    assert g.status == "benchmark" and g.config.kind == "Gather"


def test_the_decode_suite_generates_and_compiles(tmp_path):
    ml = process(DEC / "llama_decode_dynamo20.onnx", 2, {"past": 64})
    suite = generate([ml], ["fp16"], tmp_path / "s")
    kinds = {j.kind for j in suite.jobs}
    assert {"SDPA", "RMSNorm", "RotaryEmbedding", "Gather", "Gemm"} <= kinds
    for src in ("sdpa.cpp", "gather.cpp"):
        syntax_check(tmp_path / "s", src)


def test_a_dimension_named_by_arithmetic_of_bound_ones_gets_its_value():
    assert dim_expression("past + 1", {"past": 64}) == 65
    assert dim_expression("2*s0 - (s1 // 2)", {"s0": 8, "s1": 6}) == 13
    assert dim_expression("past + 1", {}) is None  # past unbound: the user is asked for it
    assert dim_expression("batch", {"batch": 4}) is None  # a plain name is no expression
    assert dim_expression("__import__('os').getpid() + 1", {}) is None
    assert dim_expression("past - 70", {"past": 64}) is None  # below 1
    assert dim_expression("past // 0", {"past": 64}) is None
    assert dim_expression("seq-len", {"seq": 10, "len": 3}) is None  # a name with a hyphen, not a difference
    assert dim_expression("past+1", {"past": 64}) == 65


def test_the_error_for_an_unbound_expression_names_what_to_bind():
    from benanza.errors import ModelError

    with pytest.raises(ModelError, match="bind it with --dim"):
        process(DEC / "llama_decode_dynamo20.onnx", 2)


def test_dynamic_shapes_follow_the_forward_signature():
    class Decode:
        def forward(self, input_ids, attention_mask, *past):
            pass

    class Plain:
        def forward(self, x, y=None):
            pass

    per = [{0: "b"}] * 5
    assert dynamic_shapes(Decode(), per) == ({0: "b"}, {0: "b"}, ({0: "b"},) * 3)
    assert dynamic_shapes(Plain(), per[:2]) == ({0: "b"}, {0: "b"})


def test_gathernd_with_computed_indices_is_timed_as_a_gather_at_random_positions(tmp_path):
    """GatherND whose indices the graph computes (torch.export's aten.index.Tensor where they do not
    fold): the data's first k dims flattened, n = the index tuples, timed as an embedding lookup is."""
    data = helper.make_tensor_value_info("mask", TensorProto.FLOAT, [4, 65])
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [4, 1, 1, 65, 2])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 1, 1, 65])
    g = helper.make_graph([helper.make_node("GatherND", ["mask", "idx"], ["y"], name="g")], "g", [data, idx], [out])
    p = tmp_path / "g.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    (ly,) = process(p, 4, batch_dim=0).layers
    assert ly.status == "benchmark"
    assert ly.config == L.GatherConfig(data=(260,), indices=(4, 1, 1, 65), axis=0)
    # constant indices keep their positions
    init = numpy_helper.from_array(np.array([[0, 1], [3, 64]], dtype=np.int64), "idx")
    g2 = helper.make_graph([helper.make_node("GatherND", ["mask", "idx"], ["y"])], "g", [data],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [init])
    onnx.save(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 17)]), p)
    (ly,) = process(p, 4, batch_dim=0).layers
    assert ly.config.values == (1, 259)
