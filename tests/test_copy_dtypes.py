"""Copy layers of bool and integer data (issue 27, item 3): a CopyConfig's ``dtype`` (a key of
benanza.kinds.STORED_TYPES) where the data is not the run's float type, e.g. the attention mask's
bool Expand of BERT and the TorchScript decoder exports. Its bytes are the stored type's, whatever
the precision; it has no gradient (an empty tuple of calls); float configs keep their keys (the
field is left out of the canonical parameters while it is ""); the generated case allocates and
copies elements of the stored type and passes the compiler's syntax check."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from test_copy_backward import _candidate, _suite_model, run_copy
from test_unary_backward import syntax_check

DECODERS = REPO / "tests" / "data" / "decoders"

#: BERT's attention mask broadcast over the query positions (bool, batch 32, sequence 128)
MASK = L.CopyConfig(op="Expand", inputs=((32, 1, 1, 128),), y=(32, 1, 128, 128), attrs=(), dtype="bool")


def _model(path, node, x, y, elem, inits=()):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, x)],
                          [helper.make_tensor_value_info("y", elem, y)], initializer=list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_float_configs_keep_their_keys():
    """The keys of float Copy configs as main computed them before the field existed (a changed key
    orphans every stored measurement); a stored type changes the key and is in the parameters."""
    f = L.CopyConfig(op="Expand", inputs=((2, 2, 1, 128, 32),), y=(2, 2, 2, 128, 32), attrs=())
    assert f.key == "copy-7c3686f051d93eb8" and "dtype" not in f.params()
    cat = L.CopyConfig(op="Concat", inputs=((2, 3), (2, 5)), y=(2, 8), attrs=(("axis", (1,)),))
    assert cat.key == "copy-e41189c2e1eace9a"
    b = L.CopyConfig(op="Expand", inputs=((2, 2, 1, 128, 32),), y=(2, 2, 2, 128, 32), attrs=(), dtype="bool")
    assert b.key != f.key and b.params()["dtype"] == "bool"
    assert L.config_from_params("Copy", b.params()) == b and L.config_from_params("Copy", f.params()) == f
    with pytest.raises(ValueError, match="element type 'string'"):
        L.CopyConfig(op="Expand", inputs=((2,),), y=(2, 2), attrs=(), dtype="string")


@pytest.mark.parametrize("dtype,size", [("bool", 1), ("int8", 1), ("uint8", 1), ("int32", 4), ("int64", 8)])
def test_bytes_are_the_stored_types(dtype, size):
    """min_bytes: x read once and y written once in the stored type's bytes, in any precision."""
    cfg = L.CopyConfig(op="Expand", inputs=((32, 1, 1, 128),), y=(32, 1, 128, 128), attrs=(), dtype=dtype)
    want = size * (32 * 128 + 32 * 128 * 128)
    for ib, ob in ((4, 4), (2, 2)):
        assert L.REGISTRY["Copy"].min_bytes(cfg, ib, ob) == want
    assert L.REGISTRY["Copy"].min_bytes(L.CopyConfig(op="Expand", inputs=cfg.inputs, y=cfg.y, attrs=()), 2, 2) \
        == 2 * (32 * 128 + 32 * 128 * 128)
    case = L.REGISTRY["Copy"].case(cfg, L.Job("j", cfg, "fp16", "n"))
    assert case.stored == "true" and case.et == L.cpp.ELEM_ENUM[dtype] and dtype in case.label
    assert cfg.flops() == 0 and dtype in cfg.describe()


def test_no_gradient_and_the_candidate_dtype():
    """A copy of bool data: no backward call (``()``, not None: the training step stays complete);
    PyTorch's candidate runs on a bool tensor (expand + clone, the same transfer numpy's broadcast
    gives)."""
    assert L.REGISTRY["Copy"].backward(MASK) == ()
    for op_cfg in (L.CopyConfig(op="Concat", inputs=((2, 3), (2, 5)), y=(2, 8), attrs=(("axis", (1,)),), dtype="int64"),
                   L.CopyConfig(op="Transpose", inputs=((2, 3),), y=(3, 2), attrs=(("perm", (1, 0)),), dtype="int32")):
        assert L.REGISTRY["Copy"].backward(op_cfg) == ()
    c = _candidate(MASK)
    assert c.call == "torch:aten::expand+clone" and c.out_numel == L.numel(MASK.y)
    x = np.random.default_rng(0).integers(0, 2, (32, 1, 1, 128)).astype(bool)
    np.testing.assert_array_equal(run_copy(MASK, [x]).astype(bool), np.broadcast_to(x, MASK.y))


