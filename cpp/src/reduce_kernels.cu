// benanza::reduce: ReduceMean/Sum/Max/Min as a framework's vectorized reduction kernels run them
// (PyTorch's Reduce.cuh: coalesced dimensions, 16-byte loads, float accumulation, warp shuffles),
// timed beside cudnnReduceTensor. The plan (stages, launch shapes, workspace) is host code in
// reduce_plan.hpp; this file holds the kernels and launches each stage.
//
// Kernels (OP: 0 sum (Mean: sum, then scaled), 1 max, 2 min; In/Out: the storage type or float32
// partial results in the workspace):
//   reduce_rows_k  inner == 1: lanes of a warp (kWarp: 1 to 32, as many as the row has 16-byte
//                  vectors) or a block per row of r contiguous elements; a scalar
//                  head up to 16-byte alignment, then 16-byte vectors (4 in flight per thread),
//                  then a scalar tail; lanes combined with __shfl_xor_sync, warps through shared memory;
//   reduce_cols_k  inner > 1: block (bx, by); thread (tx, ty) owns V consecutive output columns and
//                  walks rows ty, ty + by, ... of its chunk of r; the by partials are combined in
//                  shared memory. Loads coalesce along inner (V * bx contiguous elements per row).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "benanza/harness.hpp"
#include "benanza/reduce_plan.hpp"

namespace benanza {
namespace {

template <typename T, int V>
struct alignas(sizeof(T) * V) RVec {
  T v[V];
};

template <typename T>
__device__ __forceinline__ float to_f(T x) { return static_cast<float>(x); }
template <typename T>
__device__ __forceinline__ T from_f(float x) { return static_cast<T>(x); }

template <int OP>
__device__ __forceinline__ float red_init() { return OP == 1 ? -INFINITY : OP == 2 ? INFINITY : 0.0f; }
template <int OP>
__device__ __forceinline__ float red_comb(float a, float b) { return OP == 1 ? fmaxf(a, b) : OP == 2 ? fminf(a, b) : a + b; }

template <int OP>
__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = red_comb<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// the block's combined value (valid in thread 0); shared memory is free again on return
template <int OP>
__device__ __forceinline__ float block_reduce(float v) {
  __shared__ float part[32];
  v = warp_reduce<OP>(v);
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  if (lane == 0) part[w] = v;
  __syncthreads();
  if (w == 0) v = warp_reduce<OP>(lane < nw ? part[lane] : red_init<OP>());
  __syncthreads();
  return v;
}

// thread t of nt: its share of p[0, n), 16-byte vectors between a scalar head and tail
template <typename In, int V, int OP>
__device__ __forceinline__ float row_partial(const In* __restrict__ p, long long n, int t, int nt) {
  float acc = red_init<OP>();
  const unsigned mis = static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p) % 16);
  long long head = mis % sizeof(In) ? n : static_cast<long long>(((16 - mis) % 16) / sizeof(In));
  if (head > n) head = n;
  for (long long i = t; i < head; i += nt) acc = red_comb<OP>(acc, to_f(p[i]));
  const long long nv = (n - head) / V;
  const RVec<In, V>* pv = reinterpret_cast<const RVec<In, V>*>(p + head);
  long long i = t;
  for (; i + 3LL * nt < nv; i += 4LL * nt) {
    RVec<In, V> v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = pv[i + u * static_cast<long long>(nt)];
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k) acc = red_comb<OP>(acc, to_f(v[u].v[k]));
  }
  for (; i < nv; i += nt) {
    const RVec<In, V> v = pv[i];
#pragma unroll
    for (int k = 0; k < V; ++k) acc = red_comb<OP>(acc, to_f(v.v[k]));
  }
  for (long long j = head + nv * V + t; j < n; j += nt) acc = red_comb<OP>(acc, to_f(p[j]));
  return acc;
}

