// cuBLASLt matmul algorithms (lt.cpp): the generated Gemm benchmarks call run_lt_matmul after
// cublasGemmEx's CUBLAS_GEMM_DEFAULT.
#pragma once

#include "benanza/harness.hpp"

namespace benanza {

// One GEMM layer config as ONNX has it, row-major: Y[b] (m x n) = op(A)[b] (m x k) * op(B)[b] (k x n)
// (+ C) for b < batch (strided batches). op() transposes when trans_a / trans_b.
struct LtSpec {
  Precision precision;
  int m, n, k, batch;
  bool trans_a, trans_b;
  int bias;  // 0: none; 1: C is a length-n vector (the bias of a fully connected layer); 2: any other C
  // the activation fused as the epilogue (GemmAct): 0 none; 1 relu (CUBLASLT_EPILOGUE_RELU[_BIAS]);
  // 2 gelu, tanh form (CUBLASLT_EPILOGUE_GELU[_BIAS]); 3 gelu, erf form: the same epilogue as a
  // stand-in (cuBLASLt has no erf GELU), said in the note
  int activation = 0;
  // a backward epilogue (GemmActBackward, the gradient GEMMs of a training step; cublasLtEpilogue_t):
  // 0 none; 1 DRELU, 2 DRELU_BGRAD, 3 DGELU, 4 DGELU_BGRAD (D = (op(A) op(B)) * act'(aux), aux the
  // forward's ReLU bit-mask or GELU input, of D's shape; _BGRAD: the bias gradient, D summed over its
  // m rows, length n); 5 BGRADA (cuBLASLt's A, ONNX's op(B), summed over k: length n), 6 BGRADB
  // (cuBLASLt's B, ONNX's op(A), summed over k: length m). Names are cuBLASLt's: in ONNX's row-major
  // view cuBLASLt's A is ONNX's B and its column-major D (n x m) is Y (lt.cpp). With a backward
  // epilogue, bias and activation are 0.
  int backward = 0;
  // the layer's GELU is the erf form: cuBLASLt's DGELU (the tanh form's derivative) stands in, said in the note
  bool erf_stand_in = false;
};

// What run_lt_matmul times per job (see lt.cpp): every distinct config of the heuristic's list and
// the fastest pre-screened configs of cublasLtMatmulAlgoGetIds beyond it.
constexpr int kLtHeuristicRequest = 16;  // cublasLtMatmulAlgoGetHeuristic: requested (all timed)
constexpr int kLtExtraTimed = 8;         // AlgoGetIds configs timed beyond the heuristic's
constexpr int kLtFastAccumTimed = 4;     // fp8: the heuristic's first picks also with fast accumulation

// Record cublasLtMatmulAlgoGetHeuristic's ranking as choices, then time the configs above with
// Bench::measure. Allocates its own buffers; records every failure with its reason.
void run_lt_matmul(Bench& b, const LtSpec& spec);

}  // namespace benanza
