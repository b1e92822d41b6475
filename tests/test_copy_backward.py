"""The backward of the Copy kind (issue 26): a Transpose's gradient is the inverse-permutation
Transpose, a Concat's a Split, a Slice's a SliceBackward (zeros + the gradient copied into the
slice), a Pad's a Slice. Each gradient's strided transfers are executed here in numpy (as the
suite's strided copies run them: ``dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides]``)
and compared with numpy's gradient of the forward op; the vit_b_16 and densenet121 training plans
have every Copy and Gather layer differentiated; the gradient configs render a suite whose sources
pass ``-fsyntax-only`` (they compile and link in test_training_step.py's training suite)."""
from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.generation.generator import generate
from benanza.processing.model import Layer, ModelLayers, process
from benanza.processing.training import training_plan
from conftest import REPO
from test_kinds_registry import _Recorder
from benanza.kinds.framework import Ctx

ZOO = REPO / "tests" / "data" / "zoo" / "models"


def run_copy(cfg: L.CopyConfig, inputs: list[np.ndarray]) -> np.ndarray:
    """The config's output, computed by executing its transfers on flat buffers (the output first set
    to zero when the op fills it)."""
    y = np.full(int(np.prod(cfg.y)), np.nan)
    if cfg.fills_output():
        y[:] = 0.0
    flats = [np.asarray(x, dtype=float).reshape(-1) for x in inputs]
    for t in cfg.transfers():
        src = flats[t.src_index]
        for i in itertools.product(*(range(d) for d in t.dims)):
            y[t.dst_offset + sum(a * b for a, b in zip(i, t.dst_strides))] = \
                src[t.src_offset + sum(a * b for a, b in zip(i, t.src_strides))]
    assert not np.isnan(y).any(), "an output element no transfer writes"
    return y.reshape(cfg.y)


def _grad(cfg):
    calls = L.REGISTRY["Copy"].backward(cfg)
    assert len(calls) == 1 and calls[0][0] == "backward_data" and calls[0][1].kind == "Copy"
    return calls[0][1]


def test_transpose_gradient_is_the_inverse_permutation():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5))
    perm = (2, 0, 3, 1)
    fwd = L.CopyConfig(op="Transpose", inputs=(x.shape,), y=tuple(x.shape[p] for p in perm), attrs=(("perm", perm),))
    np.testing.assert_array_equal(run_copy(fwd, [x]), x.transpose(perm))
    g = _grad(fwd)
    assert g.op == "Transpose" and g.inputs == (fwd.y,) and g.y == x.shape and g.attr("perm") == (1, 3, 0, 2)
    dy = rng.standard_normal(fwd.y)
    # autograd's permute_backwards: dy permuted back by the inverse permutation
    np.testing.assert_array_equal(run_copy(g, [dy]), dy.transpose(np.argsort(perm)))
    assert g.flops() == 0 and min_bytes(g, "fp32") == 2 * 4 * x.size


def test_concat_gradient_is_a_split_into_each_input():
    rng = np.random.default_rng(1)
    parts = [rng.standard_normal((2, c, 3, 3)) for c in (4, 1, 3)]
    y = (2, 8, 3, 3)
    fwd = L.CopyConfig(op="Concat", inputs=tuple(p.shape for p in parts), y=y, attrs=(("axis", (1,)),))
    np.testing.assert_array_equal(run_copy(fwd, parts), np.concatenate(parts, 1))
    g = _grad(fwd)
    assert g.op == "Split" and g.inputs == (y,) and g.attr("sizes") == (4, 1, 3) and not g.is_identity()
    dy = rng.standard_normal(y)
    out = run_copy(g, [dy]).reshape(-1)
    # cat_tensors_backward: each input's gradient is dy.narrow(1, offset, size), packed one after another
    expect = np.concatenate([s.reshape(-1) for s in np.split(dy, [4, 5], axis=1)])
    np.testing.assert_array_equal(out, expect)
    assert len(g.transfers()) == 3 and "Split" in g.describe()
    # every transfer is a 2-D copy of contiguous rows: the case takes the batched copy
    from benanza.kinds.base import Job

    case = L.REGISTRY["Copy"].case(g, Job(id="x.fp32", config=g, precision="fp32", node="n"))
    assert case.memcpy == "true" and case.label == '"Split"'


