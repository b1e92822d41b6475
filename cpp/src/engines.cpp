// Convolution engine configs through the cuDNN graph API (cudnn-frontend, header-only).
//
// For a Conv (+ bias) or Conv + bias + Relu layer config, the operation graph conv_fprop ->
// [pointwise ADD bias] -> [pointwise RELU] is built once per heuristics mode: the top pick of mode A
// and of mode B (the first engine config of the mode's list that the precision allows and that
// builds: what cuDNN's heuristic would run) are recorded as choices, then every engine config of
// modes A, B and FALLBACK (deduplicated by plan name: engine global index + knob choices) is built
// and timed with the harness's method. A convolution with a bias is also timed unfused, as
// frameworks run it when the fused graph is slower or unsupported: every engine config of the
// conv-only graph followed by cudnnAddTensor for the bias (call "cudnnBackendExecute+cudnnAddTensor").
//
// A plan's build (for runtime-compiled engines: their compilation) is outside the timing; its
// duration is stored on its own (build_ms). Each record's details hold the engine global index, the
// knob choices by name, the numerical and behaviour notes and the plan's rank in the heuristics
// lists A and B. Math: fp32 excludes engines with the numerical note TENSOR_CORE (as CUDNN_FMA_MATH
// does); tf32 allows TF32 Tensor Cores; no precision allows engines that down-convert their inputs
// (DOWN_CONVERT_INPUTS). Excluded configs are recorded as not_supported with the note that excluded
// them, without being built.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "benanza/cudnn_util.hpp"
#include "benanza/engine_details.hpp"
#include "benanza/engines.hpp"

#if BENANZA_WITH_FRONTEND
#include <dlfcn.h>

#include <cudnn_frontend.h>

// Built with NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING, cudnn-frontend resolves cuDNN through this
// handle: the libcudnn.so.9 the suite is linked against (already loaded).
namespace cudnn_frontend {
void* cudnn_dlhandle = [] {
  void* h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_NOLOAD);
  return h ? h : dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
}();
}  // namespace cudnn_frontend
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

