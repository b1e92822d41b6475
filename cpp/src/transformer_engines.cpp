// The transformer layers through the cuDNN graph API (cudnn-frontend, header-only): layernorm,
// pointwise and sdpa operation graphs (transformer.hpp).
//
// Each graph is timed by time_graph (graph_timing.hpp), as the convolution engine configs are: the
// top pick of heuristics mode A and of mode B is recorded as a choice, then every engine config of
// modes A, B and FALLBACK (deduplicated by plan name: engine global index + knob choices, both in
// the record's details) is built and timed with the harness's method; a plan's build (for
// runtime-compiled engines their compilation) is outside the timing and stored as build_ms. A graph cuDNN has no engine for, a plan that does not build, a
// workspace over the limit: each is a record with its status and cuDNN's message, never an exception.
// Math: fp32 excludes Tensor Core engines (numerical note TENSOR_CORE), as CUDNN_FMA_MATH does; no
// precision allows engines that down-convert their inputs. The frontend's open-source engines
// (HeurMode_t::OPENSOURCE, NVRTC-compiled) are not requested.
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "benanza/cudnn_util.hpp"
#include "benanza/transformer.hpp"

#if BENANZA_WITH_FRONTEND
#include "benanza/graph_timing.hpp"
#endif

#if BENANZA_WITH_FRONTEND
#include <cudnn_frontend.h>
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

namespace {

using GraphPtr = std::shared_ptr<NotedGraph>;
using Pack = std::unordered_map<int64_t, void*>;

std::vector<int64_t> packed(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d[i];
  }
  return s;
}


std::string first_line(const std::string& s, std::size_t max = 300) {
  std::string out = s.substr(0, s.find('\n'));
  return out.size() > max ? out.substr(0, max) : out;
}

constexpr int64_t kX = 1, kScale = 2, kBias = 3, kY = 4, kMean = 5, kInvVar = 6;
constexpr int64_t kQ = 11, kK = 12, kV = 13, kO = 14, kAttnBias = 15;

bool pointwise_mode(UnaryOp op, fe::PointwiseMode_t& mode) {
  switch (op) {
    case UnaryOp::GELU: mode = fe::PointwiseMode_t::GELU_FWD; return true;
    case UnaryOp::GELU_TANH: mode = fe::PointwiseMode_t::GELU_APPROX_TANH_FWD; return true;
    case UnaryOp::ERF: mode = fe::PointwiseMode_t::ERF; return true;
    case UnaryOp::EXP: mode = fe::PointwiseMode_t::EXP; return true;
    case UnaryOp::LOG: mode = fe::PointwiseMode_t::LOG; return true;
    case UnaryOp::SQRT: mode = fe::PointwiseMode_t::SQRT; return true;
    case UnaryOp::RECIPROCAL: mode = fe::PointwiseMode_t::RECIPROCAL; return true;
    case UnaryOp::NEG: mode = fe::PointwiseMode_t::NEG; return true;
    case UnaryOp::ABS: mode = fe::PointwiseMode_t::ABS; return true;
    case UnaryOp::POW: mode = fe::PointwiseMode_t::POW; return true;
    case UnaryOp::CAST: return false;
  }
  return false;
}

}  // namespace

void run_layernorm_engines(Bench& b, const NormSpec& c, void* x, void* scale, void* bias, void* y, void* mean,
                           void* inv_variance) {
  const Precision p = c.precision;
  GraphTiming j;
  j.precision = p;
  j.graph = [c]() {
    auto g = new_graph(c.precision);
    const std::vector<int64_t> xd{c.rows, c.cols, 1, 1}, xs{c.cols, 1, c.cols, c.cols};
    const std::vector<int64_t> wd{1, c.cols, 1, 1}, ws{c.cols, 1, c.cols, c.cols};
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(xs));
    auto S = g->tensor(fe::graph::Tensor_attributes().set_name("scale").set_uid(kScale).set_dim(wd).set_stride(ws)
                           .set_data_type(fe::DataType_t::FLOAT));
    auto B = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kBias).set_dim(wd).set_stride(ws)
                           .set_data_type(fe::DataType_t::FLOAT));
    auto opts = fe::graph::Layernorm_attributes()
                    .set_forward_phase(c.stats ? fe::NormFwdPhase_t::TRAINING : fe::NormFwdPhase_t::INFERENCE)
                    .set_epsilon(c.epsilon);
    auto [Y, M, V] = g->layernorm(X, S, B, opts);
    Y->set_output(true).set_uid(kY).set_data_type(graph_io_type(c.precision));
    if (c.stats) {
      M->set_output(true).set_uid(kMean).set_data_type(fe::DataType_t::FLOAT);
      V->set_output(true).set_uid(kInvVar).set_data_type(fe::DataType_t::FLOAT);
    }
    return g;
  }();
  j.pack = {{kX, x}, {kScale, scale}, {kBias, bias}, {kY, y}};
  if (c.stats) {
    j.pack[kMean] = mean;
    j.pack[kInvVar] = inv_variance;
  }
  j.y = y;
  j.y_count = static_cast<std::size_t>(c.rows * c.cols);
  j.math = "none";
  j.note = std::string("cuDNN graph: layernorm ") + (c.stats ? "TRAINING (mean, inv_variance written)" : "INFERENCE") +
           ", scale and bias float32" + (c.note && *c.note ? std::string("; ") + c.note : std::string());
  time_graph(b, j);
}

