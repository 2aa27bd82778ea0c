// The fused tensor-core model of the fast matmul: the fused_dot chains (fused_accum.h) of a tile of
// rows and a strip of columns over one K-block, in double lanes, bit-identical to fused_accum.h.
// Highway per-target header: included by matmul_fast.cpp once per SIMD target (foreach_target.h).
#if defined(DRIFT_ARITH_MATMUL_FUSED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DRIFT_ARITH_MATMUL_FUSED_INL_H_
#undef DRIFT_ARITH_MATMUL_FUSED_INL_H_
#else
#define DRIFT_ARITH_MATMUL_FUSED_INL_H_
#endif

#include "arith/matmul_fast_shared.h"
#include "arith/ops.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One group of fused_dot(c, a_i, b_j) (fused_accum.h) for R rows from i and the W = 2L columns of a
// strip (c: cw[r*W + l]), each lane its own column, computed with the same integers:
//   E = max(product exponents e(x)+e(y) (each clamped at in_emin), c's exponent (clamped at the output
//   format's emin; none when c = 0), min_align_exp); q = E - kept_bits;
//   every term trunc(x*y * 2^-q) and trunc(c * 2^-q) is an integer below 2^(kept_bits+2), and their
//   sum is exact in double (matmul_fast checks (terms+1) * 2^(kept_bits+2) <= 2^51);
//   sum * 2^q rounded once to out_man_bits fraction bits (rtz or rne, integer operations on the
//   double's bits) is round_result. Results below the output format's smallest normal or at its
//   overflow threshold, and a non-finite c, are redone lane by lane with the scalar core (group_at).
// The product exponents are found in int16 lanes (one vector holds the strip's W columns, but on the
// scalar target). The cut
// terms are added in one of two ways:
//   * AVX-512: by fused multiply-adds with the instruction's own rounding direction into
//     accumulators that start at M = 1.5 * 2^(52+q), whose last bit is then worth 2^q: fma(x, y, acc)
//     rounded toward zero adds trunc of a product >= 0, rounded upward adds trunc of a product <= 0
//     (acc - |p| rounded up is acc - floor(|p|)). B is packed split by sign (the values > 0 and those
//     < 0, each with zeros elsewhere), and x's sign picks which half each direction reads: every
//     product a direction sees has its sign. One fma per product and lane.
//   * elsewhere: trunc(x*y * 2^-q) per term (multiply, multiply, truncate, add).
template <size_t R, class DD>
HWY_INLINE void FusedGroupRows(DD dd, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                               const uint32_t* idx, double* cw) {
  using VD = hn::Vec<DD>;
  const hn::RebindToSigned<DD> di;
  using VI = hn::Vec<decltype(di)>;
  const hn::ScalableTag<int16_t> d16;
  const hn::Rebind<int16_t, DD> d16h;
  const hn::Rebind<int32_t, DD> d32h;
  constexpr size_t kMaxNV = 4;  // W columns are at most 4 double vectors
  const size_t Ld = hn::Lanes(dd);
  const size_t W = 2 * hn::Lanes(hn::ScalableTag<float>());  // the strip width of matmul_fast
  const size_t NV = W / Ld;
  const size_t L16 = hn::Lanes(d16), N16 = W / L16;  // one int16 vector, two on the scalar target
  const FusedOperands& fo = op.fused;
  const FusedModel& m = *fo.model;
  const double* arow[R];
  const int16_t* earow[R];
  for (size_t r = 0; r < R; ++r) {
    arow[r] = fo.a + (i + r) * op.k + k0;
    earow[r] = fo.ea + (i + r) * op.k + k0;
  }
  const int16_t* es = fo.eb + (j0 / W) * op.k * W + k0 * W;
  const double* bs = fo.b + (j0 / W) * op.k * 2 * W + k0 * 2 * W;
  const VI bias = hn::Set(di, 1023);
  const VI sign_mask = hn::Set(di, static_cast<int64_t>(0x8000000000000000ull));

  // Pass 1: the alignment exponent E of every lane, as q = max(E, min_align) - kept_bits.
  hn::Vec<decltype(d16)> Ep[R][2];
  for (size_t r = 0; r < R; ++r)
    for (size_t h = 0; h < N16; ++h) Ep[r][h] = hn::Set(d16, static_cast<int16_t>(2 * kZeroExp));  // below all
  for (uint32_t t = 0; t < g.n; ++t) {
    const size_t p = idx[t];
    for (size_t h = 0; h < N16; ++h) {
      const auto eb = hn::LoadU(d16, es + p * W + h * L16);
      for (size_t r = 0; r < R; ++r) Ep[r][h] = hn::Max(Ep[r][h], hn::Add(hn::Set(d16, earow[r][p]), eb));
    }
  }
  HWY_ALIGN int16_t ep[R][2 * HWY_MAX_BYTES / sizeof(int16_t)];
  for (size_t r = 0; r < R; ++r)
    for (size_t h = 0; h < N16; ++h) hn::Store(Ep[r][h], d16, ep[r] + h * L16);
  VI q[R][kMaxNV];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v) {
      const VD c = hn::Load(dd, cw + r * W + v * Ld);
      const VI field = hn::ShiftRight<52>(hn::AndNot(sign_mask, hn::BitCast(di, c)));
      const VD ec = hn::Max(hn::ConvertTo(dd, hn::Sub(field, bias)), hn::Set(dd, static_cast<double>(m.out.emin)));
      VD E = hn::IfThenElse(hn::Eq(c, hn::Zero(dd)), hn::Set(dd, kZeroExp), ec);
      E = hn::Max(E, hn::PromoteTo(dd, hn::PromoteTo(d32h, hn::LoadU(d16h, ep[r] + v * Ld))));
      q[r][v] = hn::ConvertTo(
          di, hn::Sub(hn::Max(E, hn::Set(dd, fo.min_align)), hn::Set(dd, static_cast<double>(m.kept_bits))));
    }

  // Pass 2: the cut terms, added exactly; val = their sum times 2^q (exact).
  VD val[R][kMaxNV];
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  constexpr int kTowardZero = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  constexpr int kUpward = _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC;
  VD up[R][kMaxNV], down[R][kMaxNV];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v) {
      const VD M = hn::BitCast(dd, hn::Or(hn::ShiftLeft<52>(hn::Add(hn::Set(di, 1023 + 52), q[r][v])),
                                          hn::Set(di, int64_t{1} << 51)));          // 1.5 * 2^(52+q)
      const VD scale = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Sub(bias, q[r][v])));  // 2^-q
      const VD unit = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Add(bias, q[r][v])));   // 2^q
      const VD c = hn::Load(dd, cw + r * W + v * Ld);
      up[r][v] = hn::Add(M, hn::Mul(hn::Trunc(hn::Mul(c, scale)), unit));  // M + trunc(c 2^-q) 2^q, exact
      down[r][v] = M;
    }
  for (uint32_t t = 0; t < g.n; ++t) {
    const size_t p = idx[t];
    const double* row = bs + p * 2 * W;
    for (size_t r = 0; r < R; ++r) {
      const double x = arow[r][p];
      // Arithmetic, not a branch: x's sign is data, and a mispredicted branch costs more than the fmas.
      const size_t s = static_cast<size_t>(bits_of(x) >> 63) * W;
      const double* same = row + s;         // y of x's sign: products >= 0
      const double* other = row + (W - s);  // products <= 0
      const __m512d vx = _mm512_set1_pd(x);
      for (size_t v = 0; v < NV; ++v) {
        up[r][v].raw = _mm512_fmadd_round_pd(vx, _mm512_loadu_pd(same + v * Ld), up[r][v].raw, kTowardZero);
        down[r][v].raw = _mm512_fmadd_round_pd(vx, _mm512_loadu_pd(other + v * Ld), down[r][v].raw, kUpward);
      }
    }
  }
  // Both accumulators stay within 2^(51+q) of M: the differences and their sum are exact, and an
  // exactly cancelling group gives +0.
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v) {
      const VD M = hn::BitCast(dd, hn::Or(hn::ShiftLeft<52>(hn::Add(hn::Set(di, 1023 + 52), q[r][v])),
                                          hn::Set(di, int64_t{1} << 51)));
      val[r][v] = hn::Add(hn::Sub(up[r][v], M), hn::Sub(down[r][v], M));
    }
