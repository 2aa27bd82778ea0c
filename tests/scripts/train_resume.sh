#!/usr/bin/env bash
# Checkpoints: a run killed with SIGKILL at an arbitrary moment and continued with --resume writes
# the same metrics.jsonl bytes (timing fields aside) as an uninterrupted run, also when the resumed
# part runs at another thread count; Ctrl-C (SIGINT) stops with a checkpoint and exit 130 (SIGUSR1,
# the preemption notice, with exit 75), and
# --resume finishes the run; a truncated or foreign checkpoint is an error naming the file.
# The policy exercises every carried state: delayed scaling (amax history) of matmul operands and of
# an elementwise tensor, stochastic rounding,
# bf16 master weights with sr, 8-bit optimizer state and dynamic loss scaling.
# Usage: train_resume.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

cat > cfg.json <<JSON
{ "seed": 5,
  "model": {"kind": "mlp", "context": 8, "embed": 8, "hidden": 48},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 400, "batch": 16, "eval_every": 50, "eval_batches": 2, "log_every": 1, "checkpoint_every": 7},
  "precision": {"matmul": [{"preset": "fp8_delayed_hybrid"},
                           {"match": {"role": "grad_weight"}, "a": {"rounding": "sr"}}],
                "elementwise": [{"match": {"tensor": "act_out"},
                                 "quantizer": {"format": "fp8_e4m3", "scaling": {"kind": "delayed", "history": 4}}}],
                "master": {"format": "bf16", "rounding": "sr"},
                "optimizer_state": "int8_block",
                "loss_scale": {"kind": "dynamic", "init": 1024, "interval": 20}} }
JSON

OMP_NUM_THREADS=1 "$drift" train --config cfg.json --quiet --out whole

# SIGKILL twice at moments that depend on the machine's speed, then resume at 2 threads.
OMP_NUM_THREADS=1 "$drift" train --config cfg.json --quiet --out killed & pid=$!
while [ ! -f killed/checkpoint.bin ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
sleep 0.2; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
[ -f killed/summary.json ] && fail "the run finished before it could be killed; make it longer"
OMP_NUM_THREADS=2 "$drift" train --config cfg.json --quiet --out killed --resume & pid=$!
sleep 0.5; kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
OMP_NUM_THREADS=2 "$drift" train --config cfg.json --quiet --out killed --resume
cmp <(no_timing whole/metrics.jsonl) <(no_timing killed/metrics.jsonl) || fail "resumed metrics.jsonl differs from the uninterrupted run"
same_summary whole/summary.json killed/summary.json || fail "summaries differ"

# Ctrl-C: a checkpoint, exit 130, no summary; --resume completes it identically.
OMP_NUM_THREADS=1 "$drift" train --config cfg.json --quiet --out intr & pid=$!
while [ ! -f intr/checkpoint.bin ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
kill -INT $pid; rc=0; wait $pid || rc=$?
[ "$rc" = 130 ] || fail "SIGINT: expected exit 130, got $rc"
[ -f intr/summary.json ] && fail "an interrupted run must not write summary.json"
"$drift" train --config cfg.json --quiet --out intr --resume
cmp <(no_timing whole/metrics.jsonl) <(no_timing intr/metrics.jsonl) || fail "metrics after Ctrl-C + resume differ"
# provenance.json: the first start and the resume, each with its command line and thread count.
python3 - intr/provenance.json <<'PY' || fail "provenance.json after a resume: $(cat intr/provenance.json)"
import json, sys
inv = json.load(open(sys.argv[1]))["invocations"]
assert [i["resumed"] for i in inv] == [False, True], inv
assert "--resume" in inv[1]["command_line"] and "--resume" not in inv[0]["command_line"], inv
PY

# SIGUSR1 (a scheduler's preemption notice): the same checkpoint, but its own exit status 75 (so a
# job script or drift sweep --run-task knows to requeue), and --resume completes it identically.
OMP_NUM_THREADS=1 "$drift" train --config cfg.json --quiet --out preempt 2> preempt.err & pid=$!
while [ ! -f preempt/checkpoint.bin ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
kill -USR1 $pid; rc=0; wait $pid || rc=$?
[ "$rc" = 75 ] || fail "SIGUSR1: expected exit 75, got $rc: $(cat preempt.err)"
grep -q "preempted (SIGUSR1) after step" preempt.err || fail "SIGUSR1 message: $(cat preempt.err)"
[ -f preempt/summary.json ] && fail "a preempted run must not write summary.json"
"$drift" train --config cfg.json --quiet --out preempt --resume
cmp <(no_timing whole/metrics.jsonl) <(no_timing preempt/metrics.jsonl) || fail "metrics after SIGUSR1 + resume differ"

# Bad checkpoints: clear errors naming the file, exit non-zero, the run directory left as it was.
cp -r whole trunc
head -c 1000 whole/checkpoint.bin > trunc/checkpoint.bin
before=$(md5sum trunc/metrics.jsonl)
rc=0; "$drift" train --config cfg.json --quiet --out trunc --resume 2> err.txt || rc=$?
[ "$rc" != 0 ] || fail "a truncated checkpoint was accepted"
grep -q "trunc/checkpoint.bin" err.txt && grep -q "truncated" err.txt || fail "unclear error: $(cat err.txt)"
[ "$(md5sum trunc/metrics.jsonl)" = "$before" ] || fail "a failed resume changed metrics.jsonl"
echo '{"hello": 1}' > trunc/checkpoint.bin
rc=0; "$drift" train --config cfg.json --quiet --out trunc --resume 2> err.txt || rc=$?
[ "$rc" != 0 ] && grep -q "not a drift checkpoint" err.txt || fail "a foreign file was accepted: $(cat err.txt)"
rc=0; "$drift" train --config cfg.json --quiet --out whole --resume --set train.lr=0.5 2> err.txt || rc=$?
[ "$rc" != 0 ] && grep -q "train.lr" err.txt || fail "a different config resumed: $(cat err.txt)"
echo "train_resume: OK (SIGKILL x2 + resume at 2 threads, Ctrl-C + resume, SIGUSR1 + resume, bad checkpoints)"
