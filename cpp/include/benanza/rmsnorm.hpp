// RMSNorm (Zhang and Sennrich, NeurIPS 2019; ONNX RMSNormalization, opset 23), inference:
// y = x / sqrt(mean(x^2 over a row) + epsilon) * scale, x viewed as (rows, cols), scale (cols,) float32.
// Two implementations, each timed by the generated benchmarks (templates/rmsnorm.cpp.j2):
//   * rmsnorm_kernel (rmsnorm_kernels.cu): one block per row, float32 statistics, so the layer always
//     has a valid measurement;
//   * run_rmsnorm_engines (rmsnorm_engines.cpp): the cuDNN graph API's rmsnorm node (cudnn-frontend
//     Graph::rmsnorm, forward phase INFERENCE), every engine config of heuristics modes A, B and the
//     fallback list, timed by time_graph (graph_timing.hpp) as the layernorm graph is.
// This header has no cudnn-frontend types: the generated sources include it without the frontend.
#pragma once
#include <cuda_runtime.h>

#include "benanza/harness.hpp"
#include "benanza/transformer.hpp"

namespace benanza {

// One block per row of `cols` elements: r = rsqrt(sum(x^2) / cols + epsilon) in float32, y = x * r * scale;
// with `inv_variance` non-null (the training forward) r is also written there, (rows,) float32. residual
// (rows, cols), when not null, is added to x first (the sum rounded to the storage type, normalised, and
// written to sum_out when that is not null): the residual Add + RMSNorm of a decoder block as one kernel.
// Enqueued on `s`; returns cudaGetLastError() of the launch (cudaErrorInvalidConfiguration for rows > 2^31 - 1).
cudaError_t rmsnorm_kernel(const void* x, const float* scale, void* y, long long rows, long long cols, float epsilon,
                           DType t, cudaStream_t s, float* inv_variance = nullptr, const void* residual = nullptr,
                           void* sum_out = nullptr);

// The cuDNN graph rmsnorm: X (rows, cols) in the storage type, SCALE (cols,) float32, EPSILON a
// pass-by-value float32 scalar, Y like X; forward phase INFERENCE, or TRAINING with spec.stats, which
// also writes INV_VARIANCE (rows,) float32 to `inv_variance`. A graph cuDNN cannot run is recorded as
// not_supported with cuDNN's reason, never raised.
void run_rmsnorm_engines(Bench& b, const NormSpec& spec, void* x, void* scale, void* y, void* inv_variance = nullptr);

// ------------------------------------------------------------------ backward (a training step, docs/training.md)
// From the forward's saved r = inv_variance (rows,) float32, with g = scale * dy and xhat = x * r:
//   dx = r * (g - xhat * mean_cols(g * xhat))          (rmsnorm_backward_dx_kernel: one block per row)
//   dscale = sum_rows(dy * xhat)   (cols,) float32     (rmsnorm_backward_dscale_kernel: a column reduction)
// the gradients of y = x * r * scale (Zhang and Sennrich 2019, eq. 4 without the mean). Enqueued on
// `s`; each returns cudaGetLastError() of its launch (cudaErrorInvalidConfiguration past the grid's limits).
cudaError_t rmsnorm_backward_dx_kernel(const void* dy, const void* x, const float* scale, const float* inv_variance,
                                       void* dx, long long rows, long long cols, DType t, cudaStream_t s);
cudaError_t rmsnorm_backward_dscale_kernel(const void* dy, const void* x, const float* inv_variance, float* dscale,
                                           long long rows, long long cols, DType t, cudaStream_t s);

// The cuDNN graph rmsnorm_backward (cudnn-frontend Graph::rmsnorm_backward, has_dbias(false)): DY and X
// (rows, cols), SCALE (cols,) and the saved INV_VARIANCE (rows,) float32 in; DX (rows, cols) and DSCALE
// (cols,) float32 out, in one call (cuDNN has no node for one of them alone). Every engine config timed;
// one cuDNN cannot run is recorded as not_supported with its reason.
void run_rmsnorm_backward_engines(Bench& b, const NormSpec& spec, void* dy, void* x, void* scale, void* inv_variance,
                                  void* dx, void* dscale);

}  // namespace benanza
