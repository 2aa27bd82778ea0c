// The gradient norms a step needs, in one pass over the gradient: the global norm (clipping,
// divergence detection, metrics) and the largest per-tensor norm (metrics).
//
// Definition (in double; each square of a float is exact in double):
//   s(t)   = tensor t's sum of squares, in kNormLanes = 8 interleaved partial sums (partial l adds
//            g[i]^2 for the tensor's own indices i = l mod 8, in index order, from +0), combined as
//            ((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7));
//   global = sqrt(s(t0) + s(t1) + ...), the tensor sums added in table order from +0;
//   tensor norm = sqrt(s(t)).
#pragma once

#include <cstddef>

#include "model/params.h"
#include "train/telemetry.h"

namespace drift {

constexpr size_t kNormLanes = 8;

struct GradNorms {
  double global = 0;        // sqrt of the sum of the tensor sums, in table order
  TensorNormMax max_tensor; // the largest sqrt(s(t)); the first non-finite one wins
};

// s(t) above for one tensor's n gradients.
double tensor_sum_squares(const float* g, size_t n);

// grads[0 .. table.total). The table's tensors must tile the buffer in order (ParamTable::add
// makes them so); a table that does not is a std::logic_error.
GradNorms gradient_norms(const ParamTable& table, const float* grads);

}  // namespace drift
