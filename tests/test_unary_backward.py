"""The backward of the unary elementwise ops (issue 26): the UnaryBwd kind and the Unary kind's
``Kind.backward``. ViT-B/16's and BERT's Gelu layers expanded into their data gradients (shapes, FLOPs,
minimum bytes by arithmetic), the ops that give no call (zero or no gradient) and the one that stays
incomplete (a float-to-float Cast); benanza's derivative kernel (cpp/src/unary_backward_kernels.cu
``unary_grad_op``, compiled here for the host with the forward's ``float_unary``) against finite
differences of the ONNX formulas; the PyTorch candidates (the aten backward ops, composites refused);
a suite that renders and whose source passes g++ -fsyntax-only (it compiles and links in
test_training_step.py's training suite)."""
from __future__ import annotations

import re
import shutil
import subprocess
from math import erf

import numpy as np
import pytest

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate, job_id
from benanza.kinds.base import Job
from benanza.kinds.framework import Ctx, NotSupported
from benanza.kinds.unary import unary_input_range
from benanza.kinds.unary_backward import UNARY_BACKWARD, ZERO_GRADIENT
from benanza.processing.model import Layer, ModelLayers, process
from benanza.processing.training import training_plan
from conftest import REPO
from onnx_builders import HOSTILE

VIT = REPO / "tests" / "data" / "zoo" / "models" / "vit_b_16.onnx"
BERT = REPO / "tests" / "data" / "bert_dynamic.onnx"
U, UB = L.UnaryConfig, L.UnaryBwdConfig


def _backward(cfg):
    return L.REGISTRY[cfg.kind].backward(cfg)


# ----------------------------------------------------------------------------- real models

def test_every_gelu_of_vit_b_16_has_its_data_gradient():
    ml = process(VIT, 32)
    gelus = [ly for ly in ml.layers if ly.op_type == "Gelu"]
    assert len(gelus) == 12
    for ly in gelus:
        assert ly.config == U(shape=(32, 197, 3072), op="gelu")
        (phase, cfg), = _backward(ly.config)
        assert phase == "backward_data" and cfg == UB(shape=(32, 197, 3072), op="gelu") and cfg.saved == "x"
        n = 32 * 197 * 3072
        assert cfg.input_shapes() == [(32, 197, 3072)] * 2 and cfg.output_shape() == (32, 197, 3072)
        assert cfg.flops() == 11 * n
        # x and dy read, dx written: 2 bytes each in fp16, 4 in fp32
        assert min_bytes(cfg, "fp16") == 3 * 2 * n and min_bytes(cfg, "fp32") == 3 * 4 * n
        assert cfg.describe() == "UnaryBwd(gelu 32x197x3072)" and cfg.key.startswith("unarybwd-")
    plan = training_plan(ml)
    assert not [i for i in plan.no_backward if ml.layers[i].config and ml.layers[i].config.kind == "Unary"]
    assert sum(c.config.kind == "UnaryBwd" for c in plan.calls) == 12


def test_berts_unary_layers():
    """BERT's Gelus get their gradient; its IsNaN (a bool output) and its Cast of the int64 attention
    mask give no call (no gradient flows: ``TrainingPlan.no_gradient``), so no Unary layer is left without
    a backward."""
    ml = process(BERT, 32)
    plan = training_plan(ml)
    unary = [ly for ly in ml.layers if ly.config is not None and ly.config.kind == "Unary"]
    assert sorted(ly.config.op for ly in unary) == ["cast", "gelu", "gelu", "is_nan", "is_nan"]
    for ly in unary:
        calls = _backward(ly.config)
        if ly.config.op == "gelu":
            assert calls == (("backward_data", UB(shape=ly.config.shape, op="gelu")),)
        else:
            assert calls == () and (ly.config.dst or ly.config.src in L.STORED_TYPES), ly.config
            assert ly.index in plan.no_gradient and ly.index not in plan.no_backward
    assert not [i for i in plan.no_backward if ml.layers[i].config and ml.layers[i].config.kind == "Unary"]


