// The proxy model's paper forms (model/proxy.cpp; Su et al. 2025's student_teacher_v3): the bare
// residual student, fc without bias, the plain-MLP teacher, torch's uniform init and label noise,
// each against a computation written here from the definitions (the draws' stream layout and plain
// double loops), and the config keys that select them.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "arith/random.h"
#include "model/init.h"
#include "model/model.h"
#include "policy/matmul_json.h"
#include "train/config.h"
#include "train/data.h"
#include "train/optimizer.h"
#include "train/checkpoint.h"
#include "train/train_step.h"
#include "train/trainer.h"
#include "run_files.h"
#include "train_checks.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_proxy_forms {

using namespace drift;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kTeacherStream = 0x7eac0000;  // + the teacher weight's index (model/proxy.cpp)

ModelConfig paper_proxy() {
  ModelConfig c;
  c.kind = "proxy";
  c.d_model = c.input_dim = c.output_dim = 6;
  c.layers = 2;
  c.mlp_mult = 2;
  c.student = "bare";
  c.fc_bias = false;
  c.teacher = "mlp";
  c.teacher_width = 5;
  c.teacher_depth = 3;
  c.init = "torch_uniform";
  c.teacher_seed = 3;
  c.label_noise = 0.25;
  return c;
}

template <typename T>
void fp64_sites(Model<T>& m) {
  const MatmulPolicy fp64 = parse_matmul_policy(json::parse(R"({"a": {"format": "fp64"}, "b": {"format": "fp64"},
      "product": {"format": "fp64"}, "inner": {"format": "fp64"}, "outer": {"format": "fp64"}, "output": {"format": "fp64"}})"));
  for (auto& s : m.sites.sites()) s.policy = fp64;
}

}  // namespace

TEST_CASE("uniform_draw: (2w + 1) / 2^32 - 1 of one counter-based word, inside (-1, 1), variance 1/3") {
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = uniform_draw(9, 4, i);
    CHECK(u == (2.0 * random_u32(9, 4, i) + 1.0) / 4294967296.0 - 1.0);
    CHECK(std::fabs(u) < 1.0);
    sum += u;
    sq += u * u;
  }
  CHECK(std::fabs(sum / n) < 0.005);                 // standard error of the mean 0.0013
  CHECK(std::fabs(sq / n - 1.0 / 3.0) < 0.003);      // standard error 0.0007
}

TEST_CASE("proxy, paper form: parameters and sites; torch-uniform init draws U(-1/sqrt(fan_in), 1/sqrt(fan_in))") {
  const ModelConfig c = paper_proxy();
  auto m = make_model<float>(c, 11);
  std::vector<std::string> names;
  for (const auto& p : m->table.specs) names.push_back(p.name);
  // No input layer, no final LayerNorm, no head, and fc has no bias.
  CHECK(names == std::vector<std::string>{"block0.ln.w", "block0.ln.b", "block0.mlp.fc.w", "block0.mlp.proj.w",
                                          "block0.mlp.proj.b", "block1.ln.w", "block1.ln.b", "block1.mlp.fc.w",
                                          "block1.mlp.proj.w", "block1.mlp.proj.b"});
  std::vector<std::string> sites;
  for (const auto& s : m->sites.sites()) sites.push_back(s.name());
  CHECK(sites == std::vector<std::string>{"block0.mlp.fc.forward", "block0.mlp.fc.grad_input", "block0.mlp.fc.grad_weight",
                                          "block0.mlp.proj.forward", "block0.mlp.proj.grad_input",
                                          "block0.mlp.proj.grad_weight", "block1.mlp.fc.forward",
                                          "block1.mlp.fc.grad_input", "block1.mlp.fc.grad_weight",
                                          "block1.mlp.proj.forward", "block1.mlp.proj.grad_input",
                                          "block1.mlp.proj.grad_weight"});
  // Element i of tensor k is float(bound * uniform_draw(seed, kInitStream + k, i)), bound 1/sqrt(fan_in)
  // of its layer (fc: D = 6; proj and its bias: F = 12); γ = 1, β = 0.
  for (size_t k = 0; k < m->table.specs.size(); ++k) {
    const ParamSpec& p = m->table.specs[k];
    const float* x = m->params.data() + p.offset;
    INFO(p.name);
    const bool fc = p.name.find(".fc.") != std::string::npos, proj = p.name.find(".proj.") != std::string::npos;
    for (size_t i = 0; i < p.size; ++i) {
      if (!fc && !proj) {
        CHECK(x[i] == (p.name.back() == 'w' ? 1.0f : 0.0f));
        continue;
      }
      const double bound = 1.0 / std::sqrt(fc ? 6.0 : 12.0);
      CHECK(x[i] == static_cast<float>(bound * uniform_draw(11, model_init::kInitStream + k, i)));
      CHECK(std::fabs(x[i]) < bound);
    }
  }
  // model.init_scale multiplies the bound.
  ModelConfig scaled = c;
  scaled.init_scale = 0.5;
  auto s = make_model<float>(scaled, 11);
  CHECK(s->param("block1.mlp.proj.w")[3] ==
        static_cast<float>(0.5 / std::sqrt(12.0) * uniform_draw(11, model_init::kInitStream + 8, 3)));
  // The default init is unchanged: N(0, 1/fan_in) weights, zero biases (tensor 4 of the projected
  // student is block0.mlp.fc.w after input.w, input.b, block0.ln.w, block0.ln.b).
  ModelConfig d;
  d.kind = "proxy";
  auto dm = make_model<float>(d, 11);
  CHECK(dm->table.specs[4].name == "block0.mlp.fc.w");
  CHECK(dm->param("block0.mlp.fc.w")[7] ==
        static_cast<float>(1.0 / std::sqrt(64.0) * normal_draw(11, model_init::kInitStream + 4, 7)));
  CHECK(dm->param("block0.mlp.fc.b")[7] == 0.0f);
}

