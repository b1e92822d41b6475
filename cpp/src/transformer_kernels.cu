// benanza CUDA kernels for the transformer layers (transformer.hpp): LayerNorm, Gather, Where, and
// typed random fills (the unary elementwise ops are in unary_kernels.cu). Simple and memory-bound on purpose: they give every layer a
// valid measurement where cuDNN has no call; the lower bound takes the faster of them and the cuDNN
// engine configs. Math is float32 whatever the storage type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "benanza/kernel_util.cuh"

#include <cstdint>

#include "benanza/transformer.hpp"

namespace benanza {

namespace {



template <typename T>
__global__ void layernorm_k(const T* x, const T* res, T* sum_out, const float* scale, const float* bias, T* y,
                            float* mean, float* rstd, long long cols, float eps) {
  const long long row = blockIdx.x;
  const T* xr = x + row * cols;
  const T* rr = res ? res + row * cols : nullptr;
  T* sr = sum_out ? sum_out + row * cols : nullptr;
  T* yr = y + row * cols;
  // the element normalised: x, or x + residual rounded to T (as the unfused Add stores it)
  auto in = [&](long long c) {
    return rr ? to_f<T>(from_f<T>(to_f<T>(xr[c]) + to_f<T>(rr[c]))) : to_f<T>(xr[c]);
  };
  float s = 0.0f, ss = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = in(c);
    if (sr) sr[c] = from_f<T>(v);
    s += v;
    ss += v * v;
  }
  const float2 t = block_sum2(s, ss);
  const float mu = t.x / static_cast<float>(cols);
  const float var = fmaxf(t.y / static_cast<float>(cols) - mu * mu, 0.0f);
  const float r = rsqrtf(var + eps);
  for (long long c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = from_f<T>((in(c) - mu) * r * scale[c] + (bias ? bias[c] : 0.0f));
  if (threadIdx.x == 0) {
    if (mean) mean[row] = mu;
    if (rstd) rstd[row] = r;
  }
}

template <typename T>
__global__ void gather_k(const T* data, const long long* idx, T* y, long long axis_dim, long long n, long long inner,
                         unsigned long long total) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long t = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; t < total;
       t += stride) {
    const long long i = static_cast<long long>(t % inner);
    const long long rest = static_cast<long long>(t / inner);
    const long long j = rest % n, o = rest / n;
    long long k = idx[j];
    if (k < 0) k += axis_dim;
    y[t] = data[(o * axis_dim + k) * inner + i];
  }
}

template <typename T>
__global__ void where_k(const unsigned char* cond, const T* a, const T* b, T* y, WhereShape w,
                        unsigned long long total) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long t = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; t < total;
       t += stride) {
    unsigned long long rest = t;
    long long oc = 0, oa = 0, ob = 0;
    for (int d = w.nd - 1; d >= 0; --d) {
      const long long i = static_cast<long long>(rest % w.dims[d]);
      rest /= w.dims[d];
      oc += i * w.cond[d];
      oa += i * w.a[d];
      ob += i * w.b[d];
    }
    y[t] = cond[oc] ? a[oa] : b[ob];
  }
}

// splitmix64 finaliser, as the harness's fill (kernels.cu)
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T, bool kInt>
__global__ void fill_k(T* p, unsigned long long n, unsigned long long seed, double lo, double hi) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const double u = static_cast<double>(mix(seed ^ (i * 0xd1b54a32d192ed03ULL)) >> 11) * (1.0 / 9007199254740992.0);
    const double v = lo + (hi - lo) * u;
    if (kInt) {
      double f = floor(v);
      if (f >= floor(hi)) f = floor(hi) - 1;  // [floor(lo), floor(hi))
      p[i] = static_cast<T>(f);
    } else {
      p[i] = static_cast<T>(v);
    }
  }
}

template <typename T>
cudaError_t launch_where(const unsigned char* cond, const void* a, const void* b, void* y, const WhereShape& w,
                         unsigned long long total, cudaStream_t s) {
  where_k<T><<<grid_for(total), kThreads, 0, s>>>(cond, static_cast<const T*>(a), static_cast<const T*>(b),
                                                  static_cast<T*>(y), w, total);
  return cudaGetLastError();
}

}  // namespace

