// Built with -fno-math-errno (CMakeLists.txt): std::sqrt then needs no library call to set errno
// for a negative input, and the AdamW loop vectorises. The value is the same IEEE square root
// (a negative input gives NaN either way); only errno is left alone.
#include "train/update_rules.h"

#include <cmath>

namespace drift {

namespace {

// The loops take __restrict pointers (p, g, m, v are distinct buffers) so that the compiler
// vectorises them without run-time overlap checks; `decay` is a template parameter so that each
// loop body is branch-free.
template <bool kDecay>
void sgd_loop(float* __restrict p, const float* __restrict gr, float* __restrict m, size_t n, const SgdCoeffs k) {
  for (size_t i = 0; i < n; ++i) {
    float g = gr[i] * k.grad_scale;
    if constexpr (kDecay) g = g + k.weight_decay * p[i];
    m[i] = k.momentum * m[i] + g;
    p[i] = p[i] - k.lr * m[i];
  }
}

template <bool kDecay>
void adamw_loop(float* __restrict p, const float* __restrict gr, float* __restrict m, float* __restrict v, size_t n,
                const AdamwCoeffs k) {
  const float one_minus_b1 = 1.0f - k.beta1, one_minus_b2 = 1.0f - k.beta2;
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

}  // namespace

void sgd_update(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay) {
  // Decay with wd = 0 is skipped, not added as 0*p (which would turn -0 into +0 and inf into NaN).
  if (decay && k.weight_decay != 0.0f)
    sgd_loop<true>(p, g, m, n, k);
  else
    sgd_loop<false>(p, g, m, n, k);
}

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k, bool decay) {
  if (decay)
    adamw_loop<true>(p, g, m, v, n, k);
  else
    adamw_loop<false>(p, g, m, v, n, k);
}

}  // namespace drift
