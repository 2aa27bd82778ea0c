#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "backend/backend.h"
#include "io/npy.h"
#include "train/optimizer.h"

namespace drift {

using ojson = nlohmann::ordered_json;

PreparedRun prepare_run(const RunConfig& cfg) {
  PreparedRun r;
  r.cfg = cfg;
  r.corpus = load_corpus(cfg.data, cfg.model.context);
  r.cfg.model.vocab = r.corpus.tok.vocab();
  r.model = make_model<float>(r.cfg.model, cfg.seed);
  r.model->sites.seed = cfg.seed;
  resolve_sites_at_step(r.cfg.precision, 0, r.model->sites);
  try {
    r.backend = make_backend(cfg.backend);
  } catch (const BackendError& e) {
    throw ConfigError("backend", e.what());
  }
  for (const auto& s : r.model->sites.sites())
    if (auto why = r.backend->unsupported_reason(s.policy); !why.empty())
      throw ConfigError("backend", std::string(r.backend->name()) + " cannot run site " + s.name() + " exactly: " + why);
  r.model->sites.backend = r.backend.get();
  return r;
}

namespace {

constexpr uint64_t kEvalStepBase = uint64_t{1} << 62;  // matmul streams of evaluation passes

ojson site_metrics(const MatmulSites& sites) {
  ojson j = ojson::object();
  for (const auto& s : sites.sites()) {
    if (!s.calls) continue;
    auto q = [](const QuantStats& st) {
      return ojson{{"clipped", st.clipped}, {"flushed", st.flushed}, {"subnormal", st.subnormal}, {"amax", st.amax}};
    };
    j[s.name()] = {{"a", q(s.tel.a)}, {"b", q(s.tel.b)}};
  }
  return j;
}

// A JSON number, or null when not finite.
ojson num(double x) { return std::isfinite(x) ? ojson(x) : ojson(nullptr); }

double evaluate(PreparedRun& run, uint64_t step, std::vector<int32_t>& windows) {
  auto& m = *run.model;
  const auto& c = run.cfg;
  // Evaluation must not disturb training: keep the sites' telemetry and delayed-scaling state.
  const std::vector<MatmulSite> saved = m.sites.sites();
  m.sites.begin_step(kEvalStepBase + step);
  double total = 0;
  for (size_t i = 0; i < c.train.eval_batches; ++i) {
    sample_windows(run.corpus.val, c.model.context, c.train.batch, c.seed, kValDataStream, i, windows.data());
    total += m.forward(windows.data(), c.train.batch);
  }
  m.sites.sites() = saved;
  return total / static_cast<double>(c.train.eval_batches);
}

}  // namespace

RunSummary train(PreparedRun& run, const std::function<void(const Progress&)>& progress) {
  namespace fs = std::filesystem;
  const RunConfig& c = run.cfg;
  auto& m = *run.model;
  RunSummary sum;
  sum.run_dir = c.run_dir();
  fs::create_directories(sum.run_dir);
  const fs::path dir(sum.run_dir);
  io::write_file_atomic((dir / "config.json").string(), resolved_config_json(c).dump(2) + "\n");
  const std::string metrics_path = (dir / "metrics.jsonl").string();
  std::ofstream metrics(metrics_path, std::ios::trunc);
  if (!metrics) throw io::IoError(metrics_path + ": cannot write");

  Optimizer opt(c.train, m.params.size());
  std::vector<int32_t> windows(c.train.batch * (c.model.context + 1));
  const size_t tokens_per_step = m.predictions(c.train.batch);
  size_t next_schedule = 0;
  double ema = 0, best = std::numeric_limits<double>::infinity(), last_val = NAN, best_val = NAN, loss = NAN;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto t_log = t0;
  uint64_t steps_since_log = 0;

  for (uint64_t step = 0; step < c.train.steps; ++step) {
    // Scheduled precision switches take effect at their step.
    while (next_schedule < c.precision.schedule.size() &&
           c.precision.schedule[next_schedule]["step"].get<uint64_t>() <= step) {
      resolve_sites_at_step(c.precision, step, m.sites);
      ++next_schedule;
    }
    m.sites.begin_step(step);
    m.sites.reset_telemetry();
    sample_windows(run.corpus.train, c.model.context, c.train.batch, c.seed, kTrainDataStream, step, windows.data());
    loss = m.forward(windows.data(), c.train.batch);
    m.backward();
    const double gnorm = global_norm(m.grads.data(), m.grads.size());
    const double lr = learning_rate(c.train, step);

    // Divergence: non-finite loss or gradient at any step; loss spike against the best smoothed loss.
    std::string reason;
    if (!std::isfinite(loss))
      reason = "non-finite loss";
    else if (!std::isfinite(gnorm))
      reason = "non-finite gradient";
    else if (step >= c.divergence.after_step && loss > c.divergence.factor * best)
      reason = "loss " + std::to_string(loss) + " > " + std::to_string(c.divergence.factor) + " x best smoothed loss " +
               std::to_string(best);
    if (std::isfinite(loss)) {
      ema = step == 0 ? loss : c.divergence.smoothing * ema + (1 - c.divergence.smoothing) * loss;
      best = std::min(best, ema);
    }
    const bool diverged_now = c.divergence.enabled && !reason.empty() && !sum.diverged;
    if (diverged_now) {
      sum.diverged = true;
      sum.divergence_step = static_cast<int64_t>(step);
      sum.reason = reason;
    }
    const bool stop = diverged_now && c.divergence.stop;
    if (!stop) {
      const double scale = c.train.grad_clip > 0 && gnorm > c.train.grad_clip ? c.train.grad_clip / gnorm : 1.0;
      opt.step(m.table, m.params.data(), m.grads.data(), lr, scale);
      sum.steps_completed = step + 1;
    }
    ++steps_since_log;
    const bool last = step + 1 == c.train.steps || stop;
    const bool eval = !stop && ((step + 1) % c.train.eval_every == 0 || last);
    double val = NAN;
    if (eval) {
      val = evaluate(run, step, windows);
      last_val = val;
      if (std::isnan(best_val) || val < best_val) best_val = val;
    }
    if (step % c.train.log_every == 0 || eval || last || diverged_now) {
      const auto now = clock::now();
      const double dt = std::chrono::duration<double>(now - t_log).count();
      const double elapsed = std::chrono::duration<double>(now - t0).count();
      const double tps = dt > 0 ? static_cast<double>(steps_since_log * tokens_per_step) / dt : 0.0;
      t_log = now;
      steps_since_log = 0;
      ojson line = {{"step", step},          {"loss", num(loss)},          {"val_loss", num(val)},
                    {"lr", lr},              {"grad_norm", num(gnorm)},    {"clipped", c.train.grad_clip > 0 && gnorm > c.train.grad_clip},
                    {"sites", site_metrics(m.sites)}};
      if (diverged_now) line["diverged"] = reason;
      line["tokens_per_s"] = tps;  // timing fields last
      line["elapsed_s"] = elapsed;
      metrics << line.dump() << "\n";
      metrics.flush();
      if (progress) {
        Progress p;
        p.step = step;
        p.steps = c.train.steps;
        p.loss = loss;
        p.val_loss = val;
        p.lr = lr;
        p.grad_norm = gnorm;
        p.tokens_per_s = tps;
        p.eta_s = step + 1 < c.train.steps ? elapsed / static_cast<double>(step + 1) * static_cast<double>(c.train.steps - step - 1) : 0;
        p.evaluated = eval;
        progress(p);
      }
    }
    if (stop) break;
  }
  metrics.close();
  if (!metrics) throw io::IoError(metrics_path + ": write failed");
  sum.wall_s = std::chrono::duration<double>(clock::now() - t0).count();
  sum.final_train_loss = loss;
  sum.smoothed_train_loss = ema;
  sum.final_val_loss = last_val;
  sum.best_val_loss = best_val;
  sum.steps_per_s = sum.wall_s > 0 ? static_cast<double>(sum.steps_completed) / sum.wall_s : 0;
  sum.tokens_per_s = sum.steps_per_s * static_cast<double>(tokens_per_step);
  ojson s = {{"version", DRIFT_VERSION},
             {"diverged", sum.diverged},
             {"divergence_step", sum.diverged ? ojson(sum.divergence_step) : ojson(nullptr)},
             {"reason", sum.diverged ? ojson(sum.reason) : ojson(nullptr)},
             {"steps", c.train.steps},
             {"steps_completed", sum.steps_completed},
             {"final_train_loss", num(sum.final_train_loss)},
             {"smoothed_train_loss", num(sum.smoothed_train_loss)},
             {"final_val_loss", num(sum.final_val_loss)},
             {"best_val_loss", num(sum.best_val_loss)},
             {"wall_s", sum.wall_s},
             {"steps_per_s", sum.steps_per_s},
             {"tokens_per_s", sum.tokens_per_s}};
  io::write_file_atomic((dir / "summary.json").string(), s.dump(2) + "\n");
  return sum;
}

}  // namespace drift
