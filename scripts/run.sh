#!/usr/bin/env bash
# Sets everything up and runs drift's main job on the shipped data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/drift formats
echo
echo "1.0 + 2^-4 in fp8_e4m3 under each rounding mode (1.0625 lies between 1.0 and 1.125):"
for mode in rne rna rtz rup rdn rto; do
  printf '%-4s ' "$mode"
  echo "1 0.0625" | ./build/drift arith --op add --format fp8_e4m3 --decimal --print decimal --rounding "$mode"
done
