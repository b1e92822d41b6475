// Convolution engine configs through the cuDNN graph API (cudnn-frontend, header-only).
//
// Backward (training): the data gradient (conv_dgrad: dy, w -> dx) and the filter gradient
// (conv_wgrad: x, dy -> dw) are one-operation graphs timed the same way (run_conv_grad_engines); a
// convolution with a bias has its bias gradient computed after each wgrad engine config by
// cudnnConvolutionBackwardBias (call "cudnnBackendExecute(conv_wgrad)+cudnnConvolutionBackwardBias").
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
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "benanza/cudnn_util.hpp"
#include "benanza/engine_details.hpp"
#include "benanza/engines.hpp"

#if BENANZA_WITH_FRONTEND
#include "benanza/graph_timing.hpp"
#endif

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

namespace {
// The call name of a matmul graph: "cudnnBackendExecute(matmul)", "...(matmul+add+relu)"...
std::string matmul_call(const MatmulSpec& m) {
  std::string ops = "matmul";
  if (m.bias) ops += "+add";
  if (m.act == MatmulAct::RELU) ops += "+relu";
  if (m.act == MatmulAct::GELU) ops += "+gelu";
  if (m.act == MatmulAct::GELU_TANH) ops += "+gelu_tanh";
  return "cudnnBackendExecute(" + ops + ")";
}

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
}  // namespace

ConvBiasGrad::ConvBiasGrad(Bench& b, DType dt, int nd, const int* ydims, int k, bool nhwc)
    : h_(b.cudnn()), dt_(dt), own_(dt == DType::BF16) {
  if (!own_) {
    Dims bd(nd, 1), yd(ydims, ydims + nd);
    bd[1] = k;
    auto strides = [nhwc](const Dims& d) {  // packed in the timed tensors' layout
      const std::vector<int64_t> v = strides_for(std::vector<int64_t>(d.begin(), d.end()), nhwc);
      return Dims(v.begin(), v.end());
    };
    y_desc_ = std::make_shared<TensorDesc>(dt, yd, strides(yd));
    b_desc_ = std::make_shared<TensorDesc>(dt, bd, strides(bd));
    return;
  }
  // memory order: NCHW keeps the dims, NHWC moves the channels last
  for (int i = 0; i < nd; ++i) ydims_.push_back(ydims[i]);
  if (nhwc) {
    ydims_.erase(ydims_.begin() + 1);
    ydims_.push_back(ydims[1]);
  }
  bdims_.assign(nd, 1);
  bdims_[nhwc ? nd - 1 : 1] = k;
  ws_bytes_ = plan_reduce_for(ydims_.data(), bdims_.data(), nd, dt).workspace_bytes();
  if (ws_bytes_) ws_ = b.zeros(ws_bytes_);
}

Status ConvBiasGrad::run(const void* dy, void* db, cudaStream_t stream) const {
  if (own_) {
    BZ_CUDA(reduce(dy, db, ydims_.data(), bdims_.data(), static_cast<int>(ydims_.size()), ReduceOp::Sum, dt_, ws_,
                   ws_bytes_, stream));
    return Status::success();
  }
  const float one = 1.0f, zero = 0.0f;
  BZ_CUDNN(cudnnConvolutionBackwardBias(h_, &one, y_desc_->d, dy, &zero, b_desc_->d, db));
  return Status::success();
}

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

namespace {

constexpr int64_t kX = 1, kW = 2, kB = 3, kY = 4, kS = 5, kDY = 6;


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
    case fe::NumericalNote_t::STRICT_NAN_PROP: return "STRICT_NAN_PROP";
    default: return "OTHER";
  }
}

