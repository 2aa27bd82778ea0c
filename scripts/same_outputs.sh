#!/usr/bin/env bash
# Did a refactor change any result? Trains every given config (default: every configs/*.json) with
# two drift binaries, OLD and NEW, for a few steps with a metrics line per step and a checkpoint, and
# compares what the determinism contract promises to be identical: metrics.jsonl without its timing
# fields (tokens_per_s, elapsed_s), summary.json without wall_s, steps_per_s, tokens_per_s and routes,
# diag.jsonl (when diagnostics are on), config.json without its output section, and checkpoint.bin,
# byte for byte.
#
# Usage: scripts/same_outputs.sh OLD_DRIFT NEW_DRIFT [CONFIG.json ...]
#   SAME_STEPS=30       steps per run (train.steps; train.log_every=1)
#   SAME_DIAG_EVERY=0   diagnostics.every (0: off; e.g. 10 to compare diag.jsonl too; slower)
#   SAME_CACHE=DIR      OLD's runs are kept here, keyed by the binary's, the config's and these
#                       settings' hash, so that a second comparison against the same OLD trains only
#                       NEW (default: ${TMPDIR:-/tmp}/drift_same_outputs)
# Prints one line per config (same / DIFFERENT and which file) and exits 1 if any differs.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 OLD_DRIFT NEW_DRIFT [CONFIG.json ...]" >&2
  exit 2
fi
old=$(realpath "$1"); new=$(realpath "$2"); shift 2
for b in "$old" "$new"; do
  [ -x "$b" ] || { echo "same_outputs: $b: not an executable" >&2; exit 2; }
done
repo=$(cd "$(dirname "$0")/.." && pwd)
configs=("$@")
[ ${#configs[@]} -gt 0 ] || configs=("$repo"/configs/*.json)
steps=${SAME_STEPS:-30}
diag_every=${SAME_DIAG_EVERY:-0}
cache=${SAME_CACHE:-${TMPDIR:-/tmp}/drift_same_outputs}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"
old_hash=$(sha256sum "$old" | cut -c1-16)

train() {  # train BINARY CONFIG OUT_DIR
  nice "$1" train --config "$2" --set train.steps="$steps" --set train.log_every=1 \
    --set diagnostics.every="$diag_every" --out "$3" --quiet > "$3.log" 2>&1 \
    || { echo "same_outputs: $1 failed on $2:" >&2; cat "$3.log" >&2; return 1; }
}

status=0
for cfg in "${configs[@]}"; do
  name=$(basename "$cfg" .json)
  key="$old_hash-$(sha256sum "$cfg" | cut -c1-16)-s$steps-d$diag_every"
  if [ ! -s "$cache/$key/summary.json" ]; then
    rm -rf "${cache:?}/$key"
    train "$old" "$cfg" "$cache/$key"
  fi
  train "$new" "$cfg" "$work/$name"
  if verdict=$(python3 - "$cache/$key" "$work/$name" <<'PY'
import json, os, sys
old, new = sys.argv[1], sys.argv[2]

def metrics(d):
    lines = []
    for line in open(f"{d}/metrics.jsonl"):
        m = json.loads(line)
        for k in ("tokens_per_s", "elapsed_s"):
            m.pop(k, None)
        lines.append(m)
    return lines

def summary(d):
    s = json.load(open(f"{d}/summary.json"))
    for k in ("wall_s", "steps_per_s", "tokens_per_s", "routes"):
        s.pop(k, None)
    return s

def config(d):
    c = json.load(open(f"{d}/config.json"))
    c.pop("output", None)
    return c

def raw(name):  # None where the file is absent (diag.jsonl with diagnostics off)
    return lambda d: open(f"{d}/{name}", "rb").read() if os.path.exists(f"{d}/{name}") else None

# json.dumps writes every double in its shortest round-trip form (and -0.0, NaN, inf distinctly),
# so equal dumps mean equal values, bit for bit.
checks = {"metrics.jsonl": metrics, "summary.json": summary, "config.json": config,
          "diag.jsonl": raw("diag.jsonl"), "checkpoint.bin": raw("checkpoint.bin")}
differ = []
for name, read in checks.items():
    a, b = read(old), read(new)
    if not isinstance(a, bytes | None):
        a, b = json.dumps(a), json.dumps(b)
    if a != b:
        differ.append(name)
print(", ".join(differ))
sys.exit(1 if differ else 0)
PY
  ); then
    echo "same: $name"
  else
    echo "DIFFERENT: $name: $verdict"
    status=1
  fi
done
exit $status
