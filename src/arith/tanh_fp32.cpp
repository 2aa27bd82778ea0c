// drift's fp32 tanh (see tanh_fp32.h for the algorithm and its error bound). This file is compiled
// once per SIMD target (foreach_target.h) and the best one is chosen at run time
// (HWY_DYNAMIC_DISPATCH); the scalar twin tanh_fp32 is at the end.
//
// The header's t: every target and the scalar twin perform the same IEEE double operations in the
// same order: multiplies and adds are separate (hn::Mul, hn::Add; never hn::MulAdd, which is fused
// on some targets and not on others), the build has -ffp-contract=off, and both branches (Taylor,
// exp) are computed for every lane and one is selected, which does not change the selected lane's
// value. Float -> double is exact; double -> float rounds to nearest even (MXCSR default) in both
// paths. The span's float result on AVX-512 takes another route to the same bits (TanhExpQuick,
// with fused multiply-adds: an approximation whose rounding is kept only where it provably agrees).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/tanh_fp32.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "arith/exp2_table-inl.h"
#include "arith/exp2_table.h"
#include "arith/tanh_fp32.h"

#ifndef DRIFT_ARITH_TANH_FP32_SHARED
#define DRIFT_ARITH_TANH_FP32_SHARED
namespace drift::tanh_detail {

// Below this |x|, the Taylor series (no cancellation); from it on, (e - 1) / (e + 1).
constexpr double kTaylorBelow = 0x1p-6;
// Taylor coefficients of tanh: each the double nearest the fraction (one correctly rounded division).
constexpr double kC3 = -1.0 / 3.0;
constexpr double kC5 = 2.0 / 15.0;
constexpr double kC7 = -17.0 / 315.0;
constexpr double kC9 = 62.0 / 2835.0;
// |x| is clamped here: tanh(20) rounds to 1.0f, and so does every larger value.
constexpr double kClamp = 20.0;
// exp: 1/ln2 (nearest double); ln2 = kLn2Hi + kLn2Lo (fdlibm's split: kLn2Hi has 32 significant
// bits, so n * kLn2Hi is exact for |n| < 2^21; kLn2Hi + kLn2Lo - ln2 = -1.2e-26).
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
// The quick route's (TanhExpQuick) reduction by ln2/32: 32/ln2 (nearest double) and the two parts
// above over 32 (exact: powers of two).
constexpr double k32OverLn2 = 0x1.71547652b82fep+5;
constexpr double kLn2HiOver32 = kLn2Hi / 32;
constexpr double kLn2LoOver32 = kLn2Lo / 32;
// Adding 1.5 * 2^52 rounds a double of magnitude < 2^51 to an integer (nearest even), which then
// sits in the low bits of the sum's encoding.
constexpr double kRoundShift = 0x1.8p52;
// 1/k! for k = 2..13 (k! is exact in double for k <= 18; one correctly rounded division each).
constexpr double kExpC[14] = {1.0,
                              1.0,
                              1.0 / 2.0,
                              1.0 / 6.0,
                              1.0 / 24.0,
                              1.0 / 120.0,
                              1.0 / 720.0,
                              1.0 / 5040.0,
                              1.0 / 40320.0,
                              1.0 / 362880.0,
                              1.0 / 3628800.0,
                              1.0 / 39916800.0,
                              1.0 / 479001600.0,
                              1.0 / 6227020800.0};
constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kAbsMask = 0x7fffffffu;
constexpr uint32_t kInfBits = 0x7f800000u;
constexpr uint32_t kQuietBit = 0x00400000u;

}  // namespace drift::tanh_detail
#endif  // DRIFT_ARITH_TANH_FP32_SHARED

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// t(a) of the header's Taylor branch, for one vector of a = |x| (used where a < 2^-6).
template <class D>
HWY_INLINE hn::Vec<D> TanhTaylor(D d, hn::Vec<D> a) {
  namespace k = tanh_detail;
  using V = hn::Vec<D>;
  const V z = hn::Mul(a, a);
  V p = hn::Set(d, k::kC9);
  p = hn::Add(hn::Mul(p, z), hn::Set(d, k::kC7));
  p = hn::Add(hn::Mul(p, z), hn::Set(d, k::kC5));
  p = hn::Add(hn::Mul(p, z), hn::Set(d, k::kC3));
  return hn::Add(a, hn::Mul(a, hn::Mul(z, p)));
}

// t(a) of the header's exp branch, for one vector of a = |x| >= 0, not NaN (used where a >= 2^-6).
template <class D>
HWY_INLINE hn::Vec<D> TanhExp(D d, hn::Vec<D> a) {
  namespace k = tanh_detail;
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du64;
  const V ac = hn::Min(a, hn::Set(d, k::kClamp));
  const V y = hn::Add(ac, ac);
  const V shifted = hn::Add(hn::Mul(y, hn::Set(d, k::kInvLn2)), hn::Set(d, k::kRoundShift));
  const V n = hn::Sub(shifted, hn::Set(d, k::kRoundShift));
  const V r = hn::Sub(hn::Sub(y, hn::Mul(n, hn::Set(d, k::kLn2Hi))), hn::Mul(n, hn::Set(d, k::kLn2Lo)));
  V q = hn::Set(d, k::kExpC[13]);
  for (int i = 12; i >= 0; --i) q = hn::Add(hn::Mul(q, r), hn::Set(d, k::kExpC[i]));
  // 2^n: n + 1023 in the exponent field (the low bits of `shifted` hold n; the shift drops the rest).
  const V scale = hn::BitCast(d, hn::ShiftLeft<52>(hn::Add(hn::BitCast(du64, shifted), hn::Set(du64, uint64_t{1023}))));
  const V e = hn::Mul(q, scale);
  const V one = hn::Set(d, 1.0);
  return hn::Div(hn::Sub(e, one), hn::Add(e, one));
}

// t(a) of the header for one vector of a = |x| >= 0, not NaN (NaN lanes give some value; callers
// replace it). Both branches are computed for every lane and one is selected.
template <class D>
HWY_INLINE hn::Vec<D> TanhMagnitude(D d, hn::Vec<D> a) {
  return hn::IfThenElse(hn::Lt(a, hn::Set(d, tanh_detail::kTaylorBelow)), TanhTaylor(d, a), TanhExp(d, a));
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// The quick route to the float result of the exp branch (AVX-512, 8 double lanes). It does not
// compute the header's t: it computes another approximation t' of tanh(a), cheaper (a table and a
// degree-6 polynomial with fused multiply-adds for exp, instead of 14 terms each a multiply and an
// add), within 2^-42 (relative) of tanh(a), and keeps it only where that settles the float
// result: where no midpoint between two floats lies within 2^-42 t' of t', tanh(a) and t' round to
// the same float, and so does the header's t (tanh_fp32 is correctly rounded on every float: the
// header's sweep). Lanes nearer a midpoint (about 2^-16 of them) are flagged `unsure` and take
// TanhExp. So the result is tanh_fp32's bits, whatever the route.
//
// t' for a in [2^-6, 20] (a = min(|x|, 20), y = 2a, as TanhExp), with u = 2^-53:
//   k = round(y * 32/ln2) (the 1.5 * 2^52 shift, |k| <= 1847); r = (y - k*L1) - k*L2 with L1, L2 the
//     header's kLn2Hi/32, kLn2Lo/32: k*L1 (43 bits) and y - k*L1 (multiples of 2^-37 below 2^6) are
//     exact, fused or not; |r| <= ln2/64 + 2^-40 < 0.011, within u|r| + 2^-80 of y - k ln2/32.
//   exp(r) ~ p = 1 + r + r^2/2! + ... + r^6/6! by Horner (multiply-adds): truncation
//     < 1.01 * 0.011^7 / 7! < 2^-57; rounding < 1.2u (each step's error is scaled down by |r|).
//   e = p * 2^(k/32), 2^(k/32) from exp2_table.h (within u/2; the exponent part exact): e within
//     3u + 2^-57 < 3.2u of exp(y) (relative), plus r's error, < 2^-57: < 3.5u.
//   e - 1: e >= exp(2^-5) > 1.0317, so e/(e - 1) < 32.6 magnifies e's error: < 114u, plus its own
//     rounding: < 115u. e + 1: < 4.5u. t' = (e - 1)/(e + 1): one more rounding.
//   Total < 115u + 4.5u + u < 121u < 2^-46 relative: 16x inside the 2^-42 the test allows.
// (A reciprocal estimate refined by Newton's method instead of the division ran slower here.)
// The test: t' in (2^-7, 1 + 2^-50), so 2^-42 t' is under 2^11 units of t''s last bit (2^-52 of its
// binade); float rounding drops 29 of its 52 fraction bits, whose midpoint is 2^28. A lane is sure
// when those 29 bits lie more than 2^12 units from 2^28. (Near a power of two the float grid
// changes, but the nearest midpoint across it is 2^27 units away.)
template <class D>
HWY_INLINE hn::Vec<D> TanhExpQuick(D d, hn::Vec<D> a, hn::Mask<D>* unsure) {
  namespace k = tanh_detail;
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const V ac = hn::Min(a, hn::Set(d, k::kClamp));
  const V y = hn::Add(ac, ac);
  const V shifted = hn::MulAdd(y, hn::Set(d, k::k32OverLn2), hn::Set(d, k::kRoundShift));
  const V kd = hn::Sub(shifted, hn::Set(d, k::kRoundShift));
  const V r = hn::NegMulAdd(kd, hn::Set(d, k::kLn2LoOver32), hn::NegMulAdd(kd, hn::Set(d, k::kLn2HiOver32), y));
  V p = hn::Set(d, k::kExpC[6]);
  for (int i = 5; i >= 0; --i) p = hn::MulAdd(p, r, hn::Set(d, k::kExpC[i]));
  const auto ki = hn::BitCast(du, shifted);
  const V s = hn::BitCast(d, hn::Add(Exp2TableEntries(d, ki), hn::ShiftLeft<52 - exp2_table::kTableBits>(ki)));
  const V e = hn::Mul(p, s);
  const V one = hn::Set(d, 1.0);
  const V t = hn::Div(hn::Sub(e, one), hn::Add(e, one));
  const auto dropped = hn::And(hn::BitCast(di, t), hn::Set(di, (int64_t{1} << 29) - 1));
  *unsure = hn::RebindMask(d, hn::Lt(hn::Abs(hn::Sub(dropped, hn::Set(di, int64_t{1} << 28))), hn::Set(di, (int64_t{1} << 12) + 1)));
  return t;
}
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// The quick route for one vector: the Taylor branch's t where a < 2^-6, else TanhExpQuick's t';
// `deferred`: the lanes whose t' does not settle the float rounding (never a Taylor lane), which
// TanhForFloat gives to TanhExp.
template <class D>
HWY_INLINE hn::Vec<D> TanhQuickRoute(D d, hn::Vec<D> a, hn::Mask<D>* deferred) {
  const auto taylor = hn::Lt(a, hn::Set(d, tanh_detail::kTaylorBelow));
  hn::Mask<D> unsure;
  auto t = TanhExpQuick(d, a, &unsure);
  if (!hn::AllFalse(d, taylor)) t = hn::IfThenElse(taylor, TanhTaylor(d, a), t);  // (a few in a hundred)
  *deferred = hn::AndNot(taylor, unsure);
  return t;
}
#endif

// t for the float result: TanhMagnitude's value, or on AVX-512 another double that rounds to the
// same float (TanhExpQuick), which is all the span's callers keep.
template <class D>
HWY_INLINE hn::Vec<D> TanhForFloat(D d, hn::Vec<D> a) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (hn::MaxLanes(d) == 8) {
    hn::Mask<D> deferred;
    auto t = TanhQuickRoute(d, a, &deferred);
    if (HWY_UNLIKELY(!hn::AllFalse(d, deferred))) t = hn::IfThenElse(deferred, TanhExp(d, a), t);
    return t;
  }
#endif
  return TanhMagnitude(d, a);
}

// tanh of one vector of floats `xf` (as many lanes as `d` has doubles).
template <class D>
HWY_INLINE hn::Vec<hn::Rebind<float, D>> TanhVec(D d, hn::Vec<hn::Rebind<float, D>> xf) {
  namespace k = tanh_detail;
  const hn::Rebind<float, D> df;
  const hn::Rebind<uint32_t, D> du32;
  const auto xbits = hn::BitCast(du32, xf);
  const auto sign = hn::And(xbits, hn::Set(du32, k::kSignBit));
  const auto abs_bits = hn::And(xbits, hn::Set(du32, k::kAbsMask));
  const auto t = TanhForFloat(d, hn::PromoteTo(d, hn::BitCast(df, abs_bits)));
  const auto out = hn::Or(hn::BitCast(du32, hn::DemoteTo(df, t)), sign);
  const auto is_nan = hn::Gt(abs_bits, hn::Set(du32, k::kInfBits));
  return hn::BitCast(df, hn::IfThenElse(is_nan, hn::Or(xbits, hn::Set(du32, k::kQuietBit)), out));
}

void TanhSpanImpl(const float* in, float* out, size_t n) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(TanhVec(d, hn::LoadU(df, in + i)), df, out + i);
  if (i < n) {
    // The tail through the same vector code, on a zero-padded copy.
    HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(double)] = {};
    std::memcpy(tail, in + i, (n - i) * sizeof(float));
    hn::Store(TanhVec(d, hn::Load(df, tail)), df, tail);
    std::memcpy(out + i, tail, (n - i) * sizeof(float));
  }
}

// The test hook: t(|x|) in double, before the rounding to float.
void TanhUnroundedSpanImpl(const float* in, double* out, size_t n) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(double)] = {};
  HWY_ALIGN double tail_out[HWY_MAX_BYTES / sizeof(double)];
  for (size_t i = 0; i < n; i += N) {
    const size_t len = std::min(N, n - i);
    std::memcpy(tail, in + i, len * sizeof(float));
    hn::Store(TanhMagnitude(d, hn::Abs(hn::PromoteTo(d, hn::Load(df, tail)))), d, tail_out);
    std::memcpy(out + i, tail_out, len * sizeof(double));
  }
}

// The test hook of the quick route: deferred[i] = 1 where TanhQuickRoute defers in[i] to TanhExp.
bool TanhQuickDeferredImpl(const float* in, uint8_t* deferred, size_t n) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const hn::RebindToSigned<decltype(d)> di;
  constexpr size_t N = hn::MaxLanes(d);
  static_assert(N == 8, "the quick route's lanes");
  HWY_ALIGN float tail[N] = {};
  HWY_ALIGN int64_t flags[N];
  for (size_t i = 0; i < n; i += N) {
    const size_t len = std::min(N, n - i);
    std::memcpy(tail, in + i, len * sizeof(float));
    const auto a = hn::Abs(hn::PromoteTo(d, hn::Load(df, tail)));
    hn::Mask<decltype(d)> lanes;
    (void)TanhQuickRoute(d, a, &lanes);
    hn::Store(hn::VecFromMask(di, hn::RebindMask(di, lanes)), di, flags);
    for (size_t l = 0; l < len; ++l) deferred[i + l] = flags[l] != 0;
  }
  return true;
#else
  (void)in, (void)deferred, (void)n;
  return false;
#endif
}

const char* TanhTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(TanhSpanImpl);
HWY_EXPORT(TanhUnroundedSpanImpl);
HWY_EXPORT(TanhTargetName);
HWY_EXPORT(TanhQuickDeferredImpl);

namespace {

// t(a) of the header for a = |x| >= 0, not NaN: the operations of TanhMagnitude, one lane.
double tanh_magnitude(double a) {
  namespace k = tanh_detail;
  if (a < k::kTaylorBelow) {
    const double z = a * a;
    double p = k::kC9;
    p = p * z + k::kC7;
    p = p * z + k::kC5;
    p = p * z + k::kC3;
    return a + a * (z * p);
  }
  const double ac = a < k::kClamp ? a : k::kClamp;
  const double y = ac + ac;
  const double shifted = y * k::kInvLn2 + k::kRoundShift;
  const double n = shifted - k::kRoundShift;
  const double r = (y - n * k::kLn2Hi) - n * k::kLn2Lo;
  double q = k::kExpC[13];
  for (int i = 12; i >= 0; --i) q = q * r + k::kExpC[i];
  uint64_t sbits;
  std::memcpy(&sbits, &shifted, sizeof sbits);
  const uint64_t scale_bits = (sbits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  const double e = q * scale;
  return (e - 1.0) / (e + 1.0);
}

}  // namespace

float tanh_fp32(float x) {
  namespace k = tanh_detail;
  uint32_t xbits;
  std::memcpy(&xbits, &x, sizeof xbits);
  const uint32_t abs_bits = xbits & k::kAbsMask;
  uint32_t out;
  if (abs_bits > k::kInfBits) {
    out = xbits | k::kQuietBit;
  } else {
    const float tf = static_cast<float>(tanh_magnitude(std::fabs(static_cast<double>(x))));
    std::memcpy(&out, &tf, sizeof out);
    out |= xbits & k::kSignBit;
  }
  float result;
  std::memcpy(&result, &out, sizeof result);
  return result;
}

double tanh_fp32_unrounded(float x) { return tanh_magnitude(std::fabs(static_cast<double>(x))); }

void tanh_fp32_unrounded_span(const float* in, double* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(TanhUnroundedSpanImpl)(in, out, n);
}

void tanh_fp32_span(const float* in, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(TanhSpanImpl)(in, out, n); }

bool tanh_fp32_quick_deferred_span(const float* in, uint8_t* deferred, size_t n) {
  return HWY_DYNAMIC_DISPATCH(TanhQuickDeferredImpl)(in, deferred, n);
}

const char* tanh_fp32_target_name() { return HWY_DYNAMIC_DISPATCH(TanhTargetName)(); }

std::vector<int64_t> tanh_fp32_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
