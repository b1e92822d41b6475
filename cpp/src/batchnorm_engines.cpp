// BatchNormalization in a training step through the cuDNN graph API (cudnn-frontend, header-only):
// the `batchnorm` node (forward training: the batch's mean and inverse variance, the running
// statistics updated with the exponential average factor) and the `batchnorm_backward` node (dx,
// dscale and dbias in one graph), as cudnn-frontend's samples/cpp/norm/batchnorm.cpp builds them.
//
// Each graph is timed by time_graph (graph_timing.hpp), as the convolution engine configs are: the
// top picks of heuristics modes A and B recorded as choices, then every engine config of A, B and
// FALLBACK built (build_ms stored apart) and timed. cuDNN's norm engines may take only some layouts
// (channels-last) and data types: a graph it has no engine config for is one not_supported record
// with cuDNN's reason. Scale, bias and statistics are float32 (1, C, 1, 1), packed (C contiguous).
//
// BENANZA_KERNEL_CACHE=1 (opt-in, off by default: docs/timing.md): the graphs are built as
// dynamic-shape graphs sharing one kernel cache per node, data type and layout in this process
// (cudnn-frontend's "Dynamic Shapes and Kernel Cache", Graph::set_dynamic_shape_enabled and
// Graph::set_kernel_cache, cuDNN 9.4+), so a runtime-compiled engine compiled for one batch-norm shape
// is bound again for the next shape instead of compiled anew. Those compiles were 406 s of
// mobilenet_v3_large's 1,657 s of training bench jobs on an H200 (0.6-1.1 s per engine config;
// docs/timing.md). The records of such plans carry the algorithm prefix "dyn:" and a
// note; a graph that gets no engine config as a dynamic-shape graph is timed as a static one.
// With the option on, the heuristics' picks recorded as choices are the dynamic-shape graph's.
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "benanza/batchnorm.hpp"
#include "benanza/cudnn_util.hpp"

#if BENANZA_WITH_FRONTEND
#include <cudnn_frontend.h>

#include "benanza/graph_timing.hpp"
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

namespace {

constexpr int64_t kX = 1, kScale = 2, kBias = 3, kY = 4, kMean = 5, kInvVar = 6, kRunMean = 7, kRunVar = 8,
                  kNextMean = 9, kNextVar = 10, kDY = 11, kDX = 12, kDScale = 13, kDBias = 14;

// x's strides: packed NCHW, or channels-last (C fastest, then W, H, N)
std::vector<int64_t> x_strides(const std::vector<int64_t>& d, bool nhwc) {
  if (!nhwc) return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]};
}

std::shared_ptr<fe::graph::Tensor_attributes> channel_tensor(NotedGraph& g, const char* name, int64_t uid,
                                                             int64_t c) {
  return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({1, c, 1, 1})
                      .set_stride({c, 1, c, c}).set_data_type(fe::DataType_t::FLOAT));
}

void channel_output(const std::shared_ptr<fe::graph::Tensor_attributes>& t, int64_t uid, int64_t c) {
  t->set_output(true).set_uid(uid).set_data_type(fe::DataType_t::FLOAT).set_dim({1, c, 1, 1}).set_stride({c, 1, c, c});
}

std::string with_note(std::string base, const char* note) {
  if (note && *note) base += std::string("; ") + note;
  return base;
}

// BENANZA_KERNEL_CACHE set to 1 (file comment)
bool kernel_cache_enabled() {
  const char* v = std::getenv("BENANZA_KERNEL_CACHE");
  return v && std::string(v) == "1";
}

// The process's kernel cache of one graph topology: node, data type and layout.
std::shared_ptr<fe::KernelCache> kernel_cache_for(const std::string& key) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<fe::KernelCache>> caches;
  std::lock_guard<std::mutex> lock(mu);
  auto& c = caches[key];
  if (!c) c = std::make_shared<fe::KernelCache>();
  return c;
}

// Times the graph `make()` builds: with BENANZA_KERNEL_CACHE as a dynamic-shape graph on the kernel
// cache of `key` (records prefixed "dyn:"), and as the static graph (a fresh one) when that gets no
// engine config or the option is off.
// The static graph's records then say why the dynamic-shape one was not timed (on an H200 with
// cuDNN 9.19 no batch-norm graph of mobilenet_v2's training step gets a dynamic-shape plan).
void time_maybe_cached(Bench& b, const std::string& key, const std::function<GraphTiming()>& make) {
  std::string refused;
  if (kernel_cache_enabled()) {
    GraphTiming t = make();
    t.graph->set_dynamic_shape_enabled(true).set_kernel_cache(kernel_cache_for(key));
    t.family = "dyn:";
    t.note += "; dynamic-shape graph on the process's kernel cache (BENANZA_KERNEL_CACHE=1)";
    std::string why;
    if (time_graph(b, t, &why, false)) return;
    refused = "; BENANZA_KERNEL_CACHE=1: the dynamic-shape graph got no plan (" + (why.empty() ? std::string("no reason given") : why.substr(0, 200)) + ")";
  }
  GraphTiming t = make();
  t.note += refused;
  time_graph(b, t);
}

std::string cache_key(const char* node, const BatchNormSpec& s) {
  return std::string(node) + "/" + std::to_string(static_cast<int>(s.precision)) + (s.nhwc ? "/NHWC" : "/NCHW");
}

}  // namespace

