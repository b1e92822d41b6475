// RAII wrappers of cuDNN descriptors and the names of cuDNN enums, for the generated benchmarks.
// Every constructor checks its calls and throws benanza::JobError with the failing call's name.
#pragma once

#include <cudnn.h>

#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "benanza/harness.hpp"

namespace benanza {

using Dims = std::vector<int>;

inline std::size_t numel(const Dims& d) {
  std::size_t n = 1;
  for (int v : d) n *= static_cast<std::size_t>(v);
  return n;
}

inline Dims packed_strides(const Dims& d) {
  Dims s(d.size());
  long long acc = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    s[i] = static_cast<int>(acc);
    acc *= d[i];
  }
  return s;
}

// Strides of dims (N, C, spatial...) stored channels-last (NHWC / NDHWC): C fastest, then the
// spatial dims, N slowest.
inline Dims channels_last_strides(const Dims& d) {
  const int n = static_cast<int>(d.size());
  if (n < 3) return packed_strides(d);
  Dims s(d.size());
  long long acc = 1;
  s[1] = 1;
  acc *= d[1];
  for (int i = n - 1; i >= 2; --i) {
    s[i] = static_cast<int>(acc);
    acc *= d[i];
  }
  s[0] = static_cast<int>(acc);
  return s;
}

// The strides of dims in a job's layout: "NHWC" channels-last, anything else packed (NCHW).
inline Dims layout_strides(const Dims& d, const char* layout) {
  return std::string(layout) == "NHWC" ? channels_last_strides(d) : packed_strides(d);
}

// cuDNN tensor descriptors need at least 4 dims: pad with trailing 1s (stride 1).
inline void pad4(Dims& d, Dims& s) {
  while (d.size() < 4) {
    d.push_back(1);
    s.push_back(1);
  }
}

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(DType t, Dims dims) {
    Dims strides = packed_strides(dims);
    init(t, dims, strides);
  }
  TensorDesc(DType t, Dims dims, Dims strides) { init(t, dims, strides); }
  ~TensorDesc() {
    if (d) cudnnDestroyTensorDescriptor(d);
  }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;

 private:
  void init(DType t, Dims& dims, Dims& strides) {
    pad4(dims, strides);
    check(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
    check(cudnnSetTensorNdDescriptor(d, cudnn_dtype(t), static_cast<int>(dims.size()), dims.data(), strides.data()),
          "cudnnSetTensorNdDescriptor");
  }
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc(DType t, const Dims& dims) {
    check(cudnnCreateFilterDescriptor(&d), "cudnnCreateFilterDescriptor");
    check(cudnnSetFilterNdDescriptor(d, cudnn_dtype(t), CUDNN_TENSOR_NCHW, static_cast<int>(dims.size()), dims.data()),
          "cudnnSetFilterNdDescriptor");
  }
  ~FilterDesc() {
    if (d) cudnnDestroyFilterDescriptor(d);
  }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

// Convolution math per precision, as PyTorch sets it: FP32 -> CUDNN_FMA_MATH (no TF32), TF32 ->
// CUDNN_DEFAULT_MATH (TF32 Tensor Cores permitted on Ampere and later), FP16 -> CUDNN_TENSOR_OP_MATH.
inline cudnnMathType_t conv_math(Precision p) {
  switch (p) {
    case Precision::FP32: return CUDNN_FMA_MATH;
    case Precision::TF32: return CUDNN_DEFAULT_MATH;
    case Precision::FP16: return CUDNN_TENSOR_OP_MATH;
    case Precision::BF16: return CUDNN_TENSOR_OP_MATH;
    case Precision::FP8: return CUDNN_TENSOR_OP_MATH;
  }
  return CUDNN_DEFAULT_MATH;
}
inline const char* math_label(Precision p) {
  switch (p) {
    case Precision::FP32: return "fma";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "tensor_op";
    case Precision::BF16: return "tensor_op";
    case Precision::FP8: return "fp8";
  }
  return "?";
}
inline const char* math_type_name(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH: return "fma";
  }
  return "?";
}

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  // Compute type is float for float32 and float16 data (PSEUDO_HALF_CONFIG for half, as PyTorch).
  ConvDesc(int nsp, const int* pad, const int* stride, const int* dilation, int group, Precision p) {
    check(cudnnCreateConvolutionDescriptor(&d), "cudnnCreateConvolutionDescriptor");
    check(cudnnSetConvolutionNdDescriptor(d, nsp, pad, stride, dilation, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolutionNdDescriptor");
    check(cudnnSetConvolutionGroupCount(d, group), "cudnnSetConvolutionGroupCount");
    check(cudnnSetConvolutionMathType(d, conv_math(p)), "cudnnSetConvolutionMathType");
  }
  ~ConvDesc() {
    if (d) cudnnDestroyConvolutionDescriptor(d);
  }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

struct ActivationDesc {
  cudnnActivationDescriptor_t d = nullptr;
  ActivationDesc(cudnnActivationMode_t mode, double coef) {
    check(cudnnCreateActivationDescriptor(&d), "cudnnCreateActivationDescriptor");
    check(cudnnSetActivationDescriptor(d, mode, CUDNN_PROPAGATE_NAN, coef), "cudnnSetActivationDescriptor");
    if (mode == CUDNN_ACTIVATION_SWISH)
      check(cudnnSetActivationDescriptorSwishBeta(d, coef), "cudnnSetActivationDescriptorSwishBeta");
  }
  ~ActivationDesc() {
    if (d) cudnnDestroyActivationDescriptor(d);
  }
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;
};

struct OpTensorDesc {
  cudnnOpTensorDescriptor_t d = nullptr;
  explicit OpTensorDesc(cudnnOpTensorOp_t op) {
    check(cudnnCreateOpTensorDescriptor(&d), "cudnnCreateOpTensorDescriptor");
    check(cudnnSetOpTensorDescriptor(d, op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN), "cudnnSetOpTensorDescriptor");
  }
  ~OpTensorDesc() {
    if (d) cudnnDestroyOpTensorDescriptor(d);
  }
  OpTensorDesc(const OpTensorDesc&) = delete;
  OpTensorDesc& operator=(const OpTensorDesc&) = delete;
};

struct PoolingDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  PoolingDesc(cudnnPoolingMode_t mode, int nsp, const int* window, const int* pad, const int* stride) {
    check(cudnnCreatePoolingDescriptor(&d), "cudnnCreatePoolingDescriptor");
    check(cudnnSetPoolingNdDescriptor(d, mode, CUDNN_PROPAGATE_NAN, nsp, window, pad, stride),
          "cudnnSetPoolingNdDescriptor");
  }
  ~PoolingDesc() {
    if (d) cudnnDestroyPoolingDescriptor(d);
  }
  PoolingDesc(const PoolingDesc&) = delete;
  PoolingDesc& operator=(const PoolingDesc&) = delete;
};

struct LRNDesc {
  cudnnLRNDescriptor_t d = nullptr;
  LRNDesc(unsigned n, double alpha, double beta, double k) {
    check(cudnnCreateLRNDescriptor(&d), "cudnnCreateLRNDescriptor");
    check(cudnnSetLRNDescriptor(d, n, alpha, beta, k), "cudnnSetLRNDescriptor");
  }
  ~LRNDesc() {
    if (d) cudnnDestroyLRNDescriptor(d);
  }
  LRNDesc(const LRNDesc&) = delete;
  LRNDesc& operator=(const LRNDesc&) = delete;
};

struct ReduceDesc {
  cudnnReduceTensorDescriptor_t d = nullptr;
  explicit ReduceDesc(cudnnReduceTensorOp_t op) {
    check(cudnnCreateReduceTensorDescriptor(&d), "cudnnCreateReduceTensorDescriptor");
    check(cudnnSetReduceTensorDescriptor(d, op, CUDNN_DATA_FLOAT, CUDNN_PROPAGATE_NAN, CUDNN_REDUCE_TENSOR_NO_INDICES,
                                         CUDNN_32BIT_INDICES),
          "cudnnSetReduceTensorDescriptor");
  }
  ~ReduceDesc() {
    if (d) cudnnDestroyReduceTensorDescriptor(d);
  }
  ReduceDesc(const ReduceDesc&) = delete;
  ReduceDesc& operator=(const ReduceDesc&) = delete;
};

struct DropoutDesc {
  cudnnDropoutDescriptor_t d = nullptr;
  DropoutDesc() { check(cudnnCreateDropoutDescriptor(&d), "cudnnCreateDropoutDescriptor"); }
  ~DropoutDesc() {
    if (d) cudnnDestroyDropoutDescriptor(d);
  }
  DropoutDesc(const DropoutDesc&) = delete;
  DropoutDesc& operator=(const DropoutDesc&) = delete;
};

inline const char* conv_fwd_algo_name(int a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
  }
  return "UNKNOWN";
}

