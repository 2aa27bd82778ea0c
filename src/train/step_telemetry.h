// Which training steps gather telemetry, and how a step that did not can be computed again with it.
//
// Every matmul's operand statistics (clip, flush and subnormal counts, amax, MX scale tallies) cost
// time: about a twentieth of an attention step under MXFP8 (the casts' counts are a quarter of the
// casts); under fp32 a scan of every operand (whose time, in an attention step, mostly moved to the
// operands' next reader, whose cache lines the scan had fetched). A step's statistics are read only by its metrics line, which only some steps write
// (train.log_every, the evaluation steps, the last step, the first step of a session, whose
// statistics the MX block-length warning reads) and the step a divergence is found at, which no one
// knows in advance. So the other steps leave the statistics out (MatmulContext::telemetry), and a
// divergence found at such a step computes the step again, with telemetry, from the state it
// started in: its products, loss and gradients are the same bits (the step's random streams derive
// from its number), and the only state a step's matmuls advance, delayed scaling's amax histories,
// is put back first. The calls' route counts (summary.json) count the step once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/model.h"

namespace drift {

struct TrainConfig;  // train/config.h

// Whether step `step` writes a metrics line whatever happens: every train.log_every steps, at an
// evaluation, at the last step. (The loop writes one at a divergence too, found only afterwards.)
bool line_scheduled(const TrainConfig& t, uint64_t step);

// Whether step `step` gathers telemetry: a scheduled line, the first step of this session, or the
// deep diagnostics' step (`diag_due`).
bool telemetry_due(const TrainConfig& t, uint64_t step, uint64_t steps_this_session, bool diag_due);

// The delayed-scaling states of a model's matmul and elementwise sites as a step starts. A state
// never touched (no history, scale 1, not initialised: every site without delayed scaling) is not
// copied, so saving costs nothing in runs without delayed scaling.
class DelayedStates {
 public:
  void save(Model<float>& m);
  void restore(Model<float>& m) const;

 private:
  std::vector<std::pair<const DelayedState*, DelayedState>> kept_;  // (where, its value)
};

// The route counts of every matmul site (MatmulSite::routes, traded_calls), to be put back after a
// step computed again.
class RouteCounts {
 public:
  void save(const MatmulSites& sites);
  void restore(MatmulSites& sites) const;

 private:
  std::vector<std::vector<std::pair<const char*, uint64_t>>> routes_;
  std::vector<uint64_t> traded_;
};

}  // namespace drift
