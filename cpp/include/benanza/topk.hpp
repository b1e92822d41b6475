// ONNX TopK (opset 1/10/11; PyTorch's torch.topk, and torch.sort exported as a TopK of k = len): the k
// largest (or smallest) elements of each row of x and their int64 indices. cuDNN and cuBLAS have no
// selection; benanza times CUB's sort (cub::DeviceSegmentedSort::StableSortPairs[Descending], one segment
// per row, one row included) with the first k of each row copied
// out, and for short rows its own warp kernel (k rounds of a warp-wide arg-max) (topk_kernels.cu;
// the sort path topk_sort.cuh, one translation unit per key type).
// x is viewed as (rows, len), packed, the selected axis innermost.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#if defined(__CUDACC__)
#define BENANZA_TOPK_HD __host__ __device__
#else
#define BENANZA_TOPK_HD
#endif

namespace benanza {

// The element type of x (and of the values written): float storage or 32/64-bit signed integers.
enum class TopKType : int { F32, F16, BF16, I32, I64 };

// The warp kernel's reach: rows of at most kTopKWarpMaxLen elements (32 per lane, held in registers)
// and k at most kTopKWarpMaxK (one output per lane).
constexpr long long kTopKWarpMaxLen = 1024;
constexpr long long kTopKWarpMaxK = 32;

// The order key of an element with the bits `bits` (the low 16, 32 or 64 bits, as `type` stores it):
// unsigned, smaller first in the output's order. Floats map sign-magnitude onto an unsigned order (the
// radix sort's bit flip: a set sign bit flips every bit, a clear one sets the sign bit), every NaN to
// one key above +inf (PyTorch's topk and sort rank NaN largest) and -0.0 to +0.0's (equal, as
// comparisons make them); integers flip their sign bit (two's complement to offset binary). `largest`
// reverses the order. Ties are broken by index (ONNX TopK-11: the lower index first), not by the key.
inline BENANZA_TOPK_HD unsigned long long topk_key(unsigned long long bits, TopKType type, bool largest) {
  const int width = type == TopKType::I64 ? 64 : (type == TopKType::F32 || type == TopKType::I32) ? 32 : 16;
  const unsigned long long mask = width == 64 ? ~0ULL : (1ULL << width) - 1;
  const unsigned long long sign = 1ULL << (width - 1);
  unsigned long long u = bits & mask;
  if (type == TopKType::I32 || type == TopKType::I64) {
    u ^= sign;
  } else {
    const unsigned long long inf = type == TopKType::F32 ? 0x7f800000ULL : type == TopKType::F16 ? 0x7c00ULL : 0x7f80ULL;
    const unsigned long long mag = u & ~sign;
    if (mag > inf) u = inf + 1;   // NaN: one key, above +inf
    else if (mag == 0) u = 0;     // -0.0 as +0.0
    u = (u & sign) ? (~u & mask) : (u | sign);
  }
  return largest ? (~u & mask) : u;
}

// One element as the selection sees it: its order key and its index in the row (-1: none).
struct TopKPick {
  unsigned long long key;
  long long index;
};

// Whether `a` comes before `b` in the output (key, then index; none last).
inline BENANZA_TOPK_HD bool topk_before(const TopKPick& a, const TopKPick& b) {
  if (a.index < 0) return false;
  if (b.index < 0) return true;
  return a.key < b.key || (a.key == b.key && a.index < b.index);
}

// The earlier of `best` and candidate `c` among the elements after `prev` (prev.index < 0: from the
// start): one step of a round of the warp kernel, which finds output q + 1 as the first element after
// output q; the lanes' picks merge with topk_before. tests/test_topk.py runs these rounds, compiled for
// the host, against numpy's stable sort.
inline BENANZA_TOPK_HD TopKPick topk_consider(const TopKPick& best, const TopKPick& prev, const TopKPick& c) {
  if (prev.index >= 0 && !topk_before(prev, c)) return best;
  return topk_before(c, best) ? c : best;
}

// The bytes of `temp` topk_sort_kernel needs: the sorted keys and the iota and sorted indices of the
// rows (none of the latter two buffers where k == len: the sort writes values and indices itself), and
// CUB's temporary storage (its size query), each 256-byte aligned.
cudaError_t topk_sort_temp_bytes(long long rows, long long len, long long k, bool largest, TopKType type,
                                 std::size_t* bytes);

// values (rows, k) and indices (rows, k) int64 of x (rows, len): the row indices 0..len-1 written
// (iota), CUB's stable sort of each row's (key, index) pairs, descending where `largest`
// (cub::DeviceSegmentedSort::StableSortPairs[Descending], one segment per row), then the first k of
// each row copied out; in `temp` (at least
// topk_sort_temp_bytes). cudaErrorInvalidValue for k outside [0, len] or a null temp.
cudaError_t topk_sort_kernel(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                             bool largest, TopKType type, void* temp, std::size_t temp_bytes, cudaStream_t s);

// Whether topk_warp_kernel takes rows of `len` and this k.
inline bool topk_warp_fits(long long len, long long k) {
  return len >= 1 && len <= kTopKWarpMaxLen && k >= 0 && k <= kTopKWarpMaxK && k <= len;
}

// The same outputs by one warp per row: the row's keys (topk_key) in registers, 32 lanes apart; k
// rounds, each the lanes' topk_consider over their elements and a shuffle reduction by topk_before;
// lane q keeps output q and the lanes write values and indices at the end (sorted: the order of the
// rounds). cudaErrorInvalidValue where !topk_warp_fits(len, k).
cudaError_t topk_warp_kernel(const void* x, void* values, long long* indices, long long rows, long long len, long long k,
                             bool largest, TopKType type, cudaStream_t s);

}  // namespace benanza

#undef BENANZA_TOPK_HD
