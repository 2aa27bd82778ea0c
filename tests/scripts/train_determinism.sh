#!/usr/bin/env bash
# drift train end to end: byte-identical metrics.jsonl (timing fields aside) at OMP_NUM_THREADS=1
# and 2, config errors exit 2 and write nothing, data errors name the file.
# Usage: train_determinism.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

# A tiny MLP (and a tiny attention model) under MXFP8 with stochastic rounding of A (random bits in play).
cat > tiny.json <<JSON
{ "seed": 3,
  "model": {"kind": "mlp", "context": 8, "embed": 8, "hidden": 32},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 30, "batch": 8, "eval_every": 10, "eval_batches": 2, "log_every": 1},
  "precision": {"matmul": [{"preset": "mxfp8_e4m3"},
                           {"match": {"role": "grad_weight"}, "a": {"rounding": "sr"}}]} }
JSON
for kind in mlp attn; do
  extra=()
  [ "$kind" = attn ] && extra=(--set model.kind=attn --set model.d_model=16 --set model.heads=2 --set model.layers=1)
  OMP_NUM_THREADS=1 "$drift" train --config tiny.json --quiet --out r1 "${extra[@]}"
  OMP_NUM_THREADS=2 "$drift" train --config tiny.json --quiet --out r2 "${extra[@]}"
  [ "$(wc -l < r1/metrics.jsonl)" -eq 30 ] || fail "$kind: expected 30 metrics lines"
  # The raw files differ at most in the timing fields, the last two on every line.
  [ "$(grep -c ',"tokens_per_s":[^,]*,"elapsed_s":[^,]*}$' r1/metrics.jsonl)" -eq 30 ] \
    || fail "$kind: tokens_per_s and elapsed_s are not the last fields of every line"
  cmp <(no_timing r1/metrics.jsonl) <(no_timing r2/metrics.jsonl) \
    || fail "$kind: metrics bytes differ between 1 and 2 threads outside the timing fields"
  python3 - r1 <<'PY' || fail "$kind: summary/config content"
import json, sys, math
d = sys.argv[1]
s = json.load(open(d + "/summary.json")); c = json.load(open(d + "/config.json"))
assert s["diverged"] is False and s["steps_completed"] == 30, s
assert math.isfinite(s["final_val_loss"]) and s["final_val_loss"] < math.log(256), s
assert c["seed"] == 3 and c["model"]["vocab"] == 256 and c["version"], c
lines = [json.loads(l) for l in open(d + "/metrics.jsonl")]
assert [l["step"] for l in lines] == list(range(30))
assert [l["val_loss"] is not None for l in lines].count(True) == 3  # steps 9, 19, 29
assert all("forward" in k or "grad" in k for k in lines[0]["sites"])
PY
  rm -rf r1 r2
done

# A different seed changes the run.
"$drift" train --config tiny.json --quiet --out s0 --set train.steps=5
"$drift" train --config tiny.json --quiet --out s1 --set train.steps=5 --seed 4
no_timing s0/metrics.jsonl > s0.txt; no_timing s1/metrics.jsonl > s1.txt
! cmp -s s0.txt s1.txt || fail "seed had no effect"

# Config errors: exit 2, the JSON path in the message, nothing written.
expect_error() {  # <pattern> <args...>
  local pat="$1"; shift
  set +e; "$drift" train --config tiny.json --quiet --out bad "$@" 2> err.txt; rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "expected exit 2 for $*, got $rc"
  grep -q -- "$pat" err.txt || fail "expected '$pat' in: $(cat err.txt)"
  [ ! -e bad ] || fail "run directory written despite error ($*)"
}
expect_error "train.lrr: unknown key" --set train.lrr=0.1
expect_error "train.lr: expected a number" --set train.lr=fast
expect_error "train.steps: expected an integer" --set train.steps=0
expect_error "model.kind: unknown value 'rnn'" --set model.kind=rnn
expect_error "precision.matmul\[1\].a.rounding" --set 'precision.matmul.1.a.rounding=sideways'
expect_error "precision.matmul\[0\].match.role" --set 'precision.matmul.0.match={"role": "fwd"}'
expect_error "nosuch.txt: no such file" --set data.path=nosuch.txt
: > empty.txt
expect_error "empty.txt: empty file" --set data.path=empty.txt
printf 'hello\n' > short.txt
expect_error "short.txt: too short" --set data.path=short.txt

# explain: every site of the model, with the cascade applied.
"$drift" explain --config tiny.json > explain.txt
grep -A1 "^hidden0.grad_weight$" explain.txt | grep -q "^  a  *activation: fp8_e4m3 sr24 saturate; scale e8m0 per 32 along K" ||
  fail "explain: $(cat explain.txt)"
grep -A1 "^hidden0.forward$" explain.txt | grep -q "^  a  *activation: fp8_e4m3 rne saturate; scale e8m0 per 32 along K" ||
  fail "explain: $(cat explain.txt)"
"$drift" explain --config tiny.json --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert [s["site"] for s in j][:3] == ["hidden0.forward", "hidden0.grad_input", "hidden0.grad_weight"]
assert j[2]["policy"]["a"]["rounding"] == "sr" and j[0]["policy"]["a"]["rounding"] == "rne"
' || fail "explain --json"
echo "train_determinism: OK"
