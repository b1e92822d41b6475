// The backward of fused scaled-dot-product attention through the cuDNN graph API (cudnn-frontend,
// header-only; transformer_backward.hpp): one sdpa_backward node, Q, K, V, O, dO and the training
// forward's softmax statistics in, dQ, dK and dV out (cuDNN developer guide, "Scaled Dot Product
// Attention Backward"; cudnn-frontend samples/cpp/sdpa/fp16_bwd.cpp), every engine config timed by
// time_graph (graph_timing.hpp) as transformer_engines.cpp times the forward's sdpa graph. GQA: K and
// V (and dK, dV) with h_kv heads (cudnn-frontend checks h_q % h_k == 0). A translation unit of its own
// so that the forward's graphs keep their compile time.
#include <string>
#include <vector>

#include "benanza/cudnn_util.hpp"
#include "benanza/transformer_backward.hpp"

#if BENANZA_WITH_FRONTEND
#include <cudnn_frontend.h>
#include "benanza/graph_timing.hpp"
// cudnn_frontend::cudnn_dlhandle (dynamic loading of libcudnn) is defined once, in engines.cpp.
#endif

namespace benanza {

#if BENANZA_WITH_FRONTEND
namespace fe = cudnn_frontend;

void run_sdpa_backward_engines(Bench& b, const SdpaBwdSpec& c, void* q, void* k, void* v, void* o, void* dO,
                               void* stats, void* bias, void* dq, void* dk, void* dv) {
  constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4, kDO = 5, kStats = 6, kBias = 7, kDQ = 8, kDK = 9, kDV = 10;
  const long long hk = c.h_kv > 0 ? c.h_kv : c.h;
  auto make_job = [&](const std::vector<int64_t>& bias_dims, const std::string& extra) {
    GraphTiming j;
    j.precision = c.precision;
    j.graph = [c, hk, bias_dims]() {
      auto g = new_graph(c.precision);
      const std::vector<int64_t> qd{c.b, c.h, c.s_q, c.d}, kd{c.b, hk, c.s_kv, c.d}, vd{c.b, hk, c.s_kv, c.d_v},
          od{c.b, c.h, c.s_q, c.d_v}, sd{c.b, c.h, c.s_q, 1};
      const auto st = [&c](int t) { return std::vector<int64_t>(c.strides + 4 * t, c.strides + 4 * t + 4); };
      const auto in = [&g](const char* name, int64_t uid, const std::vector<int64_t>& d, const std::vector<int64_t>& s) {
        return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(d).set_stride(s));
      };
      auto Q = in("Q", kQ, qd, st(0));
      auto K = in("K", kK, kd, st(1));
      auto V = in("V", kV, vd, st(2));
      auto O = in("O", kO, od, st(3));
      auto DO = in("dO", kDO, od, st(3));
      auto S = g->tensor(fe::graph::Tensor_attributes().set_name("Stats").set_uid(kStats).set_dim(sd)
                             .set_stride(graph_packed_strides(sd)).set_data_type(fe::DataType_t::FLOAT));
      auto opts = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(c.scale);
      if (c.mask == SdpaMask::CAUSAL)
        opts.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
      if (c.mask == SdpaMask::CAUSAL_BOTTOM_RIGHT)
        opts.set_diagonal_alignment(fe::DiagonalAlignment_t::BOTTOM_RIGHT).set_diagonal_band_right_bound(0);
      if (c.mask == SdpaMask::BIAS) {
        auto B = g->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kBias).set_dim(bias_dims)
                               .set_stride(graph_packed_strides(bias_dims)).set_data_type(graph_io_type(c.precision)));
        opts.set_bias(B);  // a constant mask: no dBias
      }
      auto [DQ, DK, DV] = g->sdpa_backward(Q, K, V, O, DO, S, opts);
      DQ->set_output(true).set_uid(kDQ).set_dim(qd).set_stride(st(0)).set_data_type(graph_io_type(c.precision));
      DK->set_output(true).set_uid(kDK).set_dim(kd).set_stride(st(1)).set_data_type(graph_io_type(c.precision));
      DV->set_output(true).set_uid(kDV).set_dim(vd).set_stride(st(2)).set_data_type(graph_io_type(c.precision));
      return g;
    }();
    j.pack = {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kDO, dO}, {kStats, stats}, {kDQ, dq}, {kDK, dk}, {kDV, dv}};
    if (c.mask == SdpaMask::BIAS) j.pack[kBias] = bias;
    j.y = dq;
    j.y_count = static_cast<std::size_t>(strided_extent({c.b, c.h, c.s_q, c.d}, c.strides));
    j.math = math_label(c.precision);
    j.note = std::string("cuDNN graph: sdpa_backward (dQ, dK and dV in one call), softmax stats float32") +
             (hk != c.h ? ", GQA (dK, dV summed over the query heads of each K/V head)" : "") +
             (c.mask == SdpaMask::CAUSAL ? ", causal mask" : c.mask == SdpaMask::CAUSAL_BOTTOM_RIGHT ? ", causal mask (bottom-right)" : c.mask == SdpaMask::BIAS ? ", additive bias (no dBias)" : "") +
             extra;
    return j;
  };
  const std::vector<int64_t> bias_dims(c.bias, c.bias + 4);
  std::string why;
  const bool retry = c.mask == SdpaMask::BIAS && c.bias[2] == 1 && c.s_q > 1;
  if (time_graph(b, make_job(bias_dims, ""), &why, !retry) || !retry) return;
  // cuDNN refused the bias broadcast over s_q: time it with the bias expanded to s_q rows
  std::vector<int64_t> full = bias_dims;
  full[2] = c.s_q;
  const std::string reason = why.substr(0, why.find('\n')).substr(0, 120);
  time_graph(b, make_job(full, "; bias broadcast over s_q refused by cuDNN (" + reason +
                                   "): timed with the bias expanded to s_q rows"));
}

#else  // built without cudnn-frontend headers

void run_sdpa_backward_engines(Bench& b, const SdpaBwdSpec& c, void*, void*, void*, void*, void*, void*, void*, void*,
                               void*, void*) {
  b.record(Call{"cudnnBackendExecute", "*", math_label(c.precision), storage_of(c.precision), "", 0}, "skipped",
           "suite built without the cudnn-frontend headers (pip install nvidia-cudnn-frontend)");
}

#endif

}  // namespace benanza
