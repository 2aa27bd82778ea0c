// The narrow-accumulator kernel of the fast matmul (bf16/fp16 sums rounded at every add),
// bit-identical to the scalar core:
//   * NarrowAdd: a fast route for the usual case and an exact TwoSum / round-to-odd route (every
//     target; the counting kernel's add);
//   * NarrowStep: the plain kernel's add. On AVX-512, one rounding to odd at fp32 precision straight
//     from the exact s + a*b, by two fused multiply-adds with the instruction's own rounding
//     direction (down and up), then the constant-shift rounding to the narrow grid: no boundary test,
//     no branch but the range test, which narrow_checks often proves unnecessary. Elsewhere NarrowAdd.
//   * NarrowBlock: the inner sums of one K-block for a tile of rows x 2 vectors, in registers.
// Highway per-target header: included by matmul_fast.cpp once per SIMD target (foreach_target.h).
#if defined(DRIFT_ARITH_MATMUL_NARROW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DRIFT_ARITH_MATMUL_NARROW_INL_H_
#undef DRIFT_ARITH_MATMUL_NARROW_INL_H_
#else
#define DRIFT_ARITH_MATMUL_NARROW_INL_H_
#endif

#include "arith/matmul_fast_shared.h"
#include "arith/ops.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The exact route of NarrowAdd: round_narrow(s + p) for every lane (see matmul_fast.cpp's file comment), lanes that
// leave the narrow format's normal range redone by the scalar core.
template <FastInner kInner, class D, class V = hn::Vec<D>>
HWY_NOINLINE V NarrowAddExact(D d, const NarrowAcc& na, V s, V p) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  using VU = hn::Vec<decltype(du)>;
  const VU k1 = hn::Set(du, 1u);
  // TwoSum: hi + lo == s + p exactly (no overflow: an infinite hi is caught below).
  const V hi = hn::Add(s, p);
  const V bv = hn::Sub(hi, s);
  const V av = hn::Sub(hi, bv);
  const V lo = hn::Add(hn::Sub(s, av), hn::Sub(p, bv));
  // Round to odd at fp32 precision: where lo != 0 and hi's last bit is 0, step hi's encoding one unit
  // toward lo (+1 grows the magnitude when lo has hi's sign, -1 shrinks it otherwise).
  VU u = hn::BitCast(du, hi);
  const VU toward = hn::Or(hn::BitCast(du, hn::ShiftRight<31>(hn::BitCast(di, hn::Xor(u, hn::BitCast(du, lo))))), k1);
  const auto inexact = hn::RebindMask(du, hn::Not(hn::Eq(lo, hn::Zero(d))));
  const auto even = hn::Eq(hn::And(u, k1), hn::Zero(du));
  u = hn::IfThenElse(hn::And(inexact, even), hn::Add(u, toward), u);
  // Round the magnitude's encoding to the narrow grid (a constant number of mantissa bits in the
  // normal range; a carry into the exponent field is the binade change).
  const VU sign = hn::And(u, hn::Set(du, 0x80000000u));
  const VU a = hn::Xor(u, sign);
  const VU low = hn::Set(du, (1u << na.shift) - 1);
  VU r;
  if constexpr (kInner == FastInner::narrow_rne) {
    // a + (half - 1) + (last kept bit): ties go up exactly when the kept part is odd.
    const VU last = hn::And(hn::ShiftRightSame(a, na.shift), k1);
    r = hn::AndNot(low, hn::Add(hn::Add(a, hn::ShiftRight<1>(low)), last));
  } else {
    r = hn::AndNot(low, a);
  }
  const VU res = hn::Or(sign, r);
  // Rare: below the narrow normal range (zero excluded), beyond its largest finite value, or a hi
  // that left fp32's range (lo is then NaN and the steps above meaningless).
  const VU hi_abs = hn::AndNot(hn::Set(du, 0x80000000u), hn::BitCast(du, hi));
  const auto rare = hn::Or(hn::Or(hn::And(hn::Lt(a, hn::Set(du, na.min_normal_enc)), hn::Ne(a, hn::Zero(du))),
                                  hn::Gt(r, hn::Set(du, na.max_enc))),
                           hn::Gt(hi_abs, hn::Set(du, 0x7f7fffffu)));
  if (HWY_LIKELY(hn::AllFalse(du, rare))) return hn::BitCast(d, res);
  // Rare lanes: the scalar core, on the exact operands of this add.
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float sv[kMaxLanes], pv[kMaxLanes], rv[kMaxLanes];
  HWY_ALIGN uint32_t mv[kMaxLanes];
  hn::Store(s, d, sv);
  hn::Store(p, d, pv);
  hn::Store(hn::BitCast(d, res), d, rv);
  hn::Store(hn::VecFromMask(du, rare), du, mv);
  for (size_t l = 0; l < hn::Lanes(d); ++l)
    if (mv[l]) rv[l] = static_cast<float>(op_add(sv[l], pv[l], *na.format, *na.round));
  return hn::Load(d, rv);
}

