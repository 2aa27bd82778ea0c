// Optimizers over the master weights (one buffer; the model's ParamTable says which tensors get
// weight decay), the learning-rate schedule and the global gradient norm.
//
// Precision of the optimizer (PrecisionConfig): the state vectors (SGD momentum; AdamW m and v) are
// stored as fp32, bf16 or 8-bit block-wise (train/opt_state.h); the master weights are rounded to
// the master format after every update (rne or stochastic rounding, the latter keyed by
// (seed, step, element) so that runs stay reproducible). fp32 everywhere is plain fp32 training.
#pragma once

#include <cstdint>
#include <vector>

#include "arith/format.h"
#include "arith/round.h"
#include "model/params.h"
#include "train/blob.h"
#include "train/config.h"
#include "train/opt_state.h"

namespace drift {

// lr at `step` (0-based): linear warmup over `warmup` steps ((step+1)/warmup * lr), then cosine or
// linear decay from lr to min_lr_frac * lr at the last step, or constant.
double learning_rate(const TrainConfig& t, uint64_t step);

// The master-weight rounding: format, spec and random stream of `step`.
struct MasterRounding {
  bool enabled = false;  // false for fp32 (a no-op)
  Format format;
  RoundSpec spec;
  static MasterRounding from(const MasterConfig& m);
  // Rounds p[0..n) (elements [first, first+n) of the buffer) in place.
  void apply(float* p, size_t n, uint64_t seed, uint64_t step, size_t first) const;
};

class Optimizer {
 public:
  Optimizer(const TrainConfig& t, const PrecisionConfig& p, const ParamTable& table);
  // One update of params from grads * grad_scale (the clipping factor; 1 when not clipping), then
  // the master rounding. `step` and `seed` key stochastic master rounding.
  //   sgd:   g' = g*s + wd*p (decay tensors);  m = momentum*m + g';  p -= lr*m
  //   adamw: m = b1*m + (1-b1)*g*s;  v = b2*v + (1-b2)*(g*s)^2;  p -= lr*(m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd*p)
  // All in fp32, element by element (train/update_rules.h); m and v are updated in their state
  // format's storage (fp32, bf16) or decoded and re-quantized block by block (int8_block).
  void step(const ParamTable& table, float* params, const float* grads, double lr, double grad_scale, uint64_t seed,
            uint64_t step);
  const MasterRounding& master() const { return master_; }
  void save(BlobWriter& w) const;
  void restore(BlobReader& r);

 private:
  TrainConfig cfg_;
  MasterRounding master_;
  StateBuffer m_, v_;
  std::vector<uint8_t> decay_;  // per block: the tensor takes weight decay
  // Blocks per work item of the update's team (16k elements).
  static constexpr size_t kGroupBlocks = 64;
  uint64_t t_ = 0;
};

}  // namespace drift
