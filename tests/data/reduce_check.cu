// GPU check of benanza::reduce (cpp/src/reduce_kernels.cu) against a CPU reference in double:
// ReduceSum/Mean/Max/Min over the last axis (rows of 768, 1024, 3072, 96, 3, odd 197), a middle
// axis (odd and vectorizable inner sizes), the spatial axes of an image, two and three
// non-adjacent groups of axes (several stages), every axis of 2M elements and a long middle axis
// with few outputs (r split over blocks, partial results in the workspace), and axes of extent 1
// only (a copy), in fp32, fp16 and bf16.
// Sum and Mean read small integers (sums are exact in float, so the only error allowed is the
// rounding of y to the storage type); Max and Min read fractional values and must be exact.
// Used by tests/test_reduce_gpu.py. Prints one line per case: "ok NAME max_err" or
// "bad NAME at I: got G want W"; exits non-zero on a mismatch.
// `reduce_check rate` times instead (20 back-to-back calls between CUDA events, after a warm-up):
// "rate NAME MS GBS" for a 256 MiB device-to-device copy (GB/s counts bytes read and written) and
// for reductions of the LayerNorm-style 19 MB fp16 tensor of the issue, 256 MiB rows, columns and
// a whole tensor (GB/s: bytes of x read per second).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "benanza/harness.hpp"

namespace {
using namespace benanza;

struct Case {
  const char* name;
  std::vector<int> x, y;
};

unsigned long long mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <typename T>
float f(T v) { return static_cast<float>(v); }

// x values: integers 0..8 (sum, mean) or fractions in [-1, 1) exact in every type (max, min)
template <typename T>
std::vector<T> inputs(std::size_t n, bool integers) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned long long h = mix(i + 17);
    v[i] = static_cast<T>(integers ? static_cast<float>(h % 9) : static_cast<float>(static_cast<int>(h % 256) - 128) / 128.0f);
  }
  return v;
}

std::vector<double> reference(const std::vector<float>& xs, const Case& c, ReduceOp op) {
  const int nd = static_cast<int>(c.x.size());
  std::size_t ny = 1, count = 1;
  for (int d = 0; d < nd; ++d) {
    ny *= c.y[d];
    count *= c.x[d] / c.y[d];
  }
  const double init = op == ReduceOp::Max ? -INFINITY : op == ReduceOp::Min ? INFINITY : 0.0;
  std::vector<double> out(ny, init);
  std::vector<int> idx(nd, 0);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    std::size_t yo = 0;
    for (int d = 0; d < nd; ++d) yo = yo * c.y[d] + (c.y[d] == 1 ? 0 : idx[d]);
    double& o = out[yo];
    o = op == ReduceOp::Max ? std::fmax(o, xs[i]) : op == ReduceOp::Min ? std::fmin(o, xs[i]) : o + xs[i];
    for (int d = nd - 1; d >= 0 && ++idx[d] == c.x[d]; --d) idx[d] = 0;
  }
  if (op == ReduceOp::Mean)
    for (double& o : out) o /= static_cast<double>(count);
  return out;
}

