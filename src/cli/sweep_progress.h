// drift sweep's live progress: runs done / running / left, each running run's step and loss, and
// an ETA from the pace so far. On a terminal one line is redrawn in place; otherwise (a log file,
// a pipe) a full line is printed every `every_s` seconds, so a `tail -f` shows the sweep moving.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace drift::cli {

class SweepProgress {
 public:
  // `dirs`: the run directories, by job index; `to_run`: how many of them will run (not skipped).
  SweepProgress(std::vector<std::string> dirs, std::vector<std::string> labels, size_t to_run, double every_s);

  // Called often (run_children's poll): prints when the interval has passed.
  void poll(const std::vector<size_t>& running);
  // A run ended (or was skipped): count it; call before printing its result line.
  void finished(bool ran);
  // Clears the terminal line before other output.
  void clear();

  // The status line as printed (also for tests of the format).
  std::string line(const std::vector<size_t>& running) const;

 private:
  using clock = std::chrono::steady_clock;
  std::vector<std::string> dirs_, labels_;
  size_t to_run_ = 0, done_ = 0, ended_ = 0;
  double every_s_;
  bool tty_;
  bool drawn_ = false;
  clock::time_point start_, last_;
};

}  // namespace drift::cli
