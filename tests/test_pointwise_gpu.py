"""The harness's pointwise kernels (benanza::binary_pointwise, benanza::activation_pointwise in
cpp/src/kernels.cu) on a real GPU (skipped without one): every broadcast pattern benanza's
Elementwise layers use (same shape, per channel NCHW and NHWC, scalar, inner and outer broadcast,
vectorized and odd sizes) and every activation mode (HardSigmoid's exact form too) match a CPU reference in fp32, fp16 and bf16;
batched_copy2d moves a Concat's inputs (4, 40, and odd-sized) byte for byte.

Run on a GPU machine: pytest tests/test_pointwise_gpu.py -s"""
import subprocess

import pytest

from benanza.build.cudalibs import locate
from conftest import HERE, REPO, have_gpu

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU")]


def test_pointwise_kernels_match_the_reference(tmp_path):
    libs = locate()
    exe = tmp_path / "pointwise_check"
    subprocess.run([str(libs.nvcc), "-O2", "-std=c++17", "-arch=native", f"-I{REPO / 'cpp' / 'include'}",
                    f"-I{libs.cudnn_include}", f"-I{libs.cublas_include}", str(HERE / "data" / "pointwise_check.cu"),
                    str(REPO / "cpp" / "src" / "kernels.cu"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    print(out.stdout)
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and lines and all(ln.startswith("ok ") for ln in lines), out.stdout + out.stderr
    assert len(lines) == 3 * (6 + 16) + 6
