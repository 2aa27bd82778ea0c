// drift bench train: the speed of `drift train` itself. Each bench model trains under the fp32
// passthrough and full MXFP8 emulation through the same function `drift train` runs (prepare_run,
// then train(): telemetry and a metrics line every train.log_every steps, as a user's run writes
// them), and two figures are taken:
//   per step    wall and process-CPU time between two logged steps well after the start, divided
//               by the steps between them (start-up, evaluation and the final checkpoint excluded),
//               split into forward, backward, optimizer update and the rest (norms, bookkeeping,
//               telemetry and metrics lines);
//   end to end  the whole `drift train` command (this binary, as a child process) for a fixed number
//               of steps with the config's defaults: start-up, evaluation, metrics, summary, as
//               tokens (predictions) per second.
// Given the JSON of `scripts/reference_pytorch.py --bench --json` (PyTorch float32, the same models
// and batch sizes), it prints drift's per-step speed as a ratio to PyTorch's beside the targets.
// Each row also lists the route (matmul implementation) of every site, so a test can check that
// the benchmark and `drift train` compute the same way.
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "backend/timing.h"
#include "cli/bench_operands.h"
#include "cli/blas_reference.h"
#include "cli/commands.h"
#include "cli/fma_peak.h"
#include "io/npy.h"
#include "train/config.h"
#include "train/telemetry.h"
#include "train/trainer.h"

namespace drift::cli {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// A bench model: its config's "model" section, batch size, and the steps of the end-to-end run.
struct BenchModel {
  const char* name;
  const char* model_json;
  size_t batch;
  size_t e2e_steps;
};

// mlp and attn at the sizes of the shipped language-model configs; proxy at the shipped
// configs/proxy_*.json size and at a study size (issue 16: width 256, depth 4, batch 512).
const BenchModel kModels[] = {
    {"mlp", R"({"kind": "mlp", "context": 16, "embed": 32, "hidden": 512, "hidden_layers": 1})", 64, 300},
    {"attn",
     R"({"kind": "attn", "context": 64, "d_model": 128, "heads": 4, "layers": 2, "mlp_mult": 4, "activation": "tanh"})",
     16, 30},
    {"proxy",
     R"({"kind": "proxy", "input_dim": 32, "output_dim": 8, "d_model": 64, "layers": 4, "mlp_mult": 4,
         "activation": "gelu", "teacher_seed": 0})",
     64, 300},
    {"proxy_study",
     R"({"kind": "proxy", "input_dim": 32, "output_dim": 8, "d_model": 256, "layers": 4, "mlp_mult": 4,
         "activation": "gelu", "teacher_seed": 0})",
     512, 20},
};

// Each policy as the precision.matmul rules a training config holds, with its target speed ratio
// (drift's steps per second / PyTorch float32's, issue 16).
struct TrainPolicy {
  const char* name;
  const char* rules;
  double target;
  // Whether every product of the policy's matmuls takes an fp32 multiply of its own, so that the
  // core's multiply-add peak bounds their time (fp32); not where an instruction makes two (the pair
  // kernel's VDPBF16PS, which MXFP8's operands take).
  bool product_per_multiply;
};
const TrainPolicy kPolicies[] = {
    {"fp32", R"([{"preset": "fp32"}])", 2.0, true},
    {"mxfp8_e4m3", R"([{"preset": "mxfp8_e4m3"}])", 1.0, false},
};

struct Options {
  size_t steps = 0;  // timed steps (0: as many as fit in min_seconds, at least 5)
  double min_seconds = 2.0;
  int threads = 1;
  std::string data = "data/austen";
  std::string pytorch;  // JSON rows of reference_pytorch.py --bench --json
  std::vector<std::string> models, policies;
  bool end_to_end = true;
  size_t e2e_steps = 0;  // 0: each model's own
  bool json = false;
  bool shapes = false;  // a per-shape breakdown under each table row
};

// CPU seconds of this process (every thread), and of its finished children.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
double children_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// The config a user would write for this model and policy (every other key at its default).
nlohmann::json bench_config(const BenchModel& bm, const TrainPolicy& bp, const Options& o, size_t steps,
                            const std::string& out) {
  nlohmann::json c = {{"seed", 0},
                      {"model", nlohmann::json::parse(bm.model_json)},
                      {"train", {{"steps", steps}, {"batch", bm.batch}}},
                      {"precision", {{"matmul", nlohmann::json::parse(bp.rules)}}},
                      {"output", {{"dir", out}}}};
  if (c["model"]["kind"] != "proxy") c["data"] = {{"path", o.data}};
  return c;
}

// A scratch directory for the runs, removed on every exit path.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "drift-bench-train.XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw InputError("cannot create a scratch directory under " + fs::temp_directory_path().string());
    path = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Timed seconds per shape when a step's matmuls are replayed alone (replay_seconds).
constexpr double kEngineSecondsPerShape = 0.05;

struct StepTiming {
  size_t steps = 0;                      // timed steps
  double wall_s = 0, cpu_s = 0;          // over the timed steps
  PhaseTimes phases;                     // forward, backward, update over the timed steps
  ojson routes;                          // per site, the calls of each route (whole run)
  size_t tokens_per_step = 0;
  std::vector<MatmulTimes::Shape> matmuls;  // per site and shape, calls and time over the timed steps
  std::vector<MatmulPolicy> site_policy;    // each site's policy
  std::vector<std::string> site_name;       // and its name (MatmulSite::name)
};

// Each of the timed steps' matmul shapes replayed alone on fresh row-major float operands, timed as
// `drift bench gemm` times a call, times its calls: in seconds per shape of t.matmuls, in its order.
struct ReplaySeconds {
  // The engine (the site's policy, a reused workspace). Set against the steps' own matmul time, it
  // says what the training loop adds around the engine (layouts, transposed or accumulated
  // results, scans) at the model's real shapes.
  std::vector<double> engine;
  // OpenBLAS sgemm on the same operands (empty without OpenBLAS): the matmul time of a step that
  // ran at the reference's speed. PyTorch's twin makes the same products on the same library, so
  // PyTorch's step over this is the most drift could gain on PyTorch with its matmuls at sgemm's
  // speed and nothing else costing time (issue 16's "2x PyTorch" needs this above 2).
  std::vector<double> sgemm;
};

ReplaySeconds replay_seconds(const StepTiming& t, double min_seconds) {
  MatmulWorkspace workspace;
  ReplaySeconds r;
  for (const MatmulTimes::Shape& sh : t.matmuls) {
    const std::vector<float> a = bench_operand(1, sh.m * sh.k), b = bench_operand(2, sh.k * sh.n);
    std::vector<float> c(sh.m * sh.n);
    const double calls = static_cast<double>(sh.calls);
    const MatViewF av{a.data(), sh.m, sh.k, sh.k, false}, bv{b.data(), sh.k, sh.n, sh.n, false};
    const MatmulPolicy& policy = t.site_policy.at(sh.site);
    r.engine.push_back(calls * seconds_per_call(
                                   [&] {
                                     MatmulContext ctx;
                                     ctx.workspace = &workspace;
                                     matmul(av, bv, c.data(), sh.n, policy, ctx);
                                   },
                                   min_seconds));
    if (const double s = sgemm_seconds_per_call(a.data(), b.data(), c.data(), sh.m, sh.n, sh.k, min_seconds); s > 0)
      r.sgemm.push_back(calls * s);
  }
  return r;
}

// Times the training loop of `drift train` between logged steps: the first mark is the first logged
// step after a warm-up (scratch buffers grown, pages faulted in), the last the first logged step
// at which enough steps and seconds have passed; train() then stops as after Ctrl-C.
StepTiming time_training(const BenchModel& bm, const TrainPolicy& bp, const Options& o, const fs::path& scratch) {
  constexpr size_t kHuge = 100000000;  // steps (the most a config allows): the schedule stays in warm-up/early cosine
  nlohmann::json j = bench_config(bm, bp, o, kHuge, (scratch / (std::string("steps-") + bm.name + "-" + bp.name)).string());
  j["train"]["eval_every"] = kHuge;  // no evaluation inside the timed steps
  const RunConfig cfg = parse_run_config(j);
  PreparedRun run = prepare_run(cfg);
  const size_t warmup = std::max<size_t>(2, cfg.train.log_every);
  using clock = std::chrono::steady_clock;
  std::atomic<bool> stop{false};
  PhaseTimes phases;
  struct Mark {
    uint64_t step = 0;
    clock::time_point wall;
    double cpu = 0;
    PhaseTimes phases;
  };
  std::optional<Mark> first;
  Mark last;
  MatmulTimes matmuls;
  std::vector<MatmulTimes::Shape> matmuls_at_last;
  run.model->sites.times = &matmuls;
  auto on_log = [&](const Progress& p) {
    const Mark now{p.step, clock::now(), process_cpu_seconds(), phases};
    if (p.step < warmup) return;
    if (!first) {
      first = now;
      matmuls.reset();
      return;
    }
    last = now;
    matmuls_at_last = matmuls.shapes;
    const size_t done = now.step - first->step;
    const double elapsed = std::chrono::duration<double>(now.wall - first->wall).count();
    if (o.steps ? done >= o.steps : (done >= 5 && elapsed >= o.min_seconds)) stop = true;
  };
  TrainOptions opts;
  opts.stop_requested = &stop;
  opts.phase_times = &phases;
  train(run, opts, on_log);
  if (!first || last.step <= first->step) throw InputError("bench train: " + std::string(bm.name) + " stopped early");
  StepTiming t;
  t.steps = last.step - first->step;
  t.wall_s = std::chrono::duration<double>(last.wall - first->wall).count();
  t.cpu_s = last.cpu - first->cpu;
  t.phases.forward_s = last.phases.forward_s - first->phases.forward_s;
  t.phases.backward_s = last.phases.backward_s - first->phases.backward_s;
  t.phases.update_s = last.phases.update_s - first->phases.update_s;
  t.routes = route_metrics(run.model->sites);
  t.tokens_per_step = run.model->predictions(cfg.train.batch);
  t.matmuls = std::move(matmuls_at_last);
  for (const MatmulSite& site : run.model->sites.sites()) {
    t.site_policy.push_back(site.policy);
    t.site_name.push_back(site.name());
  }
  run.model->sites.times = nullptr;
  return t;
}

