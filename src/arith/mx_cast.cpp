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
// once (MxCastTally's figures: the same in any grouping). The histogram is kept in four parts, a
// block's lane modulo 4 choosing the part: neighbouring blocks mostly share an exponent, and one
// array would chain each block's increment behind its neighbour's through memory.
struct ExponentCount {
  uint32_t* hist;
  uint32_t part[4][255] = {};
  uint64_t count = 0;
  int min = 127, max = -127;
  int64_t sum = 0;
  explicit ExponentCount(uint32_t* h) : hist(h) {}
  void into(MxCastTally& t) const {
    t.scales = count;
    t.e_min = count ? min : 0;
    t.e_max = count ? max : 0;
    t.e_sum = sum;
    for (int e = min; e <= max; ++e)  // (none when nothing was counted)
      hist[e + 127] += part[0][e + 127] + part[1][e + 127] + part[2][e + 127] + part[3][e + 127];
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
// an all-zero block or a lane not taken: its elements are zeros, or it is not cast); the result
// holds the exponents, the lanes whose amax is non-zero (counted), and the lanes whose products
// fp32(x * 2^-e) might not be exact (check): only a block scaled down (e > 0: a product may fall
// below fp32's normal range) or up past fp32's range (floor(log2 amax) - e > 127, possible only with
// a large negative offset) can round.
template <class DF>
struct Scales {
  hn::Vec<hn::RebindToSigned<DF>> e;
  hn::Mask<hn::RebindToSigned<DF>> counted, check;
};
template <class DF, class VI = hn::Vec<hn::RebindToSigned<DF>>, class MI = hn::Mask<hn::RebindToSigned<DF>>>
HWY_INLINE Scales<DF> BlockScales(DF df, VI a, MI take, int shift, float* mult, float* inv) {
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
  const MI may_round = hn::Or(hn::Gt(e, hn::Zero(di)), hn::Gt(hn::Sub(fl, e), hn::Set(di, 127)));
  return {e, nz, hn::And(nz, may_round)};
}

// The bookkeeping of a vector of scales (lanes [0, n); the lanes past n are neither counted nor
// checked): each scale 2^e stored as a double, the counted exponents into the tally (their number,
// range and sum in SIMD; not without kTally). Returns whether any lane's products might round.
template <bool kTally, class DF>
HWY_INLINE bool NoteScales(DF /*df*/, const Scales<DF>& s, size_t n, double* scale, size_t scale_stride,
                           mx_detail::ExponentCount& count) {
  const hn::RebindToSigned<DF> di;
  HWY_ALIGN int32_t e[HWY_MAX_BYTES / 4], counted[HWY_MAX_BYTES / 4];
  hn::Store(s.e, di, e);
  for (size_t l = 0; l < n; ++l) scale[l * scale_stride] = pow2(e[l]);
  const size_t how_many = kTally ? hn::CountTrue(di, s.counted) : 0;
  if (how_many) {
    count.count += how_many;
    const auto lo = hn::MinOfLanes(di, hn::IfThenElse(s.counted, s.e, hn::Set(di, 127)));
    const auto hi = hn::MaxOfLanes(di, hn::IfThenElse(s.counted, s.e, hn::Set(di, -127)));
    count.min = std::min(count.min, static_cast<int>(hn::GetLane(lo)));
    count.max = std::max(count.max, static_cast<int>(hn::GetLane(hi)));
    count.sum += hn::GetLane(hn::SumOfLanes(di, hn::IfThenElseZero(s.counted, s.e)));  // (|sum| <= 127 * lanes)
    hn::Store(hn::VecFromMask(di, s.counted), di, counted);
    for (size_t l = 0; l < n; ++l)
      if (counted[l]) ++count.part[l & 3][e[l] + 127];
  }
  return !hn::AllFalse(di, s.check);
}

// mx_cast_blocks (b a whole number of vectors), a group of N blocks at a time (N: the lanes): each
// block's largest magnitude encoding in one pass (NaN and inf encodings lie above every finite
// one, so a block holding one shows as an amax at or above inf's), the group's scales in SIMD
// (BlockScales, NoteScales), then each block again (from L1) scaled and rounded.
template <bool kConstShift, bool kFiniteSat, bool kTally>
void MxCastBlocksRne(const float* in, float* out, size_t nblocks, size_t b, int shift, double* scale,
                     uint8_t* status, MxCastTally* t, const detail::CastParams& p) {
  RneRounder<kConstShift, kFiniteSat> rounder(p);  // (every value it rounds is finite)
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const size_t N = hn::Lanes(df);
  const auto magnitude = hn::Set(di, 0x7fffffff), inf = hn::Set(di, 0x7f800000);
  auto span_top = hn::Zero(di);
  mx_detail::ExponentCount count(t->hist);
  HWY_ALIGN int32_t tops[HWY_MAX_BYTES / 4], check[HWY_MAX_BYTES / 4];
  HWY_ALIGN float mult[HWY_MAX_BYTES / 4], inv[HWY_MAX_BYTES / 4];
  size_t since_flush = 0;
  for (size_t g0 = 0; g0 < nblocks; g0 += N) {
    const size_t g = std::min(N, nblocks - g0);
    for (size_t l = 0; l < g; ++l) {
      const float* x = in + (g0 + l) * b;
      auto top = hn::Zero(di);
      for (size_t i = 0; i < b; i += N) top = hn::Max(top, hn::And(hn::BitCast(di, hn::LoadU(df, x + i)), magnitude));
      tops[l] = hn::GetLane(hn::MaxOfLanes(di, top));
    }
    for (size_t l = g; l < N; ++l) tops[l] = 0;
    const auto a = hn::Load(di, tops);
    const auto fine = hn::And(hn::Lt(a, inf), hn::FirstN(di, g));
    span_top = hn::Max(span_top, hn::IfThenElseZero(fine, a));
    if (HWY_UNLIKELY(hn::CountTrue(di, fine) != g)) {  // a block of the group holds a NaN or inf
      for (size_t l = 0; l < g; ++l) {
        if (tops[l] < 0x7f800000) continue;
        const float* x = in + (g0 + l) * b;
        auto top = hn::Zero(di);  // (its finite values count in the tensor's amax)
        for (size_t i = 0; i < b; i += N) {
          const auto u = hn::And(hn::BitCast(di, hn::LoadU(df, x + i)), magnitude);
          const auto bad = hn::Not(hn::Lt(u, inf));  // (encodings order as magnitudes)
          t->nonfinite += hn::CountTrue(di, bad);
          top = hn::Max(top, hn::IfThenZeroElse(bad, u));
        }
        span_top = hn::Max(span_top, top);
        status[g0 + l] = kMxNonFinite;
      }
    }
    const Scales<hn::ScalableTag<float>> sc = BlockScales(df, a, fine, shift, mult, inv);
    NoteScales<kTally>(df, sc, g, scale + g0, 1, count);  // (a NaN block's scale: the caller's)
    hn::Store(hn::VecFromMask(di, sc.check), di, check);
    HWY_ALIGN int32_t fine_lanes[HWY_MAX_BYTES / 4];
    hn::Store(hn::VecFromMask(di, fine), di, fine_lanes);
    for (size_t l = 0; l < g; ++l) {
      if (!fine_lanes[l]) continue;
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
      for (size_t i = 0; i < b; i += N) {
        const auto scaled = hn::Mul(hn::LoadU(df, x + i), mv);
        hn::StoreU(kTally ? rounder.Round(scaled) : rounder.RoundUncounted(scaled), df, y + i);
      }
      status[g0 + l] = kMxWritten;
    }
    since_flush += g * b;
    if (since_flush >= (size_t{1} << 16)) {  // a lane's cast counts stay far below 2^32
      rounder.Flush();
      since_flush = 0;
    }
  }
  if (!kTally) return;
  t->cast = rounder.Stats();
  t->amax = float_of(static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, span_top))));
  count.into(*t);
}

