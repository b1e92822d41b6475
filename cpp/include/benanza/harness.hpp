// The benanza timing harness: what every generated benchmark calls.
//
// A generated suite is a set of *jobs* (one layer config in one precision); each job times one or
// more library calls (an algorithm, an engine...) and emits one JSON line per measurement on stdout.
// The method (docs/design.md, "How GPU work is timed"; docs/timing.md; nvbench's cold/batch measurements):
//   * inputs filled with uniform random values, outputs checked once for NaN/Inf;
//   * warm-up until `warmup_ms` and `min_warmup_calls` are reached (absorbs handle creation, lazy
//     module loading, runtime compilation) and estimates the per-call time;
//   * warm samples: `reps` back-to-back calls captured in a CUDA graph and replayed between two
//     CUDA events (kernel time without launch gaps); when capture is refused the calls are issued
//     back-to-back on the stream instead, and the method says so;
//   * cold samples: one call after a write of 2x the L2 size (caches flushed);
//   * adaptive stopping (stats.hpp) on the relative standard error of the median;
//   * the SM clock is read with NVML after each sample; samples taken while the GPU reports a
//     thermal or hardware slowdown are dropped and counted; samples under the SW power cap (the
//     steady state of heavy kernels) are kept and counted (device.hpp, kDropReasons);
//   * host API time per call (enqueue cost) measured during warm-up.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "benanza/reduce_plan.hpp"
#include "benanza/strided_copy.hpp"

#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "benanza/device.hpp"
#include "benanza/partition.hpp"
#include "benanza/precision.hpp"
#include "benanza/prior.hpp"
#include "benanza/stats.hpp"

