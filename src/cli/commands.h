// Each `drift <command>` lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace drift::cli {

void add_formats_command(CLI::App& app);
void add_arith_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_tcverify_command(CLI::App& app);
void add_matmul_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_train_commands(CLI::App& app);  // train, explain
void add_sweep_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_bisect_command(CLI::App& app);
void add_bench_gemm_command(CLI::App& bench);
void add_bench_cast_command(CLI::App& bench);
void add_bench_train_command(CLI::App& bench);

// Exit codes shared by every command.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

// Thrown by commands for bad user input; main prints the message and exits 2.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace drift::cli