struct EndToEnd {
  size_t steps = 0;
  double wall_s = 0, cpu_s = 0;
};

// The whole `drift train --config C --out D --quiet` command, this binary as a child process.
EndToEnd time_command(const BenchModel& bm, const TrainPolicy& bp, const Options& o, const fs::path& scratch) {
  EndToEnd e;
  e.steps = o.e2e_steps ? o.e2e_steps : bm.e2e_steps;
  // A directory of its own per model and policy (drift train refuses to replace a finished run).
  const std::string name = std::string("e2e-") + bm.name + "-" + bp.name;
  const fs::path dir = scratch / name, cfg_path = scratch / (name + ".json");
  {
    std::ofstream f(cfg_path);
    f << bench_config(bm, bp, o, e.steps, dir.string()).dump(2) << "\n";
    if (!f) throw InputError("cannot write " + cfg_path.string());
  }
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const double cpu0 = children_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::fflush(stdout);  // else the child would write this process's buffered output a second time
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw InputError("bench train: cannot start a child process");
  const fs::path log = scratch / (name + ".log");
  if (pid == 0) {
    // The command's own output (progress, warnings) goes to a log, never into the bench's output.
    if (!std::freopen(log.c_str(), "w", stdout) || !std::freopen(log.c_str(), "a", stderr)) _exit(126);
    const std::string threads = std::to_string(o.threads);
    setenv("OMP_NUM_THREADS", threads.c_str(), 1);
    execl(self.c_str(), self.c_str(), "train", "--config", cfg_path.c_str(), "--quiet", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  e.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  e.cpu_s = children_cpu_seconds() - cpu0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream f(log);
    std::stringstream text;
    text << f.rdbuf();
    throw InputError("bench train: `drift train --config " + cfg_path.string() + "` failed (" + bm.name + ", " +
                     bp.name + "): " + text.str());
  }
  return e;
}

bool selected(const std::vector<std::string>& wanted, const std::string& name) {
  return wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end();
}

struct TorchFigures {
  std::string model;
  double ms = 0, cpu_ms = 0;  // wall and process-CPU milliseconds per step
  std::string blas_core;      // the OpenBLAS kernels torch ran (empty: not recorded)
};

// Rows of reference_pytorch.py --bench --json, timed on `threads` threads as drift is (a row that
// records another count would compare unlike with unlike).
std::vector<TorchFigures> read_pytorch(const std::string& path, int threads) {
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
    if (r.contains("threads") && !(r["threads"].is_number_integer() && r["threads"].get<int64_t>() == threads))
      throw InputError("--pytorch: '" + path + "': the " + r["model"].get<std::string>() + " row was timed on " +
                       r["threads"].dump() + " thread(s), this benchmark on " + std::to_string(threads) +
                       " (--threads; reference_pytorch.py --bench --threads " + std::to_string(threads) + ")");
    const std::string core = r.contains("blas_core") && r["blas_core"].is_string() ? r["blas_core"].get<std::string>() : "";
    out.push_back({r["model"].get<std::string>(), r["ms_per_step"].get<double>(), r["cpu_ms_per_step"].get<double>(), core});
  }
  return out;
}

