// Device kernels of the harness: uniform random fill (a counter-based hash, so any element's value
// is reproducible from the seed) and the NaN/Inf count used to check outputs once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

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

// Fast unsigned division by a run-time constant (Granlund & Montgomery, PLDI 1994; PyTorch's
// IntDivider): q = (umulhi(n, m) + n) >> s, exact for n, d < 2^31.
struct Div32 {
  unsigned d = 1, m = 0, s = 0;
};

Div32 make_div32(unsigned d) {
  Div32 r;
  r.d = d;
  while (r.s < 32 && (1ull << r.s) < d) ++r.s;
  r.m = static_cast<unsigned>(((1ull << 32) * ((1ull << r.s) - d)) / d + 1);
  return r;
}

__device__ __forceinline__ unsigned div32(unsigned n, const Div32& v) { return (__umulhi(n, v.m) + n) >> v.s; }

struct View32 {
  int nd;
  Div32 div[8];
  unsigned src_strides[8];
  unsigned dst_strides[8];
};

// one strided transfer in 32-bit indexing: element i of the row-major index space of the dims goes
// from src[sum c_d * src_strides[d]] to dst[sum c_d * dst_strides[d]]; consecutive threads take
// consecutive indices, so writes coalesce when dst is row-major
template <typename U>
__global__ void strided_copy32_kernel(const U* __restrict__ src, U* __restrict__ dst, View32 v, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned r = i, so = 0, dof = 0;
#pragma unroll
    for (int d = 7; d >= 0; --d) {
      if (d < v.nd) {
        const unsigned q = div32(r, v.div[d]), c = r - q * v.div[d].d;
        r = q;
        so += c * v.src_strides[d];
        dof += c * v.dst_strides[d];
      }
    }
    dst[dof] = src[so];
  }
}

