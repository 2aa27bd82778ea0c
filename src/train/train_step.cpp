#include "train/train_step.h"

#include <chrono>

#include "arith/catalogue.h"
#include "train/allreduce.h"

namespace drift {

bool grad_clipped(const TrainConfig& t, double gnorm) { return t.grad_clip > 0 && gnorm > t.grad_clip; }

double clip_factor(const TrainConfig& t, double gnorm) { return grad_clipped(t, gnorm) ? t.grad_clip / gnorm : 1.0; }

TrainStep::TrainStep(const RunConfig& c, Model<float>& m, const Corpus& corpus)
    : c_(c), m_(m), corpus_(corpus), windows_(c.train.batch * (c.model.context + 1)) {
  const AllreduceConfig& ar = c.precision.allreduce;
  ar_format_ = *find_format(ar.format);  // checked by the config parser
  ar_spec_.mode = *parse_rounding(ar.rounding);
  rank_grads_.resize(ar.ranks);
}

void TrainStep::begin(uint64_t step, double loss_scale) {
  m_.begin_step(step);
  m_.reset_telemetry();
  m_.loss_scale = loss_scale;
}

double TrainStep::forward_batch(const Tokens& tokens, uint64_t stream, uint64_t draw) {
  if (!m_.needs_text())  // training batches carry the label noise, validation batches do not
    return m_.forward_generated(stream, draw, c_.train.batch,
                                stream == kTrainDataStream ? std::optional<uint64_t>(kLabelNoiseStream) : std::nullopt);
  sample_windows(tokens, c_.model.context, c_.train.batch, c_.seed, stream, draw, windows_.data());
  return m_.forward(windows_.data(), c_.train.batch);
}

double TrainStep::gradients(uint64_t step, bool unscale, PhaseTimes* times) {
  using clock = std::chrono::steady_clock;
  auto lap = [times, t = clock::now()](double PhaseTimes::*phase) mutable {
    if (!times) return;
    const auto now = clock::now();
    times->*phase += std::chrono::duration<double>(now - t).count();
    t = now;
  };
  const AllreduceConfig& ar = c_.precision.allreduce;
  double loss = 0;
  if (ar.ranks == 1) {
    loss = forward_batch(corpus_.train, kTrainDataStream, step);
    lap(&PhaseTimes::forward_s);
    m_.backward();
  } else {
    sample_windows(corpus_.train, c_.model.context, c_.train.batch, c_.seed, kTrainDataStream, step, windows_.data());
    // Simulated data parallelism: each rank's share of the batch, then the reduction in the
    // wire format (of the loss-scaled gradients, as real training reduces them), then the mean.
    const size_t share = c_.train.batch / ar.ranks, width = c_.model.context + 1;
    double total = 0;
    for (size_t r = 0; r < ar.ranks; ++r) {
      total += m_.forward(windows_.data() + r * share * width, share);
      lap(&PhaseTimes::forward_s);
      m_.backward();
      rank_grads_[r] = m_.grads;
      lap(&PhaseTimes::backward_s);
    }
    simulated_allreduce(rank_grads_, m_.grads.data(), m_.grads.size(), ar_format_, ar_spec_, ar.order);
    const float ranks = static_cast<float>(ar.ranks);
    for (float& g : m_.grads) g = g / ranks;
    loss = total / static_cast<double>(ar.ranks);
  }
  if (unscale) {
    const float s = static_cast<float>(m_.loss_scale);
    for (float& g : m_.grads) g = g / s;
  }
  lap(&PhaseTimes::backward_s);
  return loss;
}

void TrainStep::update(Optimizer& opt, double gnorm, double lr, uint64_t step) {
  opt.step(m_.table, m_.params.data(), m_.grads.data(), lr, clip_factor(c_.train, gnorm), c_.seed, step);
}

}  // namespace drift
