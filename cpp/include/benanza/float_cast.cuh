// benanza's element conversions for the harness's own kernels: every kernel computes in fp32 and
// reads/writes its tensors' element type (float, __half, __nv_bfloat16) through these two, rounding to
// nearest even on the way back (CUDA Math API: __float2half_rn, __float2bfloat16_rn).
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

}  // namespace benanza
