// benanza's ONNX Trilu kernel (benanza/trilu.hpp): one thread per output element, grid-stride.
#include "benanza/trilu.hpp"

#include <cstdint>

namespace benanza {
namespace {

template <typename U>
__global__ void trilu_k(const U* __restrict__ x, U* __restrict__ y, long long total, long long rows, long long cols,
                        long long k, bool upper) {
  for (long long n = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; n < total;
       n += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = n % cols, i = (n / cols) % rows;
    y[n] = trilu_keep(i, j, k, upper) ? x[n] : U(0);
  }
}

template <typename U>
cudaError_t launch(const void* x, void* y, long long total, long long rows, long long cols, long long k, bool upper,
                   cudaStream_t s) {
  const int threads = 256;
  const long long want = (total + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65535LL * 32 ? want : 65535LL * 32);
  trilu_k<U><<<blocks, threads, 0, s>>>(static_cast<const U*>(x), static_cast<U*>(y), total, rows, cols, k, upper);
  return cudaGetLastError();
}

}  // namespace

cudaError_t trilu_kernel(const void* x, void* y, long long batch, long long rows, long long cols, long long k,
                         bool upper, std::size_t elem_bytes, cudaStream_t s) {
  const long long total = batch * rows * cols;
  if (total == 0) return cudaSuccess;
  switch (elem_bytes) {
    case 1: return launch<std::uint8_t>(x, y, total, rows, cols, k, upper, s);
    case 2: return launch<std::uint16_t>(x, y, total, rows, cols, k, upper, s);
    case 4: return launch<std::uint32_t>(x, y, total, rows, cols, k, upper, s);
    case 8: return launch<std::uint64_t>(x, y, total, rows, cols, k, upper, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza
