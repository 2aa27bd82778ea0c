#include "cli/child_runs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "io/json_read.h"
#include "study/run_state.h"
#include "train/config.h"

namespace drift::cli {

namespace fs = std::filesystem;

namespace {

volatile sig_atomic_t g_interrupted = 0;  // signals received
void on_signal(int) { g_interrupted = g_interrupted + 1; }

// fork + exec of this binary with `args`; returns the child's pid. `threads` > 0 sets OMP_NUM_THREADS.
pid_t spawn(const std::vector<std::string>& args, const std::string& log, unsigned threads) {
  std::vector<std::string> argv_s = {"drift"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  if (!log.empty()) fs::create_directories(fs::path(log).parent_path());
  const std::string threads_s = std::to_string(threads);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // The child: dies with the parent, writes only its log.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    setpgid(0, 0);  // the terminal's Ctrl-C goes to the parent, which forwards one SIGTERM
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
    const int err = log.empty() ? -1 : open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    if (threads > 0) setenv("OMP_NUM_THREADS", threads_s.c_str(), 1);
    execv("/proc/self/exe", argv.data());
    std::fprintf(stderr, "drift: cannot run /proc/self/exe: %s\n", std::strerror(errno));
    _exit(127);
  }
  return pid;
}

// Why a job must not start: its config, resolved again now, is not the one preflight checked.
std::optional<std::string> config_changed_since_preflight(const ChildJob& j) {
  if (!j.planned) return std::nullopt;
  std::optional<std::string> diff;
  try {
    diff = config_difference(nlohmann::json::parse(planned_config(j.run).dump()), *j.planned);
  } catch (const std::exception& e) {
    return "not started: " + j.run.config + " no longer resolves (" + e.what() + ")";
  }
  if (!diff) return std::nullopt;
  return "not started: " + j.run.config + " changed since the sweep checked it (" + *diff +
         " differs); runs already started keep the config they started with. Rerun the sweep";
}

// Whether a finished run's config.json is not the config preflight checked: the base config was
// edited after this run was launched but before it read the file.
std::optional<std::string> config_differs_from_preflight(const ChildJob& j) {
  if (!j.planned) return std::nullopt;
  std::optional<std::string> diff;
  try {
    diff = config_difference(io::read_json_file((fs::path(j.run.dir) / "config.json").string(), "run's config.json"),
                             *j.planned);
  } catch (const std::exception& e) {
    return std::string("cannot compare the run's config.json with the checked config: ") + e.what();
  }
  if (!diff) return std::nullopt;
  return "ran a config other than the one the sweep checked (" + *diff + " differs): " + j.run.config +
         " changed while the run started. Rerun the sweep";
}

}  // namespace

const char* to_string(RunStatus s) {
  switch (s) {
    case RunStatus::pending: return "pending";
    case RunStatus::running: return "running";
    case RunStatus::ok: return "ok";
    case RunStatus::diverged: return "diverged";
    case RunStatus::failed: return "failed";
    case RunStatus::skipped_existing: return "skipped-existing";
    case RunStatus::interrupted: return "interrupted";
    case RunStatus::not_started: return "not-started";
    case RunStatus::submitted: return "submitted";
  }
  return "?";
}

std::optional<nlohmann::json> read_summary(const std::string& dir) {
  try {
    return io::read_json_file((fs::path(dir) / "summary.json").string(), "run's summary.json");
  } catch (const io::IoError&) {
    return std::nullopt;
  }
}

void preflight(std::vector<ChildJob>& jobs) {
  for (auto& j : jobs) {
    const nlohmann::ordered_json planned = planned_config(j.run);  // ConfigError -> exit 2
    j.planned = planned;
    // ... and its diagnostics probes resolve at the model's sites, as drift train checks first.
    check_run_rules(parse_run_config(nlohmann::json::parse(planned.dump())));
    const fs::path dir(j.run.dir);
    const bool finished = fs::exists(dir / "summary.json");
    if (!finished && !fs::exists(dir / "checkpoint.bin")) continue;
    nlohmann::json existing;
    try {
      existing = io::read_json_file((dir / "config.json").string(), "run's config.json");
    } catch (const io::IoError&) {
      if (!finished) continue;  // nothing to continue from: start afresh
      throw InputError(j.run.dir + ": holds a summary.json but no readable config.json; remove the directory");
    }
    if (!finished) {
      j.run.resume = !config_difference(existing, planned);  // another config's leftovers are overwritten
      continue;
    }
    if (const auto diff = config_difference(existing, planned))
      throw InputError(j.run.dir + ": holds a finished run of a different config (" + *diff +
                       " differs); remove it or choose another --out");
    j.skip = true;
  }
}

bool run_children(const std::vector<ChildJob>& jobs, size_t parallel, std::vector<ChildResult>& results,
                  const std::function<void(size_t, const ChildResult&)>& on_done,
                  const std::function<void(const std::vector<size_t>&)>& on_poll) {
  results.assign(jobs.size(), ChildResult{});
  if (parallel == 0) parallel = 1;
  unsigned threads = 0;
  if (!std::getenv("OMP_NUM_THREADS")) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    threads = std::max(1u, cores / static_cast<unsigned>(std::min<size_t>(parallel, cores)));
  }
  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  g_interrupted = 0;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);

  std::map<pid_t, size_t> running;
  std::set<pid_t> signalled;
  size_t next = 0;
  auto finish = [&](size_t i, int wstatus) {
    ChildResult& r = results[i];
    r.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    r.summary = read_summary(jobs[i].run.dir);
    if (g_interrupted && *r.exit_code != 0) {
      r.status = RunStatus::interrupted;
    } else if (*r.exit_code != 0 || !r.summary) {
      r.status = RunStatus::failed;
      r.stderr_tail = tail_lines(jobs[i].log, 8);
      if (*r.exit_code == 0) r.stderr_tail += "(exited 0 without writing summary.json)\n";
    } else if (const auto ran_other = config_differs_from_preflight(jobs[i])) {
      r.status = RunStatus::failed;  // the config changed between launch and the child reading it
      r.stderr_tail = *ran_other + "\n";
    } else {
      r.status = r.summary->value("diverged", false) ? RunStatus::diverged : RunStatus::ok;
    }
    std::error_code ec;
    if (!jobs[i].log.empty() && fs::exists(jobs[i].log, ec) && fs::file_size(jobs[i].log, ec) == 0)
      fs::remove(jobs[i].log, ec);
    on_done(i, r);
  };

  while (true) {
    // Launch while there is room (skipped jobs finish at once).
    while (!g_interrupted && next < jobs.size() && running.size() < parallel) {
      const size_t i = next++;
      if (jobs[i].skip) {
        results[i].status = RunStatus::skipped_existing;
        results[i].summary = read_summary(jobs[i].run.dir);
        on_done(i, results[i]);
        continue;
      }
      if (const auto changed = config_changed_since_preflight(jobs[i])) {
        results[i].status = RunStatus::failed;
        results[i].stderr_tail = *changed + "\n";
        on_done(i, results[i]);
        continue;
      }
      running[spawn(train_args(jobs[i].run), jobs[i].log, threads)] = i;
    }
    if (running.empty() && (g_interrupted || next >= jobs.size())) break;
    if (g_interrupted) {
      // One SIGTERM asks a child to checkpoint and stop; a second Ctrl-C here kills outright.
      for (const auto& [pid, i] : running) {
        if (g_interrupted >= 2) kill(pid, SIGKILL);
        else if (signalled.insert(pid).second) kill(pid, SIGTERM);
      }
    }
    int wstatus = 0;
    const pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid > 0) {
      const auto it = running.find(pid);
      if (it != running.end()) {
        const size_t i = it->second;
        running.erase(it);
        finish(i, wstatus);
      }
      continue;
    }
    if (pid < 0 && errno != EINTR && errno != ECHILD) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (on_poll) {
      std::vector<size_t> now_running;
      for (const auto& [pid, i] : running) now_running.push_back(i);
      std::sort(now_running.begin(), now_running.end());
      on_poll(now_running);
    }
    const timespec ts{0, 20 * 1000 * 1000};  // 20 ms: polling keeps Ctrl-C handling free of races
    nanosleep(&ts, nullptr);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (results[i].status == RunStatus::pending) results[i].status = RunStatus::not_started;
    std::error_code ec;  // the log folder goes when every log in it was empty (removing a full one fails)
    if (!jobs[i].log.empty()) fs::remove(fs::path(jobs[i].log).parent_path(), ec);
  }
  const bool interrupted = g_interrupted;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  return !interrupted;
}

}  // namespace drift::cli
