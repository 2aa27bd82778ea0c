#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "arith/cast_span.h"
#include "arith/catalogue.h"

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

namespace {
// Random streams of stochastic master rounding: one per step, apart from every other stream.
constexpr uint64_t kMasterStreamBase = uint64_t{0x4d53} << 48;  // "MS"
}  // namespace

MasterRounding MasterRounding::from(const MasterConfig& m) {
  MasterRounding r;
  r.format = *find_format(m.format);  // checked by the config parser
  r.spec.mode = *parse_rounding(m.rounding);
  r.enabled = m.format != "fp32" || m.rounding != "rne";
  return r;
}

void MasterRounding::apply(float* p, size_t n, uint64_t seed, uint64_t step, size_t first) const {
  if (enabled) cast_span(p, p, n, format, spec, seed, kMasterStreamBase + step, first);
}

Optimizer::Optimizer(const TrainConfig& t, const PrecisionConfig& p, const ParamTable& table)
    : cfg_(t), master_(MasterRounding::from(p.master)) {
  StateFormat sf = StateFormat::fp32;
  parse_state_format(p.optimizer_state, &sf);  // checked by the config parser
  m_.init(sf, table, /*is_signed=*/true);
  if (t.optimizer == "adamw") v_.init(sf, table, /*is_signed=*/false);
  mb_.resize(StateBuffer::kBlock);
  vb_.resize(StateBuffer::kBlock);
  for (const auto& s : table.specs)
    for (size_t b = s.offset; b < s.offset + s.size; b += StateBuffer::kBlock) decay_.push_back(s.decay);
}

void Optimizer::step(const ParamTable&, float* params, const float* grads, double lr, double grad_scale, uint64_t seed,
                     uint64_t step) {
  ++t_;
  const float flr = static_cast<float>(lr), s = static_cast<float>(grad_scale);
  const float wd = static_cast<float>(cfg_.weight_decay);
  const bool sgd = cfg_.optimizer == "sgd";
  const float mu = static_cast<float>(cfg_.momentum);
  const float b1 = static_cast<float>(cfg_.beta1), b2 = static_cast<float>(cfg_.beta2), eps = static_cast<float>(cfg_.eps);
  const float c1 = static_cast<float>(1.0 - std::pow(cfg_.beta1, static_cast<double>(t_)));
  const float c2 = static_cast<float>(1.0 - std::pow(cfg_.beta2, static_cast<double>(t_)));
  for (size_t blk = 0; blk < m_.blocks(); ++blk) {
    const size_t lo = m_.block_begin(blk), n = m_.block_end(blk) - lo;
    const bool decay = decay_[blk];
    float* p = params + lo;
    const float* gr = grads + lo;
    m_.load(blk, mb_.data());
    if (sgd) {
      for (size_t i = 0; i < n; ++i) {
        float g = gr[i] * s;
        if (decay && wd != 0.0f) g = g + wd * p[i];
        mb_[i] = mu * mb_[i] + g;
        p[i] = p[i] - flr * mb_[i];
      }
    } else {
      v_.load(blk, vb_.data());
      for (size_t i = 0; i < n; ++i) {
        const float g = gr[i] * s;
        mb_[i] = b1 * mb_[i] + (1.0f - b1) * g;
        vb_[i] = b2 * vb_[i] + (1.0f - b2) * (g * g);
        const float mhat = mb_[i] / c1, vhat = vb_[i] / c2;
        float upd = mhat / (std::sqrt(vhat) + eps);
        if (decay) upd = upd + wd * p[i];
        p[i] = p[i] - flr * upd;
      }
      v_.store(blk, vb_.data());
    }
    m_.store(blk, mb_.data());
    master_.apply(p, n, seed, step, lo);
  }
}

void Optimizer::save(BlobWriter& w) const {
  w.u64(t_);
  m_.save(w);
  if (cfg_.optimizer == "adamw") v_.save(w);
}

void Optimizer::restore(BlobReader& r) {
  t_ = r.u64();
  m_.restore(r);
  if (cfg_.optimizer == "adamw") v_.restore(r);
}

}  // namespace drift
