// The training loop: data -> model (every matmul through the engine at its site's policy) ->
// optimizer, with validation, divergence detection and the run directory's files:
//   config.json     the resolved config (every default filled in, plus drift's version)
//   metrics.jsonl   one line per logged step; "tokens_per_s" and "elapsed_s" are the only timing
//                   fields (drop them and the file is byte-identical for the same config and seed)
//   diag.jsonl      with diagnostics.every > 0: deep diagnostics (diag/diagnostics.h), no timing fields
//   summary.json    written atomically at the end (not when interrupted: the run is not finished);
//                   its timing fields and "routes" (the kernel each site's calls took) come last
//   checkpoint.bin  every train.checkpoint_every steps and at exit, including Ctrl-C (train/checkpoint.h)
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/model.h"
#include "train/config.h"
#include "train/data.h"
#include "train/train_step.h"

namespace drift {

// What the command line shows while a run goes.
struct Progress {
  uint64_t step = 0, steps = 0;
  double loss = 0, val_loss = 0;  // val_loss: NaN when not evaluated at this step
  double lr = 0, grad_norm = 0, tokens_per_s = 0, eta_s = 0;
  bool evaluated = false;
};

struct RunSummary {
  bool diverged = false;
  int64_t divergence_step = -1;
  int64_t first_nonfinite_step = -1, spike_step = -1, departure_step = -1;
  std::string reason;
  bool interrupted = false;       // stopped by a signal: checkpoint written, no summary.json
  uint64_t skipped_steps = 0;     // loss scaling: steps skipped for a non-finite gradient
  uint64_t steps_completed = 0;
  double final_train_loss = 0, smoothed_train_loss = 0, final_val_loss = 0, best_val_loss = 0;
  double wall_s = 0, steps_per_s = 0, tokens_per_s = 0;
  std::string run_dir;
};

// Everything a run needs, built (and checked) before anything is written.
struct PreparedRun {
  std::unique_ptr<Backend> backend;  // declared first: outlives the model whose sites point to it
  RunConfig cfg;
  Corpus corpus;
  std::unique_ptr<Model<float>> model;
};

// Loads the data, builds the model, resolves every site's policy and creates the backend (a backend
// that cannot run here, or cannot run a site's policy exactly, is a ConfigError at "backend").
// Throws ConfigError or io::IoError.
PreparedRun prepare_run(const RunConfig& cfg);

struct TrainOptions {
  // Continue the run in cfg.run_dir() from its checkpoint.bin: the resolved config must be the
  // checkpoint's (output aside); metrics.jsonl is cut back to the checkpoint's step and continues,
  // byte for byte as an uninterrupted run would have written it (timing fields aside).
  // When the directory holds a config.json of this config but no checkpoint yet (the run was
  // killed before its first checkpoint), the run starts from step 0, which gives the bytes an
  // uninterrupted run writes; `notice` is told so. Without either file it is a CheckpointError.
  bool resume = false;
  // Start this (new) run from another run's checkpoint: weights, optimizer state, step counter and
  // the divergence record carry over; the policy and the schedule may differ, the model may not.
  std::string resume_from;
  // A reference run directory (usually the fp32 run of the same seed): departure_step.
  std::string reference;
  // A new run (not resume) into a directory that holds a finished run (its summary.json) replaces
  // it only when forced; otherwise train refuses, naming the directory (--force).
  bool force = false;
  // Set (by a signal handler) to stop after the current step with a checkpoint.
  const std::atomic<bool>* stop_requested = nullptr;
  // Called once everything has been checked and a new run's directory has been cleared of the
  // previous run's files, before the run writes anything (e.g. --dump-init's init/).
  std::function<void()> before_write;
  // Told about decisions the caller may want to report (e.g. a --resume that starts afresh).
  std::function<void(const std::string&)> notice;
  // When set, every step's forward, backward and optimizer-update wall time is added to it
  // (drift bench train times the loop users run through this and `progress`).
  PhaseTimes* phase_times = nullptr;
  // Gather every step's telemetry, also where no metrics line reports it (train/step_telemetry.h):
  // the files are the same bytes either way (tests compare the two).
  bool telemetry_every_step = false;
};

// The files and folders of a run directory that a run writes (config.json, metrics.jsonl,
// summary.json, checkpoint.bin, checkpoint-<step>.bin, diag.jsonl, init/, provenance.json, and their temporary
// files); a new (not resumed) run removes the previous run's before it writes its own, so that
// nothing of an older run can pass for this one's. Only a directory whose config.json a drift run
// wrote counts (else nothing is listed). Other files are left alone; `keep` (e.g. the
// checkpoint a --resume-from reads, when it lies in this directory) is never removed.
std::vector<std::string> previous_run_files(const std::string& run_dir, const std::string& keep = "");
// Reads the checkpoint at `path` into the run's model and a fresh training state, as --resume-from
// does before its first step. Throws CheckpointError when the file is not a checkpoint of this
// model (the reader the checkpoint fuzzer, tests/fuzz, drives).
void load_checkpoint_into(const std::string& path, PreparedRun& run);

// Throws io::IoError naming the directory when it holds a finished drift run (a summary.json beside
// the config.json a drift run wrote): a new run replaces it only with TrainOptions::force.
void refuse_finished_run(const std::string& run_dir);

// Trains, writing the run directory. `progress` (may be empty) is called at every logged step.
// Throws ConfigError, io::IoError or CheckpointError before anything is written for bad input.
RunSummary train(PreparedRun& run, const TrainOptions& opts, const std::function<void(const Progress&)>& progress);

}  // namespace drift
