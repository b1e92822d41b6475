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

__device__ __forceinline__ float binary_op(int op, float a, float b) {
  switch (op) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return fminf(a, b);
    default: return fmaxf(a, b);
  }
}

// y = op(alpha1 * a, alpha2 * b) over a's collapsed row-major index space; b's offset from the
// per-dim strides (0 where b broadcasts); V elements per step along the innermost dim
struct BinaryView {
  int nd;
  Div32 div[6];
  unsigned b_strides[6];
};

template <typename T, int V>
__global__ void binary_kernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y, BinaryView v,
                              unsigned nvec, int op, float alpha1, float alpha2, bool b_inner) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += gridDim.x * blockDim.x) {
    const unsigned e = i * V;
    unsigned r = e, bo = 0;
#pragma unroll
    for (int d = 5; d >= 0; --d) {
      if (d < v.nd) {
        const unsigned q = div32(r, v.div[d]);
        bo += (r - q * v.div[d].d) * v.b_strides[d];
        r = q;
      }
    }
    const Vec<T, V> av = *reinterpret_cast<const Vec<T, V>*>(a + e);
    Vec<T, V> out;
    if (V > 1 && b_inner) {
      const Vec<T, V> bv = *reinterpret_cast<const Vec<T, V>*>(b + bo);
#pragma unroll
      for (int k = 0; k < V; ++k) out.v[k] = from_f<T>(binary_op(op, alpha1 * to_f(av.v[k]), alpha2 * to_f(bv.v[k])));
    } else {
      const float bs = alpha2 * to_f(b[bo]);
#pragma unroll
      for (int k = 0; k < V; ++k) out.v[k] = from_f<T>(binary_op(op, alpha1 * to_f(av.v[k]), bs));
    }
    *reinterpret_cast<Vec<T, V>*>(y + e) = out;
  }
}

__device__ __forceinline__ float activation_op(int mode, float x, float coef) {
  switch (mode) {
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
                                    float coef) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    const Vec<T, V> xv = reinterpret_cast<const Vec<T, V>*>(x)[i];
    Vec<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = from_f<T>(activation_op(mode, to_f(xv.v[k]), coef));
    reinterpret_cast<Vec<T, V>*>(y)[i] = out;
  }
}

template <typename T>
cudaError_t launch_binary(const void* a, const void* b, void* y, const BinaryView& v, unsigned n, unsigned inner,
                          bool b_inner, int op, float alpha1, float alpha2, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const auto* pa = static_cast<const T*>(a);
  const auto* pb = static_cast<const T*>(b);
  auto* py = static_cast<T*>(y);
  const bool vec = inner % V == 0 && reinterpret_cast<std::uintptr_t>(a) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(y) % 16 == 0 &&
                   (!b_inner || reinterpret_cast<std::uintptr_t>(b) % 16 == 0);
  if (vec)
    binary_kernel<T, V><<<grid_for(n / V), 256, 0, s>>>(pa, pb, py, v, n / V, op, alpha1, alpha2, b_inner);
  else
    binary_kernel<T, 1><<<grid_for(n), 256, 0, s>>>(pa, pb, py, v, n, op, alpha1, alpha2, b_inner);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_activation(const void* x, void* y, unsigned long long n, int mode, float coef, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const bool vec = n % V == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  if (vec)
    activation_kernel_k<T, V><<<grid_for(n / V), 256, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n / V,
                                                             mode, coef);
  else
    activation_kernel_k<T, 1><<<grid_for(n), 256, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n, mode, coef);
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
  // collapse: drop dims of extent 1; merge neighbours that b keeps or broadcasts alike
  long long ext[6];
  bool full[6];
  int m = 0;
  unsigned long long n = 1;
  for (int d = 0; d < nd && d < 6; ++d) {
    if (b_dims[d] != a_dims[d] && b_dims[d] != 1) return cudaErrorInvalidValue;
    n *= static_cast<unsigned long long>(a_dims[d]);
    if (a_dims[d] == 1) continue;
    const bool f = b_dims[d] == a_dims[d];
    if (m > 0 && full[m - 1] == f) {
      ext[m - 1] *= a_dims[d];
    } else {
      ext[m] = a_dims[d];
      full[m] = f;
      ++m;
    }
  }
  if (n == 0) return cudaSuccess;
  if (n >= 0x7fffffffULL) return cudaErrorInvalidConfiguration;
  if (m == 0) {
    ext[0] = 1;
    full[0] = true;
    m = 1;
  }
  BinaryView v{};
  v.nd = m;
  unsigned long long stride = 1;
  for (int d = m - 1; d >= 0; --d) {
    v.div[d] = make_div32(static_cast<unsigned>(ext[d]));
    v.b_strides[d] = full[d] ? static_cast<unsigned>(stride) : 0u;
    if (full[d]) stride *= static_cast<unsigned long long>(ext[d]);
  }
  const unsigned inner = static_cast<unsigned>(ext[m - 1]);
  const bool b_inner = full[m - 1];
  const int o = static_cast<int>(op);
  if (t == DType::F16) return launch_binary<__half>(a, b, y, v, static_cast<unsigned>(n), inner, b_inner, o, alpha1, alpha2, s);
  if (t == DType::BF16)
    return launch_binary<__nv_bfloat16>(a, b, y, v, static_cast<unsigned>(n), inner, b_inner, o, alpha1, alpha2, s);
  if (t == DType::F32) return launch_binary<float>(a, b, y, v, static_cast<unsigned>(n), inner, b_inner, o, alpha1, alpha2, s);
  return cudaErrorInvalidValue;
}

cudaError_t activation_pointwise(const void* x, void* y, std::size_t n, int mode, float coef, DType t, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (t == DType::F16) return launch_activation<__half>(x, y, n, mode, coef, s);
  if (t == DType::BF16) return launch_activation<__nv_bfloat16>(x, y, n, mode, coef, s);
  if (t == DType::F32) return launch_activation<float>(x, y, n, mode, coef, s);
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
