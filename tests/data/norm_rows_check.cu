// The LayerNorm and RMSNorm kernels of the harness against a CPU reference (tests/test_norm_rows_gpu.py):
// benanza::norm_rows_kernel (row_in_registers, cpp/src/norm_rows_kernels.cu) and the one-block kernels
// benanza::layernorm_kernel / benanza::rmsnorm_kernel, with and without the residual add and the sum
// written, in fp32, fp16 and bf16, over row lengths that take 1, 2 and 4 vectors a thread and one of a
// single vector. Prints one line per case, "ok NAME max_err" or "FAIL NAME ...", and exits non-zero
// on a failure.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "benanza/norm_rows.hpp"
#include "benanza/rmsnorm.hpp"
#include "benanza/transformer.hpp"

using namespace benanza;

namespace {

float to_host(float v) { return v; }
float to_host(__half v) { return __half2float(v); }
float to_host(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> T from_host(float v);
template <> float from_host<float>(float v) { return v; }
template <> __half from_host<__half>(float v) { return __float2half_rn(v); }
template <> __nv_bfloat16 from_host<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T> DType dtype_of();
template <> DType dtype_of<float>() { return DType::F32; }
template <> DType dtype_of<__half>() { return DType::F16; }
template <> DType dtype_of<__nv_bfloat16>() { return DType::BF16; }

int failures = 0;

template <typename T>
void check(const char* tname, bool layer, bool registers, bool residual, bool keep_sum, long long rows, long long cols) {
  const long long n = rows * cols;
  std::mt19937 gen(static_cast<unsigned>(cols * 7 + rows));
  std::uniform_real_distribution<float> u(-2.0f, 2.0f), s(0.5f, 1.5f);
  std::vector<T> x(n), r(n);
  std::vector<float> scale(cols), bias(cols);
  for (auto& v : x) v = from_host<T>(u(gen) + 0.5f);
  for (auto& v : r) v = from_host<T>(u(gen));
  for (auto& v : scale) v = s(gen);
  for (auto& v : bias) v = u(gen);
  // the reference: the sum rounded to T as the Add stores it, float statistics (two-pass)
  std::vector<float> ref(n), sum_ref(n), rstd_ref(rows);
  for (long long i = 0; i < rows; ++i) {
    std::vector<double> v(cols);
    for (long long c = 0; c < cols; ++c) {
      const long long k = i * cols + c;
      float a = to_host(x[k]);
      if (residual) a = to_host(from_host<T>(a + to_host(r[k])));
      v[c] = a;
      sum_ref[k] = a;
    }
    double mu = 0.0, var = 0.0;
    if (layer) {
      for (double a : v) mu += a;
      mu /= cols;
    }
    for (double a : v) var += (a - mu) * (a - mu);
    const double rs = 1.0 / std::sqrt(var / cols + 1e-5);
    rstd_ref[i] = static_cast<float>(rs);
    for (long long c = 0; c < cols; ++c)
      ref[i * cols + c] = static_cast<float>((v[c] - mu) * rs * scale[c] + (layer ? bias[c] : 0.0));
  }
  T *dx, *dr, *ds, *dy;
  float *dscale, *dbias, *dmean, *drstd;
  cudaMalloc(&dx, n * sizeof(T));
  cudaMalloc(&dr, n * sizeof(T));
  cudaMalloc(&ds, n * sizeof(T));
  cudaMalloc(&dy, n * sizeof(T));
  cudaMalloc(&dscale, cols * sizeof(float));
  cudaMalloc(&dbias, cols * sizeof(float));
  cudaMalloc(&dmean, rows * sizeof(float));
  cudaMalloc(&drstd, rows * sizeof(float));
  cudaMemcpy(dx, x.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dr, r.data(), n * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dscale, scale.data(), cols * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dbias, bias.data(), cols * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(dy, 0, n * sizeof(T));
  cudaMemset(ds, 0, n * sizeof(T));
  const void* res = residual ? dr : nullptr;
  void* sum = residual && keep_sum ? ds : nullptr;
  cudaError_t e;
  const DType t = dtype_of<T>();
  if (registers)
    e = norm_rows_kernel(layer ? RowNorm::LayerNorm : RowNorm::RMSNorm, dx, res, sum, dscale, layer ? dbias : nullptr, dy,
                         layer ? dmean : nullptr, drstd, rows, cols, 1e-5f, t, nullptr);
  else if (layer)
    e = layernorm_kernel(dx, dscale, dbias, dy, dmean, drstd, rows, cols, 1e-5f, t, nullptr, res, sum);
  else
    e = rmsnorm_kernel(dx, dscale, dy, rows, cols, 1e-5f, t, nullptr, drstd, res, sum);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  std::vector<T> y(n), sm(n);
  std::vector<float> rstd(rows);
  cudaMemcpy(y.data(), dy, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaMemcpy(sm.data(), ds, n * sizeof(T), cudaMemcpyDeviceToHost);
  cudaMemcpy(rstd.data(), drstd, rows * sizeof(float), cudaMemcpyDeviceToHost);
  const double tol = t == DType::F32 ? 1e-4 : t == DType::F16 ? 2e-2 : 1e-1;  // of values of O(1-10)
  double err = 0.0, sum_err = 0.0, rstd_err = 0.0;
  for (long long k = 0; k < n; ++k) {
    err = std::fmax(err, std::fabs(to_host(y[k]) - ref[k]) / (1.0 + std::fabs(ref[k])));
    if (sum) sum_err = std::fmax(sum_err, std::fabs(to_host(sm[k]) - sum_ref[k]));
  }
  for (long long i = 0; i < rows; ++i) rstd_err = std::fmax(rstd_err, std::fabs(rstd[i] - rstd_ref[i]) / rstd_ref[i]);
  char name[160];
  std::snprintf(name, sizeof name, "%s-%s-%s%s%s-%lldx%lld", layer ? "layernorm" : "rmsnorm",
                registers ? "row_in_registers" : "block_per_row", tname, residual ? "-residual" : "",
                keep_sum ? "-sum" : "", rows, cols);
  const bool ok = e == cudaSuccess && err <= tol && sum_err == 0.0 && rstd_err <= 1e-3;
  if (!ok) ++failures;
  std::printf("%s %s err %.3g sum_err %.3g rstd_err %.3g %s\n", ok ? "ok" : "FAIL", name, err, sum_err, rstd_err,
              e == cudaSuccess ? "" : cudaGetErrorString(e));
  cudaFree(dx); cudaFree(dr); cudaFree(ds); cudaFree(dy);
  cudaFree(dscale); cudaFree(dbias); cudaFree(dmean); cudaFree(drstd);
}

template <typename T>
void all(const char* tname, long long cols) {
  for (bool layer : {true, false})
    for (bool registers : {true, false})
      for (int mode = 0; mode < 3; ++mode) check<T>(tname, layer, registers, mode > 0, mode == 2, 3, cols);
}

}  // namespace

int main() {
  // 16-bit rows of 8 (one vector), 768 (GPT-2), 4096, 12288 (2 vectors a thread) and 32768 (4);
  // fp32 rows of 4, 768 and 8192 (2 vectors a thread)
  for (long long cols : {8LL, 768LL, 4096LL, 12288LL, 32768LL}) {
    all<__half>("fp16", cols);
    all<__nv_bfloat16>("bf16", cols);
  }
  for (long long cols : {4LL, 768LL, 8192LL}) all<float>("fp32", cols);
  return failures ? 1 : 0;
}
