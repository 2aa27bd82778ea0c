#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "diag/diagnostics.h"
#include "backend/backend.h"
#include "io/json_number.h"
#include "io/json_read.h"
#include "io/npy.h"
#include "io/out_dir.h"
#include "train/checkpoint.h"
#include "train/divergence.h"
#include "policy/elementwise_rules.h"
#include "train/optimizer.h"
#include "train/run_lock.h"
#include "train/step_telemetry.h"
#include "train/telemetry.h"
#include "train/train_step.h"

namespace drift {

using ojson = nlohmann::ordered_json;
using io::finite_or_null;

PreparedRun prepare_run(const RunConfig& cfg) {
  PreparedRun r;
  r.cfg = cfg;
  if (model_needs_text(cfg.model)) {  // the proxy model draws its own inputs: no corpus
    r.corpus = load_corpus(cfg.data, cfg.model.context);
    r.cfg.model.vocab = r.corpus.tok.vocab();
  }
  r.model = make_model<float>(r.cfg.model, cfg.seed);
  r.model->sites.seed = cfg.seed;
  resolve_sites_at_step(r.cfg.precision, 0, r.model->sites, r.model->elementwise);
  // The rules at every later step and the diagnostics probes must hold too: errors now, not mid-run.
  check_run_rules(r.cfg, r.model->sites, r.model->elementwise);
  // The initial weights are held in the master format from the start (rounded to nearest).
  MasterConfig init_rounding = cfg.precision.master;
  init_rounding.rounding = "rne";
  MasterRounding::from(init_rounding).apply(r.model->params.data(), r.model->params.size(), cfg.seed, 0, 0);
  try {
    r.backend = make_backend(cfg.backend);
  } catch (const BackendError& e) {
    throw ConfigError("backend", e.what());
  }
  for (const auto& s : r.model->sites.sites())
    if (auto why = r.backend->unsupported_reason(s.policy); !why.empty())
      throw ConfigError("backend", std::string(r.backend->name()) + " cannot run site " + s.name() + " exactly: " + why);
  r.model->sites.backend = r.backend.get();
  r.model->sites.count_swamping = cfg.diagnostics.swamping;
  return r;
}

std::vector<std::string> previous_run_files(const std::string& run_dir, const std::string& keep) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return out;
  // Only a directory a drift run wrote (its config.json, written first, carries "version") holds a
  // previous run: elsewhere (say --out pointing at a project folder) nothing is touched.
  {
    nlohmann::json j;
    try {
      j = io::read_json_file((fs::path(run_dir) / "config.json").string(), "run's config.json");
    } catch (const io::IoError&) {
      return out;  // no (readable) config.json: not a directory a drift run wrote
    }
    if (!j.is_object() || !j.contains("version")) return out;
  }
  static const char* const kOwned[] = {"config.json", "metrics.jsonl", "summary.json",     "checkpoint.bin",
                                       "diag.jsonl",  "init",          ".init.partial", "provenance.json"};
  auto owned = [](const std::string& name) {
    for (const char* f : kOwned)
      if (name == f) return true;
    // checkpoint-<step>.bin (keep_checkpoints)
    if (name.size() > 15 && name.rfind("checkpoint-", 0) == 0 && name.compare(name.size() - 4, 4, ".bin") == 0 &&
        name.substr(11, name.size() - 15).find_first_not_of("0123456789") == std::string::npos)
      return true;
    // io::write_file_atomic's temporary files: .<name>.tmp.XXXXXX
    if (name.size() > 1 && name[0] == '.') {
      const size_t t = name.find(".tmp.");
      if (t != std::string::npos && t > 1) {
        const std::string base = name.substr(1, t - 1);
        for (const char* f : kOwned)
          if (base == f) return true;
        if (base.rfind("checkpoint-", 0) == 0) return true;
      }
    }
    return false;
  };
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!owned(name)) continue;
    if (!keep.empty() && fs::equivalent(e.path(), keep, ec)) continue;
    out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void refuse_finished_run(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path summary = fs::path(run_dir) / "summary.json";
  if (!fs::exists(summary, ec) || previous_run_files(run_dir, "").empty()) return;
  throw io::IoError(run_dir + ": holds a finished run (" + summary.string() +
                    "); pass --force to replace it, or choose another --out");
}

namespace {

constexpr uint64_t kEvalStepBase = uint64_t{1} << 62;  // matmul streams of evaluation passes

// Per quantized elementwise tensor (precision.elementwise), as site_metrics does for matmul operands.
ojson elementwise_metrics(const ElementwiseSites& e) {
  ojson j = ojson::object();
  for (const auto& s : e.sites())
    if (s.calls)
      j[s.name()] = {{"elements", s.stats.elements}, {"clipped", s.stats.clipped}, {"flushed", s.stats.flushed}, {"subnormal", s.stats.subnormal},
                     {"amax", s.stats.amax}};
  return j;
}

// A JSON number, or null when not finite.
ojson step_or_null(int64_t s) { return s >= 0 ? ojson(s) : ojson(nullptr); }

double evaluate(PreparedRun& run, TrainStep& batches, uint64_t step) {
  auto& m = *run.model;
  const auto& c = run.cfg;
  // Evaluation must not disturb training: keep the sites' telemetry and delayed-scaling state.
  const std::vector<MatmulSite> saved = m.sites.sites();
  const std::vector<ElementwiseSite> saved_elementwise = m.elementwise.sites();
  m.begin_step(kEvalStepBase + step);
  double total = 0;
  for (size_t i = 0; i < c.train.eval_batches; ++i) total += batches.forward_batch(run.corpus.val, kValDataStream, i);
  m.sites.sites() = saved;
  m.elementwise.sites() = saved_elementwise;
  return total / static_cast<double>(c.train.eval_batches);
}

// Everything of the loop that carries from one step to the next, besides the weights and the
// optimizer: what a checkpoint must hold for a resumed run to continue bit for bit.
struct LoopState {
  uint64_t next_step = 0, steps_completed = 0;
  double loss = NAN, last_val = NAN, best_val = NAN;
  LossScaler scaler;
  RollingZ loss_z, grad_z;
  std::string at_divergence = "null";  // the site telemetry of the diverging step (JSON)

  void save(BlobWriter& w) const {
    w.u64(next_step);
    w.u64(steps_completed);
    for (double v : {loss, last_val, best_val}) w.f64(v);
    w.f64(scaler.scale);
    w.u64(scaler.good_steps);
    w.u64(scaler.skipped);
    loss_z.save(w);
    grad_z.save(w);
    w.str(at_divergence);
  }
  void restore(BlobReader& r) {
    next_step = r.u64();
    steps_completed = r.u64();
    for (double* v : {&loss, &last_val, &best_val}) *v = r.f64();
    scaler.scale = r.f64();
    scaler.good_steps = r.u64();
    scaler.skipped = r.u64();
    loss_z.restore(r);
    grad_z.restore(r);
    at_divergence = r.str();
  }
};

// A resolved config as compared between a checkpoint (or a run directory's config.json) and a
// resuming run: without the keys that do not change the run's bits (version, output; diagnostics,
// measurements only, may be switched on or off; every backend gives the same bits).
// Keys that arrived after runs were already on disk (the proxy's task forms, Adam's complement):
// at their defaults they are left out, so that a run written before they existed (its checkpoint or
// config.json has none of them) resumes as the same run.
ojson identity_of(ojson j) {
  if (!j.is_object()) return j;
  for (const char* k : {"version", "output", "diagnostics", "backend"}) j.erase(k);
  static const ojson defaults = resolved_config_json(RunConfig());
  static const std::pair<const char*, const char*> later[] = {
      {"model", "student"}, {"model", "fc_bias"},       {"model", "teacher"},           {"model", "teacher_width"},
      {"model", "teacher_depth"}, {"model", "init"},    {"model", "label_noise"},       {"train", "adam_one_minus_beta"}};
  for (const auto& [section, key] : later)
    if (j.contains(section) && j[section].is_object() && j[section].contains(key) &&
        j[section][key] == defaults[section][key])
      j[section].erase(key);
  return j;
}

std::string config_identity(const RunConfig& c) { return identity_of(resolved_config_json(c)).dump(); }

// The first key path where two JSON documents differ ("" when equal).
std::string first_difference(const ojson& a, const ojson& b, const std::string& path = "") {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      if (!b.contains(it.key())) return p;
      const std::string d = first_difference(*it, b[it.key()], p);
      if (!d.empty()) return d;
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) return path.empty() ? it.key() : path + "." + it.key();
    return "";
  }
  return a == b ? "" : (path.empty() ? "(root)" : path);
}

std::string checkpoint_payload(const RunConfig& c, const Model<float>& m, const Optimizer& opt,
                               const DivergenceTracker& div, const LoopState& st) {
  BlobWriter w;
  // The parameters and up to three optimizer vectors of their size, and room for the rest.
  w.reserve(4 * sizeof(float) * m.params.size() + (size_t{1} << 20));
  w.str(DRIFT_VERSION);
  w.str(config_identity(c));
  st.save(w);
  w.u64(m.table.specs.size());
  for (const auto& p : m.table.specs) {
    w.str(p.name);
    w.u64(p.size);
  }
  w.vec(m.params);
  opt.save(w);
  div.save(w);
  auto save_delayed = [&w](const DelayedState& d) {
    w.vec(std::vector<double>(d.history.begin(), d.history.end()));
    w.f64(d.scale);
    w.u64(d.initialised);
  };
  w.u64(m.sites.size());
  for (const auto& s : m.sites.sites()) {
    w.str(s.name());
    save_delayed(s.delayed_a);
    save_delayed(s.delayed_b);
  }
  w.u64(m.elementwise.sites().size());
  for (const auto& s : m.elementwise.sites()) {
    w.str(s.name());
    save_delayed(s.delayed);
  }
  return w.bytes();
}

// Restores a checkpoint into the run. `same_run`: the configs must match (--resume); otherwise only
// the model's tensors must (--resume-from).
void restore_checkpoint(const std::string& path, bool same_run, const RunConfig& c, Model<float>& m, Optimizer& opt,
                        DivergenceTracker& div, LoopState& st) {
  const std::string payload = read_checkpoint(path);
  try {
    BlobReader r(payload.data(), payload.size());
    r.str();  // the version that wrote it: informational
    const std::string cfg = r.str();
    if (same_run && cfg != config_identity(c)) {
      const std::string key = first_difference(ojson::parse(cfg), ojson::parse(config_identity(c)));
      throw CheckpointError(path + ": written by a run with a different config (first difference: " + key +
                            "); --resume continues the same run; use --resume-from to start a new run from it");
    }
    st.restore(r);
    const uint64_t tensors = r.u64();
    if (tensors != m.table.specs.size())
      throw CheckpointError(path + ": holds " + std::to_string(tensors) + " tensors, this model has " +
                            std::to_string(m.table.specs.size()));
    for (const auto& p : m.table.specs) {
      const std::string name = r.str();
      const uint64_t size = r.u64();
      if (name != p.name || size != p.size)
        throw CheckpointError(path + ": tensor '" + name + "' (" + std::to_string(size) + " elements) where this model has '" +
                              p.name + "' (" + std::to_string(p.size) + ")");
    }
    r.vec_into(m.params, m.table.total, "parameters");
    opt.restore(r);
    div.restore(r);
    auto restore_delayed = [&r](DelayedState& d) {
      const auto h = r.vec<double>();
      d.history.assign(h.begin(), h.end());
      d.scale = r.f64();
      d.initialised = r.u64() != 0;
    };
    if (r.u64() != m.sites.size()) throw CheckpointError(path + ": matmul site count differs from this model's");
    for (auto& s : m.sites.sites()) {
      if (r.str() != s.name()) throw CheckpointError(path + ": matmul sites differ from this model's");
      restore_delayed(s.delayed_a);
      restore_delayed(s.delayed_b);
    }
    if (r.u64() != m.elementwise.sites().size())
      throw CheckpointError(path + ": elementwise tensor count differs from this model's");
    for (auto& s : m.elementwise.sites()) {
      if (r.str() != s.name()) throw CheckpointError(path + ": elementwise tensors differ from this model's");
      restore_delayed(s.delayed);
    }
    if (r.left()) throw CheckpointError(path + ": unexpected data after the training state");
  } catch (const BlobError& e) {
    throw CheckpointError(path + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(path + ": bad config record: " + io::json_error_text(e));
  }
}

// metrics.jsonl cut back to the lines of steps before `next_step` (a resumed run rewrites the rest).
// Every line must be a JSON object with a "step" (an integer >= 0): anything else is not a file this
// run wrote, and is refused rather than rewritten. The one exception is a last line without its
// newline that is not JSON: a write cut by the kill, of a step after the checkpoint, rewritten anyway.
std::string metrics_before(const std::string& path, uint64_t next_step) {
  const std::string text = io::read_regular_file(path, "run's metrics (to resume)", io::kMaxDataBytes);
  std::string kept;
  for (const io::TextLine& l : io::split_lines(text)) {
    const std::string where = path + " line " + std::to_string(l.number);
    nlohmann::json j;
    if (!io::try_parse_json(l.text, where, j)) {
      if (l.cut) break;
      throw io::IoError(where + ": not a JSON line; cannot resume over a metrics file drift did not write");
    }
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_unsigned())
      throw io::IoError(where + ": expected a JSON object with \"step\" (an integer >= 0); cannot resume over it");
    if (j["step"].get<uint64_t>() >= next_step) break;
    kept += l.text + "\n";
  }
  return kept;
}

// --resume of a run killed before its first checkpoint: its directory's config.json (written
// before the first step) must be this config's, and the run then starts over from step 0 (which
// writes the bytes an uninterrupted run writes). Throws CheckpointError when it is missing or differs.
void check_restart_config(const std::filesystem::path& cfg_path, const std::string& ckpt_path, const RunConfig& c) {
  std::error_code ec;
  if (!std::filesystem::exists(cfg_path, ec))
    throw CheckpointError(ckpt_path + ": no checkpoint, and no config.json in " + cfg_path.parent_path().string() +
                          ": nothing to resume (start the run without --resume)");
  ojson existing;
  try {
    existing = io::read_ordered_json_file(cfg_path.string(), "run's config.json");
  } catch (const io::IoError& e) {
    throw CheckpointError(std::string(e.what()) + "; cannot resume");
  }
  const std::string key = first_difference(identity_of(existing), identity_of(resolved_config_json(c)));
  if (!key.empty())
    throw CheckpointError(cfg_path.string() + ": written by a run with a different config (first difference: " +
                          key + "); --resume continues the same run");
}

}  // namespace

void load_checkpoint_into(const std::string& path, PreparedRun& run) {
  const RunConfig& c = run.cfg;
  Optimizer opt(c.train, c.precision, run.model->table);
  DivergenceTracker div(c.divergence, nullptr);
  LoopState st;
  st.scaler.start(c.precision.loss_scale);
  st.loss_z = RollingZ(c.divergence.window);
  st.grad_z = RollingZ(c.divergence.window);
  restore_checkpoint(path, false, c, *run.model, opt, div, st);
}

namespace {

using Clock = std::chrono::steady_clock;

// What the phases of one train() call share: the run, its files, the training state that carries
// from step to step, and the clocks of the timing fields.
struct Session {
  PreparedRun& run;
  const RunConfig& c;
  Model<float>& m;
  const TrainOptions& opts;
  std::filesystem::path dir;
  std::string metrics_path, ckpt_path, diag_path;
  std::map<uint64_t, double> reference;  // the reference run's losses (--reference), read first
  Optimizer opt;
  DivergenceTracker div;
  LoopState st;
  std::optional<Diagnostics> diag;
  bool resume = false;               // continuing from this directory's checkpoint
  std::ofstream metrics, diag_out;   // metrics.jsonl; diag.jsonl only when diagnostics are on
  std::optional<TrainStep> train_step;
  size_t tokens_per_step = 0;
  size_t next_schedule = 0;          // the first precision.schedule entry not yet in force
  Clock::time_point t0, t_log;
  uint64_t steps_since_log = 0, steps_this_session = 0;
  DelayedStates delayed_at_start;    // of a step without telemetry, should it have to run again

  Session(PreparedRun& r, const TrainOptions& o)
      : run(r), c(r.cfg), m(*r.model), opts(o), dir(c.run_dir()), metrics_path((dir / "metrics.jsonl").string()),
        ckpt_path((dir / "checkpoint.bin").string()), diag_path((dir / "diag.jsonl").string()),
        reference(o.reference.empty() ? std::map<uint64_t, double>{} : read_reference_losses(o.reference)),
        opt(c.train, c.precision, m.table), div(c.divergence, o.reference.empty() ? nullptr : &reference) {
    st.scaler.start(c.precision.loss_scale);
    st.loss_z = RollingZ(c.divergence.window);
    st.grad_z = RollingZ(c.divergence.window);
  }
  void save_checkpoint() { write_checkpoint(ckpt_path, checkpoint_payload(c, m, opt, div, st)); }
};

// Phase 1, open the run: restore what a resume or --resume-from starts from and check everything
// that can fail on bad input, then clear a new run's directory of the previous run's files and
// write config.json and the kept part of metrics.jsonl (and diag.jsonl).
void open_run(Session& s) {
  namespace fs = std::filesystem;
  const RunConfig& c = s.c;
  std::string kept_metrics;
  s.resume = s.opts.resume;
  if (s.resume && !fs::exists(s.ckpt_path)) {
    check_restart_config(s.dir / "config.json", s.ckpt_path, c);
    s.resume = false;
    if (s.opts.notice)
      s.opts.notice(s.ckpt_path + " does not exist yet (the run stopped before its first checkpoint): "
                                  "--resume starts the run from step 0");
  }
  if (s.resume) {
    restore_checkpoint(s.ckpt_path, true, c, s.m, s.opt, s.div, s.st);
    kept_metrics = metrics_before(s.metrics_path, s.st.next_step);
  } else if (!s.opts.resume_from.empty()) {
    restore_checkpoint(s.opts.resume_from, false, c, s.m, s.opt, s.div, s.st);
  }
  resolve_sites_at_step(c.precision, s.st.next_step, s.m.sites, s.m.elementwise);
  // Deep diagnostics (diag/diagnostics.h): built now, so that a probe that fails to resolve is an error before any write.
  s.diag.emplace(c.diagnostics.every, c.diagnostics.probes, c.model, c.seed);
  const std::string kept_diag =
      s.resume && fs::exists(s.diag_path) ? metrics_before(s.diag_path, s.st.next_step) : "";

  // A new run: nothing of a previous run in this directory may outlive it (an interrupted or failed
  // rerun must not look finished), so the previous run's files go before anything is written.
  if (!s.resume)
    for (const auto& p : previous_run_files(s.dir.string(), s.opts.resume_from)) {
      std::error_code ec;
      fs::remove_all(p, ec);
      if (ec) throw io::IoError(p + ": cannot remove the previous run's file (" + ec.message() + ")");
    }
  if (s.opts.before_write) s.opts.before_write();
  io::create_output_dir(s.dir.string(), "run directory (--out / output.dir)");
  io::write_file_atomic((s.dir / "config.json").string(), resolved_config_json(c).dump(2) + "\n");
  io::write_file_atomic(s.metrics_path, kept_metrics);
  s.metrics.open(s.metrics_path, std::ios::app);
  if (!s.metrics) throw io::IoError(s.metrics_path + ": cannot write");
  if (c.diagnostics.every > 0) {
    io::write_file_atomic(s.diag_path, kept_diag);
    s.diag_out.open(s.diag_path, std::ios::app);
    if (!s.diag_out) throw io::IoError(s.diag_path + ": cannot write");
  }
  s.train_step.emplace(c, s.m, s.run.corpus);
  s.tokens_per_step = s.m.predictions(c.train.batch);
  while (s.next_schedule < c.precision.schedule.size() &&
         c.precision.schedule[s.next_schedule].step <= s.st.next_step)
    ++s.next_schedule;
  s.t0 = s.t_log = Clock::now();
}

// What one step measured, for its metrics line.
struct StepRecord {
  uint64_t step = 0;
  GradNorms norms;
  double lr = 0, scale_used = 0, loss_z = NAN, grad_z = NAN, val = NAN;
  bool apply = true, eval = false, last = false, stop = false;
  std::string reason;  // the divergence reason, when the run diverged at this step
};

// Phase 2, one step: the gradients (and the deep diagnostics when due), the divergence checks, the
// update (unless the run stops or the loss scaler skips it), the evaluation when due.
StepRecord one_step(Session& s, uint64_t step) {
  const RunConfig& c = s.c;
  TrainStep& train_step = *s.train_step;
  auto& m = s.m;
  const auto& ls = c.precision.loss_scale;
  // Scheduled precision switches take effect at their step.
  while (s.next_schedule < c.precision.schedule.size() &&
         c.precision.schedule[s.next_schedule].step <= step) {
    resolve_sites_at_step(c.precision, step, m.sites, m.elementwise);
    ++s.next_schedule;
  }
  // The matmuls' operand statistics only where a metrics line will report them (step_telemetry.h).
  const bool telemetry = s.opts.telemetry_every_step ||
                         telemetry_due(c.train, step, s.steps_this_session, s.diag->due(step));
  m.sites.telemetry = telemetry;
  if (!telemetry) s.delayed_at_start.save(m);
  train_step.begin(step, s.st.scaler.scale);
  s.diag->begin_step(step, m.sites, m.elementwise);  // deep diagnostics: snapshot of the sites as the step starts (when due)
  s.st.loss = train_step.gradients(step, s.st.scaler.active(ls), s.opts.phase_times);
  // ---- deep diagnostics (diag/diagnostics.h): reads the run's weights, batch and gradient
  // (unscaled, unclipped) and works on copies; nothing of the run changes. ----
  if (s.diag->due(step)) {
    s.diag_out << s.diag->run(step, m, m.grads.data(), m.loss_scale,
                              StepBatch{train_step.windows().data(), c.train.batch, kTrainDataStream, step, kLabelNoiseStream}).dump()
               << "\n";
    s.diag_out.flush();
  }
  if (s.steps_this_session == 0 && s.opts.notice)  // legal but surprising: MX blocks longer than K
    if (const std::string w = short_scale_blocks(m.sites); !w.empty()) s.opts.notice("warning: " + w);
  StepRecord r;
  r.step = step;
  r.norms = gradient_norms(m.table, m.grads.data());
  const double gnorm = r.norms.global;
  r.lr = learning_rate(c.train, step);
  r.scale_used = s.st.scaler.scale;
  r.apply = s.st.scaler.after_backward(ls, std::isfinite(gnorm));  // false: a skipped step
  r.reason = s.div.observe(step, s.st.loss, !std::isfinite(gnorm) && !s.st.scaler.active(ls));
  if (!telemetry && !r.reason.empty()) {
    // The divergence's metrics line reports this step's telemetry: the step again, with it, from
    // the state it began in (the same loss and gradients, bit for bit), its calls counted once.
    RouteCounts routes;
    routes.save(m.sites);
    s.delayed_at_start.restore(m);
    m.sites.telemetry = true;
    train_step.begin(step, r.scale_used);
    train_step.gradients(step, s.st.scaler.active(ls), s.opts.phase_times);
    routes.restore(m.sites);
  }
  r.loss_z = s.st.loss_z.z(s.st.loss);
  r.grad_z = s.st.grad_z.z(gnorm);
  s.st.loss_z.push(s.st.loss);
  s.st.grad_z.push(gnorm);
  r.stop = !r.reason.empty() && c.divergence.stop;
  if (!r.stop) {
    const auto t_update = Clock::now();
    if (r.apply) train_step.update(s.opt, gnorm, r.lr, step);
    if (s.opts.phase_times) s.opts.phase_times->update_s += std::chrono::duration<double>(Clock::now() - t_update).count();
    s.st.steps_completed = step + 1;
  }
  s.st.next_step = step + 1;
  ++s.steps_since_log;
  ++s.steps_this_session;
  r.last = step + 1 == c.train.steps || r.stop;
  r.eval = !r.stop && ((step + 1) % c.train.eval_every == 0 || r.last);
  if (r.eval) {
    r.val = evaluate(s.run, train_step, step);
    s.st.last_val = r.val;
    if (std::isnan(s.st.best_val) || r.val < s.st.best_val) s.st.best_val = r.val;
  }
  return r;
}

// Phase 3, the log line: the step's metrics.jsonl line (timing fields last) and the progress report.
void log_line(Session& s, const StepRecord& r, const std::function<void(const Progress&)>& progress) {
  const RunConfig& c = s.c;
  auto& m = s.m;
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - s.t_log).count();
  const double elapsed = std::chrono::duration<double>(now - s.t0).count();
  const double tps = dt > 0 ? static_cast<double>(s.steps_since_log * s.tokens_per_step) / dt : 0.0;
  s.t_log = now;
  s.steps_since_log = 0;
  const double gnorm = r.norms.global;
  ojson line = {{"step", r.step},
                {"loss", finite_or_null(s.st.loss)},
                {"val_loss", finite_or_null(r.val)},
                {"lr", r.lr},
                {"grad_norm", finite_or_null(gnorm)},
                {"grad_norm_max", finite_or_null(r.norms.max_tensor.norm)},
                {"grad_norm_max_tensor", r.norms.max_tensor.tensor},
                {"loss_z", finite_or_null(r.loss_z)},
                {"grad_norm_z", finite_or_null(r.grad_z)},
                {"grad_clipped", grad_clipped(c.train, gnorm)}};
  if (s.st.scaler.active(c.precision.loss_scale)) {
    line["loss_scale"] = r.scale_used;
    line["skipped"] = !r.apply;
  }
  line["sites"] = site_metrics(m.sites, c.diagnostics.swamping);
  line["classes"] = class_metrics(m.sites);
  if (m.elementwise.any_active()) line["elementwise"] = elementwise_metrics(m.elementwise);
  if (!r.reason.empty()) {
    line["diverged"] = r.reason;
    s.st.at_divergence = ojson{{"step", r.step}, {"classes", line["classes"]}, {"sites", line["sites"]}}.dump();
  }
  line["tokens_per_s"] = tps;  // timing fields last
  line["elapsed_s"] = elapsed;
  s.metrics << line.dump() << "\n";
  s.metrics.flush();
  if (progress) {
    Progress p;
    p.step = r.step;
    p.steps = c.train.steps;
    p.loss = s.st.loss;
    p.val_loss = r.val;
    p.lr = r.lr;
    p.grad_norm = gnorm;
    p.tokens_per_s = tps;
    const double per_step = elapsed / static_cast<double>(s.steps_this_session);
    p.eta_s = r.step + 1 < c.train.steps ? per_step * static_cast<double>(c.train.steps - r.step - 1) : 0;
    p.evaluated = r.eval;
    progress(p);
  }
}

