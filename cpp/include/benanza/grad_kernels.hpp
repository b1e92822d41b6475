// benanza CUDA kernels for the training step's gradients that no library call computes
// (grad_kernels.cu): the gradient of a Gather (an embedding's dense gradient, a select's) and the
// cross-entropy loss with its gradient. Math in float32 whatever the storage type.
#pragma once

#include <cuda_runtime.h>

#include "benanza/harness.hpp"

namespace benanza {

// The gradient of y = take(data, idx, axis) with data viewed as (outer, axis_dim, inner) and dy as
// (outer, n, inner): dx = zeros(outer, axis_dim, inner) (cudaMemsetAsync), then
// dx[o][idx[j]][i] += dy[o][j][i], one thread per element of dy. accumulate: atomicAdd (indices
// that may repeat: PyTorch's index_add_; the order of the additions, and so the rounding, is not
// deterministic); else plain stores (distinct constant indices: a select's or index_select's
// backward, a copy). idx (n,) int64, negative values count from the end.
cudaError_t gather_backward_kernel(const void* dy, const long long* idx, void* dx, long long outer, long long axis_dim,
                                   long long n, long long inner, bool accumulate, DType t, cudaStream_t s);

// Cross-entropy with class indices, reduction mean, over `rows` rows of `classes` logits (the class
// dim last), forward and backward in one launch (one block per row): loss = mean_r(logsumexp(x_r)
// - x_r[label_r]) (float32, accumulated into *loss with atomicAdd: not deterministic in its last
// bits) and dx = (softmax(x_r) - onehot(label_r)) / rows. labels (rows,) int64 in [0, classes).
cudaError_t cross_entropy_kernel(const void* logits, const long long* labels, float* loss, void* dx, long long rows,
                                 long long classes, DType t, cudaStream_t s);

// The same loss and gradient from log-probabilities logp = log_softmax(x) (cudnnSoftmaxForward
// LOG): loss = -mean_r logp_r[label_r], dx = (exp(logp) - onehot) / rows (PyTorch's nll_loss
// and _log_softmax_backward_data fused).
cudaError_t nll_from_log_softmax_kernel(const void* logp, const long long* labels, float* loss, void* dx,
                                        long long rows, long long classes, DType t, cudaStream_t s);

}  // namespace benanza
