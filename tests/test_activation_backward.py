"""The backward pass of the cheap layers (issue 26: softmax, pooling, activation and elementwise backward):
the ActivationBwd, PoolingBwd and SoftmaxBwd kinds and the ``Kind.backward`` of Activation, Pooling,
Softmax and Elementwise. resnet50's Relu, MaxPool, GlobalAveragePool and Add layers expanded into their
backward calls (shapes, FLOPs and minimum bytes by arithmetic); the derivative formulas of benanza's
backward kernel (cpp/src/kernels.cu ``activation_grad_op``, compiled here for the host) against a Python
statement of PyTorch's formulas and against finite differences of the forward kernel's formulas; the
PyTorch candidates; a suite of backward jobs that renders (it compiles and links in
test_training_step.py's training suite)."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate, job_id
from benanza.kinds.base import Job, numel
from benanza.kinds.framework import Ctx, NotSupported
from benanza.processing.model import Layer, ModelLayers, process
from conftest import REPO
from onnx_builders import HOSTILE

RESNET50 = REPO / "examples" / "resnet50.onnx"


def _backward(cfg):
    return L.REGISTRY[cfg.kind].backward(cfg)


# ----------------------------------------------------------------------------- resnet50's layers

@pytest.fixture(scope="module")
def resnet50():
    return process(RESNET50, 32)


def test_every_relu_of_resnet50_has_its_data_gradient(resnet50):
    relus = [ly for ly in resnet50.layers if ly.op_type == "Relu"]
    assert len(relus) == 49
    for ly in relus:
        (phase, cfg), = _backward(ly.config)
        shape = ly.config.shape
        assert phase == "backward_data" and cfg == L.ActivationBwdConfig(shape=shape, mode="relu")
        assert cfg.input_shapes() == [shape, shape] and cfg.output_shape() == shape and cfg.saved == "y"
        assert cfg.flops() == numel(shape)  # one select per element
        # y and dy read, dx written: 2 bytes each in fp16, 4 in fp32
        assert min_bytes(cfg, "fp16") == 3 * 2 * numel(shape) and min_bytes(cfg, "fp32") == 3 * 4 * numel(shape)
    first = relus[0].config.shape
    assert first == (32, 64, 112, 112)
    assert L.ActivationBwdConfig(shape=first, mode="relu").flops() == 32 * 64 * 112 * 112


def test_the_max_pool_and_the_global_average_pool_of_resnet50(resnet50):
    pools = {ly.op_type: ly.config for ly in resnet50.layers if ly.op_type in ("MaxPool", "GlobalAveragePool")}
    (phase, mp), = _backward(pools["MaxPool"])
    assert phase == "backward_data" and mp.kind == "PoolingBwd" and mp.forward == pools["MaxPool"]
    assert mp.input_shapes() == [(32, 64, 56, 56), (32, 64, 112, 112)] and mp.output_shape() == (32, 64, 112, 112)
    assert mp.flops() == 32 * 64 * 56 * 56  # each dy added once into its window's maximum
    # dy read (2 bytes) with the maximum's place in a 3x3 window (1 byte), dx written (2 bytes)
    assert min_bytes(mp, "fp16") == (2 + 1) * 32 * 64 * 56 * 56 + 2 * 32 * 64 * 112 * 112
    (phase, gap), = _backward(pools["GlobalAveragePool"])
    assert phase == "backward_data" and gap.is_global and gap.mode == "avg_include_pad"
    assert gap.output_shape() == (32, 2048, 7, 7) and gap.flops() == 32 * 2048 * 49
    assert min_bytes(gap, "fp32") == 4 * 32 * 2048 + 4 * 32 * 2048 * 49  # dy alone read
    assert not mp.is_global


def test_the_residual_adds_of_resnet50_pass_the_gradient_through(resnet50):
    adds = [ly.config for ly in resnet50.layers if ly.op_type == "Add"]
    assert len(adds) == 16 and all(c.a == c.b for c in adds)
    assert all(_backward(c) == () for c in adds)


# ----------------------------------------------------------------------------- elementwise backward

def test_elementwise_backward_calls():
    E, R, U = L.ElementwiseConfig, L.ReduceConfig, L.UnaryConfig
    y = (32, 64, 56, 56)
    # a per-channel bias at batch 32: its gradient is the sum of dy over N, H, W (a weight gradient)
    assert _backward(E(op="add", a=y, b=(1, 64, 1, 1))) == (
        ("backward_weight", R(op="sum", x=y, y=(1, 64, 1, 1))),)
    # the same shapes at batch 1 cannot tell a bias from data: a data gradient
    assert _backward(E(op="add", a=(1, 64, 56, 56), b=(1, 64, 1, 1)))[0][0] == "backward_data"
    assert _backward(E(op="sub", a=y, b=y)) == (("backward_data", U(shape=y, op="neg")),)
    assert _backward(E(op="sub", a=(1, 64, 1, 1), b=y)) == (
        ("backward_data", U(shape=y, op="neg")), ("backward_weight", R(op="sum", x=y, y=(1, 64, 1, 1))))
    # a squeeze-excitation scale: dA = dY * s, ds = sum_{H,W}(dY * A)
    s = (32, 64, 1, 1)
    assert _backward(E(op="mul", a=y, b=s)) == (
        ("backward_data", E(op="mul", a=y, b=s)), ("backward_data", E(op="mul", a=y, b=y)),
        ("backward_data", R(op="sum", x=y, y=s)))
    for call in _backward(E(op="mul", a=y, b=s)):
        assert call[1].kind in L.REGISTRY
    # div and max have theirs (test_where_backward.py); prelu and fmod not yet
    assert _backward(E(op="prelu", a=y, b=(1, 64, 1, 1))) is None and _backward(E(op="fmod", a=y, b=y)) is None
    assert _backward(E(op="less", a=y, b=y)) == () and _backward(E(op="add", a=y, b=y, dtype="int64")) == ()


# ----------------------------------------------------------------------------- the kernel's formulas

def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


#: PyTorch's forward of each mode (ONNX's: HardSigmoid with alpha, beta) and the derivative formula of
#: its backward op (threshold_backward, sigmoid_backward, tanh_backward, hardtanh_backward,
#: leaky_relu_backward, elu_backward, hardsigmoid_backward, silu_backward), from the saved tensor s (y or x)
FORWARD = {
    "relu": lambda x, a, b: np.maximum(x, 0.0), "sigmoid": lambda x, a, b: _sig(x), "tanh": lambda x, a, b: np.tanh(x),
    "clipped_relu": lambda x, a, b: np.minimum(np.maximum(x, 0.0), a),
    "leaky_relu": lambda x, a, b: np.where(x > 0, x, a * x),
    "elu": lambda x, a, b: np.where(x > 0, x, a * (np.exp(x) - 1.0)),
    "hard_sigmoid": lambda x, a, b: np.clip(a * x + b, 0.0, 1.0), "swish": lambda x, a, b: x * _sig(x),
}
GRAD = {
    "relu": lambda s, g, a, b: np.where(s <= 0, 0.0, g), "sigmoid": lambda s, g, a, b: g * (1 - s) * s,
    "tanh": lambda s, g, a, b: g * (1 - s * s), "clipped_relu": lambda s, g, a, b: np.where((s <= 0) | (s >= a), 0.0, g),
    "leaky_relu": lambda s, g, a, b: np.where(s > 0, g, a * g),
    "elu": lambda s, g, a, b: np.where(s <= 0, g * a * np.exp(s), g),
    "hard_sigmoid": lambda s, g, a, b: np.where((a * s + b > 0) & (a * s + b < 1), a * g, 0.0),
    "swish": lambda s, g, a, b: g * _sig(s) * (1 + s * (1 - _sig(s))),
}
#: (alpha, beta) of the configs checked, and the kernel's mode and coefficient for each
COEFS = {"relu": (0.0, 0.0), "sigmoid": (0.0, 0.0), "tanh": (0.0, 0.0), "clipped_relu": (6.0, 0.0),
         "leaky_relu": (0.1, 0.0), "elu": (1.3, 0.0), "hard_sigmoid": (0.2, 0.5), "swish": (0.0, 0.0)}
KMODE = {"sigmoid": 0, "relu": 1, "tanh": 2, "clipped_relu": 3, "elu": 4, "swish": 6, "leaky_relu": -1,
         "hard_sigmoid": -2}


def _points(mode, a, b):
    """Points away from the kinks (where the derivative is one-sided)."""
    x = np.linspace(-7.3, 7.1, 301)
    kinks = {"relu": [0.0], "clipped_relu": [0.0, a], "leaky_relu": [0.0], "elu": [0.0]}.get(mode, [])
    if mode == "hard_sigmoid":
        kinks = [-b / a, (1 - b) / a]
    keep = np.all([np.abs(x - k) > 1e-3 for k in kinks], axis=0) if kinks else np.ones_like(x, bool)
    return x[keep]


@pytest.mark.parametrize("mode", L.ACTIVATION_MODES)
def test_the_derivative_formulas_are_the_forward_formulas_derivatives(mode):
    a, b = COEFS[mode]
    x = _points(mode, a, b)
    h = 1e-6
    fd = (FORWARD[mode](x + h, a, b) - FORWARD[mode](x - h, a, b)) / (2 * h)
    g = np.cos(x) + 1.5  # an arbitrary incoming gradient
    s = FORWARD[mode](x, a, b) if L.ActivationBwdConfig(shape=(1,), mode=mode).saved == "y" else x
    np.testing.assert_allclose(GRAD[mode](s, g, a, b), g * fd, rtol=1e-6, atol=1e-6)


_HOST = r"""
#include <math.h>
#include <cstdio>
#define __device__
#define __forceinline__ inline
static inline float bz_expf(float x) { return expf(x); }
#define __expf bz_expf
%s
%s
int main() {
  int mode; float coef, coef2; double x, g;
  while (std::scanf("%%d %%f %%f %%lf %%lf", &mode, &coef, &coef2, &x, &g) == 5) {
    const float y = activation_op(mode, static_cast<float>(x), coef, coef2);
    const float s = (mode == 0 || mode == 1 || mode == 2) ? y : static_cast<float>(x);
    std::printf("%%.9g %%.9g\n", y, activation_grad_op(mode, s, static_cast<float>(g), coef, coef2));
  }
}
"""


def _device_function(src: str, name: str) -> str:
    m = re.search(r"__device__ __forceinline__ float " + name + r"\(.*?\n}\n", src, re.S)
    assert m, name
    return m.group(0)


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """The forward and backward activation formulas of cpp/src/kernels.cu compiled for the host."""
    src = (REPO / "cpp" / "src" / "kernels.cu").read_text()
    d = tmp_path_factory.mktemp("act")
    (d / "act.cpp").write_text(_HOST % (_device_function(src, "activation_op"),
                                        _device_function(src, "activation_grad_op")))
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(d / "act"), str(d / "act.cpp")], check=True)
    return d / "act"


@pytest.mark.parametrize("mode", L.ACTIVATION_MODES)
def test_the_kernels_derivative_is_pytorchs(mode, host_kernel):
    """benanza's backward kernel's formula (compiled for the host, as the template calls it: the
    coefficients of the case, the saved tensor y or x) gives PyTorch's formula of the mode."""
    a, b = COEFS[mode]
    cfg = L.ActivationBwdConfig(shape=(1, 4, 1, 1), mode=mode, alpha=a, beta=b)
    case = L.REGISTRY["ActivationBwd"].case(cfg, Job(id=job_id(cfg, "fp32"), config=cfg, precision="fp32", node="n"))
    kcoef, kbeta = float(case.kcoef), float(case.beta)
    assert case.kmode in (str(KMODE[mode]), f"static_cast<int>({L.activation.CUDNN_ACTIVATION[mode][0]})")
    x = _points(mode, a, b).astype(np.float32)
    g = (np.cos(x) + 1.5).astype(np.float32)
    lines = "".join(f"{KMODE[mode]} {kcoef!r} {kbeta!r} {xi!r} {gi!r}\n" for xi, gi in zip(x.tolist(), g.tolist()))
    out = subprocess.run([str(host_kernel)], input=lines, capture_output=True, text=True, check=True).stdout
    got = np.array([[float(v) for v in ln.split()] for ln in out.splitlines()])
    assert got.shape == (len(x), 2)
    np.testing.assert_allclose(got[:, 0], FORWARD[mode](x.astype(np.float64), a, b), rtol=2e-6, atol=2e-6)
    s = got[:, 0] if cfg.saved == "y" else x.astype(np.float64)
    np.testing.assert_allclose(got[:, 1], GRAD[mode](s, g.astype(np.float64), a, b), rtol=1e-5, atol=1e-6)


