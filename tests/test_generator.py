"""Benchmark generator: escaping, case tables, and generated suites that compile and link against
the real cuDNN and cuBLAS wheels (no GPU needed to build; running says "no CUDA device")."""
import json
import subprocess

import numpy as np
import pytest

from benanza.generation import generator as gen
from benanza import kinds as L
from benanza.errors import UsageError
from benanza.generation.generator import generate, load_suite, parse_layouts, parse_precisions, plan_jobs
from benanza.kinds.copy import collapse_transfer
from benanza.kinds.cpp import cpp_string
from benanza.kinds.elementwise import collapse_broadcast
from benanza.kinds.pooling import pooling_cudnn_pads
from benanza.processing.model import process
from conftest import have_gpu
from onnx_builders import HOSTILE, all_kinds_model, gemm_rnn_model, mlp_model, nothing_to_benchmark_model


def test_cpp_string_escapes_everything_that_could_escape_a_literal():
    s = cpp_string(HOSTILE + "\x00é")
    assert s.startswith('"') and s.endswith('"')
    body = s[1:-1]
    assert "\n" not in body and "??=" not in body
    assert '\\"' in body and "\\\\" in body and "\\303\\251" in body and "\\000" in body
    # the only unescaped quote characters are the delimiters
    assert body.replace('\\"', "").count('"') == 0


def test_parse_precisions():
    assert parse_precisions("fp32, FP16,fp32") == ["fp32", "fp16"]
    with pytest.raises(UsageError, match="unknown data type 'int8'"):
        parse_precisions("fp32,int8")


def test_jobs_cover_unique_configs_and_precisions(models):
    mls = [process(models / "resnet50.onnx", b) for b in (1, 32)]
    jobs = plan_jobs(mls, ["fp32", "tf32", "fp16"])
    ids = [j.id for j in jobs]
    assert len(ids) == len(set(ids))
    uniq = set()
    for ml in mls:
        uniq |= set(ml.unique_configs())
    assert {j.layer_key for j in jobs} == uniq
    for j in jobs:
        if j.config.tensor_cores:
            continue
        assert j.precision in ("fp32", "fp16")  # tf32 changes nothing for non-Tensor-Core layers
    # tf32 analysis also accepts FMA kernels: every tf32 job has its fp32 twin
    assert all(f"{j.layer_key}.fp32" in ids for j in jobs if j.precision == "tf32")


def test_nhwc_adds_a_channels_last_job_per_convolution(models):
    ml = process(models / "resnet50.onnx", 1)
    nchw = plan_jobs([ml], ["fp16"])
    both = plan_jobs([ml], ["fp16"], ["NCHW", "NHWC"])
    # convolutions and their neighbours: resnet50 (BN folded) has MaxPool and GlobalAveragePool; its
    # Relus and residual Adds (full-size operands) read the same memory in either layout: no job
    convs = [j for j in nchw if j.kind in ("Conv", "ConvBiasAct", "Pooling")]
    extra = [j for j in both if j.layout == "NHWC"]
    assert convs and len(both) == len(nchw) + len(convs)
    assert {j.layer_key for j in extra} == {j.layer_key for j in convs}
    assert sum(j.kind == "Pooling" for j in extra) == 2
    assert all(j.id.endswith(".fp16.nhwc") for j in extra)
    assert {j.id for j in nchw} <= {j.id for j in both}  # NCHW jobs keep their ids (incremental runs)
    with pytest.raises(UsageError, match="unknown layout"):
        parse_layouts("nchw,chwn")


