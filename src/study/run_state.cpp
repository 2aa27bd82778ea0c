#include "study/run_state.h"

#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>

namespace drift {

namespace fs = std::filesystem;

std::optional<uint64_t> logged_step(const RunFiles& f) {
  if (!f.last_metrics || !f.last_metrics->is_object()) return std::nullopt;
  const auto step = f.last_metrics->value("step", nlohmann::json());
  if (!step.is_number_integer() || step.get<int64_t>() < 0) return std::nullopt;
  return step.get<uint64_t>() + 1;
}

double logged_loss(const RunFiles& f) {
  if (!f.last_metrics || !f.last_metrics->is_object()) return NAN;
  const auto loss = f.last_metrics->value("loss", nlohmann::json());
  return loss.is_number() ? loss.get<double>() : NAN;
}

namespace {

std::optional<nlohmann::json> read_json(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::parse_error&) {
    return std::nullopt;  // being written, or damaged: as if absent
  }
}

// "step 41/200, loss 2.3456" from a metrics.jsonl line (steps are 0-based there, shown 1-based).
std::string step_and_loss(const RunFiles& f) {
  const auto step = logged_step(f);
  if (!step) return "no step logged yet";
  std::string s = "step " + std::to_string(*step);
  if (f.steps) s += "/" + std::to_string(*f.steps);
  char b[48];
  std::snprintf(b, sizeof b, ", loss %.4f", logged_loss(f));
  return s + b;
}

}  // namespace

RunFiles read_run_files(const std::string& dir) {
  RunFiles f;
  const fs::path d(dir);
  f.summary = read_json(d / "summary.json");
  if (const auto cfg = read_json(d / "config.json"); cfg && cfg->is_object() && cfg->contains("train") &&
                                                      (*cfg)["train"].is_object()) {
    const auto steps = (*cfg)["train"].value("steps", nlohmann::json());
    if (steps.is_number_unsigned()) f.steps = steps.get<uint64_t>();
  }
  f.checkpoint = fs::exists(d / "checkpoint.bin");
  std::ifstream m(d / "metrics.jsonl");
  std::string line, last;
  while (std::getline(m, line))
    if (!m.eof()) last = line;  // a line still being written has no newline yet
  if (!last.empty()) {
    try {
      f.last_metrics = nlohmann::json::parse(last);
    } catch (const nlohmann::json::parse_error&) {
    }
  }
  return f;
}

std::string tail_lines(const std::string& path, size_t n) {
  std::ifstream f(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(f, line)) {
    lines.push_back(line);
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

const char* to_string(RunState s) {
  static constexpr const char* kNames[] = {"queued", "running", "finished", "diverged", "failed", "stopped", "not-started"};
  return kNames[static_cast<int>(s)];  // in the order of the enum
}

RunView describe_run(const RunFiles& f, const QueuedTask* task, const std::string& failure, bool running_here) {
  if (f.summary) {
    const auto& s = *f.summary;
    if (s.value("diverged", false)) {
      std::string d = "at step " + (s["divergence_step"].is_number() ? s["divergence_step"].dump() : std::string("?"));
      if (s.contains("reason") && s["reason"].is_string()) d += ": " + s["reason"].get<std::string>();
      return {RunState::diverged, d};
    }
    char b[64] = "";
    if (s.contains("final_val_loss") && s["final_val_loss"].is_number())
      std::snprintf(b, sizeof b, "val loss %.4f", s["final_val_loss"].get<double>());
    return {RunState::finished, b};
  }
  if (task) {
    if (task->state == "PD") {
      std::string d = "job " + task->job_id + "_" + std::to_string(task->index) + ", " + task->reason;
      if (f.checkpoint || f.last_metrics) d += "; continues after " + step_and_loss(f);
      return {RunState::queued, d};
    }
    return {RunState::running, step_and_loss(f) + " (job " + task->job_id + "_" + std::to_string(task->index) + ", " +
                                   task->state + ")"};
  }
  if (running_here) return {RunState::running, step_and_loss(f)};
  if (!failure.empty()) return {RunState::failed, failure};
  if (f.checkpoint || f.last_metrics) return {RunState::stopped, step_and_loss(f) + "; rerun the sweep to continue"};
  return {RunState::not_started, ""};
}

}  // namespace drift
