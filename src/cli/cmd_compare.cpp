// drift compare: finished runs (run directories or directories above them, e.g. a sweep) grouped
// by policy, most robust first, as a table, markdown, CSV or JSON. Reads only the run directories.
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "study/compare.h"
#include "study/compare_render.h"
#include "study/run_index.h"

namespace drift::cli {

namespace {

struct CompareOptions {
  std::vector<std::string> paths;
  std::string by = "policy", format = "table", table;
  int64_t at_step = -1;
  std::vector<std::string> sites;
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
  CompareColumns columns;
  if (o.at_step >= 0) columns.loss_at_step = static_cast<uint64_t>(o.at_step);
  for (const auto& site : o.sites) {
    std::set<std::string> known;
    for (const auto& r : runs)
      for (const auto& [name, rates] : r.site_clip_rate) known.insert(name);
    if (!known.count(site)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InputError("--site " + site + ": no run has this matmul site (sites: " + list + ")");
    }
    columns.sites.push_back(site);
  }
  const auto rows = group_by_policy(runs, by);
  std::fputs(render_comparison(rows, format, tables, columns).c_str(), stdout);
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
  cmd->add_option("--at-step", o->at_step, "Also the median training loss at this logged step (non-finite counts as inf)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--site", o->sites, "Also the mean clip rate of this matmul site's operands a and b (layer.role, as "
                                      "drift explain names them; repeatable)");
  cmd->footer("Columns: seeds diverged and their divergence steps (median, range), final losses over the seeds that "
              "did not diverge (median, validation-loss range), the mean clip rate per tensor class, and when present "
              "the elementwise quantizers' clip rate and diag.jsonl's means (gradient cosine, relative error and bias "
              "against the exact gradient; bound violations summed).");
  cmd->callback([o] { run_compare(*o); });
}

}  // namespace drift::cli
