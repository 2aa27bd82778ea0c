// One training step's work, shared by the training loop (train/trainer.cpp) and `drift bench
// train` (cli/bench_train.cpp), so that the benchmark times exactly what training does:
//   begin(step)       random streams keyed by the step, telemetry cleared, the loss scale set
//   gradients(step)   the step's batch forward and backward (every rank of simulated data
//                     parallelism, then their reduction in the wire format), unscaled
//   gradient_norms    global and per-tensor norms, one pass (train/grad_norms.h)
//   update            the optimizer step with the clipping factor of the global norm
// The loop's bookkeeping (loss scaler, divergence record, metrics, checkpoints) stays in the trainer.
#pragma once

#include <cstdint>
#include <vector>

#include "arith/format.h"
#include "arith/round.h"
#include "model/model.h"
#include "train/config.h"
#include "train/data.h"
#include "train/grad_norms.h"
#include "train/optimizer.h"

namespace drift {

// Wall-clock seconds spent in forward and backward passes, added to by TrainStep::gradients (the
// reduction and unscaling of simulated data parallelism count as backward), and in the optimizer
// update (the training loop adds it when asked: TrainOptions::phase_times).
struct PhaseTimes {
  double forward_s = 0, backward_s = 0, update_s = 0;
};

// Whether clipping applies: a positive train.grad_clip below the gradient norm (metrics.jsonl's
// grad_clipped).
bool grad_clipped(const TrainConfig& t, double gnorm);
// The clipping factor of the optimizer update: train.grad_clip / gnorm when clipping applies, else 1.
double clip_factor(const TrainConfig& t, double gnorm);

class TrainStep {
 public:
  // `corpus` (used by text models only) and `c`, `m` must outlive this.
  TrainStep(const RunConfig& c, Model<float>& m, const Corpus& corpus);

  void begin(uint64_t step, double loss_scale);
  // m.grads = d(mean loss)/d(params) of step's training batch, times the loss scale unless
  // `unscale` (then divided by it in fp32, as the loss scaler's unscaling does). Returns the mean loss.
  double gradients(uint64_t step, bool unscale, PhaseTimes* times = nullptr);
  // One batch through the model (no backward): windows drawn from `tokens` (text models) or the
  // model's own inputs (proxy), keyed by (stream, draw). Returns the mean loss.
  double forward_batch(const Tokens& tokens, uint64_t stream, uint64_t draw);
  // The optimizer update from the current gradients, clipped by `gnorm` (their global norm).
  void update(Optimizer& opt, double gnorm, double lr, uint64_t step);

  // The windows of the last batch drawn (batch x (context+1) tokens).
  const std::vector<int32_t>& windows() const { return windows_; }

 private:
  const RunConfig& c_;
  Model<float>& m_;
  const Corpus& corpus_;
  std::vector<int32_t> windows_;
  Format ar_format_;
  RoundSpec ar_spec_;
  std::vector<std::vector<float>> rank_grads_;
};

}  // namespace drift
