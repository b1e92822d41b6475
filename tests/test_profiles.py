"""Framework profiles: the parsers on PyTorch 2.11's real resnet50 trace and cuDNN/cuBLASLt logs
(tests/data/zoo/samples; counts verified by hand with grep and a separate json script), the join with
resnet50_bnkept.onnx (BN kept, as torchvision ran it) and resnet50.onnx (BN folded), malformed
input, the profile folder and the `benanza profile` command's CPU-only parts."""
import collections
import gzip
import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from benanza.cli import app
from benanza.errors import ProfileError
from benanza.profiles import (CATEGORIES, Latency, build_profile, busy_ms, host_bound_stretches, join,

                              launch_gaps, load_profile, read_cublaslt_log, read_cudnn_log, read_trace)

from conftest import envelope_of

TRACE = "pytorch_resnet50_b1_fp32_trace.json.gz"
CUDNN = "pytorch_resnet50_b1_fp32_cudnn_log_head.txt.gz"
LT = "pytorch_resnet50_b1_fp32_cublaslt_log_head.txt.gz"


@pytest.fixture(scope="module")
def samples(shared):
    s = shared / "samples"
    if not (s / TRACE).exists():
        pytest.skip("the test samples (tests/data/zoo/samples) are not available")
    return s


@pytest.fixture(scope="module")
def trace(samples):
    return read_trace(samples / TRACE)


@pytest.fixture(scope="module")
def cudnn(samples):
    return read_cudnn_log(samples / CUDNN)


@pytest.fixture(scope="module")
def lt(samples):
    return read_cublaslt_log(samples / LT)


@pytest.fixture(scope="module")
def bnkept(models):
    from benanza.processing.model import process

    return process(models / "resnet50_bnkept.onnx", 1)


@pytest.fixture(scope="module")
def prof(trace, bnkept, cudnn, lt):
    return build_profile(trace, bnkept, cudnn, lt)


# ------------------------------------------------------------------------------------------ trace

def test_trace_counts(trace):
    assert len(trace.cpu_ops) == 814
    assert len(trace.runtime_calls) == 462          # 432 cuda_runtime + 30 cuda_driver (cuLaunchKernel)
    kinds = collections.Counter(k.kind for k in trace.kernels)
    assert kinds == {"kernel": 237, "memset": 3}
    assert trace.device_name == "NVIDIA H200"
    assert len(trace.iterations) == 1 and len(trace.iterations[0].kernels) == 240  # no iteration marker
    names = [k.name for k in trace.kernels]
    assert sum("nchwToNhwcKernel" in n for n in names) == 35
    assert sum("nhwcToNchwKernel" in n for n in names) == 16
    assert sum("bn_fw_inf_1C11_kernel_NCHW" in n for n in names) == 53
    assert sum("splitKreduce_kernel" in n for n in names) == 8
    assert sum("init_device_workspace_kernel" in n for n in names) == 4
    top = collections.Counter(op.name for op in trace.cpu_ops if op.parent is None)
    assert top["aten::conv2d"] == 53 and top["aten::batch_norm"] == 53 and top["aten::relu_"] == 49
    assert top["aten::add_"] == 16 and top["aten::linear"] == 1


def test_trace_units_and_links(trace):
    first = trace.kernels[0]
    assert first.name.startswith("sm80_xmma_fprop_implicit_gemm_indexed")
    assert first.dur_ms == pytest.approx(0.0184)    # 18.4 us in the trace
    assert first.stream == 7 and first.grid == (2, 392, 1)
    # every GPU activity links to its launch call and a CPU op (by correlation and External id)
    for k in trace.kernels:
        call = trace.launch_of(k)
        assert call is not None and call.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                                   "cudaMemsetAsync")
        assert trace.op_of(k) is not None
    op = trace.op_of(first)
    assert op.name == "aten::cudnn_convolution"
    assert [a.name for a in trace.ancestors(op)] == ["aten::cudnn_convolution", "aten::_convolution",
                                                     "aten::convolution", "aten::conv2d"]
    assert op.input_dims[:2] == ((1, 3, 224, 224), (64, 3, 7, 7))


