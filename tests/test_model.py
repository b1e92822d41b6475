"""Model processor on the real models in tests/data/zoo/models, checked against onnx itself."""
import collections
import json
import math

import onnx
import pytest
from onnx import shape_inference

from benanza import kinds as L
from benanza.errors import ModelError, UsageError
from benanza.processing.model import parse_batches, process
from conftest import all_model_paths

MODELS = all_model_paths()


def _independent(path, batch):
    """onnx's own view: nodes by op type, and inferred output shapes with the symbolic batch bound."""
    m = onnx.load(str(path), load_external_data=False)
    weights = {t.name for t in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in weights:
            continue
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.Clear()
                d.dim_value = batch
                break
    for t in list(m.graph.initializer):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            m.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
            m.graph.initializer.remove(t)
    del m.graph.value_info[:]
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    inf = shape_inference.infer_shapes(m)
    shapes = {}
    for vi in list(inf.graph.value_info) + list(inf.graph.output):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
        if dims and None not in dims:
            shapes[vi.name] = tuple(dims)
    return collections.Counter(n.op_type for n in m.graph.node), shapes


COMPUTE_OPS = {"Conv", "Gemm", "MatMul", "Relu", "BatchNormalization", "MaxPool", "AveragePool",
               "GlobalAveragePool", "Clip", "Softmax", "LayerNormalization", "LSTM", "Gelu", "Transpose",
               "ReduceMean", "Slice"}


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_every_shared_model_processes_with_counts_matching_onnx(path):
    ml = process(path, 1)
    onnx_counts, onnx_shapes = _independent(path, 1)
    by_type = ml.summary()["by_type"]
    for op in COMPUTE_OPS & set(onnx_counts):
        assert by_type.get(op, {}).get("count", 0) == onnx_counts[op], op
    # every layer output shape agrees with onnx shape inference where onnx knows it
    checked = 0
    for ly in ml.layers:
        for name, shp in zip(ly.outputs, ly.output_shapes):
            if name in onnx_shapes:
                assert shp == onnx_shapes[name], (ly.name, name)
                checked += 1
    assert checked > 0
    # benchmarked configs agree with the tensors they stand for
    for ly in ml.benchmarked():
        assert math.prod(ly.config.output_shape()) == math.prod(ly.output_shapes[0]), ly.name
    s = ml.summary()
    assert s["layers"] == len(ml.layers) == sum(v["count"] for v in s["by_type"].values())
    assert s["unique_layers"] <= s["layers"]
    assert all(v["unique"] <= v["count"] for v in s["by_type"].values())


def test_resnet50_layers_and_unique_configs(models):
    ml = process(models / "resnet50.onnx", 32)
    s = ml.summary()
    assert s["by_type"]["Conv"] == {"count": 53, "unique": 23}
    assert s["by_type"]["Relu"]["count"] == 49
    assert s["by_type"]["Add"]["count"] == 16
    assert s["unsupported"] == {}
    assert s["folded"] == {"Identity": 47}  # weight-sharing Identity nodes are not layers
    assert s["fusion_candidates"] == 33  # Conv (folded BN bias) followed by Relu
    assert all(ly.config.batch_count == 32 for ly in ml.benchmarked() if ly.config.kind == "Conv")
    # the first conv: 7x7 stride 2 pad 3 on 224x224
    conv1 = ml.layers[0].config
    assert (conv1.x, conv1.w, conv1.pads, conv1.strides, conv1.bias) == (
        (32, 3, 224, 224), (64, 3, 7, 7), (3, 3, 3, 3), (2, 2), True)
    assert conv1.output_shape() == (32, 64, 112, 112)
    assert conv1.flops() == 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7 + 32 * 64 * 112 * 112


def test_keys_are_canonical_and_stable(models):
    a = process(models / "resnet50.onnx", 1)
    b = process(models / "resnet50_fixed1.onnx", 1)
    assert [ly.key for ly in a.layers] == [ly.key for ly in b.layers]
    # a fixed value: keys must not change across runs, machines or versions without intent
    cfg = L.ConvConfig(x=(1, 64, 56, 56), w=(64, 64, 3, 3), pads=(1, 1, 1, 1), strides=(1, 1),
                       dilations=(1, 1), group=1, bias=True)
    assert cfg.key == "conv-a5f404fa679a2ea3"
    assert a.layers[a.layers.index(next(ly for ly in a.layers if ly.key == cfg.key))].config == cfg
    # round trip through the stored parameters
    for ly in a.benchmarked():
        assert L.config_from_params(ly.config.kind, json.loads(json.dumps(ly.config.params()))) == ly.config


def test_bnkept_keeps_batchnorm_and_has_no_bias_fusion(models):
    ml = process(models / "resnet50_bnkept.onnx", 1)
    s = ml.summary()
    assert s["by_type"]["BatchNormalization"]["count"] == 53
    assert s["fusion_candidates"] == 53  # Conv -> BN [-> Relu] only (no conv has a bias to fuse)
    assert {f.config.kind for f in ml.fusions} == {"ConvBnAct"}
    assert all(not ly.config.bias for ly in ml.benchmarked() if ly.config.kind == "Conv")


def test_shufflenet_needs_folding(models):
    ml = process(models / "shufflenet_v2_x1_0.onnx", 8)
    s = ml.summary()
    assert s["unsupported"] == {}
    for op in ("Shape", "Gather", "Cast", "Unsqueeze", "Constant"):
        assert op not in s["by_type"], op  # the shape subgraphs were folded
    assert s["folded"]["Shape"] == 77
    assert s["by_type"]["Transpose"]["count"] == 16  # channel shuffle, costed as a copy
    tr = next(ly for ly in ml.layers if ly.op_type == "Transpose")
    assert tr.config.kind == "Copy" and tr.config.y[0] == 8


def test_googlenet_ceil_mode_pooling_and_branches(models):
    ml = process(models / "googlenet.onnx", 1)
    pools = [ly.config for ly in ml.layers if ly.op_type == "MaxPool"]
    assert pools[0].x == (1, 64, 112, 112) and pools[0].y == (1, 64, 56, 56)  # ceil_mode=True
    # inception blocks: a Concat with four producers
    cat = next(ly for ly in ml.layers if ly.op_type == "Concat")
    assert len(ml.edges[cat.index]) == 4


def test_fixed_batch_is_overridden_with_a_notice(models):
    ml = process(models / "resnet50_fixed1.onnx", 32)
    assert any("fixed batch of 1" in n and "32" in n for n in ml.notices)
    assert ml.layers[0].config.x[0] == 32
    lstm = process(models / "lstm_lm.onnx", 16)
    assert any("(dim 1)" in n for n in lstm.notices)  # [seq, batch] input: the batch is dim 1
    assert lstm.summary()["unsupported"] == {}  # LSTM (cudnnRNNForward) and the embedding Gather
    mm = next(ly for ly in lstm.layers if ly.op_type == "MatMul")
    assert (mm.config.m, mm.config.n, mm.config.k) == (35 * 16, 32000, 1024)


def test_fixed_batch_vit_is_rebound_to_another_batch(models):
    """The shared vit_b_16 (torch.export, fixed batch 1) at batch 32: its batch constants are
    rewritten with a notice (tests/test_rebind.py has the patterns and the dynamic-export check)."""
    ml = process(models / "vit_b_16.onnx", 32)
    assert any("fixed batch 1 rebound to 32" in n and "'node_view' (Reshape)" in n for n in ml.notices)
    assert ml.summary()["unsupported"] == {}
    assert ml.layers[0].config.x[0] == 32
    ml = process(models / "vit_b_16.onnx", 1)
    s = ml.summary()
    assert s["unsupported"] == {}  # Gather, Gelu, LayerNormalization: tests/test_transformer.py
    assert s["by_type"]["MatMul"]["count"] == 60


def test_every_layer_kind_of_the_synthetic_model(tmp_path):
    from onnx_builders import HOSTILE, all_kinds_model

    ml = process(all_kinds_model(tmp_path / "m.onnx"), 2)
    kinds = {ly.op_type: ly for ly in ml.layers}
    assert ml.layers[0].op_type == "Conv" and ml.layers[0].name == HOSTILE
    assert ml.layers[2].config.pads == (0, 0, 1, 1) and ml.layers[2].config.group == 16
    assert ml.layers[3].config.dilations == (2, 2)
    assert kinds["Clip"].config.mode == "clipped_relu" and kinds["Clip"].config.alpha == 6.0
    assert kinds["LeakyRelu"].config.mode == "leaky_relu"
    assert kinds["HardSigmoid"].config.mode == "hard_sigmoid"
    assert kinds["LRN"].config.size == 5
    assert [ly.status for ly in ml.layers if ly.op_type == "Dropout"] == ["zero_cost", "benchmark"]
    assert kinds["Pad"].config.kind == "Copy" and kinds["Pad"].config.y == (2, 16, 7, 7)
    assert kinds["ReduceMean"].config.y == (2, 16, 1, 1)
    bmm = [ly.config for ly in ml.layers if ly.op_type == "MatMul"][-1]
    assert bmm.batch_count == 2 and (bmm.m, bmm.n, bmm.k) == (3, 3, 4)
    assert ml.summary()["unsupported"] == {}
    assert [(f.layers, f.config.kind) for f in ml.fusions] == [((0, 1), "ConvBiasAct"), ((3, 4), "ConvBnAct")]


@pytest.mark.parametrize("text,expected", [("1", [1]), ("1,32", [1, 32]), (" 8 , 8,16", [8, 16])])
def test_parse_batches(text, expected):
    assert parse_batches(text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "1,0", "x", ""])
