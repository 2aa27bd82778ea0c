// Batched casts with Highway: this file is compiled once per SIMD target (foreach_target.h) and
// the best one is chosen at run time (HWY_DYNAMIC_DISPATCH).
//
// The SIMD kernel rounds with integer operations on the float bits, one element per 32-bit lane:
//   a = |x| bits; sig, L = the integer significand of x and the exponent of its last bit
//   (x = sig * 2^L exactly, sig < 2^24); e = exponent of x's leading bit;
//   q = max(e - quantum_mant, quantum_min) = exponent of the target's quantum (as in round_pack);
//   s = q - L = number of discarded bits of sig (clamped to [0, 31] for the shifts: sig < 2^24, so
//   every s >= 25 means "all of sig discarded, below half", which the clamped value reproduces).
// Truncation is `a & ~(2^s - 1)` (the float encoding is linear in the value within and across
// binades, subnormals included), rounding up adds 2^s to the encoding (a carry into the exponent
// field is the binade change; into 0x7f800000 is the overflow to inf); when nothing is kept
// (x < 2^q) the truncation is 0 and rounding up gives 2^q. Overflow, flush and the special values
// then select constants that the scalar core computed once per call, so the two paths cannot
// disagree about what an overflow or a special value becomes. Round to nearest even on floating
// formats (the common case) takes a leaner kernel of the same construction, cast_rne-inl.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "arith/cast_span.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "arith/cast_rne-inl.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "arith/cast_span.h"
#include "arith/random.h"

