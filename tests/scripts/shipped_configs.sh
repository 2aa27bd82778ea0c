#!/usr/bin/env bash
# Every shipped config does what its name says, and trains. For each configs/*.json, a table below
# states what the name promises (the model kind; per matmul site and operand class, the format,
# scaling, rounding, fused accumulator or output format; the elementwise quantizers; master weights
# and loss scaling; and, for a schedule, the policy before and after its step); the script checks
# each claim against `drift explain --json` (at the steps named) and the run's config.json, and
# every config must have a table entry (a new config without one fails). Each config then trains
# 3 steps and writes the run files, run from a directory outside the repository (a relative
# data.path is found from the config file's directory upward).
# Usage: shipped_configs.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
mkdir -p "$work/elsewhere" && cd "$work/elsewhere"

# A relative data.path found nowhere: the error names the key and where it looked.
mkdir -p "$work/cfgdir"
echo '{"data": {"path": "no/such/corpus"}, "train": {"steps": 1}}' > "$work/cfgdir/missing.json"
if "$drift" train --config "$work/cfgdir/missing.json" --out "$work/missing" > "$work/missing.log" 2>&1; then
  fail "a missing data.path trained"
elif ! grep -q "data.path: no/such/corpus: no such file or directory.*config file's directory.*$work/cfgdir" "$work/missing.log"; then
  fail "the missing data.path message: $(cat "$work/missing.log")"
fi