def test_parse_batches_rejects(text):
    with pytest.raises(UsageError):
        parse_batches(text)


@pytest.mark.parametrize("batch", [1, 32])
def test_lstm_lm_maps_both_lstm_layers(models, batch):
    ml = process(models / "lstm_lm.onnx", batch)
    lstms = [ly for ly in ml.layers if ly.op_type == "LSTM"]
    assert len(lstms) == 2 and all(ly.status == "benchmark" for ly in lstms)
    want = L.RNNConfig(cell="lstm", seq_len=35, input_size=1024, hidden_size=1024, batch=batch, num_layers=1,
                       direction="forward", bias=True, layout="seq_major", linear_before_reset=False)
    assert [ly.config for ly in lstms] == [want, want]
    assert want.input_shapes() == [(35, batch, 1024)]
    # Y is [seq, num_directions, batch, hidden]; the Squeeze after it is zero-cost
    assert lstms[0].output_shapes[0] == want.output_shape() == (35, 1, batch, 1024)
    assert all(ml.layers[ly.index + 1].status == "zero_cost" for ly in lstms)
    assert want.flops() == 2 * 35 * batch * 4 * 1024 * (1024 + 1024)
    assert want.key.startswith("rnn-") and L.config_from_params("RNN", want.params()) == want
    assert ml.summary()["by_type"]["LSTM"] == {"count": 2, "unique": 1}


