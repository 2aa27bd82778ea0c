// `drift compare`: runs grouped by policy, the survival statistics of each group, and the order
// that puts the most robust policy first.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "study/run_index.h"

namespace drift {

// The median (mean of the two middle values for an even count); NaN for none. NaNs are ignored.
double median(std::vector<double> values);

// What makes two runs "the same policy".
enum class GroupBy {
  policy,     // the whole resolved config except seed, output and version
  precision,  // the precision section only
};

struct PolicyRow {
  std::string label;
  std::vector<const RunRecord*> runs;  // sorted by seed, then directory
  size_t seeds = 0, diverged = 0;
  double median_divergence_step = NAN;  // over the seeds that diverged
  double median_train_loss = NAN;       // final train loss, over the seeds that did not diverge
  double median_val_loss = NAN;         // final validation loss, likewise
  std::array<double, 3> clip_rate = {NAN, NAN, NAN};  // mean over runs of each run's mean clip rate
  // The spread across seeds: final validation loss over the seeds that did not diverge, divergence
  // step over those that did (NaN where there are none).
  double min_val_loss = NAN, max_val_loss = NAN, min_divergence_step = NAN, max_divergence_step = NAN;
  double elementwise_clip_rate = NAN;  // mean over runs (NaN: no run quantizes elementwise tensors)
  // diag.jsonl: means over the runs that have it of their mean gradient cosine, relative error and
  // bias; the bound violations summed (absent: no run has diagnostics).
  double diag_cosine = NAN, diag_rel_error = NAN, diag_bias = NAN;
  std::optional<uint64_t> bound_violations;
};

// Columns a user asks for beyond the fixed ones.
struct CompareColumns {
  std::optional<uint64_t> loss_at_step;  // --at-step N: the median training loss at step N
  std::vector<std::string> sites;        // --site NAME: that site's mean clip rate of a and of b
};

// The median over the row's runs of the training loss at `step` (runs that logged it; a non-finite
// loss counts as +inf, so a policy whose runs blew up ranks high); NaN when none logged it.
double median_loss_at(const PolicyRow& row, uint64_t step);
// The mean over the row's runs of a site's clip rate of operand a (0) and b (1).
std::array<double, 2> mean_site_clip_rate(const PolicyRow& row, const std::string& site);

// The identity of a run's policy under `by` (a canonical JSON text).
std::string policy_identity(const RunRecord& r, GroupBy by);

// One row per policy, in survival order (see survives_better). Rows whose labels coincide while
// their policies differ get the first config key that tells them apart appended, e.g. "mx [/train/lr=0.1]".
std::vector<PolicyRow> group_by_policy(const std::vector<RunRecord>& runs, GroupBy by);

// Survival order: smaller fraction of seeds diverged first; then later median divergence step;
// then lower median validation loss (NaN last); then label.
bool survives_better(const PolicyRow& a, const PolicyRow& b);

}  // namespace drift
