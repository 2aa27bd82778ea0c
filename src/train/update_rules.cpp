// The update loops in Highway vectors, compiled once per SIMD target and dispatched at run time
// (HWY_DYNAMIC_DISPATCH), like the rest of drift's SIMD code. Each lane performs the scalar rule's
// IEEE operations in the scalar rule's order (Mul, Add, Sub, Div, Sqrt: each correctly rounded; no
// fused multiply-add), so every target gives the scalar bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "train/update_rules.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include "train/update_rules.h"

#include "arith/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace drift {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The rules over Lanes(d) elements from i: the loops below run them on full vectors, then on the
// tail one element at a time (a one-lane tag), so that there is one definition of each rule.
template <bool kDecay, class D>
HWY_INLINE void SgdLanes(D d, float* HWY_RESTRICT p, const float* HWY_RESTRICT gr, float* HWY_RESTRICT m, size_t i,
                         const SgdCoeffs& k) {
  auto g = hn::Mul(hn::LoadU(d, gr + i), hn::Set(d, k.grad_scale));
  const auto pv = hn::LoadU(d, p + i);
  if constexpr (kDecay) g = hn::Add(g, hn::Mul(hn::Set(d, k.weight_decay), pv));
  const auto mv = hn::Add(hn::Mul(hn::Set(d, k.momentum), hn::LoadU(d, m + i)), g);
  hn::StoreU(mv, d, m + i);
  hn::StoreU(hn::Sub(pv, hn::Mul(hn::Set(d, k.lr), mv)), d, p + i);
}

// kBias1, kBias2: whether the bias correction divides at all. From the step where 1 - beta^t rounds
// to 1.0f (t = 165 for beta1 = 0.9, t = 338 for beta2 = 0.95) it is a division by one, which returns
// its operand (m and v are sums, never signalling NaNs), and the loops skip it: two of the rule's
// four slow operations (divide, square root) per element.
template <bool kDecay, bool kBias1, bool kBias2, class D>
HWY_INLINE void AdamwLanes(D d, float* HWY_RESTRICT p, const float* HWY_RESTRICT gr, float* HWY_RESTRICT m,
                           float* HWY_RESTRICT v, size_t i, const AdamwCoeffs& k) {
  const auto g = hn::Mul(hn::LoadU(d, gr + i), hn::Set(d, k.grad_scale));
  const auto mv = hn::Add(hn::Mul(hn::Set(d, k.beta1), hn::LoadU(d, m + i)), hn::Mul(hn::Set(d, k.one_minus_beta1), g));
  const auto vv =
      hn::Add(hn::Mul(hn::Set(d, k.beta2), hn::LoadU(d, v + i)), hn::Mul(hn::Set(d, k.one_minus_beta2), hn::Mul(g, g)));
  hn::StoreU(mv, d, m + i);
  hn::StoreU(vv, d, v + i);
  const auto mhat = kBias1 ? hn::Div(mv, hn::Set(d, k.bias1)) : mv;
  const auto vhat = kBias2 ? hn::Div(vv, hn::Set(d, k.bias2)) : vv;
  auto upd = hn::Div(mhat, hn::Add(hn::Sqrt(vhat), hn::Set(d, k.eps)));
  const auto pv = hn::LoadU(d, p + i);
  if constexpr (kDecay) upd = hn::Add(upd, hn::Mul(hn::Set(d, k.weight_decay), pv));
  hn::StoreU(hn::Sub(pv, hn::Mul(hn::Set(d, k.lr), upd)), d, p + i);
}

template <bool kDecay>
HWY_INLINE void SgdLoop(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) SgdLanes<kDecay>(d, p, g, m, i, k);
  for (; i < n; ++i) SgdLanes<kDecay>(d1, p, g, m, i, k);
}

template <bool kDecay, bool kBias1, bool kBias2>
HWY_INLINE void AdamwLoop(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  size_t i = 0;
  for (; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) AdamwLanes<kDecay, kBias1, kBias2>(d, p, g, m, v, i, k);
  for (; i < n; ++i) AdamwLanes<kDecay, kBias1, kBias2>(d1, p, g, m, v, i, k);
}

template <bool kDecay>
HWY_INLINE void AdamwLoopBiased(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k) {
  const bool b1 = k.bias1 != 1.0f, b2 = k.bias2 != 1.0f;
  if (b1 && b2) AdamwLoop<kDecay, true, true>(p, g, m, v, n, k);
  else if (b1) AdamwLoop<kDecay, true, false>(p, g, m, v, n, k);
  else if (b2) AdamwLoop<kDecay, false, true>(p, g, m, v, n, k);
  else AdamwLoop<kDecay, false, false>(p, g, m, v, n, k);
}

void SgdUpdate(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay) {
  if (decay) SgdLoop<true>(p, g, m, n, k);
  else SgdLoop<false>(p, g, m, n, k);
}

void AdamwUpdate(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k, bool decay) {
  if (decay) AdamwLoopBiased<true>(p, g, m, v, n, k);
  else AdamwLoopBiased<false>(p, g, m, v, n, k);
}

}  // namespace HWY_NAMESPACE
}  // namespace drift
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace drift {

HWY_EXPORT(SgdUpdate);
HWY_EXPORT(AdamwUpdate);

// Large updates in fixed chunks over a team: every element's rule is its own, so the split changes
// no bit.
constexpr size_t kUpdateChunk = size_t{1} << 14;

void sgd_update(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay) {
  // Decay with wd = 0 is skipped, not added as 0*p (which would turn -0 into +0 and inf into NaN).
  const bool d = decay && k.weight_decay != 0.0f;
  for_each_chunk(n, kUpdateChunk, worth_threads_elements(n),
                 [&](size_t lo, size_t len) { HWY_DYNAMIC_DISPATCH(SgdUpdate)(p + lo, g + lo, m + lo, len, k, d); });
}

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k, bool decay) {
  for_each_chunk(n, kUpdateChunk, worth_threads_elements(n), [&](size_t lo, size_t len) {
    HWY_DYNAMIC_DISPATCH(AdamwUpdate)(p + lo, g + lo, m + lo, v + lo, len, k, decay);
  });
}

std::vector<int64_t> update_rule_targets() { return hwy::SupportedAndGeneratedTargets(); }

}  // namespace drift
#endif  // HWY_ONCE
