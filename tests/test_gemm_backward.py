"""The backward pass of GEMM layers (issue 26): the data and weight gradients of Gemm / MatMul as GEMMs of
the Gemm kind (the chain rule, checked numerically with numpy against finite differences), the bias
gradient, and the GemmActBackward kind: cuBLASLt's DRELU/DGELU[_BGRAD] and BGRADA/BGRADB epilogues
for GemmAct layers, their semantics checked on a two-layer MLP, their suite rendered, and one suite of
both kinds built."""
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.generation import generator
from benanza.generation.generator import generate, job_id
from benanza.kinds.base import TRAINING_PHASES, Job
from benanza.kinds.gemm import GemmConfig, gemm_gradients, gradient_operands
from benanza.kinds.gemm_act import GemmActConfig
from benanza.kinds.gemm_act_backward import EPILOGUES, GemmActBackwardConfig, fused_consumer_dgrad
from benanza.processing.model import process
from conftest import REPO
from onnx_builders import HOSTILE, mlp_model

RNG = np.random.default_rng(26)


# ----------------------------------------------------------------------------- numpy semantics

def op(x, t):
    """ONNX's op(): the last two axes transposed when ``t``."""
    return np.swapaxes(x, -1, -2) if t else x


def run_gemm(cfg: GemmConfig, a, b):
    """``op(A) @ op(B)`` as a GemmConfig defines it, checking the operands' stored shapes."""
    sa, sb = cfg.input_shapes()
    assert a.shape == tuple(sa) and b.shape == tuple(sb), (a.shape, sa, b.shape, sb)
    return op(a, cfg.trans_a) @ op(b, cfg.trans_b)


def operands(names, tensors):
    """A gradient GEMM's operands, by the names :func:`gradient_operands` gives for them."""
    return [tensors[name] for name in names]


def finite_difference(f, x, eps=1e-3):
    """d f / d x by central differences (f is a scalar function of the array x)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        x[i] += eps
        hi = f(x)
        x[i] -= 2 * eps
        lo = f(x)
        x[i] += eps
        g[i] = (hi - lo) / (2 * eps)
    return g


def epilogue(cfg: GemmActBackwardConfig, a, b, aux):
    """cuBLASLt's backward epilogue on ONNX's row-major view (cublasLt.h, cublasLtEpilogue_t; lt.cpp maps
    cuBLASLt's A to ONNX's op(B)): (D, bias gradient or None)."""
    g = cfg.gemm
    d = run_gemm(g, a, b)
    if cfg.activation == "relu":
        d = d * (aux > 0)
    elif cfg.activation:
        raise NotImplementedError(cfg.activation)
    if cfg.epilogue.endswith("_bgrad"):
        return d, d.sum(axis=-2)
    if cfg.epilogue == "bgrada":
        return d, op(b, g.trans_b).sum(axis=-2)
    if cfg.epilogue == "bgradb":
        return d, op(a, g.trans_a).sum(axis=-1)
    return d, None


# ----------------------------------------------------------------------------- the chain rule

@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gradient_gemms_are_the_chain_rule(ta, tb, batch):
    """For every transA/transB and a batch: the gradient GEMMs, run with the op(A)/op(B) semantics of
    their configs on the operands gradient_operands names, give dL/dA and dL/dB of L = sum(Y * dY)
    by finite differences, of A's and B's stored shapes."""
    cfg = GemmConfig(m=3, n=4, k=5, batch_count=batch, trans_a=ta, trans_b=tb)
    sa, sb = cfg.input_shapes()
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    dy = RNG.standard_normal(cfg.output_shape())
    fd_a = finite_difference(lambda x: float((run_gemm(cfg, x, b) * dy).sum()), a)
    fd_b = finite_difference(lambda x: float((run_gemm(cfg, a, x) * dy).sum()), b)
    da_cfg, db_cfg = gemm_gradients(cfg)
    names_a, names_b = gradient_operands(cfg)
    t = {"A": a, "B": b, "dY": dy}
    da = run_gemm(da_cfg, *operands(names_a, t))
    db = run_gemm(db_cfg, *operands(names_b, t))
    np.testing.assert_allclose(da, fd_a, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db, fd_b, rtol=1e-6, atol=1e-8)
    assert da_cfg.output_shape() == tuple(sa) and db_cfg.output_shape() == tuple(sb)
    assert da_cfg.flops() == db_cfg.flops() == cfg.flops() == 2 * batch * 3 * 4 * 5
    assert da_cfg.batch_count == db_cfg.batch_count == batch and da_cfg.bias == db_cfg.bias == "none"


def test_a_wrong_transpose_is_caught():
    """The check above can fail: the data gradient with B's transpose flipped does not fit B."""
    cfg = GemmConfig(m=3, n=4, k=5, trans_b=True)
    da_cfg, _ = gemm_gradients(cfg)
    wrong = GemmConfig(m=da_cfg.m, n=da_cfg.n, k=da_cfg.k, trans_b=not da_cfg.trans_b)
    b = RNG.standard_normal(cfg.input_shapes()[1])
    with pytest.raises(AssertionError):
        run_gemm(wrong, RNG.standard_normal(cfg.output_shape()), b)


