// MX block quantization in one pass (mx_cast.h), compiled once per SIMD target (foreach_target.h)
// and dispatched at run time. The rounding is cast_rne-inl.h's, the same kernel cast_span runs.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/mx_cast.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "arith/cast_rne-inl.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "arith/hostdevice.h"
#include "arith/mx_cast.h"

#ifndef DRIFT_ARITH_MX_CAST_SHARED
#define DRIFT_ARITH_MX_CAST_SHARED
namespace drift::mx_detail {

// The exponents of the blocks with a non-zero amax, counted in registers and handed to the tally
// once (MxCastTally's figures: the same in any grouping).
struct ExponentCount {
  uint32_t* hist;
  uint64_t count = 0;
  int min = 127, max = -127;
  int64_t sum = 0;
  explicit ExponentCount(uint32_t* h) : hist(h) {}
  void add(int e) {
    ++count;
    min = std::min(min, e);
    max = std::max(max, e);
    sum += e;
    ++hist[e + 127];
  }
  void into(MxCastTally& t) const {
    t.scales = count;
    t.e_min = count ? min : 0;
    t.e_max = count ? max : 0;
    t.e_sum = sum;
  }
};

}  // namespace drift::mx_detail
#endif  // DRIFT_ARITH_MX_CAST_SHARED

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

size_t LanesImpl() { return hn::Lanes(hn::ScalableTag<float>()); }
const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }

// The scales of a vector of blocks (or columns), one per lane, from their amax encodings a (finite;
// `take`: the lanes that are blocks to scale), in SIMD: e = floor(log2 amax) - shift clamped to
// [-127, 127] (a subnormal amax's floor(log2) from its conversion to float, exact below 2^23), -127
// for an all-zero block, as plain_e8m0_exponent. mult and inv receive 2^-e and 2^e as floats (1 for
// an all-zero block or a lane not taken: its elements are zeros, or it is not cast), e_out the
// exponents, counted the lanes whose amax is non-zero (-1, else 0), and check the lanes whose
// products fp32(x * 2^-e) might not be exact: only a block scaled down (e > 0: a product may fall
// below fp32's normal range) or up past fp32's range (floor(log2 amax) - e > 127, possible only with
// a large negative offset) can round.
template <class DF, class VI = hn::Vec<hn::RebindToSigned<DF>>, class MI = hn::Mask<hn::RebindToSigned<DF>>>
HWY_INLINE void BlockScales(DF df, VI a, MI take, int shift, float* mult, float* inv, int32_t* e_out,
                            int32_t* counted, int32_t* check) {
  const hn::RebindToSigned<DF> di;
  const VI biased = hn::ShiftRight<23>(a);
  const VI fl_sub = hn::Sub(hn::ShiftRight<23>(hn::BitCast(di, hn::ConvertTo(df, a))), hn::Set(di, 127 + 149));
  const VI fl = hn::IfThenElse(hn::Eq(biased, hn::Zero(di)), fl_sub, hn::Sub(biased, hn::Set(di, 127)));
  const MI nz = hn::AndNot(hn::Eq(a, hn::Zero(di)), take);
  const VI e = hn::IfThenElse(nz, hn::Min(hn::Max(hn::Sub(fl, hn::Set(di, shift)), hn::Set(di, -127)), hn::Set(di, 127)),
                              hn::Set(di, -127));
  const VI sub = hn::Set(di, 0x00400000), one = hn::Set(di, 0x3f800000);  // 2^-127, 1
  const VI m = hn::IfThenElse(hn::Gt(e, hn::Set(di, 126)), sub, hn::ShiftLeft<23>(hn::Sub(hn::Set(di, 127), e)));
  const VI i = hn::IfThenElse(hn::Lt(e, hn::Set(di, -126)), sub, hn::ShiftLeft<23>(hn::Add(e, hn::Set(di, 127))));
  hn::StoreU(hn::BitCast(df, hn::IfThenElse(nz, m, one)), df, mult);
  hn::StoreU(hn::BitCast(df, hn::IfThenElse(nz, i, one)), df, inv);
  hn::StoreU(e, di, e_out);
  hn::StoreU(hn::VecFromMask(di, nz), di, counted);
  const MI may_round = hn::Or(hn::Gt(e, hn::Zero(di)), hn::Gt(hn::Sub(fl, e), hn::Set(di, 127)));
  hn::StoreU(hn::VecFromMask(di, hn::And(nz, may_round)), di, check);
}

