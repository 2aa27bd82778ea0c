// drift bisect: which precision decision makes a run diverge. (1) the same seed twice: the
// divergence step must repeat (else the run is non-deterministic); (2) the fp32 baseline on the
// same seed must survive (else it is a training problem, not numerics); (3) full precision restored
// for one tensor class at a time, cheapest first, then one layer at a time within each matmul role
// whose restoration removes the divergence. Prints a table and writes DIR/bisect.json.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/json_read.h"
#include "cli/child_runs.h"
#include "cli/commands.h"
#include "study/bisect_plan.h"
#include "study/compare_render.h"
#include "io/out_dir.h"
#include "io/npy.h"

namespace drift::cli {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

struct BisectOptions {
  std::string config, out;
  std::vector<std::string> sets;
  uint64_t seed = 0;
  size_t jobs = 1;
};

// What one finished run says about its divergence.
struct Outcome {
  bool diverged = false;
  int64_t step = -1;
  std::string reason;
  uint64_t steps_completed = 0;
};

Outcome outcome_of(const json& s) {
  Outcome o;
  o.diverged = s.value("diverged", false);
  if (s.contains("divergence_step") && s["divergence_step"].is_number_integer()) o.step = s["divergence_step"].get<int64_t>();
  if (s.contains("reason") && s["reason"].is_string()) o.reason = s["reason"].get<std::string>();
  o.steps_completed = s.value("steps_completed", uint64_t{0});
  return o;
}

std::string describe(const Outcome& o) {
  if (o.diverged) return "diverged at step " + std::to_string(o.step) + (o.reason.empty() ? "" : " (" + o.reason + ")");
  return "survived " + std::to_string(o.steps_completed) + " steps";
}

// Effect of a restoration on the divergence of the run under test.
std::string effect(const Outcome& base, const Outcome& o) {
  if (!o.diverged) return "removes";
  if (o.step > base.step) return "delays";
  if (o.step < base.step) return "earlier";
  return "no-effect";
}

std::string effect_text(const std::string& e, const Outcome& o) {
  if (e == "removes") return "removes the divergence";
  if (e == "delays") return "delays it to step " + std::to_string(o.step);
  if (e == "earlier") return "brings it forward to step " + std::to_string(o.step);
  return "no effect";
}

// metrics.jsonl of two runs, timing fields aside, are the same.
bool same_metrics(const std::string& a, const std::string& b) {
  auto read = [](const std::string& dir) {
    std::vector<json> lines;
    std::ifstream f(fs::path(dir) / "metrics.jsonl");
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty()) continue;
      json j = json::parse(line, nullptr, false);
      if (j.is_object()) {
        j.erase("tokens_per_s");
        j.erase("elapsed_s");
      }
      lines.push_back(j);
    }
    return lines;
  };
  return read(a) == read(b);
}

class Bisector {
 public:
  explicit Bisector(const BisectOptions& o) : o_(o) {
    dir_ = o.out.empty() ? "runs/bisect/" + fs::path(o.config).stem().string() + "-seed" + std::to_string(o.seed) : o.out;
    report_ = {{"version", DRIFT_VERSION}, {"config", o.config}, {"seed", o.seed}, {"sets", o.sets}, {"dir", dir_}};
  }

  void run();

 private:
  // Runs the named variants (extra --set assignments on top of the user's), N at a time.
  std::vector<Outcome> run_batch(const std::vector<std::pair<std::string, std::vector<std::string>>>& variants) {
    std::vector<ChildJob> jobs;
    for (const auto& [name, extra] : variants) {
      ChildJob j;
      j.run.config = o_.config;
      j.run.sets = o_.sets;
      j.run.sets.insert(j.run.sets.end(), extra.begin(), extra.end());
      j.run.seed = o_.seed;
      j.run.dir = (fs::path(dir_) / name).string();
      j.log = (fs::path(dir_) / "logs" / (name + ".log")).string();
      jobs.push_back(std::move(j));
    }
    preflight(jobs);
    std::vector<ChildResult> results;
    std::string failures;
    const bool completed = run_children(jobs, o_.jobs, results, [&](size_t i, const ChildResult& r) {
      if (r.status == RunStatus::failed)
        failures += jobs[i].run.dir + " failed (exit " + std::to_string(r.exit_code.value_or(-1)) + "); log " +
                    jobs[i].log + ":\n" + r.stderr_tail;
    });
    if (!completed) {
      std::fprintf(stderr, "bisect: interrupted; run the same command again to resume (finished runs are kept)\n");
      std::fflush(nullptr);
      std::exit(kExitInterrupted);
    }
    if (!failures.empty()) throw std::runtime_error("bisect: a run failed:\n" + failures);
    std::vector<Outcome> out;
    for (const auto& r : results) out.push_back(outcome_of(*r.summary));
    return out;
  }

