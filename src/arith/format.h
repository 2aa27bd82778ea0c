// A number format is data: the fields below, plus constants derived from them once.
// Nothing here depends on a particular format; the catalogue (catalogue.cpp) names them.
#pragma once

#include <algorithm>

#include "arith/hostdevice.h"

namespace drift {

// How the bits of a format are read.
enum class Kind : uint8_t {
  floating,  // sign, exponent, mantissa (IEEE-like, with the NaN/inf choices below)
  integer,   // two's complement integers, symmetric range -max..max (int8: -127..127)
  pow2,      // unsigned exponent only, every code a power of two (OCP e8m0 scales); no zero
};

// Where NaN lives in the encoding.
enum class NanCode : uint8_t {
  none,     // no NaN (fp6, fp4, int8)
  ieee,     // exponent all ones, mantissa non-zero (fp16, bf16, fp32, fp8_e5m2)
  ones,     // only the all-ones magnitude S.1111.111 (OCP fp8_e4m3, e8m0's 0xFF)
  negzero,  // only the negative-zero code 0x80 (the fnuz formats; they have no -0)
};

struct Format {
  Kind kind = Kind::floating;
  int exp_bits = 8;
  int man_bits = 23;
  int bias = 127;
  bool inf = true;
  NanCode nan = NanCode::ieee;
  bool subnormals = true;

  // Derived by derive_format(); never set by hand.
  int bits = 0;            // width of the encoding
  int emin = 0;            // exponent of the smallest normal
  int emax = 0;            // exponent of the largest finite value
  int quantum_mant = 0;    // a value with exponent e is rounded at quantum 2^(e - quantum_mant) ...
  int quantum_min = 0;     // ... but never finer than 2^quantum_min
  bool has_neg_zero = true;
  double max_finite = 0;
  double min_normal = 0;     // smallest value that is not subnormal (flush threshold)
  double min_positive = 0;   // smallest positive value (subnormal if the format keeps them)
  double epsilon = 0;        // distance from 1 to the next larger value
  uint64_t finite_codes = 0; // number of encodings of finite values (+0 and -0 counted apart)
};

// Fills the derived fields. The fields must already have been validated (validate_format).
DRIFT_HD void derive_format(Format& f) {
  if (f.kind == Kind::integer) {
    f.bits = f.man_bits + 1;  // man_bits holds the magnitude bits: int8 -> 7
    f.emin = 0;
    f.emax = f.man_bits - 1;
    f.quantum_mant = 52;  // huge magnitudes are rounded coarsely; they saturate anyway
    f.quantum_min = 0;
    f.has_neg_zero = false;
    f.max_finite = static_cast<double>((uint64_t{1} << f.man_bits) - 1);
    f.min_normal = 0;  // integers have no subnormal range to flush
    f.min_positive = 1;
    f.epsilon = 1;
    f.finite_codes = (uint64_t{1} << f.bits) - 1;  // the code -2^(n-1) is outside the symmetric grid
    return;
  }
  const bool is_signed = f.kind == Kind::floating;
  f.bits = f.exp_bits + f.man_bits + (is_signed ? 1 : 0);
  const int all_ones = (1 << f.exp_bits) - 1;
  // The largest exponent field holding finite values, and the largest mantissa there.
  int top_field = all_ones;
  uint64_t top_mant = (uint64_t{1} << f.man_bits) - 1;
  if (f.nan == NanCode::ieee) top_field = all_ones - 1;
  else if (f.nan == NanCode::ones) {
    if (f.man_bits == 0) top_field = all_ones - 1;
    else top_mant -= 1;
  }
  if (f.kind == Kind::pow2) {
    f.emin = -f.bias;
    f.emax = top_field - f.bias;
    f.quantum_mant = 0;
    f.quantum_min = f.emin;
    f.has_neg_zero = false;
    f.max_finite = pow2(f.emax);
    f.min_normal = 0;
    f.min_positive = pow2(f.emin);
    f.epsilon = 1;
    f.finite_codes = static_cast<uint64_t>(top_field) + 1;
    return;
  }
  f.emin = 1 - f.bias;
  f.emax = top_field - f.bias;
  f.quantum_mant = f.man_bits;
  f.quantum_min = f.emin - f.man_bits;
  f.has_neg_zero = f.nan != NanCode::negzero;
  f.max_finite = (2.0 - pow2(-f.man_bits) * static_cast<double>((uint64_t{1} << f.man_bits) - top_mant)) *
                 pow2(f.emax);
  f.min_normal = pow2(f.emin);
  f.min_positive = f.subnormals ? pow2(f.emin - f.man_bits) : f.min_normal;
  f.epsilon = pow2(-f.man_bits);
  // Finite codes per sign: (top_field) full binades plus the top one up to top_mant, field 0 included.
  const uint64_t per_sign = static_cast<uint64_t>(top_field) * (uint64_t{1} << f.man_bits) + top_mant + 1;
  f.finite_codes = f.nan == NanCode::negzero ? 2 * per_sign - 1 : 2 * per_sign;
}

// Whether f is IEEE binary32 itself (8 exponent bits, 23 mantissa bits, bias 127, inf, IEEE NaN,
// subnormals): the one test behind every fp32 shortcut (a cast that keeps every float, an fp32
// accumulator the fast kernel runs natively, an fp32 output taken straight from the kernel).
DRIFT_HD bool is_binary32(const Format& f) {
  return f.kind == Kind::floating && f.exp_bits == 8 && f.man_bits == 23 && f.bias == 127 && f.inf &&
         f.nan == NanCode::ieee && f.subnormals;
}

// Whether f is IEEE binary16 itself (5 exponent bits, 10 mantissa bits, bias 15, inf, IEEE NaN,
// subnormals).
DRIFT_HD bool is_binary16(const Format& f) {
  return f.kind == Kind::floating && f.exp_bits == 5 && f.man_bits == 10 && f.bias == 15 && f.inf &&
         f.nan == NanCode::ieee && f.subnormals;
}

// Bits of significand a value of f can carry (the implicit bit included): what decides whether a
// product of two values is exact in a wider format.
DRIFT_HD int significand_bits(const Format& f) {
  if (f.kind == Kind::floating) return f.man_bits + 1;
  if (f.kind == Kind::integer) return f.man_bits;
  return 1;
}

// The weight of the last bit of every value of f at or above `min` in magnitude, as the exponent of
// a power of two: an integer's 2^0; a float's 2^(e - man_bits), e its exponent, which is at least
// ilogb(min) and at least emin (a subnormal's last bit is the format's grid). At f.min_positive: the
// grid every value of f lies on. Host only.
inline int last_bit_exp(const Format& f, double min) {
  return f.kind == Kind::integer ? 0 : std::max(std::ilogb(min), f.emin) - f.man_bits;
}

}  // namespace drift
