// The plan of one strided copy (host code only, no CUDA): what strided_copy (kernels.cu) launches
// for a Transpose, Slice, Concat or Pad transfer. It does what a framework's generic copy does
// before it launches (PyTorch's TensorIterator: coalesce_dimensions, 32-bit indexing with
// IntDivider, vectorized contiguous copies; a tiled shared-memory transpose where the innermost
// dimension is permuted, as in NVIDIA's "An Efficient Matrix Transpose in CUDA C/C++", 2013):
//   1. dimensions of extent 1 are dropped, and neighbours that are contiguous in both source and
//      destination are merged;
//   2. when the innermost dimension is contiguous on both sides, elements are moved as 16/8/4/2-byte
//      vectors (alignment and strides permitting);
//   3. when the destination's innermost dimension is not contiguous in the source but another
//      dimension is, the copy is tiled through shared memory (32 x 32 elements; 32 x 64 for 2-byte and 32 x 128
//      for 1-byte ones), so that reads and
//      writes are both coalesced;
//   4. indices and offsets use 32-bit arithmetic when every one fits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace benanza {

// A strided view for strided_copy: `nd` dims (at most 8) with source and destination strides (elements).
struct StridedView {
  int nd;
  long long dims[8];
  long long src_strides[8];
  long long dst_strides[8];
};

// What strided_copy launches for one view: the coalesced view in units of `unit_bytes` (the element
// size times the vector width), the kind of kernel, and, for a tiled copy, the dimension read along.
struct StridedPlan {
  enum Kind { kElementwise = 0, kTiled = 1 };
  Kind kind = kElementwise;
  int nd = 0;
  long long dims[8] = {};
  long long src_strides[8] = {};
  long long dst_strides[8] = {};
  int unit_bytes = 1;
  int tile_dim = -1;     // kTiled: the dimension with source stride 1 (the last is written along)
  bool index32 = false;  // every linear index and offset is below 2^31
  long long count() const {
    long long n = 1;
    for (int d = 0; d < nd; ++d) n *= dims[d];
    return n;
  }
};

// The plan for copying view `v` of `elem_bytes`-byte elements from byte address `src` to `dst`.
inline StridedPlan plan_strided_copy(const StridedView& v, std::size_t elem_bytes, std::uintptr_t src,
                                     std::uintptr_t dst) {
  StridedPlan p;
  p.unit_bytes = static_cast<int>(elem_bytes);
  for (int d = 0; d < v.nd && d < 8; ++d) {
    if (v.dims[d] == 0) {  // nothing to copy
      p.nd = 1;
      p.dims[0] = 0;
      p.src_strides[0] = p.dst_strides[0] = 1;
      return p;
    }
    if (v.dims[d] == 1) continue;
    p.dims[p.nd] = v.dims[d];
    p.src_strides[p.nd] = v.src_strides[d];
    p.dst_strides[p.nd] = v.dst_strides[d];
    ++p.nd;
  }
  if (p.nd == 0) {  // one element
    p.nd = 1;
    p.dims[0] = 1;
    p.src_strides[0] = p.dst_strides[0] = 1;
  }
  // 1. merge dims d-1 and d when d-1 steps over exactly one run of d on both sides
  int w = p.nd - 1;  // the innermost merged dim is at w; walk outwards
  for (int d = p.nd - 2; d >= 0; --d) {
    if (p.src_strides[d] == p.src_strides[w] * p.dims[w] && p.dst_strides[d] == p.dst_strides[w] * p.dims[w]) {
      p.dims[w] *= p.dims[d];
    } else {
      --w;
      p.dims[w] = p.dims[d];
      p.src_strides[w] = p.src_strides[d];
      p.dst_strides[w] = p.dst_strides[d];
    }
  }
  const int shift = w;  // merged dims live at [w, nd): move them to the front
  p.nd -= shift;
  for (int d = 0; d < p.nd; ++d) {
    p.dims[d] = p.dims[d + shift];
    p.src_strides[d] = p.src_strides[d + shift];
    p.dst_strides[d] = p.dst_strides[d + shift];
  }
  const int last = p.nd - 1;
  // 2. vectors along a contiguous innermost dim
  if (p.src_strides[last] == 1 && p.dst_strides[last] == 1) {
    for (int u = 16; u > static_cast<int>(elem_bytes); u /= 2) {
      if (u % static_cast<int>(elem_bytes) != 0) continue;
      const long long k = u / static_cast<long long>(elem_bytes);
      bool ok = p.dims[last] % k == 0 && src % u == 0 && dst % u == 0;
      for (int d = 0; d < last && ok; ++d) ok = p.src_strides[d] % k == 0 && p.dst_strides[d] % k == 0;
      if (!ok) continue;
      p.dims[last] /= k;
      for (int d = 0; d < last; ++d) {
        p.src_strides[d] /= k;
        p.dst_strides[d] /= k;
      }
      p.unit_bytes = u;
      break;
    }
  } else if (p.dst_strides[last] == 1) {
    // 3. the innermost written dim is strided in the source: tile it with the dim read contiguously
    for (int d = 0; d < last; ++d)
      if (p.src_strides[d] == 1) {
        p.kind = StridedPlan::kTiled;
        p.tile_dim = d;
        break;
      }
  }
  // 4. 32-bit indexing when the index space and both offset ranges fit
  long long src_max = 0, dst_max = 0;
  for (int d = 0; d < p.nd; ++d) {
    src_max += (p.dims[d] - 1) * (p.src_strides[d] < 0 ? -p.src_strides[d] : p.src_strides[d]);
    dst_max += (p.dims[d] - 1) * (p.dst_strides[d] < 0 ? -p.dst_strides[d] : p.dst_strides[d]);
  }
  const long long lim = 0x7fffffffLL;
  bool neg = false;
  for (int d = 0; d < p.nd; ++d) neg = neg || p.src_strides[d] < 0 || p.dst_strides[d] < 0;
  p.index32 = !neg && p.count() < lim && src_max < lim && dst_max < lim;
  return p;
}

}  // namespace benanza
