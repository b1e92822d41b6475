// Timing every engine config of a cuDNN operation graph (cudnn-frontend), shared by the convolution
// and matmul graphs (engines.cpp) and the transformer graphs (transformer_engines.cpp). Include
// only where cudnn_frontend.h is available (BENANZA_WITH_FRONTEND).
#pragma once

#include <cudnn_frontend.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "benanza/harness.hpp"

namespace benanza {

// The frontend graph, with access to the numerical and behaviour notes of its engine configs.
class NotedGraph : public cudnn_frontend::graph::Graph {
 public:
  std::vector<cudnn_frontend::NumericalNote_t> numerical(int64_t i) const {
    return i >= 0 && i < static_cast<int64_t>(plans.numeric_notes.size()) ? plans.numeric_notes[i]
                                                                           : std::vector<cudnn_frontend::NumericalNote_t>{};
  }
  std::vector<cudnn_frontend::BehaviorNote_t> behavior(int64_t i) const {
    return i >= 0 && i < static_cast<int64_t>(plans.behavior_notes.size()) ? plans.behavior_notes[i]
                                                                            : std::vector<cudnn_frontend::BehaviorNote_t>{};
  }
};

// The cuDNN data type of a precision's tensors (fp32/tf32: FLOAT; fp16: HALF; bf16: BFLOAT16).
inline cudnn_frontend::DataType_t graph_io_type(Precision p) {
  return p == Precision::FP16   ? cudnn_frontend::DataType_t::HALF
         : p == Precision::BF16 ? cudnn_frontend::DataType_t::BFLOAT16
         : p == Precision::FP8  ? cudnn_frontend::DataType_t::FP8_E4M3
                                : cudnn_frontend::DataType_t::FLOAT;
}

// An empty graph in precision `p`: its I/O tensors in the precision's type, intermediates and
// compute in float32.
inline std::shared_ptr<NotedGraph> new_graph(Precision p) {
  auto g = std::make_shared<NotedGraph>();
  g->set_io_data_type(graph_io_type(p))
      .set_intermediate_data_type(cudnn_frontend::DataType_t::FLOAT)
      .set_compute_data_type(cudnn_frontend::DataType_t::FLOAT);
  return g;
}

// Packed (row-major) strides of a frontend tensor's dims.
inline std::vector<int64_t> graph_packed_strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d[i];
  }
  return s;
}

// What to time: the graph (tensors carry the uids of `pack`), the device buffers by uid, an
// optional call run after each execution inside the timed call (the unfused bias of a
// convolution), the records' labels, and the output checked once for NaN/Inf.
struct GraphTiming {
  std::shared_ptr<NotedGraph> graph;
  std::unordered_map<int64_t, void*> pack;
  std::function<Status(cudaStream_t)> after;  // on the timed call's stream
  Precision precision;
  std::string layout = "NCHW";
  std::string call = "cudnnBackendExecute";
  std::string math;  // the records' math label ("" : the precision's, math_label)
  std::string note;  // how the timed graph relates to the layer, when not 1:1
  std::string family;  // prefix of the records' algorithm names (a family of configs, e.g. "paged_kv64:")
  bool picks = true;
  const void* y = nullptr;
  std::size_t y_count = 0;
  std::optional<DType> y_type;  // the output's data type (default: the precision's storage type)
};

// Every engine config of heuristics modes A, B and FALLBACK for the graph, queried on one graph in
// that order, so the list's first part is mode A's ranking and the next mode B's. With `picks`,
// mode A's and B's top picks (the first config each mode lists that the precision allows and that
// builds) are recorded as choices. Each distinct config is then built (build_ms stored apart) and
// timed with the harness's method; its details hold the engine index, named knobs, notes and
// heuristics ranks. Math: fp32 excludes Tensor Core configs (numerical note TENSOR_CORE), no
// precision allows DOWN_CONVERT_INPUTS; excluded configs are recorded as not_supported unbuilt.
// Returns false when cuDNN has no engine config for the graph: `why` gets the reason, recorded as
// not_supported (with the picks' "no engine config" choices) unless `record_failure` is false: a
// caller that retries with another graph records that one's.
bool time_graph(Bench& b, const GraphTiming& t, std::string* why = nullptr, bool record_failure = true);

}  // namespace benanza
