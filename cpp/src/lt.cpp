// cuBLASLt matmul algorithms for a GEMM layer config (Gemm, MatMul, batched MatMul).
//
// The problem is the one the cublasGemmEx benchmark times: the row-major ONNX product
// Y (m x n) = op(A) (m x k) * op(B) (k x n) as the column-major D (n x m) = op(B)^T * op(A)^T, so
// cuBLASLt's A is ONNX's B and its B is ONNX's A (strided batches for batched MatMul).
// Precision: fp32 = CUBLAS_COMPUTE_32F (cuBLASLt never uses TF32 with it: pure FMA); tf32 =
// CUBLAS_COMPUTE_32F_FAST_TF32; fp16 / bf16 = 16-bit data, CUBLAS_COMPUTE_32F; fp8 = E4M3 A and B,
// CUBLAS_COMPUTE_32F, per-tensor scales A/B (1.0, device pointers) and a float16 output (bfloat16
// when the heuristic has nothing for float16). cuBLASLt's FP8 kernels need the "TN" layout (its A
// transposed, its B not) and 16-byte aligned leading dimensions (cuBLAS documentation,
// cublasLtMatmul, FP8 requirements): the FP8 problem is timed in TN with k and n multiples of 16;
// other shapes are recorded as not_supported with the reason, other ONNX layouts are timed in TN
// with a note (a transposed copy of an operand, free for weights, is not timed).
// C: a length-n bias vector (Gemm's C of shape (n) or (1, n)) is CUBLASLT_EPILOGUE_BIAS; any other
// C is beta = 1 onto an output that holds it. A fused activation (LtSpec::activation, GemmAct
// candidates) is the epilogue RELU / GELU, with the bias vector RELU_BIAS / GELU_BIAS (bias added,
// then the activation). A backward epilogue (LtSpec::backward, the GemmActBackward kind of a training
// step) is DRELU / DGELU [_BGRAD] (D = product * act'(aux), the aux buffer holding the forward's ReLU
// bit-mask or GELU input; _BGRAD also writes D summed over its m rows) or BGRADA / BGRADB (cuBLASLt's
// A or B summed over k), with the bias gradient's and the aux's pointers, leading dimension and batch
// strides set (cublasLt.h, cublasLtMatmulDescAttributes_t); every config below is timed with it.
//
// What is timed, per job and with the harness's method (Bench::measure):
//   1. cublasLtMatmulAlgoGetHeuristic's list (kLtHeuristicRequest requested, workspace up to the
//      harness limit), recorded as choices in its order, every distinct config timed;
//   2. cublasLtMatmulAlgoGetIds: per algorithm id, cublasLtMatmulAlgoInit and the (tile, stages)
//      pairs its capabilities list (CUBLASLT_ALGO_CAP_TILE_IDS, STAGES_IDS), each checked with
//      cublasLtMatmulAlgoCheck (kMaxBaseChecks checks per job, shared by the ids). The valid ones
//      that the heuristic's list does not hold are pre-screened, ids in turn, each id's likeliest
//      first (full last wave, large tile): one warm call, then two calls between CUDA events, a
//      ranking and never a measurement. The kExpand fastest are expanded with split-K
//      (SPLITK_SUPPORT, each reduction scheme of REDUCTION_SCHEME_MASK), CTA swizzling and custom
//      options (CUSTOM_OPTION_MAX), checked (kMaxChecks in all) and pre-screened too (kMaxPrescreen
//      configs and kPrescreenBudgetMs per job), and the kLtExtraTimed fastest are timed. Cluster
//      shapes stay AUTO (the heuristic's configs carry the ones it picks);
//   3. fp8 only: the heuristic's first kLtFastAccumTimed configs with CUBLASLT_MATMUL_DESC_FAST_ACCUM
//      (math "fp8_fast_accum", as TransformerEngine's forward pass runs FP8 GEMMs).
// Each measurement's algorithm reads "lt:algo=ID tile=RxC stages=KxS splitK=N ..." and its details
// hold algo id, tile, stages, split-K, reduction scheme, swizzle, custom option, cluster shape,
// workspace, waves and where the config came from (heuristic rank or pre-screen rank).
#include "benanza/lt.hpp"

#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "benanza/cudnn_util.hpp"

