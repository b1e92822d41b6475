#include "benanza/harness.hpp"

#include <cuda_profiler_api.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace benanza {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string short_where(const char* where) {
  std::string w(where);
  const auto p = w.find('(');
  return p == std::string::npos ? w : w.substr(0, p);
}

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

// After a failed call: clear a non-sticky error, throw FatalError for a sticky one.
void settle(cudaStream_t s) {
  cudaError_t e = cudaStreamSynchronize(s);
  cudaError_t last = cudaGetLastError();
  if (e == cudaSuccess) e = last;
  if (e != cudaSuccess && is_sticky(e))
    throw FatalError(std::string("sticky CUDA error: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

class JsonLine {
 public:
  JsonLine& kv(const char* k, const std::string& v) {
    key(k);
    o_ << '"' << json_escape(v) << '"';
    return *this;
  }
  JsonLine& kv(const char* k, const char* v) { return kv(k, std::string(v ? v : "")); }
  JsonLine& kv(const char* k, double v) {
    key(k);
    if (std::isfinite(v)) {
      char b[64];
      std::snprintf(b, sizeof b, "%.9g", v);
      o_ << b;
    } else {
      o_ << "null";
    }
    return *this;
  }
  JsonLine& kv(const char* k, long long v) {
    key(k);
    o_ << v;
    return *this;
  }
  JsonLine& kv(const char* k, int v) { return kv(k, static_cast<long long>(v)); }
  JsonLine& kv(const char* k, std::size_t v) { return kv(k, static_cast<long long>(v)); }
  JsonLine& raw(const char* k, const std::string& json) {
    key(k);
    o_ << json;
    return *this;
  }
  JsonLine& kv(const char* k, bool v) {
    key(k);
    o_ << (v ? "true" : "false");
    return *this;
  }
  std::string str() const { return "{" + o_.str() + "}"; }

 private:
  void key(const char* k) {
    if (!first_) o_ << ',';
    first_ = false;
    o_ << '"' << k << "\":";
  }
  std::ostringstream o_;
  bool first_ = true;
};

void stats_fields(JsonLine& j, const char* prefix, const Stats& s) {
  std::string p(prefix);
  j.kv((p + "median_ms").c_str(), s.median);
  j.kv((p + "q1_ms").c_str(), s.q1);
  j.kv((p + "q3_ms").c_str(), s.q3);
  j.kv((p + "mean_ms").c_str(), s.mean);
  j.kv((p + "min_ms").c_str(), s.min);
  j.kv((p + "max_ms").c_str(), s.max);
  j.kv((p + "stddev_ms").c_str(), s.stddev);
  j.kv((p + "rse").c_str(), s.rse);
  j.kv((p + "samples").c_str(), s.n);
  j.kv((p + "converged").c_str(), s.converged);
}

JsonLine base_record(const char* type, const JobInfo& job, const Call& c) {
  JsonLine j;
  j.kv("type", type)
      .kv("job", job.id)
      .kv("layer_key", job.layer_key)
      .kv("kind", job.kind)
      .kv("precision", precision_name(job.precision))
      .kv("call", c.call)
      .kv("backend", "suite")  // benanza.kinds.backend.Backend.SUITE: the generated suite's calls
      .kv("algorithm", c.algorithm)
      .kv("math", c.math)
      .kv("dtype", dtype_name(c.dtype))
      .kv("workspace_bytes", c.workspace);
  if (!c.note.empty()) j.kv("note", c.note);
  if (c.build_ms >= 0) j.kv("build_ms", c.build_ms);
  if (c.layout != "NCHW") j.kv("layout", c.layout);
  if (!c.details.empty()) j.raw("details", c.details);
  return j;
}

std::string samples_json(const std::vector<double>& v) {
  std::ostringstream o;
  o << "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%.6g", i ? "," : "", v[i]);
    o << b;
  }
  o << "]";
  return o.str();
}

}  // namespace

const char* dtype_name(DType t) {
  return t == DType::F16 ? "float16" : t == DType::BF16 ? "bfloat16" : t == DType::F8E4M3 ? "float8_e4m3" : "float32";
}

Status Status::cudnn(cudnnStatus_t s, const char* where) {
  Status r;
  r.ok = false;
  r.unsupported = CUDNN_STATUS_CATEGORY(static_cast<int>(s)) == CUDNN_STATUS_NOT_SUPPORTED;
  char detail[256] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  r.message = std::string(cudnnGetErrorString(s)) + " from " + short_where(where);
  if (detail[0]) r.message += ": " + std::string(detail);
  return r;
}

Status Status::cublas(cublasStatus_t s, const char* where) {
  Status r;
  r.ok = false;
  r.unsupported = s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH;
  r.message = std::string(cublasGetStatusName(s)) + " from " + short_where(where);
  return r;
}

