// drift: a bit-exact simulator of low-precision training arithmetic. Entry point: builds the
// command tree; each command lives in its own cmd_*.cpp.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.h"
#include "io/io_error.h"
#include "io/memory.h"
#include "policy/config_error.h"

int main(int argc, char** argv) {
  CLI::App app{"drift: bit-exact low-precision arithmetic and training simulator"};
  app.set_version_flag("--version", std::string("drift ") + DRIFT_VERSION);
  app.require_subcommand(1);
  drift::cli::add_formats_command(app);
  drift::cli::add_arith_command(app);
  drift::cli::add_bench_command(app);
  drift::cli::add_tcverify_command(app);
  drift::cli::add_matmul_command(app);
  drift::cli::add_quantize_command(app);
  drift::cli::add_train_commands(app);
  drift::cli::add_sweep_command(app);
  drift::cli::add_compare_command(app);
  drift::cli::add_bisect_command(app);
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