namespace benanza {

namespace {

constexpr int kMaxAlgoIds = 128;          // cublasLtMatmulAlgoGetIds: requested
constexpr int kMaxChecks = 3000;          // cublasLtMatmulAlgoCheck calls per job (host only, microseconds)
constexpr int kMaxBaseChecks = 2000;      // of which for the (tile, stages) pairs; the rest for the variants
constexpr int kMinChecksPerId = 24;       // each algorithm id gets at least this many
constexpr int kMaxPrescreen = 96;         // configs pre-screened per job
constexpr int kMaxPrescreenBase = 48;     // of which (tile, stages) pairs with default options
constexpr double kPrescreenBudgetMs = 250.0;  // wall-clock budget of the pre-screen per job
constexpr int kExpand = 4;                // fastest base configs expanded with split-K, swizzle, options
constexpr int kMaxCustomOption = 7;       // custom options tried: 0..min(CUSTOM_OPTION_MAX, this)
const int kSplitK[] = {2, 3, 4, 6, 8, 16};
const uint32_t kReductions[] = {CUBLASLT_REDUCTION_SCHEME_INPLACE, CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE,
                                CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE};

// cublasLtMatmulTile_t id -> rows x cols of the C/D tile (cublasLt.h of cuBLAS 13.x: ids 1..645)
constexpr unsigned short kTiles[][2] = {
    {0, 0}, {8, 8}, {8, 16}, {16, 8}, {8, 32}, {16, 16}, {32, 8}, {8, 64}, {16, 32}, {32, 16}, {64, 8}, {32, 32},
    {32, 64}, {64, 32}, {32, 128}, {64, 64}, {128, 32}, {64, 128}, {128, 64}, {64, 256}, {128, 128}, {256, 64},
    {64, 512}, {128, 256}, {256, 128}, {512, 64}, {64, 96}, {96, 64}, {96, 128}, {128, 160}, {160, 128}, {192, 128},
    {128, 192}, {128, 96}, {32, 256}, {256, 32}, {8, 128}, {8, 192}, {8, 256}, {8, 320}, {8, 384}, {8, 448}, {8, 512},
    {8, 576}, {8, 640}, {8, 704}, {8, 768}, {16, 64}, {16, 128}, {16, 192}, {16, 256}, {16, 320}, {16, 384},
    {16, 448}, {16, 512}, {16, 576}, {16, 640}, {16, 704}, {16, 768}, {24, 64}, {24, 128}, {24, 192}, {24, 256},
    {24, 320}, {24, 384}, {24, 448}, {24, 512}, {24, 576}, {24, 640}, {24, 704}, {24, 768}, {32, 192}, {32, 320},
    {32, 384}, {32, 448}, {32, 512}, {32, 576}, {32, 640}, {32, 704}, {32, 768}, {40, 64}, {40, 128}, {40, 192},
    {40, 256}, {40, 320}, {40, 384}, {40, 448}, {40, 512}, {40, 576}, {40, 640}, {40, 704}, {40, 768}, {48, 64},
    {48, 128}, {48, 192}, {48, 256}, {48, 320}, {48, 384}, {48, 448}, {48, 512}, {48, 576}, {48, 640}, {48, 704},
    {48, 768}, {56, 64}, {56, 128}, {56, 192}, {56, 256}, {56, 320}, {56, 384}, {56, 448}, {56, 512}, {56, 576},
    {56, 640}, {56, 704}, {56, 768}, {64, 192}, {64, 320}, {64, 384}, {64, 448}, {64, 576}, {64, 640}, {64, 704},
    {64, 768}, {72, 64}, {72, 128}, {72, 192}, {72, 256}, {72, 320}, {72, 384}, {72, 448}, {72, 512}, {72, 576},
    {72, 640}, {80, 64}, {80, 128}, {80, 192}, {80, 256}, {80, 320}, {80, 384}, {80, 448}, {80, 512}, {80, 576},
    {88, 64}, {88, 128}, {88, 192}, {88, 256}, {88, 320}, {88, 384}, {88, 448}, {88, 512}, {96, 192}, {96, 256},
    {96, 320}, {96, 384}, {96, 448}, {96, 512}, {104, 64}, {104, 128}, {104, 192}, {104, 256}, {104, 320}, {104, 384},
    {104, 448}, {112, 64}, {112, 128}, {112, 192}, {112, 256}, {112, 320}, {112, 384}, {120, 64}, {120, 128},
    {120, 192}, {120, 256}, {120, 320}, {120, 384}, {128, 320}, {128, 384}, {136, 64}, {136, 128}, {136, 192},
    {136, 256}, {136, 320}, {144, 64}, {144, 128}, {144, 192}, {144, 256}, {144, 320}, {152, 64}, {152, 128},
    {152, 192}, {152, 256}, {152, 320}, {160, 64}, {160, 192}, {160, 256}, {168, 64}, {168, 128}, {168, 192},
    {168, 256}, {176, 64}, {176, 128}, {176, 192}, {176, 256}, {184, 64}, {184, 128}, {184, 192}, {184, 256},
    {192, 64}, {192, 192}, {192, 256}, {200, 64}, {200, 128}, {200, 192}, {208, 64}, {208, 128}, {208, 192},
    {216, 64}, {216, 128}, {216, 192}, {224, 64}, {224, 128}, {224, 192}, {232, 64}, {232, 128}, {232, 192},
    {240, 64}, {240, 128}, {240, 192}, {248, 64}, {248, 128}, {248, 192}, {256, 192}, {264, 64}, {264, 128},
    {272, 64}, {272, 128}, {280, 64}, {280, 128}, {288, 64}, {288, 128}, {296, 64}, {296, 128}, {304, 64}, {304, 128},
    {312, 64}, {312, 128}, {320, 64}, {320, 128}, {328, 64}, {328, 128}, {336, 64}, {336, 128}, {344, 64}, {344, 128},
    {352, 64}, {352, 128}, {360, 64}, {360, 128}, {368, 64}, {368, 128}, {376, 64}, {376, 128}, {384, 64}, {384, 128},
    {392, 64}, {400, 64}, {408, 64}, {416, 64}, {424, 64}, {432, 64}, {440, 64}, {448, 64}, {456, 64}, {464, 64},
    {472, 64}, {480, 64}, {488, 64}, {496, 64}, {504, 64}, {520, 64}, {528, 64}, {536, 64}, {544, 64}, {552, 64},
    {560, 64}, {568, 64}, {576, 64}, {584, 64}, {592, 64}, {600, 64}, {608, 64}, {616, 64}, {624, 64}, {632, 64},
    {640, 64}, {648, 64}, {656, 64}, {664, 64}, {672, 64}, {680, 64}, {688, 64}, {696, 64}, {704, 64}, {712, 64},
    {720, 64}, {728, 64}, {736, 64}, {744, 64}, {752, 64}, {760, 64}, {768, 64}, {64, 16}, {64, 24}, {64, 40},
    {64, 48}, {64, 56}, {64, 72}, {64, 80}, {64, 88}, {64, 104}, {64, 112}, {64, 120}, {64, 136}, {64, 144},
    {64, 152}, {64, 160}, {64, 168}, {64, 176}, {64, 184}, {64, 200}, {64, 208}, {64, 216}, {64, 224}, {64, 232},
    {64, 240}, {64, 248}, {64, 264}, {64, 272}, {64, 280}, {64, 288}, {64, 296}, {64, 304}, {64, 312}, {64, 328},
    {64, 336}, {64, 344}, {64, 352}, {64, 360}, {64, 368}, {64, 376}, {64, 392}, {64, 400}, {64, 408}, {64, 416},
    {64, 424}, {64, 432}, {64, 440}, {64, 456}, {64, 464}, {64, 472}, {64, 480}, {64, 488}, {64, 496}, {64, 504},
    {64, 520}, {64, 528}, {64, 536}, {64, 544}, {64, 552}, {64, 560}, {64, 568}, {64, 584}, {64, 592}, {64, 600},
    {64, 608}, {64, 616}, {64, 624}, {64, 632}, {64, 648}, {64, 656}, {64, 664}, {64, 672}, {64, 680}, {64, 688},
    {64, 696}, {64, 712}, {64, 720}, {64, 728}, {64, 736}, {64, 744}, {64, 752}, {64, 760}, {128, 8}, {128, 16},
    {128, 24}, {128, 40}, {128, 48}, {128, 56}, {128, 72}, {128, 80}, {128, 88}, {128, 104}, {128, 112}, {128, 120},
    {128, 136}, {128, 144}, {128, 152}, {128, 168}, {128, 176}, {128, 184}, {128, 200}, {128, 208}, {128, 216},
    {128, 224}, {128, 232}, {128, 240}, {128, 248}, {128, 264}, {128, 272}, {128, 280}, {128, 288}, {128, 296},
    {128, 304}, {128, 312}, {128, 328}, {128, 336}, {128, 344}, {128, 352}, {128, 360}, {128, 368}, {128, 376},
    {128, 392}, {128, 400}, {128, 408}, {128, 416}, {128, 424}, {128, 432}, {128, 440}, {128, 448}, {128, 456},
    {128, 464}, {128, 472}, {128, 480}, {128, 488}, {128, 496}, {128, 504}, {128, 512}, {192, 8}, {192, 16},
    {192, 24}, {192, 32}, {192, 40}, {192, 48}, {192, 56}, {192, 72}, {192, 80}, {192, 88}, {192, 96}, {192, 104},
    {192, 112}, {192, 120}, {192, 136}, {192, 144}, {192, 152}, {192, 160}, {192, 168}, {192, 176}, {192, 184},
    {192, 200}, {192, 208}, {192, 216}, {192, 224}, {192, 232}, {192, 240}, {192, 248}, {192, 264}, {192, 272},
    {192, 280}, {192, 288}, {192, 296}, {192, 304}, {192, 312}, {192, 320}, {192, 328}, {192, 336}, {256, 8},
    {256, 16}, {256, 24}, {256, 40}, {256, 48}, {256, 56}, {256, 72}, {256, 80}, {256, 88}, {256, 96}, {256, 104},
    {256, 112}, {256, 120}, {256, 136}, {256, 144}, {256, 152}, {256, 160}, {256, 168}, {256, 176}, {256, 184},
    {256, 200}, {256, 208}, {256, 216}, {256, 224}, {256, 232}, {256, 240}, {256, 248}, {256, 256}, {320, 8},
    {320, 16}, {320, 24}, {320, 32}, {320, 40}, {320, 48}, {320, 56}, {320, 72}, {320, 80}, {320, 88}, {320, 96},
    {320, 104}, {320, 112}, {320, 120}, {320, 136}, {320, 144}, {320, 152}, {320, 160}, {320, 168}, {320, 176},
    {320, 184}, {320, 192}, {320, 200}, {384, 8}, {384, 16}, {384, 24}, {384, 32}, {384, 40}, {384, 48}, {384, 56},
    {384, 72}, {384, 80}, {384, 88}, {384, 96}, {384, 104}, {384, 112}, {384, 120}, {384, 136}, {384, 144},
    {384, 152}, {384, 160}, {384, 168}, {448, 8}, {448, 16}, {448, 24}, {448, 32}, {448, 40}, {448, 48}, {448, 56},
    {448, 72}, {448, 80}, {448, 88}, {448, 96}, {448, 104}, {448, 112}, {448, 120}, {448, 128}, {448, 136},
    {448, 144}, {512, 8}, {512, 16}, {512, 24}, {512, 32}, {512, 40}, {512, 48}, {512, 56}, {512, 72}, {512, 80},
    {512, 88}, {512, 96}, {512, 104}, {512, 112}, {512, 120}, {512, 128}, {576, 8}, {576, 16}, {576, 24}, {576, 32},
    {576, 40}, {576, 48}, {576, 56}, {576, 72}, {576, 80}, {576, 88}, {576, 96}, {576, 104}, {576, 112}, {640, 8},
    {640, 16}, {640, 24}, {640, 32}, {640, 40}, {640, 48}, {640, 56}, {640, 72}, {640, 80}, {640, 88}, {640, 96},
    {704, 8}, {704, 16}, {704, 24}, {704, 32}, {704, 40}, {704, 48}, {704, 56}, {704, 72}, {704, 80}, {704, 88},
    {768, 8}, {768, 16}, {768, 24}, {768, 32}, {768, 40}, {768, 48}, {768, 56}, {768, 72}, {768, 80}, {256, 512},
    {256, 1024}, {512, 512}, {512, 1024}, {4, 1}, {8, 1}, {16, 1}, {24, 1}, {32, 1}, {40, 1}, {48, 1}, {64, 1},
    {128, 1}, {192, 1}, {256, 1},
};
// cublasLtMatmulStages_t id -> K-tile x stages ("" for unused ids)
const char* const kStages[] = {
    "auto", "16x1", "16x2", "16x3", "16x4", "16x5", "16x6", "32x1", "32x2", "32x3", "32x4", "32x5", "32x6", "64x1",
    "64x2", "64x3", "64x4", "64x5", "64x6", "128x1", "128x2", "128x3", "128x4", "128x5", "128x6", "32x10", "8x4",
    "16x10", "8x5", "", "", "8x3", "8xAUTO", "16xAUTO", "32xAUTO", "64xAUTO", "128xAUTO", "256xAUTO", "768xAUTO",
};
// cublasLtClusterShape_t id -> cluster shape
const char* const kClusters[] = {
    "auto", "", "1x1x1", "2x1x1", "4x1x1", "1x2x1", "2x2x1", "4x2x1", "1x4x1", "2x4x1", "4x4x1", "8x1x1", "1x8x1",
    "8x2x1", "2x8x1", "16x1x1", "1x16x1", "3x1x1", "5x1x1", "6x1x1", "7x1x1", "9x1x1", "10x1x1", "11x1x1", "12x1x1",
    "13x1x1", "14x1x1", "15x1x1", "3x2x1", "5x2x1", "6x2x1", "7x2x1", "1x3x1", "2x3x1", "3x3x1", "4x3x1", "5x3x1",
    "3x4x1", "1x5x1", "2x5x1", "3x5x1", "1x6x1", "2x6x1", "1x7x1", "2x7x1", "1x9x1", "1x10x1", "1x11x1", "1x12x1",
    "1x13x1", "1x14x1", "1x15x1",
};

std::string tile_name(uint32_t id) {
  if (id == 0) return "auto";
  if (id < sizeof kTiles / sizeof kTiles[0])
    return std::to_string(kTiles[id][0]) + "x" + std::to_string(kTiles[id][1]);
  return "#" + std::to_string(id);
}

std::string stages_name(uint32_t id) {
  if (id < sizeof kStages / sizeof kStages[0] && kStages[id][0]) return kStages[id];
  return "#" + std::to_string(id);
}

std::string cluster_name(uint16_t id) {
  if (id < sizeof kClusters / sizeof kClusters[0] && kClusters[id][0]) return kClusters[id];
  return "#" + std::to_string(id);
}

const char* reduction_name(uint32_t r) {
  switch (r) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "inplace";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "compute";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "output";
    default: return "?";
  }
}

// The configuration attributes of an algorithm (cublasLtMatmulAlgoConfigAttributes_t).
struct Config {
  int32_t id = -1;
  uint32_t tile = 0, stages = 0;
  int32_t splitk = 1;
  uint32_t reduction = 0, swizzle = 0, custom = 0;
  uint16_t inner = 0, cluster = 0;
  auto tie() const { return std::tie(id, tile, stages, splitk, reduction, swizzle, custom, inner, cluster); }
  bool operator<(const Config& o) const { return tie() < o.tie(); }
  bool operator==(const Config& o) const { return tie() == o.tie(); }
};

template <typename T>
T config_attr(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr, T fallback) {
  T v{};
  std::size_t written = 0;
  return cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS ? v
                                                                                                       : fallback;
}

Config read_config(const cublasLtMatmulAlgo_t& a) {
  Config c;
  c.id = config_attr<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID, -1);
  c.tile = config_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID, 0);
  c.stages = config_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, 0);
  c.splitk = config_attr<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1);
  c.reduction = config_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, 0);
  c.swizzle = config_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, 0);
  c.custom = config_attr<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, 0);
  c.inner = config_attr<uint16_t>(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, 0);
  c.cluster = config_attr<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, 0);
  return c;
}

