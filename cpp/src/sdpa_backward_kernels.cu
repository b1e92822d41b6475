// benanza::sdpa_stats_kernel (transformer_backward.hpp): the softmax statistics a training forward of
// scaled-dot-product attention saves for its backward (the logsumexp of every row of the scaled,
// masked scores; FlashAttention-2, Dao 2023, Algorithm 1 line 13, "L_i = m_i + log(l_i)"), computed
// directly in the set-up of the SDPA backward's timing so the statistics the backward reads agree
// with Q and K. Not timed: one block per row, float32 math.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>

#include "benanza/transformer_backward.hpp"

namespace benanza {
namespace {

template <typename T>
__device__ __forceinline__ float ld(const T* p, long long i) { return static_cast<float>(p[i]); }

__device__ __forceinline__ float block_max(float a) {
  __shared__ float sm[32];
  for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) sm[warp] = a;
  __syncthreads();
  a = lane < warps ? sm[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  return a;
}

__device__ __forceinline__ float block_sum(float a) {
  __shared__ float ss[32];
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) ss[warp] = a;
  __syncthreads();
  a = lane < warps ? ss[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  return a;
}

struct StatsArgs {
  long long h, group, s_q, s_kv, d;  // group = h / h_kv
  long long qs[4], ks[4], bs[4];     // Q, K element strides; bias strides (0 on broadcast dims)
  float scale;
  int mask;                          // SdpaMask
};

// the score of row (bb, hh, i) with key j: scale * q_i . k_j (+ bias)
template <typename T>
__device__ float score(const StatsArgs& a, const T* q, const T* k, const T* bias, long long bb, long long hh,
                       long long i, long long j) {
  const long long hk = hh / a.group;
  const T* qi = q + bb * a.qs[0] + hh * a.qs[1] + i * a.qs[2];
  const T* kj = k + bb * a.ks[0] + hk * a.ks[1] + j * a.ks[2];
  float acc = 0.0f;
  for (long long c = 0; c < a.d; ++c) acc += ld(qi, c * a.qs[3]) * ld(kj, c * a.ks[3]);
  acc *= a.scale;
  if (a.mask == static_cast<int>(SdpaMask::BIAS))
    acc += ld(bias, bb * a.bs[0] + hh * a.bs[1] + i * a.bs[2] + j * a.bs[3]);
  return acc;
}

template <typename T>
__global__ void sdpa_stats_k(StatsArgs a, const T* q, const T* k, const T* bias, float* stats) {
  const long long row = blockIdx.x;  // (bb, hh, i) packed
  const long long i = row % a.s_q, hh = (row / a.s_q) % a.h, bb = row / (a.s_q * a.h);
  // causal: key j is visible to query i when j <= i (top-left) or j <= i + s_kv - s_q (bottom-right),
  // the forward's diagonal alignment; a bottom-right row with no visible key (s_q > s_kv) gets -inf
  const long long diag = a.mask == static_cast<int>(SdpaMask::CAUSAL) ? i
                         : a.mask == static_cast<int>(SdpaMask::CAUSAL_BOTTOM_RIGHT) ? i + a.s_kv - a.s_q : a.s_kv - 1;
  const long long last = diag < a.s_kv - 1 ? diag : a.s_kv - 1;
  float m = -INFINITY;
  for (long long j = threadIdx.x; j <= last; j += blockDim.x) m = fmaxf(m, score(a, q, k, bias, bb, hh, i, j));
  m = block_max(m);
  float l = 0.0f;
  for (long long j = threadIdx.x; j <= last; j += blockDim.x) l += __expf(score(a, q, k, bias, bb, hh, i, j) - m);
  l = block_sum(l);
  if (threadIdx.x == 0) stats[row] = m + logf(l);
}

template <typename T>
cudaError_t launch(const StatsArgs& a, long long rows, const void* q, const void* k, const void* bias, float* stats,
                   cudaStream_t s) {
  if (rows <= 0) return cudaSuccess;
  sdpa_stats_k<T><<<static_cast<unsigned>(rows), 128, 0, s>>>(a, static_cast<const T*>(q), static_cast<const T*>(k),
                                                                 static_cast<const T*>(bias), stats);
  return cudaGetLastError();
}

}  // namespace

cudaError_t sdpa_stats_kernel(const SdpaBwdSpec& c, const void* q, const void* k, const void* bias, float* stats,
                              DType t, cudaStream_t s) {
  const long long hk = c.h_kv > 0 ? c.h_kv : c.h;
  if (hk <= 0 || c.h % hk != 0 || (c.mask == SdpaMask::BIAS && bias == nullptr)) return cudaErrorInvalidValue;
  StatsArgs a{};
  a.h = c.h;
  a.group = c.h / hk;
  a.s_q = c.s_q;
  a.s_kv = c.s_kv;
  a.d = c.d;
  a.scale = c.scale;
  a.mask = static_cast<int>(c.mask);
  for (int i = 0; i < 4; ++i) {
    a.qs[i] = c.strides[i];
    a.ks[i] = c.strides[4 + i];
  }
  // the bias packed over its own dims, stride 0 where it broadcasts
  long long acc = 1;
  for (int i = 3; i >= 0; --i) {
    a.bs[i] = c.bias[i] == 1 ? 0 : acc;
    acc *= c.bias[i];
  }
  const long long rows = c.b * c.h * c.s_q;
  switch (t) {
    case DType::F32: return launch<float>(a, rows, q, k, bias, stats, s);
    case DType::F16: return launch<__half>(a, rows, q, k, bias, stats, s);
    case DType::BF16: return launch<__nv_bfloat16>(a, rows, q, k, bias, stats, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza
