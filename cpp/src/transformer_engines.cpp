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
#include "benanza/paged_kv.hpp"
#include "benanza/transformer.hpp"

#if BENANZA_WITH_FRONTEND
#include "benanza/graph_timing.hpp"
#include "benanza/norm_graph.hpp"
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

std::string first_line(const std::string& s, std::size_t max = 300) {
  std::string out = s.substr(0, s.find('\n'));
  return out.size() > max ? out.substr(0, max) : out;
}

constexpr int64_t kX = 1, kScale = 2, kBias = 3, kY = 4, kMean = 5, kInvVar = 6;
constexpr int64_t kQ = 11, kK = 12, kV = 13, kO = 14, kAttnBias = 15, kStats = 16;
constexpr int64_t kSeqQ = 17, kSeqKv = 18, kPageK = 19, kPageV = 20;
// FP8 attention's scaling tensors (float32 [1, 1, 1, 1]): the descales of Q, K, V and S (the
// probabilities), the scales of S and O, and the amax outputs of S and O
constexpr int64_t kDescaleQ = 21, kDescaleK = 22, kDescaleV = 23, kDescaleS = 24, kScaleS = 25, kScaleO = 26;
constexpr int64_t kAmaxS = 27, kAmaxO = 28;
// the attention sink's logits, float32 [1, h, 1, 1] (cudnn-frontend SDPA_attributes::set_sink_token)
constexpr int64_t kSink = 29;

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
    case UnaryOp::CEIL: mode = fe::PointwiseMode_t::CEIL; return true;
    case UnaryOp::COS: mode = fe::PointwiseMode_t::COS; return true;
    case UnaryOp::FLOOR: mode = fe::PointwiseMode_t::FLOOR; return true;
    case UnaryOp::SIN: mode = fe::PointwiseMode_t::SIN; return true;
    case UnaryOp::TAN: mode = fe::PointwiseMode_t::TAN; return true;
    case UnaryOp::SOFTPLUS: mode = fe::PointwiseMode_t::SOFTPLUS_FWD; return true;  // beta 1: log(1 + e^x)
    case UnaryOp::SWISH: mode = fe::PointwiseMode_t::SWISH_FWD; return true;        // x * sigmoid(beta x)
    case UnaryOp::NOT: mode = fe::PointwiseMode_t::LOGICAL_NOT; return true;
    default: return false;
  }
}

bool binary_mode(PointwiseOp op, fe::PointwiseMode_t& mode) {
  switch (op) {
    case PointwiseOp::Div: mode = fe::PointwiseMode_t::DIV; return true;
    case PointwiseOp::Pow: mode = fe::PointwiseMode_t::POW; return true;
    case PointwiseOp::FMod: mode = fe::PointwiseMode_t::MOD; return true;
    case PointwiseOp::Equal: mode = fe::PointwiseMode_t::CMP_EQ; return true;
    case PointwiseOp::Less: mode = fe::PointwiseMode_t::CMP_LT; return true;
    case PointwiseOp::LessOrEqual: mode = fe::PointwiseMode_t::CMP_LE; return true;
    case PointwiseOp::Greater: mode = fe::PointwiseMode_t::CMP_GT; return true;
    case PointwiseOp::GreaterOrEqual: mode = fe::PointwiseMode_t::CMP_GE; return true;
    case PointwiseOp::And: mode = fe::PointwiseMode_t::LOGICAL_AND; return true;
    case PointwiseOp::Or: mode = fe::PointwiseMode_t::LOGICAL_OR; return true;
    default: return false;
  }
}

// The graph data type of an element type (bool: INT8, one byte per element as ONNX stores it)
bool graph_type(ElemType t, fe::DataType_t& out) {
  switch (t) {
    case ElemType::F32: out = fe::DataType_t::FLOAT; return true;
    case ElemType::F16: out = fe::DataType_t::HALF; return true;
    case ElemType::BF16: out = fe::DataType_t::BFLOAT16; return true;
    case ElemType::I8: out = fe::DataType_t::INT8; return true;
    case ElemType::U8: out = fe::DataType_t::UINT8; return true;
    case ElemType::I32: out = fe::DataType_t::INT32; return true;
    case ElemType::I64: out = fe::DataType_t::INT64; return true;
    default: return false;
  }
}

std::vector<int64_t> dims4(const long long* d, int nd) {
  std::vector<int64_t> out(d, d + nd);
  while (out.size() < 4) out.push_back(1);
  return out;
}

}  // namespace

