// The timing loops of `drift bench`: one place decides how a benchmark measures a call, so the
// engine's figure and its reference (OpenBLAS, cuBLAS) in the same table are timed alike.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace drift {

// Mean seconds per call of `fn`: one untimed warm-up call (first-touch page faults, lazy library
// loading), then calls until at least `min_seconds` have passed (at least one timed call).
inline double seconds_per_call(const std::function<void()>& fn, double min_seconds) {
  using clock = std::chrono::steady_clock;
  fn();
  int calls = 0;
  const auto t0 = clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  } while (elapsed < min_seconds);
  return elapsed / calls;
}

// Fastest single call of `fn` after one warm-up, over calls lasting at least `min_seconds` in all
// (at least two): for calls so short that a mean mostly measures interruptions.
inline double best_seconds_per_call(const std::function<void()>& fn, double min_seconds) {
  using clock = std::chrono::steady_clock;
  fn();
  double best = 1e300, total = 0;
  int calls = 0;
  while (calls < 2 || total < min_seconds) {
    const auto t0 = clock::now();
    fn();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
    ++calls;
  }
  return best;
}

// Fastest single call of each of `fns`, their calls taking turns (f0, f1, ..., f0, f1, ...) after
// one warm-up of each, for at least `min_seconds` in all (at least two calls each): a benchmark and
// its references see the same machine load, so their ratios hold on a busy machine.
inline std::vector<double> best_seconds_alternating(const std::vector<std::function<void()>>& fns,
                                                    double min_seconds) {
  using clock = std::chrono::steady_clock;
  for (const auto& fn : fns) fn();
  std::vector<double> best(fns.size(), 1e300);
  double total = 0;
  for (int calls = 0; calls < 2 || total < min_seconds; ++calls) {
    for (size_t k = 0; k < fns.size(); ++k) {
      const auto t0 = clock::now();
      fns[k]();
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      best[k] = std::min(best[k], s);
      total += s;
    }
  }
  return best;
}

}  // namespace drift
