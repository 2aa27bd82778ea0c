// The sum of squares in Highway vectors, compiled once per SIMD target and dispatched at run time.
// The eight partial sums of the definition (grad_norms.h) are eight double lanes: one vector on
// AVX-512, two on AVX2, four on SSE4. Each lane performs the scalar loop's operations in its order
// (the float widened exactly, a multiply, an add; never a fused multiply-add), so every target gives
// the definition's bits. A single chain of dependent adds would run at one element per add latency;
// the compiler's own code for the scalar loop used 128-bit vectors only.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "train/grad_norms.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "train/grad_norms.h"

#include <cmath>
#include <stdexcept>

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// p[l] += g[i]^2 for i < n - n % 8, i = l mod 8, in index order (p: the eight partial sums).
void SumSquaresLanes(const float* g, size_t n, double* p) {
  const hn::CappedTag<double, kNormLanes> d;
  const hn::Rebind<float, decltype(d)> df;
  constexpr size_t kMaxVectors = kNormLanes;  // (a one-lane target: eight vectors of one lane)
  const size_t N = hn::Lanes(d), vectors = kNormLanes / N;
  hn::Vec<decltype(d)> acc[kMaxVectors];
  for (size_t v = 0; v < vectors; ++v) acc[v] = hn::LoadU(d, p + v * N);
  for (size_t i = 0; i + kNormLanes <= n; i += kNormLanes)
    for (size_t v = 0; v < vectors; ++v) {
      const auto x = hn::PromoteTo(d, hn::LoadU(df, g + i + v * N));
      acc[v] = hn::Add(acc[v], hn::Mul(x, x));
    }
  for (size_t v = 0; v < vectors; ++v) hn::StoreU(acc[v], d, p + v * N);
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(SumSquaresLanes);

double tensor_sum_squares(const float* g, size_t n) {
  double p[kNormLanes] = {};
  HWY_DYNAMIC_DISPATCH(SumSquaresLanes)(g, n, p);
  const size_t i = n - n % kNormLanes;
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
#endif  // HWY_ONCE