def test_nhwc_jobs_for_the_neighbours_of_convolution(tmp_path, models):
    ml = process(all_kinds_model(tmp_path / "all.onnx"), 2)
    nhwc = [j for j in plan_jobs([ml], ["fp32"], ["NCHW", "NHWC"]) if j.layout == "NHWC"]
    kinds = {}
    for j in nhwc:
        kinds.setdefault(j.kind, []).append(j.config)
    # BN, both pools, and the two per-channel broadcasts (Sub, Div) after the convolutions; not the
    # full-size Add, the activations, LRN or the copies
    assert sorted(kinds) == ["BatchNorm", "Conv", "ConvBiasAct", "ConvBnAct", "Elementwise", "Pooling"]
    assert len(kinds["Pooling"]) == 2 and len(kinds["BatchNorm"]) == 1
    assert sorted(c.op for c in kinds["Elementwise"]) == ["div", "sub"]
    assert all(c.b == (1, 16, 1, 1) or c.a == (1, 16, 1, 1) for c in kinds["Elementwise"])
    # resnet50 with its BatchNormalizations kept: every BN has a spatial extent, so each gets a job
    bn = process(models / "resnet50_bnkept.onnx", 1)
    jobs = plan_jobs([bn], ["fp32"], ["NCHW", "NHWC"])
    bns = {j.layer_key for j in jobs if j.kind == "BatchNorm"}
    assert bns and bns == {j.layer_key for j in jobs if j.kind == "BatchNorm" and j.layout == "NHWC"}
    # a per-channel Elementwise with no convolution before it gets none; spatial-size-1 BN neither
    assert not gen.nhwc_job(L.ElementwiseConfig("mul", (2, 8, 4, 4), (1, 8, 1, 1)), neighbour=False)
    assert gen.nhwc_job(L.ElementwiseConfig("mul", (2, 8, 4, 4), (1, 8, 1, 1)), neighbour=True)
    assert not gen.nhwc_job(L.ElementwiseConfig("add", (2, 8, 4, 4), (2, 8, 4, 4)), neighbour=True)
    assert not gen.nhwc_job(L.ElementwiseConfig("add", (2, 8, 4, 4), (1, 1, 1, 1)), neighbour=True)
    assert not gen.nhwc_job(L.BatchNormConfig((2, 8, 1, 1), 1e-5), neighbour=True)
    assert not gen.nhwc_job(L.ActivationConfig((2, 8, 4, 4), "relu"), neighbour=True)


def test_nhwc_elementwise_case_is_the_channels_last_memory(tmp_path):
    cfg = L.ElementwiseConfig("mul", (2, 8, 4, 4), (1, 8, 1, 1))
    nchw = L.REGISTRY["Elementwise"].case(cfg, L.Job("j", cfg, "fp32", "n"))
    nhwc = L.REGISTRY["Elementwise"].case(cfg, L.Job("j.nhwc", cfg, "fp32", "n", layout="NHWC"))
    # the kernel's collapsed dims, and cudnnOpTensor's (padded to 4)
    assert (nchw.a, nchw.b) == ("{2, 8, 16, 1, 1, 1, 1, 1}", "{1, 8, 1, 1, 1, 1, 1, 1}")
    assert (nchw.ca, nchw.cb) == ("{2, 8, 16, 1, 1}", "{1, 8, 1, 1, 1}")
    assert (nhwc.a, nhwc.b) == ("{32, 8, 1, 1, 1, 1, 1, 1}", "{1, 8, 1, 1, 1, 1, 1, 1}")
    assert (nhwc.ca, nhwc.cb) == ("{32, 8, 1, 1, 1}", "{1, 8, 1, 1, 1}")
    assert '"NHWC"' in nhwc.job and '"NCHW"' in nchw.job


def test_pooling_pads_emulate_ceil_mode():
    cfg = L.PoolingConfig(x=(1, 64, 112, 112), y=(1, 64, 56, 56), mode="max", kernel=(3, 3), pads=(0, 0, 0, 0),
                          strides=(2, 2))
    pads, note = pooling_cudnn_pads(cfg)
    assert pads == [1, 1] and "same output size" in note
    ok = L.PoolingConfig(x=(1, 64, 112, 112), y=(1, 64, 56, 56), mode="max", kernel=(3, 3), pads=(1, 1, 1, 1),
                         strides=(2, 2))
    assert pooling_cudnn_pads(ok) == ([1, 1], "")


def test_collapse_helpers():
    assert collapse_broadcast([32, 64, 56, 56], [1, 64, 1, 1]) == ([32, 64, 3136], [1, 64, 1])
    assert collapse_broadcast([8, 3, 4], [8, 3, 4]) == ([96], [96])
    cat = L.CopyConfig(op="Concat", inputs=((2, 3, 4, 4), (2, 5, 4, 4)), y=(2, 8, 4, 4), attrs=(("axis", (1,)),))
    t0, t1 = cat.transfers()
    assert collapse_transfer(t0) == ([2, 48], [48, 1], [128, 1])
    assert t1.dst_offset == 48


def test_no_benchmarkable_layer_is_a_clear_error(tmp_path):
    ml = process(nothing_to_benchmark_model(tmp_path / "n.onnx"), 1)
    with pytest.raises(UsageError, match="no benchmarkable layer"):
        generate([ml], ["fp32"], tmp_path / "suite")
    assert not (tmp_path / "suite" / "suite.json").exists()


