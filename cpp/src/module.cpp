// benanza._native: the in-process part of benanza (pybind11).
//
//   device_count()                      -> int (raises RuntimeError "no CUDA device: ..." on failure)
//   query_devices()                     -> list[dict]: GPU name, SM count, clocks, memory, driver, runtime
//   library_versions(cudnn, cublas)     -> dict: cudnnGetVersion / cublasGetProperty of the given .so files
//   summarize(samples_ms, rse, min_n)   -> dict: the harness's statistics (stats.hpp)
//   should_stop(samples_ms, elapsed_ms, rse, min_n, max_n, max_time_ms) -> bool: its stopping rule
//   engine_details(plan_name, numerical, behavior, rank_a, rank_b) -> str: an engine config's details JSON
//   plan_strided_copy(dims, src_strides, dst_strides, elem_bytes, src_addr, dst_addr) -> dict: what the
//                                       harness's strided-copy kernel launches for a view (strided_copy.hpp)
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "benanza/device.hpp"
#include "benanza/engine_details.hpp"
#include "benanza/stats.hpp"

#include <algorithm>
#include "benanza/strided_copy.hpp"

namespace py = pybind11;

namespace {

py::dict device_dict(const benanza::DeviceInfo& d) {
  py::dict o;
  o["index"] = d.index;
  o["gpu_name"] = d.name;
  o["uuid"] = d.uuid;
  o["pci_bus_id"] = d.pci_bus_id;
  o["compute_capability"] = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
  o["sm_count"] = d.sm_count;
  o["memory_bytes"] = d.total_memory_bytes;
  o["l2_cache_bytes"] = d.l2_cache_bytes;
  o["memory_bus_width_bits"] = d.memory_bus_width_bits;
  o["max_sm_clock_mhz"] = d.max_sm_clock_mhz;
  o["max_mem_clock_mhz"] = d.max_mem_clock_mhz;
  o["current_sm_clock_mhz"] = d.current_sm_clock_mhz;
  o["driver_cuda_version"] = d.driver_cuda_version;
  o["runtime_version"] = d.runtime_version;
  o["driver_version"] = d.driver_version;
  return o;
}

int count_or_throw() {
  std::string err;
  const int n = benanza::device_count(&err);
  if (n < 0) throw std::runtime_error("no CUDA device: " + err);
  return n;
}

py::dict stats_dict(const benanza::Stats& s) {
  py::dict o;
  o["n"] = s.n;
  o["median"] = s.median;
  o["q1"] = s.q1;
  o["q3"] = s.q3;
  o["mean"] = s.mean;
  o["min"] = s.min;
  o["max"] = s.max;
  o["stddev"] = s.stddev;
  o["rse"] = s.rse;
  o["converged"] = s.converged;
  return o;
}

template <typename Fn>
Fn symbol(void* h, const char* name) {
  return reinterpret_cast<Fn>(h ? dlsym(h, name) : nullptr);
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "benanza native helpers: CUDA device query and the timing harness's statistics";
  m.def(
      "plan_strided_copy",
      [](const std::vector<long long>& dims, const std::vector<long long>& src_strides,
         const std::vector<long long>& dst_strides, std::size_t elem_bytes, std::uintptr_t src, std::uintptr_t dst) {
        if (dims.size() > 8 || src_strides.size() != dims.size() || dst_strides.size() != dims.size())
          throw std::invalid_argument("plan_strided_copy: dims and both strides need the same length, at most 8");
        benanza::StridedView v{static_cast<int>(dims.size()), {}, {}, {}};
        for (std::size_t d = 0; d < dims.size(); ++d) {
          v.dims[d] = dims[d];
          v.src_strides[d] = src_strides[d];
          v.dst_strides[d] = dst_strides[d];
        }
        const benanza::StridedPlan p = benanza::plan_strided_copy(v, elem_bytes, src, dst);
        py::dict o;
        o["kind"] = p.kind == benanza::StridedPlan::kTiled ? "tiled" : "elementwise";
        o["dims"] = std::vector<long long>(p.dims, p.dims + p.nd);
        o["src_strides"] = std::vector<long long>(p.src_strides, p.src_strides + p.nd);
        o["dst_strides"] = std::vector<long long>(p.dst_strides, p.dst_strides + p.nd);
        o["unit_bytes"] = p.unit_bytes;
        o["tile_dim"] = p.tile_dim;
        o["index32"] = p.index32;
        return o;
      },
      py::arg("dims"), py::arg("src_strides"), py::arg("dst_strides"), py::arg("elem_bytes"), py::arg("src") = 0,
      py::arg("dst") = 0,
      "The plan of the harness's strided-copy kernel for one view (dims and strides in elements, byte "
      "addresses for alignment): kind ('elementwise' or 'tiled'), the coalesced dims and strides in units of "
      "unit_bytes, tile_dim, index32.");
  m.def("engine_details", &benanza::engine_details_json, py::arg("plan_name"), py::arg("numerical") = std::vector<std::string>{},
        py::arg("behavior") = std::vector<std::string>{}, py::arg("rank_a") = -1, py::arg("rank_b") = -1,
        "The details JSON of a cuDNN engine config from its cudnn-frontend plan name (as the suites store it).");
  m.def("device_count", &count_or_throw, "Number of CUDA devices; RuntimeError 'no CUDA device: ...' if none usable.");
  m.def(
      "query_devices",
      []() {
        py::list out;
        const int n = count_or_throw();
        for (int i = 0; i < n; ++i) {
          benanza::DeviceInfo d;
          std::string err;
          if (!benanza::query_device(i, &d, &err)) throw std::runtime_error("cannot query CUDA device: " + err);
          out.append(device_dict(d));
        }
        return out;
      },
      "Describe every CUDA device (name, SMs, clocks in MHz, memory in bytes, driver/runtime versions).");
  m.def(
      "library_versions",
      [](const std::string& cudnn_path, const std::string& cublas_path) {
        py::dict o;
        void* h = dlopen(cudnn_path.c_str(), RTLD_NOW | RTLD_LOCAL);
        auto cudnn_version = symbol<std::size_t (*)()>(h, "cudnnGetVersion");
        o["cudnn_version"] = cudnn_version ? static_cast<long long>(cudnn_version()) : 0LL;
        void* b = dlopen(cublas_path.c_str(), RTLD_NOW | RTLD_LOCAL);
        auto prop = symbol<int (*)(int, int*)>(b, "cublasGetProperty");
        int major = 0, minor = 0, patch = 0;
        if (prop) {
          prop(0, &major);
          prop(1, &minor);
          prop(2, &patch);
        }
        o["cublas_version"] = major * 10000 + minor * 100 + patch;
        return o;
      },
      py::arg("cudnn_library"), py::arg("cublas_library"),
      "cuDNN and cuBLAS versions (as integers, e.g. 91900 and 130100) read from the given shared libraries.");
  m.def(
      "summarize",
      [](std::vector<double> samples, double rse_target, int min_samples) {
        return stats_dict(benanza::summarize(std::move(samples), rse_target, min_samples));
      },
      py::arg("samples_ms"), py::arg("rse_target") = 0.01, py::arg("min_samples") = 10,
      "Median, quartiles, mean, min, max, stddev (ms), relative standard error of the median and convergence.");
  m.def(
      "should_stop",
      [](const std::vector<double>& samples, double elapsed_ms, double rse_target, int min_samples, int max_samples,
         double max_time_ms) {
        benanza::StoppingRule r;
        r.rse_target = rse_target;
        r.min_samples = min_samples;
        r.max_samples = max_samples;
        r.max_time_ms = max_time_ms;
        return r.done(samples, elapsed_ms);
      },
      py::arg("samples_ms"), py::arg("elapsed_ms"), py::arg("rse_target") = 0.01, py::arg("min_samples") = 10,
      py::arg("max_samples") = 2000, py::arg("max_time_ms") = 1000.0,
      "The harness's adaptive stopping rule applied to a recorded sample series.");
  m.def(
      "median_bounds",
      [](std::vector<double> samples, double alpha) {
        std::sort(samples.begin(), samples.end());
        return py::make_tuple(benanza::median_lcb_sorted(samples, alpha), benanza::median_ucb_sorted(samples, alpha));
      },
      py::arg("samples_ms"), py::arg("alpha") = 0.025,
      "(lower, upper) order-statistic confidence bounds of the median at one-sided level alpha (ms; -inf/inf "
      "when there are too few samples): the race's bounds (stats.hpp).");
  m.def("median_bound_rank", &benanza::median_bound_rank, py::arg("n"), py::arg("alpha") = 0.025,
        "The 1-based rank of the order statistic bounding the median from below (0: none).");
  m.def(
      "race_out",
      [](const std::vector<double>& samples, double best_ucb_ms, double alpha) {
        benanza::RaceRule r;
        r.alpha = alpha;
        return r.out(samples, best_ucb_ms);
      },
      py::arg("samples_ms"), py::arg("best_ucb_ms"), py::arg("alpha") = 0.025,
      "Whether a candidate with these samples leaves the race against a best whose median's upper bound is "
      "best_ucb_ms (the harness's RaceRule, stats.hpp).");
  m.def(
      "race_gross_out",
      [](double estimate_ms, double best_ucb_ms) {
        benanza::RaceRule r;
        return r.gross_out(estimate_ms, best_ucb_ms);
      },
      py::arg("estimate_ms"), py::arg("best_ucb_ms"),
      "Whether a candidate whose warm-up reads estimate_ms per call leaves the race before its graph is captured "
      "(the harness's RaceRule::gross_out, stats.hpp).");
  m.def("race_defaults", [] {
    benanza::RaceRule r;
    py::dict d;
    d["screen_samples"] = r.screen_samples;
    d["alpha"] = r.alpha;
    d["check_every"] = r.check_every;
    d["gross_ratio"] = r.gross_ratio;
    d["gross_margin_ms"] = r.gross_margin_ms;
    return d;
  }, "The harness's RaceRule defaults: screen_samples, alpha, check_every, gross_ratio, gross_margin_ms.");
}
