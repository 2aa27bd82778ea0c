#include "arith/exact_dot.h"

#include <cmath>
#include <vector>

namespace drift {

namespace {

// The exact sum of the terms, rounded once to nearest-even (Shewchuk; CPython's math_fsum).
double exact_sum(const std::vector<double>& terms) {
  std::vector<double> partials;  // non-overlapping, increasing magnitude; their sum is exact
  for (double x : terms) {
    size_t i = 0;
    for (double y : partials) {
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);
      if (lo != 0) partials[i++] = lo;
      x = hi;
    }
    partials.resize(i);
    partials.push_back(x);
  }
  if (partials.empty()) return 0;
  size_t n = partials.size();
  double hi = partials[--n], lo = 0;
  while (n > 0) {  // add from the top until the sum becomes inexact
    const double x = hi, y = partials[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo != 0) break;
  }
  // Half-way cases: the rest decides the direction of the tie (round-half-even would be wrong).
  if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
    const double y = lo * 2, x = hi + y;
    if (y == x - hi) hi = x;
  }
  return hi;
}

}  // namespace

double exact_dot(const double* a, size_t a_stride, const double* b, size_t b_stride, size_t k) {
  std::vector<double> terms;
  terms.reserve(2 * k);
  double plain = 0;
  bool finite = true;
  for (size_t i = 0; i < k; ++i) {
    const double x = a[i * a_stride], y = b[i * b_stride];
    const double hi = x * y;
    plain += hi;
    if (!std::isfinite(hi)) {
      finite = false;
      continue;
    }
    terms.push_back(hi);
    terms.push_back(std::fma(x, y, -hi));  // the product's exact low part
  }
  return finite ? exact_sum(terms) : plain;
}

double ulp_of(double x, const Format& f) {
  if (f.kind != Kind::floating) return 1;
  const int emin = std::ilogb(f.min_normal), emax = std::ilogb(f.max_finite);
  int e = x == 0 || !std::isfinite(x) ? emin : std::ilogb(x);
  e = std::min(std::max(e, emin), emax);
  return std::ldexp(1.0, e - f.man_bits);
}

}  // namespace drift
