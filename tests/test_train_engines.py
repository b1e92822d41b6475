"""The training step's cudnn.benchmark what-if (issue 26, item 3): the cuDNN log's convolution
backward calls (benanza/profiles/cudnn_log.py), their join to a layer's data and filter gradient
(benanza/profiles/train_join.py, conv_backward_engines) and the engine cost per call from database
rows (benanza/analysis/train_whatif.py, engine_costs and step 3 of compose_step).

The cuDNN logs here are WRITTEN, not recorded: the repository's recorded training run
(tests/data/traces/resnet18_train_b2_fp32) kept its trace but not its cuDNN log. Their records
follow, line for line, the records cuDNN 9.19 wrote under PyTorch 2.11 (shared/samples'
pytorch_resnet50_b1_fp32_cudnn_log_head.txt.gz: ``cudnnBackendExecute`` with its execution plan,
the ``cudnnBackendExecuteInternal`` record and the exit record with its status; the legacy
``cudnnBatchNormalizationForwardInference`` record for a legacy call's layout: handle, descriptors
followed by their ``...Data: location=dev; addr=...;`` pointers, no exit record) and cuDNN's API
logging documentation (NVIDIA cuDNN, Troubleshooting: Error Reporting and API Logging). What the
sample has no example of is named after the cuDNN API: the legacy calls' arguments as
cudnn_cnn.h names the parameters of cudnnConvolutionBackwardData (wDesc, dyDesc, convDesc, algo,
workSpaceSizeInBytes, dxDesc) and cudnnConvolutionBackwardFilter (xDesc, dyDesc, convDesc, algo,
dwDesc), the graph operations' tensors after their attributes (CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX
/ _W / _DY, ..._BWD_FILTER_X / _DY / _DW: dxDesc, wDesc, dyDesc; xDesc, dyDesc, dwDesc), and the
internal records' operation as CONV_BWD_DATA / CONV_BWD_FILTER after the forward's CONV_FORWARD.
"""
import gzip
import json
import shutil
import types
from pathlib import Path

import pytest

from test_train_whatif import MODEL, TRACE, _cmp, _step, _sums_exactly

DATA = Path(__file__).parent / "data" / "traces"
_T = 0


@pytest.fixture(scope="module")
def joined():
    """resnet18's recorded training step (batch 2, fp32) joined with its export, as
    tests/test_train_whatif.py joins it."""
    from benanza.processing.model import process
    from benanza.profiles.join import layer_paths, trace_has_scopes
    from benanza.profiles.trace import read_trace
    from benanza.profiles.train_join import train_join

    ml = process(MODEL, 2)
    tr = read_trace(TRACE)
    return ml, train_join(tr, ml, layer_paths(ml, MODEL) if trace_has_scopes(tr) else None)


def _trailer(thread=729, gpu=True):
    global _T
    _T += 1
    where = "GPU=0; Handle=0x263b46e0; StreamId=(nil) (defaultStream)" if gpu else \
        "GPU=NULL; Handle=NULL; StreamId=NULL"
    return [f"i! Time: 2026-11-26T10:30:{10 + _T // 1000000:02d}.{_T % 1000000:06d} (0d+0h+0m+1s since start)",
            f"i! Process=729; Thread={thread}; {where}.", "", ""]


def _strides(dims):
    s, out = 1, []
    for d in reversed(dims):
        out.append(s)
        s *= d
    return list(reversed(out))


def _l(xs):
    return "[" + ",".join(str(int(v)) for v in xs) + "]"


def _backend_tensor(name, dims, uid, ind):
    p = "i! " + " " * ind
    return [f"{p}{name}: type=CUDNN_BACKEND_TENSOR_DESCRIPTOR:",
            f"{p}    type: type=cudnnDataType_t; val=CUDNN_DATA_FLOAT (0);",
            f"{p}    nbDims: type=int; val={len(dims)};",
            f"{p}    dimA: type=int; val={_l(dims)};",
            f"{p}    strideA: type=int; val={_l(_strides(dims))};",
            f"{p}    uid: type=int64_t; val={uid};",
            f"{p}    alignmentInBytes: type=int64_t; val=32;",
            f"{p}    isVirtual: type=bool; val=false;",
            f"{p}    isByVal: type=bool; val=false;"]


