// The fused multi-term accumulation of GPU matrix units ("block FMA"): a group of exact products
// and the running sum are added in one step, as NVIDIA tensor cores do.
//
// The model (Fasi, Higham, Mikaitis, Pranesh 2021; Khattak and Mikaitis 2025, arXiv:2512.07004,
// parametrised models in north-numerical-computing/MATLAB-tensor-core, models/*.m):
//
//   1. Each product a_i*b_i is exact. Its alignment exponent is e(a_i) + e(b_i), where e(x) is the
//      exponent of x's leading bit, but never below the input format's emin (a subnormal input
//      counts at emin with a significand below 1). The product's significand is left in [0,4):
//      it is not renormalised before alignment.
//   2. The alignment exponent E of the group is the largest product exponent and, where the
//      running sum c takes part in the alignment, c's exponent (c counted at the output format's
//      emin when subnormal; a zero c takes no part).
//   3. Every term is cut to a multiple of 2^(E - kept_bits): the bits shifted out are truncated
//      toward zero (sign-magnitude), or, with `sticky`, ORed into one extra bit below.
//   4. The cut terms are added exactly (the adder has enough carry bits; see carry_bits), the sum
//      is normalised once and rounded to out_man_bits fraction bits (rtz or rne) within the output
//      format's exponent range (subnormal results kept or flushed). A result whose exponent reaches
//      the output format's infinity field is an infinity, as in the published models.
//
// Relation to the published parameter `neab` (number of extra alignment bits): the MATLAB models
// hold product significands with 23 fraction bits (the fp32 significand), shift them left by neab,
// and normalise products >= 2 to [1,2) while granting one more alignment bit when the largest
// product is >= 2. Both routes cut at the same bit, 2^(E - 23 - neab) with E the unnormalised
// exponent above, hence kept_bits = 23 + neab. A negative neab (Hopper/Ada FP8: -10) also narrows
// the result to 23 + neab fraction bits before it is written as fp32 (out_man_bits = 13).
//
// Two arrangements around the groups: `interleave` deals the products of each 2*terms block to its
// two groups in alternating runs instead of consecutively, and `promote_every` adds each block's
// chain (started from zero) to the running sum c in IEEE arithmetic of the output format. Together
// they model Hopper's FP8 mma.sync with an fp16 accumulator, which sm_90 runs as a software
// emulation on the fp16 tensor core (see FusedModel::interleave).
//
// Everything here is exact integer arithmetic on unsigned __int128; floating point is used only to
// hold values that are already exact (group_in_double: sums that provably stay exact). Host and
// device code (DRIFT_HD); no exceptions.
#pragma once

#include "arith/round.h"

