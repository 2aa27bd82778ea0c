// drift: a bit-exact simulator of low-precision training arithmetic. Entry point: builds the
// command tree; each command lives in its own cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "io/io_error.h"
#include "io/memory.h"
#include "policy/config_error.h"

namespace {

// Edit distance (insertions, deletions, substitutions, adjacent swaps) between two short names.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// "unknown command 'trian'; did you mean 'train'?" for a first argument that names no command.
std::string unknown_command_message(const CLI::App& app, const std::string& word) {
  std::string best;
  size_t best_d = 3;  // at most two edits away counts as a typo
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    const size_t d = edit_distance(word, sub->get_name());
    if (d < best_d || (sub->get_name().rfind(word, 0) == 0 && best.empty())) best_d = d, best = sub->get_name();
  }
  return "unknown command '" + word + "'" + (best.empty() ? "" : "; did you mean '" + best + "'?") +
         " (drift --help lists the commands)";
}

}  // namespace

int main(int argc, char** argv) {
  drift::cli::command_line().assign(argv, argv + argc);
  CLI::App app{"drift: bit-exact low-precision arithmetic and training simulator.\n"
               "Workflow: train a run, sweep seeds and policies, compare them, report (charts), bisect a divergence."};
  app.set_version_flag("--version", std::string("drift ") + DRIFT_VERSION);
  app.require_subcommand(1);
  // The workflow first, in the order a study uses it; then the engine's tools.
  drift::cli::add_train_command(app);
  drift::cli::add_sweep_command(app);
  drift::cli::add_compare_command(app);
  drift::cli::add_report_command(app);
  drift::cli::add_export_command(app);
  drift::cli::add_bisect_command(app);
  drift::cli::add_explain_command(app);
  for (CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) sub->group("Workflow");
  const size_t workflow = app.get_subcommands([](const CLI::App*) { return true; }).size();
  drift::cli::add_arith_command(app);
  drift::cli::add_matmul_command(app);
  drift::cli::add_quantize_command(app);
  drift::cli::add_formats_command(app);
  drift::cli::add_tcverify_command(app);
  drift::cli::add_bench_command(app);
  const auto all = app.get_subcommands([](const CLI::App*) { return true; });
  for (size_t i = workflow; i < all.size(); ++i) all[i]->group("Engine tools");
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    const bool known = std::any_of(all.begin(), all.end(), [&](const CLI::App* sub) { return sub->check_name(word); });
    if (!known) {
      std::fprintf(stderr, "drift: error: %s\n", unknown_command_message(app, word).c_str());
      return drift::cli::kExitBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : drift::cli::kExitBadInput;
  } catch (const drift::ConfigError& e) {
    std::fprintf(stderr, "drift: error: %s\n", e.what());  // "<json path>: <what was expected>"
    return drift::cli::kExitBadInput;
  } catch (const drift::cli::InputError& e) {
    std::fprintf(stderr, "drift: error: %s\n", e.what());
    return drift::cli::kExitBadInput;
  } catch (const drift::io::IoError& e) {
    // A bad, unreadable or unwritable file or directory: the message starts with its name.
    std::fprintf(stderr, "drift: error: %s\n", e.what());
    return drift::cli::kExitBadInput;
  } catch (const drift::io::TooLarge& e) {
    std::fprintf(stderr, "drift: error: %s\n", e.what());
    return drift::cli::kExitBadInput;
  } catch (const std::bad_alloc&) {
    // Sizes from the input are checked before the large allocations (io/memory.h); this is the rest.
    std::fprintf(stderr, "drift: error: out of memory: the sizes asked for (model dimensions, train.batch, matrix "
                         "shapes) need more memory than this machine has\n");
    return drift::cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "drift: error: %s\n", e.what());
    return drift::cli::kExitFailure;
  }
  return 0;
}