cudaError_t layernorm_kernel(const void* x, const float* scale, const float* bias, void* y, float* mean, float* rstd,
                             long long rows, long long cols, float epsilon, DType t, cudaStream_t s,
                             const void* residual, void* sum_out) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  const unsigned g = static_cast<unsigned>(rows);
  const int threads = cols >= 1024 ? 512 : cols >= 256 ? 256 : 128;
  if (t == DType::F16)
    layernorm_k<__half><<<g, threads, 0, s>>>(static_cast<const __half*>(x), static_cast<const __half*>(residual),
                                              static_cast<__half*>(sum_out), scale, bias, static_cast<__half*>(y),
                                              mean, rstd, cols, epsilon);
  else if (t == DType::BF16)
    layernorm_k<__nv_bfloat16><<<g, threads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(residual),
        static_cast<__nv_bfloat16*>(sum_out), scale, bias, static_cast<__nv_bfloat16*>(y), mean, rstd, cols, epsilon);
  else
    layernorm_k<float><<<g, threads, 0, s>>>(static_cast<const float*>(x), static_cast<const float*>(residual),
                                             static_cast<float*>(sum_out), scale, bias, static_cast<float*>(y), mean,
                                             rstd, cols, epsilon);
  return cudaGetLastError();
}

cudaError_t gather_kernel(const void* data, const long long* idx, void* y, long long outer, long long axis_dim,
                          long long n, long long inner, DType t, cudaStream_t s) {
  const unsigned long long total = static_cast<unsigned long long>(outer) * n * inner;
  if (total == 0) return cudaSuccess;
  if (t == DType::F32)
    gather_k<float><<<grid_for(total), kThreads, 0, s>>>(static_cast<const float*>(data), idx, static_cast<float*>(y),
                                                         axis_dim, n, inner, total);
  else  // 2-byte types move as 16-bit words: a gather does no arithmetic
    gather_k<unsigned short><<<grid_for(total), kThreads, 0, s>>>(static_cast<const unsigned short*>(data), idx,
                                                                  static_cast<unsigned short*>(y), axis_dim, n, inner,
                                                                  total);
  return cudaGetLastError();
}

cudaError_t where_kernel(const unsigned char* cond, const void* a, const void* b, void* y, const WhereShape& w,
                         DType t, cudaStream_t s) {
  unsigned long long total = 1;
  for (int d = 0; d < w.nd; ++d) total *= static_cast<unsigned long long>(w.dims[d]);
  if (total == 0) return cudaSuccess;
  return t == DType::F32 ? launch_where<float>(cond, a, b, y, w, total, s)
                         : launch_where<unsigned short>(cond, a, b, y, w, total, s);
}

void fill_elements(void* p, std::size_t n, ElemType t, double lo, double hi, unsigned long long seed, cudaStream_t s) {
  if (n == 0) return;
  const unsigned g = grid_for(n);
  switch (t) {
    case ElemType::F32: fill_uniform(p, n, DType::F32, seed, static_cast<float>(lo), static_cast<float>(hi), s); break;
    case ElemType::F16: fill_uniform(p, n, DType::F16, seed, static_cast<float>(lo), static_cast<float>(hi), s); break;
    case ElemType::BF16:
      fill_uniform(p, n, DType::BF16, seed, static_cast<float>(lo), static_cast<float>(hi), s);
      break;
    case ElemType::F64: fill_k<double, false><<<g, kThreads, 0, s>>>(static_cast<double*>(p), n, seed, lo, hi); break;
    case ElemType::I64:
      fill_k<long long, true><<<g, kThreads, 0, s>>>(static_cast<long long*>(p), n, seed, lo, hi);
      break;
    case ElemType::I32: fill_k<int, true><<<g, kThreads, 0, s>>>(static_cast<int*>(p), n, seed, lo, hi); break;
    case ElemType::I8:
      fill_k<signed char, true><<<g, kThreads, 0, s>>>(static_cast<signed char*>(p), n, seed, lo, hi);
      break;
    case ElemType::U8:
      fill_k<unsigned char, true><<<g, kThreads, 0, s>>>(static_cast<unsigned char*>(p), n, seed, lo, hi);
      break;
    case ElemType::I16: fill_k<short, true><<<g, kThreads, 0, s>>>(static_cast<short*>(p), n, seed, lo, hi); break;
    case ElemType::U16:
      fill_k<unsigned short, true><<<g, kThreads, 0, s>>>(static_cast<unsigned short*>(p), n, seed, lo, hi);
      break;
    case ElemType::U32: fill_k<unsigned, true><<<g, kThreads, 0, s>>>(static_cast<unsigned*>(p), n, seed, lo, hi); break;
    case ElemType::U64:
      fill_k<unsigned long long, true><<<g, kThreads, 0, s>>>(static_cast<unsigned long long*>(p), n, seed, lo, hi);
      break;
  }
}

}  // namespace benanza
