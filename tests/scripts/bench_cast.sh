#!/usr/bin/env bash
# drift bench cast: one row per size x format x mode with the cast, both copies and their ratios
# consistent, and the counts of the benchmark's inputs (no timing is asserted: speed is a
# benchmark's business, never a test's); bad options exit 2 naming the option.
# Usage: bench_cast.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

OMP_NUM_THREADS=1 "$drift" bench cast --sizes 4K,1000 --formats bf16,fp8_e4m3 --modes rne,sr --min-time 0.001 --json > cast.json
python3 - cast.json <<'PY' || fail "bench cast rows: $(cat cast.json)"
import json, sys
doc = json.load(open(sys.argv[1]))
rows = doc["results"]
assert [(r["n"], r["format"], r["mode"]) for r in rows] == [
    (n, f, m) for n in (4096, 1000) for f in ("bf16", "fp8_e4m3") for m in ("rne", "sr")], rows
for r in rows:
    for key in ("scalar_1t_values_per_s", "simd_1t_values_per_s", "copy_1t_values_per_s", "memcpy_1t_values_per_s"):
        assert r[key] > 0, (key, r)
    assert abs(r["simd_1t_vs_copy"] - r["simd_1t_values_per_s"] / r["copy_1t_values_per_s"]) <= 1e-12 * r["simd_1t_vs_copy"], r
    assert abs(r["simd_1t_vs_memcpy"] - r["simd_1t_values_per_s"] / r["memcpy_1t_values_per_s"]) <= 1e-12 * r["simd_1t_vs_memcpy"], r
    # bf16 keeps fp32's range: the inputs (|x| < 2^10, normal(0,1) times 2^-6..2^6) never clip there.
    if r["format"] == "bf16":
        assert r["clipped"] == 0 and r["flushed"] == 0 and r["subnormal"] == 0 and r["nan"] == 0, r
PY

set +e; "$drift" bench cast --formats fp64 > out.txt 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] || fail "--formats fp64: exit $rc"
grep -q -- "--formats" err.txt || fail "--formats fp64 message: $(cat err.txt)"
echo "bench_cast: ok"
