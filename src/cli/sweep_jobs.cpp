#include "cli/sweep_jobs.h"

#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "io/json_read.h"
#include "io/npy.h"
#include "io/out_dir.h"

namespace drift::cli {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

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

}  // namespace

SweepJobs plan_sweep_jobs(const SweepOptions& o) {
  for (const auto* opt : {&o.config, &o.seeds, &o.out})
    if (opt->empty())
      throw InputError("drift sweep needs --config, --seeds and --out (or --run-task DIR INDEX, or --status DIR)");
  SweepJobs s;
  try {
    s.seeds = parse_seed_list(o.seeds);
    for (const auto& x : o.sets) s.sets.push_back(parse_sweep_set(x));
    for (const auto& p : o.policies) s.policies.push_back(load_policy_file(p));
    s.plan = plan_sweep(s.seeds, s.sets, s.policies, fs::path(o.config).stem().string());
  } catch (const SweepError& e) {
    throw InputError(e.what());
  }
  const fs::path out(o.out);
  for (const auto& r : s.plan) {
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
    s.jobs.push_back(std::move(j));
  }
  io::check_output_dir(o.out, "--out");
  preflight(s.jobs);  // every config resolves, finished runs match: before anything starts
  return s;
}

ojson sweep_index(const SweepOptions& o, const SweepJobs& s, const std::vector<ChildResult>& results) {
  ojson j;
  j["version"] = DRIFT_VERSION;
  j["config"] = o.config;
  j["seeds"] = s.seeds;
  ojson js = ojson::array();
  for (const auto& set : s.sets) {
    ojson vals = ojson::array();
    for (const auto& v : set.values) vals.push_back(value_json(v));
    js.push_back({{"key", set.key}, {"values", vals}});
  }
  j["sets"] = js;
  ojson jp = ojson::array();
  for (const auto& p : s.policies) jp.push_back({{"label", p.label}, {"file", p.file}});
  j["policies"] = jp;
  j["launcher"] = o.launcher;
  ojson runs = ojson::array();
  for (size_t i = 0; i < s.plan.size(); ++i) {
    const auto& r = results[i];
    const auto& p = s.plan[i];
    ojson e = {{"dir", p.rel_dir},
               {"seed", p.seed},
               {"policy", p.policy},
               {"overrides", pairs_json(p.overrides)},
               {"varying", pairs_json(p.varying)},
               {"status", to_string(r.status)},
               {"exit_code", r.exit_code ? ojson(*r.exit_code) : ojson(nullptr)}};
    e["divergence_step"] = r.summary && (*r.summary).contains("divergence_step")
                               ? ojson::parse((*r.summary)["divergence_step"].dump())
                               : ojson(nullptr);
    e["log"] = r.status == RunStatus::failed ? ojson(fs::relative(s.jobs[i].log, o.out).string()) : ojson(nullptr);
    e["resumed"] = s.jobs[i].run.resume;  // continued from its checkpoint rather than started
    TrainRun from_scratch = s.jobs[i].run;  // the record reproduces the run whole
    from_scratch.resume = false;
    ojson args = ojson::array();
    for (const auto& a : train_args(from_scratch)) args.push_back(a);
    e["args"] = args;
    runs.push_back(e);
  }
  j["runs"] = runs;
  return j;
}

void write_sweep_index(const std::string& dir, const ojson& index) {
  io::create_output_dir(dir, "--out");
  io::write_file_atomic((fs::path(dir) / "sweep.json").string(), index.dump(2) + "\n");
}

nlohmann::json read_sweep_index(const std::string& dir) {
  const std::string path = (fs::path(dir) / "sweep.json").string();
  std::ifstream f(path);
  if (!f) throw InputError(path + ": cannot be read (is " + dir + " a sweep directory?)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("runs") || !j["runs"].is_array())
    throw InputError(path + ": expected an object with a \"runs\" list");
  return j;
}

}  // namespace drift::cli
