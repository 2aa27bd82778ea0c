#include "diag/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "arith/catalogue.h"
#include "diag/grad_quality.h"
#include "io/json_number.h"
#include "policy/site_rules.h"

namespace drift {

using ojson = nlohmann::ordered_json;
using io::finite_or_null;

namespace {


// Relative deviations below this magnitude of the reference are measured against it instead
// (a logit of exactly 0 would otherwise make any deviation infinite).
constexpr double kTinyLogit = 1e-30;

ojson quality_json(const GradQuality& q) {
  return {{"cosine", finite_or_null(q.cosine)},
          {"rel_error", finite_or_null(q.rel_error)},
          {"bias", finite_or_null(q.bias)}};
}

ojson grad_json(const ParamTable& table, const float* g, const double* ref) {
  ojson tensors = ojson::object(), overall;
  for (const auto& t : grad_quality_by_tensor(table, g, ref)) {
    if (t.tensor == "overall")
      overall = quality_json(t.q);
    else
      tensors[t.tensor] = quality_json(t.q);
  }
  return {{"overall", overall}, {"tensors", tensors}};
}

ojson cast_json(const CastErrorStats& s) {
  if (s.elements == 0) return nullptr;  // not measured (Hadamard-rotated operand) or empty
  return {{"rel_error", finite_or_null(s.rel_error())}, {"one_sidedness", finite_or_null(s.one_sidedness())},
          {"shrank", finite_or_null(s.shrank_fraction())}};
}

template <typename T>
double max_rel_deviation(const std::vector<T>& y, const std::vector<double>& ref) {
  double worst = 0;
  const size_t n = std::min(y.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(y[i]) - ref[i]) / std::max(std::fabs(ref[i]), kTinyLogit);
    if (!(d <= worst)) worst = d;  // NaN propagates as the worst
  }
  return worst;
}

template <typename T>
double forward_on(Model<T>& m, const StepBatch& batch) {
  return m.needs_text() ? m.forward(batch.windows, batch.size) : m.forward_generated(batch.stream, batch.draw, batch.size, batch.noise_stream);
}

// ||y - ref|| / ||ref|| (2-norms): the size of a tensor's error as a whole, which a few elements
// that cancel to nearly zero cannot dominate as they do the largest elementwise ratio.
double rel_error_norm(const std::vector<double>& y, const std::vector<double>& ref) {
  double err = 0, size = 0;
  const size_t n = std::min(y.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    err += (y[i] - ref[i]) * (y[i] - ref[i]);
    size += ref[i] * ref[i];
  }
  return std::sqrt(err) / std::sqrt(size);
}

// Forward and backward of `m` on the batch; grads unscaled the way the trainer does it (float divide).
double forward_backward(Model<float>& m, const StepBatch& batch, double loss_scale) {
  m.loss_scale = loss_scale;
  const double loss = forward_on(m, batch);
  m.backward();
  if (loss_scale != 1.0) {
    const float s = static_cast<float>(loss_scale);
    for (float& g : m.grads) g = g / s;
  }
  return loss;
}

}  // namespace

MatmulPolicy exact_fp64_policy() {
  const Format f64 = *find_format("fp64");
  MatmulPolicy p;
  for (Quantizer* q : {&p.a, &p.b}) {
    q->format = f64;
    q->round.overflow = Overflow::ieee;
    q->scaling = Scaling();
  }
  p.product_format = f64;  // fp64 x fp64 products do not fit a double: round them once
  p.product_round.overflow = Overflow::ieee;
  p.inner.format = p.outer.format = p.out_format = f64;
  return p;
}

Diagnostics::Diagnostics(uint64_t every, std::vector<ProbePolicy> probes, const ModelConfig& cfg, uint64_t seed)
    : every_(every), probes_(std::move(probes)) {
  if (every_ == 0) return;
  exact_ = make_model<double>(cfg, seed);
  exact_->float_data = true;  // a model that draws its own batch draws the float run's one
  exact_->sites.capture_forward = true;  // per-site forward deviation
  for (auto& s : exact_->sites.sites()) s.policy = exact_fp64_policy();
  replay_ = make_model<float>(cfg, seed);
  // Probe rules must resolve on this model's sites (a rule may name a layer that is fine in general
  // but a policy that is invalid for some site): check now, before the run starts.
  for (const auto& p : probes_) {
    MatmulSites sites = replay_->sites;
    resolve_sites(p.rules, sites);
  }
}

