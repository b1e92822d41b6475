// ONNX ScatterND, ScatterElements (opset 11-18, reduction none/add/mul/max/min) and GatherElements:
// benanza's kernels (scatter_kernels.cu), one thread per update element (scatters) or per output
// element (GatherElements). cuDNN and cuBLAS have neither op; PyTorch's index_put_ / scatter_ /
// scatter_reduce_ / gather are timed beside them. The index map (scatter_offset) and the index fill
// (scatter_indices) are host/device code here, checked against numpy by tests/test_scatter.py.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#if defined(__CUDACC__)
#define BENANZA_SCATTER_HD __host__ __device__
#else
#define BENANZA_SCATTER_HD
#endif

namespace benanza {

// The data element type: float storage (F32/F16/BF16; reductions computed in float) or 32/64-bit integers.
enum class ScatterType : int { F32, F16, BF16, I32, I64 };
// ONNX's `reduction` attribute (ScatterND opset 16/18, ScatterElements opset 16/18).
enum class ScatterReduction : int { None, Add, Mul, Max, Min };

constexpr int kScatterMaxRank = 8;

// Where the p-th element of the updates (of the output, for GatherElements) lands in data, packed
// row-major. nd = true: ScatterND, index tuples of k components address slices of `slice` =
// prod(data[k:]) elements; updates are (n_tuples, slice). nd = false: the elements form
// (ScatterElements, GatherElements): updates / output of dims `upd` (the indices' dims, rank = the
// data's), element p goes to the same coordinates with the `axis` one replaced by its index.
struct ScatterMap {
  bool nd;
  int rank;                          // the data's rank
  int axis;                          // elements form: the indexed axis
  int k;                             // ND: components per index tuple (1..rank)
  long long slice;                   // ND: elements per addressed slice
  long long data[kScatterMaxRank];   // the data's dims
  long long upd[kScatterMaxRank];    // elements form: the indices' (= updates', = output's) dims
};

// The data offset (elements) of update element p (ND: tuple p / slice; elements form: idx[p]);
// negative indices count from the end of their dim (the ONNX spec's [-s, s-1]).
inline BENANZA_SCATTER_HD long long scatter_offset(const ScatterMap& m, const long long* idx, long long p) {
  if (m.nd) {
    const long long j = p / m.slice, w = p % m.slice;
    long long off = 0;
    for (int d = 0; d < m.k; ++d) {
      long long i = idx[j * m.k + d];
      if (i < 0) i += m.data[d];
      off = off * m.data[d] + i;
    }
    return off * m.slice + w;
  }
  long long off = 0, stride = 1, q = p;
  for (int d = m.rank - 1; d >= 0; --d) {
    long long c = q % m.upd[d];
    q /= m.upd[d];
    if (d == m.axis) {
      c = idx[p];
      if (c < 0) c += m.data[d];
    }
    off += c * stride;
    stride *= m.data[d];
  }
  return off;
}

// splitmix64 (Steele, Lea and Flood, OOPSLA 2014): the index fill's generator.
inline unsigned long long scatter_mix(unsigned long long& s) {
  unsigned long long z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A multiplier coprime with n (so j -> (j * a + b) mod n visits distinct values for j < n).
inline long long scatter_coprime(long long n) {
  const long long primes[] = {7919, 104729, 1299709, 15485863, 1000003, 3};
  for (long long a : primes) {
    long long x = a % n, y = n;
    while (x != 0) {
      const long long t = y % x;
      y = x;
      x = t;
    }
    if (y == 1) return a % n;
  }
  return 1;
}

// Fill the n_idx host indices of map m (ND: n_idx / k tuples of k components; elements form: one
// index per element of upd) with valid non-negative values. distinct: an arithmetic progression
// (j * a + b) mod the addressed extent, a coprime with it: distinct tuples (ND) or distinct indices
// along the axis for each line (elements form) whenever they fit (what reduction none needs for a
// defined result); otherwise uniform random, duplicates included (a histogram's collisions).
inline void scatter_indices(long long* idx, const ScatterMap& m, long long n_idx, bool distinct,
                            unsigned long long seed) {
  unsigned long long s = seed;
  if (m.nd) {
    long long total = 1;
    for (int d = 0; d < m.k; ++d) total *= m.data[d];
    const long long a = scatter_coprime(total), b = static_cast<long long>(scatter_mix(s) % total);
    for (long long j = 0; j < n_idx / m.k; ++j) {
      long long flat = distinct ? static_cast<long long>((static_cast<unsigned long long>(j % total) * a + b) % total)
                                : static_cast<long long>(scatter_mix(s) % total);
      for (int d = m.k - 1; d >= 0; --d) {
        idx[j * m.k + d] = flat % m.data[d];
        flat /= m.data[d];
      }
    }
    return;
  }
  long long inner = 1;
  for (int d = m.axis + 1; d < m.rank; ++d) inner *= m.upd[d];
  const long long dim = m.data[m.axis], a = scatter_coprime(dim), b = static_cast<long long>(scatter_mix(s) % dim);
  for (long long p = 0; p < n_idx; ++p) {
    const long long c = (p / inner) % m.upd[m.axis];
    idx[p] = distinct ? static_cast<long long>((static_cast<unsigned long long>(c % dim) * a + b) % dim)
                      : static_cast<long long>(scatter_mix(s) % dim);
  }
}

// data[scatter_offset(m, idx, p)] (op)= updates[p] for p in [0, n): in place in `data` (the ONNX
// output is a copy of data made first by the caller). Reduction None: a plain store (duplicate
// indices: one of the writes wins, which the ONNX spec leaves undefined); Add: atomicAdd (float,
// half, int32, 64-bit as unsigned long long; bfloat16 by a compare-and-swap loop); Max/Min:
// atomicMax/atomicMin for integers, compare-and-swap loops for floats; Mul: compare-and-swap loops.
// idx: int64 on the device. cudaErrorInvalidValue for a bad map or type.
cudaError_t scatter_kernel(void* data, const long long* idx, const void* updates, long long n, const ScatterMap& m,
                           ScatterType t, ScatterReduction r, cudaStream_t s);

// y[p] = data[scatter_offset(m, idx, p)] for p in [0, n) (GatherElements; m in the elements form).
cudaError_t gather_elements_kernel(const void* data, const long long* idx, void* y, long long n, const ScatterMap& m,
                                   ScatterType t, cudaStream_t s);

}  // namespace benanza

#undef BENANZA_SCATTER_HD
