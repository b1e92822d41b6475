// benanza's ONNX ScatterND / ScatterElements / GatherElements kernels (benanza/scatter.hpp): one
// thread per update (output) element, addressed through scatter_offset; reductions by atomics.
#include "benanza/scatter.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace benanza {
namespace {

__device__ inline float to_f(__half v) { return __half2float(v); }
__device__ inline float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ inline T from_f(float v);
template <> __device__ inline __half from_f<__half>(float v) { return __float2half(v); }
template <> __device__ inline __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16(v); }

template <ScatterReduction R, typename A> __device__ inline A combine(A a, A b) {
  if (R == ScatterReduction::Add) return a + b;
  if (R == ScatterReduction::Mul) return a * b;
  if (R == ScatterReduction::Max) return a > b ? a : b;
  return a < b ? a : b;
}

// A 16-bit float combined through a compare-and-swap of the aligned 32-bit word holding it.
template <ScatterReduction R, typename T> __device__ void cas16(T* at, T v) {
  const std::size_t addr = reinterpret_cast<std::size_t>(at);
  unsigned int* word = reinterpret_cast<unsigned int*>(addr & ~std::size_t(3));
  const unsigned shift = (addr & 2) ? 16u : 0u;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    unsigned short bits = static_cast<unsigned short>((assumed >> shift) & 0xffffu);
    T cur;
    memcpy(&cur, &bits, 2);
    const T nv = from_f<T>(combine<R>(to_f(cur), to_f(v)));
    memcpy(&bits, &nv, 2);
    const unsigned int repl = (assumed & ~(0xffffu << shift)) | (static_cast<unsigned int>(bits) << shift);
    old = atomicCAS(word, assumed, repl);
  } while (assumed != old);
}

template <ScatterReduction R> __device__ void cas32(float* at, float v) {
  unsigned int* w = reinterpret_cast<unsigned int*>(at);
  unsigned int old = *w, assumed;
  do {
    assumed = old;
    old = atomicCAS(w, assumed, __float_as_uint(combine<R>(__uint_as_float(assumed), v)));
  } while (assumed != old);
}

template <ScatterReduction R, typename I> __device__ void cas_int(I* at, I v) {
  using U = typename std::conditional<sizeof(I) == 8, unsigned long long, unsigned int>::type;
  U* w = reinterpret_cast<U*>(at);
  U old = *w, assumed;
  do {
    assumed = old;
    old = atomicCAS(w, assumed, static_cast<U>(combine<R>(static_cast<I>(assumed), v)));
  } while (assumed != old);
}

template <ScatterReduction R> __device__ void apply(float* at, float v) {
  if (R == ScatterReduction::None) *at = v;
  else if (R == ScatterReduction::Add) atomicAdd(at, v);
  else cas32<R>(at, v);
}
template <ScatterReduction R> __device__ void apply(__half* at, __half v) {
  if (R == ScatterReduction::None) *at = v;
  else if (R == ScatterReduction::Add) atomicAdd(at, v);  // native on sm_70+
  else cas16<R>(at, v);
}
template <ScatterReduction R> __device__ void apply(__nv_bfloat16* at, __nv_bfloat16 v) {
  if (R == ScatterReduction::None) *at = v;
  else cas16<R>(at, v);
}
template <ScatterReduction R> __device__ void apply(int* at, int v) {
  if (R == ScatterReduction::None) *at = v;
  else if (R == ScatterReduction::Add) atomicAdd(at, v);
  else if (R == ScatterReduction::Max) atomicMax(at, v);
  else if (R == ScatterReduction::Min) atomicMin(at, v);
  else cas_int<R>(at, v);
}
template <ScatterReduction R> __device__ void apply(long long* at, long long v) {
  if (R == ScatterReduction::None) *at = v;
  else if (R == ScatterReduction::Add)  // two's complement: the same bits as the signed sum
    atomicAdd(reinterpret_cast<unsigned long long*>(at), static_cast<unsigned long long>(v));
  else if (R == ScatterReduction::Max) atomicMax(at, v);
  else if (R == ScatterReduction::Min) atomicMin(at, v);
  else cas_int<R>(at, v);
}

