// One `drift train` run as another command (sweep, bisect) launches it: the arguments of the child
// process, and the config that child will resolve, computed here the same way `drift train` does
// (config file, output.name defaulting to the file's stem, each --set in order, --seed, --out), so
// that bad input is reported before anything starts and a finished run can be recognised.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace drift {

struct TrainRun {
  std::string config;             // the config file
  std::vector<std::string> sets;  // "path=value" assignments, applied in order
  uint64_t seed = 0;
  std::string dir;                // the run directory (--out)
  bool resume = false;            // continue an unfinished run from its checkpoint.bin (--resume)
};

// ["train", "--config", config, "--set", s..., "--seed", N, "--out", dir, "--quiet"(, "--resume")]
std::vector<std::string> train_args(const TrainRun& r);

// The run that train_args wrote these arguments for (a sweep.json "args" list); throws
// std::invalid_argument naming what is out of place when they are not of that form.
TrainRun train_run_from_args(const std::vector<std::string>& args);

// The config `drift train` would write to config.json, without "version" and "model.vocab" (the
// tokenizer sets it), after checking it as drift train does before it writes anything (the data
// file aside): keys, values, and every precision rule resolved at every site. Throws ConfigError.
nlohmann::ordered_json planned_config(const TrainRun& r);

// The first JSON path (e.g. "/train/lr") where a finished run's config.json differs from `planned`,
// "version" and "model.vocab" aside; nullopt when they agree.
std::optional<std::string> config_difference(const nlohmann::json& existing, const nlohmann::ordered_json& planned);

}  // namespace drift
