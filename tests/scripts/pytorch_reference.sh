#!/usr/bin/env bash
# drift's models and hand-written backward against an independent PyTorch implementation (autograd):
# small mlp and attn runs (50 steps, fp32 passthrough, --dump-init), and two proxy runs (drift's form
# and the MX-instability paper's, with label noise; 30 steps, the drawn data checked too), replayed by
# scripts/reference_pytorch.py from drift's own initial weights and batches; the per-step training
# losses and gradient norms must agree within the tolerance that script derives. Also checks the
# dump itself, that the check catches a wrong optimizer and a wrong loss, and that drift's float32
# run is no further from a float64 run than PyTorch's float32 run is (the basis of the tolerance).
# Needs Debian's python3-torch (scripts/setup.sh installs it): without it this test FAILS.
# Usage: pytorch_reference.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
ref="$src/scripts/reference_pytorch.py"
# Debian's python3-torch is installed for Debian's interpreter only (DRIFT_TORCH_PYTHON: another one).
py="${DRIFT_TORCH_PYTHON:-/usr/bin/python3}"

[ -x "$py" ] || fail "$py not found (Debian's python3; scripts/setup.sh installs it)"
"$py" -c 'import torch, numpy' 2> import.txt ||
  fail "PyTorch is not importable by $py: $(tail -1 import.txt). Install Debian's python3-torch and python3-numpy (scripts/setup.sh does); this check must run, skipping it is not a pass."

# Small models; weight decay on (it must reach the weights only), warmup then cosine decay in 50 steps.
cat > base.json <<JSON
{ "seed": 5,
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 50, "batch": 16, "lr": 0.003, "warmup": 10, "weight_decay": 0.1, "grad_clip": 1.0,
            "eval_every": 1000, "eval_batches": 2, "log_every": 1},
  "precision": {"matmul": []} }
JSON
mlp=(--set model.kind=mlp --set model.context=8 --set model.embed=16 --set model.hidden=64 --set model.hidden_layers=2)
attn=(--set model.kind=attn --set model.context=16 --set model.d_model=32 --set model.heads=4 --set model.layers=2
      --set train.batch=8)
# gelu and SGD with momentum (lr for SGD is larger), the other code paths.
attn_gelu=("${attn[@]}" --set model.activation=gelu --set train.optimizer=sgd --set train.lr=0.1 --set train.grad_clip=0.5)

# One OpenMP thread: these matmuls are tiny, and on a loaded machine OpenMP's parallel regions cost
# far more than the work (results do not depend on the thread count: train_determinism.sh).
export OMP_NUM_THREADS=1
"$drift" train --config base.json --quiet --dump-init --out mlp "${mlp[@]}"
"$drift" train --config base.json --quiet --dump-init --out attn "${attn[@]}"
"$drift" train --config base.json --quiet --dump-init --out attn_gelu "${attn_gelu[@]}"

# The dump: every parameter, float32 in its shape; the windows int32 (steps, batch, context+1), each
# a contiguous piece of its split of the corpus (the last 10% of the bytes is validation).
"$py" - "$src/data/austen/persuasion.txt" mlp attn <<'PY' || fail "init/ dump content"
import json, os, sys, numpy as np
text = open(sys.argv[1], "rb").read()
text = text if text.endswith(b"\n") else text + b"\n"
ntrain = len(text) - int(len(text) * 0.1)
for run in sys.argv[2:]:
    cfg = json.load(open(run + "/config.json"))
    m, t = cfg["model"], cfg["train"]
    ctx = m["context"]
    names = sorted(f for f in os.listdir(run + "/init"))
    assert "batches.npy" in names and "val_batches.npy" in names, names
    for f in names:
        a = np.load(run + "/init/" + f)
        if f.endswith("batches.npy"):
            n = t["steps"] if f == "batches.npy" else t["eval_batches"]
            assert a.dtype == np.int32 and a.shape == (n, t["batch"], ctx + 1), (f, a.dtype, a.shape)
            split = text[:ntrain] if f == "batches.npy" else text[ntrain:]
            for w in a.reshape(-1, ctx + 1):
                assert split.find(bytes(w.astype(np.uint8).tolist())) >= 0, (f, w)
        else:
            assert a.dtype == np.float32 and a.ndim in (1, 2) and np.isfinite(a).all(), (f, a.dtype, a.shape)
    if m["kind"] == "mlp":
        assert np.load(run + "/init/hidden1.w.npy").shape == (m["hidden"], m["hidden"])
        assert np.load(run + "/init/wte.npy").shape == (256, m["embed"])
        assert (np.load(run + "/init/head.b.npy") == 0).all()
    else:
        assert np.load(run + "/init/block1.attn.qkv.w.npy").shape == (3 * m["d_model"], m["d_model"])
        assert (np.load(run + "/init/block0.ln1.w.npy") == 1).all()
    # no leftover temporary directory
    assert not os.path.exists(run + "/.init.partial")