def _legacy_tensor(name, dims, ind=4, filt=False):
    p = "i! " + " " * ind
    head = [f"{p}{name}: type={'cudnnFilterDescriptor_t' if filt else 'cudnnTensorDescriptor_t'}:",
            f"{p}    dataType: type=cudnnDataType_t; val=CUDNN_DATA_FLOAT (0);"]
    if filt:
        return head + [f"{p}    vect: type=int; val=0;", f"{p}    nbDims: type=int; val={len(dims)};",
                       f"{p}    dimA: type=int; val={_l(dims)};",
                       f"{p}    format: type=cudnnTensorFormat_t; val=CUDNN_TENSOR_NCHW (0);"]
    return head + [f"{p}    nbDims: type=int; val={len(dims)};", f"{p}    dimA: type=int; val={_l(dims)};",
                   f"{p}    strideA: type=int; val={_l(_strides(dims))};"]


def _legacy_conv_desc(c, ind=4):
    p = "i! " + " " * ind
    nsp = len(c["strides"])
    return [f"{p}convDesc: type=cudnnConvolutionDescriptor_t:",
            f"{p}    mode: type=cudnnConvolutionMode_t; val=CUDNN_CROSS_CORRELATION (1);",
            f"{p}    dataType: type=cudnnDataType_t; val=CUDNN_DATA_FLOAT (0);",
            f"{p}    mathType: type=cudnnMathType_t; val=CUDNN_DEFAULT_MATH (0);",
            f"{p}    reorderType: type=int; val=0;",
            f"{p}    arrayLength: type=int; val={nsp};",
            f"{p}    padA: type=int; val={_l(c['pads'][:nsp])};",
            f"{p}    strideA: type=int; val={_l(c['strides'])};",
            f"{p}    dilationA: type=int; val={_l(c['dilations'])};",
            f"{p}    groupCount: type=int; val={c['group']};"]


_HANDLE = ["i!     handle: type=cudnnHandle_t:",
           "i!         streamId: type=cudaStream_t; streamId=(nil) (defaultStream);",
           "i!         deviceProp: type=CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR:",
           "i!             deviceName: type=string; val=\"NVIDIA H100 80GB HBM3\";",
           "i!             cudaDeviceId: type=int; val=0;",
           "i!             deviceVer: type=int; val=900;",
           "i!             multiProcessorCount: type=int; val=132;",
           "i!             driverVer: type=int; val=13000;",
           "i!             maxSharedMemoryPerBlockOptin: type=int; val=232448;",
           "i!             totalGlobalMem: type=size_t; val=84929216512;"]


