"""The training join (benanza/profiles/train_join.py): autograd's sequence numbers parsed from the
trace, backward kernels joined to their forward layers, the phase and role sums, and the step's
Benanza ratio (benanza/profiles/train_compare.py).

A hand-written trace in torch.profiler's Chrome-trace format (PyTorch 2.x's Kineto export: cpu_op
events with "Sequence number" / "Fwd thread id" as profiler_kineto.cpp writes them, cuda_runtime
launches and kernels linked by correlation ids) of two training iterations of a Conv -> Relu ->
Flatten -> Gemm model, built below; and, when the lead has recorded it on a GPU
(benchmarks/record_train_trace.py), the real trace of torchvision's resnet18, batch 2, fp32."""
import gzip
import json
import types
from pathlib import Path

import pytest

from benanza.profiles.trace import read_trace
from benanza.profiles.train_join import ROLES, train_join
from benanza.spec import PROFILED_STEP_PHASES as PHASES
from conftest import envelope_of

DATA = Path(__file__).parent / "data" / "traces"
REAL_TRACE = DATA / "resnet18_train_b2_fp32.json.gz"
REAL_MODEL = DATA / "resnet18_train.onnx"

MAIN, AUTOGRAD = 11, 22  # host threads (OS ids): the Python thread and autograd's CUDA device thread


# ------------------------------------------------------------------------------------ the model