// y[row * split + z] = scale * reduce(x[row * r + z * chunk, ... + chunk)); split = gridDim.y.
// kWarp: `lanes` (a power of 2 <= 32) consecutive lanes of a warp per row, split == 1; else a block per row.
template <int OP>
__device__ __forceinline__ float lanes_reduce(float v, int lanes) {
  for (int o = lanes / 2; o > 0; o >>= 1) v = red_comb<OP>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename In, typename Out, int V, int OP, bool kWarp>
__global__ void reduce_rows_k(const In* __restrict__ x, Out* __restrict__ y, long long rows, long long r,
                              long long chunk, int lanes, float scale) {
  if (kWarp) {
    const long long warp = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) >> 5;
    const long long nwarps = (gridDim.x * static_cast<long long>(blockDim.x)) >> 5;
    const int lane = threadIdx.x & 31, per_warp = 32 / lanes, t = lane % lanes;
    for (long long first = warp * per_warp; first < rows; first += nwarps * per_warp) {  // warp-uniform
      const long long row = first + lane / lanes;
      float acc = row < rows ? row_partial<In, V, OP>(x + row * r, r, t, lanes) : red_init<OP>();
      acc = lanes_reduce<OP>(acc, lanes);
      if (t == 0 && row < rows) y[row] = from_f<Out>(acc * scale);
    }
    return;
  }
  const long long z = blockIdx.y, split = gridDim.y;
  const long long begin = z * chunk, end = begin + chunk < r ? begin + chunk : r;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const float acc = block_reduce<OP>(row_partial<In, V, OP>(x + row * r + begin, end - begin, threadIdx.x,
                                                              blockDim.x));
    if (threadIdx.x == 0) y[row * split + z] = from_f<Out>(acc * scale);
  }
}

// y[(o * split + z) * inner + c] = scale * reduce over i in chunk z of x[(o * r + i) * inner + c]
template <typename In, typename Out, int V, int OP>
__global__ void reduce_cols_k(const In* __restrict__ x, Out* __restrict__ y, long long outer, long long r,
                              long long inner, long long chunk, float scale) {
  extern __shared__ float smem[];  // [by][bx][V]
  const long long cols = inner / V;
  const long long col = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long z = blockIdx.z, split = gridDim.z;
  const long long begin = z * chunk, end = begin + chunk < r ? begin + chunk : r;
  const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x;
  for (long long o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc[V];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = red_init<OP>();
    if (col < cols) {
      const In* base = x + o * r * inner + col * V;
#pragma unroll 4
      for (long long i = begin + ty; i < end; i += blockDim.y) {
        const RVec<In, V> v = *reinterpret_cast<const RVec<In, V>*>(base + i * inner);
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = red_comb<OP>(acc[k], to_f(v.v[k]));
      }
    }
    if (blockDim.y > 1) {
#pragma unroll
      for (int k = 0; k < V; ++k) smem[(ty * bx + tx) * V + k] = acc[k];
      __syncthreads();
      for (int h = blockDim.y / 2; h > 0; h >>= 1) {
        if (ty < h) {
#pragma unroll
          for (int k = 0; k < V; ++k)
            smem[(ty * bx + tx) * V + k] = red_comb<OP>(smem[(ty * bx + tx) * V + k], smem[((ty + h) * bx + tx) * V + k]);
        }
        __syncthreads();
      }
#pragma unroll
      for (int k = 0; k < V; ++k) acc[k] = smem[tx * V + k];
      __syncthreads();
    }
    if (ty == 0 && col < cols) {
      RVec<Out, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) out.v[k] = from_f<Out>(acc[k] * scale);
      *reinterpret_cast<RVec<Out, V>*>(y + (o * split + z) * inner + col * V) = out;
    }
  }
}

unsigned grid_cap(long long n, long long cap) { return static_cast<unsigned>(n < 1 ? 1 : n > cap ? cap : n); }

template <typename In, typename Out, int OP>
cudaError_t launch_stage(const ReduceStage& s, const void* in, void* out, float scale, cudaStream_t st) {
  constexpr int kV = 16 / sizeof(In);
  const In* x = static_cast<const In*>(in);
  Out* y = static_cast<Out*>(out);
  const long long split = s.split();
  if (s.row) {
    if (s.warp) {
      const long long rows_per_block = 8LL * (32 / s.lanes);  // 8 warps of 256 threads
      reduce_rows_k<In, Out, kV, OP, true><<<grid_cap((s.outer + rows_per_block - 1) / rows_per_block, 1LL << 20), 256,
                                             0, st>>>(x, y, s.outer, s.r, s.r, s.lanes, scale);
    } else {
      reduce_rows_k<In, Out, kV, OP, false><<<dim3(grid_cap(s.outer, 1LL << 20), static_cast<unsigned>(split)),
                                              s.threads, 0, st>>>(x, y, s.outer, s.r, s.chunk, 32, scale);
    }
    return cudaGetLastError();
  }
  const bool vec = s.vec == kV && reinterpret_cast<std::uintptr_t>(in) % 16 == 0 &&
                   reinterpret_cast<std::uintptr_t>(out) % (sizeof(Out) * kV) == 0;
  const int v = vec ? kV : 1;
  const long long cols = s.inner / v;
  const dim3 grid(grid_cap((cols + s.bx - 1) / s.bx, 0x7fffffffLL), grid_cap(s.outer, 65535),
                  static_cast<unsigned>(split));
  const dim3 block(s.bx, s.by);
  const std::size_t shm = s.by > 1 ? sizeof(float) * s.bx * s.by * v : 0;
  if (vec)
    reduce_cols_k<In, Out, kV, OP><<<grid, block, shm, st>>>(x, y, s.outer, s.r, s.inner, s.chunk, scale);
  else
    reduce_cols_k<In, Out, 1, OP><<<grid, block, shm, st>>>(x, y, s.outer, s.r, s.inner, s.chunk, scale);
  return cudaGetLastError();
}

