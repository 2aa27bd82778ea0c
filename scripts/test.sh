#!/usr/bin/env bash
# Sets everything up and runs every test: the doctest suites, the exact oracle, the CLI checks; then
# the same suites and CLI checks under AddressSanitizer + UBSan, and the fuzzers (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 1500
# ctest lists the GPU-only tests as "Skipped" without their output; say why here.
if [ -x build/drift_gpu_tests ]; then
  why=$(build/drift_gpu_tests --list-test-cases 2>&1 | head -1 || true)
  if [[ "$why" == skipped* ]]; then echo "gpu_cuda: $why"; fi
fi
bash scripts/sanitize.sh "${DRIFT_FUZZ_SECONDS:-30}"
