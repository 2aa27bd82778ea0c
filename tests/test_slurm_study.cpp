// A sweep beyond one machine, as pure logic: the Slurm job array's index list and batch script,
// what sbatch and squeue print, a run's state for drift sweep --status, and a sweep.json "args"
// list read back into the run it describes.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "study/run_state.h"
#include "study/slurm_job.h"
#include "study/train_run.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_slurm_study {

using namespace drift;
using strings = std::vector<std::string>;

TEST_CASE("array_spec: consecutive indices as ranges, a throttle as %N") {
  CHECK(array_spec({}, 0) == "");
  CHECK(array_spec({}, 3) == "");
  CHECK(array_spec({4}, 0) == "4");
  CHECK(array_spec({0, 1, 2, 3}, 0) == "0-3");
  CHECK(array_spec({0, 1, 2, 3}, 1) == "0-3%1");
  CHECK(array_spec({0, 2, 3, 5, 7, 8, 9}, 0) == "0,2-3,5,7-9");
  CHECK(array_spec({1, 2, 10}, 2) == "1-2,10%2");
}

TEST_CASE("shell_quote: plain words as they are, anything else in single quotes") {
  CHECK(shell_quote("runs/sweep1") == "runs/sweep1");
  CHECK(shell_quote("output.name=\"fp32\"") == "'output.name=\"fp32\"'");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == "'it'\\''s'");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("$HOME") == "'$HOME'");
}

TEST_CASE("the batch script: requeue, the preemption signal to the batch shell, append to the log, exec --run-task") {
  SlurmScript s;
  s.sweep_dir = "runs/my sweep";
  s.log_dir = "/abs/runs/my sweep/slurm";
  s.work_dir = "/home/u/project";
  s.drift = "/opt/drift/bin/drift";
  s.preempt_notice_s = 300;
  const std::string t = sbatch_script(s);
  CHECK(t.rfind("#!/bin/bash\n", 0) == 0);
  for (const char* line : {"#SBATCH --requeue\n", "#SBATCH --signal=B:USR1@300\n", "#SBATCH --open-mode=append\n",
                           "#SBATCH --output=/abs/runs/my sweep/slurm/task-%a.log\n", "cd /home/u/project || exit 1\n",
                           "exec /opt/drift/bin/drift sweep --run-task 'runs/my sweep' \"$SLURM_ARRAY_TASK_ID\"\n"})
    CHECK_MESSAGE(t.find(line) != std::string::npos, line);
  // Every #SBATCH line comes before the first command (sbatch stops reading them there).
  CHECK(t.rfind("#SBATCH") < t.find("\ncd "));
}

TEST_CASE("sbatch --parsable output: the job id, with or without a cluster name") {
  CHECK(parse_sbatch_job_id("1234\n") == "1234");
  CHECK(parse_sbatch_job_id("77;cluster2\n") == "77");
  CHECK_THROWS_AS(parse_sbatch_job_id(""), std::runtime_error);
  CHECK_THROWS_AS(parse_sbatch_job_id("sbatch: error: x\n"), std::runtime_error);
}

TEST_CASE("squeue lines: array tasks with their state and reason; other jobs and unsplit ranges left out") {
  const auto t = parse_squeue("12 0 R None\n12 3 PD JobArrayTaskLimit\n13 N/A R None\n12 [4-5%1] PD JobArrayTaskLimit\n"
                              "14 2 PD BeginTime\n");
  REQUIRE(t.size() == 3);
  CHECK(t[0].job_id == "12");
  CHECK(t[0].index == 0);
  CHECK(t[0].state == "R");
  CHECK(t[0].reason == "None");
  CHECK(t[1].index == 3);
  CHECK(t[1].state == "PD");
  CHECK(t[1].reason == "JobArrayTaskLimit");
  CHECK(t[2].job_id == "14");
  CHECK(t[2].reason == "BeginTime");
}