// mx_cast_band, kChunk vectors of columns at a time: their amaxes in registers in a pass down the
// band, their scales in SIMD (BlockScales, NoteScales), then the same columns again down the band
// (from L1: h rows of kChunk vectors), scaled by the multipliers held in registers and rounded. A
// last vector of fewer than N columns is padded with zeros in registers (never written out).
template <bool kConstShift, bool kFiniteSat, bool kTally>
bool MxCastBandRne(const float* in, size_t ld, size_t h, size_t n, int shift, float* out, double* scale,
                   size_t scale_stride, MxCastTally* t, const detail::CastParams& p) {
  using DF = hn::ScalableTag<float>;
  using V = hn::Vec<DF>;
  const DF df;
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  constexpr size_t kChunk = 4;
  const size_t N = hn::Lanes(df), full = n / N * N, tail = n - full;
  const auto magnitude = hn::Set(di, 0x7fffffff), inf = hn::Set(di, 0x7f800000);
  mx_detail::ExponentCount count(t->hist);
  RneRounder<kConstShift, kFiniteSat> rounder(p);  // (every value it rounds is finite)
  auto span_top = hn::Zero(di);
  auto exact = hn::Eq(hn::Zero(df), hn::Zero(df));  // all true
  HWY_ALIGN float mult[kChunk * HWY_MAX_BYTES / 4], inv[kChunk * HWY_MAX_BYTES / 4], ys[HWY_MAX_BYTES / 4];
  size_t since_flush = 0;
  // Columns [j0, j0 + nv * N), the last vector holding `last` real columns (N but at the band's end).
  auto chunk = [&](size_t j0, size_t nv, size_t last, auto full_vectors) -> bool {
    const auto last_lanes = hn::FirstN(du, last);
    auto load = [&](const float* row, size_t v) -> V {  // (a partial last vector: its real columns, zeros after)
      if (decltype(full_vectors)::value || v + 1 < nv) return hn::LoadU(df, row + j0 + v * N);
      HWY_ALIGN float xs[HWY_MAX_BYTES / 4] = {};
      std::memcpy(xs, row + j0 + v * N, last * sizeof(float));
      return hn::Load(df, xs);
    };
    hn::Vec<decltype(di)> top[kChunk];
    for (size_t v = 0; v < kChunk; ++v) top[v] = hn::Zero(di);
    for (size_t r = 0; r < h; ++r)
      for (size_t v = 0; v < kChunk; ++v)
        if (v < nv) top[v] = hn::Max(top[v], hn::And(hn::BitCast(di, load(in + r * ld, v)), magnitude));
    bool check = false;
    for (size_t v = 0; v < nv; ++v) {
      if (!hn::AllTrue(di, hn::Lt(top[v], inf))) return false;  // a NaN or inf in a block
      span_top = hn::Max(span_top, top[v]);
      const size_t real = v + 1 < nv ? N : last;
      const Scales<DF> sc = BlockScales(df, top[v], hn::FirstN(di, real), shift, mult + v * N, inv + v * N);
      check = NoteScales<kTally>(df, sc, real, scale + (j0 + v * N) * scale_stride, scale_stride, count) || check;
    }
    V mv[kChunk], iv[kChunk];
    for (size_t v = 0; v < kChunk; ++v) {
      mv[v] = hn::Load(df, mult + (v < nv ? v : 0) * N);
      iv[v] = hn::Load(df, inv + (v < nv ? v : 0) * N);
    }
    for (size_t r = 0; r < h; ++r) {
      const float* row = in + r * ld;
      float* dst = out + r * n + j0;
      for (size_t v = 0; v < kChunk; ++v) {
        if (v >= nv) continue;
        const V xv = load(row, v);
        const V y = hn::Mul(xv, mv[v]);
        if (check) exact = hn::And(exact, hn::Eq(hn::Mul(y, iv[v]), xv));
        if (decltype(full_vectors)::value || v + 1 < nv) {
          hn::StoreU(kTally ? rounder.Round(y) : rounder.RoundUncounted(y), df, dst + v * N);
        } else {  // (the padding lanes: 0 * 1, exact, rounded to 0 and not counted)
          hn::Store(kTally ? rounder.RoundLanes(y, last_lanes) : rounder.RoundUncounted(y), df, ys);
          std::memcpy(dst + v * N, ys, last * sizeof(float));
        }
      }
    }
    since_flush += h * nv * N;
    if (since_flush >= (size_t{1} << 16)) {  // a lane's counts stay far below 2^32
      rounder.Flush();
      since_flush = 0;
    }
    return true;
  };
  size_t j0 = 0;
  for (; j0 + kChunk * N <= full; j0 += kChunk * N)
    if (!chunk(j0, kChunk, N, std::true_type{})) return false;
  if (j0 < n) {  // (fewer than kChunk vectors left; only a short last one needs the padded path)
    const size_t nv = (n - j0 + N - 1) / N;
    if (!(tail ? chunk(j0, nv, tail, std::false_type{}) : chunk(j0, nv, N, std::true_type{}))) return false;
  }
  if (!hn::AllTrue(df, exact)) return false;
  if (!kTally) return true;
  t->cast = rounder.Stats();
  t->amax = float_of(static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(di, span_top))));
  count.into(*t);
  return true;
}