Status Status::cuda(cudaError_t e, const char* where) {
  Status r;
  r.ok = false;
  r.message = std::string(cudaGetErrorName(e)) + " from " + short_where(where) + ": " + cudaGetErrorString(e);
  return r;
}

void check(cudnnStatus_t s, const char* where) {
  if (s != CUDNN_STATUS_SUCCESS) throw JobError(Status::cudnn(s, where).message);
}
void check(cublasStatus_t s, const char* where) {
  if (s != CUBLAS_STATUS_SUCCESS) throw JobError(Status::cublas(s, where).message);
}
void check(cudaError_t e, const char* where) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  if (is_sticky(e))
    throw FatalError(std::string("sticky CUDA error: ") + cudaGetErrorName(e) + " from " + short_where(where));
  throw JobError(Status::cuda(e, where).message);
}

void emit_line(const std::string& json) {
  std::fputs(json.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------- Context

Context::Context(const Options& opt) : opt_(opt) {
  std::string err;
  const int n = device_count(&err);
  if (n < 0) throw FatalError("no CUDA device: " + err);
  if (n == 0) throw FatalError("no CUDA device: cudaGetDeviceCount returned 0");
  if (opt.device < 0 || opt.device >= n)
    throw FatalError("no CUDA device " + std::to_string(opt.device) + " (" + std::to_string(n) + " present)");
  cudaError_t e = cudaSetDevice(opt.device);
  if (e != cudaSuccess) throw FatalError(std::string("cannot use CUDA device: ") + cudaGetErrorString(e));
  if (!query_device(opt.device, &dev_, &err)) throw FatalError("cannot query CUDA device: " + err);
  // BENANZA_SM_COUNT: from here on every stream, allocation and handle lives in an SM partition
  partition_ = partition_from_env(opt.device, dev_.sm_count);
  if (partition_.sm_count) {
    dev_.sm_count = partition_.sm_count;
    dev_.name = partition_name(dev_.name, partition_.sm_count, partition_.method);
  }
  e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (e != cudaSuccess) throw FatalError(std::string("cannot create a stream: ") + cudaGetErrorString(e));
  if (partition_.sm_count) partition_.sms_seen = probe_sms(stream_, 64 * partition_.sm_total);
  cudnnStatus_t s = cudnnCreate(&cudnn_);
  if (s != CUDNN_STATUS_SUCCESS) throw FatalError(std::string("cudnnCreate failed: ") + cudnnGetErrorString(s));
  cudnnSetStream(cudnn_, stream_);
  cublasStatus_t b = cublasCreate(&cublas_);
  if (b != CUBLAS_STATUS_SUCCESS) throw FatalError(std::string("cublasCreate failed: ") + cublasGetStatusName(b));
  cublasSetStream(cublas_, stream_);
  // an SM partition: cuBLAS's kernels sized for its SMs (cublasSetSmCountTarget), as cuBLASLt's
  // (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, lt.cpp) and cuDNN's graph engines' (SM carveout,
  // engines.cpp's time_graph): the libraries read the whole GPU's SM count from the device
  if (partition_.sm_count) cublasSetSmCountTarget(cublas_, partition_.sm_count);
  // A user-owned cuBLAS workspace keeps cuBLAS from allocating during graph capture.
  const std::size_t cublas_ws = std::size_t(32) << 20;
  if (cudaMalloc(&cublas_ws_, cublas_ws) == cudaSuccess) cublasSetWorkspace(cublas_, cublas_ws_, cublas_ws);
  flush_bytes_ = static_cast<std::size_t>(std::max<long long>(dev_.l2_cache_bytes, 1 << 20)) * 2;
  if (cudaMalloc(&flush_, flush_bytes_) != cudaSuccess) throw FatalError("cannot allocate the L2 flush buffer");
  watch_ = std::make_unique<ClockWatch>(dev_.pci_bus_id);
  if (const char* lock = std::getenv("BENANZA_GPU_LOCK"); lock && *lock) {
    gpu_lock_fd_ = ::open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (gpu_lock_fd_ < 0) throw FatalError(std::string("cannot open the GPU lock ") + lock);
  }
}

void Context::gpu_acquire() {
  if (gpu_lock_fd_ < 0 || gpu_lock_depth_++ > 0) return;
  cudaStreamSynchronize(stream_);
  const auto t0 = Clock::now();
  while (::flock(gpu_lock_fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
  gpu_wait_ms_ += ms_since(t0);
}

void Context::gpu_release() {
  if (gpu_lock_fd_ < 0 || gpu_lock_depth_ == 0 || --gpu_lock_depth_ > 0) return;
  cudaStreamSynchronize(stream_);  // nothing of ours still runs when another process takes the GPU
  ::flock(gpu_lock_fd_, LOCK_UN);
}

Context::~Context() {
  if (gpu_lock_fd_ >= 0) ::close(gpu_lock_fd_);
  if (flush_) cudaFree(flush_);
  if (cublas_ws_) cudaFree(cublas_ws_);
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::string Context::system_json() const {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  std::ostringstream extra;
  extra << "\"cudnn_version\":" << cudnnGetVersion() << ",\"cublas_version\":" << (major * 10000 + minor * 100 + patch)
        << ",\"nvml\":" << (nvml_available() ? "true" : "false");
  if (partition_.sm_count)
    extra << ",\"sm_partition\":{\"sm_count\":" << partition_.sm_count << ",\"sm_total\":" << partition_.sm_total
          << ",\"method\":\"" << partition_.method << "\",\"alignment\":" << partition_.alignment
          << ",\"sms_seen\":" << partition_.sms_seen
          << (partition_.method == "mps" ? ",\"mps_active_thread_percentage\":\"" + json_escape(partition_.mps_percentage) + "\"" : std::string())
          // the libraries told the partition's SM count (cuDNN's heuristics, cuBLAS, cuBLASLt); records
          // without this key timed configs sized for the whole GPU inside the partition
          << ",\"library_sm_target\":true}";
  return device_json(dev_, extra.str());
}

// ------------------------------------------------------------------------------------------ Bench

Bench::Bench(Context& ctx, const JobInfo& job)
    : ctx_(ctx), job_(job), prior_job_(ctx.options().prior ? ctx.options().prior->job(job.id) : nullptr) {}

bool Bench::wanted(const std::string& call, const std::string& algorithm) const {
  return Prior::wanted(prior_job_, call, algorithm);
}

bool Bench::skip_unwanted(const Call& c) {
  if (wanted(c.call, c.algorithm)) return false;
  record(c, "skipped", ctx_.options().prior->message());
  return true;
}

bool Bench::prior_wants_other(const std::string& call, const std::set<std::string>& algorithms) const {
  return Prior::wants_other(prior_job_, call, algorithms);
}

Bench::~Bench() { free_all(); }

void Bench::free_all() {
  cudaStreamSynchronize(ctx_.stream());
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  events_.clear();
  for (void* p : buffers_) cudaFree(p);
  buffers_.clear();
  if (ws_) cudaFree(ws_);
  ws_ = nullptr;
  ws_bytes_ = 0;
}

void* Bench::random(std::size_t count, DType t, float lo, float hi) {
  void* p = nullptr;
  const std::size_t bytes = std::max<std::size_t>(count * dtype_bytes(t), 16);
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  buffers_.push_back(p);
  static unsigned long long seed = 0x243f6a8885a308d3ULL;
  seed += 0x9e3779b97f4a7c15ULL;
  fill_uniform(p, count, t, seed, lo, hi, ctx_.stream());
  check(cudaGetLastError(), "fill_uniform");
  return p;
}

void* Bench::zeros(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)), "cudaMalloc");
  buffers_.push_back(p);
  check(cudaMemsetAsync(p, 0, std::max<std::size_t>(bytes, 16), ctx_.stream()), "cudaMemsetAsync");
  return p;
}

void* Bench::workspace(std::size_t bytes) {
  if (bytes == 0) return ws_;
  if (bytes <= ws_bytes_) return ws_;
  cudaStreamSynchronize(ctx_.stream());
  if (ws_) cudaFree(ws_);
  ws_ = nullptr;
  ws_bytes_ = 0;
  check(cudaMalloc(&ws_, bytes), "cudaMalloc(workspace)");
  ws_bytes_ = bytes;
  return ws_;
}

void Bench::record(const Call& c, const char* status, const std::string& message) {
  if (c.build_ms > 0) build_total_ms_ += c.build_ms;
  JsonLine j = base_record("measurement", job_, c);
  j.kv("cache", "warm").kv("status", status).kv("message", message);
  emit_line(j.str());
}

void Bench::choice(const char* source, int rank, const std::string& algorithm, const std::string& math,
                   const std::string& status, std::size_t workspace) {
  JsonLine j;
  j.kv("type", "choice")
      .kv("job", job_.id)
      .kv("layer_key", job_.layer_key)
      .kv("kind", job_.kind)
      .kv("precision", precision_name(job_.precision))
      .kv("source", source)
      .kv("rank", rank)
      .kv("algorithm", algorithm)
      .kv("math", math)
      .kv("status", status)
      .kv("workspace_bytes", workspace);
  emit_line(j.str());
}

static double now_ms() {
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

cudaEvent_t Bench::event(int i) {
  while (static_cast<int>(events_.size()) <= i) {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events_.push_back(e);
  }
  return events_[static_cast<std::size_t>(i)];
}

void Bench::sample(const std::function<bool(cudaEvent_t, cudaEvent_t)>& one, const std::function<bool()>& lead,
                   int calls, Sampled& out, int max_n, const std::function<bool(const std::vector<double>&)>& leave,
                   int first_check, const StoppingRule* rule_override) {
  const Options& o = ctx_.options();
  const StoppingRule& rule = rule_override ? *rule_override : o.rule;
  std::vector<double>& samples = out.samples;
  if (out.t0_ms < 0) out.t0_ms = now_ms();
  auto elapsed = [&] { return now_ms() - out.t0_ms; };
  // hard cap: the rule's time cap bounds sampling, with a grace of 3x for the minimum 3 samples
  const double hard_cap_ms = 3.0 * rule.max_time_ms + 1000.0;
  const int batch_max = std::max(1, o.batch_samples);
  while (!rule.done(samples, elapsed()) && elapsed() < hard_cap_ms &&
         (max_n <= 0 || static_cast<int>(samples.size()) < max_n)) {
    // a batch: as many samples as the rule can still want, at most batch_samples (and max_n)
    int k = batch_max;
    if (max_n > 0) k = std::min(k, max_n - static_cast<int>(samples.size()));
    if (static_cast<int>(samples.size()) < rule.min_samples)
      k = std::min(k, std::max(1, rule.min_samples - static_cast<int>(samples.size())) + batch_max / 2);
    ClockWatch* watch = ctx_.clock_watch();
    if (watch) watch->reset();
    if (lead && !lead()) throw JobError("launch failed while sampling");
    for (int i = 0; i < k; ++i)
      if (!one(event(2 * i), event(2 * i + 1))) throw JobError("launch failed while sampling");
    check(cudaEventSynchronize(event(2 * k - 1)), "cudaEventSynchronize");
    // the clock watch (NVML, polled on its own thread): a slowdown during the batch drops all of it
    const ClockWatch::Reading rd = watch ? watch->read() : ClockWatch::Reading{};
    if (rd.ok) {
      out.reasons |= rd.reasons;
      if (rd.reasons & kDropReasons) {
        out.dropped += k;
        continue;
      }
      if (rd.reasons & kPowerCapReason) out.power_capped += k;
      if (rd.sm_clock_mhz > 0) {
        out.clock_min = out.clock_min ? std::min(out.clock_min, rd.sm_clock_mhz) : rd.sm_clock_mhz;
        out.clock_max = std::max(out.clock_max, rd.sm_clock_mhz);
      }
    }
    for (int i = 0; i < k; ++i) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, event(2 * i), event(2 * i + 1)), "cudaEventElapsedTime");
      samples.push_back(static_cast<double>(ms) / calls);
    }
    if (leave && static_cast<int>(samples.size()) >= first_check && leave(samples)) {
      out.left = true;
      break;
    }
  }
  out.stats = summarize(samples, rule.rse_target, rule.min_samples);
}

