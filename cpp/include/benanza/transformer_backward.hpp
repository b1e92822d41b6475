// The backward calls of the transformer layers in a training step (issue 26): LayerNorm's data,
// scale and bias gradients, and the data gradient of the unary elementwise ops (transformer.hpp's
// UnaryOp). Like transformer.hpp, no cudnn-frontend types: generated sources include it without
// the frontend.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "benanza/harness.hpp"
#include "benanza/transformer.hpp"

namespace benanza {

// ------------------------------------------------ kernels (unary_backward_kernels.cu)
// dx[i] = dy[i] * f'(.) for the unary op `op`, float32 math on F32/F16/BF16 storage (16-byte
// vectors where the pointers allow). `saved` is the tensor PyTorch's backward formula reads
// (tools/autograd/derivatives.yaml): y = f(x) for EXP, SQRT, RECIPROCAL and TAN, nothing for NEG
// (may be null), x for every other op. cudaErrorInvalidValue for an op without a derivative kernel
// (has_unary_backward) or another storage type.
cudaError_t unary_backward_kernel(UnaryOp op, const void* saved, const void* dy, void* dx, std::size_t n,
                                  const UnaryParams& p, DType t, cudaStream_t s);
// Whether unary_backward_kernel has the op's derivative.
bool has_unary_backward(UnaryOp op);

// ------------------------------------------------ kernels (layernorm_backward_kernels.cu)
// LayerNorm's backward over x viewed as (rows, cols) with the forward's saved float32 mean and
// rstd (rows,), scale (cols,) float32 (PyTorch's layer_norm_backward formulas, aten/src/ATen/native/
// cuda/layer_norm_kernel.cu):  xhat = (x - mean) * rstd, g = scale * dy,
//   dx = rstd * (g - mean_cols(g) - xhat * mean_cols(g * xhat))    (one block per row),
//   dscale = sum_rows(dy * xhat), dbias = sum_rows(dy)              (float32, (cols,); a column
// kernel with float atomics: dscale and dbias are zeroed in the call). dbias may be null.
cudaError_t layernorm_backward_kernel(const void* dy, const void* x, const float* scale, const float* mean,
                                      const float* rstd, void* dx, float* dscale, float* dbias, long long rows,
                                      long long cols, DType t, cudaStream_t s);

// ------------------------------------------------ cuDNN graph API (layernorm_backward_engines.cpp)
// cudnn-frontend Graph::layernorm_backward (DY, X, SCALE with the saved MEAN and INV_VARIANCE ->
// DX, DSCALE, DBIAS in one graph; cuDNN developer guide, "Layernorm Backward"), every engine config
// of heuristics modes A, B and the fallback list, timed as time_graph does (graph_timing.hpp).
// spec.stats and spec.epsilon are not read (the saved statistics carry them).
void run_layernorm_backward_engines(Bench& b, const NormSpec& spec, void* dy, void* x, void* scale, void* mean,
                                    void* inv_variance, void* dx, void* dscale, void* dbias);

}  // namespace benanza
