#include "policy/probes.h"

#include "policy/presets.h"
#include "policy/site_rules.h"

namespace drift {

std::vector<ProbePolicy> parse_probes(const nlohmann::json& probes, const std::string& path) {
  if (!probes.is_array()) throw ConfigError(path, "expected a list of matmul preset names or rule lists");
  std::vector<ProbePolicy> out;
  for (size_t i = 0; i < probes.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const auto& e = probes[i];
    ProbePolicy pp;
    pp.path = p;
    if (e.is_string()) {
      const std::string name = e.get<std::string>();
      if (!find_matmul_preset(name))
        throw ConfigError(p, "unknown matmul preset '" + name + "' (expected one of: " + matmul_preset_list() + ")");
      pp.name = name;
      pp.rules = nlohmann::json::array({{{"preset", name}}});
    } else if (e.is_array()) {
      check_matmul_rules(e, p);
      pp.name = "probe" + std::to_string(i);
      pp.rules = e;
    } else {
      throw ConfigError(p, "expected a matmul preset name or a rule list");
    }
    out.push_back(std::move(pp));
  }
  return out;
}

}  // namespace drift