template <typename T>
bool run_case(const Case& c, ReduceOp op, DType t, const char* type, double tol) {
  char name[128];
  std::snprintf(name, sizeof name, "%s-%s-%s", c.name, reduce_op_name(op), type);
  const int nd = static_cast<int>(c.x.size());
  std::size_t nx = 1, ny = 1;
  for (int d = 0; d < nd; ++d) {
    nx *= c.x[d];
    ny *= c.y[d];
  }
  const auto xs = inputs<T>(nx, op == ReduceOp::Sum || op == ReduceOp::Mean);
  std::vector<float> xf(nx);
  for (std::size_t i = 0; i < nx; ++i) xf[i] = f(xs[i]);
  const auto want = reference(xf, c, op);
  if (op == ReduceOp::Sum && t != DType::F32)
    for (double w : want)
      if (std::fabs(w) > 60000.0) {  // not representable in 2-byte storage: nothing to check
        std::printf("ok %s skipped (sum beyond the 2-byte range)\n", name);
        return true;
      }
  const ReducePlan plan = plan_reduce_for(c.x.data(), c.y.data(), nd, t);
  T *dx = nullptr, *dy = nullptr;
  void* ws = nullptr;
  cudaMalloc(&dx, nx * sizeof(T));
  cudaMalloc(&dy, ny * sizeof(T));
  if (plan.workspace_bytes()) cudaMalloc(&ws, plan.workspace_bytes());
  cudaMemcpy(dx, xs.data(), nx * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemset(dy, 0xff, ny * sizeof(T));  // NaN: an output never written shows
  const cudaError_t e = reduce(dx, dy, c.x.data(), c.y.data(), nd, op, t, ws, plan.workspace_bytes(), nullptr);
  const cudaError_t sync = cudaDeviceSynchronize();
  std::vector<T> got(ny);
  cudaMemcpy(got.data(), dy, ny * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(ws);
  if (!plan.ok || e != cudaSuccess || sync != cudaSuccess) {
    std::printf("bad %s: %s / %s / %s\n", name, plan.error, cudaGetErrorString(e), cudaGetErrorString(sync));
    return false;
  }
  double worst = 0;
  for (std::size_t i = 0; i < ny; ++i) {
    const double err = std::fabs(f(got[i]) - want[i]);
    const double allowed = (op == ReduceOp::Max || op == ReduceOp::Min) ? 0.0 : tol * std::fmax(1.0, std::fabs(want[i]));
    if (!(err <= allowed)) {
      std::printf("bad %s at %zu: got %.9g want %.9g (%s)\n", name, i, f(got[i]), want[i], describe_reduce(plan).c_str());
      return false;
    }
    worst = std::fmax(worst, err);
  }
  std::printf("ok %s %.3g (%s)\n", name, worst, describe_reduce(plan).c_str());
  return true;
}

// ms per call of `fn` (20 back-to-back calls after 3 warm-up calls)
template <typename F>
double time_ms(F fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < 20; ++i) fn();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / 20;
}

int rates() {
  const std::size_t copy_bytes = std::size_t(256) << 20;
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, copy_bytes) != cudaSuccess || cudaMalloc(&dst, copy_bytes) != cudaSuccess) return 2;
  cudaMemset(src, 0, copy_bytes);
  const double copy_ms = time_ms([&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); });
  std::printf("rate copy-256MiB %.4f %.1f\n", copy_ms, 2.0 * copy_bytes / copy_ms * 1e-6);
  struct R {
    const char* name;
    std::vector<int> x, y;
    ReduceOp op;
    DType t;
  };
  const std::vector<R> rs = {
      {"ln-mean-19MB-fp16", {32 * 56 * 56, 96}, {32 * 56 * 56, 1}, ReduceOp::Mean, DType::F16},
      {"rows-mean-256MiB-fp16", {131072, 1024}, {131072, 1}, ReduceOp::Mean, DType::F16},
      {"cols-mean-256MiB-fp16", {64, 2048, 1024}, {64, 1, 1024}, ReduceOp::Mean, DType::F16},
      {"all-sum-256MiB-fp32", {1, 67108864}, {1, 1}, ReduceOp::Sum, DType::F32},
  };
  bool ok = true;
  for (const R& r : rs) {
    std::size_t nx = 1;
    for (int d : r.x) nx *= d;
    const std::size_t bytes = nx * dtype_bytes(r.t);
    const int nd = static_cast<int>(r.x.size());
    const ReducePlan plan = plan_reduce_for(r.x.data(), r.y.data(), nd, r.t);
    void* ws = nullptr;
    if (plan.workspace_bytes()) cudaMalloc(&ws, plan.workspace_bytes());
    cudaError_t e = cudaSuccess;
    const double ms = time_ms([&] {
      const cudaError_t k = reduce(src, dst, r.x.data(), r.y.data(), nd, r.op, r.t, ws, plan.workspace_bytes(), nullptr);
      if (k != cudaSuccess) e = k;
    });
    cudaFree(ws);
    if (bytes > copy_bytes || e != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess) {
      std::printf("bad %s: %s\n", r.name, cudaGetErrorString(e));
      ok = false;
      continue;
    }
    std::printf("rate %s %.4f %.1f (%s)\n", r.name, ms, bytes / ms * 1e-6, describe_reduce(plan).c_str());
  }
  cudaFree(src);
  cudaFree(dst);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "rate") return rates();
  const std::vector<Case> cases = {
      {"rows768", {64, 768}, {64, 1}},
      {"rows1024", {32, 1024}, {32, 1}},
      {"rows3072", {40, 3072}, {40, 1}},
      {"rows96", {256, 96}, {256, 1}},
      {"rows3", {1000, 3}, {1000, 1}},
      {"rows197-odd", {5, 197}, {5, 1}},
      {"middle-odd", {3, 197, 5}, {3, 1, 5}},
      {"middle-vec", {6, 32, 128}, {6, 1, 128}},
      {"spatial", {8, 64, 7, 7}, {8, 64, 1, 1}},
      {"two-groups", {4, 16, 9, 5}, {1, 16, 1, 5}},
      {"three-groups", {2, 3, 4, 5, 6}, {1, 3, 1, 5, 1}},
      {"all-2M-split", {1, 2000003}, {1, 1}},
      {"long-middle-split", {2, 50000, 8}, {2, 1, 8}},
      {"extent1-copy", {16, 96, 1}, {16, 96, 1}},
  };
  bool ok = true;
  for (const Case& c : cases)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min}) {
      ok &= run_case<float>(c, op, DType::F32, "fp32", 1e-6);
      ok &= run_case<__half>(c, op, DType::F16, "fp16", 1.0 / 1024);
      ok &= run_case<__nv_bfloat16>(c, op, DType::BF16, "bf16", 1.0 / 128);
    }
  return ok ? 0 : 1;
}