def test_which_unary_configs_get_which_backward():
    s = (4, 8)
    assert _backward(U(shape=s, op="exp")) == (("backward_data", UB(shape=s, op="exp")),)
    assert UB(shape=s, op="exp").saved == "y" and UB(shape=s, op="neg").saved == ""
    assert UB(shape=s, op="neg").input_shapes() == [s] and min_bytes(UB(shape=s, op="neg"), "fp32") == 2 * 4 * 32
    assert _backward(U(shape=s, op="pow", exponent=2.0)) == (("backward_data", UB(shape=s, op="pow", exponent=2.0)),)
    for op in ZERO_GRADIENT:  # derivatives.yaml: zeros_like(grad)
        assert _backward(U(shape=s, op=op)) == ()
    assert _backward(U(shape=s, op="is_nan", dst="bool")) == ()
    assert _backward(U(shape=s, op="not", src="bool", dst="bool")) == ()
    assert _backward(U(shape=s, op="abs", src="int32", dst="int32")) == ()
    assert _backward(U(shape=s, op="cast", src="int64")) == ()  # to float: the integer input has no gradient
    assert _backward(U(shape=s, op="cast", src="float32", dst="int32")) == ()
    assert _backward(U(shape=s, op="cast", src="float32")) is None  # a Cast back, not expressed yet
    with pytest.raises(ValueError):
        UB(shape=s, op="floor")
    # every float op of the Unary kind is either differentiated or documented as gradient-free
    float_ops = set(L.UNARY_OPS) - {"cast", "is_inf", "is_nan", "not", "bitwise_not"}
    assert float_ops == set(UNARY_BACKWARD) | set(ZERO_GRADIENT)


# ----------------------------------------------------------------------------- the kernel's formulas

def _sp(x):
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20))))


_erf = np.vectorize(erf)

#: the ONNX forward of each op (float64), attributes (exponent, alpha, beta) as the config holds them
FORWARD = {
    "gelu": lambda x, e, a, b: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_tanh": lambda x, e, a, b: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "erf": lambda x, e, a, b: _erf(x), "exp": lambda x, e, a, b: np.exp(x), "log": lambda x, e, a, b: np.log(x),
    "sqrt": lambda x, e, a, b: np.sqrt(x), "reciprocal": lambda x, e, a, b: 1 / x, "neg": lambda x, e, a, b: -x,
    "abs": lambda x, e, a, b: np.abs(x), "pow": lambda x, e, a, b: x ** e,
    "acos": lambda x, e, a, b: np.arccos(x), "acosh": lambda x, e, a, b: np.arccosh(x),
    "asin": lambda x, e, a, b: np.arcsin(x), "asinh": lambda x, e, a, b: np.arcsinh(x),
    "atan": lambda x, e, a, b: np.arctan(x), "atanh": lambda x, e, a, b: np.arctanh(x),
    "cos": lambda x, e, a, b: np.cos(x), "cosh": lambda x, e, a, b: np.cosh(x), "sin": lambda x, e, a, b: np.sin(x),
    "sinh": lambda x, e, a, b: np.sinh(x), "tan": lambda x, e, a, b: np.tan(x),
    "hard_swish": lambda x, e, a, b: x * np.clip(x / 6 + 0.5, 0, 1),
    "mish": lambda x, e, a, b: x * np.tanh(_sp(x)),
    "selu": lambda x, e, a, b: np.where(x > 0, b * x, b * (a * np.exp(x) - a)),
    "celu": lambda x, e, a, b: np.maximum(0, x) + np.minimum(0, a * (np.exp(x / a) - 1)),
    "softplus": lambda x, e, a, b: _sp(x), "softsign": lambda x, e, a, b: x / (1 + np.abs(x)),
    "thresholded_relu": lambda x, e, a, b: np.where(x > a, x, 0.0),
    "shrink": lambda x, e, a, b: np.where(x < -a, x + b, np.where(x > a, x - b, 0.0)),
    "clip": lambda x, e, a, b: np.clip(x, a, b),
    "swish": lambda x, e, a, b: x / (1 + np.exp(-a * x)),
}
assert set(FORWARD) == set(UNARY_BACKWARD)
#: (exponent, alpha, beta) of the configs checked
ATTRS = {"pow": (3.0, 0, 0), "selu": (0, 1.6732632, 1.050701), "celu": (0, 1.3, 0), "thresholded_relu": (0, 0.4, 0),
         "shrink": (0, 0.5, 0.2), "clip": (0, -0.3, 0.6), "swish": (0, 1.7, 0)}
#: points where the derivative is one-sided, kept away from
KINKS = {"abs": [0.0], "hard_swish": [-3.0, 3.0], "selu": [0.0], "celu": [0.0], "thresholded_relu": [0.4],
         "shrink": [-0.5, 0.5], "clip": [-0.3, 0.6]}


def _points(op):
    e, a, b = ATTRS.get(op, (0, 0, 0))
    lo, hi = unary_input_range(U(shape=(1,), op=op, exponent=float(e), alpha=float(a), beta=float(b)))
    if op in ("hard_swish", "softplus"):
        lo, hi = -4.5, 4.5 if op == "hard_swish" else 25.0
    x = np.linspace(lo, hi, 241)[1:-1]
    keep = np.all([np.abs(x - k) > 1e-2 for k in KINKS.get(op, [])], axis=0) if op in KINKS else np.ones_like(x, bool)
    return x[keep]