bool Bench::profile_once(const Call& c, const Launch& launch) {
  const Options& o = ctx_.options();
  if (c.call != o.profile_call || c.algorithm != o.profile_algorithm || c.layout != o.profile_layout ||
      (!o.profile_math.empty() && c.math != o.profile_math))
    return false;
  cudaStream_t s = ctx_.stream();
  Status st = launch(s);  // first call, not profiled: lazy loading, plan set-up
  cudaError_t e = st.ok ? cudaStreamSynchronize(s) : cudaSuccess;
  if (st.ok && e == cudaSuccess) {
    cudaProfilerStart();
    st = launch(s);
    e = cudaStreamSynchronize(s);
    cudaProfilerStop();
  }
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess && is_sticky(e)) throw FatalError(std::string("sticky CUDA error in ") + c.call + ": " + cudaGetErrorName(e));
  const bool ok = st.ok && e == cudaSuccess;
  const std::string msg = !st.ok ? st.message : e != cudaSuccess ? std::string(cudaGetErrorName(e)) : "";
  emit_line(std::string("{\"type\":\"profiled\",\"job\":\"") + json_escape(job_.id) + "\",\"call\":\"" +
            json_escape(c.call) + "\",\"algorithm\":\"" + json_escape(c.algorithm) + "\",\"math\":\"" +
            json_escape(c.math) + "\",\"layout\":\"" + json_escape(c.layout) + "\",\"status\":\"" +
            (ok ? "ok" : "failed") + "\",\"message\":\"" + json_escape(msg) + "\"}");
  return ok;
}

bool Bench::measure(const Call& c, const Launch& launch, const void* out, std::size_t out_count, DType out_t) {
  const Options& o = ctx_.options();
  // the prior's word (Options::prior), before the first call (record() counts its build time)
  if (o.profile_call.empty() && skip_unwanted(c)) return false;
  if (c.build_ms > 0) build_total_ms_ += c.build_ms;
  if (!o.profile_call.empty()) return profile_once(c, launch);
  ++measured_;
  cudaStream_t s = ctx_.stream();
  // the harness's own cost per phase (wall ms), reported with --profile
  double cost[6] = {0, 0, 0, 0, 0, 0};  // first call + check, warm-up, graph capture, screen, warm, cold
  auto lap = Clock::now();
  auto phase = [&](int i) {
    const auto now = Clock::now();
    const double d = std::chrono::duration<double, std::milli>(now - lap).count();
    cost[i] += d;
    cost_[i] += d;
    lap = now;
  };
  std::size_t graph_nodes = 0;  // nodes of the short graph (`reps` calls), reported with --profile
  int graph_reps = 0;
  auto cost_json = [&]() -> std::string {
    if (!o.profile) return "";
    char buf[300];
    std::snprintf(buf, sizeof buf,
                  "{\"first\":%.3f,\"warmup\":%.3f,\"capture\":%.3f,\"screen\":%.3f,\"warm\":%.3f,\"cold\":%.3f,"
                  "\"graph_nodes\":%zu,\"graph_reps\":%d}",
                  cost[0], cost[1], cost[2], cost[3], cost[4], cost[5], graph_nodes, graph_reps);
    return buf;
  };
  // 1. first call: does it run at all, and is its output finite?
  {
    Status st = launch(s);
    if (!st.ok) {
      settle(s);
      record(c, st.unsupported ? "not_supported" : "failed", st.message);
      phase(0);
      return false;
    }
    cudaError_t e = cudaStreamSynchronize(s);
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
      if (is_sticky(e)) throw FatalError(std::string("sticky CUDA error in ") + c.call + ": " + cudaGetErrorName(e));
      record(c, "failed", std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e));
      phase(0);
      return false;
    }
    const long long bad = out ? count_nonfinite(out, out_count, out_t, s) : 0;
    if (bad != 0) {
      record(c, "failed", bad < 0 ? "output check failed" : std::to_string(bad) + " non-finite output values");
      phase(0);
      return false;
    }
  }
  phase(0);
  // 2. warm-up: absorbs first-call costs, estimates the per-call time and the host API time
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  double per_call_ms = 0, host_us = 0, warm_ms = 0;
  int calls = 0;
  const int min_calls = o.race ? o.race_min_warmup_calls : o.min_warmup_calls;
  const auto w0 = Clock::now();
  while (true) {
    // the first batch is the minimum number of calls; then batches double until warmup_ms is spent
    int batch = std::max(1, calls == 0 ? min_calls : std::min(calls, 256));
    check(cudaEventRecord(a, s), "cudaEventRecord");
    const auto h0 = Clock::now();
    for (int i = 0; i < batch; ++i) {
      Status st = launch(s);
      if (!st.ok) {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        settle(s);
        record(c, "failed", "during warm-up: " + st.message);
        phase(1);
        return false;
      }
    }
    const double host_ms = ms_since(h0);
    check(cudaEventRecord(b, s), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    per_call_ms = ms / batch;
    host_us = host_ms * 1000.0 / batch;
    calls += batch;
    warm_ms = ms_since(w0);
    if (warm_ms >= o.warmup_ms && calls >= min_calls) break;
    if (warm_ms >= 20 * o.warmup_ms + 1000 && calls >= 1) break;  // very slow calls
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  // the gross screen (racing): a call far slower than the job's best leaves before any graph is built
  if (o.race && o.race_rule.gross_out(per_call_ms, best_ucb_ms_)) {
    phase(1);
    ++raced_out_;
    const RaceRule& rr = o.race_rule;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "raced out on its warm-up: %.5g ms per call (event-timed mean of %d stream calls) > max(%.3g x, "
                  "%.3g ms +) the upper bound %.5g ms of the job's best so far %.5g ms; no graph captured",
                  per_call_ms, calls, rr.gross_ratio, rr.gross_margin_ms, best_ucb_ms_, best_warm_ms_);
    JsonLine j = base_record("measurement", job_, c);
    j.kv("cache", "warm").kv("status", "raced_out").kv("message", std::string(buf));
    j.kv("estimate_ms", per_call_ms).kv("best_ms", best_warm_ms_).kv("best_ucb_ms", best_ucb_ms_);
    j.kv("method", "stream").kv("reps", 1).kv("host_us", host_us).kv("samples", calls);
    const std::string cj = cost_json();
    if (!cj.empty()) j.raw("cost_ms", cj);
    emit_line(j.str());
    return false;
  }
  // one replay of `reps` calls lasts about replay_ms; a warm sample is `per_sample` replays
  int reps = static_cast<int>(std::ceil(std::min(o.replay_ms, o.sample_ms) / std::max(per_call_ms, 1e-6)));
  reps = std::max(1, std::min(reps, o.max_reps));
  const int per_sample = std::max(1, static_cast<int>(std::ceil(o.sample_ms / std::max(per_call_ms * reps, 1e-6))));

  phase(1);
  // 3. warm samples: a CUDA graph of `reps` calls, or `reps` calls on the stream
  std::string method = "stream";
  // a CUDA graph of `n` calls, instantiated and run once; nullptr where capture fails
  // instantiate `graph` and run it once; nullptr where that fails
  auto instantiate = [&](cudaGraph_t graph) -> cudaGraphExec_t {
    cudaGraphExec_t g = nullptr;
    bool ok = graph != nullptr && cudaGraphInstantiate(&g, graph, 0) == cudaSuccess;
    if (ok && (cudaGraphLaunch(g, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess)) ok = false;
    if (!ok) {
      if (g) cudaGraphExecDestroy(g);
      g = nullptr;
      settle(s);
    }
    return g;
  };
  // the short graph: `reps` calls captured from the stream (kept to build the long one from)
  cudaGraph_t short_graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (o.graphs) {
    bool ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess;
    for (int i = 0; ok && i < reps; ++i) ok = launch(s).ok;
    const cudaError_t e = cudaStreamEndCapture(s, &short_graph);
    if (!ok || e != cudaSuccess) {
      if (short_graph) cudaGraphDestroy(short_graph);
      short_graph = nullptr;
      settle(s);
    }
    if (o.profile && short_graph) {
      cudaGraphGetNodes(short_graph, nullptr, &graph_nodes);
      graph_reps = reps;
    }
    exec = instantiate(short_graph);
    if (exec) method = "cuda_graph";
  }
  auto replay = [&]() {
    if (exec) return cudaGraphLaunch(exec, s) == cudaSuccess;
    for (int i = 0; i < reps; ++i)
      if (!launch(s).ok) return false;
    return true;
  };
  // Full warm samples are one replay of a long graph of `reps * per_sample` calls (as before racing),
  // not `per_sample` replays of the short one: the gap between two graph launches would count once
  // per replay and read small calls high (resnet50 batch 1 fp32 on an H200: LBL 1.36-1.37 ms with
  // short replays against 1.341-1.345 ms with one long one). Captured only for contenders; where
  // that capture fails, the short replays stay.
  cudaGraphExec_t exec_long = nullptr;
  const int long_calls = reps * per_sample;
  auto long_replay = [&]() {
    if (exec_long) return cudaGraphLaunch(exec_long, s) == cudaSuccess;
    for (int i = 0; i < per_sample; ++i)
      if (!replay()) return false;
    return true;
  };
  auto full_sample = [&](cudaEvent_t ea, cudaEvent_t eb) {
    if (cudaEventRecord(ea, s) != cudaSuccess) return false;
    if (!long_replay()) return false;
    return cudaEventRecord(eb, s) == cudaSuccess;
  };
  // the long graph: `per_sample` copies of the short one as child-graph nodes in a chain (no new
  // capture: cuDNN's and cuBLAS's host paths do not run again)
  auto take_long = [&]() {
    if (!exec || !short_graph || per_sample <= 1) return;
    cudaGraph_t g = nullptr;
    if (cudaGraphCreate(&g, 0) != cudaSuccess) return;
    cudaGraphNode_t prev = nullptr;
    bool ok = true;
    for (int i = 0; ok && i < per_sample; ++i) {
      cudaGraphNode_t node = nullptr;
      ok = cudaGraphAddChildGraphNode(&node, g, prev ? &prev : nullptr, prev ? 1 : 0, short_graph) == cudaSuccess;
      prev = node;
    }
    if (ok) exec_long = instantiate(g);
    cudaGraphDestroy(g);
    if (!ok) settle(s);
  };
  auto drop_graphs = [&]() {
    if (exec_long) cudaGraphExecDestroy(exec_long);
    if (exec) cudaGraphExecDestroy(exec);
    if (short_graph) cudaGraphDestroy(short_graph);
    exec_long = exec = nullptr;
    short_graph = nullptr;
  };
  // a warm sample of `n` replays between two events
  auto warm_of = [&](int n) {
    return [&, n](cudaEvent_t ea, cudaEvent_t eb) {
      if (cudaEventRecord(ea, s) != cudaSuccess) return false;
      for (int i = 0; i < n; ++i)
        if (!replay()) return false;
      return cudaEventRecord(eb, s) == cudaSuccess;
    };
  };
  // legacy screening (racing off): one timed replay (graph) or the warm-up's estimate (stream)
  if (!o.race && o.screen > 0 && std::isfinite(best_warm_ms_)) {
    double est = per_call_ms;
    if (exec) {
      cudaEvent_t ea, eb;
      check(cudaEventCreate(&ea), "cudaEventCreate");
      check(cudaEventCreate(&eb), "cudaEventCreate");
      float ms = 0;
      const bool ok = cudaEventRecord(ea, s) == cudaSuccess && cudaGraphLaunch(exec, s) == cudaSuccess &&
                      cudaEventRecord(eb, s) == cudaSuccess && cudaEventSynchronize(eb) == cudaSuccess &&
                      cudaEventElapsedTime(&ms, ea, eb) == cudaSuccess;
      cudaEventDestroy(ea);
      cudaEventDestroy(eb);
      if (ok) est = static_cast<double>(ms) / reps;
    }
    if (est > o.screen * best_warm_ms_) {
      drop_graphs();
      phase(2);
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "screened: %.4f ms per call (%s, %d calls) > %.2f x the job's best so far (%.4f ms); "
                    "not sampled further",
                    est, exec ? "one graph replay" : "warm-up", exec ? reps : calls, o.screen, best_warm_ms_);
      JsonLine j = base_record("measurement", job_, c);
      j.kv("cache", "warm").kv("status", "screened").kv("message", std::string(buf)).kv("estimate_ms", est);
      j.kv("method", method).kv("reps", reps).kv("host_us", host_us);
      const std::string cj = cost_json();
      if (!cj.empty()) j.raw("cost_ms", cj);
      emit_line(j.str());
      return false;
    }
  }
  phase(2);
  // 4. the race: a screen of a few samples against the job's best so far, then the stopping rule,
  // leaving as soon as the rule (stats.hpp, RaceRule) shows the call cannot be the job's best
  Sampled warm, screen;
  const RaceRule& rr = o.race_rule;
  auto leave = [&](const std::vector<double>& v) { return rr.out(v, best_ucb_ms_); };
  bool screen_only = false;  // raced out on the screen's samples (one replay each)
  try {
    if (o.race) {
      // the screen: one replay per sample, one batch, held to the best's screen (like with like).
      // Its untimed lead replay keeps the GPU from waiting for the host inside the batch; a replay
      // of `lead_free_ms` or more outlasts the host's enqueueing of the whole batch (a graph launch
      // and two event records take a few us each), so a slow candidate's screen has no lead: one
      // call fewer for every slow candidate that leaves the race.
      const bool lead = per_call_ms * reps < o.lead_free_ms;
      sample(warm_of(1), lead ? std::function<bool()>(replay) : nullptr, reps, screen, rr.screen_samples);
      if (screen.stats.n > 0 && rr.out(screen.samples, best_screen_ucb_ms_)) {
        phase(3);
        warm = screen;
        warm.left = true;
        screen_only = true;
      } else {  // a contender: its screen to the bound a later screen is held to, then full samples
        sample(warm_of(1), replay, reps, screen, rr.contender_screen_samples);
        phase(3);
        take_long();
        phase(2);
        sample(full_sample, long_replay, long_calls, warm, 0,
               std::isfinite(best_ucb_ms_) ? std::function<bool(const std::vector<double>&)>(leave) : nullptr,
               rr.screen_samples);
      }
    } else {
      take_long();
      phase(2);
      sample(full_sample, long_replay, long_calls, warm);
    }
  } catch (...) {
    drop_graphs();
    throw;
  }
  drop_graphs();
  phase(4);
  if (warm.left) {
    ++raced_out_;
    emit_raced_out(c, method, screen_only ? reps : reps * per_sample, host_us, warm, cost_json(), screen_only);
    return false;
  }
  const bool valid = warm.stats.n > 0 && std::isfinite(warm.stats.median);
  if (valid && warm.stats.median < best_warm_ms_) {
    std::vector<double> sorted(warm.samples);
    std::sort(sorted.begin(), sorted.end());
    best_ucb_ms_ = median_ucb_sorted(sorted, rr.alpha);
    sorted = screen.samples;
    std::sort(sorted.begin(), sorted.end());
    best_screen_ucb_ms_ = sorted.empty() ? INFINITY : median_ucb_sorted(sorted, rr.alpha);
  }
  // 5. cold samples: one call after flushing L2; for every call, or for the job's contenders
  bool cold = o.cold == Options::Cold::All;
  if (o.cold == Options::Cold::Contenders && valid)
    cold = warm.stats.median <= (1.0 + o.contenders_within) * std::min(best_warm_ms_, warm.stats.median);
  // without cold samples the warm record carries the cost; with them, the cold one does
  if (!cold) {
    emit_sampled("warm", method, reps * per_sample, host_us, warm_ms, calls, warm, c, cost_json());
    return valid;
  }
  emit_sampled("warm", method, reps * per_sample, host_us, warm_ms, calls, warm, c);
  int flip = 0;
  Sampled cold_r;
  StoppingRule cold_rule = o.rule;
  if (o.cold_max_time_ms > 0) cold_rule.max_time_ms = std::min(cold_rule.max_time_ms, o.cold_max_time_ms);
  sample(
      [&](cudaEvent_t ea, cudaEvent_t eb) {
        if (cudaMemsetAsync(ctx_.flush_buffer(), (++flip) & 0xff, ctx_.flush_bytes(), s) != cudaSuccess)
          return false;
        if (cudaEventRecord(ea, s) != cudaSuccess) return false;
        if (!launch(s).ok) return false;
        return cudaEventRecord(eb, s) == cudaSuccess;
      },
      nullptr, 1, cold_r, 0, nullptr, 0, &cold_rule);
  phase(5);
  emit_sampled("cold", "stream_l2_flushed", 1, host_us, 0.0, 0, cold_r, c, cost_json());
  return valid;
}

