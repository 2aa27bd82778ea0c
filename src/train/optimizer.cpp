#include "train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/parallel.h"
#include "train/update_rules.h"

namespace drift {

double learning_rate(const TrainConfig& t, uint64_t step) {
  if (t.warmup && step < t.warmup) return t.lr * static_cast<double>(step + 1) / static_cast<double>(t.warmup);
  if (t.decay == "constant") return t.lr;
  // cosine_torch: torch's CosineAnnealingLR(T_max = steps - warmup), which reaches lr_min one step
  // after the last; cosine and linear reach it at the last step.
  const uint64_t tail = t.decay == "cosine_torch" ? 0 : 1;
  const double span = t.steps > t.warmup + tail ? static_cast<double>(t.steps - t.warmup - tail) : 1.0;
  const double progress = std::min(1.0, static_cast<double>(step - std::min<uint64_t>(step, t.warmup)) / span);
  const double lo = t.lr * t.min_lr_frac;
  if (t.decay == "linear") return t.lr - (t.lr - lo) * progress;
  return lo + (t.lr - lo) * 0.5 * (1.0 + std::cos(M_PI * progress));
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
  for (const auto& s : table.specs)
    for (size_t b = s.offset; b < s.offset + s.size; b += StateBuffer::kBlock) decay_.push_back(s.decay);
}

void Optimizer::step(const ParamTable&, float* params, const float* grads, double lr, double grad_scale, uint64_t seed,
                     uint64_t step) {
  ++t_;
  const bool sgd = cfg_.optimizer == "sgd";
  SgdCoeffs sc;
  AdamwCoeffs ac;
  sc.lr = ac.lr = static_cast<float>(lr);
  sc.grad_scale = ac.grad_scale = static_cast<float>(grad_scale);
  sc.weight_decay = ac.weight_decay = static_cast<float>(cfg_.weight_decay);
  sc.momentum = static_cast<float>(cfg_.momentum);
  ac.beta1 = static_cast<float>(cfg_.beta1);
  ac.beta2 = static_cast<float>(cfg_.beta2);
  ac.eps = static_cast<float>(cfg_.eps);
  ac.bias1 = static_cast<float>(1.0 - std::pow(cfg_.beta1, static_cast<double>(t_)));
  ac.bias2 = static_cast<float>(1.0 - std::pow(cfg_.beta2, static_cast<double>(t_)));
  // 1 - beta: from the fp32 beta in fp32 (drift's default), or in double and rounded once (torch's
  // Adam); at beta2 = 0.999 the two differ by 1.3e-5 relative (0.999 is not an fp32 value).
  const bool in_fp64 = cfg_.adam_one_minus_beta == "fp64";
  ac.one_minus_beta1 = in_fp64 ? static_cast<float>(1.0 - cfg_.beta1) : 1.0f - ac.beta1;
  ac.one_minus_beta2 = in_fp64 ? static_cast<float>(1.0 - cfg_.beta2) : 1.0f - ac.beta2;
  // The blocks in groups, split over a team when the buffer is large. Within a group, a run of
  // blocks of one tensor whose state is updated where it is stored (fp32, bf16) is one span: a call
  // per 256 elements cost more than the update's arithmetic. Every element's rule is its own and the
  // master rounding's noise is keyed by position, so neither the spans nor the threads change a bit.
  const size_t blocks = m_.blocks();
  const size_t groups = (blocks + kGroupBlocks - 1) / kGroupBlocks;
  const bool in_place = m_.format() != StateFormat::int8_block;
  const size_t elements = blocks ? m_.block_end(blocks - 1) - m_.block_begin(0) : 0;
  for_each_index(groups, worth_threads_elements(elements), [&](size_t group) {
    float mb[StateBuffer::kBlock], vb[StateBuffer::kBlock];  // one decoded block (int8_block)
    const size_t group_end = std::min(blocks, (group + 1) * kGroupBlocks);
    for (size_t blk = group * kGroupBlocks; blk < group_end;) {
      size_t last = blk;  // the run [blk, last]
      while (in_place && last + 1 < group_end && decay_[last + 1] == decay_[blk] &&
             m_.block_begin(last + 1) == m_.block_end(last))
        ++last;
      const size_t lo = m_.block_begin(blk), n = m_.block_end(last) - lo;
      float* p = params + lo;
      float* m = m_.update_begin(blk, mb);
      if (sgd) {
        sgd_update(p, grads + lo, m, n, sc, decay_[blk]);
      } else {
        float* v = v_.update_begin(blk, vb);
        adamw_update(p, grads + lo, m, v, n, ac, decay_[blk]);
        v_.update_end(blk, last, v);
      }
      m_.update_end(blk, last, m);
      master_.apply(p, n, seed, step, lo);
      blk = last + 1;
    }
  });
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