// A periodic checkpoint after `step` (train.checkpoint_every; the last one is written at exit).
void periodic_checkpoint(Session& s, uint64_t step, bool last) {
  namespace fs = std::filesystem;
  const RunConfig& c = s.c;
  if (!c.train.checkpoint_every || (step + 1) % c.train.checkpoint_every != 0 || last) return;
  s.save_checkpoint();
  if (c.train.keep_checkpoints)  // named by the step it resumes at
    fs::copy_file(s.ckpt_path, (s.dir / ("checkpoint-" + std::to_string(step + 1) + ".bin")).string(),
                  fs::copy_options::overwrite_existing);
}

// Phase 4, the summary: close the files, write the final checkpoint, and (unless interrupted, when
// the checkpoint is the record) summary.json, atomically.
void finish_run(Session& s, RunSummary& sum) {
  const RunConfig& c = s.c;
  s.metrics.close();
  if (!s.metrics) throw io::IoError(s.metrics_path + ": write failed");
  if (s.diag_out.is_open()) {
    s.diag_out.close();
    if (!s.diag_out) throw io::IoError(s.diag_path + ": write failed");
  }
  s.save_checkpoint();

  const DivergenceTracker& div = s.div;
  sum.wall_s = std::chrono::duration<double>(Clock::now() - s.t0).count();
  sum.diverged = div.divergence_step >= 0;
  sum.divergence_step = div.divergence_step;
  sum.first_nonfinite_step = div.first_nonfinite_step;
  sum.spike_step = div.spike_step;
  sum.departure_step = div.departure_step;
  sum.reason = div.reason;
  sum.skipped_steps = s.st.scaler.skipped;
  sum.steps_completed = s.st.steps_completed;
  sum.final_train_loss = s.st.loss;
  sum.smoothed_train_loss = div.ema;
  sum.final_val_loss = s.st.last_val;
  sum.best_val_loss = s.st.best_val;
  sum.steps_per_s = sum.wall_s > 0 ? static_cast<double>(s.steps_this_session) / sum.wall_s : 0;
  sum.tokens_per_s = sum.steps_per_s * static_cast<double>(s.tokens_per_step);
  if (sum.interrupted) return;  // unfinished: the checkpoint is the record; --resume continues

  const std::string& reference = s.opts.reference;
  ojson j = {{"version", DRIFT_VERSION},
             {"diverged", sum.diverged},
             {"divergence_step", step_or_null(sum.divergence_step)},
             {"reason", sum.diverged ? ojson(sum.reason) : ojson(nullptr)},
             {"first_nonfinite_step", step_or_null(sum.first_nonfinite_step)},
             {"spike_step", step_or_null(sum.spike_step)},
             {"departure_step", reference.empty() ? ojson(nullptr) : step_or_null(sum.departure_step)},
             {"reference", reference.empty() ? ojson(nullptr) : ojson(reference)},
             {"telemetry_at_divergence", ojson::parse(s.st.at_divergence)},
             {"steps", c.train.steps},
             {"steps_completed", sum.steps_completed},
             {"skipped_steps", sum.skipped_steps},
             {"final_loss_scale", s.st.scaler.scale},
             {"final_train_loss", finite_or_null(sum.final_train_loss)},
             {"smoothed_train_loss", finite_or_null(div.has_ema ? div.ema : NAN)},
             {"final_val_loss", finite_or_null(sum.final_val_loss)},
             {"best_val_loss", finite_or_null(sum.best_val_loss)},
             {"wall_s", sum.wall_s},
             {"steps_per_s", sum.steps_per_s},
             {"tokens_per_s", sum.tokens_per_s},
             {"routes", route_metrics(s.m.sites)}};  // with the timing: how it ran, not what it computed
  io::write_file_atomic((s.dir / "summary.json").string(), j.dump(2) + "\n");
}

}  // namespace

RunSummary train(PreparedRun& run, const TrainOptions& opts, const std::function<void(const Progress&)>& progress) {
  RunSummary sum;
  sum.run_dir = run.cfg.run_dir();
  // One run at a time in a directory, and a finished run is replaced only on request
  // (train/run_lock.h): checked before anything is read or written.
  io::check_output_dir(sum.run_dir, "run directory (--out / output.dir)");
  const RunDirLock lock(sum.run_dir);
  if (!opts.resume && !opts.force) refuse_finished_run(sum.run_dir);

  Session s(run, opts);  // everything that can fail on bad input is read before anything is written
  open_run(s);
  for (uint64_t step = s.st.next_step; step < s.c.train.steps; ++step) {
    const StepRecord r = one_step(s, step);
    // (An evaluation or a last step that is not scheduled is a stop at a divergence: its reason.)
    if (line_scheduled(s.c.train, step) || !r.reason.empty()) log_line(s, r, progress);
    if (r.stop) break;
    if (opts.stop_requested && opts.stop_requested->load()) {
      sum.interrupted = true;
      break;
    }
    periodic_checkpoint(s, step, r.last);
  }
  finish_run(s, sum);
  return sum;
}

}  // namespace drift
