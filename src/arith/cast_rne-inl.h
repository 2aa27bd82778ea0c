// The span cast's round-to-nearest-even kernel for floating formats: the common case (bf16, fp16,
// the fp8s, fp6, fp4 under rne) at memory speed, bit-identical to the scalar core and to the
// general kernel (RoundVec in cast_span.cpp) it replaces there.
//
// With a = |x|'s encoding and s the number of discarded bits of x's significand (RoundVec's s),
// rounding to nearest even is one integer operation on the encoding in the format's normal range,
// where s = 23 - quantum_mant:   rnd = (a + 2^(s-1) - 1 + odd) & ~(2^s - 1),  odd = bit s
// (the encoding is linear in the value within and across binades, fp32 subnormals included, so a
// carry out of the mantissa is the step to the next binade, and into 0x7f800000 the step past
// fp32's largest value). Below it (a format whose subnormals lie inside fp32's normal range: the
// variable-shift kind) the grid is fixed, multiples of 2^quantum_min, and a float add and subtract
// of a power of two whose ulp is that quantum rounds onto it (lanes below 2^quantum_min round to 0
// or to 2^quantum_min, ties to 0, the even one). Every other rule is a compare on the rounded encoding against
// constants the scalar core computed once (make_params): overflow (rnd > max_finite's encoding,
// which also catches +-inf and NaN inputs), zero (rnd below 1, or below min_normal when flushing),
// subnormal. The counts are vector compares accumulated in registers.
// Highway per-target header: included by cast_span.cpp once per SIMD target (foreach_target.h).
#if defined(DRIFT_ARITH_CAST_RNE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DRIFT_ARITH_CAST_RNE_INL_H_
#undef DRIFT_ARITH_CAST_RNE_INL_H_
#else
#define DRIFT_ARITH_CAST_RNE_INL_H_
#endif

#include <algorithm>
#include <cstring>

#include "arith/cast_span.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The constants of one call, broadcast once (not reloaded from CastParams inside the loop).
template <class DU>
struct RneConsts {
  using VU = hn::Vec<DU>;
  using VI = hn::Vec<hn::RebindToSigned<DU>>;
  VU sign_bit, one, max_enc, inf, qnan, zero_thr, sub_thr, ovf_mag, ovf_sign, zero_sign;
  VU half_m1, keep;  // the normal range's shift s_norm: 2^(s-1) - 1 and ~(2^s - 1)
  VU grid_top, magic;  // variable shift: 2^(quantum_min + qm) and 2^(quantum_min + 23), as encodings
  int s_const;

  RneConsts(DU du, const detail::CastParams& p) {
    const auto& r = p.rne;
    sign_bit = hn::Set(du, 0x80000000u);
    one = hn::Set(du, 1u);
    max_enc = hn::Set(du, p.max_enc);
    inf = hn::Set(du, 0x7f800000u);
    qnan = hn::Set(du, 0x7fc00000u);
    zero_thr = hn::Set(du, r.zero_thr);
    // Subnormal results: 0 < rnd < min_normal, as one unsigned compare rnd - 1 < min_normal - 1;
    // none when flushing (those results are zero).
    sub_thr = hn::Set(du, p.flush_thr != 0 ? 0u : p.min_normal_enc - 1);
    ovf_mag = hn::Set(du, r.ovf_mag);
    ovf_sign = hn::Set(du, r.ovf_sign);
    zero_sign = hn::Set(du, r.zero_sign);
    s_const = r.s_norm;
    half_m1 = hn::Set(du, (1u << (r.s_norm - 1)) - 1);
    keep = hn::Set(du, ~((1u << r.s_norm) - 1));
    // (Both normal fp32 encodings: rne_params takes quantum_min >= -126 - qm and qm <= 22.)
    grid_top = hn::Set(du, static_cast<uint32_t>(p.qmin + p.qm + 127) << 23);
    magic = hn::Set(du, static_cast<uint32_t>(p.qmin + 23 + 127) << 23);
  }
};

