// benanza's ONNX CumSum (benanza/cumsum.hpp): CUB's segmented scan (DeviceScan::*SumByKey) over rows
// where the axis is innermost, a column kernel otherwise. Both read and write through cumsum_offset.
#include "benanza/cumsum.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <iterator>

namespace benanza {
namespace {

// The accumulator of a stored type: float for float storage, the integer itself otherwise.
template <typename T> struct Acc { using type = T; };
template <> struct Acc<__half> { using type = float; };
template <> struct Acc<__nv_bfloat16> { using type = float; };

template <typename A, typename T> __host__ __device__ A to_acc(T v) { return static_cast<A>(v); }
template <> __host__ __device__ float to_acc<float, __half>(__half v) { return __half2float(v); }
template <> __host__ __device__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T, typename A> __host__ __device__ T from_acc(A v) { return static_cast<T>(v); }
template <> __host__ __device__ __half from_acc<__half, float>(float v) { return __float2half(v); }
template <> __host__ __device__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v) { return __float2bfloat16(v); }

// Scan position -> the segment (row) it belongs to: CUB's key.
struct RowOf {
  long long len;
  __host__ __device__ long long operator()(long long p) const { return p / len; }
};

// Scan position -> x at its offset, as the accumulator type (CUB's input).
template <typename T>
struct Load {
  const T* x;
  long long len;
  bool reverse;
  __host__ __device__ typename Acc<T>::type operator()(long long p) const {
    return to_acc<typename Acc<T>::type>(x[cumsum_offset(p, len, 1, reverse)]);
  }
};

// An output iterator over scan positions that stores a value at y[cumsum_offset(p)].
template <typename T>
struct ScanOut {
  using A = typename Acc<T>::type;
  using iterator_category = std::random_access_iterator_tag;
  using value_type = A;
  using difference_type = long long;
  using pointer = void;
  struct reference {
    T* at;
    __host__ __device__ reference& operator=(A v) {
      *at = from_acc<T>(v);
      return *this;
    }
  };
  T* y;
  long long len;
  bool reverse;
  long long p;
  __host__ __device__ reference operator*() const { return reference{y + cumsum_offset(p, len, 1, reverse)}; }
  __host__ __device__ reference operator[](difference_type n) const {
    return reference{y + cumsum_offset(p + n, len, 1, reverse)};
  }
  __host__ __device__ ScanOut operator+(difference_type n) const { return ScanOut{y, len, reverse, p + n}; }
  __host__ __device__ ScanOut& operator+=(difference_type n) {
    p += n;
    return *this;
  }
  __host__ __device__ ScanOut& operator++() {
    ++p;
    return *this;
  }
  __host__ __device__ difference_type operator-(const ScanOut& o) const { return p - o.p; }
};

// CUB's segmented scan; temp == nullptr: only the temporary storage size is written (CUB's convention).
template <typename T>
cudaError_t rows(const void* x, void* y, long long outer, long long len, bool exclusive, bool reverse, void* temp,
                 std::size_t& temp_bytes, cudaStream_t s) {
  thrust::counting_iterator<long long> pos(0);
  auto keys = thrust::make_transform_iterator(pos, RowOf{len});
  auto in = thrust::make_transform_iterator(pos, Load<T>{static_cast<const T*>(x), len, reverse});
  ScanOut<T> out{static_cast<T*>(y), len, reverse, 0};
  const long long n = outer * len;
  if (exclusive)
    return cub::DeviceScan::ExclusiveSumByKey(temp, temp_bytes, keys, in, out, n, cuda::std::equal_to<>{}, s);
  return cub::DeviceScan::InclusiveSumByKey(temp, temp_bytes, keys, in, out, n, cuda::std::equal_to<>{}, s);
}

template <typename T>
__global__ void columns_k(const T* __restrict__ x, T* __restrict__ y, long long cols, long long len, long long inner,
                          bool exclusive, bool reverse) {
  using A = typename Acc<T>::type;
  for (long long c = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<long long>(gridDim.x) * blockDim.x) {
    A sum = A(0);
    for (long long t = 0; t < len; ++t) {
      const long long off = cumsum_offset(c * len + t, len, inner, reverse);
      const A v = to_acc<A>(x[off]);
      if (exclusive) {
        y[off] = from_acc<T>(sum);
        sum += v;
      } else {
        sum += v;
        y[off] = from_acc<T>(sum);
      }
    }
  }
}

template <typename T>
cudaError_t columns(const void* x, void* y, long long outer, long long len, long long inner, bool exclusive,
                    bool reverse, cudaStream_t s) {
  const long long cols = outer * inner;
  const int threads = 256;
  const long long want = (cols + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65535LL * 32 ? want : 65535LL * 32);
  columns_k<T><<<blocks, threads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), cols, len, inner, exclusive,
                                          reverse);
  return cudaGetLastError();
}

// temp == nullptr: the size query; otherwise the scan.
template <typename T>
cudaError_t scan(const void* x, void* y, long long outer, long long len, long long inner, bool exclusive, bool reverse,
                 void* temp, std::size_t& temp_bytes, cudaStream_t s) {
  if (inner == 1) return rows<T>(x, y, outer, len, exclusive, reverse, temp, temp_bytes, s);
  if (temp == nullptr) {
    temp_bytes = 0;
    return cudaSuccess;
  }
  return columns<T>(x, y, outer, len, inner, exclusive, reverse, s);
}

cudaError_t dispatch(const void* x, void* y, long long outer, long long len, long long inner, bool exclusive,
                     bool reverse, ScanType type, void* temp, std::size_t& temp_bytes, cudaStream_t s) {
  switch (type) {
    case ScanType::F32: return scan<float>(x, y, outer, len, inner, exclusive, reverse, temp, temp_bytes, s);
    case ScanType::F16: return scan<__half>(x, y, outer, len, inner, exclusive, reverse, temp, temp_bytes, s);
    case ScanType::BF16: return scan<__nv_bfloat16>(x, y, outer, len, inner, exclusive, reverse, temp, temp_bytes, s);
    case ScanType::I32: return scan<int>(x, y, outer, len, inner, exclusive, reverse, temp, temp_bytes, s);
    case ScanType::I64: return scan<long long>(x, y, outer, len, inner, exclusive, reverse, temp, temp_bytes, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t cumsum_temp_bytes(long long outer, long long len, long long inner, bool exclusive, bool reverse,
                              ScanType type, std::size_t* bytes) {
  if (bytes == nullptr || outer < 0 || len < 0 || inner < 1) return cudaErrorInvalidValue;
  *bytes = 0;
  if (outer * len * inner == 0) return cudaSuccess;
  return dispatch(nullptr, nullptr, outer, len, inner, exclusive, reverse, type, nullptr, *bytes, nullptr);
}

cudaError_t cumsum_kernel(const void* x, void* y, long long outer, long long len, long long inner, bool exclusive,
                          bool reverse, ScanType type, void* temp, std::size_t temp_bytes, cudaStream_t s) {
  if (outer < 0 || len < 0 || inner < 1) return cudaErrorInvalidValue;
  if (outer * len * inner == 0) return cudaSuccess;
  if (temp == nullptr) return cudaErrorInvalidValue;  // a null temp would make CUB only query its size
  return dispatch(x, y, outer, len, inner, exclusive, reverse, type, temp, temp_bytes, s);
}

}  // namespace benanza
