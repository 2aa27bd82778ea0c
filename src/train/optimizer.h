// Optimizers over the fp32 master weights (one buffer, the model's ParamTable says which tensors
// get weight decay), the learning-rate schedule and the global gradient norm.
#pragma once

#include <cstdint>
#include <vector>

#include "model/params.h"
#include "train/config.h"

namespace drift {

// lr at `step` (0-based): linear warmup over `warmup` steps ((step+1)/warmup * lr), then cosine or
// linear decay from lr to min_lr_frac * lr at the last step, or constant.
double learning_rate(const TrainConfig& t, uint64_t step);

// sqrt(sum g^2), summed in double in index order (deterministic).
double global_norm(const float* g, size_t n);

class Optimizer {
 public:
  explicit Optimizer(const TrainConfig& t, size_t n);
  // One update of params from grads * grad_scale (the clipping factor; 1 when not clipping).
  //   sgd:   g' = g*s + wd*p (decay tensors);  m = momentum*m + g';  p -= lr*m
  //   adamw: m = b1*m + (1-b1)*g*s;  v = b2*v + (1-b2)*(g*s)^2;  p -= lr*(m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd*p)
  // All in fp32, element by element.
  void step(const ParamTable& table, float* params, const float* grads, double lr, double grad_scale);
  uint64_t steps_taken() const { return t_; }

 private:
  TrainConfig cfg_;
  std::vector<float> m_, v_;
  uint64_t t_ = 0;
};

}  // namespace drift
