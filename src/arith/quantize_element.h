// The per-number steps of a quantizer, as host/device functions: the CPU quantizers
// (arith/quantize.cpp) call them, and so do the CUDA quantize kernels (backend/quantize_steps.h,
// backend/cuda/quantize_kernels.cu). Nothing here allocates, throws or reads a global; every
// constant a step needs comes in a plain struct filled once per operand on the host
// (block_scale_spec in quantize.h).
//
// Element rounding is round_to (arith/round.h), the one rounding core; these functions only decide
// what is rounded (the scaled value) and what the rounding counts as (clipped, flushed, subnormal).
#pragma once

#include "arith/log2_fp32.h"
#include "arith/ops.h"
#include "arith/random.h"
#include "arith/round.h"
#include "arith/scale_kinds.h"

namespace drift {

// MX shared-exponent rules (see mx_exponent_of below for each definition).
enum class ExpRule : uint8_t { floor, rceil, ceil, even };

// How the floor rule's floor(log2 amax) is obtained: from the exponent bits (OCP MX v1.0), or as
// floor(RN_fp32(log2(amax))) with an all-zero block's amax taken as 2^-126 (microxcaling's Python
// quantizer: arith/log2_fp32.h).
enum class ExpSource : uint8_t { exact, log2_fp32 };

// Departures of microxcaling's MX quantizer from OCP MX v1.0 that a block quantizer can switch on
// (docs/policy.md, "microxcaling emulation"); the defaults are the OCP rule. Element rounding ties
// away from zero is the quantizer's rounding rna, not a field here.
struct MxEmulation {
  ExpSource exponent = ExpSource::exact;
  // 0: an E8M0 scale, exponent clamped to [-127, 127]. n > 0: microxcaling's scale_bits n: exponents
  // below -(2^(n-1) - 1) are raised to it, those above 2^(n-1) - 1 make the block NaN, and the scale
  // is a float32 (2^e below 2^-149 is 0, so the block is NaN; the dequantised values are rounded to
  // float32, which the element step models by rounding each element to a multiple of 2^-149 / 2^e).
  int scale_bits = 0;
  bool positive_zero = false;  // every zero result is +0 (microxcaling's CUDA element kernel)
  // Round to nearest (ties away, rounding rna) as floor(RN_fp32(|x| + 1/2)) on the shifted significand,
  // the sum in float32 (microxcaling's Python "nearest"): one value just below half a grid step at the
  // bottom of the element grid rounds up.
  bool nearest_sum_fp32 = false;
  bool any() const {
    return exponent != ExpSource::exact || scale_bits != 0 || positive_zero || nearest_sum_fp32;
  }
  // Whether elements need the step after rounding (mx_emulated_element): not in the SIMD cast or CUDA.
  bool element_step() const { return scale_bits != 0 || positive_zero || nearest_sum_fp32; }
};

namespace quant {

// floor(log2 a) for finite a > 0, from the exponent bits.
DRIFT_HD int floor_log2(double a) {
  int e, top;
  uint64_t sig;
  unpack_double(a, &e, &sig, &top);
  return e;
}
DRIFT_HD bool is_pow2(double a) {
  int e, top;
  uint64_t sig;
  unpack_double(a, &e, &sig, &top);
  return (sig & (sig - 1)) == 0;
}
DRIFT_HD int ceil_log2(double a) { return floor_log2(a) + (is_pow2(a) ? 0 : 1); }
DRIFT_HD bool finite(double x) { return !is_nan(x) && !is_inf(x); }

// Round to nearest even, saturating: how the recipes' fp32 scale arithmetic rounds.
DRIFT_HD RoundSpec nearest_saturating() {
  RoundSpec s;
  s.mode = Rounding::rne;
  s.overflow = Overflow::saturate;
  return s;
}

}  // namespace quant

// What rounding one scaled element did (CastStats' definitions; an element may be in none).
enum : uint8_t { kElemClipped = 1, kElemFlushed = 2, kElemSubnormal = 4 };
struct ElementOutcome {
  double value;
  uint8_t flags;
};

// Rounds one scaled element to f and says what happened to it. Clipped: the input was +-inf, or
// its rounded magnitude on the grid without a top would exceed max_finite, so the overflow rule
// decided the result (as CastStats). Flushed: finite, non-zero, and rounded to zero. Subnormal:
// a non-zero finite result below f's min normal.
DRIFT_HD ElementOutcome quantize_scaled(double scaled, const Format& f, const RoundSpec& spec, uint32_t rnd) {
  const double q = round_to(scaled, f, spec, rnd);
  uint8_t flags = 0;
  if (quant::finite(scaled)) {
    if (abs_of(scaled) > f.max_finite) {
      Format unbounded = f;
      unbounded.max_finite = infinity(false);
      if (abs_of(round_to(scaled, unbounded, spec, rnd)) > f.max_finite) flags |= kElemClipped;
    } else if (scaled != 0 && q == 0) {
      flags |= kElemFlushed;
    }
  } else if (is_inf(scaled)) {
    flags |= kElemClipped;
  }
  if (q != 0 && quant::finite(q) && f.kind == Kind::floating && abs_of(q) < f.min_normal) flags |= kElemSubnormal;
  return ElementOutcome{q, flags};
}

// The value an element is rounded from: x times its block's (or tensor's) multiplier. A power-of-two
// multiplier is exact in double; any other is applied as the recipes' fp32 cast kernels apply it,
// fp32(x * mult): the float multiply where both are floats (IEEE rne, the same result), the exact
// route otherwise and whenever the float product overflows from a finite x.
// fp32 is the IEEE binary32 format (the caller's copy of the catalogue entry).
DRIFT_HD double scaled_value(double v, double mult, bool mult_exact_pow2, const Format& fp32) {
  if (mult_exact_pow2) return v * mult;  // a power of two: exact in double
  const float vf = static_cast<float>(v), mf = static_cast<float>(mult);
  if (static_cast<double>(vf) == v && static_cast<double>(mf) == mult) {
    const float p = f32_mul(vf, mf);
    if (!is_inf(p) || is_inf(vf)) return p;
  }
  return op_mul(v, mult, fp32, quant::nearest_saturating());
}

// a / b and a * b into fp32 under nearest_saturating, as op_div / op_mul give them: for finite
// float operands (a non-zero divisor) one IEEE float operation, correctly rounded with gradual
// underflow like op_div's, whose overflow to infinity saturates as op_div's does; else op_div /
// op_mul. (NVFP4 takes three of these per block of 16: through op_div's double-double rounding they
// had been a third of a training run; the rceil MX rule takes one per block.)
DRIFT_HD bool finite_float(double x) { return quant::finite(x) && static_cast<double>(static_cast<float>(x)) == x; }
DRIFT_HD double fp32_div_sat(double a, double b, const Format& fp32) {
  if (finite_float(a) && finite_float(b) && b != 0) {
    const float q = f32_div(static_cast<float>(a), static_cast<float>(b));
    return is_inf(q) ? overflow_value(sign_bit(q), fp32, quant::nearest_saturating()) : q;
  }
  return op_div(a, b, fp32, quant::nearest_saturating());
}
DRIFT_HD double fp32_mul_sat(double a, double b, const Format& fp32) {
  if (finite_float(a) && finite_float(b)) {
    const float p = f32_mul(static_cast<float>(a), static_cast<float>(b));
    return is_inf(p) ? overflow_value(sign_bit(p), fp32, quant::nearest_saturating()) : p;
  }
  return op_mul(a, b, fp32, quant::nearest_saturating());
}

// Everything a block's scale needs under one quantizer, filled on the host (block_scale_spec).
struct BlockScaleSpec {
  BlockScaleRule method = BlockScaleRule::e8m0_exponent;  // the kind's block rule (scale_kinds.h)
  Format fp32;                        // IEEE binary32 (the catalogue's): the recipes' scale arithmetic
  ExpRule rule = ExpRule::floor;      // block
  int offset = 0;                     // block: added to the shared exponent
  int emax = 0;                       // block: the element format's largest exponent
  double rceil_rcp = 0;               // block, rceil: fp32(1 / max_finite)
  Format even_format;                 // block, even: the element precision with double's range
  double max_finite = 0;              // tile, nvfp4: the element format's largest value
  double amax_floor = 0;              // tile
  bool pow2 = false;                  // tile: scale rounded up to a power of two
  double s_enc = 1.0;                 // nvfp4: the tensor's encode scale
  Format e4m3;                        // nvfp4: the block scales' format
  MxEmulation emulate;                // block: microxcaling's departures (off by default)
  Log2Fp32Table log2_table;           // block, emulate.exponent log2_fp32
};

// A block's stored dequantisation scale and the multiplier its elements are scaled by (exact: a
// power of two, exact in double).
struct BlockScale {
  double stored;
  double mult;
  bool exact;
};

// The e8m0 exponent an MX block with largest magnitude amax (finite, > 0) gets under rule, before
// the offset and the clamp to [-127, 127]. Computed from exponent bits, never with log2.
DRIFT_HD int mx_exponent_of(double amax, const BlockScaleSpec& s) {
  switch (s.rule) {
    case ExpRule::floor:  // OCP MX v1.0: X = floor(log2 amax) - emax(elem); the largest values may clip
      if (s.emulate.exponent == ExpSource::log2_fp32) return floor_log2_rn_fp32(amax, s.log2_table) - s.emax;
      return quant::floor_log2(amax) - s.emax;
    case ExpRule::ceil:  // 2^ceil(log2(amax) - emax): never clips, may waste a binade
      return quant::ceil_log2(amax) - s.emax;
    case ExpRule::rceil:  // TE/cuBLAS: fp32(amax * fp32(1/max)) rounded up to a power of two
      return quant::ceil_log2(fp32_mul_sat(amax, s.rceil_rcp, s.fp32));
    case ExpRule::even:  // amax first rounded (rne) to the element precision, then floor(log2) - emax
      return quant::floor_log2(round_to(amax, s.even_format, RoundSpec{})) - s.emax;
  }
  return 0;
}

// The scale of a block whose largest finite magnitude is amax (the block has no NaN or inf), by
// the kind's block rule: the one place where the block rules' arithmetic is chosen.
DRIFT_HD BlockScale block_scale_of(const BlockScaleSpec& s, double amax) {
  const Format& fp32 = s.fp32;
  const RoundSpec rn = quant::nearest_saturating();
  switch (s.method) {
    case BlockScaleRule::none: break;  // (unblocked kinds have no block scales)
    case BlockScaleRule::e8m0_exponent: {
      const MxEmulation& emu = s.emulate;
      if (emu.scale_bits == 0 && emu.exponent == ExpSource::exact) {
        // All-zero block: the smallest e8m0 scale (2^-127), as TE and cuBLAS produce.
        int e = amax == 0 ? -127 : mx_exponent_of(amax, s) + s.offset;
        e = e < -127 ? -127 : (e > 127 ? 127 : e);
        return BlockScale{pow2(e), pow2(-e), true};
      }
      // microxcaling: an all-zero block's log2 is taken of 2^-126 (FP32_MIN_NORMAL).
      int e = (amax == 0 ? (emu.exponent == ExpSource::log2_fp32 ? -126 - s.emax : -127) : mx_exponent_of(amax, s)) +
              s.offset;
      if (emu.scale_bits == 0) {
        e = e < -127 ? -127 : (e > 127 ? 127 : e);
      } else {
        const int lim = (1 << (emu.scale_bits - 1)) - 1;
        if (e > lim) return BlockScale{quiet_nan(), quiet_nan(), true};  // overflow: NaN scale
        if (e < -lim) e = -lim;
        if (e < -149) return BlockScale{quiet_nan(), quiet_nan(), true};  // fp32 2^e is 0: x / 0, then 0 * inf
      }
      return BlockScale{pow2(e), pow2(-e), true};
    }
    case BlockScaleRule::fp32_ratio: {
      // DeepSeek-V3: dequant scale fp32(amax / max), elements fp(fp32(x * fp32(max / amax))).
      const double a = amax > s.amax_floor ? amax : s.amax_floor;
      if (s.pow2) {
        RoundSpec up = rn;
        up.mode = Rounding::rup;
        const double st = pow2(quant::ceil_log2(op_div(a, s.max_finite, fp32, up)));
        return BlockScale{st, 1.0 / st, true};
      }
      return BlockScale{op_div(a, s.max_finite, fp32, rn), op_div(s.max_finite, a, fp32, rn), false};
    }
    case BlockScaleRule::e4m3_under_tensor: {
      // NVFP4: block decode scale amax/6, times the tensor encode scale, rounded to e4m3 (saturating);
      // elements are multiplied by fp32(s_enc / e4m3 scale) and rounded to fp4.
      const double dec = fp32_mul_sat(fp32_div_sat(amax, s.max_finite, fp32), s.s_enc, fp32);
      const double stored = round_to(dec, s.e4m3, rn);
      return BlockScale{stored, stored == 0 ? 0.0 : fp32_div_sat(s.s_enc, stored, fp32), false};
    }
  }
  return BlockScale{1.0, 1.0, true};
}

// The exponent a dequantisation scale adds to the scale statistics: floor(log2 s) for a positive
// finite s; false for a scale that is not counted (zero, NaN, inf).
DRIFT_HD bool scale_exponent_of(double s, int* e) {
  if (!(s > 0) || !quant::finite(s)) return false;
  *e = quant::floor_log2(s);
  return true;
}

// The random Hadamard transform's signs under seed for groups of n (16 or 32): bit i set where value
// i of every group is negated (random word i of the sign stream is odd). Four words a Philox call.
DRIFT_HD uint32_t hadamard_signs(int n, uint64_t seed) {
  constexpr uint64_t kSignStream = 0x4841444d41524400ull;  // "HADAMARD"
  uint32_t signs = 0;
  for (int i = 0; i < n; i += 4) {
    const auto words = philox_block(seed, kSignStream, static_cast<uint64_t>(i) >> 2);  // (random_u32's)
    for (int w = 0; w < 4; ++w) signs |= (words.v[w] & 1u) << (i + w);
  }
  return signs;
}

// One group of n (16 or 32) consecutive values along k, transformed in place by the random
// Hadamard transform: the signs (hadamard_signs), the fast Walsh-Hadamard butterflies in a fixed
// order, then the 1/sqrt(n) normalisation. Every step is one IEEE double operation.
DRIFT_HD void hadamard_group_signed(double* v, int n, uint32_t signs) {
  // 1.0 / sqrt(n) in double, as the recipes' Python computes 1 / math.sqrt(n) (for 32 one ulp below
  // the correctly rounded value).
  const double norm = n == 16 ? 0.25 : 0.17677669529663687;
  for (int i = 0; i < n; ++i)
    if ((signs >> i) & 1u) v[i] = -v[i];
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const double a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
  for (int i = 0; i < n; ++i) v[i] *= norm;
}

// The same, the signs drawn here (the signs are the same for every group under one seed: a caller
// with many groups draws them once).
DRIFT_HD void hadamard_group(double* v, int n, uint64_t seed) { hadamard_group_signed(v, n, hadamard_signs(n, seed)); }

}  // namespace drift
