// Bit encodings <-> values. Inside the simulator values live as doubles on a format's grid; bit
// patterns exist only at the edges (`drift arith`, the oracle, checkpoints).
#pragma once

#include "arith/format.h"

namespace drift {

// The value of a bit pattern (the low f.bits bits of `code`). Subnormals decode to their value;
// reading them as zero under a flush mode is the caller's decision.
DRIFT_HD double decode(uint64_t code, const Format& f) {
  if (f.kind == Kind::integer) {
    const uint64_t sign_mask = uint64_t{1} << (f.bits - 1);
    const int64_t v = (code & sign_mask) ? static_cast<int64_t>(code | ~(sign_mask * 2 - 1))
                                         : static_cast<int64_t>(code & (sign_mask - 1));
    return static_cast<double>(v);
  }
  const uint64_t mant_mask = (uint64_t{1} << f.man_bits) - 1;
  const uint64_t mant = code & mant_mask;
  const int all_ones = (1 << f.exp_bits) - 1;
  const int field = static_cast<int>((code >> f.man_bits) & static_cast<uint64_t>(all_ones));
  const bool neg = f.kind == Kind::floating && ((code >> (f.bits - 1)) & 1);
  if (f.kind == Kind::pow2) {
    if (field == all_ones && f.nan == NanCode::ones) return quiet_nan();
    return pow2(field - f.bias);
  }
  switch (f.nan) {
    case NanCode::ieee:
      if (field == all_ones) return mant ? quiet_nan() : infinity(neg);
      break;
    case NanCode::ones:
      if (field == all_ones && mant == mant_mask) return quiet_nan();
      break;
    case NanCode::negzero:
      if (neg && field == 0 && mant == 0) return quiet_nan();
      break;
    case NanCode::none: break;
  }
  double mag;
  if (field == 0) mag = static_cast<double>(mant) * pow2(f.emin - f.man_bits);
  else mag = (1.0 + static_cast<double>(mant) * pow2(-f.man_bits)) * pow2(field - f.bias);
  return neg ? -mag : mag;
}

// The bit pattern of a value on f's grid. NaN encodes as the format's canonical NaN (positive,
// quiet). Returns false when v has no encoding (NaN or inf where the format has none, a value off
// the grid, -0 in a format without it is encoded as +0).
DRIFT_HD bool encode(double v, const Format& f, uint64_t* code) {
  const int all_ones = (1 << f.exp_bits) - 1;
  if (is_nan(v)) {
    switch (f.nan) {
      case NanCode::ieee: *code = (static_cast<uint64_t>(all_ones) << f.man_bits) | (uint64_t{1} << (f.man_bits - 1)); return true;
      case NanCode::ones: *code = (uint64_t{1} << (f.kind == Kind::pow2 ? f.bits : f.bits - 1)) - 1; return true;
      case NanCode::negzero: *code = uint64_t{1} << (f.bits - 1); return true;
      case NanCode::none: return false;
    }
  }
  const bool neg = sign_bit(v);
  const double a = abs_of(v);
  if (f.kind == Kind::integer) {
    if (is_inf(v) || a > f.max_finite || static_cast<double>(static_cast<int64_t>(a)) != a) return false;
    const int64_t i = neg ? -static_cast<int64_t>(a) : static_cast<int64_t>(a);
    *code = static_cast<uint64_t>(i) & ((uint64_t{1} << f.bits) - 1);
    return true;
  }
  const uint64_t sign = (f.kind == Kind::floating && neg) ? uint64_t{1} << (f.bits - 1) : 0;
  if (is_inf(v)) {
    if (!f.inf) return false;
    *code = sign | (static_cast<uint64_t>(all_ones) << f.man_bits);
    return true;
  }
  if (a == 0) {
    if (f.kind == Kind::pow2) return false;
    *code = f.has_neg_zero ? sign : 0;
    return true;
  }
  if (f.kind == Kind::pow2 && neg) return false;
  if (a > f.max_finite || a < f.min_positive) return false;
  int e, top;
  uint64_t sig;
  unpack_double(a, &e, &sig, &top);
  sig <<= (52 - top);  // normalise subnormal doubles so bit 52 leads
  uint64_t field, mant;
  if (e >= f.emin) {
    field = static_cast<uint64_t>(e + f.bias);
    const int drop = 52 - f.man_bits;
    if (drop < 0 || (sig & ((uint64_t{1} << drop) - 1))) return false;
    mant = (sig >> drop) & ((uint64_t{1} << f.man_bits) - 1);
  } else {
    if (f.kind == Kind::pow2) return false;
    field = 0;
    const int drop = 52 - f.man_bits + (f.emin - e);
    if (drop >= 64 || (sig & ((uint64_t{1} << drop) - 1))) return false;
    mant = sig >> drop;
  }
  *code = sign | (field << f.man_bits) | mant;
  return true;
}

}  // namespace drift
