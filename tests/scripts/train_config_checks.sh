#!/usr/bin/env bash
# drift train / explain / sweep check a config completely before anything is written, and a run
# directory holds one run: scale blocks that do not nest (via precision.matmul, a schedule entry or
# a diagnostics probe) are a config error (exit 2) naming the key, with the run directory untouched
# and no sweep run started; a run's config.json is itself a config (drift train --config accepts
# it; a "version" this build does not read is refused); train.beta1/beta2 = 1 are refused; a config
# path that is a directory and a negative --seed are input errors; a new run in a finished run's
# directory is refused unless --force, and then removes that run's files first; --resume before the first checkpoint starts from step
# 0 with the bytes of an uninterrupted run.
# Usage: train_config_checks.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

cat > small.json <<JSON
{ "model": {"kind": "mlp", "context": 8, "embed": 8, "hidden": 32},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 40, "batch": 8, "eval_every": 20, "eval_batches": 2, "log_every": 1},
  "precision": {"matmul": "mxfp8_e4m3"} }
JSON

# expect_error RC PATTERN command...: the exit status and a message matching PATTERN on stderr.
expect_error() {
  local want=$1 pattern=$2 rc=0
  shift 2
  "$@" > out.txt 2> err.txt || rc=$?
  [ "$rc" = "$want" ] || fail "$*: expected exit $want, got $rc: $(cat err.txt)"
  grep -qF -- "$pattern" err.txt || fail "$*: expected '$pattern' in the error, got: $(cat err.txt)"
}
# fingerprint DIR: every file's name and checksum.
fingerprint() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 md5sum); }

"$drift" train --config small.json --out X --quiet || fail "the reference run failed"
before=$(fingerprint X)

# --- 1: scale blocks that do not nest (32 and 7) --------------------------------------------------
nest='[{"preset": "mxfp8_e4m3", "b": {"scaling": {"kind": "block", "block": 7}}}]'
expect_error 2 "precision.matmul[0].b.scaling.block" "$drift" train --config small.json --out X --quiet --set "precision.matmul=$nest"
grep -q "do not nest" err.txt || fail "the error does not say what is wrong: $(cat err.txt)"
[ "$(fingerprint X)" = "$before" ] || fail "a config error changed the run directory"
expect_error 2 "scale blocks of a (24) and b (32)" "$drift" train --config small.json --out N1 --quiet \
  --set 'precision.matmul=[{"preset": "mxfp8_e4m3", "a": {"scaling": {"kind": "block", "block": 24}}}]'
[ -e N1 ] && fail "a config error created the run directory"
expect_error 2 "precision.matmul[1].operand.scaling.block" "$drift" train --config small.json --out N2 --quiet \
  --set 'precision.matmul=[{"preset": "mxfp8_e4m3"}, {"match": {"class": "weight"}, "operand": {"scaling": {"kind": "block", "block": 5}}}]'
[ -e N2 ] && fail "a config error created the run directory"
# Blocks that nest (32 and 16) are fine.
"$drift" explain --config small.json \
  --set 'precision.matmul=[{"preset": "mxfp8_e4m3", "b": {"scaling": {"kind": "block", "block": 16}}}]' > ok.txt ||
  fail "nesting blocks 32/16 refused: $(cat ok.txt)"
grep -q "weight: fp8_e4m3 rne saturate; scale e8m0 per 16 along K" ok.txt || fail "explain does not show the 16-block: $(cat ok.txt)"
# ... through a schedule entry, which applies only at step 30: still refused before step 0.
expect_error 2 "precision.schedule[0].matmul[0].b.scaling.block" "$drift" train --config small.json --out X --quiet \
  --set "precision.schedule=[{\"step\": 30, \"matmul\": $nest}]"
[ "$(fingerprint X)" = "$before" ] || fail "a schedule error changed the run directory"
# ... through a diagnostics probe.
expect_error 2 "diagnostics.probes[0][0].b.scaling.block" "$drift" train --config small.json --out X --quiet \
  --set diagnostics.every=10 --set "diagnostics.probes=[$nest]"
