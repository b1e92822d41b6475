// The transformer layers through the cuDNN graph API (cudnn-frontend, header-only): layernorm,
// pointwise and sdpa operation graphs (transformer.hpp).
//
// For each graph, as for the convolution engine configs (engines.cpp): the top pick of heuristics
// mode A and of mode B is recorded as a choice, then every engine config of modes A, B and FALLBACK
// (deduplicated by plan name: engine global index + knob choices) is built and timed with the
// harness's method; a plan's build (for runtime-compiled engines their compilation) is outside the
// timing and stored as build_ms. A graph cuDNN has no engine for, a plan that does not build, a
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
#include <cudnn_frontend.h>
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

namespace {

using GraphPtr = std::shared_ptr<fe::graph::Graph>;
using Pack = std::unordered_map<int64_t, void*>;

fe::DataType_t io_type(Precision p) {
  return p == Precision::FP16 ? fe::DataType_t::HALF : p == Precision::BF16 ? fe::DataType_t::BFLOAT16
                                                                            : fe::DataType_t::FLOAT;
}

std::vector<int64_t> packed(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d[i];
  }
  return s;
}

GraphPtr new_graph(Precision p) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io_type(p)).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(
      fe::DataType_t::FLOAT);
  return g;
}

std::string first_line(const std::string& s, std::size_t max = 300) {
  std::string out = s.substr(0, s.find('\n'));
  return out.size() > max ? out.substr(0, max) : out;
}

