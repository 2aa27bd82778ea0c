// Loss scaling, as mixed-precision training does it: the loss gradient is multiplied by a scale S
// before the backward pass (so small gradients stay representable in the backward operands'
// format), and the parameter gradients are divided by S before clipping and the update.
//   none     S = 1 always.
//   static   S fixed; a step whose gradient is not finite is skipped (no update) and counted.
//   dynamic  S starts at `init`; a non-finite gradient skips the step and multiplies S by
//            `backoff` (not below `min_scale`); after `interval` consecutive finite steps S is
//            multiplied by `growth` (not above `max_scale`). The PyTorch GradScaler / Megatron rule.
#pragma once

#include <cstdint>
#include <string>

namespace drift {

struct LossScaleConfig {
  std::string kind = "none";  // none | static | dynamic
  double init = 65536.0;      // static: the scale; dynamic: the initial scale
  double growth = 2.0;
  double backoff = 0.5;
  uint64_t interval = 2000;   // dynamic: finite steps before growing
  double min_scale = 1.0;
  double max_scale = 16777216.0;  // 2^24
};

struct LossScaler {
  double scale = 1.0;
  uint64_t good_steps = 0;  // consecutive finite steps since the last change (dynamic)
  uint64_t skipped = 0;     // steps skipped for a non-finite gradient, over the run

  void start(const LossScaleConfig& c);
  bool active(const LossScaleConfig& c) const { return c.kind != "none"; }
  // After a backward pass: `finite` says whether the (scaled) gradient is finite. Returns true
  // when the step's update is to be applied. Updates the scale for the next step.
  bool after_backward(const LossScaleConfig& c, bool finite);
};

}  // namespace drift
