"""Roofline quantities against hand-computed FLOPs and bytes, one case per layer kind."""
import pytest

from benanza import kinds as L
from benanza.analysis import roofline as R
from benanza.errors import UsageError

CASES = [
    # ResNet-50's first conv, batch 1, no bias: y 1x64x112x112
    (L.ConvConfig((1, 3, 224, 224), (64, 3, 7, 7), (3, 3, 3, 3), (2, 2), (1, 1), 1, False), "fp32",
     2 * 64 * 112 * 112 * 3 * 49, 4 * (3 * 224 * 224 + 64 * 3 * 49 + 64 * 112 * 112)),
    # the same with a bias, in fp16: + K bias elements read, + one add per output element
    (L.ConvConfig((1, 3, 224, 224), (64, 3, 7, 7), (3, 3, 3, 3), (2, 2), (1, 1), 1, True), "fp16",
     2 * 64 * 112 * 112 * 3 * 49 + 64 * 112 * 112, 2 * (3 * 224 * 224 + 64 * 3 * 49 + 64 + 64 * 112 * 112)),
    # conv + BN folded to scale/shift + relu: 2K parameters; 2 + 1 extra FLOPs per output
    (L.ConvBnActConfig(L.ConvConfig((2, 8, 10, 10), (16, 8, 3, 3), (1, 1, 1, 1), (1, 1), (1, 1), 1, False), "relu"),
     "bf16", 2 * 2 * 16 * 100 * 8 * 9 + 3 * 2 * 16 * 100, 2 * (2 * 8 * 100 + 16 * 8 * 9 + 32 + 2 * 16 * 100)),
    # Gemm with a bias vector: A (m x k), B (k x n), C (n), Y (m x n)
    (L.GemmConfig(m=32, n=1000, k=2048, trans_b=True, bias="c"), "fp32",
     2 * 32 * 1000 * 2048 + 32 * 1000, 4 * (32 * 2048 + 2048 * 1000 + 1000 + 32 * 1000)),
    # FP8 GEMM: 1-byte inputs, 2-byte output
    (L.GemmConfig(m=64, n=128, k=256), "fp8", 2 * 64 * 128 * 256, 64 * 256 + 256 * 128 + 2 * 64 * 128),
    # batched MatMul
    (L.GemmConfig(m=197, n=64, k=197, batch_count=12), "fp16", 2 * 12 * 197 * 64 * 197,
     2 * 12 * (197 * 197 + 197 * 64 + 197 * 64)),
    (L.ActivationConfig((1, 64, 56, 56), "relu"), "fp32", 64 * 56 * 56, 4 * 2 * 64 * 56 * 56),
    (L.BatchNormConfig((1, 64, 56, 56), 1e-5), "fp16", 2 * 64 * 56 * 56, 2 * (2 * 64 * 56 * 56 + 128)),
    (L.PoolingConfig((1, 64, 112, 112), (1, 64, 56, 56), "max", (3, 3), (1, 1, 1, 1), (2, 2)), "fp32",
     64 * 56 * 56 * 9, 4 * (64 * 112 * 112 + 64 * 56 * 56)),
    (L.SoftmaxConfig((12, 197, 197)), "fp32", 5 * 12 * 197 * 197, 4 * 2 * 12 * 197 * 197),
    (L.ElementwiseConfig("add", (1, 64, 56, 56), (1, 64, 1, 1)), "fp32", 64 * 56 * 56,
     4 * (64 * 56 * 56 + 64 + 64 * 56 * 56)),
    # Slice reads only what it keeps
    (L.CopyConfig("Slice", ((1, 232, 28, 28),), (1, 116, 28, 28),
                  (("axes", (1,)), ("ends", (1, 116, 28, 28)), ("starts", (0, 0, 0, 0)), ("steps", (1, 1, 1, 1)))),
     "fp32", 0, 4 * 2 * 116 * 28 * 28),
    (L.CopyConfig("Concat", ((1, 64, 28, 28), (1, 32, 28, 28)), (1, 96, 28, 28), (("axis", (1,)),)), "fp16", 0,
     2 * 2 * 96 * 28 * 28),
    # LSTM: X, weights 4h x (in + h), two biases 4h each, Y
    (L.RNNConfig("lstm", seq_len=35, input_size=1024, hidden_size=1024, batch=32), "fp16",
     2 * 35 * 32 * 4 * 1024 * 2048, 2 * (35 * 32 * 1024 + 4 * 1024 * 2048 + 2 * 4 * 1024 + 35 * 32 * 1024)),
    # LayerNorm: x, y in the precision, scale and bias float32
    (L.LayerNormConfig((1, 197, 768), 2, 1e-6), "fp16", 8 * 197 * 768, 2 * 2 * 197 * 768 + 4 * 2 * 768),
    # Gather of 1 row of 768 from a 1x197x768 tensor (vit's class token): indices are int64
    (L.GatherConfig((1, 197, 768), (), 1, (0,)), "fp32", 0, 4 * 2 * 768 + 8),
    (L.SdpaConfig(b=1, h=12, s_q=197, s_kv=197, d=64, d_v=64, scale=0.125), "fp16",
     2 * 12 * 197 * 197 * 128 + 7 * 12 * 197 * 197, 2 * 4 * 12 * 197 * 64),
]


