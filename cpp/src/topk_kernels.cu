// benanza's ONNX TopK (benanza/topk.hpp): CUB's stable sort of each row's (key, index) pairs with the
// first k copied out, and a warp kernel for short rows (topk_key / topk_consider / topk_before).
#include "benanza/topk.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

namespace benanza {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <typename T> __device__ unsigned long long bits_of(T v);
template <> __device__ unsigned long long bits_of<float>(float v) { return __float_as_uint(v); }
template <> __device__ unsigned long long bits_of<__half>(__half v) { return __half_as_ushort(v); }
template <> __device__ unsigned long long bits_of<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
template <> __device__ unsigned long long bits_of<int>(int v) { return static_cast<unsigned int>(v); }
template <> __device__ unsigned long long bits_of<long long>(long long v) { return static_cast<unsigned long long>(v); }

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
  SortBuffers sb{};
  cudaError_t e = cudaErrorInvalidValue;
  switch (type) {
    case TopKType::F32: e = sort_buffers<float>(rows, len, k, largest, sb); break;
    case TopKType::F16: e = sort_buffers<__half>(rows, len, k, largest, sb); break;
    case TopKType::BF16: e = sort_buffers<__nv_bfloat16>(rows, len, k, largest, sb); break;
    case TopKType::I32: e = sort_buffers<int>(rows, len, k, largest, sb); break;
    case TopKType::I64: e = sort_buffers<long long>(rows, len, k, largest, sb); break;
  }
  *bytes = sb.total();
  return e;
}

cudaError_t topk_sort_kernel(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                             bool largest, TopKType type, void* temp, std::size_t temp_bytes, cudaStream_t s) {
  if (!valid(rows, len, k)) return cudaErrorInvalidValue;
  if (rows * k == 0) return cudaSuccess;
  if (temp == nullptr) return cudaErrorInvalidValue;
  switch (type) {
    case TopKType::F32: return by_sort<float>(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::F16: return by_sort<__half>(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::BF16: return by_sort<__nv_bfloat16>(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::I32: return by_sort<int>(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
    case TopKType::I64: return by_sort<long long>(x, values, indices, rows, len, k, largest, temp, temp_bytes, s);
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