// The scalar part of a vector of scales (lanes [0, n)): each scale 2^e stored as a double, and the
// counted exponents into the tally. Returns whether any lane's products might round.
HWY_INLINE bool NoteScales(size_t n, const int32_t* e, const int32_t* counted, const int32_t* check, double* scale,
                           size_t scale_stride, mx_detail::ExponentCount& count) {
  int32_t any = 0;
  for (size_t l = 0; l < n; ++l) {
    scale[l * scale_stride] = pow2(e[l]);
    if (counted[l]) count.add(e[l]);
    any |= check[l];
  }
  return any != 0;
}

// mx_cast_blocks (b a whole number of vectors), a group of N blocks at a time (N: the lanes): each
// block's amax and NaN/inf test in one pass, the group's scales in SIMD (BlockScales), then each
// block again (from L1) scaled and rounded.
template <bool kConstShift, bool kFiniteSat>
void MxCastBlocksRne(const float* in, float* out, size_t nblocks, size_t b, int shift, double* scale,
                     uint8_t* status, MxCastTally* t, const detail::CastParams& p) {
  RneRounder<kConstShift, kFiniteSat> rounder(p);  // (every value it rounds is finite)
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const size_t N = hn::Lanes(df);
  const auto magnitude = hn::Set(di, 0x7fffffff), inf = hn::Set(di, 0x7f800000);
  auto span_top = hn::Zero(di);
  mx_detail::ExponentCount count(t->hist);
  HWY_ALIGN int32_t tops[HWY_MAX_BYTES / 4], fine[HWY_MAX_BYTES / 4], e[HWY_MAX_BYTES / 4],
      counted[HWY_MAX_BYTES / 4], check[HWY_MAX_BYTES / 4];
  HWY_ALIGN float mult[HWY_MAX_BYTES / 4], inv[HWY_MAX_BYTES / 4];
  size_t since_flush = 0;
  for (size_t g0 = 0; g0 < nblocks; g0 += N) {
    const size_t g = std::min(N, nblocks - g0);
    for (size_t l = 0; l < N; ++l) {
      tops[l] = 0;
      fine[l] = 0;
    }
    for (size_t l = 0; l < g; ++l) {
      const float* x = in + (g0 + l) * b;
      auto top = hn::Zero(di);
      auto any_bad = hn::FirstN(di, 0);
      for (size_t i = 0; i < b; i += N) {
        const auto u = hn::And(hn::BitCast(di, hn::LoadU(df, x + i)), magnitude);
        const auto bad = hn::Not(hn::Lt(u, inf));  // (encodings order as magnitudes)
        any_bad = hn::Or(any_bad, bad);
        top = hn::Max(top, hn::IfThenZeroElse(bad, u));
      }
      span_top = hn::Max(span_top, top);
      if (HWY_UNLIKELY(!hn::AllFalse(di, any_bad))) {
        for (size_t i = 0; i < b; i += N)
          t->nonfinite += hn::CountTrue(di, hn::Not(hn::Lt(hn::And(hn::BitCast(di, hn::LoadU(df, x + i)), magnitude), inf)));
        status[g0 + l] = kMxNonFinite;
        continue;
      }
      tops[l] = hn::GetLane(hn::MaxOfLanes(di, top));
      fine[l] = -1;
    }
    BlockScales(df, hn::Load(di, tops), hn::Lt(hn::Load(di, fine), hn::Zero(di)), shift, mult, inv, e, counted, check);
    NoteScales(g, e, counted, check, scale + g0, 1, count);  // (a NaN block's scale: the caller's)
    for (size_t l = 0; l < g; ++l) {
      if (!fine[l]) continue;
      const float* x = in + (g0 + l) * b;
      const auto mv = hn::Set(df, mult[l]);
      if (HWY_UNLIKELY(check[l])) {
        const auto back = hn::Set(df, inv[l]);
        auto exact = hn::Eq(hn::Zero(df), hn::Zero(df));  // all true
        for (size_t i = 0; i < b; i += N) {
          const auto xv = hn::LoadU(df, x + i);
          exact = hn::And(exact, hn::Eq(hn::Mul(hn::Mul(xv, mv), back), xv));
        }
        if (!hn::AllTrue(df, exact)) {
          status[g0 + l] = kMxScaleInexact;
          continue;
        }
      }
      float* y = out + (g0 + l) * b;
      for (size_t i = 0; i < b; i += N) hn::StoreU(rounder.Round(hn::Mul(hn::LoadU(df, x + i), mv)), df, y + i);
      status[g0 + l] = kMxWritten;
    }
    since_flush += g * b;
    if (since_flush >= (size_t{1} << 16)) {  // a lane's cast counts stay far below 2^32
      rounder.Flush();
      since_flush = 0;
    }
  }
  t->cast = rounder.Stats();
  t->amax = float_of(static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, span_top))));
  count.into(*t);
}

