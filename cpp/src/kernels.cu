// Device kernels of the harness: uniform random fill (a counter-based hash, so any element's value
// is reproducible from the seed) and the NaN/Inf count used to check outputs once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "benanza/harness.hpp"

namespace benanza {
namespace {

// splitmix64 finaliser (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", 2014)
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_kernel(T* p, std::size_t n, unsigned long long seed, float lo, float hi) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
    const float u = static_cast<float>(mix(seed ^ (i * 0xd1b54a32d192ed03ULL)) >> 40) * (1.0f / 16777216.0f);
    p[i] = static_cast<T>(lo + (hi - lo) * u);
  }
}

template <typename T>
__device__ __forceinline__ bool finite_value(T v) { return isfinite(static_cast<float>(v)); }

template <typename T>
__global__ void nonfinite_kernel(const T* p, std::size_t n, unsigned long long* count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    local += finite_value(p[i]) ? 0 : 1;
  if (local) atomicAdd(count, local);
}

int grid_for(std::size_t n) {
  std::size_t blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  return static_cast<int>(blocks ? blocks : 1);
}

__global__ void fma_rate_kernel(float* out, int iters) {
  float a[kFmaChains];
  const float x = 1.0f + 1e-7f * threadIdx.x, y = 1e-7f * blockIdx.x;
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) a[c] = static_cast<float>(c);
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < kFmaChains; ++c) a[c] = fmaf(a[c], x, y);
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) sum += a[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// grid-stride copy of 16-byte vectors (STREAM's "copy", McCalpin 1995): one read, one write each
__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// one strided transfer: element i of the row-major index space of `dims` goes from
// src[sum c_d * src_strides[d]] to dst[sum c_d * dst_strides[d]]; consecutive threads take
// consecutive indices, so writes coalesce when dst is row-major (a framework's generic copy kernel,
// e.g. PyTorch's TensorIterator copy of a permuted view)
template <typename T>
__global__ void strided_copy_kernel(const T* __restrict__ src, T* __restrict__ dst, StridedView v, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long r = i, so = 0, dof = 0;
    for (int d = v.nd - 1; d >= 0; --d) {
      const long long q = r / v.dims[d], c = r - q * v.dims[d];
      r = q;
      so += c * v.src_strides[d];
      dof += c * v.dst_strides[d];
    }
    dst[dof] = src[so];
  }
}

}  // namespace

void strided_copy(const void* src, void* dst, std::size_t elem_bytes, const StridedView& v, cudaStream_t s) {
  long long n = 1;
  for (int d = 0; d < v.nd; ++d) n *= v.dims[d];
  if (n <= 0) return;
  const int blocks = grid_for(static_cast<std::size_t>(n));
  switch (elem_bytes) {
    case 1: strided_copy_kernel<<<blocks, 256, 0, s>>>(static_cast<const unsigned char*>(src), static_cast<unsigned char*>(dst), v, n); break;
    case 2: strided_copy_kernel<<<blocks, 256, 0, s>>>(static_cast<const unsigned short*>(src), static_cast<unsigned short*>(dst), v, n); break;
    case 4: strided_copy_kernel<<<blocks, 256, 0, s>>>(static_cast<const unsigned int*>(src), static_cast<unsigned int*>(dst), v, n); break;
    default: strided_copy_kernel<<<blocks, 256, 0, s>>>(static_cast<const unsigned long long*>(src), static_cast<unsigned long long*>(dst), v, n); break;
  }
}

void copy_rate(const void* src, void* dst, std::size_t bytes, int blocks, int threads, cudaStream_t s) {
  copy_kernel<<<blocks, threads, 0, s>>>(static_cast<const float4*>(src), static_cast<float4*>(dst), bytes / 16);
}

void fma_rate(float* out, int blocks, int threads, int iters, cudaStream_t s) {
  fma_rate_kernel<<<blocks, threads, 0, s>>>(out, iters);
}

void fill_uniform(void* p, std::size_t n, DType t, unsigned long long seed, float lo, float hi, cudaStream_t s) {
  if (n == 0) return;
  if (t == DType::F16)
    fill_kernel<__half><<<grid_for(n), 256, 0, s>>>(static_cast<__half*>(p), n, seed, lo, hi);
  else if (t == DType::BF16)
    fill_kernel<__nv_bfloat16><<<grid_for(n), 256, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, lo, hi);
  else if (t == DType::F8E4M3)  // conversion from float saturates to the finite range (+-448)
    fill_kernel<__nv_fp8_e4m3><<<grid_for(n), 256, 0, s>>>(static_cast<__nv_fp8_e4m3*>(p), n, seed, lo, hi);
  else
    fill_kernel<float><<<grid_for(n), 256, 0, s>>>(static_cast<float*>(p), n, seed, lo, hi);
}

long long count_nonfinite(const void* p, std::size_t n, DType t, cudaStream_t s) {
  unsigned long long* d = nullptr;
  if (cudaMalloc(&d, sizeof *d) != cudaSuccess) return -1;
  unsigned long long h = 0;
  cudaMemsetAsync(d, 0, sizeof *d, s);
  if (n) {
    if (t == DType::F16)
      nonfinite_kernel<__half><<<grid_for(n), 256, 0, s>>>(static_cast<const __half*>(p), n, d);
    else if (t == DType::BF16)
      nonfinite_kernel<__nv_bfloat16><<<grid_for(n), 256, 0, s>>>(static_cast<const __nv_bfloat16*>(p), n, d);
    else if (t == DType::F8E4M3)  // E4M3 has no infinities: counts NaNs
      nonfinite_kernel<__nv_fp8_e4m3><<<grid_for(n), 256, 0, s>>>(static_cast<const __nv_fp8_e4m3*>(p), n, d);
    else
      nonfinite_kernel<float><<<grid_for(n), 256, 0, s>>>(static_cast<const float*>(p), n, d);
  }
  cudaError_t e = cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  cudaFree(d);
  return e == cudaSuccess ? static_cast<long long>(h) : -1;
}

}  // namespace benanza
