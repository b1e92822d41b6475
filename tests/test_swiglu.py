"""SwiGLU (issue 27, item 3): Llama's MLP ``down(silu(gate(x)) * up(x))`` as torch.export (opset 20 and
23) and TorchScript write it: the gating Sigmoid(g) -> Mul(g, sigmoid) -> Mul(silu, u) is one
ElementwiseConfig ``swiglu`` fusion candidate (benanza's pointwise kernel ``PointwiseOp::SwiGlu``; PyTorch's
silu then mul), and the gate and up projections reading the same x are one GEMM of the concatenated
weights (n = 2 * intermediate), as vLLM's MergedColumnParallelLinear and Phi-3's gate_up_proj run them.
cuBLASLt has no SwiGLU epilogue (cublasLtEpilogue_t: RELU, GELU and their BIAS/AUX forms only), so
the gating is not a GemmAct. The analyzer compares each group's best measurement with the sum of its
layers as it does for every fusion candidate. The suite renders and its sources pass g++ -fsyntax-only;
the harness kernel compiles with nvcc (in the session's harness build, conftest.harness, which compiles every cpp/src file: tests/test_harness_build.py)."""
from __future__ import annotations


import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.processing.model import process
from conftest import REPO
from test_unary_backward import syntax_check

DEC = REPO / "tests" / "data" / "decoders"
EXPORTS = ["llama_prefill_dynamo20", "llama_prefill_dynamo23", "llama_prefill_torchscript"]
#: the exports' configuration (tests/data/decoders/exports.txt): hidden 128, intermediate 352, 2 layers
HIDDEN, INTER, LAYERS = 128, 352, 2


def _groups(ml, kind):
    return [f for f in ml.fusions if f.config.kind == kind and
            (kind != "Elementwise" or f.config.op == "swiglu")]


@pytest.mark.parametrize("name", EXPORTS)
def test_llamas_mlp_is_a_gate_up_gemm_and_a_swiglu(name):
    ml = process(DEC / f"{name}.onnx", 2, {"seq": 128})
    tokens = 2 * 128
    swiglus = _groups(ml, "Elementwise")
    assert len(swiglus) == LAYERS
    for f in swiglus:
        assert f.config == L.ElementwiseConfig(op="swiglu", a=(2, 128, INTER), b=(2, 128, INTER))
        assert [ml.layers[i].op_type for i in f.layers] == ["Sigmoid", "Mul", "Mul"]
    # no SiLU candidate is left over, no Sigmoid outside a SwiGLU
    assert not [f for f in ml.fusions if isinstance(f.config, L.ActivationConfig)]
    assert all(ly.fusion is not None for ly in ml.layers if ly.op_type == "Sigmoid")
    gemms = [f for f in _groups(ml, "Gemm") if len(f.layers) == 2]
    assert len(gemms) == LAYERS
    for f, sw in zip(gemms, swiglus):
        gate, up = (ml.layers[i] for i in f.layers)
        assert gate.op_type == up.op_type == "MatMul" and gate.inputs == up.inputs
        assert gate.config == up.config and (gate.config.m, gate.config.n, gate.config.k) == (tokens, INTER, HIDDEN)
        assert f.config == L.GemmConfig(m=tokens, n=2 * INTER, k=HIDDEN)
        # the gate feeds the gating's Sigmoid and first Mul, the up projection its last Mul
        sig, silu, mul = (ml.layers[i] for i in sw.layers)
        assert sig.inputs == gate.outputs and gate.outputs[0] in silu.inputs and up.outputs[0] in mul.inputs


