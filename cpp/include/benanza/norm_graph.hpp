// The tensors of the row-wise norm graphs (cuDNN graph API layernorm, rmsnorm and their backward
// nodes; NormSpec: rows x cols, normalized over cols), laid out as cudnn-frontend's norm samples
// lay them out (samples/cpp/norm/layernorm.cpp, rmsnorm.cpp): the rows [rows, cols, 1, 1] packed
// (X, Y, dY, dX), the per-column scale and bias [1, cols, 1, 1] in float32, the per-row statistics
// (mean, inv_variance) [rows, 1, 1, 1] in float32. Include only where cudnn_frontend.h is available
// (BENANZA_WITH_FRONTEND).
#pragma once

#include <cudnn_frontend.h>

#include <cstdint>
#include <memory>

#include "benanza/transformer.hpp"

namespace benanza {

using GraphTensor = std::shared_ptr<cudnn_frontend::graph::Tensor_attributes>;

// A [rows, cols, 1, 1] tensor of the graph's I/O type.
inline GraphTensor norm_rows(cudnn_frontend::graph::Graph& g, const NormSpec& c, const char* name, int64_t uid) {
  return g.tensor(cudnn_frontend::graph::Tensor_attributes().set_name(name).set_uid(uid)
                      .set_dim({c.rows, c.cols, 1, 1}).set_stride({c.cols, 1, c.cols, c.cols}));
}

// A [1, cols, 1, 1] float32 tensor (scale, bias).
inline GraphTensor norm_param(cudnn_frontend::graph::Graph& g, const NormSpec& c, const char* name, int64_t uid) {
  return g.tensor(cudnn_frontend::graph::Tensor_attributes().set_name(name).set_uid(uid)
                      .set_dim({1, c.cols, 1, 1}).set_stride({c.cols, 1, c.cols, c.cols})
                      .set_data_type(cudnn_frontend::DataType_t::FLOAT));
}

// A [rows, 1, 1, 1] float32 tensor (the saved mean, inv_variance).
inline GraphTensor norm_stats(cudnn_frontend::graph::Graph& g, const NormSpec& c, const char* name, int64_t uid) {
  return g.tensor(cudnn_frontend::graph::Tensor_attributes().set_name(name).set_uid(uid)
                      .set_dim({c.rows, 1, 1, 1}).set_stride({1, 1, 1, 1})
                      .set_data_type(cudnn_frontend::DataType_t::FLOAT));
}

}  // namespace benanza