#else
  VD scale[R][kMaxNV], sum[R][kMaxNV];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v) {
      scale[r][v] = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Sub(bias, q[r][v])));  // 2^-q
      // Starting from +0 turns a truncated -0 into +0 (an all-zero group gives +0, as group_at).
      sum[r][v] = hn::Add(hn::Zero(dd), hn::Trunc(hn::Mul(hn::Load(dd, cw + r * W + v * Ld), scale[r][v])));
    }
  for (uint32_t t = 0; t < g.n; ++t) {
    const size_t p = idx[t];
    const double* row = bs + p * 2 * W;
    for (size_t v = 0; v < NV; ++v) {
      const VD y = hn::Add(hn::LoadU(dd, row + v * Ld), hn::LoadU(dd, row + W + v * Ld));  // one of them is 0
      for (size_t r = 0; r < R; ++r)
        sum[r][v] = hn::Add(sum[r][v], hn::Trunc(hn::Mul(hn::Mul(hn::Set(dd, arow[r][p]), y), scale[r][v])));
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v)
      val[r][v] = hn::Mul(sum[r][v], hn::BitCast(dd, hn::ShiftLeft<52>(hn::Add(bias, q[r][v]))));  // times 2^q
#endif

  // Normalise and round once to the result grid.
  const int shift = 52 - m.out_man_bits;
  const VI low = hn::Set(di, (int64_t{1} << shift) - 1);
  const VI min_normal_enc = hn::Set(di, static_cast<int64_t>(bits_of(pow2(m.out.emin))));
  const VI overflow_enc = hn::Set(di, static_cast<int64_t>(bits_of(pow2(m.out.emax + 1))));
  const VI one = hn::Set(di, 1);
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v) {
      const VI bits = hn::BitCast(di, val[r][v]);
      const VI sign = hn::And(bits, sign_mask);
      const VI mag = hn::AndNot(sign_mask, bits);
      VI rounded;
      if (m.final_rounding == Rounding::rne)
        rounded = hn::AndNot(low, hn::Add(hn::Add(mag, hn::ShiftRight<1>(low)), hn::And(hn::ShiftRightSame(mag, shift), one)));
      else
        rounded = hn::AndNot(low, mag);
      const auto rare = hn::Or(hn::And(hn::Lt(mag, min_normal_enc), hn::Ne(mag, hn::Zero(di))),
                               hn::Or(hn::Not(hn::Lt(rounded, overflow_enc)), hn::Not(hn::Lt(mag, overflow_enc))));
      double* cv = cw + r * W + v * Ld;
      HWY_ALIGN double res[HWY_MAX_BYTES / sizeof(double)];
      hn::Store(hn::BitCast(dd, hn::Or(sign, rounded)), dd, res);
      if (HWY_UNLIKELY(!hn::AllFalse(di, rare))) {
        // The scalar core on this lane's own operands (also where c had become infinite).
        HWY_ALIGN int64_t rare_lanes[HWY_MAX_BYTES / sizeof(double)];
        hn::Store(hn::VecFromMask(di, rare), di, rare_lanes);
        for (size_t l = 0; l < Ld; ++l) {
          const size_t j = j0 + v * Ld + l;
          if (!rare_lanes[l] || j >= op.n) continue;
          const double* ap = fo.a + (i + r) * op.k + k0 + g.start;
          const double* bp = fo.bq + j * op.k + k0 + g.start;
          res[l] = g.half < 0 ? fused_detail::group_at(cv[l], ap, 1, bp, 1, static_cast<int>(g.n),
                                                       fused_detail::Consecutive{}, m)
                              : fused_detail::group_at(cv[l], ap, 1, bp, 1, static_cast<int>(g.n),
                                                       fused_detail::Interleaved{m.interleave, g.half}, m);
        }
      }
      hn::Store(hn::Load(dd, res), dd, cv);
    }
}