// The step's matmuls per site and shape (ms per timed step): in the step, in the engine alone on
// fresh row-major operands, and in sgemm (where OpenBLAS is built in). Their sums are the row's
// matmul_ms, engine_matmul_ms and sgemm_matmul_ms.
ojson shape_rows(const StepTiming& t, const ReplaySeconds& replay) {
  const double n = static_cast<double>(t.steps);
  ojson rows = ojson::array();
  for (size_t i = 0; i < t.matmuls.size(); ++i) {
    const MatmulTimes::Shape& sh = t.matmuls[i];
    ojson r = {{"site", t.site_name.at(sh.site)},
               {"m", sh.m},
               {"k", sh.k},
               {"n", sh.n},
               {"transposed_a", sh.ta},
               {"transposed_b", sh.tb},
               {"calls_per_step", static_cast<double>(sh.calls) / n},
               {"ms_per_step", sh.seconds / n * 1e3},
               {"engine_ms_per_step", replay.engine.at(i) / n * 1e3}};
    if (!replay.sgemm.empty()) r["sgemm_ms_per_step"] = replay.sgemm.at(i) / n * 1e3;
    rows.push_back(std::move(r));
  }
  return rows;
}

// shape_rows as an indented table, the most costly first.
void print_shapes(const ojson& shapes) {
  std::vector<const ojson*> order;
  for (const ojson& sh : shapes) order.push_back(&sh);
  std::stable_sort(order.begin(), order.end(), [](const ojson* a, const ojson* b) {
    return (*a)["ms_per_step"].get<double>() > (*b)["ms_per_step"].get<double>();
  });
  int width = 4;  // (the longest site name, "site" at least)
  for (const ojson& sh : shapes) width = std::max(width, static_cast<int>(sh["site"].get<std::string>().size()));
  std::printf("    (ms per step in the step, in the engine alone and in sgemm; T: the operands the step gives "
              "transposed)\n");
  std::printf("    %-*s %5s %5s %5s %2s %7s %8s %8s %5s %8s\n", width, "site", "m", "k", "n", "T", "calls", "ms", "engine",
              "eff", "sgemm");
  for (const ojson* p : order) {
    const ojson& sh = *p;
    const std::string t = std::string(sh["transposed_a"].get<bool>() ? "a" : "") + (sh["transposed_b"].get<bool>() ? "b" : "");
    const double ms = sh["ms_per_step"].get<double>(), engine = sh["engine_ms_per_step"].get<double>();
    std::printf("    %-*s %5zu %5zu %5zu %2s %7.1f %8.3f %8.3f %5.2f %8.3f\n", width, sh["site"].get<std::string>().c_str(),
                sh["m"].get<size_t>(), sh["k"].get<size_t>(), sh["n"].get<size_t>(), t.empty() ? "-" : t.c_str(),
                sh["calls_per_step"].get<double>(), ms, engine, engine / ms,
                sh.value("sgemm_ms_per_step", 0.0));
  }
}

void print_header(bool with_torch, bool e2e) {
  std::printf("%-11s %-10s %5s %8s %8s %7s %7s %7s %7s %8s", "model", "policy", "steps", "ms/step", "cpu ms",
              "fwd", "bwd", "upd", "other", "tok/s");
  std::printf(" %8s %8s %5s %8s", "mm ms", "engine", "eff", "sgemm");
  if (e2e) std::printf(" %9s", "e2e tok/s");
  if (with_torch)
    std::printf(" %8s %8s %8s %8s %6s %-3s %7s %8s", "torch ms", "torch cpu", "vs torch", "(cpu)", "target", "met", "bound",
                "pk bound");
  std::printf("\n");
}

