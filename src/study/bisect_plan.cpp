#include "study/bisect_plan.h"

#include <algorithm>
#include <set>

#include "model/model.h"
#include "policy/matmul_json.h"
#include "policy/site_rules.h"
#include "train/config.h"

namespace drift {

using json = nlohmann::json;

namespace {

json precision_of(const json& config) {
  return config.contains("precision") && config["precision"].is_object() ? config["precision"] : json::object();
}

// A matmul rule list in its list form (a preset name or a single policy object is one rule).
json as_rule_list(const json& rules) {
  if (rules.is_null()) return json::array();
  if (rules.is_string()) return json::array({json{{"preset", rules}}});
  if (rules.is_object()) return json::array({rules});
  return rules;
}

// A format setting ("fp32", or {"format": "fp32", ...}) that keeps full fp32 precision.
bool is_fp32(const json& v) {
  if (v.is_string()) return v.get<std::string>() == "fp32";
  if (v.is_object() && v.contains("format")) return is_fp32(v["format"]);
  return false;
}

std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// master and optimizer_state: one format key of precision.
Restoration restore_format_key(const json& precision, const std::string& key, const std::string& what) {
  Restoration r;
  r.name = key;
  if (!precision.contains(key)) {
    r.note = "skipped: precision." + key + " is not in this run's config (" + what + " is fp32)";
  } else if (is_fp32(precision[key])) {
    r.note = "skipped: " + what + " already fp32";
  } else {
    r.applicable = true;
    r.note = what + " " + text(precision[key]) + " -> fp32";
    r.sets.push_back("precision." + key + "=\"fp32\"");
  }
  return r;
}

Restoration restore_allreduce(const json& precision) {
  Restoration r;
  r.name = "allreduce";
  if (!precision.contains("allreduce") || precision["allreduce"].is_null()) {
    r.note = "skipped: precision.allreduce is not in this run's config (no simulated data-parallel reduction)";
    return r;
  }
  const json& a = precision["allreduce"];
  const json ranks = a.is_object() && a.contains("ranks") ? a["ranks"] : json(1);
  if (!ranks.is_number_integer() || ranks.get<int64_t>() <= 1) {
    r.note = "skipped: one rank, no reduction";
  } else if (!a.contains("format") || is_fp32(a["format"])) {
    r.note = "skipped: the reduction is already fp32";
  } else {
    r.applicable = true;
    r.note = "reduction over " + ranks.dump() + " ranks in " + text(a["format"]) + " -> fp32";
    r.sets.push_back("precision.allreduce.format=\"fp32\"");
  }
  return r;
}

Restoration restore_role(const json& config, const std::string& role, const std::string& layer, bool lossy) {
  Restoration r;
  r.name = layer.empty() ? role : role + " " + layer;
  r.role = role;
  r.layer = layer;
  if (!lossy) {
    r.note = "skipped: every " + role + " matmul is already fp32";
    return r;
  }
  r.applicable = true;
  const json p = with_fp32_rule(precision_of(config), role, layer);
  r.note = std::string("appends {\"match\": {") + (layer.empty() ? "" : "\"layer\": \"" + layer + "\", ") + "\"role\": \"" +
           role + "\"}, \"preset\": \"fp32\"}";
  r.sets.push_back("precision.matmul=" + p["matmul"].dump());
  if (p.contains("schedule") && !p["schedule"].empty()) r.sets.push_back("precision.schedule=" + p["schedule"].dump());
  return r;
}

}  // namespace

const std::vector<std::string>& bisect_roles() {
  static const std::vector<std::string> roles = {"grad_input", "grad_weight", "forward"};
  return roles;
}

std::map<std::string, std::vector<std::string>> lossy_layers_by_role(const json& config) {
  json c = config;
  c.erase("version");
  RunConfig cfg = parse_run_config(c);
  if (config.contains("model") && config["model"].contains("vocab") && config["model"]["vocab"].is_number_unsigned())
    cfg.model.vocab = config["model"]["vocab"].get<size_t>();
  auto model = make_model<float>(cfg.model, cfg.seed);
  std::vector<uint64_t> steps = {0};
  for (const auto& e : cfg.precision.schedule) steps.push_back(e.step);
  // Full precision: the fp32 passthrough, or what the restoration rule itself gives (the fp32
  // preset, which differs only in the overflow mode of fp32 operands: no effect on fp32 values).
  const json passthrough = policy_to_json(MatmulPolicy());
  const json fp32_rule = json::array({json{{"preset", "fp32"}}});
  std::map<std::string, std::set<std::string>> lossy;
  for (uint64_t step : steps) {
    resolve_sites_at_step(cfg.precision, step, model->sites);
    for (const auto& s : model->sites.sites()) {
      const json p = policy_to_json(s.policy);
      if (p != passthrough && p != policy_to_json(resolve_site_policy(fp32_rule, "fp32", s)))
        lossy[to_string(s.role)].insert(s.layer);
    }
  }
  // Layers in the model's order.
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& s : model->sites.sites()) {
    auto& v = out[to_string(s.role)];
    if (lossy[to_string(s.role)].count(s.layer) && std::find(v.begin(), v.end(), s.layer) == v.end())
      v.push_back(s.layer);
  }
  return out;
}

json with_fp32_rule(const json& precision, const std::string& role, const std::string& layer) {
  json p = precision.is_object() ? precision : json::object();
  json match = {{"role", role}};
  if (!layer.empty()) match = {{"layer", layer}, {"role", role}};
  const json rule = {{"match", match}, {"preset", "fp32"}};
  p["matmul"] = as_rule_list(p.contains("matmul") ? p["matmul"] : json());
  p["matmul"].push_back(rule);
  if (p.contains("schedule") && p["schedule"].is_array())
    for (auto& e : p["schedule"])
      if (e.is_object()) {
        e["matmul"] = as_rule_list(e.contains("matmul") ? e["matmul"] : json());
        e["matmul"].push_back(rule);
      }
  return p;
}

std::vector<Restoration> plan_class_restorations(const json& config,
                                                 const std::map<std::string, std::vector<std::string>>& lossy) {
  const json p = precision_of(config);
  std::vector<Restoration> out = {restore_allreduce(p), restore_format_key(p, "optimizer_state", "optimizer state"),
                                  restore_format_key(p, "master", "master weights")};
  for (const auto& role : bisect_roles()) {
    const auto it = lossy.find(role);
    out.push_back(restore_role(config, role, "", it != lossy.end() && !it->second.empty()));
  }
  return out;
}

std::vector<Restoration> plan_layer_restorations(const json& config, const std::string& role,
                                                 const std::vector<std::string>& layers) {
  std::vector<Restoration> out;
  for (const auto& l : layers) out.push_back(restore_role(config, role, l, true));
  return out;
}

}  // namespace drift
