#include "policy/json_keys.h"

namespace drift {

void reject_unknown_keys(const nlohmann::json& obj, const std::string& path, const std::vector<std::string>& known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (const auto& k : known) ok = ok || it.key() == k;
    if (ok) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw ConfigError(path.empty() ? it.key() : path + "." + it.key(), "unknown key (expected one of: " + list + ")");
  }
}

}  // namespace drift
