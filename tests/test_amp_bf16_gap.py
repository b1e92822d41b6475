"""benchmarks/amp_bf16_gap.py: the AMP-bf16 against AMP-fp16 training steps of truth runs, with the
batch-norm kernels among each step's heaviest (2026-11-27h: every model with batch norms ran
12-48 % slower in bf16, those without within 2 %). No GPU."""
import json

import pytest

from benchmark_modules import load


def _run(folder, model, batch, fp16_ms, bf16_ms, bn=True):
    folder.mkdir(parents=True, exist_ok=True)
    tk16 = [{"name": "void cudnn::bn_bw_1C11_kernel_new<__half, float, float2, 128, true, 1>", "ms": 1.0},
            {"name": "sm90_xmma_dgrad_implicit_gemm_f16f16", "ms": 2.0}] if bn else []
    tkbf = [{"name": "void at::native::batch_norm_backward_kernel<c10::BFloat16, float, float, int>", "ms": 2.5},
            {"name": "void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16>", "ms": 0.5},
            {"name": "sm90_xmma_dgrad_implicit_gemm_bf16bf16", "ms": 2.0}] if bn else []
    recs = [{"kind": "pytorch", "model": model, "batch": batch, "dtype": "amp16", "kernel_ms": {"median": fp16_ms},
             "top_kernels": tk16},
            {"kind": "pytorch", "model": model, "batch": batch, "dtype": "ampbf16", "kernel_ms": {"median": bf16_ms},
             "top_kernels": tkbf},
            {"kind": "pytorch", "model": model, "batch": batch, "dtype": "fp32", "kernel_ms": {"median": 9.0}}]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"kind": "pyto')
    return folder


def test_the_rows_and_the_batch_norm_kernels(tmp_path, capsys):
    gap = load("amp_bf16_gap")
    a = _run(tmp_path / "a", "resnet50", 32, 10.0, 13.0)
    b = _run(tmp_path / "b", "vit_b_16", 32, 8.0, 8.08, bn=False)
    rows = {r["model"]: r for r in gap.rows([a, b])}
    assert rows["resnet50"]["change"] == pytest.approx(0.3) and rows["resnet50"]["cudnn_bn_fp16_ms"] == 1.0
    assert rows["resnet50"]["native_bn_bf16_ms"] == pytest.approx(3.0)
    assert rows["vit_b_16"]["native_bn_bf16_ms"] == 0 and rows["vit_b_16"]["change"] == pytest.approx(0.01)
    assert gap.rows([a], {8}) == []
    assert gap.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "resnet50 | 32 | 10.000 | 13.000 | +30 % | 1.000 | 3.000" in out


@pytest.mark.parametrize("args,msg", [(["nowhere"], "no such folder or archive"),
                                      (["RUN", "--batch", "x"], "batch sizes must be integers"),
                                      (["EMPTY"], "no model has both")])
def test_bad_input_is_one_line(tmp_path, args, msg):
    gap = load("amp_bf16_gap")
    (tmp_path / "empty").mkdir()
    args = [str(_run(tmp_path / "r", "m", 8, 1.0, 1.2)) if x == "RUN" else str(tmp_path / "empty") if x == "EMPTY"
            else x for x in args]
    with pytest.raises(SystemExit) as e:
        gap.main(args)
    assert str(e.value).startswith("benanza: ") and msg in str(e.value) and "\n" not in str(e.value)
