// The backward calls of the transformer layers in a training step (docs/training.md): LayerNorm's data,
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
// The gradients of SwiGLU's gate y = silu(a) * b (PointwiseOp::SwiGlu) in one pass over n packed
// elements: da = dy * b * sigmoid(a) * (1 + a * (1 - sigmoid(a))) (silu_backward of dy * b),
// db = dy * silu(a) (mul's derivative, derivatives.yaml), float32 math on F32/F16/BF16 storage (16-byte
// vectors where the pointers allow). Reads a, b, dy; writes da, db. cudaErrorInvalidValue for another
// storage type.
cudaError_t swiglu_backward_kernel(const void* a, const void* b, const void* dy, void* da, void* db, std::size_t n,
                                   DType t, cudaStream_t s);

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

// ------------------------------------------------ SDPA backward (sdpa_backward_kernels.cu, sdpa_backward_engines.cpp)
// The backward of fused scaled-dot-product attention (transformer.hpp's SdpaSpec): Q (b,h,s_q,d),
// K (b,h_kv,s_kv,d), V (b,h_kv,s_kv,d_v), O and dO (b,h,s_q,d_v) with Q, K, V, O's element strides
// (dQ, dK, dV and dO have the strides of Q, K, V and O), the forward's softmax statistics Stats
// (b,h,s_q,1) float32 packed -> dQ, dK, dV. GQA: h a multiple of h_kv (query head i reads K/V head
// i / (h / h_kv)); dK and dV sum the gradients of the query heads that share a K/V head.
struct SdpaBwdSpec {
  Precision precision;
  long long b, h, h_kv, s_q, s_kv, d, d_v;
  float scale;
  SdpaMask mask;          // NONE, CAUSAL (top-left aligned, as the forward), BIAS (additive, no dBias)
  long long bias[4];      // BIAS: its dims, each 1 or the full size of (b, h, s_q, s_kv)
  long long strides[16];  // Q, K, V, O element strides over (b, h, s, d)
};

// The training forward's softmax statistics without the fused forward: stats[b][h][i] =
// logsumexp_j(scale * q_i . k_j (+ bias[i][j]); j > i masked for CAUSAL), float32, one block per row
// (the set-up of the backward's timing: the saved statistics agree with Q and K as in a real step).
// bias: BIAS only, packed over its dims (1 on broadcast dims). cudaErrorInvalidValue for another storage type.
cudaError_t sdpa_stats_kernel(const SdpaBwdSpec& spec, const void* q, const void* k, const void* bias, float* stats,
                              DType t, cudaStream_t s);

// cudnn-frontend Graph::sdpa_backward (Q, K, V, O, dO, Stats -> dQ, dK, dV; cuDNN developer guide,
// "Scaled Dot Product Attention Backward"), every engine config of heuristics modes A, B and the
// fallback list, timed as time_graph does (graph_timing.hpp). cuDNN's engines take FP16/BF16 data:
// fp32/tf32 record what cuDNN answers. `bias` must hold b*h*s_q*s_kv elements (a broadcast over
// s_q that cuDNN refuses is retried expanded to s_q rows, with a note, as the forward does).
void run_sdpa_backward_engines(Bench& b, const SdpaBwdSpec& spec, void* q, void* k, void* v, void* o, void* dO,
                               void* stats, void* bias, void* dq, void* dk, void* dv);

}  // namespace benanza