// The kernels' eight forms: the rne kernel's constant or variable shift, its lean form for finite
// values (the only ones they round) where the format saturates (RneFiniteSaturates), and whether
// the call keeps the tally (its counts are a quarter of the blocks kernel's time: 0.22 against
// 0.17 ns a value, E4M3, 256k values, 1 thread).
template <class Fn>
HWY_INLINE auto WithRneForm(const detail::CastParams& p, bool tally, Fn fn) {
  const bool lean = RneFiniteSaturates(p);
  auto with_tally = [&](auto const_shift, auto finite_sat) {
    return tally ? fn(const_shift, finite_sat, std::true_type{}) : fn(const_shift, finite_sat, std::false_type{});
  };
  if (p.rne.kind == detail::CastParams::Rne::const_shift)
    return lean ? with_tally(std::true_type{}, std::true_type{}) : with_tally(std::true_type{}, std::false_type{});
  return lean ? with_tally(std::false_type{}, std::true_type{}) : with_tally(std::false_type{}, std::false_type{});
}

void MxCastBlocksImpl(const float* in, float* out, size_t nblocks, size_t b, int shift, double* scale,
                      uint8_t* status, MxCastTally* t, const detail::CastParams& p, bool tally) {
  WithRneForm(p, tally, [&](auto const_shift, auto finite_sat, auto keep_tally) {
    MxCastBlocksRne<decltype(const_shift)::value, decltype(finite_sat)::value, decltype(keep_tally)::value>(
        in, out, nblocks, b, shift, scale, status, t, p);
  });
}

bool MxCastBandImpl(const float* in, size_t ld, size_t h, size_t n, int shift, float* out, double* scale,
                    size_t scale_stride, MxCastTally* t, const detail::CastParams& p, bool tally) {
  return WithRneForm(p, tally, [&](auto const_shift, auto finite_sat, auto keep_tally) {
    return MxCastBandRne<decltype(const_shift)::value, decltype(finite_sat)::value, decltype(keep_tally)::value>(
        in, ld, h, n, shift, out, scale, scale_stride, t, p);
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
                    double* scale, uint8_t* status, MxCastTally* t, bool tally) {
  *t = MxCastTally{};
  HWY_DYNAMIC_DISPATCH(MxCastBlocksImpl)(in, out, nblocks, b, shift, scale, status, t, cast.params, tally);
}

bool mx_cast_band(const SpanCast& cast, const float* in, size_t ld, size_t h, size_t n, int shift, float* out,
                  double* scale, size_t scale_stride, MxCastTally* t, bool tally) {
  *t = MxCastTally{};
  return HWY_DYNAMIC_DISPATCH(MxCastBandImpl)(in, ld, h, n, shift, out, scale, scale_stride, t, cast.params, tally);
}

}  // namespace drift
#endif  // HWY_ONCE
