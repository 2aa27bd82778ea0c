// A training run's configuration: one JSON document with sections model, data, train, precision,
// divergence, diagnostics, output and a top-level seed. Every key has a default (the members'
// initializers below; docs/config.md); unknown keys, wrong types and out-of-range values are
// ConfigErrors naming the JSON path. The keys, their kinds and ranges are the field tables of
// train/config_schema.cpp, which parse_run_config and resolved_config_json walk. The training loop
// sees typed values only: the precision rules are parsed once into MatmulRules / ElementwiseRules.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "policy/config_error.h"
#include "policy/elementwise_rules.h"
#include "policy/probes.h"
#include "policy/site_rules.h"
#include "train/data.h"
#include "train/allreduce.h"
#include "train/loss_scale.h"

namespace drift {

struct TrainConfig {
  size_t steps = 1000;
  size_t batch = 64;
  double lr = 3e-3;
  std::string optimizer = "adamw";  // adamw | sgd
  double momentum = 0.9;            // sgd
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;  // adamw
  std::string adam_one_minus_beta = "fp32";       // adamw: 1 - beta in fp32 from fp32 beta | fp64 (torch's)
  double weight_decay = 0.0;        // adamw: decoupled; sgd: added to the gradient (L2); weights only
  double grad_clip = 1.0;           // clip the global gradient norm to this (0: off)
  size_t warmup = 50;               // linear warmup steps
  std::string decay = "cosine";     // cosine | linear | constant | cosine_torch, after warmup, down to min_lr_frac * lr
  double min_lr_frac = 0.1;
  size_t eval_every = 100;          // validation loss every this many steps (and at the last step)
  size_t eval_batches = 8;          // fixed held-out batches of `batch` windows
  size_t log_every = 10;            // a metrics.jsonl line every this many steps (and eval/last/diverged steps)
  size_t checkpoint_every = 0;      // a checkpoint every this many steps (0: only at exit)
  bool keep_checkpoints = false;    // also keep each periodic one as checkpoint-<step>.bin (to branch from)
};

// Master weights: the format the parameters are kept in between steps, and how updates round to it.
struct MasterConfig {
  std::string format = "fp32";   // any catalogue format whose values are floats (fp32, bf16, fp16, ...)
  std::string rounding = "rne";  // rne | sr (and the other rounding modes)
};

// One precision.schedule entry: from `step` on, its rules apply on top of precision.matmul /
// precision.elementwise (and of the earlier entries').
struct ScheduleEntry {
  uint64_t step = 1;
  std::optional<MatmulRules> matmul;            // at precision.schedule[i].matmul
  std::optional<ElementwiseRules> elementwise;  // at precision.schedule[i].elementwise
};

struct PrecisionConfig {
  MatmulRules matmul{nlohmann::json::array(), "precision.matmul"};                 // policy/site_rules.h
  std::vector<ScheduleEntry> schedule;                                             // steps increasing
  ElementwiseRules elementwise{nlohmann::json::array(), "precision.elementwise"};  // policy/elementwise_rules.h
  MasterConfig master;
  std::string optimizer_state = "fp32";                 // fp32 | bf16 | int8_block (train/opt_state.h)
  LossScaleConfig loss_scale;
  AllreduceConfig allreduce;                            // simulated data-parallel reduction (ranks 1: off)
};

// The divergence record (summary.json): first_nonfinite_step, spike_step and, against a reference
// run, departure_step; divergence_step is the first of those that `on` lists.
struct DivergenceConfig {
  bool enabled = true;
  double factor = 3.0;       // a spike: loss > factor * best smoothed loss ...
  size_t after_step = 100;   // ... at or after this step ...
  size_t patience = 1;       // ... for this many consecutive steps (spike_step is the first of them)
  double smoothing = 0.9;    // EMA coefficient of the smoothed loss
  double departure_tol = 0.05;  // departure: |loss - reference loss| > tol * |reference loss| ...
  size_t departure_steps = 5;   // ... at this many consecutive steps logged in both runs
  std::vector<std::string> on = {"nonfinite", "spike"};  // which events end the run / set divergence_step
  bool stop = true;          // stop the run at divergence
  size_t window = 50;        // trailing window (steps) of the loss and grad-norm z-scores
};

// Deep diagnostics (diag/diagnostics.h, docs/diagnostics.md): diag.jsonl every `every` steps.
struct DiagnosticsConfig {
  size_t every = 0;                                   // 0: off
  std::vector<ProbePolicy> probes;  // matmul preset names or rule lists (policy/probes.h)
  bool swamping = false;  // count swamped adds in every training matmul (per-step telemetry; slower kernels)
};

struct OutputConfig {
  std::string dir;           // run directory; "" = runs/<name>/seed<seed>
  std::string name = "run";  // run name (drift train sets it from the config file's name when absent)
};

struct RunConfig {
  uint64_t seed = 0;
  std::string backend = "cpu";  // where the matmuls run: cpu | cuda (same results; backend/backend.h)
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  PrecisionConfig precision;
  DivergenceConfig divergence;
  DiagnosticsConfig diagnostics;
  OutputConfig output;
  std::string run_dir() const;
};

// Parses and checks a whole config (missing keys take defaults). Throws ConfigError.
RunConfig parse_run_config(const nlohmann::json& j);

// Every key with its value (defaults filled in) plus "version"; parse_run_config reads it back
// (after dropping "version") to an equal config. model.vocab is the tokenizer's, for the record.
nlohmann::ordered_json resolved_config_json(const RunConfig& c);

// Reads a config file (JSON). Throws ConfigError at the root naming the file.
nlohmann::json load_config_file(const std::string& path);

// The config `drift train --config file [--set s]... [--seed N] [--out DIR]` runs, before
// parse_run_config: the file (a JSON object), output.name defaulting to the file's stem, each
// assignment in order, then the seed (when given) and output.dir (when `out` is not empty).
// Throws ConfigError (e.g. "output: expected an object" when a --set made it a number).
nlohmann::json config_with_overrides(const std::string& file, const std::vector<std::string>& sets,
                                     const uint64_t* seed, const std::string& out);

// Throws ConfigError(path, "<what>: ... is not UTF-8 text") unless `text` is UTF-8 (command-line
// bytes that would go into config.json as a JSON string).
void require_utf8(const std::string& text, const std::string& path, const std::string& what);

// `--set a.b.c=value`: value parsed as JSON, else taken as a string; intermediate objects are
// created; a numeric segment indexes an existing array element. Throws ConfigError.
void apply_set(nlohmann::json& root, const std::string& assignment);

// Resolves every site's policy at `step`: precision.matmul, then the rules of every schedule entry
// with entry.step <= step on top (errors name the rule's own path). Throws ConfigError.
void resolve_sites_at_step(const PrecisionConfig& p, uint64_t step, MatmulSites& sites);
// For each site (in order), which rule set each field of its policy at `step` (site_rules.h
// FieldOrigins: the leaf's JSON pointer in policy_to_json -> the rule's path); for drift explain.
std::vector<FieldOrigins> site_field_origins(const PrecisionConfig& p, uint64_t step, const MatmulSites& sites);
// The same, and the elementwise quantizers: precision.elementwise, then the "elementwise" rules of
// every schedule entry in force.
void resolve_sites_at_step(const PrecisionConfig& p, uint64_t step, MatmulSites& sites, ElementwiseSites& elementwise);
// Checks that every precision rule of `c` resolves at every site of the model: precision.matmul and
// precision.elementwise at step 0 and at each schedule entry's step, and each diagnostics probe's
// rules. Works on copies (`sites` and `elementwise` are left as they are). Run before anything is
// written, so that a rule that cannot hold (e.g. scale blocks that do not nest) is a config error,
// not a failure mid-run. Throws ConfigError.
void check_run_rules(const RunConfig& c, const MatmulSites& sites, const ElementwiseSites& elementwise);
// The same on the sites of a model built from c.model (they do not depend on the vocabulary).
void check_run_rules(const RunConfig& c);

// Settings that are legal but probably not what was meant, each as a sentence naming the keys
// (train.warmup >= train.steps, train.eval_every or train.log_every > train.steps): drift train
// prints them as warnings and runs anyway.
std::vector<std::string> surprising_settings(const RunConfig& c);

}  // namespace drift
