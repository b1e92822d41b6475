// The optimizer step of a training step (docs/training.md; benanza/kinds/optimizer.py): SGD (momentum,
// Nesterov, weight decay), Adam and AdamW (weight decay, AMSGrad) over every parameter of a model in
// ONE launch, PyTorch's multi_tensor_apply approach (aten/src/ATen/native/cuda/MultiTensorApply.cuh):
// the parameters are cut into chunks of at most kOptimizerChunk elements, one CUDA block per chunk,
// the chunk table in device memory. The parameters, gradients and each state buffer live in arenas
// of one layout (the same element offset for a parameter in each), every offset a multiple of 8
// elements, so 16-byte vector loads and stores serve every precision; float32 math on fp32, fp16 or
// bf16 storage, as PyTorch's fused kernels compute in "opmath".
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "benanza/harness.hpp"

namespace benanza {

enum class OptimizerAlgo : int { SGD = 0, ADAM = 1, ADAMW = 2 };
const char* optimizer_name(OptimizerAlgo a);

// The elements of one chunk (PyTorch's kChunkSize) and the threads of a block.
constexpr int kOptimizerChunk = 65536;
constexpr int kOptimizerThreads = 512;

// The step's scalars, as torch.optim passes them (per-step values computed on the host, as the
// for-each path's non-capturable branch does: step_size = lr / (1 - beta1^step),
// bc2_sqrt = sqrt(1 - beta2^step)).
struct OptimizerParams {
  OptimizerAlgo algo = OptimizerAlgo::ADAM;
  float lr = 1e-3f;
  float momentum = 0.0f;       // SGD: 0 = no momentum buffer
  float dampening = 0.0f;      // SGD
  float weight_decay = 0.0f;   // SGD/Adam: L2 added to the gradient; AdamW: decoupled
  bool nesterov = false;       // SGD
  bool amsgrad = false;        // Adam/AdamW
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  long long step = 1;          // Adam/AdamW: the step of the bias corrections (>= 1)
};

// One chunk: `n` elements (1..kOptimizerChunk) from element `offset` of every arena.
struct OptimizerChunk {
  long long offset;
  int n;
};

// The chunks of parameters of `numels[i]` elements at arena element offsets `offsets[i]`
// (multiples of 8), in order; empty parameters have none.
std::vector<OptimizerChunk> optimizer_chunks(const long long* numels, const long long* offsets, int count);

// How many state arenas the step reads and writes: SGD 0 (1 with momentum), Adam/AdamW 2 (3 with
// amsgrad: exp_avg, exp_avg_sq, max_exp_avg_sq).
int optimizer_state_buffers(const OptimizerParams& p);

// One step: param -= update(grad, state) for every element of every chunk (`chunks`: device memory,
// `n_chunks` entries). `state[i]` (i < optimizer_state_buffers(p)): SGD's momentum buffer;
// Adam's exp_avg, exp_avg_sq, max_exp_avg_sq. All arenas hold `t` (F32, F16, BF16) and are
// 16-byte aligned. cudaErrorInvalidValue for another type, a step < 1 or a missing state arena.
cudaError_t optimizer_step(const OptimizerParams& p, void* param, const void* grad, void* const* state,
                           const OptimizerChunk* chunks, int n_chunks, DType t, cudaStream_t s);

}  // namespace benanza