void run_batchnorm_train_engines(Bench& b, const BatchNormSpec& s, void* x, void* scale, void* bias, void* run_mean,
                                 void* run_var, void* next_mean, void* next_var, void* y, void* mean, void* inv_var) {
  const std::vector<int64_t> xd(s.dims, s.dims + 4);
  const int64_t c = xd[1];
  time_maybe_cached(b, cache_key("batchnorm", s), [&]() {
    auto g = new_graph(s.precision);
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(x_strides(xd, s.nhwc)));
    auto S = channel_tensor(*g, "scale", kScale, c);
    auto B = channel_tensor(*g, "bias", kBias, c);
    auto RM = channel_tensor(*g, "running_mean", kRunMean, c);
    auto RV = channel_tensor(*g, "running_var", kRunVar, c);
    auto eps = g->tensor(fe::graph::Tensor_attributes(static_cast<float>(s.epsilon)));
    auto mom = g->tensor(fe::graph::Tensor_attributes(static_cast<float>(s.momentum)));
    auto opts = fe::graph::Batchnorm_attributes().set_epsilon(eps).set_previous_running_stats(RM, RV, mom);
    auto [Y, M, IV, NM, NV] = g->batchnorm(X, S, B, opts);
    Y->set_output(true).set_uid(kY).set_data_type(graph_io_type(s.precision)).set_dim(xd).set_stride(x_strides(xd, s.nhwc));
    channel_output(M, kMean, c);
    channel_output(IV, kInvVar, c);
    channel_output(NM, kNextMean, c);
    channel_output(NV, kNextVar, c);
    GraphTiming t;
    t.graph = g;
    t.pack = {{kX, x}, {kScale, scale}, {kBias, bias}, {kRunMean, run_mean}, {kRunVar, run_var}, {kY, y},
              {kMean, mean}, {kInvVar, inv_var}, {kNextMean, next_mean}, {kNextVar, next_var}};
    t.precision = s.precision;
    t.layout = s.nhwc ? "NHWC" : "NCHW";
    t.call = "cudnnBackendExecute(batchnorm)";
    t.math = "none";
    t.note = with_note("cuDNN graph: batchnorm training forward, running statistics updated, scale, bias and "
                       "statistics float32", s.note);
    t.y = y;
    t.y_count = numel(Dims(s.dims, s.dims + 4));
    return t;
  });
}

void run_batchnorm_backward_engines(Bench& b, const BatchNormSpec& s, void* x, void* dy, void* scale, void* mean,
                                    void* inv_var, void* dx, void* dscale, void* dbias) {
  const std::vector<int64_t> xd(s.dims, s.dims + 4);
  const int64_t c = xd[1];
  time_maybe_cached(b, cache_key("batchnorm_backward", s), [&]() {
    auto g = new_graph(s.precision);
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(x_strides(xd, s.nhwc)));
    auto DY = g->tensor(fe::graph::Tensor_attributes().set_name("DY").set_uid(kDY).set_dim(xd).set_stride(x_strides(xd, s.nhwc)));
    auto S = channel_tensor(*g, "scale", kScale, c);
    auto M = channel_tensor(*g, "mean", kMean, c);
    auto IV = channel_tensor(*g, "inv_variance", kInvVar, c);
    auto opts = fe::graph::Batchnorm_backward_attributes().set_saved_mean_and_inv_variance(M, IV);
    auto [DX, DS, DB] = g->batchnorm_backward(DY, X, S, opts);
    DX->set_output(true).set_uid(kDX).set_data_type(graph_io_type(s.precision)).set_dim(xd).set_stride(x_strides(xd, s.nhwc));
    channel_output(DS, kDScale, c);
    channel_output(DB, kDBias, c);
    GraphTiming t;
    t.graph = g;
    t.pack = {{kX, x}, {kDY, dy}, {kScale, scale}, {kMean, mean}, {kInvVar, inv_var}, {kDX, dx}, {kDScale, dscale},
              {kDBias, dbias}};
    t.precision = s.precision;
    t.layout = s.nhwc ? "NHWC" : "NCHW";
    t.call = "cudnnBackendExecute(batchnorm_backward)";
    t.math = "none";
    t.note = with_note("cuDNN graph: batchnorm_backward (dx, dscale, dbias), scale and statistics float32", s.note);
    t.y = dx;
    t.y_count = numel(Dims(s.dims, s.dims + 4));
    return t;
  });
}

#else  // built without cudnn-frontend headers

namespace {
void skipped(Bench& b, const BatchNormSpec& s, const char* call) {
  Call cl{call, "*", "none", storage_of(s.precision), "", 0};
  cl.layout = s.nhwc ? "NHWC" : "NCHW";
  b.record(cl, "skipped", "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}
}  // namespace

void run_batchnorm_train_engines(Bench& b, const BatchNormSpec& s, void*, void*, void*, void*, void*, void*, void*,
                                 void*, void*, void*) {
  skipped(b, s, "cudnnBackendExecute(batchnorm)");
}

void run_batchnorm_backward_engines(Bench& b, const BatchNormSpec& s, void*, void*, void*, void*, void*, void*, void*,
                                    void*) {
  skipped(b, s, "cudnnBackendExecute(batchnorm_backward)");
}

#endif

}  // namespace benanza