// Apply the settable attributes of `c` to an algorithm initialised with c.id.
bool apply_config(cublasLtMatmulAlgo_t& a, const Config& c) {
  bool ok = cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile, sizeof c.tile) ==
            CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages, sizeof c.stages) ==
                 CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.splitk, sizeof c.splitk) ==
                 CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction,
                                                  sizeof c.reduction) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c.swizzle,
                                                  sizeof c.swizzle) == CUBLAS_STATUS_SUCCESS;
  ok = ok && cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c.custom,
                                                  sizeof c.custom) == CUBLAS_STATUS_SUCCESS;
  return ok;
}

// "lt:algo=21 tile=128x256 stages=64x3 splitK=1" (+ what differs from the defaults), at most 96
// characters (the database's algorithm column).
std::string algo_name(const Config& c, bool fast_accum) {
  std::string s = "lt:algo=" + std::to_string(c.id) + " tile=" + tile_name(c.tile) + " stages=" + stages_name(c.stages) +
                  " splitK=" + std::to_string(c.splitk);
  if (c.reduction) s += std::string(" red=") + reduction_name(c.reduction);
  if (c.swizzle) s += " swz=" + std::to_string(c.swizzle);
  if (c.custom) s += " opt=" + std::to_string(c.custom);
  if (c.cluster) s += " cl=" + cluster_name(c.cluster);
  if (c.inner) s += " in=" + std::to_string(c.inner);
  if (fast_accum) s += " fastacc";
  if (s.size() > 96) s.resize(96);
  return s;
}