def test_busy_gaps_and_host_bound(trace):
    ks = trace.kernels_of(trace.iterations[0])
    # one stream, no overlap: the union equals the sum of durations
    assert busy_ms(ks) == pytest.approx(sum(k.dur_ms for k in ks)) == pytest.approx(0.810142)
    gaps = launch_gaps(trace, trace.iterations[0])
    assert len(gaps) == 239
    span = ks[-1].end_ms - ks[0].start_ms
    assert sum(g.gap_ms for g in gaps) == pytest.approx(span - busy_ms(ks))
    assert sum(g.host_bound for g in gaps) == 191   # the launch call began after the GPU went idle
    st = host_bound_stretches(trace, trace.iterations[0])
    assert st and all(s.idle_ms > 0 and s.gaps >= 2 for s in st)
    assert sum(s.idle_ms for s in st) <= sum(g.gap_ms for g in gaps if g.host_bound) + 1e-9
    assert "aten::conv2d" in st[0].ops


def test_busy_ms_counts_overlap_once():
    from benanza.profiles.trace import Kernel

    ks = [Kernel(0, "a", "kernel", 0.0, 1.0, 0, 1, None, None), Kernel(1, "b", "kernel", 0.5, 1.0, 0, 2, None, None),
          Kernel(2, "c", "kernel", 3.0, 0.5, 0, 1, None, None)]
    assert busy_ms(ks) == pytest.approx(2.0)


# -------------------------------------------------------------------------------------- cuDNN log

def test_cudnn_log(cudnn):
    assert cudnn.version == 91900
    assert cudnn.truncated                          # the head ends with a header line only
    assert cudnn.lines == 55353
    assert cudnn.calls["cudnnBackendExecute"] == 21  # 42 "called" lines: entry + exit records
    assert cudnn.calls["cudnnBackendExecuteInternal"] == 21
    graph = cudnn.graph_executions()
    assert len(graph) == 21
    assert {e.engine_id for e in graph} == {0, 1, 28, 35, 38, 46, 48, 70}
    assert len(cudnn.warnings) == 1 and cudnn.warnings[0].startswith("line 201:")
    first = graph[0]
    assert (first.line, first.engine_config) == (26017, "eng28_k2=4_k3=0")
    assert first.knobs == (("TILE_SIZE", 4), ("USE_TEX", 0))
    assert first.operations == ("CONVOLUTION_FORWARD",)
    assert first.x == (1, 3, 224, 224) and first.w == (64, 3, 7, 7) and first.y == (1, 64, 112, 112)
    assert first.pads == (3, 3, 3, 3) and first.strides == (2, 2) and first.dilations == (1, 1)
    assert first.layout == "NCHW" and first.tf32 is True and first.status == "CUDNN_STATUS_SUCCESS"
    # line 28859 logs an empty execution plan: the engine comes from its internal record
    last = graph[-1]
    assert last.line == 28859 and last.engine_config == "eng28_k2=-1_k3=-1"
    legacy = [e for e in cudnn.executions if e.api != "graph"]
    assert [e.api for e in legacy] == ["cudnnBatchNormalizationForwardInference"]
    assert legacy[0].x == (1, 64, 112, 112)