def test_resnet50_classifier_backward():
    """resnet50's classifier (Gemm transB=1, 2048 -> 1000, bias) at batch 32, from the processing stage:
    dX = dY @ W in NN (32 x 2048), dW = dY^T @ X in TN (1000 x 2048) in backward_weight, and the bias
    gradient a ReduceSum of dY over its 32 rows; FLOPs of each GEMM those of the forward's product."""
    ml = process(REPO / "examples" / "resnet50.onnx", 32)
    fc = [ly.config for ly in ml.benchmarked() if ly.config.kind == "Gemm"]
    assert fc == [GemmConfig(m=32, n=1000, k=2048, trans_a=False, trans_b=True, bias="c")]
    cfg = fc[0]
    calls = L.REGISTRY["Gemm"].backward(cfg)
    assert [p for p, _ in calls] == ["backward_data", "backward_weight", "backward_weight"]
    assert all(p in TRAINING_PHASES for p, _ in calls)
    (_, dx), (_, dw), (_, db) = calls
    assert dx == GemmConfig(m=32, n=2048, k=1000, trans_a=False, trans_b=False)  # NN
    assert dw == GemmConfig(m=1000, n=2048, k=32, trans_a=True, trans_b=False)  # dY^T X
    x_shape, w_shape = cfg.input_shapes()
    assert dx.output_shape() == x_shape == (32, 2048) and dw.output_shape() == w_shape == (1000, 2048)
    assert dx.flops() == dw.flops() == 2 * 32 * 1000 * 2048 == cfg.flops() - 32 * 1000
    assert db == L.ReduceConfig(op="sum", x=(32, 1000), y=(1, 1000))
    assert gradient_operands(cfg) == (("dY", "B"), ("dY", "A"))