void run_layernorm_engines(Bench& b, const NormSpec& c, void* x, void* scale, void* bias, void* y, void* mean,
                           void* inv_variance) {
  const Precision p = c.precision;
  GraphTiming j;
  j.precision = p;
  j.graph = [c]() {
    auto g = new_graph(c.precision);
    auto X = norm_rows(*g, c, "X", kX);
    auto S = norm_param(*g, c, "scale", kScale);
    auto B = norm_param(*g, c, "bias", kBias);
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

bool has_pointwise_mode(UnaryOp op) {
  fe::PointwiseMode_t mode;
  return pointwise_mode(op, mode);
}

bool has_binary_pointwise_mode(PointwiseOp op) {
  fe::PointwiseMode_t mode;
  return binary_mode(op, mode);
}

void run_pointwise_engines(Bench& b, const PointwiseSpec& c, void* x, void* y) {
  fe::PointwiseMode_t mode;
  fe::DataType_t xt, yt;
  if (!pointwise_mode(c.op, mode)) return;
  const bool typed = graph_type(c.x_type, xt) && graph_type(c.y_type, yt);
  GraphTiming j;
  j.precision = c.precision;
  j.graph = [c, mode, xt, yt]() {
    auto g = new_graph(c.precision);
    const std::vector<int64_t> d{c.rows, c.cols, 1, 1}, s{c.cols, 1, c.cols, c.cols};
    auto X = g->tensor(fe::graph::Tensor_attributes().set_name("X").set_uid(kX).set_dim(d).set_stride(s)
                           .set_data_type(xt));
    auto attrs = fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    if (c.op == UnaryOp::SWISH) attrs.set_swish_beta(c.alpha);
    if (c.op == UnaryOp::SOFTPLUS) attrs.set_softplus_beta(1.0f);
    std::shared_ptr<fe::graph::Tensor_attributes> Y;
    if (c.op == UnaryOp::POW)
      Y = g->pointwise(X, g->tensor(fe::graph::Tensor_attributes(c.exponent)), attrs);
    else
      Y = g->pointwise(X, attrs);
    Y->set_output(true).set_uid(kY).set_data_type(yt).set_dim(d).set_stride(s);
    return g;
  }();
  j.pack = {{kX, x}, {kY, y}};
  j.y = is_float(c.y_type) ? y : nullptr;  // a bool output has nothing to check for NaN
  j.y_count = static_cast<std::size_t>(c.rows * c.cols);
  j.math = "none";
  j.note = std::string("cuDNN graph: pointwise ") + unary_name(c.op) +
           (c.x_type == ElemType::I8 ? "; bool as INT8 (one byte per element, as ONNX stores it)" : "");
  if (!typed) {
    b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(c.precision), j.note, 0}, "not_supported",
             "no cuDNN graph data type for this element type");
    return;
  }
  time_graph(b, j);
}

void run_binary_pointwise_engines(Bench& b, const BinaryGraphSpec& c, void* a, void* bb, void* y) {
  fe::PointwiseMode_t mode;
  fe::DataType_t it, ot;
  if (!binary_mode(c.op, mode)) return;
  const std::string note = std::string("cuDNN graph: pointwise, broadcasting by dims of extent 1") +
                           (c.out == ElemType::I8 || c.in == ElemType::I8
                                ? "; bool as INT8 (one byte per element, as ONNX stores it; cuDNN's BOOLEAN is bit-packed)"
                                : "");
  if (c.nd < 1 || c.nd > 8 || !graph_type(c.in, it) || !graph_type(c.out, ot)) {
    b.record(Call{"cudnnBackendExecute", "*", "none", storage_of(c.precision), note, 0}, "not_supported",
             "no cuDNN graph data type for this element type");
    return;
  }
  std::vector<int64_t> ad = dims4(c.a, c.nd), bd = dims4(c.b, c.nd), yd(ad.size());
  for (std::size_t i = 0; i < ad.size(); ++i) yd[i] = ad[i] > bd[i] ? ad[i] : bd[i];
  GraphTiming j;
  j.precision = c.precision;
  j.graph = [c, mode, it, ot, ad, bd, yd]() {
    auto g = new_graph(c.precision);
    auto A = g->tensor(fe::graph::Tensor_attributes().set_name("A").set_uid(kX).set_dim(ad).set_stride(graph_packed_strides(ad))
                           .set_data_type(it));
    auto B = g->tensor(fe::graph::Tensor_attributes().set_name("B").set_uid(kScale).set_dim(bd).set_stride(graph_packed_strides(bd))
                           .set_data_type(it));
    auto attrs = fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    auto Y = g->pointwise(A, B, attrs);
    Y->set_output(true).set_uid(kY).set_data_type(ot).set_dim(yd).set_stride(graph_packed_strides(yd));
    return g;
  }();
  j.pack = {{kX, a}, {kScale, bb}, {kY, y}};
  std::size_t n = 1;
  for (int64_t v : yd) n *= static_cast<std::size_t>(v);
  j.y = is_float(c.out) ? y : nullptr;
  j.y_count = n;
  j.math = "none";
  j.note = note;
  time_graph(b, j);
}

