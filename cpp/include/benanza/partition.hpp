// SM partition of the GPU: BENANZA_SM_COUNT=N confines everything the harness runs (its own kernels,
// cuDNN's and cuBLAS's, CUDA graph replays) to N of the GPU's SMs, so that one GPU stands in for a
// smaller one of the same architecture (`benanza predict` is validated across SM counts this way).
//
// Mechanism: a CUDA green context (driver API, CUDA 12.4+: cuDeviceGetDevResource ->
// cuDevSmResourceSplitByCount -> cuDevResourceGenerateDesc -> cuGreenCtxCreate with
// CU_GREEN_CTX_DEFAULT_STREAM -> cuCtxFromGreenCtx -> cuCtxSetCurrent). The runtime API, and so cuDNN
// and cuBLAS, uses the context current on the calling thread: every stream, allocation and launch
// made after the switch belongs to the green context and runs on its SMs. The driver library is
// loaded at run time (dlopen of libcuda.so.1, as NVML in device.cpp): nothing links libcuda, so the
// suite builds on a machine without a driver.
//
// The libraries read the whole GPU's SM count from the device, not the green context's: the harness
// tells them the partition's (cuDNN's heuristics: Graph::set_sm_count in engines.cpp's time_graph;
// cublasSetSmCountTarget in harness.cpp; CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET in lt.cpp), so that
// they pick and size kernels as on a GPU of that many SMs; the system's info says
// "library_sm_target": true.
//
// BENANZA_PARTITION=mps (docs/prediction.md): the process is a CUDA MPS client whose control daemon or
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE limits it to BENANZA_SM_COUNT SMs (benchmarks/mps.sh). No green
// context is made: under MPS the device itself reports the limited SM count to the runtime and so to
// cuDNN and cuBLAS, which size their persistent kernels for it as on a smaller GPU (under a green
// context they size them for the whole GPU, and cuDNN's persistent batch norms fail their cooperative
// launch). The harness checks that the device reports exactly BENANZA_SM_COUNT SMs.
//
// How confined a run really is: probe_sms launches blocks that record the %smid they ran on and
// counts the distinct SMs (the CUDA driver documents that a green context can use more SMs than it
// was given, e.g. 2 more on Hopper once a module with dynamic parallelism is loaded).
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace benanza {

// The environment variable that asks for a partition: a positive SM count.
constexpr const char* kSmCountEnv = "BENANZA_SM_COUNT";
// How the partition is made: unset or "green_context" (a green context of the harness), or "mps" (the
// caller runs the harness as an MPS client limited to BENANZA_SM_COUNT SMs).
constexpr const char* kPartitionEnv = "BENANZA_PARTITION";

struct Partition {
  int sm_count = 0;      // SMs of the partition; 0: the whole GPU (no partition)
  int sm_total = 0;      // SMs of the whole GPU
  int alignment = 0;     // the driver's SM granularity (sm.smCoscheduledAlignment; 8 on Hopper)
  int min_size = 0;      // the driver's smallest partition (sm.minSmPartitionSize)
  int sms_seen = 0;      // distinct SMs the probe kernel's blocks ran on (0: not probed)
  std::string method;    // "green_context" or "mps" when partitioned
  std::string mps_percentage;  // CUDA_MPS_ACTIVE_THREAD_PERCENTAGE under "mps", as set
};

// Reads BENANZA_SM_COUNT (and BENANZA_PARTITION). Under BENANZA_PARTITION=mps: returns a Partition of
// method "mps" when the device reports exactly that many SMs (`sm_total` is then the count it reports),
// else throws FatalError naming what the device reports; no green context is made.
// Otherwise: unset, empty or equal to `sm_total`: returns a Partition with sm_count 0
// and changes nothing. Otherwise creates a green context of exactly that many SMs on `device` and
// makes it current on the calling thread (call before any stream, allocation or library handle).
// Throws FatalError (harness.hpp) when the value is not a positive integer, exceeds `sm_total`, is
// not a partition the driver makes (multiples of `alignment` from `min_size`: the message names
// the nearest ones), or when the driver (libcuda.so.1, CUDA 12.4+) is missing or refuses.
Partition partition_from_env(int device, int sm_total);

// The GPU name of a partitioned system record: "<name> [<sm_count> SMs]", "<name> [<sm_count> SMs, MPS]"
// for an MPS client's (benanza/runner/system.py and benanza/analysis/gpus.py parse the same form), so
// that the two kinds of partition are two systems.
std::string partition_name(const std::string& name, int sm_count, const std::string& method = "green_context");

// Launches `blocks` blocks of one warp on `stream` (each spins about 20 us so the scheduler spreads
// them) that record the SM they ran on; returns the number of distinct SMs, or -1 on a CUDA error.
int probe_sms(cudaStream_t stream, int blocks);

}  // namespace benanza