// the same in 64-bit indexing (views beyond 2^31 elements or with negative strides)
template <typename U>
__global__ void strided_copy64_kernel(const U* __restrict__ src, U* __restrict__ dst, StridedPlan v, long long n) {
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

// a tiled copy: dimension t (source stride 1) and the last (destination stride 1) move through a
// shared-memory tile of 32 (last) x kTileT(U) (t) elements, padded against bank conflicts; reads
// along t, writes along the last dim; blockIdx.z walks the other dims. Narrow elements get a wider
// tile along t (64 for 2-byte, 128 for 1-byte): each block then moves 4 KiB or more, enough bytes in
// flight per SM to approach the DRAM rate.
template <typename U>
constexpr int kTileT = sizeof(U) >= 4 ? 32 : 32 * static_cast<int>(4 / sizeof(U));

template <typename U>
__global__ void strided_copy_tiled_kernel(const U* __restrict__ src, U* __restrict__ dst, StridedPlan v, long long outer) {
  constexpr int TT = kTileT<U>;
  __shared__ U tile[32][TT + 1];  // [last][t]
  const int t = v.tile_dim, l = v.nd - 1;
  const long long nt = v.dims[t], nl = v.dims[l];
  const long long t0 = static_cast<long long>(blockIdx.y) * TT, l0 = static_cast<long long>(blockIdx.x) * 32;
  for (long long o = blockIdx.z; o < outer; o += gridDim.z) {
    long long r = o, sb = 0, db = 0;
    for (int d = l - 1; d >= 0; --d) {
      if (d == t) continue;
      const long long q = r / v.dims[d], c = r - q * v.dims[d];
      r = q;
      sb += c * v.src_strides[d];
      db += c * v.dst_strides[d];
    }
    for (int j = threadIdx.y; j < 32; j += blockDim.y) {
      const long long li = l0 + j;
#pragma unroll
      for (int k = 0; k < TT / 32; ++k) {
        const long long ti = t0 + k * 32 + threadIdx.x;
        if (ti < nt && li < nl) tile[j][k * 32 + threadIdx.x] = src[sb + ti + li * v.src_strides[l]];
      }
    }
    __syncthreads();
    for (int j = threadIdx.y; j < TT; j += blockDim.y) {
      const long long ti = t0 + j, li = l0 + threadIdx.x;
      if (ti < nt && li < nl) dst[db + ti * v.dst_strides[t] + li] = tile[threadIdx.x][j];
    }
    __syncthreads();
  }
}

template <typename U>
void launch_strided_copy(const StridedPlan& p, const void* src, void* dst, cudaStream_t s) {
  const U* in = static_cast<const U*>(src);
  U* out = static_cast<U*>(dst);
  const long long n = p.count();
  constexpr int TT = kTileT<U>;
  if (p.kind == StridedPlan::kTiled && (p.dims[p.tile_dim] + TT - 1) / TT <= 65535) {
    const long long nt = p.dims[p.tile_dim], nl = p.dims[p.nd - 1];
    const long long outer = n / (nt * nl);
    const dim3 grid(static_cast<unsigned>((nl + 31) / 32), static_cast<unsigned>((nt + TT - 1) / TT),
                    static_cast<unsigned>(outer < 65535 ? outer : 65535));
    strided_copy_tiled_kernel<U><<<grid, dim3(32, 8), 0, s>>>(in, out, p, outer);
    return;
  }
  const int blocks = grid_for(static_cast<std::size_t>(n));
  if (p.index32) {
    View32 v{};
    v.nd = p.nd;
    for (int d = 0; d < p.nd; ++d) {
      v.div[d] = make_div32(static_cast<unsigned>(p.dims[d]));
      v.src_strides[d] = static_cast<unsigned>(p.src_strides[d]);
      v.dst_strides[d] = static_cast<unsigned>(p.dst_strides[d]);
    }
    strided_copy32_kernel<U><<<blocks, 256, 0, s>>>(in, out, v, static_cast<unsigned>(n));
  } else {
    strided_copy64_kernel<U><<<blocks, 256, 0, s>>>(in, out, p, n);
  }
}

// ---- pointwise kernels: what a framework's elementwise kernels do (PyTorch's vectorized
// TensorIterator loops: 16-byte loads and stores where the innermost dimension allows, float math)

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <typename T>
__device__ __forceinline__ float to_f(T x) { return static_cast<float>(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x) { return static_cast<T>(x); }
// a stored value in the compute domain C (float, long long or unsigned long long)
template <typename C, typename T>
__device__ __forceinline__ C to_f_or_int(T x) {
  if constexpr (std::is_same<C, float>::value)
    return static_cast<float>(x);
  else
    return static_cast<C>(x);
}
// a value of the compute domain stored as T (bool outputs: 0 or 1 in a byte)
template <typename T, typename C>
__device__ __forceinline__ T from_c(C x) {
  if constexpr (std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value)
    return static_cast<T>(static_cast<float>(x));
  else
    return static_cast<T>(x);
}

// The math of a binary op on values of the compute domain C: float for float storage, long long
// for signed integers and bool, unsigned long long for unsigned integers (ONNX operator spec).
template <typename T>
struct Domain {
  using type = long long;
};
template <>
struct Domain<float> {
  using type = float;
};
template <>
struct Domain<__half> {
  using type = float;
};
template <>
struct Domain<__nv_bfloat16> {
  using type = float;
};
template <>
struct Domain<unsigned char> {
  using type = unsigned long long;
};
template <>
struct Domain<unsigned short> {
  using type = unsigned long long;
};
template <>
struct Domain<unsigned> {
  using type = unsigned long long;
};
template <>
struct Domain<unsigned long long> {
  using type = unsigned long long;
};

template <typename C>
__device__ __forceinline__ C int_binary(PointwiseOp op, C a, C b) {
  switch (op) {
    case PointwiseOp::Add: return a + b;
    case PointwiseOp::Sub: return a - b;
    case PointwiseOp::Mul: return a * b;
    case PointwiseOp::Div: return b ? a / b : C(0);
    case PointwiseOp::Min: return a < b ? a : b;
    case PointwiseOp::Max: return a > b ? a : b;
    case PointwiseOp::Mean: return (a + b) / 2;
    case PointwiseOp::Pow: return static_cast<C>(pow(static_cast<double>(a), static_cast<double>(b)));
    case PointwiseOp::FMod: return b ? a % b : C(0);
    case PointwiseOp::Mod: {  // floored: the result takes the sign of b
      if (!b) return C(0);
      const C r = a % b;
      if constexpr (std::is_signed<C>::value) return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
      return r;
    }
    case PointwiseOp::PRelu:
      if constexpr (std::is_signed<C>::value) return a < 0 ? a * b : a;
      return a;
    case PointwiseOp::BitAnd: return a & b;
    case PointwiseOp::BitOr: return a | b;
    case PointwiseOp::BitXor: return a ^ b;
    case PointwiseOp::ShiftLeft: return b >= 64 ? C(0) : a << b;
    case PointwiseOp::ShiftRight: return b >= 64 ? C(0) : a >> b;
    default: return a;
  }
}

__device__ __forceinline__ float float_binary(PointwiseOp op, float a, float b) {
  switch (op) {
    case PointwiseOp::Add: return a + b;
    case PointwiseOp::Mul: return a * b;
    case PointwiseOp::Min: return fminf(a, b);
    case PointwiseOp::Max: return fmaxf(a, b);
    case PointwiseOp::Sub: return a - b;
    case PointwiseOp::Div: return a / b;
    case PointwiseOp::Mean: return 0.5f * (a + b);
    case PointwiseOp::Pow: return powf(a, b);
    case PointwiseOp::FMod: return fmodf(a, b);
    case PointwiseOp::Mod: return a - floorf(a / b) * b;
    case PointwiseOp::PRelu: return a < 0.0f ? a * b : a;
    case PointwiseOp::SwiGlu: return a / (1.0f + __expf(-a)) * b;
    default: return a;
  }
}

// comparisons and logical ops give 0 or 1 in any domain; the rest by domain
template <typename C>
__device__ __forceinline__ C apply_binary(PointwiseOp op, C a, C b) {
  switch (op) {
    case PointwiseOp::Equal: return a == b;
    case PointwiseOp::Less: return a < b;
    case PointwiseOp::LessOrEqual: return a <= b;
    case PointwiseOp::Greater: return a > b;
    case PointwiseOp::GreaterOrEqual: return a >= b;
    case PointwiseOp::And: return (a != C(0)) && (b != C(0));
    case PointwiseOp::Or: return (a != C(0)) || (b != C(0));
    case PointwiseOp::Xor: return (a != C(0)) != (b != C(0));
    default: break;
  }
  if constexpr (std::is_same<C, float>::value)
    return float_binary(op, a, b);
  else
    return int_binary<C>(op, a, b);
}

// y = op(alpha1 * a, alpha2 * b) over y's collapsed row-major index space; each operand's offset
// from its per-dim strides (0 where it broadcasts; a_full: a is y-shaped, its offset is the
// index); V elements per step along the innermost dim, loaded as a vector by an operand that is
// full there (a_inner / b_inner) and as one broadcast value otherwise
struct BinaryView {
  int nd;
  Div32 div[8];
  unsigned a_strides[8], b_strides[8];
};

template <typename TA, typename TY, int V>
__global__ void binary_kernel(const TA* __restrict__ a, const TA* __restrict__ b, TY* __restrict__ y, BinaryView v,
                              unsigned nvec, PointwiseOp op, float alpha1, float alpha2, bool a_full, bool a_inner,
                              bool b_inner) {
  using C = typename Domain<TA>::type;
  constexpr bool kFloat = std::is_same<C, float>::value;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += gridDim.x * blockDim.x) {
    const unsigned e = i * V;
    unsigned r = e, ao = 0, bo = 0;
#pragma unroll
    for (int d = 7; d >= 0; --d) {
      if (d < v.nd) {
        const unsigned q = div32(r, v.div[d]), c = r - q * v.div[d].d;
        ao += c * v.a_strides[d];
        bo += c * v.b_strides[d];
        r = q;
      }
    }
    if (a_full) ao = e;
    C av[V], bv[V];
    if (V > 1 && a_inner) {
      const Vec<TA, V> t = *reinterpret_cast<const Vec<TA, V>*>(a + ao);
#pragma unroll
      for (int k = 0; k < V; ++k) av[k] = static_cast<C>(to_f_or_int<C>(t.v[k]));
    } else {
      const C t = static_cast<C>(to_f_or_int<C>(a[ao]));
#pragma unroll
      for (int k = 0; k < V; ++k) av[k] = t;
    }
    if (V > 1 && b_inner) {
      const Vec<TA, V> t = *reinterpret_cast<const Vec<TA, V>*>(b + bo);
#pragma unroll
      for (int k = 0; k < V; ++k) bv[k] = static_cast<C>(to_f_or_int<C>(t.v[k]));
    } else {
      const C t = static_cast<C>(to_f_or_int<C>(b[bo]));
#pragma unroll
      for (int k = 0; k < V; ++k) bv[k] = t;
    }
    Vec<TY, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if constexpr (kFloat)
        out.v[k] = from_c<TY>(apply_binary<C>(op, alpha1 * av[k], alpha2 * bv[k]));
      else
        out.v[k] = from_c<TY>(apply_binary<C>(op, av[k], bv[k]));
    }
    *reinterpret_cast<Vec<TY, V>*>(y + e) = out;
  }
}