// round_narrow(s + p) for every lane, exactly. p must be exact (the product of two operands, checked
// by the caller to be exact in fp32).
// Usual route: hi = fp32(s + p), rounded to the narrow grid by the constant shift. Rounding twice
// (to fp32, then to the narrow format) equals one rounding of s + p unless hi is a rounding boundary
// of the narrow format (a midpoint between grid points for rne, a grid point for rtz): the boundaries
// are fp32 numbers and fp32 rounding is monotone and fixes them, so s + p lies strictly between the
// same two boundaries as any other hi. Vectors with a lane on a boundary, or outside the narrow
// normal range (or zero), take the exact route.
template <FastInner kInner, class D, class V = hn::Vec<D>>
HWY_INLINE V NarrowAdd(D d, const NarrowAcc& na, V s, V p) {
  const hn::RebindToUnsigned<D> du;
  using VU = hn::Vec<decltype(du)>;
  const V hi = hn::Add(s, p);
  const VU u = hn::BitCast(du, hi);
  const VU low = hn::Set(du, (1u << na.shift) - 1);
  VU r;
  hn::Mask<decltype(du)> boundary;
  if constexpr (kInner == FastInner::narrow_rne) {
    // The sign bit rides along: the magnitude rounds the same way for either sign.
    r = hn::AndNot(low, hn::Add(hn::Add(u, hn::ShiftRight<1>(low)), hn::And(hn::ShiftRightSame(u, na.shift), hn::Set(du, 1u))));
    boundary = hn::Eq(hn::And(u, low), hn::Set(du, 1u << (na.shift - 1)));
  } else {
    r = hn::AndNot(low, u);
    boundary = hn::Eq(hn::And(u, low), hn::Zero(du));
  }
  // |hi| outside [min normal, max finite] (zero included): one unsigned compare.
  const VU a = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto outside = hn::Gt(hn::Sub(a, hn::Set(du, na.min_normal_enc)), hn::Set(du, na.max_enc - na.min_normal_enc));
  if (HWY_LIKELY(hn::AllFalse(du, hn::Or(boundary, outside)))) return hn::BitCast(d, r);
  return NarrowAddExact<kInner>(d, na, s, p);
}

