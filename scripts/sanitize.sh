#!/usr/bin/env bash
# The sanitizer check (CI runs it after scripts/test.sh): drift, the doctest suites and the fuzz
# targets built with clang under AddressSanitizer + UndefinedBehaviorSanitizer
# (-fno-sanitize-recover=all: any finding stops the process) in build-asan/, then the doctest suites
# and the CLI scripts run on that build (not the long oracles, the PyTorch reference or the
# benchmarks), then each fuzzer for a bounded time from its seed corpus (scripts/fuzz.sh).
# Zero findings is the bar. Usage: scripts/sanitize.sh [fuzz seconds per target, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds="${1:-30}"
t0=$(date +%s)
# One SIMD target, this machine's best (-march=native, HWY_COMPILE_ONLY_STATIC): under the sanitizers
# the Highway sources took minutes each for their five targets; the plain build tests every target,
# and the one checked here is the one this machine runs.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_CXX_FLAGS="-march=native -DHWY_COMPILE_ONLY_STATIC=1" \
  -DCMAKE_CXX_COMPILER=clang++ -DDRIFT_CUDA=OFF -DDRIFT_SANITIZE=address,undefined -DDRIFT_FUZZ=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target drift drift_tests fuzz_config fuzz_npy fuzz_checkpoint
t1=$(date +%s)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The doctest suites, the CLI scripts, and the fuzzers' seed corpora and crash regressions once.
# Five suites are left to the plain build: exhaustive numerics that run 10-30x slower under the
# sanitizers (test_cast_span: over 20 minutes; test_model_grad, test_elementwise, test_tanh_fp32,
# test_matmul: 1-5 minutes each, measured on a loaded 2-core machine); their code paths run in the
# other suites and the training scripts here.
ctest --test-dir build-asan -j"$(nproc)" --output-on-failure --timeout 1500 \
  -R '^(test_|fuzz_regressions_|script_(arith_decimal|backend_cli|cli_matmul|diag_identical|malformed_inputs|proxy_elementwise|run_dir_lock|shipped_configs|sweep_compare|train_config_checks|train_determinism|train_resume))' \
  -E '^test_(model_grad|elementwise|tanh_fp32|matmul|cast_span)$'
t2=$(date +%s)
bash scripts/fuzz.sh build-asan "$fuzz_seconds"
t3=$(date +%s)
echo "sanitize: build $((t1 - t0)) s, tests $((t2 - t1)) s, fuzzing $((t3 - t2)) s: no findings"
