#include "train/grad_norms.h"

#include <cmath>
#include <stdexcept>

namespace drift {

double tensor_sum_squares(const float* g, size_t n) {
  // A single chain of dependent double adds runs at one element per add latency (about a fifth of
  // the memory speed); eight chains keep the adder busy and vectorise. The eight partial sums and
  // their combination are the definition, so vector width and compiler cannot change a bit.
  double p[kNormLanes] = {};
  size_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes)
    for (size_t l = 0; l < kNormLanes; ++l) p[l] += static_cast<double>(g[i + l]) * static_cast<double>(g[i + l]);
  for (size_t l = 0; i + l < n; ++l) p[l] += static_cast<double>(g[i + l]) * static_cast<double>(g[i + l]);
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

GradNorms gradient_norms(const ParamTable& table, const float* grads) {
  GradNorms r;
  r.max_tensor.norm = -1;
  bool max_final = false;  // a non-finite tensor norm ends the search, as in max_tensor_norm
  double total = 0;
  size_t next = 0;
  for (const auto& p : table.specs) {
    if (p.offset != next) throw std::logic_error("gradient_norms: tensor '" + p.name + "' does not follow the previous one");
    const double s = tensor_sum_squares(grads + p.offset, p.size);
    total += s;
    next = p.offset + p.size;
    const double n = std::sqrt(s);
    if (!max_final && (n > r.max_tensor.norm || !std::isfinite(n))) {
      r.max_tensor.norm = n;
      r.max_tensor.tensor = p.name;
      max_final = !std::isfinite(n);
    }
  }
  if (next != table.total) throw std::logic_error("gradient_norms: the tensors do not cover the parameter buffer");
  r.global = std::sqrt(total);
  return r;
}

}  // namespace drift
