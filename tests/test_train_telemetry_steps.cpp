// Steps whose telemetry no metrics line reports skip gathering it (train/step_telemetry.h). The run's
// files must be the bytes of a run that gathers every step's (TrainOptions::telemetry_every_step):
// metrics.jsonl (timing aside), summary.json (timing aside; the route counts included), and
// checkpoint.bin. Under fp32 (the in-place scan), MXFP8 (the casts' counts), delayed scaling (whose
// amax histories a step computed again must start from where they were), NVFP4 (the block scales'
// tallies), on the mlp and the
// attention model; and for a run that diverges at a step that logs nothing, whose divergence line
// and telemetry_at_divergence then come from the step computed again, stopping there or going on.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "train/config.h"
#include "train/trainer.h"
#include "run_files.h"

namespace test_train_telemetry_steps {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace drift;

namespace {

struct TempDir {
  fs::path dir;
  TempDir() {
    static int n = 0;
    dir = fs::temp_directory_path() / ("drift_tel_steps_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
};

// summary.json without the fields that time the run.
json summary_without_timing(const fs::path& run) {
  json j = json::parse(test::slurp(run / "summary.json"));
  for (const char* k : {"wall_s", "steps_per_s", "tokens_per_s"}) j.erase(k);
  return j;
}

// Trains `cfg` twice, with the skipping and with every step's telemetry, and compares the files.
// Returns the summary (of the skipping run).
json same_files_both_ways(const TempDir& t, json cfg, const std::string& name) {
  json out;
  for (const bool every : {false, true}) {
    cfg["output"] = {{"dir", (t.dir / (name + (every ? ".every" : ".skip"))).string()}};
    PreparedRun r = prepare_run(parse_run_config(cfg));
    TrainOptions o;
    o.telemetry_every_step = every;
    train(r, o, {});
  }
  const fs::path skip = t.dir / (name + ".skip"), every = t.dir / (name + ".every");
  const std::string m_skip = test::no_timing(test::slurp(skip / "metrics.jsonl"));
  CHECK(m_skip == test::no_timing(test::slurp(every / "metrics.jsonl")));
  CHECK(summary_without_timing(skip) == summary_without_timing(every));
  CHECK(test::slurp(skip / "checkpoint.bin") == test::slurp(every / "checkpoint.bin"));
  CHECK(m_skip.find("\"sites\"") != std::string::npos);  // (lines with telemetry were compared)
  return summary_without_timing(skip);
}

json base_config(const std::string& data, const std::string& model, const json& matmul) {
  json c;
  c["seed"] = 3;
  c["data"] = {{"path", data}, {"tokenizer", "byte"}};
  if (model == "mlp")
    c["model"] = {{"kind", "mlp"}, {"context", 8}, {"embed", 8}, {"hidden", 64}, {"hidden_layers", 1}};
  else
    c["model"] = {{"kind", "attn"}, {"context", 32}, {"d_model", 64}, {"heads", 2}, {"layers", 1}};
  c["train"] = {{"steps", 24}, {"batch", 8}, {"lr", 0.01}, {"warmup", 0}, {"log_every", 7}, {"eval_every", 10},
                {"eval_batches", 1}};
  c["precision"] = {{"matmul", matmul}};
  return c;
}

}  // namespace

TEST_CASE("trainer: steps without telemetry write the bytes of a run that gathers every step's") {
  TempDir t;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "the quick brown fox " + std::to_string(i % 17) + " jumps; ";
  const std::string data = (t.dir / "text.txt").string();
  std::ofstream(data, std::ios::binary) << text;
  const json fp32 = json::array({{{"preset", "fp32"}}});
  const json mx = json::array({{{"preset", "mxfp8_e4m3"}}});
  const json delayed = json::array({{{"preset", "fp8_delayed_hybrid"}}});
  const json nvfp4 = json::array({{{"preset", "nvfp4"}}});  // (block scales other than MX's: their tallies)
  for (const auto& [model, matmul, name] : {std::tuple{"mlp", fp32, "mlp_fp32"}, {"mlp", mx, "mlp_mx"},
                                            {"mlp", delayed, "mlp_delayed"}, {"mlp", nvfp4, "mlp_nvfp4"},
                                            {"attn", mx, "attn_mx"}, {"attn", fp32, "attn_fp32"}}) {
    const std::string run_name = name;
    CAPTURE(run_name);
    same_files_both_ways(t, base_config(data, model, matmul), name);
    // Blown up from step 5 (a step that logs nothing: not a multiple of log_every 7, nor before an
    // evaluation): the divergence line reports that step's telemetry.
    for (const bool stop : {true, false}) {
      CAPTURE(stop);
      json c = base_config(data, model, matmul);
      c["train"]["lr"] = 1000;
      c["train"]["grad_clip"] = 0;
      c["divergence"] = {{"after_step", 5}, {"stop", stop}};
      const json s = same_files_both_ways(t, c, std::string(name) + (stop ? ".div" : ".div_go_on"));
      REQUIRE(s["divergence_step"].is_number());
      const int64_t at = s["divergence_step"];
      CHECK(at % 7 != 0);
      CHECK((at + 1) % 10 != 0);
      CHECK(s["telemetry_at_divergence"]["step"] == at);
    }
  }
}

}  // namespace test_train_telemetry_steps
