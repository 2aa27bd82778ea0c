#!/usr/bin/env bash
# drift tcverify end to end: without flags every shipped vector set replays as its measured.txt says
# (the H100 FP8 fp32-output sets with c = 0), and bad sets are reported with file and line.
# Usage: tcverify_cli.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
data="$src/data/tensorcore"

# 1. Every set, no flags: exit 0, one line per result file, each 5000/5000.
"$drift" tcverify "$data" > all.txt || fail "drift tcverify $data: exit $?"
files=$(find "$data" -name 'd_*_fp*.txt' | wc -l)
[ "$(grep -c ' 5000/5000  ok$' all.txt)" -eq "$files" ] || fail "expected $files files 5000/5000, got: $(cat all.txt)"
grep -q 'H100/E4M3/d_H100_fp32.txt h100_fp8_e4m3 *c=zero' all.txt || fail "H100 E4M3 fp32 not replayed with c = 0"
grep -q 'B200/E4M3/d_B200_fp32.txt b200_fp8_e4m3 *c=file' all.txt || fail "B200 E4M3 fp32 not replayed with c from the file"

# 2. One set with --preset and --output all: c per file from measured.txt.
"$drift" tcverify "$data/H100/E5M2" --preset h100_fp8_e5m2 --output all --json > e5.json || fail "H100/E5M2 --output all"
python3 - e5.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = {f["output"]: f["c"] for f in r["files"]}
assert r["all_match"] and c == {"fp32": "zero", "fp16": "file"}, r
PY

# 3. --c overrides measured.txt (and then the B200 FP8 set, measured with c, mismatches: exit 1).
set +e
"$drift" tcverify "$data/B200/E4M3" --c zero --output fp32 > over.txt; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q 'c=zero .* MISMATCH' over.txt || fail "--c zero override: exit $rc, $(cat over.txt)"

# 4. A copy without measured.txt: --preset needed (exit 2); with it, the c = 0 hint on a mismatch.
mkdir -p copy && cp "$data"/H100/E4M3/[abcd]_*.txt copy/
set +e
"$drift" tcverify copy > none.txt 2>&1; rc=$?
[ "$rc" -eq 2 ] && grep -q 'no measured.txt' none.txt || fail "no measured.txt, no --preset: exit $rc, $(cat none.txt)"
"$drift" tcverify copy --preset h100_fp8_e4m3 > hint.txt 2>&1; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q 'H100 and H200 FP8 .* c = 0' hint.txt || fail "c = 0 hint: exit $rc, $(cat hint.txt)"
"$drift" tcverify copy --preset h100_fp8_e4m3 --c zero > /dev/null || fail "--c zero on the copy"

# 5. A malformed measured.txt: exit 2, file and line named, nothing else printed.
printf 'fp32 h100_fp8_e4m3 c=zero\nfp16 h100_fp8_e4m3 c=file\n' > copy/measured.txt
set +e
"$drift" tcverify copy > bad.txt 2> bad.err; rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q 'copy/measured.txt line 2: preset h100_fp8_e4m3 has fp32 output, not fp16' bad.err \
  || fail "bad measured.txt: exit $rc, $(cat bad.err)"
[ ! -s bad.txt ] || fail "bad measured.txt printed results: $(cat bad.txt)"
echo "tcverify_cli: ok"