namespace {

constexpr int64_t kX = 1, kW = 2, kB = 3, kY = 4;

// Strides of dims (N, C, spatial...) stored packed in `layout` (NCHW, or NHWC: channels last).
std::vector<int64_t> strides_for(const std::vector<int64_t>& d, bool nhwc) {
  const int n = static_cast<int>(d.size());
  std::vector<int64_t> s(n);
  if (!nhwc) {
    int64_t acc = 1;
    for (int i = n - 1; i >= 0; --i) {
      s[i] = acc;
      acc *= d[i];
    }
    return s;
  }
  int64_t acc = 1;
  s[1] = acc;
  acc *= d[1];
  for (int i = n - 1; i >= 2; --i) {
    s[i] = acc;
    acc *= d[i];
  }
  s[0] = acc;
  return s;
}

// The frontend graph, with access to the numerical and behaviour notes of its engine configs.
class NotedGraph : public fe::graph::Graph {
 public:
  std::vector<fe::NumericalNote_t> numerical(int64_t i) const {
    return i >= 0 && i < static_cast<int64_t>(plans.numeric_notes.size()) ? plans.numeric_notes[i]
                                                                           : std::vector<fe::NumericalNote_t>{};
  }
  std::vector<fe::BehaviorNote_t> behavior(int64_t i) const {
    return i >= 0 && i < static_cast<int64_t>(plans.behavior_notes.size()) ? plans.behavior_notes[i]
                                                                            : std::vector<fe::BehaviorNote_t>{};
  }
};

const char* numerical_name(fe::NumericalNote_t n) {
  switch (n) {
    case fe::NumericalNote_t::TENSOR_CORE: return "TENSOR_CORE";
    case fe::NumericalNote_t::DOWN_CONVERT_INPUTS: return "DOWN_CONVERT_INPUTS";
    case fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION: return "REDUCED_PRECISION_REDUCTION";
    case fe::NumericalNote_t::FFT: return "FFT";
    case fe::NumericalNote_t::NONDETERMINISTIC: return "NONDETERMINISTIC";
    case fe::NumericalNote_t::WINOGRAD: return "WINOGRAD";
    case fe::NumericalNote_t::WINOGRAD_TILE_4x4: return "WINOGRAD_TILE_4x4";
    case fe::NumericalNote_t::WINOGRAD_TILE_6x6: return "WINOGRAD_TILE_6x6";
    case fe::NumericalNote_t::WINOGRAD_TILE_13x13: return "WINOGRAD_TILE_13x13";
    default: return "OTHER";
  }
}

const char* behavior_name(fe::BehaviorNote_t n) {
  switch (n) {
    case fe::BehaviorNote_t::RUNTIME_COMPILATION: return "RUNTIME_COMPILATION";
    case fe::BehaviorNote_t::REQUIRES_FILTER_INT8x32_REORDER: return "REQUIRES_FILTER_INT8x32_REORDER";
    case fe::BehaviorNote_t::REQUIRES_BIAS_INT8x32_REORDER: return "REQUIRES_BIAS_INT8x32_REORDER";
    default: return "OTHER";
  }
}

std::shared_ptr<NotedGraph> make_graph(const ConvSpec& c, bool bias, bool relu) {
  const fe::DataType_t io = c.precision == Precision::FP16   ? fe::DataType_t::HALF
                            : c.precision == Precision::BF16 ? fe::DataType_t::BFLOAT16
                                                             : fe::DataType_t::FLOAT;
  auto g = std::make_shared<NotedGraph>();
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(
      fe::DataType_t::FLOAT);
  const int nd = c.nsp + 2;
  std::vector<int64_t> xd(c.x, c.x + nd), wd(c.w, c.w + nd);
  auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(
      strides_for(xd, c.nhwc)));
  auto W = g->tensor(fe::graph::Tensor_attributes().set_name("W").set_uid(kW).set_dim(wd).set_stride(
      strides_for(wd, c.nhwc)));
  std::vector<int64_t> pad(c.pad, c.pad + c.nsp), stride(c.stride, c.stride + c.nsp), dil(c.dilation, c.dilation + c.nsp);
  auto Y = g->conv_fprop(X, W, fe::graph::Conv_fprop_attributes().set_padding(pad).set_stride(stride).set_dilation(dil));
  if (bias) {
    std::vector<int64_t> bd(nd, 1);
    bd[1] = c.w[0];
    auto B = g->tensor(fe::graph::Tensor_attributes().set_name("B").set_uid(kB).set_dim(bd).set_stride(
        strides_for(bd, c.nhwc)));
    Y = g->pointwise(Y, B, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  }
  if (relu) Y = g->pointwise(Y, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  Y->set_output(true).set_uid(kY).set_data_type(io);
  if (c.nhwc) {
    // the conv output's dims are inferred: give it channels-last strides explicitly
    std::vector<int64_t> yd(c.y, c.y + nd);
    Y->set_dim(yd).set_stride(strides_for(yd, true));
  }
  return g;
}

// Why the precision excludes an engine config with these notes ("" when it is allowed).
std::string excluded_by(const std::vector<fe::NumericalNote_t>& notes, Precision p) {
  for (auto n : notes) {
    if (n == fe::NumericalNote_t::DOWN_CONVERT_INPUTS) return "numerical note DOWN_CONVERT_INPUTS";
    if (n == fe::NumericalNote_t::TENSOR_CORE && p == Precision::FP32)
      return "numerical note TENSOR_CORE (fp32 is FMA math only)";
  }
  return "";
}

// Build the op graph and the engine configs of `modes`; "" on success, else the reason.
std::string prepare(fe::graph::Graph& g, cudnnHandle_t h, const std::vector<fe::HeurMode_t>& modes) {
  auto st = g.validate();
  if (st.is_good()) st = g.build_operation_graph(h);
  if (st.is_good()) st = g.create_execution_plans(modes);
  return st.is_good() ? "" : st.get_message();
}

std::string plan_name(const fe::graph::Graph& g, int64_t i) {
  std::string name;
  if (!g.get_plan_name_at_index(i, name).is_good() || name.empty()) name = "plan" + std::to_string(i);
  return name;
}

// One heuristics mode: the rank of every engine config in its list, and its top pick recorded as a
// choice (the first config the precision allows that builds).
std::unordered_map<std::string, int> heuristics_mode(Bench& b, const ConvSpec& c, bool bias, bool relu,
                                                     fe::HeurMode_t mode, const char* source) {
  std::unordered_map<std::string, int> rank;
  const char* math = math_label(c.precision);
  auto g = make_graph(c, bias, relu);
  const std::string why = prepare(*g, b.cudnn(), {mode});
  if (!why.empty()) {
    b.choice(source, 0, "", math, why.substr(0, 60), 0);
    return rank;
  }
  const int64_t n = g->get_execution_plan_count();
  bool picked = false;
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = plan_name(*g, i);
    rank.emplace(name, static_cast<int>(i));
    if (picked || !excluded_by(g->numerical(i), c.precision).empty()) continue;
    if (g->build_plan_at_index(i).is_good()) {
      int64_t ws = 0;
      g->get_workspace_size_plan_at_index(i, ws);
      b.choice(source, 0, name, math, "ok", static_cast<std::size_t>(ws));
      picked = true;
    }
  }
  if (!picked) b.choice(source, 0, "", math, "no engine config", 0);
  return rank;
}

// Time every engine config of A, B and FALLBACK for the graph (conv [+ bias] [+ relu]); with
// `add_bias`, each execution is followed by cudnnAddTensor of the bias (the unfused form).
void time_engines(Bench& b, const ConvSpec& c, bool bias_in_graph, bool add_bias, const std::string& call,
                  const std::unordered_map<std::string, int>& rank_a,
                  const std::unordered_map<std::string, int>& rank_b, void* x, void* w, void* bias, void* y,
                  std::size_t y_count) {
  const DType dt = storage_of(c.precision);
  const char* math = math_label(c.precision);
  auto g = make_graph(c, bias_in_graph, c.relu);
  const std::string why = prepare(*g, b.cudnn(), {fe::HeurMode_t::A, fe::HeurMode_t::B, fe::HeurMode_t::FALLBACK});
  Call base{call, "*", math, dt, "", 0};
  base.layout = c.nhwc ? "NHWC" : "NCHW";
  if (!why.empty()) {
    b.record(base, "not_supported", "cuDNN graph API: " + why.substr(0, 300));
    return;
  }
  std::unordered_map<int64_t, void*> pack{{kX, x}, {kW, w}, {kY, y}};
  if (bias_in_graph) pack[kB] = bias;
  // the bias as cudnnAddTensor sees it (same layout as the output)
  const int nd = c.nsp + 2;
  Dims bdims(nd, 1), ydims(c.y, c.y + nd);
  bdims[1] = c.w[0];
  std::vector<int64_t> bd64(bdims.begin(), bdims.end()), yd64(ydims.begin(), ydims.end());
  auto to_int = [](const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); };
  std::unique_ptr<TensorDesc> b_desc, y_desc;
  if (add_bias) {
    b_desc = std::make_unique<TensorDesc>(dt, bdims, to_int(strides_for(bd64, c.nhwc)));
    y_desc = std::make_unique<TensorDesc>(dt, ydims, to_int(strides_for(yd64, c.nhwc)));
  }
  const float one = 1.0f;
  std::set<std::string> seen;
  const int64_t n = g->get_execution_plan_count();
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = plan_name(*g, i);
    if (!seen.insert(name).second) continue;
    std::vector<std::string> num, beh;
    for (auto v : g->numerical(i)) num.push_back(numerical_name(v));
    bool rtc = false;
    for (auto v : g->behavior(i)) {
      beh.push_back(behavior_name(v));
      rtc = rtc || v == fe::BehaviorNote_t::RUNTIME_COMPILATION;
    }
    const auto ra = rank_a.find(name), rb = rank_b.find(name);
    Call cl = base;
    cl.algorithm = name;
    cl.details = engine_details_json(name, num, beh, ra == rank_a.end() ? -1 : ra->second,
                                     rb == rank_b.end() ? -1 : rb->second);
    if (rtc) cl.note = "runtime-compiled engine";
    const std::string excluded = excluded_by(g->numerical(i), c.precision);
    if (!excluded.empty()) {
      b.record(cl, "not_supported", "excluded by the math mode: " + excluded);
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto st = g->build_plan_at_index(i);
    cl.build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!st.is_good()) {
      b.record(cl, "not_supported", "plan build: " + st.get_message().substr(0, 300));
      continue;
    }
    int64_t ws = 0;
    if (!g->get_workspace_size_plan_at_index(i, ws).is_good()) ws = 0;
    cl.workspace = static_cast<std::size_t>(ws);
    if (cl.workspace > b.ctx().options().workspace_limit) {
      b.record(cl, "skipped", "workspace of " + std::to_string(ws) + " bytes exceeds the limit of " +
                                  std::to_string(b.ctx().options().workspace_limit));
      continue;
    }
    void* wsp = nullptr;
    try {
      wsp = b.workspace(cl.workspace);
    } catch (const JobError& e) {
      b.record(cl, "failed", e.what());
      continue;
    }
    b.measure(cl, [&, i, wsp](cudaStream_t) -> Status {
      auto s = g->execute_plan_at_index(b.cudnn(), pack, wsp, i);
      if (!s.is_good()) {
        Status r;
        r.ok = false;
        r.message = "cudnn-frontend execute: " + s.get_message();
        return r;
      }
      if (add_bias) BZ_CUDNN(cudnnAddTensor(b.cudnn(), &one, b_desc->d, bias, &one, y_desc->d, y));
      return Status::success();
    }, y, y_count, dt);
  }
}

}  // namespace

