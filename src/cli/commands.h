// Each `drift <command>` lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

#include "study/train_run.h"

namespace drift::cli {

void add_formats_command(CLI::App& app);
void add_arith_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_tcverify_command(CLI::App& app);
void add_matmul_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_bisect_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_bench_gemm_command(CLI::App& bench);
void add_bench_cast_command(CLI::App& bench);
void add_bench_train_command(CLI::App& bench);

// The command line as given (main fills it; runs record it in provenance.json).
inline std::vector<std::string>& command_line() {
  static std::vector<std::string> args;
  return args;
}

// Exit codes shared by every command.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;
// A run stopped by a signal after writing its checkpoint; the same command with --resume continues it.
constexpr int kExitPreempted = 75;     // SIGUSR1, a scheduler's preemption notice (EX_TEMPFAIL: retry)
constexpr int kExitInterrupted = 130;  // Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports Ctrl-C)

// `drift train` of one run in this process (drift sweep --run-task): the progress on stderr, the
// summary on stdout, a stop signal handled as drift train handles it. Returns the exit status.
int train_in_process(const TrainRun& r);

// The check of every option read into an unsigned integer (--seed, --step, -j, ...): CLI11 would
// otherwise read "-1" into it as 2^64-1. A parse error: exit 2, "--seed: expected an integer >= 0".
inline CLI::Validator non_negative() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const size_t i = s.find_first_not_of(" \t");
        if (i != std::string::npos && s[i] == '-') return "expected an integer >= 0, got " + s;
        // (CLI11 saturates an unsigned value past 2^64-1 instead of refusing it.)
        uint64_t v = 0;
        const char* b = s.data() + (i == std::string::npos ? s.size() : i);
        const auto r = std::from_chars(b, s.data() + s.size(), v);
        if (r.ec == std::errc::result_out_of_range) return "expected an integer in [0, 2^64-1], got " + s;
        return "";
      },
      "INT>=0", "non-negative integer");
}
// Every --seed option: an integer >= 0, as the config's "seed".
inline CLI::Validator non_negative_seed() { return non_negative(); }
// -j/--jobs: runs at a time, at least one (and not absurdly many processes).
inline CLI::Validator job_count() { return CLI::Range(1, 1024); }

// Thrown by commands for bad user input; main prints the message and exits 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace drift::cli
