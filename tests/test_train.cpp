// The training layer: config parsing and overrides, the rule cascade, data splits and batch
// draws, the learning-rate schedule, optimizers (hand-derived updates) and divergence detection.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "arith/catalogue.h"
#include "io/npy.h"
#include "policy/site_rules.h"
#include "train/config.h"
#include "train/data.h"
#include "train/optimizer.h"
#include "train/trainer.h"

using namespace drift;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string error_path(const json& j) {
  try {
    parse_run_config(j);
  } catch (const ConfigError& e) {
    return e.path;
  }
  return "(no error)";
}

struct TempDir {
  fs::path dir;
  TempDir() {
    static int n = 0;
    dir = fs::temp_directory_path() / ("drift_train_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream((dir / name).string(), std::ios::binary) << text;
    return (dir / name).string();
  }
};

}  // namespace

TEST_CASE("config: defaults, errors name the JSON path, the resolved config reads back") {
  const RunConfig d = parse_run_config(json::object());
  CHECK(d.model.kind == "mlp");
  CHECK(d.train.optimizer == "adamw");
  CHECK(d.run_dir() == "runs/run/seed0");
  CHECK(error_path(json{{"train", {{"lrr", 1}}}}) == "train.lrr");
  CHECK(error_path(json{{"train", {{"lr", "big"}}}}) == "train.lr");
  CHECK(error_path(json{{"train", {{"lr", -1}}}}) == "train.lr");
  CHECK(error_path(json{{"train", {{"batch", 2.5}}}}) == "train.batch");
  CHECK(error_path(json{{"seed", -1}}) == "seed");
  CHECK(error_path(json{{"model", {{"kind", "attn"}, {"d_model", 10}, {"heads", 4}}}}) == "model.heads");
  CHECK(error_path(json{{"precision", {{"matmul", json::array({{{"preset", "mxfp9"}}})}}}}) == "(no error)");
  CHECK(error_path(json{{"precision", {{"matmul", json::array({{{"match", {{"layer", 3}}}}})}}}}) ==
        "precision.matmul[0].match.layer");
  CHECK(error_path(json{{"precision", {{"elementwise", json::array({1})}}}}) == "precision.elementwise[0]");
  CHECK(error_path(json{{"precision", {{"schedule", json::array({{{"step", 5}, {"matmul", json::array()}},
                                                                  {{"step", 5}, {"matmul", json::array()}}})}}}}) ==
        "precision.schedule[1].step");
  RunConfig c = parse_run_config(json::parse(R"({"seed": 5, "model": {"kind": "attn", "layers": 1},
      "train": {"lr": 0.01, "optimizer": "sgd"}, "precision": {"matmul": "bf16"}, "output": {"name": "x"}})"));
  CHECK(c.run_dir() == "runs/x/seed5");
  CHECK(c.precision.matmul == json::parse(R"([{"preset": "bf16"}])"));
  json resolved = json::parse(resolved_config_json(c).dump());
  resolved.erase("version");
  const RunConfig again = parse_run_config(resolved);
  CHECK(json::parse(resolved_config_json(again).dump()) == json::parse(resolved_config_json(c).dump()));
}

TEST_CASE("config: --set paths create objects, index lists, and parse values as JSON else strings") {
  json j = json::parse(R"({"precision": {"matmul": [{"preset": "fp32"}]}})");
  apply_set(j, "train.lr=0.5");
  apply_set(j, "model.kind=attn");
  apply_set(j, "precision.matmul.0.preset=\"bf16\"");
  apply_set(j, "data.path=some file.txt");
  CHECK(j["train"]["lr"] == 0.5);
  CHECK(j["model"]["kind"] == "attn");
  CHECK(j["precision"]["matmul"][0]["preset"] == "bf16");
  CHECK(j["data"]["path"] == "some file.txt");
  CHECK_THROWS_AS(apply_set(j, "precision.matmul.3.preset=x"), ConfigError);
  CHECK_THROWS_AS(apply_set(j, "noequals"), ConfigError);
  CHECK_THROWS_AS(apply_set(j, "train.lr.x=1"), ConfigError);
}

