#!/usr/bin/env bash
# drift bench train runs every model x policy and joins PyTorch's figures correctly (no timing is
# asserted: speed is a benchmark's business, never a test's).
# Usage: bench_train.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

# Figures in the shape reference_pytorch.py --bench --json prints (made up: only the join is tested).
cat > torch.json <<'JSON'
[{"model": "mlp", "policy": "pytorch_fp32", "threads": 1, "steps": 5, "ms_per_step": 7.5, "steps_per_s": 133.3, "cpu_ms_per_step": 7.0},
 {"model": "attn", "policy": "pytorch_fp32", "threads": 1, "steps": 5, "ms_per_step": 90.0, "steps_per_s": 11.1, "cpu_ms_per_step": 80.0}]
JSON
OMP_NUM_THREADS=1 "$drift" bench train --steps 1 --data "$src/data/austen/persuasion.txt" --pytorch torch.json --json > rows.json
python3 - rows.json <<'PY' || fail "bench train rows: $(cat rows.json)"
import json, sys
rows = json.load(open(sys.argv[1]))
assert [(r["model"], r["policy"]) for r in rows] == [("mlp", "fp32"), ("mlp", "mxfp8_e4m3"),
                                                    ("attn", "fp32"), ("attn", "mxfp8_e4m3")], rows
torch = {"mlp": (7.5, 7.0), "attn": (90.0, 80.0)}
for r in rows:
    assert r["steps"] == 1 and r["threads"] == 1 and r["ms_per_step"] > 0 and r["cpu_ms_per_step"] > 0, r
    parts = r["forward_ms"] + r["backward_ms"] + r["update_ms"]
    assert abs(parts - r["ms_per_step"]) <= 1e-9 * r["ms_per_step"], r  # the sections make up the step
    assert abs(r["steps_per_s"] * r["ms_per_step"] - 1e3) < 1e-6, r
    ms, cpu = torch[r["model"]]
    assert r["pytorch_ms_per_step"] == ms and r["pytorch_cpu_ms_per_step"] == cpu, r
    assert abs(r["speed_vs_pytorch"] - ms / r["ms_per_step"]) <= 1e-12 * r["speed_vs_pytorch"], r
    assert abs(r["cpu_speed_vs_pytorch"] - cpu / r["cpu_ms_per_step"]) <= 1e-12 * r["cpu_speed_vs_pytorch"], r
    assert r["target"] == (1.0 if r["policy"] == "fp32" else 0.5), r
    assert r["target_met"] == (r["speed_vs_pytorch"] >= r["target"]), r
PY

# Bad input: exit 2, naming the option.
expect_error() {  # <pattern> <args...>
  local pat="$1"; shift
  set +e; "$drift" bench train "$@" > out.txt 2> err.txt; rc=$?; set -e
  [ "$rc" -eq 2 ] || fail "expected exit 2 for $*, got $rc"
  grep -q -- "$pat" err.txt || fail "expected '$pat' in: $(cat err.txt)"
  [ ! -s out.txt ] || fail "output despite the error ($*): $(cat out.txt)"
}
expect_error "--data: nosuch.txt: no such file" --data nosuch.txt
expect_error "--pytorch: cannot read" --pytorch nosuch.json
echo '{"mlp": 1}' > notrows.json
expect_error "--pytorch: .*expected a JSON list" --pytorch notrows.json
expect_error "--models: rnn not in" --models rnn
expect_error "--threads: expected an integer >= 1" --threads 0
echo "bench_train: OK"