// The fused model over one K-block for rows [i0, i0+rows), rows <= kMaxRows, and the strip at column
// j0: out[r*W + l].
// Groups run in the outer loop and rows in the inner one, so that a group's slice of the strip
// (32 products x W columns: 16 KiB at most) stays in L1 while every row of the tile reads it.
template <size_t kMaxRows, class DD>
HWY_INLINE void FusedTileBlock(DD dd, const FastOperands& op, size_t i0, size_t rows, size_t j0, size_t k0,
                               const FusedPlan& plan, double* out) {
  const size_t W = 2 * hn::Lanes(hn::ScalableTag<float>());  // the strip width of matmul_fast
  const FusedModel& m = *op.fused.model;
  const bool promote = m.promote_every > 0;
  HWY_ALIGN double c[kMaxRows * 2 * HWY_MAX_BYTES / sizeof(float)];
  for (size_t l = 0; l < rows * W; ++l) out[l] = 0.0;  // the outer accumulators
  uint32_t g0 = 0;
  for (uint32_t chain_end : plan.chain_end) {
    for (size_t l = 0; l < rows * W; ++l) c[l] = promote ? 0.0 : out[l];
    for (uint32_t gi = g0; gi < chain_end; ++gi) {
      const FusedGroup& g = plan.groups[gi];
      // Rows in pairs: two rows' independent sums hide the latency of each other's fmas.
      const uint32_t* idx = plan.index.data() + g.first;
      size_t r = 0;
      for (; r + 2 <= rows; r += 2) FusedGroupRows<2>(dd, op, i0 + r, j0, k0, g, idx, c + r * W);
      if (r < rows) FusedGroupRows<1>(dd, op, i0 + r, j0, k0, g, idx, c + r * W);
    }
    g0 = chain_end;
    // Promotion into the outer accumulator, once per chain: the scalar core.
    for (size_t l = 0; l < rows * W; ++l) out[l] = promote ? fused_promote_add(out[l], c[l], m) : c[l];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