def graph_records(direction, c, engine_id, knobs, thread=729):
    """A graph-API execution of a convolution's ``direction`` (``forward``, ``backward_data``,
    ``backward_filter``) of problem ``c`` (x, w, y, pads, strides, dilations, group): the
    ``cudnnBackendExecute`` record, its ``cudnnBackendExecuteInternal`` record and the exit record."""
    op, names, internal = {
        "forward": ("FORWARD", (("xDesc", "x"), ("wDesc", "w"), ("yDesc", "y")), "CONV_FORWARD"),
        "backward_data": ("BACKWARD_DATA", (("dxDesc", "x"), ("wDesc", "w"), ("dyDesc", "y")), "CONV_BWD_DATA"),
        "backward_filter": ("BACKWARD_FILTER", (("xDesc", "x"), ("dwDesc", "w"), ("dyDesc", "y")),
                            "CONV_BWD_FILTER")}[direction]
    nsp = len(c["strides"])
    lines = ["I! CuDNN (v91900 56) function cudnnBackendExecute() called:", *_HANDLE,
             "i!     executionPlan: type=CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:",
             "i!         engcfg: type=CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:",
             "i!             engine: type=CUDNN_BACKEND_ENGINE_DESCRIPTOR:",
             "i!                 opGraph: type=CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:",
             f"i!                     operation: type=CUDNN_BACKEND_OPERATION_CONVOLUTION_{op}_DESCRIPTOR:"]
    tens = {n: _backend_tensor(n, c[k], 100 + i, 24) for i, (n, k) in enumerate(names)}
    lines += tens[names[0][0]] + tens[names[1][0]]
    p = "i!                         "
    lines += [f"{p}convDesc: type=CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR:",
              f"{p}    computeType: type=cudnnDataType_t; val=CUDNN_DATA_FLOAT (0);",
              f"{p}    mode: type=cudnnConvolutionMode_t; val=CUDNN_CROSS_CORRELATION (1);",
              f"{p}    nbDims: type=int; val={nsp};",
              f"{p}    upperPadA: type=int; val={_l(c['pads'][nsp:])};",
              f"{p}    lowerPadA: type=int; val={_l(c['pads'][:nsp])};",
              f"{p}    strideA: type=int; val={_l(c['strides'])};",
              f"{p}    dilationA: type=int; val={_l(c['dilations'])};"]
    lines += tens[names[2][0]] + [f"{p}alpha: type=float; val=1;", f"{p}beta: type=float; val=0;",
                                  f"i!                 engine_id: type=int; val={engine_id};",
                                  "i!                 knobDesc: type=cudnnBackendDescriptor_t:"]
    lines += [f"i!                     CUDNN_KNOB_TYPE_{k}: type=int; val={v};" for k, v in knobs]
    lines += ["i!                 numericalNotes: type=cudnnBackendDescriptor_t; val=NULL_PTR;",
              "i!                 behaviorNotes: type=cudnnBackendDescriptor_t; val=NULL_PTR;",
              "i!                 deviceProp: type=cudnnBackendDescriptor_t; val=NULL_PTR;",
              "i!     variantPack: type=CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:",
              "i!         Uid=100: location=dev; addr=0x7f3723400000;",
              "i!         Uid=101: location=dev; addr=0x7f3503e00000;",
              "i!         Uid=102: location=dev; addr=0x7f3722bd0000;",
              "i!         Workspace: location=dev; addr=0x7f3722ee0000;", *_trailer(thread)]
    lines += ["I! CuDNN (v91900 56) function cudnnBackendExecuteInternal() called:",
              "i!     enable_tf32: type=bool; val=true;",
              f"i!     operation: type=internalType; val={internal};"]
    for n, k in names:
        lines += _legacy_tensor(n, c[k], filt=k == "w")
    lines += _legacy_conv_desc(c)
    lines += ["i!     alpha: type=CUDNN_DATA_FLOAT; val=1.000000;", "i!     beta: type=CUDNN_DATA_FLOAT; val=0.000000;",
              f"i!     engine_id: type=int; val={engine_id};", "i!     target_sm_count: type=int; val=0;",
              "i!     knobDesc: type=cudnnBackendDescriptor_t:"]
    lines += [f"i!         CUDNN_KNOB_TYPE_{k}: type=int; val={v};" for k, v in knobs]
    lines += ["i!     numericalNotes: type=cudnnBackendDescriptor_t; val=NULL_PTR;",
              "i!     behaviorNotes: type=cudnnBackendDescriptor_t; val=NULL_PTR;", *_trailer(thread)]
    lines += ["I! CuDNN (v91900 56) function cudnnBackendExecute() called:",
              "i!     status: type=cudnnStatus_t; val=CUDNN_STATUS_SUCCESS (0);", *_trailer(thread, gpu=False)]
    return lines


def legacy_record(direction, c, algo, workspace=1048576, thread=729):
    """A legacy ``cudnnConvolutionBackwardData`` (``direction`` ``backward_data``, ``algo`` e.g.
    ``ALGO_1``) or ``cudnnConvolutionBackwardFilter`` record of problem ``c``, its arguments in
    the API's order."""
    data = direction == "backward_data"
    fn = "cudnnConvolutionBackwardData" if data else "cudnnConvolutionBackwardFilter"
    enum = ("CUDNN_CONVOLUTION_BWD_DATA_" if data else "CUDNN_CONVOLUTION_BWD_FILTER_") + \
        (algo if algo.startswith("ALGO_") else f"ALGO_{algo}")
    num = {"ALGO_0": 0, "ALGO_1": 1, "FFT": 2, "ALGO_3": 3, "FFT_TILING": 3, "WINOGRAD": 4,
           "WINOGRAD_NONFUSED": 5}.get(algo, 0)
    first = _legacy_tensor("wDesc", c["w"], filt=True) + ["i!     wData: location=dev; addr=0x7f3503e00000;"] \
        if data else _legacy_tensor("xDesc", c["x"]) + ["i!     xData: location=dev; addr=0x7f3723400000;"]
    last = _legacy_tensor("dxDesc", c["x"]) + ["i!     dxData: location=dev; addr=0x7f3722ee0000;"] if data \
        else _legacy_tensor("dwDesc", c["w"], filt=True) + ["i!     dwData: location=dev; addr=0x7f3503f00000;"]
    return [f"I! CuDNN (v91900 56) function {fn}() called:", *_HANDLE,
            "i!     alpha: type=CUDNN_DATA_FLOAT; val=1.000000;", *first,
            *_legacy_tensor("dyDesc", c["y"]), "i!     dyData: location=dev; addr=0x7f3722bd0000;",
            *_legacy_conv_desc(c),
            f"i!     algo: type={'cudnnConvolutionBwdDataAlgo_t' if data else 'cudnnConvolutionBwdFilterAlgo_t'}; "
            f"val={enum} ({num});",
            "i!     workSpace: location=dev; addr=0x7f3722f00000;",
            f"i!     workSpaceSizeInBytes: type=size_t; val={workspace};",
            "i!     beta: type=CUDNN_DATA_FLOAT; val=0.000000;", *last, *_trailer(thread)]