#ifndef DRIFT_ARITH_CAST_SPAN_SHARED
#define DRIFT_ARITH_CAST_SPAN_SHARED
namespace drift::detail {

constexpr size_t kChunk = 1024;  // elements per block of random words and of count accumulation

}  // namespace drift::detail
#endif  // DRIFT_ARITH_CAST_SPAN_SHARED

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rounds one vector of float bits `u`; `rnd` holds the random words (stochastic rounding only).
// Sets the four count masks (before any tail masking).
template <int kMode, class DU>
HWY_INLINE hn::Vec<DU> RoundVec(DU du, const detail::CastParams& p, hn::Vec<DU> u, hn::Vec<DU> rnd,
                                hn::Mask<DU>* m_clip, hn::Mask<DU>* m_flush, hn::Mask<DU>* m_sub,
                                hn::Mask<DU>* m_nan) {
  const hn::RebindToSigned<DU> di;
  const hn::RebindToFloat<DU> df;
  using VU = hn::Vec<DU>;
  using VI = hn::Vec<decltype(di)>;
  const VU k0 = hn::Zero(du);
  const VU k1 = hn::Set(du, 1u);
  const VU kInf = hn::Set(du, 0x7f800000u);

  const VU sign = hn::And(u, hn::Set(du, 0x80000000u));
  const VU a = hn::Xor(u, sign);
  const VU field = hn::ShiftRight<23>(a);
  const VI fi = hn::BitCast(di, field);
  // Integer significand: the mantissa with the implicit bit where the field is non-zero.
  const VU sig = hn::Or(hn::And(a, hn::Set(du, 0x7fffffu)),
                        hn::IfThenZeroElse(hn::Eq(field, k0), hn::Set(du, 0x800000u)));
  const VI lsb = hn::Sub(hn::Max(fi, hn::Set(di, 1)), hn::Set(di, 150));  // x = sig * 2^lsb
  // Leading-bit exponent. For a subnormal input the field-based value -127 is only an upper bound;
  // it gives the right quantum whenever -127 - quantum_mant <= quantum_min (all catalogue formats),
  // because the quantum is then quantum_min for every subnormal input. Otherwise the significand
  // (< 2^23) is converted to float, exactly, and its exponent field is top_bit + 127.
  VI e = hn::Sub(fi, hn::Set(di, 127));
  if (HWY_UNLIKELY(p.exact_sub_exponent)) {
    const VI top_sub = hn::BitCast(di, hn::ShiftRight<23>(hn::BitCast(du, hn::ConvertTo(df, hn::BitCast(di, a)))));
    e = hn::IfThenElse(hn::RebindMask(di, hn::Eq(field, k0)), hn::Sub(top_sub, hn::Set(di, 276)), e);
  }
  const VI q = hn::Max(hn::Sub(e, hn::Set(di, p.qm)), hn::Set(di, p.qmin));
  const VI s = hn::Sub(q, lsb);
  const VU sc = hn::BitCast(du, hn::Min(hn::Max(s, hn::Zero(di)), hn::Set(di, 31)));

  const VU pw = hn::Shl(k1, sc);  // 2^s in encoding units
  const VU mask = hn::Sub(pw, k1);
  const VU kept = hn::Shr(sig, sc);
  const VU rem = hn::And(sig, mask);
  const VU half = hn::ShiftRight<1>(pw);
  const auto inexact = hn::Ne(rem, k0);
  const auto odd = hn::Ne(hn::And(kept, k1), k0);
  const auto neg = hn::Ne(sign, k0);

  hn::Mask<DU> up;
  if constexpr (kMode == static_cast<int>(Rounding::rne)) {
    up = hn::Or(hn::Gt(rem, half), hn::And(hn::And(hn::Eq(rem, half), inexact), odd));
  } else if constexpr (kMode == static_cast<int>(Rounding::rna)) {
    up = hn::And(hn::Not(hn::Lt(rem, half)), inexact);
  } else if constexpr (kMode == static_cast<int>(Rounding::rtz)) {
    up = hn::Ne(k0, k0);
  } else if constexpr (kMode == static_cast<int>(Rounding::rup)) {
    up = hn::AndNot(neg, inexact);
  } else if constexpr (kMode == static_cast<int>(Rounding::rdn)) {
    up = hn::And(neg, inexact);
  } else if constexpr (kMode == static_cast<int>(Rounding::rto)) {
    up = hn::AndNot(odd, inexact);  // kept |= inexact
  } else {
    // Stochastic: the top sr_bits of the discarded fraction (truncated), plus the random word's low
    // sr_bits, carry into the kept bits. rem < 2^min(s, 24), so with s < sr the left shift stays
    // below 2^sr <= 2^32, and with s - sr >= 24 the right shift leaves 0 (clamped at 31).
    const VI srb = hn::Set(di, p.sr_bits);
    const VU dr = hn::BitCast(du, hn::Min(hn::Max(hn::Sub(s, srb), hn::Zero(di)), hn::Set(di, 31)));
    const VU dl = hn::BitCast(du, hn::Min(hn::Max(hn::Sub(srb, s), hn::Zero(di)), hn::Set(di, 31)));
    const VU rem_top = hn::Shl(hn::Shr(rem, dr), dl);
    const VU m = hn::Set(du, p.sr_mask);
    up = hn::Gt(hn::And(rnd, m), hn::Sub(m, rem_top));  // rem_top + r >= 2^sr, without the carry-out
  }

  // Rounded magnitude as a float encoding.
  const auto none_kept = hn::Eq(kept, k0);
  const VU qn = hn::BitCast(du, hn::ShiftLeft<23>(hn::Add(q, hn::Set(di, 127))));
  const VU qs = hn::Shl(k1, hn::BitCast(du, hn::Min(hn::Max(hn::Add(q, hn::Set(di, 149)), hn::Zero(di)),
                                                    hn::Set(di, 31))));
  const VU pow2q = hn::IfThenElse(hn::RebindMask(du, hn::Lt(q, hn::Set(di, -126))), qs, qn);
  const VU base = hn::IfThenZeroElse(none_kept, hn::AndNot(mask, a));
  const VU ulp = hn::IfThenElse(none_kept, pow2q, pw);
  const VU enc = hn::Add(base, hn::IfThenElseZero(up, ulp));

  auto pick = [&](const uint32_t (&c)[2]) { return hn::IfThenElse(neg, hn::Set(du, c[1]), hn::Set(du, c[0])); };
  const auto ovf = hn::Gt(enc, hn::Set(du, p.max_enc));
  VU r = hn::Or(sign, enc);
  r = hn::IfThenElse(hn::Lt(enc, hn::Set(du, p.flush_thr)), pick(p.res_flush), r);
  r = hn::IfThenElse(ovf, pick(p.res_ovf), r);
  r = hn::IfThenElse(hn::Eq(enc, k0), pick(p.res_under), r);
  const auto zero_in = hn::Eq(a, k0);
  const auto inf_in = hn::Eq(a, kInf);
  const auto nan_in = hn::Gt(a, kInf);
  r = hn::IfThenElse(zero_in, pick(p.res_zero), r);
  r = hn::IfThenElse(inf_in, pick(p.res_inf), r);
  const auto neg_nan = hn::And(neg, hn::Ne(hn::Set(du, p.neg_nan), k0));
  r = hn::IfThenElse(hn::Or(nan_in, neg_nan), hn::Set(du, 0x7fc00000u), r);

  const auto fin_nz = hn::AndNot(zero_in, hn::Lt(a, kInf));
  const VU ra = hn::And(r, hn::Set(du, 0x7fffffffu));
  *m_clip = hn::Or(inf_in, hn::AndNot(neg_nan, hn::And(ovf, fin_nz)));
  *m_flush = hn::And(fin_nz, hn::Eq(ra, k0));
  *m_sub = hn::And(hn::Ne(ra, k0), hn::Lt(ra, hn::Set(du, p.min_normal_enc)));
  *m_nan = hn::Gt(ra, kInf);
  return r;
}

