#include "train/config.h"

#include <charconv>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "io/json_read.h"
#include "policy/elementwise_rules.h"
#include "policy/probes.h"
#include "policy/site_rules.h"
#include "train/config_schema.h"

namespace drift {

using json = nlohmann::json;

std::string RunConfig::run_dir() const {
  if (!output.dir.empty()) return output.dir;
  return "runs/" + output.name + "/seed" + std::to_string(seed);
}

RunConfig parse_run_config(const json& j) {
  RunConfig c;
  read_fields(j, "", run_config_fields(), c);
  return c;
}

nlohmann::ordered_json resolved_config_json(const RunConfig& c) { return write_fields(run_config_fields(), c); }

json load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError("", "config file '" + path + "' is a directory (expected a JSON file, e.g. " +
                              (std::filesystem::path(path) / "config.json").string() + ")");
  try {
    return io::read_json_file(path, "config file");
  } catch (const io::IoError& e) {
    throw ConfigError("", std::string("config file ") + e.what());
  }
}

void require_utf8(const std::string& text, const std::string& path, const std::string& what) {
  try {
    (void)json(text).dump();
  } catch (const json::type_error&) {
    throw ConfigError(path, what + ": " + json(text).dump(-1, ' ', true, json::error_handler_t::replace) +
                                " is not UTF-8 text (it would be written to config.json as a JSON string)");
  }
}

json config_with_overrides(const std::string& file, const std::vector<std::string>& sets, const uint64_t* seed,
                           const std::string& out) {
  json j = load_config_file(file);
  if (!j.is_object()) throw ConfigError("", "config file '" + file + "': expected a JSON object");
  const char* output_expected = "expected an object {\"dir\": DIR, \"name\": NAME}";
  if (j.contains("output") && !j["output"].is_object()) throw ConfigError("output", output_expected);
  if (!j.contains("output") || !j["output"].contains("name")) {
    j["output"]["name"] = std::filesystem::path(file).stem().string();
    require_utf8(j["output"]["name"].get<std::string>(), "output.name", "the config file's name");
  }
  for (const auto& s : sets) apply_set(j, s);
  if (seed) j["seed"] = *seed;
  if (!out.empty()) {
    if (j.contains("output") && !j["output"].is_object()) throw ConfigError("output", output_expected);
    require_utf8(out, "output.dir", "--out");
    j["output"]["dir"] = out;
  }
  return j;
}

void apply_set(json& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("", "--set expects path=value (e.g. train.lr=0.01), got '" + assignment + "'");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  require_utf8(assignment, "", "--set");
  json value;
  try {
    if (!io::try_parse_json(text, "--set " + path, value)) value = text;  // not JSON: a bare string
  } catch (const io::IoError& e) {
    throw ConfigError(path, e.what());
  }
  json* cur = &root;
  std::string done;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string seg = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (seg.empty()) throw ConfigError(path, "--set: empty path segment");
    const bool last = dot == std::string::npos;
    if (cur->is_array()) {
      size_t index = 0;
      const auto r = std::from_chars(seg.data(), seg.data() + seg.size(), index);
      if (r.ec != std::errc() || r.ptr != seg.data() + seg.size() || index >= cur->size())
        throw ConfigError(done, "--set: '" + seg + "' is not an index of this list (size " + std::to_string(cur->size()) + ")");
      cur = &(*cur)[index];
    } else {
      if (cur->is_null()) *cur = json::object();
      if (!cur->is_object()) throw ConfigError(done, "--set: not an object, cannot set '" + seg + "' inside it");
      cur = &(*cur)[seg];
    }
    done = key_path(done, seg);
    if (last) break;
    start = dot + 1;
  }
  *cur = value;
}

void resolve_sites_at_step(const PrecisionConfig& p, uint64_t step, MatmulSites& sites, ElementwiseSites& elementwise) {
  resolve_sites_at_step(p, step, sites);
  // Schedule rules apply on top, and later rules win: the cascade of the concatenated lists.
  ElementwiseRules rules = p.elementwise;
  for (const ScheduleEntry& e : p.schedule) {
    if (e.step > step) break;
    if (e.elementwise) rules.append(*e.elementwise);
  }
  resolve_elementwise(rules, elementwise);
}

void check_run_rules(const RunConfig& c, const MatmulSites& sites, const ElementwiseSites& elementwise) {
  MatmulSites s = sites;
  ElementwiseSites e = elementwise;
  resolve_sites_at_step(c.precision, 0, s, e);
  for (const ScheduleEntry& entry : c.precision.schedule) resolve_sites_at_step(c.precision, entry.step, s, e);
  for (const auto& probe : c.diagnostics.probes) {
    MatmulSites ps = sites;
    resolve_sites(probe.rules, ps);
  }
}

std::vector<std::string> surprising_settings(const RunConfig& c) {
  std::vector<std::string> w;
  const auto n = [](size_t v) { return std::to_string(v); };
  const auto& t = c.train;
  if (t.warmup > 0 && t.warmup >= t.steps)
    w.push_back("train.warmup (" + n(t.warmup) + ") >= train.steps (" + n(t.steps) +
                "): the whole run is warmup (the learning rate reaches train.lr at the last step at best, and never decays)");
  if (t.eval_every > t.steps)
    w.push_back("train.eval_every (" + n(t.eval_every) + ") > train.steps (" + n(t.steps) +
                "): the validation loss is measured only after the last step");
  if (t.log_every > t.steps)
    w.push_back("train.log_every (" + n(t.log_every) + ") > train.steps (" + n(t.steps) +
                "): metrics.jsonl gets only step 0, evaluation and last-step lines");
  return w;
}

void check_run_rules(const RunConfig& c) {
  ModelConfig m = c.model;
  if (m.vocab == 0) m.vocab = 256;
  std::unique_ptr<Model<float>> model;
  try {
    model = make_model<float>(m, c.seed);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("model", e.what());
  }
  check_run_rules(c, model->sites, model->elementwise);
}

namespace {

// The schedule entries' matmul rule lists in force at `step`.
std::vector<const MatmulRules*> scheduled_matmul_rules(const PrecisionConfig& p, uint64_t step) {
  std::vector<const MatmulRules*> out;
  for (const ScheduleEntry& e : p.schedule) {
    if (e.step > step) break;
    if (e.matmul) out.push_back(&*e.matmul);
  }
  return out;
}

}  // namespace

void resolve_sites_at_step(const PrecisionConfig& p, uint64_t step, MatmulSites& sites) {
  resolve_sites(p.matmul, sites);
  for (const MatmulRules* rules : scheduled_matmul_rules(p, step))
    for (auto& s : sites.sites()) s.policy = resolve_site_policy(*rules, s, s.policy);
}

std::vector<FieldOrigins> site_field_origins(const PrecisionConfig& p, uint64_t step, const MatmulSites& sites) {
  std::vector<FieldOrigins> out;
  for (const auto& s : sites.sites()) {
    FieldOrigins o;
    MatmulPolicy policy = resolve_site_policy_traced(p.matmul, s, MatmulPolicy(), o);
    for (const MatmulRules* rules : scheduled_matmul_rules(p, step)) policy = resolve_site_policy_traced(*rules, s, policy, o);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace drift
