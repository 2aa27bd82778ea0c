#include "policy/site_rules.h"

#include <fnmatch.h>

#include "arith/catalogue.h"
#include "policy/matmul_json.h"

namespace drift {

using json = nlohmann::json;

namespace {

std::string at(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

bool matches(const json& match, const MatmulSite& s) {
  if (match.contains("layer") && fnmatch(match["layer"].get<std::string>().c_str(), s.layer.c_str(), 0) != 0)
    return false;
  if (match.contains("role") && match["role"].get<std::string>() != to_string(s.role)) return false;
  if (match.contains("class")) {
    const std::string c = match["class"].get<std::string>();
    if (c != to_string(s.a_class) && c != to_string(s.b_class)) return false;
  }
  return true;
}

// The rule without its own keys: what apply_matmul_policy reads.
json policy_part(const json& rule) {
  json p = rule;
  p.erase("match");
  p.erase("operand");
  return p;
}

MatmulPolicy apply_rule(const json& rule, const std::string& rp, const MatmulSite& s, const MatmulPolicy& base) {
  MatmulPolicy p = apply_matmul_policy(policy_part(rule), rp, base);
  if (rule.contains("operand")) {
    const std::string c = rule["match"]["class"].get<std::string>();
    json ops = json::object();
    if (c == to_string(s.a_class)) ops["a"] = rule["operand"];
    if (c == to_string(s.b_class)) ops["b"] = rule["operand"];
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

}  // namespace

void check_matmul_rules(const json& rules, const std::string& path) {
  if (!rules.is_array()) throw ConfigError(path, "expected a list of rules [{\"match\": {...}, <policy keys>}, ...]");
  for (size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    const std::string rp = at(path, i);
    if (!r.is_object()) throw ConfigError(rp, "expected a rule object {\"match\": {...}, <policy keys>}");
    for (auto it = r.begin(); it != r.end(); ++it) {
      static const char* const kKeys[] = {"match", "operand", "preset", "a", "b", "product", "inner", "outer", "output"};
      bool ok = false;
      for (const char* k : kKeys) ok = ok || it.key() == k;
      if (!ok)
        throw ConfigError(rp + "." + it.key(),
                          "unknown key (expected match, operand, preset, a, b, product, inner, outer, output)");
    }
    if (r.contains("match")) {
      const json& m = r["match"];
      const std::string mp = rp + ".match";
      if (!m.is_object()) throw ConfigError(mp, "expected an object {layer, role, class}");
      for (auto it = m.begin(); it != m.end(); ++it) {
        const std::string kp = mp + "." + it.key();
        if (it.key() != "layer" && it.key() != "role" && it.key() != "class")
          throw ConfigError(kp, "unknown key (expected layer, role, class)");
        if (!it->is_string()) throw ConfigError(kp, "expected a string");
      }
      Role role;
      if (m.contains("role") && !parse_role(m["role"].get<std::string>(), &role))
        throw ConfigError(mp + ".role", "unknown role '" + m["role"].get<std::string>() +
                                            "' (expected forward, grad_input or grad_weight)");
      TensorClass cls;
      if (m.contains("class") && !parse_tensor_class(m["class"].get<std::string>(), &cls))
        throw ConfigError(mp + ".class", "unknown tensor class '" + m["class"].get<std::string>() +
                                             "' (expected activation, weight or gradient)");
    }
    if (r.contains("operand") && !(r.contains("match") && r["match"].contains("class")))
      throw ConfigError(rp + ".operand", "needs match.class: it applies to the operands of that class");
  }
}

MatmulPolicy resolve_site_policy(const json& rules, const std::string& path, const MatmulSite& site,
                                 const MatmulPolicy& base) {
  check_matmul_rules(rules, path);
  MatmulPolicy p = base;
  for (size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    if (r.contains("match") && !matches(r["match"], site)) continue;
    p = apply_rule(r, at(path, i), site, p);
  }
  return p;
}

MatmulPolicy resolve_site_policy_traced(const json& rules, const std::string& path, const MatmulSite& site,
                                        const MatmulPolicy& base, FieldOrigins& origins) {
  check_matmul_rules(rules, path);
  MatmulPolicy p = base;
  json before = policy_to_json(p).flatten();
  for (size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    if (r.contains("match") && !matches(r["match"], site)) continue;
    p = apply_rule(r, at(path, i), site, p);
    const json after = policy_to_json(p).flatten();
    for (auto it = after.begin(); it != after.end(); ++it)
      if (!before.contains(it.key()) || before[it.key()] != it.value()) origins[it.key()] = at(path, i);
    before = after;
  }
  return p;
}

void resolve_sites(const json& rules, const std::string& path, MatmulSites& sites) {
  check_matmul_rules(rules, path);
  for (auto& s : sites.sites()) s.policy = resolve_site_policy(rules, path, s);
  for (size_t i = 0; i < rules.size(); ++i) {
    const json& r = rules[i];
    bool used = false;
    for (const auto& s : sites.sites()) used = used || !r.contains("match") || matches(r["match"], s);
    if (!used) (void)apply_matmul_policy(policy_part(r), at(path, i), MatmulPolicy());
  }
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
