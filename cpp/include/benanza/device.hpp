// Device query: what identifies a measurement's system (GPU, clocks, memory, driver, runtime).
//
// Uses the CUDA runtime and, when the driver ships it, NVML loaded at run time (dlopen of
// libnvidia-ml.so.1) for the maximum clocks, the driver version string and the current SM clock.
// Library versions (cuDNN, cuBLAS) are filled by the caller that links them.
#pragma once

#include <cstdint>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace benanza {

struct DeviceInfo {
  int index = 0;
  std::string name;           // e.g. "NVIDIA H200"
  std::string uuid;           // GPU-xxxxxxxx-...
  std::string pci_bus_id;     // 0000:00:00.0
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  long long total_memory_bytes = 0;
  long long l2_cache_bytes = 0;
  int memory_bus_width_bits = 0;
  int max_sm_clock_mhz = 0;   // NVML max SM clock, else cudaDevAttrClockRate
  int max_mem_clock_mhz = 0;  // NVML max memory clock, else cudaDevAttrMemoryClockRate
  int current_sm_clock_mhz = 0;  // NVML, 0 when unknown
  int driver_cuda_version = 0;   // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;       // cudaRuntimeGetVersion
  std::string driver_version;    // NVML, e.g. "580.159.03"; empty when NVML is absent
};

// Number of CUDA devices; on failure returns -1 and sets `error` (e.g. "no CUDA-capable device").
int device_count(std::string* error);

// Query one device. Returns false and sets `error` when the device cannot be queried.
bool query_device(int index, DeviceInfo* out, std::string* error);

// NVML helpers (all return false when NVML is unavailable).
bool nvml_available();
bool nvml_sm_clock_mhz(const std::string& pci_bus_id, int* mhz);
// Current clock-event (throttle) reasons, nvml.h's nvmlClocksEventReason* bitmask.
bool nvml_throttle_reasons(const std::string& pci_bus_id, unsigned long long* mask);
// Reasons after which a sample is dropped: thermal slowdown (SW 0x20, HW 0x40), HW slowdown 0x8 and
// HW power brake 0x80 -- transient events that do not describe the kernel. The SW power cap (0x4)
// is the steady state of heavy kernels (a framework running them sees the same clocks): samples
// under it are kept and counted.
constexpr unsigned long long kDropReasons = 0x8ULL | 0x20ULL | 0x40ULL | 0x80ULL;
constexpr unsigned long long kPowerCapReason = 0x4ULL;

// The clock watch: a thread that reads NVML's clock-event reasons and SM clock every `period_ms`
// (an NVML query takes a large share of a millisecond, too long to make between samples a fraction
// of a millisecond long). A batch of samples calls reset() before it is enqueued and read() after
// it: the reasons of every read since reset() (and of the latest one), and the latest SM clock.
// Without NVML, read() says not ok and nothing is dropped.
class ClockWatch {
 public:
  struct Reading {
    bool ok = false;
    unsigned long long reasons = 0;
    int sm_clock_mhz = 0;
  };
  explicit ClockWatch(std::string pci_bus_id, double period_ms = 1.0);
  ~ClockWatch();
  ClockWatch(const ClockWatch&) = delete;
  ClockWatch& operator=(const ClockWatch&) = delete;
  void reset();
  Reading read() const;

 private:
  void loop();
  std::string pci_;
  double period_ms_;
  std::atomic<bool> stop_{false}, ok_{false};
  std::atomic<unsigned long long> seen_{0}, latest_{0};
  std::atomic<int> clock_{0};
  std::thread thread_;
};

// JSON object of a DeviceInfo (no trailing newline), with extra key/values appended verbatim.
std::string device_json(const DeviceInfo& d, const std::string& extra_fields);

// Escape a string for a JSON string literal (without the quotes).
std::string json_escape(const std::string& s);

}  // namespace benanza
