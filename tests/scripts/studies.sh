#!/usr/bin/env bash
# The shipped studies (studies/<name>/): every study's base config and policy files resolve (checked
# by drift sweep --print-commands, which validates every run before printing), and the two analysis
# scripts compute what their documentation says on hand-made runs whose answers are derived here.
source "$(dirname "$0")/common.bash" "$@"

# 1. Every study's runs resolve: the whole plan, policies x one seed, printed without running.
for study in "$src"/studies/*/; do
  name=$(basename "$study")
  [[ -f "$study/base.json" ]] || fail "$name: no base.json"
  "$drift" sweep --config "$study/base.json" --seeds 1 --policies "$study"/policies/*.json \
    --print-commands --out "plan_$name" > "plan_$name.txt" || fail "$name: its policies do not resolve"
  n_policies=$(ls "$study"/policies/*.json | wc -l)
  [[ $(grep -c '^drift train\|train --config' "plan_$name.txt") -ge 1 ]] || fail "$name: no commands printed"
  python3 - "plan_$name/sweep.json" "$n_policies" <<'PY' || fail "$name: plan does not hold one run per policy"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
assert len(runs) == int(sys.argv[2]), (len(runs), sys.argv[2])
PY
  bash -n "$study/run.sh" || fail "$name/run.sh: syntax"
  if [[ -d "$study/interventions" ]]; then  # in-situ switches: precision sections with a schedule
    "$drift" sweep --config "$study/base.json" --seeds 1 --policies "$study"/interventions/*.json \
      --print-commands --out "plan_${name}_intv" > /dev/null || fail "$name: its interventions do not resolve"
  fi
done
# The attention study's diagnostics overlay resolves too (its probes are rule lists).
"$drift" sweep --config "$src/studies/attn_backward/base.json" --seeds 1 \
  --set "diagnostics=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["diagnostics"]))' "$src/studies/attn_backward/diagnostics.json")" \
  --policies "$src/studies/attn_backward/policies/mx_bwd_both.json" --print-commands --out plan_mech > /dev/null \
  || fail "attn_backward/diagnostics.json does not resolve"

# 2. lead_time.py on a hand-made sweep of two runs (warmup 10, logged every 10 steps).
#    Run "a" diverged at step 100; grad norms after warmup: 10:2.0 20:1.0 30:0.5 40:0.8 ... 100:6.0.
#    The window [100-200, 100] holds steps 10..100; its trough is 0.5 at step 30; 6.0 >= 4 x 0.5,
#    so onset = 30 and lead = 100 - 30 = 70. Median of the 10 norms after warmup (sorted:
#    0.5 0.8 1.0 1.5 2.0 2.0 3.0 4.0 5.0 6.0, element 5) = 2.0, max 6.0 -> 3x.
#    Run "b" did not diverge: no onset, no lead; max 1.0 over median 1.0 (all norms 1.0).
#    The loss peak after warmup of "a" is 9.0 at step 100 (the step-0 loss 20.0 is warmup).
mkdir -p lt/pa/seed1 lt/pb/seed1
cat > lt/sweep.json <<'J'
{"runs": [{"dir": "pa/seed1", "policy": "pa", "seed": 1, "varying": {}},
          {"dir": "pb/seed1", "policy": "pb", "seed": 1, "varying": {}}]}
J
for r in pa pb; do echo '{"train": {"warmup": 10}}' > lt/$r/seed1/config.json; done
python3 - <<'PY'
import json
norms_a = {0: 9.0, 10: 2.0, 20: 1.0, 30: 0.5, 40: 0.8, 50: 1.5, 60: 2.0, 70: 3.0, 80: 4.0, 90: 5.0, 100: 6.0}
with open("lt/pa/seed1/metrics.jsonl", "w") as f:
    for s, n in norms_a.items():
        loss = 20.0 if s == 0 else (9.0 if s == 100 else 1.0)
        f.write(json.dumps({"step": s, "loss": loss, "grad_norm": n}) + "\n")
with open("lt/pb/seed1/metrics.jsonl", "w") as f:
    for s in range(0, 110, 10):
        f.write(json.dumps({"step": s, "loss": 1.0, "grad_norm": 1.0}) + "\n")
json.dump({"divergence_step": 100, "reason": "spike", "spike_step": 100, "first_nonfinite_step": None,
           "final_val_loss": None}, open("lt/pa/seed1/summary.json", "w"))
json.dump({"divergence_step": None, "reason": None, "spike_step": None, "first_nonfinite_step": None,
           "final_val_loss": 0.5}, open("lt/pb/seed1/summary.json", "w"))
PY
python3 "$src/studies/lead_time.py" lt --format json > lt.json
python3 - <<'PY' || fail "lead_time.py: wrong onset, lead or ratios (see above)"
import json
rows = {r["policy"]: r for r in json.load(open("lt.json"))["runs"]}
a, b = rows["pa"], rows["pb"]
assert (a["grad_norm_onset"], a["lead_steps"]) == (30, 70), a
assert (a["max_grad_norm"], a["max_over_median_grad_norm"]) == (6.0, 3.0), a
assert (a["peak_loss"], a["peak_step"]) == (9.0, 100), a
assert (b["grad_norm_onset"], b["lead_steps"], b["max_over_median_grad_norm"]) == (None, None, 1.0), b
PY
# (Into a file, then grep: grep -q quits at its first match, and the writer would die of a broken
# pipe under pipefail, now and then.)
python3 "$src/studies/lead_time.py" lt > lt.md
grep -q '| pa | — | 1 | 100 (spike) | 9 (100) | 30 | 70 | 6 (3x) |' lt.md \
  || { cat lt.md; fail "lead_time.py: markdown row of run pa"; }

# 3. clip_rates.py: policy "pa" has two logged steps of site s.forward, operand a:
#    step 0: 10 of 100 clipped, step 10: 30 of 100 -> 40 / 200 = 20% over the run, 10% at the first;
#    operand b (30 of 50 at step 0) does not match the pattern 's.forward.a'.
cat > lt/pa/seed1/metrics.jsonl <<'J'
{"step": 0, "sites": {"s.forward": {"a": {"elements": 100, "clipped": 10}, "b": {"elements": 50, "clipped": 30}}}}
{"step": 10, "sites": {"s.forward": {"a": {"elements": 100, "clipped": 30}, "b": null}}}
J
rm lt/pb/seed1/metrics.jsonl
python3 "$src/studies/clip_rates.py" lt 's.forward.a' > clip.md
grep -q '| pa | 20% (first 10%) |' clip.md || { cat clip.md; fail "clip_rates.py: expected 20% (first 10%)"; }
python3 "$src/studies/clip_rates.py" lt 's.forward.a' --steps 10: > clip10.md
grep -q '| pa | 30% (first 30%) |' clip10.md || { cat clip10.md; fail "clip_rates.py --steps 10:"; }
echo "studies: OK"