def _problem(cfg):
    return {"x": cfg.x, "w": cfg.w, "y": cfg.output_shape(), "pads": cfg.pads, "strides": cfg.strides,
            "dilations": cfg.dilations, "group": cfg.group}


def _write(path, lines):
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        Path(path).write_text(text)
    return path


# ------------------------------------------------------------------------------------ the parser

def test_the_log_records_of_backward_convolutions(tmp_path):
    from benanza.profiles.cudnn_log import legacy_algorithm, read_cudnn_log

    c = {"x": (2, 64, 56, 56), "w": (128, 64, 3, 3), "y": (2, 128, 28, 28), "pads": (1, 1, 1, 1),
         "strides": (2, 2), "dilations": (1, 1), "group": 1}
    lines = (graph_records("forward", c, 28, (("TILE_SIZE", 4), ("USE_TEX", 0)))
             + graph_records("backward_data", c, 25, (("SPLIT_K_SLC", -1), ("STAGES", 3)))
             + graph_records("backward_filter", c, 20, (("SPLIT_K", 8),))
             + legacy_record("backward_data", c, "ALGO_1", workspace=4096)
             + legacy_record("backward_filter", c, "ALGO_3"))
    log = read_cudnn_log(_write(tmp_path / "cudnn.log", lines))
    assert not log.truncated and not log.errors and log.version == 91900
    fwd, gd, gw, ld, lw = log.executions
    assert [e.direction for e in log.executions] == ["forward", "backward_data", "backward_filter",
                                                     "backward_data", "backward_filter"]
    key = ((2, 64, 56, 56), (128, 64, 3, 3), (1, 1, 1, 1), (2, 2), (1, 1), 1)
    assert {e.conv_key for e in log.executions} == {key}  # a gradient has its convolution's problem
    assert gd.engine_config == "eng25_k17=-1_k14=3" and gd.operations == ("CONVOLUTION_BACKWARD_DATA",)
    assert gw.engine_config == "eng20_k0=8" and gw.tf32 is True and gw.status == "CUDNN_STATUS_SUCCESS"
    assert (gd.y, gw.y, gd.layout) == ((2, 128, 28, 28),) * 2 + ("NCHW",)
    assert ld.api == "cudnnConvolutionBackwardData" and ld.algorithm == "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1"
    assert ld.workspace_bytes == 4096 and ld.layout == "NCHW" and ld.pads == (1, 1, 1, 1)
    assert lw.algorithm == "CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3" and lw.w == (128, 64, 3, 3)
    # the database's names (cudnn_util.hpp's conv_*_algo_name)
    assert [legacy_algorithm(e.algorithm) for e in (ld, lw)] == ["ALGO_1", "ALGO_3"]
    assert legacy_algorithm("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING") == "FFT_TILING"
    assert legacy_algorithm("CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM") == "IMPLICIT_PRECOMP_GEMM"
    # the forward choice never takes a gradient's engine
    assert [e.engine_config for e in log.engines_by_conv()[key]] == ["eng28_k2=4_k3=0"]
    assert [e.line for e in log.engines_by_conv("backward_data")[key]] == [gd.line, ld.line]


def test_the_recorded_forward_log_keeps_its_engines():
    from benanza.profiles.cudnn_log import read_cudnn_log

    sample = Path(__file__).resolve().parents[1].parent / "shared" / "samples" / \
        "pytorch_resnet50_b1_fp32_cudnn_log_head.txt.gz"
    if not sample.exists():
        pytest.skip(f"{sample}: not on this machine")
    log = read_cudnn_log(sample)
    convs = [e for e in log.executions if e.conv_key is not None]
    assert convs and all(e.direction == "forward" for e in convs)
    assert sum(len(v) for v in log.engines_by_conv().values()) == len(convs)
    assert not log.engines_by_conv("backward_data")


# ---------------------------------------------------------------------------------------- the join