_HOST = r"""
#include <math.h>
#include <cmath>
#include <cstdio>
#include <cstdint>
using std::isinf; using std::isnan;
#define __device__
#define __forceinline__ inline
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
%s
%s
%s
%s
int main() {
  int op; float e, a, b; double x, g;
  while (std::scanf("%%d %%f %%f %%f %%lf %%lf", &op, &e, &a, &b, &x, &g) == 6) {
    UnaryParams p; p.exponent = e; p.alpha = a; p.beta = b;
    const UnaryOp o = static_cast<UnaryOp>(op);
    const float y = float_unary(o, static_cast<float>(x), p);
    const int saved = (o == UnaryOp::EXP || o == UnaryOp::SQRT || o == UnaryOp::RECIPROCAL || o == UnaryOp::TAN) ? 2 : 1;
    const float s = saved == 2 ? y : static_cast<float>(x);
    std::printf("%%.9g %%.9g\n", y, unary_grad_op(o, s, static_cast<float>(g), p));
  }
}
"""


def _device_function(src: str, name: str) -> str:
    """The definition of the float function ``name`` in ``src``: its one line, or up to its closing brace."""
    m = re.search(r"__device__ __forceinline__ float " + name + r"\([^\n]*\}\n", src) or \
        re.search(r"__device__ __forceinline__ float " + name + r"\(.*?\n}\n", src, re.S)
    assert m, name
    return m.group(0)


@pytest.fixture(scope="module")
def host_kernel(tmp_path_factory):
    """The forward (unary_kernels.cuh) and derivative (unary_backward_kernels.cu) formulas compiled for
    the host, with transformer.hpp's UnaryOp and UnaryParams."""
    hpp = (REPO / "cpp" / "include" / "benanza" / "transformer.hpp").read_text()
    types = re.search(r"enum class UnaryOp : int \{.*?\};", hpp, re.S).group(0) + "\n" + \
        re.search(r"struct UnaryParams \{.*?\};", hpp, re.S).group(0)
    cuh = (REPO / "cpp" / "src" / "unary_kernels.cuh").read_text()
    cu = (REPO / "cpp" / "src" / "unary_backward_kernels.cu").read_text()
    consts = "\n".join(ln for ln in cu.splitlines() if ln.startswith("constexpr float k"))
    fwd = _device_function(cuh, "softplus") + _device_function(cuh, "float_unary")
    grad = _device_function(cu, "sigmoidf") + _device_function(cu, "unary_grad_op")
    d = tmp_path_factory.mktemp("ugrad")
    (d / "u.cpp").write_text(_HOST % (types, consts, fwd, grad))
    subprocess.run(["g++", "-std=c++17", "-O1", "-o", str(d / "u"), str(d / "u.cpp")], check=True)
    return d / "u"


@pytest.mark.parametrize("op", sorted(UNARY_BACKWARD))
def test_the_kernels_derivative_is_the_forwards(op, host_kernel):
    """dy * f'(.) of benanza's kernel (compiled for the host, given the saved tensor the case names)
    equals dy times the central finite difference of the ONNX forward formula (float64)."""
    e, a, b = ATTRS.get(op, (0, 0, 0))
    cfg = UB(shape=(1,), op=op, exponent=float(e), alpha=float(a), beta=float(b))
    case = L.REGISTRY["UnaryBwd"].case(cfg, Job(id=job_id(cfg, "fp32"), config=cfg, precision="fp32", node="n"))
    assert case.saved == {"": "0", "x": "1", "y": "2"}[cfg.saved]
    enum = re.search(r"enum class UnaryOp : int \{(.*?)\};",
                     (REPO / "cpp" / "include" / "benanza" / "transformer.hpp").read_text(), re.S).group(1)
    names = [w.strip() for w in enum.replace("\n", " ").split(",") if w.strip()]
    index = names.index(case.op.split("::")[1])
    x = _points(op).astype(np.float32).astype(np.float64)
    g = np.cos(3 * x) + 1.5
    lines = "".join(f"{index} {e!r} {a!r} {b!r} {xi!r} {gi!r}\n" for xi, gi in zip(x.tolist(), g.tolist()))
    out = subprocess.run([str(host_kernel)], input=lines, capture_output=True, text=True, check=True).stdout
    got = np.array([[float(v) for v in ln.split()] for ln in out.splitlines()])
    assert got.shape == (len(x), 2)
    f = FORWARD[op]
    np.testing.assert_allclose(got[:, 0], f(x, e, a, b), rtol=1e-5, atol=1e-5)
    h = 1e-6
    fd = (f(x + h, e, a, b) - f(x - h, e, a, b)) / (2 * h)
    np.testing.assert_allclose(got[:, 1], g * fd, rtol=2e-4, atol=2e-5)


