// The details of a cuDNN engine config as a JSON object (header-only: used by the suites and by
// benanza._native, whose tests check the parsing without a GPU).
//
// A cudnn-frontend plan name reads "eng<global index>[_k<knob type>=<choice>]...", e.g.
// eng51_k2=9_k13=0 (engine 51, TILE_SIZE 9, TILEK 0); knob types are cudnnBackendKnobType_t values
// (cudnn_graph.h, cuDNN 9), named here as cuDNN names them without the CUDNN_KNOB_TYPE_ prefix.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

namespace benanza {

// cudnnBackendKnobType_t names (cudnn_graph.h, cuDNN 9), by value
inline const char* knob_name(int id) {
  static const char* const kNames[] = {
      "SPLIT_K",        "SWIZZLE",      "TILE_SIZE",   "USE_TEX",        "EDGE",        "KBLOCK",
      "LDGA",           "LDGB",         "CHUNK_K",     "SPLIT_H",        "WINO_TILE",   "MULTIPLY",
      "SPLIT_K_BUF",    "TILEK",        "STAGES",      "REDUCTION_MODE", "CTA_SPLIT_K_MODE",
      "SPLIT_K_SLC",    "IDX_MODE",     "SLICED",      "SPLIT_RS",       "SINGLEBUFFER", "LDGC",
      "SPECFILT",       "KERNEL_CFG",   "WORKSPACE",   "TILE_CGA",       "TILE_CGA_M",  "TILE_CGA_N",
      "BLOCK_SIZE",     "OCCUPANCY",    "ARRAY_SIZE_PER_THREAD", "NUM_C_PER_BLOCK", "SPLIT_COLS",
      "TILE_ROWS",      "TILE_COLS",    "LOAD_SIZE",   "CTA_COUNT",      "STREAM_K",    "SPLIT_P_SLC",
      "TILE_M",         "TILE_N",       "WARP_SPEC_CFG", "SWAP_AB",      "INPUT_TMA_ENABLE",
      "OUTPUT_TMA_ENABLE"};
  return id >= 0 && id < static_cast<int>(sizeof kNames / sizeof kNames[0]) ? kNames[id] : nullptr;
}

inline std::string engine_details_json(const std::string& plan_name, const std::vector<std::string>& numerical,
                                const std::vector<std::string>& behavior, int rank_a, int rank_b) {
  // plan names read "eng<global index>[_k<knob>=<value>]...", e.g. eng51_k2=9_k13=0
  std::string out = "{";
  long engine = -1;
  std::string knobs;
  if (plan_name.rfind("eng", 0) == 0) {
    char* end = nullptr;
    engine = std::strtol(plan_name.c_str() + 3, &end, 10);
    const char* p = end;
    while (p && *p == '_' && p[1] == 'k') {
      char* e1 = nullptr;
      const long k = std::strtol(p + 2, &e1, 10);
      if (!e1 || *e1 != '=') break;
      char* e2 = nullptr;
      const long v = std::strtol(e1 + 1, &e2, 10);
      const char* name = knob_name(static_cast<int>(k));
      knobs += (knobs.empty() ? "" : ",") + std::string("\"") + (name ? name : ("k" + std::to_string(k)).c_str()) +
               "\":" + std::to_string(v);
      p = e2;
    }
  }
  if (engine >= 0) out += "\"engine\":" + std::to_string(engine) + ",\"knobs\":{" + knobs + "},";
  auto list = [](const std::vector<std::string>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ",\"" : "\"") + v[i] + "\"";
    return s + "]";
  };
  out += "\"numerical_notes\":" + list(numerical) + ",\"behavior_notes\":" + list(behavior);
  if (rank_a >= 0) out += ",\"heuristics_a_rank\":" + std::to_string(rank_a);
  if (rank_b >= 0) out += ",\"heuristics_b_rank\":" + std::to_string(rank_b);
  return out + "}";
}

}  // namespace benanza