namespace drift {

constexpr int kNoMinAlignExp = -100000;  // FusedModel::min_align_exp: no lower clamp

struct FusedModel {
  // Products fused per step (one normalisation per group). The matmul engine cuts K into groups
  // of this size; fused_dot does the same.
  int terms = 4;
  // Fraction bits kept below the group's alignment exponent E (= 23 + neab of the published
  // models). The last kept bit is worth 2^(E - kept_bits). Valid range: -8..100.
  int kept_bits = 23;
  // true: c's exponent takes part in the maximum and c is cut like a product (all NVIDIA models).
  // false: the products are aligned among themselves and c is added exactly to their cut sum
  // before the one final rounding ("late partial sum").
  bool align_includes_acc = true;
  // true: the bits shifted out of each term are ORed into one sticky bit below the kept ones
  // (published NVIDIA models: false).
  bool sticky = false;
  // Integer (carry) bits of the adder above the alignment point. 0: as many as the group needs,
  // which is what every published NVIDIA model assumes (no carry-out is ever lost). A non-zero
  // value is a capacity: fused_model_valid() rejects a model whose group could overflow it
  // (the terms are each below 4 * 2^E, so a group of n terms plus c needs 2 + ceil(log2(n+1))).
  int carry_bits = 0;
  // Rounding of the normalised sum: rtz (fp32 outputs) or rne (fp16 outputs); others work too.
  Rounding final_rounding = Rounding::rtz;
  // Fraction bits of the normalised result (23 for fp32, 10 for fp16, 13 for Hopper FP8).
  int out_man_bits = 23;
  // Output (and accumulator) format: exponent range, subnormal boundary. Must be derived (a
  // catalogue format); c is expected on this format's grid.
  Format out;
  // Input format's minimum normal exponent: subnormal inputs are counted at this exponent.
  int in_emin = -14;
  // false: subnormal inputs are read as zero. true: kept (every published NVIDIA model).
  bool in_subnormals = true;
  // false: subnormal results are flushed to zero. true: kept (every published NVIDIA model).
  bool out_subnormals = true;
  // Lower clamp on the alignment exponent E (published Hopper/Blackwell models: -133 for fp32
  // output, -15 for B200 fp16 output); kNoMinAlignExp for none.
  int min_align_exp = kNoMinAlignExp;
  // 0: the whole dot product is one chain of fused groups. N > 0: every N products the chain's
  // result (started from zero) is added into an outer accumulator in IEEE arithmetic of the output
  // format (round to nearest even), which starts at c: the DeepSeek-V3 recipe of promoting FP8
  // WGMMA partial sums to CUDA-core fp32 every 128 elements. N should be a multiple of `terms`
  // (of 2 * terms with `interleave`).
  int promote_every = 0;
  // 0: every group takes `terms` consecutive products. r > 0 (r divides terms): K is cut into blocks
  // of 2 * terms products, each computed by two chained groups; the first group of a block takes the
  // products whose index i within the block has (i / r) even, the second the others. Hopper (sm_90)
  // has no FP8 mma.sync (an sm_89 instruction) and emulates it on the fp16 tensor core (NVIDIA/cutlass
  // issue #1986: "not natively supported on Hopper ... software emulation ... fp16 tensor core"). The
  // measured H100 vectors (data/tensorcore/H100/E4M3, E5M2, fp16 output) show how: the inputs
  // unpacked to fp16 (exact), two fp16 HMMA k16 chained from zero, the first over the low f16x2 half
  // of each packed 4 x FP8 register (i mod 4 in {0, 1}), the second over the high half, then C added
  // with one fp16 add: r = 2, terms = 16 with the fp16 HMMA's parameters, promote_every = 32.
  int interleave = 0;
};

namespace fused_detail {

using U128 = unsigned __int128;
using I128 = __int128;

// Exponent of the leading bit of a finite non-zero double.
DRIFT_HD int lead_exp(double x) {
  int e, top;
  uint64_t sig;
  unpack_double(x, &e, &sig, &top);
  return e;
}

// Integer significand of a finite non-zero |x| and the exponent of its last bit, trailing zeros
// removed so that products stay narrow.
DRIFT_HD void int_sig(double x, uint64_t* sig, int* lsb) {
  int e, top;
  unpack_double(x, &e, sig, &top);
  *lsb = e - top;
#if defined(__CUDA_ARCH__)
  const int tz = __ffsll(static_cast<long long>(*sig)) - 1;
#else
  const int tz = __builtin_ctzll(*sig);
#endif
  *sig >>= tz;
  *lsb += tz;
}

DRIFT_HD int top_bit128(U128 x) {
  const uint64_t hi = static_cast<uint64_t>(x >> 64);
  return hi ? 64 + top_bit(hi) : top_bit(static_cast<uint64_t>(x));
}

// |value| = sig * 2^lsb cut to a multiple of 2^q: returns the multiple; *lost says whether non-zero
// bits were shifted out. Requires the result to fit (the caller guarantees value < 2^(q+120)).
DRIFT_HD U128 cut(U128 sig, int lsb, int q, bool* lost) {
  const int shift = q - lsb;
  if (shift <= 0) {
    *lost = false;
    return sig << (-shift);
  }
  if (shift >= 128) {
    *lost = sig != 0;
    return 0;
  }
  *lost = (sig & ((U128(1) << shift) - 1)) != 0;
  return sig >> shift;
}

// The format the normalised sum is rounded to: the output format's range with out_man_bits
// fraction bits, and no upper limit (overflow is decided afterwards, as the models do).
DRIFT_HD Format result_grid(const FusedModel& m) {
  Format g = m.out;
  g.quantum_mant = m.out_man_bits;
  g.quantum_min = m.out.emin - m.out_man_bits;
  g.max_finite = infinity(false);
  return g;
}

// Rounds (-1)^neg * (mag + sticky') * 2^lsb (sticky' in (0,1) when `sticky`) to the model's result
// grid. mag != 0.
DRIFT_HD double round_result(bool neg, U128 mag, int lsb, bool sticky, const FusedModel& m) {
  const int top = top_bit128(mag);
  const Format g = result_grid(m);
  RoundSpec spec;
  spec.mode = m.final_rounding;
  spec.overflow = Overflow::ieee;
  spec.subnormals = m.out_subnormals ? Subnormals::keep : Subnormals::flush;
  const double r = round_pack<U128>(neg, lsb + top, mag, top, sticky, g, spec, 0);
  if (is_inf(r) || abs_of(r) >= pow2(m.out.emax + 1)) return infinity(neg);
  return r;
}

// Exact (-1)^n1 m1 2^l1 + (-1)^n2 m2 2^l2 rounded once to the model's result grid.
DRIFT_HD double add_round(bool n1, U128 m1, int l1, bool n2, U128 m2, int l2, const FusedModel& m) {
  if (m2 == 0 && m1 == 0) return 0.0;
  if (m2 == 0) return round_result(n1, m1, l1, false, m);
  if (m1 == 0) return round_result(n2, m2, l2, false, m);
  // Normalise both with the leading bit at position 125; the unit of each is then 2^(lead - 125).
  int t1 = top_bit128(m1), t2 = top_bit128(m2);
  m1 <<= (125 - t1);
  m2 <<= (125 - t2);
  int lead1 = l1 + t1, lead2 = l2 + t2;
  if (lead2 > lead1) {  // operand 1 is the larger in exponent
    const bool tn = n1; n1 = n2; n2 = tn;
    const U128 tm = m1; m1 = m2; m2 = tm;
    const int tl = lead1; lead1 = lead2; lead2 = tl;
  }
  const int d = lead1 - lead2;
  bool lost;
  const U128 small = cut(m2, 0, d, &lost);
  const int unit = lead1 - 125;
  U128 sum;
  bool neg = n1;
  if (n1 == n2) {
    sum = m1 + small;
  } else if (m1 > small || (m1 == small && lost)) {
    // Subtracting small + frac: the integer part loses one more when a fraction was cut off.
    sum = m1 - small - (lost ? 1 : 0);
  } else if (m1 == small) {
    return 0.0;  // exact cancellation (d == 0 here, nothing lost)
  } else {
    // |operand 2| > |operand 1| only when d == 0 (same leading exponent): exact.
    sum = small - m1;
    neg = n2;
  }
  if (sum == 0) return 0.0;
  return round_result(neg, sum, unit, lost, m);
}

}  // namespace fused_detail

// A model is usable when its fields are in range. Returns nullptr or a description of the fault.
DRIFT_HD const char* fused_model_invalid(const FusedModel& m) {
  if (m.terms < 1 || m.terms > (1 << 20)) return "terms must be in 1..1048576";
  if (m.kept_bits < -8 || m.kept_bits > 100) return "kept_bits must be in -8..100";
  if (m.out_man_bits < 0 || m.out_man_bits > 52) return "out_man_bits must be in 0..52";
  if (m.out.kind != Kind::floating || m.out.bits == 0) return "out must be a derived floating-point format";
  if (m.promote_every < 0) return "promote_every must be >= 0";
  if (m.interleave < 0) return "interleave must be >= 0";
  if (m.interleave > 0 && m.terms % m.interleave != 0) return "interleave must divide terms";
  if (m.carry_bits < 0) return "carry_bits must be >= 0";
  if (m.carry_bits > 0) {
    int need = 2, n = m.terms + 1;  // significands below 4, n terms (c included)
    while ((1 << (need - 2)) < n) ++need;
    if (m.carry_bits < need) return "carry_bits too small for the group size (2 + ceil(log2(terms + 1)))";
  }
  return nullptr;
}

namespace fused_detail {

// Where the i-th product of a group lies (in elements of stride sa / sb from the group's start).
struct Consecutive {
  DRIFT_HD long operator()(int i) const { return i; }
};
// FusedModel::interleave: the i-th product of half h (0 or 1) of a block dealt in runs of r.
struct Interleaved {
  int r, h;
  DRIFT_HD long operator()(int i) const { return static_cast<long>(i / r) * 2 * r + h * r + i % r; }
};

// One fused group: c + sum_{i<n} a[pos(i)*sa] * b[pos(i)*sb] (see fused_group_strided).
template <class Pos>
DRIFT_HD double group_at(double c, const double* a, long sa, const double* b, long sb, int n, Pos pos,
                         const FusedModel& m) {
  // Special values first (the published models do the same before any alignment).
  bool any_nan = is_nan(c), pos_inf = is_inf(c) && !sign_bit(c), neg_inf = is_inf(c) && sign_bit(c);
  for (int i = 0; i < n; ++i) {
    const long p = pos(i);
    const double x = a[p * sa], y = b[p * sb];
    if (is_nan(x) || is_nan(y)) { any_nan = true; continue; }
    if (is_inf(x) || is_inf(y)) {
      if (x == 0 || y == 0) { any_nan = true; continue; }
      if (sign_bit(x) != sign_bit(y)) neg_inf = true;
      else pos_inf = true;
    }
  }
  if (any_nan || (pos_inf && neg_inf)) return quiet_nan();
  if (pos_inf || neg_inf) return infinity(neg_inf);

  const double in_min_normal = pow2(m.in_emin);
  // Pass 1: the alignment exponent.
  int E = kNoMinAlignExp;
  bool any = false;
  for (int i = 0; i < n; ++i) {
    const long p = pos(i);
    double x = a[p * sa], y = b[p * sb];
    if (x == 0 || y == 0) continue;
    if (!m.in_subnormals && (abs_of(x) < in_min_normal || abs_of(y) < in_min_normal)) continue;
    int ex = lead_exp(x), ey = lead_exp(y);
    if (ex < m.in_emin) ex = m.in_emin;
    if (ey < m.in_emin) ey = m.in_emin;
    if (!any || ex + ey > E) E = ex + ey;
    any = true;
  }
  const bool c_in = c != 0 && m.align_includes_acc;
  if (c_in) {
    int ec = lead_exp(c);
    if (ec < m.out.emin) ec = m.out.emin;
    if (!any || ec > E) E = ec;
    any = true;
  }
  if (!any) {
    // No non-zero product: the result is c (late or absent), rounded to the result grid.
    if (c == 0) return 0.0;
    uint64_t sc; int lc;
    int_sig(c, &sc, &lc);
    return round_result(sign_bit(c), U128(sc), lc, false, m);
  }
  if (E < m.min_align_exp) E = m.min_align_exp;
  const int q = E - m.kept_bits;  // weight of the last kept bit
  const int s = m.sticky ? 1 : 0;

  // Pass 2: cut and add exactly. Each cut term is below 2^(kept_bits + 2 + s), the sum of up to
  // 2^20 + 1 of them below 2^123: no overflow.
  I128 sum = 0;
  for (int i = 0; i < n; ++i) {
    const long p = pos(i);
    const double x = a[p * sa], y = b[p * sb];
    if (x == 0 || y == 0) continue;
    if (!m.in_subnormals && (abs_of(x) < in_min_normal || abs_of(y) < in_min_normal)) continue;
    uint64_t sx, sy; int lx, ly;
    int_sig(x, &sx, &lx);
    int_sig(y, &sy, &ly);
    bool lost;
    U128 t = cut(U128(sx) * U128(sy), lx + ly, q, &lost);
    if (s) t = (t << 1) | U128(lost ? 1 : 0);
    sum += (sign_bit(x) != sign_bit(y)) ? -I128(t) : I128(t);
  }
  if (c_in) {
    uint64_t sc; int lc;
    int_sig(c, &sc, &lc);
    bool lost;
    U128 t = cut(U128(sc), lc, q, &lost);
    if (s) t = (t << 1) | U128(lost ? 1 : 0);
    sum += sign_bit(c) ? -I128(t) : I128(t);
  }
  const bool neg = sum < 0;
  const U128 mag = neg ? U128(-sum) : U128(sum);
  const int unit = q - s;
  if (!m.align_includes_acc && c != 0) {
    uint64_t sc; int lc;
    int_sig(c, &sc, &lc);
    return add_round(neg, mag, unit, sign_bit(c), U128(sc), lc, m);
  }
  if (mag == 0) return 0.0;  // an exactly cancelling group gives +0 (as the published models)
  return round_result(neg, mag, unit, false, m);
}

}  // namespace fused_detail

// ---- The same group in double arithmetic -------------------------------------------------------
// For the models of fused_groups_exact_in_double every cut term is an integer below
// 2^(kept_bits+2) and a group's terms and c add exactly in a double, so a group can be computed
// with a handful of double operations per product instead of 128-bit integers: the CPU's SIMD
// kernel (matmul_fused-inl.h) and the CUDA element kernel do so. group_in_double is that
// computation for one group; it declines (returns false) where only group_at is exact: a NaN or
// infinity in or out, a result below the output format's smallest normal, or one that rounds to
// its overflow threshold.

// Exponent given to zero operands (a product with a zero factor never sets the group maximum),
// and the floor of the alignment exponent (reached only when every term is zero; 2^-q must
// merely stay finite).
constexpr double kZeroExp = -5000;
constexpr double kFloorExp = -900;

// Whether group_in_double applies to model m: c aligned with the products, no sticky bit,
// subnormal inputs kept (the published NVIDIA models), results that are floats (rtz or rne), and
// (terms + 1) cut terms below 2^(kept_bits+2) adding exactly in double. Host only.
bool fused_groups_exact_in_double(const FusedModel& m);

// Whether every sum model m forms over n products of values of formats fa and fb is their exact sum
// (no cut drops a bit, every group's and promotion's result is a value of the output format), and
// so also what a plain fp32 sequential sum of them gives (every partial sum exact in fp32). From the
// formats alone: the products are multiples of g = 2^(last_bit_exp(fa) + last_bit_exp(fb)) and at
// most P = max(fa) * max(fb) in magnitude, so every partial sum, c included, is a multiple of g at
// most n * P. Then
//   * the cut keeps every multiple of g: a group's alignment exponent E is at most the largest of
//     code(max fa) + code(max fb) (codes clamped at in_emin), the exponent of n * P (at least
//     out.emin: c's clamp) and min_align_exp, and E - kept_bits <= log2 g;
//   * a multiple of g at most n * P is a value of the output format: n * P / g < 2^(out_man_bits+1),
//     g on its grid (its subnormal grid where it keeps subnormals, else its smallest normal) and
//     n * P below its overflow threshold; and of fp32: n * P / g <= 2^24, g >= 2^-149.
// The operands must be finite and read as they are: formats without infinities or NaNs, subnormal
// inputs kept (in_subnormals). Interleaved models are left out. Host only.
bool fused_sums_exact(const FusedModel& m, const Format& fa, const Format& fb, size_t n);

namespace fused_detail {

// The alignment exponent of a non-zero input value: its leading bit's, at least emin. Read from the
// exponent field alone: a double subnormal (below any float) would read -1023 where lead_exp says
// less, and both clamp to emin (> -1022).
DRIFT_HD int align_exp(double x, int emin) {
  const int e = static_cast<int>((bits_of(x) >> 52) & 0x7ff) - 1023;
  return e < emin ? emin : e;
}

// The alignment code of a group input: its alignment exponent, or kZeroExp for zero, so that a
// product with a zero factor (the sum of two codes) stays below every group's starting exponent.
DRIFT_HD int align_code(double x, int emin) { return x == 0 ? static_cast<int>(kZeroExp) : align_exp(x, emin); }

// The alignment exponent a group starts from before its products: the model's lower clamp (or
// kFloorExp, standing for zero terms, which never win), raised by a non-zero finite c.
DRIFT_HD int group_start_exp(double c, const FusedModel& m) {
  int E = m.min_align_exp > static_cast<int>(kFloorExp) ? m.min_align_exp : static_cast<int>(kFloorExp);
  if (c != 0) {
    const int ec = align_exp(c, m.out.emin);
    if (ec > E) E = ec;
  }
  return E;
}

// The end of a group in double: `sum` (an integer, exact) times 2^q rounded once to out_man_bits
// fraction bits on its bits. false where only group_at is exact: a result below the output
// format's smallest normal, or one that reaches its overflow threshold.
DRIFT_HD bool round_cut_sum(double sum, int q, const FusedModel& m, double* result) {
  const uint64_t val = bits_of(sum * pow2(q));  // exact
  const uint64_t sign = val & 0x8000000000000000ull, mag = val & 0x7fffffffffffffffull;
  const int shift = 52 - m.out_man_bits;
  const uint64_t low = (uint64_t{1} << shift) - 1;
  const uint64_t r = m.final_rounding == Rounding::rne ? (mag + (low >> 1) + ((mag >> shift) & 1)) & ~low : mag & ~low;
  const uint64_t overflow_enc = bits_of(pow2(m.out.emax + 1));
  if ((mag != 0 && mag < bits_of(pow2(m.out.emin))) || r >= overflow_enc || mag >= overflow_enc) return false;
  *result = double_of(sign | r);
  return true;
}

// group_at(c, ...) for fused_groups_exact_in_double models and inputs that fit in float, in the
// operations of matmul_fused-inl.h: the alignment exponent E, q = max(E, min_align) - kept_bits,
// every term cut_to_integer(x*y, 2^-q) (exact: x*y fits a double, the scaling is by a power of
// two) added in double (exact), the sum times 2^q rounded once (round_cut_sum).
template <class Pos>
DRIFT_HD bool group_in_double(double c, const double* a, long sa, const double* b, long sb, int n, Pos pos,
                              const FusedModel& m, double* result) {
  if (is_nan(c) || is_inf(c)) return false;
  int E = group_start_exp(c, m);
  for (int i = 0; i < n; ++i) {
    const long p = pos(i);
    const double x = a[p * sa], y = b[p * sb];
    if (is_nan(x) || is_inf(x) || is_nan(y) || is_inf(y)) return false;
    if (x == 0 || y == 0) continue;  // (as align_code's sum, which never wins)
    const int e = align_exp(x, m.in_emin) + align_exp(y, m.in_emin);
    if (e > E) E = e;
  }
  const int q = E - m.kept_bits;
  const double scale = pow2(-q);
  // Starting from +0 turns a cut -0 into +0 (an all-zero group gives +0, as group_at).
  double sum = 0.0 + cut_to_integer(c, scale);
  for (int i = 0; i < n; ++i) {
    const long p = pos(i);
    sum += cut_to_integer(a[p * sa] * b[p * sb], scale);
  }
  return round_cut_sum(sum, q, m, result);
}

// One group: in double arithmetic where `in_double` (the caller has checked
// fused_groups_exact_in_double and that the inputs fit in float) and that applies, else group_at.
template <class Pos>
DRIFT_HD double group_of(bool in_double, double c, const double* a, long sa, const double* b, long sb, int n,
                         Pos pos, const FusedModel& m) {
  double r;
  if (in_double && group_in_double(c, a, sa, b, sb, n, pos, m, &r)) return r;
  return group_at(c, a, sa, b, sb, n, pos, m);
}

}  // namespace fused_detail

// One fused group: c + sum_{i<n} a[i*sa] * b[i*sb], n <= m.terms, with the model's alignment, cut
// and single rounding. a and b hold values on the input format's grid, c a value on the output
// format's grid (fp32 accumulator or the fp16 running sum). NaN in, inf*0, or infinities of both
// signs give NaN; otherwise an infinite input gives that infinity.
DRIFT_HD double fused_group_strided(double c, const double* a, long sa, const double* b, long sb, int n,
                                    const FusedModel& m) {
  return fused_detail::group_at(c, a, sa, b, sb, n, fused_detail::Consecutive{}, m);
}

DRIFT_HD double fused_group(double c, const double* a, const double* b, int n, const FusedModel& m) {
  return fused_group_strided(c, a, 1, b, 1, n, m);
}

// The groups of a chain over k products, in order: visit(s, n, pos) for each, the group's
// products lying at s + pos(i), i < n. Groups of m.terms (the last one shorter); with
// m.interleave = r, blocks of 2 * m.terms products, each split into its two groups by runs of r
// (a short last block as if padded with zeros).
template <class Visit>
DRIFT_HD void for_each_chain_group(int k, const FusedModel& m, Visit&& visit) {
  if (m.interleave > 0) {
    const int r = m.interleave, block = 2 * m.terms;
    for (int s = 0; s < k; s += block) {
      const int len = k - s < block ? k - s : block;
      for (int h = 0; h < 2; ++h) {
        // Products of half h in [0, len): r of every 2r, the partial last run clamped to [0, r].
        int tail = len % (2 * r) - h * r;
        tail = tail < 0 ? 0 : (tail > r ? r : tail);
        visit(s, len / (2 * r) * r + tail, fused_detail::Interleaved{r, h});
      }
    }
    return;
  }
  for (int s = 0; s < k; s += m.terms) visit(s, k - s < m.terms ? k - s : m.terms, fused_detail::Consecutive{});
}

// The chain of fused groups over k products (for_each_chain_group), each group's result the next
// group's c.
DRIFT_HD double fused_chain_strided(double c, const double* a, long sa, const double* b, long sb, int k,
                                    const FusedModel& m, bool in_double = false) {
  for_each_chain_group(k, m, [&](int s, int n, auto pos) {
    c = fused_detail::group_of(in_double, c, a + s * sa, sa, b + s * sb, sb, n, pos, m);
  });
  return c;
}

// The whole dot product c + a . b as the hardware computes it: a chain of fused groups or, with
// promote_every = N, chains of N products each added into an outer IEEE accumulator (rne in the
// output format) that starts at c.
// One promotion: outer + partial in IEEE arithmetic of the output format (rne), as CUDA-core code does.
DRIFT_HD double fused_promote_add(double outer, double partial, const FusedModel& m) {
  if (is_nan(outer) || is_nan(partial) || is_inf(outer) || is_inf(partial))
    return outer + partial;  // IEEE special-value rules (inf - inf = NaN)
  double hi, lo;
  two_sum(outer, partial, &hi, &lo);
  if (hi == 0 && lo == 0)
    return (outer == 0 && partial == 0 && sign_bit(outer) && sign_bit(partial)) ? signed_zero(true) : 0.0;
  RoundSpec nearest;
  nearest.mode = Rounding::rne;
  nearest.overflow = Overflow::ieee;
  nearest.subnormals = m.out_subnormals ? Subnormals::keep : Subnormals::flush;
  return round_to_sum(hi, lo, m.out, nearest);
}

// in_double: each group through group_in_double where it applies (see there; the caller checks
// fused_groups_exact_in_double and that the inputs fit in float). The same value either way.
DRIFT_HD double fused_dot_strided(double c, const double* a, long sa, const double* b, long sb, int k,
                                  const FusedModel& m, bool in_double = false) {
  if (m.promote_every <= 0) return fused_chain_strided(c, a, sa, b, sb, k, m, in_double);
  double outer = c;
  for (int s = 0; s < k; s += m.promote_every) {
    const int len = k - s < m.promote_every ? k - s : m.promote_every;
    outer = fused_promote_add(outer, fused_chain_strided(0.0, a + s * sa, sa, b + s * sb, sb, len, m, in_double), m);
  }
  return outer;
}

DRIFT_HD double fused_dot(double c, const double* a, const double* b, int k, const FusedModel& m,
                          bool in_double = false) {
  return fused_dot_strided(c, a, 1, b, 1, k, m, in_double);
}

}  // namespace drift
