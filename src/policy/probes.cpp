#include "policy/probes.h"

#include "policy/presets.h"

namespace drift {

std::vector<ProbePolicy> parse_probes(const nlohmann::json& probes, const std::string& path) {
  if (!probes.is_array()) throw ConfigError(path, "expected a list of matmul preset names or rule lists");
  std::vector<ProbePolicy> out;
  for (size_t i = 0; i < probes.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const auto& e = probes[i];
    ProbePolicy pp;
    pp.source = e;
    if (e.is_string()) {
      const std::string name = e.get<std::string>();
      if (!find_matmul_preset(name))
        throw ConfigError(p, "unknown matmul preset '" + name + "' (expected one of: " + matmul_preset_list() + ")");
      pp.name = name;
      pp.rules = MatmulRules(nlohmann::json::array({{{"preset", name}}}), p);
    } else if (e.is_array()) {
      pp.name = "probe" + std::to_string(i);
      pp.rules = MatmulRules(e, p);
    } else {
      throw ConfigError(p, "expected a matmul preset name or a rule list");
    }
    out.push_back(std::move(pp));
  }
  return out;
}

nlohmann::json probes_source(const std::vector<ProbePolicy>& probes) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : probes) out.push_back(p.source);
  return out;
}

}  // namespace drift