TEST_CASE("rules: later rules win, match by layer glob, role and class; operand hits that class only") {
  MatmulSites s;
  const LinearSites h = s.add_linear("hidden0");
  const LinearSites head = s.add_linear("head");
  const json rules = json::parse(R"([
      {"preset": "bf16"},
      {"match": {"layer": "hid*", "role": "forward"}, "preset": "mxfp8_e4m3"},
      {"match": {"class": "gradient"}, "operand": {"format": "fp8_e5m2"}},
      {"match": {"layer": "head"}, "output": {"format": "bf16"}}])");
  resolve_sites(rules, "precision.matmul", s);
  const auto& v = s.sites();
  CHECK(format_name(v[h.fwd].policy.a.format) == "fp8_e4m3");
  CHECK(v[h.fwd].policy.a.scaling.kind == ScaleKind::block);
  CHECK(format_name(v[h.gi].policy.a.format) == "fp8_e5m2");  // the gradient operand of dY·Wᵀ
  CHECK(format_name(v[h.gi].policy.b.format) == "bf16");      // the weight keeps bf16
  CHECK(format_name(v[h.gw].policy.a.format) == "bf16");      // activation
  CHECK(format_name(v[h.gw].policy.b.format) == "fp8_e5m2");  // gradient
  CHECK(format_name(v[head.fwd].policy.a.format) == "bf16");
  CHECK(format_name(v[head.fwd].policy.out_format) == "bf16");
  CHECK(format_name(v[h.fwd].policy.out_format) == "fp32");
  // Errors carry the rule's path; a rule matching no site is still checked.
  try {
    resolve_sites(json::parse(R"([{"match": {"layer": "nothing"}, "a": {"format": "fp99"}}])"), "precision.matmul", s);
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.path == "precision.matmul[0].a.format");
  }
  CHECK_THROWS_AS(check_matmul_rules(json::parse(R"([{"operand": "bf16"}])"), "p"), ConfigError);
}

TEST_CASE("data: byte and char tokenizers, the split, and batch draws fixed by (seed, step)") {
  TempDir t;
  std::string text;
  for (int i = 0; i < 50; ++i) text += "the quick brown fox " + std::to_string(i) + "\n";
  const std::string f = t.write("a.txt", text);
  DataConfig d;
  d.path = f;
  const Corpus c = load_corpus(d, 8);
  CHECK(c.tok.vocab() == 256);
  CHECK(c.train.size() + c.val.size() == text.size());
  CHECK(c.val.size() == text.size() / 10);
  CHECK(c.train[0] == 't');
  CHECK(c.val.back() == '\n');
  d.tokenizer = "char";
  const Corpus cc = load_corpus(d, 8);
  CHECK(cc.tok.vocab() == 27);  // 15 letters (t h e q u i c k b r o w n f x), space, newline, 10 digits
  std::vector<int32_t> w1(4 * 9), w2(4 * 9), w3(4 * 9);
  sample_windows(c.train, 8, 4, 1, kTrainDataStream, 7, w1.data());
  sample_windows(c.train, 8, 4, 1, kTrainDataStream, 7, w2.data());
  sample_windows(c.train, 8, 4, 1, kTrainDataStream, 8, w3.data());
  CHECK(w1 == w2);
  CHECK(w1 != w3);
  // Each window is a contiguous run of the train split.
  for (size_t i = 0; i < 4; ++i) {
    const std::string win(w1.begin() + static_cast<long>(i * 9), w1.begin() + static_cast<long>(i * 9 + 9));
    CHECK(text.substr(0, c.train.size()).find(win) != std::string::npos);
  }
  // Errors name the file.
  DataConfig bad;
  bad.path = t.write("bad.txt", std::string("ok \xff\xfe", 5));
  CHECK_THROWS_WITH_AS(load_corpus(bad, 2), doctest::Contains("bad.txt: not UTF-8"), io::IoError);
  bad.path = t.write("e.txt", "");
  CHECK_THROWS_WITH_AS(load_corpus(bad, 2), doctest::Contains("e.txt: empty file"), io::IoError);
  bad.path = (t.dir / "none.txt").string();
  CHECK_THROWS_WITH_AS(load_corpus(bad, 2), doctest::Contains("none.txt: no such file"), io::IoError);
  bad.path = f;
  CHECK_THROWS_WITH_AS(load_corpus(bad, 1000), doctest::Contains("too short"), io::IoError);
}