@pytest.mark.parametrize("cfg,precision,flops,nbytes", CASES, ids=lambda v: getattr(v, "kind", None))
def test_flops_and_bytes_match_hand_counts(cfg, precision, flops, nbytes):
    assert cfg.flops() == flops
    assert R.min_bytes(cfg, precision) == nbytes


def test_bound_takes_the_higher_roof():
    gemm = L.GemmConfig(m=4096, n=4096, k=4096)  # intensity ~683 FLOP/B in fp16: compute-bound
    relu = L.ActivationConfig((32, 64, 112, 112), "relu")  # 0.125 FLOP/B: memory-bound
    h200 = R.Ceilings(flops_per_s=989e12, bytes_per_s=4.8e12)
    p = R.bound(gemm, "fp16", h200)
    assert p.limit == "compute" and p.bound_ms == pytest.approx(2 * 4096 ** 3 / 989e12 * 1e3)
    q = R.bound(relu, "fp16", h200)
    assert q.limit == "memory" and q.bound_ms == pytest.approx(2 * 2 * 32 * 64 * 112 * 112 / 4.8e12 * 1e3)
    assert q.intensity < h200.ridge < p.intensity
    with pytest.raises(UsageError):
        R.bound(relu, "fp16", R.Ceilings(0, 1))
    with pytest.raises(UsageError, match="unknown data type"):
        R.min_bytes(relu, "int4")


# ------------------------------------------------------------ FP32 measurements that cannot be FMA

FC = L.GemmConfig(m=32, n=1000, k=2048, trans_b=True, bias="c")  # resnet50's classifier at batch 32
CONV = L.ConvConfig((32, 64, 56, 56), (64, 64, 3, 3), (1, 1, 1, 1), (1, 1), (1, 1), 1, False)


def test_fp32_fma_bound_and_implausible_gemms():
    bound = R.fp32_fma_bound(132, 1980)  # H200: 132 SMs x 128 lanes x 2 x 1.98 GHz = 66.9 TFLOP/s
    assert bound == pytest.approx(66.9e12, rel=1e-3)
    fastest = FC.flops() / bound * 1e3  # ms at the bound
    assert R.implausible_fma(FC, fastest, 132, 1980) is None
    assert R.implausible_fma(FC, fastest * 1.04, 132, 1980) is None
    why = R.implausible_fma(FC, fastest / 2, 132, 1980)
    assert why and "exceeds the FP32 FMA bound 66.9 TFLOP/s" in why and "Tensor Core math (TF32)" in why
    # convolutions may beat the direct method's FMA rate (Winograd, FFT): never flagged
    assert R.implausible_fma(CONV, 1e-6, 132, 1980) is None
    # without a time or the system's figures nothing is said
    assert R.implausible_fma(FC, None, 132, 1980) is None and R.implausible_fma(FC, fastest / 2, None, 1980) is None


def test_runner_relabels_tensor_core_fp32_gemms():
    from benanza.kinds import Job
    from benanza.database.records import ChoiceLine, MeasurementLine
    from benanza.runner.run import _relabel_tensor_core_fp32

    fastest = FC.flops() / R.fp32_fma_bound(132, 1980) * 1e3
    line = dict(call="cublasGemmEx", algorithm="a", dtype="float32")
    recs = [MeasurementLine(status="ok", math="fma", median_ms=fastest / 4, note="", **line),
            MeasurementLine(status="ok", math="fma", median_ms=fastest * 2, **line),
            MeasurementLine(status="screened", math="fma", median_ms=fastest / 4, **line),
            ChoiceLine(source="h", rank=0, algorithm="a", math="fma", status="ok")]
    system = {"sm_count": 132, "max_sm_clock_mhz": 1980}
    out = _relabel_tensor_core_fp32(Job("j", FC, "fp32", "fc"), recs, system)
    assert out[0].math == "tf32" and "Tensor Core math" in out[0].note
    assert [r.math for r in out[1:]] == ["fma", "fma", "fma"] and out[1:] == recs[1:]
    tf = [MeasurementLine(status="ok", math="tf32", median_ms=fastest / 4, **line)]
    out = _relabel_tensor_core_fp32(Job("j", FC, "tf32", "fc"), tf, system)  # only fp32 jobs are checked
    assert out[0].math == "tf32" and out[0].note == ""
