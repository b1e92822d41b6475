// Machine ceilings measured by benanza itself (`suite --ceilings`), the roofs of the roofline
// (Williams, Waterman and Patterson, CACM 2009) for the GPU the suite runs on:
//   * dram_bandwidth: 1 GiB copied device to device by a grid-stride kernel of 16-byte vectors
//     (STREAM's copy, McCalpin 1995; work: 2 x bytes, read + write), the rate an SM-driven memory-
//     bound layer can reach;
//   * dram_bandwidth_memcpy: the same copy by cudaMemcpyAsync (in a CUDA graph: a memcpy node, which
//     the copy engines may run), for comparison;
//   * l2_bandwidth: the same copy kernel on a quarter of the L2's size copied to another quarter
//     (work: 2 x bytes), replayed back to back so both buffers stay in L2: the L2 roof;
//   * gemm_fp32 / gemm_tf32 / gemm_fp16 / gemm_bf16: cublasGemmEx of 8192 x 8192 x 8192 with
//     CUBLAS_COMPUTE_32F (FMA), CUBLAS_COMPUTE_32F_FAST_TF32, and 16-bit data with 32F compute
//     (work: 2 x 8192^3 FLOPs), the matrix rate a library GEMM reaches per data type;
//   * fma_fp32: a benanza kernel of independent FP32 FMA chains (fma_rate in kernels.cu; work: 2
//     FLOPs per FMA), the CUDA-core rate.
// Each is timed with the harness's method (Bench::measure: warm-up, CUDA-graph replays, adaptive
// stop) in a Bench of its own (so screening never compares one ceiling with another) and emitted
// as a measurement record of kind "Ceiling" whose details hold the ceiling's name, its work and
// unit; the Python side divides the work by the median time.
#include <string>

#include "benanza/cudnn_util.hpp"
#include "benanza/harness.hpp"

namespace benanza {

namespace {

std::string details(const char* name, double work, const char* unit) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "{\"ceiling\":\"%s\",\"work\":%.17g,\"unit\":\"%s\"}", name, work, unit);
  return buf;
}

}  // namespace

int run_ceilings(Context& ctx) {
  static const JobInfo job{"ceilings", "ceilings", "Ceiling", "", Precision::FP32};
  // DRAM bandwidth: 1 GiB copied device to device, by a copy kernel and by cudaMemcpyAsync
  {
    const std::size_t bytes = std::size_t(1) << 30;
    Bench b(ctx, job);
    void* src = b.random(bytes / 4, DType::F32);
    void* dst = b.zeros(bytes);
    const int blocks = ctx.device().sm_count * 8, threads = 256;
    Call c{"copy_rate<<<8 x SMs, 256>>>", "dram_bandwidth", "none", DType::F32, "1 GiB read + 1 GiB written, 16-byte vectors", 0};
    c.details = details("dram_bandwidth", 2.0 * static_cast<double>(bytes), "bytes/s");
    b.measure(c, [&](cudaStream_t s) -> Status {
      copy_rate(src, dst, bytes, blocks, threads, s);
      BZ_CUDA(cudaGetLastError());
      return Status::success();
    }, nullptr, 0, DType::F32);
  }
  {
    const std::size_t bytes = std::size_t(1) << 30;
    Bench b(ctx, job);
    void* src = b.random(bytes / 4, DType::F32);
    void* dst = b.zeros(bytes);
    Call c{"cudaMemcpyAsync(DeviceToDevice)", "dram_bandwidth_memcpy", "none", DType::F32, "1 GiB read + 1 GiB written", 0};
    c.details = details("dram_bandwidth_memcpy", 2.0 * static_cast<double>(bytes), "bytes/s");
    b.measure(c, [&](cudaStream_t s) -> Status {
      BZ_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
      return Status::success();
    }, nullptr, 0, DType::F32);
  }
  // L2 bandwidth: a working set of half the L2 (source and destination a quarter each) copied again
  // and again, so every warm sample reads and writes L2-resident lines
  if (ctx.device().l2_cache_bytes >= 64) {
    const std::size_t bytes = static_cast<std::size_t>(ctx.device().l2_cache_bytes / 4) / 16 * 16;
    Bench b(ctx, job);
    void* src = b.random(bytes / 4, DType::F32);
    void* dst = b.zeros(bytes);
    const int blocks = ctx.device().sm_count * 8, threads = 256;
    Call c{"copy_rate<<<8 x SMs, 256>>>", "l2_bandwidth", "none", DType::F32,
           "L2/4 read + L2/4 written, 16-byte vectors, L2-resident", 0};
    c.details = details("l2_bandwidth", 2.0 * static_cast<double>(bytes), "bytes/s");
    b.measure(c, [&](cudaStream_t s) -> Status {
      copy_rate(src, dst, bytes, blocks, threads, s);
      BZ_CUDA(cudaGetLastError());
      return Status::success();
    }, nullptr, 0, DType::F32);
  }
  // library GEMM rate per data type
  const int n = 8192;
  const std::pair<const char*, Precision> gemms[] = {
      {"gemm_fp32", Precision::FP32}, {"gemm_tf32", Precision::TF32}, {"gemm_fp16", Precision::FP16},
      {"gemm_bf16", Precision::BF16}};
  for (const auto& [name, p] : gemms) {
    Bench b(ctx, job);
    const DType dt = storage_of(p);
    const cudaDataType_t t = cuda_dtype(dt);
    const cublasComputeType_t compute = p == Precision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const std::size_t nn = static_cast<std::size_t>(n) * n;
    const float range = weight_range(static_cast<std::size_t>(n));
    void* a = b.random(nn, dt);
    void* w = b.random(nn, dt, -range, range);
    void* y = b.random(nn, dt);
    const float alpha = 1.0f, beta = 0.0f;
    Call c{"cublasGemmEx", name, math_label(p), dt, "8192 x 8192 x 8192, CUBLAS_GEMM_DEFAULT", 0};
    c.details = details(name, 2.0 * n * static_cast<double>(n) * n, "FLOP/s");
    check(cublasSetMathMode(b.cublas(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    b.measure(c, [&](cudaStream_t) -> Status {
      BZ_CUBLAS(cublasGemmEx(b.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, w, t, n, a, t, n, &beta, y, t, n,
                             compute, CUBLAS_GEMM_DEFAULT));
      return Status::success();
    }, y, nn, dt);
  }
  // CUDA-core FP32 FMA rate
  {
    Bench b(ctx, job);
    const int blocks = ctx.device().sm_count * 8, threads = 256, iters = 4096;
    float* out = static_cast<float*>(b.zeros(static_cast<std::size_t>(blocks) * threads * sizeof(float)));
    Call c{"fma_rate<<<8 x SMs, 256>>>", "fma_fp32", "fma", DType::F32, "8 independent FMA chains per thread", 0};
    const double work = 2.0 * kFmaChains * static_cast<double>(iters) * blocks * threads;
    c.details = details("fma_fp32", work, "FLOP/s");
    b.measure(c, [&](cudaStream_t s) -> Status {
      fma_rate(out, blocks, threads, iters, s);
      BZ_CUDA(cudaGetLastError());
      return Status::success();
    }, out, static_cast<std::size_t>(blocks) * threads, DType::F32);
  }
  return 0;
}

}  // namespace benanza