def _step_log(ml, iterations=2):
    """A training run's cuDNN log for ``ml``'s convolutions: per iteration the backward pass in
    reverse layer order, each Conv's data gradient (not the first's: the input needs none) and
    filter gradient; graph executions for every other distinct problem, legacy calls for the rest;
    one engine per (problem, direction), as cudnn.benchmark's cache keys them; before the first
    iteration, the autotuner's trial of another engine for each graph problem. Returns the lines
    and (layer, phase) -> the engine config each call ran."""
    convs = [ly for ly in ml.layers if ly.config is not None and ly.config.kind == "Conv"]
    keys = list(dict.fromkeys(ly.key for ly in convs))
    want, lines, trials = {}, [], []
    for it in range(iterations):
        for ly in reversed(convs):
            k = keys.index(ly.key)
            c = _problem(ly.config)
            for direction, phase in (("backward_filter", "backward_weight"), ("backward_data", "backward_data")):
                if direction == "backward_data" and ly.config.x[1] == 3:
                    continue
                if k % 2 == 0:
                    eng, knobs = (20 if phase == "backward_weight" else 25) + k, (("SPLIT_K", 4 + k),)
                    if it == 0 and (k, direction) not in trials:
                        trials.append((k, direction))
                        lines += graph_records(direction, c, 0, (("SPLIT_K", 1),))
                    lines += graph_records(direction, c, eng, knobs)
                    want[(ly.index, phase)] = f"eng{eng}_k0={4 + k}"
                else:
                    algo = "ALGO_1" if phase == "backward_data" else ("ALGO_3" if k % 4 == 1 else "ALGO_0")
                    lines += legacy_record(direction, c, algo)
                    want[(ly.index, phase)] = ("CUDNN_CONVOLUTION_BWD_DATA_" if phase == "backward_data"
                                               else "CUDNN_CONVOLUTION_BWD_FILTER_") + algo
    return lines, want


def test_each_backward_convolution_gets_its_framework_engine(tmp_path, joined):
    from benanza.profiles.cudnn_log import read_cudnn_log
    from benanza.profiles.train_join import conv_backward_engines

    ml, _ = joined
    lines, want = _step_log(ml)
    log = read_cudnn_log(_write(tmp_path / "cudnn.log.gz", lines))
    got = conv_backward_engines(ml, log)
    convs = [ly.index for ly in ml.layers if ly.config is not None and ly.config.kind == "Conv"]
    assert len(convs) == 20 and len(want) == 39  # the stem's data gradient never runs
    assert {k: e.engine_config for k, e in got.items()} == want
    assert (convs[0], "backward_data") not in got
    assert all(e.layout == "NCHW" and e.executions >= 2 for e in got.values())
    first = got[(convs[0], "backward_weight")]
    assert len(first.candidates) == 2 and first.candidates[0] == "eng0_k0=1"  # the autotuner's trial lost
    from benanza.profiles.profile import conv_engines

    assert conv_engines(ml, log) == {}  # no forward convolution in this log


def test_the_profile_folder_brings_its_cudnn_log(tmp_path, joined):
    from benanza.profiles.train_join import load_train_join

    ml, _ = joined
    f = tmp_path / "profile-b2-fp32-train-sgd"
    f.mkdir()
    shutil.copy(TRACE, f / "trace.json.gz")
    doc = json.loads((DATA / "resnet18_train_b2_fp32.profile.json").read_text())
    (f / "profile.json").write_text(json.dumps(doc))
    tj, _ = load_train_join(f, ml, MODEL)
    assert tj.conv_engines == {} and any("cudnn.log.gz: no such file" in n for n in tj.notices)
    lines, want = _step_log(ml, iterations=1)
    _write(f / doc["files"]["cudnn_log"], lines[:-3])  # cut inside the last record
    tj, _ = load_train_join(f, ml, MODEL)
    assert len(tj.conv_engines) == len(want) and any("truncated" in n for n in tj.notices)
    assert tj.to_dict()["conv_backward_engines"][0]["engine_config"]


# ------------------------------------------------------------------------------------ the what-if

class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def measurements(self, system_id, keys, cache="warm"):
        return [r for r in self.rows if r.layer_key in keys and r.cache == cache]


def _row(key, call, algo, ms, precision="tf32", layout="NCHW", status="ok"):
    from benanza.kinds.backend import Backend

    return types.SimpleNamespace(layer_key=key, call=call, algorithm=algo, median_ms=ms, layout=layout,
                                 precision=precision, dtype="float32", status=status, cache="warm", message="",
                                 backend=Backend.of_call(call))