def test_the_gatings_cost_and_framework_call():
    cfg = L.ElementwiseConfig(op="swiglu", a=(2, 128, INTER), b=(2, 128, INTER))
    n = 2 * 128 * INTER
    assert cfg.flops() == 6 * n and cfg.output_shape() == (2, 128, INTER)
    assert min_bytes(cfg, "fp16") == 2 * 3 * n  # g and u read, the product written
    from benanza.kinds.framework import Ctx
    from torch_recorder import Recorder

    calls = []
    cand = L.REGISTRY["Elementwise"].torch(Ctx(cfg, Recorder(calls), Recorder(calls), Recorder(calls), False))
    assert cand.call == "torch:aten::silu+mul" and cand.out_numel == n
    cand.fn()
    assert calls[-1][0] == "nn.functional.silu"


def _mlp(path, same_input=True, up_read_twice=False):
    """x -> gate, up MatMuls (weights w_g, w_u) -> Sigmoid/Mul/Mul -> y (and the up output as a second
    graph output when ``up_read_twice``)."""
    vi = helper.make_tensor_value_info
    w = [helper.make_tensor(n, TensorProto.FLOAT, [8, 16], [0.1] * 128) for n in ("w_g", "w_u")]
    nodes = [helper.make_node("MatMul", ["x", "w_g"], ["g"]),
             helper.make_node("MatMul", ["x" if same_input else "x2", "w_u"], ["u"]),
             helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["g", "s"], ["silu"]),
             helper.make_node("Mul", ["silu", "u"], ["y"])]
    outs = [vi("y", TensorProto.FLOAT, [4, 16])]
    if up_read_twice:
        nodes.append(helper.make_node("Neg", ["u"], ["nu"]))
        outs.append(vi("nu", TensorProto.FLOAT, [4, 16]))
    ins = [vi("x", TensorProto.FLOAT, [4, 8])] + ([] if same_input else [vi("x2", TensorProto.FLOAT, [4, 8])])
    g = helper.make_graph(nodes, "mlp", ins, outs, initializer=w)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("same_input,up_read_twice,gemm", [(True, False, True), (False, False, False),
                                                          (True, True, False)])
def test_the_gemms_join_only_when_they_read_one_input_for_the_gating_alone(tmp_path, same_input, up_read_twice, gemm):
    ml = process(_mlp(tmp_path / "m.onnx", same_input, up_read_twice), 4)
    assert [f.config for f in ml.fusions if f.config.kind == "Elementwise"] == [
        L.ElementwiseConfig(op="swiglu", a=(4, 16), b=(4, 16))]
    got = [f.config for f in ml.fusions if f.config.kind == "Gemm"]
    assert got == ([L.GemmConfig(m=4, n=32, k=8)] if gemm else [])