def test_cudnn_legacy_conv_algorithm(tmp_path):
    rec = """I! CuDNN (v91900 56) function cudnnConvolutionForward() called:
i!     handle: type=cudnnHandle_t; streamId=(nil) (defaultStream);
i!     alpha: type=CUDNN_DATA_FLOAT; val=1.000000;
i!     xDesc: type=cudnnTensorDescriptor_t:
i!         dataType: type=cudnnDataType_t; val=CUDNN_DATA_HALF (2);
i!         nbDims: type=int; val=4;
i!         dimA: type=int; val=[32,256,14,14];
i!         strideA: type=int; val=[50176,1,3584,256];
i!     wDesc: type=cudnnFilterDescriptor_t:
i!         dataType: type=cudnnDataType_t; val=CUDNN_DATA_HALF (2);
i!         nbDims: type=int; val=4;
i!         dimA: type=int; val=[256,256,3,3];
i!     convDesc: type=cudnnConvolutionDescriptor_t:
i!         mode: type=cudnnConvolutionMode_t; val=CUDNN_CROSS_CORRELATION (1);
i!         dataType: type=cudnnDataType_t; val=CUDNN_DATA_FLOAT (0);
i!         mathType: type=cudnnMathType_t; val=CUDNN_TENSOR_OP_MATH (1);
i!         arrayLength: type=int; val=2;
i!         padA: type=int; val=[1,1];
i!         strideA: type=int; val=[1,1];
i!         dilationA: type=int; val=[1,1];
i!         groupCount: type=int; val=1;
i!     algo: type=cudnnConvolutionFwdAlgo_t; val=CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM (1);
i!     workSpaceSizeInBytes: type=size_t; val=4096;
i! Time: 2026-11-21T13:07:56.561016 (0d+0h+0m+1s since start)
i! Process=729; Thread=729; GPU=0; Handle=0x263b46e0; StreamId=(nil) (defaultStream).

"""
    f = tmp_path / "legacy.log"
    f.write_text(rec)
    log = read_cudnn_log(f)
    assert not log.truncated
    (e,) = log.executions
    assert e.api == "cudnnConvolutionForward"
    assert e.engine_config == e.algorithm == "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM"
    assert e.math_type == "CUDNN_TENSOR_OP_MATH" and e.data_type == "CUDNN_DATA_HALF"
    assert e.layout == "NHWC" and e.pads == (1, 1, 1, 1) and e.workspace_bytes == 4096
    assert e.conv_key == ((32, 256, 14, 14), (256, 256, 3, 3), (1, 1, 1, 1), (1, 1), (1, 1), 1)
    # a depthwise convolution: the group count follows from the filter (the graph API logs none)
    f.write_text(rec.replace("[256,256,3,3]", "[256,1,3,3]").replace("groupCount: type=int; val=1;", ""))
    assert read_cudnn_log(f).executions[0].groups == 256


# ----------------------------------------------------------------------------------- cuBLASLt log

def test_cublaslt_log(lt):
    assert lt.version == "13.1"
    assert not lt.truncated and lt.lines == 1499
    assert len(lt.matmuls) == 93 and lt.calls["cublasLtMatmul"] == 93
    assert len(lt.heuristic_results) == 39
    assert lt.heuristic_results[0] == (21, 21, 21, 23, 23, 23, 55, 23)
    assert sum(m.compute_type == "COMPUTE_32F_FAST_TF32" for m in lt.matmuls) == 90
    fc = lt.matmuls[-1]                             # the classifier: 2048 -> 1000, batch 1
    assert (fc.m, fc.n, fc.k, fc.batch) == (1000, 1, 2048, 1)
    assert fc.transa == "OP_T" and fc.epilogue == "EPILOGUE_BIAS" and fc.compute_type == "COMPUTE_32F"
    assert fc.algorithm == "algo13 custom=75" and fc.algo_id == 13 and fc.tensor_core is False
    assert fc.workspace_bytes == 1048576
    split = [m for m in lt.matmuls if dict(m.algo).get("numSplitsK") == "5"][0]
    assert split.algorithm == "algo21 tile=64x128 stages=32x3 splitK=5 reduction=COMPUTE_TYPE"
    assert split.a.batch_stride == 401408 and split.tensor_core is True


# ------------------------------------------------------------------------------------------- join

def test_join_resnet50_bnkept(trace, bnkept):
    r = join(trace, bnkept)
    assert len(r.ops) == 175 and all(o.layer is not None for o in r.ops)   # every framework op has a layer
    assert r.unmatched_layers == ((),)
    assert len({o.layer for o in r.ops}) == 175
    cats = collections.Counter(k.category for k in r.kernels)
    assert cats == {"layer": 182, "layout": 51, "fill": 7}
    layers = bnkept.layers
    # layout conversions: cuDNN's NCHW<->NHWC transforms around the NHWC engines of 19 convolutions
    lay = [k for k in r.kernels if k.category == "layout"]
    assert collections.Counter(k.role for k in lay) == {"NCHW->NHWC": 35, "NHWC->NCHW": 16}
    assert {layers[k.layer].op_type for k in lay} == {"Conv"} and len({k.layer for k in lay}) == 19
    # batch norms run unfused: one cuDNN kernel per BatchNormalization layer, right after its conv
    bn = [k for k in r.kernels if k.layer is not None and layers[k.layer].op_type == "BatchNormalization"]
    assert len(bn) == 53 and len({k.layer for k in bn}) == 53
    assert all("bn_fw_inf" in k.name and k.library == "cudnn" and k.category == "layer" for k in bn)
    # every conv layer is joined to a kernel that computes it
    conv_layers = {ly.index for ly in layers if ly.op_type == "Conv"}
    computing = {k.layer for k in r.kernels if k.category == "layer"}
    assert len(conv_layers) == 53 and conv_layers <= computing
    by_lib = collections.Counter(k.library for k in r.kernels if k.category == "layer" and k.layer in conv_layers)
    assert by_lib == {"cudnn": 20, "cublas": 41}    # 41 = 33 cuBLASLt GEMM kernels + 8 split-K reductions
    fills = collections.Counter(k.role or k.library for k in r.kernels if k.category == "fill")
    assert fills == {"workspace init": 4, "memset": 3}
    fc = [k for k in r.kernels if k.layer == 174]
    assert len(fc) == 1 and "gemvx" in fc[0].name and fc[0].api == "cublas" and fc[0].op == "aten::linear"
    relu = [k for k in r.kernels if k.layer is not None and layers[k.layer].op_type == "Relu"]
    assert len(relu) == 49 and all(k.library == "native" for k in relu)
    # data flow decides between identical layers: the bottleneck's conv3 before its downsample conv
    conv_ops = [o for o in r.ops if o.name == "aten::conv2d"]
    assert [layers[o.layer].name for o in conv_ops[3:5]] == ["/layer1/layer1.0/conv3/Conv",
                                                             "/layer1/layer1.0/downsample/downsample.0/Conv"]


