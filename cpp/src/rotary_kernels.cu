// benanza::rotary_kernel (rotary.hpp): rotary position embedding, one thread per pair of rotated elements
// and one per pass-through element, float32 math whatever the storage type (ONNX RotaryEmbedding's
// formula, onnx/reference/ops/op_rotary_embedding.py). Simple and memory-bound on purpose: it gives every
// rotary layer a valid measurement whatever cuDNN's rope supports.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "benanza/kernel_util.cuh"

#include "benanza/rotary.hpp"

namespace benanza {

namespace {

// Work item i of a head row: i < rotary_dim / 2 is pair i, the rest the pass-through element
// rotary_dim + (i - rotary_dim / 2). Items per row: head_dim - rotary_dim / 2.
template <typename T>
__global__ void rotary_k(const T* __restrict__ x, const T* __restrict__ cs, const T* __restrict__ sn,
                         const long long* __restrict__ ids, T* __restrict__ y, RotarySpec r, long long items) {
  const long long per_row = r.head_dim - r.rotary_dim / 2;
  const long long half = r.rotary_dim / 2;
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < items;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = i % per_row;
    const long long row = i / per_row;  // (b, h, s) in bhsd order, (b, s, h) in bshd order
    const long long si = r.bshd ? (row / r.heads) % r.seq : row % r.seq;
    const long long bi = r.bshd ? row / (r.heads * r.seq) : row / (r.seq * r.heads);
    const long long base = row * r.head_dim;
    if (j >= half) {
      const long long e = base + r.rotary_dim + (j - half);
      y[e] = x[e];
      continue;
    }
    const long long crow = r.positions ? ids[bi * r.seq + si] : (r.cache_batch > 1 ? bi * r.seq + si : si);
    const float c = to_f<T>(cs[crow * half + j]), s = to_f<T>(sn[crow * half + j]);
    const long long e1 = base + (r.interleaved ? 2 * j : j), e2 = base + (r.interleaved ? 2 * j + 1 : j + half);
    const float x1 = to_f<T>(x[e1]), x2 = to_f<T>(x[e2]);
    y[e1] = from_f<T>(x1 * c - x2 * s);
    y[e2] = from_f<T>(x2 * c + x1 * s);
  }
}

__global__ void positions_k(long long* ids, long long n, long long seq, long long positions) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    ids[i] = (i % seq) % positions;
}

unsigned grid_of(long long items, int threads) {
  const long long g = (items + threads - 1) / threads;
  return static_cast<unsigned>(g < 65535LL * 32 ? g : 65535LL * 32);
}

}  // namespace

cudaError_t rotary_kernel(const void* x, const void* cos, const void* sin, const long long* position_ids, void* y,
                          const RotarySpec& r, DType t, cudaStream_t s) {
  if (r.rotary_dim <= 0 || r.rotary_dim % 2 || r.rotary_dim > r.head_dim || (r.positions > 0 && !position_ids))
    return cudaErrorInvalidValue;
  const long long items = r.batch * r.heads * r.seq * (r.head_dim - r.rotary_dim / 2);
  if (items <= 0) return cudaSuccess;
  constexpr int threads = 256;
  const unsigned g = grid_of(items, threads);
  if (t == DType::F16)
    rotary_k<__half><<<g, threads, 0, s>>>(static_cast<const __half*>(x), static_cast<const __half*>(cos),
                                           static_cast<const __half*>(sin), position_ids, static_cast<__half*>(y), r,
                                           items);
  else if (t == DType::BF16)
    rotary_k<__nv_bfloat16><<<g, threads, 0, s>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(cos),
        static_cast<const __nv_bfloat16*>(sin), position_ids, static_cast<__nv_bfloat16*>(y), r, items);
  else
    rotary_k<float><<<g, threads, 0, s>>>(static_cast<const float*>(x), static_cast<const float*>(cos),
                                          static_cast<const float*>(sin), position_ids, static_cast<float*>(y), r,
                                          items);
  return cudaGetLastError();
}

cudaError_t rotary_positions(long long* position_ids, long long batch, long long seq, long long positions,
                             cudaStream_t s) {
  const long long n = batch * seq;
  if (n <= 0) return cudaSuccess;
  if (seq <= 0 || positions <= 0) return cudaErrorInvalidValue;
  positions_k<<<grid_of(n, 256), 256, 0, s>>>(position_ids, n, seq, positions);
  return cudaGetLastError();
}

}  // namespace benanza