// Validate, build the operation graph, query `modes`, filter by math, check support: "" or the reason.
std::string prepare(fe::graph::Graph& g, cudnnHandle_t h, Precision p, const std::vector<fe::HeurMode_t>& modes) {
  try {
    auto st = g.validate();
    if (st.is_good()) st = g.build_operation_graph(h);
    if (st.is_good()) st = g.create_execution_plans(modes);
    if (st.is_good()) {
      if (p == Precision::FP32)
        g.deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
      else
        g.deselect_numeric_notes({fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
      st = g.check_support(h);
    }
    return st.is_good() ? "" : (st.get_message().empty() ? "not supported" : st.get_message());
  } catch (const fe::cudnnException& e) {
    return e.what();
  }
}

// A graph of one layer: how to build it, what it reads and writes, how its records are labelled.
struct GraphJob {
  std::function<GraphPtr()> make;  // a fresh graph each call (tensors carry the uids of `pack`)
  Pack pack;
  const void* out;                 // checked once for NaN/Inf
  std::size_t out_count;
  DType out_type;
  std::string math;
  std::string note;                // on every record: what the graph computes
};

// Heuristics picks, then every engine config timed. Returns false when the graph has no engine
// config cuDNN supports (recorded as not_supported with `why`).
bool time_graph(Bench& b, const GraphJob& j, Precision p, std::string* why_out = nullptr, bool record_failure = true) {
  const DType dt = storage_of(p);
  const std::string call = "cudnnBackendExecute";
  const std::pair<const char*, fe::HeurMode_t> modes[] = {{"cudnn_heuristics_mode_a", fe::HeurMode_t::A},
                                                          {"cudnn_heuristics_mode_b", fe::HeurMode_t::B}};
  auto g = j.make();
  const std::string why = prepare(*g, b.cudnn(), p, {fe::HeurMode_t::A, fe::HeurMode_t::B, fe::HeurMode_t::FALLBACK});
  if (!why.empty()) {
    if (why_out) *why_out = why;
    if (record_failure)
      b.record(Call{call, "*", j.math, dt, j.note, 0}, "not_supported", "cuDNN graph API: " + first_line(why));
    return false;
  }
  for (const auto& [source, mode] : modes) {
    auto h = j.make();
    const std::string w = prepare(*h, b.cudnn(), p, {mode});
    std::string name;
    if (w.empty() && h->get_execution_plan_count() > 0 && h->get_plan_name_at_index(0, name).is_good())
      b.choice(source, 0, name, j.math, "ok", 0);
    else
      b.choice(source, 0, "", j.math, w.empty() ? "no engine config" : first_line(w, 60), 0);
  }
  std::set<std::string> seen;
  const int64_t n = g->get_execution_plan_count();
  for (int64_t i = 0; i < n; ++i) {
    std::string name;
    if (!g->get_plan_name_at_index(i, name).is_good() || name.empty()) name = "plan" + std::to_string(i);
    if (!seen.insert(name).second) continue;
    Call cl{call, name, j.math, dt, j.note, 0};
    fe::error_t st;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      st = g->build_plan_at_index(i);
    } catch (const fe::cudnnException& e) {
      st = {fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, e.what()};
    }
    cl.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<fe::BehaviorNote_t> notes;
    bool rtc = false;
    if (g->get_behavior_notes_for_plan_at_index(i, notes).is_good())
      for (auto note : notes) rtc = rtc || note == fe::BehaviorNote_t::RUNTIME_COMPILATION;
    if (rtc) cl.note += std::string(cl.note.empty() ? "" : "; ") + "runtime-compiled engine";
    if (!st.is_good()) {
      b.record(cl, "not_supported", "plan build: " + first_line(st.get_message()));
      continue;
    }
    int64_t ws = 0;
    if (!g->get_workspace_size_plan_at_index(i, ws).is_good()) ws = 0;
    cl.workspace = static_cast<std::size_t>(ws);
    if (cl.workspace > b.ctx().options().workspace_limit) {
      b.record(cl, "skipped", "workspace of " + std::to_string(ws) + " bytes exceeds the limit");
      continue;
    }
    void* wsp = nullptr;
    try {
      wsp = b.workspace(cl.workspace);
    } catch (const JobError& e) {
      b.record(cl, "failed", e.what());
      continue;
    }
    Pack pack = j.pack;
    b.measure(cl, [&, i](cudaStream_t) -> Status {
      fe::error_t s;
      try {
        s = g->execute_plan_at_index(b.cudnn(), pack, wsp, i);
      } catch (const fe::cudnnException& e) {
        s = {fe::error_code_t::GRAPH_EXECUTION_FAILED, e.what()};
      }
      if (!s.is_good()) {
        Status r;
        r.ok = false;
        r.message = "cudnn-frontend execute: " + first_line(s.get_message());
        return r;
      }
      return Status::success();
    }, j.out, j.out_count, j.out_type);
  }
  return true;
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
  GraphJob j;
  j.make = [c]() {
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
    Y->set_output(true).set_uid(kY).set_data_type(io_type(c.precision));
    if (c.stats) {
      M->set_output(true).set_uid(kMean).set_data_type(fe::DataType_t::FLOAT);
      V->set_output(true).set_uid(kInvVar).set_data_type(fe::DataType_t::FLOAT);
    }
    return g;
  };
  j.pack = {{kX, x}, {kScale, scale}, {kBias, bias}, {kY, y}};
  if (c.stats) {
    j.pack[kMean] = mean;
    j.pack[kInvVar] = inv_variance;
  }
  j.out = y;
  j.out_count = static_cast<std::size_t>(c.rows * c.cols);
  j.out_type = storage_of(p);
  j.math = "none";
  j.note = std::string("cuDNN graph: layernorm ") + (c.stats ? "TRAINING (mean, inv_variance written)" : "INFERENCE") +
           ", scale and bias float32" + (c.note && *c.note ? std::string("; ") + c.note : std::string());
  time_graph(b, j, p);
}

void run_pointwise_engines(Bench& b, const PointwiseSpec& c, void* x, void* y) {
  fe::PointwiseMode_t mode;
  if (!pointwise_mode(c.op, mode)) return;
  GraphJob j;
  j.make = [c, mode]() {
    auto g = new_graph(c.precision);
    const std::vector<int64_t> d{c.rows, c.cols, 1, 1}, s{c.cols, 1, c.cols, c.cols};
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(d).set_stride(s));
    auto attrs = fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    std::shared_ptr<fe::graph::Tensor_attributes> Y;
    if (c.op == UnaryOp::POW)
      Y = g->pointwise(X, g->tensor(fe::graph::Tensor_attributes(c.exponent)), attrs);
    else
      Y = g->pointwise(X, attrs);
    Y->set_output(true).set_uid(kY).set_data_type(io_type(c.precision)).set_dim(d).set_stride(s);
    return g;
  };
  j.pack = {{kX, x}, {kY, y}};
  j.out = y;
  j.out_count = static_cast<std::size_t>(c.rows * c.cols);
  j.out_type = storage_of(c.precision);
  j.math = "none";
  j.note = std::string("cuDNN graph: pointwise ") + unary_name(c.op);
  time_graph(b, j, c.precision);
}

