// GPU check of benanza's TopK (cpp/src/topk_kernels.cu and topk_sort_*.cu): topk_sort_kernel (CUB's segmented or radix sort,
// the first k copied out) and, where it fits, topk_warp_kernel, against a CPU reference (a stable sort
// of each row by topk_key, ties to the lower index: ONNX TopK-11) in fp32, fp16, bf16, int32 and int64:
// routers (64 x 128 top-8, DeepSeek's 37 x 256 top-8 and 8 x 32 groups' top-2), short rows (8 of 2),
// the longest warp rows (1000, k 32), k = len through the segmented sort, one row of 200 top-7 (the
// radix sort, copied out), rows of 5000 (the sort only) and the sort of 500,000 int64 expert ids.
// Floats are drawn from 64 values (ties), integers in [0, 256) (expert ids). Used by tests/test_topk.py.
// Prints "ok NAME" or "bad NAME ..." per case and call; exits non-zero on a mismatch.
// `topk_check rate` times instead (20 back-to-back calls between CUDA events, after a warm-up):
// "rate NAME CALL MS" for MoE routers and sorts.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "benanza/topk.hpp"

using namespace benanza;

namespace {

#define CK(x)                                                                           \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::printf("cuda error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

const char* kNames[] = {"fp32", "fp16", "bf16", "int32", "int64"};
std::size_t type_bytes(TopKType t) {
  return t == TopKType::I64 ? 8 : (t == TopKType::F32 || t == TopKType::I32) ? 4 : 2;
}

// n elements of type t as raw little-endian bytes, and their bits one by one.
std::vector<unsigned char> make_data(TopKType t, std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<unsigned char> out(n * type_bytes(t));
  for (std::size_t i = 0; i < n; ++i) {
    const int r = static_cast<int>(g() % 256);
    unsigned char* p = out.data() + i * type_bytes(t);
    const float f = (r % 64 - 32) / 16.0f;  // 64 values, exact in every float type
    if (t == TopKType::F32) std::memcpy(p, &f, 4);
    if (t == TopKType::F16) { const __half h = __float2half(f); std::memcpy(p, &h, 2); }
    if (t == TopKType::BF16) { const __nv_bfloat16 h = __float2bfloat16(f); std::memcpy(p, &h, 2); }
    if (t == TopKType::I32) { const int v = r; std::memcpy(p, &v, 4); }
    if (t == TopKType::I64) { const long long v = r; std::memcpy(p, &v, 8); }
  }
  return out;
}

unsigned long long bits_at(const std::vector<unsigned char>& d, std::size_t i, std::size_t es) {
  unsigned long long b = 0;
  std::memcpy(&b, d.data() + i * es, es);
  return b;
}

struct Shape {
  const char* name;
  long long rows, len, k;
  bool largest;
};

bool check(const Shape& s, TopKType t, bool warp) {
  const std::size_t es = type_bytes(t), n = s.rows * s.len, out = s.rows * s.k;
  const auto host = make_data(t, n, 7);
  void *x, *values;
  long long* indices;
  CK(cudaMalloc(&x, n * es));
  CK(cudaMalloc(&values, out * es + 1));
  CK(cudaMalloc(&indices, out * 8 + 1));
  CK(cudaMemcpy(x, host.data(), n * es, cudaMemcpyHostToDevice));
  CK(cudaMemset(values, 0xff, out * es + 1));
  CK(cudaMemset(indices, 0xff, out * 8 + 1));
  void* temp = nullptr;
  if (warp) {
    CK(topk_warp_kernel(x, values, indices, s.rows, s.len, s.k, s.largest, t, 0));
  } else {
    std::size_t tb = 0;
    CK(topk_sort_temp_bytes(s.rows, s.len, s.k, s.largest, t, &tb));
    CK(cudaMalloc(&temp, tb));
    CK(topk_sort_kernel(x, values, indices, s.rows, s.len, s.k, s.largest, t, temp, tb, 0));
  }
  CK(cudaDeviceSynchronize());
  std::vector<long long> gi(out);
  std::vector<unsigned char> gv(out * es);
  CK(cudaMemcpy(gi.data(), indices, out * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(gv.data(), values, out * es, cudaMemcpyDeviceToHost));
  CK(cudaFree(x));
  CK(cudaFree(values));
  CK(cudaFree(indices));
  if (temp) CK(cudaFree(temp));
  const char* call = warp ? "warp" : "sort";
  std::vector<long long> order(s.len);
  std::vector<unsigned long long> key(s.len);
  for (long long r = 0; r < s.rows; ++r) {
    for (long long j = 0; j < s.len; ++j) key[j] = topk_key(bits_at(host, r * s.len + j, es), t, s.largest);
    std::iota(order.begin(), order.end(), 0LL);
    std::stable_sort(order.begin(), order.end(), [&](long long a, long long b) { return key[a] < key[b]; });
    for (long long q = 0; q < s.k; ++q) {
      const long long want = order[q], got = gi[r * s.k + q];
      const unsigned long long gvb = bits_at(gv, r * s.k + q, es), wvb = bits_at(host, r * s.len + want, es);
      if (got != want || gvb != wvb) {
        std::printf("bad %s-%s-%s row %lld out %lld: index %lld want %lld, bits %llx want %llx\n", s.name,
                    kNames[static_cast<int>(t)], call, r, q, got, want, gvb, wvb);
        return false;
      }
    }
  }
  std::printf("ok %s-%s-%s\n", s.name, kNames[static_cast<int>(t)], call);
  return true;
}

float time_ms(const std::function<void()>& f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  CK(cudaEventRecord(a));
  for (int i = 0; i < 20; ++i) f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms / 20;
}

void rate(const Shape& s, TopKType t) {
  const std::size_t es = type_bytes(t), n = s.rows * s.len, out = s.rows * s.k;
  const auto host = make_data(t, n, 11);
  void *x, *values, *temp;
  long long* indices;
  std::size_t tb = 0;
  CK(cudaMalloc(&x, n * es));
  CK(cudaMalloc(&values, out * es));
  CK(cudaMalloc(&indices, out * 8));
  CK(cudaMemcpy(x, host.data(), n * es, cudaMemcpyHostToDevice));
  CK(topk_sort_temp_bytes(s.rows, s.len, s.k, s.largest, t, &tb));
  CK(cudaMalloc(&temp, tb));
  std::printf("rate %s-%s sort %.4f\n", s.name, kNames[static_cast<int>(t)], time_ms([&] {
                CK(topk_sort_kernel(x, values, indices, s.rows, s.len, s.k, s.largest, t, temp, tb, 0));
              }));
  if (topk_warp_fits(s.len, s.k))
    std::printf("rate %s-%s warp %.4f\n", s.name, kNames[static_cast<int>(t)], time_ms([&] {
                  CK(topk_warp_kernel(x, values, indices, s.rows, s.len, s.k, s.largest, t, 0));
                }));
  CK(cudaFree(x));
  CK(cudaFree(values));
  CK(cudaFree(indices));
  CK(cudaFree(temp));
}

}  // namespace

int main(int argc, char** argv) {
  const TopKType types[] = {TopKType::F32, TopKType::F16, TopKType::BF16, TopKType::I32, TopKType::I64};
  if (argc > 1 && std::string(argv[1]) == "rate") {
    const Shape shapes[] = {{"router-4096x128-top8", 4096, 128, 8, true}, {"router-16384x256-top8", 16384, 256, 8, true},
                            {"router-64x128-top8", 64, 128, 8, true}, {"groups-4096x8x32-top2", 4096 * 8, 32, 2, true}};
    for (const auto& s : shapes)
      for (TopKType t : {TopKType::F32, TopKType::BF16}) rate(s, t);
    rate({"sort-32768-int64", 1, 32768, 32768, false}, TopKType::I64);
    rate({"sort-500000-int64", 1, 500000, 500000, false}, TopKType::I64);
    return 0;
  }
  const Shape shapes[] = {{"router-64x128-top8", 64, 128, 8, true},  {"deepseek-37x256-top8", 37, 256, 8, true},
                          {"groups-8x32-top2", 8, 32, 2, true},      {"short-100x8-top2", 100, 8, 2, true},
                          {"long-5x1000-top32-min", 5, 1000, 32, false}, {"whole-1024x32-sort", 1024, 32, 32, false},
                          {"one-row-200-top7", 1, 200, 7, true},     {"rows-3x5000-top10", 3, 5000, 10, true},
                          {"sort-500000", 1, 500000, 500000, false}};
  bool ok = true;
  for (const auto& s : shapes)
    for (TopKType t : types) {
      if (std::string(s.name) == "sort-500000" && t != TopKType::I64) continue;
      ok = check(s, t, false) && ok;
      if (topk_warp_fits(s.len, s.k)) ok = check(s, t, true) && ok;
    }
  return ok ? 0 : 1;
}