@pytest.mark.parametrize("starts,steps,y", [((0, 1, 0), (1, 1, 2), (2, 3, 3)), ((1, 0, 2), (1, 2, 1), (1, 2, 3))])
def test_slice_gradient_is_zeros_with_the_slice_copied_in(starts, steps, y):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 5))
    fwd = L.CopyConfig(op="Slice", inputs=(x.shape,), y=y, attrs=(("starts", starts), ("steps", steps)))
    idx = tuple(slice(s, s + p * (n - 1) + 1, p) for s, p, n in zip(starts, steps, y))
    np.testing.assert_array_equal(run_copy(fwd, [x]), x[idx])
    g = _grad(fwd)
    assert g.op == "SliceBackward" and g.inputs == (y,) and g.y == x.shape and g.fills_output()
    dy = rng.standard_normal(y)
    expect = np.zeros(x.shape)
    expect[idx] = dy  # aten::slice_backward: zeros of the input's shape, the gradient in the slice
    np.testing.assert_array_equal(run_copy(g, [dy]), expect)
    # the gradient is read once, the whole input-shaped gradient written once
    assert min_bytes(g, "fp32") == 4 * (dy.size + x.size)


def test_pad_gradient_is_the_slice_of_the_unpadded_region():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 3, 4))
    pads = (0, 0, 1, 2, 0, 0, 2, 1)
    y = (1, 2, 6, 7)
    fwd = L.CopyConfig(op="Pad", inputs=(x.shape,), y=y, attrs=(("pads", pads),))
    np.testing.assert_array_equal(run_copy(fwd, [x]), np.pad(x, [(0, 0), (0, 0), (1, 2), (2, 1)]))
    g = _grad(fwd)
    assert g.op == "Slice" and g.y == x.shape
    dy = rng.standard_normal(y)
    np.testing.assert_array_equal(run_copy(g, [dy]), dy[:, :, 1:4, 2:6])  # constant_pad_nd_backward: a narrow


def test_the_gradients_of_identities_are_identities():
    one = L.CopyConfig(op="Split", inputs=((2, 3),), y=(2, 3), attrs=(("axis", (1,)), ("sizes", (3,))))
    assert one.is_identity()
    sb = L.CopyConfig(op="SliceBackward", inputs=((2, 3),), y=(2, 3), attrs=(("starts", (0, 0)), ("steps", (1, 1))))
    assert sb.is_identity()


def test_stored_gradient_configs_rebuild():
    for cfg in (L.CopyConfig(op="Split", inputs=((2, 8),), y=(2, 8), attrs=(("axis", (1,)), ("sizes", (5, 3)))),
                L.CopyConfig(op="SliceBackward", inputs=((2, 3),), y=(2, 8), attrs=(("starts", (0, 1)), ("steps", (1, 2))))):
        assert L.config_from_params("Copy", cfg.params()) == cfg


def _candidate(cfg):
    return L.REGISTRY[cfg.kind].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), False))


def test_pytorch_candidates_are_the_autograd_ops():
    split = L.CopyConfig(op="Split", inputs=((2, 8),), y=(2, 8), attrs=(("axis", (1,)), ("sizes", (5, 3))))
    assert _candidate(split).call == "torch:aten::split_with_sizes+copy_"  # one packed tensor, not a list (H100, 2026-11-26)
    one_dim = L.CopyConfig(op="SliceBackward", inputs=((2, 3),), y=(2, 8), attrs=(("starts", (0, 1)), ("steps", (1, 2))))
    c = _candidate(one_dim)
    assert c.call == "torch:aten::slice_backward" and c.out_numel == 16
    two_dims = L.CopyConfig(op="SliceBackward", inputs=((1, 3),), y=(2, 8), attrs=(("starts", (1, 1)), ("steps", (1, 2))))
    assert _candidate(two_dims).call == "torch:aten::zeros+copy_"


