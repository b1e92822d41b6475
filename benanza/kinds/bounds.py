"""What a layer config must do, whatever runs it: the fewest bytes it moves, its arithmetic
intensity, and the fastest rate FP32 FMA math can reach (the check that tells Tensor Core math
from FMA math). The runner, the analyses and the reports read these; they depend on the layer
kinds and the precision table only.

Minimum bytes: every input tensor read once and the output written once, in the storage data type
of the precision (:data:`BYTES_PER_ELEMENT`; fp8 GEMMs read 1-byte E4M3 inputs and write a 2-byte
output, their other layers run in fp16), with the exceptions that change what a layer must touch:
a Slice or Gather reads only the elements it outputs (plus 8-byte int64 indices), Where's condition
is 1 byte per element, LayerNorm's scale and bias are float32, unary and binary elementwise ops
on bool or integer data move their stored element size (:data:`benanza.kinds.STORED_TYPES`; a
bool output, of IsNaN or a comparison, is 1 byte; a Cast reads its source type), an LSTM/GRU reads its weight matrices
(gates x hidden x (input + hidden) per direction) once. Caches can only lower DRAM traffic below
this when data is reused across layers, which the per-layer model does not count. FLOPs are the
configs' own :meth:`benanza.kinds.LayerConfig.flops` (a multiply-add is 2 FLOPs).
"""
from __future__ import annotations

from benanza import kinds as L
from benanza.kinds.precision import Precision


def _elem(precision: str, config: L.LayerConfig) -> tuple[int, int]:
    """(input bytes, output bytes) per element for ``config`` measured in ``precision``."""
    b = Precision.of(precision).bytes  # raises UsageError for an unknown precision
    if precision == "fp8":
        return (1, L.FP8_OUTPUT_BYTES[config.kind]) if config.kind in L.FP8_KINDS else (2, 2)
    return b, b


def min_bytes(config: L.LayerConfig, precision: str = "fp32") -> int:
    """The fewest bytes ``config`` must move to and from memory in ``precision`` (each input read
    once, the output written once; see the module docstring): its kind's
    :attr:`benanza.kinds.base.Kind.min_bytes`. Raises UsageError for an unknown precision."""
    ib, ob = _elem(precision, config)
    return L.REGISTRY[config.kind].min_bytes(config, ib, ob)


def intensity(config: L.LayerConfig, precision: str = "fp32") -> float:
    """Arithmetic intensity, FLOPs per byte of :func:`min_bytes` (0 for a layer without FLOPs)."""
    b = min_bytes(config, precision)
    return config.flops() / b if b else 0.0


#: the most FP32 FMA units an NVIDIA SM has (Ampere GA10x, Ada, Hopper, Blackwell: 128; Volta, Turing
#: and GA100: 64; NVIDIA architecture whitepapers), so SMs x 128 x 2 x clock bounds any GPU's FP32 rate
MAX_FP32_LANES_PER_SM = 128
#: tolerance over that bound before a measurement is called impossible (clock reporting, timer noise)
FMA_PLAUSIBILITY_MARGIN = 1.05
#: layer kinds whose every algorithm performs all of its FLOPs (GEMMs: cuBLAS and cuDNN use no
#: Strassen-like reductions), unlike convolutions, where Winograd and FFT algorithms legitimately
#: beat the FMA rate computed from the direct method's FLOPs
GEMM_KINDS = ("Gemm", "GemmAct", "GemmActBackward")


def fp32_fma_bound(sm_count: int, max_sm_clock_mhz: float) -> float:
    """Upper bound (FLOP/s) of any NVIDIA GPU's CUDA-core FP32 rate: SMs x 128 lanes x 2 FLOPs per FMA
    x the maximum SM clock (MHz)."""
    return sm_count * MAX_FP32_LANES_PER_SM * 2 * max_sm_clock_mhz * 1e6


def implausible_fma(config: L.LayerConfig, median_ms: float | None, sm_count: int | None,
                    max_sm_clock_mhz: float | None) -> str | None:
    """Why a GEMM-kind measurement labelled FP32 FMA math cannot be FMA math (None when it can): its
    achieved rate, ``config.flops()`` / ``median_ms``, exceeds :func:`fp32_fma_bound` by more than
    :data:`FMA_PLAUSIBILITY_MARGIN`, so the library ran it on Tensor Cores (e.g. cuDNN's matmul graph
    dispatched to cuBLASLt, which allows TF32 for FLOAT compute unless told otherwise). Other kinds,
    missing system figures or times: None."""
    if config.kind not in GEMM_KINDS or not median_ms or median_ms <= 0 or not sm_count or not max_sm_clock_mhz:
        return None
    rate = config.flops() / (median_ms * 1e-3)
    bound = fp32_fma_bound(sm_count, max_sm_clock_mhz)
    if rate <= FMA_PLAUSIBILITY_MARGIN * bound:
        return None
    return (f"{rate / 1e12:.1f} TFLOP/s exceeds the FP32 FMA bound {bound / 1e12:.1f} TFLOP/s "
            f"({sm_count} SMs x {MAX_FP32_LANES_PER_SM} lanes x 2 x {max_sm_clock_mhz:g} MHz): Tensor Core math (TF32), "
            f"not FMA")
