// benanza::unary_kernel's kernels with __half output (unary_kernels.cuh:
// one translation unit per output group, compiled in parallel).
#include "unary_kernels.cuh"

namespace benanza::unary_detail {

cudaError_t unary_to_f16(UnaryOp op, const void* x, ElemType xt, void* y, unsigned long long n, const UnaryParams& p,
                         cudaStream_t s) {
  return from_any<__half>(op, x, xt, y, n, p, s);
}

}  // namespace benanza::unary_detail