void run_conv_engines(Bench& b, const ConvSpec& c, void* x, void* w, void* bias, void* y, std::size_t y_count) {
  // heuristics' top picks and ranks, mode by mode, for the graph as the layer is (fused bias)
  const auto rank_a = heuristics_mode(b, c, c.bias, c.relu, fe::HeurMode_t::A, "cudnn_heuristics_mode_a");
  const auto rank_b = heuristics_mode(b, c, c.bias, c.relu, fe::HeurMode_t::B, "cudnn_heuristics_mode_b");
  time_engines(b, c, c.bias, false, "cudnnBackendExecute", rank_a, rank_b, x, w, bias, y, y_count);
  if (c.bias && !c.relu) {
    // unfused: the conv-only graph's engines + cudnnAddTensor (ranks from the conv-only heuristics)
    std::unordered_map<std::string, int> none;
    time_engines(b, c, false, true, "cudnnBackendExecute+cudnnAddTensor", none, none, x, w, bias, y, y_count);
  }
}

#else  // built without cudnn-frontend headers

void run_conv_engines(Bench& b, const ConvSpec& c, void*, void*, void*, void*, std::size_t) {
  Call cl{"cudnnBackendExecute", "*", math_label(c.precision), storage_of(c.precision), "", 0};
  cl.layout = c.nhwc ? "NHWC" : "NCHW";
  b.record(cl, "skipped", "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

#endif

}  // namespace benanza