def test_flops_per_element_of_each_mode():
    shape = (2, 3, 4, 5)
    per = {m: L.ActivationBwdConfig(shape=shape, mode=m).flops() // numel(shape) for m in L.ACTIVATION_MODES}
    assert per == {"relu": 1, "sigmoid": 3, "tanh": 3, "clipped_relu": 2, "leaky_relu": 2, "elu": 4,
                   "hard_sigmoid": 5, "swish": 10}
    with pytest.raises(ValueError):
        L.ActivationBwdConfig(shape=shape, mode="gelu")


def test_softmax_backward():
    fwd = L.SoftmaxConfig(shape=(96, 1000, 1), log=True)
    (phase, cfg), = _backward(fwd)
    assert phase == "backward_data" and cfg == L.SoftmaxBwdConfig(shape=(96, 1000, 1), log=True)
    assert cfg.flops() == 4 * 96000 and min_bytes(cfg, "fp16") == 3 * 2 * 96000


# ----------------------------------------------------------------------------- PyTorch candidates

def _candidate(cfg, nhwc=False):
    from test_kinds_registry import _Recorder

    return L.REGISTRY[cfg.kind].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), nhwc))


def test_pytorch_candidates_are_the_autograd_ops():
    A, P = L.ActivationBwdConfig, L.PoolingBwdConfig
    assert {m: _candidate(A(shape=(2, 3), mode=m, alpha=1 / 6 if m == "hard_sigmoid" else 0.5,
                            beta=0.5)).call for m in L.ACTIVATION_MODES} == {
        "relu": "torch:aten::threshold_backward", "sigmoid": "torch:aten::sigmoid_backward",
        "tanh": "torch:aten::tanh_backward", "clipped_relu": "torch:aten::hardtanh_backward",
        "leaky_relu": "torch:aten::leaky_relu_backward", "elu": "torch:aten::elu_backward",
        "hard_sigmoid": "torch:aten::hardsigmoid_backward", "swish": "torch:aten::silu_backward"}
    with pytest.raises(NotSupported):
        _candidate(A(shape=(2, 3), mode="hard_sigmoid", alpha=0.2, beta=0.5))
    mp = P.of(L.PoolingConfig(x=(1, 8, 10, 10), y=(1, 8, 5, 5), mode="max", kernel=(3, 3), pads=(1, 1, 1, 1),
                              strides=(2, 2)))
    c = _candidate(mp, nhwc=True)
    assert c.call == "torch:aten::max_pool2d_with_indices_backward" and c.out_numel == 800
    assert c.algorithm == "channels_last"
    avg1d = P(x=(2, 4, 9), y=(2, 4, 9), mode="avg_exclude_pad", kernel=(3,), pads=(1, 1), strides=(1,))
    assert _candidate(avg1d).call == "torch:aten::avg_pool2d_backward"
    gap3d = P(x=(2, 4, 3, 5, 5), y=(2, 4, 1, 1, 1), mode="avg_include_pad", kernel=(3, 5, 5), pads=(0,) * 6,
              strides=(1, 1, 1))
    assert _candidate(gap3d).call == "torch:aten::_adaptive_avg_pool3d_backward"
    with pytest.raises(NotSupported):
        _candidate(P(x=(2, 4, 5, 5), y=(2, 4, 1, 1), mode="max", kernel=(5, 5), pads=(0,) * 4, strides=(1, 1)))
    with pytest.raises(NotSupported):
        _candidate(P(x=(1, 8, 10, 10), y=(1, 8, 5, 5), mode="max", kernel=(2, 2), pads=(0, 0, 1, 1), strides=(2, 2)))
    assert _candidate(L.SoftmaxBwdConfig(shape=(4, 10, 1))).call == "torch:aten::_softmax_backward_data"
    assert _candidate(L.SoftmaxBwdConfig(shape=(4, 10, 3), log=True)).call == "torch:aten::_log_softmax_backward_data"


