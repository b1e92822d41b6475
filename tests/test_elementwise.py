"""Every elementwise operator ONNX defines is measured (issue 14, item 4), without a GPU: each maps
to a Unary or Elementwise config with its element types (bool outputs of comparisons and IsNaN,
bool and integer inputs), keeps the keys of configs stored before, has FLOPs and minimum bytes from
the ONNX formulas, generates a benchmark that times the harness's kernel (and cuDNN where it has the
op) and compiles; what stays unsupported says why. torchvision's mobilenet_v3_large exported by
torch.onnx (opset 17, dynamic batch) maps with no unsupported layer."""
import collections
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.analysis import roofline as R
from benanza.generation.generator import generate
from benanza.kinds.cpp import cpp_string
from benanza.kinds.elementwise import elementwise_input_ranges
from benanza.kinds.unary import unary_input_range
from benanza.processing.model import process
from conftest import HERE
from onnx_builders import HOSTILE, elementwise_ops_model, mobilenet_v3_large_export

MOBILENET = HERE / "data" / "mobilenet_v3_large.onnx"


def _configs(ml):
    return {ly.name: ly.config for ly in ml.layers}


def test_every_elementwise_op_maps(tmp_path):
    ml = process(elementwise_ops_model(tmp_path / "e.onnx"), 2)
    assert ml.summary()["unsupported"] == {}
    cfg = _configs(ml)
    x = (2, 4, 8)
    for op in ("Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Floor", "Round", "Sign",
               "Sin", "Sinh", "Softplus", "Softsign", "Tan"):
        assert cfg[op] == L.UnaryConfig(x, op.lower()), op
    assert cfg["HardSwish"] == L.UnaryConfig(x, "hard_swish") and cfg[HOSTILE + "Mish"] == L.UnaryConfig(x, "mish")
    assert cfg["IsNaN"] == L.UnaryConfig(x, "is_nan", dst="bool")
    assert cfg["IsInf"] == L.UnaryConfig(x, "is_inf", alpha=1.0, beta=0.0, dst="bool")  # detect_positive=0
    assert cfg["Selu"] == L.UnaryConfig(x, "selu", alpha=2.0, beta=3.0)
    assert cfg["Celu"] == L.UnaryConfig(x, "celu", alpha=0.5)
    assert cfg["ThresholdedRelu"] == L.UnaryConfig(x, "thresholded_relu", alpha=float(np.float32(0.7)))
    assert cfg["Shrink"] == L.UnaryConfig(x, "shrink", alpha=float(np.float32(0.3)), beta=float(np.float32(0.1)))
    assert cfg["Not_m"] == L.UnaryConfig(x, "not", src="bool", dst="bool")
    assert cfg["BitwiseNot_k"] == L.UnaryConfig(x, "bitwise_not", src="int64", dst="int64")
    assert cfg["Abs_k"] == L.UnaryConfig(x, "abs", src="int64", dst="int64")
    assert cfg["Sign_u"] == L.UnaryConfig(x, "sign", src="uint8", dst="uint8")
    assert cfg["Clip_x"] == L.UnaryConfig(x, "clip", alpha=-1.0, beta=1.0)
    assert cfg["Clip_col"] == L.UnaryConfig((2, 4, 1), "clip", alpha=-L.FLT_MAX, beta=1.0)  # no min
    assert cfg["CastLike_x"] == L.UnaryConfig(x, "cast", src="float32", dst="bool")
    assert cfg["Cast_bool"] == L.UnaryConfig(x, "cast", src="float32", dst="bool")
    assert cfg["Cast_int32"] == L.UnaryConfig(x, "cast", src="int64", dst="int32")
    assert cfg["Cast_fp16"] == L.UnaryConfig(x, "cast", src="uint8")
    E = L.ElementwiseConfig
    assert cfg["Pow0"] == E("pow", x, x)  # a tensor exponent: the binary op
    assert cfg["PRelu1"] == E("prelu", x, (1, 4, 1))
    assert cfg["Equal2"] == E("equal", x, (1, 4, 1)) and cfg["Equal2"].out_dtype == "bool"
    assert cfg["LessOrEqual4"] == E("less_equal", (1, 4, 1), x)
    assert cfg["GreaterOrEqual6"] == E("greater_equal", (2, 4, 1), (1, 1, 8))  # both operands broadcast
    assert [cfg[n].op for n in ("And7", "Or8", HOSTILE + "Xor9")] == ["and", "or", "xor"]
    assert {cfg[n].dtype for n in ("And7", "Or8", HOSTILE + "Xor9", "Equal23")} == {"bool"}
    assert [cfg[f"Bitwise{w}{i}"] for w, i in (("And", 10), ("Or", 11), ("Xor", 12))] == [
        E(f"bitwise_{w}", x, x, dtype="int64") for w in ("and", "or", "xor")]
    assert (cfg["Sum13"], cfg["Mean14"]) == (E("add", x, (1, 4, 1)), E("mean", x, (1, 4, 1)))
    assert (cfg["Mod17"], cfg["Mod18"]) == (E("mod", x, x, dtype="int64"), E("fmod", x, x))
    assert (cfg["BitShift19"], cfg["BitShift20"]) == (E("shift_left", x, x, dtype="uint8"),
                                                      E("shift_right", x, x, dtype="uint8"))
    assert cfg["Add21"] == E("add", x, x, dtype="int64") and cfg["Equal22"] == E("equal", x, x, dtype="int64")
    # every op of the tables is reached by this graph or the first models
    assert {c.op for c in cfg.values() if c.kind == "Unary"} >= set(L.UNARY_OPS) - {
        "gelu", "gelu_tanh", "erf", "exp", "log", "sqrt", "reciprocal", "pow", "swish"}  # swish: opset 24, below
    assert {c.op for c in cfg.values() if c.kind == "Elementwise"} >= set(L.ELEMENTWISE_OPS) - {
        "sub", "mul", "swiglu"}  # swiglu: a fusion candidate (tests/test_swiglu.py)