// The four count masks of one vector, before tail masking.
template <class DU>
struct RneMasks {
  hn::Mask<DU> ovf, nan_in, flushed, sub;
};

// |x|'s encoding a rounded to the format's grid, to nearest even, before any overflow or zero rule.
template <bool kConstShift, class DU>
HWY_INLINE hn::Vec<DU> RneMagnitude(DU du, const RneConsts<DU>& c, hn::Vec<DU> a) {
  using VU = hn::Vec<DU>;
  // The normal range's rounding: s_norm discarded bits, the last kept bit a mantissa bit.
  const VU odd = hn::And(hn::ShiftRightSame(a, c.s_const), c.one);
  VU rnd = hn::And(hn::Add(hn::Add(a, c.half_m1), odd), c.keep);
  if constexpr (!kConstShift) {
    // Below 2^(quantum_min + qm) (the smallest normal of a format with subnormals) the grid is
    // fixed, multiples of 2^quantum_min, and s grows by one per binade (to past 23 for lanes that
    // keep no bit). There a float add of M = 2^(quantum_min + 23), whose ulp is that quantum, rounds
    // the magnitude onto the grid, ties to even (a < 2^(quantum_min + 22) < M: the sum lies in
    // [M, 2M)), and subtracting M is exact: two IEEE operations in place of a per-lane shift.
    const hn::RebindToFloat<DU> df;
    const auto m = hn::BitCast(df, c.magic);
    const VU on_grid = hn::BitCast(du, hn::Sub(hn::Add(hn::BitCast(df, a), m), m));
    rnd = hn::IfThenElse(hn::Lt(a, c.grid_top), on_grid, rnd);
  }
  return rnd;
}

// One vector rounded, and its count masks. kFiniteSat: for finite inputs into a format that
// saturates (an overflow keeps the sign and becomes max_finite), keeps a signed zero and does not
// flush (RneFiniteSaturates), the MX kernels' case (arith/mx_cast.cpp), which never hand it a NaN
// or an inf: the same bits and masks for such inputs without the special-value selects (a zero
// result is the sign alone, sign | rnd with rnd = 0; an overflowed one sign | max_finite, which
// min(rnd, max_finite) gives), and no nan_in mask.
template <bool kConstShift, bool kFiniteSat = false, class DU>
HWY_INLINE hn::Vec<DU> RneVec(DU du, const RneConsts<DU>& c, hn::Vec<DU> u, RneMasks<DU>* m) {
  using VU = hn::Vec<DU>;
  const VU sign = hn::And(u, c.sign_bit);
  const VU a = hn::Xor(u, sign);
  const VU rnd = RneMagnitude<kConstShift>(du, c, a);
  m->ovf = hn::Gt(rnd, c.max_enc);  // finite overflow, +-inf and NaN inputs
  const auto zero_res = hn::Lt(rnd, c.zero_thr);
  // A zero result of a finite non-zero input (NaN and inf never round to zero).
  m->flushed = hn::AndNot(hn::Eq(a, hn::Zero(du)), zero_res);
  m->sub = hn::Lt(hn::Sub(rnd, c.one), c.sub_thr);
  if constexpr (kFiniteSat) return hn::Or(sign, hn::Min(rnd, c.max_enc));
  m->nan_in = hn::Gt(a, c.inf);
  const VU ovf_val = hn::IfThenElse(m->nan_in, c.qnan, hn::Or(hn::And(sign, c.ovf_sign), c.ovf_mag));
  const VU fin_val = hn::IfThenElse(zero_res, hn::And(sign, c.zero_sign), hn::Or(sign, rnd));
  return hn::IfThenElse(m->ovf, ovf_val, fin_val);
}

// Whether RneVec<kConstShift, true> gives RneVec's results for every finite input.
inline bool RneFiniteSaturates(const detail::CastParams& p) {
  const auto& r = p.rne;
  return !r.ovf_is_nan && r.ovf_mag == p.max_enc && r.ovf_sign == 0x80000000u && r.zero_sign == 0x80000000u &&
         r.zero_thr == 1 && p.flush_thr == 0;
}

