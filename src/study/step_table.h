// A run's per-step measurements as one flat table: a row per step, a column per leaf of the nested
// metrics.jsonl / diag.jsonl lines ("sites.<layer>.<role>.<operand>.<metric>", "classes.<class>.
// <metric>", "diag.grad.tensors.<name>.cosine", ...). `drift export` writes it; `drift report`
// plots its columns. Rates are added where a line holds counts: beside every object with
// "elements", its clip_rate, flush_rate and subnormal_rate (count / elements).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace drift {

struct StepTable {
  std::vector<std::string> columns;  // in order of first appearance; "step" first
  // rows[step][column index]: a number, bool or string; absent cells are missing (null).
  std::map<uint64_t, std::map<size_t, nlohmann::json>> rows;

  // Adds the leaves of one JSONL line (whose "step" keys the row) under `prefix`.
  void add_line(const nlohmann::ordered_json& line, const std::string& prefix);
  size_t column(const std::string& name);  // its index, created when new

 private:
  std::map<std::string, size_t> index_;
};

// The run directory's metrics.jsonl (and diag.jsonl when present, as "diag.*" columns, joined on
// the step) as one table. Timing fields (tokens_per_s, elapsed_s) are kept: a table for people.
// Throws std::runtime_error naming the file and line of anything unreadable.
StepTable read_step_table(const std::string& run_dir);

// The table as CSV (a header of column names, a row per step, empty cells where a value is absent;
// booleans true/false; text quoted when needed) or as JSONL (an object per step, every column, null
// where absent).
std::string step_table_csv(const StepTable& t);
std::string step_table_jsonl(const StepTable& t);

// The lines of a JSONL file, parsed in key order (empty when the file does not exist).
std::vector<nlohmann::ordered_json> read_jsonl(const std::string& path);

}  // namespace drift
