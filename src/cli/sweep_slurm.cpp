// drift sweep beyond one machine: --launcher slurm (one job array over the unfinished runs),
// --run-task (what each array task runs), --status and --print-commands. docs/workflow.md.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/external_command.h"
#include "cli/sweep_jobs.h"
#include "io/npy.h"
#include "study/run_state.h"
#include "study/slurm_job.h"

namespace drift::cli {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

// The Slurm submissions recorded in a sweep.json (none when there is no such file or section).
ojson recorded_jobs(const std::string& dir) {
  if (!fs::exists(fs::path(dir) / "sweep.json")) return ojson::array();
  const nlohmann::json j = read_sweep_index(dir);
  if (!j.contains("slurm") || !j["slurm"].contains("jobs") || !j["slurm"]["jobs"].is_array()) return ojson::array();
  return ojson::parse(j["slurm"]["jobs"].dump());
}

struct QueueView {
  bool known = true;     // false: squeue could not be asked
  std::string problem;   // why not
  std::map<size_t, QueuedTask> tasks;  // by run index: the task of the latest submission in the queue
};

// The array tasks of these submissions still in the queue (squeue of this user's jobs: asking for
// the job ids instead fails outright once one of them has left the queue).
QueueView queued_tasks(const ojson& jobs) {
  QueueView q;
  if (jobs.empty()) return q;
  const CommandOutput r = run_command({"squeue", "--user=" + std::to_string(getuid()), "--noheader", "--array",
                                       std::string("--format=") + kSqueueFormat});
  if (!r.started || r.status != 0) {
    q.known = false;
    q.problem = r.started ? "squeue exited " + std::to_string(r.status) + ": " + r.err : r.err;
    return q;
  }
  std::map<std::string, size_t> order;  // job id -> its place in the submissions (later wins)
  for (size_t k = 0; k < jobs.size(); ++k) order[jobs[k].value("job_id", std::string())] = k;
  std::map<size_t, size_t> place;
  for (auto& t : parse_squeue(r.out)) {
    const auto it = order.find(t.job_id);
    if (it == order.end()) continue;
    if (place.count(t.index) && place[t.index] > it->second) continue;
    place[t.index] = it->second;
    q.tasks[t.index] = t;
  }
  return q;
}

std::vector<std::string> args_of(const nlohmann::json& run) {
  std::vector<std::string> a;
  if (run.contains("args") && run["args"].is_array())
    for (const auto& x : run["args"])
      if (x.is_string()) a.push_back(x.get<std::string>());
  return a;
}

std::string command_line(const std::vector<std::string>& args) {
  std::string line = shell_quote(self_exe());
  for (const auto& a : args) line += " " + shell_quote(a);
  return line;
}

}  // namespace

