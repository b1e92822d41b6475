// A paged KV cache's page table (docs/llm.md), host code only (no CUDA, no cuDNN): what a serving
// engine (vLLM, TensorRT-LLM, FlashInfer) keeps for each sequence, the container pages that hold its
// keys and values, in the layout cuDNN's SDPA reads (cudnn-frontend SDPA_attributes::
// set_paged_attention_k_table / _v_table: int32 [b, 1, pages_per_seq, 1]; containers
// [num_pages, h_kv, page_size, d]). benanza/kinds/sdpa.py's page_table() is the same construction in
// Python (tests/test_sdpa_paged.py compiles this header and compares the two).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace benanza {

// The seed of the shuffle: a fixed one, so that a job's page table is the same on every run.
constexpr std::uint64_t kPagedKvSeed = 27;

// ceil(s_kv / page): the pages one sequence of s_kv tokens takes (the last one partly filled).
inline long long paged_kv_pages_per_seq(long long s_kv, long long page) { return (s_kv + page - 1) / page; }

// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014;
// the constants of Vigna's reference implementation, prng.di.unimi.it/splitmix64.c).
inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The page table of b sequences of pages_per_seq pages each, row-major over [b, 1, pages_per_seq, 1]:
// entry i * pages_per_seq + j is the container page of sequence i's j-th page. Pages 0 .. b *
// pages_per_seq - 1 each used once, in the order of a Fisher-Yates shuffle (Knuth, TAOCP vol. 2,
// 3.4.2, algorithm P) driven by splitmix64 from `seed`: non-contiguous, as a server's allocator
// leaves them after sequences come and go.
inline std::vector<std::int32_t> paged_kv_table(long long b, long long pages_per_seq,
                                                std::uint64_t seed = kPagedKvSeed) {
  const long long n = b * pages_per_seq;
  std::vector<std::int32_t> t(static_cast<std::size_t>(n > 0 ? n : 0));
  for (long long i = 0; i < n; ++i) t[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  std::uint64_t state = seed;
  for (long long i = n - 1; i > 0; --i) {
    const auto j = static_cast<long long>(splitmix64(state) % static_cast<std::uint64_t>(i + 1));
    std::swap(t[static_cast<std::size_t>(i)], t[static_cast<std::size_t>(j)]);
  }
  return t;
}

}  // namespace benanza