def test_gru_mapping_and_what_cudnn_cannot_compute(tmp_path):
    from onnx_builders import rnn_model

    ml = process(rnn_model(tmp_path / "g.onnx"), 3)
    gru = ml.layers[0]
    assert gru.status == "benchmark"
    assert gru.config == L.RNNConfig(cell="gru", seq_len=7, input_size=24, hidden_size=32, batch=3,
                                     direction="bidirectional", bias=True, layout="seq_major",
                                     linear_before_reset=True)
    assert gru.output_shapes[0] == gru.config.output_shape() == (7, 2, 3, 32)
    assert gru.config.flops() == 2 * 2 * 7 * 3 * 3 * 32 * (24 + 32)
    # batch-major layout (opset 14), no bias, ONNX's default linear_before_reset=0
    bm = process(rnn_model(tmp_path / "b.onnx", layout=1, bias=False, linear_before_reset=0,
                           direction="forward"), 5).layers[0].config
    assert (bm.layout, bm.bias, bm.linear_before_reset, bm.batch) == ("batch_major", False, False, 5)
    assert bm.input_shapes() == [(5, 7, 24)] and bm.output_shape() == (5, 7, 1, 32)
    lstm = process(rnn_model(tmp_path / "l.onnx", op="LSTM", direction="reverse"), 2).layers[0].config
    assert (lstm.cell, lstm.direction, lstm.gates) == ("lstm", "reverse", 4)
    # the default activations named explicitly are the defaults
    named = process(rnn_model(tmp_path / "n.onnx", activations=["Sigmoid", "Tanh"] * 2), 1).layers[0]
    assert named.status == "benchmark"
    # unsupported with the reason, never a crash
    for kw, reason in [({"activations": ["Tanh", "Tanh"] * 2}, "activations"), ({"clip": 3.0}, "clip")]:
        ly = process(rnn_model(tmp_path / "u.onnx", **kw), 1).layers[0]
        assert ly.status == "unsupported" and reason in ly.reason
    ly = process(rnn_model(tmp_path / "p.onnx", op="LSTM", direction="forward", input_forget=1), 1).layers[0]
    assert ly.status == "unsupported" and "input_forget" in ly.reason


def test_conv_batchnorm_relu_is_a_fusion_candidate(models):
    """resnet50_bnkept keeps its BatchNormalization nodes: every Conv -> BN [-> Relu] is one
    candidate for a conv + scale + shift [+ relu] cuDNN graph (ConvBnActConfig)."""
    from benanza import kinds as L

    ml = process(models / "resnet50_bnkept.onnx", 1)
    bn = [f for f in ml.fusions if f.config.kind == "ConvBnAct"]
    assert len(bn) == 53
    with_relu = [f for f in bn if f.config.activation == "relu"]
    # the stem and the first two convs of each of the 16 bottlenecks; each block's third conv and
    # the 4 downsample convs feed the residual Add
    assert len(with_relu) == 1 + 2 * 16
    for f in bn:
        ops = [ml.layers[i].op_type for i in f.layers]
        assert ops[:2] == ["Conv", "BatchNormalization"] and ops[2:] in ([], ["Relu"])
        cfg = f.config
        assert cfg.output_shape() == ml.layers[f.layers[0]].config.output_shape()
        assert L.config_from_params(cfg.kind, cfg.params()) == cfg
