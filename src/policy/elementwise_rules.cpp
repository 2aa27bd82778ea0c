#include "policy/elementwise_rules.h"

#include <fnmatch.h>

#include "arith/catalogue.h"
#include "policy/json_keys.h"
#include "policy/matmul_json.h"

namespace drift {

using json = nlohmann::json;

namespace {

bool removes(const json& q) { return q.is_null() || (q.is_string() && q.get<std::string>() == "none"); }

bool matches(const ElementwiseRule& r, const ElementwiseSite& s) {
  if (r.layer && fnmatch(r.layer->c_str(), s.layer.c_str(), 0) != 0) return false;
  if (r.tensor && *r.tensor != to_string(s.tensor)) return false;
  return true;
}

Quantizer fp32_base() {
  Quantizer q;
  q.format = *find_format("fp32");
  return q;
}

// The rule's quantizer on top of `base`, with the elementwise restriction checked.
Quantizer apply_quantizer_rule(const json& q, const std::string& qp, const Quantizer& base) {
  Quantizer out = parse_quantizer(q, qp, base);
  if (out.scaling.hadamard != 0)
    throw ConfigError(qp + ".scaling.hadamard",
                      "a Hadamard transform needs the other matmul operand to cancel it; elementwise tensors have "
                      "none (expected 0)");
  return out;
}

void parse_match(const json& m, const std::string& mp, ElementwiseRule& out) {
  if (!m.is_object()) throw ConfigError(mp, "expected an object {layer, tensor}");
  reject_unknown_keys(m, mp, {"layer", "tensor"});
  for (auto it = m.begin(); it != m.end(); ++it)
    if (!it->is_string()) throw ConfigError(mp + "." + it.key(), "expected a string");
  if (m.contains("layer")) out.layer = m["layer"].get<std::string>();
  ElemTensor t;
  if (m.contains("tensor") && !parse_elem_tensor(m["tensor"].get<std::string>(), &t))
    throw ConfigError(mp + ".tensor",
                      "unknown tensor '" + m["tensor"].get<std::string>() + "' (expected one of: " + elem_tensor_list() + ")");
  if (m.contains("tensor")) out.tensor = m["tensor"].get<std::string>();
}

}  // namespace

ElementwiseRule ElementwiseRule::parse(const json& r, const std::string& rp) {
  if (!r.is_object()) throw ConfigError(rp, "expected a rule object {\"match\": {...}, \"quantizer\": ...}");
  reject_unknown_keys(r, rp, {"match", "quantizer"});
  ElementwiseRule out;
  if (r.contains("match")) parse_match(r["match"], rp + ".match", out);
  if (!r.contains("quantizer"))
    throw ConfigError(rp + ".quantizer", "missing: expected a quantizer (preset name or object), or \"none\"/null to remove one");
  if (!removes(r["quantizer"])) {
    (void)apply_quantizer_rule(r["quantizer"], rp + ".quantizer", fp32_base());
    out.quantizer = r["quantizer"];
  }
  return out;
}

void check_elementwise_rules(const json& rules, const std::string& path) { (void)ElementwiseRules(rules, path); }

std::optional<Quantizer> resolve_elementwise_site(const ElementwiseRules& rules, const ElementwiseSite& site) {
  std::optional<Quantizer> q;
  for (size_t i = 0; i < rules.rules().size(); ++i) {
    const ElementwiseRule& r = rules.rules()[i];
    if (!matches(r, site)) continue;
    if (r.quantizer.is_null())
      q.reset();
    else
      q = apply_quantizer_rule(r.quantizer, rules.rule_path(i) + ".quantizer", q.value_or(fp32_base()));
  }
  return q;
}

std::optional<Quantizer> resolve_elementwise_site(const json& rules, const std::string& path, const ElementwiseSite& site) {
  return resolve_elementwise_site(ElementwiseRules(rules, path), site);
}

void resolve_elementwise(const ElementwiseRules& rules, ElementwiseSites& sites) {
  for (auto& s : sites.sites()) {
    // The delayed-scaling history stays (as for matmul sites): a resumed run restores it before
    // resolving, and a scheduled switch keeps the amax history of the tensor.
    s.quantizer = resolve_elementwise_site(rules, s);
  }
}

void resolve_elementwise(const json& rules, const std::string& path, ElementwiseSites& sites) {
  resolve_elementwise(ElementwiseRules(rules, path), sites);
}

}  // namespace drift