void Bench::emit_raced_out(const Call& c, const std::string& method, int reps, double host_us, const Sampled& r,
                           const std::string& cost, bool screen) {
  const RaceRule& rr = ctx_.options().race_rule;
  std::vector<double> sorted(r.samples);
  std::sort(sorted.begin(), sorted.end());
  const double lcb = median_lcb_sorted(sorted, rr.alpha), ucb = median_ucb_sorted(sorted, rr.alpha);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "raced out: %.5g ms per call (median of %d %s samples, %.0f %% bounds [%.5g, %.5g] ms) > the job's "
                "best so far %.5g ms (upper bound %.5g ms in like samples); not sampled further",
                r.stats.median, r.stats.n, screen ? "screen" : "warm", 100.0 * (1.0 - 2.0 * rr.alpha), lcb, ucb,
                best_warm_ms_, screen ? best_screen_ucb_ms_ : best_ucb_ms_);
  JsonLine j = base_record("measurement", job_, c);
  j.kv("cache", "warm").kv("status", "raced_out").kv("message", std::string(buf));
  j.kv("estimate_ms", r.stats.median).kv("lcb_ms", lcb).kv("ucb_ms", ucb).kv("best_ms", best_warm_ms_);
  j.kv("best_ucb_ms", screen ? best_screen_ucb_ms_ : best_ucb_ms_);
  j.kv("method", method).kv("reps", reps).kv("host_us", host_us).kv("samples", r.stats.n);
  j.kv("dropped", r.dropped).kv("power_capped", r.power_capped).kv("clock_reasons", static_cast<long long>(r.reasons));
  j.kv("sm_clock_min_mhz", r.clock_min).kv("sm_clock_max_mhz", r.clock_max);
  if (!cost.empty()) j.raw("cost_ms", cost);
  if (ctx_.options().dump_samples) j.raw("samples_ms", samples_json(r.samples));
  emit_line(j.str());
}