#if HWY_TARGET != HWY_SCALAR
// hi:lo = a * m for every u32 lane (m constant).
template <class DU>
HWY_INLINE void MulHiLo(DU du, hn::Vec<DU> a, uint32_t m, hn::Vec<DU>* hi, hn::Vec<DU>* lo) {
  const hn::Repartition<uint64_t, DU> d64;
  const hn::Vec<DU> vm = hn::Set(du, m);
  *lo = hn::Mul(a, vm);
  const auto even = hn::MulEven(a, vm);
  const auto odd = hn::MulEven(hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(d64, a))), vm);
  *hi = hn::OddEven(hn::BitCast(du, odd), hn::BitCast(du, hn::ShiftRight<32>(even)));
}
#endif

// The random words of indices [first, first + n), Philox4x32-10 exactly as random.h (Random123),
// one block per lane. Writes whole blocks from index 4 * (first / 4) on, so `out` needs room for
// n + 3 + 4 * Lanes words; returns the offset of index `first` in `out`.
template <class DU>
HWY_INLINE size_t RandomWords(DU du, uint64_t seed, uint64_t stream, uint64_t first, size_t n, uint32_t* out) {
#if HWY_TARGET == HWY_SCALAR
  (void)du;
  random_fill(seed, stream, first, out, n);
  return 0;
#else
  using VU = hn::Vec<DU>;
  const size_t N = hn::Lanes(du);
  const size_t off = static_cast<size_t>(first & 3);
  const uint64_t block0 = first >> 2;
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  const VU c2 = hn::Set(du, static_cast<uint32_t>(stream));
  const VU c3 = hn::Set(du, static_cast<uint32_t>(stream >> 32));
  for (size_t w = 0; w < off + n; w += 4 * N) {
    const uint64_t b = block0 + w / 4;
    const VU blo = hn::Set(du, static_cast<uint32_t>(b));
    VU x0 = hn::Add(blo, hn::Iota(du, 0));
    // Carry into the high word where b + lane crosses 2^32.
    VU x1 = hn::Sub(hn::Set(du, static_cast<uint32_t>(b >> 32)), hn::VecFromMask(du, hn::Lt(x0, blo)));
    VU x2 = c2, x3 = c3;
    uint32_t k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
      }
      VU hi0, lo0, hi1, lo1;
      MulHiLo(du, x0, 0xD2511F53u, &hi0, &lo0);
      MulHiLo(du, x2, 0xCD9E8D57u, &hi1, &lo1);
      x0 = hn::Xor(hn::Xor(hi1, x1), hn::Set(du, k0));
      x1 = lo1;
      x2 = hn::Xor(hn::Xor(hi0, x3), hn::Set(du, k1));
      x3 = lo0;
    }
    hn::StoreInterleaved4(x0, x1, x2, x3, du, out + w);
  }
  return off;
