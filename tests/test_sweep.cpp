// drift sweep's plan: seed lists, multi-valued --set, policy files, run directory names, the cross
// product, and the child `drift train` it launches (arguments, the config it will resolve, and
// recognising a finished run of the same config).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "study/sweep_plan.h"
#include "study/train_run.h"
#include "train/config.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_sweep {

using namespace drift;
using json = nlohmann::json;
using strings = std::vector<std::string>;
using kv = std::vector<std::pair<std::string, std::string>>;

TEST_CASE("seed lists: ranges, lists and both; bad lists are refused") {
  CHECK(parse_seed_list("1-8") == std::vector<uint64_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(parse_seed_list("1,3,5") == std::vector<uint64_t>{1, 3, 5});
  CHECK(parse_seed_list("1-3,7,10-12") == std::vector<uint64_t>{1, 2, 3, 7, 10, 11, 12});
  CHECK(parse_seed_list("0") == std::vector<uint64_t>{0});
  CHECK(parse_seed_list("9,2") == std::vector<uint64_t>{9, 2});
  for (const char* bad : {"", "3-1", "1,,2", "a", "1-", "-2", "1-2,2", "1.5", "0-100000"})
    CHECK_THROWS_AS(parse_seed_list(bad), SweepError);
}

TEST_CASE("--set values split at top-level commas only") {
  CHECK(split_top_level("0.1,0.2") == strings{"0.1", "0.2"});
  CHECK(split_top_level("[1,2],{\"a\":\"x,y\"}") == strings{"[1,2]", "{\"a\":\"x,y\"}"});
  CHECK(split_top_level("\"a,\\\"b\",c") == strings{"\"a,\\\"b\"", "c"});
  CHECK(split_top_level("bf16") == strings{"bf16"});
  const SweepSet s = parse_sweep_set("train.lr=0.01,0.03");
  CHECK(s.key == "train.lr");
  CHECK(s.values == strings{"0.01", "0.03"});
  for (const char* bad : {"=1", "train.lr", "train.lr=1,,2", "train.lr=1,1", "train.lr="})
    CHECK_THROWS_AS(parse_sweep_set(bad), SweepError);
}

TEST_CASE("policy files: rule list, bare precision section, config overlay, preset name") {
  const json rules = json::parse(R"([{"preset": "bf16"}])");
  CHECK(policy_from_json(rules, "b", "b.json").sets == strings{R"(precision={"matmul":[{"preset":"bf16"}]})"});
  CHECK(policy_from_json(json::parse(R"({"matmul": "bf16", "master": "fp32"})"), "b", "b.json").sets ==
        strings{R"(precision={"master":"fp32","matmul":"bf16"})"});
  CHECK(policy_from_json(json("bf16"), "b", "b.json").sets == strings{R"(precision={"matmul":"bf16"})"});
  const SweepPolicy o = policy_from_json(
      json::parse(R"({"precision": {"matmul": "fp32"}, "train": {"lr": 0.1, "optimizer": "sgd"}})"), "my policy", "f");
  CHECK(o.label == "my_policy");
  CHECK(o.sets == strings{R"(precision={"matmul":"fp32"})", "train.lr=0.1", R"(train.optimizer="sgd")"});
  CHECK_THROWS_AS(policy_from_json(json(3), "x", "x.json"), SweepError);
  CHECK_THROWS_AS(policy_from_json(json::parse(R"({"precision": "bf16"})"), "x", "x.json"), SweepError);

  // Applied with drift train's --set: the precision section is replaced whole (the base's schedule
  // goes), the other sections are merged key by key (train.steps stays).
  json base = json::parse(R"({"train": {"lr": 0.003, "steps": 10},
                              "precision": {"matmul": "mxfp8_e4m3", "schedule": [{"step": 5, "matmul": "fp32"}]}})");
  for (const auto& s : o.sets) apply_set(base, s);
  CHECK(base == json::parse(R"({"train": {"lr": 0.1, "steps": 10, "optimizer": "sgd"}, "precision": {"matmul": "fp32"}})"));
}

TEST_CASE("run directory names are single safe path segments") {
  CHECK(safe_segment("train.lr=0.1,model.hidden=32") == "train.lr=0.1,model.hidden=32");
  CHECK(safe_segment("a/b c") == "a_b_c");
  CHECK(safe_segment("..") == "_..");
  CHECK(safe_segment("") == "_");
  CHECK(safe_segment(std::string(200, 'x')).size() == 120);
}

