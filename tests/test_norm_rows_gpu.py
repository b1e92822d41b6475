"""The LayerNorm and RMSNorm kernels of the harness on a real GPU (skipped without one):
benanza::norm_rows_kernel (row_in_registers, cpp/src/norm_rows_kernels.cu) and the one-block
benanza::layernorm_kernel / benanza::rmsnorm_kernel, with and without the residual add and the sum
written, fp32/fp16/bf16, against a CPU reference (tests/data/norm_rows_check.cu): the outputs, the sum
(bit for bit) and the inverse deviation.

Run on a GPU machine: pytest tests/test_norm_rows_gpu.py -s"""
import subprocess

import pytest

from benanza.build.cudalibs import locate
from conftest import HERE, REPO, have_gpu

#: lines the check prints: (16-bit rows of 5 lengths x 2 types + fp32 rows of 3 lengths) x 2 norms x
#: 2 kernels x 3 modes (plain, residual, residual with the sum written)
EXPECTED_LINES = (5 * 2 + 3) * 2 * 2 * 3

SOURCES = ("norm_rows_kernels.cu", "transformer_kernels.cu", "rmsnorm_kernels.cu", "kernels.cu")


def build(tmp_path, arch="native"):
    libs = locate()
    exe = tmp_path / "norm_rows_check"
    subprocess.run([str(libs.nvcc), "-O2", "-std=c++17", f"-arch={arch}", f"-I{REPO / 'cpp' / 'include'}",
                    f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}", str(HERE / "data" / "norm_rows_check.cu"),
                    *[str(REPO / "cpp" / "src" / s) for s in SOURCES], "-o", str(exe)], check=True)
    return exe


def test_the_check_compiles_here(tmp_path):
    """Without a GPU: the check and the kernels it links compile (sm_90)."""
    assert build(tmp_path, "sm_90").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU")
def test_norm_kernels_match_the_reference(tmp_path):
    out = subprocess.run([str(build(tmp_path))], capture_output=True, text=True, timeout=300)
    lines = out.stdout.splitlines()
    print(f"norm rows check: {sum(ln.startswith('ok ') for ln in lines)} of {len(lines)} cases ok")
    assert out.returncode == 0 and lines and all(ln.startswith("ok ") for ln in lines), \
        "\n".join(ln for ln in lines if not ln.startswith("ok ")) + out.stderr
    assert len(lines) == EXPECTED_LINES
