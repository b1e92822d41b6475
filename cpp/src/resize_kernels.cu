// benanza's ONNX Resize / Upsample kernels (benanza/resize.hpp): the forward (one thread per output
// element, the taps of each spatial dim from resize_taps) and its gradient (zero fill, then a
// scatter-add of w * dy into the taps with atomicAdd). Simple and memory-bound on purpose: they give
// the layer a valid measurement where cuDNN and cuBLAS have no call; the lower bound takes the
// fastest of them and PyTorch's upsample kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "benanza/kernel_util.cuh"

#include "benanza/resize.hpp"

namespace benanza {
namespace {

// The taps of output element t: the offset of its (batch, channel) plane in x (elements; NCHW: the
// plane's start, NHWC: the channel's offset in the first pixel), the element stride of one
// spatial position, and per spatial dim its taps' indices and weights.
struct Taps {
  long long base, pix;
  int count[3];
  long long idx[3][4];
  float w[3][4];
};

__device__ __forceinline__ void taps_of(const ResizeParams& p, unsigned long long t, Taps& k) {
  long long o[3] = {0, 0, 0};
  long long in_plane = 1;
  for (int d = 0; d < p.nsp; ++d) in_plane *= p.in[d];
  unsigned long long rest = t;
  long long c = 0;
  if (p.channels_last) {
    c = static_cast<long long>(rest % p.c);
    rest /= p.c;
  }
  for (int d = p.nsp - 1; d >= 0; --d) {
    o[d] = static_cast<long long>(rest % p.out[d]);
    rest /= p.out[d];
  }
  if (!p.channels_last) {
    c = static_cast<long long>(rest % p.c);
    rest /= p.c;
  }
  const long long n = static_cast<long long>(rest);
  if (p.channels_last) {
    k.base = n * in_plane * p.c + c;
    k.pix = p.c;
  } else {
    k.base = (n * p.c + c) * in_plane;
    k.pix = 1;
  }
  for (int d = 0; d < 3; ++d) {
    if (d < p.nsp) {
      k.count[d] = resize_taps(p.mode, p.coord, p.nearest, p.cubic_a, o[d], p.in[d], p.out[d], p.scale[d], k.idx[d],
                               k.w[d]);
    } else {
      k.count[d] = 1;
      k.idx[d][0] = 0;
      k.w[d][0] = 1.0f;
    }
  }
}

// The offset (elements) of tap (a, b, c) and its weight; dims past nsp have one tap at 0.
__device__ __forceinline__ long long tap_offset(const ResizeParams& p, const Taps& k, int a, int b, int c, float& w) {
  w = k.w[0][a] * k.w[1][b] * k.w[2][c];
  long long sp = k.idx[0][a];
  if (p.nsp > 1) sp = sp * p.in[1] + k.idx[1][b];
  if (p.nsp > 2) sp = sp * p.in[2] + k.idx[2][c];
  return k.base + sp * k.pix;
}

template <typename T>
__global__ void resize_k(const T* __restrict__ x, T* __restrict__ y, ResizeParams p, unsigned long long total) {
  for (unsigned long long t = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    Taps k;
    taps_of(p, t, k);
    float acc = 0.0f;
    for (int a = 0; a < k.count[0]; ++a)
      for (int b = 0; b < k.count[1]; ++b)
        for (int c = 0; c < k.count[2]; ++c) {
          float w;
          const long long off = tap_offset(p, k, a, b, c, w);
          acc += w * to_f(x[off]);
        }
    y[t] = from_f<T>(acc);
  }
}

template <typename T>
__global__ void resize_backward_k(const T* __restrict__ dy, T* dx, ResizeParams p, unsigned long long total) {
  for (unsigned long long t = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    Taps k;
    taps_of(p, t, k);
    const float g = to_f(dy[t]);
    for (int a = 0; a < k.count[0]; ++a)
      for (int b = 0; b < k.count[1]; ++b)
        for (int c = 0; c < k.count[2]; ++c) {
          float w;
          const long long off = tap_offset(p, k, a, b, c, w);
          if (w != 0.0f) atomicAdd(dx + off, from_f<T>(w * g));
        }
  }
}

unsigned long long out_numel(const ResizeParams& p) {
  unsigned long long n = static_cast<unsigned long long>(p.n * p.c);
  for (int d = 0; d < p.nsp; ++d) n *= static_cast<unsigned long long>(p.out[d]);
  return n;
}

unsigned long long in_numel(const ResizeParams& p) {
  unsigned long long n = static_cast<unsigned long long>(p.n * p.c);
  for (int d = 0; d < p.nsp; ++d) n *= static_cast<unsigned long long>(p.in[d]);
  return n;
}

std::size_t bytes_of(DType t) { return t == DType::F32 ? 4 : 2; }

}  // namespace

cudaError_t resize_kernel(const void* x, void* y, const ResizeParams& p, DType t, cudaStream_t s) {
  if (p.nsp < 1 || p.nsp > 3) return cudaErrorInvalidValue;
  const unsigned long long total = out_numel(p);
  if (total == 0) return cudaSuccess;
  const unsigned g = grid_for(total);
  if (t == DType::F32)
    resize_k<float><<<g, kThreads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), p, total);
  else if (t == DType::F16)
    resize_k<__half><<<g, kThreads, 0, s>>>(static_cast<const __half*>(x), static_cast<__half*>(y), p, total);
  else if (t == DType::BF16)
    resize_k<__nv_bfloat16><<<g, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x),
                                                   static_cast<__nv_bfloat16*>(y), p, total);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t resize_backward_kernel(const void* dy, void* dx, const ResizeParams& p, DType t, cudaStream_t s) {
  if (p.nsp < 1 || p.nsp > 3) return cudaErrorInvalidValue;
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return cudaErrorInvalidValue;
  cudaError_t e = cudaMemsetAsync(dx, 0, in_numel(p) * bytes_of(t), s);
  if (e != cudaSuccess) return e;
  const unsigned long long total = out_numel(p);
  if (total == 0) return cudaSuccess;
  const unsigned g = grid_for(total);
  if (t == DType::F32)
    resize_backward_k<float><<<g, kThreads, 0, s>>>(static_cast<const float*>(dy), static_cast<float*>(dx), p, total);
  else if (t == DType::F16)
    resize_backward_k<__half><<<g, kThreads, 0, s>>>(static_cast<const __half*>(dy), static_cast<__half*>(dx), p,
                                                     total);
  else
    resize_backward_k<__nv_bfloat16><<<g, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(dy),
                                                            static_cast<__nv_bfloat16*>(dx), p, total);
  return cudaGetLastError();
}

}  // namespace benanza
