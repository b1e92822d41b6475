// ONNX Resize (opset 10-19) and Upsample (opset 7-9) on (N, C, *spatial) tensors, 1 to 3 spatial
// dims; PyTorch's F.interpolate (aten::upsample_nearest*d, upsample_bilinear2d, upsample_bicubic2d,
// ...) and their backward ops. cuDNN and cuBLAS have no resize or upsampling call (cuDNN's only
// spatial resampler is the spatial transformer's grid sampler, cudnnSpatialTfSamplerForward, which
// needs a sampling grid in memory), so benanza times its own kernels (resize_kernels.cu).
//
// The index and weight arithmetic of one spatial dim is resize_taps below, the same arithmetic as
// the ONNX operator spec and onnx's reference implementation (onnx/reference/ops/op_resize.py);
// tests/test_resize.py compiles it for the host and checks it against numpy and the reference.
#pragma once
#include <cuda_runtime.h>

#include "benanza/precision.hpp"

#if defined(__CUDACC__)
#define BENANZA_RESIZE_HD __host__ __device__
#else
#define BENANZA_RESIZE_HD
#endif

namespace benanza {

enum ResizeMode : int { kResizeNearest = 0, kResizeLinear = 1, kResizeCubic = 2 };
// coordinate_transformation_mode
enum ResizeCoord : int { kHalfPixel = 0, kPytorchHalfPixel = 1, kAlignCorners = 2, kAsymmetric = 3 };
// nearest_mode
enum ResizeRound : int { kRoundPreferFloor = 0, kRoundPreferCeil = 1, kRoundFloor = 2, kRoundCeil = 3 };

struct ResizeParams {
  int nsp;                 // spatial dims (1 to 3)
  long long n, c;          // batch and channels
  long long in[3], out[3]; // spatial sizes of x and y
  float scale[3];          // ONNX's scale of each spatial dim (given, or out / in when sizes are given)
  int mode, coord, nearest;
  float cubic_a;           // cubic_coeff_a
  bool channels_last;      // NHWC / NDHWC memory (else NCHW / NCDHW)
};

// The source coordinate of output index o along a dim of input length `in`, output length `out`
// and scale s (ONNX Resize's coordinate_transformation_mode; align_corners divides by s * in - 1,
// the resized length as a real number, as onnx's reference does). float32 arithmetic, as PyTorch's
// upsample kernels (area_pixel_compute_source_index with accscalar_t float).
inline BENANZA_RESIZE_HD float resize_source(int coord, long long o, long long in, long long out, float s) {
  const float fo = static_cast<float>(o);
  switch (coord) {
    case kPytorchHalfPixel:
      if (out <= 1) return 0.0f;
      return (fo + 0.5f) / s - 0.5f;
    case kAlignCorners: {
      const float len = s * static_cast<float>(in);
      if (len == 1.0f) return 0.0f;
      return fo * static_cast<float>(in - 1) / (len - 1.0f);
    }
    case kAsymmetric: return fo / s;
    default: return (fo + 0.5f) / s - 0.5f;  // half_pixel
  }
}

inline BENANZA_RESIZE_HD long long resize_clamp(long long i, long long in) { return i < 0 ? 0 : (i >= in ? in - 1 : i); }

// The taps of output index o along one dim: up to 4 input indices (clamped to [0, in): the
// reference's edge padding) and their weights; returns how many (1 nearest, 2 linear, 4 cubic).
// nearest: the source coordinate rounded by nearest_mode (an integer coordinate is itself);
// linear: floor(x) and floor(x) + 1 weighted 1 - r and r, r = x - floor(x); cubic: floor(x) - 1 ..
// floor(x) + 2 with Keys' cubic convolution coefficients of cubic_coeff_a A (the spec's and the
// reference's _cubic_coeffs; Keys, "Cubic convolution interpolation for digital image processing",
// IEEE TASSP 1981).
inline BENANZA_RESIZE_HD int resize_taps(int mode, int coord, int nearest, float a, long long o, long long in,
                                         long long out, float s, long long* idx, float* w) {
  const float x = resize_source(coord, o, in, out, s);
  float fl = static_cast<float>(static_cast<long long>(x));
  if (fl > x) fl -= 1.0f;  // floor
  const long long i0 = static_cast<long long>(fl);
  const float r = x - fl;
  if (mode == kResizeNearest) {
    long long i = i0;
    if (r != 0.0f) {
      bool up = false;
      switch (nearest) {
        case kRoundPreferCeil: up = r >= 0.5f; break;
        case kRoundFloor: up = false; break;
        case kRoundCeil: up = true; break;
        default: up = r > 0.5f;  // round_prefer_floor
      }
      i = up ? i0 + 1 : i0;
    }
    idx[0] = resize_clamp(i, in);
    w[0] = 1.0f;
    return 1;
  }
  if (mode == kResizeLinear) {
    idx[0] = resize_clamp(i0, in);
    idx[1] = resize_clamp(i0 + 1, in);
    w[0] = 1.0f - r;
    w[1] = r;
    return 2;
  }
  const float t0 = r + 1.0f, t1 = r, t2 = 1.0f - r, t3 = 2.0f - r;
  w[0] = ((a * t0 - 5.0f * a) * t0 + 8.0f * a) * t0 - 4.0f * a;
  w[1] = ((a + 2.0f) * t1 - (a + 3.0f)) * t1 * t1 + 1.0f;
  w[2] = ((a + 2.0f) * t2 - (a + 3.0f)) * t2 * t2 + 1.0f;
  w[3] = ((a * t3 - 5.0f * a) * t3 + 8.0f * a) * t3 - 4.0f * a;
  for (int k = 0; k < 4; ++k) idx[k] = resize_clamp(i0 - 1 + k, in);
  return 4;
}

// y = resize(x), one thread per element of y: the product of each spatial dim's taps, weights
// multiplied, accumulated in float32 whatever the storage type t (F32, F16, BF16).
cudaError_t resize_kernel(const void* x, void* y, const ResizeParams& p, DType t, cudaStream_t s);

// The gradient of x: dx = 0 (cudaMemsetAsync), then one thread per element of dy adds w * dy into
// each tap of dx with atomicAdd (a scatter-add, as PyTorch's CUDA upsample_linear1d/bilinear2d/
// bicubic2d/trilinear3d backward kernels): taps shared by several outputs are summed in an order
// that changes from run to run, so the last bits of dx are not deterministic.
cudaError_t resize_backward_kernel(const void* dy, void* dx, const ResizeParams& p, DType t, cudaStream_t s);

}  // namespace benanza

#undef BENANZA_RESIZE_HD