[ "$(fingerprint X)" = "$before" ] || fail "a probe error changed the run directory"
# drift explain (at any --step) and drift sweep refuse the same, sweep before any run starts.
expect_error 2 "precision.matmul[0].b.scaling.block" "$drift" explain --config small.json --set "precision.matmul=$nest"
expect_error 2 "precision.schedule[0].matmul[0].b.scaling.block" "$drift" explain --config small.json \
  --set "precision.schedule=[{\"step\": 30, \"matmul\": $nest}]"
expect_error 2 "diagnostics.probes[0][0].b.scaling.block" "$drift" explain --config small.json \
  --set "diagnostics.probes=[$nest]"
expect_error 2 "precision.matmul[0].b.scaling.block" "$drift" sweep --config small.json --seeds 1-2 --out SW \
  --set "precision.matmul=$nest"
[ -e SW ] && fail "sweep started runs of a config that cannot run"
expect_error 2 "diagnostics.probes[0][0].b.scaling.block" "$drift" sweep --config small.json --seeds 1 --out SW \
  --set diagnostics.every=10 --set "diagnostics.probes=[$nest]"
[ -e SW ] && fail "sweep started runs of a config that cannot run"
# drift matmul's --policy is checked the same way (exit 2, not a failure mid-product).
printf '1 2\n3 4\n' > a.txt
expect_error 2 "policy.b.scaling.block" "$drift" matmul --a a.txt --b a.txt --out c.txt \
  --policy '{"preset": "mxfp8_e4m3", "b": {"scaling": {"kind": "block", "block": 7}}}'
[ -e c.txt ] && fail "matmul wrote its output"

# --- 3: a run's config.json is a config -------------------------------------------------------------
"$drift" train --config X/config.json --out R --quiet || fail "train --config RUN/config.json: exit $?"
cmp <(no_timing X/metrics.jsonl) <(no_timing R/metrics.jsonl) || fail "the config.json rerun differs from its run"
diff <(grep -v '"dir":' X/config.json) <(grep -v '"dir":' R/config.json) || fail "config.json does not round-trip (output.dir aside)"
"$drift" explain --config X/config.json > /dev/null || fail "explain --config RUN/config.json: exit $?"
sed 's/"version": "[^"]*"/"version": "99.0.0"/' X/config.json > future.json
expect_error 2 "version" "$drift" train --config future.json --out F --quiet
grep -q "99.0.0" err.txt || fail "the version error does not name the version: $(cat err.txt)"
[ -e F ] && fail "a version error created the run directory"
sed 's/"version": "[^"]*"/"version": 3/' X/config.json > badver.json
expect_error 2 "version" "$drift" explain --config badver.json

# --- 4: AdamW betas must be below 1 -----------------------------------------------------------------
expect_error 2 "train.beta1" "$drift" train --config small.json --out B --quiet --set train.beta1=1
grep -qF "[0, 1)" err.txt || fail "the range is not stated: $(cat err.txt)"
expect_error 2 "train.beta2" "$drift" train --config small.json --out B --quiet --set train.beta2=1
[ -e B ] && fail "a beta error created the run directory"
"$drift" explain --config small.json --set train.beta2=0.999999 > /dev/null || fail "beta2 0.999999 refused"

# --- 6: a config path that is a directory -----------------------------------------------------------
expect_error 2 "is a directory" "$drift" train --config X --out D --quiet
grep -qF "'X'" err.txt || fail "the error does not name the path: $(cat err.txt)"
expect_error 2 "is a directory" "$drift" explain --config X

# --- 7: negative seeds, everywhere -----------------------------------------------------------------
expect_error 2 "--seed: expected an integer >= 0" "$drift" train --config small.json --out S --quiet --seed -1
[ -e S ] && fail "a negative seed started a run"
expect_error 2 "--seed: expected an integer >= 0" "$drift" explain --config small.json --seed -3
expect_error 2 "--seed: expected an integer >= 0" "$drift" matmul --a a.txt --b a.txt --out c.txt --policy fp32 --seed -1
expect_error 2 "--seed: expected an integer >= 0" "$drift" quantize --in a.txt --out q.txt --quantizer fp8_e4m3 --seed -1
echo "1 2" > ops.txt
expect_error 2 "--seed: expected an integer >= 0" "$drift" arith --op add --format fp32 --decimal --seed -1 < ops.txt
[ -e c.txt ] || [ -e q.txt ] && fail "a command with a negative seed wrote its output"
"$drift" matmul --a a.txt --b a.txt --out c.txt --policy fp32 --seed 0 > /dev/null || fail "--seed 0 refused"

