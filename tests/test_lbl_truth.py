"""The lower bound is a bound (issue 14): strided views instead of copies around attention, the
MatMul + bias candidate, layout conversions reported apart under the default NCHW + NHWC analysis,
the framework's own kernels as candidates, and no number for an LBL without measurements."""
import json
import random

import numpy as np
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.kinds import views as V
from benanza.analysis.analyzer import analyze, layout_conversions
from benanza.database.store import open_db
from benanza.generation.generator import generate, plan_jobs
from benanza.processing.model import process
from conftest import REPO, scenario_of
from onnx_builders import _i64, _w
from test_cli import bz, one_line_error

RESNET50 = REPO / "examples" / "resnet50.onnx"


# ----------------------------------------------------------------------------------------- views

def _numpy_step(idx, v, rng):
    k = rng.random()
    if k < 0.35:
        perm = list(range(idx.ndim))
        rng.shuffle(perm)
        return idx.transpose(perm), V.permute(v, tuple(perm))
    if k < 0.8 or idx.ndim < 2:
        rem, tgt = idx.size, []
        while rem > 1:
            d = rng.choice([d for d in range(2, rem + 1) if rem % d == 0])
            tgt.append(d)
            rem //= d
        if rng.random() < 0.3:
            tgt.insert(rng.randint(0, len(tgt)), 1)
        rng.shuffle(tgt)
        return idx.reshape(tgt), V.reshape(v, tuple(tgt))
    ax = rng.randrange(idx.ndim)
    i = rng.randrange(idx.shape[ax])
    return np.take(idx, i, axis=ax), V.select(v, ax, i)


def test_views_address_what_numpy_computes():
    """Random chains of transposes, reshapes and selects: wherever a view exists, each element's
    address (offset + mixed-radix digits x strides) is the element numpy's copies put there."""
    rng = random.Random(7)
    checked = 0
    for _ in range(1500):
        shape = [rng.choice([1, 2, 3, 4, 6]) for _ in range(rng.randint(1, 4))]
        idx = np.arange(int(np.prod(shape))).reshape(shape)
        v = V.View.packed(tuple(shape))
        for _ in range(rng.randint(1, 4)):
            idx, v = _numpy_step(idx, v, rng)
            if v is None:
                break
        if v is None:
            continue
        assert v.shape == idx.shape
        for mi in np.ndindex(*idx.shape):
            off = v.offset
            for x, modes in zip(mi, v.dims):
                for size, stride in reversed(modes):
                    off, x = off + (x % size) * stride, x // size
            assert off == idx[mi]
        st = v.strides
        if st is not None:  # a single stride per dim: the plain formula
            exp = v.offset + sum(np.indices(idx.shape)[k] * st[k] for k in range(idx.ndim))
            assert np.array_equal(np.asarray(exp), idx)
        checked += 1
    assert checked > 1000


def test_a_merge_then_split_is_still_a_view():
    """(s, b, e) -> (s, b*h, d) merges b with h at different strides (PyTorch copies there); split
    again into (b, h, s, d) it is a plain strided view: what a fused attention kernel reads."""
    s_, b, h, d = 5, 3, 2, 4
    v = V.View.packed((s_, b, 3 * h * d))
    v = V.reshape(v, (s_, b, 3, h * d))
    v = V.select(v, 2, 1)                          # K of a packed QKV
    v = V.reshape(v, (s_, b * h, d))               # torch MHA's view(tgt_len, bsz * num_heads, head_dim)
    assert v.strides is None                       # no single stride for b*h
    v = V.permute(v, (1, 0, 2))
    v = V.reshape(v, (b, h, s_, d))
    assert v.strides == (3 * h * d, d, b * 3 * h * d, 1) and v.offset == h * d


# ------------------------------------------------------------------------ attention and Linear+bias

