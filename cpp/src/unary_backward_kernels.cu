// benanza::unary_backward_kernel (transformer_backward.hpp): the data gradient of the unary
// elementwise ops in a training step, dx = dy * f'(.), one pointwise pass as PyTorch's backward
// kernels run it (16-byte vectors, float32 math). Each derivative is the formula of PyTorch's
// tools/autograd/derivatives.yaml (or of the ATen backward kernel it names), from the tensor it
// saves: y for exp, sqrt, reciprocal and tan; none for neg; x for the others. One translation unit
// of its own (three storage types), so the forward's unary TUs keep their compile times. Also
// benanza::swiglu_backward_kernel: both gradients of SwiGLU's gate silu(a) * b in one pass.
#include "unary_kernels.cuh"
#include "benanza/transformer_backward.hpp"

namespace benanza {
namespace {
using namespace unary_detail;

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)
constexpr float kTwoInvSqrtPi = 1.12837916709551257f;  // 2 / sqrt(pi)
constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// dy * f'(.) of each op; s: the saved tensor (see above), g: dy. Formulas: derivatives.yaml unless said.
__device__ __forceinline__ float unary_grad_op(UnaryOp op, float s, float g, const UnaryParams& p) {
  switch (op) {
    case UnaryOp::GELU:  // gelu_backward (GeluKernel.cu, approximate none): Phi(x) + x phi(x)
      return g * (0.5f * (1.0f + erff(s * kInvSqrt2)) + s * kInvSqrt2Pi * expf(-0.5f * s * s));
    case UnaryOp::GELU_TANH: {  // gelu_backward (approximate tanh), GeluKernel.cu's formula
      const float x2 = s * s;
      const float t = tanhf(kSqrt2OverPi * (s + 0.044715f * x2 * s));
      return g * (0.5f * (1.0f + t) + 0.5f * s * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x2));
    }
    case UnaryOp::ERF: return g * kTwoInvSqrtPi * expf(-s * s);  // 2/sqrt(pi) exp(-x^2) grad
    case UnaryOp::EXP: return g * s;                             // grad * result
    case UnaryOp::LOG: return g / s;                             // grad / self
    case UnaryOp::SQRT: return g / (2.0f * s);                   // grad / (2 result)
    case UnaryOp::RECIPROCAL: return -g * s * s;                 // -grad * result^2
    case UnaryOp::NEG: return -g;                                // -grad
    case UnaryOp::ABS: return g * static_cast<float>((s > 0.0f) - (s < 0.0f));  // grad * sgn(self)
    case UnaryOp::POW:  // pow_backward: exponent 0 -> zeros, else grad * e * x^(e - 1)
      return p.exponent == 0.0f ? 0.0f : p.exponent == 2.0f ? 2.0f * g * s : g * p.exponent * powf(s, p.exponent - 1.0f);
    case UnaryOp::ACOS: return -g * rsqrtf(1.0f - s * s);       // grad * -(1 - x^2)^-1/2
    case UnaryOp::ACOSH: return g * rsqrtf(s * s - 1.0f);       // grad * (x^2 - 1)^-1/2
    case UnaryOp::ASIN: return g * rsqrtf(1.0f - s * s);        // grad * (1 - x^2)^-1/2
    case UnaryOp::ASINH: return g * rsqrtf(s * s + 1.0f);       // grad * (x^2 + 1)^-1/2
    case UnaryOp::ATAN: return g / (s * s + 1.0f);              // grad / (x^2 + 1)
    case UnaryOp::ATANH: return g / (1.0f - s * s);             // grad / (1 - x^2)
    case UnaryOp::COS: return -g * sinf(s);                     // grad * -sin(x)
    case UnaryOp::COSH: return g * sinhf(s);                    // grad * sinh(x)
    case UnaryOp::SIN: return g * cosf(s);                      // grad * cos(x)
    case UnaryOp::SINH: return g * coshf(s);                    // grad * cosh(x)
    case UnaryOp::TAN: return g * (1.0f + s * s);               // grad * (1 + result^2)
    case UnaryOp::HARD_SWISH:  // hardswish_backward (Activation.cpp)
      return s < -3.0f ? 0.0f : s <= 3.0f ? g * (s / 3.0f + 0.5f) : g;
    case UnaryOp::MISH: {  // mish_backward: tanh(softplus(x)) + x sigmoid(x) (1 - tanh^2(softplus(x)))
      const float ts = tanhf(softplus(s));
      return g * (ts + s * sigmoidf(s) * (1.0f - ts * ts));
    }
    case UnaryOp::SELU:  // elu_backward(grad, alpha, scale = gamma, input_scale 1, self)
      return s <= 0.0f ? g * p.beta * p.alpha * expf(s) : g * p.beta;
    case UnaryOp::CELU:  // elu_backward(grad, alpha, 1, 1 / alpha, self)
      return s <= 0.0f ? g * expf(s / p.alpha) : g;
    case UnaryOp::SOFTPLUS:  // softplus_backward (beta 1, threshold 20)
      return s > 20.0f ? g : g * sigmoidf(s);
    case UnaryOp::SOFTSIGN: {  // d/dx x / (1 + |x|) = 1 / (1 + |x|)^2
      const float d = 1.0f + fabsf(s);
      return g / (d * d);
    }
    case UnaryOp::THRESHOLDED_RELU: return s <= p.alpha ? 0.0f : g;  // threshold_backward(grad, self, alpha)
    case UnaryOp::SHRINK: return s >= -p.alpha && s <= p.alpha ? 0.0f : g;  // soft/hardshrink_backward
    case UnaryOp::CLIP: return s >= p.alpha && s <= p.beta ? g : 0.0f;     // clamp_backward
    case UnaryOp::SWISH: {  // silu_backward for alpha 1: sigmoid(a x) (1 + a x (1 - sigmoid(a x)))
      const float sg = sigmoidf(p.alpha * s);
      return g * sg * (1.0f + p.alpha * s * (1.0f - sg));
    }
    default: return 0.0f;  // not reached: has_unary_backward is checked first
  }
}

