#include "cli/sweep_progress.h"

#include <unistd.h>

#include <cmath>
#include <algorithm>
#include <cstdio>

#include "cli/format_text.h"
#include "study/run_state.h"

namespace drift::cli {

SweepProgress::SweepProgress(std::vector<std::string> dirs, std::vector<std::string> labels, size_t to_run,
                             double every_s)
    : dirs_(std::move(dirs)), labels_(std::move(labels)), to_run_(to_run), every_s_(every_s),
      tty_(isatty(STDOUT_FILENO)), start_(clock::now()), last_(start_) {}

void SweepProgress::finished(bool ran) {
  ++ended_;
  done_ += ran;
}

std::string SweepProgress::line(const std::vector<size_t>& running) const {
  const double elapsed = std::chrono::duration<double>(clock::now() - start_).count();
  const size_t left = to_run_ - std::min(to_run_, done_ + running.size());
  std::string s = "sweep " + duration_text(elapsed) + ": " + std::to_string(done_) + "/" + std::to_string(to_run_) +
                  " done, " + std::to_string(running.size()) + " running, " + std::to_string(left) + " left";
  // Work done in runs: finished ones whole, running ones by their step fraction.
  double work = static_cast<double>(done_);
  for (const size_t i : running) {
    const RunFiles f = read_run_files(dirs_[i]);
    s += " | " + labels_[i];
    if (const auto step = logged_step(f)) {
      char b[64];
      std::snprintf(b, sizeof b, " step %llu loss %.4f", static_cast<unsigned long long>(*step), logged_loss(f));
      s += b;
      if (f.steps && *f.steps > 0) work += static_cast<double>(*step) / static_cast<double>(*f.steps);
    } else {
      s += " starting";
    }
  }
  if (work > 0 && to_run_ > 0)
    s += " | ETA " + duration_text(elapsed * (static_cast<double>(to_run_) - work) / work);
  return s;
}

void SweepProgress::poll(const std::vector<size_t>& running) {
  const auto now = clock::now();
  if (std::chrono::duration<double>(now - last_).count() < every_s_) return;
  last_ = now;
  const std::string l = line(running);
  if (tty_) {
    std::printf("\r\033[K%s", l.c_str());
    drawn_ = true;
  } else {
    std::printf("%s\n", l.c_str());
  }
  std::fflush(stdout);
}

void SweepProgress::clear() {
  if (!drawn_) return;
  std::printf("\r\033[K");
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace drift::cli
