// benanza::norm_rows_kernel (norm_rows.hpp): LayerNorm and RMSNorm with the row held in registers,
// optionally after a residual add. Each thread loads K 16-byte vectors of the row (uint4: 8 fp16/bf16
// or 4 fp32 elements), so the row is read from memory once; the sums are block-wide (warp shuffles,
// kernel_util.cuh). LayerNorm's variance is the two-pass sum of squared deviations over the registers
// (no cancellation of E[x^2] - E[x]^2). Math in float32, rounding to nearest even on the way back.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "benanza/kernel_util.cuh"
#include "benanza/norm_rows.hpp"

namespace benanza {

namespace {

constexpr int kMaxThreads = 1024;

template <typename T>
struct Pack {
  static constexpr int n = 16 / sizeof(T);
  union {
    uint4 raw;
    T e[16 / sizeof(T)];
  };
};

template <typename T, int K, bool kLayer>
__global__ void __launch_bounds__(kMaxThreads)
    norm_rows_k(const T* __restrict__ x, const T* __restrict__ res, T* __restrict__ sum_out,
                const float* __restrict__ scale, const float* __restrict__ bias, T* __restrict__ y,
                float* __restrict__ mean, float* __restrict__ rstd, long long cols, float eps) {
  constexpr int V = Pack<T>::n;
  const long long nvec = cols / V;
  const long long base = static_cast<long long>(blockIdx.x) * cols;
  float v[K][V];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const long long j = threadIdx.x + static_cast<long long>(k) * blockDim.x;
    if (j < nvec) {
      Pack<T> a;
      a.raw = reinterpret_cast<const uint4*>(x + base)[j];
      if (res) {
        Pack<T> b, sum;
        b.raw = reinterpret_cast<const uint4*>(res + base)[j];
#pragma unroll
        for (int i = 0; i < V; ++i) {
          sum.e[i] = from_f<T>(to_f<T>(a.e[i]) + to_f<T>(b.e[i]));  // the sum as the unfused Add stores it
          v[k][i] = to_f<T>(sum.e[i]);
        }
        if (sum_out) reinterpret_cast<uint4*>(sum_out + base)[j] = sum.raw;
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) v[k][i] = to_f<T>(a.e[i]);
      }
#pragma unroll
      for (int i = 0; i < V; ++i) s += kLayer ? v[k][i] : v[k][i] * v[k][i];
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) v[k][i] = 0.0f;
    }
  }
  const float inv_n = 1.0f / static_cast<float>(cols);
  float mu = 0.0f, r;
  if (kLayer) {
    mu = block_sum(s) * inv_n;
    float d2 = 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const long long j = threadIdx.x + static_cast<long long>(k) * blockDim.x;
      if (j < nvec) {
#pragma unroll
        for (int i = 0; i < V; ++i) d2 += (v[k][i] - mu) * (v[k][i] - mu);
      }
    }
    __syncthreads();  // block_sum's shared partials are reused
    r = rsqrtf(block_sum(d2) * inv_n + eps);
  } else {
    r = rsqrtf(block_sum(s) * inv_n + eps);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const long long j = threadIdx.x + static_cast<long long>(k) * blockDim.x;
    if (j < nvec) {
      Pack<T> o;
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const long long c = j * V + i;
        o.e[i] = from_f<T>((v[k][i] - mu) * r * scale[c] + (bias ? bias[c] : 0.0f));
      }
      reinterpret_cast<uint4*>(y + base)[j] = o.raw;
    }
  }
  if (threadIdx.x == 0) {
    if (mean) mean[blockIdx.x] = mu;
    if (rstd) rstd[blockIdx.x] = r;
  }
}

int vectors_per_thread(long long nvec) {
  for (int k = 1; k <= 4; k *= 2)
    if (nvec <= static_cast<long long>(k) * kMaxThreads) return k;
  return 0;
}

bool aligned(const void* p) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <typename T, bool kLayer>
cudaError_t launch(const void* x, const void* res, void* sum_out, const float* scale, const float* bias, void* y,
                   float* mean, float* rstd, long long rows, long long cols, float eps, cudaStream_t s) {
  constexpr int V = Pack<T>::n;
  const long long nvec = cols / V;
  const int k = vectors_per_thread(nvec);
  const int threads = static_cast<int>(((nvec + k - 1) / k + 31) / 32 * 32);
  const unsigned g = static_cast<unsigned>(rows);
  const T* xt = static_cast<const T*>(x);
  const T* rt = static_cast<const T*>(res);
  T* st = static_cast<T*>(sum_out);
  T* yt = static_cast<T*>(y);
  switch (k) {
    case 1: norm_rows_k<T, 1, kLayer><<<g, threads, 0, s>>>(xt, rt, st, scale, bias, yt, mean, rstd, cols, eps); break;
    case 2: norm_rows_k<T, 2, kLayer><<<g, threads, 0, s>>>(xt, rt, st, scale, bias, yt, mean, rstd, cols, eps); break;
    default: norm_rows_k<T, 4, kLayer><<<g, threads, 0, s>>>(xt, rt, st, scale, bias, yt, mean, rstd, cols, eps);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_kind(RowNorm kind, const void* x, const void* res, void* sum_out, const float* scale,
                        const float* bias, void* y, float* mean, float* rstd, long long rows, long long cols,
                        float eps, cudaStream_t s) {
  if (kind == RowNorm::LayerNorm)
    return launch<T, true>(x, res, sum_out, scale, bias, y, mean, rstd, rows, cols, eps, s);
  return launch<T, false>(x, res, sum_out, scale, nullptr, y, nullptr, rstd, rows, cols, eps, s);
}

}  // namespace

bool norm_rows_applies(long long cols, DType t) {
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return false;
  const int v = t == DType::F32 ? 4 : 8;
  return cols > 0 && cols % v == 0 && vectors_per_thread(cols / v) > 0;
}

cudaError_t norm_rows_kernel(RowNorm kind, const void* x, const void* residual, void* sum_out, const float* scale,
                             const float* bias, void* y, float* mean, float* rstd, long long rows, long long cols,
                             float epsilon, DType t, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  if (!norm_rows_applies(cols, t) || !aligned(x) || !aligned(residual) || !aligned(sum_out) || !aligned(y))
    return cudaErrorNotSupported;
  if (t == DType::F16)
    return launch_kind<__half>(kind, x, residual, sum_out, scale, bias, y, mean, rstd, rows, cols, epsilon, s);
  if (t == DType::BF16)
    return launch_kind<__nv_bfloat16>(kind, x, residual, sum_out, scale, bias, y, mean, rstd, rows, cols, epsilon, s);
  return launch_kind<float>(kind, x, residual, sum_out, scale, bias, y, mean, rstd, rows, cols, epsilon, s);
}

}  // namespace benanza
