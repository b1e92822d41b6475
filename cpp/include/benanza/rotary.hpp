// Rotary position embedding (RoPE; ONNX RotaryEmbedding, opset 23): for each pair (x1, x2) of the first
// rotary_dim elements of a head (the two halves, or even/odd elements when interleaved) and the cos c and
// sin s of its position, y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s; the rest of the head passes through.
// Two implementations, each timed by the generated benchmarks (templates/rotary.cpp.j2):
//   * rotary_kernel (rotary_kernels.cu): one thread per pair (or per pass-through element), float32 math,
//     so the layer always has a valid measurement;
//   * run_rotary_engines (rotary_engines.cpp): the cuDNN graph API's rope node (cudnn-frontend Graph::rope,
//     cuDNN 9.24+), every engine config of heuristics modes A, B and the fallback list, timed by time_graph.
// This header has no cudnn-frontend types: the generated sources include it without the frontend.
#pragma once
#include <cuda_runtime.h>

#include "benanza/harness.hpp"

namespace benanza {

// x (and y): (batch, heads, seq, head_dim) packed, or (batch, seq, heads, head_dim) packed when bshd.
// cos/sin: (rotary_dim / 2) values per position in x's type: rows cache_batch * seq (row bi * seq + si,
// or si when cache_batch is 1) when positions is 0, else `positions` rows indexed by position_ids[bi * seq + si].
struct RotarySpec {
  long long batch, heads, seq, head_dim, rotary_dim;
  bool interleaved, bshd;
  long long cache_batch, positions;
};

// One thread per pair and per pass-through element. Enqueued on `s`; returns cudaGetLastError() of the
// launch (cudaErrorInvalidValue for an odd rotary_dim or one above head_dim, a position_ids null pointer
// with positions > 0).
cudaError_t rotary_kernel(const void* x, const void* cos, const void* sin, const long long* position_ids, void* y,
                          const RotarySpec& r, DType t, cudaStream_t s);

// position_ids[i] = (i % seq) % positions for i < batch * seq: valid ids into a cache of `positions` rows.
cudaError_t rotary_positions(long long* position_ids, long long batch, long long seq, long long positions,
                             cudaStream_t s);

// The cuDNN graph rope: X [B, H, S, D] (strides of bshd when r.bshd) in the precision's type, FREQS
// [S, 1, 1, D] float32 angles (cuDNN computes sincosf), Y like X. Timed only where it is the layer
// (not interleaved, rotary_dim == head_dim, positions shared by the batch); otherwise recorded as skipped
// with the reason. A graph cuDNN cannot run (a cuDNN before 9.24) is recorded as not_supported with
// cuDNN's reason, never raised.
void run_rotary_engines(Bench& b, Precision p, const RotarySpec& r, void* x, void* freqs, void* y, const char* note);

}  // namespace benanza
