// benanza's ONNX TopK (benanza/topk.hpp): the dispatch of CUB's sort path (topk_sort.cuh, one translation
// unit per key type: topk_sort_f32.cu ... topk_sort_i64.cu) and a warp kernel for short rows (topk_key /
// topk_consider / topk_before).
#include "benanza/topk.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace benanza {
namespace topk_sort_detail {
#define BENANZA_TOPK_SORT_DECLARE(SUFFIX)                                                                       \
  cudaError_t topk_sort_bytes_##SUFFIX(long long rows, long long len, long long k, bool largest,               \
                                       std::size_t* bytes);                                                   \
  cudaError_t topk_sort_run_##SUFFIX(const void* x, void* values, long long* indices, long long rows,          \
                                     long long len, long long k, bool largest, void* temp,                    \
                                     std::size_t temp_bytes, cudaStream_t s);
BENANZA_TOPK_SORT_DECLARE(f32)
BENANZA_TOPK_SORT_DECLARE(f16)
BENANZA_TOPK_SORT_DECLARE(bf16)
BENANZA_TOPK_SORT_DECLARE(i32)
BENANZA_TOPK_SORT_DECLARE(i64)
#undef BENANZA_TOPK_SORT_DECLARE
}  // namespace topk_sort_detail

namespace {

template <typename T> __device__ unsigned long long bits_of(T v);
template <> __device__ unsigned long long bits_of<float>(float v) { return __float_as_uint(v); }
template <> __device__ unsigned long long bits_of<__half>(__half v) { return __half_as_ushort(v); }
template <> __device__ unsigned long long bits_of<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
template <> __device__ unsigned long long bits_of<int>(int v) { return static_cast<unsigned int>(v); }
template <> __device__ unsigned long long bits_of<long long>(long long v) { return static_cast<unsigned long long>(v); }

unsigned grid_for(long long n, int threads) {
  const long long want = (n + threads - 1) / threads;
  return static_cast<unsigned>(want < 65535LL * 32 ? want : 65535LL * 32);
}

// PER elements per lane (len <= 32 * PER), one warp per row, grid-stride over rows.
template <typename T, int PER>
__global__ void __launch_bounds__(256) warp_k(const T* __restrict__ x, T* __restrict__ values,
                                              long long* __restrict__ indices, long long rows, int len, int k,
                                              bool largest, TopKType type) {
  const int lane = threadIdx.x & 31;
  const long long warps = (static_cast<long long>(gridDim.x) * blockDim.x) >> 5;
  for (long long row = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) >> 5; row < rows;
       row += warps) {
    const T* xr = x + row * len;
    unsigned long long key[PER];
#pragma unroll
    for (int t = 0; t < PER; ++t) {
      const int j = lane + 32 * t;
      key[t] = j < len ? topk_key(bits_of<T>(xr[j]), type, largest) : 0;
    }
    TopKPick prev{0, -1}, mine{0, -1};
    for (int q = 0; q < k; ++q) {
      TopKPick best{0, -1};
#pragma unroll
      for (int t = 0; t < PER; ++t) {
        const int j = lane + 32 * t;
        if (j < len) best = topk_consider(best, prev, TopKPick{key[t], j});
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const TopKPick o{__shfl_xor_sync(0xffffffffu, best.key, off), __shfl_xor_sync(0xffffffffu, best.index, off)};
        if (topk_before(o, best)) best = o;
      }
      if (lane == q) mine = best;
      prev = best;
    }
    if (lane < k) {
      values[row * k + lane] = xr[mine.index];
      indices[row * k + lane] = mine.index;
    }
  }
}

template <typename T, int PER>
cudaError_t launch_warp(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                        bool largest, TopKType type, cudaStream_t s) {
  const int threads = 256;  // 8 rows per block
  warp_k<T, PER><<<grid_for(rows * 32, threads), threads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(values),
                                                                  indices, rows, static_cast<int>(len),
                                                                  static_cast<int>(k), largest, type);
  return cudaGetLastError();
}

template <typename T>
cudaError_t by_warp(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                    bool largest, TopKType type, cudaStream_t s) {
  if (len <= 32) return launch_warp<T, 1>(x, values, indices, rows, len, k, largest, type, s);
  if (len <= 64) return launch_warp<T, 2>(x, values, indices, rows, len, k, largest, type, s);
  if (len <= 128) return launch_warp<T, 4>(x, values, indices, rows, len, k, largest, type, s);
  if (len <= 256) return launch_warp<T, 8>(x, values, indices, rows, len, k, largest, type, s);
  if (len <= 512) return launch_warp<T, 16>(x, values, indices, rows, len, k, largest, type, s);
  return launch_warp<T, 32>(x, values, indices, rows, len, k, largest, type, s);
}

bool valid(long long rows, long long len, long long k) { return rows >= 0 && len >= 0 && k >= 0 && k <= len; }

}  // namespace

cudaError_t topk_sort_temp_bytes(long long rows, long long len, long long k, bool largest, TopKType type,
                                 std::size_t* bytes) {
  if (bytes == nullptr || !valid(rows, len, k)) return cudaErrorInvalidValue;
  *bytes = 0;
  if (rows * k == 0) return cudaSuccess;
  using namespace topk_sort_detail;
  switch (type) {
    case TopKType::F32: return topk_sort_bytes_f32(rows, len, k, largest, bytes);
    case TopKType::F16: return topk_sort_bytes_f16(rows, len, k, largest, bytes);
    case TopKType::BF16: return topk_sort_bytes_bf16(rows, len, k, largest, bytes);
    case TopKType::I32: return topk_sort_bytes_i32(rows, len, k, largest, bytes);
    case TopKType::I64: return topk_sort_bytes_i64(rows, len, k, largest, bytes);
  }
  return cudaErrorInvalidValue;
}

cudaError_t topk_sort_kernel(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                             bool largest, TopKType type, void* temp, std::size_t temp_bytes, cudaStream_t s) {
  if (!valid(rows, len, k)) return cudaErrorInvalidValue;
  if (rows * k == 0) return cudaSuccess;
  if (temp == nullptr) return cudaErrorInvalidValue;
  using namespace topk_sort_detail;
  switch (type) {
    case TopKType::F32: return topk_sort_run_f32(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::F16: return topk_sort_run_f16(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::BF16: return topk_sort_run_bf16(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::I32: return topk_sort_run_i32(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::I64: return topk_sort_run_i64(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t topk_warp_kernel(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                             bool largest, TopKType type, cudaStream_t s) {
  if (rows < 0 || !topk_warp_fits(len, k)) return cudaErrorInvalidValue;
  if (rows * k == 0) return cudaSuccess;
  switch (type) {
    case TopKType::F32: return by_warp<float>(x, values, indices, rows, len, k, largest, type, s);
    case TopKType::F16: return by_warp<__half>(x, values, indices, rows, len, k, largest, type, s);
    case TopKType::BF16: return by_warp<__nv_bfloat16>(x, values, indices, rows, len, k, largest, type, s);
    case TopKType::I32: return by_warp<int>(x, values, indices, rows, len, k, largest, type, s);
    case TopKType::I64: return by_warp<long long>(x, values, indices, rows, len, k, largest, type, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace benanza
