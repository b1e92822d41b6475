// benanza's ONNX TopK by sort for float keys (topk_sort.cuh: one CUB instantiation per translation unit).
#include "topk_sort.cuh"

BENANZA_TOPK_SORT_TYPE(float, f32)
