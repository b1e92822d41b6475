// benanza CUDA kernels for the training step's gradients (grad_kernels.hpp): the Gather backward
// (zero fill + scatter-add) and the cross-entropy loss with its gradient. Simple and memory-bound
// on purpose: they give these calls a valid measurement where cuDNN and cuBLAS have none; the
// lower bound takes the fastest of them and the other timed calls.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "benanza/kernel_util.cuh"

#include "benanza/grad_kernels.hpp"

namespace benanza {

namespace {


unsigned rows_grid(long long rows) {
  return static_cast<unsigned>(rows < (1LL << 20) ? (rows > 0 ? rows : 1) : (1LL << 20));
}

template <typename T, bool kAccumulate>
__global__ void gather_backward_k(const T* dy, const long long* idx, T* dx, long long axis_dim, long long n,
                                  long long inner, unsigned long long total) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long t = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; t < total;
       t += stride) {
    const long long i = static_cast<long long>(t % inner);
    const long long rest = static_cast<long long>(t / inner);
    const long long j = rest % n, o = rest / n;
    long long k = idx[j];
    if (k < 0) k += axis_dim;
    T* p = dx + (o * axis_dim + k) * inner + i;
    if constexpr (kAccumulate)
      atomicAdd(p, dy[t]);
    else
      *p = dy[t];
  }
}

template <typename T>
cudaError_t launch_gather_backward(const void* dy, const long long* idx, void* dx, long long axis_dim, long long n,
                                   long long inner, unsigned long long total, bool accumulate, cudaStream_t s) {
  if (accumulate)
    gather_backward_k<T, true><<<grid_for(total), kThreads, 0, s>>>(static_cast<const T*>(dy), idx,
                                                                     static_cast<T*>(dx), axis_dim, n, inner, total);
  else
    gather_backward_k<T, false><<<grid_for(total), kThreads, 0, s>>>(static_cast<const T*>(dy), idx,
                                                                      static_cast<T*>(dx), axis_dim, n, inner, total);
  return cudaGetLastError();
}

// block-wide reduction of one float (max or sum), every thread gets the result
template <bool kMax>
__device__ float block_reduce(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, w) : v + w;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // shared may still be read by a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) >> 5;
  float r = kMax ? -INFINITY : 0.0f;
  for (int w = 0; w < warps; ++w) r = kMax ? fmaxf(r, shared[w]) : r + shared[w];
  return r;
}

template <typename T>
__global__ void cross_entropy_k(const T* x, const long long* labels, float* loss, T* dx, long long rows,
                                long long classes) {
  __shared__ float shared[32];
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * classes;
    T* dr = dx + r * classes;
    float m = -INFINITY;
    for (long long c = threadIdx.x; c < classes; c += blockDim.x) m = fmaxf(m, to_f(xr[c]));
    m = block_reduce<true>(m, shared);
    float sum = 0.0f;
    for (long long c = threadIdx.x; c < classes; c += blockDim.x) sum += __expf(to_f(xr[c]) - m);
    sum = block_reduce<false>(sum, shared);
    const float lse = m + __logf(sum);
    const long long label = labels[r];
    if (threadIdx.x == 0) atomicAdd(loss, (lse - to_f(xr[label])) * inv_rows);
    for (long long c = threadIdx.x; c < classes; c += blockDim.x)
      dr[c] = from_f<T>((__expf(to_f(xr[c]) - lse) - (c == label ? 1.0f : 0.0f)) * inv_rows);
  }
}

template <typename T>
__global__ void nll_from_log_softmax_k(const T* logp, const long long* labels, float* loss, T* dx, long long rows,
                                       long long classes, unsigned long long total) {
  const float inv_rows = 1.0f / static_cast<float>(rows);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long t = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; t < total;
       t += stride) {
    const long long c = static_cast<long long>(t % classes), r = static_cast<long long>(t / classes);
    const float lp = to_f(logp[t]);
    const bool hit = labels[r] == c;
    if (hit) atomicAdd(loss, -lp * inv_rows);
    dx[t] = from_f<T>((__expf(lp) - (hit ? 1.0f : 0.0f)) * inv_rows);
  }
}

}  // namespace

cudaError_t gather_backward_kernel(const void* dy, const long long* idx, void* dx, long long outer, long long axis_dim,
                                   long long n, long long inner, bool accumulate, DType t, cudaStream_t s) {
  const std::size_t es = dtype_bytes(t);
  cudaError_t e = cudaMemsetAsync(dx, 0, static_cast<std::size_t>(outer * axis_dim * inner) * es, s);
  if (e != cudaSuccess) return e;
  const unsigned long long total = static_cast<unsigned long long>(outer) * n * inner;
  if (total == 0) return cudaSuccess;
  if (t == DType::F32) return launch_gather_backward<float>(dy, idx, dx, axis_dim, n, inner, total, accumulate, s);
  if (t == DType::F16) return launch_gather_backward<__half>(dy, idx, dx, axis_dim, n, inner, total, accumulate, s);
  if (t == DType::BF16)
    return launch_gather_backward<__nv_bfloat16>(dy, idx, dx, axis_dim, n, inner, total, accumulate, s);
  return cudaErrorInvalidValue;
}

cudaError_t cross_entropy_kernel(const void* logits, const long long* labels, float* loss, void* dx, long long rows,
                                 long long classes, DType t, cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(loss, 0, sizeof(float), s);
  if (e != cudaSuccess || rows == 0 || classes == 0) return e;
  const unsigned g = rows_grid(rows);
  if (t == DType::F32)
    cross_entropy_k<float><<<g, kThreads, 0, s>>>(static_cast<const float*>(logits), labels, loss,
                                                  static_cast<float*>(dx), rows, classes);
  else if (t == DType::F16)
    cross_entropy_k<__half><<<g, kThreads, 0, s>>>(static_cast<const __half*>(logits), labels, loss,
                                                   static_cast<__half*>(dx), rows, classes);
  else if (t == DType::BF16)
    cross_entropy_k<__nv_bfloat16><<<g, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(logits), labels, loss,
                                                          static_cast<__nv_bfloat16*>(dx), rows, classes);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t nll_from_log_softmax_kernel(const void* logp, const long long* labels, float* loss, void* dx,
                                        long long rows, long long classes, DType t, cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(loss, 0, sizeof(float), s);
  const unsigned long long total = static_cast<unsigned long long>(rows) * classes;
  if (e != cudaSuccess || total == 0) return e;
  if (t == DType::F32)
    nll_from_log_softmax_k<float><<<grid_for(total), kThreads, 0, s>>>(static_cast<const float*>(logp), labels, loss,
                                                                       static_cast<float*>(dx), rows, classes, total);
  else if (t == DType::F16)
    nll_from_log_softmax_k<__half><<<grid_for(total), kThreads, 0, s>>>(static_cast<const __half*>(logp), labels,
                                                                        loss, static_cast<__half*>(dx), rows, classes,
                                                                        total);
  else if (t == DType::BF16)
    nll_from_log_softmax_k<__nv_bfloat16><<<grid_for(total), kThreads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(logp), labels, loss, static_cast<__nv_bfloat16*>(dx), rows, classes, total);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace benanza
