#include "diag/grad_quality.h"

#include <cmath>
#include <limits>

namespace drift {

GradQuality grad_quality(const float* g, const double* ref, size_t n) {
  double gg = 0, rr = 0, gr = 0, ee = 0, er = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = g[i], r = ref[i], e = x - r;
    gg += x * x;
    rr += r * r;
    gr += x * r;
    ee += e * e;
    er += e * r;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  GradQuality q;
  q.cosine = gg > 0 && rr > 0 ? gr / (std::sqrt(gg) * std::sqrt(rr)) : nan;
  q.rel_error = rr > 0 ? std::sqrt(ee / rr) : nan;
  q.bias = rr > 0 ? er / rr : nan;
  return q;
}

std::vector<NamedGradQuality> grad_quality_by_tensor(const ParamTable& table, const float* g, const double* ref) {
  std::vector<NamedGradQuality> out;
  for (const auto& p : table.specs) out.push_back({p.name, grad_quality(g + p.offset, ref + p.offset, p.size)});
  out.push_back({"overall", grad_quality(g, ref, table.total)});
  return out;
}

}  // namespace drift
