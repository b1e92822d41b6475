// benanza's ONNX TopK by sort for int keys (topk_sort.cuh: one CUB instantiation per translation unit).
#include "topk_sort.cuh"

BENANZA_TOPK_SORT_TYPE(int, i32)
