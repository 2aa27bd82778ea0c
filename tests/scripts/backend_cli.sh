#!/usr/bin/env bash
# --backend / "backend" where the CUDA backend cannot run (built without CUDA, or no GPU): drift
# matmul, bench gemm and train refuse with a message naming the option or config key, exit 2, and
# write nothing. On a machine with a GPU the same commands must instead succeed (checked too).
# Usage: backend_cli.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

printf '1 2\n3 4\n' > a.txt
printf '5 6\n7 8\n' > b.txt
cat > tiny.json <<JSON
{ "seed": 1, "backend": "cuda",
  "model": {"kind": "mlp", "context": 4, "embed": 4, "hidden": 8},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 2, "batch": 2, "eval_every": 2, "eval_batches": 1} }
JSON

# cpu is always there and gives the hand-computed product [[19, 22], [43, 50]].
"$drift" matmul --a a.txt --b b.txt --policy fp32 --backend cpu --out c.txt > cpu.json
python3 -c 'import json,sys; assert json.load(open("cpu.json"))["backend"] == "cpu"'
[ "$(tr -s ' \n' ' ' < c.txt | sed 's/ $//')" = "19 22 43 50" ] || fail "cpu product: $(cat c.txt)"

set +e
"$drift" matmul --a a.txt --b b.txt --policy fp32 --backend tpu --out d.txt 2> unknown.err; rc=$?
set -e
[ $rc -eq 2 ] || fail "unknown backend: exit $rc"
grep -q "unknown backend 'tpu'" unknown.err || fail "unknown backend message: $(cat unknown.err)"
[ ! -e d.txt ] || fail "unknown backend wrote output"

set +e
"$drift" matmul --a a.txt --b b.txt --policy fp32 --backend cuda --out g.txt > g.json 2> g.err; rc=$?
set -e
if [ $rc -eq 0 ]; then
  # A CUDA device: matmul, bench gemm and train all run on it, with the CPU's bits.
  echo "a CUDA device is present: cuda runs (matmul, bench gemm, train)"
  cmp c.txt g.txt || fail "cuda product differs from cpu"
  "$drift" bench gemm --backend cuda --shapes 16x16x16 --policies fp32 --min-seconds 0.01 > bench.out 2> bench.err ||
    fail "bench gemm --backend cuda on a GPU: $(cat bench.err)"
  grep -q "16x16x16" bench.out || fail "bench gemm --backend cuda printed no row for 16x16x16: $(cat bench.out)"
  "$drift" train --config tiny.json --quiet --out run 2> train.err || fail "train backend cuda on a GPU: $(cat train.err)"
  "$drift" train --config tiny.json --quiet --out run_cpu --set backend=cpu || fail "train backend cpu"
  cmp <(no_timing run/metrics.jsonl) <(no_timing run_cpu/metrics.jsonl) || fail "train: cuda metrics differ from cpu"
else
  echo "no GPU: checking the refusals instead"
  [ $rc -eq 2 ] || fail "matmul --backend cuda without a GPU: exit $rc"
  grep -q -- "--backend" g.err || fail "matmul message does not name --backend: $(cat g.err)"
  grep -Eq "without CUDA|no usable GPU" g.err || fail "matmul message does not say why: $(cat g.err)"
  [ ! -e g.txt ] || fail "matmul --backend cuda wrote output"

  set +e
  "$drift" bench gemm --backend cuda --shapes 16x16x16 --policies fp32 --min-seconds 0.01 > bench.out 2> bench.err; rc=$?
  set -e
  [ $rc -eq 2 ] || fail "bench gemm --backend cuda without a GPU: exit $rc"
  grep -q -- "--backend cuda" bench.err || fail "bench message: $(cat bench.err)"

  set +e
  "$drift" train --config tiny.json --quiet --out run 2> train.err; rc=$?
  set -e
  [ $rc -eq 2 ] || fail "train backend cuda without a GPU: exit $rc"
  grep -q "^drift: error: backend: " train.err || fail "train message does not name the key: $(cat train.err)"
  [ ! -e run ] || fail "train with an unusable backend wrote $(ls run)"
fi

set +e
"$drift" train --config tiny.json --set backend=gpu --quiet --out run 2> bad.err; rc=$?
set -e
[ $rc -eq 2 ] || fail "train backend=gpu: exit $rc"
grep -q "backend: unknown value 'gpu'" bad.err || fail "bad backend value message: $(cat bad.err)"
echo "ok"
