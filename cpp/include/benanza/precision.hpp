// Generated from benanza/kinds/precision.py (python -m benanza.kinds.precision); do not edit.
#pragma once

namespace benanza {

enum class Precision { FP32, TF32, FP16, BF16, FP8 };
enum class DType { F32, F16, BF16, F8E4M3 };

inline DType storage_of(Precision p) {
  switch (p) {
    case Precision::FP32: return DType::F32;
    case Precision::TF32: return DType::F32;
    case Precision::FP16: return DType::F16;
    case Precision::BF16: return DType::BF16;
    case Precision::FP8: return DType::F8E4M3;
  }
  return DType::F32;
}

inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
    case Precision::FP8: return "fp8";
  }
  return "?";
}

}  // namespace benanza