namespace {

// The spec's mask on the sdpa node's options, as the layer's (the contiguous graph's and the paged
// one's alike): the causal diagonal (top-left or bottom-right alignment, right bound 0); a sliding
// window of c.window keys, the query's own included (left bound: key j kept when j + window > i
// after the alignment's shift; cudnn-frontend set_diagonal_band_left_bound, alias
// set_sliding_window_length); an attention sink (c.sink): one learned logit per head that joins
// each row's softmax normaliser and is dropped after it (set_sink_token, float32 [1, h, 1, 1];
// cuDNN 9.13+, refused by the frontend for s_q == 1 and recorded as cuDNN answers).
void set_sdpa_mask(const SdpaSpec& c, fe::graph::Graph& g, fe::graph::SDPA_attributes& opts) {
  if (c.mask == SdpaMask::CAUSAL)
    opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
  if (c.mask == SdpaMask::CAUSAL_BOTTOM_RIGHT)
    opts.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT).set_diagonal_band_right_bound(0);
  if (c.window > 0) opts.set_diagonal_band_left_bound(static_cast<int>(c.window));
  if (c.sink)
    opts.set_sink_token(g.tensor(fe::graph::Tensor_attributes().set_name("sink").set_uid(kSink)
                                     .set_dim({1, c.h, 1, 1}).set_stride({c.h, 1, 1, 1})
                                     .set_data_type(fe::DataType_t::FLOAT)));
  if (c.softcap > 0.0f) {
    // cap * tanh(s / cap) on the scores, a pass-by-value scalar (cudnn-frontend's Softcap modifier)
    auto softcap = std::make_shared<fe::graph::attn::score_modifiers::Softcap>();
    const float cap = c.softcap;
    opts.set_score_mod([softcap, cap](std::shared_ptr<fe::graph::Graph> graph,
                                      std::shared_ptr<fe::graph::Tensor_attributes> score) {
      return softcap->forward(graph, score, graph->tensor(cap));
    });
  }
}

// What the mask adds to a record's note: the sliding window and the sink.
std::string sdpa_mask_note(const SdpaSpec& c) {
  return (c.window > 0 ? ", sliding window of " + std::to_string(c.window) + " keys (left bound)" : std::string()) +
         (c.sink ? ", attention sink (one logit per head, float32)" : "") +
         (c.softcap > 0.0f ? ", logit soft-cap " + std::to_string(c.softcap) + " (Softcap score modifier)" : "");
}

