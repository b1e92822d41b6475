// The index ops of a mixture of experts' per-expert loop (transformers' eager experts, exported by
// torch.onnx): ONNX NonZero (PyTorch's torch.nonzero: the coordinates of the nonzero elements, [rank,
// count] int64) and an integer ReduceSum/Max/Min over trailing dims (the tokens routed to each expert,
// a sum of the one-hot expert mask). cuDNN and cuBLAS have neither; benanza times CUB's (the CUDA
// toolkit's): cub::DeviceSelect::If over element indices then one thread per selected element writing
// its coordinates, and cub::DeviceSegmentedReduce over rows (index_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace benanza {

// The element type NonZero reads and the integer reduction sums: 1, 4 or 8 bytes (bool/uint8, int32,
// int64); NonZero also reads float32 (4 bytes: nonzero bits, -0.0 aside, are a nonzero value).
enum class IndexType : int { B8, I32, I64, F32 };

// The most dims a NonZero input may have (the coordinates written per element).
constexpr int kNonZeroMaxRank = 8;

// The temporary storage (bytes) nonzero() needs for `n` input elements: CUB's select plus the flat
// indices (n int64) and the count (one int64), 256-byte aligned.
cudaError_t nonzero_temp_bytes(long long n, IndexType type, std::size_t* bytes);

// y [rank, count] int64 = the coordinates of x's nonzero elements in row-major order (ONNX NonZero),
// x packed with dims `dims[0..rank)`, n = their product; `count` is the number of nonzero elements
// the caller put in x (the launch covers it; the selected count CUB writes is what the kernel reads).
// Two launches: cub::DeviceSelect::If of the element indices whose value is nonzero, then one thread
// per selected element unravelling its index into `rank` coordinates.
cudaError_t nonzero(const void* x, long long n, const int* dims, int rank, IndexType type, long long count, long long* y,
                    void* temp, std::size_t temp_bytes, cudaStream_t s);

// The reductions of reduce_int_rows.
enum class IntReduceOp : int { Sum, Max, Min };

// The temporary storage (bytes) reduce_int_rows needs: CUB's segmented reduction's size query.
cudaError_t reduce_int_rows_temp_bytes(long long rows, long long len, IndexType type, IntReduceOp op,
                                       std::size_t* bytes);

// y[r] = op over x[r, 0..len) of integer x viewed as (rows, len), packed: cub::DeviceSegmentedReduce
// (Sum, Max or Min), one segment per row. type is I32 or I64.
cudaError_t reduce_int_rows(const void* x, void* y, long long rows, long long len, IndexType type, IntReduceOp op,
                            void* temp, std::size_t temp_bytes, cudaStream_t s);

}  // namespace benanza
