#!/usr/bin/env bash
# The command line helps: drift --help lists the workflow first; a mistyped command gets a
# suggestion (exit 2); legal but surprising settings are warned about; the help of arith says its
# default overflow and the canonical NaN, matmul's lists the accumulator presets; drift train lists
# diag.jsonl among its results and points at drift report. Usage: cli_friendly.sh <drift> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
export OMP_NUM_THREADS=1

"$drift" --help > help.txt
python3 - <<'PY' || fail "drift --help order: $(cat help.txt)"
t = open("help.txt").read()
order = ["Workflow:", "train", "sweep", "compare", "report", "export", "bisect", "explain", "Engine tools:", "arith", "matmul"]
pos = [t.index(("\n  " + w + " ") if not w.endswith(":") else w) for w in order]
assert pos == sorted(pos), list(zip(order, pos))
PY

set +e
"$drift" trian --config x.json > out.txt 2> err.txt; rc=$?
set -e
[ $rc -eq 2 ] || fail "unknown command: exit $rc"
grep -q "unknown command 'trian'; did you mean 'train'?" err.txt || fail "no suggestion: $(cat err.txt)"
set +e; "$drift" comapre runs 2> err.txt; set -e
grep -q "did you mean 'compare'" err.txt || fail "no suggestion for comapre: $(cat err.txt)"

"$drift" arith --help > arith.txt
grep -q "saturate (the default" arith.txt && grep -q "canonical NaN" arith.txt && grep -q "fp16 7e00" arith.txt ||
  fail "arith --help: $(cat arith.txt)"
"$drift" matmul --help > matmul.txt
grep -q "Accumulator (tensor-core) presets.*a100_fp16" matmul.txt || fail "matmul --help: $(tail -3 matmul.txt)"

cat > tiny.json <<JSON
{ "model": {"kind": "mlp", "context": 8, "embed": 8, "hidden": 16},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 6, "batch": 4, "warmup": 6, "eval_every": 10, "eval_batches": 1, "log_every": 2},
  "diagnostics": {"every": 3} }
JSON
"$drift" train --config tiny.json --out r > out.txt 2>&1 || fail "train: $(cat out.txt)"
grep -q "warn.*train.warmup (6) >= train.steps (6)" out.txt || fail "no warmup warning: $(cat out.txt)"
grep -q "warn.*train.eval_every (10) > train.steps (6)" out.txt || fail "no eval_every warning: $(cat out.txt)"
grep -q "results: r/{.*diag.jsonl" out.txt || fail "diag.jsonl not listed: $(cat out.txt)"
grep -q "drift report r" out.txt || fail "no pointer to drift report: $(cat out.txt)"
"$drift" train --config tiny.json --set train.warmup=2 --set train.eval_every=3 --out r2 --quiet > out.txt 2>&1
[ ! -s out.txt ] || fail "warnings for ordinary settings: $(cat out.txt)"
echo "cli_friendly: OK"