// The sdpa node's outputs, as the layer's (the contiguous graph's and the paged one's alike): O
// [b, h, s_q, d_v] with the spec's output strides (its fourth stride set) in the precision's I/O type;
// with c.stats, the softmax statistics [b, h, s_q, 1], packed, float32.
void set_sdpa_outputs(const SdpaSpec& c, const std::shared_ptr<fe::graph::Tensor_attributes>& O,
                      const std::shared_ptr<fe::graph::Tensor_attributes>& stats) {
  if (c.stats)
    stats->set_output(true).set_uid(kStats).set_dim({c.b, c.h, c.s_q, 1}).set_stride({c.h * c.s_q, c.s_q, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  O->set_output(true).set_uid(kO).set_dim({c.b, c.h, c.s_q, c.d_v})
      .set_stride(std::vector<int64_t>(c.strides + 12, c.strides + 16)).set_data_type(graph_io_type(c.precision));
}

// The decode attention over a paged KV cache (cudnn-frontend SDPA_attributes::
// set_paged_attention_k_table / _v_table / _max_seq_len_kv, cuDNN 9.5+; the frontend's sample
// samples/cpp/sdpa/fp16_fwd_with_paged_caches.cpp): K and V in containers [num_pages, h_kv, page, d]
// (num_pages = b * ceil(s_kv / page)), both read through one int32 page table [b, 1, pages_per_seq, 1]
// holding a shuffled assignment of the pages (paged_kv_table), sequence lengths s_q and s_kv per
// sequence with cuDNN's padding mask. Q and O as the layer's. Every engine config is timed
// (time_graph), algorithm "paged_kv<page>:<engine config>", layout "PAGED_KV": a what-if beside the
// layer's own contiguous cache, never its minimum (benanza.kinds.base.WHATIF_LAYOUTS); the
// heuristics' picks stay the contiguous graph's. spec.paged_skip set: one skipped record with it.
void run_sdpa_paged_engines(Bench& b, const SdpaSpec& c, void* q, void* o, void* stats_out, void* sink) {
  const Precision p = c.precision;
  const long long hk = c.h_kv > 0 ? c.h_kv : c.h, page = c.kv_page;
  const long long pps = paged_kv_pages_per_seq(c.s_kv, page), pages = c.b * pps;
  const std::string family = "paged_kv" + std::to_string(page) + ":";
  const std::string label = "cuDNN SDPA, paged KV cache (page " + std::to_string(page) + ")";
  if (c.paged_skip && *c.paged_skip) {
    Call cl{"cudnnBackendExecute", family + "*", math_label(p), storage_of(p), label, 0};
    cl.layout = "PAGED_KV";
    b.record(cl, "skipped", c.paged_skip);
    return;
  }
  const DType dt = storage_of(p);
  const auto sz = [](long long v) { return static_cast<std::size_t>(v); };
  void* kc = b.random(sz(pages * hk * page * c.d), dt);
  void* vc = b.random(sz(pages * hk * page * c.d_v), dt);
  const std::vector<std::int32_t> table = paged_kv_table(c.b, pps);
  std::vector<std::int32_t> lens(sz(2 * c.b));
  for (long long i = 0; i < c.b; ++i) {
    lens[sz(i)] = static_cast<std::int32_t>(c.s_q);
    lens[sz(c.b + i)] = static_cast<std::int32_t>(c.s_kv);
  }
  auto* pt = static_cast<std::int32_t*>(b.zeros(table.size() * sizeof(std::int32_t)));
  auto* sl = static_cast<std::int32_t*>(b.zeros(lens.size() * sizeof(std::int32_t)));
  if (cudaMemcpy(pt, table.data(), table.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(sl, lens.data(), lens.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice) != cudaSuccess)
    throw JobError("cudaMemcpy of the paged KV cache's page table and sequence lengths failed");
  GraphTiming j;
  j.precision = p;
  j.graph = [c, hk, page, pps, pages]() {
    auto g = new_graph(c.precision);
    const std::vector<int64_t> qd{c.b, c.h, c.s_q, c.d};
    const std::vector<int64_t> kd{pages, hk, page, c.d}, vd{pages, hk, page, c.d_v};
    const auto st = [&c](int t) { return std::vector<int64_t>(c.strides + 4 * t, c.strides + 4 * t + 4); };
    const auto i32 = [&g](const char* name, int64_t uid, std::vector<int64_t> dims) {
      return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims)
                           .set_stride(graph_packed_strides(dims)).set_data_type(fe::DataType_t::INT32));
    };
    auto Q = g->tensor(fe::graph::Tensor_attributes().set_name("Q").set_uid(kQ).set_dim(qd).set_stride(st(0)));
    auto K = g->tensor(fe::graph::Tensor_attributes().set_name("container_K").set_uid(kK).set_dim(kd)
                           .set_stride(graph_packed_strides(kd)));
    auto V = g->tensor(fe::graph::Tensor_attributes().set_name("container_V").set_uid(kV).set_dim(vd)
                           .set_stride(graph_packed_strides(vd)));
    auto opts = fe::graph::SDPA_attributes().set_name("sdpa_paged").set_generate_stats(c.stats).set_attn_scale(c.scale);
    set_sdpa_mask(c, *g, opts);
    opts.set_padding_mask(true)
        .set_seq_len_q(i32("seq_len_q", kSeqQ, {c.b, 1, 1, 1}))
        .set_seq_len_kv(i32("seq_len_kv", kSeqKv, {c.b, 1, 1, 1}))
        .set_paged_attention_k_table(i32("page_table_k", kPageK, {c.b, 1, pps, 1}))
        .set_paged_attention_v_table(i32("page_table_v", kPageV, {c.b, 1, pps, 1}))
        .set_paged_attention_max_seq_len_kv(static_cast<int>(c.s_kv));
    auto [O, stats] = g->sdpa(Q, K, V, opts);
    set_sdpa_outputs(c, O, stats);
    return g;
  }();
  j.pack = {{kQ, q}, {kK, kc}, {kV, vc}, {kO, o}, {kSeqQ, sl}, {kSeqKv, sl + c.b}, {kPageK, pt}, {kPageV, pt}};
  if (c.stats) j.pack[kStats] = stats_out;
  if (c.sink) j.pack[kSink] = sink;
  j.y = o;
  j.y_count = static_cast<std::size_t>(strided_extent({c.b, c.h, c.s_q, c.d_v}, c.strides + 12));
  j.math = math_label(p);
  j.layout = "PAGED_KV";
  j.family = family;
  j.picks = false;
  j.note = label + ": " + std::to_string(pages) + " pages [num_pages, h_kv, page, d], page table [b, 1, " +
           std::to_string(pps) + ", 1] int32 (one shuffled assignment for K and V), padding mask with s_kv " +
           std::to_string(c.s_kv) + " per sequence" + (hk != c.h ? ", GQA" : "") +
           (c.mask == SdpaMask::CAUSAL_BOTTOM_RIGHT ? ", causal mask (bottom-right)" : "") + sdpa_mask_note(c) +
           "; a what-if layout of the cache, not the layer's";
  time_graph(b, j);
}

}  // namespace