void submit_slurm(const SweepOptions& o) {
  const SweepJobs s = plan_sweep_jobs(o);
  ojson jobs_record = recorded_jobs(o.out);
  const QueueView queue = queued_tasks(jobs_record);
  if (!queue.known) throw std::runtime_error("sweep: cannot see the Slurm queue (" + queue.problem + ")");
  std::vector<ChildResult> results(s.jobs.size());
  std::vector<size_t> submit;
  size_t finished = 0;
  for (size_t i = 0; i < s.jobs.size(); ++i) {
    if (s.jobs[i].skip) {
      results[i].status = RunStatus::skipped_existing;
      results[i].summary = read_summary(s.jobs[i].run.dir);
      ++finished;
      continue;
    }
    // Queued earlier: submitted; to be submitted now: not started until sbatch accepts them.
    const bool queued = queue.tasks.count(i);
    results[i].status = queued ? RunStatus::submitted : RunStatus::not_started;
    if (!queued) submit.push_back(i);
  }
  ojson index = sweep_index(o, s, results);
  if (!queue.tasks.empty()) {
    // A queued task runs the run at its index in sweep.json: the plan must not move under it.
    const nlohmann::json before = read_sweep_index(o.out);
    bool same = before["runs"].size() == index["runs"].size();
    for (size_t i = 0; same && i < index["runs"].size(); ++i)
      same = args_of(before["runs"][i]) == args_of(nlohmann::json::parse(index["runs"][i].dump()));
    if (!same)
      throw InputError(o.out + ": " + std::to_string(queue.tasks.size()) +
                       " tasks of an earlier submission of a different sweep are still queued or running; wait for "
                       "them or scancel them, or choose another --out");
  }
  // The submissions so far, and the batch script they ran (relative to DIR).
  const auto slurm_section = [&] {
    ojson j = {{"jobs", jobs_record}};
    if (!jobs_record.empty()) j["script"] = "slurm/sweep.sbatch";
    return j;
  };
  index["slurm"] = slurm_section();
  write_sweep_index(o.out, index);
  if (submit.empty()) {
    std::printf("sweep: nothing to submit: %zu runs, %zu finished, %zu queued or running (drift sweep --status %s)\n",
                s.jobs.size(), finished, queue.tasks.size(), o.out.c_str());
    return;
  }
  const fs::path slurm_dir = fs::absolute(o.out) / "slurm";
  fs::create_directories(slurm_dir);
  SlurmScript script;
  script.sweep_dir = o.out;
  script.log_dir = slurm_dir.string();
  script.work_dir = fs::current_path().string();
  script.drift = self_exe();
  const std::string script_path = (slurm_dir / "sweep.sbatch").string();
  io::write_file_atomic(script_path, sbatch_script(script));
  const std::string spec = array_spec(submit, o.array_throttle);
  std::vector<std::string> argv = {"sbatch", "--parsable", "--array=" + spec};
  argv.insert(argv.end(), o.sbatch_args.begin(), o.sbatch_args.end());
  argv.push_back(script_path);
  const CommandOutput r = run_command(argv);
  if (!r.started) throw std::runtime_error("sweep: cannot run sbatch (" + r.err + "); is Slurm installed here?");
  if (r.status != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += " " + shell_quote(a);
    throw std::runtime_error("sweep: sbatch exited " + std::to_string(r.status) + ": " + r.err + "(command:" + cmd + ")");
  }
  const std::string job_id = parse_sbatch_job_id(r.out);
  jobs_record.push_back({{"job_id", job_id}, {"array", spec}, {"tasks", submit}, {"sbatch_args", o.sbatch_args}});
  for (const size_t i : submit) results[i].status = RunStatus::submitted;
  index = sweep_index(o, s, results);
  index["slurm"] = slurm_section();
  write_sweep_index(o.out, index);
  std::printf("sweep: submitted job array %s: %zu of %zu runs (--array=%s), %zu finished, %zu already queued; "
              "logs %s/task-<index>.log; status: drift sweep --status %s\n",
              job_id.c_str(), submit.size(), s.jobs.size(), spec.c_str(), finished, queue.tasks.size(),
              slurm_dir.string().c_str(), o.out.c_str());
}

void print_sweep_commands(const SweepOptions& o) {
  const SweepJobs s = plan_sweep_jobs(o);
  std::vector<ChildResult> results(s.jobs.size());
  for (size_t i = 0; i < s.jobs.size(); ++i)
    if (s.jobs[i].skip) results[i].status = RunStatus::skipped_existing;
  write_sweep_index(o.out, sweep_index(o, s, results));
  // An unfinished run with a checkpoint is continued (--resume), so running the lines loses no work.
  for (const auto& j : s.jobs)
    if (!j.skip) std::printf("%s\n", command_line(train_args(j.run)).c_str());
}

