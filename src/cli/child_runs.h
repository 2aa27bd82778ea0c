// Runs `drift train` child processes (this same binary, /proc/self/exe) N at a time, for
// drift sweep and drift bisect. Each child's stdout goes to /dev/null and its stderr to a log file;
// OMP_NUM_THREADS, when not set, is shared out (cores / N) so that N children do not oversubscribe
// (results do not depend on the thread count). Ctrl-C (SIGINT) or SIGTERM stops launching and
// passes one SIGTERM to each running child, which stops after its current step and writes its
// checkpoint (drift train's own handling); a second Ctrl-C kills them at once. The children run in
// their own process group so that the terminal's Ctrl-C reaches them only this way.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "study/train_run.h"

namespace drift::cli {

// running: launched, not yet ended. submitted: handed to a batch scheduler (drift sweep --launcher
// slurm), which runs it later.
enum class RunStatus { pending, running, ok, diverged, failed, skipped_existing, interrupted, not_started, submitted };
const char* to_string(RunStatus s);

struct ChildJob {
  TrainRun run;
  std::string log;  // stderr of the child; removed when empty
  bool skip = false;  // a finished run already there: not launched
  // The run's resolved config as preflight checked it. The child reads --config again when it
  // starts, so a base config edited while a sweep runs would give later runs another config than
  // the one checked; such a run is not launched, and one that read the edited file after its launch
  // is caught by its config.json when it ends: both are reported failed, naming the key that changed.
  std::optional<nlohmann::ordered_json> planned;
};

struct ChildResult {
  RunStatus status = RunStatus::pending;
  std::optional<int> exit_code;      // the child's exit status (128 + signal when killed)
  std::optional<nlohmann::json> summary;  // summary.json, once it exists
  std::string stderr_tail;           // the last lines of the log, for a failed run
};

// Runs the jobs (skipped ones are reported as skipped_existing with their summary) at most `jobs`
// at a time, in order. `on_done(i, result)` is called in the parent as each job finishes;
// `on_poll(running)`, when given, every 20 ms or so with the indices of the jobs running then.
// Returns false when interrupted.
bool run_children(const std::vector<ChildJob>& jobs, size_t parallel, std::vector<ChildResult>& results,
                  const std::function<void(size_t, const ChildResult&)>& on_done,
                  const std::function<void(const std::vector<size_t>&)>& on_poll = {});

// The summary.json of a run directory, if it exists and parses.
std::optional<nlohmann::json> read_summary(const std::string& dir);

// Checks every job before anything starts: its config resolves (else ConfigError, exit 2), and a
// finished run in its directory has the same config (else InputError naming the directory and the
// first key that differs). Marks such finished runs `skip`; an unfinished run of the same config
// with a checkpoint.bin is continued (`resume`: bit for bit the run it would have been).
void preflight(std::vector<ChildJob>& jobs);

}  // namespace drift::cli
