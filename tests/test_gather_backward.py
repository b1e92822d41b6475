"""The backward of the Gather kind (issue 26): the GatherBwd kind (zeros of the data's shape, the output
gradient's rows added at the indices: PyTorch's embedding_dense_backward, select_backward,
index_select_backward) and the training plan's phase of it: an embedding table's gradient is a weight
gradient, needed even when the token ids are a model input; a select of an activation (ViT's class
token) is a data gradient. The scatter the config describes is executed in numpy and compared with
``np.add.at`` (index_add_) and with the finite-difference gradient of the forward Gather."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.analysis.roofline import min_bytes
from benanza.kinds.base import Job
from benanza.kinds.framework import Ctx
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from test_kinds_registry import _Recorder


def scatter(cfg: L.GatherBwdConfig, dy: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """dx as benanza's kernel computes it: zeros, then dx[o][idx[j]][i] += dy[o][j][i]."""
    n, ad = int(np.prod(cfg.indices)), cfg.data[cfg.axis]
    d = dy.reshape(cfg.outer, n, cfg.inner)
    dx = np.zeros((cfg.outer, ad, cfg.inner))
    for o in range(cfg.outer):
        for j, k in enumerate(idx.reshape(-1)):
            dx[o, k % ad] += d[o, j]
    return dx.reshape(cfg.data)


def _gather(data, idx, axis):
    return np.take(data, idx, axis=axis)


@pytest.mark.parametrize("data,indices,axis", [((10, 4), (3, 5), 0), ((2, 6, 3), (4,), 1), ((3, 2, 5), (), 0)])
def test_the_gradient_is_the_scatter_add_of_the_output_gradient(data, indices, axis):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, data[axis], indices)  # repeats: an embedding's token ids
    fwd = L.GatherConfig(data=data, indices=indices, axis=axis)
    (phase, g), = L.REGISTRY["Gather"].backward(fwd)
    assert phase == "backward_data" and g == L.GatherBwdConfig.of(fwd) and g.output_shape() == data
    dy = rng.standard_normal(fwd.output_shape())
    dx = scatter(g, dy, idx)
    ref = np.zeros(data)
    np.add.at(np.moveaxis(ref, axis, 0), idx.reshape(-1),
              np.moveaxis(dy.reshape(data[:axis] + (idx.size,) + data[axis + 1:]), axis, 0))  # index_add_
    np.testing.assert_allclose(dx, ref)
    # the gradient of sum(dy * gather(x)) with respect to x, by finite differences (linear: exact)
    x = rng.standard_normal(data)
    fd = np.zeros(data)
    for k in np.ndindex(*data):
        e = np.zeros(data)
        e[k] = 1.0
        fd[k] = np.sum(dy * (_gather(x + e, idx, axis) - _gather(x, idx, axis)))
    np.testing.assert_allclose(dx, fd, atol=1e-12)
    assert not g.distinct and g.flops() == dy.size
    assert min_bytes(g, "fp32") == 4 * dy.size + 8 * idx.size + 4 * int(np.prod(data))


def test_distinct_constant_indices_are_a_copy():
    fwd = L.GatherConfig(data=(32, 197, 768), indices=(), axis=1, values=(0,))
    g = L.GatherBwdConfig.of(fwd)
    assert g.distinct and g.flops() == 0 and g.input_shapes() == [(32, 768), ()]
    case = L.REGISTRY["GatherBwd"].case(g, Job(id="x.fp32", config=g, precision="fp32", node="n"))
    assert (case.outer, case.axis_dim, case.n, case.inner) == (32, 197, 1, 768)
    assert case.accumulate == "false" and case.memcpy == "true" and case.values == "{0}"
    rep = L.GatherBwdConfig(data=(5, 4), indices=(3,), axis=0, values=(1, 1, 2))  # a repeated constant index
    assert not rep.distinct
    c = L.REGISTRY["GatherBwd"].case(rep, Job(id="x.fp32", config=rep, precision="fp32", node="n"))
    assert c.accumulate == "true" and c.memcpy == "false"
    dx = scatter(rep, np.ones((3, 4)), np.array(rep.values))
    assert dx[1].tolist() == [2.0] * 4 and dx[2].tolist() == [1.0] * 4 and not dx[[0, 3, 4]].any()


