#include "train/loss_scale.h"

#include <algorithm>

namespace drift {

void LossScaler::start(const LossScaleConfig& c) {
  scale = c.kind == "none" ? 1.0 : c.init;
  good_steps = 0;
  skipped = 0;
}

bool LossScaler::after_backward(const LossScaleConfig& c, bool finite) {
  if (c.kind == "none") return true;
  if (!finite) {
    ++skipped;
    good_steps = 0;
    if (c.kind == "dynamic") scale = std::max(c.min_scale, scale * c.backoff);
    return false;
  }
  if (c.kind == "dynamic" && ++good_steps >= c.interval) {
    scale = std::min(c.max_scale, scale * c.growth);
    good_steps = 0;
  }
  return true;
}

}  // namespace drift
