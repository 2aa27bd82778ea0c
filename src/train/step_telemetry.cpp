#include "train/step_telemetry.h"

#include "train/config.h"

namespace drift {

bool line_scheduled(const TrainConfig& t, uint64_t step) {
  return step % t.log_every == 0 || (step + 1) % t.eval_every == 0 || step + 1 == t.steps;
}

bool telemetry_due(const TrainConfig& t, uint64_t step, uint64_t steps_this_session, bool diag_due) {
  return steps_this_session == 0 || diag_due || line_scheduled(t, step);
}

namespace {

bool untouched(const DelayedState& d) { return d.history.empty() && d.scale == 1.0 && !d.initialised; }

// fn(state) for every delayed-scaling state of the model's sites, in a fixed order.
template <typename Fn>
void for_each_delayed(Model<float>& m, Fn fn) {
  for (MatmulSite& s : m.sites.sites()) {
    fn(s.delayed_a);
    fn(s.delayed_b);
  }
  for (ElementwiseSite& s : m.elementwise.sites()) fn(s.delayed);
}

}  // namespace

void DelayedStates::save(Model<float>& m) {
  kept_.clear();
  for_each_delayed(m, [&](const DelayedState& d) {
    if (!untouched(d)) kept_.emplace_back(&d, d);
  });
}

void DelayedStates::restore(Model<float>& m) const {
  auto next = kept_.begin();
  for_each_delayed(m, [&](DelayedState& d) {
    if (next != kept_.end() && next->first == &d) {
      d = next->second;
      ++next;
    } else if (!untouched(d)) {
      d = DelayedState{};  // untouched when the step began
    }
  });
}

void RouteCounts::save(const MatmulSites& sites) {
  routes_.clear();
  traded_.clear();
  for (const MatmulSite& s : sites.sites()) {
    routes_.push_back(s.routes);
    traded_.push_back(s.traded_calls);
  }
}

void RouteCounts::restore(MatmulSites& sites) const {
  for (size_t i = 0; i < sites.size(); ++i) {
    sites.sites()[i].routes = routes_[i];
    sites.sites()[i].traded_calls = traded_[i];
  }
}

}  // namespace drift
