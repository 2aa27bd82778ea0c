#!/usr/bin/env bash
# Every shipped config resolves (`drift explain`) and trains for a few steps without error, and
# writes the run files. Usage: shipped_configs.sh <drift-binary> <source-dir>
set -euo pipefail
drift="$1"
cd "$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for cfg in configs/*.json; do
  name=$(basename "$cfg" .json)
  if ! "$drift" explain --config "$cfg" > "$tmp/$name.explain" 2>&1; then
    echo "FAIL explain $cfg"; cat "$tmp/$name.explain"; fail=1; continue
  fi
  if ! "$drift" train --config "$cfg" --set train.steps=3 --set train.eval_every=3 --set train.eval_batches=1 \
       --out "$tmp/$name" --quiet > "$tmp/$name.log" 2>&1; then
    echo "FAIL train $cfg"; cat "$tmp/$name.log"; fail=1; continue
  fi
  for f in config.json metrics.jsonl summary.json; do
    [ -s "$tmp/$name/$f" ] || { echo "FAIL $cfg: no $f"; fail=1; }
  done
  grep -q '"steps_completed": 3' "$tmp/$name/summary.json" || { echo "FAIL $cfg: did not complete 3 steps"; fail=1; }
  echo "ok $cfg"
done
exit $fail