// c + 1 in the lanes of m: a masked add where masks are registers of their own (AVX-512), else the
// all-ones (-1) lanes of the mask as a vector subtracted.
template <class DU>
HWY_INLINE hn::Vec<DU> CountInto(DU du, hn::Vec<DU> c, hn::Mask<DU> m) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  return hn::IfThenElse(m, hn::Add(c, hn::Set(du, 1u)), c);
#else
  return hn::Sub(c, hn::VecFromMask(du, m));
#endif
}

// One call's rounding: the constants, and the four counts of the vectors rounded so far, per lane
// in u32 registers, summed into 64-bit totals by Flush (before a lane could pass 2^32).
template <bool kConstShift, bool kFiniteSat = false>
class RneRounder {
 public:
  using DU = hn::ScalableTag<uint32_t>;
  using DF = hn::RebindToFloat<DU>;
  using VU = hn::Vec<DU>;
  using VF = hn::Vec<DF>;

  explicit RneRounder(const detail::CastParams& p)
      : p_(p), c_(du_, p), ovf_(hn::Zero(du_)), nan_in_(ovf_), flushed_(ovf_), sub_(ovf_) {}

  // x rounded, every lane counted (kFiniteSat: x finite, RneFiniteSaturates(p)).
  HWY_INLINE VF Round(VF x) {
    RneMasks<DU> m;
    const VU r = Vec(x, &m);
    ovf_ = CountInto(du_, ovf_, m.ovf);
    if constexpr (!kFiniteSat) nan_in_ = CountInto(du_, nan_in_, m.nan_in);
    flushed_ = CountInto(du_, flushed_, m.flushed);
    sub_ = CountInto(du_, sub_, m.sub);
    return hn::BitCast(DF(), r);
  }
  // x rounded, nothing counted (a caller that reads no counts).
  HWY_INLINE VF RoundUncounted(VF x) const {
    RneMasks<DU> m;
    return hn::BitCast(DF(), Vec(x, &m));
  }
  // x rounded, only the lanes of `valid` counted (a ragged end), straight into the totals.
  VF RoundLanes(VF x, hn::Mask<DU> valid) {
    RneMasks<DU> m;
    const VU r = Vec(x, &m);
    total_ovf_ += hn::CountTrue(du_, hn::And(m.ovf, valid));
    if constexpr (!kFiniteSat) total_nan_in_ += hn::CountTrue(du_, hn::And(m.nan_in, valid));
    total_flushed_ += hn::CountTrue(du_, hn::And(m.flushed, valid));
    total_sub_ += hn::CountTrue(du_, hn::And(m.sub, valid));
    return hn::BitCast(DF(), r);
  }
  void Flush() {
    HWY_ALIGN uint32_t lanes[HWY_MAX_BYTES / 4];
    auto take = [&](VU& v, uint64_t& total) {
      hn::Store(v, du_, lanes);
      for (size_t l = 0; l < hn::Lanes(du_); ++l) total += lanes[l];
      v = hn::Zero(du_);
    };
    take(ovf_, total_ovf_);
    take(nan_in_, total_nan_in_);
    take(flushed_, total_flushed_);
    take(sub_, total_sub_);
  }
  // NaN inputs are among the overflow lanes (their rounded encoding exceeds max_finite's).
  CastStats Stats() {
    Flush();
    CastStats st;
    st.clipped = total_ovf_ - total_nan_in_;
    st.nan = p_.rne.ovf_is_nan ? total_ovf_ : total_nan_in_;
    st.flushed = total_flushed_;
    st.subnormal = total_sub_;
    return st;
  }

 private:
  HWY_INLINE VU Vec(VF x, RneMasks<DU>* m) const {
    return RneVec<kConstShift, kFiniteSat>(du_, c_, hn::BitCast(du_, x), m);
  }
  const DU du_;
  const detail::CastParams& p_;
  const RneConsts<DU> c_;
  VU ovf_, nan_in_, flushed_, sub_;
  uint64_t total_ovf_ = 0, total_nan_in_ = 0, total_flushed_ = 0, total_sub_ = 0;
};

