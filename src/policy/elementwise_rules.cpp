#include "policy/elementwise_rules.h"

#include <fnmatch.h>

#include "arith/catalogue.h"
#include "policy/matmul_json.h"

namespace drift {

using json = nlohmann::json;

namespace {

std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

bool removes(const json& q) { return q.is_null() || (q.is_string() && q.get<std::string>() == "none"); }

bool matches(const json& rule, const ElementwiseSite& s) {
  if (!rule.contains("match")) return true;
  const json& m = rule["match"];
  if (m.contains("layer") && fnmatch(m["layer"].get<std::string>().c_str(), s.layer.c_str(), 0) != 0) return false;
  if (m.contains("tensor") && m["tensor"].get<std::string>() != to_string(s.tensor)) return false;
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

}  // namespace

void check_elementwise_rules(const json& rules, const std::string& path) {
  if (!rules.is_array())
    throw ConfigError(path, "expected a list of rules [{\"match\": {\"layer\": ..., \"tensor\": ...}, \"quantizer\": ...}, ...]");
  for (size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    const std::string rp = at(path, i);
    if (!r.is_object()) throw ConfigError(rp, "expected a rule object {\"match\": {...}, \"quantizer\": ...}");
    for (auto it = r.begin(); it != r.end(); ++it)
      if (it.key() != "match" && it.key() != "quantizer")
        throw ConfigError(rp + "." + it.key(), "unknown key (expected match, quantizer)");
    if (r.contains("match")) {
      const json& m = r["match"];
      const std::string mp = rp + ".match";
      if (!m.is_object()) throw ConfigError(mp, "expected an object {layer, tensor}");
      for (auto it = m.begin(); it != m.end(); ++it) {
        const std::string kp = mp + "." + it.key();
        if (it.key() != "layer" && it.key() != "tensor") throw ConfigError(kp, "unknown key (expected layer, tensor)");
        if (!it->is_string()) throw ConfigError(kp, "expected a string");
      }
      ElemTensor t;
      if (m.contains("tensor") && !parse_elem_tensor(m["tensor"].get<std::string>(), &t))
        throw ConfigError(mp + ".tensor",
                          "unknown tensor '" + m["tensor"].get<std::string>() + "' (expected one of: " + elem_tensor_list() + ")");
    }
    if (!r.contains("quantizer"))
      throw ConfigError(rp + ".quantizer", "missing: expected a quantizer (preset name or object), or \"none\"/null to remove one");
    if (!removes(r["quantizer"])) (void)apply_quantizer_rule(r["quantizer"], rp + ".quantizer", fp32_base());
  }
}

std::optional<Quantizer> resolve_elementwise_site(const json& rules, const std::string& path, const ElementwiseSite& site) {
  check_elementwise_rules(rules, path);
  std::optional<Quantizer> q;
  for (size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    if (!matches(r, site)) continue;
    if (removes(r["quantizer"]))
      q.reset();
    else
      q = apply_quantizer_rule(r["quantizer"], at(path, i) + ".quantizer", q.value_or(fp32_base()));
  }
  return q;
}

void resolve_elementwise(const json& rules, const std::string& path, ElementwiseSites& sites) {
  check_elementwise_rules(rules, path);
  for (auto& s : sites.sites()) {
    // The delayed-scaling history stays (as for matmul sites): a resumed run restores it before
    // resolving, and a scheduled switch keeps the amax history of the tensor.
    s.quantizer = resolve_elementwise_site(rules, path, s);
  }
}

}  // namespace drift
