"""The backward of LayerNorm (issue 26): the LayerNormBwd kind and the LayerNorm kind's ``Kind.backward``
(the training-mode forward that saves mean and rstd, and one call for dX, dScale and dBias). ViT-B/16's
and BERT's LayerNormalization layers expanded into their calls (shapes, FLOPs and minimum bytes by
arithmetic); the backward formulas the kernel and template state, checked in numpy against finite
differences of the forward; the PyTorch candidate; a suite that renders and whose source passes
g++ -fsyntax-only (it compiles and links in test_training_step.py's training suite)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.kinds.framework import Ctx
from benanza.kinds.layernorm_backward import FLOPS_PER_ELEMENT
from benanza.processing.model import Layer, ModelLayers, process
from benanza.processing.training import training_plan
from conftest import REPO
from onnx_builders import HOSTILE
from test_unary_backward import syntax_check

VIT = REPO / "tests" / "data" / "zoo" / "models" / "vit_b_16.onnx"
BERT = REPO / "tests" / "data" / "bert_dynamic.onnx"
LB = L.LayerNormBwdConfig


def _backward(cfg):
    return L.REGISTRY[cfg.kind].backward(cfg)


@pytest.mark.parametrize("path,count,x,eps", [(VIT, 25, (32, 197, 768), 1e-6), (BERT, 5, (32, 16, 64), 1e-12)])
def test_every_layernorm_of_a_transformer_has_its_training_forward_and_backward(path, count, x, eps):
    ml = process(path, 32)
    lns = [ly for ly in ml.layers if ly.config is not None and ly.config.kind == "LayerNorm"]
    assert len(lns) == count
    for ly in lns:
        fwd = ly.config
        assert fwd.x == x and fwd.axis == 2 and abs(fwd.epsilon - eps) < eps * 1e-3 and not fwd.stats
        (p1, train), (p2, bwd) = _backward(fwd)
        # the training forward: the same layer writing mean and rstd (cuDNN's TRAINING phase)
        assert p1 == "forward" and train == dataclasses.replace(fwd, stats=True) and train.kind == "LayerNorm"
        assert p2 == "backward_data" and bwd == LB(x=x, axis=2, bias=True)
    rows, cols = x[0] * x[1], x[2]
    cfg = LB(x=x, axis=2)
    assert (cfg.rows, cfg.cols) == (rows, cols)
    assert cfg.input_shapes() == [x, x, (cols,), x[:2], x[:2]] and cfg.output_shape() == x
    assert cfg.flops() == 13 * rows * cols
    # dy, x read and dx written (2 bytes each in fp16), scale read, dscale and dbias written (4 bytes,
    # cols each), mean and rstd read (4 bytes, rows each)
    assert min_bytes(cfg, "fp16") == 3 * 2 * rows * cols + 3 * 4 * cols + 2 * 4 * rows
    assert min_bytes(LB(x=x, axis=2, bias=False), "fp32") == 3 * 4 * rows * cols + 2 * 4 * cols + 2 * 4 * rows
    assert cfg.describe() == f"LayerNormBwd({'x'.join(map(str, x))} axis 2)" and cfg.key.startswith("layernormbwd-")
    plan = training_plan(ml)
    assert not [i for i in plan.no_backward if ml.layers[i].config and ml.layers[i].config.kind == "LayerNorm"]
    tf = plan.train_forward()
    assert sorted(tf) == sorted(ly.index for ly in lns)
    assert all(c.config.stats for calls in tf.values() for c in calls)
    assert sum(c.config.kind == "LayerNormBwd" for c in plan.calls) == count


def test_config_checks():
    with pytest.raises(ValueError):
        LB(x=(4, 8), axis=2)
    assert LB.of(L.LayerNormConfig(x=(2, 3, 4), axis=1, epsilon=1e-5, bias=False)) == LB(x=(2, 3, 4), axis=1, bias=False)
    assert LB(x=(2, 3, 4), axis=1, bias=False).describe().endswith("no-bias)")
    assert FLOPS_PER_ELEMENT == 13


def _layernorm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    r = 1 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return (x - mu) * r * w + b, mu, r


def test_the_stated_backward_formulas_are_the_forwards_gradients():
    """The formulas layernorm_backward_kernel and the template state (dx from the saved mean and rstd;
    dscale = sum dy xhat, dbias = sum dy) equal the gradients of sum(dy * LayerNorm(x)) by central
    finite differences."""
    rng = np.random.default_rng(0)
    rows, cols, eps = 3, 7, 1e-5
    x, dy = rng.standard_normal((rows, cols)), rng.standard_normal((rows, cols))
    w, b = rng.uniform(0.5, 1.5, cols), rng.standard_normal(cols)
    _, mu, r = _layernorm(x, w, b, eps)
    xhat = (x - mu) * r
    g = w * dy
    dx = r * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    dscale, dbias = (dy * xhat).sum(0), dy.sum(0)

    def loss(x_=x, w_=w, b_=b):
        return float((dy * _layernorm(x_, w_, b_, eps)[0]).sum())

    h = 1e-6

    def fd(arr, which):
        out = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            p, m = arr.copy(), arr.copy()
            p[i] += h
            m[i] -= h
            out[i] = (loss(**{which: p}) - loss(**{which: m})) / (2 * h)
        return out

    np.testing.assert_allclose(dx, fd(x, "x_"), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dscale, fd(w, "w_"), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dbias, fd(b, "b_"), rtol=1e-5, atol=1e-7)
    kernel = (REPO / "cpp" / "src" / "layernorm_backward_kernels.cu").read_text()
    # the kernel computes these expressions (not a copy of numpy: a change to either is caught here)
    assert "r * (to_f(dyr[c]) * scale[c] - m1 - xhat * m2)" in kernel
    assert "a += g * (to_f(x[r * cols + c]) - mean[r]) * rstd[r];" in kernel and "b += g;" in kernel


def test_the_pytorch_candidate_is_native_layer_norm_backward():
    from test_kinds_registry import _Recorder

    c = L.REGISTRY["LayerNormBwd"].torch(Ctx(LB(x=(2, 5, 8), axis=2), _Recorder(), _Recorder(), _Recorder(), False))
    assert c.call == "torch:aten::native_layer_norm_backward" and c.out_numel == 80


def _model(batch: int) -> ModelLayers:
    cfgs = [LB(x=(batch, 197, 768), axis=2), LB(x=(batch, 16, 64), axis=2, bias=False), LB(x=(batch, 3, 5, 7), axis=1)]
    cfgs += [L.LayerNormConfig(x=(batch, 197, 768), axis=2, epsilon=1e-6, stats=True)]  # the training forward
    layers = [Layer(index=i, name=HOSTILE if i == 0 else f"bwd{i}", op_type="Backward", inputs=(f"t{i}",),
                    outputs=(f"t{i + 1}",), input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),),
                    status="benchmark", config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="lnbwd", path="", sha256="0" * 64, batch=batch, dtype="float32", opset=17,
                       layers=layers, edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    suite = generate([_model(1), _model(32)], ["fp32", "fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"LayerNormBwd", "LayerNorm"}
    assert len([j for j in suite.jobs if j.kind == "LayerNormBwd"]) == 3 * 2 * 2
    src = (tmp_path / "s" / "src" / "layernormbwd.cpp").read_text()
    assert "layernorm_backward_kernel(" in src and "run_layernorm_backward_engines(" in src
    assert "6304, 768, true," in src and "512, 64, false," in src and "}, 32, 105, true," in src and "}, 1, 105, true," in src
    from benanza.kinds.cpp import cpp_string

    assert cpp_string(HOSTILE) in src
    syntax_check(tmp_path / "s", "layernormbwd.cpp")
    syntax_check(tmp_path / "s", "layernorm.cpp")