TEST_CASE("the sweep is the cross product: policies, then --set values (first slowest), then seeds") {
  const SweepPolicy a{"A", "A.json", {"precision={}"}}, b{"B", "B.json", {"precision={\"matmul\":\"bf16\"}"}};
  const auto runs = plan_sweep({1, 2}, {parse_sweep_set("train.lr=0.1,0.2"), parse_sweep_set("model.hidden=32")}, {a, b}, "cfg");
  REQUIRE(runs.size() == 8);
  strings dirs;
  for (const auto& r : runs) dirs.push_back(r.rel_dir);
  CHECK(dirs == strings{"A/train.lr=0.1/seed1", "A/train.lr=0.1/seed2", "A/train.lr=0.2/seed1", "A/train.lr=0.2/seed2",
                        "B/train.lr=0.1/seed1", "B/train.lr=0.1/seed2", "B/train.lr=0.2/seed1", "B/train.lr=0.2/seed2"});
  CHECK(runs[2].seed == 1);
  CHECK(runs[2].policy == "A");
  CHECK(runs[2].overrides == kv{{"train.lr", "0.2"}, {"model.hidden", "32"}});
  CHECK(runs[2].varying == kv{{"train.lr", "0.2"}});
  CHECK(runs[5].sets == strings{"precision={\"matmul\":\"bf16\"}", "train.lr=0.1", "model.hidden=32"});

  // Two varying keys: the last varies fastest; no policies: the config's name, nothing added.
  const auto two = plan_sweep({7}, {parse_sweep_set("x=1,2"), parse_sweep_set("y=a,b")}, {}, "cfg");
  dirs.clear();
  for (const auto& r : two) dirs.push_back(r.rel_dir);
  CHECK(dirs == strings{"cfg/x=1,y=a/seed7", "cfg/x=1,y=b/seed7", "cfg/x=2,y=a/seed7", "cfg/x=2,y=b/seed7"});
  CHECK(two[0].policy == "");
  CHECK(two[3].sets == strings{"x=2", "y=b"});
  const auto plain = plan_sweep({3, 4}, {}, {}, "mlp_mxfp8");
  REQUIRE(plain.size() == 2);
  CHECK(plain[1].rel_dir == "mlp_mxfp8/seed4");
  CHECK(plain[1].sets.empty());

  CHECK_THROWS_AS(plan_sweep({1}, {parse_sweep_set("x=a/b,a_b")}, {}, "cfg"), SweepError);  // same directory
  CHECK_THROWS_AS(plan_sweep({1}, {}, {a, a}, "cfg"), SweepError);                          // same label
  CHECK_THROWS_AS(plan_sweep({1}, {parse_sweep_set("x=1"), parse_sweep_set("x=2")}, {}, "cfg"), SweepError);
}

TEST_CASE("a child drift train: its arguments, its resolved config, a finished run of the same config") {
  const auto tmp = std::filesystem::temp_directory_path() / ("drift_sweep_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  const std::string cfg = (tmp / "tiny_cfg.json").string();
  std::ofstream(cfg) << R"({"model": {"hidden": 32}, "train": {"steps": 30, "lr": 0.01}})";
  const TrainRun run{cfg, {"train.lr=0.5", "precision.matmul=\"bf16\""}, 3, "out/x/seed3"};
  CHECK(train_args(run) == strings{"train", "--config", cfg, "--set", "train.lr=0.5", "--set", "precision.matmul=\"bf16\"",
                                   "--seed", "3", "--out", "out/x/seed3", "--quiet"});
  const auto planned = planned_config(run);
  CHECK(planned["train"]["lr"] == 0.5);
  CHECK(planned["train"]["steps"] == 30);
  CHECK(planned["seed"] == 3);
  CHECK(planned["output"]["name"] == "tiny_cfg");
  CHECK(planned["output"]["dir"] == "out/x/seed3");
  CHECK(planned["precision"]["matmul"].dump() == json::parse(R"([{"preset": "bf16"}])").dump());
  CHECK(!planned.contains("version"));
  CHECK(!planned["model"].contains("vocab"));

  // What drift train writes (with version and vocab) matches; found under another path too.
  json written = json::parse(planned.dump());
  written["version"] = "0.0.1";
  written["model"]["vocab"] = 256;
  written["output"]["dir"] = "elsewhere/seed3";
  CHECK(!config_difference(written, planned));
  written["train"]["lr"] = 0.25;
  CHECK(config_difference(written, planned) == std::optional<std::string>("/train/lr"));

  TrainRun bad = run;
  bad.sets.push_back("train.lrr=1");
  CHECK_THROWS_AS(planned_config(bad), ConfigError);
  TrainRun unknown_preset = run;  // caught only when the rules meet the model's sites
  unknown_preset.sets.push_back("precision.schedule=[{\"step\": 5, \"matmul\": [{\"preset\": \"nope\"}]}]");
  CHECK_THROWS_WITH_AS(planned_config(unknown_preset), doctest::Contains("nope"), ConfigError);
  std::filesystem::remove_all(tmp);
}

}  // namespace test_sweep
