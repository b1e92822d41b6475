"""ONNX Einsum (issue 27, item 3) as the calls it is made of (benanza.kinds.einsum): a strided-batched
GEMM with transa/transb where the letters' order allows it, Transpose copies where an operand or the
output must be permuted, a broadcast Mul for a product without contraction, a Transpose or a ReduceSum
for one operand; three operands and diagonals unsupported with a reason. Each mapping is checked by
hand and by numpy: np.einsum against the layers' own decomposition (permute, reshape, matmul)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from benanza import kinds as L
from benanza.processing.model import process
from onnx_builders import HOSTILE

_RNG = np.random.default_rng(27)


def _model(path, eq: str, shapes, dtype=TensorProto.FLOAT, weights=(), name="einsum", batch_param=False):
    """One Einsum node (opset 12) over inputs ``x0``, ``x1``... of ``shapes``; the inputs whose index
    is in ``weights`` are initializers; ``batch_param``: x0's dim 0 is the symbolic ``N``."""
    inputs, inits = [], []
    for i, s in enumerate(shapes):
        if i in weights:
            inits.append(numpy_helper.from_array(_RNG.standard_normal(s).astype(
                np.float16 if dtype == TensorProto.FLOAT16 else np.float32), f"x{i}"))
        else:
            dims = (["N"] + list(s[1:])) if batch_param and i == 0 else list(s)
            inputs.append(helper.make_tensor_value_info(f"x{i}", dtype, dims))
    try:
        rank = np.einsum(eq, *[np.zeros(s) for s in shapes]).ndim
    except ValueError:  # numpy refuses it (a diagonal is fine for numpy; three operands too)
        rank = 1
    out = helper.make_tensor_value_info("y", dtype, [f"o{i}" for i in range(rank)])
    node = helper.make_node("Einsum", [f"x{i}" for i in range(len(shapes))], ["y"], equation=eq, name=name)
    m = helper.make_model(helper.make_graph([node], "g", inputs, [out], initializer=inits),
                          opset_imports=[helper.make_opsetid("", 12)])
    onnx.save(m, path)
    return path


def _layers(tmp_path, eq, shapes, **kw):
    ml = process(_model(tmp_path / "m.onnx", eq, shapes, **kw), shapes[0][0])
    assert all(ly.op_type == "Einsum" for ly in ml.layers)
    return ml.layers


def _run(configs, operands):
    """The layers' decomposition in numpy: each pre-product Transpose/ReduceSum applies to the operand
    with its input's element count (letter extents are distinct primes in these tests, so exactly one
    fits), the product (GEMM: op(A) @ op(B) on the stored (batch, rows, cols) shapes; Mul: broadcast)
    takes its operands by element count likewise, and the calls after it apply to its result."""
    ops = [np.asarray(o, np.float64) for o in operands]

    def pick(shape):
        fits = [i for i, o in enumerate(ops) if o.size == int(np.prod(shape))]
        assert fits, (shape, [o.shape for o in ops])
        return fits[0]

    def unary(cfg, x):
        if isinstance(cfg, L.CopyConfig):
            assert cfg.op == "Transpose"
            return x.reshape(cfg.inputs[0]).transpose(cfg.attr("perm"))
        assert isinstance(cfg, L.ReduceConfig) and cfg.op == "sum"
        axes = tuple(i for i, (a, b) in enumerate(zip(cfg.x, cfg.y)) if a != b)
        return x.reshape(cfg.x).sum(axis=axes, keepdims=True)

    for cfg in configs:
        if isinstance(cfg, (L.GemmConfig, L.ElementwiseConfig)):
            sa, sb = cfg.input_shapes()
            ia = pick(sa)
            a = ops.pop(ia)
            b = ops.pop(pick(sb))
            if isinstance(cfg, L.GemmConfig):
                a, b = a.reshape(sa), b.reshape(sb)
                a = np.swapaxes(a, -1, -2) if cfg.trans_a else a
                b = np.swapaxes(b, -1, -2) if cfg.trans_b else b
                ops = [a @ b]
            else:
                ops = [a.reshape(sa) * b.reshape(sb)]
        else:
            i = pick(cfg.input_shapes()[0])
            ops[i] = unary(cfg, ops[i])
    assert len(ops) == 1
    return ops[0]


