// Finished runs on disk, as `drift compare` reads them: a run directory is one with a
// summary.json; a sweep directory's sweep.json gives its runs their policy labels.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace drift {

// The tensor classes of matmul operands, in the order of every per-class array here.
constexpr std::array<const char*, 3> kTensorClasses = {"activation", "weight", "gradient"};

struct RunRecord {
  std::string dir;
  uint64_t seed = 0;
  std::string label;  // the sweep's policy label plus its --set values; in a bisect, output.name and the
                      // run's directory (e.g. "cfg restore-forward"); else output.name
  nlohmann::json config;          // config.json
  bool diverged = false;
  std::optional<int64_t> divergence_step;
  std::string reason;
  // The divergence record's separate criteria (summary.json; absent in older runs).
  std::optional<int64_t> first_nonfinite_step, spike_step, departure_step;
  uint64_t steps = 0, steps_completed = 0;
  double final_train_loss = NAN, final_val_loss = NAN;  // NaN: null in summary.json
  // Mean over logged steps of clipped / elements, per tensor class (metrics.jsonl "classes");
  // NaN where no logged step has elements of that class.
  std::array<double, 3> clip_rate = {NAN, NAN, NAN};
  // The same mean over the elementwise quantizers' elements (precision.elementwise); NaN without.
  double elementwise_clip_rate = NAN;
  // Per matmul site ("layer.role"): the mean clip rate of operands a and b over logged steps.
  std::map<std::string, std::array<double, 2>> site_clip_rate;
  // The training loss at each logged step (NaN where it was not finite).
  std::map<uint64_t, double> loss_at;
  // diag.jsonl summary (NaN / absent without it): the means over its lines of grad.overall's
  // cosine, rel_error and bias, and the sum of bound_violations.
  double diag_cosine = NAN, diag_rel_error = NAN, diag_bias = NAN;
  std::optional<uint64_t> bound_violations;
};

// The run directories under each path (a run directory itself, or any directory above runs),
// sorted by path, each once. A path that does not exist is an error; one with no runs gives none.
std::vector<std::string> find_run_dirs(const std::vector<std::string>& paths);

// Mean clip rate per class over the metrics.jsonl lines given (see RunRecord::clip_rate).
std::array<double, 3> mean_clip_rates(const std::vector<nlohmann::json>& metrics_lines);

// Mean over lines of clipped / elements summed over the objects under `key` of each line
// ("elementwise": every quantized tensor); NaN when no line has elements there.
double mean_clip_rate_under(const std::vector<nlohmann::json>& metrics_lines, const char* key);

// Reads one run directory (summary.json, config.json, metrics.jsonl, diag.jsonl when present). A sweep.json in the
// directory's parents that lists it supplies the label. Throws std::runtime_error naming the file.
RunRecord read_run(const std::string& dir);

// The label of a sweep run: its policy (else `fallback`), then "key=value" of each override.
std::string sweep_run_label(const nlohmann::json& sweep_entry, const std::string& fallback);

}  // namespace drift
