#include "arith/cast_error.h"

#include <cmath>

namespace drift {

void CastErrorStats::merge(const CastErrorStats& o) {
  elements += o.elements;
  shrank += o.shrank;
  err_sq += o.err_sq;
  x_sq += o.x_sq;
  signed_err += o.signed_err;
  abs_x += o.abs_x;
}

double CastErrorStats::rel_error() const { return x_sq > 0 ? std::sqrt(err_sq / x_sq) : 0.0; }
double CastErrorStats::one_sidedness() const { return abs_x > 0 ? signed_err / abs_x : 0.0; }
double CastErrorStats::shrank_fraction() const {
  return elements ? static_cast<double>(shrank) / static_cast<double>(elements) : 0.0;
}

void BoundCheck::merge(const BoundCheck& o) {
  checked += o.checked;
  unchecked += o.unchecked;
  violations += o.violations;
  if (o.max_ratio > max_ratio) max_ratio = o.max_ratio;
}

void accumulate_cast_error(CastErrorStats& s, const StridedInput& x, const QuantizedOperand& q, bool hadamard) {
  if (hadamard) return;
  for (size_t r = 0; r < q.rows; ++r)
    for (size_t i = 0; i < q.k; ++i) {
      const double v = x.at(r, i);
      if (!std::isfinite(v)) continue;
      const double d = q.dequant(r, i) - v;
      ++s.elements;
      if (std::fabs(q.dequant(r, i)) < std::fabs(v)) ++s.shrank;
      s.err_sq += d * d;
      s.x_sq += v * v;
      s.signed_err += v > 0 ? d : (v < 0 ? -d : 0.0);
      s.abs_x += std::fabs(v);
    }
}

}  // namespace drift
