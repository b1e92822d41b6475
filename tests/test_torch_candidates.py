"""The framework's own kernels as LBL candidates (benanza.profiles.torch_candidates): a builder per config
kind whose callable computes the config's output (checked on the CPU here; timed on the GPU), the
worker's protocol without a GPU, and the database keeping framework and library jobs apart."""
import json
import subprocess
import sys

import numpy as np
import pytest

from benanza import kinds as L
from benanza.database.store import open_db
from benanza.generation.generator import framework_job_id, job_id, job_layout, job_source
from benanza.processing.model import process
from conftest import REPO
from onnx_builders import all_kinds_model, bert_encoder_model, gemm_rnn_model, transformer_ops_model

torch = pytest.importorskip("torch", reason="PyTorch is not installed (the framework's candidates need it)")
T = pytest.importorskip("benanza.profiles.torch_candidates")

DATA = REPO / "tests" / "data"
#: kinds with an NHWC job (benanza.generation.generator.NHWC_KINDS)
NHWC = ("Conv", "ConvBiasAct", "ConvBnAct", "BatchNorm", "Pooling", "Elementwise")


def test_every_config_kind_has_a_builder():
    assert set(T.BUILDERS) == set(L.CONFIG_KINDS)


def _models(tmp_path):
    yield process(REPO / "examples" / "resnet50.onnx", 2)
    yield process(all_kinds_model(tmp_path / "all.onnx"), 2)
    yield process(gemm_rnn_model(tmp_path / "gr.onnx"), 2)
    yield process(transformer_ops_model(tmp_path / "t.onnx"), 2, batch_dim=0)
    yield process(bert_encoder_model(tmp_path / "bert.onnx", opset=14), 2, dims={"seq": 16})
    for name in ("vit_b_16_fixed1", "bert_dynamic"):
        yield process(DATA / f"{name}.onnx", 2)


def test_every_candidate_computes_its_configs_output(tmp_path):
    """Every unique config of real models (and fusion candidate), in fp32 on the CPU, in each layout
    it is measured in: the callable runs and writes the config's element count."""
    seen = set()
    for ml in _models(tmp_path):
        for cfg in ml.unique_configs().values():
            for lay in ("NCHW", "NHWC") if cfg.kind in NHWC else ("NCHW",):
                cand = T.build(cfg, "fp32", lay, "cpu")
                with torch.inference_mode():
                    out = cand.fn()
                assert T._check(torch, out, cand.out_numel) == "", (cfg.describe(), lay)
                assert cand.out_numel == L.numel(cfg.output_shape()) and cand.call.startswith("torch:aten::")
                seen.add(cfg.kind)
    assert seen >= {"Conv", "ConvBiasAct", "Activation", "Pooling", "Elementwise", "Gemm", "GemmAct", "RNN",
                    "LayerNorm", "Unary", "Gather", "Where", "SDPA", "Copy", "Softmax", "BatchNorm", "LRN",
                    "Dropout", "Reduce"}


def test_nhwc_candidates_are_channels_last():
    cfg = L.ConvConfig(x=(2, 8, 6, 6), w=(16, 8, 3, 3), pads=(1, 1, 1, 1), strides=(1, 1), dilations=(1, 1),
                       group=1, bias=True)
    with torch.inference_mode():
        y = T.build(cfg, "fp32", "NHWC", "cpu").fn()
    assert y.is_contiguous(memory_format=torch.channels_last) and tuple(y.shape) == cfg.output_shape()
    assert T.build(cfg, "tf32", "NCHW", "cpu").call == "torch:aten::conv2d"
    assert T.math_mode(cfg, "fp32") == "fma" and T.math_mode(cfg, "tf32") == "tf32"
    assert T.math_mode(cfg, "fp16") == "tensor_op" and T.math_mode(L.ActivationConfig((2, 3), "relu"), "fp16") == "none"
    with pytest.raises(T.NotSupported):
        T.build(cfg, "fp8", "NCHW", "cpu")


def test_strided_sdpa_reads_the_views_it_is_given():
    """Q, K, V as (b, s, h, d) memory read through (b, h, s, d) strides, O written back the same way:
    the same values as attention on packed copies."""
    b, h, s, d = 2, 3, 5, 4
    bshd = (s * h * d, d, h * d, 1)
    cfg = L.SdpaConfig(b=b, h=h, s_q=s, s_kv=s, d=d, d_v=d, scale=0.5, q_strides=bshd, k_strides=bshd,
                       v_strides=bshd, o_strides=bshd)
    torch.manual_seed(0)
    cand = T.build(cfg, "fp32", "NCHW", "cpu")
    with torch.inference_mode():
        out = cand.fn()
    assert tuple(out.shape) == (b, h, s, d) and tuple(out.stride()) == bshd
    # recompute from the candidate's own views
    cells = {name: c.cell_contents for name, c in zip(cand.fn.__code__.co_freevars, cand.fn.__closure__)}
    q, k, v = cells["q"], cells["k"], cells["v"]
    ref = torch.softmax(q.contiguous() @ k.contiguous().transpose(-1, -2) * 0.5, -1) @ v.contiguous()
    assert torch.allclose(out, ref, atol=1e-5)


