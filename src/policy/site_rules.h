// The cascade of precision rules (DESIGN.md, "Policy"): `precision.matmul` is an ordered list of
//   { "match": { "layer": <glob>, "role": forward|grad_input|grad_weight, "class": activation|weight|gradient },
//     <POLICY keys of matmul_json.h: preset, a, b, product, inner, outer, output>,
//     "operand": QUANT }
// A site matches when every key of `match` does (a missing key matches all; `class` matches when
// either operand has that class). Each matching rule is applied, in order, on top of the
// resolution so far (apply_matmul_policy), starting from the fp32 passthrough MatmulPolicy();
// later rules win. "operand" (only with match.class) is a quantizer applied to whichever operand(s)
// of the site have that class, e.g. every weight operand of every site.
#pragma once

#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "arith/matmul.h"
#include "model/sites.h"
#include "policy/config_error.h"
#include "policy/rule_list.h"

namespace drift {

// One rule, its match parsed. The policy keys stay JSON: they are overrides that apply on top of
// whatever the earlier rules resolved (apply_matmul_policy), so they have no meaning on their own.
struct MatmulRule {
  std::optional<std::string> layer;  // glob (fnmatch)
  std::optional<std::string> role;   // forward | grad_input | grad_weight (checked)
  std::optional<std::string> cls;    // activation | weight | gradient (checked)
  nlohmann::json policy;             // the rule's POLICY keys (the rule without match and operand)
  nlohmann::json operand;            // QUANT for the operands of class `cls`; null: none

  static constexpr const char* kListExpected = "expected a list of rules [{\"match\": {...}, <policy keys>}, ...]";
  static MatmulRule parse(const nlohmann::json& rule, const std::string& path);  // Throws ConfigError.
};

using MatmulRules = RuleList<MatmulRule>;

// Throws ConfigError (naming the rule's path) for a malformed rule list.
void check_matmul_rules(const nlohmann::json& rules, const std::string& path);

// The policy of one site under the rules. Throws ConfigError.
MatmulPolicy resolve_site_policy(const MatmulRules& rules, const MatmulSite& site, const MatmulPolicy& base = MatmulPolicy());
// The same on a rule list at `path` in the document (checked first).
MatmulPolicy resolve_site_policy(const nlohmann::json& rules, const std::string& path, const MatmulSite& site,
                                 const MatmulPolicy& base = MatmulPolicy());

// Resolves every site of `sites` in place. Rules that match no site are still checked against the
// default policy, so that a typo does not pass silently. Throws ConfigError.
void resolve_sites(const MatmulRules& rules, MatmulSites& sites);
void resolve_sites(const nlohmann::json& rules, const std::string& path, MatmulSites& sites);

// Which rule set each field of a site's policy: the leaves of policy_to_json (JSON pointers such as
// "/a/format", "/inner/order") mapped to the path of the last rule that changed them
// ("precision.matmul[1]"); a leaf no rule changed is absent (the default, MatmulPolicy()).
using FieldOrigins = std::map<std::string, std::string>;

// resolve_site_policy, recording in `origins` (updated in place, so that a later rule list applied
// on top, e.g. a schedule entry, adds to the attributions of an earlier one).
MatmulPolicy resolve_site_policy_traced(const MatmulRules& rules, const MatmulSite& site, const MatmulPolicy& base,
                                        FieldOrigins& origins);

// A one-line description of a quantizer / accumulator / rounding target for tables.
std::string describe_quantizer(const Quantizer& q);
std::string describe_accumulator(const Accumulator& a);
// The same with every decision spelled out, for drift explain: rounding and overflow always, flush
// when in force, and the scale: its format (e8m0 for MX blocks, e4m3 blocks under an fp32 tensor
// scale for nvfp4, fp32 or a power of two for tensor, delayed and tile scales), e.g.
// "fp8_e4m3 rne saturate; scale e8m0 per 32 along K, floor"; the sum's order ("fp32 rne sequential").
std::string describe_operand_rounding(const Quantizer& q);
std::string describe_sum(const Accumulator& a);
std::string describe_output(const Format& f, const RoundSpec& r);

}  // namespace drift
