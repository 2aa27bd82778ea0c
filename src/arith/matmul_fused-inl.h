// The fused tensor-core model of the fast matmul: one K-block of fused_dot for a row and a strip of
// columns, in double lanes, bit-identical to fused_accum.h.
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

// The fused model over one K-block for row i and the 2L columns of a strip, every lane its own
// fused_dot(0, a_i, b_j) (fused_accum.h), computed in double lanes with the same integers:
//   E = max(product exponents e(x)+e(y) (each clamped at in_emin), c's exponent (clamped at the output
//   format's emin; none when c = 0), min_align_exp); q = E - kept_bits;
//   every term trunc(x*y * 2^-q) and trunc(c * 2^-q) is an integer below 2^(kept_bits+2) (x*y is exact
//   in double, the scaling by a power of two is exact, trunc cuts toward zero as `cut` does), their
//   sum is exact in double (matmul_fast checks (terms+1) * 2^(kept_bits+2) <= 2^53), and
//   sum * 2^q rounded once to out_man_bits fraction bits (rtz or rne, integer operations on the
//   double's bits) is round_result. Results below the output format's smallest normal or at its
//   overflow threshold, and a non-finite c, are redone lane by lane with the scalar core (group_at).
template <FastInner kInner, class DD>
HWY_INLINE void FusedRowBlock(DD dd, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedPlan& plan,
                              double* out) {
  using VD = hn::Vec<DD>;
  const hn::RebindToSigned<DD> di;
  using VI = hn::Vec<decltype(di)>;
  constexpr size_t kMaxNV = 4;  // 2 float vectors of columns are at most 4 double vectors
  const size_t Ld = hn::Lanes(dd);
  const size_t W = 2 * hn::Lanes(hn::ScalableTag<float>());
  const size_t NV = W / Ld;
  const FusedOperands& fo = op.fused;
  const FusedModel& m = *fo.model;
  const double* arow = fo.a + i * op.k + k0;
  const double* erow = fo.ea + i * op.k + k0;
  const size_t strip_off = (j0 / W) * op.k * W + k0 * W;
  const double* bs = fo.b + strip_off;
  const double* es = fo.eb + strip_off;
  const VD zero = hn::Zero(dd);
  const VD kept = hn::Set(dd, static_cast<double>(m.kept_bits));
  const VD out_emin = hn::Set(dd, static_cast<double>(m.out.emin));
  const VD zero_exp = hn::Set(dd, kZeroExp);
  const VD min_align = hn::Set(dd, fo.min_align);
  const VI bias = hn::Set(di, 1023);
  const VI sign_mask = hn::Set(di, static_cast<int64_t>(0x8000000000000000ull));
  const int shift = 52 - m.out_man_bits;
  const VI low = hn::Set(di, (int64_t{1} << shift) - 1);
  const VI min_normal_enc = hn::Set(di, static_cast<int64_t>(bits_of(pow2(m.out.emin))));
  const VI overflow_enc = hn::Set(di, static_cast<int64_t>(bits_of(pow2(m.out.emax + 1))));
  const VI one = hn::Set(di, 1);
  const bool promote = m.promote_every > 0;
  HWY_ALIGN double lanes_c[HWY_MAX_BYTES / sizeof(double)];
  VD outer[kMaxNV];
  for (size_t v = 0; v < NV; ++v) outer[v] = zero;
  uint32_t g0 = 0;
  for (uint32_t chain_end : plan.chain_end) {
    VD c[kMaxNV];
    for (size_t v = 0; v < NV; ++v) c[v] = promote ? zero : outer[v];
    for (uint32_t gi = g0; gi < chain_end; ++gi) {
      const FusedGroup& g = plan.groups[gi];
      const uint32_t* idx = plan.index.data() + g.first;
      // Pass 1: the alignment exponent.
      VD E[kMaxNV];
      for (size_t v = 0; v < NV; ++v) {
        const VI cb = hn::BitCast(di, c[v]);
        const VI field = hn::ShiftRight<52>(hn::AndNot(sign_mask, cb));
        const VD ec = hn::Max(hn::ConvertTo(dd, hn::Sub(field, bias)), out_emin);
        E[v] = hn::IfThenElse(hn::Eq(c[v], zero), zero_exp, ec);
      }
      for (uint32_t t = 0; t < g.n; ++t) {
        const size_t p = idx[t];
        const VD ex = hn::Set(dd, erow[p]);
        for (size_t v = 0; v < NV; ++v) E[v] = hn::Max(E[v], hn::Add(ex, hn::LoadU(dd, es + p * W + v * Ld)));
      }
      VD scale[kMaxNV], unit[kMaxNV], sum[kMaxNV];
      for (size_t v = 0; v < NV; ++v) {
        const VI q = hn::ConvertTo(di, hn::Sub(hn::Max(E[v], min_align), kept));
        scale[v] = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Sub(bias, q)));  // 2^-q
        unit[v] = hn::BitCast(dd, hn::ShiftLeft<52>(hn::Add(bias, q)));   // 2^q
        // Starting from +0 turns a truncated -0 into +0 (an all-zero group gives +0, as group_at).
        sum[v] = hn::Add(zero, hn::Trunc(hn::Mul(c[v], scale[v])));
      }
      // Pass 2: the cut products, added exactly.
      for (uint32_t t = 0; t < g.n; ++t) {
        const size_t p = idx[t];
        const VD x = hn::Set(dd, arow[p]);
        for (size_t v = 0; v < NV; ++v)
          sum[v] = hn::Add(sum[v], hn::Trunc(hn::Mul(hn::Mul(x, hn::LoadU(dd, bs + p * W + v * Ld)), scale[v])));
      }
      // Normalise and round once to the result grid.
      for (size_t v = 0; v < NV; ++v) {
        const VI val = hn::BitCast(di, hn::Mul(sum[v], unit[v]));  // exact
        const VI sign = hn::And(val, sign_mask);
        const VI mag = hn::AndNot(sign_mask, val);
        VI r;
        if (m.final_rounding == Rounding::rne)
          r = hn::AndNot(low, hn::Add(hn::Add(mag, hn::ShiftRight<1>(low)), hn::And(hn::ShiftRightSame(mag, shift), one)));
        else
          r = hn::AndNot(low, mag);
        const auto rare = hn::Or(hn::And(hn::Lt(mag, min_normal_enc), hn::Ne(mag, hn::Zero(di))),
                                 hn::Or(hn::Not(hn::Lt(r, overflow_enc)), hn::Not(hn::Lt(mag, overflow_enc))));
        const VD c_old = c[v];
        c[v] = hn::BitCast(dd, hn::Or(sign, r));
        if (HWY_UNLIKELY(!hn::AllFalse(di, rare))) {
          // The scalar core on this lane's own operands (also where c had become infinite).
          hn::Store(c_old, dd, lanes_c);
          HWY_ALIGN int64_t rare_lanes[HWY_MAX_BYTES / sizeof(double)];
          HWY_ALIGN double res[HWY_MAX_BYTES / sizeof(double)];
          hn::Store(hn::VecFromMask(di, rare), di, rare_lanes);
          hn::Store(c[v], dd, res);
          for (size_t l = 0; l < Ld; ++l) {
            const size_t j = j0 + v * Ld + l;
            if (!rare_lanes[l] || j >= op.n) continue;
            const double* ap = fo.a + i * op.k + k0 + g.start;
            const double* bp = fo.bq + j * op.k + k0 + g.start;
            res[l] = g.half < 0 ? fused_detail::group_at(lanes_c[l], ap, 1, bp, 1, static_cast<int>(g.n),
                                                         fused_detail::Consecutive{}, m)
                                : fused_detail::group_at(lanes_c[l], ap, 1, bp, 1, static_cast<int>(g.n),
                                                         fused_detail::Interleaved{m.interleave, g.half}, m);
          }
          c[v] = hn::Load(dd, res);
        }
      }
    }
    g0 = chain_end;
    if (promote) {
      // Promotion into the outer accumulator, once per chain: the scalar core, lane by lane.
      for (size_t v = 0; v < NV; ++v) {
        HWY_ALIGN double ov[HWY_MAX_BYTES / sizeof(double)];
        hn::Store(outer[v], dd, ov);
        hn::Store(c[v], dd, lanes_c);
        for (size_t l = 0; l < Ld; ++l) ov[l] = fused_promote_add(ov[l], lanes_c[l], m);
        outer[v] = hn::Load(dd, ov);
      }
    } else {
      for (size_t v = 0; v < NV; ++v) outer[v] = c[v];
    }
  }
  for (size_t v = 0; v < NV; ++v) hn::StoreU(outer[v], dd, out + v * Ld);
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