// What one timed config is, as the JSON object stored in the measurement's details.
struct Origin {
  const char* source = "heuristic";  // heuristic | algo_ids
  int rank = 0;                       // heuristic rank, or pre-screen rank
  double prescreen_ms = -1;
};

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

std::string details_json(const Config& c, const Origin& o, std::size_t ws, float waves, const char* epilogue,
                         bool fast_accum, DType out_t, bool tn) {
  std::ostringstream j;
  j << "{\"library\":\"cublasLt\",\"source\":\"" << o.source << "\"";
  if (std::string(o.source) == "heuristic")
    j << ",\"heuristic_rank\":" << o.rank;
  else
    j << ",\"prescreen_rank\":" << o.rank << ",\"prescreen_ms\":" << json_number(o.prescreen_ms);
  j << ",\"algo_id\":" << c.id << ",\"tile\":\"" << tile_name(c.tile) << "\",\"tile_id\":" << c.tile
    << ",\"stages\":\"" << stages_name(c.stages) << "\",\"stages_id\":" << c.stages << ",\"split_k\":" << c.splitk
    << ",\"reduction_scheme\":\"" << reduction_name(c.reduction) << "\",\"swizzle\":" << c.swizzle
    << ",\"custom_option\":" << c.custom << ",\"cluster_shape\":\"" << cluster_name(c.cluster)
    << "\",\"inner_shape_id\":" << c.inner << ",\"workspace_bytes\":" << ws << ",\"waves\":" << json_number(waves)
    << ",\"epilogue\":\"" << epilogue << "\",\"output_dtype\":\"" << dtype_name(out_t) << "\"";
  if (fast_accum) j << ",\"fast_accum\":true";
  if (tn) j << ",\"layout\":\"TN\"";
  j << "}";
  return j.str();
}

// One cuBLASLt handle per process (the suite process drives one GPU).
cublasLtHandle_t lt_handle() {
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t x = nullptr;
    return cublasLtCreate(&x) == CUBLAS_STATUS_SUCCESS ? x : nullptr;
  }();
  return h;
}

const char* status_text(cublasStatus_t s) { return cublasGetStatusName(s); }

// The descriptors of one problem variant (epilogue, fast accumulation, output type).
struct Problem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, c_type = CUDA_R_32F, d_type = CUDA_R_32F;
  Problem() = default;
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;
  ~Problem() {
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

#define LT_TRY(call)                                                         \
  do {                                                                       \
    cublasStatus_t lt_s_ = (call);                                           \
    if (lt_s_ != CUBLAS_STATUS_SUCCESS) return std::string(status_text(lt_s_)) + " from " #call; \
  } while (0)

cublasStatus_t layout(cublasLtMatrixLayout_t* l, cudaDataType_t t, uint64_t rows, uint64_t cols, int64_t ld,
                      int32_t batch, int64_t stride) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(l, t, rows, cols, ld);
  if (s == CUBLAS_STATUS_SUCCESS && batch > 1) {
    s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
  }
  return s;
}

// The buffers of a backward epilogue (LtSpec::backward): the forward's aux (ReLU bit-mask or GELU
// input, D's shape, leading dimension and batch stride in elements: bits for the bit-mask) and the
// bias gradient's batch stride (elements).
struct EpilogueAux {
  const void* aux = nullptr;
  int64_t aux_ld = 0, aux_stride = 0, bias_stride = 0;
};

bool is_bgrad(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD || epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD ||
         epilogue == CUBLASLT_EPILOGUE_BGRADA || epilogue == CUBLASLT_EPILOGUE_BGRADB;
}

bool reads_aux(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_DRELU || epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD ||
         epilogue == CUBLASLT_EPILOGUE_DGELU || epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

// Build the descriptors; "" on success, else the failing call and its status. `bias`: the bias
// vector (BIAS epilogues) or the bias gradient's output (BGRAD epilogues). `sm_target` > 0 (an SM
// partition, BENANZA_SM_COUNT): CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, so that the heuristics rank
// the algorithms for that many SMs, as on a GPU of that size (a green context does not change the
// SM count the library reads from the device).
// FP8 block scaling (cuBLAS 12.9+, cublasLtMatmulMatrixScale_t): the scale mode of cuBLASLt's A (ONNX's B,
// the weights) and B (ONNX's A, the activations), -1 for the per-tensor scalar, and their FP32 scale arrays.
struct BlockScale {
  int a_mode = -1, b_mode = -1;
  const void* a_scale = nullptr;
  const void* b_scale = nullptr;
};

std::string build(Problem& pr, const LtSpec& s, DType out_t, uint32_t epilogue, bool fast_accum, const void* bias,
                  const void* scale, int sm_target, const EpilogueAux& ea = EpilogueAux{},
                  const BlockScale& blk = BlockScale{}) {
  const bool fp8 = s.precision == Precision::FP8;
  const DType in_t = storage_of(s.precision);
  pr.compute = s.precision == Precision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  pr.a_type = pr.b_type = cuda_dtype(in_t);
  pr.c_type = pr.d_type = cuda_dtype(out_t);
  LT_TRY(cublasLtMatmulDescCreate(&pr.op, pr.compute, CUDA_R_32F));
  if (sm_target > 0) {
    const int32_t target = sm_target;
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target, sizeof target));
  }
  // cuBLASLt's A is ONNX's B (n x k after op), its B is ONNX's A (k x m after op)
  const cublasOperation_t op_a = fp8 || s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = !fp8 && s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
  LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    if ((epilogue & CUBLASLT_EPILOGUE_BIAS) || is_bgrad(epilogue)) {
      LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
      if (is_bgrad(epilogue) && s.batch > 1)
        LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &ea.bias_stride,
                                              sizeof ea.bias_stride));
    }
    if (reads_aux(epilogue)) {
      LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ea.aux, sizeof ea.aux));
      LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ea.aux_ld, sizeof ea.aux_ld));
      if (s.batch > 1)
        LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &ea.aux_stride,
                                              sizeof ea.aux_stride));
    }
  }
  if (fp8 && blk.a_mode >= 0) {
    const int32_t am = blk.a_mode, bm = blk.b_mode;
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am));
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm));
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &blk.a_scale,
                                          sizeof blk.a_scale));
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &blk.b_scale,
                                          sizeof blk.b_scale));
  } else if (fp8) {
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale));
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof scale));
  }
  if (fp8) {
    const int8_t fast = fast_accum ? 1 : 0;
    LT_TRY(cublasLtMatmulDescSetAttribute(pr.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  }
  const uint64_t m = s.m, n = s.n, k = s.k;
  const int64_t sa = static_cast<int64_t>(n * k), sb = static_cast<int64_t>(k * m), sd = static_cast<int64_t>(n * m);
  if (op_a == CUBLAS_OP_N)
    LT_TRY(layout(&pr.la, pr.a_type, n, k, static_cast<int64_t>(n), s.batch, sa));
  else
    LT_TRY(layout(&pr.la, pr.a_type, k, n, static_cast<int64_t>(k), s.batch, sa));
  if (op_b == CUBLAS_OP_N)
    LT_TRY(layout(&pr.lb, pr.b_type, k, m, static_cast<int64_t>(k), s.batch, sb));
  else
    LT_TRY(layout(&pr.lb, pr.b_type, m, k, static_cast<int64_t>(m), s.batch, sb));
  LT_TRY(layout(&pr.lc, pr.c_type, n, m, static_cast<int64_t>(n), s.batch, sd));
  LT_TRY(layout(&pr.ld, pr.d_type, n, m, static_cast<int64_t>(n), s.batch, sd));
  return "";
}

// The heuristic's list for a problem (empty with the reason in *why when there is none).
std::vector<cublasLtMatmulHeuristicResult_t> heuristic(cublasLtHandle_t lt, const Problem& pr, std::size_t ws_limit,
                                                       int count, std::string* why) {
  std::vector<cublasLtMatmulHeuristicResult_t> out;
  cublasLtMatmulPreference_t pref = nullptr;
  if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) {
    *why = "cublasLtMatmulPreferenceCreate failed";
    return out;
  }
  const uint64_t limit = ws_limit;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit);
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<std::size_t>(count));
  int got = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, pr.op, pr.la, pr.lb, pr.lc, pr.ld, pref, count, res.data(), &got);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *why = std::string(status_text(st)) + " from cublasLtMatmulAlgoGetHeuristic";
    return out;
  }
  for (int i = 0; i < got; ++i)
    if (res[i].state == CUBLAS_STATUS_SUCCESS) out.push_back(res[i]);
  if (out.empty()) *why = "cublasLtMatmulAlgoGetHeuristic returned no algorithm";
  return out;
}