def _mha_model(path, batch_first_bias=True):
    """torch's seq-first MultiheadAttention as torch.onnx writes it: in-projection MatMul + Add(bias),
    the packed QKV split by Reshape/Unsqueeze/Transpose/Squeeze/Gather, heads split with Reshape +
    Transpose (batch merged into the head dim) and viewed as (b, h, s, d), SDPA decomposed, heads
    merged (Transpose (2, 0, 1, 3) + Reshape), out-projection Gemm."""
    S, N, E, H = 6, "N", 8, 2
    D = E // H
    nodes, inits = [], [_w("w_in", (E, 3 * E)), _w("b_in", (3 * E,)), _w("w_out", (E, E)), _w("b_out", (E,)),
                        _w("scale", (), np.sqrt(1 / np.sqrt(D)))]
    nodes.append(helper.make_node("MatMul", ["x", "w_in"], ["proj"], name="in_proj"))
    nodes.append(helper.make_node("Add", ["proj", "b_in"], ["qkv"], name="in_bias"))
    inits += [_i64("s4", [S, -1, 3, E]), _i64("ax0", [0]), _i64("axm2", [-2])]
    nodes.append(helper.make_node("Reshape", ["qkv", "s4"], ["v4"], name="unflatten"))
    nodes.append(helper.make_node("Unsqueeze", ["v4", "ax0"], ["u5"], name="unsqueeze"))
    nodes.append(helper.make_node("Transpose", ["u5"], ["t5"], name="t5", perm=[3, 1, 2, 0, 4]))
    nodes.append(helper.make_node("Squeeze", ["t5", "axm2"], ["sq"], name="squeeze"))
    heads = {}
    for i, n in enumerate("qkv"):
        inits.append(helper.make_tensor(f"i{n}", TensorProto.INT64, [], [i]))
        nodes.append(helper.make_node("Gather", ["sq", f"i{n}"], [f"{n}0"], name=f"select_{n}", axis=0))
        inits.append(_i64(f"h{n}", [S, -1, D]))
        nodes.append(helper.make_node("Reshape", [f"{n}0", f"h{n}"], [f"{n}1"], name=f"heads_{n}"))
        nodes.append(helper.make_node("Transpose", [f"{n}1"], [f"{n}2"], name=f"bh_{n}", perm=[1, 0, 2]))
        inits.append(_i64(f"b{n}", [-1, H, S, D]))
        nodes.append(helper.make_node("Reshape", [f"{n}2", f"b{n}"], [f"{n}3"], name=f"bhsd_{n}"))
        heads[n] = f"{n}3"
    nodes.append(helper.make_node("Transpose", [heads["k"]], ["kt"], name="kt", perm=[0, 1, 3, 2]))
    nodes.append(helper.make_node("Mul", [heads["q"], "scale"], ["qs"], name="q_scale"))
    nodes.append(helper.make_node("Mul", ["kt", "scale"], ["ks"], name="k_scale"))
    nodes.append(helper.make_node("MatMul", ["qs", "ks"], ["sc"], name="qk"))
    nodes.append(helper.make_node("Softmax", ["sc"], ["p"], name="softmax", axis=-1))
    nodes.append(helper.make_node("MatMul", ["p", heads["v"]], ["o"], name="pv"))
    nodes.append(helper.make_node("Transpose", ["o"], ["ot"], name="merge", perm=[2, 0, 1, 3]))
    inits.append(_i64("flat", [-1, E]))
    nodes.append(helper.make_node("Reshape", ["ot", "flat"], ["of"], name="merge_view"))
    nodes.append(helper.make_node("Gemm", ["of", "w_out", "b_out"], ["y"], name="out_proj"))
    g = helper.make_graph(nodes, "mha", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [S, N, E])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", E])], inits)
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_seq_first_mha_reads_q_k_v_in_place(tmp_path):
    ml = process(_mha_model(tmp_path / "mha.onnx"), 3)
    kinds = {f.config.kind: f for f in ml.fusions}
    assert set(kinds) == {"SDPA", "Gemm"}
    att = kinds["SDPA"]
    ops = [ml.layers[i].op_type for i in att.layers]
    # every copy between the in-projection and the out-projection is absorbed
    assert ops.count("Transpose") == 6 and ops.count("Gather") == 3
    S, B, E, H, D = 6, 3, 8, 2, 4
    qkv = (3 * E, D, B * 3 * E, 1)  # (b, h, s, d) strides in the (s, b, 3, h, d) projection output
    assert att.config == L.SdpaConfig(b=B, h=H, s_q=S, s_kv=S, d=D, d_v=D, scale=0.5, q_strides=qkv,
                                      k_strides=qkv, v_strides=qkv, o_strides=(E, D, B * E, 1))
    # Linear = MatMul + Add(bias): one GEMM with a bias epilogue
    assert kinds["Gemm"].config == L.GemmConfig(m=S * B, n=3 * E, k=E, bias="c")
    assert [ml.layers[i].op_type for i in kinds["Gemm"].layers] == ["MatMul", "Add"]
    left = [ly.op_type for ly in ml.layers if ly.fusion is None and ly.status == "benchmark"]
    assert left == ["Gemm"]  # the out-projection


