// The training layer: config parsing and overrides, the rule cascade, data splits and batch
// draws, the learning-rate schedule, optimizers (hand-derived updates) and divergence detection.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "io/io_error.h"
#include "io/npy.h"
#include "policy/matmul_json.h"
#include "policy/site_rules.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/data.h"
#include "train/optimizer.h"
#include "train/trainer.h"
#include "run_files.h"
#include "train_checks.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_train {

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
  CHECK(c.precision.matmul.source() == json::parse(R"([{"preset": "bf16"}])"));
  json resolved = json::parse(resolved_config_json(c).dump());  // with its "version": itself a config
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

namespace {

// UTF-8 of a code point, written out here from the encoding's definition (not drift's decoder).
std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xf0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// Every id of a split, and each of its windows a run of them starting where the window's first
// id does.
std::vector<int32_t> ids_of(const Tokens& t) {
  std::vector<int32_t> v(t.size());
  for (size_t i = 0; i < t.size(); ++i) v[i] = t[i];
  return v;
}

}  // namespace

TEST_CASE("data: a directory's files in name order, char vocabularies past 256 ids, and the ids split as the text") {
  // Code points the test chose, by file: a.txt ends without a newline (one is added), b.txt holds
  // 2-, 3- and 4-byte characters. Expected: the stream of code points of a.txt, '\n', b.txt, and the
  // char ids their ranks among the distinct ones.
  std::vector<uint32_t> a_cps, b_cps;
  for (int r = 0; r < 40; ++r)
    for (uint32_t cp : {0x61u, 0x62u, 0x20u, 0xe9u, 0x3b1u}) a_cps.push_back(cp);  // a b space é α
  for (int r = 0; r < 3; ++r)
    for (uint32_t k = 0; k < 300; ++k) b_cps.push_back(k % 3 == 0 ? 0x4e00 + k : k % 3 == 1 ? 0x1f600 + k : 0x400 + k);
  b_cps.push_back('\n');
  TempDir t;
  const fs::path dir = t.dir / "corpus";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::vector<uint32_t>& cps) {
    std::string text;
    for (uint32_t cp : cps) text += utf8_of(cp);
    std::ofstream(dir / name, std::ios::binary) << text;
    return text;
  };
  const std::string b_text = write("b.txt", b_cps), a_text = write("a.txt", a_cps);
  std::ofstream(dir / "notes.md") << "not read: not *.txt";
  std::vector<uint32_t> all = a_cps;
  all.push_back('\n');
  all.insert(all.end(), b_cps.begin(), b_cps.end());
  std::vector<uint32_t> distinct = all;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  REQUIRE(distinct.size() > 256);  // wide ids

  DataConfig d;
  d.path = dir.string();
  d.val_fraction = 0.25;
  for (const std::string tokenizer : {"char", "byte"}) {
    CAPTURE(tokenizer);
    d.tokenizer = tokenizer;
    const Corpus c = load_corpus(d, 8);
    CHECK(c.files == std::vector<std::string>{(dir / "a.txt").string(), (dir / "b.txt").string()});
    CHECK(c.bytes == a_text.size() + 1 + b_text.size());
    std::vector<int32_t> expected;
    if (tokenizer == "char") {
      CHECK(c.tok.chars == distinct);
      for (uint32_t cp : all)
        expected.push_back(static_cast<int32_t>(std::lower_bound(distinct.begin(), distinct.end(), cp) - distinct.begin()));
    } else {
      CHECK(c.tok.vocab() == 256);
      for (unsigned char ch : a_text + "\n" + b_text) expected.push_back(ch);
    }
    const size_t nval = static_cast<size_t>(static_cast<double>(expected.size()) * 0.25);
    REQUIRE(c.train.size() + c.val.size() == expected.size());
    CHECK(c.val.size() == nval);
    const std::vector<int32_t> train(expected.begin(), expected.end() - static_cast<long>(nval)),
        val(expected.end() - static_cast<long>(nval), expected.end());
    CHECK(ids_of(c.train) == train);
    CHECK(ids_of(c.val) == val);
    // A batch of windows: each the run of the split's ids from its first id's place.
    std::vector<int32_t> w(16 * 9);
    sample_windows(c.val, 8, 16, 3, kValDataStream, 5, w.data());
    for (size_t i = 0; i < 16; ++i) {
      const std::vector<int32_t> win(w.begin() + static_cast<long>(i * 9), w.begin() + static_cast<long>(i * 9 + 9));
      CHECK(std::search(val.begin(), val.end(), win.begin(), win.end()) != val.end());
    }
  }
  // A bad sequence in the second file: named, with its offset in that file.
  std::ofstream(dir / "c.txt", std::ios::binary) << std::string("ok\n\xe4\xb8", 5);
  d.tokenizer = "byte";
  CHECK_THROWS_WITH_AS(load_corpus(d, 8), doctest::Contains("c.txt: not UTF-8 text (bad byte 0xe4 at offset 3)"),
                       io::IoError);
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
  t.decay = "cosine_torch";  // CosineAnnealingLR(T_max = 9): post-warmup step k at cos(pi k / 9)
  CHECK(learning_rate(t, 1) == doctest::Approx(1.0));
  CHECK(learning_rate(t, 2) == doctest::Approx(1.0));
  CHECK(learning_rate(t, 6) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 4.0 / 9.0))));
  CHECK(learning_rate(t, 10) == doctest::Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 8.0 / 9.0))));
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

