// benanza::optimizer_step (optimizer.hpp): the multi-tensor optimizer step. The update of each
// element is the formula of PyTorch's fused kernels (torch 2.x):
//   SGD (aten/src/ATen/native/cuda/FusedSgdKernel.cu; torch/optim/sgd.py):
//     grad += weight_decay * param;                          (weight_decay != 0)
//     buf = momentum * buf + (1 - dampening) * grad;         (momentum != 0; steady state)
//     grad = nesterov ? grad + momentum * buf : buf;
//     param -= lr * grad;
//   Adam / AdamW (aten/src/ATen/native/cuda/fused_adam_utils.cuh; torch/optim/adam.py, adamw.py):
//     grad += weight_decay * param;                          (Adam, weight_decay != 0)
//     param -= lr * weight_decay * param;                    (AdamW, weight_decay != 0)
//     exp_avg = beta1 * exp_avg + (1 - beta1) * grad;
//     exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad;
//     max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq);      (amsgrad; the denominator reads it)
//     denom = sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps;
//     param -= (lr / (1 - beta1^step)) * exp_avg / denom;
// benanza.kinds.optimizer.reference_step writes the same in numpy (tests/test_optimizer.py).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "benanza/optimizer.hpp"

namespace benanza {
namespace {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// 16 bytes of T
template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

// The step's scalars in float (per step, computed on the host).
struct Scalars {
  int algo;
  float lr, momentum, dampening, weight_decay, beta1, beta2, eps;
  float step_size;   // lr / (1 - beta1^step)
  float bc2_sqrt;    // sqrt(1 - beta2^step)
  float lr_wd;       // lr * weight_decay (AdamW)
  int nesterov, amsgrad, n_state;
};

// One element's update (the formulas above); s[0..2]: the element of each state arena.
__device__ __forceinline__ void update(const Scalars& c, float& p, float g, float* s) {
  if (c.algo == static_cast<int>(OptimizerAlgo::SGD)) {
    if (c.weight_decay != 0.0f) g += c.weight_decay * p;
    if (c.momentum != 0.0f) {
      s[0] = c.momentum * s[0] + (1.0f - c.dampening) * g;
      g = c.nesterov ? g + c.momentum * s[0] : s[0];
    }
    p -= c.lr * g;
    return;
  }
  if (c.weight_decay != 0.0f) {
    if (c.algo == static_cast<int>(OptimizerAlgo::ADAMW))
      p -= c.lr_wd * p;
    else
      g += c.weight_decay * p;
  }
  s[0] = c.beta1 * s[0] + (1.0f - c.beta1) * g;
  s[1] = c.beta2 * s[1] + (1.0f - c.beta2) * g * g;
  float v = s[1];
  if (c.amsgrad) {
    s[2] = fmaxf(s[2], s[1]);
    v = s[2];
  }
  const float denom = sqrtf(v) / c.bc2_sqrt + c.eps;
  p -= c.step_size * s[0] / denom;
}

// One block per chunk; each thread updates 16-byte packs (the chunk's start is a multiple of 8
// elements, so of a pack) and the chunk's tail element by element. S: the state arenas (0 to 3),
// a template parameter so the packs stay in registers.
template <typename T, int S>
__global__ void __launch_bounds__(kOptimizerThreads)
    optimizer_kernel(T* __restrict__ param, const T* __restrict__ grad, T* __restrict__ s0, T* __restrict__ s1,
                     T* __restrict__ s2, const OptimizerChunk* __restrict__ chunks, Scalars c) {
  constexpr int N = Pack<T>::N;
  const OptimizerChunk ch = chunks[blockIdx.x];
  T* const st[3] = {s0, s1, s2};
  const int packs = ch.n / N;
  for (int i = threadIdx.x; i < packs; i += blockDim.x) {
    const long long at = ch.offset + static_cast<long long>(i) * N;
    Pack<T> pp = *reinterpret_cast<const Pack<T>*>(param + at);
    const Pack<T> gp = *reinterpret_cast<const Pack<T>*>(grad + at);
    Pack<T> sp[S > 0 ? S : 1];
    #pragma unroll
    for (int k = 0; k < S; ++k) sp[k] = *reinterpret_cast<const Pack<T>*>(st[k] + at);
#pragma unroll
    for (int e = 0; e < N; ++e) {
      float p = to_f(pp.v[e]);
      float s[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int k = 0; k < S; ++k) s[k] = to_f(sp[k].v[e]);
      update(c, p, to_f(gp.v[e]), s);
      pp.v[e] = from_f<T>(p);
      #pragma unroll
    for (int k = 0; k < S; ++k) sp[k].v[e] = from_f<T>(s[k]);
    }
    *reinterpret_cast<Pack<T>*>(param + at) = pp;
#pragma unroll
    for (int k = 0; k < S; ++k) *reinterpret_cast<Pack<T>*>(st[k] + at) = sp[k];
  }
  for (int i = packs * N + threadIdx.x; i < ch.n; i += blockDim.x) {
    const long long at = ch.offset + i;
    float p = to_f(param[at]);
    float s[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < S; ++k) s[k] = to_f(st[k][at]);
    update(c, p, to_f(grad[at]), s);
    param[at] = from_f<T>(p);
#pragma unroll
    for (int k = 0; k < S; ++k) st[k][at] = from_f<T>(s[k]);
  }
}

template <typename T>
cudaError_t launch(const Scalars& c, void* param, const void* grad, void* const* state, const OptimizerChunk* chunks,
                   int n_chunks, cudaStream_t s) {
  T* st[3] = {nullptr, nullptr, nullptr};
  for (int k = 0; k < c.n_state; ++k) st[k] = static_cast<T*>(state[k]);
  auto* pp = static_cast<T*>(param);
  const auto* gp = static_cast<const T*>(grad);
  switch (c.n_state) {
    case 0: optimizer_kernel<T, 0><<<n_chunks, kOptimizerThreads, 0, s>>>(pp, gp, st[0], st[1], st[2], chunks, c); break;
    case 1: optimizer_kernel<T, 1><<<n_chunks, kOptimizerThreads, 0, s>>>(pp, gp, st[0], st[1], st[2], chunks, c); break;
    case 2: optimizer_kernel<T, 2><<<n_chunks, kOptimizerThreads, 0, s>>>(pp, gp, st[0], st[1], st[2], chunks, c); break;
    case 3: optimizer_kernel<T, 3><<<n_chunks, kOptimizerThreads, 0, s>>>(pp, gp, st[0], st[1], st[2], chunks, c); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

}  // namespace

const char* optimizer_name(OptimizerAlgo a) {
  switch (a) {
    case OptimizerAlgo::SGD: return "sgd";
    case OptimizerAlgo::ADAM: return "adam";
    case OptimizerAlgo::ADAMW: return "adamw";
  }
  return "?";
}

int optimizer_state_buffers(const OptimizerParams& p) {
  if (p.algo == OptimizerAlgo::SGD) return p.momentum != 0.0f ? 1 : 0;
  return p.amsgrad ? 3 : 2;
}

std::vector<OptimizerChunk> optimizer_chunks(const long long* numels, const long long* offsets, int count) {
  std::vector<OptimizerChunk> out;
  for (int i = 0; i < count; ++i)
    for (long long at = 0; at < numels[i]; at += kOptimizerChunk) {
      const long long n = numels[i] - at < kOptimizerChunk ? numels[i] - at : kOptimizerChunk;
      out.push_back(OptimizerChunk{offsets[i] + at, static_cast<int>(n)});
    }
  return out;
}

cudaError_t optimizer_step(const OptimizerParams& p, void* param, const void* grad, void* const* state,
                           const OptimizerChunk* chunks, int n_chunks, DType t, cudaStream_t s) {
  const int n_state = optimizer_state_buffers(p);
  if (p.algo != OptimizerAlgo::SGD && p.step < 1) return cudaErrorInvalidValue;
  if (!aligned16(param) || !aligned16(grad)) return cudaErrorInvalidValue;
  for (int k = 0; k < n_state; ++k)
    if (state == nullptr || state[k] == nullptr || !aligned16(state[k])) return cudaErrorInvalidValue;
  if (n_chunks <= 0) return cudaSuccess;
  Scalars c{};
  c.algo = static_cast<int>(p.algo);
  c.lr = p.lr;
  c.momentum = p.momentum;
  c.dampening = p.dampening;
  c.weight_decay = p.weight_decay;
  c.beta1 = p.beta1;
  c.beta2 = p.beta2;
  c.eps = p.eps;
  // as torch.optim computes them on the host (double), then float like the fused kernels' opmath
  const double step = static_cast<double>(p.step);
  c.step_size = p.algo == OptimizerAlgo::SGD ? 0.0f : static_cast<float>(p.lr / (1.0 - std::pow(double(p.beta1), step)));
  c.bc2_sqrt = p.algo == OptimizerAlgo::SGD ? 1.0f : static_cast<float>(std::sqrt(1.0 - std::pow(double(p.beta2), step)));
  c.lr_wd = p.lr * p.weight_decay;
  c.nesterov = p.nesterov;
  c.amsgrad = p.amsgrad;
  c.n_state = n_state;
  switch (t) {
    case DType::F32: return launch<float>(c, param, grad, state, chunks, n_chunks, s);
    case DType::F16: return launch<__half>(c, param, grad, state, chunks, n_chunks, s);
    case DType::BF16: return launch<__nv_bfloat16>(c, param, grad, state, chunks, n_chunks, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace benanza