namespace benanza {

// Precision, DType, storage_of, precision_name: rendered from benanza/kinds/precision.py
inline std::size_t dtype_bytes(DType t) { return t == DType::F32 ? 4 : t == DType::F8E4M3 ? 1 : 2; }
inline cudnnDataType_t cudnn_dtype(DType t) {
  return t == DType::F16    ? CUDNN_DATA_HALF
         : t == DType::BF16 ? CUDNN_DATA_BFLOAT16
         : t == DType::F8E4M3 ? CUDNN_DATA_FP8_E4M3
                              : CUDNN_DATA_FLOAT;
}
inline cudaDataType_t cuda_dtype(DType t) {
  return t == DType::F16 ? CUDA_R_16F : t == DType::BF16 ? CUDA_R_16BF : t == DType::F8E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_32F;
}
const char* dtype_name(DType t);

// Element types a kernel may read or write besides the precision's float type: Cast sources,
// indices, masks, bool (I8 holding 0 or 1: ONNX's 1-byte bool) and the integer tensors of
// elementwise ops. The first seven keep their values (generated code names them).
enum class ElemType : int { F32, F16, BF16, F64, I64, I32, I8, U8, I16, U16, U32, U64 };
inline ElemType elem_of(DType t) {
  return t == DType::F16 ? ElemType::F16 : t == DType::BF16 ? ElemType::BF16 : ElemType::F32;
}
inline std::size_t elem_bytes(ElemType t) {
  switch (t) {
    case ElemType::F64:
    case ElemType::I64:
    case ElemType::U64: return 8;
    case ElemType::F32:
    case ElemType::I32:
    case ElemType::U32: return 4;
    case ElemType::F16:
    case ElemType::BF16:
    case ElemType::I16:
    case ElemType::U16: return 2;
    case ElemType::I8:
    case ElemType::U8: return 1;
  }
  return 4;
}
inline bool is_float(ElemType t) { return t == ElemType::F32 || t == ElemType::F16 || t == ElemType::BF16; }

// What a job is: ids and labels come from the generator as escaped string literals.
struct JobInfo {
  const char* id;           // job id (hex, from the layer key and precision)
  const char* layer_key;    // canonical layer config key
  const char* kind;         // layer kind (Conv, Pooling, ...)
  const char* node;         // one ONNX node name with this config (untrusted text, escaped literal)
  Precision precision;
  const char* layout = "NCHW";  // tensor layout the job times (NHWC: convolution engine configs only)
};

struct Options {
  int device = 0;
  double warmup_ms = 0.25;        // after the first call (which absorbs lazy loading and handle set-up)
  // The fewest warm-up calls after the first: 3 with racing off (--exhaustive, the policy before
  // racing); 1 when racing, where a call that already lasts `warmup_ms` stops after one (the graph's
  // instantiation run and the screen's untimed lead replay warm it again before any timed sample), so
  // a slow candidate that leaves the race costs two calls fewer.
  int min_warmup_calls = 3;
  int race_min_warmup_calls = 1;
  double sample_ms = 0.25;        // target duration of one warm sample
  // One CUDA graph replay (`reps` calls) lasts about `replay_ms`; a warm sample is the fewest whole
  // replays that last `sample_ms`, a race-screen sample is one replay.
  double replay_ms = 0.05;
  int max_reps = 1000;
  // Samples enqueued back to back between one host synchronisation (events between them; a warm
  // batch is led by one untimed replay so the GPU never waits for the host inside it).
  int batch_samples = 8;
  // A race screen whose replay lasts this long (ms, by the warm-up's estimate) has no lead replay.
  double lead_free_ms = 0.2;
  StoppingRule rule;              // rse target, min/max samples, time cap (per measurement)
  // Cold (L2-flushed) samples: for every valid call (All), for none, or (Contenders, the default)
  // for the calls whose warm median is within `contenders_within` of the job's best warm median at
  // the time they are measured: the best only falls as the job goes on, so every call within that
  // margin of the job's final best has its cold figure (the chosen implementation always does).
  enum class Cold { None, Contenders, All };
  Cold cold = Cold::Contenders;
  double contenders_within = 0.05;
  // The time cap (ms) of one cold measurement; <= 0: the stopping rule's own (rule.max_time_ms).
  // Cold samples (a 2x-L2 write before each call) seldom reach the rse target: of googlenet's 1,044
  // jobs (H100, default policy; docs/timing.md) 30 cold measurements ran to the
  // 1 s cap, 40.5 s of the run stage. 200 ms still keeps hundreds of samples of a 0.1 ms call.
  double cold_max_time_ms = 0;
  bool graphs = true;             // capture warm samples in CUDA graphs
  std::size_t workspace_limit = std::size_t(4) << 30;  // bytes
  bool dump_samples = false;      // add every kept sample to the records (samples_ms)
  bool profile = false;           // add the harness's own wall time per phase to the records (cost_ms)
  // Racing (stats.hpp, RaceRule): every call is screened with a few warm samples and leaves the race
  // ("raced_out", with its screen time and bounds) as soon as its median's lower confidence bound is
  // above the upper bound of the job's best so far; the others are sampled to the stopping rule.
  // Off (--no-race): every call is sampled to the stopping rule, unless `screen` applies.
  bool race = true;
  RaceRule race_rule;
  // Screening, with racing off only: a call whose first graph replay takes more than `screen` x the
  // fastest valid warm median of its job so far is recorded as "screened" with that time and not
  // sampled further. 0 turns it off (with racing off: every call sampled to convergence).
  double screen = 0.0;
  // Engine configs (cuDNN graph API, heuristics A then B then the fallback list), cuBLASLt configs
  // (the heuristic's list) and legacy convolution algorithms (cudnnGetConvolutionForwardAlgorithm_v7's
  // ranking) timed per call and job, in list order; 0 = all of them, and cuBLASLt's algo-id search.
  // The rest are recorded as skipped. A lower cap measures fewer candidates, so the
  // lower bound it gives can only be higher (never below what a full run finds).
  int max_engines = 0;
  // Profiling (benanza bench --counters): when profile_call is set, measure() launches only the call
  // whose call, algorithm and layout (and math, when profile_math is set) match: its first call
  // (checked, outside the range), then one launch between cudaProfilerStart and cudaProfilerStop
  // (what Nsight Compute profiles with --profile-from-start off), and a "profiled" record; no
  // warm-up or samples. Other calls are not launched.
  std::string profile_call, profile_algorithm, profile_layout, profile_math;
  // The prior (--prior FILE; prior.hpp, docs/timing.md "Prior"): a candidate of a job the prior has seen
  // that it ranks as no contender is recorded as "skipped" with the prior's message and never built or
  // launched (Bench::wanted, consulted before each candidate's costly work and in measure()). Null: none.
  std::shared_ptr<const Prior> prior;
};

// Outcome of one launch: ok, or the library status and where it came from.
struct Status {
  bool ok = true;
  bool unsupported = false;
  std::string message;
  static Status success() { return {}; }
  static Status cudnn(cudnnStatus_t s, const char* where);
  static Status cublas(cublasStatus_t s, const char* where);
  static Status cuda(cudaError_t e, const char* where);
};

#define BZ_CUDNN(call)                                                   \
  do {                                                                   \
    cudnnStatus_t bz_s_ = (call);                                        \
    if (bz_s_ != CUDNN_STATUS_SUCCESS) return ::benanza::Status::cudnn(bz_s_, #call); \
  } while (0)
#define BZ_CUBLAS(call)                                                  \
  do {                                                                   \
    cublasStatus_t bz_s_ = (call);                                       \
    if (bz_s_ != CUBLAS_STATUS_SUCCESS) return ::benanza::Status::cublas(bz_s_, #call); \
  } while (0)
#define BZ_CUDA(call)                                                    \
  do {                                                                   \
    cudaError_t bz_e_ = (call);                                          \
    if (bz_e_ != cudaSuccess) return ::benanza::Status::cuda(bz_e_, #call); \
  } while (0)

// Setup failures inside a job (descriptor creation, allocation): the job is recorded as failed.
struct JobError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The device is unusable (sticky CUDA error): the process must exit so the runner can restart it.
struct FatalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudnnStatus_t s, const char* where);   // throws JobError
void check(cublasStatus_t s, const char* where);  // throws JobError
void check(cudaError_t e, const char* where);     // throws JobError, or FatalError when sticky

using Launch = std::function<Status(cudaStream_t)>;

// Process-wide state: device, handles, stream, L2 flush buffer, options.
class Context {
 public:
  explicit Context(const Options& opt);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Options& options() const { return opt_; }
  const DeviceInfo& device() const { return dev_; }
  const Partition& partition() const { return partition_; }  // BENANZA_SM_COUNT (partition.hpp)
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudaStream_t stream() const { return stream_; }
  ClockWatch* clock_watch() const { return watch_.get(); }  // NVML's reasons and SM clock, polled
  // The GPU lock (BENANZA_GPU_LOCK: a file that several suite processes on one GPU share): a job
  // holds it while it runs, except in its CPU sections (heuristics queries, plan builds: CpuSection),
  // so that one process builds plans while another times calls, and no two ever launch work on the
  // GPU at the same time. Without the variable both calls do nothing.
  void gpu_acquire();
  void gpu_release();
  double gpu_wait_ms() const { return gpu_wait_ms_; }  // wall time spent waiting for the GPU lock
  void* flush_buffer() const { return flush_; }
  std::size_t flush_bytes() const { return flush_bytes_; }
  // JSON fields of the system record (device + library versions).
  std::string system_json() const;

 private:
  Options opt_;
  DeviceInfo dev_;
  Partition partition_;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* flush_ = nullptr;
  std::size_t flush_bytes_ = 0;
  std::unique_ptr<ClockWatch> watch_;
  int gpu_lock_fd_ = -1;
  int gpu_lock_depth_ = 0;
  double gpu_wait_ms_ = 0;
  void* cublas_ws_ = nullptr;
};

// A CPU-only stretch of a job (no GPU launch inside): the GPU lock is released for its duration.
class CpuSection {
 public:
  explicit CpuSection(Context& ctx) : ctx_(ctx) { ctx_.gpu_release(); }
  ~CpuSection() { ctx_.gpu_acquire(); }
  CpuSection(const CpuSection&) = delete;
  CpuSection& operator=(const CpuSection&) = delete;

 private:
  Context& ctx_;
};

// What a measurement record says besides its statistics.
struct Call {
  std::string call;        // library function(s), e.g. "cudnnConvolutionForward+cudnnAddTensor"
  std::string algorithm;   // algorithm / variant name
  std::string math;        // fma | tf32 | tensor_op | none
  DType dtype = DType::F32;
  std::string note;        // how the call relates to the layer when not 1:1 (emulation, proxy)
  std::size_t workspace = 0;
  double build_ms = -1;    // engine plans: time to build the plan (not part of the timing); -1: none
  std::string layout = "NCHW";  // tensor layout of the timed call (NCHW or NHWC)
  std::string details;     // a JSON object: engine index, knobs, notes, cuBLASLt tile... ("" = none)
};

// Per-job helper: buffers, measurement and the emission of records.
class Bench {
 public:
  Bench(Context& ctx, const JobInfo& job);
  ~Bench();
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  Context& ctx() { return ctx_; }
  const JobInfo& job() const { return job_; }
  cudnnHandle_t cudnn() const { return ctx_.cudnn(); }
  cublasHandle_t cublas() const { return ctx_.cublas(); }
  cudaStream_t stream() const { return ctx_.stream(); }

  // Device buffer of `count` elements of `t`, filled uniform in [lo, hi). Freed with the Bench.
  void* random(std::size_t count, DType t, float lo = -1.0f, float hi = 1.0f);
  void* zeros(std::size_t bytes);
  // Workspace of at least `bytes` (grown on demand, shared by the job's calls).
  void* workspace(std::size_t bytes);

  // Time `launch`; emits the record(s) and returns true when the measurement is valid.
  // `out`/`out_count`/`out_t`: the output checked once for NaN/Inf after the first call.
  bool measure(const Call& call, const Launch& launch, const void* out, std::size_t out_count, DType out_t);
  // The prior's word on candidate (call, algorithm) of this job (Options::prior): true when it is to be
  // timed (no prior, a job the prior has not seen, a contender, the sample, or one the prior never saw).
  bool wanted(const std::string& call, const std::string& algorithm) const;
  // When the prior does not want `c`: records it as "skipped" with the prior's message (no time) and
  // returns true; else false. Called before a candidate's costly work (plan build, workspace, first call).
  bool skip_unwanted(const Call& c);
  // Whether the prior wants a candidate of `call` beyond `algorithms` (cuBLASLt's algo-id search is worth
  // its cost); true without a prior for this job.
  bool prior_wants_other(const std::string& call, const std::set<std::string>& algorithms) const;
  // Record a call that was not timed: status is "not_supported", "skipped" or "failed".
  void record(const Call& call, const char* status, const std::string& message);
  // Record a library heuristic's choice (not a timing): source call, rank, algorithm.
  void choice(const char* source, int rank, const std::string& algorithm, const std::string& math,
              const std::string& status, std::size_t workspace);

 private:
  struct Sampled {
    Stats stats;
    double t0_ms = -1;       // wall clock (ms since the Bench began) when sampling started
    bool left = false;       // `leave` said the call left the race
    int dropped = 0;         // samples discarded for a thermal / HW slowdown
    int power_capped = 0;    // samples kept that ran under the SW power cap
    unsigned long long reasons = 0;  // union of the clock-event reasons seen
    int clock_min = 0, clock_max = 0;
    std::vector<double> samples;     // kept samples (ms per call), in order
  };
  // Sample into `out` until the stopping rule says done, `max_n` samples are kept, or `leave`
  // (checked after each batch once `first_check` samples are kept) says the call left the race.
  // `one(ea, eb)` enqueues one sample between events ea and eb, `lead` (may be empty) an untimed
  // call before a batch; `calls` is the number of calls in one sample (the sample is ms per call).
  void sample(const std::function<bool(cudaEvent_t, cudaEvent_t)>& one, const std::function<bool()>& lead,
              int calls, Sampled& out, int max_n = 0,
              const std::function<bool(const std::vector<double>&)>& leave = nullptr, int first_check = 0,
              const StoppingRule* rule = nullptr);  // rule: instead of the options' (cold samples)
  cudaEvent_t event(int i);  // the Bench's events, created on first use
  void emit_raced_out(const Call& c, const std::string& method, int reps, double host_us, const Sampled& r,
                      const std::string& cost, bool screen);
  void emit_sampled(const char* cache, const std::string& method, int reps, double host_us, double warm_ms,
                    int warm_calls, const Sampled& r, const Call& c, const std::string& cost = "");
  void free_all();
  bool profile_once(const Call& c, const Launch& launch);  // Options::profile_call

  Context& ctx_;
  JobInfo job_;
  const Prior::Job* prior_job_ = nullptr;  // the prior's lists for this job (null: every candidate timed)
  double best_warm_ms_ = INFINITY;  // fastest valid warm median of this job so far (screening, racing)
  double best_ucb_ms_ = INFINITY;   // the upper confidence bound of that median (racing)
  double best_screen_ucb_ms_ = INFINITY;  // the same from its screen samples (one replay each)
 public:
  // The harness's own wall time in this job (--profile): per phase of measure() (first call, warm-up,
  // graph capture, screen, warm samples, cold samples), the plan builds its calls reported, the
  // calls that left the race; JSON for the job_end line.
  std::string cost_json(double job_wall_ms, double gpu_wait_ms = 0) const;

 private:
  double cost_[6] = {0, 0, 0, 0, 0, 0};
  double build_total_ms_ = 0;
  int measured_ = 0, raced_out_ = 0;
  std::vector<void*> buffers_;
  std::vector<cudaEvent_t> events_;
  void* ws_ = nullptr;
  std::size_t ws_bytes_ = 0;
};

// Job registry: each generated translation unit registers its jobs at static-initialisation time.
struct JobEntry {
  JobInfo info;
  std::function<void(Bench&)> run;
};
std::vector<JobEntry>& registry();
bool register_job(const JobInfo& info, std::function<void(Bench&)> run);

// Device kernels (kernels.cu): random fill and the NaN/Inf check.
void fill_uniform(void* p, std::size_t n, DType t, unsigned long long seed, float lo, float hi, cudaStream_t s);
// Number of non-finite elements (synchronises the stream); -1 when the check itself failed.
long long count_nonfinite(const void* p, std::size_t n, DType t, cudaStream_t s);

// The CUDA-core FP32 rate probe (kernels.cu): each thread runs kFmaChains independent FMA chains of
// `iters` steps and writes one float (so the work is not optimised away).
constexpr int kFmaChains = 8;
void fma_rate(float* out, int blocks, int threads, int iters, cudaStream_t s);
// One strided transfer by a CUDA kernel (kernels.cu): every element of the view's index space copied
// from src to dst, `elem_bytes` (1, 2, 4 or 8) each; the generic copy kernel a framework runs for a
// permuted or sliced view (Transpose, Slice, Concat, Pad), launched as plan_strided_copy plans it
// (StridedView and the plan: strided_copy.hpp).
void strided_copy(const void* src, void* dst, std::size_t elem_bytes, const StridedView& v, cudaStream_t s);
// The DRAM bandwidth probe (kernels.cu): `bytes` (a multiple of 16) copied from src to dst as
// 16-byte vectors by a grid-stride loop.
void copy_rate(const void* src, void* dst, std::size_t bytes, int blocks, int threads, cudaStream_t s);
// One 2-D copy of batched_copy2d: `rows` rows of `cols` elements, row starts `src_pitch` /
// `dst_pitch` elements apart.
struct Copy2D {
  const void* src;
  void* dst;
  long long rows, cols, src_pitch, dst_pitch;
};
// Every copy in one kernel launch per 32 (kernels.cu; what PyTorch's cat kernel does for a Concat),
// in units of the largest of 16/8/4/2 bytes that divides every row, pitch and address;
// cudaErrorInvalidValue when a copy has 2^31 units or more.
cudaError_t batched_copy2d(const Copy2D* copies, int n, std::size_t elem_bytes, cudaStream_t s);
// Pointwise kernels (kernels.cu), a framework's elementwise loops as the harness's own
// implementation of Activation and Elementwise layers: float math on fp32/fp16/bf16 storage, 16-byte
// vectors where the innermost dimension allows.
// binary_pointwise: y = op(alpha1 * a, alpha2 * b) with numpy broadcasting of both operands
// (each dim of a and b equal to y's or 1; at most 8 dims; fewer than 2^31 elements);
// cudaErrorInvalidValue for other shapes. The alphas scale float operands only.
// ONNX ops (ONNX operator spec): Add/Sum, Sub, Mul, Div, Max, Min, Mean (of 2: (a + b) / 2), Pow,
// Mod (fmod = 0: floored, the sign of b), FMod (fmod = 1: truncated, C's fmod), PRelu (a < 0 ? a * b : a),
// Equal, Less, LessOrEqual, Greater, GreaterOrEqual (bool out), And, Or, Xor (bool in and out:
// nonzero is true), BitwiseAnd/Or/Xor, BitShift LEFT/RIGHT (integers). Integer division and
// modulo by 0 give 0; shifts by 64 or more give 0. SwiGlu (float only; no ONNX op: the fused
// Sigmoid -> Mul -> Mul of SwiGLU's gate): silu(a) * b = a / (1 + exp(-a)) * b.
enum class PointwiseOp {
  Add = 0, Mul = 1, Min = 2, Max = 3, Sub, Div, Mean, Pow, Mod, FMod, PRelu,
  Equal, Less, LessOrEqual, Greater, GreaterOrEqual, And, Or, Xor, BitAnd, BitOr, BitXor, ShiftLeft, ShiftRight,
  SwiGlu
};
// a, b and y in the storage type `t` (fp32/fp16/bf16), float math.
cudaError_t binary_pointwise(const void* a, const void* b, void* y, const int* a_dims, const int* b_dims, int nd,
                             PointwiseOp op, float alpha1, float alpha2, DType t, cudaStream_t s);
// a and b of element type `in` (F32/F16/BF16: float math; I8 (bool or int8), U8, I16, U16, I32, U32,
// I64, U64: 64-bit integer math), y of `out`: `in`, or I8 (bool) for comparisons and logical ops.
cudaError_t binary_pointwise_typed(const void* a, const void* b, void* y, const int* a_dims, const int* b_dims,
                                   int nd, PointwiseOp op, float alpha1, float alpha2, ElemType in, ElemType out,
                                   cudaStream_t s);
// activation_pointwise: y = f(x) for n elements; mode as cudnnActivationMode_t (0 sigmoid, 1 relu,
// 2 tanh, 3 clipped relu at coef, 4 elu with alpha coef, 5 identity), -1: leaky relu, slope coef,
// or -2: ONNX HardSigmoid max(0, min(1, coef * x + coef2)) (alpha coef, beta coef2).
cudaError_t activation_pointwise(const void* x, void* y, std::size_t n, int mode, float coef, DType t, cudaStream_t s,
                                 float coef2 = 0.0f);
// activation_backward_pointwise: dx = f'(.) * dy for n elements, the same modes and coefficients as
// activation_pointwise, from `saved`, the tensor a framework keeps for the backward pass: the forward's
// output y for sigmoid (0), relu (1) and tanh (2), its input x for the others (PyTorch's
// threshold_backward, sigmoid_backward, tanh_backward, hardtanh_backward, elu_backward,
// leaky_relu_backward, hardsigmoid_backward, silu_backward).
cudaError_t activation_backward_pointwise(const void* saved, const void* dy, void* dx, std::size_t n, int mode,
                                          float coef, DType t, cudaStream_t s, float coef2 = 0.0f);
// Reductions (reduce_kernels.cu; the plan is reduce_plan.hpp): ReduceSum/Mean/Max/Min of packed x
// (dims x_dims, nd <= 8) into y (y_dims: each x's dim or 1), fp32/fp16/bf16 storage, float32
// accumulation, as a framework's vectorized reduction kernels (16-byte loads, warp shuffles), in
// one to eight launches; `workspace` holds the float32 results between stages
// (plan_reduce_for(...).workspace_bytes() bytes, 0 for a one-stage plan).
// cudaErrorInvalidValue for shapes that are not a reduction or a workspace that is too small.
enum class ReduceOp { Sum = 0, Mean = 1, Max = 2, Min = 3 };
const char* reduce_op_name(ReduceOp op);
// The plan for the current device (its SM count decides where a long reduced dim is split).
ReducePlan plan_reduce_for(const int* x_dims, const int* y_dims, int nd, DType t);
// One line for a record's note: the stages, their views and launch shapes.
std::string describe_reduce(const ReducePlan& p);
cudaError_t reduce(const void* x, void* y, const int* x_dims, const int* y_dims, int nd, ReduceOp op, DType t,
                   void* workspace, std::size_t workspace_bytes, cudaStream_t s);

// Machine ceilings (ceilings.cpp): DRAM bandwidth, library GEMM rates, FP32 FMA rate.
class Context;
int run_ceilings(Context& ctx);

// Emit one JSON line on stdout (flushed: a crash loses nothing already printed).
void emit_line(const std::string& json);

// Suite metadata, generated (suite_info.cpp).
extern const char* const kSuiteModel;
extern const char* const kSuiteGenerator;

// The suite's entry point (suite_main.cpp).
int suite_main(int argc, char** argv);

}  // namespace benanza
