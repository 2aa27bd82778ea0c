// drift's double tanh (see tanh_f64.h for the definition and why). This file is compiled once per
// SIMD target (foreach_target.h) and the best one is chosen at run time (HWY_DYNAMIC_DISPATCH); the
// scalar twin tanh_f64 is at the end. The definition needs fused multiply-adds: targets with them
// (AVX2, AVX-512, NEON, SVE, ...) run the vector code, whose every lane computes all of the
// definition's cases and keeps its own; the others run the scalar twin, whose std::fma is exact
// everywhere. The build has -ffp-contract=off, so nothing else is fused.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/tanh_f64.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <cmath>
#include <cstring>

#include "arith/tanh_f64.h"

#ifndef DRIFT_ARITH_TANH_F64_SHARED
#define DRIFT_ARITH_TANH_F64_SHARED
namespace drift::tanh_f64_detail {

// fdlibm's constants (s_expm1.c), as glibc's binary holds them.
constexpr double kInvLn2 = 0x1.71547652b82fep+0;
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;
constexpr double kQ1 = -0x1.11111111110f4p-5;
constexpr double kQ2 = 0x1.a01a019fe5585p-10;
constexpr double kQ3 = -0x1.4ce199eaadbb7p-14;
constexpr double kQ4 = 0x1.0cfca86e65239p-18;
constexpr double kQ5 = -0x1.afdb76e09c32dp-23;
// expm1's ranges, |y| below each (fdlibm compares the high word; these are those bounds as doubles).
constexpr double kNoReduction = 0x1.62e43p-2;  // k = 0 below (high word 0x3fd62e43)
constexpr double kOneLn2 = 0x1.0a2b2p+0;       // k = +-1 below (high word 0x3ff0a2b2)
// tanh's ranges, |x| below each.
constexpr double kTiny = 0x1p-55;
constexpr double kSaturated = 22.0;

}  // namespace drift::tanh_f64_detail
#endif  // DRIFT_ARITH_TANH_F64_SHARED

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_NATIVE_FMA
// expm1(y) of the header for one vector. Lanes whose y lies outside the ranges tanh gives expm1
// produce some value that TanhVec does not keep.
template <class D>
HWY_INLINE hn::Vec<D> Expm1(D d, hn::Vec<D> y) {
  namespace c = tanh_f64_detail;
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const V one = hn::Set(d, 1.0), half = hn::Set(d, 0.5);
  const V ay = hn::Abs(y);
  const auto negative = hn::Lt(y, hn::Zero(d));

  // k, exact in a double (|k| <= 64 here).
  const V k_rounded = hn::Trunc(hn::Add(hn::Mul(y, hn::Set(d, c::kInvLn2)), hn::IfThenElse(negative, hn::Neg(half), half)));
  V k = hn::IfThenElse(hn::Lt(ay, hn::Set(d, c::kOneLn2)), hn::IfThenElse(negative, hn::Neg(one), one), k_rounded);
  k = hn::IfThenElseZero(hn::Ge(ay, hn::Set(d, c::kNoReduction)), k);

  // For k = 0 these give r = y (hi = y, lo = 0).
  const V hi = hn::NegMulAdd(k, hn::Set(d, c::kLn2Hi), y);
  const V lo = hn::Mul(k, hn::Set(d, c::kLn2Lo));
  const V r = hn::Sub(hi, lo);
  const V corr = hn::Sub(hn::Sub(hi, r), lo);

  const V hfx = hn::Mul(half, r);
  const V hxs = hn::Mul(r, hfx);
  const V p1 = hn::MulAdd(hxs, hn::Set(d, c::kQ1), one);
  const V p2 = hn::MulAdd(hxs, hn::Set(d, c::kQ3), hn::Set(d, c::kQ2));
  const V p3 = hn::MulAdd(hxs, hn::Set(d, c::kQ5), hn::Set(d, c::kQ4));
  const V h2 = hn::Mul(hxs, hxs);
  const V r1 = hn::MulAdd(hn::Mul(h2, h2), p3, hn::MulAdd(h2, p2, p1));
  const V t = hn::NegMulAdd(r1, hfx, hn::Set(d, 3.0));
  const V e = hn::Mul(hn::Div(hn::Sub(r1, t), hn::NegMulAdd(r, t, hn::Set(d, 6.0))), hxs);

  // Each case's result; the lane keeps its k's.
  const V e2 = hn::Sub(hn::MulSub(r, hn::Sub(e, corr), corr), hxs);
  const V pow2_minus_k = hn::BitCast(d, hn::ShiftLeft<52>(hn::Sub(hn::Set(di, 0x3ff), hn::ConvertTo(di, k))));
  const auto exp_k = hn::ShiftLeft<52>(hn::BitCast(du, hn::ConvertTo(di, k)));
  auto times_2k = [&](V v) { return hn::BitCast(d, hn::Add(hn::BitCast(du, v), exp_k)); };
  const V res_zero = hn::Sub(y, hn::MulSub(e, y, hxs));
  const V res_minus_one = hn::MulAdd(half, hn::Sub(r, e2), hn::Neg(half));
  const V res_one = hn::IfThenElse(hn::Lt(r, hn::Set(d, -0.25)), hn::Mul(hn::Sub(e2, hn::Add(r, half)), hn::Set(d, -2.0)),
                                   hn::MulAdd(hn::Sub(r, e2), hn::Set(d, 2.0), one));
  const V res_far = hn::Sub(times_2k(hn::Sub(one, hn::Sub(e2, r))), one);
  const V res_small = times_2k(hn::Sub(hn::Sub(one, pow2_minus_k), hn::Sub(e2, r)));
  const V res_large = times_2k(hn::Add(hn::Sub(r, hn::Add(e2, pow2_minus_k)), one));

  V res = res_far;  // k <= -2 or k > 56
  res = hn::IfThenElse(hn::And(hn::Ge(k, hn::Set(d, 2.0)), hn::Le(k, hn::Set(d, 19.0))), res_small, res);
  res = hn::IfThenElse(hn::And(hn::Ge(k, hn::Set(d, 20.0)), hn::Le(k, hn::Set(d, 56.0))), res_large, res);
  res = hn::IfThenElse(hn::Eq(k, one), res_one, res);
  res = hn::IfThenElse(hn::Eq(k, hn::Neg(one)), res_minus_one, res);
  return hn::IfThenElse(hn::Eq(k, hn::Zero(d)), res_zero, res);
}

// tanh of one vector, every case of the header's definition computed and each lane's kept.
template <class D>
HWY_INLINE hn::Vec<D> TanhVec(D d, hn::Vec<D> x) {
  namespace c = tanh_f64_detail;
  using V = hn::Vec<D>;
  const V one = hn::Set(d, 1.0), two = hn::Set(d, 2.0);
  const V a = hn::Abs(x);
  const auto below_one = hn::Lt(a, one);
  const V t = Expm1(d, hn::IfThenElse(below_one, hn::Mul(a, hn::Set(d, -2.0)), hn::Add(a, a)));
  V z = hn::IfThenElse(below_one, hn::Div(hn::Neg(t), hn::Add(t, two)), hn::Sub(one, hn::Div(two, hn::Add(t, two))));
  z = hn::IfThenElse(hn::Ge(a, hn::Set(d, c::kSaturated)), one, z);  // and +-inf
  z = hn::CopySignToAbs(z, x);
  z = hn::IfThenElse(hn::Lt(a, hn::Set(d, c::kTiny)), hn::Mul(hn::Add(one, x), x), z);  // and +-0
  return hn::IfThenElse(hn::IsNaN(x), hn::Add(x, x), z);
}

void TanhSpanImpl(const double* in, double* out, size_t n) {
  const hn::ScalableTag<double> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(TanhVec(d, hn::LoadU(d, in + i)), d, out + i);
  if (i < n) {
    // The tail through the same vector code, on a zero-padded copy.
    HWY_ALIGN double tail[HWY_MAX_BYTES / sizeof(double)] = {};
    std::memcpy(tail, in + i, (n - i) * sizeof(double));
    hn::Store(TanhVec(d, hn::Load(d, tail)), d, tail);
    std::memcpy(out + i, tail, (n - i) * sizeof(double));
  }
}
#else
// No fused multiply-add in this target's vectors: the scalar twin, element by element.
void TanhSpanImpl(const double* in, double* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = tanh_f64(in[i]);
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(TanhSpanImpl);

namespace {

namespace c = tanh_f64_detail;

// The header's expm1(y), one element, case by case.
double expm1_reduced(double y) {
  const double ay = std::fabs(y);
  double k = 0;
  if (ay >= c::kNoReduction) {
    if (ay < c::kOneLn2)
      k = y < 0 ? -1.0 : 1.0;
    else
      k = std::trunc(y * c::kInvLn2 + (y < 0 ? -0.5 : 0.5));
  }
  const double hi = std::fma(-k, c::kLn2Hi, y);
  const double lo = k * c::kLn2Lo;
  const double r = hi - lo;
  const double corr = (hi - r) - lo;

  const double hfx = 0.5 * r;
  const double hxs = r * hfx;
  const double h2 = hxs * hxs;
  const double r1 = std::fma(h2 * h2, std::fma(hxs, c::kQ5, c::kQ4),
                             std::fma(h2, std::fma(hxs, c::kQ3, c::kQ2), std::fma(hxs, c::kQ1, 1.0)));
  const double t = std::fma(-r1, hfx, 3.0);
  const double e = ((r1 - t) / std::fma(-r, t, 6.0)) * hxs;
  if (k == 0) return y - std::fma(e, y, -hxs);

  const double e2 = std::fma(r, e - corr, -corr) - hxs;
  if (k == -1) return std::fma(0.5, r - e2, -0.5);
  if (k == 1) return r < -0.25 ? (e2 - (r + 0.5)) * -2.0 : std::fma(r - e2, 2.0, 1.0);
  const int ki = static_cast<int>(k);
  const double pow2_minus_k = std::ldexp(1.0, -ki);
  // * 2^k as an add to the exponent field (ldexp is the same on these normal values, but the
  // definition is the field's add).
  auto times_2k = [&](double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits += static_cast<uint64_t>(static_cast<int64_t>(ki)) << 52;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  if (ki >= 2 && ki <= 19) return times_2k((1.0 - pow2_minus_k) - (e2 - r));
  if (ki >= 20 && ki <= 56) return times_2k((r - (e2 + pow2_minus_k)) + 1.0);
  return times_2k(1.0 - (e2 - r)) - 1.0;
}

}  // namespace

double tanh_f64(double x) {
  if (std::isnan(x)) return x + x;
  const double a = std::fabs(x);
  if (a < c::kTiny) return (1.0 + x) * x;
  double z;
  if (a >= c::kSaturated)
    z = 1.0;
  else if (a < 1.0) {
    const double t = expm1_reduced(a * -2.0);
    z = -t / (t + 2.0);
  } else {
    const double t = expm1_reduced(a + a);
    z = 1.0 - 2.0 / (t + 2.0);
  }
  return std::copysign(z, x);
}

void tanh_f64_span(const double* in, double* out, size_t n) { HWY_DYNAMIC_DISPATCH(TanhSpanImpl)(in, out, n); }

std::vector<int64_t> tanh_f64_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
