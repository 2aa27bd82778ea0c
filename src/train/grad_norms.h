// The gradient norms a step needs, in one pass over the gradient: the global norm (clipping,
// divergence detection, metrics) and the largest per-tensor norm (metrics). Each is the same
// double as its one-job twin (global_norm in train/optimizer.h, max_tensor_norm in
// train/telemetry.h), which stay as the references it is tested against.
#pragma once

#include "model/params.h"
#include "train/telemetry.h"

namespace drift {

struct GradNorms {
  double global = 0;        // sqrt(sum g^2) over the whole buffer, summed in double in index order
  TensorNormMax max_tensor; // per tensor: sqrt of its own sum (from zero, in index order)
};

// grads[0 .. table.total). The table's tensors must tile the buffer in order (ParamTable::add
// makes them so); a table that does not is a std::logic_error.
GradNorms gradient_norms(const ParamTable& table, const float* grads);

}  // namespace drift