def _one_node(path, op, inputs, attrs=None, opset=18):
    vi = helper.make_tensor_value_info
    ins = [vi(n, t, s) for n, t, s in inputs]
    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], name="n", **(attrs or {}))
    out_type = (attrs or {}).get("to", inputs[0][1])
    g = helper.make_graph([node], "one", ins, [vi("y", out_type, ["N", 4])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if opset <= 21:
        model.ir_version = 9
    onnx.save(model, str(path))
    return process(path, 2)


def test_swish_and_cast_like_to_the_same_type(tmp_path):
    F = TensorProto.FLOAT
    (ly,) = _one_node(tmp_path / "s.onnx", "Swish", [("a", F, ["N", 4])], {"alpha": 0.5}, opset=24).layers
    assert ly.config == L.UnaryConfig((2, 4), "swish", alpha=0.5)
    (ly,) = _one_node(tmp_path / "c.onnx", "CastLike", [("a", F, ["N", 4]), ("b", F, [3])]).layers
    assert ly.status == "zero_cost" and "identity" in ly.reason


def test_what_stays_unsupported_says_why(tmp_path):
    F, I = TensorProto.FLOAT, TensorProto.INT64
    cases = [
        ("Sum", [("a", F, ["N", 4]), ("b", F, ["N", 4]), ("c", F, ["N", 4])], {}, "Sum of 3 input(s)"),
        ("Pow", [("a", F, ["N", 4]), ("b", I, ["N", 4])], {}, "different element types"),
        ("Mod", [("a", F, ["N", 4]), ("b", F, ["N", 4])], {}, "Mod fmod=0 reads integer tensors, not float"),
        ("Acos", [("a", TensorProto.DOUBLE, ["N", 4])], {}, None),  # float64 data: the precision's float type
        ("Celu", [("a", F, ["N", 4])], {"alpha": 0.0}, "Celu with alpha 0"),
        ("Cast", [("a", F, ["N", 4])], {"to": TensorProto.DOUBLE}, "Cast to DOUBLE"),
        ("Mean", [("a", F, ["N", 4])], {}, "Mean of 1 input(s)"),
    ]
    for i, (op, ins, attrs, why) in enumerate(cases):
        ml = _one_node(tmp_path / f"{i}.onnx", op, ins, attrs)
        (ly,) = ml.layers
        if why is None:
            assert ly.status == "benchmark", (op, ly.reason)
        else:
            assert ly.status == "unsupported" and why in ly.reason, (op, ly.reason)
            assert "\n" not in ly.reason


def test_keys_of_configs_stored_before_are_unchanged():
    # the new OPTIONAL fields (UnaryConfig alpha/beta/dst, ElementwiseConfig dtype) stay out of the key
    assert L.UnaryConfig((1, 197, 3072), "gelu").key == "unary-810696df17c0df4e"
    assert L.UnaryConfig((2, 1, 32), "cast", src="bool").key == "unary-6a206ec6a45f3768"
    assert L.UnaryConfig((2, 8, 32), "pow", 0.5).key == "unary-04d3e640cc01dab3"
    assert L.ElementwiseConfig("add", (1, 64, 56, 56), (1, 64, 1, 1)).key == "elementwise-c4fdd0b35a3619c1"
    assert L.ElementwiseConfig("div", (1, 197, 768), (1, 1, 1)).key == "elementwise-dd5a8bde7bd5a45e"
    new = [L.UnaryConfig((4,), "selu", alpha=2.0, beta=3.0), L.UnaryConfig((4,), "is_nan", dst="bool"),
           L.ElementwiseConfig("and", (4,), (4,), dtype="bool")]
    assert len({c.key for c in new}) == 3
    for c in new:
        assert L.config_from_params(c.kind, json.loads(json.dumps(c.params()))) == c


@pytest.mark.parametrize("cfg,precision,flops,nbytes", [
    (L.UnaryConfig((8, 1000), "is_nan", dst="bool"), "fp16", 8000, 2 * 8000 + 8000),      # bool out: 1 byte
    (L.UnaryConfig((8, 1000), "hard_swish"), "fp32", 5 * 8000, 4 * 2 * 8000),
    (L.UnaryConfig((8, 1000), "not", src="bool", dst="bool"), "fp32", 0, 2 * 8000),
    (L.UnaryConfig((8, 1000), "bitwise_not", src="int64", dst="int64"), "fp16", 0, 16 * 8000),
    (L.UnaryConfig((8, 1000), "cast", src="int64"), "fp16", 0, 8 * 8000 + 2 * 8000),    # Cast reads int64
    (L.UnaryConfig((8, 1000), "celu", alpha=0.5), "bf16", 7 * 8000, 2 * 2 * 8000),
    (L.UnaryConfig((8, 1000), "cast", src="float32", dst="bool"), "fp16", 0, 4 * 8000 + 8000),
    (L.UnaryConfig((8, 1000), "clip", alpha=-1.0, beta=1.0), "fp32", 2 * 8000, 4 * 2 * 8000),
    (L.ElementwiseConfig("less", (2, 4, 8), (1, 4, 1)), "fp32", 64, 4 * (64 + 4) + 64),
    (L.ElementwiseConfig("and", (2, 4, 8), (2, 4, 8), dtype="bool"), "fp16", 0, 64 + 64 + 64),
    (L.ElementwiseConfig("bitwise_or", (2, 4, 8), (1, 1, 8), dtype="int32"), "fp16", 0, 4 * (64 + 8) + 4 * 64),
    (L.ElementwiseConfig("mean", (2, 4, 8), (2, 4, 8)), "fp16", 2 * 64, 2 * 3 * 64),
    (L.ElementwiseConfig("max", (2, 4, 1), (1, 1, 8)), "fp32", 64, 4 * (8 + 8 + 64)),
])
def test_flops_and_bytes(cfg, precision, flops, nbytes):
    assert cfg.flops() == flops
    assert R.min_bytes(cfg, precision) == nbytes


def test_generated_cases_of_the_new_ops(tmp_path):
    ml = process(elementwise_ops_model(tmp_path / "e.onnx"), 2)
    generate([ml], ["fp16"], tmp_path / "s")
    un = (tmp_path / "s" / "src" / "unary.cpp").read_text()
    ew = (tmp_path / "s" / "src" / "elementwise.cpp").read_text()
    # op, exponent, alpha, beta, x stored, x type, y stored, y type, cudnnOpTensor form, x range
    assert "UnaryOp::IS_NAN, 0.0, 0.0, 0.0, false, ElemType::F32, true, ElemType::I8, 0, -1.0, 1.0" in un
    assert "UnaryOp::NOT, 0.0, 0.0, 0.0, true, ElemType::I8, true, ElemType::I8, 2, 0.0, 2.0" in un
    assert "UnaryOp::BITWISE_NOT, 0.0, 0.0, 0.0, true, ElemType::I64, true, ElemType::I64, 0, -100.0, 100.0" in un
    assert "UnaryOp::SELU, 0.0, 2.0, 3.0, false" in un and "UnaryOp::ACOSH" in un and "1.1, 3.0" in un
    # both operands broadcast: kernel only (cudnn false); a per-row operand: cudnnOpTensor MAX
    assert "PointwiseOp::GreaterOrEqual, false, ElemType::F32, true" in ew
    assert "PointwiseOp::ShiftLeft, true, ElemType::U8, false, 0.0, 100.0, 0.0, 8.0, false" in ew
    assert "PointwiseOp::And, true, ElemType::I8, true, 0.0, 2.0, 0.0, 2.0, true" in ew
    assert 'PointwiseOp::Mean, false, ElemType::F32, false, -1.0, 1.0, 0.5, 1.5, true, "mean", true, 4' in ew
    assert "CUDNN_OP_TENSOR_ADD, 0.5f, 0.5f" in ew and cpp_string(HOSTILE) not in ew  # names never reach the code
    assert cpp_string(HOSTILE + "Xor9") in ew  # ...except as escaped job node literals
    rows = [ln for ln in ew.splitlines() if "PointwiseOp::Max," in ln]
    assert rows and all(", false, 4, {1, 1, 1, 1, 1}" in ln for ln in rows)  # Max15: (2,4,1) x (1,1,8)
    assert "UnaryOp::CAST_BOOL, 0.0, 0.0, 0.0, true, ElemType::F32, true, ElemType::I8" in un  # Cast to bool
    assert "UnaryOp::CLIP, 0.0, -3.4028234663852886e+38, 1.0" in un
    assert elementwise_input_ranges(L.ElementwiseConfig("pow", (2,), (2,))) == ((0.5, 1.5), (-1.0, 1.0))
    assert unary_input_range(L.UnaryConfig((2,), "atanh")) == (-0.9, 0.9)


def test_mobilenet_v3_large_maps_with_nothing_unsupported():
    for batch in (1, 8):
        ml = process(MOBILENET, batch)
        s = ml.summary()
        assert s["unsupported"] == {} and s["coverage"]["percent"] == 100.0
        hs = {ly.config for ly in ml.layers if ly.op_type == "HardSwish"}
        assert hs and all(c.op == "hard_swish" and c.shape[0] == batch for c in hs)
    by_type = collections.Counter(ly.op_type for ly in ml.layers)
    assert by_type["HardSwish"] == 21 and by_type["HardSigmoid"] == 8 and by_type["Conv"] == 62


def test_mobilenet_file_is_the_torch_export():
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    del torch
    fresh = mobilenet_v3_large_export()
    kept = onnx.load(str(MOBILENET), load_external_data=False)
    count = lambda m: collections.Counter(n.op_type for n in m.graph.node)  # noqa: E731
    assert count(fresh) == count(kept)
    assert [i.name for i in fresh.graph.input] == [i.name for i in kept.graph.input]
    assert MOBILENET.stat().st_size < 100_000


@pytest.mark.slow
def test_new_ops_compile_and_link_in_every_precision(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    mls = [process(elementwise_ops_model(tmp_path / "e.onnx"), 2), process(MOBILENET, 2)]
    suite = generate(mls, ["fp32", "fp16", "bf16"], tmp_path / "s", kinds=["Unary", "Elementwise", "Activation"])
    r = build(suite.root)
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(ln)["job"] for ln in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
    nm = subprocess.run(["nm", "-C", str(r.executable)], capture_output=True, text=True).stdout
    for sym in ("benanza::binary_pointwise_typed", "benanza::unary_kernel", "benanza::run_binary_pointwise_engines",
                "benanza::run_pointwise_engines"):
        assert sym in nm, sym