template <typename T, int OP>
cudaError_t run_stage(const ReduceStage& s, const void* in, void* out, float scale, cudaStream_t st) {
  if (s.src < 0 && s.dst < 0) return launch_stage<T, T, OP>(s, in, out, scale, st);
  if (s.src < 0) return launch_stage<T, float, OP>(s, in, out, scale, st);
  if (s.dst < 0) return launch_stage<float, T, OP>(s, in, out, scale, st);
  return launch_stage<float, float, OP>(s, in, out, scale, st);
}

template <int OP>
cudaError_t run_typed(DType t, const ReduceStage& s, const void* in, void* out, float scale, cudaStream_t st) {
  switch (t) {
    case DType::F32: return run_stage<float, OP>(s, in, out, scale, st);
    case DType::F16: return run_stage<__half, OP>(s, in, out, scale, st);
    case DType::BF16: return run_stage<__nv_bfloat16, OP>(s, in, out, scale, st);
    default: return cudaErrorInvalidValue;
  }
}

// SMs of the current device, queried once per device (host code; safe during graph capture)
int current_sm_count() {
  static int cached[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 0;
  if (!cached[dev]) cudaDeviceGetAttribute(&cached[dev], cudaDevAttrMultiProcessorCount, dev);
  return cached[dev];
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

ReducePlan plan_reduce_for(const int* x_dims, const int* y_dims, int nd, DType t) {
  long long x[8] = {}, y[8] = {};
  for (int d = 0; d < nd && d < 8; ++d) {
    x[d] = x_dims[d];
    y[d] = y_dims[d];
  }
  return plan_reduce(x, y, nd, static_cast<int>(dtype_bytes(t)), current_sm_count());
}

std::string describe_reduce(const ReducePlan& p) {
  if (!p.ok) return std::string("no plan: ") + p.error;
  std::string out = std::to_string(p.n) + (p.n == 1 ? " stage" : " stages");
  for (int i = 0; i < p.n; ++i) {
    const ReduceStage& s = p.st[i];
    char buf[160];
    if (s.row)
      std::snprintf(buf, sizeof buf, "%s rows %lldx%lld, %d %s per row", i ? ";" : ":", s.outer, s.r,
                    s.warp ? s.lanes : s.threads, s.warp ? "lanes of a warp" : "threads of a block");
    else
      std::snprintf(buf, sizeof buf, "%s columns %lldx%lldx%lld, blocks %dx%d, %d-element vectors", i ? ";" : ":",
                    s.outer, s.r, s.inner, s.bx, s.by, s.vec);
    out += buf;
    if (s.split() > 1) out += ", r split in " + std::to_string(s.split());
  }
  return out;
}

cudaError_t reduce(const void* x, void* y, const int* x_dims, const int* y_dims, int nd, ReduceOp op, DType t,
                   void* workspace, std::size_t workspace_bytes, cudaStream_t s) {
  const ReducePlan p = plan_reduce_for(x_dims, y_dims, nd, t);
  if (!p.ok || (t != DType::F32 && t != DType::F16 && t != DType::BF16)) return cudaErrorInvalidValue;
  if (p.workspace_bytes() > 0 && (!workspace || workspace_bytes < p.workspace_bytes())) return cudaErrorInvalidValue;
  float* half[2] = {static_cast<float*>(workspace), static_cast<float*>(workspace) + p.ws_elems[0]};
  for (int i = 0; i < p.n; ++i) {
    const ReduceStage& st = p.st[i];
    const void* in = st.src < 0 ? x : half[st.src];
    void* out = st.dst < 0 ? y : half[st.dst];
    const float scale = st.dst < 0 && op == ReduceOp::Mean ? static_cast<float>(1.0 / static_cast<double>(p.total_r)) : 1.0f;
    cudaError_t e;
    if (op == ReduceOp::Max)
      e = run_typed<1>(t, st, in, out, scale, s);
    else if (op == ReduceOp::Min)
      e = run_typed<2>(t, st, in, out, scale, s);
    else
      e = run_typed<0>(t, st, in, out, scale, s);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace benanza
