// drift train: a training run from a config file (docs/config.md), writing the run directory.
// drift explain: the resolved precision policy of every matmul site of that config, as a table or JSON.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "cli/commands.h"
#include "io/npy.h"
#include "io/out_dir.h"
#include "policy/matmul_json.h"
#include "policy/elementwise_rules.h"
#include "policy/site_rules.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/dump_init.h"
#include "train/trainer.h"

namespace drift::cli {

namespace {

struct ConfigOptions {
  std::string config;
  std::vector<std::string> sets;
  int64_t seed = -1;
  std::string out;
};

void add_config_options(CLI::App* cmd, ConfigOptions& o) {
  cmd->add_option("--config", o.config, "Run config (JSON; keys and defaults: docs/config.md)")->required();
  cmd->add_option("--set", o.sets, "Override a key: path=value (value parsed as JSON, else a string), repeatable");
  cmd->add_option("--seed", o.seed, "Shortcut for --set seed=N")
      ->check(non_negative_seed());
  cmd->add_option("--out", o.out, "Shortcut for --set output.dir=DIR (the run directory)");
}

// The config file with the overrides applied, parsed and checked.
RunConfig load_run_config(const ConfigOptions& o) {
  const uint64_t seed = static_cast<uint64_t>(o.seed);
  const nlohmann::json j = config_with_overrides(o.config, o.sets, o.seed >= 0 ? &seed : nullptr, o.out);
  return parse_run_config(j);
}

PreparedRun prepare_or_throw(const RunConfig& cfg) {
  try {
    return prepare_run(cfg);
  } catch (const io::IoError& e) {
    throw InputError(std::string("data.path: ") + e.what());
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string("model: ") + e.what());
  }
}

std::string fmt_loss(double x) {
  if (std::isnan(x)) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", x);
  return b;
}

std::string fmt_time(double s) {
  char b[32];
  if (s >= 3600)
    std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(std::fmod(s, 3600) / 60));
  else if (s >= 60)
    std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(std::fmod(s, 60)));
  else
    std::snprintf(b, sizeof b, "%.1fs", s);
  return b;
}

struct TrainCmdOptions : ConfigOptions {
  bool quiet = false;
  bool resume = false;
  std::string resume_from, reference;
  bool dump_init = false;
  bool force = false;
};

// Ctrl-C (or SIGTERM) asks the loop to stop after the current step and write a checkpoint; a
// second Ctrl-C kills at once (SA_RESETHAND restores the default action).
std::atomic<bool> g_stop_requested{false};
extern "C" void on_stop_signal(int) { g_stop_requested.store(true); }