def _candidate(cfg):
    return L.REGISTRY[cfg.kind].torch(Ctx(cfg, _Recorder(), _Recorder(), _Recorder(), False))


def test_pytorch_candidates_are_the_autograd_ops():
    assert _candidate(L.GatherBwdConfig(data=(32000, 1024), indices=(35, 8), axis=0)).call == \
        "torch:aten::embedding_dense_backward"
    c = _candidate(L.GatherBwdConfig(data=(32, 197, 768), indices=(), axis=1, values=(0,)))
    assert c.call == "torch:aten::select_backward" and c.out_numel == 32 * 197 * 768
    assert _candidate(L.GatherBwdConfig(data=(3, 197, 32, 768), indices=(2,), axis=0, values=(0, 2))).call == \
        "torch:aten::index_add_"


def _embedding_model(path, table_input: bool):
    """ids (N, 6) int64 -> Gather(table 50x8) -> e; e -> Gather(axis 1, constant index 0) -> cls;
    cls -> MatMul(w 8x4) -> y. With ``table_input`` the table is a model input, not a parameter."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array(0, np.int64), "zero")]
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 6])]
    if table_input:
        inputs.append(helper.make_tensor_value_info("table", TensorProto.FLOAT, [50, 8]))
    else:
        inits.append(numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "table"))
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed", axis=0),
             helper.make_node("Gather", ["e", "zero"], ["cls"], name="select", axis=1),
             helper.make_node("MatMul", ["cls", "w"], ["y"], name="head")]
    g = helper.make_graph(nodes, "emb", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_an_embedding_tables_gradient_is_a_weight_gradient(tmp_path):
    ml = process(_embedding_model(tmp_path / "m.onnx", False), 4)
    plan = training_plan(ml)
    calls = {(ml.layers[c.layer].name, c.phase): c.config for c in plan.calls if c.config.kind == "GatherBwd"}
    # the table's gradient, though the ids are a model input (no input comes from a layer)
    assert calls[("embed", "backward_weight")] == L.GatherBwdConfig(data=(50, 8), indices=(4, 6), axis=0)
    assert calls[("select", "backward_data")] == L.GatherBwdConfig(data=(4, 6, 8), indices=(), axis=1, values=(0,))
    assert len(calls) == 2 and not plan.no_backward
    assert "embed" not in [ml.layers[i].name for i in plan.data_not_needed]
    # a table that is a model input is no parameter: nothing upstream needs its gradient
    ml = process(_embedding_model(tmp_path / "i.onnx", True), 4)
    plan = training_plan(ml)
    assert [(ml.layers[c.layer].name, c.phase) for c in plan.calls if c.config.kind == "GatherBwd"] == [
        ("select", "backward_data")]
    assert "embed" in [ml.layers[i].name for i in plan.data_not_needed]


@pytest.mark.parametrize("model,batch,table", [("tests/data/bert_dynamic.onnx", 8, (1000, 64)),
                                               ("tests/data/zoo/models/lstm_lm.onnx", 8, (32000, 1024))])
def test_the_embeddings_of_bert_and_the_lstm_language_model(model, batch, table):
    ml = process(REPO / model, batch)
    plan = training_plan(ml)
    assert not [i for i in plan.no_backward if ml.layers[i].config and ml.layers[i].config.kind == "Gather"]
    weights = [c.config for c in plan.calls if c.config.kind == "GatherBwd" and c.phase == "backward_weight"]
    assert [w.data for w in weights] == [table] and not weights[0].values
