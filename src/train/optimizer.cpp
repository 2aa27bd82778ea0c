#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

namespace drift {

double learning_rate(const TrainConfig& t, uint64_t step) {
  if (t.warmup && step < t.warmup) return t.lr * static_cast<double>(step + 1) / static_cast<double>(t.warmup);
  if (t.decay == "constant") return t.lr;
  const double span = t.steps > t.warmup + 1 ? static_cast<double>(t.steps - t.warmup - 1) : 1.0;
  const double progress = std::min(1.0, static_cast<double>(step - std::min<uint64_t>(step, t.warmup)) / span);
  const double lo = t.lr * t.min_lr_frac;
  if (t.decay == "linear") return t.lr - (t.lr - lo) * progress;
  return lo + (t.lr - lo) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

double global_norm(const float* g, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return std::sqrt(s);
}

Optimizer::Optimizer(const TrainConfig& t, size_t n) : cfg_(t), m_(n, 0.0f) {
  if (t.optimizer == "adamw") v_.assign(n, 0.0f);
}

void Optimizer::step(const ParamTable& table, float* params, const float* grads, double lr, double grad_scale) {
  ++t_;
  const float flr = static_cast<float>(lr), s = static_cast<float>(grad_scale);
  const float wd = static_cast<float>(cfg_.weight_decay);
  if (cfg_.optimizer == "sgd") {
    const float mu = static_cast<float>(cfg_.momentum);
    for (const auto& p : table.specs)
      for (size_t i = p.offset; i < p.offset + p.size; ++i) {
        float g = grads[i] * s;
        if (p.decay && wd != 0.0f) g = g + wd * params[i];
        m_[i] = mu * m_[i] + g;
        params[i] = params[i] - flr * m_[i];
      }
    return;
  }
  const float b1 = static_cast<float>(cfg_.beta1), b2 = static_cast<float>(cfg_.beta2), eps = static_cast<float>(cfg_.eps);
  const float c1 = static_cast<float>(1.0 - std::pow(cfg_.beta1, static_cast<double>(t_)));
  const float c2 = static_cast<float>(1.0 - std::pow(cfg_.beta2, static_cast<double>(t_)));
  for (const auto& p : table.specs)
    for (size_t i = p.offset; i < p.offset + p.size; ++i) {
      const float g = grads[i] * s;
      m_[i] = b1 * m_[i] + (1.0f - b1) * g;
      v_[i] = b2 * v_[i] + (1.0f - b2) * (g * g);
      const float mhat = m_[i] / c1, vhat = v_[i] / c2;
      float upd = mhat / (std::sqrt(vhat) + eps);
      if (p.decay) upd = upd + wd * params[i];
      params[i] = params[i] - flr * upd;
    }
}

}  // namespace drift
