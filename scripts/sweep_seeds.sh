#!/usr/bin/env bash
# A seed sweep as a plain shell loop: one `drift train` per seed, each in its own run directory,
# skipping seeds that already finished (summary.json exists), so rerunning resumes. `drift sweep`
# does the same (and more: --set value lists, policy files, N at a time, sweep.json); this script
# shows there is nothing magic about it. Compare afterwards with: drift compare OUT
#
# Usage: scripts/sweep_seeds.sh CONFIG OUT "SEEDS" [drift train options...]
#   e.g. scripts/sweep_seeds.sh configs/mlp_mxfp8.json runs/mx "1 2 3 4" --set train.lr=0.01
# DRIFT (default build/drift) is the binary.
#
# The same sweep with GNU parallel, 4 runs at a time (1 OpenMP thread each):
#   parallel -j4 --halt never 'test -e runs/mx/seed{}/summary.json || OMP_NUM_THREADS=1 build/drift train \
#       --config configs/mlp_mxfp8.json --seed {} --out runs/mx/seed{} --quiet' ::: 1 2 3 4 5 6 7 8
#
# Across machines: `drift sweep ... --launcher slurm` submits the sweep as one Slurm job array, and
# `drift sweep ... --print-commands` prints it as drift train lines for any scheduler
# (docs/workflow.md, "Sweeps beyond one machine").
# Results do not depend on the thread count or the machine (DESIGN.md, determinism), so these
# runs are the same runs `drift sweep` would make.
set -uo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
config="$1"; out="$2"; seeds="$3"; shift 3
drift="${DRIFT:-build/drift}"
failed=0
for s in $seeds; do
  dir="$out/seed$s"
  if [ -e "$dir/summary.json" ]; then
    echo "seed $s: finished already ($dir)"
    continue
  fi
  if "$drift" train --config "$config" --seed "$s" --out "$dir" --quiet "$@"; then
    echo "seed $s: done ($dir)"
  else
    echo "seed $s: FAILED (exit $?)" >&2
    failed=$((failed + 1))
  fi
done
[ "$failed" -eq 0 ] || { echo "$failed run(s) failed" >&2; exit 1; }
echo "compare with: $drift compare $out"