inline const char* conv_bwd_data_algo_name(int a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
  }
  return "UNKNOWN";
}

inline const char* conv_bwd_filter_algo_name(int a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
  }
  return "UNKNOWN";
}

// Whether a legacy backward algorithm is deterministic, as cuDNN's enumerations document it
// (cudnn_ops.h, cudnnConvolutionBwdDataAlgo_t / cudnnConvolutionBwdFilterAlgo_t): data ALGO_0 and
// filter ALGO_0 and ALGO_3 sum with atomic adds (non-deterministic), every other one is
// deterministic. The generated suites prefer the `determinism` field of the algorithm's entry in
// cudnnGetConvolutionBackward*Algorithm_v7's list, and use this where the list has none.
inline bool conv_bwd_data_algo_deterministic(int a) { return a != CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; }
inline bool conv_bwd_filter_algo_deterministic(int a) {
  return a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 && a != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// The details of a legacy backward algorithm's record: {"deterministic": true|false, "determinism":
// where it comes from}.
inline std::string determinism_details(bool deterministic, const char* source) {
  return std::string("{\"deterministic\":") + (deterministic ? "true" : "false") + ",\"determinism\":\"" + source +
         "\"}";
}

// Whether the legacy algorithm `a` is timed under Options::max_engines = `cap` (0: every algorithm):
// with a cap, only the first `cap` algorithms cudnnGetConvolutionForwardAlgorithm_v7 ranks as usable
// (a quick run: FFT and FFT_TILING on grouped convolutions can take seconds to set up per call).
inline bool legacy_algo_timed(int a, int cap, cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                              cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y) {
  if (cap <= 0) return true;
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  if (cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf) !=
      CUDNN_STATUS_SUCCESS)
    return true;
  int usable = 0;
  for (int i = 0; i < returned && usable < cap; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (static_cast<int>(perf[i].algo) == a) return true;
    ++usable;
  }
  return false;
}

inline bool cudnn_unsupported(cudnnStatus_t s) {
  return CUDNN_STATUS_CATEGORY(static_cast<int>(s)) == CUDNN_STATUS_NOT_SUPPORTED;
}

// Uniform range for weights: +-1/sqrt(fan_in) keeps outputs O(1) in every precision.
inline float weight_range(std::size_t fan_in) {
  return fan_in ? 1.0f / std::sqrt(static_cast<float>(fan_in)) : 1.0f;
}

}  // namespace benanza
