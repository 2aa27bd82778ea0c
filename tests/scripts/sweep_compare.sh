#!/usr/bin/env bash
# drift sweep / compare / bisect end to end on a tiny MLP (30 steps, seconds in all): the sweep's
# cross product and sweep.json, resuming (finished runs skipped), a changed config refused, a
# failing run reported while the others go on, compare in every format (CSV and JSON parsed), and
# bisect locating a deliberately broken forward output format to its layer.
# Usage: sweep_compare.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
export OMP_NUM_THREADS=1

cat > tiny.json <<JSON
{ "seed": 1,
  "model": {"kind": "mlp", "context": 8, "embed": 8, "hidden": 32},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 30, "batch": 8, "lr": 0.03, "warmup": 0, "eval_every": 10, "eval_batches": 2, "log_every": 5},
  "divergence": {"after_step": 0} }
JSON
# Policies: a rule list (fp32), and a bare precision section whose forward outputs are rounded to a
# 4-bit format with infinities (largest finite 3) and IEEE overflow: once a logit passes 3 it becomes
# inf and the loss non-finite. At lr 0.03 that happens within 30 steps; at lr 0.01 it does not.
echo '[{"preset": "fp32"}]' > fp32.json
cat > boom.json <<'JSON'
{"matmul": [{"match": {"role": "forward"},
             "output": {"format": {"exp_bits": 2, "man_bits": 1, "inf": true, "nan": "ieee"}, "overflow": "ieee"}}]}
JSON

# --- sweep: 2 policies x 2 learning rates x seeds 1-2 ---
"$drift" sweep --config tiny.json --seeds 1-2 --set train.lr=0.03,0.01 --policies fp32.json boom.json -j 2 --out sw \
  > sweep1.txt || fail "sweep exited $?: $(cat sweep1.txt)"
python3 - <<'PY' || fail "sweep.json"
import json, os
s = json.load(open("sw/sweep.json"))
runs = s["runs"]
assert [r["dir"] for r in runs] == [f"{p}/train.lr={lr}/seed{k}" for p in ("fp32", "boom") for lr in ("0.03", "0.01") for k in (1, 2)], runs
assert s["seeds"] == [1, 2] and s["sets"] == [{"key": "train.lr", "values": [0.03, 0.01]}]
for r in runs:
    d = "sw/" + r["dir"]
    summ = json.load(open(d + "/summary.json")); cfg = json.load(open(d + "/config.json"))
    assert r["exit_code"] == 0 and r["overrides"]["train.lr"] == cfg["train"]["lr"], r
    assert cfg["seed"] == r["seed"] and cfg["output"]["name"] == r["policy"], (r, cfg["output"])
    assert r["status"] == ("diverged" if summ["diverged"] else "ok"), (r, summ)
    assert r["divergence_step"] == summ["divergence_step"]
    assert r["args"][:3] == ["train", "--config", "tiny.json"] and r["args"][-1] == "--quiet"
boom_fast = [r for r in runs if r["policy"] == "boom" and r["overrides"]["train.lr"] == 0.03]
assert all(r["status"] == "diverged" for r in boom_fast), boom_fast
assert all(r["status"] == "ok" for r in runs if r["policy"] == "fp32"), runs
cfg = json.load(open("sw/boom/train.lr=0.03/seed1/config.json"))
assert cfg["precision"]["matmul"][0]["match"] == {"role": "forward"}
PY
grep -q "8 runs" sweep1.txt || fail "sweep progress: $(cat sweep1.txt)"

# Resume: everything is finished, nothing runs again (the files are untouched).
before=$(stat -c %Y sw/fp32/train.lr=0.03/seed1/metrics.jsonl)
"$drift" sweep --config tiny.json --seeds 1-2 --set train.lr=0.03,0.01 --policies fp32.json boom.json -j 2 --out sw --quiet \
  || fail "resumed sweep"
python3 -c '
import json; s = json.load(open("sw/sweep.json"))
assert [r["status"] for r in s["runs"]] == ["skipped-existing"] * 8, s["runs"]
assert s["runs"][4]["divergence_step"] is not None' || fail "resume did not skip"
[ "$(stat -c %Y sw/fp32/train.lr=0.03/seed1/metrics.jsonl)" = "$before" ] || fail "a finished run was rerun"
# An unfinished run (no summary.json) with its checkpoint is continued with --resume, to the same
# bytes; one without a checkpoint starts again.
no_timing sw/fp32/train.lr=0.01/seed2/metrics.jsonl > before.txt
rm sw/fp32/train.lr=0.01/seed2/summary.json
rm sw/boom/train.lr=0.01/seed1/summary.json sw/boom/train.lr=0.01/seed1/checkpoint.bin
"$drift" sweep --config tiny.json --seeds 1-2 --set train.lr=0.03,0.01 --policies fp32.json boom.json --out sw --quiet
python3 -c '
import json; s = json.load(open("sw/sweep.json"))
st = [r["status"] for r in s["runs"]]
assert st.count("skipped-existing") == 6 and st[3] == "ok" and st[6] == "ok", st
assert s["runs"][3]["resumed"] and not s["runs"][6]["resumed"], (s["runs"][3], s["runs"][6])
# args reproduce each run from scratch: never --resume
assert all(r["args"][-1] == "--quiet" and "--resume" not in r["args"] for r in s["runs"]), s["runs"]' \
  || fail "unfinished runs not continued"
cmp before.txt <(no_timing sw/fp32/train.lr=0.01/seed2/metrics.jsonl) || fail "resumed run differs"

# A finished run of a different config in the way: refused before anything runs (exit 2).
set +e; "$drift" sweep --config tiny.json --seeds 1 --set model.hidden=16 --set train.lr=0.03,0.01 \
  --policies fp32.json --out sw 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] || fail "changed config: exit $rc"
grep -q "fp32/train.lr=0.03/seed1: holds a finished run of a different config (/model/hidden differs)" err.txt \
  || fail "changed config message: $(cat err.txt)"
# Bad input: exit 2, nothing written.
set +e; "$drift" sweep --config tiny.json --seeds 3-1 --out bad 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q -- "--seeds: range '3-1' runs backwards" err.txt && [ ! -e bad ] || fail "bad seeds: $rc $(cat err.txt)"
echo '[{"preset": "nope"}]' > nope.json
set +e; "$drift" sweep --config tiny.json --seeds 1 --policies nope.json --out bad 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "precision.matmul\[0\]" err.txt && [ ! -e bad ] || fail "bad policy: $rc $(cat err.txt)"

# A run that fails (its data file is missing) is reported with its log; the other run completes.
set +e; "$drift" sweep --config tiny.json --seeds 5 --set "data.path=$src/data/austen/persuasion.txt,nosuch.txt" \
  --out swf --quiet 2> err.txt; rc=$?; set -e
[ "$rc" -eq 1 ] || fail "failing run: sweep exit $rc"
grep -q "FAILED (exit 2) swf/tiny/data.path=nosuch.txt/seed5" err.txt && grep -q "nosuch.txt: no such file" err.txt \
  || fail "failure report: $(cat err.txt)"
python3 -c '
import json; r = json.load(open("swf/sweep.json"))["runs"]
assert [x["status"] for x in r] == ["ok", "failed"] and r[1]["exit_code"] == 2 and r[1]["log"], r' || fail "failed run in sweep.json"

