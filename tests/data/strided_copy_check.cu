// GPU check of the harness's strided-copy kernel (cpp/src/kernels.cu): for each case on the command
// line, copy a random source through strided_copy and compare every byte with a CPU reference of the
// same view; then time 50 back-to-back copies with CUDA events and print the effective bandwidth
// (read + write bytes). Used by tests/test_strided_copy_gpu.py.
//
//   strided_copy_check ELEM_BYTES SRC_NUMEL DST_NUMEL ND DIMS... SRC_STRIDES... DST_STRIDES...
// prints one line: "ok <kind> <unit_bytes> <ms per copy> <GB/s>" or "mismatch at <i>".
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "benanza/harness.hpp"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s ELEM_BYTES SRC_NUMEL DST_NUMEL ND DIMS... SRC_STRIDES... DST_STRIDES...\n", argv[0]);
    return 2;
  }
  const std::size_t es = std::strtoull(argv[1], nullptr, 10);
  const std::size_t src_n = std::strtoull(argv[2], nullptr, 10), dst_n = std::strtoull(argv[3], nullptr, 10);
  benanza::StridedView v{std::atoi(argv[4]), {}, {}, {}};
  if (argc != 5 + 3 * v.nd) return 2;
  for (int d = 0; d < v.nd; ++d) {
    v.dims[d] = std::atoll(argv[5 + d]);
    v.src_strides[d] = std::atoll(argv[5 + v.nd + d]);
    v.dst_strides[d] = std::atoll(argv[5 + 2 * v.nd + d]);
  }
  std::vector<unsigned char> src(src_n * es), want(dst_n * es, 0), got(dst_n * es, 0);
  unsigned x = 12345;
  for (auto& b : src) b = static_cast<unsigned char>((x = x * 1103515245u + 12345u) >> 16);
  long long n = 1;
  for (int d = 0; d < v.nd; ++d) n *= v.dims[d];
  for (long long i = 0; i < n; ++i) {  // the reference: row-major index space of the dims
    long long r = i, so = 0, dof = 0;
    for (int d = v.nd - 1; d >= 0; --d) {
      const long long c = r % v.dims[d];
      r /= v.dims[d];
      so += c * v.src_strides[d];
      dof += c * v.dst_strides[d];
    }
    std::memcpy(&want[dof * es], &src[so * es], es);
  }
  void *ds = nullptr, *dd = nullptr;
  if (cudaMalloc(&ds, src.size()) != cudaSuccess || cudaMalloc(&dd, got.size()) != cudaSuccess) {
    std::printf("error cudaMalloc\n");
    return 1;
  }
  cudaMemcpy(ds, src.data(), src.size(), cudaMemcpyHostToDevice);
  cudaMemset(dd, 0, got.size());
  benanza::strided_copy(ds, dd, es, v, nullptr);
  if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess) {
    std::printf("error %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  cudaMemcpy(got.data(), dd, got.size(), cudaMemcpyDeviceToHost);
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      std::printf("mismatch at byte %zu\n", i);
      return 1;
    }
  const benanza::StridedPlan p = benanza::plan_strided_copy(v, es, reinterpret_cast<std::uintptr_t>(ds),
                                                            reinterpret_cast<std::uintptr_t>(dd));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) benanza::strided_copy(ds, dd, es, v, nullptr);
  cudaEventRecord(a);
  for (int i = 0; i < 50; ++i) benanza::strided_copy(ds, dd, es, v, nullptr);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  ms /= 50;
  std::printf("ok %s %d %.5f %.1f\n", p.kind == benanza::StridedPlan::kTiled ? "tiled" : "elementwise", p.unit_bytes, ms,
              2.0 * n * es / (ms * 1e-3) / 1e9);
  return 0;
}