# --- 2: a new run in an old run's directory starts clean --------------------------------------------
"$drift" train --config small.json --out K --quiet --set train.checkpoint_every=10 --set train.keep_checkpoints=true \
  --set diagnostics.every=20 --dump-init || fail "the run to be replaced failed"
for f in summary.json checkpoint.bin checkpoint-10.bin diag.jsonl init; do [ -e "K/$f" ] || fail "K/$f missing"; done
echo keep > K/notes.txt
# A config error first: nothing changes.
kbefore=$(fingerprint K)
expect_error 2 "train.lr" "$drift" train --config small.json --out K --quiet --set train.lr=-1
[ "$(fingerprint K)" = "$kbefore" ] || fail "a config error changed the old run's directory"
# Without --force the finished run is not replaced: refused, naming it, nothing changed.
expect_error 2 "K: holds a finished run" "$drift" train --config small.json --out K --quiet --set train.lr=0.02
grep -q -- "--force" err.txt || fail "the refusal does not say how to replace the run: $(cat err.txt)"
[ "$(fingerprint K)" = "$kbefore" ] || fail "the refused run changed the finished run's directory"
# A new run (--force) killed before it finishes: none of the old run's files remain to pass for it.
"$drift" train --config small.json --out K --quiet --set train.steps=100000 --set train.lr=0.02 --force & pid=$!
# (Until the new run has written its config.json and a few steps: the old metrics.jsonl has them too.)
new_run_going() { grep -q '"lr": 0.02' K/config.json 2>/dev/null && grep -q '"step":3,' K/metrics.jsonl 2>/dev/null; }
while ! new_run_going && kill -0 $pid 2>/dev/null; do sleep 0.02; done
new_run_going || fail "the new run did not start"
kill -9 $pid 2>/dev/null || true; wait $pid 2>/dev/null || true
for f in summary.json checkpoint.bin checkpoint-10.bin diag.jsonl init; do
  [ -e "K/$f" ] && fail "K/$f of the previous run survived a new run"
done
[ -f K/notes.txt ] || fail "a file the run does not own was removed"
grep -q '"lr": 0.02' K/config.json || fail "K/config.json is not the new run's"

# --- 5: --resume before the first checkpoint --------------------------------------------------------
# K now holds config.json and a partial metrics.jsonl, no checkpoint (checkpoint_every 0).
expect_error 2 "different config" "$drift" train --config small.json --out K --quiet --resume
grep -q "train.lr\|train.steps" err.txt || fail "the mismatch is not named: $(cat err.txt)"
# A run killed before its first checkpoint: an uninterrupted run's directory without checkpoint.bin
# and summary.json, its metrics.jsonl cut in the middle of a line.
"$drift" train --config small.json --out W --quiet || fail "the uninterrupted run failed"
mkdir K3
cp W/config.json K3/
head -c 3000 W/metrics.jsonl > K3/metrics.jsonl
"$drift" train --config small.json --out K3 --quiet --resume 2> resume.err ||
  fail "--resume without a checkpoint: exit $?: $(cat resume.err)"
grep -q "step 0" resume.err || fail "--resume did not say it starts from step 0: $(cat resume.err)"
cmp <(no_timing W/metrics.jsonl) <(no_timing K3/metrics.jsonl) || fail "the resumed run's metrics differ from an uninterrupted run's"
same_summary W/summary.json K3/summary.json || fail "summaries differ"
# No config.json either: nothing to resume, an error naming checkpoint.bin, nothing written.
mkdir E
expect_error 2 "E/checkpoint.bin" "$drift" train --config small.json --out E --quiet --resume
[ -z "$(ls -A E)" ] || fail "a failed resume wrote to the directory"
echo "train_config_checks: OK"
