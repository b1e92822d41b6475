"""Precisions: the one table of what a measurement's data type and math mode are.

A *precision* names the storage data type of a layer's tensors and the math the library may use.
Every stage reads this table (:data:`TABLE`, defined once in :data:`benanza.spec.PRECISION_TABLE`): the generator's C++ enum (``cpp/include/benanza/
precision.hpp`` is rendered from it, and a test checks the checked-in header matches), the analyzer's
accepted math modes, the roofline's bytes per element, the PyTorch candidates' dtypes.

- ``fp32``: float32 data, pure FMA math (no Tensor Cores).
- ``tf32``: float32 data, TF32 Tensor Core math allowed.
- ``fp16`` / ``bf16``: float16 / bfloat16 data, Tensor Core math, float32 accumulation.
- ``fp8``: FP8 (E4M3) GEMM inputs on Hopper Tensor Cores (cuBLASLt, float32 accumulation, float16
  output), the other layers in fp16 (``benanza.kinds.precisions_for``).

Math modes (cuDNN's ``cudnnMathType_t`` and cuBLAS's compute types, NVIDIA cuDNN API reference):
``fma``: CUDA-core FMA only; ``tf32``: TF32 Tensor Cores permitted; ``tensor_op``: FP16/BF16 Tensor
Cores; ``fp8`` / ``fp8_fast_accum``: FP8 Tensor Cores (cuBLASLt's fast accumulation, as
TransformerEngine's forward pass uses it); ``fp8_block128``: block-scaled FP8 (cuBLASLt's
``CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F`` / ``BLK128x128_32F`` FP32 scales per 1 x 128 or 128 x 128 block,
as DeepSeek-V3 and Qwen3-FP8 ship their weights); ``none``: the call has no math mode (pooling, copies...).
"""
from __future__ import annotations

from benanza.spec import PRECISION_TABLE as TABLE, Precision  # noqa: F401 (the one table: benanza.spec)

#: precision names, in table order
PRECISIONS = tuple(TABLE)

#: storage data type of each precision (fp8: the data type of the GEMM inputs)
PRECISION_DTYPE = {p.name: p.dtype for p in TABLE.values()}

#: layer kinds with an FP8 implementation (cuBLASLt's FP8 matmul; cuDNN's FP8 fused attention,
#: cudnn-frontend ``Graph::sdpa_fp8``, Hopper and later); every other kind serves an fp8 analysis
#: with its fp16 measurements
FP8_KINDS = ("Gemm", "SDPA")

#: bytes per output element of an FP8 kind's job: cuBLASLt's FP8 matmul writes D in fp16 (lt.cpp);
#: cuDNN's FP8 attention writes O in E4M3, as its inputs (cuDNN developer guide, "Scaled Dot Product
#: Attention", FP8 forward)
FP8_OUTPUT_BYTES = {"Gemm": 2, "SDPA": 1}

#: precision an fp8 analysis falls back to for layers without an FP8 implementation
FP8_FALLBACK = "fp16"

#: math modes a measurement may carry, per precision, that the analyzer accepts for a lower bound
ACCEPTED_MATH = {p.name: p.accepted_math for p in TABLE.values()}

#: storage data types whose measurements serve an analysis in each precision: its own, and for
#: fp8 also float16 (layers without an FP8 implementation, and GEMMs whose shape FP8 does not
#: support or that run faster in fp16)
ACCEPTED_DTYPES = {p: (d,) for p, d in PRECISION_DTYPE.items()}
ACCEPTED_DTYPES["fp8"] = (PRECISION_DTYPE["fp8"], PRECISION_DTYPE[FP8_FALLBACK])

#: layer kinds that are convolutions (cuDNN convolution calls, their backward calls included), which
#: PyTorch's fp32 default runs with TF32 (``torch.backends.cudnn.allow_tf32`` covers every cuDNN
#: convolution, forward and backward) while its matmuls run in FP32
CONV_KINDS = ("Conv", "ConvBiasAct", "ConvBnAct", "ConvBwdData", "ConvBwdFilter")

#: layer kinds whose math mode ``torch.backends.cudnn.allow_tf32`` sets in PyTorch: its cuDNN
#: convolutions and its cuDNN RNNs (ATen's cudnn/RNN.cpp picks TF32 math for float RNNs under that
#: flag; seen on an H200: PyTorch 2.11's fp32 LSTM runs ``sm90_xmma_gemm_f32f32_tf32f32`` kernels), the
#: training calls of those RNNs included (``RNNTrain``: forward with a reserve space, data and weight
#: gradients, all through the same RNN descriptor and so the same math type; ATen's
#: ``cudnn/Descriptors.h``, ``RNNDescriptor::set``: ``CUDNN_FMA_MATH`` only when TF32 is not allowed). An
#: ``fp32`` analysis with ``conv_precision`` ``tf32`` (``--conv-tf32``, PyTorch's fp32 default) runs these in tf32
CUDNN_TF32_KINDS = CONV_KINDS + ("RNN", "RNNTrain")

#: bytes per element of each storage data type
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3": 1}

#: bytes per element of a precision's storage data type
BYTES_PER_ELEMENT = {p.name: p.bytes for p in TABLE.values()}

#: C++ enumerator of each precision, as the generated suites spell it
PRECISION_ENUM = {p.name: f"Precision::{p.cpp}" for p in TABLE.values()}


def cpp_header() -> str:
    """The C++ header ``cpp/include/benanza/precision.hpp``: ``benanza::Precision``, the storage data
    type of each precision and its name, rendered from :data:`TABLE`."""
    dtypes = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float8_e4m3": "F8E4M3"}
    enum = ", ".join(p.cpp for p in TABLE.values())
    lines = ["// Generated from benanza/kinds/precision.py (python -m benanza.kinds.precision); do not edit.",
             "#pragma once", "", "namespace benanza {", "",
             f"enum class Precision {{ {enum} }};", "enum class DType { F32, F16, BF16, F8E4M3 };", "",
             "inline DType storage_of(Precision p) {", "  switch (p) {"]
    for p in TABLE.values():
        lines.append(f"    case Precision::{p.cpp}: return DType::{dtypes[p.dtype]};")
    lines += ["  }", "  return DType::F32;", "}", "", "inline const char* precision_name(Precision p) {",
              "  switch (p) {"]
    for p in TABLE.values():
        lines.append(f'    case Precision::{p.cpp}: return "{p.name}";')
    lines += ["  }", '  return "?";', "}", "", "}  // namespace benanza", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(cpp_header(), end="")