def test_the_sdpa_case_carries_the_strides(tmp_path):
    from benanza.generation.generator import KIND_TEMPLATES

    ml = process(_mha_model(tmp_path / "mha.onnx"), 3)
    job = next(j for j in plan_jobs([ml], ["fp16"]) if j.kind == "SDPA")
    case = KIND_TEMPLATES["SDPA"][1](job.config, job)
    q, k, v, o = job.config.strides()
    assert case.strides == "{" + ", ".join(map(str, q + k + v + o)) + "}"


@pytest.mark.slow
def test_a_strided_sdpa_suite_compiles(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    ml = process(_mha_model(tmp_path / "mha.onnx"), 3)
    suite = generate([ml], ["fp16"], tmp_path / "suite", kinds=["SDPA"])
    assert [j.kind for j in suite.jobs] == ["SDPA"]
    assert build(tmp_path / "suite").executable.exists()


# ------------------------------------------------------------------------------------- layouts

def _convnext_block(path):
    """ConvNeXt's block as torch.onnx writes it: depthwise conv, permute to channels-last,
    LayerNorm, Linear, permute back, residual Add."""
    C = 8
    nodes = [helper.make_node("Conv", ["x", "dw"], ["c"], name="dwconv", group=C, pads=[3, 3, 3, 3]),
             helper.make_node("Transpose", ["c"], ["cl"], name="to_nhwc", perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["cl", "g", "b"], ["ln"], name="ln", axis=-1),
             helper.make_node("MatMul", ["ln", "w"], ["mm"], name="linear"),
             helper.make_node("Add", ["mm", "lb"], ["lin"], name="linear_bias"),
             helper.make_node("Transpose", ["lin"], ["cf"], name="to_nchw", perm=[0, 3, 1, 2]),
             helper.make_node("Add", ["cf", "x"], ["y"], name="residual")]
    inits = [_w("dw", (C, 1, 7, 7)), _w("g", (C,)), _w("b", (C,)), _w("w", (C, C)), _w("lb", (C,))]
    g = helper.make_graph(nodes, "cn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", C, 14, 14])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", C, 14, 14])], inits)
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _system_db(url):
    db = open_db(url)
    sid = db.upsert_system({"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
                            "memory_bytes": 150 << 30, "max_sm_clock_mhz": 1980, "l2_cache_bytes": 60 << 20,
                            "cudnn_version": 91900, "cublas_version": 130100})
    return db, sid


def _measure(db, sid, cfg, precision, rows, layout="NCHW"):
    """Write one job of ``rows``: (call, ms) pairs of valid warm measurements."""
    from benanza.generation.generator import job_id

    db.upsert_configs([cfg])
    math = {"fp32": "fma", "tf32": "tf32"}.get(precision, "tensor_op") if cfg.tensor_cores else "none"
    from benanza.database.records import MeasurementLine

    recs = [MeasurementLine.from_json({"type": "measurement", "call": call, "algorithm": "a", "math": math, "dtype": L.PRECISION_DTYPE[precision], "cache": "warm", "layout": layout, "status": "ok",
             "median_ms": ms, "q1_ms": ms, "q3_ms": ms, "samples": 10, "converged": True}) for call, ms in rows]
    db.write_job(sid, None, job_id(cfg, precision, layout), cfg.key, precision, "ok", "", recs, layout=layout)


