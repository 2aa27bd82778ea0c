// drift sweep: the cross product seeds × --set values × policy files as separate `drift train`
// processes, N at a time, each in its own run directory; DIR/sweep.json lists every run.
// Finished runs (summary.json present, same config) are skipped, so an interrupted sweep resumes.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/json_read.h"
#include "cli/child_runs.h"
#include "cli/commands.h"
#include "diag/sweep_plan.h"
#include "io/out_dir.h"
#include "io/npy.h"

namespace drift::cli {

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

struct SweepOptions {
  std::string config, seeds, out;
  std::vector<std::string> sets, policies;
  size_t jobs = 1;
  bool quiet = false;
};

// A --set value as drift train reads it: JSON if it parses, else a string.
ojson value_json(const std::string& text) {
  nlohmann::json j;
  try {
    if (!io::try_parse_json(text, "--set value '" + text + "'", j)) return text;
  } catch (const io::IoError& e) {
    throw InputError(e.what());
  }
  return ojson::parse(j.dump());
}

ojson pairs_json(const std::vector<std::pair<std::string, std::string>>& kv) {
  ojson j = ojson::object();
  for (const auto& [k, v] : kv) j[k] = value_json(v);
  return j;
}

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

void run_sweep(const SweepOptions& o) {
  std::vector<PlannedRun> plan;
  std::vector<SweepSet> sets;
  std::vector<SweepPolicy> policies;
  std::vector<uint64_t> seeds;
  try {
    seeds = parse_seed_list(o.seeds);
    for (const auto& s : o.sets) sets.push_back(parse_sweep_set(s));
    for (const auto& p : o.policies) policies.push_back(load_policy_file(p));
    plan = plan_sweep(seeds, sets, policies, fs::path(o.config).stem().string());
  } catch (const SweepError& e) {
    throw InputError(e.what());
  }
  if (o.jobs == 0) throw InputError("-j: expected at least 1");
  const fs::path out(o.out);
  std::vector<ChildJob> jobs;
  for (const auto& r : plan) {
    ChildJob j;
    j.run.config = o.config;
    if (!r.policy.empty()) j.run.sets.push_back("output.name=" + nlohmann::json(r.policy).dump());
    j.run.sets.insert(j.run.sets.end(), r.sets.begin(), r.sets.end());
    j.run.seed = r.seed;
    j.run.dir = (out / r.rel_dir).string();
    std::string flat = r.rel_dir;
    for (auto& c : flat)
      if (c == '/') c = '~';
    j.log = (out / "logs" / (flat + ".log")).string();
    jobs.push_back(std::move(j));
  }
  io::check_output_dir(o.out, "--out");
  preflight(jobs);  // every config resolves, finished runs match: before anything starts

  std::vector<ChildResult> results(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    if (jobs[i].skip) results[i].status = RunStatus::skipped_existing;
  auto write_index = [&] {
    ojson j;
    j["version"] = DRIFT_VERSION;
    j["config"] = o.config;
    j["seeds"] = seeds;
    ojson js = ojson::array();
    for (const auto& s : sets) {
      ojson vals = ojson::array();
      for (const auto& v : s.values) vals.push_back(value_json(v));
      js.push_back({{"key", s.key}, {"values", vals}});
    }
    j["sets"] = js;
    ojson jp = ojson::array();
    for (const auto& p : policies) jp.push_back({{"label", p.label}, {"file", p.file}});
    j["policies"] = jp;
    ojson runs = ojson::array();
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto& r = results[i];
      ojson e = {{"dir", plan[i].rel_dir},
                 {"seed", plan[i].seed},
                 {"policy", plan[i].policy},
                 {"overrides", pairs_json(plan[i].overrides)},
                 {"varying", pairs_json(plan[i].varying)},
                 {"status", to_string(r.status)},
                 {"exit_code", r.exit_code ? ojson(*r.exit_code) : ojson(nullptr)}};
      e["divergence_step"] = r.summary && (*r.summary).contains("divergence_step")
                                 ? ojson::parse((*r.summary)["divergence_step"].dump())
                                 : ojson(nullptr);
      e["log"] = r.status == RunStatus::failed ? ojson(fs::relative(jobs[i].log, out).string()) : ojson(nullptr);
      ojson args = ojson::array();
      for (const auto& a : train_args(jobs[i].run)) args.push_back(a);
      e["args"] = args;
      runs.push_back(e);
    }
    j["runs"] = runs;
    io::create_output_dir(out.string(), "--out");
    io::write_file_atomic((out / "sweep.json").string(), j.dump(2) + "\n");
  };
  write_index();

  size_t skipped = 0;
  for (const auto& j : jobs) skipped += j.skip;
  if (!o.quiet)
    std::printf("sweep: %zu runs (%zu seeds x %zu policies x %zu --set combinations), %zu already finished, %zu at a time\n",
                jobs.size(), seeds.size(), std::max<size_t>(policies.size(), 1),
                jobs.size() / seeds.size() / std::max<size_t>(policies.size(), 1), skipped, o.jobs);
  size_t done = 0;
  const bool completed = run_children(jobs, o.jobs, results, [&](size_t i, const ChildResult& r) {
    ++done;
    write_index();
    if (r.status == RunStatus::failed) {
      std::fprintf(stderr, "[%zu/%zu] FAILED (exit %d) %s; log %s\n%s", done, jobs.size(), r.exit_code.value_or(-1),
                   jobs[i].run.dir.c_str(), jobs[i].log.c_str(), r.stderr_tail.c_str());
    } else if (!o.quiet) {
      std::printf("[%zu/%zu] %-16s %s  %s\n", done, jobs.size(), to_string(r.status), jobs[i].run.dir.c_str(),
                  detail(r).c_str());
      std::fflush(stdout);
    }
  });
  write_index();
  size_t failed = 0, diverged = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    failed += results[i].status == RunStatus::failed;
    diverged += results[i].summary && results[i].summary->value("diverged", false);
  }
  if (!completed) {
    std::fprintf(stderr, "sweep: interrupted; running children were stopped. Run the same command again to resume.\n");
    std::fflush(nullptr);
    std::exit(130);
  }
  if (!o.quiet)
    std::printf("sweep: %zu runs, %zu diverged, %zu failed; index %s; compare with: drift compare %s\n", jobs.size(),
                diverged, failed, (out / "sweep.json").string().c_str(), o.out.c_str());
  if (failed) throw std::runtime_error("sweep: " + std::to_string(failed) + " of " + std::to_string(jobs.size()) +
                                       " runs failed (listed above with their logs)");
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  auto* cmd = app.add_subcommand(
      "sweep", "Run the cross product of seeds, --set values and policy files as separate drift train processes");
  cmd->add_option("--config", o->config, "Base run config (docs/config.md)")->required();
  cmd->add_option("--seeds", o->seeds, "Seeds: 1-8, 1,3,5 or mixed (1-3,7)")->required();
  cmd->add_option("--set", o->sets,
                  "key=v1,v2,...: one run per value (commas inside [] {} or quotes do not split), repeatable");
  cmd->add_option("--policies", o->policies,
                  "Policy files (JSON): matmul rule list, precision section, or config overlay; label = file stem");
  cmd->add_option("-j,--jobs", o->jobs, "Runs at a time")->check(job_count())->capture_default_str();
  cmd->add_option("--out", o->out, "Sweep directory: <policy>/<key=value,...>/seed<s> and sweep.json")->required();
  cmd->add_flag("--quiet", o->quiet, "Report only failures");
  cmd->callback([o] { run_sweep(*o); });
}

}  // namespace drift::cli
