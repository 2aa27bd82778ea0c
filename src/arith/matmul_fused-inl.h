// The fused tensor-core model of the fast matmul: the fused_dot chains (fused_accum.h) of a tile of
// rows and a strip of columns over one K-block, bit-identical to fused_accum.h.
// Highway per-target header: included by matmul_fast.cpp once per SIMD target (foreach_target.h).
#if defined(DRIFT_ARITH_MATMUL_FUSED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef DRIFT_ARITH_MATMUL_FUSED_INL_H_
#undef DRIFT_ARITH_MATMUL_FUSED_INL_H_
#else
#define DRIFT_ARITH_MATMUL_FUSED_INL_H_
#endif

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "arith/matmul_fast_shared.h"
#include "arith/ops.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Whether the integer route runs in float lanes on this target (matmul_fast asks before packing):
// it converts a group's int32 sum to float in the model's own rounding direction, which AVX-512 does
// in one instruction (embedded rounding) and AVX2 by the conversion to nearest and a correction
// (IntSumToFloat). Elsewhere c and the sum go through double lanes.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
constexpr bool kFusedFloatLanes = true;
#else
constexpr bool kFusedFloatLanes = false;
#endif
// Whether the integer route's four accumulators (FusedGroupRowsFour: NVFP4 folded's groups of 64)
// take float lanes too: AVX-512 only. On AVX2 g++ 12 kept them in memory, at a quarter of the double
// lanes' speed, and they take double lanes there (matmul_fast asks).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr bool kFusedFourInFloat = true;
#else
constexpr bool kFusedFourInFloat = false;
#endif

// How a group of fused_dot(c, a_i, b_j) (fused_accum.h) is computed here, for a row i and the W = 2L
// columns of a strip, each lane its own column, with the same integers as the scalar core:
//   E = max(product exponents e(x)+e(y) (each clamped at in_emin), c's exponent (clamped at the output
//   format's emin; none when c = 0), min_align_exp); q = E - kept_bits;
//   every term trunc(x*y * 2^-q) and trunc(c * 2^-q) is an integer below 2^(kept_bits+2), and their
//   sum is exact (in double lanes: matmul_fast checks (terms+1) * 2^(kept_bits+2) <= 2^53; the
//   integer route: below);
//   sum * 2^q rounded once to out_man_bits fraction bits (rtz or rne, integer operations on the
//   lane's bits) is round_result. Results below the output format's smallest normal or at its
//   overflow threshold, a non-finite c, and (the integer route) an alignment exponent beyond its
//   range are redone lane by lane with the scalar core (group_at).
// The product exponents are found in int16 lanes (one vector holds the strip's W columns, but on the
// scalar target), or on AVX-512 and AVX2 where every code lies in [-30, 30] (FP8 and fp16 inputs;
// bf16 and others whose codes span at most 60 binades, shifted) in int8 lanes, a pair of rows per
// vector. The cut terms are added in one of two ways:
//   * the integer route, where every product is exact in float and every cut term fits an int32
//     (every preset; FusedOperands::int_accs): trunc(x*y * 2^-q) by two float multiplies and one
//     conversion toward zero per product, in float lanes, added in int32 lanes (FusedIntCutTerms; one
//     accumulator, or two taking the positions in turn where a group's sum could pass 2^31). On
//     AVX-512 and AVX2 the whole group stays in float lanes: c's cut in int32 too, the adds that
//     could wrap checked, and the sum converted to float as IntSumToFloat rounds it
//     (FusedCutSumsIntFloat); elsewhere, and for four accumulators on AVX2, c and the sum in double
//     lanes (FusedCutSumsInt).
//   * otherwise (wider inputs, more kept bits): trunc(x*y * 2^-q) per term in double lanes
//     (multiply, multiply, truncate, add: FusedCutSumsTruncated).
// A tile's rows share one pass for the products' exponents (FusedProductExponents); the rest runs
// for two rows at a time (FusedGroupRows: FusedCutExponents, then FusedCutSumsInt(Float) or
// FusedCutSumsTruncated, then FusedRoundResults).

// One group for row i and column j by the scalar core (group_at), from the operands as the caller
// gave them (doubles, or floats widened here: the group's span only); cols: B's columns (n).
HWY_NOINLINE double FusedGroupInCore(const FusedOperands& fo, size_t k, size_t cols, size_t i, size_t j, size_t k0,
                                     const FusedGroup& g, double c) {
  const size_t span = g.half < 0 ? g.n : static_cast<size_t>(fused_detail::Interleaved{fo.model->interleave, g.half}(
                                                                   static_cast<int>(g.n) - 1)) + 1;
  std::vector<double> wide;
  // Row `row` of an operand from k0 + g.start; element t of a float one at qf[row*rs + t*cs].
  auto source = [&](const double* q, const float* qf, size_t rs, size_t cs, size_t row) -> const double* {
    const size_t t0 = k0 + g.start;
    if (q) return q + row * k + t0;
    const size_t base = wide.size();
    for (size_t t = t0; t < t0 + span; ++t) wide.push_back(qf[row * rs + t * cs]);
    return wide.data() + base;
  };
  wide.reserve(2 * span);
  const double* ap = source(fo.aq, fo.aqf, k, 1, i);
  const double* bp = fo.bqf_k_major ? source(fo.bq, fo.bqf, 1, cols, j) : source(fo.bq, fo.bqf, k, 1, j);
  const int n = static_cast<int>(g.n);
  return g.half < 0 ? fused_detail::group_at(c, ap, 1, bp, 1, n, fused_detail::Consecutive{}, *fo.model)
                    : fused_detail::group_at(c, ap, 1, bp, 1, n, fused_detail::Interleaved{fo.model->interleave, g.half},
                                             *fo.model);
}

// The lane type's encoding: fraction bits and exponent bias.
template <typename T>
struct LaneBits {
  static constexpr int kMant = sizeof(T) == 8 ? 52 : 23;
  static constexpr int kBias = sizeof(T) == 8 ? 1023 : 127;
  using Bits = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  // The encoding of 2^e for e in [1 - kBias, kBias] (normal values of T; kBias + 1 gives infinity's);
  // built from bits, not by ldexp, which the kernel's per-group code had paid for as a call.
  static constexpr Bits Pow2(int e) { return static_cast<Bits>(static_cast<Bits>(e + kBias) << kMant); }
};

