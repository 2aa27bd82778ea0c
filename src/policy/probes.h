// Probe policies (`diagnostics.probes`): alternative matmul policies whose gradient the deep
// diagnostics compute at the run's weights and batch. Each entry is a matmul preset name or a rule
// list of the same schema as precision.matmul (policy/site_rules.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policy/config_error.h"

namespace drift {

struct ProbePolicy {
  std::string name;      // the preset name, or "probe<i>" for a rule list
  nlohmann::json rules;  // a rule list (a preset name becomes [{"preset": name}])
  std::string path;      // where it came from, for error messages ("diagnostics.probes[0]")
};

// Throws ConfigError naming the entry's path.
std::vector<ProbePolicy> parse_probes(const nlohmann::json& probes, const std::string& path);

}  // namespace drift
