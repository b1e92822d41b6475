// What the harness's own kernels share: the element conversions (every kernel computes in fp32 and
// reads/writes its tensors' element type, float, __half or __nv_bfloat16, through to_f / from_f,
// rounding to nearest even on the way back: CUDA Math API __float2half_rn, __float2bfloat16_rn) and a
// block-wide sum (warp shuffles, then one warp over the warps' partial sums; CUDA C++ Programming
// Guide, "Warp Shuffle Functions").
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace benanza {

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

}  // namespace benanza
