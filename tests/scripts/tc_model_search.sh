#!/usr/bin/env bash
# scripts/tc_model_search.py (exact Python integers, written apart from fused_accum.h) re-derives the
# B200 FP8 models from the measured vectors: c added after the fused 32-product group reproduces every
# fp32-output case, B200TC.m's c-in-group handling 3207 (E4M3) and 3236 (E5M2) of 5000 (the counts
# test_tensorcore pins for drift's own model), and the Hopper-style emulation every fp16-output case.
# Usage: tc_model_search.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
search() { python3 "$src/scripts/tc_model_search.py" "$src/data/tensorcore/B200/$1" --screen 0 --top 4 "${@:2}"; }
for fmt_published in E4M3:3207 E5M2:3236; do
  fmt=${fmt_published%:*} published=${fmt_published#*:}
  search "$fmt" --only 'terms=32;pattern=0;kept=25;cut=rtz;c=after,align;final=rtz' > "$fmt.txt"
  grep -q '^ 5000/5000  terms=32 pattern=0 kept=25 cut=rtz c=after final=rtz' "$fmt.txt" || fail "$fmt c after: $(cat "$fmt.txt")"
  grep -q "^ $published/5000  terms=32 pattern=0 kept=25 cut=rtz c=align final=rtz" "$fmt.txt" ||
    fail "$fmt published: $(cat "$fmt.txt")"
  search "$fmt" --output fp16 --only 'terms=16;pattern=2;kept=25;cut=rtz;c=end;final=rne;min_align=-21' > "$fmt.16.txt"
  grep -q '^ 5000/5000  terms=16 pattern=2' "$fmt.16.txt" || fail "$fmt fp16 output: $(cat "$fmt.16.txt")"
done
echo "tc_model_search: ok"
