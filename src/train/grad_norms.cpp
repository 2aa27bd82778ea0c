#include "train/grad_norms.h"

#include <cmath>
#include <stdexcept>

namespace drift {

namespace {

// Two running sums of g^2 over g[0..n), each in index order: the tensor's own (from zero, into
// *tensor) and the global one (continued in *total). They are independent chains, so one pass
// costs what one sum costs. (A function of its own, with plain locals, keeps both sums in
// registers: written inline in the loop over tensors, GCC 12 keeps the total in memory and the
// pass takes three times as long.)
[[gnu::noinline]] void sum_squares(const float* g, size_t n, double* tensor, double* total) {
  double s = 0, t = *total;
  for (size_t i = 0; i < n; ++i) {
    const double sq = static_cast<double>(g[i]) * static_cast<double>(g[i]);
    s += sq;
    t += sq;
  }
  *tensor = s;
  *total = t;
}

}  // namespace

GradNorms gradient_norms(const ParamTable& table, const float* grads) {
  GradNorms r;
  r.max_tensor.norm = -1;
  bool max_final = false;  // a non-finite tensor norm ends the search, as in max_tensor_norm
  double total = 0;
  size_t next = 0;
  for (const auto& p : table.specs) {
    if (p.offset != next) throw std::logic_error("gradient_norms: tensor '" + p.name + "' does not follow the previous one");
    double s = 0;
    sum_squares(grads + p.offset, p.size, &s, &total);
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