void install_stop_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void run_train(const TrainCmdOptions& o) {
  if (o.resume && !o.resume_from.empty()) throw InputError("--resume and --resume-from exclude each other");
  if (o.dump_init && (o.resume || !o.resume_from.empty()))
    throw InputError("--dump-init writes the initial weights: it cannot be combined with --resume or --resume-from");
  const RunConfig cfg = load_run_config(o);
  // The run directory can be written (train checks it again, for every caller): before the data loads.
  io::check_output_dir(cfg.run_dir(), "run directory (--out / output.dir)");
  PreparedRun run = prepare_or_throw(cfg);
  if (o.quiet) spdlog::set_level(spdlog::level::warn);
  const auto& c = run.cfg;
  size_t nparams = run.model->params.size();
  if (run.model->needs_text())
    spdlog::info("model {} ({} parameters, vocab {}, context {}), {} matmul sites; data {} ({} train / {} val tokens)",
                 c.model.kind, nparams, c.model.vocab, c.model.context, run.model->sites.size(), c.data.path,
                 run.corpus.train.size(), run.corpus.val.size());
  else
    spdlog::info("model {} ({} parameters, input {}, output {}), {} matmul sites; Gaussian inputs, teacher seed {}",
                 c.model.kind, nparams, c.model.input_dim, c.model.output_dim, run.model->sites.size(),
                 c.model.teacher_seed);
  spdlog::info("{} steps of batch {}, {} lr {}; run directory {}", c.train.steps, c.train.batch, c.train.optimizer,
               c.train.lr, c.run_dir());
  const bool tty = !o.quiet && isatty(STDERR_FILENO);
  auto progress = [&](const Progress& p) {
    if (o.quiet) return;
    char line[256];
    std::snprintf(line, sizeof line, "step %llu/%llu  loss %s  val %s  lr %.3g  %.0f tok/s  ETA %s",
                  static_cast<unsigned long long>(p.step + 1), static_cast<unsigned long long>(p.steps),
                  fmt_loss(p.loss).c_str(), fmt_loss(p.val_loss).c_str(), p.lr, p.tokens_per_s, fmt_time(p.eta_s).c_str());
    if (tty) {
      std::fprintf(stderr, "\r%-100s", line);
      if (p.evaluated) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    } else if (p.evaluated) {
      spdlog::info("{}", line);
    }
  };
  TrainOptions topts;
  topts.resume = o.resume;
  topts.resume_from = o.resume_from;
  topts.reference = o.reference;
  topts.force = o.force;
  topts.stop_requested = &g_stop_requested;
  // After every check, and after a new run's directory lost the previous run's files.
  if (o.dump_init)
    topts.before_write = [&] {
      dump_init(run, c.run_dir());
      spdlog::info("initial weights and batches written to {}/init/", c.run_dir());
    };
  topts.notice = [](const std::string& m) { std::fprintf(stderr, "drift: %s\n", m.c_str()); };
  install_stop_handler();
  RunSummary s;
  try {
    s = train(run, topts, progress);
  } catch (const CheckpointError& e) {
    throw InputError(e.what());
  } catch (const io::IoError& e) {
    throw InputError(e.what());
  }
  if (tty) std::fprintf(stderr, "\n");
  if (s.interrupted) {
    std::fprintf(stderr, "drift: interrupted after step %llu; checkpoint written to %s/checkpoint.bin "
                         "(continue with the same command and --resume)\n",
                 static_cast<unsigned long long>(s.steps_completed), s.run_dir.c_str());
    std::exit(130);
  }
  if (o.quiet) return;
  std::printf("\n");
  if (s.diverged)
    std::printf("DIVERGED at step %lld: %s\n", static_cast<long long>(s.divergence_step), s.reason.c_str());
  else
    std::printf("finished %llu steps without diverging\n", static_cast<unsigned long long>(s.steps_completed));
  if (run.model->needs_text())
    std::printf("  train loss %s (smoothed %s), validation loss %s (best %s) in nats per token; ln(vocab) = %.3f\n",
                fmt_loss(s.final_train_loss).c_str(), fmt_loss(s.smoothed_train_loss).c_str(),
                fmt_loss(s.final_val_loss).c_str(), fmt_loss(s.best_val_loss).c_str(),
                std::log(static_cast<double>(c.model.vocab)));
  else
    std::printf("  train loss %s (smoothed %s), validation loss %s (best %s): mean squared error against the teacher; "
                "predicting 0 scores about 1\n",
                fmt_loss(s.final_train_loss).c_str(), fmt_loss(s.smoothed_train_loss).c_str(),
                fmt_loss(s.final_val_loss).c_str(), fmt_loss(s.best_val_loss).c_str());
  std::printf("  %s: %.1f steps/s, %.0f tokens/s\n", fmt_time(s.wall_s).c_str(),
              s.steps_per_s, s.tokens_per_s);
  if (s.skipped_steps)
    std::printf("  loss scaling skipped %llu steps with a non-finite gradient\n", static_cast<unsigned long long>(s.skipped_steps));
  std::printf("  results: %s/{config.json, metrics.jsonl, summary.json, checkpoint.bin}\n", s.run_dir.c_str());
}

struct ExplainOptions : ConfigOptions {
  bool json = false;
  uint64_t step = 0;
};