std::string Bench::cost_json(double job_wall_ms, double gpu_wait_ms) const {
  char buf[440];
  std::snprintf(buf, sizeof buf,
                "{\"wall\":%.3f,\"first\":%.3f,\"warmup\":%.3f,\"capture\":%.3f,\"screen\":%.3f,\"warm\":%.3f,"
                "\"cold\":%.3f,\"build\":%.3f,\"gpu_wait\":%.3f,\"measured\":%d,\"raced_out\":%d}",
                job_wall_ms, cost_[0], cost_[1], cost_[2], cost_[3], cost_[4], cost_[5], build_total_ms_, gpu_wait_ms,
                measured_, raced_out_);
  return buf;
}

void Bench::emit_sampled(const char* cache, const std::string& method, int reps, double host_us, double warm_ms,
                         int warm_calls, const Sampled& r, const Call& c, const std::string& cost) {
  JsonLine j = base_record("measurement", job_, c);
  const bool valid = r.stats.n > 0 && std::isfinite(r.stats.median);
  if (valid && std::string(cache) == "warm") best_warm_ms_ = std::min(best_warm_ms_, r.stats.median);
  j.kv("cache", cache).kv("status", valid ? "ok" : "failed");
  if (!valid) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "no valid sample: %d dropped for clock slowdown (NVML reasons 0x%llx)", r.dropped,
                  r.reasons);
    j.kv("message", std::string(buf));
  }
  j.kv("method", method).kv("reps", reps).kv("host_us", host_us);
  if (warm_calls) j.kv("warmup_ms", warm_ms).kv("warmup_calls", warm_calls);
  stats_fields(j, "", r.stats);
  j.kv("dropped", r.dropped).kv("power_capped", r.power_capped).kv("clock_reasons", static_cast<long long>(r.reasons));
  j.kv("sm_clock_min_mhz", r.clock_min).kv("sm_clock_max_mhz", r.clock_max);
  if (!cost.empty()) j.raw("cost_ms", cost);
  if (ctx_.options().dump_samples) j.raw("samples_ms", samples_json(r.samples));
  emit_line(j.str());
}

// --------------------------------------------------------------------------------------- registry

std::vector<JobEntry>& registry() {
  static std::vector<JobEntry> r;
  return r;
}

bool register_job(const JobInfo& info, std::function<void(Bench&)> run) {
  registry().push_back(JobEntry{info, std::move(run)});
  return true;
}

}  // namespace benanza
