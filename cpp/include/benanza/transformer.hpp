// The transformer layers of benanza (docs/layers.md): LayerNorm, unary elementwise ops (Gelu, Erf, Pow,
// Sqrt, Cast...), Gather, Where and fused scaled-dot-product attention.
//
// Two kinds of implementations, each timed by the generated benchmarks:
//   * benanza CUDA kernels (transformer_kernels.cu): simple, correct, memory-bound kernels so every
//     layer has a valid measurement even where cuDNN has no call for it;
//   * the cuDNN graph API through cudnn-frontend (transformer_engines.cpp): layernorm, pointwise and
//     sdpa operation graphs, every engine config of heuristics modes A, B and the fallback list,
//     timed like the convolution engine configs (engines.cpp).
// This header has no cudnn-frontend types: the generated sources include it without the frontend.
#pragma once
#include <initializer_list>

#include <cuda_runtime.h>

#include <cstddef>

#include "benanza/harness.hpp"

namespace benanza {

// Unary elementwise ops (layers.UNARY_OPS); the generator writes these names. The first eleven keep
// their values; the rest are ONNX's other unary elementwise operators (ONNX operator spec).
enum class UnaryOp : int {
  GELU, GELU_TANH, ERF, EXP, LOG, SQRT, RECIPROCAL, NEG, ABS, POW, CAST,
  ACOS, ACOSH, ASIN, ASINH, ATAN, ATANH, CEIL, COS, COSH, FLOOR, HARD_SWISH, IS_INF, IS_NAN, MISH, NOT, ROUND, SELU,
  SIGN, SIN, SINH, SOFTPLUS, SOFTSIGN, TAN, THRESHOLDED_RELU, CELU, SHRINK, BITWISE_NOT, CLIP, SWISH, CAST_BOOL
};
const char* unary_name(UnaryOp op);

// The constants of a unary op: Pow's exponent; alpha and beta: Selu alpha and gamma, Celu alpha,
// ThresholdedRelu alpha, Shrink lambd and bias, IsInf detect_negative and detect_positive (0 or 1),
// Clip min and max, Swish alpha.
struct UnaryParams {
  float exponent = 0.0f, alpha = 0.0f, beta = 0.0f;
};


// ------------------------------------------------------------------ kernels (transformer_kernels.cu)
// Every launcher enqueues on `s` and returns cudaGetLastError() of the launch.

// y[i] = f(x[i]) (unary_kernels.cu), 16-byte vectors where the pointers allow; x has element type
// `xt`, y has `yt`: float ops read and write the storage type (F32/F16/BF16) with float32 math;
// IsNaN/IsInf read it and write bool (I8, 0 or 1); Cast reads any type and writes any type (float
// to integer: toward zero), CAST_BOOL any type to bool (nonzero is true); Not (bool), BitwiseNot,
// Abs, Neg and Sign on integers read and write that type (integer math).
// cudaErrorInvalidValue for other type pairs.
cudaError_t unary_kernel(UnaryOp op, const void* x, ElemType xt, void* y, ElemType yt, std::size_t n,
                         const UnaryParams& p, cudaStream_t s);

// LayerNorm over rows of `cols` elements: one block per row, float32 mean and variance, scale and
// bias float32 (cols,); mean / rstd (rows,) float32 written when not null. residual (rows, cols), when
// not null, is added to x first (the sum rounded to the storage type, normalised, and written to
// sum_out when that is not null): the residual Add + LayerNorm of a transformer block as one kernel.
cudaError_t layernorm_kernel(const void* x, const float* scale, const float* bias, void* y, float* mean, float* rstd,
                             long long rows, long long cols, float epsilon, DType t, cudaStream_t s,
                             const void* residual = nullptr, void* sum_out = nullptr);

// y[o][j][i] = data[o][idx[j]][i] for data (outer, axis_dim, inner), idx (n,) int64 in [0, axis_dim).
cudaError_t gather_kernel(const void* data, const long long* idx, void* y, long long outer, long long axis_dim,
                          long long n, long long inner, DType t, cudaStream_t s);

// y = cond ? a : b over `dims`; strides in elements, 0 on broadcast dims; cond is 1 byte per element.
struct WhereShape {
  int nd;
  long long dims[8];
  long long cond[8], a[8], b[8];
};
cudaError_t where_kernel(const unsigned char* cond, const void* a, const void* b, void* y, const WhereShape& w,
                         DType t, cudaStream_t s);

// Fill `n` elements of type `t`: floats uniform in [lo, hi), integers uniform in [floor(lo), floor(hi)).
void fill_elements(void* p, std::size_t n, ElemType t, double lo, double hi, unsigned long long seed, cudaStream_t s);

// ------------------------------------------------- cuDNN graph API (transformer_engines.cpp)
// Each records the top picks of heuristics modes A and B as choices, then times every engine config
// of A, B and the fallback list (deduplicated by plan name); a graph cuDNN cannot run is recorded as
// not_supported with cuDNN's reason, never raised.

struct NormSpec {
  Precision precision;
  long long rows, cols;  // x viewed as (rows, cols); scale and bias (cols,) float32
  float epsilon;
  bool stats;            // TRAINING phase: also writes mean and inverse variance (rows,) float32
  const char* note;      // how the graph differs from the layer, if at all ("" when not)
};
void run_layernorm_engines(Bench& b, const NormSpec& spec, void* x, void* scale, void* bias, void* y, void* mean,
                           void* inv_variance);

struct PointwiseSpec {
  Precision precision;
  UnaryOp op;
  long long rows, cols;  // the packed tensor viewed as (rows, cols)
  float exponent;        // POW
  ElemType x_type, y_type;  // the storage type, or bool (I8) for NOT
  float alpha;           // SWISH: its alpha (cuDNN's swish beta)
};
// One-node pointwise graph of the op's mode (GELU_FWD, ERF, ..., CEIL, COS, FLOOR, SIN, TAN,
// SOFTPLUS_FWD, SWISH_FWD, LOGICAL_NOT); ops without a cuDNN pointwise mode (CAST, ACOS, ...) record nothing.
// Bool tensors are given to cuDNN as INT8 (ONNX's 1-byte bool; cuDNN documents its BOOLEAN type as
// bit-packed, 8 elements per byte, a different memory layout); cuDNN may refuse that (recorded).
void run_pointwise_engines(Bench& b, const PointwiseSpec& spec, void* x, void* y);
// Whether run_pointwise_engines has a graph for `op` (and so records something).
bool has_pointwise_mode(UnaryOp op);

// A binary elementwise op as a one-node cuDNN pointwise graph (SUB, DIV, POW, MOD (fmod), CMP_EQ,
// CMP_LT, CMP_LE, CMP_GT, CMP_GE, LOGICAL_AND, LOGICAL_OR): a and b with dims 1 where they broadcast
// (cuDNN's broadcasting), y packed with the broadcast dims.
struct BinaryGraphSpec {
  Precision precision;
  PointwiseOp op;
  int nd;                   // <= 8
  long long a[8], b[8];     // operand dims (each 1 or y's)
  ElemType in, out;         // storage type or bool (I8) inputs; output: `in`, or bool for comparisons
};
// Ops without a cuDNN pointwise mode (Mod on integers, PRelu, Xor, bitwise ops...) record nothing.
void run_binary_pointwise_engines(Bench& b, const BinaryGraphSpec& spec, void* a, void* bb, void* y);
bool has_binary_pointwise_mode(PointwiseOp op);

// CAUSAL: key j visible to query i when j <= i (top-left); CAUSAL_BOTTOM_RIGHT: j <= i + s_kv - s_q
enum class SdpaMask : int { NONE = 0, CAUSAL = 1, BIAS = 2, CAUSAL_BOTTOM_RIGHT = 3 };
struct SdpaSpec {
  Precision precision;
  long long b, h, s_q, s_kv, d, d_v;  // Q (b,h,s_q,d), K (b,h,s_kv,d), V (b,h,s_kv,d_v), O (b,h,s_q,d_v)
  float scale;
  SdpaMask mask;
  long long bias[4];                  // BIAS: its dims, each 1 or the full size of (b, h, s_q, s_kv)
  long long strides[16];              // Q, K, V, O element strides over (b, h, s, d)
  long long h_kv = 0;                 // K and V heads (GQA, h a multiple of it); 0: h
  bool stats = false;                 // training forward: also writes the softmax stats (b, h, s_q, 1) float32
  // decode (s_kv > s_q): the same attention also timed over a paged KV cache of kv_page tokens a page
  // (paged_kv.hpp), recorded in layout "PAGED_KV" (a what-if, never the layer's minimum); 0: none.
  // paged_skip: why that family is not timed for this config ("" or null: it is), recorded as skipped
  long long kv_page = 0;
  const char* paged_skip = nullptr;
  // a sliding window (CAUSAL or CAUSAL_BOTTOM_RIGHT only): each query sees its last `window` keys
  // after the alignment, its own diagonal included (cuDNN's left bound); 0: none
  long long window = 0;
  // an attention sink: one logit per head (float32 [1, h, 1, 1]) joins each row's softmax
  // normaliser and is dropped after it (GPT-OSS; cuDNN 9.13+)
  bool sink = false;
  // logit soft-capping (Gemma-2): the scaled scores s become softcap * tanh(s / softcap) before the mask
  // (cudnn-frontend attn::score_modifiers::Softcap as the score modifier); 0: none
  float softcap = 0.0f;
};
// Elements a strided tensor of `dims` (4) spans: 1 + sum((dim - 1) * stride); 0 when empty.
inline long long strided_extent(std::initializer_list<long long> dims, const long long* strides) {
  long long e = 1;
  int i = 0;
  for (long long d : dims) {
    if (d <= 0) return 0;
    e += (d - 1) * strides[i++];
  }
  return e;
}
// `bias` must hold b*h*s_q*s_kv elements (a bias broadcast over s_q that cuDNN refuses is retried
// expanded to s_q rows, with a note). With spec.stats, `stats` receives the softmax statistics
// (cudnn-frontend set_generate_stats(true): the training forward whose stats the backward reads).
// With spec.sink, `sink` holds the h float32 sink logits.
void run_sdpa_engines(Bench& b, const SdpaSpec& spec, void* q, void* k, void* v, void* o, void* bias,
                      void* stats = nullptr, void* sink = nullptr);

}  // namespace benanza
