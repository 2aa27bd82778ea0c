#!/usr/bin/env bash
# Training bit-identity between backends: mlp and attn under mxfp8_e4m3, nvfp4 and the H100 FP8
# tensor-core model (h100_fp8_tensorcore: per-tensor fp8_e4m3 operands, inner sums fused as
# h100_fp8_e4m3), the weight gradient's activation operand stochastically rounded, each trained
# with backend cpu and backend cuda from the same config and seed. metrics.jsonl (timing fields aside) and summary.json (timing
# aside) must be byte-identical. Prints one line per model and preset; exits non-zero on any
# difference or failed run.
# Usage: scripts/backend_identity.sh DRIFT WORKDIR MLP_STEPS ATTN_STEPS
#   DRIFT: a drift built with a CUDA backend (build/drift on a GPU, build/drift_emu on the emulator)
#   env JOBS: runs at once (default 1), OMP_NUM_THREADS as usual (results do not depend on it)
set -uo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
drift="$1" work="$2" mlp_steps="$3" attn_steps="$4"
jobs="${JOBS:-1}"
mkdir -p "$work"
strip_metrics() { sed 's/,"tokens_per_s".*//' "$1"; }
# summary.json without the timing fields and the routes (the kernels each backend ran).
strip_summary() {
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
for k in ("wall_s", "steps_per_s", "tokens_per_s", "routes"): s.pop(k, None)
print(json.dumps(s, indent=2))' "$1"
}
variants="mxfp8_e4m3 nvfp4 h100_fp8_tensorcore"
# The --set arguments that make the config's first matmul rule a variant.
variant_sets() {
  case "$1" in
    h100_fp8_tensorcore)
      echo "--set precision.matmul.0.preset=fp8_tensor_e4m3 --set precision.matmul.0.inner.fused=h100_fp8_e4m3" ;;
    *) echo "--set precision.matmul.0.preset=$1" ;;
  esac
}

runs=()
for kind in mlp attn; do
  steps=$mlp_steps
  [ "$kind" = attn ] && steps=$attn_steps
  cat > "$work/$kind.json" <<JSON
{ "seed": 11,
  "model": {"kind": "$kind", "context": 16, "embed": 32, "hidden": 128, "d_model": 32, "heads": 2, "layers": 2},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": $steps, "batch": 16, "eval_every": $(( steps > 1 ? steps / 2 : 1 )), "eval_batches": 2,
            "log_every": 1},
  "precision": {"matmul": [{"preset": "mxfp8_e4m3"},
                           {"match": {"role": "grad_weight"}, "a": {"rounding": "sr"}}]} }
JSON
  for preset in $variants; do
    for be in cpu cuda; do runs+=("$kind $preset $be"); done
  done
done

run_one() {
  local kind=$1 preset=$2 be=$3
  # shellcheck disable=SC2046 # (variant_sets prints whole arguments without spaces in them)
  "$drift" train --config "$work/$kind.json" --quiet --out "$work/$kind-$preset-$be" --set "backend=$be" \
    $(variant_sets "$preset") > "$work/$kind-$preset-$be.log" 2>&1
}
running=0
for r in "${runs[@]}"; do
  run_one $r &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait

failed=0
for kind in mlp attn; do
  for preset in $variants; do
    a="$work/$kind-$preset-cpu" b="$work/$kind-$preset-cuda"
    label="train $kind $preset: cpu == cuda"
    if [ ! -s "$a/metrics.jsonl" ] || [ ! -s "$b/metrics.jsonl" ]; then
      cat "$a.log" "$b.log"
      echo "$label FAIL (a run failed)"
      failed=1
    elif cmp -s <(strip_metrics "$a/metrics.jsonl") <(strip_metrics "$b/metrics.jsonl") &&
         cmp -s <(strip_summary "$a/summary.json") <(strip_summary "$b/summary.json"); then
      echo "$label ok ($(wc -l < "$a/metrics.jsonl") metrics lines, summary.json too)"
    else
      diff <(strip_metrics "$a/metrics.jsonl") <(strip_metrics "$b/metrics.jsonl") | head -4 | cut -c1-300
      echo "$label FAIL"
      failed=1
    fi
  done
done
exit $failed