def _engine(cfg, api="graph", tf32=True, layout="NCHW"):
    from benanza.profiles.profile import ConvEngine

    return ConvEngine(layer=0, engine_config=cfg, engine_id=None, knobs=(), candidates=(cfg,), executions=2,
                      tf32=tf32, layout=layout, data_type="CUDNN_DATA_FLOAT", api=api, line=1)


def test_cudnn_benchmark_is_costed_per_backward_call(joined):
    from benanza.analysis.train_whatif import StepAlternatives, compose_step, engine_costs, step_alternatives

    ml, tj = joined
    st = _step(ml)
    st.forward.precision, st.forward.conv_precision, st.forward.cache = "fp32", "tf32", "warm"
    convs = [ly.index for ly in ml.layers if ly.op_type == "Conv"]
    a, b, c = convs[1], convs[2], convs[3]
    dg, wg = "cudnnBackendExecute(conv_dgrad)", "cudnnBackendExecute(conv_wgrad)"
    rows = _Rows([
        # a's data gradient: the framework's graph engine (unset knobs dropped) 0.05 ms, the best 0.02 ms
        _row(f"k{a}backward_data", dg, "eng25_k0=4", 0.05), _row(f"k{a}backward_data", dg, "eng1", 0.02),
        _row(f"k{a}backward_data", dg, "eng1", 0.01, layout="NHWC"),  # another layout: not like with like
        _row(f"k{a}backward_data", dg, "eng2", 0.005, precision="fp32"),  # FMA: not what the framework ran
        _row(f"k{a}backward_data", dg, "eng3", 0.001, status="failed"),
        _row(f"k{a}backward_data", "cudnnConvolutionBackwardData", "ALGO_0", 0.003),  # another call
        # a's filter gradient (with a bias gradient timed in the same call): legacy ALGO_3 vs ALGO_1
        _row(f"k{a}backward_weight", "cudnnConvolutionBackwardFilter+cudnnConvolutionBackwardBias", "ALGO_3", 0.04),
        _row(f"k{a}backward_weight", "cudnnConvolutionBackwardFilter+cudnnConvolutionBackwardBias", "ALGO_1", 0.03),
        # b: the framework ran the fastest
        _row(f"k{b}backward_data", dg, "eng7", 0.02), _row(f"k{b}backward_data", dg, "eng8", 0.03),
        # c's filter gradient: its engine was never measured
        _row(f"k{c}backward_weight", wg, "eng9", 0.02)])
    engines = {(a, "backward_data"): _engine("eng25_k0=4_k3=-1"),
               (a, "backward_weight"): _engine("CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3", "cudnnConvolutionBackwardFilter"),
               (b, "backward_data"): _engine("eng7"), (c, "backward_weight"): _engine("eng20_k0=4")}
    cost, n, missing = engine_costs(st, rows, 1, engines)
    assert cost == {a: pytest.approx(0.03 + 0.01), b: 0.0} and n == 4
    assert missing == (f"layer {c} backward_weight: eng20_k0=4",)
    alt = step_alternatives(st, rows, 1, engines=engines)
    assert alt.engine == cost and alt.engine_calls == 4 and alt.engine_missing == missing
    w = compose_step(_cmp(joined, st), ml, alt)
    _sums_exactly(w)
    s = next(x for x in w.steps if x.kind == "algorithm_selection")
    assert s.saving_ms == pytest.approx(0.04) and s.layers == (a,)
    assert s.rests_on.startswith("partial: 1 of 4 convolution backward calls not estimated")
    # no framework engine in the database: not estimated, never 0
    none = step_alternatives(st, rows, 1, engines={(c, "backward_weight"): _engine("eng20_k0=4")})
    assert none.engine is None and none.engine_calls == 1
    w = compose_step(_cmp(joined, st), ml, none)
    s = next(x for x in w.steps if x.kind == "algorithm_selection")
    assert s.saving_ms is None and "none of the 1 convolution backward calls" in s.evidence[0]
    _sums_exactly(w)
    # the step's floor holds: costs above the layers' backward time are cut at the LBL
    lbl = w.final_ms - 1e-3
    big = StepAlternatives(engine={i: 10.0 for i in convs}, engine_calls=len(convs))
    w = compose_step(_cmp(joined, _step(ml, lbl)), ml, big)
    _sums_exactly(w)
    assert w.final_ms == pytest.approx(lbl) and w.clamped
    # without a cuDNN log nothing is joined: not estimated
    assert step_alternatives(st, rows, 1).engine is None
