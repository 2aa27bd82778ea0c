// drift sweep: the cross product seeds × --set values × policy files, each run a `drift train` in
// its own run directory; DIR/sweep.json lists every run. Launchers: local processes N at a time
// (here, with live progress), one Slurm job array or plain commands (sweep_slurm.cpp). Finished
// runs (summary.json present, same config) are skipped, so an interrupted sweep resumes.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/sweep_jobs.h"
#include "cli/sweep_progress.h"
#include "io/out_dir.h"

namespace drift::cli {

namespace {

namespace fs = std::filesystem;

std::string detail(const ChildResult& r) {
  if (!r.summary) return "";
  const auto& s = *r.summary;
  if (s.value("diverged", false))
    return "diverged at step " + (s["divergence_step"].is_number() ? s["divergence_step"].dump() : std::string("?")) +
           (s.contains("reason") && s["reason"].is_string() ? ": " + s["reason"].get<std::string>() : "");
  char b[64];
  if (s.contains("final_val_loss") && s["final_val_loss"].is_number()) {
    std::snprintf(b, sizeof b, "val loss %.4f", s["final_val_loss"].get<double>());
    return b;
  }
  return "";
}

void run_local_sweep(const SweepOptions& o, double progress_every_s) {
  const SweepJobs s = plan_sweep_jobs(o);
  if (o.jobs == 0) throw InputError("-j: expected at least 1");
  const auto& jobs = s.jobs;
  std::vector<ChildResult> results(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    if (jobs[i].skip) results[i].status = RunStatus::skipped_existing;
  write_sweep_index(o.out, sweep_index(o, s, results));

  size_t skipped = 0;
  for (const auto& j : jobs) skipped += j.skip;
  std::vector<std::string> dirs, labels;
  for (size_t i = 0; i < jobs.size(); ++i) {
    dirs.push_back(jobs[i].run.dir);
    labels.push_back(s.plan[i].rel_dir);
  }
  SweepProgress progress(dirs, labels, jobs.size() - skipped, progress_every_s);
  if (!o.quiet)
    std::printf("sweep: %zu runs (%zu seeds x %zu policies x %zu --set combinations), %zu already finished, %zu at a time\n",
                jobs.size(), s.seeds.size(), std::max<size_t>(s.policies.size(), 1),
                jobs.size() / s.seeds.size() / std::max<size_t>(s.policies.size(), 1), skipped, o.jobs);
  size_t done = 0;
  const auto on_done = [&](size_t i, const ChildResult& r) {
    ++done;
    progress.finished(r.status != RunStatus::skipped_existing);
    write_sweep_index(o.out, sweep_index(o, s, results));
    if (r.status == RunStatus::failed) {
      progress.clear();
      std::fprintf(stderr, "[%zu/%zu] FAILED (exit %d) %s; log %s\n%s", done, jobs.size(), r.exit_code.value_or(-1),
                   jobs[i].run.dir.c_str(), jobs[i].log.c_str(), r.stderr_tail.c_str());
    } else if (!o.quiet) {
      progress.clear();
      std::printf("[%zu/%zu] %-16s %s  %s\n", done, jobs.size(), to_string(r.status), jobs[i].run.dir.c_str(),
                  detail(r).c_str());
      std::fflush(stdout);
    }
  };
  std::vector<size_t> recorded_running;
  const auto on_poll = [&](const std::vector<size_t>& running) {
    if (running != recorded_running) {  // a run started: sweep.json says so (drift sweep --status reads it)
      for (const size_t i : running) results[i].status = RunStatus::running;
      write_sweep_index(o.out, sweep_index(o, s, results));
      recorded_running = running;
    }
    if (!o.quiet) progress.poll(running);
  };
  const bool completed = run_children(jobs, o.jobs, results, on_done, on_poll);
  progress.clear();
  write_sweep_index(o.out, sweep_index(o, s, results));
  size_t failed = 0, diverged = 0;
  for (const auto& r : results) {
    failed += r.status == RunStatus::failed;
    diverged += r.summary && r.summary->value("diverged", false);
  }
  if (!completed) {
    std::fprintf(stderr, "sweep: interrupted; running children were stopped. Run the same command again to resume.\n");
    std::fflush(nullptr);
    std::exit(kExitInterrupted);
  }
  if (!o.quiet)
    std::printf("sweep: %zu runs, %zu diverged, %zu failed; index %s; compare with: drift compare %s\n", jobs.size(),
                diverged, failed, (fs::path(o.out) / "sweep.json").string().c_str(), o.out.c_str());
  if (failed) throw std::runtime_error("sweep: " + std::to_string(failed) + " of " + std::to_string(jobs.size()) +
                                       " runs failed (listed above with their logs)");
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto progress_every = std::make_shared<double>(-1);
  auto* cmd = app.add_subcommand(
      "sweep", "Run the cross product of seeds, --set values and policy files as drift train runs: local processes, "
               "one Slurm job array, or printed commands (docs/workflow.md)");
  cmd->add_option("--config", o->config, "Base run config (docs/config.md)");
  cmd->add_option("--seeds", o->seeds, "Seeds: 1-8, 1,3,5 or mixed (1-3,7)");
  cmd->add_option("--set", o->sets,
                  "key=v1,v2,...: one run per value (commas inside [] {} or quotes do not split), repeatable");
  cmd->add_option("--policies", o->policies,
                  "Policy files (JSON): matmul rule list, precision section, or config overlay; label = file stem");
  cmd->add_option("-j,--jobs", o->jobs, "Runs at a time (local launcher)")->check(job_count())->capture_default_str();
  cmd->add_option("--out", o->out, "Sweep directory: <policy>/<key=value,...>/seed<s> and sweep.json");
  cmd->add_flag("--quiet", o->quiet, "Report only failures");
  cmd->add_option("--progress-every", *progress_every,
                  "Seconds between progress lines (default: 0.5 on a terminal, 30 otherwise)");
  cmd->add_option("--launcher", o->launcher,
                  "local: child processes here; slurm: one job array (sbatch), one task per unfinished run")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  cmd->add_option("--sbatch-arg", o->sbatch_args,
                  "An option for sbatch (e.g. --sbatch-arg=--time=4:00:00), repeatable; overrides the script's #SBATCH lines")
      ->allow_extra_args(false);
  cmd->add_option("--array-throttle", o->array_throttle, "Slurm: at most N array tasks running at a time (%N)");
  cmd->add_flag("--print-commands", o->print_commands,
                "Write the plan (sweep.json) and print one drift train command per unfinished run, for GNU parallel "
                "or another scheduler; runs nothing");
  cmd->add_option("--run-task", o->run_task,
                  "DIR INDEX: run the sweep's run INDEX (0-based, as in DIR/sweep.json): start it, continue it from "
                  "its checkpoint, or do nothing if it finished (what each Slurm array task runs)")
      ->expected(2);
  cmd->add_option("--status", o->status, "DIR: each run's state (queued, running, finished, diverged, failed)");
  cmd->callback([o, progress_every] {
    if (!o->run_task.empty()) {
      if (const int status = run_sweep_task(o->run_task[0], o->run_task[1])) std::exit(status);
    } else if (!o->status.empty()) {
      print_sweep_status(o->status);
    } else if (o->print_commands) {
      print_sweep_commands(*o);
    } else if (o->launcher == "slurm") {
      submit_slurm(*o);
    } else {
      if (*progress_every < 0) *progress_every = isatty(STDOUT_FILENO) ? 0.5 : 30.0;
      setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines reach a log file or pipe as they are printed
      run_local_sweep(*o, *progress_every);
    }
  });
}

}  // namespace drift::cli
