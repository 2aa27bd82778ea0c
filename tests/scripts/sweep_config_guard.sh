#!/usr/bin/env bash
# drift sweep reads the base config once to check every run, but each run's drift train reads it
# again when it starts. A config edited while the sweep runs must not silently give the later runs
# another config than the one checked: those runs are not started and are reported failed, naming
# the key that changed, and the sweep exits non-zero. (A run caught between its launch and its
# reading of the file is reported failed once it ends, by comparing its config.json; that window
# is too narrow to hit on purpose here.) Rerunning the sweep then refuses the finished
# run of the old config (the existing rule), so nothing mixes two configs.
# Usage: sweep_config_guard.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
export OMP_NUM_THREADS=1

cat > base.json <<JSON
{ "seed": 1,
  "model": {"kind": "mlp", "context": 8, "embed": 8, "hidden": 256},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 1000, "batch": 32, "lr": 0.01, "warmup": 0, "eval_every": 20, "eval_batches": 2, "log_every": 5} }
JSON
"$drift" sweep --config base.json --seeds 1-2 -j 1 --out sw > sweep.txt 2>&1 &
sweep_pid=$!
# Hold run 1 (seed 1) still while the config changes: with -j 1, run 2 cannot start before it ends.
child=""
for _ in $(seq 1 3000); do
  child=$(pgrep -f -- "--out sw/base/seed1" || true)
  [[ -n "$child" ]] && break
  sleep 0.01
done
[[ -n "$child" ]] || fail "run 1 never started: $(cat sweep.txt)"
kill -STOP $child
# Let it go until it has read its config (it writes config.json right after), so that run 1
# deterministically trains the config the sweep checked; then hold it again.
for _ in $(seq 1 3000); do
  [[ -s sw/base/seed1/config.json ]] && break
  kill -CONT $child; sleep 0.002; kill -STOP $child
done
[[ -s sw/base/seed1/config.json ]] || fail "run 1 never wrote its config.json"
sed -i 's/"lr": 0.01/"lr": 0.02/' base.json
kill -CONT $child
rc=0; wait $sweep_pid || rc=$?
[[ $rc -ne 0 ]] || fail "sweep exited 0 although run 2's config changed: $(cat sweep.txt)"
grep -q "train.lr" sweep.txt || fail "the report does not name the changed key: $(cat sweep.txt)"
grep -q "changed since the sweep checked it" sweep.txt || fail "no reason given: $(cat sweep.txt)"
[[ -f sw/base/seed1/summary.json ]] || fail "run 1 should have finished with the checked config"
[[ ! -e sw/base/seed2/metrics.jsonl ]] || fail "run 2 started with the edited config"
python3 - <<'PY' || fail "sweep.json statuses"
import json
runs = {r["seed"]: r for r in json.load(open("sw/sweep.json"))["runs"]}
assert runs[1]["status"] == "ok", runs[1]
assert runs[2]["status"] == "failed", runs[2]
assert json.load(open("sw/base/seed1/config.json"))["train"]["lr"] == 0.01
PY
# Rerun with the edited config: the finished run of the old config is refused (exit 2), not mixed in.
rc=0; "$drift" sweep --config base.json --seeds 1-2 -j 1 --out sw > again.txt 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "rerun with another config exited $rc, expected 2: $(cat again.txt)"
echo "sweep_config_guard: OK"