TEST_CASE("proxy, paper form: y_hat = the residual stream; targets = the mlp teacher, plus noise only with a noise stream") {
  const ModelConfig c = paper_proxy();
  auto m = make_model<double>(c, 11);
  fp64_sites(*m);
  // With every proj weight and bias zero each block adds nothing: the prediction is x itself.
  for (size_t l = 0; l < c.layers; ++l) {
    const std::string p = "block" + std::to_string(l) + ".mlp.proj.";
    std::fill_n(m->param(p + "w"), 6 * 12, 0.0);
    std::fill_n(m->param(p + "b"), 6, 0.0);
  }
  const size_t b = 5, D = 6, W = 5, stream = 4, draw = 7, noise_stream = 9;
  std::vector<double> x(b * D);
  for (size_t i = 0; i < b * D; ++i) x[i] = normal_draw(11, stream, draw * b * D + i);
  // The teacher from its definition: 3 blocks h <- tanh(h W1^T) W2^T, W1 (5, 6) and W2 (6, 5), weight
  // k's element (r, j) = draw(teacher_seed, kTeacherStream + k, r * fan_in + j) / sqrt(fan_in), the
  // draw uniform_draw (torch_uniform) or normal_draw (normal).
  auto teacher = [&](double (*unit)(uint64_t, uint64_t, uint64_t)) {
    auto w = [&](size_t k, size_t r, size_t j, size_t fan_in) {
      return unit(3, kTeacherStream + k, r * fan_in + j) / std::sqrt(static_cast<double>(fan_in));
    };
    std::vector<double> y(b * D);
    for (size_t n = 0; n < b; ++n) {
      std::vector<double> h(x.begin() + n * D, x.begin() + (n + 1) * D);
      for (size_t l = 0; l < 3; ++l) {
        std::vector<double> v(W), out(D, 0.0);
        for (size_t r = 0; r < W; ++r) {
          double u = 0;
          for (size_t j = 0; j < D; ++j) u += h[j] * w(2 * l, r, j, D);
          v[r] = std::tanh(u);
        }
        for (size_t r = 0; r < D; ++r)
          for (size_t j = 0; j < W; ++j) out[r] += v[j] * w(2 * l + 1, r, j, W);
        h = out;
      }
      std::copy(h.begin(), h.end(), y.begin() + n * D);
    }
    return y;
  };
  const std::vector<double> y = teacher(uniform_draw);
  auto mse = [&](double noise_std) {
    double s = 0;
    for (size_t i = 0; i < b * D; ++i) {
      const double target = y[i] + noise_std * normal_draw(11, noise_stream, draw * b * D + i);
      s += (x[i] - target) * (x[i] - target);
    }
    return s / static_cast<double>(b * D);
  };
  const double clean = m->forward_generated(stream, draw, b);
  CHECK(clean == doctest::Approx(mse(0)).epsilon(1e-12));
  CHECK(m->last_logits() == x);
  const double noisy = m->forward_generated(stream, draw, b, noise_stream);
  CHECK(noisy == doctest::Approx(mse(0.25)).epsilon(1e-12));
  CHECK(std::fabs(noisy - clean) > 1e-3);
  // Noise 0 with a noise stream: the clean targets, bit for bit.
  ModelConfig quiet = c;
  quiet.label_noise = 0;
  auto q = make_model<double>(quiet, 11);
  fp64_sites(*q);
  q->params = m->params;
  CHECK(q->forward_generated(stream, draw, b, noise_stream) == clean);
  // The same teacher under normal init: N(0, 1/fan_in) from the same streams.
  ModelConfig normal = c;
  normal.init = "normal";
  normal.label_noise = 0;
  auto nm = make_model<double>(normal, 11);
  fp64_sites(*nm);
  for (size_t l = 0; l < c.layers; ++l) std::fill_n(nm->param("block" + std::to_string(l) + ".mlp.proj.w"), 6 * 12, 0.0);
  for (size_t l = 0; l < c.layers; ++l) std::fill_n(nm->param("block" + std::to_string(l) + ".mlp.proj.b"), 6, 0.0);
  const std::vector<double> yn = teacher(normal_draw);
  double s = 0;
  for (size_t i = 0; i < b * D; ++i) s += (x[i] - yn[i]) * (x[i] - yn[i]);
  CHECK(nm->forward_generated(stream, draw, b) == doctest::Approx(s / (b * D)).epsilon(1e-12));
}

