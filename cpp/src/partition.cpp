// SM partition through a CUDA green context (partition.hpp). The driver API is declared by cuda.h
// (types only) and loaded with dlopen, so the suite never links libcuda.
#include "benanza/partition.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "benanza/harness.hpp"

namespace benanza {

namespace {

struct Driver {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*get_resource)(CUdevice, CUdevResource*, CUdevResourceType) = nullptr;
  CUresult (*split)(CUdevResource*, unsigned*, const CUdevResource*, CUdevResource*, unsigned, unsigned) = nullptr;
  CUresult (*generate_desc)(CUdevResourceDesc*, CUdevResource*, unsigned) = nullptr;
  CUresult (*green_create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned) = nullptr;
  CUresult (*from_green)(CUcontext*, CUgreenCtx) = nullptr;
  CUresult (*set_current)(CUcontext) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
};

template <typename F>
void load(void* h, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(h, name));
  if (!*f) throw FatalError(std::string(kSmCountEnv) + ": the CUDA driver has no " + name +
                            " (green contexts need a CUDA 12.4 or later driver)");
}

Driver load_driver() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) throw FatalError(std::string(kSmCountEnv) + ": cannot load the CUDA driver (libcuda.so.1)");
  Driver d;
  load(h, "cuInit", &d.init);
  load(h, "cuDeviceGet", &d.device_get);
  load(h, "cuDeviceGetDevResource", &d.get_resource);
  load(h, "cuDevSmResourceSplitByCount", &d.split);
  load(h, "cuDevResourceGenerateDesc", &d.generate_desc);
  load(h, "cuGreenCtxCreate", &d.green_create);
  load(h, "cuCtxFromGreenCtx", &d.from_green);
  load(h, "cuCtxSetCurrent", &d.set_current);
  load(h, "cuGetErrorString", &d.error_string);
  return d;
}

void check_cu(const Driver& d, CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* msg = nullptr;
  d.error_string(r, &msg);
  throw FatalError(std::string(kSmCountEnv) + ": " + what + " failed: " + (msg ? msg : "unknown error") +
                   " (code " + std::to_string(static_cast<int>(r)) + ")");
}

// The requested SM count; 0 when the variable is unset or empty.
int requested_sms(int sm_total) {
  const char* v = std::getenv(kSmCountEnv);
  if (!v || !*v) return 0;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno || !end || *end || n <= 0)
    throw FatalError(std::string(kSmCountEnv) + "=" + v + ": not a positive SM count");
  if (n > sm_total)
    throw FatalError(std::string(kSmCountEnv) + "=" + v + ": the GPU has " + std::to_string(sm_total) + " SMs");
  return static_cast<int>(n);
}

}  // namespace

std::string partition_name(const std::string& name, int sm_count, const std::string& method) {
  return name + " [" + std::to_string(sm_count) + " SMs" + (method == "mps" ? ", MPS" : "") + "]";
}

Partition partition_from_env(int device, int sm_total) {
  Partition p;
  p.sm_total = sm_total;
  const char* how = std::getenv(kPartitionEnv);
  const std::string method = how && *how ? how : "green_context";
  if (method == "mps") {
    const char* v = std::getenv(kSmCountEnv);
    if (!v || !*v)
      throw FatalError(std::string(kPartitionEnv) + "=mps needs " + kSmCountEnv + ", the SM count the MPS client is limited to");
    const int n = requested_sms(sm_total);
    if (n != sm_total)
      throw FatalError(std::string(kSmCountEnv) + "=" + v + " with " + kPartitionEnv + "=mps: the device reports " +
                       std::to_string(sm_total) + " SMs (is this process an MPS client with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE set?)");
    const char* pct = std::getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    p.sm_count = n;
    p.method = "mps";
    p.mps_percentage = pct ? pct : "";
    return p;
  }
  if (method != "green_context")
    throw FatalError(std::string(kPartitionEnv) + "=" + method + ": not a partition method (green_context, mps)");
  const int want = requested_sms(sm_total);
  if (want == 0 || want == sm_total) return p;
  const Driver d = load_driver();
  check_cu(d, d.init(0), "cuInit");
  CUdevice dev;
  check_cu(d, d.device_get(&dev, device), "cuDeviceGet");
  CUdevResource all{};
  check_cu(d, d.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
  p.alignment = static_cast<int>(all.sm.smCoscheduledAlignment);
  p.min_size = static_cast<int>(all.sm.minSmPartitionSize);
  const int a = p.alignment > 0 ? p.alignment : 1;
  if (want < p.min_size || want % a) {
    const int lo = std::max(p.min_size, want / a * a), hi = (want + a - 1) / a * a;
    throw FatalError(std::string(kSmCountEnv) + "=" + std::to_string(want) + ": this GPU partitions its SMs in groups of " +
                     std::to_string(a) + " from " + std::to_string(p.min_size) + " (nearest: " + std::to_string(lo) +
                     (hi != lo && hi < sm_total ? " or " + std::to_string(hi) : "") + ")");
  }
  CUdevResource group{}, rest{};
  unsigned groups = 1;
  check_cu(d, d.split(&group, &groups, &all, &rest, 0, static_cast<unsigned>(want)), "cuDevSmResourceSplitByCount");
  if (groups != 1 || static_cast<int>(group.sm.smCount) != want)
    throw FatalError(std::string(kSmCountEnv) + "=" + std::to_string(want) + ": the driver made a partition of " +
                     std::to_string(groups ? group.sm.smCount : 0) + " SMs instead");
  CUdevResourceDesc desc;
  check_cu(d, d.generate_desc(&desc, &group, 1), "cuDevResourceGenerateDesc");
  CUgreenCtx green;
  check_cu(d, d.green_create(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
  CUcontext ctx;
  check_cu(d, d.from_green(&ctx, green), "cuCtxFromGreenCtx");
  check_cu(d, d.set_current(ctx), "cuCtxSetCurrent");
  p.sm_count = want;
  p.method = "green_context";
  return p;  // the green context lives as long as the process (the suite runs in one)
}

}  // namespace benanza