PY

# The comparison itself, with a float64 replay as the basis of the tolerance: drift's float32 run
# must be about as close to the float64 trajectory as PyTorch's own float32 run is (the same order:
# within 10x), i.e. the two differ by rounding only. (One process: importing torch takes seconds.)
set +e; "$py" "$ref" --run mlp --run attn --run attn_gelu --steps 50 --fp64 > ref.txt 2>&1; rc=$?; set -e
cat ref.txt
if [ "$rc" -ne 0 ]; then
  "$py" "$ref" --run mlp --run attn --run attn_gelu --table || true
  fail "drift and PyTorch disagree (exit $rc)"
fi
[ "$(grep -c "^agree" ref.txt)" -eq 3 ] || fail "expected three agreement lines"
# Every run's float64 gaps in <file>: drift's within 10x of torch float32's (<count> runs).
within_fp32_gap() {
  "$py" - "$1" "$2" <<'PY' || fail "drift is further from float64 than PyTorch float32 is ($1)"
import re, sys
gaps = re.findall(r"torch fp32 vs fp64 ([0-9.e+-]+), drift vs torch fp64 ([0-9.e+-]+)", open(sys.argv[1]).read())
assert len(gaps) == int(sys.argv[2]), gaps
for t32, drift in gaps:
    assert float(drift) <= 10 * max(float(t32), 1e-7), (t32, drift)
PY
}
within_fp32_gap ref.txt 3

# The check catches errors: an optimizer hyperparameter the reference is told differently (beta2
# 0.95 -> 0.99: bias correction hides it at step 1, so the loss moves from step 2 on), and one
# loss in metrics.jsonl moved by 1e-3 relative at step 30.
cp -r mlp bad_opt
"$py" - bad_opt/config.json <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["train"]["beta2"] = 0.99; json.dump(c, open(sys.argv[1], "w"))
PY
cp -r attn bad_loss
"$py" - bad_loss/metrics.jsonl <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
lines[30]["loss"] *= 1.001
open(sys.argv[1], "w").write("".join(json.dumps(l) + "\n" for l in lines))
PY
set +e; "$py" "$ref" --run bad_opt --run bad_loss --steps 40 > bad.txt 2>&1; rc=$?; set -e
[ "$rc" -eq 1 ] || fail "expected exit 1 for the altered runs, got $rc: $(cat bad.txt)"
grep -Eq "DISAGREE \(mlp, bad_opt\): first at step [2-9]:" bad.txt || fail "wrong beta2 not caught early: $(cat bad.txt)"
grep -q "DISAGREE (attn, bad_loss): first at step 30:" bad.txt || fail "altered loss at step 30 not named: $(cat bad.txt)"

# The proxy model, in drift's form (warmup, cosine, weight decay: drift's own AdamW) and in the
# MX-instability paper's (bare residual student, fc without bias, plain-MLP teacher, torch-uniform
# init, label noise 0.005, Adam with torch's 1 - beta and a cosine from 3e-3 to 3e-5: replayed with
# torch.optim.Adam and torch's CosineAnnealingLR themselves). The
# reference first checks the dumped batches against the teacher it rebuilds from init/teacher.*.npy
# plus init/label_noise.npy, and the initial weights against torch's nn.Linear bounds.
cat > proxy.json <<'JSON'
{ "seed": 4,
  "model": {"kind": "proxy", "d_model": 16, "layers": 2, "input_dim": 8, "output_dim": 4},
  "train": {"steps": 30, "batch": 16, "lr": 0.01, "warmup": 5, "weight_decay": 0.1,
            "eval_every": 1000, "eval_batches": 2, "log_every": 1},
  "precision": {"matmul": []} }
JSON
paper=(--set model.student=bare --set model.input_dim=16 --set model.output_dim=16 --set model.fc_bias=false --set model.teacher=mlp --set model.teacher_width=24
       --set model.activation=gelu --set model.init=torch_uniform --set model.label_noise=0.005 --set train.lr=0.003
       --set train.beta2=0.999 --set train.adam_one_minus_beta=fp64 --set train.weight_decay=0 --set train.grad_clip=0
       --set train.warmup=0 --set train.decay=cosine_torch --set train.min_lr_frac=0.01 --set train.batch=32)
