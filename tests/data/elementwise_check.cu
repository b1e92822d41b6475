// GPU check of the harness's generic elementwise kernels against a CPU reference (ONNX operator
// spec formulas, in double for float data and 64-bit integers for integer data):
//   * binary_pointwise_typed (cpp/src/kernels.cu): every binary op on fp32/fp16/bf16 (Sub, Div,
//     Mean, Pow, Mod, FMod, PRelu, the comparisons with a bool output), on every integer type (the
//     arithmetic, Mod/FMod, bitwise ops, BitShift on unsigned types, comparisons) and on bool (And,
//     Or, Xor, Equal), with both operands broadcast, one broadcast, a scalar, and odd inner sizes
//     (vectorized and scalar paths);
//   * unary_kernel (cpp/src/unary_kernels.cu): every float op in fp32/fp16/bf16 (IsNaN and IsInf on
//     inputs holding NaN and infinities, bool out; Clip, Swish; Cast to bool and to int32),
//     Abs/Neg/Sign/BitwiseNot on integers, Not on bool, and Cast from every integer type (to
//     fp32, fp16, int32 and bool), on vectorizable and odd sizes.
// Used by tests/test_elementwise_gpu.py. Prints one line per case: "ok NAME max_err" or
// "bad NAME at I: got G want W"; exits non-zero on a mismatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "benanza/harness.hpp"
#include "benanza/transformer.hpp"

