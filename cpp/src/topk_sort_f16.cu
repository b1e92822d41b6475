// benanza's ONNX TopK by sort for __half keys (topk_sort.cuh: one CUB instantiation per translation unit).
#include "topk_sort.cuh"

BENANZA_TOPK_SORT_TYPE(__half, f16)
