// Correctly rounded scalar operations: the exact result of a+b, a*b or a*b+c rounded once to a
// format. Used by `drift arith` (to check the core against other implementations) and by the
// engine where one rounded add is meant. op_add, op_mul and op_div are host/device (the CUDA kernels
// round their sums, products and scales here); the rest is host code.
#pragma once

#include <cmath>

#include "arith/round.h"

namespace drift {

// Sign of an exact zero sum (IEEE 754 6.3): +0 unless both addends are zeros of the same sign,
// or rounding is toward -inf (then -0).
DRIFT_HD double zero_sum_sign(double a, double b, const RoundSpec& spec) {
  if (a == 0 && b == 0 && sign_bit(a) == sign_bit(b)) return a;
  return signed_zero(spec.mode == Rounding::rdn);
}

DRIFT_HD double exact_sum_rounded(double a, double b, const Format& f, const RoundSpec& spec, uint32_t rnd) {
  double hi, lo;
  two_sum(a, b, &hi, &lo);
  if (is_inf(hi) && !is_inf(a) && !is_inf(b) && !is_nan(a) && !is_nan(b))
    return overflow_value(sign_bit(hi), f, spec);  // the exact sum left double's range
  if (hi == 0 && lo == 0 && !is_nan(a) && !is_nan(b)) return round_to(zero_sum_sign(a, b, spec), f, spec, rnd);
  if (is_nan(lo)) lo = 0;  // hi is inf or NaN already
  return round_to_sum(hi, lo, f, spec, rnd);
}

DRIFT_HD double op_add(double a, double b, const Format& f, const RoundSpec& spec, uint32_t rnd = 0) {
  return exact_sum_rounded(a, b, f, spec, rnd);
}

DRIFT_HD double op_mul(double a, double b, const Format& f, const RoundSpec& spec, uint32_t rnd = 0) {
  const double p = a * b;
  if (is_nan(p) || p == 0) return round_to(p, f, spec, rnd);
  if (is_inf(p) && !is_inf(a) && !is_inf(b)) return overflow_value(sign_bit(p), f, spec);
  if (is_inf(p)) return round_to(p, f, spec, rnd);
  const double e = fused_multiply_add(a, b, -p);  // exact when the product is not subnormal in double
  return round_to_sum(p, e, f, spec, rnd);
}

// a*b + c with one rounding. Requires the product to be exact in double (significands of at most
// 26 bits: every format up to fp32); callers check exact_products_in_double().
inline double op_fma(double a, double b, double c, const Format& f, const RoundSpec& spec, uint32_t rnd = 0) {
  const double p = a * b;
  return exact_sum_rounded(p, c, f, spec, rnd);
}

inline bool exact_products_in_double(const Format& f) { return f.kind != Kind::floating || f.man_bits <= 25; }

// a / b rounded once to f (deterministic modes exact for quotients above 2^-960; the remainder's
// sign decides ties and directions). Used for scale factors, which recipes compute as one fp32
// division (host and device: the CUDA quantizers compute block scales with it).
DRIFT_HD double op_div(double a, double b, const Format& f, const RoundSpec& spec) {
  const double r = a / b;
  if (is_nan(r) || is_inf(r) || r == 0 || is_inf(a) || is_inf(b)) return round_to(r, f, spec);
  const double rem = fused_multiply_add(-r, b, a);  // exact: a - r*b
  if (rem == 0) return round_to(r, f, spec);
  // The exact quotient is r + rem/b with |rem/b| < ulp(r)/2; only its sign and non-zeroness matter
  // to deterministic modes, and a tiny stand-in of that sign keeps round_to_sum's contract.
  const double lo = (sign_bit(rem) != sign_bit(b)) ? -abs_of(r) * 0x1p-60 : abs_of(r) * 0x1p-60;
  return round_to_sum(r, lo, f, spec);
}

}  // namespace drift