def test_channels_last_transposes_are_layout_conversions(tmp_path):
    ml = process(_convnext_block(tmp_path / "cn.onnx"), 2)
    conv = layout_conversions(ml)
    assert sorted(ml.layers[i].name for i in conv) == ["to_nchw", "to_nhwc"]
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in ml.unique_configs().values():
        _measure(db, sid, cfg, "fp16", [("lib", 0.010)])
    system = db.systems()[0]
    both = analyze(ml, db, system, "fp16", layouts=("NCHW", "NHWC"))
    nchw = analyze(ml, db, system, "fp16", layouts=("NCHW",))
    assert both.complete and nchw.complete
    assert len(both.conversion_layers) == 2 and both.conversion_ms == pytest.approx(0.020)
    assert nchw.lbl_sequential_ms - both.lbl_sequential_ms == pytest.approx(0.020)  # left out, reported apart
    d = both.to_dict()
    assert d["layout_conversions"]["measured_ms"] == pytest.approx(0.020)
    assert [t["layout_conversion"] for t in d["layers"]].count(True) == 2
    assert d["lbl_ms"] == both.lbl_fused_parallel_ms and d["lbl_kind"].startswith("fused parallel")


def test_both_layouts_are_the_default(tmp_path):
    p = bz("generate", RESNET50, "--batch", "1", "--dtype", "fp16", "-o", tmp_path / "both")
    assert p.returncode == 0, p.stderr
    p = bz("generate", RESNET50, "--batch", "1", "--dtype", "fp16", "--layout", "nchw", "-o", tmp_path / "nchw")
    assert p.returncode == 0, p.stderr
    jobs = {n: json.loads((tmp_path / n / "suite.json").read_text())["jobs"] for n in ("both", "nchw")}
    assert any(j["layout"] == "NHWC" for j in jobs["both"]) and all(j["layout"] == "NCHW" for j in jobs["nchw"])
    assert {j["job"] for j in jobs["nchw"]} < {j["job"] for j in jobs["both"]}


# ------------------------------------------------------------- the framework's kernels, empty LBLs

def test_the_framework_kernel_is_a_candidate_and_is_listed(tmp_path):
    ml = process(_convnext_block(tmp_path / "cn.onnx"), 2)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    ln = next(ly.config for ly in ml.layers if ly.op_type == "LayerNormalization")
    for cfg in ml.unique_configs().values():
        rows = [("cudnnBackendExecute", 0.030), ("torch:aten::layer_norm", 0.012)] if cfg == ln else [("lib", 0.01)]
        _measure(db, sid, cfg, "fp16", rows)
    a = analyze(ml, db, db.systems()[0], "fp16")
    t = next(t for t in a.layers if t.layer.op_type == "LayerNormalization")
    assert t.time_ms == pytest.approx(0.012) and t.call == "torch:aten::layer_norm"
    fast = a.framework_faster()
    assert len(fast) == 1 and fast[0]["library_call"] == "cudnnBackendExecute"
    assert fast[0]["library_ms"] == pytest.approx(0.030) and fast[0]["framework_ms"] == pytest.approx(0.012)


def test_an_lbl_without_measurements_is_no_number(tmp_path):
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    _system_db(url)
    p = bz("analyze", RESNET50, "--batch", "32", "--dtype", "fp16", "--db", url)
    err = one_line_error(p, 2)
    assert "no layer is measured" in err and "batch 32 fp16" in err
    assert "LBL" not in p.stdout