def _check_numpy(layers, eq, shapes):
    xs = [_RNG.standard_normal(s) for s in shapes]
    want = np.einsum(eq, *xs)
    got = _run([ly.config for ly in layers], xs)
    assert got.size == want.size
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-10, atol=1e-10)


#: equation, input shapes (distinct prime extents), initializer inputs, and the expected calls
CASES = [
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 7), (2, 3, 11, 7)], (),
     [L.GemmConfig(m=5, n=11, k=7, batch_count=6, trans_a=False, trans_b=True)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 5, 11), (2, 3, 11, 7)], (),
     [L.GemmConfig(m=5, n=7, k=11, batch_count=6)]),
    ("bsd,hd->bsh", [(2, 5, 7), (11, 7)], (1,),
     [L.GemmConfig(m=10, n=11, k=7, trans_b=True)]),
    ("...d,de->...e", [(2, 3, 7), (7, 11)], (1,),
     [L.GemmConfig(m=6, n=11, k=7)]),
    ("bij,bjk->bik", [(2, 3, 5), (2, 5, 7)], (),
     [L.GemmConfig(m=3, n=7, k=5, batch_count=2)]),
    # (batch, N, M) output: the operands swap, Y^T = B^T A^T, no copy
    ("bhqk,bhkd->bhdq", [(2, 3, 5, 11), (2, 3, 11, 7)], (),
     [L.GemmConfig(m=7, n=5, k=11, batch_count=6, trans_a=True, trans_b=True)]),
    # the heads after the sequence: both operands permuted to (b, h, s, d) first, as torch.einsum copies them
    ("bqhd,bkhd->bhqk", [(2, 5, 3, 7), (2, 11, 3, 7)], (),
     [L.CopyConfig(op="Transpose", inputs=((2, 5, 3, 7),), y=(2, 3, 5, 7), attrs=(("perm", (0, 2, 1, 3)),)),
      L.CopyConfig(op="Transpose", inputs=((2, 11, 3, 7),), y=(2, 3, 11, 7), attrs=(("perm", (0, 2, 1, 3)),)),
      L.GemmConfig(m=5, n=11, k=7, batch_count=6, trans_b=True)]),
    # the output permuted after the GEMM
    ("bij,bjk->ibk", [(2, 3, 5), (2, 5, 7)], (),
     [L.GemmConfig(m=3, n=7, k=5, batch_count=2),
      L.CopyConfig(op="Transpose", inputs=((2, 3, 7),), y=(3, 2, 7), attrs=(("perm", (1, 0, 2)),))]),
    ("ij->ji", [(3, 5)], (), [L.CopyConfig(op="Transpose", inputs=((3, 5),), y=(5, 3), attrs=(("perm", (1, 0)),))]),
    ("bij->bi", [(2, 3, 5)], (), [L.ReduceConfig(op="sum", x=(2, 3, 5), y=(2, 3, 1))]),
    ("bij->jb", [(2, 3, 5)], (), [L.ReduceConfig(op="sum", x=(2, 3, 5), y=(2, 1, 5)),
                                  L.CopyConfig(op="Transpose", inputs=((2, 5),), y=(5, 2), attrs=(("perm", (1, 0)),))]),
    # torch.outer / rotary's einsum("i,j->ij"): a broadcast Mul, as the exporters' Mul
    ("i,j->ij", [(3,), (5,)], (1,), [L.ElementwiseConfig(op="mul", a=(3, 1), b=(1, 5))]),
    ("ij,ij->ij", [(3, 5), (3, 5)], (), [L.ElementwiseConfig(op="mul", a=(3, 5), b=(3, 5))]),
    # implicit output (alphabetical letters that occur once): ik
    ("ij,jk", [(3, 5), (5, 7)], (1,), [L.GemmConfig(m=3, n=7, k=5)]),
    # a letter only one operand has and the output lacks: summed first
    ("bij,bj->b", [(2, 3, 5), (2, 5)], (),
     [L.ReduceConfig(op="sum", x=(2, 3, 5), y=(2, 1, 5)), L.GemmConfig(m=1, n=1, k=5, batch_count=2, trans_b=True)]),
]


