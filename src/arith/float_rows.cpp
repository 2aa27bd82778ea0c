#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/float_rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "arith/float_rows.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// On the encodings: for non-negative floats the encoding orders as the value, so an integer max
// finds the largest finite magnitude exactly (magnitude encodings fit 31 bits: signed compares).
// Whole vectors, then the rest by the element statement (a partial vector load could read past the
// row's end: only some targets have loads that cannot fault).
FloatRowCounts FloatRowCountsImpl(const float* p, size_t n) {
  const hn::ScalableTag<int32_t> di;
  using VI = hn::Vec<decltype(di)>;
  const size_t N = hn::Lanes(di);
  const int32_t* bits = reinterpret_cast<const int32_t*>(p);
  const VI magnitude = hn::Set(di, 0x7fffffff), inf = hn::Set(di, 0x7f800000), min_normal = hn::Set(di, 0x00800000);
  VI top = hn::Zero(di), bad = hn::Zero(di), sub = hn::Zero(di);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const VI u = hn::And(hn::LoadU(di, bits + i), magnitude);
    const auto nonfinite = hn::Not(hn::Lt(u, inf));
    bad = hn::Sub(bad, hn::VecFromMask(di, nonfinite));  // (a true lane is -1)
    sub = hn::Sub(sub, hn::VecFromMask(di, hn::And(hn::Gt(u, hn::Zero(di)), hn::Lt(u, min_normal))));
    top = hn::Max(top, hn::IfThenZeroElse(nonfinite, u));
  }
  // The rest by the element statement, merged: both maxima are finite magnitudes, so the larger
  // encoding is the larger value.
  const FloatRowCounts rest = float_row_counts_scalar(p + i, n - i);
  int32_t t = hn::GetLane(hn::MaxOfLanes(di, top)), r;
  std::memcpy(&r, &rest.amax, sizeof r);
  t = std::max(t, r);
  FloatRowCounts c;
  c.nonfinite = static_cast<uint32_t>(hn::GetLane(hn::SumOfLanes(di, bad))) + rest.nonfinite;
  c.subnormal = static_cast<uint32_t>(hn::GetLane(hn::SumOfLanes(di, sub))) + rest.subnormal;
  std::memcpy(&c.amax, &t, sizeof t);
  return c;
}

// The whole vectors of a power-of-two scaling: out = in * mult_of(i), exact where out * inv_of(i)
// gives back the input (or it is NaN). Returns whether all were exact; *done: the elements covered
// (the rest go to the element statement: a partial vector's stores must not pass n).
template <class MultOf, class InvOf>
HWY_INLINE bool ScalePow2Vectors(const float* in, float* out, size_t n, MultOf mult_of, InvOf inv_of, size_t* done) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto exact = hn::Eq(hn::Zero(d), hn::Zero(d));  // all true
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto x = hn::LoadU(d, in + i);
    const auto y = hn::Mul(x, mult_of(d, i));
    hn::StoreU(y, d, out + i);
    exact = hn::And(exact, hn::Or(hn::Eq(hn::Mul(y, inv_of(d, i)), x), hn::Not(hn::Eq(x, x))));  // (NaN: not(x == x))
  }
  *done = i;
  return hn::AllTrue(d, exact);
}

bool ScaleFloatsPow2Impl(const float* in, float* out, size_t n, float mult, float inv) {
  const hn::ScalableTag<float> dt;
  const auto m = hn::Set(dt, mult), back = hn::Set(dt, inv);
  size_t i;
  const bool vectors = ScalePow2Vectors(
      in, out, n, [&](auto, size_t) { return m; }, [&](auto, size_t) { return back; }, &i);
  const bool rest = scale_floats_pow2_scalar(in + i, out + i, n - i, mult, inv);
  return vectors && rest;
}

bool ScaleFloatsImpl(const float* in, float* out, size_t n, float mult) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto m = hn::Set(d, mult), inf = hn::Set(d, INFINITY);
  auto other = hn::Ne(hn::Zero(d), hn::Zero(d));  // all false
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto x = hn::LoadU(d, in + i);
    const auto y = hn::Mul(x, m);
    hn::StoreU(y, d, out + i);
    // (Ne is an ordered compare: x != x is written as not(x == x), true for NaN.)
    other = hn::Or(other, hn::Or(hn::AndNot(hn::Eq(hn::Abs(x), inf), hn::Eq(hn::Abs(y), inf)), hn::Not(hn::Eq(x, x))));
  }
  const bool rest = scale_floats_scalar(in + i, out + i, n - i, mult);
  return !hn::AllFalse(d, other) || rest;
}

// Columns in vectors, each vector of columns down the h rows; the rest of the columns by the
// column statement.
void FloatColumnCountsImpl(const float* p, size_t ld, size_t h, size_t n, float* amax, uint32_t* nonfinite) {
  const hn::ScalableTag<int32_t> di;
  using VI = hn::Vec<decltype(di)>;
  const size_t N = hn::Lanes(di);
  const VI magnitude = hn::Set(di, 0x7fffffff), inf = hn::Set(di, 0x7f800000);
  size_t j = 0;
  for (; j + N <= n; j += N) {
    VI top = hn::Zero(di), bad = hn::Zero(di);
    for (size_t t = 0; t < h; ++t) {
      const VI u = hn::And(hn::LoadU(di, reinterpret_cast<const int32_t*>(p + t * ld + j)), magnitude);
      const auto nonfinite_lanes = hn::Not(hn::Lt(u, inf));
      bad = hn::Sub(bad, hn::VecFromMask(di, nonfinite_lanes));  // (a true lane is -1)
      top = hn::Max(top, hn::IfThenZeroElse(nonfinite_lanes, u));
    }
    hn::StoreU(hn::BitCast(hn::RebindToFloat<decltype(di)>(), top), hn::RebindToFloat<decltype(di)>(), amax + j);
    hn::StoreU(hn::BitCast(hn::RebindToUnsigned<decltype(di)>(), bad), hn::RebindToUnsigned<decltype(di)>(),
               nonfinite + j);
  }
  float_column_counts_scalar(p + j, ld, h, n - j, amax + j, nonfinite + j);
}

