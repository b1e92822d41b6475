// benanza's ONNX TopK by sort (benanza/topk.hpp): CUB's stable segmented sort of each row's (key, index)
// pairs with the first k copied out. Included by one translation unit per key type (topk_sort_f32.cu ...
// topk_sort_i64.cu), each instantiating CUB's sort for its type alone: the five instantiations compile in
// parallel instead of in one 40-second translation unit, the longest of the harness build
// (BENANZA_TOPK_SORT_TYPE below; topk_kernels.cu dispatches on TopKType).
#pragma once
#include "benanza/topk.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

namespace benanza {
namespace {


constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }


// Segment r begins at r * len (CUB's begin offsets; the end offsets are these shifted by one).
struct RowStart {
  long long len;
  __host__ __device__ long long operator()(long long r) const { return r * len; }
};

__global__ void iota_k(long long* idx, long long n, long long len) {
  for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < n;
       p += static_cast<long long>(gridDim.x) * blockDim.x)
    idx[p] = p % len;
}

template <typename T>
__global__ void first_k(const T* __restrict__ keys, const long long* __restrict__ idx, T* __restrict__ values,
                        long long* __restrict__ indices, long long rows, long long len, long long k) {
  const long long n = rows * k;
  for (long long p = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; p < n;
       p += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long src = (p / k) * len + p % k;
    values[p] = keys[src];
    indices[p] = idx[src];
  }
}

unsigned grid_for(long long n, int threads) {
  const long long want = (n + threads - 1) / threads;
  return static_cast<unsigned>(want < 65535LL * 32 ? want : 65535LL * 32);
}

// CUB's sort of (keys_in, vals_in) into (keys_out, vals_out); temp == nullptr: the size query.
template <typename T>
cudaError_t cub_sort(void* temp, std::size_t& temp_bytes, const T* keys_in, T* keys_out, const long long* vals_in,
                     long long* vals_out, long long rows, long long len, bool largest, cudaStream_t s) {
  // one segment per row, one row included (the segmented sort takes a long segment through its radix path):
  // one CUB instantiation per key type and direction, not two (each costs the harness build tens of seconds)
  const long long n = rows * len;
  thrust::counting_iterator<long long> r(0);
  auto begin = thrust::make_transform_iterator(r, RowStart{len});
  auto end = thrust::make_transform_iterator(r + 1, RowStart{len});
  if (largest)
    return cub::DeviceSegmentedSort::StableSortPairsDescending(temp, temp_bytes, keys_in, keys_out, vals_in, vals_out, n,
                                                               rows, begin, end, s);
  return cub::DeviceSegmentedSort::StableSortPairs(temp, temp_bytes, keys_in, keys_out, vals_in, vals_out, n, rows, begin,
                                                   end, s);
}

// The buffers topk_sort_kernel carves out of temp: (sorted keys, iota indices, sorted indices, CUB's).
struct SortBuffers {
  std::size_t keys, iota, sorted, cub;
  std::size_t total() const { return keys + iota + sorted + cub; }
};

template <typename T>
cudaError_t sort_buffers(long long rows, long long len, long long k, bool largest, SortBuffers& b) {
  const std::size_t n = static_cast<std::size_t>(rows * len);
  const bool whole = k == len;  // the sort writes the outputs itself
  b.keys = whole ? 0 : aligned(n * sizeof(T));
  b.iota = aligned(n * sizeof(long long));
  b.sorted = whole ? 0 : aligned(n * sizeof(long long));
  b.cub = 0;
  const cudaError_t e = cub_sort<T>(nullptr, b.cub, nullptr, nullptr, nullptr, nullptr, rows, len, largest, nullptr);
  b.cub = aligned(b.cub);
  return e;
}

template <typename T>
cudaError_t by_sort(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                    bool largest, void* temp, std::size_t temp_bytes, cudaStream_t s) {
  SortBuffers sb{};
  cudaError_t e = sort_buffers<T>(rows, len, k, largest, sb);
  if (e != cudaSuccess) return e;
  if (temp_bytes < sb.total()) return cudaErrorInvalidValue;
  char* p = static_cast<char*>(temp);
  const bool whole = k == len;
  T* keys = whole ? static_cast<T*>(values) : reinterpret_cast<T*>(p);
  long long* iota = reinterpret_cast<long long*>(p + sb.keys);
  long long* sorted = whole ? indices : reinterpret_cast<long long*>(p + sb.keys + sb.iota);
  void* cub_temp = p + sb.keys + sb.iota + sb.sorted;
  const long long n = rows * len;
  iota_k<<<grid_for(n, 256), 256, 0, s>>>(iota, n, len);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  std::size_t cub_bytes = sb.cub;
  e = cub_sort<T>(cub_temp, cub_bytes, static_cast<const T*>(x), keys, iota, sorted, rows, len, largest, s);
  if (e != cudaSuccess || whole) return e;
  first_k<T><<<grid_for(rows * k, 256), 256, 0, s>>>(keys, sorted, static_cast<T*>(values), indices, rows, len, k);
  return cudaGetLastError();
}

}  // namespace
}  // namespace benanza

// The sort path of one key type T, named SUFFIX: topk_sort_bytes_SUFFIX (the temp bytes the sort needs) and
// topk_sort_run_SUFFIX (the sort and the copy of the first k), in benanza::topk_sort_detail (topk_kernels.cu).
#define BENANZA_TOPK_SORT_TYPE(T, SUFFIX)                                                                     \
  namespace benanza::topk_sort_detail {                                                                     \
  cudaError_t topk_sort_bytes_##SUFFIX(long long rows, long long len, long long k, bool largest,             \
                                       std::size_t* bytes) {                                                \
    SortBuffers sb{};                                                                                       \
    const cudaError_t e = sort_buffers<T>(rows, len, k, largest, sb);                                       \
    *bytes = sb.total();                                                                                    \
    return e;                                                                                               \
  }                                                                                                         \
  cudaError_t topk_sort_run_##SUFFIX(const void* x, void* values, long long* indices, long long rows,        \
                                     long long len, long long k, bool largest, void* temp,                  \
                                     std::size_t temp_bytes, cudaStream_t s) {                              \
    return by_sort<T>(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);                      \
  }                                                                                                         \
  }
