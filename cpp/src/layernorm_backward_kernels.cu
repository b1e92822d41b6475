// benanza::layernorm_backward_kernel (transformer_backward.hpp): LayerNorm's backward pass from the
// forward's saved mean and rstd, as PyTorch's CUDA layer norm backward computes it
// (aten/src/ATen/native/cuda/layer_norm_kernel.cu: a row kernel for dx, a column reduction for
// dgamma and dbeta). Simple and memory-bound on purpose: it gives the layer a valid measurement
// whatever cuDNN's layernorm_backward supports. Float32 math and float32 scale gradients.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "benanza/kernel_util.cuh"

#include "benanza/transformer_backward.hpp"

namespace benanza {
namespace {


// dx of one row per block: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = scale * dy
template <typename T>
__global__ void layernorm_dx_k(const T* dy, const T* x, const float* scale, const float* mean, const float* rstd,
                               T* dx, long long cols) {
  const long long row = blockIdx.x;
  const T* dyr = dy + row * cols;
  const T* xr = x + row * cols;
  const float mu = mean[row], r = rstd[row];
  float s1 = 0.0f, s2 = 0.0f;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_f(dyr[c]) * scale[c];
    s1 += g;
    s2 += g * (to_f(xr[c]) - mu) * r;
  }
  const float2 t = block_sum2(s1, s2);
  const float inv = 1.0f / static_cast<float>(cols);
  const float m1 = t.x * inv, m2 = t.y * inv;
  T* dxr = dx + row * cols;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xhat = (to_f(xr[c]) - mu) * r;
    dxr[c] = from_f<T>(r * (to_f(dyr[c]) * scale[c] - m1 - xhat * m2));
  }
}

// dscale[c] += sum over this block's rows of dy * xhat, dbias[c] += sum of dy: blocks of 32 columns
// x 8 row lanes, rows strided over gridDim.y * 8, reduced in shared memory, one atomic per column.
template <typename T>
__global__ void layernorm_dgamma_k(const T* dy, const T* x, const float* mean, const float* rstd, float* dscale,
                                   float* dbias, long long rows, long long cols) {
  __shared__ float ss[8][33], sb[8][33];
  const long long c = blockIdx.x * 32LL + threadIdx.x;
  float a = 0.0f, b = 0.0f;
  if (c < cols) {
    for (long long r = blockIdx.y * 8LL + threadIdx.y; r < rows; r += gridDim.y * 8LL) {
      const float g = to_f(dy[r * cols + c]);
      a += g * (to_f(x[r * cols + c]) - mean[r]) * rstd[r];
      b += g;
    }
  }
  ss[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int k = 1; k < 8; ++k) {
      a += ss[k][threadIdx.x];
      b += sb[k][threadIdx.x];
    }
    atomicAdd(dscale + c, a);
    if (dbias) atomicAdd(dbias + c, b);
  }
}

template <typename T>
cudaError_t launch(const void* dy, const void* x, const float* scale, const float* mean, const float* rstd, void* dx,
                   float* dscale, float* dbias, long long rows, long long cols, cudaStream_t s) {
  const auto* pdy = static_cast<const T*>(dy);
  const auto* px = static_cast<const T*>(x);
  const int threads = cols >= 1024 ? 512 : cols >= 256 ? 256 : 128;
  layernorm_dx_k<T><<<static_cast<unsigned>(rows), threads, 0, s>>>(pdy, px, scale, mean, rstd, static_cast<T*>(dx),
                                                                     cols);
  cudaError_t e = cudaMemsetAsync(dscale, 0, static_cast<std::size_t>(cols) * sizeof(float), s);
  if (e == cudaSuccess && dbias) e = cudaMemsetAsync(dbias, 0, static_cast<std::size_t>(cols) * sizeof(float), s);
  if (e != cudaSuccess) return e;
  const long long col_blocks = (cols + 31) / 32;
  long long row_blocks = (rows + 63) / 64;  // >= 64 rows per block: atomics stay few
  if (row_blocks > 1024) row_blocks = 1024;
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(row_blocks)), block(32, 8);
  layernorm_dgamma_k<T><<<grid, block, 0, s>>>(pdy, px, mean, rstd, dscale, dbias, rows, cols);
  return cudaGetLastError();
}

}  // namespace

cudaError_t layernorm_backward_kernel(const void* dy, const void* x, const float* scale, const float* mean,
                                      const float* rstd, void* dx, float* dscale, float* dbias, long long rows,
                                      long long cols, DType t, cudaStream_t s) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL || (cols + 31) / 32 > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  switch (t) {
    case DType::F32: return launch<float>(dy, x, scale, mean, rstd, dx, dscale, dbias, rows, cols, s);
    case DType::F16: return launch<__half>(dy, x, scale, mean, rstd, dx, dscale, dbias, rows, cols, s);
    case DType::BF16: return launch<__nv_bfloat16>(dy, x, scale, mean, rstd, dx, dscale, dbias, rows, cols, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza
