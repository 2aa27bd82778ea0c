// The per-element update rules of the optimizers (train/optimizer.h), over one contiguous run of
// elements of one tensor: fp32 arithmetic, each element on its own, in the order of operations
// the formulas below state. They run in SIMD vectors across elements (Highway, one build per
// target, the CPU's best taken at run time); every lane performs the same IEEE operations as the
// scalar rule (no contraction; division and square root correctly rounded), so the bits are the
// scalar ones on every target; tests run every target this CPU supports against the scalar rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

struct SgdCoeffs {
  float lr = 0, grad_scale = 1, weight_decay = 0, momentum = 0;
};
// g' = g*s (+ wd*p when `decay` and wd != 0);  m = momentum*m + g';  p -= lr*m.
void sgd_update(float* p, const float* g, float* m, size_t n, const SgdCoeffs& k, bool decay);

struct AdamwCoeffs {
  float lr = 0, grad_scale = 1, weight_decay = 0, beta1 = 0, beta2 = 0, eps = 0;
  float bias1 = 1, bias2 = 1;  // 1 - beta1^t, 1 - beta2^t
  // 1 - beta1, 1 - beta2 as the moments' updates use them (train.adam_one_minus_beta: 1.0f - beta in
  // fp32, or 1 - beta in double rounded once to fp32 as torch.optim.Adam passes them).
  float one_minus_beta1 = 1, one_minus_beta2 = 1;
};
// g' = g*s;  m = b1*m + (1-b1)*g';  v = b2*v + (1-b2)*(g'*g');
// u = (m/bias1) / (sqrt(v/bias2) + eps) (+ wd*p when `decay`);  p -= lr*u.
void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const AdamwCoeffs& k, bool decay);

// The SIMD targets compiled in that this CPU supports (hwy target bits), for tests.
std::vector<int64_t> update_rule_targets();

}  // namespace drift
