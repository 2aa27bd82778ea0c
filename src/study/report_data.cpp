#include "study/report_data.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "study/compare.h"
#include "study/compare_render.h"
#include "study/run_index.h"
#include "study/step_table.h"
#include "study/svg_figures.h"

namespace drift {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Raw counts (their rates are plotted instead) and swamping counters: left out of the page.
bool is_raw_count(const std::string& column) {
  static const char* const kLeaves[] = {"elements", "clipped", "flushed", "subnormal", "nonfinite",
                                        "inner_adds", "inner_swamped", "outer_adds", "outer_swamped", "calls"};
  const size_t dot = column.rfind('.');
  const std::string leaf = dot == std::string::npos ? column : column.substr(dot + 1);
  if (column == "clipped") return false;  // drift 0.1.0's name of the top-level grad_clipped flag, not a count
  for (const char* k : kLeaves)
    if (leaf == k) return true;
  return false;
}

// A value as the page shows it: 6 significant digits (a double whose shortest text has at most 6),
// which halves the page against full precision; drift export keeps every digit.
json six_digits(double x) {
  if (!std::isfinite(x)) return nullptr;
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", x);
  return std::strtod(b, nullptr);
}

json step_or_null(const std::optional<int64_t>& s) { return s ? json(*s) : json(nullptr); }

// The table's columns of one file (metrics.jsonl: names without "diag."; diag.jsonl: with it) over
// the steps that file has a line for: {"steps": [...], "cols": {name: [value per step]}}.
json file_columns(const StepTable& t, bool diag) {
  auto mine = [&](const std::string& name) { return (name.rfind("diag.", 0) == 0) == diag; };
  std::vector<uint64_t> steps;
  for (const auto& [step, row] : t.rows)
    for (const auto& [c, v] : row)
      if (c != 0 && mine(t.columns[c])) {
        steps.push_back(step);
        break;
      }
  json cols = json::object();
  for (size_t c = 0; c < t.columns.size(); ++c) {
    const std::string& name = t.columns[c];
    if (name == "step" || !mine(name) || is_raw_count(name)) continue;
    json values = json::array();
    bool numeric = false;
    for (uint64_t step : steps) {
      const auto& row = t.rows.at(step);
      const auto it = row.find(c);
      if (it == row.end() || it->second.is_null()) {
        values.push_back(nullptr);
      } else if (it->second.is_boolean()) {
        values.push_back(it->second.get<bool>() ? 1 : 0);
        numeric = true;
      } else if (it->second.is_number()) {
        values.push_back(six_digits(it->second.get<double>()));
        numeric = true;
      } else {
        values.push_back(nullptr);  // text (a reason, a tensor name): not a series
      }
    }
    if (numeric) cols[name] = std::move(values);
  }
  return {{"steps", steps}, {"cols", cols}};
}

json run_json(const RunRecord& r, size_t id) {
  const StepTable t = read_step_table(r.dir);
  json metrics = file_columns(t, false), diag = file_columns(t, true);
  return {{"id", id},
          {"label", r.label},
          {"seed", r.seed},
          {"dir", r.dir},
          {"diverged", r.diverged},
          {"reason", r.reason},
          {"steps_completed", r.steps_completed},
          {"markers",
           {{"divergence", step_or_null(r.divergence_step)},
            {"spike", step_or_null(r.spike_step)},
            {"departure", step_or_null(r.departure_step)},
            {"first_nonfinite", step_or_null(r.first_nonfinite_step)}}},
          {"steps", metrics["steps"]},
          {"cols", metrics["cols"]},
          {"diag_steps", diag["steps"]},
          {"diag_cols", diag["cols"]}};
}

// bisect.json files under the paths (a bisect directory, or one above it).
std::vector<fs::path> find_bisect_files(const std::vector<std::string>& paths) {
  std::set<fs::path> found;
  for (const auto& p : paths) {
    if (fs::exists(fs::path(p) / "bisect.json")) found.insert(fs::path(p) / "bisect.json");
    for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied);
         it != fs::recursive_directory_iterator(); ++it)
      if (it->is_regular_file() && it->path().filename() == "bisect.json") found.insert(it->path().lexically_normal());
  }
  return {found.begin(), found.end()};
}

std::string step_text(const json& j) {
  return j.contains("divergence_step") && j["divergence_step"].is_number() ? j["divergence_step"].dump() : "\u2014";
}

// A bisect.json as the verdict table drift bisect prints: each check, its run, its outcome.
json bisect_json(const fs::path& file) {
  std::ifstream f(file);
  json b = json::parse(f, nullptr, false);
  if (!b.is_object()) throw std::runtime_error(file.string() + ": not valid JSON");
  json rows = json::array({json::array({"check", "run", "divergence step", "effect"})});
  auto str = [](const json& j, const char* k) {
    return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string();
  };
  for (const auto& [key, check] : {std::pair{"under_test", "run under test"}, std::pair{"repeat", "same seed again"},
                                   std::pair{"baseline", "fp32 baseline"}})
    if (b.contains(key) && b[key].is_object())
      rows.push_back({check, fs::path(str(b[key], "dir")).filename().string(), step_text(b[key]), ""});
  for (const char* key : {"classes", "layers"})
    if (b.contains(key) && b[key].is_array())
      for (const auto& r : b[key])
        rows.push_back({"restore " + str(r, "name"), str(r, "status") == "run" ? fs::path(str(r, "dir")).filename().string() : "\u2014",
                        str(r, "status") == "run" ? step_text(r) : "\u2014",
                        str(r, "status") == "run" ? str(r, "effect") : str(r, "note")});
  return {{"dir", file.parent_path().string()}, {"verdict", str(b, "verdict")}, {"conclusion", str(b, "conclusion")},
          {"rows", rows}};
}

}  // namespace

json gather_report_data(const std::vector<std::string>& paths) {
  std::vector<RunRecord> runs;
  for (const auto& d : find_run_dirs(paths)) runs.push_back(read_run(d));
  json out = json::object();
  out["runs"] = json::array();
  // The runs in the compare table's order: policies most robust first, seeds ascending.
  const auto rows = group_by_policy(runs, GroupBy::policy);
  size_t id = 0;
  for (const auto& row : rows)
    for (const RunRecord* r : row.runs) {
      json j = run_json(*r, id++);
      j["label"] = row.label;  // the compare table's label (told apart where two policies share one)
      out["runs"].push_back(std::move(j));
    }
  for (size_t k = 0; k < out["runs"].size(); ++k) out["runs"][k]["color"] = run_color(out["runs"], k);
  out["compare"] = {{"policies", policy_table_cells(rows)}, {"seeds", seed_table_cells(rows)}};
  out["bisects"] = json::array();
  for (const auto& f : find_bisect_files(paths)) out["bisects"].push_back(bisect_json(f));
  if (runs.empty() && out["bisects"].empty())
    throw std::runtime_error("no finished runs (directories with summary.json) and no bisect.json under the given paths");
  return out;
}

}  // namespace drift
