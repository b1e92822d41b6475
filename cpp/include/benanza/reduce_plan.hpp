// The plan of one reduction (host code only, no CUDA): what benanza::reduce (reduce_kernels.cu)
// launches for a ReduceMean/Sum/Max/Min layer, x packed, y = x with the reduced dims set to 1.
// It does what a framework's reduction does before it launches (PyTorch's Reduce.cuh: coalesce
// the dimensions, then reduce either along contiguous rows or across columns, splitting a long
// reduced dimension over several blocks when there are too few outputs to fill the GPU):
//   1. dims of extent 1 are dropped, neighbours of the same kind (both reduced, both kept) merged,
//      leaving kept and reduced groups that alternate, e.g. (K, R, K, R);
//   2. one stage per reduced group, innermost first: x is viewed as (outer, r, inner) (outer: the
//      groups before it, r: the group, inner: the kept groups after it, all packed) and reduced
//      to (outer, inner); a stage's result is x of the next one (float32, in the workspace); the
//      last stage writes y in the storage type and applies Mean's 1 / (product of reduced dims);
//   3. inner == 1 (a contiguous row of r elements per output): lanes of a warp per row when a row
//      is at most 256 16-byte vectors (8 per lane; as many lanes as the row has vectors, up to
//      32, so short rows share a warp), else one block of 64-512 threads per row, both with
//      16-byte loads and float accumulation, warp shuffles across lanes;
//      inner > 1: a block of bx x by threads (bx * by <= 256) owns bx output columns (16-byte
//      vectors of them when inner allows) and walks r with its by rows of threads: loads coalesce
//      along inner, partial results are combined through shared memory;
//   4. when a stage has fewer threads than half of kTargetThreadsPerSm x SMs and a long r, r is
//      split into `split` chunks reduced by separate blocks into float partials (outer, split,
//      inner), and a stage of its own reduces the partials.
#pragma once

#include <cstddef>

