#!/usr/bin/env bash
# One run at a time in a run directory. Two `drift train` started at once into one --out (different
# configs): exactly one runs, the other is refused (exit 2) naming the directory and the running
# one's pid, and writes nothing; a --resume of the run still going is refused the same way; once the
# run has stopped (Ctrl-C: a checkpoint), --resume continues it. A finished run is replaced only with
# --force. Usage: run_dir_lock.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

cat > long.json <<JSON
{ "model": {"kind": "mlp", "context": 4, "embed": 4, "hidden": 8},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 1000000, "batch": 2, "eval_every": 1000, "eval_batches": 1, "log_every": 1},
  "divergence": {"enabled": false} }
JSON

# Both at once: A and B (another learning rate) into the same directory.
"$drift" train --config long.json --out D --quiet 2> a.err & a=$!
"$drift" train --config long.json --out D --quiet --set train.lr=0.01 2> b.err & b=$!
# The refused one exits at once; the other runs until stopped.
refused=""
for _ in $(seq 1 500); do
  if ! kill -0 $a 2>/dev/null; then refused=a; break; fi
  if ! kill -0 $b 2>/dev/null; then refused=b; break; fi
  sleep 0.02
done
[ -n "$refused" ] || { kill -9 $a $b 2>/dev/null; fail "both runs are running in one directory"; }
if [ $refused = a ]; then running=$b; rc=0; wait $a || rc=$?; err=a.err; else running=$a; rc=0; wait $b || rc=$?; err=b.err; fi
kill -0 $running 2>/dev/null || fail "neither run is running: $(cat a.err b.err)"
[ "$rc" = 2 ] || { kill -9 $running; fail "the refused run exited $rc, expected 2: $(cat $err)"; }
grep -qF "D: a drift run is in progress in this directory (pid $running)" $err ||
  { kill -9 $running; fail "the refusal does not name the directory and the running pid $running: $(cat $err)"; }

# The running run's files are its own: its config.json, written once, with its learning rate.
for _ in $(seq 1 500); do [ -s D/metrics.jsonl ] && break; sleep 0.02; done
lr=$(python3 -c 'import json; print(json.load(open("D/config.json"))["train"]["lr"])')
if [ $running = $b ]; then want=0.01; else want=0.003; fi
[ "$lr" = "$want" ] || { kill -9 $running; fail "D/config.json has lr $lr, the running run's is $want"; }

# --resume of the run still going: refused, nothing written.
before=$(cd D && ls -a)
rc=0; "$drift" train --config long.json --out D --quiet --resume $([ $running = $b ] && echo --set train.lr=0.01) 2> r.err || rc=$?
[ "$rc" = 2 ] || { kill -9 $running; fail "--resume of a running run: exit $rc, expected 2"; }
grep -qF "(pid $running)" r.err || { kill -9 $running; fail "--resume refusal does not name pid $running: $(cat r.err)"; }

# Ctrl-C: the run stops with a checkpoint and releases the directory; --resume continues it.
kill -INT $running; rc=0; wait $running || rc=$?
[ "$rc" = 130 ] || fail "the interrupted run exited $rc, expected 130"
[ -f D/checkpoint.bin ] || fail "no checkpoint after Ctrl-C"
timeout 2 "$drift" train --config long.json --out D --quiet --resume $([ $running = $b ] && echo --set train.lr=0.01) \
  --set train.steps=1000000 2> r2.err && fail "the resumed run finished 1000000 steps in 2 s?"
grep -q "in progress" r2.err && fail "--resume after the run stopped was refused: $(cat r2.err)"

# A finished run: replaced only with --force.
sed 's/1000000/3/' long.json > short.json
"$drift" train --config short.json --out F --quiet || fail "short run"
rc=0; "$drift" train --config short.json --out F --quiet 2> f.err || rc=$?
[ "$rc" = 2 ] && grep -qF "F: holds a finished run" f.err || fail "a finished run was not protected: exit $rc $(cat f.err)"
"$drift" train --config short.json --out F --quiet --force || fail "--force did not replace the finished run"
echo "run_dir_lock: ok"
