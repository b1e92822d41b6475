// benanza::unary_detail: the templates of benanza::unary_kernel (unary_kernels.cu), shared by the
// translation units that instantiate them for a group of output types each
// (unary_kernels_{f32,f16,bf16,int}.cu), so that nvcc compiles the 12 x 12 x 2 kernels on
// several cores at once: the one unary_kernels.cu was the harness's longest compile.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "benanza/kernel_util.cuh"
#include "benanza/transformer.hpp"

namespace benanza {
namespace unary_detail {
// internal to each translation unit that includes it (nvcc's launch stubs do not compile the
// kernel templates' names with external linkage here)
namespace {


// kThreads and grid_for: kernel_util.cuh
template <typename T, int V>
struct alignas(sizeof(T) * V) UVec {
  T v[V];
};

template <typename T>
constexpr bool kFloatStore = std::is_floating_point<T>::value || std::is_same<T, __half>::value ||
                             std::is_same<T, __nv_bfloat16>::value;

template <typename T>
__device__ __forceinline__ T store(float v) {
  if constexpr (std::is_same<T, __half>::value)
    return __float2half_rn(v);
  else if constexpr (std::is_same<T, __nv_bfloat16>::value)
    return __float2bfloat16_rn(v);
  else
    return static_cast<T>(v);
}

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// The float math of each op (ONNX operator spec); bool results are 1 or 0.
__device__ __forceinline__ float float_unary(UnaryOp op, float x, const UnaryParams& p) {
  switch (op) {
    case UnaryOp::GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case UnaryOp::GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case UnaryOp::ERF: return erff(x);
    case UnaryOp::EXP: return expf(x);
    case UnaryOp::LOG: return logf(x);
    case UnaryOp::SQRT: return sqrtf(x);
    case UnaryOp::RECIPROCAL: return 1.0f / x;
    case UnaryOp::NEG: return -x;
    case UnaryOp::ABS: return fabsf(x);
    case UnaryOp::POW: return p.exponent == 2.0f ? x * x : powf(x, p.exponent);
    case UnaryOp::CAST: return x;
    case UnaryOp::ACOS: return acosf(x);
    case UnaryOp::ACOSH: return acoshf(x);
    case UnaryOp::ASIN: return asinf(x);
    case UnaryOp::ASINH: return asinhf(x);
    case UnaryOp::ATAN: return atanf(x);
    case UnaryOp::ATANH: return atanhf(x);
    case UnaryOp::CEIL: return ceilf(x);
    case UnaryOp::COS: return cosf(x);
    case UnaryOp::COSH: return coshf(x);
    case UnaryOp::FLOOR: return floorf(x);
    case UnaryOp::HARD_SWISH: return x * fminf(fmaxf(x * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
    case UnaryOp::IS_INF: return isinf(x) && ((x < 0.0f && p.alpha != 0.0f) || (x > 0.0f && p.beta != 0.0f));
    case UnaryOp::IS_NAN: return isnan(x) ? 1.0f : 0.0f;
    case UnaryOp::MISH: return x * tanhf(softplus(x));
    case UnaryOp::NOT: return x == 0.0f ? 1.0f : 0.0f;
    case UnaryOp::ROUND: return rintf(x);  // half to even
    case UnaryOp::SELU: return x > 0.0f ? p.beta * x : p.beta * (p.alpha * expf(x) - p.alpha);
    case UnaryOp::SIGN: return static_cast<float>((x > 0.0f) - (x < 0.0f));
    case UnaryOp::SIN: return sinf(x);
    case UnaryOp::SINH: return sinhf(x);
    case UnaryOp::SOFTPLUS: return softplus(x);
    case UnaryOp::SOFTSIGN: return x / (1.0f + fabsf(x));
    case UnaryOp::TAN: return tanf(x);
    case UnaryOp::THRESHOLDED_RELU: return x > p.alpha ? x : 0.0f;
    case UnaryOp::CELU: return fmaxf(0.0f, x) + fminf(0.0f, p.alpha * (expf(x / p.alpha) - 1.0f));
    case UnaryOp::SHRINK: return x < -p.alpha ? x + p.beta : x > p.alpha ? x - p.beta : 0.0f;
    case UnaryOp::CLIP: return fminf(fmaxf(x, p.alpha), p.beta);
    case UnaryOp::SWISH: return x / (1.0f + expf(-p.alpha * x));
    case UnaryOp::CAST_BOOL: return x != 0.0f ? 1.0f : 0.0f;
    case UnaryOp::BITWISE_NOT: return x;
  }
  return x;
}

// The integer ops (C: long long, or unsigned long long for unsigned storage)
template <typename C>
__device__ __forceinline__ C int_unary(UnaryOp op, C x, const UnaryParams& p) {
  switch (op) {
    case UnaryOp::CLIP: {  // bounds as float32 (alpha: min, beta: max), compared exactly in double
      const double v = static_cast<double>(x);
      return v < static_cast<double>(p.alpha) ? static_cast<C>(p.alpha)
             : v > static_cast<double>(p.beta) ? static_cast<C>(p.beta) : x;
    }
    case UnaryOp::ABS:
      if constexpr (std::is_signed<C>::value) return x < 0 ? -x : x;
      return x;
    case UnaryOp::NEG: return C(0) - x;
    case UnaryOp::SIGN:
      if constexpr (std::is_signed<C>::value) return (x > 0) - (x < 0);
      return x > 0;
    case UnaryOp::NOT: return x == 0;
    case UnaryOp::CAST_BOOL: return x != 0;
    case UnaryOp::BITWISE_NOT: return ~x;
    default: return x;  // CAST
  }
}

template <typename In, typename Out>
__device__ __forceinline__ Out one(UnaryOp op, In x, const UnaryParams& p) {
  if constexpr (kFloatStore<In> && kFloatStore<Out>) {
    return store<Out>(float_unary(op, static_cast<float>(x), p));
  } else if constexpr (kFloatStore<In> && std::is_same<Out, signed char>::value) {  // bool or int8 out
    const float v = static_cast<float>(x);
    if (op == UnaryOp::IS_NAN || op == UnaryOp::IS_INF || op == UnaryOp::CAST_BOOL) return float_unary(op, v, p) != 0.0f;
    return static_cast<signed char>(v);  // Cast to int8: toward zero
  } else if constexpr (kFloatStore<In>) {  // Cast to an integer type: toward zero
    return static_cast<Out>(static_cast<float>(x));
  } else if constexpr (kFloatStore<Out>) {  // Cast from an integer type
    return store<Out>(static_cast<float>(x));
  } else {
    using C = typename std::conditional<std::is_signed<In>::value, long long, unsigned long long>::type;
    return static_cast<Out>(int_unary<C>(op, static_cast<C>(x), p));
  }
}

// nvec vectors of V elements, then the n - nvec * V elements of the tail one by one
template <typename In, typename Out, int V>
__global__ void unary_k(UnaryOp op, const In* __restrict__ x, Out* __restrict__ y, unsigned long long nvec,
                        unsigned long long n, UnaryParams p) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long t0 = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  for (unsigned long long i = t0; i < nvec; i += stride) {
    const UVec<In, V> xv = reinterpret_cast<const UVec<In, V>*>(x)[i];
    UVec<Out, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = one<In, Out>(op, xv.v[k], p);
    reinterpret_cast<UVec<Out, V>*>(y)[i] = out;
  }
  for (unsigned long long j = nvec * V + t0; j < n; j += stride) y[j] = one<In, Out>(op, x[j], p);
}

template <typename In, typename Out>
cudaError_t launch_unary(UnaryOp op, const void* x, void* y, unsigned long long n, const UnaryParams& p,
                         cudaStream_t s) {
  constexpr int V = 16 / (sizeof(In) > sizeof(Out) ? sizeof(In) : sizeof(Out));
  const auto* px = static_cast<const In*>(x);
  auto* py = static_cast<Out*>(y);
  const bool vec = V > 1 && reinterpret_cast<std::uintptr_t>(x) % (sizeof(In) * V) == 0 &&
                   reinterpret_cast<std::uintptr_t>(y) % (sizeof(Out) * V) == 0;
  if (vec)
    unary_k<In, Out, V><<<grid_for(n / V + 1), kThreads, 0, s>>>(op, px, py, n / V, n, p);
  else
    unary_k<In, Out, 1><<<grid_for(n), kThreads, 0, s>>>(op, px, py, n, n, p);
  return cudaGetLastError();
}

// any input type to Out (float math on the same float type, Cast, or integer ops)
template <typename Out>
cudaError_t from_any(UnaryOp op, const void* x, ElemType xt, void* y, unsigned long long n, const UnaryParams& p,
                     cudaStream_t s) {
  switch (xt) {
    case ElemType::F32: return launch_unary<float, Out>(op, x, y, n, p, s);
    case ElemType::F16: return launch_unary<__half, Out>(op, x, y, n, p, s);
    case ElemType::BF16: return launch_unary<__nv_bfloat16, Out>(op, x, y, n, p, s);
    case ElemType::F64: return launch_unary<double, Out>(op, x, y, n, p, s);
    case ElemType::I64: return launch_unary<long long, Out>(op, x, y, n, p, s);
    case ElemType::I32: return launch_unary<int, Out>(op, x, y, n, p, s);
    case ElemType::I8: return launch_unary<signed char, Out>(op, x, y, n, p, s);
    case ElemType::U8: return launch_unary<unsigned char, Out>(op, x, y, n, p, s);
    case ElemType::I16: return launch_unary<short, Out>(op, x, y, n, p, s);
    case ElemType::U16: return launch_unary<unsigned short, Out>(op, x, y, n, p, s);
    case ElemType::U32: return launch_unary<unsigned, Out>(op, x, y, n, p, s);
    case ElemType::U64: return launch_unary<unsigned long long, Out>(op, x, y, n, p, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

// One translation unit each (the float outputs carry every op's float math; the integer outputs
// only casts and integer ops, so they share one): any input type `xt` to the output type named.
cudaError_t unary_to_f32(UnaryOp op, const void* x, ElemType xt, void* y, unsigned long long n, const UnaryParams& p,
                         cudaStream_t s);
cudaError_t unary_to_f16(UnaryOp op, const void* x, ElemType xt, void* y, unsigned long long n, const UnaryParams& p,
                         cudaStream_t s);
cudaError_t unary_to_bf16(UnaryOp op, const void* x, ElemType xt, void* y, unsigned long long n,
                          const UnaryParams& p, cudaStream_t s);
// yt: an integer type (cudaErrorInvalidValue otherwise: float64 output is not offered)
cudaError_t unary_to_int(UnaryOp op, const void* x, ElemType xt, void* y, ElemType yt, unsigned long long n,
                         const UnaryParams& p, cudaStream_t s);

}  // namespace unary_detail
}  // namespace benanza
