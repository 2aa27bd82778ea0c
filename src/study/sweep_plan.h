// A seed sweep as a list of runs: the cross product seeds × each --set's values × policy files,
// each run a `drift train` with a predictable, filesystem-safe directory
// <policy label>/<key=value,...>/seed<s> under the sweep directory. Pure logic, no processes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace drift {

// Bad sweep arguments; the message names the option or file.
struct SweepError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "1-8", "1,3,5", "1-3,7,10-12" -> the seeds in the order given. Duplicates, empty items,
// reversed ranges and more than kMaxSweepSeeds seeds are errors.
constexpr size_t kMaxSweepSeeds = 100000;
std::vector<uint64_t> parse_seed_list(const std::string& spec);

// Splits at the commas that are not inside [], {} or a JSON string: "[1,2],[3]" -> "[1,2]", "[3]".
std::vector<std::string> split_top_level(const std::string& text);

// One `--set key=v1,v2,...` of a sweep.
struct SweepSet {
  std::string key;
  std::vector<std::string> values;  // the text of each value, as `drift train --set key=value` takes it
};
SweepSet parse_sweep_set(const std::string& arg);

// A policy file, turned into the `--set` assignments that apply it to the base config.
// Accepted forms (docs/workflow.md):
//   a list                -> the precision.matmul rules
//   an object with any top-level config key (seed, model, data, train, precision, divergence,
//   output)              -> an overlay: its "precision" replaces the config's whole precision
//                            section; its other keys are merged key by key (lists replaced)
//   any other object      -> a bare precision section, replacing the config's
//   a string              -> a matmul preset name, as precision.matmul
struct SweepPolicy {
  std::string label;                // the file's stem, made filesystem-safe
  std::string file;
  std::vector<std::string> sets;    // "path=<json>" assignments
};
SweepPolicy policy_from_json(const nlohmann::json& j, const std::string& label, const std::string& file);
SweepPolicy load_policy_file(const std::string& path);

// A name that is safe as one path segment: [A-Za-z0-9._=,+-] kept, anything else '_', no leading
// '.', at most 120 characters, never empty.
std::string safe_segment(const std::string& text);

struct PlannedRun {
  std::string rel_dir;                        // relative to the sweep directory
  uint64_t seed = 0;
  std::string policy;                         // policy label ("" when the sweep has no --policies)
  std::vector<std::pair<std::string, std::string>> overrides;  // every --set of this run (key, value text)
  std::vector<std::pair<std::string, std::string>> varying;    // those whose --set has several values
  std::vector<std::string> sets;              // policy assignments, then the --set assignments
};

// The cross product, policies outermost, then the --set values (first --set slowest), seeds innermost.
// Without policies the label is `base_label` (the config's stem) and nothing is added to the config.
// The directory names only the --set keys that take more than one value. Two runs mapping to one
// directory (after making names safe) is an error.
std::vector<PlannedRun> plan_sweep(const std::vector<uint64_t>& seeds, const std::vector<SweepSet>& sets,
                                   const std::vector<SweepPolicy>& policies, const std::string& base_label);

}  // namespace drift