namespace {
using namespace benanza;

template <typename T>
constexpr bool kFloat = std::is_floating_point<T>::value || std::is_same<T, __half>::value ||
                        std::is_same<T, __nv_bfloat16>::value;

double uniform(unsigned long long i, unsigned seed) {
  unsigned long long z = i * 0x9e3779b97f4a7c15ULL + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return static_cast<double>((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
}

// n values of T uniform in [lo, hi) (integer types, or `integers`: their floor)
template <typename T>
std::vector<T> values(std::size_t n, double lo, double hi, unsigned seed, bool integers = false) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x = lo + (hi - lo) * uniform(i, seed);
    if constexpr (kFloat<T>)
      v[i] = static_cast<T>(static_cast<float>(integers ? std::floor(x) : x));
    else
      v[i] = static_cast<T>(std::floor(x));
  }
  return v;
}

template <typename T>
double as_double(T v) {
  if constexpr (kFloat<T>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

double ref_float(PointwiseOp op, double a, double b) {
  switch (op) {
    case PointwiseOp::Add: return a + b;
    case PointwiseOp::Sub: return a - b;
    case PointwiseOp::Mul: return a * b;
    case PointwiseOp::Div: return a / b;
    case PointwiseOp::Min: return std::fmin(a, b);
    case PointwiseOp::Max: return std::fmax(a, b);
    case PointwiseOp::Mean: return 0.5 * (a + b);
    case PointwiseOp::Pow: return std::pow(a, b);
    case PointwiseOp::FMod: return std::fmod(a, b);
    case PointwiseOp::Mod: {  // floored, the quotient rounded as float32 computes it
      const float q = std::floor(static_cast<float>(a) / static_cast<float>(b));
      return a - static_cast<double>(q) * b;
    }
    case PointwiseOp::PRelu: return a < 0 ? a * b : a;
    case PointwiseOp::SwiGlu: return a / (1.0 + std::exp(-a)) * b;
    case PointwiseOp::Equal: return a == b;
    case PointwiseOp::Less: return a < b;
    case PointwiseOp::LessOrEqual: return a <= b;
    case PointwiseOp::Greater: return a > b;
    case PointwiseOp::GreaterOrEqual: return a >= b;
    default: return NAN;
  }
}

template <typename C>
C ref_int(PointwiseOp op, C a, C b) {
  switch (op) {
    case PointwiseOp::Add: return a + b;
    case PointwiseOp::Sub: return a - b;
    case PointwiseOp::Mul: return a * b;
    case PointwiseOp::Div: return b ? a / b : 0;
    case PointwiseOp::Min: return a < b ? a : b;
    case PointwiseOp::Max: return a > b ? a : b;
    case PointwiseOp::FMod: return b ? a % b : 0;
    case PointwiseOp::Mod: {
      if (!b) return 0;
      C r = a % b;
      if (std::is_signed<C>::value && r != 0 && ((r < C(0)) != (b < C(0)))) r += b;
      return r;
    }
    case PointwiseOp::Equal: return a == b;
    case PointwiseOp::Less: return a < b;
    case PointwiseOp::LessOrEqual: return a <= b;
    case PointwiseOp::Greater: return a > b;
    case PointwiseOp::GreaterOrEqual: return a >= b;
    case PointwiseOp::And: return a && b;
    case PointwiseOp::Or: return a || b;
    case PointwiseOp::Xor: return (a != 0) != (b != 0);
    case PointwiseOp::BitAnd: return a & b;
    case PointwiseOp::BitOr: return a | b;
    case PointwiseOp::BitXor: return a ^ b;
    case PointwiseOp::ShiftLeft: return b >= 64 ? 0 : a << b;
    case PointwiseOp::ShiftRight: return b >= 64 ? 0 : a >> b;
    default: return 0;
  }
}

template <typename T>
T* upload(const std::vector<T>& h) {
  T* d = nullptr;
  cudaMalloc(&d, h.size() * sizeof(T) + 16);
  cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

template <typename T>
std::vector<T> download(const T* d, std::size_t n) {
  std::vector<T> h(n);
  cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
  return h;
}

bool report(const std::string& name, cudaError_t e, std::size_t bad, double got, double want, double worst) {
  const cudaError_t sync = cudaDeviceSynchronize();
  if (e != cudaSuccess || sync != cudaSuccess) {
    std::printf("bad %s: %s / %s\n", name.c_str(), cudaGetErrorString(e), cudaGetErrorString(sync));
    return false;
  }
  if (bad != static_cast<std::size_t>(-1)) {
    std::printf("bad %s at %zu: got %.9g want %.9g\n", name.c_str(), bad, got, want);
    return false;
  }
  std::printf("ok %s %.3g\n", name.c_str(), worst);
  return true;
}

// err of got against want: relative to max(1, |want|); NaN matches NaN, infinities must be equal
double error_of(double got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(want) || std::isinf(got)) return got == want ? 0 : INFINITY;
  return std::fabs(got - want) / std::fmax(1.0, std::fabs(want));
}

struct Shapes {
  const char* name;
  std::vector<int> a, b;
};

const std::vector<Shapes>& shapes() {
  static const std::vector<Shapes> s = {
      {"same", {3, 5, 64}, {3, 5, 64}},
      {"both-bcast", {4, 1, 32}, {1, 6, 32}},
      {"outer-product", {5, 1}, {1, 7}},
      {"scalar", {2, 3, 40}, {1, 1, 1}},
      {"a-bcast", {1, 16, 1, 1}, {2, 16, 3, 5}},
      {"odd", {3, 7}, {3, 7}},
  };
  return s;
}

template <typename T, typename TY>
bool binary_case(const std::string& name, ElemType in, ElemType out, PointwiseOp op, const Shapes& sh, double alo,
                 double ahi, double blo, double bhi, double tol, bool integers = false) {
  const int nd = static_cast<int>(sh.a.size());
  std::vector<int> yd(nd);
  std::size_t na = 1, nb = 1, ny = 1;
  for (int d = 0; d < nd; ++d) {
    yd[d] = sh.a[d] > sh.b[d] ? sh.a[d] : sh.b[d];
    na *= sh.a[d];
    nb *= sh.b[d];
    ny *= yd[d];
  }
  const auto a = values<T>(na, alo, ahi, 1, integers), b = values<T>(nb, blo, bhi, 2, integers);
  T *da = upload(a), *db = upload(b);
  TY* dy = nullptr;
  cudaMalloc(&dy, ny * sizeof(TY));
  const cudaError_t e = binary_pointwise_typed(da, db, dy, sh.a.data(), sh.b.data(), nd, op, 1.0f, 1.0f, in, out, nullptr);
  const auto got = download(dy, ny);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dy);
  std::size_t bad = static_cast<std::size_t>(-1);
  double worst = 0, bg = 0, bw = 0;
  for (std::size_t i = 0; i < ny && bad == static_cast<std::size_t>(-1); ++i) {
    std::size_t r = i, ao = 0, bo = 0, as = 1, bs = 1;
    for (int d = nd - 1; d >= 0; --d) {
      const std::size_t c = r % yd[d];
      r /= yd[d];
      if (sh.a[d] != 1) ao += c * as;
      if (sh.b[d] != 1) bo += c * bs;
      as *= sh.a[d];
      bs *= sh.b[d];
    }
    double want;
    if constexpr (kFloat<T>) {
      want = ref_float(op, as_double(a[ao]), as_double(b[bo]));
    } else {
      using C = typename std::conditional<std::is_signed<T>::value, long long, unsigned long long>::type;
      want = as_double(static_cast<TY>(ref_int<C>(op, static_cast<C>(a[ao]), static_cast<C>(b[bo]))));
    }
    const double g = as_double(got[i]), err = error_of(g, want);
    if (!(err <= tol)) {
      bad = i;
      bg = g;
      bw = want;
    }
    worst = std::fmax(worst, err);
  }
  return report(name + "-" + sh.name, e, bad, bg, bw, worst);
}

template <typename T>
bool float_binaries(const char* type, ElemType et, double tol) {
  struct Op {
    const char* name;
    PointwiseOp op;
    double alo, ahi, blo, bhi;
  };
  const Op ops[] = {{"sub", PointwiseOp::Sub, -1, 1, 0.5, 1.5},      {"div", PointwiseOp::Div, -1, 1, 0.5, 1.5},
                    {"mean", PointwiseOp::Mean, -1, 1, -1, 1},       {"pow", PointwiseOp::Pow, 0.5, 1.5, -1, 1},
                    {"fmod", PointwiseOp::FMod, -3, 3, 0.5, 1.5},    {"mod", PointwiseOp::Mod, -3, 3, 0.5, 1.5},
                    {"prelu", PointwiseOp::PRelu, -1, 1, 0, 0.5},    {"max", PointwiseOp::Max, -1, 1, -1, 1},
                    {"swiglu", PointwiseOp::SwiGlu, -4, 4, -1, 1}};
  const Op cmps[] = {{"equal", PointwiseOp::Equal, -2, 2, -2, 2},    {"less", PointwiseOp::Less, -1, 1, -1, 1},
                     {"less_equal", PointwiseOp::LessOrEqual, -2, 2, -2, 2},
                     {"greater", PointwiseOp::Greater, -1, 1, -1, 1},
                     {"greater_equal", PointwiseOp::GreaterOrEqual, -2, 2, -2, 2}};
  bool ok = true;
  for (const Shapes& sh : shapes()) {
    for (const Op& o : ops)
      ok &= binary_case<T, T>(std::string(o.name) + "-" + type, et, et, o.op, sh, o.alo, o.ahi, o.blo, o.bhi, tol);
    for (const Op& o : cmps) {  // random values, and small integers in the float type (equal values occur)
      ok &= binary_case<T, signed char>(std::string(o.name) + "-" + type + "-bool", et, ElemType::I8, o.op, sh, o.alo,
                                        o.ahi, o.blo, o.bhi, 0);
      ok &= binary_case<T, signed char>(std::string(o.name) + "-" + type + "-bool-integers", et, ElemType::I8, o.op, sh,
                                        o.alo, o.ahi, o.blo, o.bhi, 0, true);
    }
  }
  return ok;
}

template <typename T>
bool int_binaries(const char* type, ElemType et) {
  const bool u = !std::is_signed<T>::value;
  const double lo = u ? 0 : -100, hi = 100;
  struct Op {
    const char* name;
    PointwiseOp op;
  };
  const Op ops[] = {{"add", PointwiseOp::Add},          {"sub", PointwiseOp::Sub},       {"mul", PointwiseOp::Mul},
                    {"div", PointwiseOp::Div},          {"mod", PointwiseOp::Mod},       {"fmod", PointwiseOp::FMod},
                    {"min", PointwiseOp::Min},          {"bitwise_and", PointwiseOp::BitAnd},
                    {"bitwise_or", PointwiseOp::BitOr}, {"bitwise_xor", PointwiseOp::BitXor}};
  bool ok = true;
  for (const Shapes& sh : shapes()) {
    for (const Op& o : ops)  // b in [-100, 100) (signed) holds 0: division and modulo by 0 give 0
      ok &= binary_case<T, T>(std::string(o.name) + "-" + type, et, et, o.op, sh, lo, hi, lo, hi, 0);
    ok &= binary_case<T, signed char>(std::string("less-") + type + "-bool", et, ElemType::I8, PointwiseOp::Less, sh,
                                      lo, hi, lo, hi, 0);
    ok &= binary_case<T, signed char>(std::string("equal-") + type + "-bool", et, ElemType::I8, PointwiseOp::Equal, sh,
                                      0, 4, 0, 4, 0);
    if (u) {
      ok &= binary_case<T, T>(std::string("shift_left-") + type, et, et, PointwiseOp::ShiftLeft, sh, 0, 100, 0, 10, 0);
      ok &= binary_case<T, T>(std::string("shift_right-") + type, et, et, PointwiseOp::ShiftRight, sh, 0, 100, 0, 10, 0);
    }
  }
  return ok;
}

bool bool_binaries() {
  bool ok = true;
  const std::pair<const char*, PointwiseOp> ops[] = {{"and", PointwiseOp::And}, {"or", PointwiseOp::Or},
                                                     {"xor", PointwiseOp::Xor}, {"equal", PointwiseOp::Equal}};
  for (const Shapes& sh : shapes())
    for (const auto& o : ops)
      ok &= binary_case<signed char, signed char>(std::string(o.first) + "-bool", ElemType::I8, ElemType::I8, o.second,
                                                  sh, 0, 2, 0, 2, 0);
  return ok;
}

double ref_unary(UnaryOp op, double x, const UnaryParams& p) {
  const double sp = std::log1p(std::exp(x));
  switch (op) {
    case UnaryOp::GELU: return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case UnaryOp::GELU_TANH: return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case UnaryOp::ERF: return std::erf(x);
    case UnaryOp::EXP: return std::exp(x);
    case UnaryOp::LOG: return std::log(x);
    case UnaryOp::SQRT: return std::sqrt(x);
    case UnaryOp::RECIPROCAL: return 1 / x;
    case UnaryOp::NEG: return -x;
    case UnaryOp::ABS: return std::fabs(x);
    case UnaryOp::POW: return std::pow(x, static_cast<double>(p.exponent));
    case UnaryOp::CAST: return x;
    case UnaryOp::ACOS: return std::acos(x);
    case UnaryOp::ACOSH: return std::acosh(x);
    case UnaryOp::ASIN: return std::asin(x);
    case UnaryOp::ASINH: return std::asinh(x);
    case UnaryOp::ATAN: return std::atan(x);
    case UnaryOp::ATANH: return std::atanh(x);
    case UnaryOp::CEIL: return std::ceil(x);
    case UnaryOp::COS: return std::cos(x);
    case UnaryOp::COSH: return std::cosh(x);
    case UnaryOp::FLOOR: return std::floor(x);
    case UnaryOp::HARD_SWISH: return x * std::fmin(std::fmax(x / 6 + 0.5, 0.0), 1.0);
    case UnaryOp::IS_INF: return std::isinf(x) && ((x < 0 && p.alpha != 0) || (x > 0 && p.beta != 0));
    case UnaryOp::IS_NAN: return std::isnan(x);
    case UnaryOp::MISH: return x * std::tanh(sp);
    case UnaryOp::NOT: return x == 0;
    case UnaryOp::ROUND: return std::nearbyint(x);  // half to even (default rounding mode)
    case UnaryOp::SELU: return x > 0 ? p.beta * x : p.beta * (p.alpha * std::exp(x) - p.alpha);
    case UnaryOp::SIGN: return (x > 0) - (x < 0);
    case UnaryOp::SIN: return std::sin(x);
    case UnaryOp::SINH: return std::sinh(x);
    case UnaryOp::SOFTPLUS: return sp;
    case UnaryOp::SOFTSIGN: return x / (1 + std::fabs(x));
    case UnaryOp::TAN: return std::tan(x);
    case UnaryOp::THRESHOLDED_RELU: return x > p.alpha ? x : 0;
    case UnaryOp::CELU: return std::fmax(0.0, x) + std::fmin(0.0, p.alpha * (std::exp(x / p.alpha) - 1));
    case UnaryOp::SHRINK: return x < -p.alpha ? x + p.beta : x > p.alpha ? x - p.beta : 0;
    case UnaryOp::CLIP: return std::fmin(std::fmax(x, static_cast<double>(p.alpha)), static_cast<double>(p.beta));
    case UnaryOp::SWISH: return x / (1 + std::exp(-p.alpha * x));
    case UnaryOp::CAST_BOOL: return x != 0;
    default: return NAN;
  }
}

template <typename T, typename TY>
bool unary_case(const std::string& name, ElemType xt, ElemType yt, UnaryOp op, const UnaryParams& p, double lo, double hi,
                std::size_t n, double tol, bool specials = false, bool integers = false) {
  auto x = values<T>(n, lo, hi, 3, integers);
  if constexpr (kFloat<T>)
    if (specials)  // NaN, +-inf and finite values around them
      for (std::size_t i = 0; i < n; i += 5)
        x[i] = static_cast<T>(i % 15 == 0 ? NAN : i % 15 == 5 ? INFINITY : -INFINITY);
  T* dx = upload(x);
  TY* dy = nullptr;
  cudaMalloc(&dy, n * sizeof(TY) + 16);
  const cudaError_t e = unary_kernel(op, dx, xt, dy, yt, n, p, nullptr);
  const auto got = download(dy, n);
  cudaFree(dx);
  cudaFree(dy);
  std::size_t bad = static_cast<std::size_t>(-1);
  double worst = 0, bg = 0, bw = 0;
  for (std::size_t i = 0; i < n && bad == static_cast<std::size_t>(-1); ++i) {
    double want;
    const double xd = as_double(x[i]);
    if constexpr (kFloat<T> && kFloat<TY>) {
      want = ref_unary(op, xd, p);
    } else if constexpr (kFloat<T>) {  // bool (IsNaN, IsInf, Cast to bool) or a Cast to an integer (toward zero)
      want = op == UnaryOp::CAST ? as_double(static_cast<TY>(std::trunc(xd))) : ref_unary(op, xd, p);
    } else if constexpr (kFloat<TY>) {
      want = xd;  // Cast from an integer type
    } else {
      using C = typename std::conditional<std::is_signed<T>::value, long long, unsigned long long>::type;
      const C v = static_cast<C>(x[i]);
      C r = v;  // Cast
      if (op == UnaryOp::ABS) r = std::is_signed<C>::value && v < C(0) ? C(0) - v : v;
      if (op == UnaryOp::NEG) r = C(0) - v;
      if (op == UnaryOp::SIGN) r = (v > C(0)) - (std::is_signed<C>::value && v < C(0));
      if (op == UnaryOp::NOT) r = v == C(0);
      if (op == UnaryOp::CAST_BOOL) r = v != C(0);
      if (op == UnaryOp::BITWISE_NOT) r = ~v;
      want = as_double(static_cast<TY>(r));
    }
    const double g = as_double(got[i]), err = error_of(g, want);
    if (!(err <= tol)) {
      bad = i;
      bg = g;
      bw = want;
    }
    worst = std::fmax(worst, err);
  }
  return report(name, e, bad, bg, bw, worst);
}

template <typename T>
bool float_unaries(const char* type, ElemType et, double tol) {
  struct Op {
    UnaryOp op;
    double lo, hi, alpha, beta;
  };
  const Op ops[] = {
      {UnaryOp::GELU, -3, 3, 0, 0},     {UnaryOp::GELU_TANH, -3, 3, 0, 0}, {UnaryOp::ERF, -2, 2, 0, 0},
      {UnaryOp::EXP, -2, 2, 0, 0},      {UnaryOp::LOG, 0.5, 1.5, 0, 0},    {UnaryOp::SQRT, 0.5, 1.5, 0, 0},
      {UnaryOp::RECIPROCAL, 0.5, 1.5, 0, 0}, {UnaryOp::NEG, -1, 1, 0, 0},  {UnaryOp::ABS, -1, 1, 0, 0},
      {UnaryOp::ACOS, -0.9, 0.9, 0, 0}, {UnaryOp::ACOSH, 1.1, 3, 0, 0},    {UnaryOp::ASIN, -0.9, 0.9, 0, 0},
      {UnaryOp::ASINH, -2, 2, 0, 0},    {UnaryOp::ATAN, -2, 2, 0, 0},      {UnaryOp::ATANH, -0.9, 0.9, 0, 0},
      {UnaryOp::CEIL, -3, 3, 0, 0},     {UnaryOp::COS, -3, 3, 0, 0},       {UnaryOp::COSH, -2, 2, 0, 0},
      {UnaryOp::FLOOR, -3, 3, 0, 0},    {UnaryOp::HARD_SWISH, -4, 4, 0, 0}, {UnaryOp::MISH, -3, 3, 0, 0},
      {UnaryOp::ROUND, -3, 3, 0, 0},    {UnaryOp::SELU, -2, 2, 1.6732632f, 1.0507010f},
      {UnaryOp::SIGN, -2, 2, 0, 0},     {UnaryOp::SIN, -3, 3, 0, 0},       {UnaryOp::SINH, -2, 2, 0, 0},
      {UnaryOp::SOFTPLUS, -3, 3, 0, 0}, {UnaryOp::SOFTSIGN, -3, 3, 0, 0},  {UnaryOp::TAN, -1, 1, 0, 0},
      {UnaryOp::THRESHOLDED_RELU, -2, 2, 0.5, 0}, {UnaryOp::CELU, -2, 2, 0.7, 0},
      {UnaryOp::SHRINK, -2, 2, 0.5, 0.25}, {UnaryOp::CAST, -2, 2, 0, 0}, {UnaryOp::CLIP, -2, 2, -1, 0.5},
      {UnaryOp::SWISH, -3, 3, 0.5, 0},
  };
  bool ok = true;
  for (const Op& o : ops)
    for (std::size_t n : {std::size_t(4096), std::size_t(1001)}) {
      UnaryParams p;
      p.alpha = static_cast<float>(o.alpha);
      p.beta = static_cast<float>(o.beta);
      const std::string name = std::string(unary_name(o.op)) + "-" + type + "-" + std::to_string(n);
      ok &= unary_case<T, T>(name, et, et, o.op, p, o.lo, o.hi, n, tol);
    }
  UnaryParams pw;
  pw.exponent = 2.5f;
  ok &= unary_case<T, T>(std::string("pow2.5-") + type, et, et, UnaryOp::POW, pw, 0.5, 1.5, 1001, tol);
  UnaryParams both, neg_only;
  both.alpha = both.beta = 1;
  neg_only.alpha = 1;
  ok &= unary_case<T, signed char>(std::string("is_nan-") + type, et, ElemType::I8, UnaryOp::IS_NAN, both, -2, 2, 1001, 0,
                                   true);
  ok &= unary_case<T, signed char>(std::string("is_inf-") + type, et, ElemType::I8, UnaryOp::IS_INF, both, -2, 2, 4096, 0,
                                   true);
  ok &= unary_case<T, signed char>(std::string("is_inf-negative-") + type, et, ElemType::I8, UnaryOp::IS_INF, neg_only,
                                   -2, 2, 1001, 0, true);
  ok &= unary_case<T, signed char>(std::string("cast_bool-") + type, et, ElemType::I8, UnaryOp::CAST_BOOL, both, -2, 2,
                                   4096, 0, false, true);  // integers: zeros occur
  ok &= unary_case<T, int>(std::string("cast-") + type + "-to-int32", et, ElemType::I32, UnaryOp::CAST, both, -100, 100,
                           1001, 0);
  return ok;
}

template <typename T>
bool int_unaries(const char* type, ElemType et) {
  const bool u = !std::is_signed<T>::value;
  bool ok = true;
  for (UnaryOp op : {UnaryOp::ABS, UnaryOp::NEG, UnaryOp::SIGN, UnaryOp::BITWISE_NOT})
    for (std::size_t n : {std::size_t(4096), std::size_t(1001)})
      ok &= unary_case<T, T>(std::string(unary_name(op)) + "-" + type + "-" + std::to_string(n), et, et, op,
                             UnaryParams{}, u ? 0 : -100, 100, n, 0);
  ok &= unary_case<T, float>(std::string("cast-from-") + type, et, ElemType::F32, UnaryOp::CAST, UnaryParams{},
                             u ? 0 : -100, 100, 1001, 0);
  ok &= unary_case<T, __half>(std::string("cast-from-") + type + "-to-fp16", et, ElemType::F16, UnaryOp::CAST,
                              UnaryParams{}, u ? 0 : -100, 100, 4096, 0);
  ok &= unary_case<T, int>(std::string("cast-from-") + type + "-to-int32", et, ElemType::I32, UnaryOp::CAST,
                           UnaryParams{}, u ? 0 : -100, 100, 1001, 0);
  ok &= unary_case<T, signed char>(std::string("cast_bool-from-") + type, et, ElemType::I8, UnaryOp::CAST_BOOL,
                                   UnaryParams{}, u ? 0 : -100, 100, 4096, 0);
  return ok;
}

}  // namespace

int main() {
  bool ok = float_binaries<float>("fp32", ElemType::F32, 2e-6);
  ok &= float_binaries<__half>("fp16", ElemType::F16, 2e-3);
  ok &= float_binaries<__nv_bfloat16>("bf16", ElemType::BF16, 1.6e-2);
  ok &= int_binaries<signed char>("int8", ElemType::I8);
  ok &= int_binaries<unsigned char>("uint8", ElemType::U8);
  ok &= int_binaries<short>("int16", ElemType::I16);
  ok &= int_binaries<unsigned short>("uint16", ElemType::U16);
  ok &= int_binaries<int>("int32", ElemType::I32);
  ok &= int_binaries<unsigned>("uint32", ElemType::U32);
  ok &= int_binaries<long long>("int64", ElemType::I64);
  ok &= int_binaries<unsigned long long>("uint64", ElemType::U64);
  ok &= bool_binaries();
  ok &= float_unaries<float>("fp32", ElemType::F32, 2e-5);
  ok &= float_unaries<__half>("fp16", ElemType::F16, 2e-3);
  ok &= float_unaries<__nv_bfloat16>("bf16", ElemType::BF16, 1.6e-2);
  ok &= int_unaries<signed char>("int8", ElemType::I8);
  ok &= int_unaries<unsigned char>("uint8", ElemType::U8);
  ok &= int_unaries<short>("int16", ElemType::I16);
  ok &= int_unaries<int>("int32", ElemType::I32);
  ok &= int_unaries<long long>("int64", ElemType::I64);
  ok &= int_unaries<unsigned long long>("uint64", ElemType::U64);
  UnaryParams none;
  ok &= unary_case<signed char, signed char>("not-bool-4096", ElemType::I8, ElemType::I8, UnaryOp::NOT, none, 0, 2, 4096, 0);
  ok &= unary_case<signed char, signed char>("not-bool-1001", ElemType::I8, ElemType::I8, UnaryOp::NOT, none, 0, 2, 1001, 0);
  return ok ? 0 : 1;
}
