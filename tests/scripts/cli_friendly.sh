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
# MXFP8 with hidden 16 (head.forward's K) and batch 4 (grad_weight's K): blocks of 32 hold 16 and 4
# elements; hidden0.forward's K is context x embed = 64, two whole blocks: not named.
"$drift" train --config tiny.json --set 'precision.matmul=[{"preset": "mxfp8_e4m3"}]' --out r3 --quiet 2> err.txt ||
  fail "train mxfp8: $(cat err.txt)"
grep -q "warning: MX scale blocks shorter.*head.forward.a 16 of 32.*head.grad_weight.b 4 of 32" err.txt ||
  fail "no short-block warning: $(cat err.txt)"
grep -q "hidden0.forward" err.txt && fail "hidden0.forward (K 64) named: $(cat err.txt)"
"$drift" train --config tiny.json --set train.warmup=2 --set train.eval_every=3 --out r2 --quiet > out.txt 2>&1
[ ! -s out.txt ] || fail "warnings for ordinary settings: $(cat out.txt)"
# explain: per site the rounding, overflow, scale and order, and the rule that set each part.
cfg="$src/configs/mlp_mxfp8_fp32_from_1000.json"   # mxfp8_e4m3 everywhere; fp32 from step 1000 (schedule)
"$drift" explain --config "$cfg" > ex0.txt || fail "explain"
python3 - ex0.txt <<'PY' || fail "explain at step 0: $(head -9 ex0.txt)"
import sys
t = open(sys.argv[1]).read().split("\n")
i = t.index("hidden0.grad_weight")
want = [("a", "activation: fp8_e4m3 rne saturate; scale e8m0 per 32 along K, floor", "precision.matmul[0]"),
        ("b", "gradient: fp8_e4m3 rne saturate; scale e8m0 per 32 along K, floor", "precision.matmul[0]"),
        ("product", "exact", "default"),
        ("inner sum", "fp32 rne ieee sequential within each K-block", "default"),
        ("outer sum", "fp32 rne ieee sequential across K-blocks", "default"),
        ("output", "fp32 rne ieee", "default")]
for line, (part, what, rule) in zip(t[i + 1:i + 7], want):
    assert line.split() == part.split() + what.split() + ["<-", rule], (line, part, what, rule)
PY
"$drift" explain --config "$cfg" --step 1000 --fields > ex1.txt || fail "explain --step"
grep -q "^  a  *activation: fp32 rne ieee  *<- precision.schedule\[0\].matmul\[0\]" ex1.txt || fail "explain at step 1000: $(head -9 ex1.txt)"
grep -q "^      /a/scaling/kind  *precision.schedule\[0\].matmul\[0\]" ex1.txt || fail "explain --fields: $(head -12 ex1.txt)"
"$drift" explain --config "$cfg" --json | python3 -c "
import json, sys
j = json.load(sys.stdin)
assert j[0]['set_by'] == {'/a/format': 'precision.matmul[0]', '/a/scaling/kind': 'precision.matmul[0]',
                          '/b/format': 'precision.matmul[0]', '/b/scaling/kind': 'precision.matmul[0]'}, j[0]['set_by']
" || fail "explain --json set_by"
echo "cli_friendly: OK"