// Buffers and constants of the timed problem.
struct Operands {
  DType in_t, out_t;
  const void* a_lt;  // cuBLASLt's A: ONNX's B
  const void* b_lt;  // cuBLASLt's B: ONNX's A
  void* d;           // the output (holds C for beta = 1)
  std::size_t d_count;
  float alpha = 1.0f, beta = 0.0f;
};

Status launch(cublasLtHandle_t lt, const Problem& pr, const Operands& o, const cublasLtMatmulAlgo_t& algo, void* ws,
              std::size_t ws_size, cudaStream_t s) {
  BZ_CUBLAS(cublasLtMatmul(lt, pr.op, &o.alpha, o.a_lt, pr.la, o.b_lt, pr.lb, &o.beta, o.d, pr.lc, o.d, pr.ld, &algo,
                           ws, ws_size, s));
  return Status::success();
}

// Pre-screen: one warm call, then two calls between events. ms per call, or -1 when a call failed.
// Throws FatalError on a sticky CUDA error (the harness restarts the suite).
double prescreen(Bench& b, cublasLtHandle_t lt, const Problem& pr, const Operands& o, const cublasLtMatmulAlgo_t& algo,
                 std::size_t ws_size, cudaEvent_t e0, cudaEvent_t e1) {
  void* ws = nullptr;
  try {
    ws = b.workspace(ws_size);
  } catch (const JobError&) {
    return -1;
  }
  cudaStream_t s = b.stream();
  bool ok = launch(lt, pr, o, algo, ws, ws_size, s).ok;
  ok = ok && cudaEventRecord(e0, s) == cudaSuccess;
  for (int i = 0; ok && i < 2; ++i) ok = launch(lt, pr, o, algo, ws, ws_size, s).ok;
  ok = ok && cudaEventRecord(e1, s) == cudaSuccess;
  cudaError_t e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e != cudaSuccess) {
    try {
      check(e, "cublasLtMatmul (pre-screen)");  // FatalError when sticky
    } catch (const JobError&) {
    }
    return -1;
  }
  float ms = 0;
  if (!ok || cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) return -1;
  return ms / 2.0;
}

// The capabilities of one algorithm id (cublasLtMatmulAlgoCapAttributes_t).
struct Caps {
  std::vector<uint32_t> tiles, stages;
  int32_t splitk = 0, custom_max = 0;
  uint32_t reduction_mask = 0, swizzle = 0;
};

std::vector<uint32_t> cap_ids(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
  std::size_t bytes = 0;
  std::vector<uint32_t> v;
  if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, nullptr, 0, &bytes) == CUBLAS_STATUS_SUCCESS && bytes) {
    v.resize(bytes / sizeof(uint32_t));
    if (cublasLtMatmulAlgoCapGetAttribute(&a, attr, v.data(), v.size() * sizeof(uint32_t), &bytes) !=
        CUBLAS_STATUS_SUCCESS)
      v.clear();
  }
  if (v.empty()) v.push_back(0);  // UNDEFINED: the library chooses
  return v;
}