void run_sdpa_engines(Bench& b, const SdpaSpec& c, void* q, void* k, void* v, void* o, void* bias, void* stats_out,
                      void* sink) {
  const Precision p = c.precision;
  const long long hk = c.h_kv > 0 ? c.h_kv : c.h;
  const bool fp8 = p == Precision::FP8;
  // FP8 (cudnn-frontend Graph::sdpa_fp8, the FP8 E4M3 forward of cuDNN's fused attention, Hopper+):
  // Q, K, V and O in E4M3, per-tensor descales and scales of 1 (any value times the same), amax out
  std::unordered_map<int64_t, void*> scalars;
  if (fp8) {
    for (int64_t uid : {kDescaleQ, kDescaleK, kDescaleV, kDescaleS, kScaleS, kScaleO})
      scalars[uid] = b.random(1, DType::F32, 1.0f, 1.0f);
    for (int64_t uid : {kAmaxS, kAmaxO}) scalars[uid] = b.zeros(sizeof(float));
  }
  auto make_job = [&](const std::vector<int64_t>& bias_dims, const std::string& extra) {
    GraphTiming j;
    j.precision = p;
    j.graph = [c, hk, bias_dims, fp8]() {
      auto g = new_graph(c.precision);
      const std::vector<int64_t> qd{c.b, c.h, c.s_q, c.d}, kd{c.b, hk, c.s_kv, c.d}, vd{c.b, hk, c.s_kv, c.d_v};
      const auto st = [&c](int t) { return std::vector<int64_t>(c.strides + 4 * t, c.strides + 4 * t + 4); };
      auto Q = g->tensor(fe::graph::Tensor_attributes().set_name("Q").set_uid(kQ).set_dim(qd).set_stride(st(0)));
      auto K = g->tensor(fe::graph::Tensor_attributes().set_name("K").set_uid(kK).set_dim(kd).set_stride(st(1)));
      auto V = g->tensor(fe::graph::Tensor_attributes().set_name("V").set_uid(kV).set_dim(vd).set_stride(st(2)));
      auto opts = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(c.stats).set_attn_scale(c.scale);
      set_sdpa_mask(c, *g, opts);
      if (c.mask == SdpaMask::BIAS) {
        auto B = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kAttnBias).set_dim(bias_dims)
                               .set_stride(graph_packed_strides(bias_dims)).set_data_type(graph_io_type(c.precision)));
        opts.set_bias(B);
      }
      if (fp8) {
        const auto scalar = [&g](const char* name, int64_t uid) {
          return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({1, 1, 1, 1})
                               .set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT));
        };
        auto [O, stats, amax_s, amax_o] =
            g->sdpa_fp8(Q, K, V, scalar("descale_q", kDescaleQ), scalar("descale_k", kDescaleK),
                        scalar("descale_v", kDescaleV), scalar("descale_s", kDescaleS), scalar("scale_s", kScaleS),
                        scalar("scale_o", kScaleO), opts);
        set_sdpa_outputs(c, O, stats);
        for (auto& [t, uid] : {std::pair{amax_s, kAmaxS}, std::pair{amax_o, kAmaxO}})
          t->set_output(true).set_uid(uid).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1})
              .set_data_type(fe::DataType_t::FLOAT);
        return g;
      }
      auto [O, stats] = g->sdpa(Q, K, V, opts);
      set_sdpa_outputs(c, O, stats);
      return g;
    }();
    j.pack = {{kQ, q}, {kK, k}, {kV, v}, {kO, o}};
    for (const auto& [uid, ptr] : scalars) j.pack[uid] = ptr;
    if (c.mask == SdpaMask::BIAS) j.pack[kAttnBias] = bias;
    if (c.stats) j.pack[kStats] = stats_out;
    if (c.sink) j.pack[kSink] = sink;
    j.y = o;
    j.y_count = static_cast<std::size_t>(strided_extent({c.b, c.h, c.s_q, c.d_v}, c.strides + 12));
    j.math = math_label(p);
    j.note = std::string(c.stats ? "cuDNN graph: sdpa (fused attention, training: softmax stats written, float32)"
                                 : "cuDNN graph: sdpa (fused attention, inference)") +
             (fp8 ? ", FP8 E4M3 Q/K/V/O (sdpa_fp8, per-tensor scales)" : "") +
             (hk != c.h ? ", GQA (K/V with fewer heads)" : "") +
             (c.mask == SdpaMask::CAUSAL ? ", causal mask" : c.mask == SdpaMask::CAUSAL_BOTTOM_RIGHT ? ", causal mask (bottom-right)" : c.mask == SdpaMask::BIAS ? ", additive bias" : "") + sdpa_mask_note(c) + extra;
    return j;
  };
  const std::vector<int64_t> bias_dims(c.bias, c.bias + 4);
  std::string why;
  const bool retry = c.mask == SdpaMask::BIAS && c.bias[2] == 1 && c.s_q > 1;
  if (!time_graph(b, make_job(bias_dims, ""), &why, !retry) && retry) {
    // cuDNN refused the bias broadcast over s_q: time it with the bias expanded to s_q rows
    std::vector<int64_t> full = bias_dims;
    full[2] = c.s_q;
    time_graph(b, make_job(full, "; bias broadcast over s_q refused by cuDNN (" + first_line(why, 120) +
                                     "): timed with the bias expanded to s_q rows"));
  }
  if (c.kv_page > 0) run_sdpa_paged_engines(b, c, q, o, stats_out, sink);
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
bool has_pointwise_mode(UnaryOp op) {
  switch (op) {
    case UnaryOp::GELU: case UnaryOp::GELU_TANH: case UnaryOp::ERF: case UnaryOp::EXP: case UnaryOp::LOG:
    case UnaryOp::SQRT: case UnaryOp::RECIPROCAL: case UnaryOp::NEG: case UnaryOp::ABS: case UnaryOp::POW:
    case UnaryOp::CEIL: case UnaryOp::COS: case UnaryOp::FLOOR: case UnaryOp::SIN: case UnaryOp::TAN:
    case UnaryOp::SOFTPLUS: case UnaryOp::SWISH: case UnaryOp::NOT: return true;
    default: return false;
  }
}
bool has_binary_pointwise_mode(PointwiseOp op) {
  switch (op) {
    case PointwiseOp::Div: case PointwiseOp::Pow: case PointwiseOp::FMod: case PointwiseOp::Equal:
    case PointwiseOp::Less: case PointwiseOp::LessOrEqual: case PointwiseOp::Greater:
    case PointwiseOp::GreaterOrEqual: case PointwiseOp::And: case PointwiseOp::Or: return true;
    default: return false;
  }
}
void run_pointwise_engines(Bench& b, const PointwiseSpec& c, void*, void*) {
  if (has_pointwise_mode(c.op)) skipped(b, c.precision, "none");
}
void run_binary_pointwise_engines(Bench& b, const BinaryGraphSpec& c, void*, void*, void*) {
  if (has_binary_pointwise_mode(c.op)) skipped(b, c.precision, "none");
}
void run_sdpa_engines(Bench& b, const SdpaSpec& c, void*, void*, void*, void*, void*, void*, void*) {
  skipped(b, c.precision, math_label(c.precision));
  if (c.kv_page <= 0) return;
  Call cl{"cudnnBackendExecute", "paged_kv" + std::to_string(c.kv_page) + ":*", math_label(c.precision),
          storage_of(c.precision), "", 0};
  cl.layout = "PAGED_KV";
  b.record(cl, "skipped", c.paged_skip && *c.paged_skip ? c.paged_skip
                                                        : "suite built without the cudnn-frontend headers");
}

#endif

}  // namespace benanza