TEST_CASE("proxy, paper form: the training step's batch carries label noise, the validation batch does not") {
  RunConfig rc;
  rc.model = paper_proxy();
  rc.train.batch = 4;
  auto m = make_model<float>(rc.model, 2);
  auto ref = make_model<float>(rc.model, 2);
  const Corpus none;
  TrainStep step(rc, *m, none);
  CHECK(step.forward_batch({}, kTrainDataStream, 3) == ref->forward_generated(kTrainDataStream, 3, 4, kLabelNoiseStream));
  CHECK(step.forward_batch({}, kValDataStream, 1) == ref->forward_generated(kValDataStream, 1, 4));
  CHECK(ref->forward_generated(kTrainDataStream, 3, 4) != ref->forward_generated(kTrainDataStream, 3, 4, kLabelNoiseStream));
}

TEST_CASE("config: the proxy's paper-form keys, their checks and defaults") {
  const RunConfig d = parse_run_config(json::object());
  CHECK(d.model.student == "projected");
  CHECK(d.model.fc_bias);
  CHECK(d.model.teacher == "projected");
  CHECK(d.model.init == "normal");
  CHECK(d.model.label_noise == 0);
  // A bare student takes input_dim and output_dim from d_model.
  const RunConfig bare = parse_run_config(json::parse(R"({"model": {"kind": "proxy", "student": "bare", "d_model": 48,
      "fc_bias": false, "teacher": "mlp", "teacher_width": 96, "teacher_depth": 2, "init": "torch_uniform",
      "label_noise": 0.005}})"));
  CHECK(bare.model.input_dim == 48);
  CHECK(bare.model.output_dim == 48);
  CHECK_FALSE(bare.model.fc_bias);
  CHECK(bare.model.teacher_width == 96);
  CHECK(bare.model.teacher_depth == 2);
  CHECK(bare.model.label_noise == 0.005);
  const RunConfig again = parse_run_config(json::parse(resolved_config_json(bare).dump()));
  CHECK(json::parse(resolved_config_json(again).dump()) == json::parse(resolved_config_json(bare).dump()));
  // Errors name the key.
  CHECK(test::config_error_path(json::parse(R"({"model": {"student": "bare"}})")) == "model.student");  // mlp model
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "attn", "label_noise": 0.1}})")) == "model.label_noise");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "mlp", "fc_bias": false}})")) == "model.fc_bias");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "student": "wide"}})")) == "model.student");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "init": "xavier"}})")) == "model.init");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "label_noise": -0.1}})")) == "model.label_noise");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "student": "bare", "d_model": 8, "input_dim": 6}})")) ==
        "model.input_dim");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "student": "bare", "d_model": 8, "output_dim": 8}})")) ==
        "(no error)");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "teacher": "mlp", "input_dim": 8, "output_dim": 4}})")) ==
        "model.output_dim");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "teacher_width": 32}})")) == "model.teacher_width");
  CHECK(test::config_error_path(json::parse(R"({"model": {"kind": "proxy", "teacher_depth": 2}})")) == "model.teacher_depth");
  // The model itself refuses impossible shapes (for callers that skip the config layer).
  ModelConfig wrong = paper_proxy();
  wrong.output_dim = 5;
  CHECK_THROWS_AS(make_model<float>(wrong, 1), std::invalid_argument);
}

