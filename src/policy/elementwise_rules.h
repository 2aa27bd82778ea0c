// The cascade of elementwise precision rules: `precision.elementwise` is an ordered list of
//   { "match": { "layer": <glob>, "tensor": ln_weight|ln_bias|ln_out|act_in|act_out|softmax },
//     "quantizer": QUANT | "none" | null }
// (QUANT as in matmul_json.h: a quantizer preset name or {preset, format, rounding, overflow,
// subnormals, sr_bits, scaling}). A site (model/elementwise.h) matches when every key of `match`
// does (a missing key or a missing `match` matches all). Matching rules apply in order and later
// rules win: a QUANT applies on top of the site's quantizer so far (or of the fp32 base when it has
// none, as for matmul operands), so {"rounding": "sr"} changes only the rounding; "none" or null
// removes the quantizer. With no rule, nothing is quantized.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/elementwise.h"
#include "policy/config_error.h"
#include "policy/rule_list.h"

namespace drift {

// One rule, its match parsed.
struct ElementwiseRule {
  std::optional<std::string> layer;   // glob (fnmatch)
  std::optional<std::string> tensor;  // an ElemTensor name (checked)
  nlohmann::json quantizer;           // QUANT; null when the rule removes the quantizer ("none" or null)

  static constexpr const char* kListExpected =
      "expected a list of rules [{\"match\": {\"layer\": ..., \"tensor\": ...}, \"quantizer\": ...}, ...]";
  static ElementwiseRule parse(const nlohmann::json& rule, const std::string& path);  // Throws ConfigError.
};

// Checks the rule list's shape and every quantizer on its own (on the fp32 base), throwing
// ConfigError at the rule's path (e.g. "precision.elementwise[1].quantizer.scaling.kind").
using ElementwiseRules = RuleList<ElementwiseRule>;

void check_elementwise_rules(const nlohmann::json& rules, const std::string& path);

// Sets every site's quantizer from the rules (earlier settings are discarded). Throws ConfigError.
void resolve_elementwise(const ElementwiseRules& rules, ElementwiseSites& sites);
void resolve_elementwise(const nlohmann::json& rules, const std::string& path, ElementwiseSites& sites);

// The quantizer one site gets under the rules (std::nullopt: none).
std::optional<Quantizer> resolve_elementwise_site(const ElementwiseRules& rules, const ElementwiseSite& site);
std::optional<Quantizer> resolve_elementwise_site(const nlohmann::json& rules, const std::string& path,
                                                  const ElementwiseSite& site);

}  // namespace drift