#endif
}

template <int kMode>
CastStats CastSpanMode(const float* in, float* out, size_t n, const detail::CastParams& p,
                       uint64_t seed, uint64_t stream, uint64_t first) {
  const hn::ScalableTag<uint32_t> du;
  const hn::RebindToFloat<decltype(du)> df;
  using VU = hn::Vec<decltype(du)>;
  const size_t N = hn::Lanes(du);
  constexpr bool kSr = kMode == static_cast<int>(Rounding::sr);
  HWY_ALIGN uint32_t rbuf[detail::kChunk + 4 + HWY_MAX_BYTES];
  const uint32_t* rw = rbuf;
  HWY_ALIGN uint32_t cnt[4][HWY_MAX_BYTES / 4];
  HWY_ALIGN float tail_in[HWY_MAX_BYTES / 4] = {};
  HWY_ALIGN float tail_out[HWY_MAX_BYTES / 4];
  CastStats st;
  for (size_t base = 0; base < n; base += detail::kChunk) {
    const size_t len = std::min(detail::kChunk, n - base);
    if constexpr (kSr) rw = rbuf + RandomWords(du, seed, stream, first + base, len, rbuf);
    VU c_clip = hn::Zero(du), c_flush = hn::Zero(du), c_sub = hn::Zero(du), c_nan = hn::Zero(du);
    hn::Mask<decltype(du)> m_clip, m_flush, m_sub, m_nan;
    size_t i = 0;
    // Counting: a true mask lane is all ones (-1), so subtracting it adds one.
    for (; i + N <= len; i += N) {
      const VU u = hn::BitCast(du, hn::LoadU(df, in + base + i));
      const VU rnd = kSr ? hn::LoadU(du, rw + i) : hn::Zero(du);
      const VU r = RoundVec<kMode>(du, p, u, rnd, &m_clip, &m_flush, &m_sub, &m_nan);
      hn::StoreU(hn::BitCast(df, r), df, out + base + i);
      c_clip = hn::Sub(c_clip, hn::VecFromMask(du, m_clip));
      c_flush = hn::Sub(c_flush, hn::VecFromMask(du, m_flush));
      c_sub = hn::Sub(c_sub, hn::VecFromMask(du, m_sub));
      c_nan = hn::Sub(c_nan, hn::VecFromMask(du, m_nan));
    }
    if (i < len) {
      const size_t rest = len - i;
      std::memcpy(tail_in, in + base + i, rest * sizeof(float));
      const auto valid = hn::FirstN(du, rest);
      const VU u = hn::BitCast(du, hn::Load(df, tail_in));
      const VU rnd = kSr ? hn::LoadU(du, rw + i) : hn::Zero(du);  // lanes past len unused
      const VU r = RoundVec<kMode>(du, p, u, rnd, &m_clip, &m_flush, &m_sub, &m_nan);
      hn::Store(hn::BitCast(df, r), df, tail_out);
      std::memcpy(out + base + i, tail_out, rest * sizeof(float));
      c_clip = hn::Sub(c_clip, hn::VecFromMask(du, hn::And(m_clip, valid)));
      c_flush = hn::Sub(c_flush, hn::VecFromMask(du, hn::And(m_flush, valid)));
      c_sub = hn::Sub(c_sub, hn::VecFromMask(du, hn::And(m_sub, valid)));
      c_nan = hn::Sub(c_nan, hn::VecFromMask(du, hn::And(m_nan, valid)));
    }
    hn::Store(c_clip, du, cnt[0]);
    hn::Store(c_flush, du, cnt[1]);
    hn::Store(c_sub, du, cnt[2]);
    hn::Store(c_nan, du, cnt[3]);
    for (size_t l = 0; l < N; ++l) {
      st.clipped += cnt[0][l];
      st.flushed += cnt[1][l];
      st.subnormal += cnt[2][l];
      st.nan += cnt[3][l];
    }
  }
  return st;
}