void run_explain(const ExplainOptions& o) {
  RunConfig cfg = load_run_config(o);
  // Only the sites are needed: the vocabulary matters only for a char tokenizer.
  if (cfg.data.tokenizer == "char") {
    cfg = prepare_or_throw(cfg).cfg;
  } else {
    cfg.model.vocab = 256;
  }
  std::unique_ptr<LmModel<float>> model;
  try {
    model = make_model<float>(cfg.model, cfg.seed);
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string("model: ") + e.what());
  }
  // The rules must hold at every step and in every probe, as drift train checks before it starts.
  check_run_rules(cfg, model->sites, model->elementwise);
  resolve_sites_at_step(cfg.precision, o.step, model->sites, model->elementwise);
  const auto& sites = model->sites.sites();
  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& s : sites)
      j.push_back({{"site", s.name()},
                   {"layer", s.layer},
                   {"role", to_string(s.role)},
                   {"a_class", to_string(s.a_class)},
                   {"b_class", to_string(s.b_class)},
                   {"policy", nlohmann::ordered_json::parse(policy_to_json(s.policy).dump())}});
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::vector<std::vector<std::string>> rows = {{"site", "a (class: quantizer)", "b (class: quantizer)", "product", "inner", "outer", "output"}};
  for (const auto& s : sites)
    rows.push_back({s.name(), std::string(to_string(s.a_class)) + ": " + describe_quantizer(s.policy.a),
                    std::string(to_string(s.b_class)) + ": " + describe_quantizer(s.policy.b),
                    s.policy.product_format ? format_name(*s.policy.product_format) : std::string("exact"),
                    describe_accumulator(s.policy.inner), describe_accumulator(s.policy.outer),
                    format_name(s.policy.out_format)});
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::printf("model %s, step %llu: %zu matmul sites\n", cfg.model.kind.c_str(), static_cast<unsigned long long>(o.step),
              sites.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (size_t i = 0; i < rows[k].size(); ++i) {
      line += rows[k][i];
      if (i + 1 < rows[k].size()) line += std::string(w[i] - rows[k][i].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
  // Elementwise tensors (precision.elementwise): only listed when some are quantized.
  const auto& elem = model->elementwise.sites();
  if (!model->elementwise.any_active()) {
    std::printf("%zu elementwise tensors, none quantized (fp32)\n", elem.size());
    return;
  }
  size_t width = 6;
  for (const auto& e : elem) width = std::max(width, e.name().size());
  std::printf("%zu elementwise tensors\n%-*s  quantizer\n", elem.size(), static_cast<int>(width), "tensor");
  for (const auto& e : elem)
    std::printf("%-*s  %s\n", static_cast<int>(width), e.name().c_str(),
                e.quantizer ? describe_quantizer(*e.quantizer).c_str() : "- (fp32)");
}

}  // namespace

void add_train_commands(CLI::App& app) {
  auto t = std::make_shared<TrainCmdOptions>();
  auto* train = app.add_subcommand("train", "Train a model under a precision policy (config: docs/config.md); "
                                            "writes config.json, metrics.jsonl and summary.json to the run directory");
  add_config_options(train, *t);
  train->add_flag("--quiet", t->quiet, "No progress or summary output");
  train->add_flag("--resume", t->resume,
                  "Continue the run in the run directory from its checkpoint.bin (same config), bit for bit");
  train->add_option("--resume-from", t->resume_from,
                    "Start this run from another run's checkpoint (weights, optimizer, step); the policy may differ");
  train->add_option("--reference", t->reference,
                    "A reference run directory (e.g. the fp32 run of this seed): records departure_step");
  train->add_flag("--force", t->force,
                  "Replace a finished run (a directory holding summary.json): without it drift train refuses");
  train->add_flag("--dump-init", t->dump_init,
                  "Also write init/: the initial weights (<param>.npy, float32) and every step's training windows "
                  "(batches.npy) and the validation windows (val_batches.npy), int32; see docs/config.md");
  train->callback([t] { run_train(*t); });

  auto e = std::make_shared<ExplainOptions>();
  auto* explain = app.add_subcommand("explain", "Print the resolved matmul policy of every site of a config");
  add_config_options(explain, *e);
  explain->add_flag("--json", e->json, "Every site's full policy as JSON");
  explain->add_option("--step", e->step, "Resolve with the precision.schedule entries in force at this step")
      ->check(non_negative())
      ->capture_default_str();
  explain->callback([e] { run_explain(*e); });
}

}  // namespace drift::cli
