"""ONNX Trilu as a layer of its own kind (issue 27, item 3): the mapping (attribute ``upper``, the
constant ``k`` input, bool data), the kept-element count of its minimum bytes and the kernel's own
predicate (``trilu_keep`` of cpp/include/benanza/trilu.hpp, compiled for the host) checked against
numpy's triu/tril, the gradient (the same mask on dy), PyTorch's candidate, and one generated suite
whose source passes the compiler's syntax check; the harness's kernel file compiles with nvcc."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from benanza import kinds as L
from benanza.generation.generator import generate
from benanza.processing.model import process
from benanza.processing.training import training_plan
from conftest import REPO
from test_copy_backward import _candidate, _suite_model
from test_unary_backward import syntax_check

SHAPES_K = [((4, 6), 0), ((4, 6), 1), ((4, 6), -2), ((6, 4), 3), ((5, 5), 7), ((5, 5), -9), ((1, 128, 128), 1)]


def _model(path, x, k=None, upper=None, elem=TensorProto.FLOAT):
    """Trilu of x, or for float data of x * w (a parameter, so the Trilu's input has a gradient)."""
    nodes, inits, src = [], [], "x"
    if elem == TensorProto.FLOAT:
        inits.append(onnx.numpy_helper.from_array(np.ones(x[-2:], np.float32), "w"))
        nodes.append(helper.make_node("Mul", ["x", "w"], ["xw"], name="scale"))
        src = "xw"
    ins = [src]
    if k is not None:
        ins.append("k")
        inits.append(onnx.numpy_helper.from_array(np.asarray(k, np.int64), "k"))
    kw = {} if upper is None else {"upper": upper}
    nodes.append(helper.make_node("Trilu", ins, ["y"], name="mask", **kw))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, x)],
                          [helper.make_tensor_value_info("y", elem, x)], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    return path


@pytest.mark.parametrize("shape,k", SHAPES_K)
@pytest.mark.parametrize("upper", [True, False])
def test_kept_count_and_bytes_are_numpys(shape, k, upper):
    """kept() is the count of nonzero entries of numpy's triu/tril of ones; min_bytes reads those
    and writes every element."""
    cfg = L.TriluConfig(x=(3,) + shape, upper=upper, k=k)
    ones = np.ones(shape[-2:])
    want = int(np.count_nonzero(np.triu(ones, k) if upper else np.tril(ones, k)))
    assert cfg.kept() == want
    batch = 3 * int(np.prod(shape[:-2]))
    assert L.REGISTRY["Trilu"].min_bytes(cfg, 2, 2) == 2 * batch * want + 2 * L.numel(cfg.x)
    b = L.TriluConfig(x=cfg.x, upper=upper, k=k, dtype="bool")
    assert L.REGISTRY["Trilu"].min_bytes(b, 4, 4) == batch * want + L.numel(cfg.x)
    assert cfg.flops() == 0


