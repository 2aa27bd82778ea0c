// The divergence record of a run (summary.json), observed step by step:
//   first_nonfinite_step  the first step whose loss, or gradient when no loss scaling catches it, is
//                         not finite;
//   spike_step            the first of `patience` consecutive steps (at or after `after_step`) whose
//                         loss exceeds `factor` x the best smoothed (EMA) loss before it;
//   departure_step        with a reference run: the first of `departure_steps` consecutive steps,
//                         among those the reference logged, where |loss - ref| > tol * |ref|;
//   divergence_step       the step of the first of those events that `divergence.on` lists.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "train/blob.h"
#include "train/config.h"

namespace drift {

class DivergenceTracker {
 public:
  DivergenceTracker(const DivergenceConfig& c, const std::map<uint64_t, double>* reference)
      : c_(c), ref_(reference) {}

  // Observes step `step`. `gradient_nonfinite`: a non-finite gradient that nothing (loss scaling)
  // absorbed. Returns the reason when the run diverges at this step (once; "" otherwise).
  std::string observe(uint64_t step, double loss, bool gradient_nonfinite);

  int64_t first_nonfinite_step = -1, spike_step = -1, departure_step = -1, divergence_step = -1;
  std::string reason;
  double ema = 0, best = 0;  // best: the smallest EMA so far (valid once has_ema)
  bool has_ema = false;

  void save(BlobWriter& w) const;
  void restore(BlobReader& r);

 private:
  bool ends_run(const char* event) const;
  DivergenceConfig c_;
  const std::map<uint64_t, double>* ref_;
  uint64_t spike_run_ = 0, departure_run_ = 0;
  int64_t departure_start_ = -1;
};

// The reference run's training losses by step, from its metrics.jsonl (steps with a finite loss).
// Throws io::IoError naming the file when it is missing or not a metrics file.
std::map<uint64_t, double> read_reference_losses(const std::string& run_dir);

}  // namespace drift