# --status of a local sweep: finished and diverged runs from their directories, a failed one with its log tail.
"$drift" sweep --status sw > st.txt || fail "--status exited $?"
tail -n 1 st.txt | grep -qx "8 runs: 6 finished, 2 diverged" || fail "--status counts: $(cat st.txt)"
grep -qE "^4 +diverged +boom/train.lr=0.03/seed1 +at step [0-9]+: " st.txt || fail "--status diverged: $(cat st.txt)"
grep -qE "^0 +finished +fp32/train.lr=0.03/seed1 +val loss [0-9.]+$" st.txt || fail "--status finished: $(cat st.txt)"
"$drift" sweep --status swf > st.txt || fail "--status exited $?"
grep -qE "^1 +failed +tiny/data.path=nosuch.txt/seed5; log tail:$" st.txt && grep -q "^       | .*nosuch.txt: no such file" st.txt \
  && tail -n 1 st.txt | grep -qx "2 runs: 1 finished, 1 failed" || fail "--status of a failed run: $(cat st.txt)"
set +e; "$drift" sweep --status nosuch 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "nosuch/sweep.json: cannot be read" err.txt || fail "--status of no sweep: $rc $(cat err.txt)"

# --print-commands: the plan written, one drift train line per unfinished run, which run as printed.
"$drift" sweep --config tiny.json --seeds 1-2 --policies fp32.json --out swp --print-commands > cmds.txt
[ "$(wc -l < cmds.txt)" = 2 ] && grep -q "^$drift train --config tiny.json --set 'output.name=\"fp32\"' " cmds.txt \
  || fail "--print-commands: $(cat cmds.txt)"
[ -f swp/sweep.json ] && [ ! -e swp/fp32 ] || fail "--print-commands ran something"
bash cmds.txt || fail "the printed commands failed"
cmp <(no_timing sw/fp32/train.lr=0.03/seed2/metrics.jsonl) <(no_timing swp/fp32/seed2/metrics.jsonl) \
  && [ -z "$("$drift" sweep --config tiny.json --seeds 1-2 --policies fp32.json --out swp --print-commands)" ] \
  || fail "printed commands: other results, or printed again once finished"

# --- compare ---
"$drift" compare sw > cmp.txt
head -3 cmp.txt | grep -q "^policy .* seeds  diverged  divergence steps" || fail "compare table: $(cat cmp.txt)"
"$drift" compare sw --format markdown | grep -q "^| policy " || fail "compare markdown"
"$drift" compare sw --format csv > cmp.csv
"$drift" compare sw --format csv --table seeds > seeds.csv
"$drift" compare sw --format json > cmp.json
python3 - <<'PY' || fail "compare csv/json"
import csv, json, statistics
rows = list(csv.DictReader(open("cmp.csv")))
labels = [r["policy"] for r in rows]
assert sorted(labels) == sorted(["fp32 train.lr=0.03", "fp32 train.lr=0.01", "boom train.lr=0.03", "boom train.lr=0.01"]), labels
assert labels[-1] == "boom train.lr=0.03" and rows[-1]["diverged"] == "2" and rows[-1]["seeds"] == "2", rows[-1]
assert all(r["diverged"] == "0" for r in rows[:-1])
# The medians, recomputed here from the runs' own summary files.
for r in rows:
    pol, lr = r["policy"].split(" train.lr=")
    summ = [json.load(open(f"sw/{pol}/train.lr={lr}/seed{k}/summary.json")) for k in (1, 2)]
    live = [s["final_val_loss"] for s in summ if not s["diverged"]]
    steps = [s["divergence_step"] for s in summ if s["diverged"]]
    if live:
        assert abs(float(r["median_final_val_loss"]) - statistics.median(live)) == 0, (r, live)
    if steps:
        assert float(r["median_divergence_step"]) == statistics.median(steps), (r, steps)
        assert r["divergence_steps"] == ";".join(map(str, steps)), r