def test_the_kernels_predicate_is_numpys_triu_and_tril(tmp_path):
    """trilu_keep (the header the CUDA kernel uses), compiled for the host, prints the mask of each
    (rows, cols, k, upper); each equals numpy's triu/tril of ones."""
    if not shutil.which("g++"):
        pytest.skip("g++ is missing")
    import site
    from pathlib import Path
    sp = next((p for p in map(Path, site.getsitepackages()) if (p / "nvidia" / "cu13" / "include").is_dir()), None)
    if sp is None:
        pytest.skip("the CUDA runtime headers of the pip wheels are missing")
    cases = [(r, c, k, u) for (r, c), k in [(s[-2:], k) for s, k in SHAPES_K[:6]] for u in (0, 1)]
    src = tmp_path / "t.cpp"
    src.write_text('#include <cstdio>\n#include "benanza/trilu.hpp"\nint main() {\n  const long long cs[][4] = {'
                   + ", ".join("{%d, %d, %d, %d}" % c for c in cases) + "};\n"
                   "  for (const auto& c : cs) {\n    for (long long i = 0; i < c[0]; ++i)\n"
                   "      for (long long j = 0; j < c[1]; ++j) std::printf(\"%d\", benanza::trilu_keep(i, j, c[2], c[3]) ? 1 : 0);\n"
                   "    std::printf(\"\\n\");\n  }\n}\n")
    exe = tmp_path / "t"
    subprocess.run(["g++", "-std=c++17", f"-I{REPO / 'cpp' / 'include'}", f"-I{sp / 'nvidia' / 'cu13' / 'include'}",
                    str(src), "-o", str(exe)], check=True, capture_output=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    for (r, c, k, u), line in zip(cases, lines):
        ones = np.ones((r, c), np.int64)
        want = np.triu(ones, k) if u else np.tril(ones, k)
        assert line == "".join(map(str, want.reshape(-1))), (r, c, k, u)


@pytest.mark.parametrize("k,upper,elem,dtype", [(None, None, TensorProto.FLOAT, ""), (1, 1, TensorProto.FLOAT, ""),
                                                (-1, 0, TensorProto.FLOAT, ""), (0, 0, TensorProto.BOOL, "bool")])
def test_mapping(tmp_path, k, upper, elem, dtype):
    """Defaults upper=1, k=0 (ONNX spec); k from its constant input; bool data keeps its type and has
    no gradient, float data's gradient is the same Trilu on dy."""
    ml = process(_model(tmp_path / "t.onnx", ["N", 8, 8], k, upper, elem), 2)
    (ly,) = [ly for ly in ml.layers if ly.op_type == "Trilu"]
    assert ly.status == "benchmark", ly.reason
    want = L.TriluConfig(x=(2, 8, 8), upper=upper is None or bool(upper), k=k or 0, dtype=dtype)
    assert ly.config == want
    plan = training_plan(ml)
    calls = [c for c in plan.calls if c.layer == ly.index]
    assert ly.index not in plan.no_backward
    if dtype:
        assert not calls
    else:
        assert [(c.phase, c.config) for c in calls] == [("backward_data", want)]


def test_a_computed_k_and_a_vector_are_unsupported_with_a_reason(tmp_path):
    g = helper.make_graph([helper.make_node("Trilu", ["x", "k"], ["y"], name="m")], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 4]),
                                        helper.make_tensor_value_info("k", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 4])])
    p = tmp_path / "k.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), p)
    (ly,) = process(p, 2).layers
    assert ly.status == "unsupported" and "k is not a constant" in ly.reason
    with pytest.raises(ValueError, match="rank 1"):
        L.TriluConfig(x=(4,), upper=True, k=0)


def test_candidate_and_aten():
    c = _candidate(L.TriluConfig(x=(2, 8, 8), upper=False, k=0))
    assert c.call == "torch:aten::tril" and c.out_numel == 128
    assert _candidate(L.TriluConfig(x=(2, 8, 8), upper=True, k=1, dtype="bool")).call == "torch:aten::triu"
    assert {"aten::triu", "aten::tril"} <= set(L.REGISTRY["Trilu"].aten["Trilu"])


def test_the_suite_renders_and_its_source_compiles(tmp_path):
    cfgs = [L.TriluConfig(x=(1, 1, 128, 128), upper=True, k=1), L.TriluConfig(x=(4, 16, 32), upper=False, k=-2),
            L.TriluConfig(x=(128, 128), upper=True, k=0, dtype="bool")]
    generate([_suite_model(cfgs)], ["fp32", "fp16"], tmp_path / "s")
    src = (tmp_path / "s" / "src" / "trilu.cpp").read_text()
    assert src.count('1, 128, 128, 1, true, false, ElemType::F32, "triu"}') == 2
    assert src.count('4, 16, 32, -2, false, false, ElemType::F32, "tril"}') == 2
    assert src.count('1, 128, 128, 0, true, true, ElemType::I8, "triu bool"}') == 2
    syntax_check(tmp_path / "s", "trilu.cpp")


def test_the_harness_kernel_compiles_with_nvcc(tmp_path):
    """cpp/src/trilu_kernels.cu compiles for sm_75 (what a suite built without a GPU targets)."""
    if not shutil.which("nvcc"):
        pytest.skip("nvcc is missing")
    r = subprocess.run(["nvcc", "-std=c++17", "-c", "-arch=sm_75", f"-I{REPO / 'cpp' / 'include'}",
                        str(REPO / "cpp" / "src" / "trilu_kernels.cu"), "-o", str(tmp_path / "t.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
