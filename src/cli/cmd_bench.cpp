// drift bench: speed measurements (never unit tests). Subcommands register here.
#include "cli/commands.h"

namespace drift::cli {

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure speed against a reference in the same run");
  cmd->require_subcommand(1);
  add_bench_gemm_command(*cmd);
  add_bench_cast_command(*cmd);
  add_bench_train_command(*cmd);
}

}  // namespace drift::cli
