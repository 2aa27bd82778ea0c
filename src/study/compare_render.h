// `drift compare` output: the policy table and the per-seed table as an aligned text table (for a
// terminal), markdown (for a paper or an issue), CSV or JSON (for scripts).
#pragma once

#include <string>
#include <vector>

#include "study/compare.h"

namespace drift {

enum class CompareFormat { table, markdown, csv, json };
enum class CompareTables { policies, seeds, both };

// The whole output. CSV holds one table, so `both` is refused there (std::invalid_argument).
std::string render_comparison(const std::vector<PolicyRow>& rows, CompareFormat format, CompareTables tables,
                              const CompareColumns& columns = {});

// The cells of the policy table and of the per-seed table (header row first), as the text,
// markdown and HTML (`drift report`) renderings show them.
// The policy table's columns: the fixed ones, "clip elementwise" when a run quantizes elementwise
// tensors, the diagnostics' means when a run has diag.jsonl, then `columns`' (loss at a step, sites).
std::vector<std::vector<std::string>> policy_table_cells(const std::vector<PolicyRow>& rows,
                                                         const CompareColumns& columns = {});
std::vector<std::vector<std::string>> seed_table_cells(const std::vector<PolicyRow>& rows);

// Numbers for people: missing values are an em dash.
std::string fmt_loss(double x);   // 4 decimals: "2.3456"
std::string fmt_step(double x);   // "412", a median between two steps "412.5"
std::string fmt_rate(double x);
std::string fmt_range(double lo, double hi, std::string (*fmt)(double));  // "lo–hi", "lo" when equal   // a fraction as a percentage to 3 significant digits: "1.23%", "0%"

// Columns of a text grid, padded to the widest cell (counting UTF-8 code points);
// right[i]: right-align column i. markdown: pipes and an alignment row.
std::string render_grid(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right, bool markdown);

// A CSV field, quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s);

}  // namespace drift
