#include "train/divergence.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/json_read.h"
#include "io/npy.h"

namespace drift {

namespace {
std::string fmt(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}
}  // namespace

bool DivergenceTracker::ends_run(const char* event) const {
  return c_.enabled && std::find(c_.on.begin(), c_.on.end(), event) != c_.on.end();
}

std::string DivergenceTracker::observe(uint64_t step, double loss, bool gradient_nonfinite) {
  const auto s = static_cast<int64_t>(step);
  std::string now;  // the reason this step ends the run, if it does
  auto event = [&](const char* kind, int64_t* slot, int64_t at, const std::string& why) {
    if (*slot >= 0) return;
    *slot = at;
    if (now.empty() && divergence_step < 0 && ends_run(kind)) now = why;
  };

  if (!std::isfinite(loss))
    event("nonfinite", &first_nonfinite_step, s, "non-finite loss");
  else if (gradient_nonfinite)
    event("nonfinite", &first_nonfinite_step, s, "non-finite gradient");

  // Spike: against the best smoothed loss before this step.
  const bool above = std::isfinite(loss) && has_ema && step >= c_.after_step && loss > c_.factor * best;
  spike_run_ = above ? spike_run_ + 1 : 0;
  if (spike_run_ >= c_.patience)
    event("spike", &spike_step, s - static_cast<int64_t>(c_.patience) + 1,
          "loss " + fmt(loss) + " > " + fmt(c_.factor) + " x best smoothed loss " + fmt(best) +
              (c_.patience > 1 ? " for " + std::to_string(c_.patience) + " steps" : ""));
  if (std::isfinite(loss)) {
    ema = has_ema ? c_.smoothing * ema + (1 - c_.smoothing) * loss : loss;
    best = has_ema ? std::min(best, ema) : ema;
    has_ema = true;
  }

  // Departure from the reference run, at the steps it logged.
  if (ref_) {
    const auto it = ref_->find(step);
    if (it != ref_->end()) {
      const double ref = it->second;
      const bool off = !std::isfinite(loss) || std::fabs(loss - ref) > c_.departure_tol * std::fabs(ref);
      departure_run_ = off ? departure_run_ + 1 : 0;
      if (departure_run_ == 1) departure_start_ = s;
      if (departure_run_ >= c_.departure_steps)
        event("departure", &departure_step, departure_start_,
              "loss departs from the reference run by more than " + fmt(c_.departure_tol * 100) + "% for " +
                  std::to_string(c_.departure_steps) + " logged steps");
    }
  }
  if (!now.empty()) {
    divergence_step = s;
    reason = now;
  }
  return now;
}

void DivergenceTracker::save(BlobWriter& w) const {
  for (int64_t v : {first_nonfinite_step, spike_step, departure_step, divergence_step, departure_start_})
    w.u64(static_cast<uint64_t>(v));
  w.str(reason);
  w.f64(ema);
  w.f64(best);
  w.u64(has_ema);
  w.u64(spike_run_);
  w.u64(departure_run_);
}

void DivergenceTracker::restore(BlobReader& r) {
  for (int64_t* v : {&first_nonfinite_step, &spike_step, &departure_step, &divergence_step, &departure_start_})
    *v = static_cast<int64_t>(r.u64());
  reason = r.str();
  ema = r.f64();
  best = r.f64();
  has_ema = r.u64() != 0;
  spike_run_ = r.u64();
  departure_run_ = r.u64();
}

std::map<uint64_t, double> read_reference_losses(const std::string& run_dir) {
  const std::string path = run_dir + "/metrics.jsonl";
  const std::string text =
      io::read_regular_file(path, "reference run's metrics (--reference expects a run directory)", io::kMaxDataBytes);
  std::map<uint64_t, double> out;
  for (const io::TextLine& l : io::split_lines(text)) {
    const std::string where = path + " line " + std::to_string(l.number);
    const nlohmann::json j = io::parse_json(l.text, where);
    if (!j.is_object() || !j.contains("step") || !j.contains("loss") || !j["step"].is_number_unsigned())
      throw io::IoError(where + ": not a metrics line (expected an object with \"step\", an integer >= 0, and \"loss\")");
    if (j["loss"].is_number()) out[j["step"].get<uint64_t>()] = j["loss"].get<double>();
  }
  if (out.empty()) throw io::IoError(path + ": no logged losses");
  return out;
}

}  // namespace drift