// Lanes whose narrow sum left the format's normal range, redone by the scalar core on the exact
// operands of this add: round_narrow(s + x*b), x*b exact in fp32 (matmul_fast checked the data).
template <class D, class V = hn::Vec<D>>
HWY_NOINLINE V NarrowRedoLanes(D d, const NarrowAcc& na, V s, V x, V b, V r, uint64_t lanes) {
  constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  HWY_ALIGN float sv[kMaxLanes], pv[kMaxLanes], rv[kMaxLanes];
  hn::Store(s, d, sv);
  hn::Store(hn::Mul(x, b), d, pv);
  hn::Store(r, d, rv);
  for (size_t l = 0; l < hn::Lanes(d); ++l)
    if ((lanes >> l) & 1) rv[l] = static_cast<float>(op_add(sv[l], pv[l], *na.format, *na.round));
  return hn::Load(d, rv);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// round_narrow(s + x*b) for every lane, from the exact value v = s + x*b (the fma's, whatever the
// product's width):
//   rne: rd = fma rounded down, ru = fma rounded up (equal when v is an fp32 number, else the two fp32
//        neighbours of v, whose encodings differ by one); the odd one of them is v rounded to odd at
//        fp32 precision, and rounding that to nearest-even at man_bits <= 21 (the integer steps of
//        NarrowAddExact) is the one correct rounding of v (Boldo and Melquiond 2008). An exact zero
//        sum: rd is a zero (an even encoding), so ru is taken, whose zero sign is rne's (-0 only
//        for -0 + -0).
//   rtz: fma rounded toward zero, then truncated to the narrow grid: truncating twice is truncating
//        once, and the zero signs are rtz's own.
// Both are the format's rounding in its normal range (and, for emin = -126, its subnormal range);
// kTiny / kHuge test for results outside it (narrow_checks says when they cannot occur) and redo
// those lanes with the scalar core.
template <FastInner kInner, bool kTiny, bool kHuge>
class NarrowStep {
 public:
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  explicit NarrowStep(const NarrowAcc& na)
      : na_(&na),
        keep_(_mm512_set1_epi32(static_cast<int>(~((1u << na.shift) - 1)))),
        half_m1_(_mm512_set1_epi32(static_cast<int>((1u << (na.shift - 1)) - 1))),
        last_(_mm512_set1_epi32(static_cast<int>(1u << na.shift))),
        one_(_mm512_set1_epi32(1)),
        magnitude_(_mm512_set1_epi32(0x7fffffff)),
        min_m1_(_mm512_set1_epi32(static_cast<int>(na.min_normal_enc - 1))),
        max_(_mm512_set1_epi32(static_cast<int>(na.max_enc))) {}

  // Sets r to the rounded sums; false when a lane's result left the range the kernel rounds (the
  // tests that narrow_checks could not rule out), r then wrong in those lanes.
  HWY_INLINE bool Fast(V s, V x, V b, V& r) const {
    r = V{_mm512_castsi512_ps(Round(s, x, b))};
    return OutOfRange(r) == 0;
  }
  // The rounded sums, out-of-range lanes redone by the scalar core.
  HWY_INLINE V Exact(V s, V x, V b) const {
    const V r{_mm512_castsi512_ps(Round(s, x, b))};
    const __mmask16 out = OutOfRange(r);
    return out == 0 ? r : NarrowRedoLanes(D(), *na_, s, x, b, r, out);
  }

 private:
  HWY_INLINE __m512i Round(V s, V x, V b) const {
    constexpr int kDown = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
    constexpr int kUp = _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC;
    constexpr int kZero = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    if constexpr (kInner == FastInner::narrow_rne) {
      const __m512 rd = _mm512_fmadd_round_ps(x.raw, b.raw, s.raw, kDown);
      const __m512 ru = _mm512_fmadd_round_ps(x.raw, b.raw, s.raw, kUp);
      const __mmask16 rd_odd = _mm512_test_epi32_mask(_mm512_castps_si512(rd), one_);
      const __m512i odd = _mm512_castps_si512(_mm512_mask_blend_ps(rd_odd, ru, rd));
      // + (half - 1) + (last kept bit): carries into the kept bits exactly when rne rounds up.
      const __mmask16 last_odd = _mm512_test_epi32_mask(odd, last_);
      __m512i t = _mm512_add_epi32(odd, half_m1_);
      t = _mm512_mask_add_epi32(t, last_odd, t, one_);
      return _mm512_and_si512(t, keep_);
    } else {
      return _mm512_and_si512(_mm512_castps_si512(_mm512_fmadd_round_ps(x.raw, b.raw, s.raw, kZero)), keep_);
    }
  }
  // Lanes outside the format's normal range (or, with kTiny false, only beyond it; none when both are
  // false). Tested on the rounded result: the constant-shift rounding is monotone and the range's ends
  // lie on both grids, so a result inside [min normal, max finite] is the format's own (a value just
  // below the smallest normal that rounds up to it does so on the format's grid too).
  HWY_INLINE __mmask16 OutOfRange(V r) const {
    __mmask16 out = 0;
    if constexpr (kTiny || kHuge) {
      const __m512i a = _mm512_and_si512(_mm512_castps_si512(r.raw), magnitude_);
      if constexpr (kTiny) out = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(a, one_), min_m1_);  // 0 < a < min
      if constexpr (kHuge) out = static_cast<__mmask16>(out | _mm512_cmpgt_epu32_mask(a, max_));
    }
    return out;
  }

  const NarrowAcc* na_;
  // (An and with the kept bits rather than _mm512_andnot_si512, whose undefined pass-through trips
  // g++ 12's -Wmaybe-uninitialized.)
  __m512i keep_, half_m1_, last_, one_, magnitude_, min_m1_, max_;
};
#else
// Without per-instruction rounding directions: NarrowAdd (its own boundary and range tests).
template <FastInner kInner, bool kTiny, bool kHuge>
class NarrowStep {
 public:
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  explicit NarrowStep(const NarrowAcc& na) : na_(&na) {}
  HWY_INLINE bool Fast(V s, V x, V b, V& r) const {
    r = Exact(s, x, b);
    return true;
  }
  HWY_INLINE V Exact(V s, V x, V b) const { return NarrowAdd<kInner>(D(), *na_, s, hn::Mul(x, b)); }