def test_a_sigmoid_times_its_input_alone_stays_a_silu(tmp_path):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["g", "s"], ["y"])]
    g = helper.make_graph(nodes, "silu", [vi("g", TensorProto.FLOAT, [4, 16])], [vi("y", TensorProto.FLOAT, [4, 16])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "s.onnx")
    ml = process(tmp_path / "s.onnx", 4)
    assert [f.config for f in ml.fusions] == [L.ActivationConfig(shape=(4, 16), mode="swish")]


def test_the_suite_renders_and_its_sources_compile(tmp_path):
    ml = process(DEC / "llama_prefill_dynamo20.onnx", 1, {"seq": 128})
    suite = generate([ml], ["fp16"], tmp_path / "s", kinds=["Elementwise", "Gemm"])
    keys = {j.config.key for j in suite.jobs}
    assert L.ElementwiseConfig(op="swiglu", a=(1, 128, INTER), b=(1, 128, INTER)).key in keys
    assert L.GemmConfig(m=128, n=2 * INTER, k=HIDDEN).key in keys
    src = (tmp_path / "s" / "src" / "elementwise.cpp").read_text()
    assert "PointwiseOp::SwiGlu" in src and '"swiglu"' in src
    syntax_check(tmp_path / "s", "elementwise.cpp")
    syntax_check(tmp_path / "s", "gemm.cpp")


def test_phi3s_gate_up_proj_is_already_one_gemm():
    """Phi-3 exports its MLP with the weights concatenated (gate_up_proj, then chunk): the gating is one
    SwiGLU, and there is no pair of GEMMs to join."""
    ml = process(DEC / "phi3_prefill_dynamo23.onnx", 1, {"seq": 128})
    assert [f.config for f in _groups(ml, "Elementwise")] == [
        L.ElementwiseConfig(op="swiglu", a=(1, 128, INTER), b=(1, 128, INTER))] * LAYERS
    assert not [f for f in _groups(ml, "Gemm") if len(f.layers) == 2 and
                all(ml.layers[i].op_type == "MatMul" for i in f.layers)]
    # chunk(2, dim=-1) is a view in PyTorch (eager's silu and mul, torch.compile's fused
    # mul_silu_split kernel read the halves in place): the Split joins the group and is not a copy of
    # its own (2026-11-28c: phi3-2b prefill 128 bf16 b8's LBL was 1.028x torch.compile's kernel time, 20
    # Splits of 17.4 us each in it)
    for f in _groups(ml, "Elementwise"):
        ops = sorted(ml.layers[i].op_type for i in f.layers)
        assert ops == ["Mul", "Mul", "Sigmoid", "Split"], ops
        split = next(ml.layers[i] for i in f.layers if ml.layers[i].op_type == "Split")
        assert split.output_shapes == ((1, 128, INTER),) * 2 and split.input_shapes[0] == (1, 128, 2 * INTER)
        assert f.layers[-1] == max(f.layers) and ml.layers[f.layers[-1]].op_type == "Mul"


@pytest.mark.parametrize("fused_ms,headline_fused", [(0.9, False), (0.4, True)])
def test_the_critical_path_takes_the_gate_up_gemm_only_where_it_beats_the_two_branches(tmp_path, fused_ms,
                                                                                     headline_fused):
    """The gate and up GEMMs are parallel branches: the critical path runs them side by side (0.5 ms,
    the longer one), the sequential sum one after the other (1.0 ms). A joined GEMM of 0.9 ms
    shortens the sequential LBL and would lengthen the critical path: the headline leaves it unfused
    (2026-11-28d: llama-1.1b prefill 2048 bf16 b8's LBL was 72.9 ms with 22 such GEMMs taken fused,
    62.7 ms without, 249.3 ms at b32 where the joined GEMM was not faster than the sum)."""
    from test_lbl_truth import _measure, _system_db

    from benanza.analysis.analyzer import analyze

    ml = process(_mlp(tmp_path / "m.onnx"), 4)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    joined = L.GemmConfig(m=4, n=32, k=8)
    gemms = [f for f in ml.fusions if f.config == joined]
    assert len(gemms) == 1
    gate, up = gemms[0].layers
    swiglu = next(f for f in ml.fusions if f.config.kind == "Elementwise")
    times = {ml.layers[gate].config.key: 0.5, joined.key: fused_ms, swiglu.config.key: 0.01}
    for cfg in ml.unique_configs().values():
        _measure(db, sid, cfg, "fp16", [("lib", times.get(cfg.key, 0.1))])
    for f in ml.fusions:
        if f.config.key not in times:
            _measure(db, sid, f.config, "fp16", [("lib", 1.0)])  # no other group is faster fused
    a = analyze(ml, db, db.systems()[0], "fp16")
    assert a.complete
    gelu = 0.01  # the gating, fused either way
    assert a.lbl_fused_sequential_ms == pytest.approx(min(fused_ms, 1.0) + gelu)
    assert a.lbl_fused_parallel_ms == pytest.approx((fused_ms if headline_fused else 0.5) + gelu)
    assert a.lbl_ms == a.lbl_fused_parallel_ms
    assert (gemms[0].layers[-1] in a.fused_groups()) is headline_fused
    # the trace and every prediction weigh the layers as the headline does
    from benanza.analysis.analyzer import critical_path

    assert critical_path(ml.edges, a.fused_weight)[0] == pytest.approx(a.lbl_ms)