Diagnostics::~Diagnostics() = default;

void Diagnostics::begin_step(uint64_t step, const MatmulSites& sites, const ElementwiseSites& elementwise) {
  if (!due(step)) return;
  start_sites_ = sites;
  start_elementwise_ = elementwise;
}

// The replay model as the run's step began: its matmul sites (or a probe's) and its elementwise
// quantizers with their state, random streams keyed by the step.
void Diagnostics::restart_replay(uint64_t step, const Model<float>& run_model) {
  replay_->params = run_model.params;
  replay_->sites = start_sites_;
  replay_->elementwise = start_elementwise_;
  replay_->begin_step(step);
  replay_->reset_telemetry();
}

ojson Diagnostics::run(uint64_t step, const Model<float>& run_model, const float* grad, double loss_scale,
                       const StepBatch& batch) {
  const ParamTable& table = run_model.table;
  // The exact reference: fp64 weights (the run's, exactly), fp64 arithmetic, no loss scaling.
  std::copy(run_model.params.begin(), run_model.params.end(), exact_->params.begin());
  exact_->loss_scale = 1.0;
  exact_->sites.clear_captured();
  const double exact_loss = forward_on(*exact_, batch);
  exact_->backward();
  const std::vector<double>& ref = exact_->grads;

  // The replay: the run's step again, on a copy, with the engine's diagnostics on.
  restart_replay(step, run_model);
  replay_->sites.diagnose = true;
  replay_->sites.capture_forward = true;
  const double loss = forward_backward(*replay_, batch, loss_scale);
  const bool identical = std::equal(replay_->grads.begin(), replay_->grads.end(), grad);

  ojson sites = ojson::object();
  BoundCheck total;
  for (size_t i = 0; i < replay_->sites.size(); ++i) {
    const MatmulSite& s = replay_->sites.sites()[i];
    total.merge(s.tel.bound);
    // Forward sites: how far the site's product strays from the fp64 one (both models make the
    // same calls in the same order, so the captured products line up element for element).
    const bool fwd = s.role == Role::forward && s.calls;
    const std::vector<double>& ref = exact_->sites.sites()[i].captured;
    sites[s.name()] = {{"calls", s.calls},
                       {"out_rel_error", fwd ? finite_or_null(rel_error_norm(s.captured, ref)) : ojson(nullptr)},
                       {"out_max_rel_dev", fwd ? finite_or_null(max_rel_deviation(s.captured, ref)) : ojson(nullptr)},
                       {"a_cast", cast_json(s.tel.a_cast)},
                       {"b_cast", cast_json(s.tel.b_cast)},
                       {"bound", {{"checked", s.tel.bound.checked},
                                  {"unchecked", s.tel.bound.unchecked},
                                  {"violations", s.tel.bound.violations},
                                  {"max_ratio", finite_or_null(s.tel.bound.max_ratio)}}}};
  }

  ojson line = {{"step", step},
                {"loss", finite_or_null(loss)},
                {"exact_loss", finite_or_null(exact_loss)},
                {"replay_identical", identical},
                {"logits_max_rel_dev",
                 finite_or_null(max_rel_deviation(replay_->last_logits(), exact_->last_logits()))},
                {"bound_checked", total.checked},
                {"bound_violations", total.violations},
                {"bound_max_ratio", finite_or_null(total.max_ratio)},
                {"grad", grad_json(table, grad, ref.data())},
                {"sites", sites}};

  // Probes: the same step under another policy, on the same copy (its diagnostics off).
  ojson probes = ojson::array();
  for (const auto& p : probes_) {
    restart_replay(step, run_model);
    resolve_sites(p.rules, replay_->sites);
    replay_->sites.diagnose = false;
    const double ploss = forward_backward(*replay_, batch, loss_scale);
    probes.push_back({{"name", p.name},
                      {"loss", finite_or_null(ploss)},
                      {"logits_max_rel_dev",
                 finite_or_null(max_rel_deviation(replay_->last_logits(), exact_->last_logits()))},
                      {"grad", grad_json(table, replay_->grads.data(), ref.data())}});
  }
  line["probes"] = probes;
  return line;
}

}  // namespace drift
