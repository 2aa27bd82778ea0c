// drift compare: finished runs (run directories or directories above them, e.g. a sweep) grouped
// by policy, most robust first, as a table, markdown, CSV or JSON. Reads only the run directories.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "diag/compare.h"
#include "diag/compare_render.h"
#include "diag/run_index.h"

namespace drift::cli {

namespace {

struct CompareOptions {
  std::vector<std::string> paths;
  std::string by = "policy", format = "table", table;
};

void run_compare(const CompareOptions& o) {
  const GroupBy by = o.by == "precision" ? GroupBy::precision : GroupBy::policy;
  const CompareFormat format = o.format == "csv"        ? CompareFormat::csv
                               : o.format == "json"     ? CompareFormat::json
                               : o.format == "markdown" ? CompareFormat::markdown
                                                        : CompareFormat::table;
  // CSV holds one table: the policy table unless --table seeds.
  std::string t = o.table.empty() ? (format == CompareFormat::csv ? "policies" : "both") : o.table;
  const CompareTables tables = t == "policies" ? CompareTables::policies
                               : t == "seeds"  ? CompareTables::seeds
                                               : CompareTables::both;
  if (format == CompareFormat::csv && tables == CompareTables::both)
    throw InputError("--table both: CSV holds one table; choose --table policies or --table seeds");

  std::vector<RunRecord> runs;
  try {
    for (const auto& d : find_run_dirs(o.paths)) runs.push_back(read_run(d));
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
  if (runs.empty()) throw InputError("no finished runs (directories with summary.json) under the given paths");
  const auto rows = group_by_policy(runs, by);
  std::fputs(render_comparison(rows, format, tables).c_str(), stdout);
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand("compare", "Compare finished runs across policies: survival, divergence steps, "
                                            "losses, clip rates (reads run and sweep directories)");
  cmd->add_option("paths", o->paths, "Run directories, or directories above them (a sweep)")->required();
  cmd->add_option("--by", o->by,
                  "Group runs by: policy (everything in config.json but seed and output) or precision (the "
                  "precision section only)")
      ->check(CLI::IsMember({"policy", "precision"}))
      ->capture_default_str();
  cmd->add_option("--format", o->format, "table, markdown, csv or json")
      ->check(CLI::IsMember({"table", "markdown", "csv", "json"}))
      ->capture_default_str();
  cmd->add_option("--table", o->table, "policies, seeds or both (default: both; csv: policies)")
      ->check(CLI::IsMember({"policies", "seeds", "both"}));
  cmd->callback([o] { run_compare(*o); });
}

}  // namespace drift::cli
