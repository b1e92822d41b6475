// benanza::rmsnorm_kernel (rmsnorm.hpp): RMSNorm over rows, one block per row, float32 math whatever
// the storage type. Simple and memory-bound on purpose (as layernorm_kernel in transformer_kernels.cu):
// it gives every RMSNorm a valid measurement whatever cuDNN's rmsnorm engines support.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "benanza/kernel_util.cuh"

#include "benanza/rmsnorm.hpp"

namespace benanza {

namespace {

template <typename T>
__global__ void rmsnorm_k(const T* x, const T* res, T* sum_out, const float* scale, T* y, long long cols, float eps,
                          float* inv_variance) {
  const long long row = blockIdx.x;
  const T* xr = x + row * cols;
  const T* rr = res ? res + row * cols : nullptr;
  T* sr = sum_out ? sum_out + row * cols : nullptr;
  T* yr = y + row * cols;
  // the element normalised: x, or x + residual rounded to T (as the unfused Add stores it)
  auto in = [&](long long c) {
    return rr ? to_f<T>(from_f<T>(to_f<T>(xr[c]) + to_f<T>(rr[c]))) : to_f<T>(xr[c]);
  };
  float ss = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = in(c);
    if (sr) sr[c] = from_f<T>(v);
    ss += v * v;
  }
  const float r = rsqrtf(block_sum(ss) / static_cast<float>(cols) + eps);
  if (inv_variance && threadIdx.x == 0) inv_variance[row] = r;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = from_f<T>(in(c) * r * scale[c]);
}

}  // namespace

cudaError_t rmsnorm_kernel(const void* x, const float* scale, void* y, long long rows, long long cols, float epsilon,
                           DType t, cudaStream_t s, float* inv_variance, const void* residual, void* sum_out) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  const unsigned g = static_cast<unsigned>(rows);
  const int threads = cols >= 1024 ? 512 : cols >= 256 ? 256 : 128;
  if (t == DType::F16)
    rmsnorm_k<__half><<<g, threads, 0, s>>>(static_cast<const __half*>(x), static_cast<const __half*>(residual),
                                            static_cast<__half*>(sum_out), scale, static_cast<__half*>(y), cols,
                                            epsilon, inv_variance);
  else if (t == DType::BF16)
    rmsnorm_k<__nv_bfloat16><<<g, threads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(residual),
        static_cast<__nv_bfloat16*>(sum_out), scale, static_cast<__nv_bfloat16*>(y), cols, epsilon, inv_variance);
  else
    rmsnorm_k<float><<<g, threads, 0, s>>>(static_cast<const float*>(x), static_cast<const float*>(residual),
                                           static_cast<float*>(sum_out), scale, static_cast<float*>(y), cols, epsilon,
                                           inv_variance);
  return cudaGetLastError();
}

}  // namespace benanza
