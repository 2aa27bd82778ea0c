// Which range tests the narrow-accumulator kernel (matmul_narrow-inl.h) must make at every add of
// one call: proved once per call from the accumulator format and the operands' largest magnitudes,
// so that the kernel skips tests that cannot fire.
//
// The kernel rounds each sum to the narrow grid with a constant number of fp32 mantissa bits. That
// is the format's own rounding inside its normal range; outside it (a non-zero sum below the
// smallest normal, or beyond the largest finite value) a lane must be redone by the scalar core.
#pragma once

#include <cmath>
#include <cstddef>

#include "arith/format.h"
#include "arith/round.h"

namespace drift {

struct NarrowChecks {
  bool tiny = true;  // a non-zero sum may fall below the format's smallest normal
  bool huge = true;  // a sum may exceed the format's largest finite value
};

// f: the accumulator format (floating, man_bits <= 21, emin >= -126: what the kernel accepts);
// amax, bmax: the largest operand magnitudes (finite); kblock: products per inner sum.
inline NarrowChecks narrow_checks(const Format& f, const RoundSpec& round, double amax, double bmax,
                                  size_t kblock) {
  NarrowChecks c;
  // Tiny: where the format's smallest normal is fp32's (2^-126) and subnormals are kept, its
  // subnormals are every 2^(23 - man_bits)-th fp32 subnormal, so the constant-shift rounding is the
  // format's own there too (the kernel's fp32 sums are rounded to odd at fp32 subnormal precision,
  // at least 2 bits finer). Elsewhere (fp16: 2^-14; or flushing) the scalar core decides.
  c.tiny = !(f.emin == -126 && !flushes(f, round));
  // Huge: with P = amax * bmax, e = 2^-man_bits and d = 2^(emin - man_bits) (the format's subnormal
  // spacing), one rounding gives |fmt(y)| <= |y| (1 + e) + d (half an ulp of y in the normal range,
  // half the spacing below it), so the partial sums of a block obey |s_k| <= (|s_{k-1}| + P)(1 + e) + d
  // and |s_k| <= k (P + d) (1 + e)^k <= K (P + d) exp(K e). The bound is computed in double, where
  // each of its few roundings is below 2^-52 relative (exp within 1 ulp): the factor 1 + 2^-30
  // covers them all. Below the largest finite value, no sum can overflow.
  const double K = static_cast<double>(kblock);
  const double e = std::ldexp(1.0, -f.man_bits);
  const double d = std::ldexp(1.0, f.emin - f.man_bits);
  const double bound = K * (amax * bmax + d) * std::exp(K * e) * (1.0 + 0x1p-30);
  c.huge = !(bound <= f.max_finite);
  return c;
}

}  // namespace drift