  ojson restoration_json(const Restoration& r, const std::string& dir, const Outcome* o, const std::string& eff) {
    ojson j = {{"name", r.name}, {"role", r.role}, {"layer", r.layer}, {"status", r.applicable ? "run" : "skipped"},
               {"note", r.note}, {"sets", r.sets}};
    if (o) {
      j["dir"] = dir;
      j["diverged"] = o->diverged;
      j["divergence_step"] = o->diverged ? ojson(o->step) : ojson(nullptr);
      j["effect"] = eff;
    }
    return j;
  }

  // Runs the applicable restorations; returns the names whose restoration removes the divergence.
  std::vector<std::string> try_restorations(const std::vector<Restoration>& plan, const char* key) {
    std::vector<std::pair<std::string, std::vector<std::string>>> variants;
    auto dirname = [](const Restoration& r) {
      return "restore-" + r.role + (r.layer.empty() ? (r.role.empty() ? r.name : "") : "-" + r.layer);
    };
    for (size_t i = 0; i < plan.size(); ++i)
      if (plan[i].applicable) {
        variants.emplace_back(dirname(plan[i]), plan[i].sets);
      }
    const auto outcomes = run_batch(variants);
    std::vector<std::string> removes;
    ojson arr = ojson::array();
    size_t k = 0;
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto& r = plan[i];
      const std::string label = "restore " + r.name;
      if (!r.applicable) {
        rows_.push_back({label, "\u2014", r.note});
        arr.push_back(restoration_json(r, "", nullptr, ""));
        continue;
      }
      const Outcome& o = outcomes[k++];
      const std::string e = effect(under_test_, o);
      if (e == "removes") removes.push_back(r.layer.empty() ? r.name : r.layer);
      const std::string dir = (fs::path(dir_) / dirname(r)).string();
      rows_.push_back({label, dirname(r), describe(o) + ": " + effect_text(e, o)});
      arr.push_back(restoration_json(r, dir, &o, e));
    }
    report_[key] = arr;
    return removes;
  }

  void finish(const std::string& verdict, const std::string& conclusion) {
    report_["verdict"] = verdict;
    report_["conclusion"] = conclusion;
    io::create_output_dir(dir_, "--out");
    io::write_file_atomic((fs::path(dir_) / "bisect.json").string(), report_.dump(2) + "\n");
    std::printf("bisect %s, seed %llu (runs in %s)\n", o_.config.c_str(), static_cast<unsigned long long>(o_.seed),
                dir_.c_str());
    std::vector<std::vector<std::string>> grid = {{"check", "run", "result"}};
    grid.insert(grid.end(), rows_.begin(), rows_.end());
    std::fputs(render_grid(grid, {false, false, false}, false).c_str(), stdout);
    std::printf("\n%s\nreport: %s/bisect.json\n", conclusion.c_str(), dir_.c_str());
  }

  const BisectOptions& o_;
  std::string dir_;
  ojson report_;
  std::vector<std::vector<std::string>> rows_;
  Outcome under_test_;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? (i + 1 == v.size() ? " and " : ", ") : "") + v[i];
  return s;
}