const char* behavior_name(fe::BehaviorNote_t n) {
  switch (n) {
    case fe::BehaviorNote_t::RUNTIME_COMPILATION: return "RUNTIME_COMPILATION";
    case fe::BehaviorNote_t::REQUIRES_FILTER_INT8x32_REORDER: return "REQUIRES_FILTER_INT8x32_REORDER";
    case fe::BehaviorNote_t::REQUIRES_BIAS_INT8x32_REORDER: return "REQUIRES_BIAS_INT8x32_REORDER";
    case fe::BehaviorNote_t::SUPPORTS_CUDA_GRAPH_NATIVE_API: return "SUPPORTS_CUDA_GRAPH_NATIVE_API";
    case fe::BehaviorNote_t::CUBLASLT_DEPENDENCY: return "CUBLASLT_DEPENDENCY";
    default: return "OTHER";
  }
}

std::shared_ptr<NotedGraph> make_graph(const ConvSpec& c, bool bias, bool relu) {
  const fe::DataType_t io = graph_io_type(c.precision);
  auto g = new_graph(c.precision);
  const int nd = c.nsp + 2;
  std::vector<int64_t> xd(c.x, c.x + nd), wd(c.w, c.w + nd);
  auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(
      strides_for(xd, c.nhwc)));
  auto W = g->tensor(fe::graph::Tensor_attributes().set_name("W").set_uid(kW).set_dim(wd).set_stride(
      strides_for(wd, c.nhwc)));
  std::vector<int64_t> pad(c.pad, c.pad + c.nsp), stride(c.stride, c.stride + c.nsp), dil(c.dilation, c.dilation + c.nsp);
  auto Y = g->conv_fprop(X, W, fe::graph::Conv_fprop_attributes().set_padding(pad).set_stride(stride).set_dilation(dil));
  if (c.scale) {
    // BatchNormalization in inference, folded to a per-channel scale (the conv's bias goes into
    // the shift: (conv + b) * s + t = conv * s + (b * s + t))
    std::vector<int64_t> sd(nd, 1);
    sd[1] = c.w[0];
    auto S = g->tensor(fe::graph::Tensor_attributes().set_name("S").set_uid(kS).set_dim(sd).set_stride(
        strides_for(sd, c.nhwc)));
    Y = g->pointwise(Y, S, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL));
  }
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

std::string plan_name(const fe::graph::Graph& g, int64_t i) {
  std::string name;
  if (!g.get_plan_name_at_index(i, name).is_good() || name.empty()) name = "plan" + std::to_string(i);
  return name;
}

}  // namespace