TEST_CASE("learning rate: warmup, then cosine / linear decay to min_lr_frac") {
  TrainConfig t;
  t.lr = 1.0;
  t.steps = 11;
  t.warmup = 2;
  t.min_lr_frac = 0.1;
  CHECK(learning_rate(t, 0) == doctest::Approx(0.5));
  CHECK(learning_rate(t, 1) == doctest::Approx(1.0));
  CHECK(learning_rate(t, 2) == doctest::Approx(1.0));
  CHECK(learning_rate(t, 10) == doctest::Approx(0.1));
  CHECK(learning_rate(t, 6) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 4.0 / 8.0))));
  t.decay = "linear";
  CHECK(learning_rate(t, 6) == doctest::Approx(1.0 - 0.9 * 0.5));
  t.decay = "constant";
  CHECK(learning_rate(t, 10) == 1.0);
}

TEST_CASE("optimizers: hand-derived AdamW and SGD-momentum updates") {
  ParamTable tb;
  tb.add("w", {2});
  tb.add("b", {1}, false);
  TrainConfig t;
  t.weight_decay = 0.5;
  SUBCASE("adamw: the first step moves each weight by lr * (sign(g) + wd * p)") {
    std::vector<float> p = {1.0f, -2.0f, 3.0f}, g = {0.3f, -0.001f, 4.0f};
    Optimizer o(t, PrecisionConfig{}, tb);
    o.step(tb, p.data(), g.data(), 0.1, 1.0, 0, 0);
    CHECK(p[0] == doctest::Approx(1.0 - 0.1 * (1.0 + 0.5 * 1.0)).epsilon(1e-6));
    CHECK(p[1] == doctest::Approx(-2.0 - 0.1 * (-1.0 + 0.5 * -2.0)).epsilon(1e-4));
    CHECK(p[2] == doctest::Approx(3.0 - 0.1 * 1.0).epsilon(1e-6));  // bias: no decay
  }
  SUBCASE("sgd with momentum and a clip factor") {
    t.optimizer = "sgd";
    t.momentum = 0.5;
    t.weight_decay = 0;
    std::vector<float> p = {1.0f, 0.0f, 0.0f}, g = {2.0f, 0.0f, 0.0f};
    Optimizer o(t, PrecisionConfig{}, tb);
    o.step(tb, p.data(), g.data(), 0.1, 0.5, 0, 0);  // g' = 1: m = 1, p = 0.9
    CHECK(p[0] == doctest::Approx(0.9f));
    o.step(tb, p.data(), g.data(), 0.1, 0.5, 0, 0);  // m = 0.5 + 1 = 1.5, p = 0.75
    CHECK(p[0] == doctest::Approx(0.75f));
  }
}

TEST_CASE("trainer: a tiny run learns, a blown-up one is recorded as diverged with its step and reason") {
  TempDir t;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcabcabd ";
  RunConfig c = parse_run_config(json::object());
  c.data.path = t.write("t.txt", text);
  c.model.context = 4;
  c.model.embed = 4;
  c.model.hidden = 16;
  c.train.steps = 60;
  c.train.batch = 16;
  c.train.lr = 0.03;
  c.train.warmup = 0;
  c.train.eval_every = 30;
  c.train.eval_batches = 2;
  c.output.dir = (t.dir / "ok").string();
  PreparedRun r = prepare_run(c);
  const RunSummary s = train(r, TrainOptions{}, {});
  CHECK_FALSE(s.diverged);
  CHECK(s.steps_completed == 60);
  CHECK(s.final_val_loss < 0.5 * std::log(256.0));  // a 4-symbol periodic text is easy
  CHECK(fs::exists(t.dir / "ok" / "summary.json"));
  const json sj = json::parse(std::ifstream((t.dir / "ok" / "summary.json").string()));
  CHECK(sj["diverged"] == false);
  CHECK(sj["divergence_step"].is_null());

  c.train.optimizer = "sgd";
  c.train.lr = 1e6;
  c.train.grad_clip = 0;
  c.divergence.after_step = 0;
  c.output.dir = (t.dir / "bad").string();
  PreparedRun r2 = prepare_run(c);
  const RunSummary s2 = train(r2, TrainOptions{}, {});
  CHECK(s2.diverged);
  CHECK(s2.divergence_step >= 1);
  CHECK(s2.steps_completed == static_cast<uint64_t>(s2.divergence_step));  // stopped before that step's update
  CHECK(!s2.reason.empty());
  const json sj2 = json::parse(std::ifstream((t.dir / "bad" / "summary.json").string()));
  CHECK(sj2["divergence_step"] == s2.divergence_step);
}