@pytest.mark.parametrize("eq,shapes,weights,want", CASES, ids=[c[0] for c in CASES])
def test_each_einsum_is_the_calls_torch_makes(tmp_path, eq, shapes, weights, want):
    layers = _layers(tmp_path, eq, shapes, weights=weights)
    assert [ly.status for ly in layers] == ["benchmark"] * len(want), [ly.reason for ly in layers]
    assert [ly.config for ly in layers] == want
    _check_numpy(layers, eq, shapes)


def test_a_gemm_is_the_config_matmul_gets(tmp_path):
    """bij,bjk->bik and the MatMul of the same shapes share one config (one key: measured once)."""
    mm = helper.make_node("MatMul", ["x0", "x1"], ["y"])
    ins = [helper.make_tensor_value_info("x0", TensorProto.FLOAT, [4, 3, 5]),
           helper.make_tensor_value_info("x1", TensorProto.FLOAT, [4, 5, 7])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3, 7])
    onnx.save(helper.make_model(helper.make_graph([mm], "g", ins, [out]), opset_imports=[helper.make_opsetid("", 13)]),
              tmp_path / "mm.onnx")
    matmul = process(tmp_path / "mm.onnx", 4).layers[0].config
    (ein,) = _layers(tmp_path, "bij,bjk->bik", [(4, 3, 5), (4, 5, 7)])
    assert ein.config == matmul and ein.config.key == matmul.key


def test_fp16_and_a_dynamic_batch(tmp_path):
    """fp16 inputs map to the same calls; a symbolic batch N is bound by --batch (here 8)."""
    path = _model(tmp_path / "m.onnx", "bqhd,bkhd->bhqk", [(1, 5, 3, 7), (1, 11, 3, 7)], dtype=TensorProto.FLOAT16,
                  batch_param=True)
    onnx.save(onnx.load(path), path)
    ml = process(path, 8)
    assert ml.dtype == "float16"
    assert [type(ly.config).__name__ for ly in ml.layers] == ["CopyConfig", "CopyConfig", "GemmConfig"]
    assert ml.layers[-1].config == L.GemmConfig(m=5, n=11, k=7, batch_count=24, trans_b=True)
    assert ml.layers[0].config.inputs == ((8, 5, 3, 7),)
    # the parts run in order: the GEMM reads the copy before it
    assert ml.edges[2] == [1] and ml.layers[2].outputs == ("y",)


@pytest.mark.parametrize("eq,shapes,reason", [
    ("ij,jk,kl->il", [(2, 3), (3, 5), (5, 7)], "'ij,jk,kl->il' of 3 operands: only one or two are benchmarked"),
    ("ii->i", [(3, 3)], "'ii->i' takes a diagonal"),
    ("bij,bjk->bik", [(2, 3, 5), (2, 7, 11)], "letter 'j' has extents 5 and 7"),
    ("i j,jk->ik", [(3, 5), (5, 7)], None),  # spaces are allowed: a GEMM
])
def test_unsupported_einsums_say_why(tmp_path, eq, shapes, reason):
    layers = _layers(tmp_path, eq, shapes, weights=tuple(range(1, len(shapes))))
    if reason is None:
        assert [ly.status for ly in layers] == ["benchmark"]
        return
    (ly,) = layers
    assert ly.status == "unsupported" and reason in ly.reason and "\n" not in ly.reason, ly.reason


@pytest.mark.parametrize("eq,ranks,reason", [
    ("ij->jk", [2], "has an output letter no input has"),
    ("ijk->i", [2], "does not fit an input of rank 2"),
    ("ij->ii", [2], "repeats a letter in its output"),
    ("ij,jk->ik", [2], "is malformed for 1 input(s)"),
    ("i...j->", [1], "does not fit an input of rank 1"),
    ("i*,j->ij", [2, 1], "is malformed"),
])
def test_equations_onnx_inference_would_refuse_are_refused_too(eq, ranks, reason):
    """The mapper's own checks (ONNX's shape inference stops most such models earlier, with a one-line
    ModelError): each a one-line Unsupported."""
    from benanza.kinds.einsum import parse_equation
    from benanza.kinds.onnx_map import Unsupported

    with pytest.raises(Unsupported, match=None) as e:
        parse_equation(eq, ranks)
    assert reason in str(e.value) and "\n" not in str(e.value)


