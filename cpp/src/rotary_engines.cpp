// Rotary position embedding through the cuDNN graph API (cudnn-frontend, header-only; rotary.hpp): one
// rope node (Graph::rope; CUDNN_BACKEND_OPERATION_ROPE_FWD_DESCRIPTOR, cuDNN 9.24+), X and FREQS in, Y out,
// every engine config timed by time_graph (graph_timing.hpp) as rmsnorm_engines.cpp times its graph. A
// translation unit of its own so that the other graphs keep their compile time.
#include <memory>
#include <string>
#include <vector>

#include "benanza/rotary.hpp"

#if BENANZA_WITH_FRONTEND
#include <cudnn_frontend.h>
#include "benanza/graph_timing.hpp"
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

namespace {

// Why cuDNN's rope is not this layer ("" : it is). cuDNN's node (cudnn_graph.h, CUDNN_ATTR_OPERATION_ROPE_FWD_*)
// takes angles [S, 1, 1, D] shared by the batch, rotates the two halves, and with a rope_dim below head_dim the
// LAST rope_dim elements, where ONNX RotaryEmbedding rotates the first rotary_embedding_dim.
std::string not_this_layer(const RotarySpec& r) {
  if (r.interleaved) return "cuDNN's rope rotates halves; the layer's pairs are interleaved";
  if (r.rotary_dim != r.head_dim)
    return "cuDNN's rope rotates the last rope_dim elements of a head; the layer rotates the first " +
           std::to_string(r.rotary_dim) + " of " + std::to_string(r.head_dim);
  if (r.positions > 0 || r.cache_batch > 1)
    return "cuDNN's rope takes one angle per position shared by the batch; the layer's cos/sin differ per batch entry";
  return "";
}

}  // namespace

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

void run_rotary_engines(Bench& b, Precision p, const RotarySpec& r, void* x, void* freqs, void* y, const char* note) {
  const std::string why = not_this_layer(r);
  if (!why.empty()) {
    b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(p), "cuDNN graph: rope", 0}, "skipped", why);
    return;
  }
  constexpr int64_t kX = 1, kFreqs = 2, kY = 3;
  GraphTiming j;
  j.precision = p;
  j.graph = [p, r]() {
    auto g = new_graph(p);
    const int64_t B = r.batch, H = r.heads, S = r.seq, D = r.head_dim;
    const std::vector<int64_t> xd{B, H, S, D};
    // bhsd packed, or bshd packed seen as [B, H, S, D]
    const std::vector<int64_t> xs = r.bshd ? std::vector<int64_t>{S * H * D, D, H * D, 1}
                                           : std::vector<int64_t>{H * S * D, S * D, D, 1};
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(xs));
    auto F = g->tensor(fe::graph::Tensor_attributes().set_name("freqs").set_uid(kFreqs).set_dim({S, 1, 1, D})
                           .set_stride({D, D, D, 1}).set_data_type(fe::DataType_t::FLOAT));
    auto Y = g->rope(X, F, fe::graph::RoPE_attributes().set_name("rope"));
    Y->set_output(true).set_uid(kY).set_data_type(graph_io_type(p));
    return g;
  }();
  j.pack = {{kX, x}, {kFreqs, freqs}, {kY, y}};
  j.y = y;
  j.y_count = static_cast<std::size_t>(r.batch * r.heads * r.seq * r.head_dim);
  j.math = "none";
  j.note = std::string("cuDNN graph: rope, freqs [S, 1, 1, D] float32 angles (sincosf in the kernel)") +
           (note && *note ? std::string("; ") + note : std::string());
  time_graph(b, j);
}

#else  // built without cudnn-frontend headers

void run_rotary_engines(Bench& b, Precision p, const RotarySpec& r, void*, void*, void*, const char*) {
  const std::string why = not_this_layer(r);
  b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(p), "", 0}, "skipped",
           why.empty() ? "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)" : why);
}

#endif

}  // namespace benanza
