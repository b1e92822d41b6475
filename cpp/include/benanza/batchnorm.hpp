// BatchNormalization in a training step through the cuDNN graph API (batchnorm_engines.cpp): the
// training forward (`batchnorm` node) and the backward (`batchnorm_backward` node). The generated
// BatchNormTrain and BatchNormBwd benchmarks call these after the legacy
// cudnnBatchNormalization*Ex calls. This header has no cudnn-frontend types: the generated sources
// include it without the frontend.
#pragma once

#include <cstddef>

#include "benanza/harness.hpp"

namespace benanza {

struct BatchNormSpec {
  Precision precision;
  const int* dims;   // N C H W (spatial dims beyond two folded into H)
  bool nhwc;         // x, y, dy, dx stored channels-last
  double epsilon;    // the node's (>= CUDNN_BN_MIN_EPSILON, 0 in cuDNN 9)
  double momentum;   // the running statistics' exponential average factor (forward)
  const char* note;  // how the timed call differs from the ONNX node ("" when it does not)
};

// The training forward graph: y, the saved mean and inverse variance from x, scale and bias; the
// running mean and variance read and updated (written to next_mean, next_var). Scale, bias and every
// statistic are float32 (1, C, 1, 1). Records heuristics A/B top picks and times every engine config
// (call "cudnnBackendExecute(batchnorm)"); a graph cuDNN cannot run is recorded as not_supported.
void run_batchnorm_train_engines(Bench& b, const BatchNormSpec& s, void* x, void* scale, void* bias, void* run_mean,
                                 void* run_var, void* next_mean, void* next_var, void* y, void* mean, void* inv_var);

// The backward graph: dx, dscale and dbias from dy, x, scale and the saved mean and inverse
// variance (call "cudnnBackendExecute(batchnorm_backward)"), timed as above.
void run_batchnorm_backward_engines(Bench& b, const BatchNormSpec& s, void* x, void* dy, void* scale, void* mean,
                                    void* inv_var, void* dx, void* dscale, void* dbias);

}  // namespace benanza