bool time_graph(Bench& b, const GraphTiming& t, std::string* why_out, bool record_failure) {
  const Precision prec = t.precision;
  const DType dt = storage_of(prec);
  const std::string math_s = t.math.empty() ? std::string(math_label(prec)) : t.math;
  const char* math = math_s.c_str();
  const DType out_t = t.y_type.value_or(dt);
  auto g = t.graph;
  auto pack = t.pack;
  const bool picks = t.picks;
  Call base{t.call, t.family + "*", math, dt, t.note, 0};
  base.layout = t.layout;
  fe::error_t st;
  // the heuristics queries and the plan builds are CPU work: the GPU is free for another process
  std::optional<CpuSection> cpu(std::in_place, b.ctx());
  try {
    st = g->validate();
    if (st.is_good()) st = g->build_operation_graph(b.cudnn());
  } catch (const fe::cudnnException& e) {
    st = {fe::error_code_t::GRAPH_NOT_SUPPORTED, e.what()};
  }
  // BENANZA_SM_COUNT: the heuristics asked for engine configs that run on the partition's SMs
  // (cuDNN's SM carveout, CUDNN_ATTR_ENGINEHEUR_SM_COUNT_TARGET, cuDNN 8.9.5+ on Hopper; cudnn-frontend
  // Graph::set_sm_count), as a GPU of that many SMs would get them. Without it the configs are sized
  // for the whole GPU, and cooperative launches (cuDNN's batch-norm engines) fail inside the green
  // context with err 720 (an H200 at 64 and 32 SMs; docs/prediction.md, "SM partitions")
  //
  // Some engines refuse any target but the device's SM count ("target_sm_count !=
  // deviceProp.multiProcessorCount": cuDNN 9.19's SDPA, some matmul and convolution engines on an
  // H100 at 64 and 32 SMs); a green context still reports the whole
  // GPU's SMs, so a graph left without an engine config is asked again without the target: its
  // configs sized for the whole GPU run in the partition in more waves, as they did before the
  // target was set, rather than the layer going unmeasured in the partition only (what a GPU of
  // that many SMs would run has no other stand-in here).
  //
  // A graph that did get configs under the target is asked again without it, and the configs only
  // that second list has are timed beside the first (each list capped by --max-engines on its own):
  // under the target some engines come back without their tuned knobs (cuDNN 9.19's LayerNorm
  // backward engine 5: 0.069 ms at 64 SMs where its tuned config took 0.0104 ms on 132, an H100),
  // and a real GPU of that many SMs would get configs tuned for
  // it; the fastest of both lists stands in for them. Only in a partition (BENANZA_SM_COUNT).
  const int sms = b.ctx().partition().sm_count;
  if (sms) g->set_sm_count(sms);
  // mode by mode on the same graph: configs are appended, so [0, n_a) is A's list, [n_a, n_b) B's
  int64_t n_a = 0, n_b = 0;
  std::string why_a, why_b;
  auto query = [&]() {
    if (!st.is_good()) return;
    try {
      auto sa = g->create_execution_plans({fe::HeurMode_t::A});
      if (!sa.is_good()) why_a = sa.get_message();
      n_a = g->get_execution_plan_count();
      auto sb = g->create_execution_plans({fe::HeurMode_t::B});
      if (!sb.is_good()) why_b = sb.get_message();
      n_b = g->get_execution_plan_count();
      st = g->create_execution_plans({fe::HeurMode_t::FALLBACK});
      if (!st.is_good() && n_b > 0) st = {};  // a failed fallback query leaves A's and B's lists
    } catch (const fe::cudnnException& e) {
      st = {fe::error_code_t::GRAPH_NOT_SUPPORTED, e.what()};
    }
  };
  const fe::error_t built_st = st;
  query();
  bool whole_gpu_configs = false;
  int64_t n_target = 0;  // configs [0, n_target) came with the partition's SM count, the rest without
  if (sms && built_st.is_good() && (!st.is_good() || g->get_execution_plan_count() == 0)) {
    g->set_sm_count(-1);  // cudnn-frontend's "no target" (Context::target_sm_count's default)
    st = built_st;
    why_a.clear();
    why_b.clear();
    query();
    whole_gpu_configs = st.is_good() && g->get_execution_plan_count() > 0;
  } else if (sms && st.is_good()) {
    n_target = g->get_execution_plan_count();
    const int64_t target_a = n_a, target_b = n_b;
    const std::string target_why_a = why_a, target_why_b = why_b;
    g->set_sm_count(-1);
    query();  // appends the whole GPU's configs; the target's lists and their ranks stay as they were
    st = {};
    n_a = target_a;
    n_b = target_b;
    why_a = target_why_a;
    why_b = target_why_b;
  }
  if (whole_gpu_configs) {
    const char* why = "configs sized for the whole GPU (no engine config took the partition's SM count)";
    base.note = base.note.empty() ? std::string(why) : base.note + "; " + why;
  }
  if (!st.is_good() || g->get_execution_plan_count() == 0) {
    const std::string why = st.is_good() ? "no engine config" : st.get_message();
    // a caller that records no failure times another graph for the layer next (a retry): the
    // choices are that graph's (the database keeps a job's first choice of each source)
    if (picks && record_failure) {
      b.choice("cudnn_heuristics_mode_a", 0, "", math, why.substr(0, 60), 0);
      b.choice("cudnn_heuristics_mode_b", 0, "", math, why.substr(0, 60), 0);
    }
    if (why_out) *why_out = why;
    if (record_failure) b.record(base, "not_supported", "cuDNN graph API: " + why.substr(0, 300));
    return false;
  }
  const int64_t n = g->get_execution_plan_count();
  std::vector<std::string> names(n);
  std::unordered_map<std::string, int> rank_a, rank_b;
  for (int64_t i = 0; i < n; ++i) {
    names[i] = plan_name(*g, i);
    if (i < n_a) rank_a.emplace(names[i], static_cast<int>(i));
    else if (i < n_b) rank_b.emplace(names[i], static_cast<int>(i - n_a));
  }
  // build outcome per config name (a name built once is not built again): ok, ms, error
  struct Built {
    bool ok;
    double ms;
    std::string error;
  };
  std::unordered_map<std::string, Built> built;
  auto build = [&](int64_t i) -> const Built& {
    auto it = built.find(names[i]);
    if (it != built.end()) return it->second;
    const bool held = !cpu.has_value();
    if (held) cpu.emplace(b.ctx());
    const auto t0 = std::chrono::steady_clock::now();
    fe::error_t bs;
    try {
      bs = g->build_plan_at_index(i);
    } catch (const fe::cudnnException& e) {
      bs = {fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED, e.what()};
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (held) cpu.reset();
    return built[names[i]] = Built{bs.is_good(), ms, bs.is_good() ? "" : bs.get_message().substr(0, 300)};
  };
  if (picks) {
    const std::pair<const char*, std::pair<int64_t, int64_t>> modes[] = {
        {"cudnn_heuristics_mode_a", {0, n_a}}, {"cudnn_heuristics_mode_b", {n_a, n_b}}};
    for (const auto& [source, range] : modes) {
      bool picked = false;
      for (int64_t i = range.first; i < range.second && !picked; ++i) {
        if (!excluded_by(g->numerical(i), prec).empty() || !build(i).ok) continue;
        int64_t ws = 0;
        if (!g->get_workspace_size_plan_at_index(i, ws).is_good()) ws = 0;
        b.choice(source, 0, names[i], math, "ok", static_cast<std::size_t>(ws));
        picked = true;
      }
      if (!picked) {
        const std::string& why = std::string(source).back() == 'a' ? why_a : why_b;
        b.choice(source, 0, "", math, why.empty() ? "no engine config" : why.substr(0, 60), 0);
      }
    }
  }
  cpu.reset();  // timing from here on: the GPU is this process's again (but for each plan build)
  std::unordered_map<std::string, int64_t> first_index;
  for (int64_t i = 0; i < n; ++i) first_index.emplace(names[i], i);
  const int cap = b.ctx().options().max_engines;
  int tried_target = 0, tried_whole = 0;
  for (int64_t i = 0; i < n; ++i) {
    const std::string& name = names[i];
    if (first_index[name] != i) continue;  // listed by several modes (or both lists): timed once
    const bool whole_list = n_target > 0 && i >= n_target;
    int& tried = whole_list ? tried_whole : tried_target;
    if (cap > 0 && tried >= cap) {
      Call cl = base;
      cl.algorithm = t.family + name;
      b.record(cl, "skipped", "beyond --max-engines " + std::to_string(cap) + " (heuristics order)");
      continue;
    }
    std::vector<std::string> num, beh;
    for (auto v : g->numerical(i)) num.push_back(numerical_name(v));
    bool rtc = false;
    for (auto v : g->behavior(i)) {
      beh.push_back(behavior_name(v));
      rtc = rtc || v == fe::BehaviorNote_t::RUNTIME_COMPILATION;
    }
    const auto ra = rank_a.find(name), rb = rank_b.find(name);
    Call cl = base;
    cl.algorithm = t.family + name;
    if (!t.note.empty()) cl.note = t.note;
    if (whole_list) {
      const char* why = "config sized for the whole GPU (heuristics asked without the partition's SM count)";
      cl.note = cl.note.empty() ? std::string(why) : cl.note + "; " + why;
    }
    cl.details = engine_details_json(name, num, beh, ra == rank_a.end() ? -1 : ra->second,
                                     rb == rank_b.end() ? -1 : rb->second);
    if (rtc) cl.note = cl.note.empty() ? "runtime-compiled engine" : cl.note + "; runtime-compiled engine";
    const std::string excluded = excluded_by(g->numerical(i), prec);
    if (!excluded.empty()) {
      b.record(cl, "not_supported", "excluded by the math mode: " + excluded);
      continue;
    }
    if (b.skip_unwanted(cl)) continue;  // the prior's word, before the plan build
    ++tried;
    const Built& bt = build(i);
    cl.build_ms = bt.ms;
    if (!bt.ok) {
      b.record(cl, "not_supported", "plan build: " + bt.error);
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
    b.measure(cl, [&, i, wsp](cudaStream_t stream) -> Status {
      fe::error_t s;
      try {
        s = g->execute_plan_at_index(b.cudnn(), pack, wsp, i);
      } catch (const fe::cudnnException& e) {
        s = {fe::error_code_t::GRAPH_EXECUTION_FAILED, e.what()};
      }
      if (!s.is_good()) {
        Status r;
        r.ok = false;
        r.message = "cudnn-frontend execute: " + s.get_message();
        return r;
      }
      return t.after ? t.after(stream) : Status::success();
    }, t.y, t.y_count, out_t);
  }
  return true;
}

namespace {

// A convolution's graph (conv [+ scale] [+ bias] [+ relu]) timed; `add_bias`: the conv-only graph
// followed by cudnnAddTensor of the bias.
void time_conv(Bench& b, const ConvSpec& c, bool bias_in_graph, bool add_bias, bool picks, const std::string& call,
               void* x, void* w, void* scale, void* bias, void* y, std::size_t y_count) {
  GraphTiming t;
  t.graph = make_graph(c, bias_in_graph, c.relu);
  t.pack = {{kX, x}, {kW, w}, {kY, y}};
  if (bias_in_graph) t.pack[kB] = bias;
  if (c.scale) t.pack[kS] = scale;
  t.precision = c.precision;
  t.layout = c.nhwc ? "NHWC" : "NCHW";
  t.call = call;
  t.picks = picks;
  t.y = y;
  t.y_count = y_count;
  std::shared_ptr<TensorDesc> b_desc, y_desc;
  if (add_bias) {
    // the bias as cudnnAddTensor sees it (same layout as the output)
    const DType dt = storage_of(c.precision);
    const int nd = c.nsp + 2;
    Dims bdims(nd, 1), ydims(c.y, c.y + nd);
    bdims[1] = c.w[0];
    auto to_int = [](const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); };
    b_desc = std::make_shared<TensorDesc>(dt, bdims, to_int(strides_for({bdims.begin(), bdims.end()}, c.nhwc)));
    y_desc = std::make_shared<TensorDesc>(dt, ydims, to_int(strides_for({ydims.begin(), ydims.end()}, c.nhwc)));
    cudnnHandle_t h = b.cudnn();
    t.after = [h, b_desc, y_desc, bias, y](cudaStream_t) -> Status {
      const float one = 1.0f;
      BZ_CUDNN(cudnnAddTensor(h, &one, b_desc->d, bias, &one, y_desc->d, y));
      return Status::success();
    };
  }
  time_graph(b, t);
}

// The backward graph of a convolution: DX = conv_dgrad(DY, W) or DW = conv_wgrad(DY, X), every
// tensor in the spec's layout (the output's dims and strides given: cuDNN does not infer a
// gradient's dims).
std::shared_ptr<NotedGraph> make_grad_graph(const ConvSpec& c, ConvGrad grad) {
  const fe::DataType_t io = graph_io_type(c.precision);
  auto g = new_graph(c.precision);
  const int nd = c.nsp + 2;
  std::vector<int64_t> xd(c.x, c.x + nd), wd(c.w, c.w + nd), yd(c.y, c.y + nd);
  std::vector<int64_t> pad(c.pad, c.pad + c.nsp), stride(c.stride, c.stride + c.nsp), dil(c.dilation, c.dilation + c.nsp);
  auto DY = g->tensor(fe::graph::Tensor_attributes().set_name("DY").set_uid(kDY).set_dim(yd).set_stride(
      strides_for(yd, c.nhwc)));
  if (grad == ConvGrad::DATA) {
    auto W = g->tensor(fe::graph::Tensor_attributes().set_name("W").set_uid(kW).set_dim(wd).set_stride(
        strides_for(wd, c.nhwc)));
    auto DX = g->conv_dgrad(DY, W, fe::graph::Conv_dgrad_attributes().set_padding(pad).set_stride(stride).set_dilation(dil));
    DX->set_output(true).set_uid(kX).set_data_type(io).set_dim(xd).set_stride(strides_for(xd, c.nhwc));
  } else {
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(xd).set_stride(
        strides_for(xd, c.nhwc)));
    auto DW = g->conv_wgrad(DY, X, fe::graph::Conv_wgrad_attributes().set_padding(pad).set_stride(stride).set_dilation(dil));
    DW->set_output(true).set_uid(kW).set_data_type(io).set_dim(wd).set_stride(strides_for(wd, c.nhwc));
  }
  return g;
}

// Y[b] = act(op(A)[b] (m x k) @ op(B)[b] (k x n) [+ bias]), row-major, as one cuDNN graph.
std::shared_ptr<NotedGraph> make_matmul_graph(const MatmulSpec& m) {
  const fe::DataType_t io = graph_io_type(m.precision);
  auto g = new_graph(m.precision);
  const int64_t B = m.batch, M = m.m, N = m.n, K = m.k;
  // A stored (m, k) row-major, or (k, m) when transposed; B stored (k, n), or (n, k) when transposed
  const std::vector<int64_t> a_stride = m.trans_a ? std::vector<int64_t>{M * K, 1, M} : std::vector<int64_t>{M * K, K, 1};
  const std::vector<int64_t> b_stride = m.trans_b ? std::vector<int64_t>{K * N, 1, K} : std::vector<int64_t>{K * N, N, 1};
  auto A = g->tensor(fe::graph::Tensor_attributes().set_name("A").set_uid(kX).set_dim({B, M, K}).set_stride(a_stride));
  auto W = g->tensor(fe::graph::Tensor_attributes().set_name("B").set_uid(kW).set_dim({B, K, N}).set_stride(b_stride));
  auto Y = g->matmul(A, W, fe::graph::Matmul_attributes().set_compute_data_type(fe::DataType_t::FLOAT));
  if (m.bias) {
    auto C = m.bias == 1
                 ? g->tensor(fe::graph::Tensor_attributes().set_name("C").set_uid(kB).set_dim({1, 1, N}).set_stride(
                       {N, N, 1}))
                 : g->tensor(fe::graph::Tensor_attributes().set_name("C").set_uid(kB).set_dim({1, M, N}).set_stride(
                       {M * N, N, 1}));
    Y = g->pointwise(Y, C, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
  }
  if (m.act != MatmulAct::NONE) {
    const fe::PointwiseMode_t mode = m.act == MatmulAct::RELU   ? fe::PointwiseMode_t::RELU_FWD
                                     : m.act == MatmulAct::GELU ? fe::PointwiseMode_t::GELU_FWD
                                                                : fe::PointwiseMode_t::GELU_APPROX_TANH_FWD;
    Y = g->pointwise(Y, fe::graph::Pointwise_attributes().set_mode(mode));
  }
  Y->set_output(true).set_uid(kY).set_data_type(io).set_dim({B, M, N}).set_stride({M * N, N, 1});
  return g;
}

}  // namespace

void run_conv_engines(Bench& b, const ConvSpec& c, void* x, void* w, void* bias, void* y, std::size_t y_count,
                      void* scale) {
  // the graph as the layer is (bias, scale and activation fused), with the heuristics' top picks
  time_conv(b, c, c.bias, false, true, "cudnnBackendExecute", x, w, scale, bias, y, y_count);
  // unfused: the conv-only graph's engine configs, each followed by cudnnAddTensor
  if (c.bias && !c.relu && !c.scale)
    time_conv(b, c, false, true, false, "cudnnBackendExecute+cudnnAddTensor", x, w, scale, bias, y, y_count);
}

void run_conv_grad_engines(Bench& b, const ConvSpec& c, ConvGrad grad, void* x, void* w, void* dy, void* db) {
  const int nd = c.nsp + 2;
  const Dims xdims(c.x, c.x + nd), wdims(c.w, c.w + nd);
  GraphTiming t;
  t.graph = make_grad_graph(c, grad);
  t.pack = {{kX, x}, {kW, w}, {kDY, dy}};
  t.precision = c.precision;
  t.layout = c.nhwc ? "NHWC" : "NCHW";
  const bool data = grad == ConvGrad::DATA;
  t.call = data ? "cudnnBackendExecute(conv_dgrad)" : "cudnnBackendExecute(conv_wgrad)";
  t.y = data ? x : w;
  t.y_count = numel(data ? xdims : wdims);
  if (!data && c.bias) {
    // the bias gradient db[k] = sum of dy[:, k, ...], as a framework computes it beside wgrad
    auto bg = std::make_shared<ConvBiasGrad>(b, storage_of(c.precision), nd, c.y, c.w[0], c.nhwc);
    t.call += bg->call();
    t.after = [bg, dy, db](cudaStream_t stream) -> Status { return bg->run(dy, db, stream); };
  }
  time_graph(b, t);
}

void run_matmul_engines(Bench& b, const MatmulSpec& m, void* a, void* w, void* c, void* y, std::size_t y_count) {
  if (m.precision == Precision::FP8) return;  // FP8 GEMMs: cuBLASLt (lt.cpp)
  GraphTiming t;
  t.graph = make_matmul_graph(m);
  t.pack = {{kX, a}, {kW, w}, {kY, y}};
  if (m.bias) t.pack[kB] = c;
  t.precision = m.precision;
  t.call = matmul_call(m);
  if (m.bias == 2) t.note = "C added as a full (m x n) tensor";
  t.y = y;
  t.y_count = y_count;
  time_graph(b, t);
}

#else  // built without cudnn-frontend headers

void run_matmul_engines(Bench& b, const MatmulSpec& m, void*, void*, void*, void*, std::size_t) {
  b.record(Call{matmul_call(m), "*", math_label(m.precision), storage_of(m.precision), "", 0},
           "skipped", "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

void run_conv_grad_engines(Bench& b, const ConvSpec& c, ConvGrad grad, void*, void*, void*, void*) {
  std::string call = grad == ConvGrad::DATA ? "cudnnBackendExecute(conv_dgrad)" : "cudnnBackendExecute(conv_wgrad)";
  if (grad == ConvGrad::FILTER && c.bias) call += ConvBiasGrad::call_for(storage_of(c.precision));
  Call cl{call, "*", math_label(c.precision), storage_of(c.precision), "", 0};
  cl.layout = c.nhwc ? "NHWC" : "NCHW";
  b.record(cl, "skipped", "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

void run_conv_engines(Bench& b, const ConvSpec& c, void*, void*, void*, void*, std::size_t, void*) {
  Call cl{"cudnnBackendExecute", "*", math_label(c.precision), storage_of(c.precision), "", 0};
  cl.layout = c.nhwc ? "NHWC" : "NCHW";
  b.record(cl, "skipped", "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

#endif

}  // namespace benanza
