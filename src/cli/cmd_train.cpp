// drift train: a training run from a config file (docs/config.md), writing the run directory.
// drift explain: the resolved precision policy of every matmul site of that config, as a table or JSON.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
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
#include "cli/format_text.h"
#include "io/npy.h"
#include "io/out_dir.h"
#include "policy/matmul_json.h"
#include "policy/elementwise_rules.h"
#include "policy/site_rules.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/dump_init.h"
#include "train/provenance.h"
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
  RunConfig cfg = parse_run_config(j);
  cfg.data.config_dir = std::filesystem::path(o.config).parent_path().string();
  if (cfg.data.config_dir.empty()) cfg.data.config_dir = ".";
  return cfg;
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

struct TrainCmdOptions : ConfigOptions {
  bool quiet = false;
  bool resume = false;
  std::string resume_from, reference;
  bool dump_init = false;
  bool force = false;
};

// Ctrl-C (or SIGTERM) asks the loop to stop after the current step and write a checkpoint; a
// second Ctrl-C kills at once (SA_RESETHAND restores the default action). SIGUSR1 is a scheduler's
// preemption notice (Slurm --signal): the same stop, but the exit status (kExitPreempted) says the
// run is to be continued, where Ctrl-C's (kExitInterrupted) says a person stopped it.
std::atomic<bool> g_stop_requested{false};
volatile sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  g_stop_requested.store(true);
}

void install_stop_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

// Runs the training; returns the exit status: kExitOk when the run finished (diverged or not),
// kExitPreempted or kExitInterrupted when a signal stopped it after writing its checkpoint.
int run_train(const TrainCmdOptions& o) {
  if (o.resume && !o.resume_from.empty()) throw InputError("--resume and --resume-from exclude each other");
  if (o.dump_init && (o.resume || !o.resume_from.empty()))
    throw InputError("--dump-init writes the initial weights: it cannot be combined with --resume or --resume-from");
  const RunConfig cfg = load_run_config(o);
  // The run directory can be written (train checks it again, for every caller): before the data loads.
  io::check_output_dir(cfg.run_dir(), "run directory (--out / output.dir)");
  PreparedRun run = prepare_or_throw(cfg);
  if (o.quiet) spdlog::set_level(spdlog::level::warn);
  const auto& c = run.cfg;
  for (const auto& w : surprising_settings(c)) spdlog::warn("{}", w);
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
                  fmt_loss(p.loss).c_str(), fmt_loss(p.val_loss).c_str(), p.lr, p.tokens_per_s, duration_text(p.eta_s).c_str());
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
  const auto provenance = provenance_record(command_line(), c.backend, o.resume);
  topts.before_write = [&] {
    std::filesystem::create_directories(c.run_dir());
    write_provenance(c.run_dir(), provenance, o.resume);
    if (o.dump_init) {
      dump_init(run, c.run_dir());
      spdlog::info("initial weights and batches written to {}/init/", c.run_dir());
    }
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
    const bool preempted = g_stop_signal == SIGUSR1;
    std::fprintf(stderr, "drift: %s after step %llu; checkpoint written to %s/checkpoint.bin "
                         "(continue with the same command and --resume)\n",
                 preempted ? "preempted (SIGUSR1)" : "interrupted", static_cast<unsigned long long>(s.steps_completed),
                 s.run_dir.c_str());
    return preempted ? kExitPreempted : kExitInterrupted;
  }
  if (o.quiet) return kExitOk;
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
  std::printf("  %s: %.1f steps/s, %.0f tokens/s\n", duration_text(s.wall_s).c_str(),
              s.steps_per_s, s.tokens_per_s);
  if (s.skipped_steps)
    std::printf("  loss scaling skipped %llu steps with a non-finite gradient\n", static_cast<unsigned long long>(s.skipped_steps));
  std::printf("  results: %s/{config.json, metrics.jsonl, summary.json, checkpoint.bin%s, provenance.json}\n",
              s.run_dir.c_str(), c.diagnostics.every > 0 ? ", diag.jsonl" : "");
  std::printf("  look at them: drift report %s --out report.html (charts), drift export %s (a flat table)\n",
              s.run_dir.c_str(), s.run_dir.c_str());
  return kExitOk;
}