def test_join_resnet50_bn_folded(trace, models):
    """The ONNX model has BN folded into the convs; PyTorch ran them: their kernels are extra."""
    from benanza.processing.model import process

    ml = process(models / "resnet50.onnx", 1)
    p = build_profile(trace, ml)
    assert p.unmatched_ops == {"aten::batch_norm": 53}
    assert p.unmatched_layers == ()
    counts = p.category_counts()
    assert counts["unfused_batch_norm"] == 53 and counts["layout"] == 51
    assert p.category_ms()["unfused_batch_norm"] == pytest.approx(
        sum(k.dur_ms for k in trace.kernels if "bn_fw_inf" in k.name))
    assert any(u.kind == "framework_batch_norm" for u in p.unfused())


def test_profile_model(prof, trace, bnkept):
    assert prof.gpu_kernel_ms == pytest.approx(0.810142)
    assert prof.latency is None and prof.host_overhead_ms is None
    with pytest.raises(ProfileError, match="no measured latency"):
        prof.benanza_ratio(0.5)
    assert set(prof.category_ms()) == set(CATEGORIES)
    assert sum(prof.category_ms().values()) == pytest.approx(prof.gpu_kernel_ms)
    # per-layer time adds up to the kernel time that the layers' ops launched (everything here)
    assert sum(lp.total_ms for lp in prof.layers) == pytest.approx(prof.gpu_kernel_ms)
    conv2 = prof.layers[7]                          # layer1.0.conv2: 3x3, an NHWC engine
    assert conv2.name == "/layer1/layer1.0/conv2/Conv" and conv2.op == "aten::conv2d"
    assert len(conv2.kernels) == 4 and conv2.layout_ms == pytest.approx(0.001920 + 0.002208 + 0.001888)
    assert conv2.kernel_ms == pytest.approx(0.007776)
    # Q3: the engine PyTorch's autotuner settled on for conv1 (the only conv in the log's head)
    assert set(prof.conv_engines) == {0}
    e = prof.conv_engines[0]
    assert e.engine_config == "eng28_k2=-1_k3=-1" and e.engine_id == 28 and e.executions == 3
    assert len(e.candidates) == 10 and e.candidates[0] == "eng28_k2=4_k3=0"
    assert e.tf32 is True and e.layout == "NCHW" and e.api == "graph"
    # cuBLASLt algorithms: the classifier, and 1x1 convs that cuDNN computes with cuBLASLt
    assert prof.gemm_algos[174].algorithm == "algo13 custom=75" and prof.gemm_algos[174].via == "gemm"
    g = prof.gemm_algos[10]                         # layer1.0.conv3, 64 -> 256, 56x56
    assert g.via == "cudnn" and g.algorithm == "algo21 tile=128x64 stages=16x6"
    assert "128x64_16x6" in prof.layers[10].kernels[0]   # the algorithm the trace's kernel names
    assert len(prof.gemm_algos) == 34               # 33 1x1 stride-1 convs + the classifier
    unf = prof.unfused()
    assert collections.Counter(u.kind for u in unf) == {"batch_norm_after_conv": 53}
    assert sum(u.ms for u in unf) == pytest.approx(
        sum(k.dur_ms for k in trace.kernels if "bn_fw_inf" in k.name))
    d = json.loads(json.dumps(prof.to_dict(), default=str))
    assert d["category_counts"]["layout"] == 51 and len(d["kernels"]) == 240
    assert any("truncated" in n for n in prof.notices)