void Bisector::run() {
  io::check_output_dir(dir_, "--out");
  // (1) and (2): the run twice, and the fp32 baseline (every precision key at its default).
  const auto first = run_batch({{"repeat1", {}}, {"repeat2", {}}, {"fp32_baseline", {"precision={}"}}});
  under_test_ = first[0];
  const Outcome& again = first[1];
  const Outcome& baseline = first[2];
  const std::string r1 = (fs::path(dir_) / "repeat1").string(), r2 = (fs::path(dir_) / "repeat2").string();
  const bool same_step = under_test_.diverged == again.diverged && under_test_.step == again.step;
  const bool same_bytes = same_metrics(r1, r2);
  report_["under_test"] = {{"dir", r1}, {"diverged", under_test_.diverged},
                           {"divergence_step", under_test_.diverged ? ojson(under_test_.step) : ojson(nullptr)},
                           {"reason", under_test_.reason}, {"steps_completed", under_test_.steps_completed}};
  report_["repeat"] = {{"dir", r2}, {"diverged", again.diverged},
                       {"divergence_step", again.diverged ? ojson(again.step) : ojson(nullptr)},
                       {"same_divergence_step", same_step}, {"same_metrics", same_bytes}};
  report_["baseline"] = {{"dir", (fs::path(dir_) / "fp32_baseline").string()}, {"diverged", baseline.diverged},
                         {"divergence_step", baseline.diverged ? ojson(baseline.step) : ojson(nullptr)}};
  rows_.push_back({"run under test", "repeat1", describe(under_test_)});
  rows_.push_back({"same seed again", "repeat2",
                   describe(again) + (same_step ? (same_bytes ? ": identical (metrics too)" : ": same step (metrics differ!)")
                                                : ": DIFFERENT")});
  rows_.push_back({"fp32 baseline", "fp32_baseline", describe(baseline)});

  if (!under_test_.diverged && !again.diverged)
    return finish("no-divergence", "The run does not diverge (seed " + std::to_string(o_.seed) + ", " +
                                       std::to_string(under_test_.steps_completed) + " steps): nothing to bisect.");
  if (!same_step) {
    finish("non-deterministic", "NON-DETERMINISM: the same config and seed diverged differently (" +
                                    describe(under_test_) + " vs " + describe(again) +
                                    "). That is a bug in drift; bisecting would be meaningless.");
    throw std::runtime_error("bisect: the run is not deterministic");
  }
  if (baseline.diverged)
    return finish("training-problem", "The fp32 baseline diverges too (" + describe(baseline) +
                                          "): a training problem (learning rate, initialisation, data), not numerics.");

  // (3) one class at a time, cheapest first.
  json config;
  config = io::read_json_file((fs::path(r1) / "config.json").string(), "run's config.json");
  const auto lossy = lossy_layers_by_role(config);
  const auto removes = try_restorations(plan_class_restorations(config, lossy), "classes");

  // Narrow each culprit matmul role to its layers.
  std::vector<Restoration> layer_plan;
  std::vector<std::string> culprit_roles;
  for (const auto& role : bisect_roles()) {
    if (std::find(removes.begin(), removes.end(), role) == removes.end()) continue;
    culprit_roles.push_back(role);
    const auto it = lossy.find(role);
    if (it != lossy.end() && it->second.size() > 1) {
      const auto p = plan_layer_restorations(config, role, it->second);
      layer_plan.insert(layer_plan.end(), p.begin(), p.end());
    }
  }
  std::vector<std::string> layer_removes;
  if (!layer_plan.empty()) layer_removes = try_restorations(layer_plan, "layers");

  std::string conclusion;
  if (removes.empty()) {
    conclusion = "No single class restored to full precision removes the divergence: it needs several lossy "
                 "classes together (see the table for restorations that delay it).";
  } else {
    conclusion = "Restoring " + join(removes) + " alone removes the divergence.";
    for (const auto& role : culprit_roles) {
      const auto& layers = lossy.at(role);
      if (layers.size() == 1) {
        conclusion += " The " + role + " matmuls are lossy in one layer only: " + layers[0] + ".";
        continue;
      }
      std::vector<std::string> in_role;
      for (const auto& r : layer_plan)
        if (r.role == role && std::find(layer_removes.begin(), layer_removes.end(), r.layer) != layer_removes.end())
          in_role.push_back(r.layer);
      conclusion += in_role.empty() ? " Within " + role + ", no single layer is enough: it takes several."
                                    : " Within " + role + ", restoring layer " + join(in_role) + " alone removes it.";
    }
  }
  report_["culprits"] = removes;
  report_["culprit_layers"] = layer_removes;
  finish(removes.empty() ? "no-single-class" : "found", conclusion);
}

}  // namespace

void add_bisect_command(CLI::App& app) {
  auto o = std::make_shared<BisectOptions>();
  auto* cmd = app.add_subcommand("bisect", "Find which precision decision makes a run diverge: repeat, fp32 "
                                           "baseline, then full precision restored one tensor class and one layer at a time");
  cmd->add_option("--config", o->config, "The diverging run's config (docs/config.md)")->required();
  cmd->add_option("--seed", o->seed, "The diverging seed")->required()->check(non_negative_seed());
  cmd->add_option("--set", o->sets, "Override a key: path=value, as for drift train, repeatable");
  cmd->add_option("--out", o->out, "Directory for the runs and bisect.json (default runs/bisect/<config>-seed<S>)");
  cmd->add_option("-j,--jobs", o->jobs, "Runs at a time")->check(job_count())->capture_default_str();
  cmd->callback([o] {
    if (o->jobs == 0) throw InputError("-j: expected at least 1");
    Bisector(*o).run();
  });
}

}  // namespace drift::cli