__device__ __forceinline__ float activation_op(int mode, float x, float coef, float coef2) {
  switch (mode) {
    case -2: return fminf(fmaxf(coef * x + coef2, 0.0f), 1.0f);  // hard sigmoid (alpha, beta)
    case 0: return 1.0f / (1.0f + __expf(-x));                  // sigmoid
    case 1: return fmaxf(x, 0.0f);                              // relu
    case 2: return tanhf(x);                                    // tanh
    case 3: return fminf(fmaxf(x, 0.0f), coef);                 // clipped relu
    case 4: return x > 0.0f ? x : coef * (__expf(x) - 1.0f);    // elu
    case 5: return x;                                           // identity
    case 6: return x / (1.0f + __expf(-coef * x));              // swish (SiLU with beta = coef = 1)
    default: return x > 0.0f ? x : coef * x;                    // leaky relu (-1)
  }
}

template <typename T, int V>
__global__ void activation_kernel_k(const T* __restrict__ x, T* __restrict__ y, unsigned long long nvec, int mode,
                                    float coef, float coef2) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    const Vec<T, V> xv = reinterpret_cast<const Vec<T, V>*>(x)[i];
    Vec<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = from_f<T>(activation_op(mode, to_f(xv.v[k]), coef, coef2));
    reinterpret_cast<Vec<T, V>*>(y)[i] = out;
  }
}