def test_a_partial_lbl_says_incomplete_everywhere(tmp_path):
    ml = process(_convnext_block(tmp_path / "cn.onnx"), 2)
    url = f"sqlite:///{tmp_path / 'perf.db'}"
    db, sid = _system_db(url)
    conv = next(ly.config for ly in ml.layers if ly.op_type == "Conv")
    _measure(db, sid, conv, "fp16", [("lib", 0.01)])
    p = bz("analyze", tmp_path / "cn.onnx", "--batch", "2", "--dtype", "fp16", "--db", url)
    assert p.returncode == 0, p.stderr
    assert "INCOMPLETE" in p.stdout and "incomplete" in p.stdout and "no: " in p.stdout
    p = bz("analyze", tmp_path / "cn.onnx", "--batch", "2", "--dtype", "fp16", "--db", url, "--json")
    assert scenario_of(p.stdout, "analyze")["complete"] is False


def _silu_model(path):
    """EfficientNet's activation as torch.onnx writes SiLU: Conv -> Sigmoid -> Mul(x, sigmoid(x))."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"], name="sigmoid"),
             helper.make_node("Mul", ["c", "s"], ["y"], name="mul")]
    g = helper.make_graph(nodes, "silu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 8, 8])],
                          [_w("w", (8, 4, 3, 3))])
    import onnx

    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_sigmoid_times_input_is_one_silu(tmp_path):
    ml = process(_silu_model(tmp_path / "silu.onnx"), 2)
    (f,) = ml.fusions
    assert f.config == L.ActivationConfig(shape=(2, 8, 8, 8), mode="swish")
    assert [ml.layers[i].op_type for i in f.layers] == ["Sigmoid", "Mul"]
    assert ml.summary()["fusions_by_kind"] == {"SiLU": 1}


@pytest.mark.slow
def test_a_silu_suite_compiles(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    ml = process(_silu_model(tmp_path / "silu.onnx"), 2)
    suite = generate([ml], ["fp16"], tmp_path / "suite", kinds=["Activation"])
    assert {j.config.mode for j in suite.jobs} == {"sigmoid", "swish"}
    assert build(tmp_path / "suite").executable.exists()


def test_identity_copies_cost_nothing(tmp_path):
    """Swin exports F.pad with zero pads and slices of the whole tensor: identities, 0 ms."""
    import onnx

    nodes = [helper.make_node("Pad", ["x", "p0"], ["a"], name="pad0"),
             helper.make_node("Slice", ["a", "s0", "e0", "ax"], ["b"], name="whole"),
             helper.make_node("Slice", ["b", "s1", "e0", "ax"], ["c"], name="part"),
             helper.make_node("Pad", ["c", "p1"], ["y"], name="pad1")]
    inits = [_i64("p0", [0] * 8), _i64("p1", [0, 0, 1, 0, 0, 0, 1, 0]), _i64("s0", [0]), _i64("s1", [1]),
             _i64("e0", [8]), _i64("ax", [2])]
    g = helper.make_graph(nodes, "pads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 9, 8])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "p.onnx"))
    ml = process(tmp_path / "p.onnx", 2)
    status = {ly.name: ly.status for ly in ml.layers}
    assert status == {"pad0": "zero_cost", "whole": "zero_cost", "part": "benchmark", "pad1": "benchmark"}
    assert "identity" in ml.layers[0].reason


def test_gathernd_with_constant_indices_is_a_gather(tmp_path):
    """torch.export writes BERT's mask expansion as GatherND with a constant index tensor."""
    import onnx

    idx = np.stack(np.meshgrid(np.arange(2), np.arange(3), indexing="ij"), -1).reshape(1, 6, 2)[:, ::-1]
    nodes = [helper.make_node("GatherND", ["x", "i"], ["y"], name="gnd")]
    inits = [_i64("i", np.ascontiguousarray(idx))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "g.onnx"))
    ml = process(tmp_path / "g.onnx", 2, batch_dim=0)
    (ly,) = ml.layers
    flat = [int(a) * 3 + int(b) for a, b in idx.reshape(-1, 2)]
    assert ly.config == L.GatherConfig(data=(6, 4), indices=(1, 6), axis=0, values=tuple(flat))
    assert ly.config.output_shape() == (1, 6, 4)