@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """x (N, 3, 8, 8) -> Conv 4x3x3x3 pad 1 -> Relu -> Flatten -> Gemm 10x256 (transB) -> (N, 10)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("W", (4, 3, 3, 3)), ("B", (4,)), ("Wf", (10, 256)), ("Bf", (10,)))]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "Wf", "Bf"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path_factory.mktemp("model") / "small.onnx"
    onnx.save(m, str(p))
    from benanza.processing.model import process

    return process(p, 2)


# ------------------------------------------------------------------------------------ the trace

class _Trace:
    """Events of a Kineto Chrome trace; times in µs from ``BASE``."""

    BASE = 1_000_000.0

    def __init__(self):
        self.events = []
        self.ext = 0
        self.corr = 0

    def cpu(self, name, ts, dur, tid=MAIN, seq=None, fwd=None, dims=None, cat="cpu_op"):
        self.ext += 1
        args = {"External id": self.ext, "Record function id": 0}
        if dims is not None:
            args["Input Dims"] = dims
        if seq is not None:  # profiler_kineto.cpp: both, where the sequence number is >= 0
            args["Fwd thread id"] = fwd if fwd is not None else 0
            args["Sequence number"] = seq
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": self.BASE + ts,
                            "dur": dur, "args": args})
        return self.ext

    def launch(self, ext, ts, kernel, k_ts, k_dur, tid=MAIN, kind="kernel"):
        """A runtime call at ``ts`` inside the op of external id ``ext`` and the GPU activity it launched."""
        self.corr += 1
        call = "cudaLaunchKernel" if kind == "kernel" else "cudaMemsetAsync"
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": call, "pid": 1, "tid": tid,
                            "ts": self.BASE + ts, "dur": 2.0, "args": {"External id": ext, "correlation": self.corr}})
        self.events.append({"ph": "X", "cat": kind, "name": kernel, "pid": 0, "tid": 7, "ts": self.BASE + k_ts,
                            "dur": k_dur, "args": {"External id": ext, "correlation": self.corr, "device": 0,
                                                   "stream": 7}})

    def write(self, path):
        doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],
               "traceEvents": self.events}
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
        return path


#: per iteration: kernel durations (µs), scaled by the iteration's factor
DUR = {"conv_fwd": 20.0, "bias_add": 4.0, "relu_fwd": 3.0, "gemm_fwd": 6.0, "between": 1.0, "softmax_fwd": 2.0,
       "nll_fwd": 1.5, "nll_bwd": 1.0, "softmax_bwd": 2.5, "gemm_dgrad": 5.0, "gemm_wgrad": 5.5, "gemm_bgrad": 1.2,
       "accumulate": 0.8, "relu_bwd": 3.5, "conv_dgrad": 25.0, "conv_wgrad": 30.0, "conv_bgrad": 2.0, "conv_inbuf": 0.9,
       "mystery": 0.7, "memset": 0.5, "sgd": 9.0}


def _iteration(t: _Trace, t0: float, seq0: int, f: float) -> None:
    """One training iteration from host time ``t0`` (µs), sequence numbers from ``seq0``, kernel
    durations scaled by ``f``."""
    d = {k: v * f for k, v in DUR.items()}
    t.cpu("benanza.iteration", t0, 1000, cat="user_annotation")
    t.cpu("benanza.phase:zero_grad", t0 + 1, 4, cat="user_annotation")
    t.cpu("Optimizer.zero_grad#SGD.zero_grad", t0 + 2, 2, cat="user_annotation")
    # forward: conv2d > convolution (seq) > cudnn_convolution; relu (seq); flatten > view (seq); linear > t, addmm
    t.cpu("benanza.phase:forward", t0 + 10, 290, cat="user_annotation")
    t.cpu("aten::conv2d", t0 + 20, 40, seq=seq0, dims=[[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []])
    t.cpu("aten::convolution", t0 + 21, 38, seq=seq0, dims=[[2, 3, 8, 8], [4, 3, 3, 3], [4]])
    e = t.cpu("aten::cudnn_convolution", t0 + 22, 28, dims=[[2, 3, 8, 8], [4, 3, 3, 3]])
    t.launch(e, t0 + 30, "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw", t0 + 40, d["conv_fwd"])
    e = t.cpu("aten::add_", t0 + 51, 6)
    t.launch(e, t0 + 52, "void at::native::elementwise_kernel<add>", t0 + 61, d["bias_add"])
    e = t.cpu("aten::relu", t0 + 70, 20, seq=seq0 + 1, dims=[[2, 4, 8, 8]])
    t.launch(e, t0 + 75, "void at::native::vectorized_elementwise_kernel<clamp_min>", t0 + 80, d["relu_fwd"])
    t.cpu("aten::flatten", t0 + 95, 5, seq=seq0 + 2, dims=[[2, 4, 8, 8], [], []])
    t.cpu("aten::view", t0 + 96, 3, seq=seq0 + 2, dims=[[2, 4, 8, 8], []])
    t.cpu("aten::linear", t0 + 110, 50, seq=seq0 + 3, dims=[[2, 256], [10, 256], [10]])
    t.cpu("aten::t", t0 + 111, 2, seq=seq0 + 3, dims=[[10, 256]])
    e = t.cpu("aten::addmm", t0 + 115, 43, seq=seq0 + 4, dims=[[10], [2, 256], [256, 10], [], []])
    t.launch(e, t0 + 120, "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8", t0 + 130, d["gemm_fwd"])
    # between two phases, inside the iteration: "outside"
    e = t.cpu("aten::zero_", t0 + 302, 4)
    t.launch(e, t0 + 303, "void at::native::vectorized_elementwise_kernel<fill>", t0 + 305, d["between"])
    # loss: cross_entropy_loss > log_softmax (seq), nll_loss_nd > nll_loss (seq)
    t.cpu("benanza.phase:loss", t0 + 310, 90, cat="user_annotation")
    t.cpu("aten::cross_entropy_loss", t0 + 311, 79, seq=seq0 + 5, dims=[[2, 10], [2], [], [], [], []])
    e = t.cpu("aten::log_softmax", t0 + 312, 28, seq=seq0 + 5, dims=[[2, 10], [], []])
    t.launch(e, t0 + 315, "void at::native::cunn_SoftMaxForward<4, float>", t0 + 320, d["softmax_fwd"])
    t.cpu("aten::nll_loss_nd", t0 + 341, 48, seq=seq0 + 6, dims=[[2, 10], [2], [], [], []])
    e = t.cpu("aten::nll_loss", t0 + 342, 46, seq=seq0 + 6, dims=[[2, 10], [2], [], [], []])
    t.launch(e, t0 + 345, "void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float>", t0 + 350, d["nll_fwd"])
    # backward: the main thread waits in backward(); autograd's thread runs the nodes
    t.cpu("benanza.phase:backward", t0 + 410, 390, cat="user_annotation")
    t.cpu("autograd::engine::evaluate_function: NllLossBackward0", t0 + 420, 20, tid=AUTOGRAD, seq=seq0 + 6, fwd=1)
    t.cpu("NllLossBackward0", t0 + 421, 18, tid=AUTOGRAD, seq=seq0 + 6, fwd=1)
    e = t.cpu("aten::nll_loss_backward", t0 + 422, 16, tid=AUTOGRAD)
    t.launch(e, t0 + 425, "void at::native::nll_loss_backward_reduce_cuda_kernel_2d<float>", t0 + 430,
             d["nll_bwd"], tid=AUTOGRAD)
    t.cpu("autograd::engine::evaluate_function: LogSoftmaxBackward0", t0 + 445, 20, tid=AUTOGRAD, seq=seq0 + 5, fwd=1)
    t.cpu("LogSoftmaxBackward0", t0 + 446, 18, tid=AUTOGRAD, seq=seq0 + 5, fwd=1)
    e = t.cpu("aten::_log_softmax_backward_data", t0 + 447, 16, tid=AUTOGRAD)
    t.launch(e, t0 + 450, "void at::native::cunn_SoftMaxBackward<4, float>", t0 + 455, d["softmax_bwd"], tid=AUTOGRAD)
    t.cpu("autograd::engine::evaluate_function: AddmmBackward0", t0 + 470, 50, tid=AUTOGRAD, seq=seq0 + 4, fwd=1)
    t.cpu("AddmmBackward0", t0 + 471, 48, tid=AUTOGRAD, seq=seq0 + 4, fwd=1)
    e = t.cpu("aten::mm", t0 + 472, 18, tid=AUTOGRAD)
    t.launch(e, t0 + 475, "sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_dgrad", t0 + 480, d["gemm_dgrad"], tid=AUTOGRAD)
    e = t.cpu("aten::mm", t0 + 492, 18, tid=AUTOGRAD)
    t.launch(e, t0 + 495, "sm90_xmma_gemm_f32f32_f32f32_f32_nt_n_wgrad", t0 + 500, d["gemm_wgrad"], tid=AUTOGRAD)
    e = t.cpu("aten::sum", t0 + 511, 8, tid=AUTOGRAD)
    t.launch(e, t0 + 512, "void at::native::reduce_kernel<512, 1>", t0 + 515, d["gemm_bgrad"], tid=AUTOGRAD)
    t.cpu("autograd::engine::evaluate_function: TBackward0", t0 + 521, 3, tid=AUTOGRAD, seq=seq0 + 3, fwd=1)
    t.cpu("TBackward0", t0 + 522, 1, tid=AUTOGRAD, seq=seq0 + 3, fwd=1)
    t.cpu("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", t0 + 525, 10, tid=AUTOGRAD)
    t.cpu("torch::autograd::AccumulateGrad", t0 + 526, 8, tid=AUTOGRAD)  # no sequence number (UINT64_MAX)
    e = t.cpu("aten::add_", t0 + 527, 6, tid=AUTOGRAD)
    t.launch(e, t0 + 528, "void at::native::vectorized_elementwise_kernel<add>", t0 + 536, d["accumulate"],
             tid=AUTOGRAD)
    t.cpu("autograd::engine::evaluate_function: ViewBackward0", t0 + 540, 5, tid=AUTOGRAD, seq=seq0 + 2, fwd=1)
    t.cpu("ViewBackward0", t0 + 541, 3, tid=AUTOGRAD, seq=seq0 + 2, fwd=1)
    t.cpu("autograd::engine::evaluate_function: ReluBackward0", t0 + 560, 20, tid=AUTOGRAD, seq=seq0 + 1, fwd=1)
    t.cpu("ReluBackward0", t0 + 561, 18, tid=AUTOGRAD, seq=seq0 + 1, fwd=1)
    e = t.cpu("aten::threshold_backward", t0 + 562, 16, tid=AUTOGRAD)
    t.launch(e, t0 + 565, "void at::native::vectorized_elementwise_kernel<threshold_backward>", t0 + 570,
             d["relu_bwd"], tid=AUTOGRAD)
    ev = t.cpu("autograd::engine::evaluate_function: ConvolutionBackward0", t0 + 590, 110.5, tid=AUTOGRAD,
               seq=seq0, fwd=1)
    t.cpu("ConvolutionBackward0", t0 + 591, 107, tid=AUTOGRAD, seq=seq0, fwd=1)
    # an op inside the node that records a number of its own (as under create_graph=True): not the node
    e = t.cpu("aten::convolution_backward", t0 + 592, 106, tid=AUTOGRAD, seq=seq0 + 50)
    t.launch(e, t0 + 594, "", t0 + 596, d["memset"], tid=AUTOGRAD, kind="gpu_memset")
    t.launch(e, t0 + 600, "sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32", t0 + 605, d["conv_dgrad"], tid=AUTOGRAD)
    t.launch(e, t0 + 620, "sm90_xmma_wgrad_implicit_gemm_f32f32_tf32f32_f32", t0 + 635, d["conv_wgrad"], tid=AUTOGRAD)
    t.launch(e, t0 + 640, "void at::native::reduce_kernel<512, 1>", t0 + 670, d["conv_bgrad"], tid=AUTOGRAD)
    # launched by the engine's op outside the node (an input buffer's accumulation)
    t.launch(ev, t0 + 699, "void at::native::vectorized_elementwise_kernel<add_inbuf>", t0 + 701, d["conv_inbuf"],
             tid=AUTOGRAD)
    # a node whose forward op the trace does not have: kept, unjoined
    t.cpu("autograd::engine::evaluate_function: MysteryBackward0", t0 + 710, 10, tid=AUTOGRAD, seq=seq0 + 90, fwd=1)
    t.cpu("MysteryBackward0", t0 + 711, 8, tid=AUTOGRAD, seq=seq0 + 90, fwd=1)
    e = t.cpu("aten::mul", t0 + 712, 6, tid=AUTOGRAD)
    t.launch(e, t0 + 713, "void at::native::vectorized_elementwise_kernel<mul>", t0 + 716, d["mystery"], tid=AUTOGRAD)
    # optimizer
    t.cpu("benanza.phase:optimizer", t0 + 810, 90, cat="user_annotation")
    t.cpu("Optimizer.step#SGD.step", t0 + 811, 88, cat="user_annotation")
    e = t.cpu("aten::_foreach_add_", t0 + 812, 20, dims=[[], [], []])
    t.launch(e, t0 + 815, "void at::native::multi_tensor_apply_kernel<TensorListMetadata<3>>", t0 + 820, d["sgd"])


FACTORS = (1.0, 1.5)  # iteration 2's kernels take 1.5x


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    t = _Trace()
    for n, f in enumerate(FACTORS):
        _iteration(t, 2000.0 * n, 100 + 100 * n, f)
    return read_trace(t.write(tmp_path_factory.mktemp("trace") / "train.json.gz"))


@pytest.fixture(scope="module")
def small_join(small_trace, small_model):
    return train_join(small_trace, small_model)


def _layer(ml, op_type):
    return next(ly.index for ly in ml.layers if ly.op_type == op_type)


def _median(key):
    import numpy as np

    return float(np.median([sum(DUR[k] for k in key) * f / 1000 for f in FACTORS]))


# ------------------------------------------------------------------------------------- parsing

def test_sequence_numbers_and_forward_threads_are_parsed(small_trace):
    ops = {(o.name, o.start_ms): o for o in small_trace.cpu_ops}
    conv = [o for o in small_trace.cpu_ops if o.name == "aten::convolution"]
    assert [o.sequence for o in conv] == [100, 200] and all(o.fwd_thread == 0 for o in conv)
    node = [o for o in small_trace.cpu_ops if o.name == "ConvolutionBackward0"]
    assert [o.sequence for o in node] == [100, 200] and all(o.fwd_thread == 1 for o in node)
    assert node[0].thread.endswith(f"/{AUTOGRAD}") and conv[0].thread.endswith(f"/{MAIN}")
    # ops without a number (AccumulateGrad's, inner aten ops of the sample) have None; the engine's op
    # around a node has the node's number (as in PyTorch 2.11's traces)
    assert all(o.sequence is None for (n, _), o in ops.items()
               if "AccumulateGrad" in n or n == "aten::cudnn_convolution")
    ev = [o for o in small_trace.cpu_ops if o.name == "autograd::engine::evaluate_function: ConvolutionBackward0"]
    assert [(o.sequence, o.fwd_thread) for o in ev] == [(100, 1), (200, 1)]


def test_a_negative_or_string_sequence_number(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0,
           "args": {"Sequence number": -1, "Fwd thread id": 0}},
          {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 3.0, "dur": 1.0,
           "args": {"Sequence number": "42", "Fwd thread id": "3"}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    a, b = read_trace(p).cpu_ops
    assert a.sequence is None and a.fwd_thread == 0
    assert b.sequence == 42 and b.fwd_thread == 3


# ------------------------------------------------------------------------------------- the join

def test_every_kernel_has_a_phase_and_a_role(small_join, small_trace):
    assert len(small_join.kernels) == len(small_trace.kernels)  # none dropped
    assert small_join.iterations == (0, 1)
    assert {k.role for k in small_join.kernels} <= set(ROLES)
    assert {k.phase for k in small_join.kernels} <= set(PHASES) | {None}
    by = {}
    for k in small_join.kernels:
        if k.iteration == 0:
            by.setdefault(k.name, []).append(k)
    assert by["void at::native::vectorized_elementwise_kernel<fill>"][0].role == "outside"
    assert by["void at::native::multi_tensor_apply_kernel<TensorListMetadata<3>>"][0].role == "optimizer"
    assert by["void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float>"][0].role == "loss"
    assert by["void at::native::nll_loss_backward_reduce_cuda_kernel_2d<float>"][0].role == "loss_backward"
    assert by["void at::native::cunn_SoftMaxBackward<4, float>"][0].role == "loss_backward"
    acc = by["void at::native::vectorized_elementwise_kernel<add>"][0]
    assert acc.role == "accumulate_grad" and acc.node == "torch::autograd::AccumulateGrad"
    mystery = by["void at::native::vectorized_elementwise_kernel<mul>"][0]
    assert mystery.role == "unjoined" and mystery.node == "MysteryBackward0" and mystery.layer is None


def test_backward_kernels_reach_their_forward_layer(small_join, small_model):
    ml = small_model
    conv, relu, gemm = _layer(ml, "Conv"), _layer(ml, "Relu"), _layer(ml, "Gemm")
    by = {}
    for k in small_join.kernels:
        if k.iteration == 1:
            by[k.name] = k
    for name, layer, node, fop in (("sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32", conv, "ConvolutionBackward0",
                                    "aten::conv2d"),
                                   ("sm90_xmma_wgrad_implicit_gemm_f32f32_tf32f32_f32", conv, "ConvolutionBackward0",
                                    "aten::conv2d"),
                                   ("void at::native::vectorized_elementwise_kernel<threshold_backward>", relu,
                                    "ReluBackward0", "aten::relu"),
                                   ("sm90_xmma_gemm_f32f32_f32f32_f32_nn_n_dgrad", gemm, "AddmmBackward0", "aten::linear"),
                                   ("sm90_xmma_gemm_f32f32_f32f32_f32_nt_n_wgrad", gemm, "AddmmBackward0", "aten::linear")):
        k = by[name]
        assert (k.role, k.phase, k.layer, k.node, k.forward_op) == ("backward", "backward", layer, node, fop), name
        assert k.sequence in (200, 201, 204)  # iteration 2's numbers
    fwd = by["sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw"]
    assert (fwd.role, fwd.layer) == ("forward", conv)


def test_layer_and_phase_sums(small_join, small_model):
    ml = small_model
    rows = {r["layer"]: r for r in small_join.layer_ms()}
    conv, relu, gemm = _layer(ml, "Conv"), _layer(ml, "Relu"), _layer(ml, "Gemm")
    assert rows[conv]["forward_ms"] == pytest.approx(_median(["conv_fwd", "bias_add"]))
    assert rows[conv]["backward_ms"] == pytest.approx(_median(["conv_dgrad", "conv_wgrad", "conv_bgrad", "conv_inbuf"]))
    assert rows[conv]["backward_nodes"] == ["ConvolutionBackward0"]
    assert rows[relu]["backward_ms"] == pytest.approx(_median(["relu_bwd"]))
    assert rows[gemm]["forward_ms"] == pytest.approx(_median(["gemm_fwd"]))
    assert rows[gemm]["backward_ms"] == pytest.approx(_median(["gemm_dgrad", "gemm_wgrad", "gemm_bgrad"]))
    ph = small_join.phase_ms()
    assert ph["forward"]["median_ms"] == pytest.approx(_median(["conv_fwd", "bias_add", "relu_fwd", "gemm_fwd"]))
    assert ph["loss"]["median_ms"] == pytest.approx(_median(["softmax_fwd", "nll_fwd"]))
    bwd = ["nll_bwd", "softmax_bwd", "gemm_dgrad", "gemm_wgrad", "gemm_bgrad", "accumulate", "relu_bwd",
           "conv_dgrad", "conv_wgrad", "conv_bgrad", "conv_inbuf", "mystery"]
    assert ph["backward"]["median_ms"] == pytest.approx(_median(bwd))  # the memset apart
    assert ph["optimizer"]["median_ms"] == pytest.approx(_median(["sgd"]))
    assert ph["zero_grad"]["median_ms"] == 0.0
    assert ph["outside"]["median_ms"] == pytest.approx(_median(["between"]))
    kernels = [k for k in DUR if k != "memset"]
    st = small_join.step_ms()
    assert st["median_ms"] == pytest.approx(_median(kernels)) and st["n"] == 2
    assert st["iqr_ms"] == pytest.approx(0.5 * sum(DUR[k] for k in kernels) * 0.5 / 1000)  # q3 - q1 of two samples
    assert small_join.step_ms(("memset",))["median_ms"] == pytest.approx(_median(["memset"]))
    cmp = small_join.comparable_ms()
    assert cmp["loss"]["median_ms"] == pytest.approx(_median(["softmax_fwd", "nll_fwd", "nll_bwd", "softmax_bwd"]))
    assert cmp["backward"]["median_ms"] == pytest.approx(_median([k for k in bwd if k not in ("nll_bwd", "softmax_bwd")]))
    assert sum(v["median_ms"] for v in cmp.values()) == pytest.approx(st["median_ms"])
    assert sum(v["median_ms"] for v in small_join.role_ms().values()) == pytest.approx(st["median_ms"])
    un = {(u["role"], u["node"]) for u in small_join.unjoined()}
    assert ("unjoined", "MysteryBackward0") in un and ("accumulate_grad", "torch::autograd::AccumulateGrad") in un


def test_a_trace_without_phases_or_numbers_says_so(tmp_path, small_model):
    t = _Trace()
    e = t.cpu("aten::relu", 10, 20, dims=[[2, 4, 8, 8]])
    t.launch(e, 12, "relu_kernel", 15, 3.0)
    tj = train_join(read_trace(t.write(tmp_path / "inf.json.gz")), small_model)
    assert [k.role for k in tj.kernels] == ["outside"]
    assert any("no benanza.phase" in n for n in tj.notices)


# ------------------------------------------------------------------------------ the step's ratio

def _step(complete: bool, optimizer_ms):
    from benanza.analysis.training import BackwardTime, TrainingStep

    calls = [BackwardTime(0, "conv", "backward_data", "ConvBwdData", "", "k", 0.02 if complete else None)]
    return TrainingStep(model="small", batch=2, precision_label="fp32", layouts=("NCHW",),
                        forward=types.SimpleNamespace(missing=[]),
                        phase_ms={"forward": 0.03, "loss": 0.003, "backward_data": 0.05, "backward_weight": 0.04,
                                  "optimizer": optimizer_ms},
                        sequential_ms=0.123 + (optimizer_ms or 0), critical_path_ms=0.1 + (optimizer_ms or 0),
                        calls=calls)


def test_the_step_benanza_ratio(small_join):
    from benanza.profiles.train_compare import TrainComparison

    c = TrainComparison(small_join, _step(True, 0.008))
    r = c.ratios()
    pt = small_join.step_ms()["median_ms"]
    assert r["step"]["ratio"] == pytest.approx(0.108 / pt) and r["step"]["complete"]
    assert r["step_sequential"]["ratio"] == pytest.approx(0.131 / pt)
    cmp = small_join.comparable_ms()
    assert r["backward"]["lbl_ms"] == pytest.approx(0.09)
    assert r["backward"]["ratio"] == pytest.approx(0.09 / cmp["backward"]["median_ms"])
    assert r["optimizer"]["ratio"] == pytest.approx(0.008 / cmp["optimizer"]["median_ms"])
    assert "INCOMPLETE" not in c.ratio_text()
    rows = {r["name"]: r for r in c.layer_rows()}
    assert rows["conv"]["lbl_backward_ms"] == pytest.approx(0.02) and rows["fc"]["lbl_backward_ms"] is None
    assert TrainComparison(small_join, _step(False, None)).layer_rows()[0]["lbl_backward_ms"] is None
    d = c.to_dict()
    assert d["complete"] and d["step_benanza_ratio"] == pytest.approx(0.108 / pt)
    json.dumps(d)


def test_an_incomplete_step_never_passes_as_complete(small_join):
    from benanza.profiles.train_compare import TrainComparison

    c = TrainComparison(small_join, _step(False, None))
    r = c.ratios()
    assert not r["step"]["complete"] and not r["backward"]["complete"] and not r["optimizer"]["complete"]
    assert r["optimizer"]["ratio"] is None  # no time, no ratio
    assert r["forward"]["complete"] and r["loss"]["complete"]
    text = c.ratio_text()
    assert "INCOMPLETE" in text and "backward calls without a measurement" in text
    assert c.to_dict()["incomplete_note"].startswith("INCOMPLETE")


# ------------------------------------------------------------------ the framework's own choices

#: kernel names as PyTorch 2.11's profiler wrote them on an H200 (2026-11-27h, resnet50 training
#: truth, the results' top_kernels), cut as the trace does not
BF16_BN = ("void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16, c10::BFloat16, float, int>",
           "void at::native::batch_norm_transform_input_kernel<c10::BFloat16, float, float, true, int>",
           "void at::native::batch_norm_backward_kernel<c10::BFloat16, float, float, int>")
FP16_BN = ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<__half, float, int, 128, true, 1, true>",
           "void cudnn::bn_bw_1C11_kernel_new<__half, float, float2, 128, true, 1>")


def _bn_join(names, per_kernel_ms, bn_layer=1):
    """Two iterations of a conv (layer 0) and a batch norm (layer 1) whose kernels are ``names``
    (a backward name has "backward"), each ``per_kernel_ms`` long, the second iteration 10 % longer."""
    from benanza.profiles.train_join import TrainJoin, TrainKernel

    ks, n = [], 0
    for it, f in ((0, 1.0), (1, 1.1)):
        ks.append(TrainKernel(n, "sm90_xmma_fprop_implicit_gemm_bf16", "kernel", it, "forward", "forward", 0, None,
                              None, "aten::conv2d", 0.2 * f))
        n += 1
        for name in names:
            bwd = "backward" in name or "bn_bw" in name
            ks.append(TrainKernel(n, name, "kernel", it, "backward" if bwd else "forward",
                                  "backward" if bwd else "forward", bn_layer, "NativeBatchNormBackward0" if bwd else None,
                                  7 if bwd else None, "aten::batch_norm", per_kernel_ms * f))
            n += 1
    return TrainJoin(tuple(ks), (0, 1), {0: "conv", 1: "bn"})


def _bn_step(bn_ms):
    from benanza.analysis.training import BackwardTime, TrainingStep

    calls = [BackwardTime(0, "conv", "backward_data", "ConvBwdData", "", "c", 0.1),
             BackwardTime(1, "bn", "forward", "BatchNormTrain", "", "t", bn_ms[0]),
             BackwardTime(1, "bn", "backward_data", "BatchNormBwd", "", "b", bn_ms[1])]
    return TrainingStep(model="m", batch=32, precision_label="bf16", layouts=("NCHW",),
                        forward=types.SimpleNamespace(missing=[]),
                        phase_ms={"forward": 0.3, "loss": 0.0, "backward_data": 0.2, "backward_weight": 0.1,
                                  "optimizer": 0.01}, sequential_ms=0.6, critical_path_ms=0.5, calls=calls)


def test_batch_norms_pytorch_ran_natively_in_bf16_are_named_and_costed(tmp_path, capsys):
    """AMP-bf16: ATen's _select_batch_norm_backend refuses cuDNN for bf16 input, so the step runs
    ATen's batch-norm kernels; the report says so with their time, benanza's bound of the same
    calls and the difference. fp16 (cuDNN's kernels) gives no such finding."""
    from benanza.reports import framework as cli
    from benanza.profiles.train_compare import TrainComparison

    c = TrainComparison(_bn_join(BF16_BN, 0.1), _bn_step((0.04, 0.06)))
    (fc,) = c.framework_choices()
    assert fc["rule"] == "native_batch_norm_bf16" and fc["layers"] == 1
    assert fc["pytorch_ms"] == pytest.approx(0.3 * 1.05)  # three kernels, median of 0.3 and 0.33
    assert fc["lbl_ms"] == pytest.approx(0.1) and fc["saving_ms"] == pytest.approx(0.215)
    assert "Normalization.cpp" in fc["source"] and "bf16" in fc["text"] and "0.2150 ms to gain" in fc["text"]
    assert c.to_dict()["framework_choices"] == [fc]
    # a batch-norm call without a valid measurement: named, not costed
    (fc,) = TrainComparison(_bn_join(BF16_BN, 0.1), _bn_step((0.04, None))).framework_choices()
    assert fc["lbl_ms"] is None and fc["saving_ms"] is None and "not measured" in fc["text"]
    assert TrainComparison(_bn_join(FP16_BN, 0.1), _bn_step((0.04, 0.06))).framework_choices() == []
    # batch norms the export folded (their kernels reach no layer): named, not costed
    (fc,) = TrainComparison(_bn_join(BF16_BN, 0.1, bn_layer=None), _bn_step((0.04, 0.06))).framework_choices()
    assert fc["layers"] == 0 and fc["lbl_ms"] is None and "no layer of the export" in fc["text"]
    run = {"label": "eager, training step (sgd)", "folder": str(tmp_path / "profile-b32-ampbf16-train-sgd"),
           "batch": 32, "dtype": "ampbf16", "optimizer": "sgd", "notices": []}
    cli.print_train_comparisons([TrainComparison(_bn_join(BF16_BN, 0.1), _bn_step((0.04, 0.06)), run)], "m", False)
    assert "framework: PyTorch ran its own batch-norm kernels on bf16 input" in capsys.readouterr().out


# --------------------------------------------------------------------------- the recorded trace

@pytest.mark.skipif(not (REAL_TRACE.exists() and REAL_MODEL.exists()),
                    reason=f"needs {REAL_TRACE.relative_to(Path(__file__).parent.parent)} and "
                           f"{REAL_MODEL.name}: record them on a GPU with benchmarks/record_train_trace.py")
def test_the_recorded_resnet18_training_trace():
    from benanza.processing.model import process
    from benanza.profiles.join import layer_paths, trace_has_scopes

    ml = process(REAL_MODEL, 2)
    tr = read_trace(REAL_TRACE)
    assert any(o.sequence is not None and o.fwd_thread for o in tr.cpu_ops), "no backward op with a forward thread"
    tj = train_join(tr, ml, layer_paths(ml, REAL_MODEL) if trace_has_scopes(tr) else None)
    assert len(tj.kernels) == len(tr.kernels) and not tj.notices
    assert len(tj.iterations) == sum(1 for o in tr.cpu_ops if o.name == "benanza.iteration") >= 1
    roles = tj.role_ms()
    for r in ("forward", "loss", "backward", "loss_backward", "optimizer"):
        assert roles[r]["median_ms"] > 0, r
    rows = {r["layer"]: r for r in tj.layer_ms()}
    for ly in ml.layers:
        if ly.op_type in ("Conv", "Gemm", "BatchNormalization"):
            assert ly.index in rows and rows[ly.index]["forward_ms"] > 0, ly.name
            assert rows[ly.index]["backward_ms"] > 0, f"{ly.name}: no backward kernel joined"
    assert "ConvolutionBackward0" in rows[_layer(ml, "Conv")]["backward_nodes"]
    # the gradients reach their forward ops: >= 90 % of the backward phase's kernel time (the export
    # folds the batch norms: their gradients reach aten::batch_norm, no layer)
    bwd = sum(k.dur_ms for k in tj.kernels if k.phase == "backward" and k.kind == "kernel")
    joined = sum(k.dur_ms for k in tj.kernels if k.kind == "kernel" and k.role in ("backward", "loss_backward")
                 and k.forward_op)
    assert joined >= 0.9 * bwd
    assert sum(k.dur_ms for k in tj.kernels if k.role == "backward" and k.layer is not None) >= 0.5 * bwd
    cmp = tj.comparable_ms()
    assert sum(v["median_ms"] for v in cmp.values()) == pytest.approx(tj.step_ms()["median_ms"], rel=0.05)
    from benanza.profiles.train_compare import TrainComparison

    assert TrainComparison(tj, _step(True, 0.008)).framework_choices() == []  # fp32: cuDNN's batch norm


# ------------------------------------------------------------------------------------ plumbing

def test_training_runs_and_the_bench_in_this_process(tmp_path, monkeypatch):
    from benanza.profiles.pytorch import profile_runs
    from benanza.spec import TorchRequest
    from benanza.usecases import torch as T

    runs = profile_runs(tmp_path, [2, 32], "fp16", True, None, train="adamw")
    assert [r.folder.name for r in runs] == ["profile-b2-fp16-train-adamw", "profile-b2-fp16-cl-train-adamw",
                                             "profile-b32-fp16-train-adamw", "profile-b32-fp16-cl-train-adamw"]
    assert all(r.train == "adamw" for r in runs) and "training step (adamw)" in runs[0].label
    assert [r.folder.name for r in profile_runs(tmp_path, [2], "fp32", False, None)] == ["profile-b2-fp32"]
    # the bench runs in this process (no child command line): PyTorch's fp32 as fp32 with TF32 convolutions
    benched = []
    monkeypatch.setattr(T, "bench", lambda req, progress: benched.append(req))
    T.bench_runner(TorchRequest("m", dtype="fp32"), None, train="adam")(tmp_path / "m.onnx", [2])
    T.bench_runner(TorchRequest("m", dtype="fp16"), None)(tmp_path / "m.onnx", [2])
    assert benched[0].train and benched[0].optimizer == "adam" and benched[0].conv_tf32
    assert benched[0].precisions == ("fp32",) and benched[0].batches == (2,) and benched[0].quiet
    assert not benched[1].train and not benched[1].conv_tf32 and benched[1].precisions == ("fp16",)


def test_prepare_says_where_the_command_time_goes(tmp_path, monkeypatch):
    """benanza torch's steps before the profiles: the export's and the bench's seconds go into the
    ``seconds`` dict (each report's ``run.command_seconds``); a kept export adds none. The LLM truth
    read 330 s for one command of which the PyTorch runs explained 181 s and nothing the rest."""
    import benanza.profiles as profiles
    import benanza.profiles.pytorch as pt
    from benanza.processing.modules import Export, ModuleSource

    src = ModuleSource("m", "factory", build=None, inputs=None, input_names=("x",), batch_dims=(0,), spec="pkg:m")

    def fake_export(s, path, keep_batch_norms=False):
        path.write_bytes(b"onnx")
        return Export(path, "dynamo", 20, 12.5, 4)

    captured = []
    monkeypatch.setattr(pt, "export_onnx", fake_export)
    monkeypatch.setattr(profiles, "capture_profile", lambda *a, **k: captured.append(a[1]))
    benched = []
    seconds: dict = {}
    path, runs = pt.prepare(src, tmp_path, [1, 8], "fp16", None, bench=lambda p, b: benched.append((p, b)),
                            seconds=seconds)
    assert seconds["export"] == 12.5 and 0 <= seconds["bench"] < 5 and benched == [(path, [1, 8])]
    assert captured == [1, 8] and [r.batch for r in runs] == [1, 8]
    again: dict = {}
    pt.prepare(src, tmp_path, [1], "fp16", None, bench=False, seconds=again)
    assert again == {}  # the export was kept and nothing benched


def test_prepare_without_logs_runs_no_log_child(tmp_path, monkeypatch):
    """``benanza torch --no-logs``: no eager run gets a log run (the truth benchmarks read kernel time and
    the LBL only; the log runs were 53-67 s of an LLM command's 181-320 s, 2026-11-27f); a torch.compile
    run never gets one."""
    import benanza.profiles as profiles
    import benanza.profiles.pytorch as pt
    from benanza.processing.modules import Export, ModuleSource

    src = ModuleSource("m", "factory", build=None, inputs=None, input_names=("x",), batch_dims=(0,), spec="pkg:m")
    monkeypatch.setattr(pt, "export_onnx", lambda s, path, keep_batch_norms=False: (
        path.write_bytes(b"onnx"), Export(path, "dynamo", 20, 1.0, 4))[1])
    logs = []
    monkeypatch.setattr(profiles, "capture_profile", lambda *a, **k: logs.append((a[1], k["compile"], k["logs"])))
    pt.prepare(src, tmp_path, [1, 8], "fp16", None, compile="default", bench=False)
    assert logs == [(1, None, True), (1, "default", False), (8, None, True), (8, "default", False)]
    logs.clear()
    pt.prepare(src, tmp_path, [1, 8], "fp16", None, compile="default", bench=False, logs=False)
    assert [x[2] for x in logs] == [False] * 4


def test_each_run_is_reported_before_the_next_is_profiled(tmp_path, monkeypatch):
    """``benanza torch`` writes each run's report as soon as its profile is taken (``prepare``'s
    ``on_run``): a command cut by its timeout keeps the reports of the runs it finished, which
    ``benchmarks/llm_truth.py`` reads back. 2026-11-28b's qwen2-0.5b prefill 2048 was cut with four of
    its six profiles taken and no report written, so it had no row."""
    import benanza.cli as cli
    import benanza.processing.modules as modules
    import benanza.profiles as profiles
    import benanza.profiles.pytorch as pt
    from typer.testing import CliRunner

    from benanza.processing.modules import Export, ModuleSource

    src = ModuleSource("m", "factory", build=None, inputs=None, input_names=("x",), batch_dims=(0,), spec="pkg:m")
    monkeypatch.setattr(pt, "export_onnx", lambda s, path, keep_batch_norms=False: (
        path.write_bytes(b"onnx"), Export(path, "dynamo", 20, 1.0, 4))[1])
    events = []
    monkeypatch.setattr(profiles, "capture_profile", lambda *a, **k: events.append(("profile", a[1], k["compile"])))
    pt.prepare(src, tmp_path, [1, 8], "fp16", None, compile="default", bench=False,
               on_run=lambda p, r: events.append(("report", r.batch, r.compile)))
    assert events == [(what, b, c) for b in (1, 8) for c in (None, "default") for what in ("profile", "report")]

    # the command: the second run's profile fails (a timeout) after the first run's report is written
    written = []

    def fake_prepare(src, folder, batches, *a, on_run=None, **k):
        runs = pt.profile_runs(folder, batches, "fp16", False, None)
        on_run(folder / "m.onnx", runs[0])
        raise pt.BenanzaError("the profiling child timed out")

    import benanza.reports.framework as report
    import benanza.usecases.torch as T

    monkeypatch.setattr(modules, "resolve", lambda *a, **k: types.SimpleNamespace(name="m", attention=None))
    monkeypatch.setattr(pt, "prepare", fake_prepare)
    monkeypatch.setattr(T, "open_database", lambda db: "the database")
    monkeypatch.setattr(T, "current_fingerprint", lambda: "fp")
    monkeypatch.setattr(T, "run_report", lambda req, db, folder, onnx, r, *a: written.append(r.batch) or r)
    monkeypatch.setattr(report, "write_html", lambda rep: None)
    res = CliRunner().invoke(cli.app, ["torch", "pkg:m", "--batch", "1,8", "--dtype", "fp16", "--no-bench",
                                       "-o", str(tmp_path / "w")])
    assert res.exit_code != 0 and "timed out" in res.output
    assert written == [1]


def test_torch_train_says_where_the_command_time_goes(tmp_path, monkeypatch):
    """``benanza torch --train``'s comparisons carry the export's and bench's seconds too
    (``run.command_seconds``, in each report's JSON), as the inference reports do."""
    import types

    import benanza.processing.modules as modules
    import benanza.profiles.pytorch as pt
    import benanza.usecases.torch as T
    from benanza.spec import TorchRequest

    monkeypatch.setattr(modules, "resolve", lambda spec, seq, shape, train=False: types.SimpleNamespace(name="m"))

    def fake_prepare(src, folder, batches, *a, seconds=None, **k):
        seconds.update(export=12.5, bench=30.25)
        return folder / "m_train.onnx", [types.SimpleNamespace(batch=b) for b in batches]

    monkeypatch.setattr(pt, "prepare", fake_prepare)
    monkeypatch.setattr(T, "current_fingerprint", lambda: "fp")
    monkeypatch.setattr(T, "train_comparison", lambda req, p, r, fingerprint=None: types.SimpleNamespace(
        run={"batch": r.batch}))
    comps = T.torch_train(TorchRequest("resnet18", (2, 8), "fp16", output=tmp_path, bench=False)).comparisons
    assert [c.run for c in comps] == [{"batch": b, "command_seconds": {"export": 12.5, "bench": 30.25}} for b in (2, 8)]


def test_capture_refuses_an_unknown_optimizer(tmp_path, small_model):
    from benanza.errors import UsageError
    from benanza.profiles.capture import capture_profile

    with pytest.raises(UsageError, match="unknown optimizer 'lamb'"):
        capture_profile(small_model.path, 2, "fp32", tmp_path / "p", train=True, optimizer="lamb")


def test_torch_train_refuses_an_unknown_optimizer():
    from typer.testing import CliRunner

    from benanza.cli import app

    r = CliRunner().invoke(app, ["torch", "resnet18", "--train", "--optimizer", "lamb", "--no-bench"])
    assert r.exit_code != 0 and "--optimizer must be one of sgd, adam, adamw" in r.output


def test_a_training_profile_folder_is_loaded_and_checked(tmp_path, small_model, small_trace):
    from benanza.errors import ProfileError
    from benanza.profiles.train_join import load_train_join

    f = tmp_path / "profile-b2-fp32-train-sgd"
    f.mkdir()
    with gzip.open(f / "trace.json.gz", "wt") as fo:
        json.dump({"traceEvents": json.loads(gzip.open(small_trace.path, "rt").read())["traceEvents"]}, fo)
    doc = {"format": "benanza-profile", "version": 1, "batch": 2, "model_sha256": small_model.sha256,
           "files": {"trace": "trace.json.gz"}, "train": {"optimizer": "sgd"}}
    (f / "profile.json").write_text(json.dumps(doc))
    tj, d = load_train_join(f, small_model)
    assert d["train"]["optimizer"] == "sgd" and tj.step_ms()["n"] == 2
    (f / "profile.json").write_text(json.dumps({**doc, "train": None}))
    with pytest.raises(ProfileError, match="not a profile of training steps"):
        load_train_join(f, small_model)
    (f / "profile.json").write_text(json.dumps({**doc, "model_sha256": "0" * 64}))
    with pytest.raises(ProfileError, match="another model"):
        load_train_join(f, small_model)


def test_the_report_is_printed_and_written(tmp_path, small_join, capsys):
    from benanza.profiles.train_compare import TrainComparison
    from benanza.reports import framework as cli

    folder = tmp_path / "profile-b2-fp32-train-sgd"
    run = {"label": "eager, training step (sgd)", "folder": str(folder), "batch": 2, "dtype": "fp32",
           "optimizer": "sgd", "notices": [], "step_wall_ms": {"median_ms": 0.5, "iqr_ms": 0.01}}
    for complete in (True, False):
        c = TrainComparison(small_join, _step(complete, 0.008 if complete else None), dict(run))
        cli.print_train_comparisons([c], "small", json_out=False)
        text = capsys.readouterr().out
        assert "step Benanza ratio" in text and ("INCOMPLETE" in text) is not complete
        d = json.loads((tmp_path / "report-b2-fp32-train-sgd.json").read_text())
        assert d["complete"] is complete and d["run"]["spec"] == "small"
    cli.print_train_comparisons([c], "small", json_out=True)
    docs = envelope_of(capsys.readouterr().out, "torch")["scenarios"]
    assert docs[0]["ratios"]["optimizer"]["ratio"] is None and docs[0]["pytorch"]["iterations"] == 2


def test_a_batch_norm_the_export_folded_makes_the_ratio_incomplete():
    from benanza.profiles.train_compare import TrainComparison
    from benanza.profiles.train_join import TrainJoin, TrainKernel

    def k(i, role, phase, layer, fop, ms):
        return TrainKernel(i, f"k{i}", "kernel", 0, phase, role, layer, None, None, fop, ms)

    ks = (k(0, "forward", "forward", 0, "aten::conv2d", 0.05), k(1, "forward", "forward", None, "aten::batch_norm", 0.02),
          k(2, "backward", "backward", None, "aten::batch_norm", 0.03), k(3, "backward", "backward", 0, "aten::conv2d", 0.1),
          k(4, "optimizer", "optimizer", None, "aten::_foreach_add_", 0.01))
    c = TrainComparison(TrainJoin(ks, (0,), {0: "conv"}), _step(True, 0.008))
    assert c.step.complete and not c.complete
    assert c.uncovered_ops() == {"aten::batch_norm": pytest.approx(0.05)}
    r = c.ratios()
    assert not r["step"]["complete"] and not r["forward"]["complete"] and r["optimizer"]["complete"]
    assert "INCOMPLETE" in c.ratio_text() and "aten::batch_norm 0.0500 ms" in c.ratio_text()
    assert c.to_dict()["complete"] is False


CPU_TRACE = DATA / "tiny_train_net_train_b2_fp32_cpu.json.gz"
CPU_MODEL = DATA / "tiny_train_net_train.onnx"


def test_autograd_numbers_of_a_real_pytorch_trace():
    """PyTorch 2.11's own trace of two training steps of benchmarks/tiny_train_net.py on the CPU
    (benchmarks/record_train_trace.py --spec benchmarks.tiny_train_net:build --input-shape 3x16x16
    --device cpu: no kernels, the sequence numbers as torch writes them): every backward node reaches
    the forward op that created it and that op's layer; the export folded the batch norm."""
    from benanza.processing.model import process
    from benanza.profiles.join import layer_paths
    from benanza.profiles.train_join import backward_nodes

    ml = process(CPU_MODEL, 2)
    tr = read_trace(CPU_TRACE)
    assert [ly.op_type for ly in ml.layers] == ["Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm"]
    ev = [o for o in tr.cpu_ops if o.name.startswith("autograd::engine::evaluate_function: ConvolutionBackward0")]
    assert len(ev) == 2 and all(o.sequence is not None and o.fwd_thread == 1 for o in ev)
    fwd = [o for o in tr.cpu_ops if o.name == "aten::convolution"]
    assert [o.fwd_thread for o in fwd] == [0, 0] and [o.sequence for o in fwd] == [e.sequence for e in ev]
    nodes = backward_nodes(tr, ml, layer_paths(ml, CPU_MODEL))
    kinds = {(n["node"], n["forward_op"], n["forward_phase"],
              ml.layers[n["layer"]].op_type if n["layer"] is not None else None) for n in nodes}
    assert kinds == {("NllLossBackward0", "aten::cross_entropy_loss", "loss", None),
                     ("LogSoftmaxBackward0", "aten::cross_entropy_loss", "loss", None),
                     ("ViewBackward0", "aten::reshape", "loss", None),
                     ("AddmmBackward0", "aten::linear", "forward", "Gemm"),
                     ("TBackward0", "aten::linear", "forward", "Gemm"),
                     ("ViewBackward0", "aten::flatten", "forward", "Flatten"),
                     ("MeanBackward1", "aten::adaptive_avg_pool2d", "forward", "GlobalAveragePool"),
                     ("ReluBackward0", "aten::relu", "forward", "Relu"),
                     ("NativeBatchNormBackward0", "aten::batch_norm", "forward", None),
                     ("ConvolutionBackward0", "aten::conv2d", "forward", "Conv")}
    assert len(nodes) == 2 * len(kinds)  # both iterations
    doc = json.loads((DATA / "tiny_train_net_train_b2_fp32_cpu.profile.json").read_text())
    assert doc["train"]["optimizer"] == "sgd" and doc["settings"]["mode"] == "train"
