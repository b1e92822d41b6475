// benanza::unary_kernel (transformer.hpp): every unary elementwise operator ONNX defines, as a
// framework's vectorized elementwise loop runs it (PyTorch's TensorIterator kernels: 16-byte loads
// and stores, float32 math for float storage, integer math for integer storage). Formulas from the
// ONNX operator spec; float ops in float32 whatever the storage type.
#include "unary_kernels.cuh"

namespace benanza {

const char* unary_name(UnaryOp op) {
  static const char* const names[] = {
      "gelu", "gelu_tanh", "erf", "exp", "log", "sqrt", "reciprocal", "neg", "abs", "pow", "cast",
      "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "floor", "hard_swish", "is_inf",
      "is_nan", "mish", "not", "round", "selu", "sign", "sin", "sinh", "softplus", "softsign", "tan",
      "thresholded_relu", "celu", "shrink", "bitwise_not", "clip", "swish", "cast_bool"};
  const int i = static_cast<int>(op);
  return i >= 0 && i < static_cast<int>(sizeof names / sizeof names[0]) ? names[i] : "?";
}

namespace {

cudaError_t to_type(UnaryOp op, const void* x, ElemType xt, void* y, ElemType yt, unsigned long long n,
                    const UnaryParams& p, cudaStream_t s) {
  using namespace unary_detail;
  switch (yt) {
    case ElemType::F32: return unary_to_f32(op, x, xt, y, n, p, s);
    case ElemType::F16: return unary_to_f16(op, x, xt, y, n, p, s);
    case ElemType::BF16: return unary_to_bf16(op, x, xt, y, n, p, s);
    default: return unary_to_int(op, x, xt, y, yt, n, p, s);
  }
}

}  // namespace

cudaError_t unary_kernel(UnaryOp op, const void* x, ElemType xt, void* y, ElemType yt, std::size_t n,
                         const UnaryParams& p, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const bool cast = op == UnaryOp::CAST || op == UnaryOp::CAST_BOOL;
  const bool to_bool = yt == ElemType::I8 && is_float(xt) && (op == UnaryOp::IS_NAN || op == UnaryOp::IS_INF);
  if (!cast && !to_bool && xt != yt) return cudaErrorInvalidValue;  // the op's math keeps the type
  if (!cast && !to_bool && xt == ElemType::F64) return cudaErrorInvalidValue;  // float64: Cast only
  return to_type(op, x, xt, y, yt, n, p, s);
}

}  // namespace benanza