template <typename T>
T cap_attr(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  return cublasLtMatmulAlgoCapGetAttribute(&a, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS ? v : T{};
}

Caps read_caps(const cublasLtMatmulAlgo_t& a) {
  Caps c;
  c.tiles = cap_ids(a, CUBLASLT_ALGO_CAP_TILE_IDS);
  c.stages = cap_ids(a, CUBLASLT_ALGO_CAP_STAGES_IDS);
  c.splitk = cap_attr<int32_t>(a, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT);
  c.reduction_mask = cap_attr<uint32_t>(a, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK);
  c.swizzle = cap_attr<uint32_t>(a, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT);
  c.custom_max = cap_attr<int32_t>(a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX);
  return c;
}

// A config that cublasLtMatmulAlgoCheck accepted.
struct Candidate {
  Config config;
  cublasLtMatmulAlgo_t algo;
  std::size_t workspace = 0;
  float waves = 0;
  double prescreen_ms = -1;
};

// The job-wide state of the search.
struct Search {
  Bench& b;
  cublasLtHandle_t lt;
  const LtSpec& spec;
  const Problem& pr;
  const Operands& o;
  std::size_t ws_limit;
  int checks = 0;
  int over_limit = 0;
  std::size_t over_limit_max = 0;
  std::set<Config> seen;  // checked configs
};

// Check `c` (an algorithm initialised with c.id) unless `limit` checks were made; adds it to `out`
// when valid.
void check_config(Search& x, const Config& c, std::vector<Candidate>& out, int limit) {
  if (x.checks >= limit || !x.seen.insert(c).second) return;
  cublasLtMatmulAlgo_t algo;
  if (cublasLtMatmulAlgoInit(x.lt, x.pr.compute, CUDA_R_32F, x.pr.a_type, x.pr.b_type, x.pr.c_type, x.pr.d_type, c.id,
                             &algo) != CUBLAS_STATUS_SUCCESS ||
      !apply_config(algo, c))
    return;
  ++x.checks;
  cublasLtMatmulHeuristicResult_t r{};
  if (cublasLtMatmulAlgoCheck(x.lt, x.pr.op, x.pr.la, x.pr.lb, x.pr.lc, x.pr.ld, &algo, &r) != CUBLAS_STATUS_SUCCESS)
    return;
  if (r.workspaceSize > x.ws_limit) {
    ++x.over_limit;
    x.over_limit_max = std::max(x.over_limit_max, r.workspaceSize);
    return;
  }
  Candidate cand;
  cand.config = read_config(algo);
  cand.algo = algo;
  cand.workspace = r.workspaceSize;
  cand.waves = r.wavesCount;
  out.push_back(cand);
}

// Pre-screen `list` in order until the count or time budget is spent; returns the screened ones.
std::vector<Candidate> screen(Search& x, std::vector<Candidate> list, int max_count, double* budget_ms) {
  std::vector<Candidate> out;
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  const auto t0 = std::chrono::steady_clock::now();
  try {
    for (Candidate& c : list) {
      const double spent = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (static_cast<int>(out.size()) >= max_count || spent >= *budget_ms) break;
      c.prescreen_ms = prescreen(x.b, x.lt, x.pr, x.o, c.algo, c.workspace, e0, e1);
      if (c.prescreen_ms > 0) out.push_back(c);
    }
  } catch (...) {
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    throw;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  *budget_ms -= std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

// Round-robin over groups (one per algorithm id), so that a cut keeps every id represented.
std::vector<Candidate> interleave(std::vector<std::vector<Candidate>>& groups) {
  std::vector<Candidate> out;
  for (std::size_t i = 0;; ++i) {
    bool any = false;
    for (auto& g : groups)
      if (i < g.size()) {
        out.push_back(g[i]);
        any = true;
      }
    if (!any) return out;
  }
}

// cublasLtMatmulAlgoGetIds -> checked, pre-screened candidates, fastest first (heuristic configs excluded).
std::vector<Candidate> search_algo_ids(Search& x, const std::set<Config>& heuristic_configs, std::string* why) {
  std::vector<int> ids(kMaxAlgoIds);
  int nids = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetIds(x.lt, x.pr.compute, CUDA_R_32F, x.pr.a_type, x.pr.b_type,
                                                     x.pr.c_type, x.pr.d_type, kMaxAlgoIds, ids.data(), &nids);
  if (st != CUBLAS_STATUS_SUCCESS || nids <= 0) {
    *why = st != CUBLAS_STATUS_SUCCESS ? std::string(status_text(st)) + " from cublasLtMatmulAlgoGetIds"
                                       : "cublasLtMatmulAlgoGetIds returned no algorithm id";
    return {};
  }
  ids.resize(static_cast<std::size_t>(nids));
  const int per_id = std::max(kMinChecksPerId, kMaxBaseChecks / nids);
  std::map<int, Caps> caps;
  std::vector<std::vector<Candidate>> base(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(x.lt, x.pr.compute, CUDA_R_32F, x.pr.a_type, x.pr.b_type, x.pr.c_type, x.pr.d_type,
                               ids[i], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    const Caps& c = caps[ids[i]] = read_caps(algo);
    // every (tile, stages) pair, in rounds that give each tile another stages id (round r pairs
    // tile t with stages (t + r) mod count), until this id's share of checks is spent
    const std::size_t nt = c.tiles.size(), ns = c.stages.size();
    int used = 0;
    for (std::size_t r = 0; r < ns && used < per_id; ++r)
      for (std::size_t t = 0; t < nt && used < per_id; ++t, ++used) {
        Config cfg;
        cfg.id = ids[i];
        cfg.tile = c.tiles[t];
        cfg.stages = c.stages[(t + r) % ns];
        check_config(x, cfg, base[i], kMaxBaseChecks);
      }
  }
  auto drop_heuristic = [&](std::vector<Candidate>& v) {
    v.erase(std::remove_if(v.begin(), v.end(), [&](const Candidate& c) { return heuristic_configs.count(c.config); }),
            v.end());
  };
  // within an id, the configs likeliest to be fast first: full last waves (wavesCount / ceil) and
  // large tiles (less traffic per FLOP); for a problem smaller than one wave this prefers small tiles
  auto score = [](const Candidate& c) {
    const double waves = c.waves > 0 ? c.waves : 0.0;
    const double fill = waves > 0 ? waves / std::ceil(waves) : 0.0;
    const double area = c.config.tile < sizeof kTiles / sizeof kTiles[0]
                            ? static_cast<double>(kTiles[c.config.tile][0]) * kTiles[c.config.tile][1]
                            : 1.0;
    return fill * std::sqrt(std::max(area, 1.0));
  };
  for (auto& g : base) {
    drop_heuristic(g);
    std::stable_sort(g.begin(), g.end(), [&](const Candidate& a, const Candidate& b) { return score(a) > score(b); });
  }
  double budget = kPrescreenBudgetMs;
  std::vector<Candidate> screened = screen(x, interleave(base), kMaxPrescreenBase, &budget);
  std::sort(screened.begin(), screened.end(),
            [](const Candidate& a, const Candidate& b) { return a.prescreen_ms < b.prescreen_ms; });
  // the fastest base configs with split-K and its reduction schemes, CTA swizzling, custom options
  std::vector<std::vector<Candidate>> variants;
  for (int i = 0; i < kExpand && i < static_cast<int>(screened.size()); ++i) {
    const Config& c0 = screened[static_cast<std::size_t>(i)].config;
    const Caps& c = caps[c0.id];
    std::vector<Candidate> v;
    std::vector<std::pair<int32_t, uint32_t>> splits{{1, CUBLASLT_REDUCTION_SCHEME_NONE}};
    if (c.splitk)
      for (int sk : kSplitK)
        if (x.spec.k / sk >= 16)
          for (uint32_t r : kReductions)
            if (c.reduction_mask & r) splits.push_back({sk, r});
    for (const auto& [sk, red] : splits)
      for (uint32_t swz = 0; swz <= std::min<uint32_t>(c.swizzle, 1); ++swz)
        for (int32_t opt = 0; opt <= std::min(c.custom_max, kMaxCustomOption); ++opt) {
          Config cfg = c0;
          cfg.splitk = sk;
          cfg.reduction = red;
          cfg.swizzle = swz;
          cfg.custom = static_cast<uint32_t>(opt);
          check_config(x, cfg, v, kMaxChecks);
        }
    drop_heuristic(v);
    variants.push_back(std::move(v));
  }
  std::vector<Candidate> more =
      screen(x, interleave(variants), kMaxPrescreen - static_cast<int>(screened.size()), &budget);
  screened.insert(screened.end(), more.begin(), more.end());
  std::sort(screened.begin(), screened.end(),
            [](const Candidate& a, const Candidate& b) { return a.prescreen_ms < b.prescreen_ms; });
  if (screened.empty()) *why = "no config of cublasLtMatmulAlgoGetIds passed cublasLtMatmulAlgoCheck and ran";
  return screened;
}

// Time one config with the harness's method.
void time_config(Bench& b, cublasLtHandle_t lt, const Problem& pr, const Operands& o, const cublasLtMatmulAlgo_t& algo,
                 Call call) {
  if (b.skip_unwanted(call)) return;  // the prior's word, before its workspace and first call
  if (call.workspace > b.ctx().options().workspace_limit) {
    b.record(call, "skipped", "workspace of " + std::to_string(call.workspace) + " bytes exceeds the limit of " +
                                  std::to_string(b.ctx().options().workspace_limit));
    return;
  }
  void* ws = nullptr;
  try {
    ws = b.workspace(call.workspace);
  } catch (const JobError& e) {
    b.record(call, "failed", e.what());
    return;
  }
  const std::size_t ws_size = call.workspace;
  b.measure(call, [&, algo, ws, ws_size](cudaStream_t s) { return launch(lt, pr, o, algo, ws, ws_size, s); }, o.d,
            o.d_count, o.out_t);
}

// Block-scaled FP8 (step 4 of run_lt_matmul): for each pairing of scale modes, the heuristic's first
// kLtFastAccumTimed configs, timed; a pairing the library does not run (before cuBLAS 12.9, or off Hopper
// and Blackwell) is recorded as not_supported with the heuristic's reason. The scale arrays hold 1.0: the
// values do not change the work, their count is the modes' (cuBLASLt docs, "Block scaling"; rows rounded
// up to 4, ceil(k / 128) blocks along k).
void run_lt_block_scaled(Bench& b, cublasLtHandle_t lt, const LtSpec& s, const Operands& o, DType out_t,
                         std::size_t limit, const std::string& note) {
  static const struct {
    int a_mode, b_mode;
    const char* name;
  } kModes[] = {{CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                 "weights 128x128, activations 1x128"},
                {CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                 "weights 1x128, activations 1x128"}};
  const std::size_t kb = static_cast<std::size_t>((s.k + 127) / 128), batch = static_cast<std::size_t>(s.batch);
  const std::size_t rows_a = static_cast<std::size_t>((s.n + 3) / 4 * 4), rows_b = static_cast<std::size_t>((s.m + 3) / 4 * 4);
  void* scale_a = b.random(rows_a * kb * batch, DType::F32, 1.0f, 1.0f);
  void* scale_b = b.random(rows_b * kb * batch, DType::F32, 1.0f, 1.0f);
  for (const auto& mode : kModes) {
    const std::string source = std::string("cublasLtMatmulAlgoGetHeuristic(") + mode.name + ")";
    const std::string mnote = std::string("block-scaled FP8, ") + mode.name + (note.empty() ? "" : "; " + note);
    Problem pr;
    std::string why = build(pr, s, out_t, CUBLASLT_EPILOGUE_DEFAULT, false, nullptr, nullptr,
                            b.ctx().partition().sm_count, EpilogueAux{},
                            BlockScale{mode.a_mode, mode.b_mode, scale_a, scale_b});
    auto list = why.empty() ? heuristic(lt, pr, limit, kLtFastAccumTimed, &why) : std::vector<cublasLtMatmulHeuristicResult_t>{};
    if (list.empty()) {
      b.choice(source.c_str(), 0, "", "fp8_block128", why.substr(0, 60), 0);
      b.record(Call{"cublasLtMatmul", std::string("*, ") + mode.name, "fp8_block128", storage_of(s.precision), mnote, 0},
               "not_supported", "block-scaled FP8 (" + std::string(mode.name) + "): " + why);
      continue;
    }
    std::set<Config> timed;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Config c = read_config(list[i].algo);
      const std::string name = algo_name(c, false) + ", " + mode.name;
      b.choice(source.c_str(), static_cast<int>(i), name, "fp8_block128", "ok", list[i].workspaceSize);
      if (!timed.insert(c).second) continue;
      Call cl{"cublasLtMatmul", name, "fp8_block128", storage_of(s.precision), mnote, list[i].workspaceSize};
      cl.details = details_json(c, Origin{"heuristic", static_cast<int>(i), -1}, list[i].workspaceSize,
                                list[i].wavesCount, "DEFAULT", false, out_t, s.trans_a || !s.trans_b);
      time_config(b, lt, pr, o, list[i].algo, cl);
    }
  }
}

}  // namespace

void run_lt_matmul(Bench& b, const LtSpec& s) {
  const Precision p = s.precision;
  const bool fp8 = p == Precision::FP8;
  const DType in_t = storage_of(p);
  const char* math = math_label(p);
  const bool vec = s.bias == 1;
  uint32_t epilogue = vec ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  const char* epilogue_name = vec ? "BIAS" : "DEFAULT";
  if (s.activation == 1) {
    epilogue = vec ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    epilogue_name = vec ? "RELU_BIAS" : "RELU";
  } else if (s.activation == 2 || s.activation == 3) {
    epilogue = vec ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    epilogue_name = vec ? "GELU_BIAS" : "GELU";
  }
  // a backward epilogue (the gradient GEMMs of a training step)
  static const struct {
    uint32_t epilogue;
    const char* name;
  } kBackward[] = {{CUBLASLT_EPILOGUE_DEFAULT, "DEFAULT"},       {CUBLASLT_EPILOGUE_DRELU, "DRELU"},
                   {CUBLASLT_EPILOGUE_DRELU_BGRAD, "DRELU_BGRAD"}, {CUBLASLT_EPILOGUE_DGELU, "DGELU"},
                   {CUBLASLT_EPILOGUE_DGELU_BGRAD, "DGELU_BGRAD"}, {CUBLASLT_EPILOGUE_BGRADA, "BGRADA"},
                   {CUBLASLT_EPILOGUE_BGRADB, "BGRADB"}};
  const bool backward = s.backward != 0;
  if (backward) {
    if (s.backward < 0 || s.backward > 6 || s.bias || s.activation) {
      b.record(Call{"cublasLtMatmul", "*", math, in_t, "", 0}, "failed",
               "invalid backward epilogue spec: code " + std::to_string(s.backward) + " with bias " +
                   std::to_string(s.bias) + ", activation " + std::to_string(s.activation));
      return;
    }
    epilogue = kBackward[s.backward].epilogue;
    epilogue_name = kBackward[s.backward].name;
  }
  const std::string call_name =
      epilogue == CUBLASLT_EPILOGUE_DEFAULT ? "cublasLtMatmul" : std::string("cublasLtMatmul(EPILOGUE_") + epilogue_name + ")";
  std::string note = s.bias == 2 ? "C as beta=1 onto the output" : "";
  if (backward && s.erf_stand_in)
    note = "erf GELU's gradient timed with cuBLASLt's DGELU epilogue (the tanh approximation's derivative): same "
           "work, different rounding";
  if (s.activation == 3)
    note += std::string(note.empty() ? "" : "; ") +
            "erf GELU timed with cuBLASLt's GELU epilogue (its tanh approximation, as PyTorch uses it): same work, "
            "different rounding";
  const bool tn_changed = fp8 && (s.trans_a || !s.trans_b);
  if (tn_changed)
    note += std::string(note.empty() ? "" : "; ") +
            "FP8 needs the TN layout: timed with B stored n x k and A m x k (row-major); the ONNX layout is " +
            (s.trans_a ? "T" : "N") + (s.trans_b ? "T" : "N") + ", its transpose is not timed";
  const std::size_t limit = b.ctx().options().workspace_limit;
  Call any{call_name, "*", math, in_t, note, 0};
  cublasLtHandle_t lt = lt_handle();
  if (!lt) {
    b.record(any, "failed", "cublasLtCreate failed");
    return;
  }
  if (fp8 && backward) {
    b.record(any, "not_supported", "backward epilogues are timed in fp32/tf32/fp16/bf16, not FP8 (E4M3)");
    return;
  }
  if (fp8 && (s.k % 16 || s.n % 16)) {
    b.record(any, "not_supported",
             "cuBLASLt FP8 (E4M3) needs 16-byte aligned leading dimensions: k and n multiples of 16, got k=" +
                 std::to_string(s.k) + " n=" + std::to_string(s.n));
    return;
  }
  // the output type: the input type; fp8: float16, or bfloat16 when the heuristic has nothing for it
  DType out_t = in_t;
  std::string why;
  if (fp8) {
    out_t = DType::F16;
    Problem probe;
    std::string err = build(probe, s, out_t, epilogue, false, nullptr, nullptr, b.ctx().partition().sm_count);
    if (!err.empty() || heuristic(lt, probe, limit, 1, &why).empty()) out_t = DType::BF16;
  }
  const std::size_t batch = static_cast<std::size_t>(s.batch);
  const std::size_t mk = static_cast<std::size_t>(s.m) * s.k, kn = static_cast<std::size_t>(s.k) * s.n,
                    mn = static_cast<std::size_t>(s.m) * s.n;
  const float range = weight_range(static_cast<std::size_t>(s.k));
  Operands o{in_t, out_t, nullptr, nullptr, nullptr, batch * mn};
  o.b_lt = b.random(batch * mk, in_t);                // ONNX A
  o.a_lt = b.random(batch * kn, in_t, -range, range);  // ONNX B
  o.d = b.random(batch * mn, out_t);
  o.beta = s.bias == 2 ? 1.0f : 0.0f;
  void* bias = s.bias == 1 ? b.random(static_cast<std::size_t>(s.n), out_t) : nullptr;
  void* scale = fp8 ? b.random(1, DType::F32, 1.0f, 1.0f) : nullptr;
  // a backward epilogue's buffers: the forward's aux of D's shape (n x m column-major per batch: a
  // ReLU bit-mask with a leading dimension of n rounded up to 128 bits, a GELU input of n rounded up
  // to 8 elements: cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD) and the bias gradient (length n;
  // BGRADB: m)
  EpilogueAux ea;
  if (backward) {
    const bool relu = s.backward == 1 || s.backward == 2;
    const int64_t rows = s.n;
    ea.aux_ld = relu ? (rows + 127) / 128 * 128 : (rows + 7) / 8 * 8;
    ea.aux_stride = ea.aux_ld * s.m;
    if (reads_aux(epilogue)) {
      const std::size_t total = static_cast<std::size_t>(ea.aux_stride) * batch;
      // the bit-mask: random bits (any pattern is a mask), as float32 words; the GELU input: random values
      ea.aux = relu ? b.random((total / 8 + 3) / 4, DType::F32) : b.random(total, out_t);
    }
    if (is_bgrad(epilogue)) {
      ea.bias_stride = s.backward == 6 ? s.m : s.n;
      bias = b.random(static_cast<std::size_t>(ea.bias_stride) * batch, out_t);
    }
  }

  // 1. the heuristic's list: recorded as choices, every distinct config timed
  Problem pr;
  std::string err = build(pr, s, out_t, epilogue, false, bias, scale, b.ctx().partition().sm_count, ea);
  if (!err.empty()) {
    b.record(any, "not_supported", "cuBLASLt descriptors: " + err);
    return;
  }
  const char* source = "cublasLtMatmulAlgoGetHeuristic";
  auto list = heuristic(lt, pr, limit, kLtHeuristicRequest, &why);
  if (list.empty()) {
    b.choice(source, 0, "", math, why.substr(0, 60), 0);
    b.record(any, "not_supported", why);
    return;
  }
  std::set<Config> timed;
  const int cap = b.ctx().options().max_engines;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Config c = read_config(list[i].algo);
    const std::string name = algo_name(c, false);
    b.choice(source, static_cast<int>(i), name, math, "ok", list[i].workspaceSize);
    if (cap > 0 && static_cast<int>(timed.size()) >= cap) continue;  // recorded as a choice, not timed
    if (!timed.insert(c).second) continue;
    Call cl{call_name, name, math, in_t, note, list[i].workspaceSize};
    cl.details = details_json(c, Origin{"heuristic", static_cast<int>(i), -1}, list[i].workspaceSize,
                              list[i].wavesCount, epilogue_name, false, out_t, tn_changed);
    time_config(b, lt, pr, o, list[i].algo, cl);
  }

  // 2. cublasLtMatmulAlgoGetIds: checked, pre-screened, the fastest beyond the heuristic's timed
  std::set<std::string> heuristic_names;
  for (const auto& h : list) heuristic_names.insert(algo_name(read_config(h.algo), false));
  if (cap > 0) {
    b.record(Call{call_name, "lt:algo_ids", math, in_t, note, 0}, "skipped",
             "algo-id search off under --max-engines " + std::to_string(cap));
  } else if (!b.prior_wants_other(call_name, heuristic_names)) {
    // the prior ranks none of the search's finds as a contender (nor samples one): the search is skipped
    b.record(Call{call_name, "lt:algo_ids", math, in_t, note, 0}, "skipped", b.ctx().options().prior->message());
  } else {
    Search x{b, lt, s, pr, o, limit};
    std::string ids_why;
    std::vector<Candidate> found = search_algo_ids(x, timed, &ids_why);
    if (found.empty())
      b.record(Call{call_name, "lt:algo_ids", math, in_t, note, 0}, "not_supported", ids_why);
    int extra = 0;
    for (std::size_t i = 0; i < found.size() && extra < kLtExtraTimed; ++i) {
      if (!timed.insert(found[i].config).second) continue;
      ++extra;
      Call cl{call_name, algo_name(found[i].config, false), math, in_t, note, found[i].workspace};
      cl.details = details_json(found[i].config, Origin{"algo_ids", static_cast<int>(i), found[i].prescreen_ms},
                                found[i].workspace, found[i].waves, epilogue_name, false, out_t, tn_changed);
      time_config(b, lt, pr, o, found[i].algo, cl);
    }
    if (x.over_limit)
      b.record(Call{call_name, "lt:algo_ids(workspace)", math, in_t, note, x.over_limit_max}, "skipped",
               std::to_string(x.over_limit) + " configs of cublasLtMatmulAlgoGetIds need more workspace than the limit of " +
                   std::to_string(limit) + " bytes (up to " + std::to_string(x.over_limit_max) + ")");
  }

  // 3. fp8: the heuristic's first picks with fast accumulation
  if (fp8) {
    Problem fast;
    err = build(fast, s, out_t, epilogue, true, bias, scale, b.ctx().partition().sm_count);
    const char* fast_source = "cublasLtMatmulAlgoGetHeuristic(fast_accum)";
    auto flist = err.empty() ? heuristic(lt, fast, limit, kLtFastAccumTimed, &why) : decltype(list){};
    if (!err.empty()) why = err;
    if (flist.empty()) b.choice(fast_source, 0, "", "fp8_fast_accum", why.substr(0, 60), 0);
    std::set<Config> fast_timed;
    for (std::size_t i = 0; i < flist.size(); ++i) {
      const Config c = read_config(flist[i].algo);
      const std::string name = algo_name(c, true);
      b.choice(fast_source, static_cast<int>(i), name, "fp8_fast_accum", "ok", flist[i].workspaceSize);
      if (!fast_timed.insert(c).second) continue;
      Call cl{call_name, name, "fp8_fast_accum", in_t, note, flist[i].workspaceSize};
      cl.details = details_json(c, Origin{"heuristic", static_cast<int>(i), -1}, flist[i].workspaceSize,
                                flist[i].wavesCount, epilogue_name, true, out_t, tn_changed);
      time_config(b, lt, fast, o, flist[i].algo, cl);
    }
  }

  // 4. fp8: block-scaled FP8 as DeepSeek-V3 and Qwen3-FP8 ship it (FP32 scales: the activations' per 1 x 128
  //    block along k, the weights' per 128 x 128 block, or 1 x 128 for both), math "fp8_block128"
  if (fp8 && epilogue == CUBLASLT_EPILOGUE_DEFAULT && s.bias == 0) run_lt_block_scaled(b, lt, s, o, out_t, limit, note);
}

}  // namespace benanza
