// The one place where a value is rounded to a format. Every cast in drift — the scalar path, the
// SIMD span cast, the matmul engine and the CUDA kernels — ends here or is tested bit for bit
// against this.
//
// Shape (after SoftFloat): unpack the input into (sign, exponent, integer significand, sticky),
// handle the special values first, then one round-and-pack that decides ties, overflow and
// underflow in exactly one place.
#pragma once

#include "arith/format.h"

namespace drift {

enum class Rounding : uint8_t { rne, rna, rtz, rup, rdn, rto, sr };
enum class Overflow : uint8_t { saturate, ieee };
enum class Subnormals : uint8_t { keep, flush };

struct RoundSpec {
  Rounding mode = Rounding::rne;
  Overflow overflow = Overflow::saturate;
  Subnormals subnormals = Subnormals::keep;
  int sr_bits = 24;  // stochastic rounding: width of the random integer added to the discarded bits
};

// Flush is in force when the spec asks for it or the format has no subnormals.
DRIFT_HD bool flushes(const Format& f, const RoundSpec& s) {
  return s.subnormals == Subnormals::flush || !f.subnormals;
}

// What an overflowing result becomes. IEEE 754: the modes that round away from zero in the
// overflow's direction give infinity, the others the largest finite value; a format without
// infinity gives NaN instead, and one with neither always saturates. Stochastic rounding and
// round-to-nearest-away overflow like rne; round-to-odd like rtz (max finite is odd).
DRIFT_HD double overflow_value(bool neg, const Format& f, const RoundSpec& s) {
  const double max_value = neg ? -f.max_finite : f.max_finite;
  if (f.kind == Kind::pow2 && neg) return quiet_nan();
  if (s.overflow == Overflow::saturate) return max_value;
  bool to_inf = false;
  switch (s.mode) {
    case Rounding::rne: case Rounding::rna: case Rounding::sr: to_inf = true; break;
    case Rounding::rup: to_inf = !neg; break;
    case Rounding::rdn: to_inf = neg; break;
    case Rounding::rtz: case Rounding::rto: to_inf = false; break;
  }
  if (!to_inf) return max_value;
  if (f.inf) return infinity(neg);
  if (f.nan != NanCode::none) return quiet_nan();
  return max_value;
}

// Zero of the given sign, where the format has that zero.
DRIFT_HD double zero_of(bool neg, const Format& f) { return signed_zero(neg && f.has_neg_zero); }

// Round-and-pack. The exact magnitude is (sig + sticky') * 2^(e - top) where sig's highest set
// bit is bit `top`, e is the exponent of that bit, and sticky says whether non-zero bits lie below
// sig (sticky' in (0,1)). U is uint64_t or unsigned __int128. `rnd` is the random word for sr.
template <typename U>
DRIFT_HD double round_pack(bool neg, int e, U sig, int top, bool sticky, const Format& f,
                           const RoundSpec& spec, uint32_t rnd) {
  constexpr int W = static_cast<int>(sizeof(U) * 8);
  if (f.kind == Kind::pow2 && neg) return quiet_nan();  // unsigned scale: no negative values
  int q = e - f.quantum_mant;  // exponent of the quantum (last kept bit)
  if (q < f.quantum_min) q = f.quantum_min;
  const int s = q - (e - top);  // number of discarded bits
  U kept, rem;
  bool above_half = false, at_half = false;
  bool inexact = sticky;
  uint64_t rem_top = 0;  // top sr_bits of the discarded bits, for stochastic rounding
  if (s <= 0) {
    // The quantum is at or below sig's last bit: exact (callers pass sticky only when s > 0).
    kept = sig << (-s);
  } else {
    kept = s >= W ? U(0) : sig >> s;
    rem = s >= W ? sig : (sig & ((U(1) << s) - 1));
    inexact = inexact || rem != 0;
    if (s - 1 < W) {
      const U half = U(1) << (s - 1);
      above_half = rem > half || (rem == half && sticky);
      at_half = rem == half && !sticky;
    }
    if (spec.mode == Rounding::sr) {
      const int t = s - spec.sr_bits;
      if (t >= W) rem_top = 0;
      else if (t >= 0) rem_top = static_cast<uint64_t>(rem >> t);
      else rem_top = static_cast<uint64_t>(rem) << (-t);
    }
  }
  bool up = false;
  switch (spec.mode) {
    case Rounding::rne: up = above_half || (at_half && (kept & 1)); break;
    case Rounding::rna: up = above_half || at_half; break;
    case Rounding::rtz: break;
    case Rounding::rup: up = inexact && !neg; break;
    case Rounding::rdn: up = inexact && neg; break;
    case Rounding::rto: kept |= U(inexact ? 1 : 0); break;
    case Rounding::sr: {
      const uint64_t mask = spec.sr_bits >= 32 ? 0xffffffffull : ((uint64_t{1} << spec.sr_bits) - 1);
      up = ((rem_top + (rnd & mask)) >> spec.sr_bits) != 0;
      break;
    }
  }
  kept += U(up ? 1 : 0);

  if (kept == 0) {
    if (f.kind == Kind::pow2) return f.min_positive;  // e8m0 has no zero: underflow stays at 2^-127
    return zero_of(neg, f);
  }
  // kept <= 2^53 here for every valid format, so the conversion is exact.
  const double mag = q > 1023 ? infinity(false) : static_cast<double>(static_cast<uint64_t>(kept)) * pow2(q);
  if (mag > f.max_finite) return overflow_value(neg, f, spec);
  if (mag < f.min_normal && flushes(f, spec)) return zero_of(neg, f);
  return neg ? -mag : mag;
}

// Special inputs: NaN, infinities, zeros. Returns true and sets *out when x is one of them.
DRIFT_HD bool round_special(double x, const Format& f, const RoundSpec& spec, double* out) {
  if (is_nan(x)) {
    *out = quiet_nan();
    return true;
  }
  const bool neg = sign_bit(x);
  if (is_inf(x)) {
    if (f.kind == Kind::pow2 && neg) *out = quiet_nan();
    else if (spec.overflow == Overflow::saturate) *out = neg ? -f.max_finite : f.max_finite;
    else if (f.inf) *out = x;
    else if (f.nan != NanCode::none) *out = quiet_nan();
    else *out = neg ? -f.max_finite : f.max_finite;
    return true;
  }
  if (x == 0) {
    *out = f.kind == Kind::pow2 ? quiet_nan() : zero_of(neg, f);
    return true;
  }
  return false;
}

// round_to: the scalar core. x rounded to format f under spec; `rnd` is the random word used only
// by stochastic rounding. The result is a double that lies exactly on f's grid (or is +-inf/NaN).
DRIFT_HD double round_to(double x, const Format& f, const RoundSpec& spec, uint32_t rnd = 0) {
  double special;
  if (round_special(x, f, spec, &special)) return special;
  int e, top;
  uint64_t sig;
  unpack_double(x, &e, &sig, &top);
  return round_pack<uint64_t>(sign_bit(x), e, sig, top, false, f, spec, rnd);
}

// Rounds the exact value hi + lo, where hi = fl(hi + lo) in double and |lo| <= ulp(hi)/2 (the
// output of TwoSum or TwoProd). This is how an exact sum or product of two doubles is rounded
// once, without the double rounding a plain `round_to(a + b)` would commit.
DRIFT_HD double round_to_sum(double hi, double lo, const Format& f, const RoundSpec& spec,
                             uint32_t rnd = 0) {
  if (lo == 0 || is_nan(hi) || is_inf(hi) || hi == 0) return round_to(hi, f, spec, rnd);
  using U = unsigned __int128;
  int e_hi, top_hi, e_lo, top_lo;
  uint64_t sig_hi, sig_lo;
  unpack_double(hi, &e_hi, &sig_hi, &top_hi);
  unpack_double(lo, &e_lo, &sig_lo, &top_lo);
  // Place hi's significand with its leading bit at position 116 of a 128-bit integer; the
  // integer's unit is then 2^(e_hi - 116).
  const int shift_hi = 116 - top_hi;
  U sig = U(sig_hi) << shift_hi;
  const int unit = e_hi - 116;
  // lo's last bit sits at exponent e_lo - top_lo.
  const int pos = (e_lo - top_lo) - unit;
  U lo_part;
  bool sticky = false;
  if (pos >= 0) {
    lo_part = U(sig_lo) << pos;
  } else if (-pos >= 64) {
    lo_part = 0;
    sticky = true;
  } else {
    lo_part = U(sig_lo >> (-pos));
    sticky = (sig_lo & ((uint64_t{1} << (-pos)) - 1)) != 0;
  }
  if (sign_bit(lo) == sign_bit(hi)) {
    sig += lo_part;
  } else {
    // Subtracting L + frac: the integer part loses one more when a fraction was cut off.
    sig -= lo_part + U(sticky ? 1 : 0);
  }
  int top = 127;
  while (top > 0 && !((sig >> top) & 1)) --top;
  const int e = unit + top;
  return round_pack<U>(sign_bit(hi), e, sig, top, sticky, f, spec, rnd);
}

// Error-free transformations (Knuth's TwoSum; products are exact when the significands are
// narrow, otherwise use an explicit fma on the host).
DRIFT_HD void two_sum(double a, double b, double* s, double* err) {
  const double sum = a + b;
  const double bv = sum - a;
  const double av = sum - bv;
  *s = sum;
  *err = (a - av) + (b - bv);
}

}  // namespace drift
