// drift sweep's plan, shared by its launchers (local processes, a Slurm job array, printed
// commands) and by --run-task / --status: the options, the runs as `drift train` jobs checked
// before anything starts, and DIR/sweep.json.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/child_runs.h"
#include "study/sweep_plan.h"

namespace drift::cli {

struct SweepOptions {
  std::string config, seeds, out;
  std::vector<std::string> sets, policies;
  size_t jobs = 1;
  bool quiet = false;
  std::string launcher = "local";        // local | slurm
  std::vector<std::string> sbatch_args;  // passed to sbatch before the script
  size_t array_throttle = 0;             // at most N array tasks at a time (0: no limit)
  bool print_commands = false;
  std::vector<std::string> run_task;     // DIR INDEX
  std::string status;                    // DIR
};

struct SweepJobs {
  std::vector<uint64_t> seeds;
  std::vector<SweepSet> sets;
  std::vector<SweepPolicy> policies;
  std::vector<PlannedRun> plan;
  std::vector<ChildJob> jobs;  // one per planned run, after preflight (finished runs marked skip)
};

// The cross product as jobs, every config resolved and finished runs recognised (preflight) before
// anything is written. Bad options or configs: InputError / ConfigError (exit 2).
SweepJobs plan_sweep_jobs(const SweepOptions& o);

// DIR/sweep.json's content: the plan and each run's status, exit code, divergence step, log and the
// `drift train` arguments that reproduce it from scratch (never --resume).
nlohmann::ordered_json sweep_index(const SweepOptions& o, const SweepJobs& s, const std::vector<ChildResult>& results);

// Writes it atomically to DIR/sweep.json (creating DIR).
void write_sweep_index(const std::string& dir, const nlohmann::ordered_json& index);

// DIR/sweep.json as written, or an InputError naming the file and what is wrong.
nlohmann::json read_sweep_index(const std::string& dir);

// The launchers and tools besides the local one (src/cli/sweep_slurm.cpp).
void submit_slurm(const SweepOptions& o);
void print_sweep_commands(const SweepOptions& o);
int run_sweep_task(const std::string& dir, const std::string& index);
void print_sweep_status(const std::string& dir);

}  // namespace drift::cli