CastStats CastSpanImpl(const float* in, float* out, size_t n, const detail::CastParams& p, int mode,
                       uint64_t seed, uint64_t stream, uint64_t first) {
  if (p.rne.kind == detail::CastParams::Rne::const_shift) return CastSpanRne<true>(in, out, n, p);
  if (p.rne.kind == detail::CastParams::Rne::var_shift) return CastSpanRne<false>(in, out, n, p);
  switch (static_cast<Rounding>(mode)) {
    case Rounding::rne: return CastSpanMode<static_cast<int>(Rounding::rne)>(in, out, n, p, seed, stream, first);
    case Rounding::rna: return CastSpanMode<static_cast<int>(Rounding::rna)>(in, out, n, p, seed, stream, first);
    case Rounding::rtz: return CastSpanMode<static_cast<int>(Rounding::rtz)>(in, out, n, p, seed, stream, first);
    case Rounding::rup: return CastSpanMode<static_cast<int>(Rounding::rup)>(in, out, n, p, seed, stream, first);
    case Rounding::rdn: return CastSpanMode<static_cast<int>(Rounding::rdn)>(in, out, n, p, seed, stream, first);
    case Rounding::rto: return CastSpanMode<static_cast<int>(Rounding::rto)>(in, out, n, p, seed, stream, first);
    case Rounding::sr: return CastSpanMode<static_cast<int>(Rounding::sr)>(in, out, n, p, seed, stream, first);
  }
  return {};
}

// cast_blocks_scaled: false (nothing done) where the rne kernel does not apply or b is not a whole
// number of vectors on this target.
bool CastBlocksScaledImpl(const float* in, float* out, size_t nblocks, size_t b, const float* mult, const float* inv,
                          uint8_t* ok, const detail::CastParams& p, CastStats* st) {
  const size_t N = hn::Lanes(hn::ScalableTag<float>());
  if (p.rne.kind == detail::CastParams::Rne::none || b == 0 || b % N != 0) return false;
  *st = p.rne.kind == detail::CastParams::Rne::const_shift
            ? CastBlocksScaledRne<true>(in, out, nblocks, b, mult, inv, ok, p)
            : CastBlocksScaledRne<false>(in, out, nblocks, b, mult, inv, ok, p);
  return true;
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

// The cast's loads and stores without its arithmetic (the same vectors, the same store kind).
void CopySpanImpl(const float* in, float* out, size_t n) {
  const hn::ScalableTag<float> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::LoadU(df, in + i), df, out + i);
  if (i < n) std::memcpy(out + i, in + i, (n - i) * sizeof(float));
}