template <typename T, int V>
__global__ void unary_grad_k(UnaryOp op, const T* __restrict__ saved, const T* __restrict__ dy, T* __restrict__ dx,
                             unsigned long long nvec, unsigned long long n, UnaryParams p) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long t0 = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  for (unsigned long long i = t0; i < nvec; i += stride) {
    const UVec<T, V> gv = reinterpret_cast<const UVec<T, V>*>(dy)[i];
    UVec<T, V> sv;
    if (saved) sv = reinterpret_cast<const UVec<T, V>*>(saved)[i];
    UVec<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k)
      out.v[k] = store<T>(unary_grad_op(op, saved ? static_cast<float>(sv.v[k]) : 0.0f, static_cast<float>(gv.v[k]), p));
    reinterpret_cast<UVec<T, V>*>(dx)[i] = out;
  }
  for (unsigned long long j = nvec * V + t0; j < n; j += stride)
    dx[j] = store<T>(unary_grad_op(op, saved ? static_cast<float>(saved[j]) : 0.0f, static_cast<float>(dy[j]), p));
}

template <typename T>
cudaError_t launch_grad(UnaryOp op, const void* saved, const void* dy, void* dx, unsigned long long n,
                        const UnaryParams& p, cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const auto aligned = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
  const auto* ps = static_cast<const T*>(saved);
  const auto* pg = static_cast<const T*>(dy);
  auto* pd = static_cast<T*>(dx);
  if ((!saved || aligned(saved)) && aligned(dy) && aligned(dx))
    unary_grad_k<T, V><<<grid_for(n / V + 1), kThreads, 0, s>>>(op, ps, pg, pd, n / V, n, p);
  else
    unary_grad_k<T, 1><<<grid_for(n), kThreads, 0, s>>>(op, ps, pg, pd, n, n, p);
  return cudaGetLastError();
}

// SwiGLU's gate y = silu(a) * b: da = dy * b * sig * (1 + a * (1 - sig)), db = dy * a * sig.
__device__ __forceinline__ void swiglu_grad(float a, float b, float g, float& da, float& db) {
  const float sg = sigmoidf(a);
  da = g * b * sg * (1.0f + a * (1.0f - sg));
  db = g * a * sg;
}