int run_sweep_task(const std::string& dir, const std::string& index_text) {
  const nlohmann::json index = read_sweep_index(dir);
  const auto& runs = index["runs"];
  size_t i = 0, end = 0;
  try {
    i = std::stoull(index_text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (runs.empty()) throw InputError(dir + "/sweep.json: lists no runs");
  if (end == 0 || end != index_text.size() || index_text[0] == '-' || i >= runs.size())
    throw InputError("--run-task INDEX: expected 0 to " + std::to_string(runs.size() - 1) + " (the runs of " + dir +
                     "/sweep.json), got '" + index_text + "'");
  std::vector<ChildJob> jobs(1);
  try {
    jobs[0].run = train_run_from_args(args_of(runs[i]));
  } catch (const std::invalid_argument& e) {
    throw InputError(dir + "/sweep.json: runs[" + std::to_string(i) + "].args: " + e.what());
  }
  preflight(jobs);  // a finished run of another config refused; an unfinished one of this config resumed
  const std::string& run_dir = jobs[0].run.dir;
  if (jobs[0].skip) {
    std::fprintf(stderr, "drift sweep: run %zu (%s) finished already; nothing to do\n", i, run_dir.c_str());
    return kExitOk;
  }
  std::fprintf(stderr, "drift sweep: run %zu of %zu: %s, %s\n", i, runs.size(), run_dir.c_str(),
               jobs[0].run.resume ? "continuing from its checkpoint" : "starting");
  std::fflush(stderr);
  const int status = train_in_process(jobs[0].run);
  const char* job = std::getenv("SLURM_JOB_ID");
  if (status == kExitPreempted && job) {
    // The checkpoint is written; back into the queue, where the next start continues it bit for bit.
    std::fprintf(stderr, "drift sweep: requeueing Slurm job %s\n", job);
    std::fflush(stderr);
    const CommandOutput r = run_command({"scontrol", "requeue", job});
    if (!r.started || r.status != 0)
      std::fprintf(stderr, "drift sweep: scontrol requeue %s failed (%s%s); rerun the sweep command to resubmit\n", job,
                   r.started ? ("exit " + std::to_string(r.status) + ": ").c_str() : "", r.err.c_str());
  }
  return status;
}

void print_sweep_status(const std::string& dir) {
  const nlohmann::json index = read_sweep_index(dir);
  const auto& runs = index["runs"];
  const ojson jobs = recorded_jobs(dir);
  const QueueView queue = queued_tasks(jobs);
  std::set<size_t> submitted;
  for (const auto& j : jobs)
    if (j.contains("tasks"))
      for (const auto& t : j["tasks"]) submitted.insert(t.get<size_t>());
  std::map<std::string, size_t> counts;
  std::printf("%-5s  %-11s  %s\n", "index", "state", "run");
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string rel = runs[i].value("dir", std::string());
    const RunFiles files = read_run_files((fs::path(dir) / rel).string());
    std::string failure;
    if (submitted.count(i)) {
      const std::string log = (fs::path(dir) / "slurm" / ("task-" + std::to_string(i) + ".log")).string();
      if (fs::exists(log)) failure = tail_lines(log, 8);
    } else if (runs[i].value("status", std::string()) == "failed") {
      const std::string log = runs[i].value("log", std::string());
      if (!log.empty()) failure = tail_lines((fs::path(dir) / log).string(), 8);
      if (failure.empty()) failure = "(exit " + runs[i].value("exit_code", nlohmann::json()).dump() + ", no log)\n";
    }
    const auto t = queue.tasks.find(i);
    const bool running_here = runs[i].value("status", std::string()) == "running";  // a local sweep's record
    const RunView v = describe_run(files, t == queue.tasks.end() ? nullptr : &t->second, failure, running_here);
    ++counts[to_string(v.state)];
    if (v.state == RunState::failed) {
      std::printf("%-5zu  %-11s  %s; log tail:\n", i, to_string(v.state), rel.c_str());
      size_t from = 0;
      while (from < v.detail.size()) {
        const size_t nl = v.detail.find('\n', from);
        std::printf("       | %s\n", v.detail.substr(from, nl - from).c_str());
        if (nl == std::string::npos) break;
        from = nl + 1;
      }
    } else {
      std::printf("%-5zu  %-11s  %s%s%s\n", i, to_string(v.state), rel.c_str(), v.detail.empty() ? "" : "  ",
                  v.detail.c_str());
    }
  }
  std::string line = std::to_string(runs.size()) + (runs.size() == 1 ? " run:" : " runs:");
  const char* order[] = {"finished", "diverged", "running", "queued", "failed", "stopped", "not-started"};
  bool first = true;
  for (const char* k : order)
    if (counts.count(k)) {
      line += std::string(first ? " " : ", ") + std::to_string(counts[k]) + " " + k;
      first = false;
    }
  std::printf("%s\n", line.c_str());
  if (!queue.known) std::printf("(the Slurm queue could not be read: %s)\n", queue.problem.c_str());
}

}  // namespace drift::cli
