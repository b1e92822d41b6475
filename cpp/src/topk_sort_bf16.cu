// benanza's ONNX TopK by sort for __nv_bfloat16 keys (topk_sort.cuh: one CUB instantiation per translation unit).
#include "topk_sort.cuh"

BENANZA_TOPK_SORT_TYPE(__nv_bfloat16, bf16)
