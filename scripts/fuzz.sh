#!/usr/bin/env bash
# Runs each fuzz target (tests/fuzz: the config reader with --set, the .npy reader, the checkpoint
# reader) for a bounded time from its seed corpus, in a sanitizer build made with DRIFT_FUZZ=ON
# (scripts/sanitize.sh). New inputs go to a scratch corpus, never into the repository. A crash
# fails the script and leaves the input in <build>/fuzz-crashes/<target>/: fix the bug and commit
# the input to tests/fuzz/regressions/<target>/, where ctest (fuzz_regressions_<target>) replays it.
# Usage: scripts/fuzz.sh <build-dir> [seconds per target, default 30]
set -euo pipefail
cd "$(dirname "$0")/.."
build="$1"
seconds="${2:-30}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The checkpoint seed: a real checkpoint of the target's model (a small proxy), as the payload the
# target frames (first byte 1), and as a whole file (first byte 0).
cat > "$scratch/proxy.json" <<'JSON'
{"model": {"kind": "proxy", "input_dim": 4, "output_dim": 3, "d_model": 8, "layers": 1},
 "train": {"steps": 2, "batch": 2}}
JSON
"$build/drift" train --config "$scratch/proxy.json" --out "$scratch/run" --quiet
mkdir -p "$scratch/seeds_checkpoint"
python3 - "$scratch/run/checkpoint.bin" "$scratch/seeds_checkpoint" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2] + "/payload", "wb").write(b"\x01" + b[24:-8])
open(sys.argv[2] + "/file", "wb").write(b"\x00" + b)
PY

declare -A seeds=([config]="configs tests/fuzz/seeds/config" [npy]="tests/fuzz/seeds/npy"
                  [checkpoint]="$scratch/seeds_checkpoint")
for target in config npy checkpoint; do
  mkdir -p "$scratch/corpus_$target" "$build/fuzz-crashes/$target"
  # shellcheck disable=SC2086
  "$build/fuzz_$target" -max_total_time="$seconds" -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=20 \
    -artifact_prefix="$build/fuzz-crashes/$target/" -print_final_stats=1 \
    "$scratch/corpus_$target" ${seeds[$target]} tests/fuzz/regressions/$target 2> "$scratch/$target.log" ||
    { tail -60 "$scratch/$target.log"; echo "fuzz_$target: a finding; the input is in $build/fuzz-crashes/$target/"; exit 1; }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$target.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$scratch/$target.log" | tail -1 || true)
  echo "fuzz_$target: ${seconds} s, $runs inputs, $cov, no findings"
done