// The derivative of activation_op times the incoming gradient g, from the tensor the framework saves
// for the backward pass (`s`: the forward's output y for sigmoid, tanh and relu; its input x for the
// others), as PyTorch's autograd kernels compute it (aten/src/ATen/native/cuda/ActivationThresholdKernel.cu
// threshold_backward: s <= 0 ? 0 : g; UnaryOpsKernel / BinaryMiscBackOpsKernels.cu sigmoid_backward:
// g * (1 - s) * s, tanh_backward: g * (1 - s * s); ActivationHardtanhKernel.cu hardtanh_backward:
// s <= 0 || s >= max ? 0 : g; ActivationLeakyReluKernel.cu leaky_relu_backward: s > 0 ? g : g * slope;
// ActivationEluKernel.cu elu_backward (is_result false, scales 1): s <= 0 ? g * alpha * exp(s) : g;
// ActivationHardsigmoidKernel.cu hardsigmoid_backward (alpha 1/6, beta 1/2 there; alpha coef and beta
// coef2 here): 0 < alpha * s + beta < 1 ? g * alpha : 0; ActivationSiluKernel.cu silu_backward:
// g * sigmoid(s) * (1 + s * (1 - sigmoid(s)))).
__device__ __forceinline__ float activation_grad_op(int mode, float s, float g, float coef, float coef2) {
  switch (mode) {
    case -2: {                                                       // hard sigmoid (alpha, beta)
      const float t = coef * s + coef2;
      return t > 0.0f && t < 1.0f ? g * coef : 0.0f;
    }
    case 0: return g * (1.0f - s) * s;                               // sigmoid, s = y
    case 1: return s <= 0.0f ? 0.0f : g;                             // relu, s = y
    case 2: return g * (1.0f - s * s);                               // tanh, s = y
    case 3: return s <= 0.0f || s >= coef ? 0.0f : g;                // clipped relu at coef, s = x
    case 4: return s <= 0.0f ? g * coef * __expf(s) : g;             // elu with alpha coef, s = x
    case 5: return g;                                                // identity
    case 6: {                                                        // swish (SiLU, beta = coef = 1), s = x
      const float sig = 1.0f / (1.0f + __expf(-coef * s));
      return g * sig * (1.0f + coef * s * (1.0f - sig));
    }
    default: return s > 0.0f ? g : coef * g;                         // leaky relu (-1), slope coef, s = x
  }
}

template <typename T, int V>
__global__ void activation_grad_kernel_k(const T* __restrict__ saved, const T* __restrict__ dy, T* __restrict__ dx,
                                         unsigned long long nvec, int mode, float coef, float coef2) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    const Vec<T, V> sv = reinterpret_cast<const Vec<T, V>*>(saved)[i];
    const Vec<T, V> gv = reinterpret_cast<const Vec<T, V>*>(dy)[i];
    Vec<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k)
      out.v[k] = from_f<T>(activation_grad_op(mode, to_f(sv.v[k]), to_f(gv.v[k]), coef, coef2));
    reinterpret_cast<Vec<T, V>*>(dx)[i] = out;
  }
}

