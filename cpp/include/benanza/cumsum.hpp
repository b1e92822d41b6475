// ONNX CumSum (opset 11/14; PyTorch's torch.cumsum): the running sum of x along one axis, inclusive
// or `exclusive` (y[0] = 0), forward or `reverse` (from the last element back). cuDNN and cuBLAS
// have no scan; benanza times CUB's (cub::DeviceScan::InclusiveSumByKey / ExclusiveSumByKey, the
// CUDA toolkit's) where the axis is innermost, and its own column kernel where it is not
// (cumsum_kernels.cu), beside PyTorch's cumsum.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#if defined(__CUDACC__)
#define BENANZA_CUMSUM_HD __host__ __device__
#else
#define BENANZA_CUMSUM_HD
#endif

namespace benanza {

// The scanned element type: float storage (summed in float, as PyTorch's cumsum accumulates half
// and bfloat16) or 32/64-bit integers (two's complement sums: the same bits for signed and unsigned).
enum class ScanType : int { F32, F16, BF16, I32, I64 };

// x viewed as (outer, len, inner), packed, the axis of extent len: the memory offset (elements) of
// scan position p in [0, outer * inner * len), ordered (column, step) with column = o * inner + i and
// step t in [0, len) in scan order (t counts from the end of the axis when `reverse`). The one index
// map of both implementations; tests/test_cumsum.py checks a scan through it against numpy.
inline BENANZA_CUMSUM_HD long long cumsum_offset(long long p, long long len, long long inner, bool reverse) {
  const long long t = p % len, col = p / len;
  const long long o = col / inner, i = col % inner;
  const long long l = reverse ? len - 1 - t : t;
  return (o * len + l) * inner + i;
}

// The temporary storage (bytes) cumsum_kernel needs for this scan: CUB's for inner == 1 (its size
// query), 0 otherwise.
cudaError_t cumsum_temp_bytes(long long outer, long long len, long long inner, bool exclusive, bool reverse,
                              ScanType type, std::size_t* bytes);

// y = cumsum(x) over (outer, len, inner), inclusive or exclusive, forward or reverse, in `type`.
// inner == 1: cub::DeviceScan::{Inclusive,Exclusive}SumByKey with key = p / len (one segment per row)
// in `temp` (at least cumsum_temp_bytes; never null: pass any buffer when that is 0). inner > 1: one
// thread per column summing sequentially along the axis (the threads of a warp read neighbouring i:
// coalesced), no temporary storage used.
cudaError_t cumsum_kernel(const void* x, void* y, long long outer, long long len, long long inner, bool exclusive,
                          bool reverse, ScanType type, void* temp, std::size_t temp_bytes, cudaStream_t s);

}  // namespace benanza

#undef BENANZA_CUMSUM_HD