def test_pytorch_default_fp32_runs_convolutions_in_tf32(tmp_path):
    """--conv-tf32: the convolutions take their tf32 measurements, everything else fp32."""
    ml = process(_convnext_block(tmp_path / "cn.onnx"), 2)
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    jobs = plan_jobs([ml], ["fp32"], ["NCHW"], conv_precision="tf32")
    by_kind = {}
    for j in jobs:
        by_kind.setdefault(j.kind, set()).add(j.precision)
    assert by_kind["Conv"] == {"tf32", "fp32"} and by_kind["Gemm"] == {"fp32"} and by_kind["LayerNorm"] == {"fp32"}
    for cfg in ml.unique_configs().values():
        _measure(db, sid, cfg, "fp32", [("lib", 0.05)])
        if cfg.kind == "Conv":
            _measure(db, sid, cfg, "tf32", [("lib", 0.01)])
    system = db.systems()[0]
    plain = analyze(ml, db, system, "fp32", layouts=("NCHW",))
    torch_default = analyze(ml, db, system, "fp32", layouts=("NCHW",), conv_precision="tf32")
    conv = next(t for t in torch_default.layers if t.layer.op_type == "Conv")
    assert conv.time_ms == pytest.approx(0.01) and plain.lbl_sequential_ms - torch_default.lbl_sequential_ms \
        == pytest.approx(0.04)
    assert torch_default.precision_label == "fp32+tf32conv" and torch_default.to_dict()["conv_precision"] == "tf32"
    p = bz("analyze", tmp_path / "cn.onnx", "--batch", "2", "--dtype", "fp16", "--conv-tf32", "--db", str(tmp_path / "perf.db"))
    assert "--conv-tf32 goes with --dtype fp32" in one_line_error(p, 2)


def test_a_measured_fusion_covers_a_member_without_a_measurement(tmp_path):
    """BERT's attention under torch.export has an IsNaN guard only the fused SDPA computes: with the
    fused call measured, the headline LBL is complete (the unfused sums are not)."""

    ml = process(_convnext_block(tmp_path / "cn.onnx"), 2)
    f = next(f for f in ml.fusions if f.config.kind == "Gemm")  # MatMul + Add(bias)
    add = ml.layers[f.layers[-1]]
    db, sid = _system_db(f"sqlite:///{tmp_path / 'perf.db'}")
    for cfg in ml.unique_configs().values():
        if cfg != add.config:
            _measure(db, sid, cfg, "fp16", [("lib", 0.010)])
    a = analyze(ml, db, db.systems()[0], "fp16")
    assert a.complete and not a.complete_unfused
    t = next(t for t in a.layers if t.layer.index == add.index)
    assert t.status == "missing" and t.covered and "computed by the fused Gemm candidate" in t.reason
    assert a.to_dict()["complete"] is True and a.to_dict()["complete_unfused"] is False


def test_pytorch_fp32_default_runs_cudnn_rnns_in_tf32_too(tmp_path):
    """torch.backends.cudnn.allow_tf32 (on by default) sets the math of PyTorch's cuDNN RNNs as well
    as its convolutions: on an H200 the fp32 lstm_lm's LSTM ran TF32 xmma kernels, and benanza's
    FP32-FMA LSTM made the 'lower bound' 1.53x PyTorch's kernel time. With --conv-tf32 the RNN is
    planned and analyzed in tf32, the Sigmoid after it in fp32."""
    from onnx_builders import rnn_model

    ml = process(rnn_model(tmp_path / "lstm.onnx", op="LSTM", direction="forward"), 4)
    jobs = plan_jobs([ml], ["fp32"], ["NCHW"], conv_precision="tf32")
    by_kind = {}
    for j in jobs:
        by_kind.setdefault(j.config.kind, set()).add(j.precision)
    # a tf32 analysis also takes FMA measurements (as for convolutions), so both jobs run
    assert by_kind["RNN"] == {"tf32", "fp32"} and by_kind["Activation"] == {"fp32"}
    assert "RNN" in L.CUDNN_TF32_KINDS and set(L.CONV_KINDS) < set(L.CUDNN_TF32_KINDS)
