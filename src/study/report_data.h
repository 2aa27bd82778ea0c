// What `drift report` shows, gathered from run, sweep and bisect directories into one JSON
// document that the page's script plots (src/study/report_page.js reads exactly these fields):
//   runs[]:    id, label, seed, dir, color (svg_figures.h run_color), diverged, reason, markers {divergence, spike, departure,
//              first_nonfinite} (steps or null), steps[] (the logged steps) and cols {name: values[]}
//              (the run's StepTable columns from metrics.jsonl, one value per logged step, null where
//              absent; raw counts are left out, their rates kept; numbers to 6 significant digits;
//              booleans as 0/1; text columns dropped), and likewise diag_steps[] and diag_cols {"diag.*"}
//              from diag.jsonl (its own, sparser steps)
//   compare:   {policies: [[cell...]...], seeds: [[cell...]...]} (drift compare's tables, header first)
//   bisects[]: {dir, verdict, conclusion, rows: [[check, result, divergence step, effect]...]}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace drift {

// Throws std::runtime_error naming the file for anything unreadable, and when the paths hold
// neither a finished run nor a bisect.json.
nlohmann::json gather_report_data(const std::vector<std::string>& paths);

}  // namespace drift