template <typename T, ScatterReduction R>
__global__ void scatter_k(T* __restrict__ data, const long long* __restrict__ idx, const T* __restrict__ upd, long long n,
                          ScatterMap m) {
  for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < n;
       p += static_cast<long long>(gridDim.x) * blockDim.x)
    apply<R>(data + scatter_offset(m, idx, p), upd[p]);
}

template <typename T>
__global__ void gather_k(const T* __restrict__ data, const long long* __restrict__ idx, T* __restrict__ y, long long n,
                         ScatterMap m) {
  for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < n;
       p += static_cast<long long>(gridDim.x) * blockDim.x)
    y[p] = data[scatter_offset(m, idx, p)];
}

unsigned blocks_for(long long n, int threads) {
  const long long want = (n + threads - 1) / threads;
  return static_cast<unsigned>(want < 65535LL * 32 ? want : 65535LL * 32);
}

template <typename T>
cudaError_t scatter_t(void* data, const long long* idx, const void* upd, long long n, const ScatterMap& m,
                      ScatterReduction r, cudaStream_t s) {
  const int th = 256;
  const unsigned bl = blocks_for(n, th);
  T* d = static_cast<T*>(data);
  const T* u = static_cast<const T*>(upd);
  switch (r) {
    case ScatterReduction::None: scatter_k<T, ScatterReduction::None><<<bl, th, 0, s>>>(d, idx, u, n, m); break;
    case ScatterReduction::Add: scatter_k<T, ScatterReduction::Add><<<bl, th, 0, s>>>(d, idx, u, n, m); break;
    case ScatterReduction::Mul: scatter_k<T, ScatterReduction::Mul><<<bl, th, 0, s>>>(d, idx, u, n, m); break;
    case ScatterReduction::Max: scatter_k<T, ScatterReduction::Max><<<bl, th, 0, s>>>(d, idx, u, n, m); break;
    case ScatterReduction::Min: scatter_k<T, ScatterReduction::Min><<<bl, th, 0, s>>>(d, idx, u, n, m); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t gather_t(const void* data, const long long* idx, void* y, long long n, const ScatterMap& m, cudaStream_t s) {
  const int th = 256;
  gather_k<T><<<blocks_for(n, th), th, 0, s>>>(static_cast<const T*>(data), idx, static_cast<T*>(y), n, m);
  return cudaGetLastError();
}

bool valid(const ScatterMap& m, long long n) {
  if (n < 0 || m.rank < 1 || m.rank > kScatterMaxRank) return false;
  if (m.nd) return m.k >= 1 && m.k <= m.rank && m.slice >= 1;
  return m.axis >= 0 && m.axis < m.rank;
}

}  // namespace

cudaError_t scatter_kernel(void* data, const long long* idx, const void* updates, long long n, const ScatterMap& m,
                           ScatterType t, ScatterReduction r, cudaStream_t s) {
  if (!valid(m, n)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  switch (t) {
    case ScatterType::F32: return scatter_t<float>(data, idx, updates, n, m, r, s);
    case ScatterType::F16: return scatter_t<__half>(data, idx, updates, n, m, r, s);
    case ScatterType::BF16: return scatter_t<__nv_bfloat16>(data, idx, updates, n, m, r, s);
    case ScatterType::I32: return scatter_t<int>(data, idx, updates, n, m, r, s);
    case ScatterType::I64: return scatter_t<long long>(data, idx, updates, n, m, r, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t gather_elements_kernel(const void* data, const long long* idx, void* y, long long n, const ScatterMap& m,
                                   ScatterType t, cudaStream_t s) {
  if (!valid(m, n) || m.nd) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  switch (t) {
    case ScatterType::F32: return gather_t<float>(data, idx, y, n, m, s);
    case ScatterType::F16: return gather_t<__half>(data, idx, y, n, m, s);
    case ScatterType::BF16: return gather_t<__nv_bfloat16>(data, idx, y, n, m, s);
    case ScatterType::I32: return gather_t<int>(data, idx, y, n, m, s);
    case ScatterType::I64: return gather_t<long long>(data, idx, y, n, m, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza
