// Built with -fno-math-errno (CMakeLists.txt): std::sqrt then needs no library call to set errno
// for a negative input, and the AdamW loop vectorises. The value is the same IEEE square root
// (a negative input gives NaN either way); only errno is left alone.
#include "train/update_rules.h"

#include <cmath>

namespace drift {

namespace {

// The loops take __restrict pointers (p, g, m, v are distinct buffers) so that the compiler
// vectorises them without run-time overlap checks; `decay` is a template parameter so that each
// loop body is branch-free. always_inline: compiled again inside each ISA's entry point below.
template <bool kDecay>
[[gnu::always_inline]] inline void sgd_loop(float* __restrict p, const float* __restrict gr, float* __restrict m,
                                            size_t n, const SgdCoeffs& k) {
  for (size_t i = 0; i < n; ++i) {
    float g = gr[i] * k.grad_scale;
    if constexpr (kDecay) g = g + k.weight_decay * p[i];
    m[i] = k.momentum * m[i] + g;
    p[i] = p[i] - k.lr * m[i];
  }
}

template <bool kDecay>
[[gnu::always_inline]] inline void adamw_loop(float* __restrict p, const float* __restrict gr, float* __restrict m,
                                              float* __restrict v, size_t n, const AdamwCoeffs& k) {
  const float one_minus_b1 = k.one_minus_beta1, one_minus_b2 = k.one_minus_beta2;
  for (size_t i = 0; i < n; ++i) {
    const float g = gr[i] * k.grad_scale;
    m[i] = k.beta1 * m[i] + one_minus_b1 * g;
    v[i] = k.beta2 * v[i] + one_minus_b2 * (g * g);
    const float mhat = m[i] / k.bias1, vhat = v[i] / k.bias2;
    float upd = mhat / (std::sqrt(vhat) + k.eps);
    if constexpr (kDecay) upd = upd + k.weight_decay * p[i];
    p[i] = p[i] - k.lr * upd;
  }
}

// One entry point per ISA: the same loops, vectorised at that ISA's width. Every lane does the
// same IEEE operations in the same order (no FMA: -ffp-contract=off, and AVX2 alone brings none).
void sgd_baseline(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay) {
  if (decay) sgd_loop<true>(p, g, m, n, k);
  else sgd_loop<false>(p, g, m, n, k);
}
void adamw_baseline(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k, bool decay) {
  if (decay) adamw_loop<true>(p, g, m, v, n, k);
  else adamw_loop<false>(p, g, m, v, n, k);
}
#if defined(__x86_64__)
[[gnu::target("avx2")]] void sgd_avx2(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay) {
  if (decay) sgd_loop<true>(p, g, m, n, k);
  else sgd_loop<false>(p, g, m, n, k);
}
[[gnu::target("avx2")]] void adamw_avx2(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k,
                                        bool decay) {
  if (decay) adamw_loop<true>(p, g, m, v, n, k);
  else adamw_loop<false>(p, g, m, v, n, k);
}
#endif

UpdateIsa best_isa() {
#if defined(__x86_64__)
  static const UpdateIsa best = __builtin_cpu_supports("avx2") ? UpdateIsa::avx2 : UpdateIsa::baseline;
  return best;
#else
  return UpdateIsa::baseline;
#endif
}

}  // namespace

std::vector<UpdateIsa> supported_update_isas() {
  std::vector<UpdateIsa> v{UpdateIsa::baseline};
  if (best_isa() == UpdateIsa::avx2) v.push_back(UpdateIsa::avx2);
  return v;
}

const char* to_string(UpdateIsa isa) { return isa == UpdateIsa::avx2 ? "avx2" : "baseline"; }

void sgd_update(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay, UpdateIsa isa) {
  // Decay with wd = 0 is skipped, not added as 0*p (which would turn -0 into +0 and inf into NaN).
  const bool d = decay && k.weight_decay != 0.0f;
#if defined(__x86_64__)
  if (isa == UpdateIsa::avx2) return sgd_avx2(p, g, m, n, k, d);
#endif
  (void)isa;
  sgd_baseline(p, g, m, n, k, d);
}

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k, bool decay,
                  UpdateIsa isa) {
#if defined(__x86_64__)
  if (isa == UpdateIsa::avx2) return adamw_avx2(p, g, m, v, n, k, decay);
#endif
  (void)isa;
  adamw_baseline(p, g, m, v, n, k, decay);
}

void sgd_update(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay) {
  sgd_update(p, g, m, n, k, decay, best_isa());
}

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k, bool decay) {
  adamw_update(p, g, m, v, n, k, decay, best_isa());
}

}  // namespace drift
