// Convolution engine configs through the cuDNN graph API (cudnn-frontend, header-only).
//
// For a Conv (+ bias) or Conv + bias + Relu layer config, the operation graph conv_fprop ->
// [pointwise ADD bias] -> [pointwise RELU] is built once per heuristics mode: the top pick of mode A
// and of mode B are recorded as choices (what cuDNN's heuristic would run), then every engine config
// of modes A, B and FALLBACK (deduplicated by plan name: engine global index + knob choices) is
// built and timed with the harness's method. A plan's build (for runtime-compiled engines: their
// compilation) is outside the timing; its duration is stored on its own (build_ms). Math: fp32 excludes
// Tensor Core engines (numerical note TENSOR_CORE) as CUDNN_FMA_MATH does; tf32 allows TF32 Tensor
// Cores; no precision allows engines that down-convert their inputs (DOWN_CONVERT_INPUTS).
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "benanza/cudnn_util.hpp"
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

std::vector<int64_t> packed(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d[i];
  }
  return s;
}

std::shared_ptr<fe::graph::Graph> make_graph(const ConvSpec& c) {
  const fe::DataType_t io = c.precision == Precision::FP16   ? fe::DataType_t::HALF
                            : c.precision == Precision::BF16 ? fe::DataType_t::BFLOAT16
                                                             : fe::DataType_t::FLOAT;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(
      fe::DataType_t::FLOAT);
  const int nd = c.nsp + 2;
  std::vector<int64_t> xd(c.x, c.x + nd), wd(c.w, c.w + nd);
  auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(packed(xd)));
  auto W = g->tensor(fe::graph::Tensor_attributes().set_name("W").set_uid(kW).set_dim(wd).set_stride(packed(wd)));
  std::vector<int64_t> pad(c.pad, c.pad + c.nsp), stride(c.stride, c.stride + c.nsp), dil(c.dilation, c.dilation + c.nsp);
  auto Y = g->conv_fprop(X, W, fe::graph::Conv_fprop_attributes().set_padding(pad).set_stride(stride).set_dilation(dil));
  if (c.bias) {
    std::vector<int64_t> bd(nd, 1);
    bd[1] = c.w[0];
    auto B = g->tensor(fe::graph::Tensor_attributes().set_name("B").set_uid(kB).set_dim(bd).set_stride(packed(bd)));
    Y = g->pointwise(Y, B, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  }
  if (c.relu) Y = g->pointwise(Y, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
  Y->set_output(true).set_uid(kY).set_data_type(io);
  return g;
}

void filter(fe::graph::Graph& g, Precision p) {
  if (p == Precision::FP32)
    g.deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
  else
    g.deselect_numeric_notes({fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
}

// Build the op graph and the plans of `modes`; "" on success, else the reason.
std::string prepare(fe::graph::Graph& g, cudnnHandle_t h, Precision p, const std::vector<fe::HeurMode_t>& modes) {
  auto st = g.validate();
  if (st.is_good()) st = g.build_operation_graph(h);
  if (st.is_good()) st = g.create_execution_plans(modes);
  if (st.is_good()) {
    filter(g, p);
    st = g.check_support(h);
  }
  return st.is_good() ? "" : st.get_message();
}

}  // namespace

void run_conv_engines(Bench& b, const ConvSpec& c, void* x, void* w, void* bias, void* y, std::size_t y_count) {
  const DType dt = storage_of(c.precision);
  const char* math = math_label(c.precision);
  const std::string call = "cudnnBackendExecute";
  // heuristics' top picks, mode by mode
  const std::pair<const char*, fe::HeurMode_t> modes[] = {{"cudnn_heuristics_mode_a", fe::HeurMode_t::A},
                                                          {"cudnn_heuristics_mode_b", fe::HeurMode_t::B}};
  for (const auto& [source, mode] : modes) {
    auto g = make_graph(c);
    const std::string why = prepare(*g, b.cudnn(), c.precision, {mode});
    std::string name;
    if (why.empty() && g->get_execution_plan_count() > 0 && g->get_plan_name_at_index(0, name).is_good())
      b.choice(source, 0, name, math, "ok", 0);
    else
      b.choice(source, 0, "", math, why.empty() ? "no engine config" : why.substr(0, 60), 0);
  }
  // every engine config of A, B and the fallback list
  auto g = make_graph(c);
  const std::string why = prepare(*g, b.cudnn(), c.precision, {fe::HeurMode_t::A, fe::HeurMode_t::B,
                                                                fe::HeurMode_t::FALLBACK});
  if (!why.empty()) {
    b.record(Call{call, "*", math, dt, "", 0}, "not_supported", "cuDNN graph API: " + why.substr(0, 300));
    return;
  }
  std::unordered_map<int64_t, void*> pack{{kX, x}, {kW, w}, {kY, y}};
  if (c.bias) pack[kB] = bias;
  std::set<std::string> seen;
  const int64_t n = g->get_execution_plan_count();
  for (int64_t i = 0; i < n; ++i) {
    std::string name;
    if (!g->get_plan_name_at_index(i, name).is_good() || name.empty()) name = "plan" + std::to_string(i);
    if (!seen.insert(name).second) continue;
    Call cl{call, name, math, dt, "", 0};
    const auto t0 = std::chrono::steady_clock::now();
    auto st = g->build_plan_at_index(i);
    const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<fe::BehaviorNote_t> notes;
    bool rtc = false;
    if (g->get_behavior_notes_for_plan_at_index(i, notes).is_good())
      for (auto note : notes) rtc = rtc || note == fe::BehaviorNote_t::RUNTIME_COMPILATION;
    cl.build_ms = build_ms;
    if (rtc) cl.note = "runtime-compiled engine";
    if (!st.is_good()) {
      b.record(cl, "not_supported", "plan build: " + st.get_message().substr(0, 300));
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
    b.measure(cl, [&, i](cudaStream_t) -> Status {
      auto s = g->execute_plan_at_index(b.cudnn(), pack, wsp, i);
      if (!s.is_good()) {
        Status r;
        r.ok = false;
        r.message = "cudnn-frontend execute: " + s.get_message();
        return r;
      }
      return Status::success();
    }, y, y_count, dt);
  }
}

#else  // built without cudnn-frontend headers

void run_conv_engines(Bench& b, const ConvSpec& c, void*, void*, void*, void*, std::size_t) {
  b.record(Call{"cudnnBackendExecute", "*", math_label(c.precision), storage_of(c.precision), "", 0}, "skipped",
           "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

#endif

}  // namespace benanza
