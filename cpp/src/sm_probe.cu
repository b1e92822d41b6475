// The SM probe of partition.hpp: which SMs do a kernel's blocks run on?
#include <cuda_runtime.h>

#include "benanza/partition.hpp"

namespace benanza {

namespace {

constexpr int kMaxSmIds = 1024;  // %smid < 1024 on every GPU to date (132 on H100, 148 on B200)

__global__ void smid_kernel(unsigned* seen, long long spin_cycles) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (threadIdx.x == 0 && sm < kMaxSmIds) atomicOr(&seen[sm / 32], 1u << (sm % 32));
  const long long t0 = clock64();
  while (clock64() - t0 < spin_cycles) {
  }
}

}  // namespace

int probe_sms(cudaStream_t stream, int blocks) {
  unsigned* d = nullptr;
  unsigned h[kMaxSmIds / 32] = {0};
  if (cudaMalloc(&d, sizeof h) != cudaSuccess) return -1;
  int n = -1;
  if (cudaMemsetAsync(d, 0, sizeof h, stream) == cudaSuccess) {
    smid_kernel<<<blocks, 32, 0, stream>>>(d, 40000);  // ~20 us at 2 GHz
    if (cudaGetLastError() == cudaSuccess && cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
        cudaStreamSynchronize(stream) == cudaSuccess) {
      n = 0;
      for (unsigned w : h) n += __builtin_popcount(w);
    }
  }
  cudaGetLastError();
  cudaFree(d);
  return n;
}

}  // namespace benanza
