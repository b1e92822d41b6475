// The warp kernel's selection (benanza/topk.hpp: topk_key, topk_consider, topk_before), compiled for
// the host, run as benanza::topk_warp_kernel runs it: 32 lanes, lane l holding elements l, l + 32, ...;
// k rounds, each every lane's topk_consider over its elements after the previous output, then the
// xor-shuffle reduction (offsets 16, 8, 4, 2, 1) by topk_before. Used by tests/test_topk.py.
// Reads lines "TYPE LARGEST LEN K BITS..." (TYPE: 0 F32, 1 F16, 2 BF16, 3 I32, 4 I64; BITS: each
// element's bits, unsigned decimal) from stdin; prints the k selected indices of each line.
#include <cstdio>
#include <vector>

#include "benanza/topk.hpp"

using benanza::TopKPick;

int main() {
  int type = 0, largest = 0;
  long long len = 0, k = 0;
  while (std::scanf("%d %d %lld %lld", &type, &largest, &len, &k) == 4) {
    std::vector<unsigned long long> key(len);
    for (long long j = 0; j < len; ++j) {
      unsigned long long bits = 0;
      if (std::scanf("%llu", &bits) != 1) return 2;
      key[j] = benanza::topk_key(bits, static_cast<benanza::TopKType>(type), largest != 0);
    }
    TopKPick prev{0, -1};
    for (long long q = 0; q < k; ++q) {
      TopKPick lane[32];
      for (int l = 0; l < 32; ++l) {
        TopKPick best{0, -1};
        for (long long j = l; j < len; j += 32) best = benanza::topk_consider(best, prev, TopKPick{key[j], j});
        lane[l] = best;
      }
      for (int off = 16; off > 0; off >>= 1) {
        TopKPick next[32];
        for (int l = 0; l < 32; ++l) next[l] = benanza::topk_before(lane[l ^ off], lane[l]) ? lane[l ^ off] : lane[l];
        for (int l = 0; l < 32; ++l) lane[l] = next[l];
      }
      for (int l = 1; l < 32; ++l)
        if (lane[l].index != lane[0].index) return 3;  // every lane holds the same pick after the reduction
      std::printf("%lld ", lane[0].index);
      prev = lane[0];
    }
    std::printf("\n");
  }
  return 0;
}