// mx_cast_band: every column's amax in a pass down the band row by row (into the scratch), the
// columns' scales in SIMD (BlockScales), then the band again row by row, scaled by a vector of
// multipliers and rounded. The columns are padded to whole vectors in the scratch; the padding is
// never written out.
template <bool kConstShift, bool kFiniteSat>
bool MxCastBandRne(const float* in, size_t ld, size_t h, size_t n, int shift, float* out, double* scale,
                   size_t scale_stride, float* scratch, MxCastTally* t, const detail::CastParams& p) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const size_t N = hn::Lanes(df), full = n / N * N, tail = n - full, np = full + (tail ? N : 0);
  const auto magnitude = hn::Set(di, 0x7fffffff), inf = hn::Set(di, 0x7f800000);
  float* mult = scratch;
  float* inv = scratch + np;
  int32_t* tops = reinterpret_cast<int32_t*>(scratch + 2 * np);  // (then the exponents)
  int32_t* counted = tops + np;
  int32_t* check_lanes = counted + np;
  for (size_t j = 0; j < np; ++j) tops[j] = 0;
  auto any_bad = hn::FirstN(di, 0);
  HWY_ALIGN float xs[HWY_MAX_BYTES / 4] = {}, ys[HWY_MAX_BYTES / 4];
  auto load_row = [&](const float* row, size_t j) {  // columns [j, j + N) of a row; the padding 0
    if (j < full) return hn::LoadU(df, row + j);
    std::memcpy(xs, row + j, tail * sizeof(float));
    return hn::Load(df, xs);
  };
  for (size_t r = 0; r < h; ++r)
    for (size_t j = 0; j < np; j += N) {
      const auto u = hn::And(hn::BitCast(di, load_row(in + r * ld, j)), magnitude);
      const auto bad = hn::Not(hn::Lt(u, inf));
      any_bad = hn::Or(any_bad, bad);
      hn::StoreU(hn::Max(hn::LoadU(di, tops + j), hn::IfThenZeroElse(bad, u)), di, tops + j);
    }
  if (!hn::AllFalse(di, any_bad)) return false;
  mx_detail::ExponentCount count(t->hist);
  auto span_top = hn::Zero(di);
  bool check = false;
  for (size_t j = 0; j < np; j += N) {
    const auto a = hn::LoadU(di, tops + j);
    span_top = hn::Max(span_top, a);
    BlockScales(df, a, hn::FirstN(di, n - j), shift, mult + j, inv + j, tops + j, counted + j, check_lanes + j);
    check = NoteScales(std::min(N, n - j), tops + j, counted + j, check_lanes + j, scale + j * scale_stride,
                       scale_stride, count) || check;
  }
  RneRounder<kConstShift, kFiniteSat> rounder(p);  // (every value it rounds is finite)
  auto exact = hn::Eq(hn::Zero(df), hn::Zero(df));  // all true
  const auto tail_lanes = hn::FirstN(hn::RebindToUnsigned<decltype(df)>(), tail);
  size_t since_flush = 0;
  for (size_t r = 0; r < h; ++r) {
    const float* row = in + r * ld;
    float* dst = out + r * n;
    auto scaled = [&](hn::Vec<decltype(df)> xv, size_t j) {
      const auto y = hn::Mul(xv, hn::LoadU(df, mult + j));
      if (check) exact = hn::And(exact, hn::Eq(hn::Mul(y, hn::LoadU(df, inv + j)), xv));
      return y;
    };
    size_t j = 0;
    for (; j < full; j += N) hn::StoreU(rounder.Round(scaled(hn::LoadU(df, row + j), j)), df, dst + j);
    if (tail) {  // (the padding lanes: 0 * 1, exact, rounded to 0 and not counted)
      hn::Store(rounder.RoundLanes(scaled(load_row(row, j), j), tail_lanes), df, ys);
      std::memcpy(dst + j, ys, tail * sizeof(float));
    }
    since_flush += n;
    if (since_flush >= (size_t{1} << 16)) {  // a lane's counts stay far below 2^32
      rounder.Flush();
      since_flush = 0;
    }
  }
  if (check && !hn::AllTrue(df, exact)) return false;
  t->cast = rounder.Stats();
  t->amax = float_of(static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, span_top))));
  count.into(*t);
  return true;
}