def test_profile_with_latency(trace, bnkept):
    lat = Latency.from_samples([2.0, 2.1, 1.9, 2.0, 5.0])
    p = build_profile(trace, bnkept, latency=lat)
    assert lat.median_ms == 2.0 and lat.q1_ms == pytest.approx(2.0) and lat.q3_ms == pytest.approx(2.1)
    assert lat.iqr_ms == pytest.approx(np.percentile([2.0, 2.1, 1.9, 2.0, 5.0], 75) - 2.0)
    assert p.host_overhead_ms == pytest.approx(2.0 - 0.810142)
    assert p.benanza_ratio(1.6) == pytest.approx(0.8)
    with pytest.raises(ProfileError):
        Latency.from_samples([])
    with pytest.raises(ProfileError):
        Latency.from_samples([1.0, float("nan")])


# ---------------------------------------------------------------------------------- malformed input

def _raw(samples, name) -> bytes:
    return gzip.decompress((samples / name).read_bytes())


def test_trace_truncated_and_malformed(samples, tmp_path):
    raw = _raw(samples, TRACE)
    f = tmp_path / "cut.json"
    f.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ProfileError, match=r"cut\.json: line \d+ column \d+: truncated JSON"):
        read_trace(f)
    g = tmp_path / "cut.json.gz"
    g.write_bytes((samples / TRACE).read_bytes()[:20000])
    with pytest.raises(ProfileError, match="truncated or corrupt gzip"):
        read_trace(g)
    doc = json.loads(raw)
    kernel_at = next(i for i, e in enumerate(doc["traceEvents"]) if e.get("cat") == "kernel")
    del doc["traceEvents"][kernel_at]["ts"]
    text = json.dumps(doc).replace("}, {", "},\n{")   # one event per line, as Kineto writes
    h = tmp_path / "nots.json"
    h.write_text(text)
    with pytest.raises(ProfileError, match=r"nots\.json: line \d+: kernel event .* has no valid numeric ts/dur"):
        read_trace(h)
    for body, msg in (('{"a": 1}', "no traceEvents"), ('{"traceEvents": []}', "no CPU ops and no GPU kernels"),
                      ("\x00\x01binary", "not valid|malformed|not UTF-8")):
        b = tmp_path / "bad.json"
        b.write_text(body)
        with pytest.raises(ProfileError, match=msg):
            read_trace(b)
    with pytest.raises(ProfileError, match="no such file"):
        read_trace(tmp_path / "missing.json")


def test_cudnn_log_truncated_and_malformed(samples, tmp_path):
    lines = _raw(samples, CUDNN).decode().split("\n")
    # cut inside the record of the 2nd execution (its header is at line 26134)
    f = tmp_path / "cut.log"
    f.write_text("\n".join(lines[:26150]))
    log = read_cudnn_log(f)
    assert log.truncated and len(log.graph_executions()) == 1
    # a gzip stream cut short is a truncated log, not an error
    g = tmp_path / "cut.log.gz"
    g.write_bytes((samples / CUDNN).read_bytes()[:30000])
    assert read_cudnn_log(g).truncated
    bad = list(lines[:30])
    bad.insert(12, "garbage in the middle")
    h = tmp_path / "bad.log"
    h.write_text("\n".join(bad) + "\n")
    with pytest.raises(ProfileError, match=r"bad\.log: line 13: unexpected text 'garbage in the middle'"):
        read_cudnn_log(h)
    # a record that starts before the previous one ended
    k = tmp_path / "interleaved.log"
    k.write_text("\n".join(lines[1:3] + lines[6:12]) + "\n")
    with pytest.raises(ProfileError, match=r"line 3: new record before the end of cudnnGetVersion \(line 1\)"):
        read_cudnn_log(k)
    # cuDNN 9.19 continues some warnings on a line of their own, without the "i! " prefix (seen on
    # an H200 with PyTorch 2.11): part of the record, not a malformed log
    rec = [i for i, x in enumerate(lines) if x.startswith("I! CuDNN")][3]
    cont = list(lines)
    cont.insert(rec + 2, " at: 0 == newResults")
    c = tmp_path / "continued.log"
    c.write_text("\n".join(cont))
    full = read_cudnn_log(samples / CUDNN)
    got = read_cudnn_log(c)
    assert len(got.executions) == len(full.executions) and got.truncated == full.truncated
    j = tmp_path / "notcudnn.log"
    j.write_text("hello\nworld\n")
    with pytest.raises(ProfileError, match=r"notcudnn\.log: line 1: not a cuDNN API log"):
        read_cudnn_log(j)
    e = tmp_path / "empty.log"
    e.write_text("")
    with pytest.raises(ProfileError, match="empty file"):
        read_cudnn_log(e)