@pytest.mark.parametrize("model,batch", [("vit_b_16.onnx", 32), ("densenet121.onnx", 32)])
def test_every_copy_and_gather_layer_has_its_gradient(model, batch):
    ml = process(ZOO / model, batch)
    plan = training_plan(ml)
    left = collections.Counter(ml.layers[i].config.kind for i in plan.no_backward if ml.layers[i].config)
    assert left["Copy"] == 0 and left["Gather"] == 0, left
    by_layer = collections.defaultdict(list)
    for c in plan.calls:
        by_layer[c.layer].append(c)
    concats = [ly for ly in ml.layers if ly.op_type == "Concat" and ly.status == "benchmark"]
    assert concats  # vit's class token, densenet's dense blocks
    for ly in concats:
        (call,) = by_layer[ly.index]
        assert call.config.op == "Split" and call.config.attr("sizes") == tuple(
            s[call.config.attr("axis")[0]] for s in ly.config.inputs)
    transposes = [ly for ly in ml.layers if ly.op_type == "Transpose" and ly.status == "benchmark"]
    assert all(by_layer[ly.index][0].config.y == ly.config.inputs[0] for ly in transposes)
    if model.startswith("vit"):
        assert len(concats) == 1 and len(transposes) == 97


def _suite_model(cfgs) -> ModelLayers:
    layers = [Layer(index=i, name=f"g{i}", op_type="Backward", inputs=(f"t{i}",), outputs=(f"t{i + 1}",),
                    input_shapes=tuple(c.input_shapes()), output_shapes=(c.output_shape(),), status="benchmark",
                    config=c) for i, c in enumerate(cfgs)]
    return ModelLayers(model="grads", path="", sha256="0" * 64, batch=1, dtype="float32", opset=13, layers=layers,
                       edges={i: [i - 1] if i else [] for i in range(len(layers))}, folded={})


def test_the_gradient_suite_renders_and_passes_syntax_check(tmp_path):
    """The Copy gradients, a GatherBwd of each pattern and a CrossEntropyLoss in one suite; its
    sources pass the compiler's syntax check against the harness headers."""
    import shutil
    import subprocess
    import sysconfig
    from pathlib import Path

    cfgs = [L.CopyConfig(op="Split", inputs=((2, 8, 3, 3),), y=(2, 8, 3, 3), attrs=(("axis", (1,)), ("sizes", (4, 1, 3)))),
            L.CopyConfig(op="SliceBackward", inputs=((2, 3, 3),), y=(2, 4, 5),
                         attrs=(("starts", (0, 1, 0)), ("steps", (1, 1, 2)))),
            L.CopyConfig(op="Transpose", inputs=((2, 5, 3),), y=(2, 3, 5), attrs=(("perm", (0, 2, 1)),)),
            L.GatherBwdConfig(data=(1000, 64), indices=(8, 16), axis=0),
            L.GatherBwdConfig(data=(32, 197, 768), indices=(), axis=1, values=(0,)),
            L.CrossEntropyLossConfig(logits=(32, 1000)), L.CrossEntropyLossConfig(logits=(35, 8, 320))]
    generate([_suite_model(cfgs)], ["fp32", "fp16"], tmp_path / "s")
    src = tmp_path / "s" / "src"
    gb = (src / "gatherbwd.cpp").read_text()
    assert "gather_backward_kernel(" in gb and "{}, true, false}" in gb and "{0}, false, true}" in gb
    ce = (src / "crossentropyloss.cpp").read_text()
    assert "cross_entropy_kernel(" in ce and "280, 320}" in ce and "32, 1000}" in ce
    assert "SliceBackward" in (src / "copy.cpp").read_text()
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++")
    site = Path(sysconfig.get_paths()["purelib"])  # the pip wheels' cuDNN and CUDA headers
    inc = [f"-I{tmp_path / 's' / 'harness' / 'include'}", f"-I{REPO / 'cpp' / 'include'}", f"-I{REPO / '.fe' / 'include'}",
           "-I/usr/local/cuda/include", f"-I{site / 'nvidia' / 'cudnn' / 'include'}",
           f"-I{site / 'nvidia' / 'cu13' / 'include'}", f"-I{site / 'include'}"]
    for name in ("gatherbwd.cpp", "crossentropyloss.cpp", "copy.cpp"):
        r = subprocess.run([gxx, "-std=c++17", "-fsyntax-only", *inc, str(src / name)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