# ----------------------------------------------------------------------------- the generated suite

def _backward_model(batch: int) -> ModelLayers:
    """A model whose layers are backward configs (as the training expansion will give the generator):
    every activation mode, resnet50's pools, an average pool with padding, a 1-D and a 3-D pool, and
    softmax / log-softmax, at ``batch``. The first layer's name is hostile."""
    cfgs = [L.ActivationBwdConfig(shape=(batch, 64, 56, 56), mode=m, alpha=a, beta=b)
            for m, (a, b) in COEFS.items()]
    cfgs += [L.ActivationBwdConfig(shape=(batch, 3, 5, 7), mode="relu")]  # not a multiple of the vector width
    cfgs += [L.PoolingBwdConfig(x=(batch, 64, 112, 112), y=(batch, 64, 56, 56), mode="max", kernel=(3, 3),
                                pads=(1, 1, 1, 1), strides=(2, 2)),
             L.PoolingBwdConfig(x=(batch, 2048, 7, 7), y=(batch, 2048, 1, 1), mode="avg_include_pad", kernel=(7, 7),
                                pads=(0,) * 4, strides=(1, 1)),
             L.PoolingBwdConfig(x=(batch, 32, 17, 17), y=(batch, 32, 17, 17), mode="avg_exclude_pad", kernel=(3, 3),
                                pads=(1, 1, 1, 1), strides=(1, 1)),
             L.PoolingBwdConfig(x=(batch, 16, 50), y=(batch, 16, 25), mode="max", kernel=(2,), pads=(0, 0),
                                strides=(2,)),
             L.PoolingBwdConfig(x=(batch, 8, 8, 16, 16), y=(batch, 8, 4, 8, 8), mode="avg_include_pad",
                                kernel=(2, 2, 2), pads=(0,) * 6, strides=(2, 2, 2)),
             L.SoftmaxBwdConfig(shape=(batch * 12, 197, 1)), L.SoftmaxBwdConfig(shape=(batch, 1000, 1), log=True)]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"bwd{i}", op_type="Backward", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="backward", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=13,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_backward_suite_renders(tmp_path):
    suite = generate([_backward_model(1), _backward_model(32)], ["fp32", "fp16"], tmp_path / "s",
                     layouts=["NCHW", "NHWC"])
    kinds = {j.kind for j in suite.jobs}
    assert kinds == {"ActivationBwd", "PoolingBwd", "SoftmaxBwd"}
    # pooling gets NHWC jobs, activations and softmax do not (the same call on the same bytes)
    assert {j.layout for j in suite.jobs if j.kind == "PoolingBwd"} == {"NCHW", "NHWC"}
    assert {j.layout for j in suite.jobs if j.kind != "PoolingBwd"} == {"NCHW"}
    assert len([j for j in suite.jobs if j.kind == "PoolingBwd"]) == 5 * 2 * 2 * 2
    act = (tmp_path / "s" / "src" / "activationbwd.cpp").read_text()
    assert "cudnnActivationBackward(" in act and "activation_backward_pointwise(" in act
    assert act.count("CUDNN_ACTIVATION_CLIPPED_RELU, 2, -2, 1.0, 0.2, 0.5, false") == 4  # HardSigmoid's proxy
    assert "CUDNN_ACTIVATION_IDENTITY, 1, -1, 0.1, 0.1, 0.0, false" in act  # LeakyRelu: the kernel only
    pool = (tmp_path / "s" / "src" / "poolingbwd.cpp").read_text()
    assert "cudnnPoolingBackward(" in pool and '"NHWC"}, 3, {32, 8, 8, 16, 16}' in pool
    assert "cudnnSoftmaxBackward(" in (tmp_path / "s" / "src" / "softmaxbwd.cpp").read_text()
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in act