def test_cublaslt_log_truncated_and_malformed(samples, tmp_path):
    raw = _raw(samples, LT).decode()
    lines = raw.split("\n")
    last_mm = max(i for i, ln in enumerate(lines) if "[Trace][cublasLtMatmul]" in ln)
    f = tmp_path / "cut.log"
    f.write_text("\n".join(lines[:last_mm]) + "\n" + lines[last_mm][:200])   # cut mid-line
    log = read_cublaslt_log(f)
    assert log.truncated and len(log.matmuls) == 92
    bad = list(lines)
    bad[last_mm] = bad[last_mm].replace("computeDesc=[", "computeDescX=[")
    h = tmp_path / "bad.log"
    h.write_text("\n".join(bad))
    with pytest.raises(ProfileError, match=rf"bad\.log: line {last_mm + 1}: malformed cublasLtMatmul Trace line"):
        read_cublaslt_log(h)
    bad = list(lines)
    bad[5] = "not a log line"
    h.write_text("\n".join(bad))
    with pytest.raises(ProfileError, match=r"line 6: unexpected text 'not a log line'"):
        read_cublaslt_log(h)
    j = tmp_path / "other.log"
    j.write_text("I! CuDNN (v91900 56) function cudnnCreate() called:\n")
    with pytest.raises(ProfileError, match="line 1: not a cuBLASLt log"):
        read_cublaslt_log(j)


# ---------------------------------------------------------------------------------- profile folder

def _sample_folder(samples, tmp_path, **extra):
    d = tmp_path / "prof"
    d.mkdir()
    shutil.copy(samples / TRACE, d / "trace.json.gz")
    shutil.copy(samples / CUDNN, d / "cudnn.log.gz")
    shutil.copy(samples / LT, d / "cublaslt.log.gz")
    doc = {"format": "benanza-profile", "version": 1, "batch": 1, "dtype": "fp32",
           "files": {"trace": "trace.json.gz", "cudnn_log": "cudnn.log.gz", "cublaslt_log": "cublaslt.log.gz"},
           "settings": {"framework": "pytorch", "framework_version": "2.11.0", "cudnn_benchmark": True,
                        "allow_tf32_matmul": False, "allow_tf32_cudnn": True}}
    doc.update(extra)
    (d / "profile.json").write_text(json.dumps(doc))
    return d


def test_load_profile_folder(samples, models, tmp_path):
    d = _sample_folder(samples, tmp_path, latency={"samples_ms": [3.0, 3.2, 3.1]})
    p = load_profile(d, models / "resnet50_bnkept.onnx")
    assert p.latency.median_ms == pytest.approx(3.1) and p.latency.samples == 3
    assert p.settings.gpu_name == "NVIDIA H200" and p.settings.cudnn_benchmark is True
    assert p.category_counts()["layout"] == 51 and 0 in p.conv_engines
    with pytest.raises(ProfileError, match="taken at batch 1, not 32"):
        load_profile(d, models / "resnet50_bnkept.onnx", batch=32)
    with pytest.raises(ProfileError, match="no model_path"):
        load_profile(d)


@pytest.mark.parametrize("doc,msg", [
    ("{", r"profile\.json: line 1 column 2: not valid JSON"),
    ('{"format": "other"}', "not a benanza profile"),
    ('{"format": "benanza-profile", "version": 9, "batch": 1}', "newer than this benanza reads"),
    ('{"format": "benanza-profile", "batch": 0}', "batch.*positive integer"),
    ('{"format": "benanza-profile", "batch": 1, "latency": {"samples_ms": ["x"]}, "files": {"trace": "t.json"}}',
     "no such file"),
])
def test_profile_json_errors(tmp_path, models, doc, msg):
    (tmp_path / "profile.json").write_text(doc)
    with pytest.raises(ProfileError, match=msg):
        load_profile(tmp_path, models / "resnet50_bnkept.onnx")


