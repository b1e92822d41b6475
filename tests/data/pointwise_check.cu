// GPU check of the harness's pointwise kernels (cpp/src/kernels.cu) against a CPU reference in
// float: binary_pointwise with broadcasting and activation_pointwise (HardSigmoid as mode -2 with
// beta 0.5), in fp32, fp16 and bf16; and
// batched_copy2d (a Concat's inputs in one launch) byte for byte.
// Used by tests/test_strided_copy_gpu.py. Prints one line per case: "ok NAME max_err" or
// "bad NAME at I: got G want W"; exits non-zero on a mismatch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "benanza/harness.hpp"

namespace {
using namespace benanza;

template <typename T>
std::vector<T> host_random(std::size_t n, unsigned seed) {
  std::vector<T> v(n);
  for (auto& x : v) {
    seed = seed * 1103515245u + 12345u;
    x = static_cast<T>(static_cast<float>((seed >> 9) & 0xffff) / 32768.0f - 1.0f);
  }
  return v;
}

template <typename T>
float f(T x) { return static_cast<float>(x); }

template <typename T>
bool check(const char* name, const std::vector<T>& got, const std::vector<float>& want, float tol) {
  float worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float e = std::fabs(f(got[i]) - want[i]) / std::fmax(1.0f, std::fabs(want[i]));
    if (!(e <= tol)) {
      std::printf("bad %s at %zu: got %g want %g\n", name, i, f(got[i]), want[i]);
      return false;
    }
    worst = std::fmax(worst, e);
  }
  std::printf("ok %s %.3g\n", name, worst);
  return true;
}

template <typename T>
bool binary_case(const char* name, DType t, std::vector<int> ad, std::vector<int> bd, PointwiseOp op, float a1,
                 float a2, float tol) {
  std::size_t na = 1, nb = 1;
  for (int x : ad) na *= x;
  for (int x : bd) nb *= x;
  auto a = host_random<T>(na, 1), b = host_random<T>(nb, 2);
  std::vector<float> want(na);
  const int nd = static_cast<int>(ad.size());
  for (std::size_t i = 0; i < na; ++i) {
    std::size_t r = i, bo = 0, bs = 1;
    std::vector<std::size_t> c(nd);
    for (int d = nd - 1; d >= 0; --d) {
      c[d] = r % ad[d];
      r /= ad[d];
    }
    for (int d = nd - 1; d >= 0; --d) {
      if (bd[d] != 1) bo += c[d] * bs;
      bs *= bd[d];
    }
    const float x = a1 * f(a[i]), y = a2 * f(b[bo]);
    want[i] = op == PointwiseOp::Add ? x + y : op == PointwiseOp::Mul ? x * y : op == PointwiseOp::Min ? std::fmin(x, y) : std::fmax(x, y);
  }
  T *da, *db, *dy;
  cudaMalloc(&da, na * sizeof(T));
  cudaMalloc(&db, nb * sizeof(T));
  cudaMalloc(&dy, na * sizeof(T));
  cudaMemcpy(da, a.data(), na * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), nb * sizeof(T), cudaMemcpyHostToDevice);
  const cudaError_t e = binary_pointwise(da, db, dy, ad.data(), bd.data(), nd, op, a1, a2, t, nullptr);
  std::vector<T> got(na);
  cudaMemcpy(got.data(), dy, na * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dy);
  if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("bad %s: %s\n", name, cudaGetErrorString(e));
    return false;
  }
  return check(name, got, want, tol);
}

template <typename T>
bool activation_case(const char* name, DType t, std::size_t n, int mode, float coef, float tol) {
  auto x = host_random<T>(n, 3);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = f(x[i]);
    want[i] = mode == 0 ? 1.0f / (1.0f + std::exp(-v)) : mode == 1 ? std::fmax(v, 0.0f) : mode == 2 ? std::tanh(v)
              : mode == 3 ? std::fmin(std::fmax(v, 0.0f), coef) : mode == 4 ? (v > 0 ? v : coef * (std::exp(v) - 1))
              : mode == 5 ? v : mode == -2 ? std::fmin(std::fmax(coef * v + 0.5f, 0.0f), 1.0f) : (v > 0 ? v : coef * v);
  }
  T *dx, *dy;
  cudaMalloc(&dx, n * sizeof(T));
  cudaMalloc(&dy, n * sizeof(T));
  cudaMemcpy(dx, x.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  const cudaError_t e = activation_pointwise(dx, dy, n, mode, coef, t, nullptr, mode == -2 ? 0.5f : 0.0f);
  std::vector<T> got(n);
  cudaMemcpy(got.data(), dy, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("bad %s: %s\n", name, cudaGetErrorString(e));
    return false;
  }
  return check(name, got, want, tol);
}

