// benanza::unary_kernel's kernels with signed char / unsigned char / short / unsigned short / int / unsigned / long long / unsigned long long output (unary_kernels.cuh:
// one translation unit per output group, compiled in parallel).
#include "unary_kernels.cuh"

namespace benanza::unary_detail {

cudaError_t unary_to_int(UnaryOp op, const void* x, ElemType xt, void* y, ElemType yt, unsigned long long n,
                         const UnaryParams& p, cudaStream_t s) {
  switch (yt) {
    case ElemType::I8: return from_any<signed char>(op, x, xt, y, n, p, s);
    case ElemType::U8: return from_any<unsigned char>(op, x, xt, y, n, p, s);
    case ElemType::I16: return from_any<short>(op, x, xt, y, n, p, s);
    case ElemType::U16: return from_any<unsigned short>(op, x, xt, y, n, p, s);
    case ElemType::I32: return from_any<int>(op, x, xt, y, n, p, s);
    case ElemType::U32: return from_any<unsigned>(op, x, xt, y, n, p, s);
    case ElemType::I64: return from_any<long long>(op, x, xt, y, n, p, s);
    case ElemType::U64: return from_any<unsigned long long>(op, x, xt, y, n, p, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza::unary_detail