"$drift" train --config proxy.json --quiet --dump-init --out proxy
"$drift" train --config proxy.json --quiet --dump-init --out proxy_paper "${paper[@]}"
"$py" - proxy_paper <<'PY' || fail "proxy init/ dump content"
import os, sys, numpy as np
run = sys.argv[1]
names = sorted(os.listdir(run + "/init"))
want = ["block%d.%s.npy" % (l, t) for l in range(2) for t in ("ln.b", "ln.w", "mlp.fc.w", "mlp.proj.b", "mlp.proj.w")]
want += ["inputs.npy", "label_noise.npy", "targets.npy", "val_inputs.npy", "val_targets.npy"]
want += ["teacher.block%d.mlp.%s.w.npy" % (l, t) for l in range(2) for t in ("fc", "proj")]
assert names == sorted(want), names                                  # no input layer, head, ln_f or fc bias
assert np.load(run + "/init/inputs.npy").shape == (30, 32, 16)       # input_dim = d_model
assert np.load(run + "/init/teacher.block1.mlp.fc.w.npy").shape == (24, 16)
noise = np.load(run + "/init/label_noise.npy")
assert noise.dtype == np.float64 and noise.shape == (30 * 32, 16) and 0.004 < noise.std() < 0.006, noise.std()
PY
set +e; "$py" "$ref" --run proxy --run proxy_paper --steps 30 --fp64 > proxy_ref.txt 2>&1; rc=$?; set -e
cat proxy_ref.txt
[ "$rc" -eq 0 ] || fail "drift and PyTorch disagree on the proxy (exit $rc)"
[ "$(grep -c "^agree (proxy" proxy_ref.txt)" -eq 2 ] || fail "expected two proxy agreement lines"
within_fp32_gap proxy_ref.txt 2
# The data checks catch errors: one target moved by 1e-6 relative; a config claiming other label
# noise; a config claiming the normal init (the uniform biases are then not zero).
cp -r proxy_paper bad_target
"$py" - bad_target/init/targets.npy <<'PY'
import sys, numpy as np
a = np.load(sys.argv[1]); a[7, 3, 5] *= np.float32(1 + 1e-6); np.save(sys.argv[1], a)
PY
cp -r proxy_paper bad_noise
cp -r proxy_paper bad_init
"$py" - bad_noise/config.json bad_init/config.json <<'PY'
import json, sys
for path, key, value in ((sys.argv[1], "label_noise", 0.01), (sys.argv[2], "init", "normal")):
    c = json.load(open(path)); c["model"][key] = value; json.dump(c, open(path, "w"))
PY
set +e; "$py" "$ref" --run bad_target --run bad_noise --run bad_init --steps 5 > bad_proxy.txt 2>&1; rc=$?; set -e
[ "$rc" -eq 1 ] || fail "expected exit 1 for the altered proxy runs, got $rc: $(cat bad_proxy.txt)"
grep -q "DISAGREE (proxy, bad_target): the drawn data.*targets (7, 3, 5)" bad_proxy.txt || fail "altered target: $(cat bad_proxy.txt)"
grep -q "DISAGREE (proxy, bad_noise): .*label_noise.npy: .*N(0, 0.01^2)" bad_proxy.txt || fail "wrong noise: $(cat bad_proxy.txt)"
grep -q "DISAGREE (proxy, bad_init): .*a bias not initialised to 0" bad_proxy.txt || fail "wrong init: $(cat bad_proxy.txt)"

# Unusable input: a run without the dump, or logged too sparsely, is exit 2 with the reason.
"$drift" train --config base.json --quiet --out nodump "${mlp[@]}" --set train.steps=5
set +e; "$py" "$ref" --run nodump --steps 5 2> nodump.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "init/.*missing (run drift train with --dump-init" nodump.txt || fail "no dump: rc $rc: $(cat nodump.txt)"
"$drift" train --config base.json --quiet --dump-init --out sparse "${mlp[@]}" --set train.steps=5 --set train.log_every=2
set +e; "$py" "$ref" --run sparse --steps 5 2> sparse.txt; rc=$?; set -e
[ "$rc" -eq 2 ] && grep -q "no line for step 1" sparse.txt || fail "sparse log: rc $rc: $(cat sparse.txt)"
echo "pytorch_reference: OK"