struct ExplainOptions : ConfigOptions {
  bool json = false, fields = false;
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
  std::unique_ptr<Model<float>> model;
  try {
    model = make_model<float>(cfg.model, cfg.seed);
  } catch (const std::invalid_argument& e) {
    throw InputError(std::string("model: ") + e.what());
  }
  // The rules must hold at every step and in every probe, as drift train checks before it starts.
  check_run_rules(cfg, model->sites, model->elementwise);
  resolve_sites_at_step(cfg.precision, o.step, model->sites, model->elementwise);
  const auto& sites = model->sites.sites();
  const auto origins = site_field_origins(cfg.precision, o.step, model->sites);
  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (size_t i = 0; i < sites.size(); ++i) {
      const auto& s = sites[i];
      j.push_back({{"site", s.name()},
                   {"layer", s.layer},
                   {"role", to_string(s.role)},
                   {"a_class", to_string(s.a_class)},
                   {"b_class", to_string(s.b_class)},
                   {"policy", nlohmann::ordered_json::parse(policy_to_json(s.policy).dump())},
                   {"set_by", origins[i]}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("model %s, step %llu: %zu matmul sites; after each part, the rules that set it (\"default\": none, "
              "the fp32 passthrough)\n",
              cfg.model.kind.c_str(), static_cast<unsigned long long>(o.step), sites.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    const auto& s = sites[i];
    const auto& p = s.policy;
    // The rules that set any field of a part ("/a/...", "/inner/..."), in order of first mention.
    auto set_by = [&](const std::string& part) {
      std::vector<std::string> rules;
      for (const auto& [field, rule] : origins[i])
        if (field.rfind("/" + part, 0) == 0 && std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(rule);
      std::string t;
      for (const auto& r : rules) t += (t.empty() ? "" : ", ") + r;
      return t.empty() ? std::string("default") : t;
    };
    const std::vector<std::array<std::string, 3>> parts = {
        {"a", std::string(to_string(s.a_class)) + ": " + describe_operand_rounding(p.a), set_by("a")},
        {"b", std::string(to_string(s.b_class)) + ": " + describe_operand_rounding(p.b), set_by("b")},
        {"product", p.product_format ? describe_output(*p.product_format, p.product_round) : std::string("exact"), set_by("product")},
        {"inner sum", describe_sum(p.inner) + " within each K-block", set_by("inner")},
        {"outer sum", describe_sum(p.outer) + " across K-blocks", set_by("outer")},
        {"output", describe_output(p.out_format, p.out_round), set_by("output")}};
    size_t width = 0;
    for (const auto& part : parts) width = std::max(width, part[1].size());
    std::printf("%s\n", s.name().c_str());
    for (const auto& part : parts)
      std::printf("  %-9s  %-*s  <- %s\n", part[0].c_str(), static_cast<int>(width), part[1].c_str(), part[2].c_str());
    if (o.fields)
      for (const auto& [field, rule] : origins[i]) std::printf("      %-28s %s\n", field.c_str(), rule.c_str());
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

int train_in_process(const TrainRun& r) {
  TrainCmdOptions o;
  o.config = r.config;
  o.sets = r.sets;
  o.sets.push_back("seed=" + std::to_string(r.seed));  // as --seed, applied after the other --set
  o.out = r.dir;
  o.resume = r.resume;
  return run_train(o);
}

void add_train_command(CLI::App& app) {
  auto t = std::make_shared<TrainCmdOptions>();
  auto* train = app.add_subcommand("train", "Train a model under a precision policy (config: docs/config.md); "
                                            "writes config.json, metrics.jsonl, summary.json (and diag.jsonl with diagnostics on) to the run directory");
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
  train->callback([t] {
    if (const int status = run_train(*t)) std::exit(status);
  });
}

void add_explain_command(CLI::App& app) {
  auto e = std::make_shared<ExplainOptions>();
  auto* explain = app.add_subcommand("explain", "Print the resolved matmul policy of every site of a config: each operand's "
                                                "format, rounding, overflow and scale, the sums' order, and which rule set each");
  add_config_options(explain, *e);
  explain->add_flag("--json", e->json, "Every site's full policy as JSON, with set_by: each field's rule");
  explain->add_flag("--fields", e->fields, "Also list, per site, every field a rule set and the rule that set it");
  explain->add_option("--step", e->step, "Resolve with the precision.schedule entries in force at this step")
      ->check(non_negative())
      ->capture_default_str();
  explain->callback([e] { run_explain(*e); });
}

}  // namespace drift::cli
