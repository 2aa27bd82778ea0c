#!/usr/bin/env bash
# Deep diagnostics never change the run: metrics.jsonl is byte-identical (timing fields aside) with
# and without diagnostics and probes (mlp, attn and proxy); diag.jsonl has one line per diagnostic step, is itself
# deterministic (1 and 2 threads), records zero bound violations and a bit-identical replay, and its
# gradient measures agree with each other; --resume cuts diag.jsonl back and continues it exactly.
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
    # cosine, rel_error and bias of the run's gradient g against the exact r are three views of two
    # numbers, a = g.r/|r|^2 = 1 + bias and b = |g|^2/|r|^2 = rel_error^2 + 2a - 1: cosine = a/sqrt(b)
    # must hold (computed here, independently of drift's sums); and MXFP8 must cost something.
    g = l["grad"]["overall"]
    a = 1 + g["bias"]
    b = g["rel_error"] ** 2 + 2 * a - 1
    assert abs(g["cosine"] - a / b ** 0.5) < 1e-9, (g, a / b ** 0.5)
    assert 0.9 < g["cosine"] < 1 - 1e-9 and g["rel_error"] > 1e-6, g
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
# Deterministic: the whole run keeps its periodic checkpoints (checkpoint-<step>.bin), and the
# directory a kill at step 15 leaves behind is built from it: the checkpoint of step 10, the
# config.json, and the metrics.jsonl and diag.jsonl lines of steps 0-15 (plus a stale line of a
# later step, as a kill between a checkpoint and the next write would leave). The resumed files must
# equal the whole run's; the lines of steps 10-15 must have been there to cut (the path is exercised).
args=(--set train.steps=40 --set train.checkpoint_every=2 --set train.keep_checkpoints=true)
diag_args=(--set diagnostics.every=2 --set 'diagnostics.probes=["bf16"]')
"$drift" train --config tiny.json --quiet --out whole "${args[@]}" "${diag_args[@]}"
killed_at_15() {  # killed_at_15 DIR: DIR as a run killed after step 15, its last checkpoint at step 10
  mkdir "$1"
  [ -f whole/checkpoint-10.bin ] || fail "resume: no checkpoint-10.bin kept by the whole run"
  cp whole/config.json "$1/"
  cp whole/checkpoint-10.bin "$1/checkpoint.bin"
  python3 - whole "$1" <<'PY' || fail "resume: building the killed run's directory"
import json, sys
src, dst = sys.argv[1:3]
for name in ("metrics.jsonl", "diag.jsonl"):
    lines = [l for l in open(f"{src}/{name}") if json.loads(l)["step"] < 16]
    assert any(10 <= json.loads(l)["step"] < 16 for l in lines), (name, "no lines after the checkpoint to cut")
    open(f"{dst}/{name}", "w").write("".join(lines) + '{"step": 39, "stale": true}\n')
PY
}
killed_at_15 intr
"$drift" train --config tiny.json --quiet --out intr --resume "${args[@]}" "${diag_args[@]}" 2> resume.err
if grep -q "step 0" resume.err; then fail "resume: started from step 0 instead of the checkpoint: $(cat resume.err)"; fi
cmp whole/diag.jsonl intr/diag.jsonl || fail "resume: diag.jsonl differs from the uninterrupted run's"
cmp <(no_timing whole/metrics.jsonl) <(no_timing intr/metrics.jsonl) || fail "resume: metrics differ"
# Diagnostics may be switched off on resume (they are not part of the run's identity).
killed_at_15 intr2
"$drift" train --config tiny.json --quiet --out intr2 --resume "${args[@]}" || fail "resume with diagnostics off was refused"
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