def test_flops_per_element():
    per = {op: UB(shape=(2, 3), op=op, alpha=1.0).flops() // 6 for op in UNARY_BACKWARD}
    assert per["gelu"] == 11 and per["gelu_tanh"] == 16 and per["exp"] == 1 and per["neg"] == 1
    assert all(v >= 1 for v in per.values())


# ----------------------------------------------------------------------------- PyTorch candidates

def _candidate(cfg):
    from test_kinds_registry import _Recorder

    return L.REGISTRY[cfg.kind].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), False))


def test_pytorch_candidates_are_the_aten_backward_ops():
    s = (2, 3)
    calls = {op: _candidate(UB(shape=s, op=op, alpha=1.0 if op == "swish" else 0.5,
                                 beta=0.5 if op == "shrink" else 1.0)).call
             for op in UNARY_BACKWARD if UNARY_BACKWARD[op][1]}
    assert calls == {
        "gelu": "torch:aten::gelu_backward", "gelu_tanh": "torch:aten::gelu_backward", "exp": "torch:aten::mul",
        "log": "torch:aten::div", "neg": "torch:aten::neg", "hard_swish": "torch:aten::hardswish_backward",
        "mish": "torch:aten::mish_backward", "selu": "torch:aten::elu_backward", "celu": "torch:aten::elu_backward",
        "softplus": "torch:aten::softplus_backward", "thresholded_relu": "torch:aten::threshold_backward",
        "shrink": "torch:aten::softshrink_backward", "swish": "torch:aten::silu_backward"}
    assert _candidate(UB(shape=s, op="shrink", alpha=0.5)).call == "torch:aten::hardshrink_backward"
    assert _candidate(UB(shape=s, op="gelu")).out_numel == 6
    for op in ("erf", "sqrt", "reciprocal", "abs", "pow", "sin", "clip", "softsign"):  # composites
        with pytest.raises(NotSupported, match="composite"):
            _candidate(UB(shape=s, op=op))
    with pytest.raises(NotSupported):
        _candidate(UB(shape=s, op="swish", alpha=1.7))
    with pytest.raises(NotSupported):
        _candidate(UB(shape=s, op="shrink", alpha=0.5, beta=0.2))


# ----------------------------------------------------------------------------- the generated suite

def _model(batch: int) -> ModelLayers:
    cfgs = [UB(shape=(batch, 197, 3072), op="gelu"), UB(shape=(batch, 3, 5, 7), op="gelu_tanh"),
            UB(shape=(batch, 128), op="exp"), UB(shape=(batch, 128), op="neg"),
            UB(shape=(batch, 64), op="pow", exponent=3.0), UB(shape=(batch, 64), op="clip", alpha=-1.0, beta=1.0)]
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"bwd{i}", op_type="Backward", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="ubwd", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=20,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def syntax_check(suite_dir, source: str) -> None:
    """g++ -fsyntax-only of a generated source against the suite's harness headers and the pip wheels'
    CUDA, cuDNN and cuBLAS headers (skipped where g++ or the headers are missing)."""
    import site

    sp = next((p for p in map(__import__("pathlib").Path, site.getsitepackages()) if (p / "nvidia").is_dir()), None)
    if not shutil.which("g++") or sp is None or not (sp / "nvidia" / "cu13" / "include" / "cublas_v2.h").exists():
        pytest.skip("g++ or the CUDA/cuDNN/cuBLAS headers of the pip wheels are missing")
    inc = [suite_dir / "harness" / "include", sp / "nvidia" / "cudnn" / "include", sp / "nvidia" / "cu13" / "include",
           sp / "include"]
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", *[f"-I{p}" for p in inc], str(suite_dir / "src" / source)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    suite = generate([_model(1), _model(32)], ["fp32", "fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"UnaryBwd"} and len(suite.jobs) == 6 * 2 * 2
    src = (tmp_path / "s" / "src" / "unarybwd.cpp").read_text()
    assert "unary_backward_kernel(" in src and "UnaryOp::GELU, 0.0, 0.0, 0.0, 1," in src
    assert "UnaryOp::EXP, 0.0, 0.0, 0.0, 2," in src and "UnaryOp::NEG, 0.0, 0.0, 0.0, 0," in src
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src
    syntax_check(tmp_path / "s", "unarybwd.cpp")
