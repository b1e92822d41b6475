"""The harness's generic elementwise kernels on a real GPU (skipped without one):
benanza::binary_pointwise_typed (cpp/src/kernels.cu) and benanza::unary_kernel
(cpp/src/unary_kernels.cu) against a CPU reference of the ONNX formulas
(tests/data/elementwise_check.cu): every binary op on fp32/fp16/bf16, every integer type and
bool, with both operands broadcast, one broadcast, a scalar and odd sizes; every unary op on
fp32/fp16/bf16 (IsNaN/IsInf on NaN and infinities, Clip, Swish, Cast to bool and int32), integer
Abs/Neg/Sign/BitwiseNot, Not on bool, Cast from every integer type.

Run on a GPU machine: pytest tests/test_elementwise_gpu.py -s"""
import subprocess

import pytest

from benanza import kinds as L
from benanza.build.cudalibs import locate
from conftest import HERE, REPO, have_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU")]

#: lines the check prints: float binaries 6 shapes x 19 x 3 types, integer binaries 6 x 12 (signed)
#: or 14 (unsigned) x 4 + 4 types, bool binaries 6 x 4, float unaries 76 x 3, integer unaries 12 x 6,
#: Not on bool 2
EXPECTED_LINES = 6 * 19 * 3 + 6 * 12 * 4 + 6 * 14 * 4 + 6 * 4 + 76 * 3 + 12 * 6 + 2


def test_elementwise_kernels_match_the_reference(tmp_path):
    libs = locate()
    exe = tmp_path / "elementwise_check"
    subprocess.run([str(libs.nvcc), "-O2", "-std=c++17", "-arch=native", f"-I{REPO / 'cpp' / 'include'}",
                    f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}", str(HERE / "data" / "elementwise_check.cu"),
                    str(REPO / "cpp" / "src" / "kernels.cu"), str(REPO / "cpp" / "src" / "unary_kernels.cu"),
                    "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    print(f"elementwise check: {sum(ln.startswith('ok ') for ln in lines)} of {len(lines)} cases ok")
    assert out.returncode == 0 and lines and all(ln.startswith("ok ") for ln in lines), \
        "\n".join(ln for ln in lines if not ln.startswith("ok ")) + out.stderr
    assert len(lines) == EXPECTED_LINES
    names = {ln.split()[1] for ln in lines}
    # every unary op of layers.UNARY_OPS (Pow by its exponent) and every binary op was checked
    for op in L.UNARY_OPS:
        if op != "pow":
            assert any(n.startswith(op + "-") for n in names), op
    for op in L.ELEMENTWISE_OPS:
        assert any(n.startswith(op + "-") for n in names), op
