// The narrow-accumulator add of the fast matmul (bf16/fp16 sums rounded at every add): a fast route
// for the usual case and an exact TwoSum / round-to-odd route, bit-identical to the scalar core.
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

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