@pytest.mark.parametrize("elem,name", [(TensorProto.BOOL, "bool"), (TensorProto.INT32, "int32"),
                                       (TensorProto.UINT8, "uint8")])
def test_mapping_gives_the_stored_type(tmp_path, elem, name):
    """An Expand, a Tile and a Transpose of non-float data map to Copy layers of that type; a
    training step gives them no call and leaves them out of ``no_backward``."""
    i64 = onnx.numpy_helper.from_array
    for node, x, y, inits in (
            (helper.make_node("Expand", ["x", "s"], ["y"], name="mask"), ["N", 1, 1, 8], ["N", 1, 8, 8],
             [i64(np.array([1, 1, 8, 8], np.int64), "s")]),
            (helper.make_node("Tile", ["x", "r"], ["y"], name="tile"), ["N", 3], ["N", 6],
             [i64(np.array([1, 2], np.int64), "r")]),
            (helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[1, 0]), ["N", 3], [3, "N"], [])):
        ml = process(_model(tmp_path / f"{node.op_type}.onnx", node, x, y, elem, inits), 4)
        (ly,) = ml.layers
        assert ly.status == "benchmark", ly.reason
        assert ly.config.dtype == name and ly.config.op == node.op_type
        plan = training_plan(ml)
        assert ly.index not in plan.no_backward and not [c for c in plan.calls if c.layer == ly.index]


def test_a_string_expand_is_unsupported_with_a_reason(tmp_path):
    node = helper.make_node("Expand", ["x", "s"], ["y"], name="e")
    path = _model(tmp_path / "s.onnx", node, ["N", 1], ["N", 4], TensorProto.STRING,
                  [onnx.numpy_helper.from_array(np.array([1, 4], np.int64), "s")])
    (ly,) = process(path, 2).layers
    assert ly.status == "unsupported" and "STRING" in ly.reason


@pytest.mark.parametrize("name", ["gpt2_prefill_torchscript", "llama_prefill_torchscript"])
def test_the_torchscript_decoders_mask_expand_is_no_longer_unsupported(name):
    """The TorchScript exports' (and BERT's) bool attention-mask Expand, of (batch, 1, seq, seq) to
    the same shape, was ``input element type BOOL is not float``: now a Copy of bool data that moves
    nothing (an identity, zero-cost); the model has no unsupported layer and a complete training plan."""
    ml = process(DECODERS / f"{name}.onnx", 2, dims={"seq": 128})
    assert not [(ly.op_type, ly.reason) for ly in ml.layers if ly.status == "unsupported"]
    (mask,) = [ly for ly in ml.layers if ly.op_type == "Expand" and ly.input_shapes[0] == (2, 1, 128, 128)]
    assert mask.status == "zero_cost" and "identity" in mask.reason
    plan = training_plan(ml)
    assert not [i for i in plan.no_backward if ml.layers[i].op_type == "Expand"]


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    """Bool, int64 and uint8 copies beside a float one in one suite (fp32 and fp16): each stored
    case allocates elements of its type, skips cudnnTransformTensor and passes g++ -fsyntax-only."""
    cfgs = [MASK, L.CopyConfig(op="Concat", inputs=((2, 3), (2, 5)), y=(2, 8), attrs=(("axis", (1,)),), dtype="int64"),
            L.CopyConfig(op="Transpose", inputs=((4, 6),), y=(6, 4), attrs=(("perm", (1, 0)),), dtype="uint8"),
            L.CopyConfig(op="Transpose", inputs=((4, 6),), y=(6, 4), attrs=(("perm", (1, 0)),))]
    generate([_suite_model(cfgs)], ["fp32", "fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "copy.cpp").read_text()
    assert src.count('true, ElemType::I8, "Expand bool"}') == 2 and src.count('ElemType::I64, "Concat int64"}') == 2
    assert src.count('ElemType::U8, "Transpose uint8"}') == 2 and src.count('false, ElemType::F32, "Transpose"}') == 2
    assert "elem_bytes(c.et)" in src and "fill_elements(" in src
    syntax_check(tmp_path / "s", "copy.cpp")