template <typename T>
bool all_cases(const char* type, DType t, float tol) {
  bool ok = true;
  char n[96];
  auto nm = [&](const char* s) { std::snprintf(n, sizeof n, "%s-%s", s, type); return n; };
  ok &= binary_case<T>(nm("add-same"), t, {2, 3, 5, 8}, {2, 3, 5, 8}, PointwiseOp::Add, 1, 1, tol);
  ok &= binary_case<T>(nm("sub-per-channel"), t, {4, 64, 7, 7}, {1, 64, 1, 1}, PointwiseOp::Add, 1, -1, tol);
  ok &= binary_case<T>(nm("mul-per-channel-nhwc"), t, {4, 7, 7, 64}, {1, 1, 1, 64}, PointwiseOp::Mul, 1, 1, tol);
  ok &= binary_case<T>(nm("mul-scalar"), t, {3, 197, 768}, {1, 1, 1}, PointwiseOp::Mul, 1, 0.5f, tol);
  ok &= binary_case<T>(nm("max-rows-odd"), t, {5, 3, 7}, {5, 1, 7}, PointwiseOp::Max, 1, 1, tol);
  ok &= binary_case<T>(nm("min-cols"), t, {6, 9, 11}, {6, 9, 1}, PointwiseOp::Min, 2, 1, tol);
  for (int mode : {0, 1, 2, 3, 4, 5, -1, -2}) {
    std::snprintf(n, sizeof n, "act%d-%s", mode, type);
    ok &= activation_case<T>(n, t, 4 * 1000 + 3, mode, 0.2f, tol);
    std::snprintf(n, sizeof n, "act%d-vec-%s", mode, type);
    ok &= activation_case<T>(n, t, 64 * 1024, mode, 6.0f, tol);
  }
  return ok;
}

// a Concat along axis 1 of inputs [2, c_i, 7, 7] (+1 element of offset to force narrow units when odd)
bool concat_case(const char* name, std::size_t es, const std::vector<int>& chans, int spatial) {
  int total_c = 0;
  for (int c : chans) total_c += c;
  const long long rows = 2, out_cols = static_cast<long long>(total_c) * spatial;
  std::vector<unsigned char> want(rows * out_cols * es), got(want.size());
  std::vector<void*> ins;
  std::vector<Copy2D> copies;
  unsigned char* dy;
  cudaMalloc(&dy, want.size());
  long long off = 0;
  unsigned seed = 7;
  for (int c : chans) {
    const long long cols = static_cast<long long>(c) * spatial;
    std::vector<unsigned char> h(rows * cols * es);
    for (auto& x : h) x = static_cast<unsigned char>((seed = seed * 1103515245u + 12345u) >> 16);
    for (long long r = 0; r < rows; ++r)
      std::memcpy(&want[(r * out_cols + off) * es], &h[r * cols * es], cols * es);
    void* d;
    cudaMalloc(&d, h.size());
    cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice);
    ins.push_back(d);
    copies.push_back(Copy2D{d, dy + off * es, rows, cols, cols, out_cols});
    off += cols;
  }
  const cudaError_t e = batched_copy2d(copies.data(), static_cast<int>(copies.size()), es, nullptr);
  cudaMemcpy(got.data(), dy, got.size(), cudaMemcpyDeviceToHost);
  for (void* d : ins) cudaFree(d);
  cudaFree(dy);
  if (e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("bad %s: %s\n", name, cudaGetErrorString(e));
    return false;
  }
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      std::printf("bad %s at byte %zu\n", name, i);
      return false;
    }
  std::printf("ok %s 0\n", name);
  return true;
}

}  // namespace

int main() {
  bool ok = all_cases<float>("fp32", DType::F32, 1e-5f);
  ok &= all_cases<__half>("fp16", DType::F16, 2e-3f);
  ok &= all_cases<__nv_bfloat16>("bf16", DType::BF16, 1.6e-2f);
  std::vector<int> many(40, 32);  // densenet's widest Concat has 33 inputs: two launches here
  many[0] = 64;
  for (std::size_t es : {2, 4}) {
    char n[64];
    std::snprintf(n, sizeof n, "concat-4-es%zu", es);
    ok &= concat_case(n, es, {64, 32, 32, 3}, 49);
    std::snprintf(n, sizeof n, "concat-40-es%zu", es);
    ok &= concat_case(n, es, many, 49);
    std::snprintf(n, sizeof n, "concat-odd-es%zu", es);
    ok &= concat_case(n, es, {3, 5, 1}, 7);
  }
  return ok ? 0 : 1;
}