// Per block of b consecutive floats of a row of n: the largest finite |x| (on the encodings, which
// order as the magnitudes: an integer max is exact) and the number of NaN/inf. Whole vectors inside
// a block go through SIMD; the rest (blocks narrower than a vector, ragged ends) element by element.
void BlockAmaxImpl(const float* row, size_t n, size_t b, float* amax, uint32_t* nonfinite) {
  const hn::ScalableTag<int32_t> di;
  const size_t L = hn::Lanes(di);
  const auto mag_mask = hn::Set(di, 0x7fffffff), inf_enc = hn::Set(di, 0x7f800000), zero = hn::Zero(di);
  for (size_t c0 = 0, bi = 0; c0 < n; c0 += b, ++bi) {
    const size_t c1 = std::min(n, c0 + b);
    auto top = zero, bad = zero;
    size_t c = c0;
    for (; c + L <= c1; c += L) {
      const auto u = hn::And(hn::LoadU(di, reinterpret_cast<const int32_t*>(row + c)), mag_mask);
      const auto is_bad = hn::Lt(hn::Sub(inf_enc, hn::Set(di, 1)), u);  // u >= inf's encoding
      bad = hn::Sub(bad, hn::VecFromMask(di, is_bad));
      top = hn::Max(top, hn::IfThenZeroElse(is_bad, u));
    }
    int32_t t = hn::GetLane(hn::MaxOfLanes(di, top));
    uint32_t nb = static_cast<uint32_t>(hn::GetLane(hn::SumOfLanes(di, bad)));
    for (; c < c1; ++c) {
      int32_t u;
      std::memcpy(&u, row + c, sizeof u);
      u &= 0x7fffffff;
      if (u >= 0x7f800000) ++nb;
      else t = std::max(t, u);
    }
    std::memcpy(amax + bi, &t, sizeof t);
    nonfinite[bi] = nb;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(CastSpanImpl);
HWY_EXPORT(CastBlocksScaledImpl);
HWY_EXPORT(BlockAmaxImpl);
HWY_EXPORT(TargetName);
HWY_EXPORT(CopySpanImpl);

namespace {

uint32_t enc_of(double v) { return bits_of(static_cast<float>(v)); }

void check_castable(const Format& f, const RoundSpec& spec) {
  if (!fits_float(f))
    throw std::invalid_argument("cast_span: the format's grid does not fit in float (output is float)");
  if (spec.sr_bits < 0 || spec.sr_bits > 32)
    throw std::invalid_argument("cast_span: sr_bits must be between 0 and 32 (got " + std::to_string(spec.sr_bits) + ")");
}

// The constants of the rne kernel (cast_rne-inl.h), or kind none where it does not apply: it
// needs a floating format under rne that keeps at least one fp32 bit fewer than fp32 and at least
// one mantissa bit (1 <= quantum_mant <= 22: 2^(s-1) exists, and in the normal range the last kept
// bit is a mantissa bit) and whose quantum for fp32's subnormal inputs is quantum_min; the special results must be the
// shapes the kernel builds (checked against what the scalar core gave for each sign).
detail::CastParams::Rne rne_params(const Format& f, const RoundSpec& spec, const detail::CastParams& p) {
  using Rne = detail::CastParams::Rne;
  Rne r;
  if (f.kind != Kind::floating || spec.mode != Rounding::rne || p.qm < 1 || p.qm > 22 || p.qmin < -126 - p.qm) return r;
  r.s_norm = 23 - p.qm;
  r.zero_thr = p.flush_thr != 0 ? p.flush_thr : 1;
  r.zero_sign = f.has_neg_zero ? 0x80000000u : 0;
  r.ovf_mag = p.res_ovf[0];
  r.ovf_is_nan = (p.res_ovf[0] & 0x7fffffffu) > 0x7f800000u;
  r.ovf_sign = r.ovf_is_nan ? 0 : 0x80000000u;
  const bool shapes_hold = p.res_ovf[1] == (r.ovf_mag | r.ovf_sign) && p.res_inf[0] == p.res_ovf[0] &&
                           p.res_inf[1] == p.res_ovf[1] && p.neg_nan == 0;
  bool zeros_hold = true;
  for (int neg = 0; neg < 2; ++neg) {
    const uint32_t zero = neg ? r.zero_sign : 0;
    zeros_hold = zeros_hold && p.res_zero[neg] == zero && p.res_under[neg] == zero && p.res_flush[neg] == zero;
  }
  if (!shapes_hold || !zeros_hold) return r;
  // Constant shift: fp32's subnormal inputs and its smallest normals discard the same s_norm bits,
  // and the last kept bit is a mantissa bit (s_norm <= 22; at 23 it is the implicit bit).
  r.kind = p.qmin == -126 - p.qm && r.s_norm <= 22 ? Rne::const_shift : Rne::var_shift;
  return r;
}

detail::CastParams make_params(const Format& f, const RoundSpec& spec) {
  detail::CastParams p;
  p.qm = std::min(f.quantum_mant, 23);
  p.qmin = f.quantum_min;
  p.exact_sub_exponent = -127 - p.qm > p.qmin;
  p.max_enc = enc_of(f.max_finite);
  p.flush_thr = flushes(f, spec) ? enc_of(f.min_normal) : 0;
  p.min_normal_enc = enc_of(f.min_normal);
  p.neg_nan = f.kind == Kind::pow2 ? 0xffffffffu : 0;
  p.sr_bits = spec.sr_bits;
  p.sr_mask = spec.sr_bits >= 32 ? 0xffffffffu : static_cast<uint32_t>((uint64_t{1} << spec.sr_bits) - 1);
  for (int neg = 0; neg < 2; ++neg) {
    const double sgn = neg ? -1.0 : 1.0;
    p.res_flush[neg] = enc_of(zero_of(neg, f));
    // A rounded magnitude of zero: round_pack's `kept == 0` branch (e8m0 has no zero: 2^-127).
    p.res_under[neg] = enc_of(f.kind == Kind::pow2 ? (neg ? quiet_nan() : f.min_positive) : zero_of(neg, f));
    p.res_ovf[neg] = enc_of(overflow_value(neg, f, spec));
    p.res_zero[neg] = enc_of(round_to(sgn * 0.0, f, spec));
    p.res_inf[neg] = enc_of(round_to(sgn * infinity(false), f, spec));
  }
  p.rne = rne_params(f, spec, p);
  return p;
}

// Counts for one element of the scalar twin. `no_max` is f with max_finite = inf: rounding there
// gives round_pack's rounded magnitude before the overflow rule, which says whether it overflowed.
void count_scalar(double x, double r, const Format& f, const Format& no_max, const RoundSpec& spec, uint32_t rnd,
                  CastStats* st) {
  const bool finite = !is_nan(x) && !is_inf(x);
  if (is_inf(x)) ++st->clipped;
  else if (finite && abs_of(x) > f.max_finite && abs_of(round_to(x, no_max, spec, rnd)) > f.max_finite)
    ++st->clipped;
  if (finite && x != 0 && r == 0) ++st->flushed;
  if (r != 0 && !is_nan(r) && !is_inf(r) && abs_of(r) < f.min_normal) ++st->subnormal;
  if (is_nan(r)) ++st->nan;
}

}  // namespace

bool fits_float(const Format& f) {
  switch (f.kind) {
    case Kind::floating: return f.man_bits <= 23 && f.emax <= 127 && f.quantum_min >= -149;
    case Kind::integer: return f.man_bits <= 24;
    case Kind::pow2: return f.emax <= 127 && f.emin >= -149;
  }
  return false;
}

bool is_fp32_grid_kept(const Format& f, const RoundSpec& spec) {
  return is_binary32(f) && !flushes(f, spec);
}

CastStats cast_span(const float* in, float* out, size_t n, const Format& f, const RoundSpec& spec, uint64_t seed,
                    uint64_t stream, uint64_t first_index) {
  check_castable(f, spec);
  const detail::CastParams p = make_params(f, spec);
  return HWY_DYNAMIC_DISPATCH(CastSpanImpl)(in, out, n, p, static_cast<int>(spec.mode), seed, stream, first_index);
}

void block_amax(const float* row, size_t n, size_t b, float* amax, uint32_t* nonfinite) {
  HWY_DYNAMIC_DISPATCH(BlockAmaxImpl)(row, n, b, amax, nonfinite);
}

SpanCast prepare_span_cast(const Format& f, const RoundSpec& spec) {
  check_castable(f, spec);
  return SpanCast{make_params(f, spec), static_cast<int>(spec.mode)};
}

CastStats cast_span(const SpanCast& cast, const float* in, float* out, size_t n, uint64_t seed, uint64_t stream,
                    uint64_t first_index) {
  return HWY_DYNAMIC_DISPATCH(CastSpanImpl)(in, out, n, cast.params, cast.mode, seed, stream, first_index);
}

bool cast_blocks_scaled(const SpanCast& cast, const float* in, float* out, size_t nblocks, size_t b, const float* mult,
                        const float* inv, uint8_t* ok, CastStats* st) {
  return HWY_DYNAMIC_DISPATCH(CastBlocksScaledImpl)(in, out, nblocks, b, mult, inv, ok, cast.params, st);
}

CastStats cast_span_scalar(const float* in, float* out, size_t n, const Format& f, const RoundSpec& spec,
                           uint64_t seed, uint64_t stream, uint64_t first_index) {
  check_castable(f, spec);
  Format no_max = f;
  no_max.max_finite = infinity(false);
  CastStats st;
  uint32_t rbuf[detail::kChunk];
  for (size_t base = 0; base < n; base += detail::kChunk) {
    const size_t len = std::min(detail::kChunk, n - base);
    if (spec.mode == Rounding::sr) random_fill(seed, stream, first_index + base, rbuf, len);
    for (size_t i = 0; i < len; ++i) {
      const double x = static_cast<double>(in[base + i]);
      const uint32_t rnd = spec.mode == Rounding::sr ? rbuf[i] : 0;
      const double r = round_to(x, f, spec, rnd);
      out[base + i] = static_cast<float>(r);
      count_scalar(x, r, f, no_max, spec, rnd, &st);
    }
  }
  return st;
}

CastStats cast_span_parallel(const float* in, float* out, size_t n, const Format& f, const RoundSpec& spec,
                             uint64_t seed, uint64_t stream, uint64_t first_index) {
  check_castable(f, spec);
  constexpr size_t kPiece = size_t{1} << 16;
  const detail::CastParams p = make_params(f, spec);
  const int64_t pieces = static_cast<int64_t>((n + kPiece - 1) / kPiece);
  if (pieces <= 1)  // one piece: no parallel region (its start-up would cost more than the work)
    return HWY_DYNAMIC_DISPATCH(CastSpanImpl)(in, out, n, p, static_cast<int>(spec.mode), seed, stream, first_index);
  // Resolve the dispatch once (the first call through the table picks the target), then share it.
  HWY_DYNAMIC_DISPATCH(CastSpanImpl)(in, out, 0, p, static_cast<int>(spec.mode), seed, stream, first_index);
  auto* impl = &HWY_DYNAMIC_DISPATCH(CastSpanImpl);
  CastStats total;
#pragma omp parallel
  {
    CastStats mine;
#pragma omp for schedule(static)
    for (int64_t k = 0; k < pieces; ++k) {
      const size_t b = static_cast<size_t>(k) * kPiece;
      const size_t len = std::min(kPiece, n - b);
      mine += impl(in + b, out + b, len, p, static_cast<int>(spec.mode), seed, stream, first_index + b);
    }
#pragma omp critical(drift_cast_span_stats)
    total += mine;
  }
  return total;
}

void copy_span(const float* in, float* out, size_t n) { HWY_DYNAMIC_DISPATCH(CopySpanImpl)(in, out, n); }

const char* cast_span_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

std::vector<int64_t> cast_span_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