template <typename TA, typename TY>
cudaError_t launch_binary(const void* a, const void* b, void* y, const BinaryView& v, unsigned n, unsigned inner,
                          PointwiseOp op, float alpha1, float alpha2, bool a_full, bool a_inner, bool b_inner,
                          cudaStream_t s) {
  constexpr int V = 16 / sizeof(TA);
  const auto* pa = static_cast<const TA*>(a);
  const auto* pb = static_cast<const TA*>(b);
  auto* py = static_cast<TY*>(y);
  const bool vec = inner % V == 0 && reinterpret_cast<std::uintptr_t>(y) % (sizeof(TY) * V) == 0 &&
                   (!a_inner || reinterpret_cast<std::uintptr_t>(a) % 16 == 0) &&
                   (!b_inner || reinterpret_cast<std::uintptr_t>(b) % 16 == 0);
  if (vec)
    binary_kernel<TA, TY, V><<<grid_for(n / V), 256, 0, s>>>(pa, pb, py, v, n / V, op, alpha1, alpha2, a_full,
                                                              a_inner, b_inner);
  else
    binary_kernel<TA, TY, 1><<<grid_for(n), 256, 0, s>>>(pa, pb, py, v, n, op, alpha1, alpha2, a_full, a_inner,
                                                          b_inner);
  return cudaGetLastError();
}

// the output type: the input's, or a bool byte (comparisons, logical ops)
template <typename TA>
cudaError_t launch_binary_to(ElemType out, ElemType in, const void* a, const void* b, void* y, const BinaryView& v,
                             unsigned n, unsigned inner, PointwiseOp op, float alpha1, float alpha2, bool a_full,
                             bool a_inner, bool b_inner, cudaStream_t s) {
  if (out == in)
    return launch_binary<TA, TA>(a, b, y, v, n, inner, op, alpha1, alpha2, a_full, a_inner, b_inner, s);
  if (out == ElemType::I8)
    return launch_binary<TA, signed char>(a, b, y, v, n, inner, op, alpha1, alpha2, a_full, a_inner, b_inner, s);
  return cudaErrorInvalidValue;
}

template <typename T>
cudaError_t launch_activation_grad(const void* saved, const void* dy, void* dx, unsigned long long n, int mode,
                                   float coef, float coef2, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = n % V == 0 && reinterpret_cast<std::uintptr_t>(saved) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(dy) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dx) % 16 == 0;
  if (vec)
    activation_grad_kernel_k<T, V><<<grid_for(n / V), 256, 0, s>>>(
        static_cast<const T*>(saved), static_cast<const T*>(dy), static_cast<T*>(dx), n / V, mode, coef, coef2);
  else
    activation_grad_kernel_k<T, 1><<<grid_for(n), 256, 0, s>>>(static_cast<const T*>(saved), static_cast<const T*>(dy),
                                                              static_cast<T*>(dx), n, mode, coef, coef2);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_activation(const void* x, void* y, unsigned long long n, int mode, float coef, float coef2,
                              cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = n % V == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  if (vec)
    activation_kernel_k<T, V><<<grid_for(n / V), 256, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n / V,
                                                             mode, coef, coef2);
  else
    activation_kernel_k<T, 1><<<grid_for(n), 256, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n, mode, coef,
                                                         coef2);
  return cudaGetLastError();
}

// ---- batched 2-D copies: every input of a Concat in one launch (PyTorch's cat kernel,
// CatArrayBatchedCopy, does the same), blockIdx.y picks the copy
constexpr int kBatch2D = 32;
struct Copy2DBatch {
  int n;
  unsigned long long src[kBatch2D], dst[kBatch2D];
  unsigned total[kBatch2D], src_pitch[kBatch2D], dst_pitch[kBatch2D];
  Div32 cols[kBatch2D];
};

