// RMSNorm through the cuDNN graph API (cudnn-frontend, header-only; rmsnorm.hpp): one rmsnorm node,
// X and SCALE in, Y out, forward phase INFERENCE (TRAINING: INV_VARIANCE out too); its backward, one
// rmsnorm_backward node (DY, X, SCALE, INV_VARIANCE in; DX, DSCALE out); every engine config timed by time_graph
// (graph_timing.hpp) as transformer_engines.cpp times the layernorm graph. A translation unit of its
// own so that the other graphs keep their compile time.
#include <memory>
#include <string>
#include <vector>

#include "benanza/rmsnorm.hpp"

#if BENANZA_WITH_FRONTEND
#include <cudnn_frontend.h>
#include "benanza/graph_timing.hpp"
#include "benanza/norm_graph.hpp"
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

void run_rmsnorm_engines(Bench& b, const NormSpec& c, void* x, void* scale, void* y, void* inv_variance) {
  constexpr int64_t kX = 1, kScale = 2, kY = 3, kInvVar = 4;
  GraphTiming j;
  j.precision = c.precision;
  j.graph = [c]() {
    auto g = new_graph(c.precision);
    auto X = norm_rows(*g, c, "X", kX);
    auto S = norm_param(*g, c, "scale", kScale);
    // epsilon as a pass-by-value scalar, as Layernorm_attributes::set_epsilon(float) makes it
    auto E = std::make_shared<fe::graph::Tensor_attributes>(c.epsilon);
    const auto phase = c.stats ? fe::NormFwdPhase_t::TRAINING : fe::NormFwdPhase_t::INFERENCE;
    auto opts = fe::graph::Rmsnorm_attributes().set_forward_phase(phase).set_epsilon(E);
    auto [Y, V] = g->rmsnorm(X, S, opts);
    Y->set_output(true).set_uid(kY).set_data_type(graph_io_type(c.precision));
    if (c.stats) V->set_output(true).set_uid(kInvVar).set_data_type(fe::DataType_t::FLOAT);  // TRAINING only
    return g;
  }();
  j.pack = {{kX, x}, {kScale, scale}, {kY, y}};
  if (c.stats) j.pack[kInvVar] = inv_variance;
  j.y = y;
  j.y_count = static_cast<std::size_t>(c.rows * c.cols);
  j.math = "none";
  j.note = std::string(c.stats ? "cuDNN graph: rmsnorm TRAINING (writes inv_variance float32), scale float32"
                               : "cuDNN graph: rmsnorm INFERENCE, scale float32") +
           (c.note && *c.note ? std::string("; ") + c.note : std::string());
  time_graph(b, j);
}

void run_rmsnorm_backward_engines(Bench& b, const NormSpec& c, void* dy, void* x, void* scale, void* inv_variance,
                                  void* dx, void* dscale) {
  constexpr int64_t kDY = 1, kX = 2, kScale = 3, kInvVar = 4, kDX = 5, kDScale = 6;
  GraphTiming j;
  j.precision = c.precision;
  j.graph = [c]() {
    auto g = new_graph(c.precision);
    auto DY = norm_rows(*g, c, "dY", kDY);
    auto X = norm_rows(*g, c, "X", kX);
    auto S = norm_param(*g, c, "scale", kScale);
    auto V = norm_stats(*g, c, "inv_variance", kInvVar);
    auto [DX, DS, DB] = g->rmsnorm_backward(DY, X, S, V, fe::graph::Rmsnorm_backward_attributes().has_dbias(false));
    (void)DB;  // null with has_dbias(false): RMSNorm has no bias
    DX->set_output(true).set_uid(kDX).set_data_type(graph_io_type(c.precision));
    DS->set_output(true).set_uid(kDScale).set_data_type(fe::DataType_t::FLOAT);
    return g;
  }();
  j.pack = {{kDY, dy}, {kX, x}, {kScale, scale}, {kInvVar, inv_variance}, {kDX, dx}, {kDScale, dscale}};
  j.y = dx;
  j.y_count = static_cast<std::size_t>(c.rows * c.cols);
  j.math = "none";
  j.note = std::string("cuDNN graph: rmsnorm_backward (dX and dScale in one call), saved inv_variance, scale and "
                       "its gradient float32") +
           (c.note && *c.note ? std::string("; ") + c.note : std::string());
  time_graph(b, j);
}

#else  // built without cudnn-frontend headers

void run_rmsnorm_engines(Bench& b, const NormSpec& c, void*, void*, void*, void*) {
  b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(c.precision), "", 0}, "skipped",
           "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

void run_rmsnorm_backward_engines(Bench& b, const NormSpec& c, void*, void*, void*, void*, void*, void*) {
  b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(c.precision), "", 0}, "skipped",
           "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

#endif

}  // namespace benanza
