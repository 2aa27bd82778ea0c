// floor(log2 a) as a program computes it with a float32 log2: floor(RN_fp32(log2 a)), where the
// exact log2 is rounded once to the nearest float32. For an a just below a power of two 2^L the
// rounded logarithm can be the integer L itself, so the floor is one above floor(log2 a): the
// shared-exponent departure of microxcaling's Python MX quantizer (docs/policy.md, "microxcaling
// emulation"). A real libm's log2f may differ from correct rounding on rare inputs; this is the model.
//
// Decided exactly, never with a log: log2 a = e + log2 m (a = m 2^e, 1 <= m < 2) rounds up to
// L = e + 1 exactly when log2 m > 1 - h, h half the float32 spacing just below L (toward -inf).
// h = 2^-k with 14 <= k <= 25 for every double a (|L| <= 1075; L = 0 never rounds up: float32 is
// dense near 0), and 1 - h is not a logarithm of a rational, so there are no ties. The threshold
// significand for each k is found once, on the host, by interval arithmetic (log2_fp32.cpp).
#pragma once

#include <cstdint>

#include "arith/hostdevice.h"

namespace drift {

struct Log2Fp32Table {
  static constexpr int kMin = 14, kMax = 25;
  // up[k - kMin]: the smallest 53-bit significand S (m = S / 2^52) with log2(m) > 1 - 2^-k.
  uint64_t up[kMax - kMin + 1] = {};
};

// The table (computed on first use; throws std::logic_error if the arithmetic could not decide,
// which the tests show it never does).
const Log2Fp32Table& log2_fp32_table();

// floor(RN_fp32(log2 a)) for a finite a > 0.
DRIFT_HD int floor_log2_rn_fp32(double a, const Log2Fp32Table& t) {
  int e, top;
  uint64_t sig;
  unpack_double(a, &e, &sig, &top);
  const uint64_t s = sig << (52 - top);  // the significand with its leading bit at 2^52
  const int L = e + 1;
  if (L == 0) return e;
  const int n = L > 0 ? L : -L;
  int j = 0;
  while ((n >> (j + 1)) != 0) ++j;  // floor(log2 |L|)
  // Half the float32 spacing just below L: 2^(j-25) when L is a positive power of two (the binade
  // below it is finer), 2^(j-24) otherwise.
  const int k = (L > 0 && (n & (n - 1)) == 0) ? 25 - j : 24 - j;
  return s >= t.up[k - Log2Fp32Table::kMin] ? L : e;
}

}  // namespace drift
