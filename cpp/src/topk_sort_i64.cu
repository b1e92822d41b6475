// benanza's ONNX TopK by sort for long long keys (topk_sort.cuh: one CUB instantiation per translation unit).
#include "topk_sort.cuh"

BENANZA_TOPK_SORT_TYPE(long long, i64)
