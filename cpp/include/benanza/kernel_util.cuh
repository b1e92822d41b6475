// What the harness's own kernels share: the element conversions (every kernel computes in fp32 and
// reads/writes its tensors' element type, float, __half or __nv_bfloat16, through to_f / from_f,
// rounding to nearest even on the way back: CUDA Math API __float2half_rn, __float2bfloat16_rn), the
// block-wide sums of one and two floats (warp shuffles, then one warp over the warps' partial sums; CUDA
// C++ Programming Guide, "Warp Shuffle Functions") and the grid of the grid-stride loops (kThreads
// threads a block, grid_for blocks).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace benanza {

// Threads per block of the harness's grid-stride elementwise kernels.
constexpr int kThreads = 256;

// Blocks of kThreads for n elements, at most 2^20 (the grid-stride loops cover the rest), at least 1.
inline unsigned grid_for(unsigned long long n) {
  unsigned long long blocks = (n + kThreads - 1) / kThreads;
  if (blocks > (1ULL << 20)) blocks = 1ULL << 20;
  return static_cast<unsigned>(blocks ? blocks : 1);
}

template <typename T>
__device__ __forceinline__ float to_f(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_f(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// The sum of ``a`` over the thread block (at most 1024 threads), returned to every thread. Every
// thread of the block must call it (it synchronises the block).
__device__ __forceinline__ float block_sum(float a) {
  __shared__ float sa[32];
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) sa[warp] = a;
  __syncthreads();
  a = lane < warps ? sa[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  return a;
}

// The sums of ``a`` and of ``b`` over the thread block, as block_sum (one pass for both).
__device__ __forceinline__ float2 block_sum2(float a, float b) {
  __shared__ float sa[32], sb[32];
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    sa[warp] = a;
    sb[warp] = b;
  }
  __syncthreads();
  a = lane < warps ? sa[lane] : 0.0f;
  b = lane < warps ? sb[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
  return make_float2(a, b);
}

}  // namespace benanza