 private:
  const NarrowAcc* na_;
};
#endif

// The register loop of NarrowRows over steps n = n0.. of a block (K index t, moving by dt): the
// kR x 2 sums stay in registers while every add is Fast. At the first add that is not, the loop stops
// with the sums of step n complete up to that add (which is left undone): returns n and its position
// 2r + h in *pos; returns k1 when the block is done.
template <size_t kR, class Step, class V>
HWY_INLINE size_t NarrowRegisterSteps(const Step& step, const float* const* arow, const float* strip, size_t n0,
                                      size_t k1, size_t t, ptrdiff_t dt, V (&acc)[kR][2], size_t* pos) {
  const typename Step::D d;
  const size_t L = hn::Lanes(d);
  V s[kR][2];
  for (size_t r = 0; r < kR; ++r) s[r][0] = acc[r][0], s[r][1] = acc[r][1];
  size_t n = n0;
  for (; n < k1; ++n, t += dt) {
    const V b0 = hn::LoadU(d, strip + t * 2 * L), b1 = hn::LoadU(d, strip + t * 2 * L + L);
    for (size_t r = 0; r < kR; ++r) {
      const V x = hn::Set(d, arow[r][t]);
      V r0, r1;
      if (HWY_UNLIKELY(!step.Fast(s[r][0], x, b0, r0))) {
        *pos = 2 * r;
        goto stop;
      }
      s[r][0] = r0;
      if (HWY_UNLIKELY(!step.Fast(s[r][1], x, b1, r1))) {
        *pos = 2 * r + 1;
        goto stop;
      }
      s[r][1] = r1;
    }
  }
stop:
  for (size_t r = 0; r < kR; ++r) acc[r][0] = s[r][0], acc[r][1] = s[r][1];
  return n;
}

// The inner sums of one K-block [k0, k1) for kR rows (A row r at arow[r]) and the 2 vectors of a B
// strip (row t at strip + t * 2L), each in the block's order (descending when reverse):
// acc[r][h] = round_narrow(acc[r][h] + a[r][t] * b[t][h]). The kR x 2 sums run in registers (no call
// in the loop, which would send them to memory); a lane out of range stops that loop, and the rest of
// that step is done by Exact, which calls the scalar core.
template <size_t kR, class Step, class V>
HWY_INLINE void NarrowRows(const Step& step, const float* const* arow, const float* strip, size_t k0, size_t k1,
                           bool reverse, V (&acc)[kR][2]) {
  const typename Step::D d;
  const size_t L = hn::Lanes(d);
  const ptrdiff_t dt = reverse ? -1 : 1;
  auto t_of = [&](size_t n) { return reverse ? k0 + k1 - 1 - n : n; };
  size_t n = k0;
  while (n < k1) {
    size_t pos = 0;
    n = NarrowRegisterSteps(step, arow, strip, n, k1, t_of(n), dt, acc, &pos);
    if (n == k1) break;
    // Step n from position pos (2r + h) on, by Exact.
    const size_t t = t_of(n);
    const V b[2] = {hn::LoadU(d, strip + t * 2 * L), hn::LoadU(d, strip + t * 2 * L + L)};
    for (size_t q = pos; q < 2 * kR; ++q)
      acc[q / 2][q % 2] = step.Exact(acc[q / 2][q % 2], hn::Set(d, arow[q / 2][t]), b[q % 2]);
    ++n;
  }
}

// NarrowRows with the range tests this call needs (NarrowAcc::check_tiny / check_huge).
template <FastInner kInner, size_t kR, class V>
HWY_INLINE void NarrowBlock(const NarrowAcc& na, const float* const* arow, const float* strip, size_t k0, size_t k1,
                            V (&acc)[kR][2]) {
  if (na.check_tiny && na.check_huge)
    NarrowRows(NarrowStep<kInner, true, true>(na), arow, strip, k0, k1, na.reverse, acc);
  else if (na.check_tiny)
    NarrowRows(NarrowStep<kInner, true, false>(na), arow, strip, k0, k1, na.reverse, acc);
  else if (na.check_huge)
    NarrowRows(NarrowStep<kInner, false, true>(na), arow, strip, k0, k1, na.reverse, acc);
  else
    NarrowRows(NarrowStep<kInner, false, false>(na), arow, strip, k0, k1, na.reverse, acc);
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
