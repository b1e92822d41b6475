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

// One block per row of `cols` elements: r = rsqrt(sum(x^2) / cols + epsilon) in float32, y = x * r * scale.
// Enqueued on `s`; returns cudaGetLastError() of the launch (cudaErrorInvalidConfiguration for rows > 2^31 - 1).
cudaError_t rmsnorm_kernel(const void* x, const float* scale, void* y, long long rows, long long cols, float epsilon,
                           DType t, cudaStream_t s);

// The cuDNN graph rmsnorm (INFERENCE; spec.stats must be false): X (rows, cols) in the storage type,
// SCALE (cols,) float32, EPSILON a pass-by-value float32 scalar, Y like X. A graph cuDNN cannot run is
// recorded as not_supported with cuDNN's reason, never raised.
void run_rmsnorm_engines(Bench& b, const NormSpec& spec, void* x, void* scale, void* y);

}  // namespace benanza