// cast_span for p.rne.kind != none (rne). The counts per lane are flushed every kRneChunk elements
// (at most kRneChunk / Lanes a lane).
template <bool kConstShift>
CastStats CastSpanRne(const float* in, float* out, size_t n, const detail::CastParams& p) {
  constexpr size_t kRneChunk = size_t{1} << 16;
  // Inputs are prefetched this many elements (2 KiB) ahead: the kernel's instructions per vector
  // leave fewer loads in flight than a plain copy has, and the hardware prefetcher alone did not
  // keep up on the (shared) measurement machine: fp8 rne at 16M values went from about 0.65 to about
  // 0.8 of a SIMD copy.
  constexpr size_t kAhead = 512;
  RneRounder<kConstShift> rounder(p);
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  while (i + N <= n) {
    const size_t end = std::min(n - N + 1, i + kRneChunk);  // vectors starting before `end`
    for (; i < end; i += N) {
      if (i + kAhead < n) hwy::Prefetch(in + i + kAhead);
      hn::StoreU(rounder.Round(hn::LoadU(df, in + i)), df, out + i);
    }
    rounder.Flush();
  }
  if (i < n) {  // the ragged end, through a full vector in a buffer
    const size_t rest = n - i;
    HWY_ALIGN float tail_in[HWY_MAX_BYTES / 4] = {};
    HWY_ALIGN float tail_out[HWY_MAX_BYTES / 4];
    std::memcpy(tail_in, in + i, rest * sizeof(float));
    hn::Store(rounder.RoundLanes(hn::Load(df, tail_in), hn::FirstN(hn::ScalableTag<uint32_t>(), rest)), df, tail_out);
    std::memcpy(out + i, tail_out, rest * sizeof(float));
  }
  return rounder.Stats();
}

// CastSpanRne over nblocks blocks of b floats (b a multiple of the vector length), each block's
// values first multiplied by its power of two mult[i]: fp32(x * mult[i]) is x * mult[i] exactly when
// multiplying back by inv[i] = 1 / mult[i] returns every x of the block (scale_floats_pow2's test),
// and is then rounded as cast_span rounds it. A block marked ok[i] = 0 (a NaN block), or failing the
// test, is not written and leaves ok[i] = 0 (the caller's element path); the others get ok[i] = 1.
// The counts are cast_span's over the blocks written. One pass in place of a scaling call per block
// and a cast of the scaled copy.
template <bool kConstShift>
CastStats CastBlocksScaledRne(const float* in, float* out, size_t nblocks, size_t b, const float* mult,
                              const float* inv, uint8_t* ok, const detail::CastParams& p) {
  RneRounder<kConstShift> rounder(p);
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  constexpr size_t kChunkBlocks = 1024;  // a lane's counts stay far below 2^32
  for (size_t c0 = 0; c0 < nblocks; c0 += kChunkBlocks) {
    for (size_t bi = c0; bi < std::min(nblocks, c0 + kChunkBlocks); ++bi) {
      if (!ok[bi]) continue;
      const float* x = in + bi * b;
      float* y = out + bi * b;
      const auto mv = hn::Set(df, mult[bi]), back = hn::Set(df, inv[bi]);
      auto exact = hn::Eq(hn::Zero(df), hn::Zero(df));  // all true
      for (size_t i = 0; i < b; i += N) {
        const auto xv = hn::LoadU(df, x + i);
        exact = hn::And(exact, hn::Eq(hn::Mul(hn::Mul(xv, mv), back), xv));
      }
      if (!hn::AllTrue(df, exact)) {
        ok[bi] = 0;
        continue;
      }
      for (size_t i = 0; i < b; i += N) hn::StoreU(rounder.Round(hn::Mul(hn::LoadU(df, x + i), mv)), df, y + i);
    }
    rounder.Flush();
  }
  return rounder.Stats();
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#endif  // DRIFT_ARITH_CAST_RNE_INL_H_
