#include "study/train_run.h"

#include <filesystem>
#include <memory>
#include <stdexcept>

#include "model/model.h"
#include "train/config.h"

namespace drift {

std::vector<std::string> train_args(const TrainRun& r) {
  std::vector<std::string> a = {"train", "--config", r.config};
  for (const auto& s : r.sets) {
    a.push_back("--set");
    a.push_back(s);
  }
  a.insert(a.end(), {"--seed", std::to_string(r.seed), "--out", r.dir, "--quiet"});
  if (r.resume) a.push_back("--resume");
  return a;
}

TrainRun train_run_from_args(const std::vector<std::string>& args) {
  TrainRun r;
  bool seen_config = false, seen_seed = false, seen_out = false;
  if (args.empty() || args[0] != "train") throw std::invalid_argument("expected \"train\" first");
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--quiet") continue;
    if (a == "--resume") {
      r.resume = true;
      continue;
    }
    if (i + 1 >= args.size()) throw std::invalid_argument("'" + a + "' without a value");
    const std::string& v = args[++i];
    if (a == "--config") {
      r.config = v;
      seen_config = true;
    } else if (a == "--set") {
      r.sets.push_back(v);
    } else if (a == "--out") {
      r.dir = v;
      seen_out = true;
    } else if (a == "--seed") {
      size_t end = 0;
      try {
        r.seed = std::stoull(v, &end);
      } catch (const std::exception&) {
        end = 0;
      }
      if (end == 0 || end != v.size() || v[0] == '-') throw std::invalid_argument("--seed '" + v + "': expected an integer >= 0");
      seen_seed = true;
    } else {
      throw std::invalid_argument("unexpected argument '" + a + "'");
    }
  }
  if (!seen_config || !seen_seed || !seen_out) throw std::invalid_argument("expected --config, --seed and --out");
  return r;
}

nlohmann::ordered_json planned_config(const TrainRun& r) {
  const nlohmann::json j = config_with_overrides(r.config, r.sets, &r.seed, r.dir);
  const RunConfig cfg = parse_run_config(j);
  // The rules are checked against the model's sites (an unknown preset shows only there), at every
  // step where the policy changes. The sites do not depend on the vocabulary.
  std::unique_ptr<Model<float>> model;
  try {
    model = make_model<float>(cfg.model, cfg.seed);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("model", e.what());
  }
  resolve_sites_at_step(cfg.precision, 0, model->sites);
  for (const auto& e : cfg.precision.schedule) resolve_sites_at_step(cfg.precision, e.step, model->sites);
  nlohmann::ordered_json c = resolved_config_json(cfg);
  c.erase("version");
  c["model"].erase("vocab");
  return c;
}

std::optional<std::string> config_difference(const nlohmann::json& existing, const nlohmann::ordered_json& planned) {
  nlohmann::json a = existing, b = nlohmann::json::parse(planned.dump());
  if (!a.is_object()) return std::string("/");
  a.erase("version");
  if (a.contains("model") && a["model"].is_object()) a["model"].erase("vocab");
  b.erase("version");
  if (b.contains("model") && b["model"].is_object()) b["model"].erase("vocab");
  // The run directory is where the run was found; the same run may be reached by another path.
  for (auto* x : {&a, &b})
    if (x->contains("output") && (*x)["output"].is_object()) (*x)["output"].erase("dir");
  if (a == b) return std::nullopt;
  const nlohmann::json patch = nlohmann::json::diff(a, b);
  return patch.empty() ? std::string("/") : patch[0]["path"].get<std::string>();
}

}  // namespace drift
