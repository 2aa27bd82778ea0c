#!/usr/bin/env bash
# Every shipped config resolves (`drift explain`) and trains for a few steps without error, and
# writes the run files, run from a directory outside the repository (a relative data.path is found
# from the config file's directory upward). Usage: shipped_configs.sh <drift-binary> <source-dir>
set -euo pipefail
drift="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
src="$(cd "$2" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail=0
# A relative data.path found nowhere: the error names the key and where it looked.
mkdir -p "$tmp/cfgdir"
echo '{"data": {"path": "no/such/corpus"}, "train": {"steps": 1}}' > "$tmp/cfgdir/missing.json"
if "$drift" train --config "$tmp/cfgdir/missing.json" --out "$tmp/missing" > "$tmp/missing.log" 2>&1; then
  echo "FAIL: a missing data.path trained"; fail=1
elif ! grep -q "data.path: no/such/corpus: no such file or directory.*config file's directory.*$tmp/cfgdir" "$tmp/missing.log"; then
  echo "FAIL: the missing data.path message: $(cat "$tmp/missing.log")"; fail=1
fi
for cfg in "$src"/configs/*.json; do
  name=$(basename "$cfg" .json)
  if ! "$drift" explain --config "$cfg" > "$tmp/$name.explain" 2>&1; then
    echo "FAIL explain $cfg"; cat "$tmp/$name.explain"; fail=1; continue
  fi
  if ! "$drift" train --config "$cfg" --set train.steps=3 --set train.eval_every=3 --set train.eval_batches=1 \
       --out "$tmp/$name" --quiet > "$tmp/$name.log" 2>&1; then
    echo "FAIL train $cfg"; cat "$tmp/$name.log"; fail=1; continue
  fi
  for f in config.json metrics.jsonl summary.json provenance.json; do
    [ -s "$tmp/$name/$f" ] || { echo "FAIL $cfg: no $f"; fail=1; }
  done
  grep -q '"steps_completed": 3' "$tmp/$name/summary.json" || { echo "FAIL $cfg: did not complete 3 steps"; fail=1; }
  echo "ok $cfg"
done
exit $fail
