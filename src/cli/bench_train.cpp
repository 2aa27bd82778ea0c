// drift bench train: milliseconds per training step (forward + backward + gradient norms + AdamW
// update, every matmul through the engine) of the two bench models under the fp32 passthrough and
// full MXFP8 emulation, on the shipped corpus. Given the JSON of
// `scripts/reference_pytorch.py --bench --json` (PyTorch float32, the same models and batch sizes),
// it prints drift's speed as a ratio to it beside the issue's targets.
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "io/npy.h"
#include "model/model.h"
#include "policy/site_rules.h"
#include "train/data.h"
#include "train/config.h"
#include "train/optimizer.h"
#include "train/train_step.h"

namespace drift::cli {
namespace {

struct BenchModel {
  const char* name;
  ModelConfig cfg;
  size_t batch;
};

// The sizes of issue 5's speed targets.
std::vector<BenchModel> bench_models() {
  ModelConfig mlp;
  mlp.kind = "mlp", mlp.context = 16, mlp.embed = 32, mlp.hidden = 512, mlp.hidden_layers = 1;
  ModelConfig attn;
  attn.kind = "attn", attn.context = 64, attn.d_model = 128, attn.heads = 4, attn.layers = 2, attn.mlp_mult = 4;
  attn.activation = "tanh";
  return {{"mlp", mlp, 64}, {"attn", attn, 16}};
}

// Each policy as the precision.matmul rules a training config would hold; the PyTorch figures are
// compared with these, and each has its target speed ratio (drift speed / PyTorch fp32 speed).
struct BenchPolicy {
  const char* name;
  const char* rules;
  double target;
};
const BenchPolicy kPolicies[] = {
    {"fp32", "[]", 1.0},                                 // at least as fast as PyTorch fp32
    {"mxfp8_e4m3", R"([{"preset": "mxfp8_e4m3"}])", 0.5},  // within 2x of PyTorch fp32
};

struct Options {
  size_t steps = 0;  // 0: as many as fit in min_seconds (at least 5)
  double min_seconds = 2.0;
  int threads = 1;
  std::string data = "data/austen";
  std::string pytorch;  // JSON rows of reference_pytorch.py --bench --json
  std::vector<std::string> models, policies;
  bool json = false;
};

struct Timing {
  size_t steps = 0;
  double forward_s = 0, backward_s = 0, update_s = 0;  // wall-clock totals over the timed steps
  double cpu_s = 0;  // CPU time of the whole process (every thread) over the timed steps
  double total_s() const { return forward_s + backward_s + update_s; }
};

// CPU seconds used by this process, all threads together. On a shared machine this moves less with
// other people's load than wall time does (with one thread it is the time the step really took).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Times training steps of one model under one policy: the training loop's step (train/train_step.h,
// as src/train/trainer.cpp runs it) without the logging: begin, forward, backward, gradient norms,
// clipped optimizer update.
Timing time_training(const BenchModel& bm, const BenchPolicy& bp, const Corpus& corpus, const Options& o) {
  RunConfig rc;
  rc.seed = 0;
  rc.model = bm.cfg;
  rc.model.vocab = corpus.tok.vocab();
  rc.train.steps = 1u << 30;  // the schedule stays in warmup/early cosine: the lr value does not change the work
  rc.train.batch = bm.batch;
  auto model = make_model<float>(rc.model, rc.seed);
  model->sites.seed = rc.seed;
  resolve_sites(nlohmann::json::parse(bp.rules), std::string("bench.") + bp.name, model->sites);
  Optimizer opt(rc.train, rc.precision, model->table);
  TrainStep train_step(rc, *model, corpus);
  using clock = std::chrono::steady_clock;
  Timing t;
  uint64_t step = 0;
  auto one_step = [&](bool timed) {
    PhaseTimes phases;
    train_step.begin(step, 1.0);
    train_step.gradients(step, false, &phases);
    const auto t0 = clock::now();
    const GradNorms norms = gradient_norms(model->table, model->grads.data());
    train_step.update(opt, norms.global, learning_rate(rc.train, step), step);
    const double update_s = std::chrono::duration<double>(clock::now() - t0).count();
    ++step;
    if (!timed) return;
    t.forward_s += phases.forward_s, t.backward_s += phases.backward_s, t.update_s += update_s;
    ++t.steps;
  };
  for (int i = 0; i < 2; ++i) one_step(false);  // warm-up: scratch buffers grow, pages fault in
  const double c0 = process_cpu_seconds();
  while (o.steps ? t.steps < o.steps : (t.steps < 5 || t.total_s() < o.min_seconds)) one_step(true);
  t.cpu_s = process_cpu_seconds() - c0;
  return t;
}

bool selected(const std::vector<std::string>& wanted, const std::string& name) {
  return wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end();
}

struct TorchFigures {
  std::string model;
  double ms = 0, cpu_ms = 0;  // wall and process-CPU milliseconds per step
};

// Rows of reference_pytorch.py --bench --json.
std::vector<TorchFigures> read_pytorch(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError("--pytorch: cannot read '" + path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError("--pytorch: '" + path + "' is not JSON (expected the output of reference_pytorch.py --bench --json): " +
                     e.what());
  }
  std::vector<TorchFigures> out;
  if (!j.is_array()) throw InputError("--pytorch: '" + path + "': expected a JSON list of rows");
  auto positive = [](const nlohmann::json& r, const char* key) {
    return r.contains(key) && r[key].is_number() && r[key].get<double>() > 0;
  };
  for (const auto& r : j) {
    if (!r.is_object() || !r.contains("model") || !r["model"].is_string() || !positive(r, "ms_per_step") ||
        !positive(r, "cpu_ms_per_step"))
      throw InputError("--pytorch: '" + path +
                       "': each row needs \"model\" (string), \"ms_per_step\" and \"cpu_ms_per_step\" (> 0)");
    out.push_back({r["model"].get<std::string>(), r["ms_per_step"].get<double>(), r["cpu_ms_per_step"].get<double>()});
  }
  return out;
}

void run_bench_train(const Options& o) {
  if (o.threads < 1) throw InputError("--threads: expected an integer >= 1");
  omp_set_num_threads(o.threads);
  std::vector<TorchFigures> pytorch;
  if (!o.pytorch.empty()) pytorch = read_pytorch(o.pytorch);
  std::vector<BenchModel> models;
  for (const auto& m : bench_models())
    if (selected(o.models, m.name)) models.push_back(m);
  std::vector<BenchPolicy> policies;
  for (const auto& p : kPolicies)
    if (selected(o.policies, p.name)) policies.push_back(p);
  // One corpus for every model, loaded (and checked) before any output.
  DataConfig dc;
  dc.path = o.data;
  size_t max_context = 0;
  for (const auto& m : models) max_context = std::max(max_context, m.cfg.context);
  Corpus corpus;
  try {
    corpus = load_corpus(dc, max_context);
  } catch (const io::IoError& e) {
    throw InputError(std::string("--data: ") + e.what());
  }

  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!o.json) {
    std::printf("drift training steps, %d thread(s); corpus %s\n", o.threads, o.data.c_str());
    std::printf("%-6s %-12s %6s %9s %9s %8s %8s %8s %9s", "model", "policy", "steps", "ms/step", "steps/s", "fwd ms",
                "bwd ms", "upd ms", "cpu ms");
    if (!pytorch.empty()) std::printf(" %9s %9s %9s %9s %7s %s", "torch ms", "torch cpu", "vs torch", "(cpu)", "target", "met");
    std::printf("\n");
  }
  for (const auto& bm : models) {
    const TorchFigures* torch = nullptr;
    for (const auto& f : pytorch)
      if (f.model == bm.name) torch = &f;
    for (const auto& bp : policies) {
      const Timing t = time_training(bm, bp, corpus, o);
      const double n = static_cast<double>(t.steps);
      const double ms = t.total_s() / n * 1e3, cpu_ms = t.cpu_s / n * 1e3;
      // speed ratios: > 1 means drift takes fewer milliseconds per step than PyTorch
      const double ratio = torch ? torch->ms / ms : 0, cpu_ratio = torch ? torch->cpu_ms / cpu_ms : 0;
      nlohmann::ordered_json row = {{"model", bm.name},
                                    {"policy", bp.name},
                                    {"threads", o.threads},
                                    {"steps", t.steps},
                                    {"ms_per_step", ms},
                                    {"steps_per_s", 1e3 / ms},
                                    {"forward_ms", t.forward_s / n * 1e3},
                                    {"backward_ms", t.backward_s / n * 1e3},
                                    {"update_ms", t.update_s / n * 1e3},
                                    {"cpu_ms_per_step", cpu_ms}};
      if (torch) {
        row["pytorch_ms_per_step"] = torch->ms;
        row["pytorch_cpu_ms_per_step"] = torch->cpu_ms;
        row["speed_vs_pytorch"] = ratio;
        row["cpu_speed_vs_pytorch"] = cpu_ratio;
        row["target"] = bp.target;
        row["target_met"] = ratio >= bp.target;
      }
      rows.push_back(row);
      if (o.json) continue;
      std::printf("%-6s %-12s %6zu %9.3f %9.2f %8.3f %8.3f %8.3f %9.3f", bm.name, bp.name, t.steps, ms, 1e3 / ms,
                  t.forward_s / n * 1e3, t.backward_s / n * 1e3, t.update_s / n * 1e3, cpu_ms);
      if (torch)
        std::printf(" %9.3f %9.3f %8.2fx %8.2fx %6.2fx %s", torch->ms, torch->cpu_ms, ratio, cpu_ratio, bp.target,
                    ratio >= bp.target ? "yes" : "NO");
      else if (!pytorch.empty())
        std::printf(" %10s", "(no row)");
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (o.json) std::printf("%s\n", rows.dump(2).c_str());
}

}  // namespace

void add_bench_train_command(CLI::App& bench) {
  auto o = std::make_shared<Options>();
  auto* cmd = bench.add_subcommand(
      "train",
      "ms per training step (forward, backward, update) of the mlp (context 16, embed 32, hidden 512, batch 64) and "
      "attn (context 64, d_model 128, 4 heads, 2 layers, batch 16) models under fp32 and mxfp8_e4m3");
  cmd->add_option("--steps", o->steps, "Timed steps per model and policy (default: as many as fit in --min-seconds, at least 5)");
  cmd->add_option("--min-seconds", o->min_seconds, "Minimum timed seconds per measurement when --steps is not given")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "OpenMP threads (give PyTorch the same: reference_pytorch.py --threads)")
      ->capture_default_str();
  cmd->add_option("--data", o->data, "Corpus the batches are drawn from")->capture_default_str();
  cmd->add_option("--models", o->models, "Models to time (default both)")->check(CLI::IsMember({"mlp", "attn"}));
  cmd->add_option("--policies", o->policies, "Policies to time (default both)")
      ->check(CLI::IsMember({"fp32", "mxfp8_e4m3"}));
  cmd->add_option("--pytorch", o->pytorch,
                  "JSON from `scripts/reference_pytorch.py --bench --json`: adds PyTorch's ms/step, drift's speed as a "
                  "ratio to it and the targets (fp32 >= 1x, mxfp8 >= 0.5x)");
  cmd->add_flag("--json", o->json, "Print JSON rows instead of a table");
  cmd->callback([o] { run_bench_train(*o); });
}

}  // namespace drift::cli
