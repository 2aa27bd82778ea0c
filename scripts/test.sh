#!/usr/bin/env bash
# Sets everything up and runs every test: the doctest suites, the exact oracle, the CLI checks.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 1500
