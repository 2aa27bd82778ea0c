// Unknown keys are errors: a misspelt key would otherwise silently keep its default. The one check
// of this kind that every JSON object of a config goes through: the training config's sections
// (train/config_fields.h), matmul policies and quantizers (matmul_json.cpp), and the matmul and
// elementwise rules (site_rules.cpp, elementwise_rules.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "policy/config_error.h"

namespace drift {

// Throws ConfigError at "<path>.<key>" ("<key>" at the root) for the first key of `obj` that is not
// in `known`: "unknown key (expected one of: a, b, c)". `obj` must be an object.
void reject_unknown_keys(const nlohmann::json& obj, const std::string& path, const std::vector<std::string>& known);

}  // namespace drift
