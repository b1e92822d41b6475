// cuDNN graph-API engine configs for convolutions (engines.cpp): the generated Conv and
// ConvBiasAct benchmarks call run_conv_engines after the legacy algorithms.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "benanza/harness.hpp"

namespace benanza {

struct TensorDesc;  // cudnn_util.hpp

struct ConvSpec {
  Precision precision;
  int nsp;               // spatial dims
  const int* x;          // N C (D) H W, as timed (pre-padded for asymmetric pads)
  const int* w;          // K C/group (kD) kH kW
  const int* pad;        // symmetric pads
  const int* stride;
  const int* dilation;
  bool bias;             // + pointwise ADD of a per-channel bias
  bool relu;             // + pointwise RELU
  const int* y;          // N K (D) H W: the output dims
  bool nhwc;             // tensors stored channels-last (NHWC / NDHWC) instead of NCHW
  bool scale = false;    // + pointwise MUL by a per-channel scale before the bias (BatchNormalization folded)
};

// The pointwise activation a matmul graph ends with (GemmAct fusion candidates).
enum class MatmulAct { NONE, RELU, GELU, GELU_TANH };

// A GEMM as a cuDNN graph: Y[b] = act(op(A)[b] @ op(B)[b] (+ C)), row-major.
struct MatmulSpec {
  Precision precision;
  int m, n, k, batch;
  bool trans_a, trans_b;
  int bias;              // 0: none; 1: a length-n vector; 2: a full m x n C
  MatmulAct act;         // RELU_FWD, GELU_FWD (erf) or GELU_APPROX_TANH_FWD after the bias
};

// Record heuristics A/B top picks and time every engine config of the matmul graph.
void run_matmul_engines(Bench& b, const MatmulSpec& spec, void* a, void* w, void* c, void* y, std::size_t y_count);


// Record heuristics A/B top picks and time every engine config (device buffers given, filled).
// (`scale`: the per-channel scale buffer when spec.scale)
void run_conv_engines(Bench& b, const ConvSpec& spec, void* x, void* w, void* bias, void* y, std::size_t y_count,
                      void* scale = nullptr);

// Which gradient of a convolution a backward graph computes: conv_dgrad (dx from dy and w) or
// conv_wgrad (dw from x and dy).
enum class ConvGrad { DATA, FILTER };

// Record heuristics A/B top picks and time every engine config of the convolution's backward graph
// `grad` (ConvSpec as for the forward: x, w, y are the forward's dims; `relu` and `scale` unused).
// DATA: reads dy (y's dims) and w, writes dx (x's dims). FILTER: reads x and dy, writes dw (w's
// dims); with spec.bias each engine config is followed by cudnnConvolutionBackwardBias into `db`.
void run_conv_grad_engines(Bench& b, const ConvSpec& spec, ConvGrad grad, void* x, void* w, void* dy, void* db);

// The bias gradient beside a convolution's weight gradient, db[k] = the sum of dy[:, k, ...] (a
// framework computes both in one backward call): cudnnConvolutionBackwardBias, except in bf16,
// which it does not support (CUDNN_STATUS_NOT_SUPPORTED on cuDNN 9.19: without it no bf16
// convolution with a bias would have a weight-gradient candidate); there
// benanza's own reduction (reduce(): fp32 accumulation, the reduce kernels' plan) sums dy over its
// batch and spatial dims, in memory order (NCHW: N x K x spatial -> 1 x K x 1; NHWC: N x spatial x
// K -> 1 x 1 x K). `call` is the suffix of the timed call's name. Its buffers live with the Bench.
class ConvBiasGrad {
 public:
  ConvBiasGrad(Bench& b, DType dt, int nd, const int* ydims, int k, bool nhwc);
  std::string call() const { return call_for(dt_); }
  // The suffix for data type `dt` ("+cudnnConvolutionBackwardBias" or "+benanza::reduce(bias)").
  static const char* call_for(DType dt) {
    return dt == DType::BF16 ? "+benanza::reduce(bias)" : "+cudnnConvolutionBackwardBias";
  }
  // Adds db from dy on `stream` (the cuDNN handle's stream for the cuDNN path).
  Status run(const void* dy, void* db, cudaStream_t stream) const;

 private:
  cudnnHandle_t h_;
  DType dt_;
  bool own_;
  std::vector<int> ydims_, bdims_;  // memory order, for reduce()
  void* ws_ = nullptr;
  std::size_t ws_bytes_ = 0;
  std::shared_ptr<TensorDesc> y_desc_, b_desc_;  // the cuDNN path's descriptors
};

}  // namespace benanza
