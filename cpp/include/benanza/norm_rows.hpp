// Row-in-registers normalisation kernels (norm_rows_kernels.cu): LayerNorm and RMSNorm over the rows of
// x (rows, cols), optionally of x + residual (the residual add a transformer block runs before its norm,
// which fusing compilers such as TorchInductor compute in the norm's kernel). One block per row; each
// thread loads its part of the row with 16-byte vector loads and keeps it in registers, so x (and the
// residual) is read once and y (and the sum) written once; statistics in float32. The algorithm
// "row_in_registers" of benanza::layernorm_kernel / benanza::rmsnorm_kernel, beside their "block_per_row"
// kernels (transformer_kernels.cu, rmsnorm_kernels.cu), which read the row twice.
#pragma once

#include <cuda_runtime.h>

#include "benanza/precision.hpp"

namespace benanza {

enum class RowNorm { LayerNorm, RMSNorm };

// Whether norm_rows_kernel runs for rows of ``cols`` elements of type ``t``: t fp32, fp16 or bf16, cols
// a multiple of the 16-byte vector (8 elements of fp16/bf16, 4 of fp32) and at most 4096 vectors (32768
// fp16 elements).
bool norm_rows_applies(long long cols, DType t);

// y = norm(x [+ residual]) * scale (+ bias): LayerNorm (x - mean) * rstd, RMSNorm x * rstd with
// rstd = 1 / sqrt(mean(x^2) + epsilon). x, residual, sum_out, y: (rows, cols) of type t, 16-byte aligned;
// scale, bias: (cols,) float32 (bias LayerNorm only, may be null); residual may be null; sum_out (the sum
// x + residual rounded to t, as the unfused Add writes it) may be null; mean (LayerNorm) and rstd, (rows,)
// float32, may be null. Returns cudaErrorNotSupported where norm_rows_applies is false or a pointer is
// not 16-byte aligned.
cudaError_t norm_rows_kernel(RowNorm kind, const void* x, const void* residual, void* sum_out, const float* scale,
                             const float* bias, void* y, float* mean, float* rstd, long long rows, long long cols,
                             float epsilon, DType t, cudaStream_t s);

}  // namespace benanza
