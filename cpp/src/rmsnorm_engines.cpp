// RMSNorm through the cuDNN graph API (cudnn-frontend, header-only; rmsnorm.hpp): one rmsnorm node,
// X and SCALE in, Y out, forward phase INFERENCE, every engine config timed by time_graph
// (graph_timing.hpp) as transformer_engines.cpp times the layernorm graph. A translation unit of its
// own so that the other graphs keep their compile time.
#include <memory>
#include <string>
#include <vector>

#include "benanza/rmsnorm.hpp"

#if BENANZA_WITH_FRONTEND
#include <cudnn_frontend.h>
#include "benanza/graph_timing.hpp"
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

void run_rmsnorm_engines(Bench& b, const NormSpec& c, void* x, void* scale, void* y) {
  constexpr int64_t kX = 1, kScale = 2, kY = 3;
  GraphTiming j;
  j.precision = c.precision;
  j.graph = [c]() {
    auto g = new_graph(c.precision);
    const std::vector<int64_t> xd{c.rows, c.cols, 1, 1}, xs{c.cols, 1, c.cols, c.cols};
    const std::vector<int64_t> wd{1, c.cols, 1, 1}, ws{c.cols, 1, c.cols, c.cols};
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(xs));
    auto S = g->tensor(fe::graph::Tensor_attributes().set_name("scale").set_uid(kScale).set_dim(wd).set_stride(ws)
                           .set_data_type(fe::DataType_t::FLOAT));
    // epsilon as a pass-by-value scalar, as Layernorm_attributes::set_epsilon(float) makes it
    auto E = std::make_shared<fe::graph::Tensor_attributes>(c.epsilon);
    auto opts = fe::graph::Rmsnorm_attributes().set_forward_phase(fe::NormFwdPhase_t::INFERENCE).set_epsilon(E);
    auto [Y, V] = g->rmsnorm(X, S, opts);
    (void)V;  // INV_VARIANCE: only in the TRAINING phase
    Y->set_output(true).set_uid(kY).set_data_type(graph_io_type(c.precision));
    return g;
  }();
  j.pack = {{kX, x}, {kScale, scale}, {kY, y}};
  j.y = y;
  j.y_count = static_cast<std::size_t>(c.rows * c.cols);
  j.math = "none";
  j.note = std::string("cuDNN graph: rmsnorm INFERENCE, scale float32") +
           (c.note && *c.note ? std::string("; ") + c.note : std::string());
  time_graph(b, j);
}

#else  // built without cudnn-frontend headers

void run_rmsnorm_engines(Bench& b, const NormSpec& c, void*, void*, void*) {
  b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(c.precision), "", 0}, "skipped",
           "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

#endif

}  // namespace benanza