namespace {

// A small MLP on a periodic text ("abcabcabd "), writing to t.dir/out.
RunConfig tiny_run(const TempDir& t, const std::string& out) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "abcabcabd ";
  RunConfig c = parse_run_config(json::object());
  c.data.path = t.write("t.txt", text);
  c.model.context = 4;
  c.model.embed = 4;
  c.model.hidden = 16;
  c.train.steps = 30;
  c.train.batch = 8;
  c.train.eval_every = 10;
  c.train.eval_batches = 2;
  c.output.dir = (t.dir / out).string();
  return c;
}

}  // namespace

TEST_CASE("trainer: a tiny run learns, a blown-up one is recorded as diverged with its step and reason") {
  TempDir t;
  RunConfig c = tiny_run(t, "ok");
  c.train.steps = 60;
  c.train.batch = 16;
  c.train.lr = 0.03;
  c.train.warmup = 0;
  c.train.eval_every = 30;
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

namespace {

std::string error_message(const json& j) {
  try {
    parse_run_config(j);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

using test::no_timing;
using test::slurp;

// The resolved rules of `c` at every step and in every probe, on a tiny MLP's sites: the config error's path.
std::string rules_error_path(const json& j) {
  try {
    check_run_rules(parse_run_config(j));
  } catch (const ConfigError& e) {
    return e.path;
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("config: AdamW betas lie in [0, 1); \"version\" is accepted when this build reads it") {
  CHECK(error_path(json{{"train", {{"beta1", 1}}}}) == "train.beta1");
  CHECK(error_path(json{{"train", {{"beta2", 1.0}}}}) == "train.beta2");
  CHECK(error_message(json{{"train", {{"beta2", 1}}}}).find("[0, 1)") != std::string::npos);
  CHECK(error_path(json{{"train", {{"beta1", 0}, {"beta2", 0.999999}}}}) == "(no error)");
  CHECK(error_path(json{{"train", {{"momentum", 1}}}}) == "(no error)");  // (SGD: no bias correction)

  CHECK(error_path(json{{"version", DRIFT_VERSION}}) == "(no error)");
  CHECK(error_path(json{{"version", "0.1.0"}}) == "(no error)");     // an older (or the same) patch level
  CHECK(error_path(json{{"version", "99.0.0"}}) == "version");        // a release this build does not know
  CHECK(error_message(json{{"version", "99.0.0"}}).find("99.0.0") != std::string::npos);
  CHECK(error_path(json{{"version", "0.1.999"}}) == "version");      // a newer patch level
  CHECK(error_path(json{{"version", 1}}) == "version");
  CHECK(error_path(json{{"version", "one"}}) == "version");
  CHECK(error_path(json{{"versions", "0.1.0"}}) == "versions");

  // The config a run writes reads back, unchanged, as a config (version included).
  const RunConfig c = parse_run_config(json::parse(R"({"seed": 3, "train": {"beta2": 0.99}, "precision":
      {"matmul": "mxfp8_e4m3", "schedule": [{"step": 5, "matmul": [{"preset": "bf16"}]}]}, "diagnostics": {"probes": ["bf16"]}})"));
  const json written = json::parse(resolved_config_json(c).dump());
  CHECK(written.contains("version"));
  CHECK(json::parse(resolved_config_json(parse_run_config(written)).dump()) == written);

  // A config path that is a directory: a ConfigError naming it.
  TempDir t;
  try {
    load_config_file(t.dir.string());
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find(t.dir.string()) != std::string::npos);
    CHECK(std::string(e.what()).find("is a directory") != std::string::npos);
  }
}

TEST_CASE("rules: the operands' scale blocks must nest, checked at config time at every step and probe") {
  MatmulSites s;
  s.add_linear("hidden0");
  auto path_of = [&](const char* rules) {
    try {
      resolve_sites(json::parse(rules), "precision.matmul", s);
    } catch (const ConfigError& e) {
      CHECK(std::string(e.what()).find("do not nest") != std::string::npos);
      return e.path;
    }
    return std::string("(no error)");
  };
  // mxfp8_e4m3: blocks of 32 on both operands. 32 and 7 do not nest; 32 and 16 (or 64) do.
  CHECK(path_of(R"([{"preset": "mxfp8_e4m3", "b": {"scaling": {"kind": "block", "block": 7}}}])") ==
        "precision.matmul[0].b.scaling.block");
  // (The error names both blocks; it is reported at b's, whichever side the JSON changed.)
  CHECK(path_of(R"([{"preset": "mxfp8_e4m3", "a": {"scaling": {"block": 48}}}])") == "precision.matmul[0].b.scaling.block");
  CHECK(path_of(R"([{"preset": "mxfp8_e4m3"}, {"match": {"class": "weight"}, "operand": {"scaling": {"block": 5}}}])") ==
        "precision.matmul[1].operand.scaling.block");
  CHECK(path_of(R"([{"preset": "mxfp8_e4m3", "b": {"scaling": {"kind": "block", "block": 16}}}])") == "(no error)");
  CHECK(path_of(R"([{"preset": "mxfp8_e4m3", "a": {"scaling": {"block": 64}}}])") == "(no error)");
  // A block-scaled operand against a tensor-scaled one: nothing to nest.
  CHECK(path_of(R"([{"preset": "mxfp8_e4m3", "b": {"scaling": {"kind": "tensor"}}}])") == "(no error)");
  // The same policy through drift matmul's parser.
  CHECK_THROWS_AS(parse_matmul_policy(json::parse(R"({"preset": "mxfp8_e4m3", "b": {"scaling": {"block": 7}}})")),
                  ConfigError);

  // Through a whole config: precision.matmul, a schedule entry (in force only from step 40) and a
  // diagnostics probe are all resolved before a run starts.
  const json bad = json::parse(R"([{"preset": "mxfp8_e4m3", "b": {"scaling": {"kind": "block", "block": 7}}}])");
  CHECK(rules_error_path(json{{"precision", {{"matmul", bad}}}}) == "precision.matmul[0].b.scaling.block");
  CHECK(rules_error_path(json{{"precision", {{"schedule", json::array({{{"step", 40}, {"matmul", bad}}})}}}}) ==
        "precision.schedule[0].matmul[0].b.scaling.block");
  CHECK(rules_error_path(json{{"diagnostics", {{"probes", json::array({bad})}}}}) ==
        "diagnostics.probes[0][0].b.scaling.block");
  CHECK(rules_error_path(json{{"precision", {{"matmul", "mxfp8_e4m3"}}}, {"diagnostics", {{"probes", {"bf16"}}}}}) ==
        "(no error)");
  // prepare_run (drift train) refuses it before anything is written.
  TempDir t;
  RunConfig c = tiny_run(t, "run");
  c.precision.schedule = {ScheduleEntry{20, MatmulRules(bad, "precision.schedule[0].matmul"), std::nullopt}};
  CHECK_THROWS_AS(prepare_run(c), ConfigError);
  CHECK_FALSE(fs::exists(t.dir / "run"));
}

TEST_CASE("trainer: a new run clears the previous run's files; --resume before any checkpoint starts at step 0") {
  TempDir t;
  RunConfig c = tiny_run(t, "run");
  c.train.checkpoint_every = 10;
  c.train.keep_checkpoints = true;
  c.diagnostics.every = 10;
  {
    PreparedRun r = prepare_run(c);
    train(r, TrainOptions{}, {});
  }
  const fs::path dir = t.dir / "run";
  for (const char* f : {"config.json", "metrics.jsonl", "summary.json", "checkpoint.bin", "checkpoint-10.bin",
                        "checkpoint-20.bin", "diag.jsonl"})
    CHECK_MESSAGE(fs::exists(dir / f), f);
  fs::create_directories(dir / "init");
  t.write("run/.summary.json.tmp.abc123", "x");
  t.write("run/notes.txt", "mine");
  t.write("run/checkpoint-old.bin", "not a step");
  t.write("run/provenance.json", "{}");  // drift train writes it (the library's train() does not)
  // What a new run removes: the run's own files only (sorted), and never the `keep` file.
  std::vector<std::string> owned = previous_run_files(dir.string());
  for (auto& p : owned) p = fs::path(p).filename().string();
  CHECK(owned == std::vector<std::string>{".summary.json.tmp.abc123", "checkpoint-10.bin", "checkpoint-20.bin",
                                          "checkpoint.bin", "config.json", "diag.jsonl", "init", "metrics.jsonl",
                                          "provenance.json", "summary.json"});
  CHECK(previous_run_files(dir.string(), (dir / "checkpoint-10.bin").string()).size() == owned.size() - 1);
  CHECK(previous_run_files((t.dir / "none").string()).empty());
  // A folder that no drift run wrote (its config.json is not a run's: no "version") is left alone.
  t.write("proj/config.json", "{\"seed\": 1}");
  t.write("proj/summary.json", "{}");
  fs::create_directories(t.dir / "proj" / "init");
  CHECK(previous_run_files((t.dir / "proj").string()).empty());

  // A new run that stops at once (a stop request before the first step ends): nothing of the old run
  // is left, so it cannot pass for finished.
  c.train.checkpoint_every = 0;
  c.train.keep_checkpoints = false;
  c.diagnostics.every = 0;
  c.train.lr = 0.02;
  std::atomic<bool> stop{true};
  // Without --force a finished run is not replaced: refused naming the directory, nothing touched.
  {
    PreparedRun r = prepare_run(c);
    TrainOptions o;
    o.stop_requested = &stop;
    try {
      train(r, o, {});
      FAIL("expected a refusal: the directory holds a finished run");
    } catch (const io::IoError& e) {
      CHECK(std::string(e.what()).find(dir.string() + ": holds a finished run") == 0);
      CHECK(std::string(e.what()).find("--force") != std::string::npos);
    }
    CHECK(fs::exists(dir / "summary.json"));
    CHECK(fs::exists(dir / "checkpoint-10.bin"));
  }
  {
    PreparedRun r = prepare_run(c);
    TrainOptions o;
    o.stop_requested = &stop;
    o.force = true;
    const RunSummary s = train(r, o, {});
    CHECK(s.interrupted);
  }
  for (const char* f : {"summary.json", "checkpoint-10.bin", "checkpoint-20.bin", "diag.jsonl", "init",
                        ".summary.json.tmp.abc123"})
    CHECK_MESSAGE(!fs::exists(dir / f), f);
  CHECK(fs::exists(dir / "notes.txt"));
  CHECK(fs::exists(dir / "checkpoint-old.bin"));
  CHECK(slurp(dir / "config.json").find("0.02") != std::string::npos);

  // An uninterrupted run of this config, for the bytes.
  RunConfig whole = c;
  whole.output.dir = (t.dir / "whole").string();
  {
    PreparedRun r = prepare_run(whole);
    train(r, TrainOptions{}, {});
  }
  // A run killed before its first checkpoint: config.json and part of metrics.jsonl, no checkpoint.
  const fs::path killed = t.dir / "killed";
  fs::create_directories(killed);
  fs::copy_file(t.dir / "whole" / "config.json", killed / "config.json");
  const std::string m = slurp(t.dir / "whole" / "metrics.jsonl");
  t.write("killed/metrics.jsonl", m.substr(0, m.size() / 3));
  RunConfig again = c;
  again.output.dir = killed.string();
  std::string told;
  {
    PreparedRun r = prepare_run(again);
    TrainOptions o;
    o.resume = true;
    o.notice = [&](const std::string& msg) { told = msg; };
    const RunSummary s = train(r, o, {});
    CHECK(s.steps_completed == 30);
  }
  CHECK(told.find("step 0") != std::string::npos);
  CHECK(no_timing(slurp(killed / "metrics.jsonl")) == no_timing(m));
  json a = json::parse(slurp(t.dir / "whole" / "summary.json")), b = json::parse(slurp(killed / "summary.json"));
  for (const char* k : {"wall_s", "steps_per_s", "tokens_per_s", "routes"}) {
    a.erase(k);
    b.erase(k);
  }
  CHECK(a == b);
  CHECK(slurp(t.dir / "whole" / "checkpoint.bin") == slurp(killed / "checkpoint.bin"));

  // Another config's config.json, or none at all: --resume refuses, writing nothing.
  using test::resume_error;
  const fs::path other = t.dir / "other";
  fs::create_directories(other);
  fs::copy_file(t.dir / "whole" / "config.json", other / "config.json");
  RunConfig changed = c;
  changed.train.lr = 0.05;
  changed.output.dir = other.string();
  CHECK(resume_error(changed).find("train.lr") != std::string::npos);
  CHECK_FALSE(fs::exists(other / "metrics.jsonl"));
  const fs::path empty = t.dir / "empty";
  fs::create_directories(empty);
  RunConfig none = c;
  none.output.dir = empty.string();
  CHECK(resume_error(none).find("checkpoint.bin") != std::string::npos);
  CHECK(fs::is_empty(empty));
}

}  // namespace test_train
