#include "diag/train_run.h"

#include <filesystem>
#include <memory>

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

nlohmann::ordered_json planned_config(const TrainRun& r) {
  const nlohmann::json j = config_with_overrides(r.config, r.sets, &r.seed, r.dir);
  const RunConfig cfg = parse_run_config(j);
  // The rules are checked against the model's sites (an unknown preset shows only there), at every
  // step where the policy changes. The sites do not depend on the vocabulary.
  std::unique_ptr<LmModel<float>> model;
  try {
    model = make_model<float>(cfg.model, cfg.seed);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("model", e.what());
  }
  resolve_sites_at_step(cfg.precision, 0, model->sites);
  for (const auto& e : cfg.precision.schedule) resolve_sites_at_step(cfg.precision, e["step"].get<uint64_t>(), model->sites);
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