bool ScaleFloatsPow2EachImpl(const float* in, float* out, size_t n, const float* mult, const float* inv) {
  size_t i;
  const bool vectors = ScalePow2Vectors(
      in, out, n, [&](auto d, size_t at) { return hn::LoadU(d, mult + at); },
      [&](auto d, size_t at) { return hn::LoadU(d, inv + at); }, &i);
  const bool rest = scale_floats_pow2_each_scalar(in + i, out + i, n - i, mult + i, inv + i);
  return vectors && rest;
}

void AddZeroFloatsImpl(float* p, size_t n) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto x = hn::LoadU(d, p + i);
    const auto y = hn::Add(hn::Zero(d), x);
    if (!hn::AllTrue(di, hn::Eq(hn::BitCast(di, x), hn::BitCast(di, y)))) hn::StoreU(y, d, p + i);
  }
  add_zero_floats_scalar(p + i, n - i);
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(FloatRowCountsImpl);
HWY_EXPORT(ScaleFloatsPow2Impl);
HWY_EXPORT(ScaleFloatsImpl);
HWY_EXPORT(FloatColumnCountsImpl);
HWY_EXPORT(ScaleFloatsPow2EachImpl);
HWY_EXPORT(AddZeroFloatsImpl);

FloatRowCounts float_row_counts(const float* p, size_t n) { return HWY_DYNAMIC_DISPATCH(FloatRowCountsImpl)(p, n); }
bool scale_floats_pow2(const float* in, float* out, size_t n, float mult, float inv) {
  return HWY_DYNAMIC_DISPATCH(ScaleFloatsPow2Impl)(in, out, n, mult, inv);
}
bool scale_floats(const float* in, float* out, size_t n, float mult) {
  return HWY_DYNAMIC_DISPATCH(ScaleFloatsImpl)(in, out, n, mult);
}

void add_zero_floats(float* p, size_t n) { HWY_DYNAMIC_DISPATCH(AddZeroFloatsImpl)(p, n); }

void add_zero_floats_scalar(float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) p[i] = 0.0f + p[i];
}

FloatRowCounts float_row_counts_scalar(const float* p, size_t n) {
  int32_t top = 0;
  FloatRowCounts c;
  for (size_t i = 0; i < n; ++i) {
    int32_t u;
    std::memcpy(&u, p + i, sizeof u);
    u &= 0x7fffffff;  // |x|
    if (u >= 0x7f800000) {
      ++c.nonfinite;
      continue;
    }
    if (u > 0 && u < 0x00800000) ++c.subnormal;
    top = std::max(top, u);
  }
  std::memcpy(&c.amax, &top, sizeof top);
  return c;
}

bool scale_floats_pow2_scalar(const float* in, float* out, size_t n, float mult, float inv) {
  bool all = true;
  for (size_t i = 0; i < n; ++i) {
    out[i] = in[i] * mult;
    all = all && (out[i] * inv == in[i] || in[i] != in[i]);
  }
  return all;
}

bool scale_floats_scalar(const float* in, float* out, size_t n, float mult) {
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    out[i] = in[i] * mult;
    any = any || (std::fabs(out[i]) == INFINITY && std::fabs(in[i]) != INFINITY) || in[i] != in[i];
  }
  return any;
}

void float_column_counts(const float* p, size_t ld, size_t h, size_t n, float* amax, uint32_t* nonfinite) {
  HWY_DYNAMIC_DISPATCH(FloatColumnCountsImpl)(p, ld, h, n, amax, nonfinite);
}
bool scale_floats_pow2_each(const float* in, float* out, size_t n, const float* mult, const float* inv) {
  return HWY_DYNAMIC_DISPATCH(ScaleFloatsPow2EachImpl)(in, out, n, mult, inv);
}

void float_column_counts_scalar(const float* p, size_t ld, size_t h, size_t n, float* amax, uint32_t* nonfinite) {
  for (size_t j = 0; j < n; ++j) {
    int32_t top = 0;
    uint32_t bad = 0;
    for (size_t t = 0; t < h; ++t) {
      int32_t u;
      std::memcpy(&u, p + t * ld + j, sizeof u);
      u &= 0x7fffffff;  // |x|
      if (u >= 0x7f800000) ++bad;
      else top = std::max(top, u);
    }
    std::memcpy(amax + j, &top, sizeof top);
    nonfinite[j] = bad;
  }
}

bool scale_floats_pow2_each_scalar(const float* in, float* out, size_t n, const float* mult, const float* inv) {
  bool all = true;
  for (size_t i = 0; i < n; ++i) {
    out[i] = in[i] * mult[i];
    all = all && (out[i] * inv[i] == in[i] || in[i] != in[i]);
  }
  return all;
}

std::vector<int64_t> float_rows_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