TEST_CASE("describe_run: summary first, then the queue, then a failure, else stopped or not started") {
  RunFiles f;
  QueuedTask pending{"9", 2, "PD", "Resources"}, running{"9", 2, "R", "None"};
  CHECK(describe_run(f, nullptr, "").state == RunState::not_started);
  CHECK(describe_run(f, &pending, "").state == RunState::queued);
  CHECK(describe_run(f, &pending, "").detail == "job 9_2, Resources");
  CHECK(describe_run(f, nullptr, "boom\n").state == RunState::failed);
  CHECK(describe_run(f, nullptr, "boom\n").detail == "boom\n");
  f.last_metrics = nlohmann::json{{"step", 40}, {"loss", 2.5}};
  f.steps = 200;
  f.checkpoint = true;
  CHECK(describe_run(f, &running, "").state == RunState::running);
  CHECK(describe_run(f, &running, "").detail == "step 41/200, loss 2.5000 (job 9_2, R)");
  CHECK(describe_run(f, &pending, "").detail == "job 9_2, Resources; continues after step 41/200, loss 2.5000");
  CHECK(describe_run(f, nullptr, "").state == RunState::stopped);
  CHECK(describe_run(f, nullptr, "", true).state == RunState::running);  // a local sweep's record
  CHECK(describe_run(f, nullptr, "", true).detail == "step 41/200, loss 2.5000");
  CHECK(describe_run(f, nullptr, "log tail\n").state == RunState::failed);
  // A summary.json decides whatever else is there (a task may linger in the queue as it completes).
  f.summary = nlohmann::json{{"diverged", false}, {"final_val_loss", 1.25}};
  CHECK(describe_run(f, &running, "x").state == RunState::finished);
  CHECK(describe_run(f, &running, "x").detail == "val loss 1.2500");
  f.summary = nlohmann::json{{"diverged", true}, {"divergence_step", 17}, {"reason", "non-finite loss"}};
  CHECK(describe_run(f, nullptr, "").state == RunState::diverged);
  CHECK(describe_run(f, nullptr, "").detail == "at step 17: non-finite loss");
}

TEST_CASE("read_run_files: the last complete metrics line, steps from config.json; a partial line ignored") {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("drift_run_state_" + std::to_string(::getpid()));
  fs::remove_all(d);
  CHECK(read_run_files(d.string()).last_metrics == std::nullopt);
  fs::create_directories(d);
  std::ofstream(d / "config.json") << R"({"train": {"steps": 30}})";
  std::ofstream(d / "metrics.jsonl") << "{\"step\":0,\"loss\":3}\n{\"step\":5,\"loss\":2}\n{\"step\":10,\"lo";
  const RunFiles f = read_run_files(d.string());
  REQUIRE(f.last_metrics);
  CHECK((*f.last_metrics)["step"] == 5);
  CHECK(f.steps == 30u);
  CHECK(!f.checkpoint);
  CHECK(!f.summary);
  CHECK(tail_lines((d / "metrics.jsonl").string(), 2) == "{\"step\":5,\"loss\":2}\n{\"step\":10,\"lo\n");
  fs::remove_all(d);
}

TEST_CASE("train_run_from_args: the inverse of train_args; other lists refused") {
  TrainRun r;
  r.config = "cfg.json";
  r.sets = {"output.name=\"fp32\"", "train.lr=0.01"};
  r.seed = 18446744073709551615ull;
  r.dir = "runs/x/seed3";
  for (const bool resume : {false, true}) {
    r.resume = resume;
    const TrainRun back = train_run_from_args(train_args(r));
    CHECK(back.config == r.config);
    CHECK(back.sets == r.sets);
    CHECK(back.seed == r.seed);
    CHECK(back.dir == r.dir);
    CHECK(back.resume == resume);
  }
  for (const strings& bad : {strings{}, strings{"sweep"}, strings{"train", "--config", "c", "--seed", "1"},
                             strings{"train", "--config", "c", "--seed", "-1", "--out", "d"},
                             strings{"train", "--config", "c", "--seed", "1x", "--out", "d"},
                             strings{"train", "--config", "c", "--seed", "1", "--out", "d", "--force"},
                             strings{"train", "--config", "c", "--seed", "1", "--out"}})
    CHECK_THROWS_AS(train_run_from_args(bad), std::invalid_argument);
}

}  // namespace test_slurm_study
