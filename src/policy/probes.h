// Probe policies (`diagnostics.probes`): alternative matmul policies whose gradient the deep
// diagnostics compute at the run's weights and batch. Each entry is a matmul preset name or a rule
// list of the same schema as precision.matmul (policy/site_rules.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policy/config_error.h"
#include "policy/site_rules.h"

namespace drift {

struct ProbePolicy {
  std::string name;      // the preset name, or "probe<i>" for a rule list
  MatmulRules rules;     // a rule list (a preset name becomes [{"preset": name}]) at the entry's path
  nlohmann::json source; // the entry as written (for the resolved config.json)
  std::string path() const { return rules.path(); }  // where it came from ("diagnostics.probes[0]")
  bool operator==(const ProbePolicy& o) const { return name == o.name && rules == o.rules && source == o.source; }
};

// Throws ConfigError naming the entry's path.
std::vector<ProbePolicy> parse_probes(const nlohmann::json& probes, const std::string& path);

// The entries as written (the inverse of parse_probes).
nlohmann::json probes_source(const std::vector<ProbePolicy>& probes);

}  // namespace drift
