// LayerNorm's backward through the cuDNN graph API (cudnn-frontend, header-only;
// transformer_backward.hpp): one layernorm_backward node, DY, X, SCALE and the forward's saved MEAN
// and INV_VARIANCE in, DX, DSCALE and DBIAS out, every engine config timed by time_graph
// (graph_timing.hpp) as transformer_engines.cpp times the forward's layernorm graph. A translation
// unit of its own so that the forward's graphs keep their compile time.
#include <string>
#include <vector>

#include "benanza/transformer_backward.hpp"

#if BENANZA_WITH_FRONTEND
#include <cudnn_frontend.h>
#include "benanza/graph_timing.hpp"
#include "benanza/norm_graph.hpp"
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

void run_layernorm_backward_engines(Bench& b, const NormSpec& c, void* dy, void* x, void* scale, void* mean,
                                    void* inv_variance, void* dx, void* dscale, void* dbias) {
  constexpr int64_t kDY = 1, kX = 2, kScale = 3, kMean = 4, kInvVar = 5, kDX = 6, kDScale = 7, kDBias = 8;
  GraphTiming j;
  j.precision = c.precision;
  j.graph = [c]() {
    auto g = new_graph(c.precision);
    auto DY = norm_rows(*g, c, "dY", kDY);
    auto X = norm_rows(*g, c, "X", kX);
    auto S = norm_param(*g, c, "scale", kScale);
    auto M = norm_stats(*g, c, "mean", kMean);
    auto V = norm_stats(*g, c, "inv_variance", kInvVar);
    auto opts = fe::graph::Layernorm_backward_attributes().set_saved_mean_and_inv_variance(M, V);
    auto [DX, DS, DB] = g->layernorm_backward(DY, X, S, opts);
    DX->set_output(true).set_uid(kDX).set_data_type(graph_io_type(c.precision));
    DS->set_output(true).set_uid(kDScale).set_data_type(fe::DataType_t::FLOAT);
    DB->set_output(true).set_uid(kDBias).set_data_type(fe::DataType_t::FLOAT);
    return g;
  }();
  j.pack = {{kDY, dy}, {kX, x}, {kScale, scale}, {kMean, mean}, {kInvVar, inv_variance},
            {kDX, dx}, {kDScale, dscale}, {kDBias, dbias}};
  j.y = dx;
  j.y_count = static_cast<std::size_t>(c.rows * c.cols);
  j.math = "none";
  j.note = std::string("cuDNN graph: layernorm_backward (dX, dScale and dBias in one call), saved mean and "
                       "inv_variance float32, scale and its gradients float32") +
           (c.note && *c.note ? std::string("; ") + c.note : std::string());
  time_graph(b, j);
}

#else  // built without cudnn-frontend headers

void run_layernorm_backward_engines(Bench& b, const NormSpec& c, void*, void*, void*, void*, void*, void*, void*,
                                    void*) {
  b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(c.precision), "", 0}, "skipped",
           "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

#endif

}  // namespace benanza