TEST_CASE("optimizer: train.adam_one_minus_beta fp64 uses float(1 - beta) as torch.optim.Adam does; fp32 1.0f - float(beta)") {
  for (const char* mode : {"fp32", "fp64"}) {
    CAPTURE(mode);
    RunConfig rc = parse_run_config(json{{"train", {{"beta2", 0.999}, {"adam_one_minus_beta", mode}}}});
    ParamTable tb;
    tb.add("w", {1});
    Optimizer opt(rc.train, rc.precision, tb);
    float p = 0.5f;
    const float g[2] = {0.25f, -0.125f};
    // Two steps by hand in float: m = b1 m + c1' g, v = b2 v + c2' g^2, p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
    const bool fp64 = std::string(mode) == "fp64";
    const float b1 = 0.9f, b2 = 0.999f, lr = 3e-3f, eps = 1e-8f;
    const float c1 = fp64 ? static_cast<float>(1.0 - 0.9) : 1.0f - b1, c2 = fp64 ? static_cast<float>(1.0 - 0.999) : 1.0f - b2;
    float m = 0, v = 0, want = p;
    for (int t = 1; t <= 2; ++t) {
      opt.step(tb, &p, &g[t - 1], 3e-3, 1.0, 0, t - 1);
      m = b1 * m + c1 * g[t - 1];
      v = b2 * v + c2 * (g[t - 1] * g[t - 1]);
      const float mhat = m / static_cast<float>(1.0 - std::pow(0.9, t)), vhat = v / static_cast<float>(1.0 - std::pow(0.999, t));
      want = want - lr * (mhat / (std::sqrt(vhat) + eps));
      CHECK(p == want);
    }
  }
  // The two complements of 0.999 differ: 0.999 is not a float.
  CHECK(static_cast<float>(1.0 - 0.999) != 1.0f - 0.999f);
  CHECK(test::config_error_path(json{{"train", {{"adam_one_minus_beta", "fp16"}}}}) == "train.adam_one_minus_beta");
}

TEST_CASE("resume: a run written before the proxy-form and adam_one_minus_beta keys existed resumes; a changed one does not") {
  const fs::path dir = fs::temp_directory_path() / ("drift_proxy_forms_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  RunConfig c = parse_run_config(json::parse(R"({"seed": 3, "model": {"kind": "proxy", "d_model": 8, "layers": 1,
      "input_dim": 4, "output_dim": 2}, "train": {"steps": 6, "batch": 4, "eval_every": 3, "eval_batches": 1, "log_every": 1}})"));
  c.output.dir = (dir / "whole").string();
  {
    PreparedRun r = prepare_run(c);
    train(r, TrainOptions{}, {});
  }
  // The config.json an older drift wrote: none of the new keys. No checkpoint yet (killed early).
  json old = json::parse(test::slurp(dir / "whole" / "config.json"));
  for (const char* k : {"student", "fc_bias", "teacher", "teacher_width", "teacher_depth", "init", "label_noise"})
    REQUIRE(old["model"].erase(k) == 1);
  REQUIRE(old["train"].erase("adam_one_minus_beta") == 1);
  fs::create_directories(dir / "old");
  std::ofstream((dir / "old" / "config.json").string()) << old.dump(2);
  RunConfig again = c;
  again.output.dir = (dir / "old").string();
  CHECK(test::resume_error(again) == "(no CheckpointError)");
  CHECK(test::no_timing(test::slurp(dir / "old" / "metrics.jsonl")) ==
        test::no_timing(test::slurp(dir / "whole" / "metrics.jsonl")));
  // A new key away from its default is another run.
  fs::create_directories(dir / "noisy");
  std::ofstream((dir / "noisy" / "config.json").string()) << old.dump(2);
  RunConfig noisy = c;
  noisy.model.label_noise = 0.1;
  noisy.output.dir = (dir / "noisy").string();
  CHECK(test::resume_error(noisy).find("model.label_noise") != std::string::npos);
  fs::remove_all(dir);
}

}  // namespace test_proxy_forms