void run_bench_train(const Options& o) {
  if (o.threads < 1) throw InputError("--threads: expected an integer >= 1");
  omp_set_num_threads(o.threads);
  const int blas_threads = use_blas_threads(o.threads);  // the sgemm replay's, as drift's (blas_reference.h)
  std::vector<TorchFigures> pytorch;
  if (!o.pytorch.empty()) pytorch = read_pytorch(o.pytorch, o.threads);
  // The corpus, when a selected model reads text, is checked before any output (prepare_run would
  // name it only at the first text model).
  bool text = false;
  for (const auto& bm : kModels)
    text = text || (selected(o.models, bm.name) && nlohmann::json::parse(bm.model_json)["kind"] != "proxy");
  if (std::error_code ec; text && !fs::exists(o.data, ec))
    throw InputError("--data: " + o.data + ": no such file or directory");
  ScratchDir scratch;

  ojson rows = ojson::array();
  const double peak = fma_peak_gflops(std::min(0.2, o.min_seconds));
  if (!o.json) {
    std::printf("drift train's own loop, %d thread(s); corpus %s; ms per step between logged steps "
                "(log_every 10), CPU ms of the process; e2e: the whole command; sgemm: OpenBLAS on %d thread(s)\n",
                o.threads, o.data.c_str(), blas_threads);
    std::printf("%s\n", fma_peak_line(peak).c_str());
    if (!pytorch.empty() && !pytorch.front().blas_core.empty())
      std::printf("PyTorch's BLAS kernels: %s%s\n", pytorch.front().blas_core.c_str(),
                  narrow_kernels_note(pytorch.front().blas_core).c_str());
    print_header(!pytorch.empty(), o.end_to_end);
  }
  for (const auto& bm : kModels) {
    if (!selected(o.models, bm.name)) continue;
    const TorchFigures* torch = nullptr;
    for (const auto& f : pytorch)
      if (f.model == bm.name) torch = &f;
    for (const auto& bp : kPolicies) {
      if (!selected(o.policies, bp.name)) continue;
      const StepTiming t = time_training(bm, bp, o, scratch.path);
      const double n = static_cast<double>(t.steps);
      const double ms = t.wall_s / n * 1e3, cpu_ms = t.cpu_s / n * 1e3;
      const double fwd = t.phases.forward_s / n * 1e3, bwd = t.phases.backward_s / n * 1e3,
                   upd = t.phases.update_s / n * 1e3, other = std::max(0.0, ms - fwd - bwd - upd);
      const double tokens_s = static_cast<double>(t.tokens_per_step) / (ms * 1e-3);
      const ReplaySeconds replay = replay_seconds(t, kEngineSecondsPerShape);
      const ojson shapes = shape_rows(t, replay);
      double mm_s = 0;
      for (const auto& sh : t.matmuls) mm_s += sh.seconds;
      const double mm_ms = mm_s / n * 1e3;
      const double engine_ms = std::accumulate(replay.engine.begin(), replay.engine.end(), 0.0) / n * 1e3;
      const double sgemm_ms = std::accumulate(replay.sgemm.begin(), replay.sgemm.end(), 0.0) / n * 1e3;
      // The step's matmul work, and its time at the core's multiply-add peak on every thread (each
      // thread on a core of its own): no product runs faster than one multiply in a lane, so where
      // each takes one (bp.product_per_multiply) no build of drift makes these products in less.
      double gflop = 0;
      for (const auto& sh : t.matmuls) gflop += 2e-9 * static_cast<double>(sh.m * sh.k * sh.n * sh.calls);
      gflop /= n;
      const double peak_mm_ms = bp.product_per_multiply ? gflop / (peak * o.threads) * 1e3 : 0;
      ojson row = {{"model", bm.name},
                   {"policy", bp.name},
                   {"threads", o.threads},
                   {"steps", t.steps},
                   {"ms_per_step", ms},
                   {"steps_per_s", 1e3 / ms},
                   {"cpu_ms_per_step", cpu_ms},
                   {"forward_ms", fwd},
                   {"backward_ms", bwd},
                   {"update_ms", upd},
                   {"other_ms", other},
                   {"tokens_per_step", t.tokens_per_step},
                   {"tokens_per_s", tokens_s},
                   {"matmul_ms", mm_ms},
                   {"engine_matmul_ms", engine_ms},
                   {"matmul_efficiency", engine_ms / mm_ms},
                   {"fma_peak_gflops", peak},
                   {"matmul_gflop_per_step", gflop}};
      if (peak_mm_ms > 0) row["peak_matmul_ms"] = peak_mm_ms;
      if (sgemm_ms > 0) {
        row["sgemm_matmul_ms"] = sgemm_ms;
        row["sgemm_threads"] = blas_threads;
      }
      EndToEnd e;
      if (o.end_to_end) {
        e = time_command(bm, bp, o, scratch.path);
        const double tokens = static_cast<double>(e.steps * t.tokens_per_step);
        row["e2e_steps"] = e.steps;
        row["e2e_wall_s"] = e.wall_s;
        row["e2e_cpu_s"] = e.cpu_s;
        row["e2e_tokens_per_s"] = tokens / e.wall_s;
      }
      const double ratio = torch ? torch->ms / ms : 0, cpu_ratio = torch ? torch->cpu_ms / cpu_ms : 0;
      if (torch) {
        row["pytorch_ms_per_step"] = torch->ms;
        row["pytorch_cpu_ms_per_step"] = torch->cpu_ms;
        if (!torch->blas_core.empty()) row["pytorch_blas_core"] = torch->blas_core;
        row["speed_vs_pytorch"] = ratio;
        row["cpu_speed_vs_pytorch"] = cpu_ratio;
        row["target"] = bp.target;
        row["target_met"] = ratio >= bp.target;
        if (sgemm_ms > 0) row["bound_vs_pytorch"] = torch->ms / sgemm_ms;
        if (peak_mm_ms > 0) row["peak_bound_vs_pytorch"] = torch->ms / peak_mm_ms;
      }
      row["routes"] = t.routes;
      row["matmul_shapes"] = shapes;
      row["config"] = bench_config(bm, bp, o, o.e2e_steps ? o.e2e_steps : bm.e2e_steps, "runs/bench");
      rows.push_back(row);
      if (o.json) continue;
      std::printf("%-11s %-10s %5zu %8.3f %8.3f %7.3f %7.3f %7.3f %7.3f %8.0f %8.3f %8.3f %5.2f %8.3f", bm.name,
                  bp.name, t.steps, ms, cpu_ms, fwd, bwd, upd, other, tokens_s, mm_ms, engine_ms, engine_ms / mm_ms,
                  sgemm_ms);
      if (o.end_to_end) std::printf(" %9.0f", row["e2e_tokens_per_s"].get<double>());
      if (torch) {
        std::printf(" %8.3f %8.3f %7.2fx %7.2fx %5.2fx %-3s %6.2fx", torch->ms, torch->cpu_ms, ratio, cpu_ratio,
                    bp.target, ratio >= bp.target ? "yes" : "NO", sgemm_ms > 0 ? torch->ms / sgemm_ms : 0.0);
        if (peak_mm_ms > 0)
          std::printf(" %7.2fx", torch->ms / peak_mm_ms);
        else
          std::printf(" %8s", "-");
      } else if (!pytorch.empty()) {
        std::printf(" %9s", "(no row)");
      }
      std::printf("\n");
      if (o.shapes) print_shapes(shapes);
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
      "The speed of `drift train` itself: ms per step of its training loop (with its telemetry and metrics lines) "
      "and tokens/s of the whole command, for the mlp, attn, proxy and proxy_study models under fp32 and mxfp8_e4m3");
  cmd->add_option("--steps", o->steps, "Timed steps per model and policy (default: as many as fit in --min-seconds, at least 5)");
  cmd->add_option("--min-seconds", o->min_seconds, "Minimum timed seconds per measurement when --steps is not given")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "OpenMP threads (give PyTorch the same: reference_pytorch.py --threads)")
      ->capture_default_str();
  cmd->add_option("--data", o->data, "Corpus the text models' batches are drawn from")->capture_default_str();
  cmd->add_option("--models", o->models, "Models to time (default all)")
      ->check(CLI::IsMember({"mlp", "attn", "proxy", "proxy_study"}));
  cmd->add_option("--policies", o->policies, "Policies to time (default both)")
      ->check(CLI::IsMember({"fp32", "mxfp8_e4m3"}));
  cmd->add_option("--e2e-steps", o->e2e_steps,
                  "Steps of the end-to-end `drift train` run (default per model: mlp 300, attn 30, proxy 300, "
                  "proxy_study 20)");
  cmd->add_flag("!--no-e2e", o->end_to_end, "Skip the end-to-end `drift train` command");
  cmd->add_option("--pytorch", o->pytorch,
                  "JSON from `scripts/reference_pytorch.py --bench --json`: adds PyTorch's ms/step, drift's speed as a "
                  "ratio to it and the targets (fp32 >= 2x, mxfp8 >= 1x), and two bounds on that ratio: PyTorch's step over "
                  "sgemm's time for the step's matmuls (bound) and, under fp32, over their time at this core's "
                  "multiply-add peak (pk bound: no build of drift could pass it on this machine now)");
  cmd->add_flag("--shapes", o->shapes,
                "Under each row, its matmuls per site and shape: ms per step in the step, in the engine alone and in "
                "sgemm (the JSON rows always hold them, as matmul_shapes)");
  cmd->add_flag("--json", o->json, "Print JSON rows instead of a table");
  cmd->callback([o] { run_bench_train(*o); });
}

}  // namespace drift::cli