def test_profile_folder_missing(tmp_path, models):
    with pytest.raises(ProfileError, match="no such profile folder"):
        load_profile(tmp_path / "nope", models / "resnet50_bnkept.onnx")
    with pytest.raises(ProfileError, match="profile.json: no such file"):
        load_profile(tmp_path, models / "resnet50_bnkept.onnx")


# ------------------------------------------------------------------------------------ the command

runner = CliRunner()


def test_cli_profile_from_folder(samples, models, tmp_path):
    d = _sample_folder(samples, tmp_path, latency={"median_ms": 4.0})
    model = str(models / "resnet50_bnkept.onnx")
    r = runner.invoke(app, ["profile", model, "--from", str(d)])
    assert r.exit_code == 0, r.output
    assert "175 of 175 layers matched a framework op" in r.output
    assert "kernels: layout" in r.output and "51 kernels per iteration" in r.output
    assert "batch_norm_after_conv x53" in r.output
    r = runner.invoke(app, ["profile", model, "--from", str(d), "--json"])
    assert r.exit_code == 0
    doc = envelope_of(r.stdout, "profile")
    assert doc["category_counts"]["fill"] == 7 and doc["host_overhead_ms"] == pytest.approx(4.0 - 0.810142)


@pytest.mark.parametrize("args,msg", [
    (["--from", "{tmp}/nope"], "no such profile folder"),
    (["--from", "{tmp}", "-o", "{tmp}/x"], "--from reads a profile and -o writes one"),
    (["--dtype", "fp8", "-o", "{tmp}/x"], "unknown data type 'fp8'"),
    (["--batch", "0", "-o", "{tmp}/x"], "batch size must be positive"),
    (["--device", "gpu", "-o", "{tmp}/x"], "--device must be cuda, cuda:N or cpu"),
    (["--runs", "0", "-o", "{tmp}/x"], "--runs must be at least 1"),
    (["--device", "cpu", "--dtype", "tf32", "-o", "{tmp}/x"], "tf32 needs a CUDA device"),
])
def test_cli_profile_errors(models, tmp_path, args, msg):
    args = [a.format(tmp=tmp_path) for a in args]
    r = runner.invoke(app, ["profile", str(models / "resnet50_bnkept.onnx")] + args)
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert line.startswith("benanza: ") and "\n" not in line and msg in line and "Traceback" not in r.output


def test_cli_profile_bad_model(tmp_path):
    m = tmp_path / "bad.onnx"
    m.write_bytes(b"not onnx")
    r = runner.invoke(app, ["profile", str(m), "-o", str(tmp_path / "p")])
    assert r.exit_code == 2 and "not an ONNX model" in r.output
    assert not (tmp_path / "p").exists()


def test_cli_profile_without_torch(models, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    r = runner.invoke(app, ["profile", str(models / "resnet50_bnkept.onnx"), "-o", str(tmp_path / "p")])
    assert r.exit_code == 2 and "PyTorch is not installed" in r.output


def test_capture_refuses_to_overwrite(models, tmp_path):
    from benanza.errors import UsageError
    from benanza.profiles import capture_profile

    (tmp_path / "profile.json").write_text("{}")
    with pytest.raises(UsageError, match="already holds a profile"):
        capture_profile(models / "resnet50_bnkept.onnx", 1, "fp32", tmp_path, device="cpu")


def test_log_environment(tmp_path):
    from benanza.profiles.capture import log_environment, timed_environment

    env = log_environment(tmp_path, {"PATH": "/bin", "CUDNN_LOGLEVEL_DBG": "0"})
    assert env["CUDNN_LOGLEVEL_DBG"] == "3" and env["CUDNN_LOGDEST_DBG"] == str(tmp_path / "cudnn.log")
    assert env["CUBLASLT_LOG_LEVEL"] == "5" and env["CUBLASLT_LOG_FILE"] == str(tmp_path / "cublaslt.log")
    clean = timed_environment(env)
    assert clean == {"PATH": "/bin"}
