// drift export: a run's metrics.jsonl and diag.jsonl as one flat per-step table (CSV or JSONL), a
// column per site.operand.metric, per class, per diagnostic field: for pandas, R or a spreadsheet.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "io/npy.h"
#include "study/step_table.h"

namespace drift::cli {

namespace {

struct ExportOptions {
  std::string run, format = "csv", out;
};

void run_export(const ExportOptions& o) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(o.run)) throw InputError(o.run + ": no such run directory");
  if (!fs::exists(fs::path(o.run) / "metrics.jsonl"))
    throw InputError(o.run + ": not a run directory (no metrics.jsonl); drift export reads one run (drift report takes a sweep)");
  StepTable t;
  try {
    t = read_step_table(o.run);
  } catch (const std::runtime_error& e) {
    throw InputError(e.what());
  }
  const std::string text = o.format == "jsonl" ? step_table_jsonl(t) : step_table_csv(t);
  if (o.out.empty() || o.out == "-") {
    std::fputs(text.c_str(), stdout);
  } else {
    try {
      io::write_file_atomic(o.out, text);
    } catch (const io::IoError& e) {
      throw InputError(std::string("--out: ") + e.what());
    }
    std::fprintf(stderr, "export: %s (%zu steps, %zu columns)\n", o.out.c_str(), t.rows.size(), t.columns.size());
  }
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand("export", "A run's metrics.jsonl and diag.jsonl as one flat per-step table (CSV or "
                                           "JSONL): a column per site.operand.metric, per class, per diag field");
  cmd->add_option("run", o->run, "The run directory")->required();
  cmd->add_option("--format", o->format, "csv or jsonl")->check(CLI::IsMember({"csv", "jsonl"}))->capture_default_str();
  cmd->add_option("--out", o->out, "The file to write (default: standard output)");
  cmd->footer("Columns: the nested keys joined by '.', e.g. sites.<layer>.<role>.a.clipped; beside each count, its "
              "rate (clip_rate, flush_rate, subnormal_rate = count / elements); diag.jsonl fields as diag.<field> on "
              "the steps it measured. Rows: the union of logged steps; an empty cell where a file has no value.");
  cmd->callback([o] { run_export(*o); });
}

}  // namespace drift::cli