void run_pointwise_engines(Bench& b, const PointwiseSpec& c, void* x, void* y) {
  fe::PointwiseMode_t mode;
  if (!pointwise_mode(c.op, mode)) return;
  GraphTiming j;
  j.precision = c.precision;
  j.graph = [c, mode]() {
    auto g = new_graph(c.precision);
    const std::vector<int64_t> d{c.rows, c.cols, 1, 1}, s{c.cols, 1, c.cols, c.cols};
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(d).set_stride(s));
    auto attrs = fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    std::shared_ptr<fe::graph::Tensor_attributes> Y;
    if (c.op == UnaryOp::POW)
      Y = g->pointwise(X, g->tensor(fe::graph::Tensor_attributes(c.exponent)), attrs);
    else
      Y = g->pointwise(X, attrs);
    Y->set_output(true).set_uid(kY).set_data_type(graph_io_type(c.precision)).set_dim(d).set_stride(s);
    return g;
  }();
  j.pack = {{kX, x}, {kY, y}};
  j.y = y;
  j.y_count = static_cast<std::size_t>(c.rows * c.cols);
  j.math = "none";
  j.note = std::string("cuDNN graph: pointwise ") + unary_name(c.op);
  time_graph(b, j);
}

void run_sdpa_engines(Bench& b, const SdpaSpec& c, void* q, void* k, void* v, void* o, void* bias) {
  const Precision p = c.precision;
  auto make_job = [&](const std::vector<int64_t>& bias_dims, const std::string& extra) {
    GraphTiming j;
    j.precision = p;
    j.graph = [c, bias_dims]() {
      auto g = new_graph(c.precision);
      const std::vector<int64_t> qd{c.b, c.h, c.s_q, c.d}, kd{c.b, c.h, c.s_kv, c.d}, vd{c.b, c.h, c.s_kv, c.d_v},
          od{c.b, c.h, c.s_q, c.d_v};
      const auto st = [&c](int t) { return std::vector<int64_t>(c.strides + 4 * t, c.strides + 4 * t + 4); };
      auto Q = g->tensor(fe::graph::Tensor_attributes().set_name("Q").set_uid(kQ).set_dim(qd).set_stride(st(0)));
      auto K = g->tensor(fe::graph::Tensor_attributes().set_name("K").set_uid(kK).set_dim(kd).set_stride(st(1)));
      auto V = g->tensor(fe::graph::Tensor_attributes().set_name("V").set_uid(kV).set_dim(vd).set_stride(st(2)));
      auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_is_inference(true).set_attn_scale(c.scale);
      if (c.mask == SdpaMask::CAUSAL)
        opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
      if (c.mask == SdpaMask::BIAS) {
        auto B = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kAttnBias).set_dim(bias_dims)
                               .set_stride(packed(bias_dims)).set_data_type(graph_io_type(c.precision)));
        opts.set_bias(B);
      }
      auto [O, stats] = g->sdpa(Q, K, V, opts);
      (void)stats;
      O->set_output(true).set_uid(kO).set_dim(od).set_stride(st(3)).set_data_type(graph_io_type(c.precision));
      return g;
    }();
    j.pack = {{kQ, q}, {kK, k}, {kV, v}, {kO, o}};
    if (c.mask == SdpaMask::BIAS) j.pack[kAttnBias] = bias;
    j.y = o;
    j.y_count = static_cast<std::size_t>(strided_extent({c.b, c.h, c.s_q, c.d_v}, c.strides + 12));
    j.math = math_label(p);
    j.note = std::string("cuDNN graph: sdpa (fused attention, inference)") +
             (c.mask == SdpaMask::CAUSAL ? ", causal mask" : c.mask == SdpaMask::BIAS ? ", additive bias" : "") + extra;
    return j;
  };
  const std::vector<int64_t> bias_dims(c.bias, c.bias + 4);
  std::string why;
  const bool retry = c.mask == SdpaMask::BIAS && c.bias[2] == 1 && c.s_q > 1;
  if (time_graph(b, make_job(bias_dims, ""), &why, !retry) || !retry) return;
  // cuDNN refused the bias broadcast over s_q: time it with the bias expanded to s_q rows
  std::vector<int64_t> full = bias_dims;
  full[2] = c.s_q;
  time_graph(b, make_job(full, "; bias broadcast over s_q refused by cuDNN (" + first_line(why, 120) +
                                   "): timed with the bias expanded to s_q rows"));
}

#else  // built without cudnn-frontend headers

namespace {
void skipped(Bench& b, Precision p, const char* math) {
  b.record(Call{"cudnnBackendExecute", "*", math, storage_of(p), "", 0}, "skipped",
           "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}
}  // namespace

void run_layernorm_engines(Bench& b, const NormSpec& c, void*, void*, void*, void*, void*, void*) {
  skipped(b, c.precision, "none");
}
void run_pointwise_engines(Bench& b, const PointwiseSpec& c, void*, void*) {
  if (c.op != UnaryOp::CAST) skipped(b, c.precision, "none");
}
void run_sdpa_engines(Bench& b, const SdpaSpec& c, void*, void*, void*, void*, void*) {
  skipped(b, c.precision, math_label(c.precision));
}

#endif

}  // namespace benanza
