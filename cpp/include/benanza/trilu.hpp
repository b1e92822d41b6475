// ONNX Trilu (opset 14; PyTorch's torch.triu / torch.tril): the upper or lower triangle of each
// (rows x cols) matrix of the last two dims, the rest set to zero. cuDNN and cuBLAS have no such
// call (cuBLAS's triangular routines multiply or solve), so benanza times its own kernel
// (trilu_kernels.cu) beside PyTorch's triu/tril.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#if defined(__CUDACC__)
#define BENANZA_TRILU_HD __host__ __device__
#else
#define BENANZA_TRILU_HD
#endif

namespace benanza {

// Whether element (i, j) of a matrix is kept: upper: j - i >= k (numpy's triu(m, k)); lower:
// j - i <= k (tril(m, k)); ONNX Trilu's definition (the k-th diagonal and above / below).
inline BENANZA_TRILU_HD bool trilu_keep(long long i, long long j, long long k, bool upper) {
  return upper ? j - i >= k : j - i <= k;
}

// y = trilu(x) over `batch` matrices of rows x cols packed one after another, `elem_bytes` (1, 2, 4
// or 8) per element: one thread per element of y, which reads x only where the element is kept and
// writes zero bits elsewhere (0 in every float, integer and bool type).
cudaError_t trilu_kernel(const void* x, void* y, long long batch, long long rows, long long cols, long long k,
                         bool upper, std::size_t elem_bytes, cudaStream_t s);

}  // namespace benanza

#undef BENANZA_TRILU_HD
