#!/usr/bin/env bash
# Deep diagnostics never change the run: metrics.jsonl is byte-identical (timing fields aside) with
# and without diagnostics and probes (mlp, attn and proxy); diag.jsonl has one line per diagnostic step, is itself
# deterministic (1 and 2 threads), records zero bound violations and a bit-identical replay.
# Usage: diag_identical.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

# A tiny MLP under MXFP8 with delayed scaling on the forward and stochastic rounding of grad_weight's
# A (random bits and carried state in play), dynamic loss scaling (the diagnostics must unscale).
cat > tiny.json <<JSON
{ "seed": 5,
  "model": {"kind": "mlp", "context": 4, "embed": 4, "hidden": 16},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 7, "batch": 4, "eval_every": 5, "eval_batches": 1, "log_every": 1},
  "precision": {"matmul": [{"preset": "mxfp8_e4m3"},
                           {"match": {"role": "forward"}, "preset": "fp8_delayed_hybrid"},
                           {"match": {"role": "grad_weight"}, "a": {"rounding": "sr"}}],
                "loss_scale": {"kind": "dynamic", "init": 1024}} }
JSON
for kind in mlp attn proxy; do
  extra=()
  [ "$kind" = attn ] && extra=(--set model.kind=attn --set model.d_model=8 --set model.heads=2 --set model.layers=1)
  [ "$kind" = proxy ] && extra=(--set model.kind=proxy --set model.d_model=8 --set model.layers=1 --set model.input_dim=6 \
                                --set model.output_dim=3)
  "$drift" train --config tiny.json --quiet --out plain "${extra[@]}"
  [ ! -e plain/diag.jsonl ] || fail "$kind: diag.jsonl written with diagnostics off"
  OMP_NUM_THREADS=1 "$drift" train --config tiny.json --quiet --out d1 "${extra[@]}" --set diagnostics.every=3 \
    --set 'diagnostics.probes=["fp32", "mxfp4", [{"preset": "bf16"}, {"match": {"role": "grad_input"}, "preset": "fp16_acc"}]]'
  OMP_NUM_THREADS=2 "$drift" train --config tiny.json --quiet --out d2 "${extra[@]}" --set diagnostics.every=3 \
    --set 'diagnostics.probes=["fp32", "mxfp4", [{"preset": "bf16"}, {"match": {"role": "grad_input"}, "preset": "fp16_acc"}]]'
  cmp <(no_timing plain/metrics.jsonl) <(no_timing d1/metrics.jsonl) || fail "$kind: diagnostics changed metrics.jsonl"
  cmp d1/diag.jsonl d2/diag.jsonl || fail "$kind: diag.jsonl differs between 1 and 2 threads"
  python3 - d1 <<'PY' || fail "$kind: diag.jsonl content"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1] + "/diag.jsonl")]
assert [l["step"] for l in lines] == [0, 3, 6], [l["step"] for l in lines]
for l in lines:
    assert l["replay_identical"] is True, l["step"]
    assert l["bound_violations"] == 0 and l["bound_checked"] > 0, l["step"]
    g = l["grad"]["overall"]
    assert 0.5 < g["cosine"] <= 1 and g["rel_error"] >= 0 and abs(g["bias"]) < 1, g
    names = [p["name"] for p in l["probes"]]
    assert names == ["fp32", "mxfp4", "probe2"], names
    fp32 = l["probes"][0]["grad"]["overall"]
    assert fp32["cosine"] > 0.99999 and fp32["rel_error"] < 1e-3, fp32
    assert l["probes"][1]["grad"]["overall"]["rel_error"] > fp32["rel_error"]
    for name, s in l["sites"].items():
        if name == "input.grad_input":  # the proxy's inputs need no gradient: never called
            assert s["calls"] == 0 and s["a_cast"] is None, s
            continue
        assert s["calls"] >= 1 and s["bound"]["violations"] == 0, name
        for key in ("out_max_rel_dev", "out_rel_error"):  # forward sites only: the products against fp64
            dev = s[key]
            assert (dev is not None and dev >= 0) if name.endswith(".forward") else dev is None, (name, key, dev)
        assert s["a_cast"] is not None and 0 <= s["a_cast"]["shrank"] <= 1, name
    assert "elapsed_s" not in l and "tokens_per_s" not in l
PY
  rm -rf plain d1 d2
done

# --resume: diag.jsonl is cut back to the checkpoint's step and continues as an uninterrupted run's.
# Ctrl-C stops after a step with a checkpoint; a line for a later step is appended by hand, as a
# kill between the checkpoint and the next would leave one; the resumed file must equal the whole run's.
args=(--set train.steps=40 --set train.checkpoint_every=2 --set diagnostics.every=2 --set 'diagnostics.probes=["bf16"]')
"$drift" train --config tiny.json --quiet --out whole "${args[@]}"
"$drift" train --config tiny.json --quiet --out intr "${args[@]}" & pid=$!
while [ ! -f intr/checkpoint.bin ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
kill -INT $pid 2>/dev/null || true; rc=0; wait $pid || rc=$?
[ -f intr/summary.json ] && fail "resume: the run finished before Ctrl-C; make it longer"
[ "$rc" = 130 ] || fail "resume: SIGINT gave exit $rc, expected 130"
echo '{"step": 39, "stale": true}' >> intr/diag.jsonl
"$drift" train --config tiny.json --quiet --out intr --resume "${args[@]}"
cmp whole/diag.jsonl intr/diag.jsonl || fail "resume: diag.jsonl differs from the uninterrupted run's"
cmp <(no_timing whole/metrics.jsonl) <(no_timing intr/metrics.jsonl) || fail "resume: metrics differ"
# Diagnostics may be switched off on resume (they are not part of the run's identity).
"$drift" train --config tiny.json --quiet --out intr2 "${args[@]}" & pid=$!
while [ ! -f intr2/checkpoint.bin ] && kill -0 $pid 2>/dev/null; do sleep 0.02; done
kill -INT $pid 2>/dev/null || true; wait $pid || true
[ -f intr2/summary.json ] || "$drift" train --config tiny.json --quiet --out intr2 --resume --set train.steps=40 \
  --set train.checkpoint_every=2 || fail "resume with diagnostics off was refused"
cmp <(no_timing whole/metrics.jsonl) <(no_timing intr2/metrics.jsonl) || fail "resume without diagnostics: metrics differ"

# A bad probe is a config error naming it: exit 2, nothing written.
set +e
"$drift" train --config tiny.json --quiet --out bad --set 'diagnostics.probes=["fp32", "nope"]' 2> err.txt
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "bad probe: exit $rc, expected 2"
grep -q "diagnostics.probes\[1\]" err.txt || fail "bad probe: message does not name diagnostics.probes[1]: $(cat err.txt)"
[ ! -e bad ] || fail "bad probe: run directory written"
echo "diag_identical: ok"