// The product part of group g's alignment exponents for kRowsMax rows from i (rows past the tile's
// `rows` repeat row i; their results are not used) and the strip at j0: ep[r*W + l] =
// max over the group's products of e(a_ir) + e(b_jl), in int16 lanes (one vector holds the strip's W
// columns, but on the scalar target). All rows in one pass: one load of B's codes serves them all.
template <size_t kRowsMax, size_t S>
HWY_INLINE void FusedProductExponents(const FastOperands& op, size_t i, size_t rows, size_t j0, size_t k0,
                                      const FusedGroup& g, const uint32_t* idx, int16_t* ep) {
  const hn::ScalableTag<int16_t> d16;
  const hn::Repartition<int32_t, decltype(d16)> d32;  // A's codes, each twice: a broadcast is a load
  const size_t W = 2 * hn::Lanes(hn::ScalableTag<float>());
  const size_t L16 = hn::Lanes(d16), N16 = W / L16;  // one int16 vector a strip, two on the scalar target
  const size_t NH = S * N16;                          // (at most 2: S is 1 on the scalar target)
  const FusedOperands& fo = op.fused;
  const int32_t* earow[kRowsMax];
  for (size_t r = 0; r < kRowsMax; ++r) earow[r] = fo.ea + (i + (r < rows ? r : 0)) * op.k + k0;
  const int16_t* es[S];
  for (size_t st = 0; st < S; ++st) es[st] = fo.eb + (j0 / W + st) * op.k * W + k0 * W;
  hn::Vec<decltype(d16)> Ep[kRowsMax][2];
  for (size_t r = 0; r < kRowsMax; ++r)
    for (size_t h = 0; h < NH; ++h) Ep[r][h] = hn::Set(d16, static_cast<int16_t>(2 * kZeroExp));  // below all
  for (uint32_t t = 0; t < g.n; ++t) {
    const size_t p = idx[t];
    for (size_t h = 0; h < NH; ++h) {
      const auto eb = hn::LoadU(d16, es[h / N16] + p * W + (h % N16) * L16);
      for (size_t r = 0; r < kRowsMax; ++r)
        Ep[r][h] = hn::Max(Ep[r][h], hn::Add(hn::BitCast(d16, hn::Set(d32, earow[r][p])), eb));
    }
  }
  for (size_t r = 0; r < kRowsMax; ++r)
    for (size_t h = 0; h < NH; ++h) hn::Store(Ep[r][h], d16, ep + r * S * W + h * L16);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// FusedProductExponents for narrow codes (FusedOperands::ea8) in int8 lanes: a vector holds a pair of
// rows (even lanes the first, odd lanes the second) for the strip's W columns, half the work of the
// int16 pass. The sums saturate, so that a zero code's stays below -64 and every real one's above; ep
// gets the same int16 values as FusedProductExponents (2 * kZeroExp where no product is non-zero),
// or kDirect (FusedCutScalesDirect) each at least FusedOperands::direct_floor (lanes with no
// non-zero product get the floor itself), plus float's exponent bias. Under kDirect the codes may be
// shifted (FusedOperands::code8_shift): the floor and the bias take the shift back.
template <size_t kRowsMax, size_t S, bool kDirect = false>
HWY_INLINE void FusedProductExponents8(const FastOperands& op, size_t i, size_t rows, size_t j0, size_t k0,
                                       const FusedGroup& g, const uint32_t* idx, int16_t* ep) {
  const hn::ScalableTag<int8_t> d8;
  const hn::Repartition<int16_t, decltype(d8)> d16;
  const hn::Repartition<int32_t, decltype(d8)> d32;
  const size_t W = 2 * hn::Lanes(hn::ScalableTag<float>());
  const size_t L16 = hn::Lanes(d16), N16 = W / L16, NH = S * N16;
  constexpr size_t kPairs = (kRowsMax + 1) / 2, kMaxN16 = 2;
  const size_t pairs = (rows + 1) / 2;  // (pairs past them repeat the first; their results are not used)
  const FusedOperands& fo = op.fused;
  const int32_t* ap[kPairs];
  for (size_t pr = 0; pr < kPairs; ++pr) ap[pr] = fo.ea8 + (i / 2 + (pr < pairs ? pr : 0)) * op.k + k0;
  const int16_t* es[S];
  for (size_t st = 0; st < S; ++st) es[st] = fo.eb + (j0 / W + st) * op.k * W + k0 * W;
  hn::Vec<decltype(d8)> Ep[kPairs][kMaxN16];
  for (size_t pr = 0; pr < kPairs; ++pr)
    for (size_t h = 0; h < NH; ++h) Ep[pr][h] = hn::Set(d8, int8_t{-128});
  for (uint32_t t = 0; t < g.n; ++t) {
    const size_t p = idx[t];
    for (size_t h = 0; h < NH; ++h) {
      auto eb = hn::BitCast(d8, hn::LoadU(d16, es[h / N16] + p * W + (h % N16) * L16));
      // One load for the pairs: g++ otherwise folds it into each pair's add, a load per pair, and
      // the loads, not the adds, then bound this loop.
      asm("" : "+v"(eb.raw));
      for (size_t pr = 0; pr < kPairs; ++pr)
        Ep[pr][h] = hn::Max(Ep[pr][h], hn::SaturatedAdd(hn::BitCast(d8, hn::Set(d32, ap[pr][p])), eb));
    }
  }
  const auto none = hn::Set(d16, static_cast<int16_t>(2 * kZeroExp));
  const auto below = hn::Set(d16, int16_t{-64});
  const auto floor = hn::Set(d16, static_cast<int16_t>(fo.direct_floor - fo.code8_shift));
  const auto bias = hn::Set(d16, static_cast<int16_t>(LaneBits<float>::kBias + fo.code8_shift));
  auto code = [&](hn::Vec<decltype(d16)> e) {
    return kDirect ? hn::Add(hn::Max(e, floor), bias) : hn::IfThenElse(hn::Lt(e, below), none, e);
  };
  for (size_t pr = 0; pr < kPairs; ++pr)
    for (size_t h = 0; h < NH; ++h) {
      const auto v = hn::BitCast(d16, Ep[pr][h]);
      const auto first = hn::ShiftRight<8>(hn::ShiftLeft<8>(v)), second = hn::ShiftRight<8>(v);  // (arithmetic)
      hn::Store(code(first), d16, ep + 2 * pr * S * W + h * L16);
      if (2 * pr + 1 < kRowsMax) hn::Store(code(second), d16, ep + (2 * pr + 1) * S * W + h * L16);
    }
}
#endif

// How FusedRoundResults turns a group's val into its results (FusedTileBlock picks one per call).
enum class FusedResultForm {
  general,   // rounded on val's bits to the output's fraction bits; ranges looked at per vector
  plain,      // val is the result: float lanes of the integer route into an fp32 output
  truncated,  // as plain into fewer fraction bits toward zero (the FP8 presets' 13): val's extra bits cleared
  binary16,   // float lanes of the integer route into IEEE binary16 with subnormals: one conversion
};

// The forms whose val, below the output's overflow threshold by the route's bound on q
// (IntFloatQMax<true>), needs no overflow test.
constexpr bool FusedValBounded(FusedResultForm form) {
  return form == FusedResultForm::plain || form == FusedResultForm::truncated;
}

// The bits of val a truncated result keeps: sign, exponent and out_man_bits fraction bits.
inline int32_t FusedTruncatedKeep(const FusedModel& m) {
  return ~((int32_t{1} << (LaneBits<float>::kMant - m.out_man_bits)) - 1);
}

constexpr size_t kFusedMaxNV = 4;  // a pass's S strips of W columns are at most 4 vectors (S = 2: float lanes)

// How much of the model's floors on E FusedCutExponents applies (FusedGroupRows picks one per call).
enum class FusedFloors {
  all,     // c's zero test, out.emin and min_align, as the model says
  lean,    // FusedOperands::lean_floors: out.emin and min_align left out
  narrow,  // lean_floors and narrow_terms: c's zero test left out too
};

// Step 1 of FusedGroupRows: q = max(E, min_align) - kept_bits per lane, E the largest of c's exponent
// (clamped at the output format's emin; none when c = 0) and the products' (ep). zero_q: lanes with
// no non-zero term (every cut term 0, whatever q: the group gives +0) get q = 0 instead, inside the
// integer route's range, which would otherwise send them to the core.
// kFloors lean (the integer route, zero_q, where FusedOperands::lean_floors): a lane either floor on
// E (out.emin, min_align) would raise has q below the route's range with it or without it, and goes
// to the core, so both maxima are left out.
// kFloors narrow (lean, and FusedOperands::narrow_terms): every non-zero c and product exponent is at
// least -126, so c's exponent field, which reads -127 for c = 0, stands for "none" by itself, and a
// lane has no non-zero term exactly where E <= -127: the test of c against zero goes.
template <size_t R, size_t S, FusedFloors kFloors = FusedFloors::all, class DT,
          class VI = hn::Vec<hn::RebindToSigned<DT>>>
HWY_INLINE void FusedCutExponents(DT dt, const FusedModel& m, double min_align, bool zero_q, const hn::TFromD<DT>* cw,
                                  const int16_t* ep, VI (&q)[R][kFusedMaxNV]) {
  using T = hn::TFromD<DT>;
  using TI = hn::TFromD<hn::RebindToSigned<DT>>;
  constexpr int kMant = LaneBits<T>::kMant, kBias = LaneBits<T>::kBias;
  constexpr bool kLean = kFloors != FusedFloors::all, kNarrow = kFloors == FusedFloors::narrow;
  const hn::RebindToSigned<DT> di;
  const hn::Rebind<int16_t, DT> d16h;
  const hn::Rebind<int32_t, DT> d32h;
  const size_t Ld = hn::Lanes(dt), W = 2 * hn::Lanes(hn::ScalableTag<float>()), NV = W / Ld;
  const VI sign_mask = hn::Set(di, static_cast<TI>(TI{1} << (8 * sizeof(T) - 1)));
  // Lanes with no non-zero term: E below kFloorExp (c's kZeroExp), or narrow, E at c = 0's -127.
  const VI none_below = hn::Set(di, static_cast<TI>(kNarrow ? 1 - kBias : static_cast<int>(kFloorExp)));
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < S * NV; ++v) {
      const auto c = hn::Load(dt, cw + r * S * W + v * Ld);
      const VI field = hn::ShiftRight<kMant>(hn::AndNot(sign_mask, hn::BitCast(di, c)));
      VI E = hn::Sub(field, hn::Set(di, kBias));
      if constexpr (!kLean) E = hn::Max(E, hn::Set(di, static_cast<TI>(m.out.emin)));
      if constexpr (!kNarrow)
        E = hn::IfThenElse(hn::RebindMask(di, hn::Eq(c, hn::Zero(dt))), hn::Set(di, static_cast<TI>(kZeroExp)), E);
      const auto e16 = hn::LoadU(d16h, ep + r * S * W + v * Ld);
      if constexpr (sizeof(T) == 8)
        E = hn::Max(E, hn::PromoteTo(di, hn::PromoteTo(d32h, e16)));
      else
        E = hn::Max(E, hn::PromoteTo(di, e16));
      const VI floored = kLean ? E : hn::Max(E, hn::Set(di, static_cast<TI>(min_align)));
      q[r][v] = hn::Sub(floored, hn::Set(di, static_cast<TI>(m.kept_bits)));
      if (zero_q) q[r][v] = hn::IfThenZeroElse(hn::Lt(E, none_below), q[r][v]);
    }
}

// Step 1 of the integer route (zero_q): FusedCutExponents with the floors the operands allow leaving
// out (FusedOperands::narrow_terms, lean_floors).
template <size_t R, size_t S, class DT, class VI = hn::Vec<hn::RebindToSigned<DT>>>
HWY_INLINE void FusedCutExponentsOf(DT dt, const FusedOperands& fo, const hn::TFromD<DT>* cw, const int16_t* ep,
                                    VI (&q)[R][kFusedMaxNV]) {
  if (fo.narrow_terms)
    FusedCutExponents<R, S, FusedFloors::narrow>(dt, *fo.model, fo.min_align, true, cw, ep, q);
  else if (fo.lean_floors)
    FusedCutExponents<R, S, FusedFloors::lean>(dt, *fo.model, fo.min_align, true, cw, ep, q);
  else
    FusedCutExponents<R, S>(dt, *fo.model, fo.min_align, true, cw, ep, q);
}

// Step 2 outside the integer route: the cut terms of the group's products and of c, each truncated,
// added exactly in double lanes; val = their sum times 2^q (exact). (`outside` stays empty: double
// lanes scale by any q a model reaches.)
template <size_t R, size_t S, class DT, class V = hn::Vec<DT>, class VI = hn::Vec<hn::RebindToSigned<DT>>,
          class MI = hn::Mask<hn::RebindToSigned<DT>>>
HWY_INLINE void FusedCutSumsTruncated(DT dt, const FastOperands& op, size_t i, size_t j0, size_t k0,
                                      const FusedGroup& g, const uint32_t* idx, const hn::TFromD<DT>* cw,
                                      const VI (&q)[R][kFusedMaxNV], V (&val)[R][kFusedMaxNV],
                                      MI (&outside)[R][kFusedMaxNV]) {
  using T = hn::TFromD<DT>;
  static_assert(sizeof(T) == 8 && S == 1, "double lanes, one strip");
  constexpr int kMant = LaneBits<T>::kMant, kBias = LaneBits<T>::kBias;
  const hn::RebindToSigned<DT> di;
  const size_t Ld = hn::Lanes(dt), W = 2 * hn::Lanes(hn::ScalableTag<float>()), NV = W / Ld;
  const T* arow[R];
  for (size_t r = 0; r < R; ++r) arow[r] = op.fused.a + (i + r) * op.k + k0;
  const T* bs = op.fused.b + (j0 / W) * op.k * 2 * W + k0 * 2 * W;
  const VI bias = hn::Set(di, kBias);
  V scale[R][kFusedMaxNV], sum[R][kFusedMaxNV];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v) {
      outside[r][v] = hn::FirstN(di, 0);  // (double lanes scale by any q a model reaches)
      scale[r][v] = hn::BitCast(dt, hn::ShiftLeft<kMant>(hn::Sub(bias, q[r][v])));  // 2^-q
      // Starting from +0 turns a truncated -0 into +0 (an all-zero group gives +0, as group_at).
      sum[r][v] = hn::Add(hn::Zero(dt), hn::Trunc(hn::Mul(hn::Load(dt, cw + r * W + v * Ld), scale[r][v])));
    }
  for (uint32_t t = 0; t < g.n; ++t) {
    const size_t p = idx[t];
    const T* row = bs + p * 2 * W;
    for (size_t v = 0; v < NV; ++v) {
      const V y = hn::Add(hn::LoadU(dt, row + v * Ld), hn::LoadU(dt, row + W + v * Ld));  // one of them is 0
      for (size_t r = 0; r < R; ++r)
        sum[r][v] = hn::Add(sum[r][v], hn::Trunc(hn::Mul(hn::Mul(hn::Set(dt, arow[r][p]), y), scale[r][v])));
    }
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v)
      val[r][v] = hn::Mul(sum[r][v], hn::BitCast(dt, hn::ShiftLeft<kMant>(hn::Add(bias, q[r][v]))));  // times 2^q
}

#if HWY_TARGET != HWY_SCALAR
// trunc(x) in int32 lanes, for |x| < 2^31 (the callers' bound): on x86 the conversion toward zero
// alone, without Highway's fix-up of lanes out of int32's range.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> TruncToInt32(DF df, hn::Vec<DF> x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  // (The masked form with every lane set: the plain one's undefined pass-through trips g++ 12's
  // -Wmaybe-uninitialized.)
  if constexpr (hn::MaxLanes(DF()) == 16)
    return hn::Vec<hn::RebindToSigned<DF>>{_mm512_mask_cvttps_epi32(_mm512_castps_si512(x.raw), 0xffff, x.raw)};
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  if constexpr (hn::MaxLanes(DF()) == 8) return hn::Vec<hn::RebindToSigned<DF>>{_mm256_cvttps_epi32(x.raw)};
#endif
  (void)df;
  return hn::ConvertTo(hn::RebindToSigned<DF>(), x);
}

// The lanes whose q lies outside the integer route's range, [kIntCutQMin, q_max] (q_max at most
// 125 - kept_bits), as one unsigned compare of q - kIntCutQMin. They compute garbage (any bits, no
// traps), which the core then replaces.
template <class DI>
HWY_INLINE hn::Mask<DI> IntCutOutside(DI di, hn::Vec<DI> q, int q_max) {
  const hn::RebindToUnsigned<DI> du;
  const auto span = hn::Set(du, static_cast<hn::TFromD<decltype(du)>>(q_max - kIntCutQMin));
  return hn::RebindMask(di, hn::Gt(hn::BitCast(du, hn::Sub(q, hn::Set(di, kIntCutQMin))), span));
}

// The integer route's products (FusedOperands::int_accs) for R rows of a group: per product and
// lane, trunc(x*y * 2^-q) by two multiplies and one conversion toward zero, added in int32, the
// kAccs accumulators taking the positions in turn. Float vector v holds the columns [v*Lf, (v+1)*Lf)
// of the S strips from bs (B's rows of W floats from k0); scale = 2^-q.
// Exact where q lies in [kIntCutQMin, 125 - kept_bits] (the callers send other lanes to the core):
// 2^-q is then a normal float; a product at or above 2^q is a normal float below 2^127, exact (its
// significand fits float's), and so is its scaled value, an integer part at most 2^(kept_bits+2) - 1
// plus a fraction; a smaller product, rounded or not, stays at or below 2^-126 or below 2^q, so its
// scaled value stays below 1 and converts to 0, as its cut is. Two multiplies, one conversion and
// one integer add per product, in lanes twice a double's.
template <size_t R, size_t S, size_t kAccs, class DF, class VF = hn::Vec<DF>,
          class VI32 = hn::Vec<hn::RebindToSigned<DF>>>
HWY_INLINE void FusedIntCutTerms(DF df, const float* const (&arow)[R], const float* const (&bs)[S], const uint32_t* idx,
                                 uint32_t n, const VF (&scale)[R][kFusedMaxNV], VI32 (&acc)[kAccs][R][kFusedMaxNV]) {
  const size_t Lf = hn::Lanes(df), W = 2 * hn::Lanes(hn::ScalableTag<float>()), NV = W / Lf, NVT = S * NV;
  for (size_t a = 0; a < kAccs; ++a)
    for (size_t r = 0; r < R; ++r)
      for (size_t v = 0; v < NVT; ++v) acc[a][r][v] = hn::Zero(hn::RebindToSigned<DF>());
  auto add = [&](size_t p, VI32(&to)[R][kFusedMaxNV]) {
    VF y[kFusedMaxNV];
    for (size_t st = 0; st < S; ++st)
      for (size_t v = 0; v < NV; ++v) y[st * NV + v] = hn::LoadU(df, bs[st] + p * W + v * Lf);
    for (size_t r = 0; r < R; ++r) {
      const VF x = hn::Set(df, arow[r][p]);
      for (size_t v = 0; v < NVT; ++v) to[r][v] = hn::Add(to[r][v], TruncToInt32(df, hn::Mul(hn::Mul(x, y[v]), scale[r][v])));
    }
  };
  uint32_t t = 0;
  for (; t + kAccs <= n; t += kAccs)
    for (size_t a = 0; a < kAccs; ++a) add(idx[t + a], acc[a]);
  // (The rest one each, so that no accumulator takes more than ceil(n / kAccs) products: the bound
  // int_cut_plan counts on.)
  for (size_t a = 0; a + 1 < kAccs; ++a)
    if (t + a < n) add(idx[t + a], acc[a]);
}

// FusedIntCutTerms for group g of rows [i, i+R) and the S strips from j0, from the kernel's float
// operands (FusedOperands::af, bf) at K-block k0.
template <size_t R, size_t S, size_t kAccs, class DF, class VF = hn::Vec<DF>,
          class VI32 = hn::Vec<hn::RebindToSigned<DF>>>
HWY_INLINE void FusedIntCutTermsOf(DF df, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                                   const uint32_t* idx, const VF (&scale)[R][kFusedMaxNV],
                                   VI32 (&acc)[kAccs][R][kFusedMaxNV]) {
  const size_t W = 2 * hn::Lanes(hn::ScalableTag<float>());
  const float* arow[R];
  for (size_t r = 0; r < R; ++r) arow[r] = op.fused.af + (i + r) * op.k + k0;
  const float* bs[S];
  for (size_t st = 0; st < S; ++st) bs[st] = op.fused.bf + (j0 / W + st) * op.k * W + k0 * W;
  FusedIntCutTerms<R, S, kAccs>(df, arow, bs, idx, g.n, scale, acc);
}

// Step 2 by the integer route in double lanes (targets without per-instruction rounding): the
// products by FusedIntCutTerms in float lanes of twice the width; c's cut, the accumulators' sum and
// val = that sum times 2^q (below 2^34 before scaling: all exact) in double lanes.
template <size_t R, size_t kAccs, class DT, class V = hn::Vec<DT>, class VI = hn::Vec<hn::RebindToSigned<DT>>,
          class MI = hn::Mask<hn::RebindToSigned<DT>>>
HWY_INLINE void FusedCutSumsInt(DT dt, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                                const uint32_t* idx, const hn::TFromD<DT>* cw, const VI (&q)[R][kFusedMaxNV],
                                V (&val)[R][kFusedMaxNV], MI (&outside)[R][kFusedMaxNV]) {
  static_assert(sizeof(hn::TFromD<DT>) == 8, "c, q and the sum in double lanes");
  const hn::RebindToSigned<DT> di;
  const hn::Repartition<float, DT> df;  // float vector u holds the columns of double vectors 2u, 2u+1
  const hn::Rebind<float, DT> dfh;      // half a float vector
  const hn::Half<hn::RebindToSigned<decltype(df)>> di32h;
  constexpr int kBias = LaneBits<double>::kBias, kMant = LaneBits<double>::kMant;
  const size_t Ld = hn::Lanes(dt), Lf = hn::Lanes(df), W = 2 * hn::Lanes(hn::ScalableTag<float>());
  const size_t NV = W / Ld, NF = W / Lf;
  const FusedOperands& fo = op.fused;
  const VI bias = hn::Set(di, kBias);
  hn::Vec<decltype(df)> scale[R][kFusedMaxNV];
  for (size_t r = 0; r < R; ++r) {
    hn::Vec<decltype(dfh)> half[kFusedMaxNV];
    for (size_t v = 0; v < NV; ++v) {
      outside[r][v] = IntCutOutside(di, q[r][v], 125 - fo.model->kept_bits);
      const V inv = hn::BitCast(dt, hn::ShiftLeft<kMant>(hn::Sub(bias, q[r][v])));  // 2^-q
      // c's cut, from +0 as FusedCutSumsTruncated (|c| < 2^(E+1): below 2^(kept_bits+1) after scaling).
      val[r][v] = hn::Add(hn::Zero(dt), hn::Trunc(hn::Mul(hn::Load(dt, cw + r * W + v * Ld), inv)));
      half[v] = hn::DemoteTo(dfh, inv);  // (exact where not outside: a normal float)
    }
    for (size_t u = 0; u < NF; ++u) scale[r][u] = hn::Combine(df, half[2 * u + 1], half[2 * u]);
  }
  hn::Vec<hn::RebindToSigned<decltype(df)>> acc[kAccs][R][kFusedMaxNV];
  FusedIntCutTermsOf<R, 1, kAccs>(df, op, i, j0, k0, g, idx, scale, acc);
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NV; ++v) {
      for (size_t a = 0; a < kAccs; ++a) {
        const auto whole = acc[a][r][v / 2];
        val[r][v] = hn::Add(val[r][v], hn::PromoteTo(dt, v % 2 == 0 ? hn::LowerHalf(di32h, whole) : hn::UpperHalf(di32h, whole)));
      }
      val[r][v] = hn::Mul(val[r][v], hn::BitCast(dt, hn::ShiftLeft<kMant>(hn::Add(bias, q[r][v]))));  // times 2^q
    }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// How IntSumToFloat rounds: by the model's own final rounding where the output keeps float's 23
// fraction bits, else to odd (toward zero, then the last bit set where
// that was inexact), from which the one rounding to fewer bits is the rounding of s itself
// (23 >= out_man_bits + 2).
enum class IntSumRounding { nearest_even, toward_zero, to_odd };
inline IntSumRounding int_sum_rounding(const FusedModel& m) {
  if (m.out_man_bits != 23) return IntSumRounding::to_odd;
  return m.final_rounding == Rounding::rne ? IntSumRounding::nearest_even : IntSumRounding::toward_zero;
}

// The int32 sums s as floats for FusedRoundResults, rounded as kRounding says. (The masked forms with
// every lane set: the plain ones' undefined pass-through trips g++ 12's -Wmaybe-uninitialized.)
#if HWY_TARGET <= HWY_AVX3
template <IntSumRounding kRounding>
HWY_INLINE hn::Vec<hn::ScalableTag<float>> IntSumToFloat(hn::Vec<hn::ScalableTag<int32_t>> s) {
  constexpr int kRz = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC, kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 none = _mm512_setzero_ps();
  if constexpr (kRounding == IntSumRounding::nearest_even)
    return hn::Vec<hn::ScalableTag<float>>{_mm512_mask_cvt_roundepi32_ps(none, 0xffff, s.raw, kRn)};
  const __m512 rz = _mm512_mask_cvt_roundepi32_ps(none, 0xffff, s.raw, kRz);
  if constexpr (kRounding == IntSumRounding::toward_zero) return hn::Vec<hn::ScalableTag<float>>{rz};
  const __m512i back = _mm512_mask_cvttps_epi32(s.raw, 0xffff, rz);  // (exact: |rz| <= |s| < 2^31)
  const __mmask16 inexact = _mm512_cmpneq_epi32_mask(back, s.raw);
  return hn::Vec<hn::ScalableTag<float>>{
      _mm512_castsi512_ps(_mm512_mask_or_epi32(_mm512_castps_si512(rz), inexact, _mm512_castps_si512(rz), _mm512_set1_epi32(1)))};
}
#else
// AVX2, whose conversions round as MXCSR says (to nearest even): f = s rounded to nearest, and
// where that rounding went away from zero (|f| > |s|), the float next to f toward zero, which is
// then s rounded toward zero: the encoding less 1 (f is not 0 there). |f| against |s| exactly in
// int32: f converted back (exact: f is an integer, |f| <= 2^31), both magnitudes compared unsigned,
// where f = 2^31 (s within 64 of it), whose conversion reads 0x80000000, still reads 2^31.
template <IntSumRounding kRounding>
HWY_INLINE hn::Vec<hn::ScalableTag<float>> IntSumToFloat(hn::Vec<hn::ScalableTag<int32_t>> s) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const auto nearest = hn::ConvertTo(df, s);
  if constexpr (kRounding == IntSumRounding::nearest_even) return nearest;
  const auto back = TruncToInt32(df, nearest);
  const auto away = hn::RebindMask(di, hn::Gt(hn::BitCast(du, hn::Abs(back)), hn::BitCast(du, hn::Abs(s))));
  const auto bits = hn::BitCast(di, nearest);
  const auto rz = hn::Add(bits, hn::VecFromMask(di, away));  // (the mask's lanes read -1)
  if constexpr (kRounding == IntSumRounding::toward_zero) return hn::BitCast(df, rz);
  const auto inexact = hn::Ne(back, s);
  return hn::BitCast(df, hn::Or(rz, hn::IfThenElseZero(inexact, hn::Set(di, 1))));
}
#endif