// The kernels' four forms: the rne kernel's constant or variable shift, and its lean form for
// finite values (the only ones they round) where the format saturates (RneFiniteSaturates).
template <class Fn>
HWY_INLINE auto WithRneForm(const detail::CastParams& p, Fn fn) {
  const bool lean = RneFiniteSaturates(p);
  if (p.rne.kind == detail::CastParams::Rne::const_shift)
    return lean ? fn(std::true_type{}, std::true_type{}) : fn(std::true_type{}, std::false_type{});
  return lean ? fn(std::false_type{}, std::true_type{}) : fn(std::false_type{}, std::false_type{});
}

void MxCastBlocksImpl(const float* in, float* out, size_t nblocks, size_t b, int shift, double* scale,
                      uint8_t* status, MxCastTally* t, const detail::CastParams& p) {
  WithRneForm(p, [&](auto const_shift, auto finite_sat) {
    MxCastBlocksRne<decltype(const_shift)::value, decltype(finite_sat)::value>(in, out, nblocks, b, shift, scale,
                                                                                status, t, p);
  });
}

bool MxCastBandImpl(const float* in, size_t ld, size_t h, size_t n, int shift, float* out, double* scale,
                    size_t scale_stride, float* scratch, MxCastTally* t, const detail::CastParams& p) {
  return WithRneForm(p, [&](auto const_shift, auto finite_sat) {
    return MxCastBandRne<decltype(const_shift)::value, decltype(finite_sat)::value>(in, ld, h, n, shift, out, scale,
                                                                                    scale_stride, scratch, t, p);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(LanesImpl);
HWY_EXPORT(TargetNameImpl);
HWY_EXPORT(MxCastBlocksImpl);
HWY_EXPORT(MxCastBandImpl);

bool mx_cast_applies(const SpanCast& cast, size_t b) {
  const size_t N = HWY_DYNAMIC_DISPATCH(LanesImpl)();
  return has_rne_kernel(cast) && b > 0 && b % N == 0;
}

const char* mx_cast_target_name() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }

void mx_cast_blocks(const SpanCast& cast, const float* in, float* out, size_t nblocks, size_t b, int shift,
                    double* scale, uint8_t* status, MxCastTally* t) {
  *t = MxCastTally{};
  HWY_DYNAMIC_DISPATCH(MxCastBlocksImpl)(in, out, nblocks, b, shift, scale, status, t, cast.params);
}

bool mx_cast_band(const SpanCast& cast, const float* in, size_t ld, size_t h, size_t n, int shift, float* out,
                  double* scale, size_t scale_stride, std::vector<float>& scratch, MxCastTally* t) {
  *t = MxCastTally{};
  // The columns padded to whole vectors on any target (HWY_MAX_BYTES here is the baseline
  // target's, not the widest dispatched one's).
  constexpr size_t kMaxLanes = 64;
  const size_t np = n + kMaxLanes;
  if (scratch.size() < 5 * np) scratch.resize(5 * np);
  return HWY_DYNAMIC_DISPATCH(MxCastBandImpl)(in, ld, h, n, shift, out, scale, scale_stride, scratch.data(), t,
                                              cast.params);
}

}  // namespace drift
#endif  // HWY_ONCE
