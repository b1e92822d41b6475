#include "benanza/device.hpp"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <chrono>
#include <mutex>
#include <sstream>

namespace benanza {

namespace {

// NVML declared here, loaded with dlopen: the driver ships libnvidia-ml.so.1; nothing links it.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr int kNvmlClockSm = 1;
constexpr int kNvmlClockMem = 2;

struct Nvml {
  bool ok = false;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
};

Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    n.init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(h, "nvmlInit_v2"));
    n.by_pci = reinterpret_cast<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>(
        dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.max_clock = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*)>(
        dlsym(h, "nvmlDeviceGetMaxClockInfo"));
    n.clock = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*)>(
        dlsym(h, "nvmlDeviceGetClockInfo"));
    n.driver_version = reinterpret_cast<nvmlReturn_t (*)(char*, unsigned int)>(
        dlsym(h, "nvmlSystemGetDriverVersion"));
    void* r = dlsym(h, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!r) r = dlsym(h, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n.reasons = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(r);
    n.ok = n.init && n.by_pci && n.init() == 0;
  });
  return n;
}

// Handles are looked up once per PCI bus id (the lookup is slower than a clock read).
bool nvml_handle(const std::string& pci, nvmlDevice_t* dev) {
  Nvml& n = nvml();
  if (!n.ok || pci.empty()) return false;
  static std::mutex mu;
  static std::string cached_pci;
  static nvmlDevice_t cached = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (cached && pci == cached_pci) {
    *dev = cached;
    return true;
  }
  if (n.by_pci(pci.c_str(), dev) != 0) return false;
  cached_pci = pci;
  cached = *dev;
  return true;
}

}  // namespace

bool nvml_available() { return nvml().ok; }

bool nvml_sm_clock_mhz(const std::string& pci, int* mhz) {
  nvmlDevice_t dev;
  unsigned int v = 0;
  if (!nvml_handle(pci, &dev) || !nvml().clock || nvml().clock(dev, kNvmlClockSm, &v) != 0) return false;
  *mhz = static_cast<int>(v);
  return true;
}

bool nvml_throttle_reasons(const std::string& pci, unsigned long long* mask) {
  nvmlDevice_t dev;
  unsigned long long v = 0;
  if (!nvml_handle(pci, &dev) || !nvml().reasons || nvml().reasons(dev, &v) != 0) return false;
  // nvml.h, nvmlClocksEventReason*: idle 0x1, application clocks 0x2, SW power cap 0x4, HW slowdown
  // 0x8, sync boost 0x10, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80.
  *mask = v;
  return true;
}

ClockWatch::ClockWatch(std::string pci_bus_id, double period_ms) : pci_(std::move(pci_bus_id)), period_ms_(period_ms) {
  unsigned long long r = 0;
  int c = 0;
  if (!nvml_throttle_reasons(pci_, &r)) return;  // no NVML: no thread, read() is not ok
  latest_ = r;
  if (nvml_sm_clock_mhz(pci_, &c)) clock_ = c;
  ok_ = true;
  thread_ = std::thread([this] { loop(); });
}

ClockWatch::~ClockWatch() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ClockWatch::loop() {
  const auto period = std::chrono::microseconds(static_cast<long long>(period_ms_ * 1000.0));
  while (!stop_) {
    unsigned long long r = 0;
    int c = 0;
    if (nvml_throttle_reasons(pci_, &r)) {
      latest_ = r;
      seen_.fetch_or(r);
    }
    if (nvml_sm_clock_mhz(pci_, &c)) clock_ = c;
    std::this_thread::sleep_for(period);
  }
}

void ClockWatch::reset() { seen_ = 0; }

ClockWatch::Reading ClockWatch::read() const {
  Reading r;
  r.ok = ok_;
  r.reasons = seen_.load() | latest_.load();
  r.sm_clock_mhz = clock_;
  return r;
}

int device_count(std::string* error) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (error) *error = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();
    return -1;
  }
  return n;
}

bool query_device(int index, DeviceInfo* d, std::string* error) {
  cudaDeviceProp p{};
  cudaError_t e = cudaGetDeviceProperties(&p, index);
  if (e != cudaSuccess) {
    if (error) *error = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  d->index = index;
  d->name = p.name;
  char uuid[64];
  const unsigned char* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  std::snprintf(uuid, sizeof uuid,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  d->uuid = uuid;
  char pci[32];
  if (cudaDeviceGetPCIBusId(pci, sizeof pci, index) == cudaSuccess) d->pci_bus_id = pci;
  d->cc_major = p.major;
  d->cc_minor = p.minor;
  d->sm_count = p.multiProcessorCount;
  d->total_memory_bytes = static_cast<long long>(p.totalGlobalMem);
  d->l2_cache_bytes = p.l2CacheSize;
  d->memory_bus_width_bits = p.memoryBusWidth;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, index) == cudaSuccess) d->max_sm_clock_mhz = khz / 1000;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess)
    d->max_mem_clock_mhz = khz / 1000;
  cudaGetLastError();
  cudaDriverGetVersion(&d->driver_cuda_version);
  cudaRuntimeGetVersion(&d->runtime_version);
  nvmlDevice_t dev;
  if (nvml_handle(d->pci_bus_id, &dev)) {
    unsigned int v = 0;
    if (nvml().max_clock && nvml().max_clock(dev, kNvmlClockSm, &v) == 0 && v) d->max_sm_clock_mhz = v;
    if (nvml().max_clock && nvml().max_clock(dev, kNvmlClockMem, &v) == 0 && v) d->max_mem_clock_mhz = v;
    if (nvml().clock && nvml().clock(dev, kNvmlClockSm, &v) == 0) d->current_sm_clock_mhz = v;
    char buf[96] = {0};
    if (nvml().driver_version && nvml().driver_version(buf, sizeof buf) == 0) d->driver_version = buf;
  }
  return true;
}

std::string json_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size() + 8);
  for (unsigned char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += static_cast<char>(c);
        }
    }
  }
  return o;
}

std::string device_json(const DeviceInfo& d, const std::string& extra) {
  std::ostringstream o;
  o << "{\"index\":" << d.index << ",\"gpu_name\":\"" << json_escape(d.name) << "\",\"uuid\":\""
    << json_escape(d.uuid) << "\",\"pci_bus_id\":\"" << json_escape(d.pci_bus_id)
    << "\",\"compute_capability\":\"" << d.cc_major << "." << d.cc_minor << "\",\"sm_count\":" << d.sm_count
    << ",\"memory_bytes\":" << d.total_memory_bytes << ",\"l2_cache_bytes\":" << d.l2_cache_bytes
    << ",\"memory_bus_width_bits\":" << d.memory_bus_width_bits << ",\"max_sm_clock_mhz\":" << d.max_sm_clock_mhz
    << ",\"max_mem_clock_mhz\":" << d.max_mem_clock_mhz << ",\"current_sm_clock_mhz\":" << d.current_sm_clock_mhz
    << ",\"driver_cuda_version\":" << d.driver_cuda_version << ",\"runtime_version\":" << d.runtime_version
    << ",\"driver_version\":\"" << json_escape(d.driver_version) << "\"";
  if (!extra.empty()) o << "," << extra;
  o << "}";
  return o.str();
}

}  // namespace benanza