def test_ellipsis_and_implicit_outputs_parse_as_numpy_does():
    from benanza.kinds.einsum import parse_equation

    assert parse_equation("...ij,...jk->...ik", [4, 3]) == (["10ij", "0jk"], "10ik")
    assert parse_equation("...ij,jk", [3, 2]) == (["0ij", "jk"], "0ik")
    assert parse_equation("ba,b", [2, 1]) == (["ba", "b"], "a")


def test_a_long_hostile_equation_is_quoted_short(tmp_path):
    eq = ",".join(["ab"] * 3) + "->" + "a" * 200
    (ly,) = _layers(tmp_path, "ab,ab,ab->ab", [(2, 3)] * 3, weights=(1, 2))
    assert "3 operands" in ly.reason
    from benanza.kinds.einsum import _quote

    assert len(_quote(eq)) < 70


def test_the_suite_compiles_and_layers_lists_nothing_unsupported(tmp_path):
    """A model of Einsums (a hostile node name) processed, its suite generated: the GEMM and Copy
    sources compile (g++ -fsyntax-only against the harness and the wheels' headers), the name is
    only an escaped literal; ``benanza layers`` prints no unsupported layer."""
    from typer.testing import CliRunner

    from benanza.cli import app
    from benanza.generation.generator import generate
    from benanza.kinds.cpp import cpp_string
    from test_unary_backward import syntax_check

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5, 3, 7])
    k = helper.make_tensor_value_info("k", TensorProto.FLOAT, ["N", 11, 3, 7])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 5, 11])
    nodes = [helper.make_node("Einsum", ["x", "k"], ["s"], equation="bqhd,bkhd->bhqk", name=HOSTILE),
             helper.make_node("Einsum", ["s"], ["y"], equation="bhqk->bhqk", name="same")]
    path = tmp_path / "att.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x, k], [y]), opset_imports=[helper.make_opsetid("", 12)]),
              path)
    ml = process(path, 2)
    assert [ly.status for ly in ml.layers] == ["benchmark"] * 3 + ["zero_cost"]
    suite = generate([ml], ["fp16"], tmp_path / "s")
    assert {j.kind for j in suite.jobs} == {"Gemm", "Copy"}
    for src in ("gemm.cpp", "copy.cpp"):
        text = (tmp_path / "s" / "src" / src).read_text()
        assert cpp_string(HOSTILE) in text
        syntax_check(tmp_path / "s", src)
    r = CliRunner().invoke(app, ["layers", str(path), "--batch", "2"])
    assert r.exit_code == 0, r.output
    assert "0 unsupported" in r.output and "unsupported:" not in r.output, r.output
    # the same command on a model with an Einsum it cannot benchmark names it and says why
    bad = tmp_path / "bad.onnx"
    _model(bad, "ij,jk,kl->il", [(2, 3), (3, 5), (5, 7)], weights=(1, 2))
    r = CliRunner().invoke(app, ["layers", str(bad), "--batch", "2"])
    assert "unsupported: Einsum x1" in r.output and "3 operands" in r.output, r.output


def test_aten_einsum_covers_every_layer_it_became(tmp_path):
    """The profile join: torch.einsum's one framework op (its copies and its bmm) matches the first
    layer of the Einsum and covers the others (they are not left unmatched)."""
    from benanza.profiles.join import join
    from benanza.profiles.trace import read_trace

    ml = process(_model(tmp_path / "m.onnx", "bqhd,bkhd->bhqk", [(2, 5, 3, 7), (2, 11, 3, 7)]), 2)
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::einsum", "pid": 1, "tid": 1, "ts": 0, "dur": 100,
               "args": {"External id": 1}}]
    for j, kname in enumerate(["elementwise_copy_kernel", "elementwise_copy_kernel", "sm90_xmma_gemm_bmm"]):
        events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 + 20 * j,
                    "dur": 5, "args": {"correlation": 100 + j, "External id": 1}},
                   {"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": 200 + 20 * j, "dur": 10,
                    "args": {"correlation": 100 + j, "External id": 1, "stream": 7}}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": events}))
    r = join(read_trace(tmp_path / "t.json"), ml)
    assert r.covers == {0: (0, 1, 2)}
    assert r.unmatched_layers == ((),)
    assert [k.layer for k in r.kernels] == [0, 0, 0] and {k.category for k in r.kernels} == {"layer"}
