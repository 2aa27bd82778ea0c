#!/usr/bin/env bash
# drift train with model.kind = proxy and precision.elementwise: byte-identical metrics (timing fields
# aside) at OMP_NUM_THREADS=1 and 2 with stochastic rounding in an elementwise quantizer, per-tensor
# telemetry in metrics.jsonl, the proxy learns, and a bad elementwise rule exits 2 naming its path;
# the paper's form with label noise: thread-count independent, continued from a checkpoint exactly.
# Usage: proxy_elementwise.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

cat > proxy.json <<'JSON'
{ "seed": 2,
  "model": {"kind": "proxy", "d_model": 16, "layers": 2, "input_dim": 8, "output_dim": 4},
  "data": {"path": "/nonexistent: the proxy reads no text"},
  "train": {"steps": 60, "batch": 16, "eval_every": 20, "eval_batches": 2, "log_every": 1, "lr": 0.01},
  "precision": {"matmul": "mxfp8_e4m3",
                "elementwise": [{"match": {"tensor": "ln_weight"}, "quantizer": "mxfp8_e4m3"},
                                {"match": {"tensor": "act_out"}, "quantizer": {"format": "bf16", "rounding": "sr"}}]} }
JSON
OMP_NUM_THREADS=1 "$drift" train --config proxy.json --quiet --out r1
OMP_NUM_THREADS=2 "$drift" train --config proxy.json --quiet --out r2
[ "$(wc -l < r1/metrics.jsonl)" -eq 60 ] || fail "expected 60 metrics lines"
cmp <(no_timing r1/metrics.jsonl) <(no_timing r2/metrics.jsonl) \
  || fail "metrics bytes differ between 1 and 2 threads outside the timing fields"
python3 - r1 <<'PY' || fail "metrics/summary content"
import json, sys
d = sys.argv[1]
lines = [json.loads(l) for l in open(d + "/metrics.jsonl")]
e = lines[0]["elementwise"]
assert set(e) == {"block0.ln.ln_weight", "block1.ln.ln_weight", "ln_f.ln_weight",
                  "block0.mlp.act_out", "block1.mlp.act_out"}, sorted(e)
assert e["ln_f.ln_weight"]["amax"] == 1.0, e          # γ starts at 1
assert "input.grad_input" not in lines[0]["sites"]     # inputs need no gradient
vals = [l["val_loss"] for l in lines if l["val_loss"] is not None]
assert len(vals) == 3 and vals[-1] < 0.5 * lines[0]["loss"], (vals, lines[0]["loss"])
s = json.load(open(d + "/summary.json"))
assert not s["diverged"], s
c = json.load(open(d + "/config.json"))
assert c["model"]["kind"] == "proxy" and c["model"]["teacher_seed"] == 0
assert c["precision"]["elementwise"][1]["quantizer"]["rounding"] == "sr"
PY

# explain lists the elementwise tensors with their quantizers.
"$drift" explain --config proxy.json > explain.txt
grep -q "block1.ln.ln_weight  *fp8_e4m3 block32 floor" explain.txt || fail "explain: $(cat explain.txt)"
grep -q "block0.mlp.act_out  *bf16 sr" explain.txt || fail "explain: $(cat explain.txt)"

# A bad rule: exit 2, the path in the message, nothing written.
set +e
"$drift" train --config proxy.json --quiet --out bad \
  --set 'precision.elementwise=[{"match": {"tensor": "gamma"}, "quantizer": "bf16"}]' 2> err.txt
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad elementwise rule: exit $rc, expected 2"
grep -q "precision.elementwise\[0\].match.tensor" err.txt || fail "error message: $(cat err.txt)"
[ ! -e bad ] || fail "a config error wrote the run directory"
# The paper's form with label noise (drawn from the seed, keyed by the step): the same bytes at 1
# and 2 threads, and a run continued from its step-20 checkpoint writes the uninterrupted run's
# lines from step 20 on. (The noise's values are checked in tests/test_proxy_forms.cpp.)
paper=(--set model.student=bare --set model.input_dim=16 --set model.output_dim=16 --set model.fc_bias=false
       --set model.teacher=mlp --set model.init=torch_uniform --set model.label_noise=0.05
       --set train.checkpoint_every=20 --set train.keep_checkpoints=true --set train.steps=40)
OMP_NUM_THREADS=1 "$drift" train --config proxy.json --quiet --out p1 "${paper[@]}"
OMP_NUM_THREADS=2 "$drift" train --config proxy.json --quiet --out p2 "${paper[@]}"
cmp <(no_timing p1/metrics.jsonl) <(no_timing p2/metrics.jsonl) || fail "paper form: metrics differ between 1 and 2 threads"
OMP_NUM_THREADS=2 "$drift" train --config proxy.json --quiet --out p3 "${paper[@]}" --resume-from p1/checkpoint-20.bin
cmp <(no_timing p1/metrics.jsonl | tail -n 20) <(no_timing p3/metrics.jsonl) \
  || fail "paper form: the run continued from step 20 differs from the uninterrupted one"
OMP_NUM_THREADS=1 "$drift" train --config proxy.json --quiet --out p0 "${paper[@]}" --set model.label_noise=0
python3 - p1 p0 <<'PY' || fail "label noise: training targets"
import json, sys
noisy, clean = ([json.loads(l) for l in open(d + "/metrics.jsonl")] for d in sys.argv[1:])
# Same student, inputs and teacher at step 0: only the targets' noise (std 0.05) tells them apart.
assert noisy[0]["loss"] != clean[0]["loss"] and abs(noisy[0]["loss"] - clean[0]["loss"]) < 0.05, (noisy[0], clean[0])
PY
echo "proxy_elementwise: OK"
