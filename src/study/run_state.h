// Where one run of a sweep stands, read from its run directory and, for a Slurm sweep, the queue:
// queued / running (step, loss) / finished / diverged / failed (with its log tail) / stopped / not
// started. Used by drift sweep --status.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "study/slurm_job.h"

namespace drift {

// What a run directory holds (none of it need exist).
struct RunFiles {
  std::optional<nlohmann::json> summary;       // summary.json: the run finished
  std::optional<nlohmann::json> last_metrics;  // the last complete line of metrics.jsonl
  std::optional<uint64_t> steps;               // train.steps of config.json
  bool checkpoint = false;                     // checkpoint.bin
};
RunFiles read_run_files(const std::string& dir);

// The last logged step, counted from 1 (metrics.jsonl counts from 0), and its training loss (NaN
// when not a number); nullopt when nothing is logged yet.
std::optional<uint64_t> logged_step(const RunFiles& f);
double logged_loss(const RunFiles& f);

// The last `n` lines of a text file ("" when it cannot be read).
std::string tail_lines(const std::string& path, size_t n);

enum class RunState { queued, running, finished, diverged, failed, stopped, not_started };
const char* to_string(RunState s);

struct RunView {
  RunState state = RunState::not_started;
  std::string detail;  // one line: the step and loss, the divergence, why queued, ...
};

// A summary.json decides (finished or diverged), then the queue (a pending task is queued, any
// other state running) or `running_here` (a local sweep recorded the run as running), then
// `failure` (the log tail of a task that ended without finishing, or of a local run recorded as
// failed): failed. Left over: stopped (a checkpoint or metrics to continue from) or not started.
RunView describe_run(const RunFiles& files, const QueuedTask* task, const std::string& failure,
                     bool running_here = false);

}  // namespace drift