seeds = list(csv.DictReader(open("seeds.csv")))
assert len(seeds) == 8 and {s["seed"] for s in seeds} == {"1", "2"}
j = json.load(open("cmp.json"))
assert [p["policy"] for p in j["policies"]] == labels and len(j["seeds"]) == 8
assert j["policies"][-1]["divergence_steps"][0]["step"] is not None
PY
# A run directory by itself, and bad input.
"$drift" compare sw/fp32/train.lr=0.03/seed1 --format csv | grep -q "^fp32 train.lr=0.03,1,0," || fail "compare one run"
"$drift" compare sw --site head.forward --at-step 10 --table policies > cols.txt || fail "compare --site --at-step"
head -2 cols.txt | grep -q "val loss range.*loss at 10  clip head.forward.a  clip head.forward.b" || fail "compare columns: $(cat cols.txt)"
set +e; "$drift" compare sw --site nosuch.site 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "site nosuch.site: no run has this matmul site (sites: head.forward" err.txt || fail "compare bad site: $rc $(cat err.txt)"
set +e; "$drift" compare nosuchdir 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "nosuchdir: no such directory" err.txt || fail "compare bad dir: $rc"
set +e; "$drift" compare sw --format csv --table both 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] || fail "csv with both tables: $rc"

# --- bisect ---
"$drift" bisect --config tiny.json --seed 1 --set "precision=$(cat boom.json)" --out bis -j 2 > bis.txt \
  || fail "bisect: $(cat bis.txt)"
grep -q "Within forward, restoring layer head alone removes it" bis.txt || fail "bisect conclusion: $(cat bis.txt)"
python3 - <<'PY' || fail "bisect.json"
import json
b = json.load(open("bis/bisect.json"))
assert b["verdict"] == "found" and b["culprits"] == ["forward"] and b["culprit_layers"] == ["head"], b
assert b["repeat"]["same_divergence_step"] and b["repeat"]["same_metrics"] and not b["baseline"]["diverged"]
cls = {c["name"]: c for c in b["classes"]}
assert [c["name"] for c in b["classes"]] == ["allreduce", "optimizer_state", "master", "grad_input", "grad_weight", "forward"]
assert cls["grad_input"]["status"] == "skipped" and cls["master"]["status"] == "skipped"
assert cls["forward"]["effect"] == "removes"
lay = {l["layer"]: l["effect"] for l in b["layers"]}
assert lay == {"hidden0": "no-effect", "head": "removes"}, lay
cfg = json.load(open("bis/restore-forward-head/config.json"))
assert cfg["precision"]["matmul"][-1] == {"match": {"layer": "head", "role": "forward"}, "preset": "fp32"}
PY
# A run that does not diverge: said, and nothing further is run.
"$drift" bisect --config tiny.json --seed 1 --out bis2 > bis2.txt || fail "bisect (no divergence)"
grep -q "does not diverge" bis2.txt || fail "bisect no-divergence: $(cat bis2.txt)"
[ ! -e bis2/restore-forward ] && python3 -c '
import json; assert json.load(open("bis2/bisect.json"))["verdict"] == "no-divergence"' || fail "bisect went on"
# Diverging in fp32 too (lr 50): a training problem, not numerics.
"$drift" bisect --config tiny.json --seed 1 --set train.lr=50 --set train.optimizer=sgd --out bis3 -j 2 > bis3.txt \
  || fail "bisect (training problem)"
python3 -c '
import json; b = json.load(open("bis3/bisect.json")); assert b["verdict"] == "training-problem", b["verdict"]' \
  || fail "bisect training problem: $(cat bis3.txt)"

# The shell loop makes the same runs (the fp32 preset and the default passthrough give the same bits).
DRIFT="$drift" bash "$src/scripts/sweep_seeds.sh" tiny.json loop "1 2" --set train.lr=0.03 > loop.txt
grep -q "compare with" loop.txt || fail "sweep_seeds.sh: $(cat loop.txt)"
cmp <(no_timing loop/seed2/metrics.jsonl) <(no_timing sw/fp32/train.lr=0.03/seed2/metrics.jsonl) \
  || fail "sweep_seeds.sh and drift sweep made different runs"
echo "sweep_compare: OK"