template <typename U>
__global__ void batched_copy2d_k(Copy2DBatch b) {
  const int i = blockIdx.y;
  const U* __restrict__ s = reinterpret_cast<const U*>(b.src[i]);
  U* __restrict__ d = reinterpret_cast<U*>(b.dst[i]);
  const unsigned total = b.total[i], sp = b.src_pitch[i], dp = b.dst_pitch[i];
  const Div32 cols = b.cols[i];
  for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < total; e += gridDim.x * blockDim.x) {
    const unsigned r = div32(e, cols), c = e - r * cols.d;
    d[r * dp + c] = s[r * sp + c];
  }
}

}  // namespace

void strided_copy(const void* src, void* dst, std::size_t elem_bytes, const StridedView& v, cudaStream_t s) {
  const StridedPlan p = plan_strided_copy(v, elem_bytes, reinterpret_cast<std::uintptr_t>(src),
                                          reinterpret_cast<std::uintptr_t>(dst));
  if (p.count() <= 0) return;
  switch (p.unit_bytes) {
    case 1: launch_strided_copy<unsigned char>(p, src, dst, s); break;
    case 2: launch_strided_copy<unsigned short>(p, src, dst, s); break;
    case 4: launch_strided_copy<unsigned int>(p, src, dst, s); break;
    case 8: launch_strided_copy<unsigned long long>(p, src, dst, s); break;
    default: launch_strided_copy<uint4>(p, src, dst, s); break;
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

cudaError_t binary_pointwise(const void* a, const void* b, void* y, const int* a_dims, const int* b_dims, int nd,
                             PointwiseOp op, float alpha1, float alpha2, DType t, cudaStream_t s) {
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return cudaErrorInvalidValue;
  return binary_pointwise_typed(a, b, y, a_dims, b_dims, nd, op, alpha1, alpha2, elem_of(t), elem_of(t), s);
}

cudaError_t binary_pointwise_typed(const void* a, const void* b, void* y, const int* a_dims, const int* b_dims,
                                   int nd, PointwiseOp op, float alpha1, float alpha2, ElemType in, ElemType out,
                                   cudaStream_t s) {
  // collapse: drop dims where y has extent 1; merge neighbours where a and b keep their patterns
  long long ext[8];
  bool af[8], bf[8];
  int m = 0;
  unsigned long long n = 1;
  if (nd < 0 || nd > 8) return cudaErrorInvalidValue;
  for (int d = 0; d < nd; ++d) {
    const int yd = a_dims[d] > b_dims[d] ? a_dims[d] : b_dims[d];
    if ((a_dims[d] != yd && a_dims[d] != 1) || (b_dims[d] != yd && b_dims[d] != 1)) return cudaErrorInvalidValue;
    n *= static_cast<unsigned long long>(yd);
    if (yd == 1) continue;
    const bool fa = a_dims[d] == yd, fb = b_dims[d] == yd;
    if (m > 0 && af[m - 1] == fa && bf[m - 1] == fb) {
      ext[m - 1] *= yd;
    } else {
      ext[m] = yd;
      af[m] = fa;
      bf[m] = fb;
      ++m;
    }
  }
  if (n == 0) return cudaSuccess;
  if (n >= 0x7fffffffULL) return cudaErrorInvalidConfiguration;
  if (m == 0) {
    ext[0] = 1;
    af[0] = bf[0] = true;
    m = 1;
  }
  BinaryView v{};
  v.nd = m;
  unsigned long long sa = 1, sb = 1;
  bool a_full = true;
  for (int d = m - 1; d >= 0; --d) {
    v.div[d] = make_div32(static_cast<unsigned>(ext[d]));
    v.a_strides[d] = af[d] ? static_cast<unsigned>(sa) : 0u;
    v.b_strides[d] = bf[d] ? static_cast<unsigned>(sb) : 0u;
    if (af[d]) sa *= static_cast<unsigned long long>(ext[d]);
    if (bf[d]) sb *= static_cast<unsigned long long>(ext[d]);
    a_full = a_full && af[d];
  }
  const unsigned inner = static_cast<unsigned>(ext[m - 1]), cnt = static_cast<unsigned>(n);
  const bool ai = af[m - 1], bi = bf[m - 1];
  switch (in) {
#define BZ_BINARY(E, T) \
  case ElemType::E: return launch_binary_to<T>(out, in, a, b, y, v, cnt, inner, op, alpha1, alpha2, a_full, ai, bi, s);
    BZ_BINARY(F32, float)
    BZ_BINARY(F16, __half)
    BZ_BINARY(BF16, __nv_bfloat16)
    BZ_BINARY(I8, signed char)
    BZ_BINARY(U8, unsigned char)
    BZ_BINARY(I16, short)
    BZ_BINARY(U16, unsigned short)
    BZ_BINARY(I32, int)
    BZ_BINARY(U32, unsigned)
    BZ_BINARY(I64, long long)
    BZ_BINARY(U64, unsigned long long)
#undef BZ_BINARY
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t activation_backward_pointwise(const void* saved, const void* dy, void* dx, std::size_t n, int mode,
                                          float coef, DType t, cudaStream_t s, float coef2) {
  if (n == 0) return cudaSuccess;
  if (t == DType::F16) return launch_activation_grad<__half>(saved, dy, dx, n, mode, coef, coef2, s);
  if (t == DType::BF16) return launch_activation_grad<__nv_bfloat16>(saved, dy, dx, n, mode, coef, coef2, s);
  if (t == DType::F32) return launch_activation_grad<float>(saved, dy, dx, n, mode, coef, coef2, s);
  return cudaErrorInvalidValue;
}

cudaError_t activation_pointwise(const void* x, void* y, std::size_t n, int mode, float coef, DType t, cudaStream_t s,
                                 float coef2) {
  if (n == 0) return cudaSuccess;
  if (t == DType::F16) return launch_activation<__half>(x, y, n, mode, coef, coef2, s);
  if (t == DType::BF16) return launch_activation<__nv_bfloat16>(x, y, n, mode, coef, coef2, s);
  if (t == DType::F32) return launch_activation<float>(x, y, n, mode, coef, coef2, s);
  return cudaErrorInvalidValue;
}

cudaError_t batched_copy2d(const Copy2D* copies, int n, std::size_t elem_bytes, cudaStream_t s) {
  // the unit: the largest of 16, 8, 4, 2 bytes (or the element) dividing every row, pitch and address
  std::size_t u = 16;
  for (; u > elem_bytes; u /= 2) {
    bool ok = u % elem_bytes == 0;
    for (int i = 0; i < n && ok; ++i) {
      const Copy2D& c = copies[i];
      ok = (c.cols * elem_bytes) % u == 0 && (c.src_pitch * elem_bytes) % u == 0 && (c.dst_pitch * elem_bytes) % u == 0 &&
           reinterpret_cast<std::uintptr_t>(c.src) % u == 0 && reinterpret_cast<std::uintptr_t>(c.dst) % u == 0;
    }
    if (ok) break;
  }
  const long long k = static_cast<long long>(u / elem_bytes);
  for (int first = 0; first < n; first += kBatch2D) {
    Copy2DBatch b{};
    b.n = n - first < kBatch2D ? n - first : kBatch2D;
    unsigned long long most = 1;
    for (int j = 0; j < b.n; ++j) {
      const Copy2D& c = copies[first + j];
      const long long cols = c.cols / k, total = c.rows * cols;
      if (c.rows < 0 || c.cols < 0 || total >= 0x7fffffffLL || c.rows * (c.src_pitch / k) >= 0x7fffffffLL ||
          c.rows * (c.dst_pitch / k) >= 0x7fffffffLL)
        return cudaErrorInvalidValue;
      b.src[j] = reinterpret_cast<unsigned long long>(c.src);
      b.dst[j] = reinterpret_cast<unsigned long long>(c.dst);
      b.total[j] = static_cast<unsigned>(total);
      b.src_pitch[j] = static_cast<unsigned>(c.src_pitch / k);
      b.dst_pitch[j] = static_cast<unsigned>(c.dst_pitch / k);
      b.cols[j] = make_div32(static_cast<unsigned>(cols > 0 ? cols : 1));
      if (static_cast<unsigned long long>(total) > most) most = static_cast<unsigned long long>(total);
    }
    const dim3 grid(static_cast<unsigned>(grid_for(most)), static_cast<unsigned>(b.n));
    switch (u) {
      case 1: batched_copy2d_k<unsigned char><<<grid, 256, 0, s>>>(b); break;
      case 2: batched_copy2d_k<unsigned short><<<grid, 256, 0, s>>>(b); break;
      case 4: batched_copy2d_k<unsigned int><<<grid, 256, 0, s>>>(b); break;
      case 8: batched_copy2d_k<unsigned long long><<<grid, 256, 0, s>>>(b); break;
      default: batched_copy2d_k<uint4><<<grid, 256, 0, s>>>(b); break;
    }
  }
  return cudaGetLastError();
}

}  // namespace benanza