namespace benanza {

// Threads per SM a stage should offer (half of Hopper's 2048 resident threads per SM: enough
// 16-byte loads in flight for the DRAM rate) before r is split across blocks.
constexpr long long kReduceTargetThreadsPerSm = 1024;
// The most chunks a reduced dimension is split into (grid z / partial rows).
constexpr long long kReduceMaxSplit = 1024;

struct ReduceStage {
  long long outer = 1, r = 1, inner = 1;  // x of the stage viewed as (outer, r, inner), packed
  long long chunk = 1;                    // elements of r per block; split() = ceil(r / chunk)
  bool row = true;                        // inner == 1: contiguous rows of r elements
  bool warp = false;                      // row: `lanes` lanes of a warp per row (else a block of `threads`)
  int lanes = 32;                         // row, warp: lanes per row (a power of 2 <= 32)
  int threads = 256;                      // row block: threads per block
  int bx = 1, by = 1;                     // column: block shape (threads along inner x along r)
  int vec = 1;                            // elements per 16-byte vector of the stage's input (when aligned)
  int src = -1, dst = -1;                 // -1: x / y; 0, 1: the two float32 halves of the workspace
  long long split() const { return (r + chunk - 1) / chunk; }
  long long out_count() const { return outer * split() * inner; }
};

struct ReducePlan {
  bool ok = false;
  const char* error = "";
  int n = 0;                        // stages
  ReduceStage st[8];
  long long total_r = 1;            // product of the reduced dims (Mean's divisor)
  long long ws_elems[2] = {0, 0};   // float32 elements of each workspace half (each a multiple of 64)
  std::size_t workspace_bytes() const { return static_cast<std::size_t>(ws_elems[0] + ws_elems[1]) * 4; }
};

namespace reduce_detail {

inline long long pow2ceil(long long v) {
  long long p = 1;
  while (p < v) p *= 2;
  return p;
}
inline long long pow2floor(long long v) {
  long long p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}
inline long long cdiv(long long a, long long b) { return (a + b - 1) / b; }

// Launch shape of one (outer, r, inner) stage whose input has `elem_bytes`-byte elements;
// `may_split`: r may be split over blocks (not for a stage that reduces partials).
inline ReduceStage shape_stage(long long outer, long long r, long long inner, int elem_bytes, int sm_count,
                               bool may_split) {
  ReduceStage s;
  s.outer = outer;
  s.r = r;
  s.inner = inner;
  s.chunk = r;
  s.vec = 16 / elem_bytes;
  const long long target = kReduceTargetThreadsPerSm * (sm_count > 0 ? sm_count : 1);
  if (inner == 1) {
    s.row = true;
    const long long vecs = cdiv(r, s.vec);
    s.warp = vecs <= 256;
    if (s.warp) {
      s.lanes = static_cast<int>(pow2ceil(vecs) < 32 ? pow2ceil(vecs) : 32);
      return s;
    }
    long long t = pow2floor(vecs / 4);  // about 4 vectors per thread
    s.threads = static_cast<int>(t < 64 ? 64 : t > 512 ? 512 : t);
    const long long threads = outer * s.threads;
    if (may_split && 2 * threads < target && vecs >= 8LL * s.threads) {
      long long split = cdiv(target, threads);
      const long long most = cdiv(vecs, 4LL * s.threads);  // at least 4 vectors per thread and chunk
      if (split > most) split = most;
      if (split > kReduceMaxSplit) split = kReduceMaxSplit;
      if (split > 1) s.chunk = cdiv(cdiv(r, split), s.vec) * s.vec;  // chunks start on whole vectors
    }
    return s;
  }
  s.row = false;
  const long long v = inner % s.vec == 0 ? s.vec : 1;
  s.vec = static_cast<int>(v);
  const long long cols = inner / v;
  long long bx = pow2ceil(cols) < 32 ? pow2ceil(cols) : 32;
  long long by = pow2ceil(r) < 256 / bx ? pow2ceil(r) : 256 / bx;
  bx = pow2ceil(cols) < 256 / by ? pow2ceil(cols) : 256 / by;
  s.bx = static_cast<int>(bx);
  s.by = static_cast<int>(by);
  const long long threads = cdiv(cols, bx) * outer * bx * by;
  if (may_split && 2 * threads < target && r >= 8 * by) {
    long long split = cdiv(target, threads);
    const long long most = cdiv(r, 4 * by);  // at least 4 rows per thread and chunk
    if (split > most) split = most;
    if (split > kReduceMaxSplit) split = kReduceMaxSplit;
    if (split > 1) s.chunk = cdiv(r, split);
  }
  return s;
}

// Drop group g (reduced) of the alternating groups and merge the kept groups on either side of it.
inline void drop_group(long long* ext, bool* red, int& m, int g) {
  for (int i = g; i + 1 < m; ++i) {
    ext[i] = ext[i + 1];
    red[i] = red[i + 1];
  }
  --m;
  if (g > 0 && g < m && !red[g - 1] && !red[g]) {
    ext[g - 1] *= ext[g];
    for (int i = g; i + 1 < m; ++i) {
      ext[i] = ext[i + 1];
      red[i] = red[i + 1];
    }
    --m;
  }
}

// Stage i reads x (i == 0) or the half the previous stage wrote, and writes half i % 2 of the
// workspace (the last stage writes y); each half is sized for the largest result it holds.
template <typename Plan>
void assign_buffers(Plan& p) {
  for (int i = 0; i < p.n; ++i) {
    auto& s = p.st[i];
    s.src = i == 0 ? -1 : (i - 1) % 2;
    s.dst = i == p.n - 1 ? -1 : i % 2;
    if (s.dst >= 0) {
      const long long need = cdiv(s.out_count(), 64) * 64;
      if (need > p.ws_elems[s.dst]) p.ws_elems[s.dst] = need;
    }
  }
}

}  // namespace reduce_detail

// The plan for reducing packed x (dims `x`) to y (dims `y`: each y[d] is x[d] or 1), `nd` <= 8,
// elements of `elem_bytes` bytes, on a GPU with `sm_count` SMs. Not ok (with `error`) for shapes
// that are not a reduction.
inline ReducePlan plan_reduce(const long long* x, const long long* y, int nd, int elem_bytes, int sm_count) {
  using namespace reduce_detail;
  ReducePlan p;
  if (nd < 0 || nd > 8 || (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8)) {
    p.error = "rank above 8 or an element size that is not 1, 2, 4 or 8 bytes";
    return p;
  }
  long long ext[8];
  bool red[8];
  int m = 0;
  for (int d = 0; d < nd; ++d) {
    if (x[d] < 0 || (y[d] != x[d] && y[d] != 1)) {
      p.error = "y is not x with reduced dims set to 1";
      return p;
    }
    if (x[d] == 0) {
      p.error = "empty tensor";
      return p;
    }
    if (x[d] == 1) continue;
    const bool r = y[d] == 1;
    if (r) p.total_r *= x[d];
    if (m > 0 && red[m - 1] == r) {
      ext[m - 1] *= x[d];
    } else {
      ext[m] = x[d];
      red[m] = r;
      ++m;
    }
  }
  int es = elem_bytes;
  int last_red = -1;
  for (int g = 0; g < m; ++g)
    if (red[g]) last_red = g;
  if (last_red < 0) {  // nothing to reduce (reduced dims of extent 1): one pass that copies x to y
    long long n = 1;
    for (int g = 0; g < m; ++g) n *= ext[g];
    p.st[p.n++] = shape_stage(1, 1, n, es, sm_count, false);
  }
  bool partials = false;
  while (last_red >= 0) {
    long long outer = 1, inner = 1;
    for (int g = 0; g < last_red; ++g) outer *= ext[g];
    for (int g = last_red + 1; g < m; ++g) inner *= ext[g];
    ReduceStage s = shape_stage(outer, ext[last_red], inner, es, sm_count, !partials);
    p.st[p.n++] = s;
    es = 4;  // later stages read float32 partial results
    if (s.split() > 1) {  // reduce the partials (outer, split, inner) next, the group stays
      ext[last_red] = s.split();
      partials = true;
      continue;
    }
    partials = false;
    drop_group(ext, red, m, last_red);
    last_red = -1;
    for (int g = 0; g < m; ++g)
      if (red[g]) last_red = g;
  }
  assign_buffers(p);
  p.ok = true;
  return p;
}

}  // namespace benanza
