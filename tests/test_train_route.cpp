// Every training matmul takes the CPU backend's float entry (issue 16); before, every one was staged
// through doubles into the engine's double entry, which is still the CUDA backend's route
// (DoubleStaging). Training is a speed change away from that route, never an arithmetic one: shipped
// configs, run both ways for a few steps (a metrics line every step, an evaluation and a checkpoint
// on the way), write the same metrics.jsonl (timing aside), summary.json (timing and routes aside)
// and checkpoint.bin, byte for byte.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "run_files.h"
#include "staged_cpu_backend.h"
#include "train/config.h"
#include "train/trainer.h"

namespace drift::test_train_route {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test::no_timing;
using test::slurp;

json summary_without_timing(const fs::path& p) {
  json s = json::parse(slurp(p));
  for (const char* k : {"wall_s", "steps_per_s", "tokens_per_s", "routes"}) s.erase(k);
  return s;
}

// The shipped config, shortened: 8 steps, every step logged, an evaluation and a checkpoint at 4.
RunConfig shortened(const std::string& name, const fs::path& out) {
  const fs::path src(DRIFT_SOURCE_DIR);
  json j = json::parse(std::ifstream((src / "configs" / name).string()));
  if (j.contains("data")) j["data"]["path"] = (src / "data" / "austen" / "persuasion.txt").string();
  for (auto [k, v] : {std::pair{"steps", 8}, {"log_every", 1}, {"eval_every", 4}, {"eval_batches", 2},
                      {"checkpoint_every", 4}})
    j["train"][k] = v;
  j["output"] = {{"dir", out.string()}};
  return parse_run_config(j);
}

}  // namespace

TEST_CASE("training through the float entry == training through double staging, on shipped configs") {
  const fs::path tmp = fs::temp_directory_path() / ("drift_route_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  for (const char* name : {"mlp_fp32.json", "mlp_mxfp8.json", "mlp_bf16.json", "mlp_fp8_delayed.json",
                           "mlp_nvfp4.json", "mlp_h100_fp8_tensorcore.json", "mlp_mxfp4_sr_hadamard.json",
                           "attn_mxfp8.json", "proxy_mxfp8_ln.json"}) {
    CAPTURE(name);
    const fs::path a = tmp / (std::string(name) + ".float"), b = tmp / (std::string(name) + ".staged");
    {
      PreparedRun run = prepare_run(shortened(name, a));
      CHECK(std::string(run.backend->name()) == "cpu");
      train(run, TrainOptions{}, {});
    }
    {
      PreparedRun run = prepare_run(shortened(name, b));
      run.backend = std::make_unique<test::StagedCpuBackend>();
      run.model->sites.backend = run.backend.get();
      train(run, TrainOptions{}, {});
    }
    const std::string ma = slurp(a / "metrics.jsonl");
    CHECK(std::count(ma.begin(), ma.end(), '\n') == 8);
    CHECK(no_timing(ma) == no_timing(slurp(b / "metrics.jsonl")));
    CHECK(summary_without_timing(a / "summary.json") == summary_without_timing(b / "summary.json"));
    CHECK(slurp(a / "checkpoint.bin") == slurp(b / "checkpoint.bin"));
  }
  fs::remove_all(tmp);
}

}  // namespace drift::test_train_route