template <typename T, int V>
__global__ void swiglu_grad_k(const T* __restrict__ a, const T* __restrict__ b, const T* __restrict__ dy,
                              T* __restrict__ da, T* __restrict__ db, unsigned long long nvec, unsigned long long n) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long t0 = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  for (unsigned long long i = t0; i < nvec; i += stride) {
    const UVec<T, V> av = reinterpret_cast<const UVec<T, V>*>(a)[i];
    const UVec<T, V> bv = reinterpret_cast<const UVec<T, V>*>(b)[i];
    const UVec<T, V> gv = reinterpret_cast<const UVec<T, V>*>(dy)[i];
    UVec<T, V> dav, dbv;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float x, y;
      swiglu_grad(static_cast<float>(av.v[k]), static_cast<float>(bv.v[k]), static_cast<float>(gv.v[k]), x, y);
      dav.v[k] = store<T>(x);
      dbv.v[k] = store<T>(y);
    }
    reinterpret_cast<UVec<T, V>*>(da)[i] = dav;
    reinterpret_cast<UVec<T, V>*>(db)[i] = dbv;
  }
  for (unsigned long long j = nvec * V + t0; j < n; j += stride) {
    float x, y;
    swiglu_grad(static_cast<float>(a[j]), static_cast<float>(b[j]), static_cast<float>(dy[j]), x, y);
    da[j] = store<T>(x);
    db[j] = store<T>(y);
  }
}

template <typename T>
cudaError_t launch_swiglu(const void* a, const void* b, const void* dy, void* da, void* db, unsigned long long n,
                          cudaStream_t s) {
  constexpr int V = 16 / sizeof(T);
  const auto aligned = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
  const auto* pa = static_cast<const T*>(a);
  const auto* pb = static_cast<const T*>(b);
  const auto* pg = static_cast<const T*>(dy);
  auto* pda = static_cast<T*>(da);
  auto* pdb = static_cast<T*>(db);
  if (aligned(a) && aligned(b) && aligned(dy) && aligned(da) && aligned(db))
    swiglu_grad_k<T, V><<<grid_for(n / V + 1), kThreads, 0, s>>>(pa, pb, pg, pda, pdb, n / V, n);
  else
    swiglu_grad_k<T, 1><<<grid_for(n), kThreads, 0, s>>>(pa, pb, pg, pda, pdb, n, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t swiglu_backward_kernel(const void* a, const void* b, const void* dy, void* da, void* db, std::size_t n,
                                   DType t, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (t) {
    case DType::F32: return launch_swiglu<float>(a, b, dy, da, db, n, s);
    case DType::F16: return launch_swiglu<__half>(a, b, dy, da, db, n, s);
    case DType::BF16: return launch_swiglu<__nv_bfloat16>(a, b, dy, da, db, n, s);
    default: return cudaErrorInvalidValue;
  }
}

bool has_unary_backward(UnaryOp op) {
  switch (op) {
    case UnaryOp::CAST: case UnaryOp::CAST_BOOL: case UnaryOp::CEIL: case UnaryOp::FLOOR: case UnaryOp::ROUND:
    case UnaryOp::SIGN: case UnaryOp::IS_INF: case UnaryOp::IS_NAN: case UnaryOp::NOT: case UnaryOp::BITWISE_NOT:
      return false;
    default: return true;
  }
}

cudaError_t unary_backward_kernel(UnaryOp op, const void* saved, const void* dy, void* dx, std::size_t n,
                                  const UnaryParams& p, DType t, cudaStream_t s) {
  if (!has_unary_backward(op)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (op == UnaryOp::NEG) saved = nullptr;  // -dy: the forward tensors are not read
  switch (t) {
    case DType::F32: return launch_grad<float>(op, saved, dy, dx, n, p, s);
    case DType::F16: return launch_grad<__half>(op, saved, dy, dx, n, p, s);
    case DType::BF16: return launch_grad<__nv_bfloat16>(op, saved, dy, dx, n, p, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza
