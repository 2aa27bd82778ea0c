// drift's fp32 exp (see exp_fp32.h for the algorithm). This file is compiled once per SIMD target
// (foreach_target.h) and the best one is chosen at run time (HWY_DYNAMIC_DISPATCH); the scalar twin
// exp_fp32 is at the end.
//
// The fused steps must be fused on every path: the scalar twin uses std::fma (correctly rounded
// wherever it runs), the SIMD code hn::MulAdd / hn::MulSub on targets with a native FMA. Highway
// emulates those on targets without one (a multiply, then an add), so there the span calls the
// scalar twin lane by lane: slower, never different. The build has -ffp-contract=off, so the
// compiler fuses nothing on its own.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/exp_fp32.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "arith/exp2_table-inl.h"
#include "arith/exp2_table.h"
#include "arith/exp_fp32.h"

#ifndef DRIFT_ARITH_EXP_FP32_SHARED
#define DRIFT_ARITH_EXP_FP32_SHARED
namespace drift::exp_detail {

// glibc's __exp2f_data (sysdeps/ieee754/flt-32/e_exp2f_data.c): its table T is exp2_table.h's.
using exp2_table::kTable;
using exp2_table::kTableBits;
using exp2_table::kTableMask;
constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // 32/ln2 (invln2_scaled)
constexpr double kShift = 0x1.8p52;               // rounds a double of magnitude < 2^51 to an integer
// poly_scaled: C0 r^3 + C1 r^2 + C2 r approximates 2^(r/32) - 1 on |r| <= 1/2.
constexpr double kC0 = 0x1.c6af84b912394p-20;
constexpr double kC1 = 0x1.ebfce50fac4f3p-13;
constexpr double kC2 = 0x1.62e42ff0c52d6p-6;
// |x| >= 88 (the float encoding's magnitude bits from 88.0f up) leaves the main path.
constexpr uint32_t kSpecialFrom = 0x42b00000u;
constexpr uint32_t kAbsMask = 0x7fffffffu;

}  // namespace drift::exp_detail
#endif  // DRIFT_ARITH_EXP_FP32_SHARED

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_NATIVE_FMA
// y of the header for one vector of x promoted to double (|x| < 88).
template <class D>
HWY_INLINE hn::Vec<D> ExpMain(D d, hn::Vec<D> xd) {
  namespace k = exp_detail;
  using V = hn::Vec<D>;
  const hn::RebindToUnsigned<D> du;
  const V inv_ln2n = hn::Set(d, k::kInvLn2N);
  const V shifted = hn::MulAdd(inv_ln2n, xd, hn::Set(d, k::kShift));
  const V kd = hn::Sub(shifted, hn::Set(d, k::kShift));
  const V r = hn::MulSub(inv_ln2n, xd, kd);
  const auto ki = hn::BitCast(du, shifted);
  const V s = hn::BitCast(d, hn::Add(Exp2TableEntries(d, ki), hn::ShiftLeft<52 - k::kTableBits>(ki)));
  const V z = hn::MulAdd(hn::Set(d, k::kC0), r, hn::Set(d, k::kC1));
  const V r2 = hn::Mul(r, r);
  V y = hn::MulAdd(r, hn::Set(d, k::kC2), hn::Set(d, 1.0));
  y = hn::MulAdd(z, r2, y);
  return hn::Mul(y, s);
}

// exp_fp32 of the `count` (<= lanes of d) floats at in, into out; lanes off the main path by the
// scalar twin. A short count (a span's tail) loads and stores only its lanes (masked, so nothing past
// the span is touched): the causal rows of attention are short, and a copy through a padded buffer
// cost half their time.
template <class D>
HWY_INLINE void ExpVector(D d, const float* in, float* out, size_t count) {
  namespace k = exp_detail;
  const hn::Rebind<float, D> df;
  const hn::Rebind<uint32_t, D> du32;
  const bool full = count == hn::Lanes(d);
  const auto valid = hn::FirstN(df, count);
  const auto xf = full ? hn::LoadU(df, in) : hn::MaskedLoad(valid, df, in);  // zeros past count
  const auto abs_bits = hn::And(hn::BitCast(du32, xf), hn::Set(du32, k::kAbsMask));
  const bool special = !hn::AllTrue(du32, hn::Lt(abs_bits, hn::Set(du32, k::kSpecialFrom)));
  if (HWY_LIKELY(!special)) {
    const auto y = hn::DemoteTo(df, ExpMain(d, hn::PromoteTo(d, xf)));
    if (full)
      hn::StoreU(y, df, out);
    else
      hn::BlendedStore(y, valid, df, out);
    return;
  }
  for (size_t i = 0; i < count; ++i) out[i] = exp_fp32(in[i]);
}

void ExpSpanImpl(const float* in, float* out, size_t n) {
  const hn::ScalableTag<double> d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) ExpVector(d, in + i, out + i, N);
  if (i < n) ExpVector(d, in + i, out + i, n - i);
}

// The test hook: y before the rounding to float (|x| < 88).
void ExpUnroundedSpanImpl(const float* in, double* out, size_t n) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float tail[HWY_MAX_BYTES / sizeof(double)] = {};
  HWY_ALIGN double tail_out[HWY_MAX_BYTES / sizeof(double)];
  for (size_t i = 0; i < n; i += N) {
    const size_t len = std::min(N, n - i);
    std::memcpy(tail, in + i, len * sizeof(float));
    hn::Store(ExpMain(d, hn::PromoteTo(d, hn::Load(df, tail))), d, tail_out);
    std::memcpy(out + i, tail_out, len * sizeof(double));
  }
}
#else
// No native FMA on this target: the scalar twin, whose std::fma is fused wherever it runs.
void ExpSpanImpl(const float* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = exp_fp32(in[i]);
}
void ExpUnroundedSpanImpl(const float* in, double* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = exp_fp32_unrounded(in[i]);
}
#endif  // HWY_NATIVE_FMA

const char* ExpTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(ExpSpanImpl);
HWY_EXPORT(ExpUnroundedSpanImpl);
HWY_EXPORT(ExpTargetName);

double exp_fp32_unrounded(float x) {
  namespace k = exp_detail;
  const double xd = x;
  const double shifted = std::fma(k::kInvLn2N, xd, k::kShift);
  const double kd = shifted - k::kShift;
  const double r = std::fma(k::kInvLn2N, xd, -kd);
  uint64_t ki;
  std::memcpy(&ki, &shifted, sizeof ki);
  const uint64_t s_bits = k::kTable[ki & k::kTableMask] + (ki << (52 - k::kTableBits));
  double s;
  std::memcpy(&s, &s_bits, sizeof s);
  const double z = std::fma(k::kC0, r, k::kC1);
  const double r2 = r * r;
  double y = std::fma(r, k::kC2, 1.0);
  y = std::fma(z, r2, y);
  return y * s;
}

float exp_fp32(float x) {
  namespace k = exp_detail;
  uint32_t ix;
  std::memcpy(&ix, &x, sizeof ix);
  if ((ix & k::kAbsMask) >= k::kSpecialFrom) {
    if (ix == 0xff800000u) return 0.0f;                                    // -inf
    if ((ix & k::kAbsMask) >= 0x7f800000u) return x + x;                   // +inf, NaN
    if (x > 0x1.62e42ep6f) return std::numeric_limits<float>::infinity();  // exp(x) > FLT_MAX
    if (x < -0x1.9fe368p6f) return 0.0f;                                   // exp(x) < 2^-150
    if (x < -0x1.9d1d9ep6f) return 0x1p-149f;                              // exp(x) < 2^-149
  }
  return static_cast<float>(exp_fp32_unrounded(x));
}

void exp_fp32_span(const float* in, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(ExpSpanImpl)(in, out, n); }

void exp_fp32_unrounded_span(const float* in, double* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(ExpUnroundedSpanImpl)(in, out, n);
}

const char* exp_fp32_target_name() { return HWY_DYNAMIC_DISPATCH(ExpTargetName)(); }

std::vector<int64_t> exp_fp32_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
