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
__global__ void rmsnorm_k(const T* x, const float* scale, T* y, long long cols, float eps, float* inv_variance) {
  const long long row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float ss = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_f<T>(xr[c]);
    ss += v * v;
  }
  const float r = rsqrtf(block_sum(ss) / static_cast<float>(cols) + eps);
  if (inv_variance && threadIdx.x == 0) inv_variance[row] = r;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = from_f<T>(to_f<T>(xr[c]) * r * scale[c]);
}

}  // namespace

cudaError_t rmsnorm_kernel(const void* x, const float* scale, void* y, long long rows, long long cols, float epsilon,
                           DType t, cudaStream_t s, float* inv_variance) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  const unsigned g = static_cast<unsigned>(rows);
  const int threads = cols >= 1024 ? 512 : cols >= 256 ? 256 : 128;
  if (t == DType::F16)
    rmsnorm_k<__half><<<g, threads, 0, s>>>(static_cast<const __half*>(x), scale, static_cast<__half*>(y), cols,
                                            epsilon, inv_variance);
  else if (t == DType::BF16)
    rmsnorm_k<__nv_bfloat16><<<g, threads, 0, s>>>(static_cast<const __nv_bfloat16*>(x), scale,
                                                   static_cast<__nv_bfloat16*>(y), cols, epsilon,
                                                   inv_variance);
  else
    rmsnorm_k<float><<<g, threads, 0, s>>>(static_cast<const float*>(x), scale, static_cast<float*>(y), cols, epsilon,
                                     inv_variance);
  return cudaGetLastError();
}

}  // namespace benanza
