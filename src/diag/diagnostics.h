// Deep diagnostics (docs/diagnostics.md): every `every` steps, at the run's own weights and batch,
//   * the exact reference: an fp64 copy of the model with an fp64 policy at every site, forward and
//     backward on the same batch; the run's gradient compared with it (diag/grad_quality.h);
//   * a replay of the run's step on a float copy of the model with the run's policies, delayed-scaling
//     state and random streams, with the engine's diagnostics on: each site's cast error per operand
//     and its forward-error bound check (arith/cast_error.h, arith/error_bound.h);
//   * the forward deviation from the fp64 model: of the logits (the proxy model's predictions), and
//     of every forward matmul site's products;
//   * probes: the gradient each alternative policy would produce, compared with the exact one.
// Everything runs on copies: the run's weights, sites, telemetry and state are only read.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "policy/probes.h"

namespace drift {

// The policy of the exact reference: fp64 operands without scaling, fp64 products and sums.
MatmulPolicy exact_fp64_policy();

// The batch a step trained on: text windows (batch x (context+1)), or, for a model that draws its
// own inputs (proxy), the (stream, draw) key it drew them from and the stream of its label noise.
struct StepBatch {
  const int32_t* windows = nullptr;
  size_t size = 0;
  uint64_t stream = 0, draw = 0;
  std::optional<uint64_t> noise_stream = std::nullopt;
};

class Diagnostics {
 public:
  Diagnostics(uint64_t every, std::vector<ProbePolicy> probes, const ModelConfig& cfg, uint64_t seed);
  ~Diagnostics();
  bool due(uint64_t step) const { return every_ > 0 && step % every_ == 0; }
  // Call before the step's forward (after sites.begin_step): keeps a copy of the sites (policies,
  // delayed-scaling state) as the step starts, when the step is due.
  void begin_step(uint64_t step, const MatmulSites& sites, const ElementwiseSites& elementwise);
  // Call after the backward, before the optimizer: measures at the run's weights (run_model.params,
  // as the step's forward used them) and `batch`; `grad` is the run's gradient unscaled and
  // unclipped, `loss_scale` what its backward was multiplied by. Returns the diag.jsonl line.
  nlohmann::ordered_json run(uint64_t step, const Model<float>& run_model, const float* grad, double loss_scale,
                             const StepBatch& batch);

  // The exact reference gradient of the last run() (parameter layout of the model).
  const std::vector<double>& exact_grad() const { return exact_->grads; }

 private:
  uint64_t every_;
  std::vector<ProbePolicy> probes_;
  std::unique_ptr<Model<double>> exact_;
  std::unique_ptr<Model<float>> replay_;
  MatmulSites start_sites_;
  ElementwiseSites start_elementwise_;
  void restart_replay(uint64_t step, const Model<float>& run_model);
};

}  // namespace drift