def test_generated_code_reads_as_cpp_with_data_tables(tmp_path, models):
    suite = generate([process(models / "resnet50.onnx", 1)], ["fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "conv.cpp").read_text()
    assert "const ConvCase kCases[] = {" in src and "cudnnConvolutionForward" in src
    assert src.count("Precision::FP16") == sum(1 for j in suite.jobs if j.kind == "Conv")
    manifest = json.loads((tmp_path / "s" / "suite.json").read_text())
    assert {j["job"] for j in manifest["jobs"]} == {j.id for j in suite.jobs}
    again = load_suite(tmp_path / "s")
    assert [j.config for j in again.jobs] == [j.config for j in suite.jobs]


def _build(folder):
    from benanza.build.builder import build

    return build(folder)


@pytest.mark.slow
def test_resnet50_suite_compiles_links_and_lists_its_jobs(tmp_path, models, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    mls = [process(models / "resnet50.onnx", b) for b in (1, 32)]
    suite = generate(mls, ["fp32", "tf32", "fp16"], tmp_path / "r50")
    r = _build(tmp_path / "r50")
    assert r.executable.exists()
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    ids = {json.loads(line)["job"] for line in listed.stdout.splitlines()}
    assert ids == {j.id for j in suite.jobs}
    # linked against the wheels' cuDNN and cuBLAS
    ldd = subprocess.run(["ldd", str(r.executable)], capture_output=True, text=True).stdout
    assert "libcudnn.so.9" in ldd and "libcublas.so" in ldd and "not found" not in ldd
    if not have_gpu():
        run = subprocess.run([str(r.executable)], capture_output=True, text=True)
        assert run.returncode == 3
        assert json.loads(run.stdout.splitlines()[0])["type"] == "fatal"
        assert "no CUDA device" in run.stderr
    # rebuilding an unchanged suite compiles nothing
    again = _build(tmp_path / "r50")
    assert again.compile_s < r.compile_s


@pytest.mark.slow
def test_every_layer_kind_compiles_with_hostile_names(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    model = all_kinds_model(tmp_path / "all.onnx")
    mlp = mlp_model(tmp_path / "mlp.onnx")
    suite = generate([process(model, b) for b in (1, 4)] + [process(mlp, 3)], ["fp32", "tf32", "fp16", "bf16", "fp8"],
                     tmp_path / "all", ["NCHW", "NHWC"])
    assert {j.kind for j in suite.jobs if j.layout == "NHWC"} == {"Conv", "ConvBiasAct", "ConvBnAct", "BatchNorm",
                                                                   "Pooling", "Elementwise"}
    assert {j.kind for j in suite.jobs} == {"Conv", "ConvBiasAct", "ConvBnAct", "Activation", "BatchNorm",
                                             "Pooling", "Softmax", "Elementwise", "Gemm", "LRN", "Dropout",
                                             "Reduce", "Copy", "GemmAct", "Unary"}
    # GemmAct: relu, gelu_tanh and erf gelu, in fp32/tf32/fp16/bf16 (fp8 analysis: the fp16 job)
    acts = {(j.config.activation, j.precision) for j in suite.jobs if j.kind == "GemmAct"}
    assert acts == {(a, p) for a in ("relu", "gelu", "gelu_tanh") for p in ("fp32", "tf32", "fp16", "bf16")}
    conv = (tmp_path / "all" / "src" / "conv.cpp").read_text()
    assert cpp_string(HOSTILE) in conv and "system(\"rm" not in conv.replace('\\"', "")
    gemm_act = (tmp_path / "all" / "src" / "gemmact.cpp").read_text()
    assert "MatmulAct::GELU_TANH, 2}" in gemm_act and "MatmulAct::GELU, 3}" in gemm_act and "MatmulAct::RELU, 1}" in gemm_act
    assert cpp_string(HOSTILE + "fc1") in gemm_act
    assert '"NHWC"' in (tmp_path / "all" / "src" / "batchnorm.cpp").read_text()
    r = _build(tmp_path / "all")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert len(listed.stdout.splitlines()) == len(suite.jobs)


def test_fp8_jobs_are_gemm_jobs_and_the_rest_runs_in_fp16(tmp_path):
    ml = process(gemm_rnn_model(tmp_path / "m.onnx"), 4)
    jobs = plan_jobs([ml], ["fp8"])
    by_kind = {}
    for j in jobs:
        by_kind.setdefault(j.kind, set()).add(j.precision)
    # a GEMM needs its FP8 job and its fp16 one (shapes FP8 does not take, and the faster of both)
    assert by_kind == {"Gemm": {"fp8", "fp16"}, "RNN": {"fp16"}, "Copy": {"fp16"}}
    assert L.precisions_for(L.GemmConfig(m=8, n=16, k=16), ["fp32", "fp8"]) == ["fp32", "fp8", "fp16"]
    assert L.ACCEPTED_DTYPES["fp8"] == ("float8_e4m3", "float16")
    assert parse_precisions("FP8,bf16") == ["fp8", "bf16"]


def test_gemm_and_rnn_cases(tmp_path):
    ml = process(gemm_rnn_model(tmp_path / "m.onnx"), 4)
    gemms = [ly.config for ly in ml.benchmarked() if ly.config.kind == "Gemm"]
    assert [g.bias for g in gemms] == ["c", "c_full", "none"]  # bias vector, scalar C, batched MatMul
    generate([ml], ["fp16"], tmp_path / "s")
    gemm = (tmp_path / "s" / "src" / "gemm.cpp").read_text()
    assert "run_lt_matmul" in gemm and ", 1}," in gemm and ", 2}," in gemm
    rnn = (tmp_path / "s" / "src" / "rnn.cpp").read_text()
    assert cpp_string(HOSTILE) in rnn and cpp_string('gru"*/') in rnn
    assert "CUDNN_LSTM, 12, 4, 32, 48, 1, false, true, false" in rnn
    assert "CUDNN_GRU, 12, 4, 48, 32, 1, true, true, false" in rnn and "linear_before_reset=0" in rnn


@pytest.mark.slow
def test_gemm_and_rnn_compile_in_every_precision_with_hostile_names(tmp_path, harness, monkeypatch):
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    model = gemm_rnn_model(tmp_path / "gr.onnx")
    suite = generate([process(model, b) for b in (1, 8)], list(L.PRECISIONS), tmp_path / "gr")
    assert {(j.kind, j.precision) for j in suite.jobs} >= {("Gemm", p) for p in L.PRECISIONS} | {
        ("RNN", p) for p in ("fp32", "tf32", "fp16", "bf16")}
    assert ("RNN", "fp8") not in {(j.kind, j.precision) for j in suite.jobs}
    gemm = (tmp_path / "gr" / "src" / "gemm.cpp").read_text()
    assert "Precision::FP8" in gemm and "Precision::BF16" in gemm
    r = _build(tmp_path / "gr")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
    ldd = subprocess.run(["ldd", str(r.executable)], capture_output=True, text=True).stdout
    assert "libcublasLt.so" in ldd and "libcudnn.so.9" in ldd and "not found" not in ldd


def test_build_of_a_folder_that_is_not_a_suite(tmp_path):
    with pytest.raises(UsageError, match="not a benanza suite"):
        _build(tmp_path)


COPY_CASES = [  # (config, numpy reference)
    # vit_b_16's attention transposes (torch.onnx export of nn.MultiheadAttention), batch 2
    (L.CopyConfig("Transpose", ((197, 2, 3, 768),), (3, 197, 2, 768), (("perm", (2, 0, 1, 3)),)),
     lambda xs: np.transpose(xs[0], (2, 0, 1, 3))),
    (L.CopyConfig("Transpose", ((197, 24, 64),), (24, 197, 64), (("perm", (1, 0, 2)),)),
     lambda xs: np.transpose(xs[0], (1, 0, 2))),
    (L.CopyConfig("Transpose", ((2, 12, 197, 64),), (2, 12, 64, 197), (("perm", (0, 1, 3, 2)),)),
     lambda xs: np.transpose(xs[0], (0, 1, 3, 2))),
    (L.CopyConfig("Concat", ((2, 3, 4, 4), (2, 5, 4, 4)), (2, 8, 4, 4), (("axis", (1,)),)),
     lambda xs: np.concatenate(xs, axis=1)),
    (L.CopyConfig("Slice", ((1, 8, 6, 6),), (1, 4, 6, 6), (("starts", (0, 4, 0, 0)), ("steps", (1, 1, 1, 1)))),
     lambda xs: xs[0][:, 4:8]),
    (L.CopyConfig("Pad", ((1, 3, 4, 4),), (1, 3, 6, 6), (("pads", (0, 0, 1, 1, 0, 0, 1, 1)),)),
     lambda xs: np.pad(xs[0], ((0, 0), (0, 0), (1, 1), (1, 1)))),
]
COPY_IDS = ["vit-qkv", "vit-heads", "kT", "concat", "slice", "pad"]


def _strided_copy(src: np.ndarray, dst: np.ndarray, t) -> None:
    """What strided_copy (cpp/src/kernels.cu) does with one generated transfer, in numpy: the
    row-major index space of dims[:nd], each index's offsets from the strides."""
    parse = lambda s: [int(v) for v in s.strip("{}").split(",")]  # noqa: E731
    nd = t.nd
    dims = parse(t.dims)[:nd]
    ss, ds = parse(t.src_strides)[:nd], parse(t.dst_strides)[:nd]
    idx = np.indices(dims).reshape(nd, -1)
    so = t.src_offset + (idx * np.array(ss)[:, None]).sum(0)
    do = t.dst_offset + (idx * np.array(ds)[:, None]).sum(0)
    dst[do] = src[so]


@pytest.mark.parametrize("cfg,ref", COPY_CASES, ids=COPY_IDS)
def test_strided_copy_transfers_reproduce_the_op(cfg, ref):
    """The transfers the copy benchmark gives its strided-copy kernel move exactly the op's data."""
    from benanza.kinds import REGISTRY, Job
    _copy_case = REGISTRY["Copy"].case

    case = _copy_case(cfg, Job("j", cfg, "fp32", "n"))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(np.float32) for s in cfg.inputs]
    y = np.zeros(L.numel(cfg.y), np.float32)
    for t in case.transfers:
        _strided_copy(xs[t.src_index].reshape(-1), y, t)
    np.testing.assert_array_equal(y.reshape(cfg.y), ref(xs))



def _planned_copy(src: np.ndarray, dst: np.ndarray, t, es: int) -> dict:
    """What the strided-copy kernel moves for one transfer once plan_strided_copy (strided_copy.hpp)
    has coalesced and vectorized it, in numpy on the bytes; returns the plan."""
    from benanza import _native
    parse = lambda s: [int(v) for v in s.strip("{}").split(",")]  # noqa: E731
    nd = t.nd
    base = 4096  # an aligned allocation, as cudaMalloc's
    plan = _native.plan_strided_copy(parse(t.dims)[:nd], parse(t.src_strides)[:nd], parse(t.dst_strides)[:nd],
                                     es, base + t.src_offset * es, base + t.dst_offset * es)
    u = plan["unit_bytes"]
    idx = np.indices(plan["dims"]).reshape(len(plan["dims"]), -1)
    so = t.src_offset * es + u * (idx * np.array(plan["src_strides"])[:, None]).sum(0)
    do = t.dst_offset * es + u * (idx * np.array(plan["dst_strides"])[:, None]).sum(0)
    sb, db = src.view(np.uint8), dst.view(np.uint8)
    db[(do[:, None] + np.arange(u)).ravel()] = sb[(so[:, None] + np.arange(u)).ravel()]
    return plan


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("cfg,ref", COPY_CASES, ids=COPY_IDS)
def test_strided_copy_plan_moves_the_same_bytes(cfg, ref, dtype):
    """The kernel's plan (dims of extent 1 dropped, contiguous dims merged, 16-byte vectors, tiles)
    moves exactly the op's data, in fp32 and fp16; the vit transposes get the fast paths."""
    from benanza.kinds import REGISTRY, Job
    _copy_case = REGISTRY["Copy"].case

    es = np.dtype(dtype).itemsize
    case = _copy_case(cfg, Job("j", cfg, "fp32", "n"))
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(s).astype(dtype) for s in cfg.inputs]
    y = np.zeros(L.numel(cfg.y), dtype)
    plans = [_planned_copy(xs[t.src_index].reshape(-1), y, t, es) for t in case.transfers]
    np.testing.assert_array_equal(y.reshape(cfg.y), ref(xs))
    if cfg.inputs == ((197, 24, 64),):  # heads: 64 contiguous elements per row, moved as 16-byte vectors
        assert plans[0]["unit_bytes"] == 16 and plans[0]["kind"] == "elementwise" and len(plans[0]["dims"]) == 3
    if cfg.inputs == ((2, 12, 197, 64),):  # K^T: written along the dim read with stride 64: tiled
        assert plans[0]["kind"] == "tiled" and plans[0]["dims"] == [24, 64, 197] and plans[0]["tile_dim"] == 1
    assert all(p["index32"] for p in plans)