// `drift bisect`: which precision decision causes a divergence. From the resolved config of the
// diverging run, the candidate restorations to full precision, one tensor class at a time and
// cheapest first, each as the `--set` assignments that make it; classes that are not lossy in this
// run (or not in this build's config) are skipped with a note saying why.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace drift {

struct Restoration {
  std::string name;     // allreduce | optimizer_state | master | grad_input | grad_weight | forward, or "<role> <layer>"
  std::string role;     // the matmul role restored ("" for the non-matmul classes)
  std::string layer;    // the layer restored ("" for a whole class)
  bool applicable = false;
  std::string note;     // why it is skipped, or what it changes
  std::vector<std::string> sets;
};

// The matmul roles, cheapest restoration first (backward before forward).
const std::vector<std::string>& bisect_roles();

// Per matmul role, the layers with at least one site of that role whose resolved policy (at step 0
// or at any precision.schedule step) differs from the fp32 passthrough. `config` is a run's
// config.json. Throws ConfigError.
std::map<std::string, std::vector<std::string>> lossy_layers_by_role(const nlohmann::json& config);

// `precision` with {"match": {"role": role[, "layer": layer]}, "preset": "fp32"} appended to
// precision.matmul and to the "matmul" list of every precision.schedule entry (schedule rules apply
// on top, so the restoration must follow them).
nlohmann::json with_fp32_rule(const nlohmann::json& precision, const std::string& role, const std::string& layer = "");

// The class restorations in order: allreduce, optimizer_state, master, grad_input, grad_weight,
// forward. `lossy` is lossy_layers_by_role of the same config.
std::vector<Restoration> plan_class_restorations(const nlohmann::json& config,
                                                 const std::map<std::string, std::vector<std::string>>& lossy);

// One restoration per lossy layer of `role`.
std::vector<Restoration> plan_layer_restorations(const nlohmann::json& config, const std::string& role,
                                                 const std::vector<std::string>& layers);

}  // namespace drift