// The exact sum of the int32 vectors x[0..kN) as floats, rounded as kRounding says (IntSumToFloat's
// rounding, of a sum past int32: below 2^34 here): summed in double lanes, 8 at a time, exactly
// (below 2^53), and rounded once to float in the conversion's own rounding direction. For the vectors
// of the integer route where a checked int32 add of four accumulators wrapped (FusedCutSumsIntFloat;
// AVX-512 only: kFusedFourInFloat).
#if HWY_TARGET <= HWY_AVX3
template <IntSumRounding kRounding, size_t kN>
HWY_INLINE hn::Vec<hn::ScalableTag<float>> WideSumToFloat(const hn::Vec<hn::ScalableTag<int32_t>> (&x)[kN]) {
  constexpr int kRz = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC, kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const hn::ScalableTag<float> df;
  const hn::Half<decltype(df)> dfh;
  const hn::Half<hn::ScalableTag<int32_t>> dih;
  const hn::ScalableTag<double> dd;
  hn::Vec<decltype(dfh)> half[2];
  for (int h = 0; h < 2; ++h) {
    auto sum = hn::Zero(dd);
    for (size_t a = 0; a < kN; ++a) sum = hn::Add(sum, hn::PromoteTo(dd, h == 0 ? hn::LowerHalf(dih, x[a]) : hn::UpperHalf(dih, x[a])));
    // (The masked forms with every lane set: the plain ones' undefined pass-through trips g++ 12's
    // -Wmaybe-uninitialized.)
    const __m256 none = _mm256_setzero_ps();
    if constexpr (kRounding == IntSumRounding::nearest_even) {
      half[h].raw = _mm512_mask_cvt_roundpd_ps(none, 0xff, sum.raw, kRn);
    } else {
      const __m256 rz = _mm512_mask_cvt_roundpd_ps(none, 0xff, sum.raw, kRz);
      half[h].raw = rz;
      if constexpr (kRounding == IntSumRounding::to_odd) {
        const auto inexact = hn::Ne(hn::PromoteTo(dd, hn::Vec<decltype(dfh)>{rz}), sum);
        half[h].raw = _mm256_castsi256_ps(_mm256_mask_or_epi32(_mm256_castps_si256(rz), inexact.raw,
                                                                _mm256_castps_si256(rz), _mm256_set1_epi32(1)));
      }
    }
  }
  return hn::Combine(df, half[1], half[0]);
}
#endif

// The largest q of the integer route in float lanes: 125 - kept_bits (IntCutOutside), and for
// kPlain (FusedRoundResults') out.emax - 31 too, so that |val| <= 2^31 * 2^q stays below the
// output's overflow threshold 2^(out.emax+1) and FusedRoundResults need not look (lanes of a larger
// q, E beyond out.emax - 31 + kept_bits, go to the core).
template <bool kPlain>
inline int IntFloatQMax(const FusedModel& m) {
  return kPlain ? std::min(125 - m.kept_bits, m.out.emax - 31) : 125 - m.kept_bits;
}

// Step 1 in float lanes from q (FusedCutExponents): the scales 2^-q, and the lanes outside the
// route's range.
// kLean (FusedGroupRowsLean): no mask per vector; *high gets the largest q - kIntCutQMin (unsigned)
// and *limit the value past which a lane is outside.
template <size_t R, size_t S, bool kPlain, bool kLean = false, class DF, class V = hn::Vec<DF>,
          class VI = hn::Vec<hn::RebindToSigned<DF>>, class MI = hn::Mask<hn::RebindToSigned<DF>>,
          class VU = hn::Vec<hn::RebindToUnsigned<DF>>>
HWY_INLINE void FusedScalesOfQ(DF df, const FusedModel& m, const VI (&q)[R][kFusedMaxNV], V (&scale)[R][kFusedMaxNV],
                               MI (&outside)[R][kFusedMaxNV], VU* high = nullptr, VU* limit = nullptr) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const VI bias = hn::Set(di, LaneBits<float>::kBias);
  const int q_max = IntFloatQMax<kPlain>(m);
  if constexpr (kLean) *limit = hn::Set(du, static_cast<uint32_t>(q_max - kIntCutQMin));
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < S * 2; ++v) {
      if constexpr (kLean)
        *high = hn::Max(*high, hn::BitCast(du, hn::Sub(q[r][v], hn::Set(di, kIntCutQMin))));
      else
        outside[r][v] = IntCutOutside(di, q[r][v], q_max);
      scale[r][v] = hn::BitCast(df, hn::ShiftLeft<LaneBits<float>::kMant>(hn::Sub(bias, q[r][v])));  // 2^-q
    }
}

// Step 1 in float lanes straight from the exponent fields (FusedOperands::direct_scales), in place
// of FusedCutExponents and FusedScalesOfQ: with ep from FusedProductExponents8<kDirect> (the
// products' part of E, floored at direct_floor, plus float's bias), E + bias is the larger of c's
// exponent field (0 for c = 0, below every floored ep; kClampC: a non-zero c's raised to out.emin +
// bias) and ep. 2^-q = 2^(kept_bits - E) from its bits; `outside`: the lanes above the route's
// largest q (none lies below its smallest). A third of the work per vector of the other forms'
// (the zero tests, the floors and the bias go into the int8 pass's one floor per 32 columns), in a
// kernel whose groups of 8 or 16 products pay this once per group.
// kLean: as FusedScalesOfQ's, with E + bias (never negative: c's exponent field is not) standing for q.
template <size_t R, size_t S, bool kPlain, bool kClampC, bool kLean = false, class DF, class V = hn::Vec<DF>,
          class MI = hn::Mask<hn::RebindToSigned<DF>>, class VU = hn::Vec<hn::RebindToUnsigned<DF>>>
HWY_INLINE void FusedCutScalesDirect(DF df, const FusedModel& m, const float* cw, const int16_t* ep,
                                     V (&scale)[R][kFusedMaxNV], MI (&outside)[R][kFusedMaxNV], VU* high = nullptr,
                                     VU* limit = nullptr) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<int16_t, DF> d16h;
  constexpr int kBias = LaneBits<float>::kBias, kMant = LaneBits<float>::kMant;
  const size_t L = hn::Lanes(df), W = 2 * L;
  const auto sign_mask = hn::Set(di, static_cast<int32_t>(0x80000000u));
  const auto out_emin = hn::Set(di, m.out.emin + kBias);
  const auto e_max = hn::Set(di, IntFloatQMax<kPlain>(m) + m.kept_bits + kBias);
  const auto scale_field = hn::Set(di, 2 * kBias + m.kept_bits);  // 2^-q's field: kBias + kept_bits - E
  if constexpr (kLean) *limit = hn::BitCast(du, e_max);
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < S * 2; ++v) {
      const auto c = hn::BitCast(di, hn::Load(df, cw + r * S * W + v * L));
      auto e = hn::ShiftRight<kMant>(hn::AndNot(sign_mask, c));
      if constexpr (kClampC) e = hn::IfThenElseZero(hn::Ne(e, hn::Zero(di)), hn::Max(e, out_emin));
      e = hn::Max(e, hn::PromoteTo(di, hn::LoadU(d16h, ep + r * S * W + v * L)));
      if constexpr (kLean)
        *high = hn::Max(*high, hn::BitCast(du, e));
      else
        outside[r][v] = hn::Gt(e, e_max);
      scale[r][v] = hn::BitCast(df, hn::ShiftLeft<kMant>(hn::Sub(scale_field, e)));
    }
}

// Step 1 of the integer route in float lanes, as the operands allow: the scales 2^-q straight from the
// exponent fields (FusedOperands::direct_scales) or from q. `outside` (kLean: *high against *limit)
// as FusedScalesOfQ's.
template <size_t R, size_t S, bool kPlain, bool kLean = false, class DF, class V = hn::Vec<DF>,
          class MI = hn::Mask<hn::RebindToSigned<DF>>, class VU = hn::Vec<hn::RebindToUnsigned<DF>>>
HWY_INLINE void FusedCutScales(DF df, const FusedOperands& fo, const float* cw, const int16_t* ep,
                               V (&scale)[R][kFusedMaxNV], MI (&outside)[R][kFusedMaxNV], VU* high = nullptr,
                               VU* limit = nullptr) {
  if (fo.direct_scales && fo.direct_clamp_c) {
    FusedCutScalesDirect<R, S, kPlain, true, kLean>(df, *fo.model, cw, ep, scale, outside, high, limit);
  } else if (fo.direct_scales) {
    FusedCutScalesDirect<R, S, kPlain, false, kLean>(df, *fo.model, cw, ep, scale, outside, high, limit);
  } else {
    hn::Vec<hn::RebindToSigned<DF>> q[R][kFusedMaxNV];
    FusedCutExponentsOf<R, S>(df, fo, cw, ep, q);
    FusedScalesOfQ<R, S, kPlain, kLean>(df, *fo.model, q, scale, outside, high, limit);
  }
}

// Step 2's sum for row r's vector v: the kAccs accumulators' cut terms and c's cut (c times 2^-q,
// truncated: below 2^(kept_bits+1)) added in int32, in that order. check: each add's wrap
// indicator, the sign bit of (x ^ s) & (y ^ s) (both addends of one sign, the sum of the other),
// ORed into *wrap.
template <size_t kAccs, size_t R, class DF, class VI = hn::Vec<hn::RebindToSigned<DF>>>
HWY_INLINE VI FusedCutSum(DF df, const VI (&acc)[kAccs][R][kFusedMaxNV], size_t r, size_t v, hn::Vec<DF> c,
                          hn::Vec<DF> scale, bool check, VI* wrap) {
  VI sum = acc[0][r][v];
  auto add = [&](VI y) {
    const VI s = hn::Add(sum, y);
    if (check) *wrap = hn::Or(*wrap, hn::And(hn::Xor(sum, s), hn::Xor(y, s)));
    sum = s;
  };
  for (size_t a = 1; a < kAccs; ++a) add(acc[a][r][v]);
  add(TruncToInt32(df, hn::Mul(c, scale)));
  return sum;
}

// 2^q from the scale 2^-q, both normal floats: the exponent field mirrored, (2 kBias << kMant)
// minus the bits of 2^-q. (From the scale, so that the product loop keeps no q live: it had spilled
// registers there.)
template <class DF>
HWY_INLINE hn::Vec<DF> FusedPow2Q(DF df, hn::Vec<DF> scale) {
  const hn::RebindToSigned<DF> di;
  constexpr int kBias = LaneBits<float>::kBias, kMant = LaneBits<float>::kMant;
  return hn::BitCast(df, hn::Sub(hn::Set(di, static_cast<int32_t>((2 * kBias) << kMant)), hn::BitCast(di, scale)));
}

// Step 2 by the integer route in float lanes (AVX-512, AVX2), from step 1's scales 2^-q and `outside`:
// the products by FusedIntCutTerms into kAccs int32 accumulators; c's cut in int32 too (below
// 2^(kept_bits+1)); each add of the accumulators and c checked for overflow where the model's
// bounds allow one (kAccs > 1 always: B200's FP8 groups of 32 products of up to 2^27 each), such
// lanes going to the core (a sum past 2^31 needs most of a group's products near its largest, all
// of one sign), but for four accumulators (NVFP4 folded's groups of 64, whose blocks hold many
// elements at their block's largest: common in training, where the core had taken 28% of a run)
// the vector summed again in double lanes (WideSumToFloat); val = that sum s, rounded by
// IntSumToFloat, times 2^q (exact: 2^-125 <= |val| <
// 2^131, larger values the overflow check of FusedRoundResults sends to the core, and for kPlain
// none reaching the output's overflow threshold: IntFloatQMax).
template <size_t R, size_t S, size_t kAccs, class DF, class V = hn::Vec<DF>,
          class VI = hn::Vec<hn::RebindToSigned<DF>>, class MI = hn::Mask<hn::RebindToSigned<DF>>>
HWY_INLINE void FusedCutSumsIntFloat(DF df, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                                     const uint32_t* idx, const float* cw, const V (&scale)[R][kFusedMaxNV],
                                     V (&val)[R][kFusedMaxNV], MI (&outside)[R][kFusedMaxNV]) {
  const hn::RebindToSigned<DF> di;
  const size_t L = hn::Lanes(df), W = 2 * L, NVT = S * 2;
  const FusedOperands& fo = op.fused;
  VI acc[kAccs][R][kFusedMaxNV];
  FusedIntCutTermsOf<R, S, kAccs>(df, op, i, j0, k0, g, idx, scale, acc);
  // c's cut after the products: the product loop keeps no c's cuts live.
  // (The model's choices made once for the R x NVT vectors, not per vector: a compare and branch
  // on the model's fields each time had cost a few percent of the kernel.)
  const bool may_wrap = kAccs > 1 || fo.int_sum_may_wrap;
  auto finish = [&](auto rounding) {
    for (size_t r = 0; r < R; ++r)
      for (size_t v = 0; v < NVT; ++v) {
        VI wrap = hn::Zero(di);
        const VI sum = FusedCutSum(df, acc, r, v, hn::Load(df, cw + r * S * W + v * L), scale[r][v], may_wrap, &wrap);
        const auto wrapped = hn::Lt(wrap, hn::Zero(di));
        const V pow2_q = FusedPow2Q(df, scale[r][v]);
        if constexpr (kAccs < 4) {
          outside[r][v] = hn::Or(outside[r][v], wrapped);
          val[r][v] = hn::Mul(IntSumToFloat<decltype(rounding)::value>(sum), pow2_q);
        } else if (HWY_LIKELY(hn::AllFalse(di, wrapped))) {
          val[r][v] = hn::Mul(IntSumToFloat<decltype(rounding)::value>(sum), pow2_q);
        } else {
#if HWY_TARGET <= HWY_AVX3  // (kFusedFourInFloat: WideSumToFloat's target)
          // (Its val may reach 2^34 * 2^q, past the bound that lets kForm plain skip the overflow
          // test: lanes at the output's overflow threshold 2^(out.emax+1) go to the core.)
          const int overflow_exp = std::min(fo.model->out.emax + 1, LaneBits<float>::kBias + 1);
          const V overflow_at = hn::BitCast(df, hn::Set(di, LaneBits<float>::Pow2(overflow_exp)));
          VI terms[kAccs + 1];
          for (size_t a = 0; a < kAccs; ++a) terms[a] = acc[a][r][v];
          terms[kAccs] = TruncToInt32(df, hn::Mul(hn::Load(df, cw + r * S * W + v * L), scale[r][v]));
          val[r][v] = hn::Mul(WideSumToFloat<decltype(rounding)::value>(terms), pow2_q);
          outside[r][v] = hn::Or(outside[r][v], hn::RebindMask(di, hn::Not(hn::Lt(hn::Abs(val[r][v]), overflow_at))));
#endif
        }
      }
  };
  using K = IntSumRounding;
  switch (int_sum_rounding(*fo.model)) {
    case K::nearest_even: finish(std::integral_constant<K, K::nearest_even>()); break;
    case K::toward_zero: finish(std::integral_constant<K, K::toward_zero>()); break;
    case K::to_odd: finish(std::integral_constant<K, K::to_odd>()); break;
  }
}
#endif
#endif