def _transformer_model(path, batch_heads=(2, 4), seq=16, dim=8, hidden=32):
    """Attention's two batched MatMuls (Q K^T and P V over (N, heads)) and a MatMul with a weight
    initializer (nn.Linear as torch.onnx exports it, X (N, S, hidden) @ W (hidden, 3 hidden))."""
    n, h = batch_heads
    w = numpy_helper.from_array(RNG.standard_normal((hidden, 3 * hidden)).astype(np.float32), "w_qkv")
    nodes = [
        helper.make_node("MatMul", ["x", "w_qkv"], ["qkv"], name=HOSTILE + "qkv"),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        helper.make_node("MatMul", ["p", "v"], ["ctx"], name="pv"),
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("x", f, [n, seq, hidden]),
         helper.make_tensor_value_info("q", f, [n, h, seq, dim]),
         helper.make_tensor_value_info("kt", f, [n, h, dim, seq]),
         helper.make_tensor_value_info("p", f, [n, h, seq, seq]),
         helper.make_tensor_value_info("v", f, [n, h, seq, dim])],
        [helper.make_tensor_value_info("qkv", f, [n, seq, 3 * hidden]),
         helper.make_tensor_value_info("scores", f, [n, h, seq, seq]),
         helper.make_tensor_value_info("ctx", f, [n, h, seq, dim])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_transformer_batched_matmul_backward(tmp_path):
    """A batched MatMul (both operands activations) keeps its batch and has two data gradients; the
    Linear-as-MatMul (B an initializer, shared by the rows: one GEMM) has a weight gradient."""
    ml = process(_transformer_model(tmp_path / "attn.onnx"), 2)
    by_name = {ly.name: ly.config for ly in ml.benchmarked()}
    qk, pv, lin = by_name["qk"], by_name["pv"], by_name[HOSTILE + "qkv"]
    assert qk == GemmConfig(m=16, n=16, k=8, batch_count=8) and pv == GemmConfig(m=16, n=8, k=16, batch_count=8)
    assert lin == GemmConfig(m=32, n=96, k=32)
    for cfg in (qk, pv):
        calls = L.REGISTRY["Gemm"].backward(cfg)
        assert [p for p, _ in calls] == ["backward_data", "backward_data"]
        (_, da), (_, db) = calls
        assert da.batch_count == db.batch_count == 8
        assert (da.output_shape(), db.output_shape()) == tuple(map(tuple, cfg.input_shapes()))
        assert da.flops() == db.flops() == cfg.flops()
    (p1, dx), (p2, dw) = L.REGISTRY["Gemm"].backward(lin)
    assert (p1, p2) == ("backward_data", "backward_weight")
    # dW = X^T dY summed over all N*S rows: (32 x 96), inner dimension the 32 rows of the batch
    assert dw == GemmConfig(m=32, n=96, k=32, trans_a=True) and dw.output_shape() == (32, 96)
    assert dx == GemmConfig(m=32, n=32, k=96, trans_b=True)


# ----------------------------------------------------------------------------- GemmAct and its epilogues

def test_gemm_act_backward_calls():
    """A fully connected layer + ReLU (transB=1, bias): the data gradient with DRELU, the weight
    gradient with the bias gradient fused (BGRADB: dY is the weight-gradient GEMM's A); a MatMul + bias +
    erf GELU (B not transposed): DGELU standing in for the erf form, and BGRADA."""
    relu = GemmActConfig(gemm=GemmConfig(m=64, n=256, k=128, trans_b=True, bias="c"), activation="relu")
    (p1, d), (p2, w) = L.REGISTRY["GemmAct"].backward(relu)
    assert (p1, p2) == ("backward_data", "backward_weight")
    assert d == GemmActBackwardConfig(gemm=GemmConfig(m=64, n=128, k=256), epilogue="drelu")
    assert w == GemmActBackwardConfig(gemm=GemmConfig(m=256, n=128, k=64, trans_a=True), epilogue="bgradb")
    assert w.bias_grad_length() == 256 and w.gemm.output_shape() == relu.gemm.input_shapes()[1]
    gelu = GemmActConfig(gemm=GemmConfig(m=64, n=256, k=128, bias="c"), activation="gelu")
    (_, d), (_, w) = L.REGISTRY["GemmAct"].backward(gelu)
    assert d.epilogue == "dgelu" and d.gelu_erf and d.activation == "gelu"
    assert w.epilogue == "bgrada" and w.bias_grad_length() == 256 and w.gemm.output_shape() == (128, 256)
    batched = GemmActConfig(gemm=GemmConfig(m=16, n=16, k=8, batch_count=4, bias="c"), activation="relu")
    calls = L.REGISTRY["GemmAct"].backward(batched)
    assert [p for p, _ in calls] == ["backward_data", "backward_data", "backward_weight"]
    assert calls[2][1] == L.ReduceConfig(op="sum", x=(4, 16, 16), y=(1, 1, 16))


@pytest.mark.parametrize("tb", [False, True])
def test_epilogues_give_the_mlp_gradients(tb):
    """Two layers, ``Z = relu(X op(W1) + b1)``, ``Y = Z op(W2)``, loss ``sum(Y * G)``: the consumer's data
    gradient with DRELU_BGRAD (fused_consumer_dgrad) is dL/dpre1 and its bias gradient dL/db1; the
    producer's weight gradient with BGRADA/BGRADB (gemm_act_backward) gives dL/dW1 and dL/db1 from
    dpre1; the producer's data gradient (whose DRELU the next layer down would fuse) is dL/dX. Every
    gradient checked against finite differences."""
    m, k, n, n2 = 4, 5, 6, 3
    fc1 = GemmConfig(m=m, n=n, k=k, trans_b=tb, bias="c")
    producer = GemmActConfig(gemm=fc1, activation="relu")
    consumer = GemmConfig(m=m, n=n2, k=n, trans_b=tb)
    x = RNG.standard_normal((m, k))
    w1 = RNG.standard_normal(fc1.input_shapes()[1])
    b1 = RNG.standard_normal(n)
    w2 = RNG.standard_normal(consumer.input_shapes()[1])
    g = RNG.standard_normal((m, n2))

    def loss(x=x, w1=w1, b1=b1):
        pre = run_gemm(fc1, x, w1) + b1
        return float((run_gemm(consumer, np.maximum(pre, 0), w2) * g).sum())

    pre = run_gemm(fc1, x, w1) + b1
    z = np.maximum(pre, 0)
    fused = fused_consumer_dgrad(producer, consumer)
    assert fused.epilogue == "drelu_bgrad" and fused.gemm == gemm_gradients(consumer)[0]
    assert gradient_operands(consumer)[0] == ("dY", "B")
    dpre, db1 = epilogue(fused, g, w2, aux=z)  # aux: the forward's ReLU mask (z > 0 where pre > 0)
    fd_pre = finite_difference(lambda p: float((run_gemm(consumer, np.maximum(p, 0), w2) * g).sum()), pre.copy())
    np.testing.assert_allclose(dpre, fd_pre, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db1, finite_difference(lambda b: loss(b1=b), b1.copy()), rtol=1e-6, atol=1e-8)

    (_, data), (_, weight) = L.REGISTRY["GemmAct"].backward(producer)
    names_a, names_b = gradient_operands(fc1)
    t = {"A": x, "B": w1, "dY": dpre}
    dw1, db1_w = epilogue(weight, *operands(names_b, t), aux=None)
    np.testing.assert_allclose(dw1, finite_difference(lambda w: loss(w1=w), w1.copy()), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(db1_w, db1, rtol=1e-9)
    # the data gradient, without the mask of the layer below (X is the network's input: all ones)
    dx, _ = epilogue(data, *operands(names_a, t), aux=np.ones((m, k)))
    np.testing.assert_allclose(dx, finite_difference(lambda v: loss(x=v), x.copy()), rtol=1e-6, atol=1e-8)


def test_fused_consumer_dgrad_checks_the_shapes():
    producer = GemmActConfig(gemm=GemmConfig(m=4, n=6, k=5, bias="c"), activation="gelu_tanh")
    assert fused_consumer_dgrad(producer, GemmConfig(m=4, n=3, k=6)).epilogue == "dgelu_bgrad"
    with pytest.raises(ValueError):
        fused_consumer_dgrad(producer, GemmConfig(m=4, n=3, k=7))
    with pytest.raises(ValueError):
        fused_consumer_dgrad(producer, GemmConfig(m=6, n=3, k=4, trans_a=True))


def test_config_validation_flops_and_bytes():
    g = GemmConfig(m=32, n=64, k=16)
    with pytest.raises(ValueError):
        GemmActBackwardConfig(gemm=g, epilogue="drelu_bias")
    with pytest.raises(ValueError):
        GemmActBackwardConfig(gemm=GemmConfig(m=32, n=64, k=16, bias="c"), epilogue="drelu")
    with pytest.raises(ValueError):
        GemmActBackwardConfig(gemm=g, epilogue="drelu", gelu_erf=True)
    d = 32 * 64
    assert GemmActBackwardConfig(gemm=g, epilogue="drelu").flops() == 2 * d * 16 + d
    assert GemmActBackwardConfig(gemm=g, epilogue="drelu_bgrad").flops() == 2 * d * 16 + 2 * d
    assert GemmActBackwardConfig(gemm=g, epilogue="bgradb").flops() == 2 * d * 16 + 32 * 16
    assert GemmActBackwardConfig(gemm=g, epilogue="bgrada").flops() == 2 * d * 16 + 16 * 64
    kind = L.REGISTRY["GemmActBackward"]
    # fp16: A (32x16) and B (16x64) read, the ReLU bit-mask (2048 bits) read, D and the bias gradient written
    relu = GemmActBackwardConfig(gemm=g, epilogue="drelu_bgrad")
    assert kind.min_bytes(relu, 2, 2) == 2 * (32 * 16 + 16 * 64) + d // 8 + 2 * (d + 64)
    gelu = GemmActBackwardConfig(gemm=g, epilogue="dgelu")
    assert kind.min_bytes(gelu, 2, 2) == 2 * (32 * 16 + 16 * 64) + 2 * d + 2 * d
    assert relu.batch_count == 1 and GemmActBackwardConfig(gemm=GemmConfig(m=8, n=8, k=8, batch_count=6),
                                                           epilogue="dgelu").batch_count == 6
    again = L.config_from_params("GemmActBackward", gelu.params())
    assert again == gelu and again.key == gelu.key


# ----------------------------------------------------------------------------- the suites

def _backward_jobs(ml, precisions):
    """The forward jobs of ``ml`` and, for each config with a backward, the jobs of its backward calls
    (as the training expansion will add them)."""
    jobs = {}
    for cfg in ml.unique_configs().values():
        kind = L.REGISTRY[cfg.kind]
        for c in [cfg] + [c for _, c in ((kind.backward(cfg) or ()) if kind.backward else ())]:
            for p in L.precisions_for(c, precisions):
                jid = job_id(c, p)
                jobs.setdefault(jid, Job(id=jid, config=c, precision=p, node=HOSTILE + c.kind))
    return list(jobs.values())


def _suite(tmp_path, monkeypatch, precisions):
    ml = process(mlp_model(tmp_path / "mlp.onnx"), 4)
    jobs = _backward_jobs(ml, precisions)
    monkeypatch.setattr(generator, "plan_jobs", lambda *a, **k: jobs)
    return generate([ml], precisions, tmp_path / "s", kinds=["Gemm", "GemmActBackward", "Reduce"])


def test_the_epilogue_suite_renders(tmp_path, monkeypatch):
    suite = _suite(tmp_path, monkeypatch, ["fp32", "fp16"])
    src = (tmp_path / "s" / "src" / "gemmactbackward.cpp").read_text()
    assert "const GemmActBackwardCase kCases[] = {" in src and "spec.backward = c.epilogue;" in src
    kinds = {j.kind for j in suite.jobs}
    assert kinds == {"Gemm", "GemmActBackward", "Reduce"}
    eps = {j.config.epilogue for j in suite.jobs if j.kind == "GemmActBackward"}
    # fc1 + ReLU (transB): DRELU and BGRADB; MatMul + GELU(tanh) / erf GELU: DGELU and BGRADA
    assert eps == {"drelu", "bgradb", "dgelu", "bgrada"}
    for j in suite.jobs:
        if j.kind == "GemmActBackward":
            assert f", {EPILOGUES[j.config.epilogue]}, {'true' if j.config.gelu_erf else 'false'}}}," in src
    from benanza.kinds.cpp import cpp_string
    assert cpp_string(HOSTILE + "GemmActBackward") in src


@pytest.mark.slow
def test_a_suite_with_the_gradient_gemms_and_epilogues_builds(tmp_path, monkeypatch, harness):
    """One full build: the forward GEMMs, their gradient GEMMs, the bias ReduceSums and the
    GemmActBackward epilogue GEMMs compile and link, and the executable lists every job."""
    harness.use(monkeypatch)  # the session's harness library (conftest.harness)
    from benanza.build.builder import build

    suite = _suite(tmp_path, monkeypatch, ["fp32", "fp16"])
    r = build(tmp_path / "s")
    listed = subprocess.run([str(r.executable), "--list"], capture_output=True, text=True, check=True)
    assert {json.loads(line)["job"] for line in listed.stdout.splitlines()} == {j.id for j in suite.jobs}
    assert any(j.kind == "GemmActBackward" for j in suite.jobs)