def test_the_worker_says_why_without_a_gpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the worker would run")
    cfg = L.ActivationConfig((2, 8), "relu")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"job": framework_job_id(job_id(cfg, "fp16")), "kind": cfg.kind,
                                "params": cfg.params(), "precision": "fp16", "layout": "NCHW"}) + "\n")
    p = subprocess.run([sys.executable, "-m", "benanza.profiles.torch_candidates", "--jobs", str(jobs), "--no-cold"],
                       capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 3, p.stderr
    (line,) = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    assert line["type"] == "fatal" and "CUDA device" in line["message"]
    from benanza.runner.run import framework_available

    assert "no CUDA device" in framework_available()


def test_statistics_follow_the_harness():
    pol = T.Policy(min_samples=10, rse=0.01)
    st = T.summarize([1.0] * 9 + [1.1], pol)
    assert st["median_ms"] == 1.0 and st["samples"] == 10 and st["converged"]
    rse = T.median_rse(list(np.linspace(1.0, 2.0, 20)))
    q1, med, q3 = np.percentile(np.linspace(1.0, 2.0, 20), [25, 50, 75])
    assert rse == pytest.approx(np.sqrt(np.pi / 2) * (q3 - q1) / 1.349 / np.sqrt(20) / med)


# ------------------------------------------------------------------ framework and library jobs

def _rec(call, ms, layout="NCHW"):
    from benanza.database.records import MeasurementLine

    return MeasurementLine.from_json({"type": "measurement", "call": call, "algorithm": "a", "math": "none",
                                      "dtype": "float16", "cache": "warm", "layout": layout, "status": "ok",
                                      "median_ms": ms, "q1_ms": ms, "q3_ms": ms, "samples": 10, "converged": True})


def test_framework_and_library_jobs_keep_each_others_rows(tmp_path):
    cfg = L.ActivationConfig((2, 8), "relu")
    db = open_db(f"sqlite:///{tmp_path / 'p.db'}")
    sid = db.upsert_system({"gpu_name": "G", "compute_capability": "9.0", "sm_count": 1})
    db.upsert_configs([cfg])
    lib = job_id(cfg, "fp16")
    fw = framework_job_id(lib)
    assert job_source(fw) == "framework" and job_source(lib) == "library" and job_layout(fw + "") == "NCHW"
    assert job_layout(framework_job_id(job_id(cfg, "fp16", "NHWC"))) == "NHWC"
    from benanza.database.records import ChoiceLine

    choice = ChoiceLine.from_json({"type": "choice", "source": "h", "rank": 0, "algorithm": "x", "math": "none",
                                   "status": "ok"})
    db.write_job(sid, None, lib, cfg.key, "fp16", "ok", "", [_rec("cudnnActivationForward", 0.02), choice])
    db.write_job(sid, None, fw, cfg.key, "fp16", "ok", "", [_rec("torch:aten::relu", 0.01)])
    calls = sorted(m.call for m in db.measurements(sid, [cfg.key]))
    assert calls == ["cudnnActivationForward", "torch:aten::relu"] and len(db.choices(sid, [cfg.key])) == 1
    # measuring the library job again keeps the framework's row, and the other way round
    db.write_job(sid, None, lib, cfg.key, "fp16", "ok", "", [_rec("cudnnActivationForward", 0.03), choice])
    db.write_job(sid, None, fw, cfg.key, "fp16", "ok", "", [_rec("torch:aten::relu", 0.015)])
    got = {m.call: m.median_ms for m in db.measurements(sid, [cfg.key])}
    assert got == {"cudnnActivationForward": 0.03, "torch:aten::relu": 0.015}
    assert db.jobs_done(sid) == {lib, fw}
    # an import adds the framework job to a database that has the library job (written there later,
    # so kept) without deleting the library job's rows
    from benanza.database.sharing import export, import_db

    other = open_db(f"sqlite:///{tmp_path / 'o.db'}")
    osid = other.upsert_system({"gpu_name": "G", "compute_capability": "9.0", "sm_count": 1})
    other.upsert_configs([cfg])
    other.write_job(osid, None, lib, cfg.key, "fp16", "ok", "", [_rec("cudnnActivationForward", 0.5)])
    exported = tmp_path / "x.db"
    export(db, exported)
    import_db(other, str(exported))
    got = {m.call: m.median_ms for m in other.measurements(osid, [cfg.key])}
    assert got == {"cudnnActivationForward": 0.5, "torch:aten::relu": 0.015}


def test_every_elementwise_and_unary_op_has_a_torch_call():
    """Each op of benanza.kinds.UNARY_OPS and ELEMENTWISE_OPS, in the element types it takes."""
    src = {"not": "bool", "bitwise_not": "int32", "cast": "int64"}
    for op in L.UNARY_OPS:
        cfg = L.UnaryConfig(shape=(2, 8), op=op, exponent=2.0 if op == "pow" else 0.0, src=src.get(op, ""),
                            alpha=0.5 if op in ("clip", "celu", "shrink", "thresholded_relu") else 0.0,
                            beta=1.0 if op == "clip" else 0.0)
        cand = T.build(cfg, "fp32", "NCHW", "cpu")
        with torch.inference_mode():
            assert T._check(torch, cand.fn(), 16) == "", op
    dtype = {"and": "bool", "or": "bool", "xor": "bool", "mod": "int32", "bitwise_and": "int32",
             "bitwise_or": "int32", "bitwise_xor": "int32", "shift_left": "uint8", "shift_right": "uint8"}
    for op in L.ELEMENTWISE_OPS:
        cfg = L.ElementwiseConfig(op=op, a=(2, 4, 3), b=(1, 4, 1), dtype=dtype.get(op, ""))
        cand = T.build(cfg, "fp32", "NCHW", "cpu")
        with torch.inference_mode():
            assert T._check(torch, cand.fn(), 24) == "", op