// The vector cv (row i, columns from j) gets `result`, but its `rare` lanes the scalar core's
// result on their own operands (also where c had become infinite); cv holds c on entry.
template <class DT, class MI>
HWY_NOINLINE void FusedRareLanes(DT dt, const FastOperands& op, size_t i, size_t j, size_t k0, const FusedGroup& g,
                                 MI rare, hn::Vec<DT> result, hn::TFromD<DT>* cv) {
  using T = hn::TFromD<DT>;
  using TI = hn::TFromD<hn::RebindToSigned<DT>>;
  const hn::RebindToSigned<DT> di;
  const size_t Ld = hn::Lanes(dt);
  HWY_ALIGN T res[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(result, dt, res);
  HWY_ALIGN TI rare_lanes[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(hn::VecFromMask(di, rare), di, rare_lanes);
  for (size_t l = 0; l < Ld; ++l) {
    if (!rare_lanes[l] || j + l >= op.n) continue;
    res[l] = static_cast<T>(FusedGroupInCore(op.fused, op.k, op.n, i, j + l, k0, g, static_cast<double>(cv[l])));
  }
  hn::Store(hn::Load(dt, res), dt, cv);
}

// The R x S*NV vectors of results into cw (row r, vector v at cw[r*S*W + v*Ld]), the `rare` lanes
// by the scalar core (FusedRareLanes); none_rare: the caller found no rare lane in any of them, so
// that the stores need not look (one test for the tile's vectors, not one each).
template <size_t R, size_t S, class DT, class V = hn::Vec<DT>, class MI = hn::Mask<hn::RebindToSigned<DT>>>
HWY_INLINE void FusedStoreResults(DT dt, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                                  const V (&result)[R][kFusedMaxNV], const MI (&rare)[R][kFusedMaxNV], bool none_rare,
                                  hn::TFromD<DT>* cw) {
  const hn::RebindToSigned<DT> di;
  const size_t Ld = hn::Lanes(dt), W = 2 * hn::Lanes(hn::ScalableTag<float>()), NV = W / Ld;
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < S * NV; ++v) {
      hn::TFromD<DT>* cv = cw + r * S * W + v * Ld;
      if (HWY_LIKELY(none_rare) || hn::AllFalse(di, rare[r][v]))
        hn::Store(result[r][v], dt, cv);
      else
        FusedRareLanes(dt, op, i + r, j0 + v * Ld, k0, g, rare[r][v], result[r][v], cv);
    }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// The binary16 form's two steps (FusedRoundResults, FusedGroupRowsLean). The smallest magnitude
// that rounds to 2^(emax+1), as a float's bits: that power of two toward zero; to nearest the
// midpoint below it, 2^emax times 1 and out_man_bits + 1 ones after the point.
inline int32_t Binary16OverflowBits(const FusedModel& m) {
  constexpr int kMant = LaneBits<float>::kMant;
  const int32_t ones = ((int32_t{1} << (m.out_man_bits + 1)) - 1) << (kMant - m.out_man_bits - 1);
  return m.final_rounding == Rounding::rne ? LaneBits<float>::Pow2(m.out.emax) | ones
                                           : LaneBits<float>::Pow2(m.out.emax + 1);
}

// x rounded to binary16 (to nearest even, else toward zero) and back to float. (The masked forms with
// every lane set: the plain ones' undefined pass-through trips g++ 12's -Wmaybe-uninitialized.)
HWY_INLINE hn::Vec<hn::ScalableTag<float>> RoundTripBinary16(hn::Vec<hn::ScalableTag<float>> x, bool rne) {
  constexpr int kRn = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC, kRz = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
#if HWY_TARGET == HWY_AVX2  // (F16C, whose conversion takes its rounding direction as an immediate too)
  const __m128i h = rne ? _mm256_cvtps_ph(x.raw, kRn) : _mm256_cvtps_ph(x.raw, kRz);
  return hn::Vec<hn::ScalableTag<float>>{_mm256_cvtph_ps(h)};
#else
  const __m256i none16 = _mm256_setzero_si256();
  const __m256i h = rne ? _mm512_mask_cvtps_ph(none16, 0xffff, x.raw, kRn) : _mm512_mask_cvtps_ph(none16, 0xffff, x.raw, kRz);
  return hn::Vec<hn::ScalableTag<float>>{_mm512_mask_cvtph_ps(_mm512_setzero_ps(), 0xffff, h)};
#endif
}
#endif

// Step 3: val rounded once to the result grid into cw; results at the output format's overflow
// threshold, results below its smallest normal where it flushes them (or T cannot scale them), a
// non-finite c and `outside` lanes from the scalar core.
// kForm plain: the caller has found the rounding already done and nothing tiny to check (float lanes
// of the integer route, an output of float's 23 fraction bits and emin at or below kIntCutQMin: every
// fp32-output preset), and FusedCutSumsIntFloat<kPlain> has sent every lane that could reach the
// overflow threshold to `outside`, so that val is the result and only `outside` remains to look at:
// once for all the rows and strips, the same results as the general code.
// kForm truncated: as plain, for an output of fewer fraction bits rounded toward zero (the FP8
// presets' 13): val is rounded toward zero, or to odd, and truncating it further to the output's
// bits truncates the exact sum (a truncation's bits past a coarser grid are only dropped), which
// the general code's rounding does with the same mask; nothing tiny, as for plain.
// kForm binary16 (float lanes of the integer route, an IEEE binary16 output with subnormals:
// the fp16-output presets): val is the group's sum rounded to odd (IntSumToFloat) times 2^q, a normal
// float or zero; F16C's conversion to binary16 in the model's rounding direction is then the one
// rounding of the exact sum, subnormal results included (24 bits rounded to odd, then to at most 11:
// 24 >= 11 + 2), and the general code's bit operations become one conversion and one back. Lanes
// whose magnitude reaches the overflow threshold once rounded go to the core as in the general code.
template <size_t R, size_t S, FusedResultForm kForm, class DT, class V = hn::Vec<DT>,
          class MI = hn::Mask<hn::RebindToSigned<DT>>>
HWY_INLINE void FusedRoundResults(DT dt, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                                  const V (&val)[R][kFusedMaxNV], const MI (&outside)[R][kFusedMaxNV],
                                  hn::TFromD<DT>* cw) {
  using T = hn::TFromD<DT>;
  using TI = hn::TFromD<hn::RebindToSigned<DT>>;
  using VI = hn::Vec<hn::RebindToSigned<DT>>;
  constexpr int kMant = LaneBits<T>::kMant, kBias = LaneBits<T>::kBias;
  const hn::RebindToSigned<DT> di;
  const size_t Ld = hn::Lanes(dt), W = 2 * hn::Lanes(hn::ScalableTag<float>()), NV = W / Ld;
  if constexpr (kForm == FusedResultForm::binary16) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    static_assert(sizeof(T) == 4, "float lanes");
    const FusedModel& m = *op.fused.model;
    const bool rne = m.final_rounding == Rounding::rne;  // (else rtz: FusedTileBlock takes no other)
    const V overflow_at = hn::BitCast(dt, hn::Set(di, Binary16OverflowBits(m)));
    // (Every vector's results first, and one test of the rare lanes for them all, as kForm plain.)
    V result[R][kFusedMaxNV];
    MI rare[R][kFusedMaxNV];
    MI any = outside[0][0];
    for (size_t r = 0; r < R; ++r)
      for (size_t v = 0; v < S * NV; ++v) {
        result[r][v] = RoundTripBinary16(val[r][v], rne);
        rare[r][v] = hn::Or(outside[r][v], hn::RebindMask(di, hn::Not(hn::Lt(hn::Abs(val[r][v]), overflow_at))));
        any = hn::Or(any, rare[r][v]);
      }
    FusedStoreResults<R, S>(dt, op, i, j0, k0, g, result, rare, hn::AllFalse(di, any), cw);
#endif
    return;
  }
  if constexpr (FusedValBounded(kForm)) {
    static_assert(sizeof(T) == 4, "float lanes");
    const VI keep = hn::Set(di, kForm == FusedResultForm::truncated ? FusedTruncatedKeep(*op.fused.model) : -1);
    V result[R][kFusedMaxNV];
    MI any = outside[0][0];
    for (size_t r = 0; r < R; ++r)
      for (size_t v = 0; v < S * NV; ++v) {
        result[r][v] = kForm == FusedResultForm::truncated ? hn::BitCast(dt, hn::And(hn::BitCast(di, val[r][v]), keep))
                                                           : val[r][v];
        any = hn::Or(any, outside[r][v]);
      }
    FusedStoreResults<R, S>(dt, op, i, j0, k0, g, result, outside, hn::AllFalse(di, any), cw);
    return;
  }
  const FusedModel& m = *op.fused.model;
  const VI sign_mask = hn::Set(di, static_cast<TI>(TI{1} << (8 * sizeof(T) - 1)));
  const int shift = kMant - m.out_man_bits;
  const VI low = hn::Set(di, static_cast<TI>((TI{1} << shift) - 1));
  // The encodings of 2^out.emin (normal in T: the fast path takes out.emin >= -126) and of
  // 2^(out.emax+1), the overflow threshold (T's infinity where that is beyond T's range).
  auto pow2_enc = [](int e) { return LaneBits<T>::Pow2(std::min(e, kBias + 1)); };
  const VI min_normal_enc = hn::Set(di, pow2_enc(m.out.emin));
  const VI overflow_enc = hn::Set(di, pow2_enc(m.out.emax + 1));
  const VI one = hn::Set(di, 1);
  const hn::RebindToUnsigned<DT> du;
  const auto min_normal_m1 = hn::BitCast(du, hn::Sub(min_normal_enc, one));
  // (The integer route's float lanes, shift 0: |val| >= 2^kIntCutQMin where not zero, never tiny
  // for an output whose emin is at or below that.)
  const bool check_tiny = !(shift == 0 && m.out.emin <= kIntCutQMin);
  // Results below 2^emin, where the output keeps subnormals, round on the subnormal grid, whose
  // spacing is 2^unit_exp, as integers: val scaled by powers of two both ways, exactly (a non-zero
  // |val| is at least T's smallest normal: 2^kIntCutQMin in float lanes). val is exact, or in float
  // lanes rounded to odd (IntSumToFloat) at least 2 bits below that grid, which the one rounding
  // then corrects. Training under an fp16 output meets such results in most groups of its
  // gradients; the scalar core took 90% of a run's time when they were sent there.
  const int unit_exp = m.out.emin - m.out_man_bits;
  const bool tiny_in_lanes = check_tiny && m.out_subnormals && unit_exp >= 1 - kBias && -unit_exp <= kBias;
  const V to_units = hn::BitCast(dt, hn::Set(di, LaneBits<T>::Pow2(tiny_in_lanes ? -unit_exp : 0)));
  const V from_units = hn::BitCast(dt, hn::Set(di, LaneBits<T>::Pow2(tiny_in_lanes ? unit_exp : 0)));
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < S * NV; ++v) {
      const VI bits = hn::BitCast(di, val[r][v]);
      const VI sign = hn::And(bits, sign_mask);
      const VI mag = hn::AndNot(sign_mask, bits);
      T* cv = cw + r * S * W + v * Ld;
      VI rounded;
      if (shift == 0)  // (the integer route's float lanes: val already rounded, IntSumToFloat)
        rounded = mag;
      else if (m.final_rounding == Rounding::rne)
        rounded = hn::AndNot(low, hn::Add(hn::Add(mag, hn::ShiftRight<1>(low)), hn::And(hn::ShiftRightSame(mag, shift), one)));
      else
        rounded = hn::AndNot(low, mag);
      // 0 < mag < 2^emin as one unsigned compare of mag - 1; at or beyond the overflow threshold (a
      // power of two, on every grid): rounded toward zero, rounded <= mag tells, else mag too (an
      // rne add can carry a NaN's bits past the sign).
      auto rare = hn::Or(outside[r][v], hn::Not(hn::Lt(rounded, overflow_enc)));
      V result = hn::BitCast(dt, hn::Or(sign, rounded));
      if (check_tiny) {
        const auto tiny = hn::RebindMask(di, hn::Lt(hn::BitCast(du, hn::Sub(mag, one)), min_normal_m1));
        if (tiny_in_lanes) {
          const V units = hn::Mul(val[r][v], to_units);
          const V on_grid = m.final_rounding == Rounding::rne ? hn::Round(units) : hn::Trunc(units);
          result = hn::IfThenElse(hn::RebindMask(dt, tiny), hn::Mul(on_grid, from_units), result);
        } else {
          rare = hn::Or(rare, tiny);
        }
      }
      if (m.final_rounding == Rounding::rne && shift != 0) rare = hn::Or(rare, hn::Not(hn::Lt(mag, overflow_enc)));
      if (HWY_LIKELY(hn::AllFalse(di, rare)))
        hn::Store(result, dt, cv);
      else
        FusedRareLanes(dt, op, i + r, j0 + v * Ld, k0, g, rare, result, cv);
    }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// FusedGroupRows for the integer route in float lanes (AVX-512, AVX2) with kForm plain, truncated or
// binary16 and one or two accumulators, kept lean: no mask per vector. Every lane that FusedGroupRows
// would send to the scalar core shows in one of three vectors kept over the whole pass, tested once
// at the end:
// the largest q - kIntCutQMin (or E + bias) against the route's bound (step 1, kLean); the OR of the
// checked adds (their sign bit: a wrapped int32 add); binary16, the largest |val| against the
// output's overflow threshold (a NaN's bits lie above it). Where none shows, the results are
// FusedGroupRows' and go to cw; else nothing is stored (c stays in cw) and false tells the caller to
// run FusedGroupRows, which finds those lanes one by one.
// Why a second form: written this way, as one straight run over the pass's vectors, the compiler
// keeps it in registers; FusedGroupRows' masks per vector and its staged helpers cost
// v100_fp16_out16 a fifth of its time (a throwaway form of this pass, against the kernel in the same binary).
// kCheckWrap: the adds are checked (two accumulators, or one whose sum with c may pass 2^31);
// kRounding: IntSumToFloat's, for the model (int_sum_rounding).
template <size_t R, size_t S, FusedResultForm kForm, size_t kAccs, bool kCheckWrap, IntSumRounding kRounding>
HWY_INLINE bool FusedGroupRowsLean(const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                                   const uint32_t* idx, const int16_t* ep, float* cw) {
  static_assert(kForm != FusedResultForm::general, "the integer route's forms");
  static_assert(kAccs == 1 || kAccs == 2, "four accumulators sum a wrapped vector again (FusedCutSumsIntFloat)");
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  using V = hn::Vec<decltype(df)>;
  using VI = hn::Vec<decltype(di)>;
  using VU = hn::Vec<decltype(du)>;
  constexpr bool kPlain = FusedValBounded(kForm);
  const FusedOperands& fo = op.fused;
  const FusedModel& m = *fo.model;
  const size_t L = hn::Lanes(df), W = 2 * L, NVT = S * 2;

  // Step 1: the scales 2^-q.
  V scale[R][kFusedMaxNV];
  hn::Mask<decltype(di)> unused[R][kFusedMaxNV];  // (the masks the lean forms leave alone)
  VU high = hn::Zero(du), limit = hn::Zero(du);
  FusedCutScales<R, S, kPlain, true>(df, fo, cw, ep, scale, unused, &high, &limit);

  // Step 2: the products' cuts.
  VI acc[kAccs][R][kFusedMaxNV];
  FusedIntCutTermsOf<R, S, kAccs>(df, op, i, j0, k0, g, idx, scale, acc);

  // c's cut, the sum (checked as FusedCutSumsIntFloat's), val = the sum rounded times 2^q, and the
  // results.
  static_assert(kCheckWrap || kAccs == 1, "two accumulators' sum may always wrap");
  const VI sign_mask = hn::Set(di, static_cast<int32_t>(0x80000000u));
  const bool rne_out = m.final_rounding == Rounding::rne;  // binary16 (else rtz: FusedTileBlock takes no other)
  VI wrap_bits = hn::Zero(di), high_mag = hn::Zero(di);
  const VI keep = hn::Set(di, kForm == FusedResultForm::truncated ? FusedTruncatedKeep(m) : -1);
  V result[R][kFusedMaxNV];
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NVT; ++v) {
      const VI sum = FusedCutSum(df, acc, r, v, hn::Load(df, cw + r * S * W + v * L), scale[r][v], kCheckWrap, &wrap_bits);
      const V val = hn::Mul(IntSumToFloat<kRounding>(sum), FusedPow2Q(df, scale[r][v]));
      if constexpr (kForm == FusedResultForm::binary16) {
        result[r][v] = RoundTripBinary16(val, rne_out);
        high_mag = hn::Max(high_mag, hn::AndNot(sign_mask, hn::BitCast(di, val)));
      } else if constexpr (kForm == FusedResultForm::truncated) {
        result[r][v] = hn::BitCast(df, hn::And(hn::BitCast(di, val), keep));
      } else {
        result[r][v] = val;
      }
    }
  auto rare = hn::Or(hn::RebindMask(di, hn::Gt(high, limit)), hn::Lt(wrap_bits, hn::Zero(di)));
  if constexpr (kForm == FusedResultForm::binary16)
    rare = hn::Or(rare, hn::Not(hn::Lt(high_mag, hn::Set(di, Binary16OverflowBits(m)))));
  if (HWY_UNLIKELY(!hn::AllFalse(di, rare))) return false;
  for (size_t r = 0; r < R; ++r)
    for (size_t v = 0; v < NVT; ++v) hn::Store(result[r][v], df, cw + r * S * W + v * L);
  return true;
}
#endif

// One group for R rows from i and S strips from j0 (c: cw[r*S*W + l], replaced by the group's results).
// kForm: FusedRoundResults' (other than general: the float lanes of the integer route only). kFour:
// the integer route's four accumulators (FusedOperands::int_accs 4; one row), else its one or two.
template <size_t R, size_t S, FusedResultForm kForm, bool kFour = false, class DT>
HWY_INLINE void FusedGroupRows(DT dt, const FastOperands& op, size_t i, size_t j0, size_t k0, const FusedGroup& g,
                               const uint32_t* idx, const int16_t* ep, hn::TFromD<DT>* cw) {
  const hn::RebindToSigned<DT> di;
  hn::Vec<DT> val[R][kFusedMaxNV];
  hn::Mask<decltype(di)> outside[R][kFusedMaxNV];
  hn::Vec<decltype(di)> q[R][kFusedMaxNV];
#if HWY_TARGET != HWY_SCALAR
  if (op.fused.int_accs > 0) {  // the integer route, in float lanes (float_lanes), else in double lanes
    const FusedOperands& fo = op.fused;
    if constexpr (sizeof(hn::TFromD<DT>) == 4) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
      hn::Vec<DT> scale[R][kFusedMaxNV];
      FusedCutScales<R, S, FusedValBounded(kForm)>(dt, fo, cw, ep, scale, outside);
      if constexpr (kFour)
        FusedCutSumsIntFloat<R, S, 4>(dt, op, i, j0, k0, g, idx, cw, scale, val, outside);
      else if (fo.int_accs == 1)
        FusedCutSumsIntFloat<R, S, 1>(dt, op, i, j0, k0, g, idx, cw, scale, val, outside);
      else
        FusedCutSumsIntFloat<R, S, 2>(dt, op, i, j0, k0, g, idx, cw, scale, val, outside);
#endif
    } else if constexpr (S == 1) {
      FusedCutExponentsOf<R, S>(dt, fo, cw, ep, q);
      if constexpr (kFour)
        FusedCutSumsInt<R, 4>(dt, op, i, j0, k0, g, idx, cw, q, val, outside);
      else if (op.fused.int_accs == 1)
        FusedCutSumsInt<R, 1>(dt, op, i, j0, k0, g, idx, cw, q, val, outside);
      else
        FusedCutSumsInt<R, 2>(dt, op, i, j0, k0, g, idx, cw, q, val, outside);
    }
    constexpr FusedResultForm kLanesForm = sizeof(hn::TFromD<DT>) == 4 ? kForm : FusedResultForm::general;
    FusedRoundResults<R, S, kLanesForm>(dt, op, i, j0, k0, g, val, outside, cw);
    return;
  }
#endif
  if constexpr (sizeof(hn::TFromD<DT>) == 8 && S == 1) {  // (float lanes: the integer route only)
    FusedCutExponents<R, S>(dt, *op.fused.model, op.fused.min_align, false, cw, ep, q);
    FusedCutSumsTruncated<R, S>(dt, op, i, j0, k0, g, idx, cw, q, val, outside);
    FusedRoundResults<R, S, FusedResultForm::general>(dt, op, i, j0, k0, g, val, outside, cw);
  }
}

// FusedGroupRows with four accumulators (NVFP4 folded's groups of 64) for a tile's rows, one at a
// time (two rows' accumulators would outnumber the registers); out of line, so that the code of the
// one- and two-accumulator presets around its call stays as it was.
template <size_t S, FusedResultForm kForm, class DT>
HWY_NOINLINE void FusedGroupRowsFour(DT dt, const FastOperands& op, size_t i0, size_t rows, size_t j0, size_t k0,
                                     const FusedGroup& g, const uint32_t* idx, const int16_t* ep, hn::TFromD<DT>* c) {
  const size_t SW = S * 2 * hn::Lanes(hn::ScalableTag<float>());
  for (size_t r = 0; r < rows; ++r) FusedGroupRows<1, S, kForm, true>(dt, op, i0 + r, j0, k0, g, idx, ep + r * SW, c + r * SW);
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// FusedGroupRows out of line, for the passes in which FusedGroupRowsLean found a lane for the core
// (rare: kept out of the lean form's code).
template <size_t R, size_t S, FusedResultForm kForm, class DT>
HWY_NOINLINE void FusedGroupRowsCareful(DT dt, const FastOperands& op, size_t i, size_t j0, size_t k0,
                                        const FusedGroup& g, const uint32_t* idx, const int16_t* ep, float* cw) {
  FusedGroupRows<R, S, kForm>(dt, op, i, j0, k0, g, idx, ep, cw);
}

// A group for a tile's rows by FusedGroupRowsLean, in pairs, each pass that finds a lane for the core
// again by FusedGroupRowsCareful.
template <size_t S, FusedResultForm kForm, size_t kAccs, bool kCheckWrap, IntSumRounding kRounding, class DT>
HWY_INLINE void FusedGroupTileLean(DT dt, const FastOperands& op, size_t i0, size_t rows, size_t j0, size_t k0,
                                   const FusedGroup& g, const uint32_t* idx, const int16_t* ep, float* c) {
  const size_t SW = S * 2 * hn::Lanes(hn::ScalableTag<float>());
  size_t r = 0;
  for (; r + 2 <= rows; r += 2)
    if (!FusedGroupRowsLean<2, S, kForm, kAccs, kCheckWrap, kRounding>(op, i0 + r, j0, k0, g, idx, ep + r * SW, c + r * SW))
      FusedGroupRowsCareful<2, S, kForm>(dt, op, i0 + r, j0, k0, g, idx, ep + r * SW, c + r * SW);
  if (r < rows && !FusedGroupRowsLean<1, S, kForm, kAccs, kCheckWrap, kRounding>(op, i0 + r, j0, k0, g, idx, ep + r * SW, c + r * SW))
    FusedGroupRowsCareful<1, S, kForm>(dt, op, i0 + r, j0, k0, g, idx, ep + r * SW, c + r * SW);
}

// FusedGroupTileLean with the model's accumulators (one, or two whose sum is always checked), the
// check of one accumulator's sum with c where it may wrap (FusedOperands::int_sum_may_wrap: the
// 16-product groups of 25 kept bits), and IntSumToFloat's rounding (binary16: to odd, its 10
// fraction bits; plain: the model's own; truncated: toward zero, whose bits past the output's are
// then cleared: truncation to 23 bits and then to fewer is truncation to fewer).
template <size_t S, FusedResultForm kForm, class DT>
HWY_INLINE void FusedGroupTileLeanFor(DT dt, const FastOperands& op, size_t i0, size_t rows, size_t j0, size_t k0,
                                      const FusedGroup& g, const uint32_t* idx, const int16_t* ep, float* c) {
  using K = IntSumRounding;
  auto run = [&](auto accs, auto check, auto rounding) {
    FusedGroupTileLean<S, kForm, decltype(accs)::value, decltype(check)::value, decltype(rounding)::value>(
        dt, op, i0, rows, j0, k0, g, idx, ep, c);
  };
  auto with_accs = [&](auto rounding) {
    using One = std::integral_constant<size_t, 1>;
    if (op.fused.int_accs == 2)
      run(std::integral_constant<size_t, 2>(), std::true_type(), rounding);
    else if (op.fused.int_sum_may_wrap)
      run(One(), std::true_type(), rounding);
    else
      run(One(), std::false_type(), rounding);
  };
  if constexpr (kForm == FusedResultForm::binary16)
    with_accs(std::integral_constant<K, K::to_odd>());
  else if constexpr (kForm == FusedResultForm::truncated)
    with_accs(std::integral_constant<K, K::toward_zero>());
  else if (int_sum_rounding(*op.fused.model) == K::nearest_even)
    with_accs(std::integral_constant<K, K::nearest_even>());
  else
    with_accs(std::integral_constant<K, K::toward_zero>());
}
#endif

// fused_promote_add into IEEE binary16 keeping subnormals, for lanes of fp16 values: their float sum,
// rounded once more to fp16 (to nearest even, overflow to infinity), is their correctly rounded fp16
// sum: the float sum keeps 24 bits, at least 2 * 11 + 2, so its rounding never decides the second.
// The second rounding on the float's bits, by an integer add at fp16's last fraction bit; below
// 2^-14 it changes nothing, as it should: every fp16 value is a multiple of 2^-24, so a sum there
// lies on the subnormal grid already. NaN stays NaN.
template <class DF, class V = hn::Vec<DF>>
HWY_INLINE V Fp16PromoteAdd(DF df, V outer, V partial) {
  const hn::RebindToSigned<DF> di;
  const V s = hn::Add(outer, partial);
  const auto bits = hn::BitCast(di, s);
  const auto sign_mask = hn::Set(di, static_cast<int32_t>(0x80000000u));
  const auto mag = hn::AndNot(sign_mask, bits);
  // 13 bits dropped: add half (0xfff) plus the kept last bit, clear them (a carry moves the exponent).
  const auto rounded = hn::AndNot(hn::Set(di, 0x1fff), hn::Add(hn::Add(mag, hn::Set(di, 0xfff)),
                                                             hn::And(hn::ShiftRight<13>(mag), hn::Set(di, 1))));
  const auto overflowed = hn::Not(hn::Lt(rounded, hn::Set(di, 0x47800000)));  // at or past 2^16: infinity
  const auto r = hn::IfThenElse(overflowed, hn::Set(di, 0x7f800000), rounded);
  return hn::IfThenElse(hn::IsNaN(s), s, hn::BitCast(df, hn::Or(hn::And(bits, sign_mask), r)));
}

// The fused model over one K-block for rows [i0, i0+rows), rows <= kMaxRows, and the S strips from
// column j0 (S = 2 in float lanes on AVX-512: each group's per-lane work is done once for twice the
// columns), in lanes of dt's type: out[r*S*W + l] (results on the output format's grid, exact as
// floats). Groups run in the outer loop and rows in the inner one, so that a group's slice of the
// strips (32 products x S*W columns: 16 KiB at most) stays in L1 while every row of the tile reads it.
template <size_t kMaxRows, size_t S, class DT>
HWY_INLINE void FusedTileBlock(DT dt, const FastOperands& op, size_t i0, size_t rows, size_t j0, size_t k0,
                               const FusedPlan& plan, float* out) {
  using T = hn::TFromD<DT>;
  const size_t SW = S * 2 * hn::Lanes(hn::ScalableTag<float>());  // a row's columns
  const FusedModel& m = *op.fused.model;
  const bool promote = m.promote_every > 0;
  const bool promote_in_float = promote && is_binary32(m.out) && m.out_subnormals;
  const bool promote_in_fp16 = promote && is_binary16(m.out) && m.out_subnormals;
  // FusedRoundResults' form. In float lanes of the integer route: plain into float's 23 fraction
  // bits with no result below the output's smallest normal to check (its emin at or below
  // kIntCutQMin); truncated likewise into fewer fraction bits toward zero; binary16 into IEEE
  // binary16 keeping subnormals, all its 10 fraction bits written, rounded to nearest even or toward
  // zero.
  const bool int_float_lanes = sizeof(T) == 4 && op.fused.int_accs > 0;
  const bool plain = int_float_lanes && m.out_man_bits == 23 && m.out.emin <= kIntCutQMin;
  const bool truncated = int_float_lanes && m.out_man_bits < 23 && m.final_rounding == Rounding::rtz &&
                         m.out.emin <= kIntCutQMin;
  const bool binary16 = int_float_lanes && is_binary16(m.out) && m.out_subnormals && m.out_man_bits == 10 &&
                        (m.final_rounding == Rounding::rne || m.final_rounding == Rounding::rtz);
  HWY_ALIGN T c[kMaxRows * S * 2 * HWY_MAX_BYTES / sizeof(float)];
  HWY_ALIGN int16_t ep[kMaxRows * S * 2 * HWY_MAX_BYTES / sizeof(float)];
  for (size_t l = 0; l < rows * SW; ++l) out[l] = 0.0f;  // the outer accumulators
  uint32_t g0 = 0;
  for (uint32_t chain_end : plan.chain_end) {
    // (The model's choice outside the loops, here and after the chain: as a test per element it kept
    // these copies scalar, 2% of an a100_fp16 call.)
    if (promote)
      std::fill(c, c + rows * SW, T(0));
    else
      std::copy(out, out + rows * SW, c);
    for (uint32_t gi = g0; gi < chain_end; ++gi) {
      const FusedGroup& g = plan.groups[gi];
      const uint32_t* idx = plan.index.data() + g.first;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
      if (sizeof(T) == 4 && op.fused.ea8 && op.fused.direct_scales)
        FusedProductExponents8<kMaxRows, S, true>(op, i0, rows, j0, k0, g, idx, ep);
      else if (op.fused.ea8)
        FusedProductExponents8<kMaxRows, S>(op, i0, rows, j0, k0, g, idx, ep);
      else
#endif
        FusedProductExponents<kMaxRows, S>(op, i0, rows, j0, k0, g, idx, ep);
      // Rows in pairs: two rows' independent sums hide each other's latencies, and they share B's loads.
      auto group_rows = [&](auto form) {
        constexpr FusedResultForm kForm = decltype(form)::value;
        if (op.fused.int_accs == 4) {
          if constexpr (sizeof(T) == 8 || kFusedFourInFloat)
            FusedGroupRowsFour<S, kForm>(dt, op, i0, rows, j0, k0, g, idx, ep, c);
          else
            HWY_ABORT("four accumulators in float lanes on %s (pack_fused gives them double lanes)",
                      hwy::TargetName(HWY_TARGET));
          return;
        }
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
        if constexpr (sizeof(T) == 4 && kForm != FusedResultForm::general) {
          FusedGroupTileLeanFor<S, kForm>(dt, op, i0, rows, j0, k0, g, idx, ep, c);
          return;
        }
#endif
        size_t r = 0;
        for (; r + 2 <= rows; r += 2) FusedGroupRows<2, S, kForm>(dt, op, i0 + r, j0, k0, g, idx, ep + r * SW, c + r * SW);
        if (r < rows) FusedGroupRows<1, S, kForm>(dt, op, i0 + r, j0, k0, g, idx, ep + r * SW, c + r * SW);
      };
      using Form = FusedResultForm;
      if (plain)
        group_rows(std::integral_constant<Form, Form::plain>());
      else if (truncated)
        group_rows(std::integral_constant<Form, Form::truncated>());
      else if (binary16)
        group_rows(std::integral_constant<Form, Form::binary16>());
      else
        group_rows(std::integral_constant<Form, Form::general>());
    }
    g0 = chain_end;
    // Promotion into the outer accumulator, once per chain. Into an IEEE binary32 accumulator that
    // keeps subnormals, fused_promote_add is one fp32 addition (round to nearest even, IEEE special
    // values; c is on that grid, so its float is exact), done here in the lanes; else the scalar core.
    // (B200 FP8 promotes every group: the scalar core had taken half of a training run.)
    if (promote_in_float) {
      for (size_t l = 0; l < rows * SW; ++l) out[l] = out[l] + static_cast<float>(c[l]);
    } else if (promote_in_fp16) {  // (the FP8 models with fp16 output: a promotion every 32 products)
      const hn::ScalableTag<float> df;
      HWY_ALIGN float cf[kMaxRows * S * 2 * HWY_MAX_BYTES / sizeof(float)];
      for (size_t l = 0; l < rows * SW; ++l) cf[l] = static_cast<float>(c[l]);  // (exact: fp16 values)
      for (size_t l = 0; l < rows * SW; l += hn::Lanes(df))
        hn::StoreU(Fp16PromoteAdd(df, hn::LoadU(df, out + l), hn::Load(df, cf + l)), df, out + l);
    } else if (!promote) {
      std::copy(c, c + rows * SW, out);  // (exact: c is on the output format's grid)
    } else {
      for (size_t l = 0; l < rows * SW; ++l) out[l] = static_cast<float>(fused_promote_add(out[l], c[l], m));
    }
  }
}

// ---- Packing for the kernel above (matmul_fast's pack_fused, for float operands) ----------------

// The alignment code of each of len floats (fused_detail::align_code, on the float encoding):
// kZeroExp for a zero, else its exponent clamped at in_emin (>= -126 for the formats the fast path takes, so that float subnormals, whose field reads
// -127, clamp as their true exponent does). NaN and infinity get some code: the ranges then send
// the call to the reference.
template <class D, class VI = hn::Vec<hn::RebindToSigned<D>>>
HWY_INLINE VI FusedCodeOf(D /*d*/, hn::Vec<D> x, const VI in_emin) {
  const hn::RebindToSigned<D> di;
  const VI bits = hn::BitCast(di, x);
  const VI e = hn::Max(hn::Sub(hn::And(hn::ShiftRight<23>(bits), hn::Set(di, 0xff)), hn::Set(di, 127)), in_emin);
  return hn::IfThenElse(hn::Eq(hn::And(bits, hn::Set(di, 0x7fffffff)), hn::Zero(di)),
                        hn::Set(di, static_cast<int32_t>(kZeroExp)), e);
}

// ... for A: each code in both halves of an int32 (FusedPairedCode).
void FusedExpCodes(const float* x, size_t len, int in_emin, int32_t* out) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t L = hn::Lanes(d);
  const auto emin = hn::Set(di, in_emin);
  const auto low16 = hn::Set(di, 0xffff);
  size_t i = 0;
  for (; i + L <= len; i += L) {
    const auto code = hn::And(FusedCodeOf(d, hn::LoadU(d, x + i), emin), low16);
    hn::StoreU(hn::Or(code, hn::ShiftLeft<16>(code)), di, out + i);
  }
  for (; i < len; ++i) out[i] = FusedPairedCode(static_cast<int16_t>(fused_detail::align_code(x[i], in_emin)));
}

// Strips [st0, st1) of B for the kernel from B transposed (bt: k rows of ldt floats, the columns
// past n zero): per k, the W values as they are into bf (the integer route) or split by sign into bd
// (doubles), whichever is given; their codes into eb (as FusedPairedCode8 of the code less shift8
// when codes8).
void FusedPackStrips(const float* bt, size_t ldt, size_t k, size_t st0, size_t st1, int in_emin, bool codes8,
                     int shift8, float* bf, double* bd, int16_t* eb) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const hn::Rebind<int16_t, decltype(d)> d16;
  const hn::Repartition<double, decltype(d)> dd;
  const size_t L = hn::Lanes(d), W = 2 * L, Ldd = hn::Lanes(dd);
  const auto emin = hn::Set(di, in_emin);
  const auto zero = hn::Zero(d);
  for (size_t st = st0; st < st1; ++st) {
    for (size_t t = 0; t < k; ++t) {
      const float* src = bt + t * ldt + st * W;
      const size_t at = st * k * 2 * W + t * 2 * W;
      for (size_t h = 0; h < 2; ++h) {
        const auto y = hn::LoadU(d, src + h * L);
        if (bf) {
          hn::StoreU(y, d, bf + st * k * W + t * W + h * L);
        } else {
          const auto pos = hn::IfThenElseZero(hn::Gt(y, zero), y), neg = hn::IfThenElseZero(hn::Lt(y, zero), y);
          HWY_ALIGN float lanes[2][HWY_MAX_BYTES / sizeof(float)];
          hn::Store(pos, d, lanes[0]);
          hn::Store(neg, d, lanes[1]);
          for (size_t part = 0; part < std::max<size_t>(1, L / Ldd); ++part) {  // (scalar target: one part)
            const hn::Rebind<float, decltype(dd)> dh;
            for (size_t side = 0; side < 2; ++side)
              hn::StoreU(hn::PromoteTo(dd, hn::LoadU(dh, lanes[side] + part * Ldd)), dd,
                         bd + at + side * W + h * L + part * Ldd);
          }
        }
        auto code = FusedCodeOf(d, y, emin);
        if (codes8) {  // (FusedPairedCode8: the int8 code, saturated, in both bytes; a zero's stays -128)
          code = hn::Min(hn::Max(hn::Sub(code, hn::Set(di, shift8)), hn::Set(di, -128)), hn::Set(di, 127));
          code = hn::Or(hn::ShiftLeft<8>(code), hn::And(code, hn::Set(di, 0xff)));
        }
        hn::StoreU(hn::DemoteTo(d16, code), d16, eb + st * k * W + t * W + h * L);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
