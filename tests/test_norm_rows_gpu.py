"""The LayerNorm and RMSNorm kernels of the harness on a real GPU (skipped without one):
benanza::norm_rows_kernel (row_in_registers, cpp/src/norm_rows_kernels.cu) and the one-block
benanza::layernorm_kernel / benanza::rmsnorm_kernel, with and without the residual add and the sum
written, fp32/fp16/bf16, against a CPU reference (tests/data/norm_rows_check.cu): the outputs, the sum
(bit for bit) and the inverse deviation. The build and the run are benchmarks/norm_rows_check.py's,
which runs the same check on a GPU machine without pytest.

Run on a GPU machine: pytest tests/test_norm_rows_gpu.py -s"""
import importlib.util

import pytest

from conftest import REPO, have_gpu

_spec = importlib.util.spec_from_file_location("norm_rows_check", REPO / "benchmarks" / "norm_rows_check.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


def test_the_check_compiles_here(tmp_path):
    """Without a GPU: the check and the kernels it links compile (sm_90)."""
    assert check.build(tmp_path, "sm_90").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not have_gpu(), reason="needs an NVIDIA GPU")
def test_norm_kernels_match_the_reference(tmp_path):
    lines, err, rc = check.run(check.build(tmp_path))
    print(f"norm rows check: {sum(ln.startswith('ok ') for ln in lines)} of {len(lines)} cases ok")
    assert rc == 0 and lines and all(ln.startswith("ok ") for ln in lines), \
        "\n".join(ln for ln in lines if not ln.startswith("ok ")) + err
    assert len(lines) == check.EXPECTED_LINES
