// What a config or a resume is refused with, for tests that assert the refusal names the right
// key or file: the JSON path of parse_run_config's ConfigError, and the message of --resume's
// CheckpointError.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"

namespace drift::test {

// The path of the ConfigError parse_run_config raises for `j`, or "(no error)".
inline std::string config_error_path(const nlohmann::json& j) {
  try {
    parse_run_config(j);
  } catch (const ConfigError& e) {
    return e.path;
  }
  return "(no error)";
}

// Continue the run `rc` describes (drift train --resume): the CheckpointError it raises, or
// "(no CheckpointError)" when it resumes.
inline std::string resume_error(const RunConfig& rc) {
  PreparedRun r = prepare_run(rc);
  TrainOptions o;
  o.resume = true;
  try {
    train(r, o, {});
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "(no CheckpointError)";
}

}  // namespace drift::test
