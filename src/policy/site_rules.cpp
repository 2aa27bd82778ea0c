#include "policy/site_rules.h"

#include <fnmatch.h>

#include "arith/catalogue.h"
#include "policy/json_keys.h"
#include "policy/matmul_json.h"

namespace drift {

using json = nlohmann::json;

namespace {

bool matches(const MatmulRule& r, const MatmulSite& s) {
  if (r.layer && fnmatch(r.layer->c_str(), s.layer.c_str(), 0) != 0) return false;
  if (r.role && *r.role != to_string(s.role)) return false;
  if (r.cls && *r.cls != to_string(s.a_class) && *r.cls != to_string(s.b_class)) return false;
  return true;
}

MatmulPolicy apply_rule(const MatmulRule& rule, const std::string& rp, const MatmulSite& s, const MatmulPolicy& base) {
  MatmulPolicy p = apply_matmul_policy(rule.policy, rp, base);
  if (!rule.operand.is_null()) {
    json ops = json::object();
    if (*rule.cls == to_string(s.a_class)) ops["a"] = rule.operand;
    if (*rule.cls == to_string(s.b_class)) ops["b"] = rule.operand;
    try {
      p = apply_matmul_policy(ops, rp, p);
    } catch (const ConfigError& e) {
      // Report at the rule's "operand" key, whichever side it landed on.
      std::string sub = e.path;
      for (const char* side : {".a", ".b"})
        if (auto k = sub.find(rp + side); k == 0) sub = rp + ".operand" + sub.substr(rp.size() + 2);
      throw ConfigError(sub, e.message);
    }
  }
  return p;
}

// rules[i]'s match, checked: {layer, role, class}, each a string; role and class known names.
void parse_match(const json& m, const std::string& mp, MatmulRule& out) {
  if (!m.is_object()) throw ConfigError(mp, "expected an object {layer, role, class}");
  reject_unknown_keys(m, mp, {"layer", "role", "class"});
  for (auto it = m.begin(); it != m.end(); ++it)
    if (!it->is_string()) throw ConfigError(mp + "." + it.key(), "expected a string");
  if (m.contains("layer")) out.layer = m["layer"].get<std::string>();
  Role role;
  if (m.contains("role") && !parse_role(m["role"].get<std::string>(), &role))
    throw ConfigError(mp + ".role", "unknown role '" + m["role"].get<std::string>() +
                                        "' (expected forward, grad_input or grad_weight)");
  if (m.contains("role")) out.role = m["role"].get<std::string>();
  TensorClass cls;
  if (m.contains("class") && !parse_tensor_class(m["class"].get<std::string>(), &cls))
    throw ConfigError(mp + ".class", "unknown tensor class '" + m["class"].get<std::string>() +
                                         "' (expected activation, weight or gradient)");
  if (m.contains("class")) out.cls = m["class"].get<std::string>();
}

}  // namespace

MatmulRule MatmulRule::parse(const json& r, const std::string& rp) {
  if (!r.is_object()) throw ConfigError(rp, "expected a rule object {\"match\": {...}, <policy keys>}");
  reject_unknown_keys(r, rp, {"match", "operand", "preset", "a", "b", "product", "inner", "outer", "output"});
  MatmulRule out;
  if (r.contains("match")) parse_match(r["match"], rp + ".match", out);
  if (r.contains("operand") && !out.cls)
    throw ConfigError(rp + ".operand", "needs match.class: it applies to the operands of that class");
  if (r.contains("operand")) out.operand = r["operand"];
  out.policy = r;
  out.policy.erase("match");
  out.policy.erase("operand");
  return out;
}

void check_matmul_rules(const json& rules, const std::string& path) { (void)MatmulRules(rules, path); }

MatmulPolicy resolve_site_policy(const MatmulRules& rules, const MatmulSite& site, const MatmulPolicy& base) {
  MatmulPolicy p = base;
  for (size_t i = 0; i < rules.rules().size(); ++i)
    if (matches(rules.rules()[i], site)) p = apply_rule(rules.rules()[i], rules.rule_path(i), site, p);
  return p;
}

MatmulPolicy resolve_site_policy(const json& rules, const std::string& path, const MatmulSite& site,
                                 const MatmulPolicy& base) {
  return resolve_site_policy(MatmulRules(rules, path), site, base);
}

MatmulPolicy resolve_site_policy_traced(const MatmulRules& rules, const MatmulSite& site, const MatmulPolicy& base,
                                        FieldOrigins& origins) {
  MatmulPolicy p = base;
  json before = policy_to_json(p).flatten();
  for (size_t i = 0; i < rules.rules().size(); ++i) {
    if (!matches(rules.rules()[i], site)) continue;
    p = apply_rule(rules.rules()[i], rules.rule_path(i), site, p);
    const json after = policy_to_json(p).flatten();
    for (auto it = after.begin(); it != after.end(); ++it)
      if (!before.contains(it.key()) || before[it.key()] != it.value()) origins[it.key()] = rules.rule_path(i);
    before = after;
  }
  return p;
}

void resolve_sites(const MatmulRules& rules, MatmulSites& sites) {
  for (auto& s : sites.sites()) s.policy = resolve_site_policy(rules, s);
  for (size_t i = 0; i < rules.rules().size(); ++i) {
    const MatmulRule& r = rules.rules()[i];
    bool used = false;
    for (const auto& s : sites.sites()) used = used || matches(r, s);
    if (!used) (void)apply_matmul_policy(r.policy, rules.rule_path(i), MatmulPolicy());
  }
}

void resolve_sites(const json& rules, const std::string& path, MatmulSites& sites) {
  resolve_sites(MatmulRules(rules, path), sites);
}

std::string describe_quantizer(const Quantizer& q) {
  std::string s = format_name(q.format);
  if (q.round.mode != Rounding::rne) s.append(" ").append(to_string(q.round.mode));
  // The kind's name; for a blocked kind its block ("block32", "tile128x128"); for MX the exponent rule.
  const ScaleKindTraits& kind = scale_kind_traits(q.scaling.kind);
  if (kind.scaled()) {
    s += ' ';
    s += kind.name;
  }
  if (kind.blocked()) {
    s += std::to_string(q.scaling.block);
    if (q.scaling.two_d) s.append("x").append(std::to_string(q.scaling.block));
  }
  if (kind.block_rule == BlockScaleRule::e8m0_exponent) {
    s += ' ';
    s += to_string(q.scaling.rule);
  }
  if (q.scaling.hadamard) s += " had" + std::to_string(q.scaling.hadamard);
  return s;
}

std::string describe_accumulator(const Accumulator& a) {
  std::string s = format_name(a.format);
  if (a.round.mode != Rounding::rne) s.append(" ").append(to_string(a.round.mode));
  if (a.fused)
    s += " fused";
  else if (a.order != SumOrder::sequential)
    s.append(" ").append(to_string(a.order));
  if (a.promote_every) s += " /" + std::to_string(a.promote_every);
  return s;
}

namespace {

std::string rounding_text(const Format& f, const RoundSpec& r) {
  std::string s = format_name(f) + " " + to_string(r.mode);
  if (r.mode == Rounding::sr) s += std::to_string(r.sr_bits);
  s += std::string(" ") + to_string(r.overflow);
  if (f.kind == Kind::floating && flushes(f, r)) s += " flush";
  return s;
}

// The scale each kind of scaling applies (the format its scale factors are kept in), where, and
// what its rules add: "scale e8m0 per 32 along K, floor", "scale fp32 per tensor (current amax)".
std::string scale_text(const Scaling& sc) {
  const ScaleKindTraits& kind = scale_kind_traits(sc.kind);
  if (!kind.scaled()) return "";
  std::string s = "scale ";
  s += kind.pow2_option && sc.pow2 ? "a power of two" : kind.scale_format;
  s += " per ";
  const std::string block = std::to_string(sc.block);
  if (!kind.blocked()) s += "tensor";
  else if (sc.two_d) s += block + "x" + block;
  else s += block + " along K";
  if (kind.tensor_rule == TensorScaleRule::current_amax) s += " (current amax)";
  if (kind.tensor_rule == TensorScaleRule::amax_history) s += " (amax history " + std::to_string(sc.history) + ")";
  if (kind.block_rule == BlockScaleRule::e8m0_exponent) {
    s += ", ";
    s += to_string(sc.rule);
    if (sc.offset) s += " offset " + std::to_string(sc.offset);
  }
  if (kind.two_level()) s += " under an fp32 tensor scale";
  return s;
}

}  // namespace

std::string describe_operand_rounding(const Quantizer& q) {
  std::string s = rounding_text(q.format, q.round);
  if (const std::string sc = scale_text(q.scaling); !sc.empty()) s += "; " + sc;
  if (q.scaling.hadamard) s += "; Hadamard " + std::to_string(q.scaling.hadamard);
  return s;
}

std::string describe_sum(const Accumulator& a) {
  std::string s = rounding_text(a.format, a.round) + " ";
  s += a.fused ? "fused tensor-core model" : to_string(a.order);
  if (a.promote_every) s += ", promoted every " + std::to_string(a.promote_every);
  return s;
}

std::string describe_output(const Format& f, const RoundSpec& r) { return rounding_text(f, r); }

}  // namespace drift