for cfg in "$src"/configs/*.json; do
  name=$(basename "$cfg" .json)
  "$drift" explain --config "$cfg" --json > "$work/$name.0.json" || fail "explain $cfg"
  "$drift" explain --config "$cfg" > "$work/$name.0.txt" || fail "explain $cfg (table)"
  if grep -q '"schedule"' "$cfg"; then  # the policy on both sides of the schedule's steps
    for step in 499 500 999 1000; do
      "$drift" explain --config "$cfg" --json --step $step > "$work/$name.$step.json"
      "$drift" explain --config "$cfg" --step $step > "$work/$name.$step.txt"
    done
  fi
  "$drift" train --config "$cfg" --set train.steps=3 --set train.eval_every=3 --set train.eval_batches=1 \
    --out "$work/run_$name" --quiet > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "train $cfg"; }
  for f in config.json metrics.jsonl summary.json provenance.json; do
    [ -s "$work/run_$name/$f" ] || fail "$cfg: no $f"
  done
  grep -q '"steps_completed": 3' "$work/run_$name/summary.json" || fail "$cfg: did not complete 3 steps"
done

python3 - "$work" "$src"/configs/*.json <<'PY'
import json, os, sys
work, cfgs = sys.argv[1], sys.argv[2:]

# Claims. op(field, value, role=, cls=): every matmul operand (of sites with that role, of that
# tensor class) has policy[operand][field] == value. site(field, value, role=): the site's policy.
# elem(suffix, text): every elementwise tensor whose name ends in suffix shows that quantizer in the
# explain table. cfg(path, value): the run's config.json. A claim may carry step= (default 0).
def op(field, value, role=None, cls=None, step=0): return ("op", field, value, role, cls, step)
def site(field, value, role=None, step=0): return ("site", field, value, role, None, step)
def elem(suffix, text, step=0): return ("elem", suffix, text, None, None, step)
def cfg(path, value): return ("cfg", path, value, None, None, 0)
def fmt(f, **k): return [op("format", f, **k)]
def mx(f, block, **k): return [op("format", f, **k), op("scaling.kind", "block", **k), op("scaling.block", block, **k)]
roles = ("forward", "grad_input", "grad_weight")
ELEMS = ("ln_weight", "ln_bias", "ln_out", "act_in", "act_out")

expect = {
  "attn_mxfp8": [cfg("model.kind", "attn")] + mx("fp8_e4m3", 32) + [op("scaling.rule", "floor")],
  "mlp_bf16": fmt("bf16") + [op("scaling.kind", "none"), cfg("precision.master.format", "fp32")],
  "mlp_bf16_master_rne": fmt("bf16") + [cfg("precision.master.format", "bf16"), cfg("precision.master.rounding", "rne")],
  "mlp_bf16_master_sr": fmt("bf16") + [cfg("precision.master.format", "bf16"), cfg("precision.master.rounding", "sr")],
  "mlp_deepseek_fp8": fmt("fp8_e4m3") + [op("scaling.kind", "tile"), op("scaling.block", 128),
                      site("inner.promote_every", 128), op("scaling.two_d", True, cls="weight")],
  "mlp_fp16": fmt("fp16") + [op("overflow", "ieee"), cfg("precision.loss_scale.kind", "none")],
  "mlp_fp16_dynamic_loss_scale": fmt("fp16") + [op("overflow", "ieee"), cfg("precision.loss_scale.kind", "dynamic")],
  "mlp_fp32": fmt("fp32") + [op("scaling.kind", "none"), site("output.format", "fp32")],
  "mlp_fp8_backward_outputs": fmt("fp32") + [site("output.format", "fp32", role="forward"),
                               site("output.format", "fp8_e5m2", role="grad_input"),
                               site("output.format", "fp8_e5m2", role="grad_weight")],
  "mlp_fp8_current": [op("format", "fp8_e4m3", cls="activation"), op("format", "fp8_e4m3", cls="weight"),
                      op("format", "fp8_e5m2", cls="gradient"), op("scaling.kind", "tensor")],
  "mlp_fp8_delayed": [op("format", "fp8_e4m3", cls="activation"), op("format", "fp8_e4m3", cls="weight"),
                      op("format", "fp8_e5m2", cls="gradient"), op("scaling.kind", "delayed"), op("scaling.history", 16)],
  "mlp_h100_fp8_tensorcore": fmt("fp8_e4m3") + [op("scaling.kind", "tensor"), site("inner.fused", "h100_fp8_e4m3")],
  "mlp_mxfp4_sr_hadamard": mx("fp4_e2m1", 32) + [op("rounding", "sr", role="grad_weight"),
                            op("scaling.hadamard", 32, role="grad_weight"), op("rounding", "rne", role="forward"),
                            op("scaling.hadamard", 0, role="forward"), op("rounding", "rne", role="grad_input")],
  "mlp_mxfp8": mx("fp8_e4m3", 32) + [op("scaling.rule", "floor")],
  "mlp_mxfp8_backward_only": fmt("fp32", role="forward") + mx("fp8_e4m3", 32, role="grad_input") +
                             mx("fp8_e4m3", 32, role="grad_weight"),
  "mlp_mxfp8_forward_only": mx("fp8_e4m3", 32, role="forward") + fmt("fp32", role="grad_input") +
                            fmt("fp32", role="grad_weight"),
  "mlp_mxfp8_fp32_from_1000": mx("fp8_e4m3", 32) + mx("fp8_e4m3", 32, step=999) + fmt("fp32", step=1000) +
                              [op("scaling.kind", "none", step=1000)],
  "mlp_mxfp8_rceil": mx("fp8_e4m3", 32) + [op("scaling.rule", "rceil")],
  "mlp_nvfp4": fmt("fp4_e2m1") + [op("scaling.kind", "nvfp4"), op("scaling.block", 16)],
  "proxy_fp32": [cfg("model.kind", "proxy")] + fmt("fp32") + [elem(e, "- (fp32)") for e in ELEMS],
  "proxy_paper_fp32": [cfg("model.kind", "proxy"), cfg("model.student", "bare"), cfg("model.input_dim", 64),
                       cfg("model.output_dim", 64), cfg("model.fc_bias", False), cfg("model.teacher", "mlp"),
                       cfg("model.init", "torch_uniform"), cfg("model.label_noise", 0.005), cfg("model.activation", "gelu"),
                       cfg("train.batch", 256), cfg("train.lr", 0.001), cfg("train.warmup", 0),
                       cfg("train.decay", "constant"), cfg("train.weight_decay", 0), cfg("train.beta2", 0.999), cfg("train.adam_one_minus_beta", "fp64"),
                       cfg("train.grad_clip", 0)] + fmt("fp32") + [elem(e, "- (fp32)") for e in ELEMS],
  "proxy_mxfp8_ln": [cfg("model.kind", "proxy")] + mx("fp8_e4m3", 32) +
                    [elem("ln_weight", "fp8_e4m3 block32 floor"), elem("ln_bias", "fp8_e4m3 block32 floor"), elem("ln_out", "bf16"),
                     elem("act_in", "bf16"), elem("act_out", "bf16")],
  "proxy_mxfp8_ln_exempt_from_500": [cfg("model.kind", "proxy")] + mx("fp8_e4m3", 32) + mx("fp8_e4m3", 32, step=500) +
                    [elem("ln_weight", "fp8_e4m3 block32 floor", step=499), elem("ln_bias", "fp8_e4m3 block32 floor", step=499),
                     elem("ln_weight", "- (fp32)", step=500), elem("ln_bias", "- (fp32)", step=500),
                     elem("ln_out", "bf16", step=500), elem("act_in", "bf16", step=500)],
}

def get(d, path):
    for k in path.split("."):
        d = d[k]
    return d

def elementwise(text_path):
    lines = open(text_path).read().splitlines()
    rows = {}
    if any(l.endswith("none quantized (fp32)") for l in lines):
        return None  # every tensor fp32
    start = next(i for i, l in enumerate(lines) if l.startswith("tensor"))
    for l in lines[start + 1:]:
        name, q = l.split(None, 1)
        rows[name] = q.strip()
    return rows

bad = []
for path in cfgs:
    name = os.path.basename(path)[:-5]
    if name not in expect:
        bad.append(f"{name}: no entry in shipped_configs.sh's table of what each config's name promises")
        continue
    run_cfg = json.load(open(f"{work}/run_{name}/config.json"))
    kind = name.split("_")[0]
    claims = expect[name] + ([cfg("model.kind", kind)] if kind in ("mlp", "attn", "proxy") else [])
    for what, field, value, role, cls, step in claims:
        if what == "cfg":
            got = get(run_cfg, field)
            if got != value: bad.append(f"{name}: config {field} = {got!r}, expected {value!r}")
            continue
        if what == "elem":
            rows = elementwise(f"{work}/{name}.{step}.txt")
            matching = {} if rows is None else {t: q for t, q in rows.items() if t.endswith(field)}
            if rows is None and value == "- (fp32)": continue
            if not matching: bad.append(f"{name}: step {step}: no elementwise tensor *{field}"); continue
            for t, q in matching.items():
                if q != value: bad.append(f"{name}: step {step}: {t} quantizer {q!r}, expected {value!r}")
            continue
        sites = json.load(open(f"{work}/{name}.{step}.json"))
        checked = 0
        for s in sites:
            if role and s["role"] != role: continue
            if what == "site":
                got = get(s["policy"], field); checked += 1
                if got != value: bad.append(f"{name}: step {step}: {s['site']} {field} = {got!r}, expected {value!r}")
                continue
            for o in "ab":
                if cls and s[o + "_class"] != cls: continue
                got = get(s["policy"][o], field); checked += 1
                if got != value: bad.append(f"{name}: step {step}: {s['site']}.{o} {field} = {got!r}, expected {value!r}")
        if checked == 0: bad.append(f"{name}: claim {field}={value!r} (role {role}, class {cls}) matched no site")
if bad:
    print("\n".join(bad)); sys.exit(1)
print(f"shipped configs: {len(cfgs)} configs, each as its name says")
PY
echo "shipped_configs: ok"