void run_sdpa_engines(Bench& b, const SdpaSpec& c, void* q, void* k, void* v, void* o, void* bias) {
  const Precision p = c.precision;
  auto make_job = [&](const std::vector<int64_t>& bias_dims, const std::string& extra) {
    GraphJob j;
    j.make = [c, bias_dims]() {
      auto g = new_graph(c.precision);
      const std::vector<int64_t> qd{c.b, c.h, c.s_q, c.d}, kd{c.b, c.h, c.s_kv, c.d}, vd{c.b, c.h, c.s_kv, c.d_v},
          od{c.b, c.h, c.s_q, c.d_v};
      auto Q = g->tensor(fe::graph::Tensor_attributes().set_name("Q").set_uid(kQ).set_dim(qd).set_stride(packed(qd)));
      auto K = g->tensor(fe::graph::Tensor_attributes().set_name("K").set_uid(kK).set_dim(kd).set_stride(packed(kd)));
      auto V = g->tensor(fe::graph::Tensor_attributes().set_name("V").set_uid(kV).set_dim(vd).set_stride(packed(vd)));
      auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_is_inference(true).set_attn_scale(c.scale);
      if (c.mask == SdpaMask::CAUSAL)
        opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
      if (c.mask == SdpaMask::BIAS) {
        auto B = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kAttnBias).set_dim(bias_dims)
                               .set_stride(packed(bias_dims)).set_data_type(io_type(c.precision)));
        opts.set_bias(B);
      }
      auto [O, stats] = g->sdpa(Q, K, V, opts);
      (void)stats;
      O->set_output(true).set_uid(kO).set_dim(od).set_stride(packed(od)).set_data_type(io_type(c.precision));
      return g;
    };
    j.pack = {{kQ, q}, {kK, k}, {kV, v}, {kO, o}};
    if (c.mask == SdpaMask::BIAS) j.pack[kAttnBias] = bias;
    j.out = o;
    j.out_count = static_cast<std::size_t>(c.b * c.h * c.s_q * c.d_v);
    j.out_type = storage_of(p);
    j.math = math_label(p);
    j.note = std::string("cuDNN graph: sdpa (fused attention, inference)") +
             (c.mask == SdpaMask::CAUSAL ? ", causal mask" : c.mask == SdpaMask::BIAS ? ", additive bias" : "") + extra;
    return j;
  };
  const std::vector<int64_t> bias_dims(c.bias, c.bias + 4);
  std::string why;
  const bool retry = c.mask == SdpaMask::BIAS && c.bias[2] == 1 && c.s_q > 1;
  if (time_graph(b, make_job(bias_dims, ""), p, &why, !retry) || !retry) return;
  // cuDNN refused the bias broadcast over s_q: time it with the bias expanded to s_q rows
  std::vector<int64_t> full = bias_dims;
  full[2] = c.s_q;
  time_graph(b, make_job(full, "; bias broadcast over s_q refused by cuDNN (" + first_line(why, 120) +
                                   "): timed with the bias expanded to s_q rows"), p);
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
