// benanza::rmsnorm_backward_dx_kernel and rmsnorm_backward_dscale_kernel (rmsnorm.hpp): RMSNorm's
// backward pass from the forward's saved inverse root mean square r (rows,), as PyTorch's CUDA layer
// norm backward computes LayerNorm's without the mean (aten/src/ATen/native/cuda/layer_norm_kernel.cu:
// a row kernel for dx, a column reduction for dgamma; its _fused_rms_norm_backward). Simple and
// memory-bound on purpose: the layer has a valid measurement whatever cuDNN's rmsnorm_backward
// supports. Float32 math whatever the storage type, float32 scale gradient.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "benanza/kernel_util.cuh"

#include "benanza/rmsnorm.hpp"

namespace benanza {
namespace {

// dx of one row per block: dx = r * (g - xhat * mean(g * xhat)), g = scale * dy, xhat = x * r
template <typename T>
__global__ void rmsnorm_dx_k(const T* dy, const T* x, const float* scale, const float* rinv, T* dx, long long cols) {
  const long long row = blockIdx.x;
  const T* dyr = dy + row * cols;
  const T* xr = x + row * cols;
  const float r = rinv[row];
  float s = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) s += to_f(dyr[c]) * scale[c] * to_f(xr[c]) * r;
  const float m = block_sum(s) / static_cast<float>(cols);
  T* dxr = dx + row * cols;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = to_f(xr[c]) * r;
    dxr[c] = from_f<T>(r * (to_f(dyr[c]) * scale[c] - xhat * m));
  }
}

// dscale[c] += sum over this block's rows of dy * xhat: blocks of 32 columns x 8 row lanes, rows
// strided over gridDim.y * 8, reduced in shared memory, one atomic per column and block.
template <typename T>
__global__ void rmsnorm_dscale_k(const T* dy, const T* x, const float* rinv, float* dscale, long long rows,
                                 long long cols) {
  __shared__ float ss[8][33];
  const long long c = blockIdx.x * 32LL + threadIdx.x;
  float a = 0.0f;
  if (c < cols) {
    for (long long r = blockIdx.y * 8LL + threadIdx.y; r < rows; r += gridDim.y * 8LL)
      a += to_f(dy[r * cols + c]) * to_f(x[r * cols + c]) * rinv[r];
  }
  ss[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < 8; ++k) a += ss[k][threadIdx.x];
    atomicAdd(dscale + c, a);
  }
}

template <typename T>
cudaError_t launch_dx(const void* dy, const void* x, const float* scale, const float* rinv, void* dx, long long rows,
                      long long cols, cudaStream_t s) {
  const int threads = cols >= 1024 ? 512 : cols >= 256 ? 256 : 128;
  rmsnorm_dx_k<T><<<static_cast<unsigned>(rows), threads, 0, s>>>(static_cast<const T*>(dy), static_cast<const T*>(x),
                                                                   scale, rinv, static_cast<T*>(dx), cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_dscale(const void* dy, const void* x, const float* rinv, float* dscale, long long rows,
                          long long cols, cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(dscale, 0, static_cast<std::size_t>(cols) * sizeof(float), s);
  if (e != cudaSuccess) return e;
  const long long col_blocks = (cols + 31) / 32;
  long long row_blocks = (rows + 63) / 64;  // >= 64 rows per block: atomics stay few
  if (row_blocks > 1024) row_blocks = 1024;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(row_blocks)), block(32, 8);
  rmsnorm_dscale_k<T><<<grid, block, 0, s>>>(static_cast<const T*>(dy), static_cast<const T*>(x), rinv, dscale, rows,
                                             cols);
  return cudaGetLastError();
}

}  // namespace

cudaError_t rmsnorm_backward_dx_kernel(const void* dy, const void* x, const float* scale, const float* inv_variance,
                                       void* dx, long long rows, long long cols, DType t, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  switch (t) {
    case DType::F32: return launch_dx<float>(dy, x, scale, inv_variance, dx, rows, cols, s);
    case DType::F16: return launch_dx<__half>(dy, x, scale, inv_variance, dx, rows, cols, s);
    case DType::BF16: return launch_dx<__nv_bfloat16>(dy, x, scale, inv_variance, dx, rows, cols, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t rmsnorm_backward_dscale_kernel(const void* dy, const void* x, const float* inv_variance, float* dscale,
                                           long long rows, long long cols, DType t, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if ((cols + 31) / 32 > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  switch (t) {
    case DType::F32: return launch_dscale<float>(dy, x, inv_variance, dscale, rows, cols, s);
    case DType::F16: return launch_dscale<__half>(dy, x, inv_variance, dscale, rows, cols, s);
    case DType::BF16: return launch_dscale<__nv_bfloat16>(dy, x, inv_variance, dscale, rows, cols, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza
