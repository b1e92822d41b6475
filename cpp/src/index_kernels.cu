// benanza's index ops of a mixture of experts' per-expert loop (benanza/index_ops.hpp): NonZero as
// CUB's select of the element indices then a coordinate kernel, integer reductions over rows as CUB's
// segmented reduction.
#include "benanza/index_ops.hpp"

#include <cub/device/device_segmented_reduce.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstdint>

namespace benanza {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t aligned(std::size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

// Element index -> whether x holds a nonzero value there (CUB's select predicate).
template <typename T>
struct IsNonZero {
  const T* x;
  __host__ __device__ bool operator()(long long i) const { return x[i] != T(0); }
};

struct Dims {
  long long d[kNonZeroMaxRank];
};

// y[a, j] = coordinate a of flat index flat[j], for j < *selected (the count CUB wrote).
__global__ void unravel_kernel(const long long* flat, const long long* selected, long long cap, Dims dims, int rank,
                               long long* y) {
  const long long j = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long n = *selected < cap ? *selected : cap;
  if (j >= n) return;
  long long v = flat[j];
  for (int a = rank - 1; a >= 0; --a) {
    y[a * cap + j] = v % dims.d[a];
    v /= dims.d[a];
  }
}

template <typename T>
cudaError_t select_nonzero(void* temp, std::size_t& bytes, const void* x, long long* flat, long long* selected,
                           long long n, cudaStream_t s) {
  thrust::counting_iterator<long long> idx(0);
  return cub::DeviceSelect::If(temp, bytes, idx, flat, selected, n, IsNonZero<T>{static_cast<const T*>(x)}, s);
}

cudaError_t select_any(IndexType type, void* temp, std::size_t& bytes, const void* x, long long* flat,
                       long long* selected, long long n, cudaStream_t s) {
  switch (type) {
    case IndexType::B8: return select_nonzero<std::uint8_t>(temp, bytes, x, flat, selected, n, s);
    case IndexType::I32: return select_nonzero<std::int32_t>(temp, bytes, x, flat, selected, n, s);
    case IndexType::I64: return select_nonzero<long long>(temp, bytes, x, flat, selected, n, s);
    case IndexType::F32: return select_nonzero<float>(temp, bytes, x, flat, selected, n, s);
  }
  return cudaErrorInvalidValue;
}

// Row -> the offset of its first element (CUB's segment begin; row + 1 gives the end).
struct RowStart {
  long long len;
  __host__ __device__ long long operator()(long long r) const { return r * len; }
};

template <typename T>
cudaError_t reduce_rows(void* temp, std::size_t& bytes, const void* x, void* y, long long rows, long long len,
                        IntReduceOp op, cudaStream_t s) {
  thrust::counting_iterator<long long> r(0);
  auto begin = thrust::make_transform_iterator(r, RowStart{len});
  auto end = thrust::make_transform_iterator(r + 1, RowStart{len});
  const T* in = static_cast<const T*>(x);
  T* out = static_cast<T*>(y);
  const int segments = static_cast<int>(rows);
  switch (op) {
    case IntReduceOp::Sum: return cub::DeviceSegmentedReduce::Sum(temp, bytes, in, out, segments, begin, end, s);
    case IntReduceOp::Max: return cub::DeviceSegmentedReduce::Max(temp, bytes, in, out, segments, begin, end, s);
    case IntReduceOp::Min: return cub::DeviceSegmentedReduce::Min(temp, bytes, in, out, segments, begin, end, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t reduce_any(void* temp, std::size_t& bytes, const void* x, void* y, long long rows, long long len,
                       IndexType type, IntReduceOp op, cudaStream_t s) {
  if (type == IndexType::I32) return reduce_rows<std::int32_t>(temp, bytes, x, y, rows, len, op, s);
  if (type == IndexType::I64) return reduce_rows<long long>(temp, bytes, x, y, rows, len, op, s);
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t nonzero_temp_bytes(long long n, IndexType type, std::size_t* bytes) {
  std::size_t cub_bytes = 0;
  const cudaError_t e = select_any(type, nullptr, cub_bytes, nullptr, nullptr, nullptr, n, 0);
  if (e != cudaSuccess) return e;
  *bytes = aligned(cub_bytes) + aligned(sizeof(long long) * static_cast<std::size_t>(n > 0 ? n : 1)) + kAlign;
  return cudaSuccess;
}

cudaError_t nonzero(const void* x, long long n, const int* dims, int rank, IndexType type, long long count, long long* y,
                    void* temp, std::size_t temp_bytes, cudaStream_t s) {
  if (rank < 1 || rank > kNonZeroMaxRank || n < 1) return cudaErrorInvalidValue;
  std::size_t cub_bytes = 0;
  cudaError_t e = select_any(type, nullptr, cub_bytes, nullptr, nullptr, nullptr, n, s);
  if (e != cudaSuccess) return e;
  char* base = static_cast<char*>(temp);
  long long* flat = reinterpret_cast<long long*>(base + aligned(cub_bytes));
  long long* selected = reinterpret_cast<long long*>(base + aligned(cub_bytes) + aligned(sizeof(long long) * n));
  if (aligned(cub_bytes) + aligned(sizeof(long long) * n) + sizeof(long long) > temp_bytes) return cudaErrorInvalidValue;
  e = select_any(type, temp, cub_bytes, x, flat, selected, n, s);
  if (e != cudaSuccess || count < 1) return e;
  Dims d{};
  for (int a = 0; a < rank; ++a) d.d[a] = dims[a];
  const int threads = 256;
  const long long blocks = (count + threads - 1) / threads;
  unravel_kernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(flat, selected, count, d, rank, y);
  return cudaGetLastError();
}

cudaError_t reduce_int_rows_temp_bytes(long long rows, long long len, IndexType type, IntReduceOp op,
                                       std::size_t* bytes) {
  *bytes = 0;
  return reduce_any(nullptr, *bytes, nullptr, nullptr, rows, len, type, op, 0);
}

cudaError_t reduce_int_rows(const void* x, void* y, long long rows, long long len, IndexType type, IntReduceOp op,
                            void* temp, std::size_t temp_bytes, cudaStream_t s) {
  std::size_t bytes = temp_bytes;
  return reduce_any(temp, bytes, x, y, rows, len, type, op, s);
}

}  // namespace benanza
