#!/usr/bin/env bash
# drift bench gemm --policies: every name a user can time (a bench policy, any tensor-core preset or
# 'tensorcore' for all of them, a matmul preset) gives one row per shape in the order asked, each
# ratio its GFLOP/s over sgemm's; every tensor-core preset takes the fast kernel (the route its
# speed target is about); sgemm runs on the engine's OpenMP thread count, whatever OpenBLAS read from
# the environment; an unknown name exits 2 naming it. No timing is asserted: speed is a
# benchmark's business, never a test's.
# Usage: bench_gemm.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

"$drift" tcverify --list > list.txt
OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=1 "$drift" bench gemm --policies h100_fp16_out16 tensorcore mxfp6 \
  --shapes 8x16x40 --min-seconds 0.001 --json > rows.json
python3 - list.txt rows.json <<'PY' || fail "bench gemm rows: $(head -c 2000 rows.json)"
import json, sys
# The preset names, as tcverify --list prints them: a line per preset starting with its name.
presets = [l.split()[0] for l in open(sys.argv[1]) if l[:1].isalnum()]
assert len(presets) >= 40 and "v100_fp16" in presets and "b200_fp8_e4m3_out16" in presets, presets
rows = json.load(open(sys.argv[2]))
assert [r["policy"] for r in rows] == ["h100_fp16_out16"] + presets + ["mxfp6"], [r["policy"] for r in rows]
for r in rows:
    assert (r["m"], r["n"], r["k"]) == (8, 16, 40), r
    assert r["gflops"] > 0 and r["sgemm_gflops"] > 0, r
    # OpenBLAS's own pool read 2 from the environment; the reference runs on the engine's 1.
    assert r["threads"] == 1 and r["sgemm_threads"] == 1, r
    assert abs(r["ratio"] - r["gflops"] / r["sgemm_gflops"]) <= 1e-12 * r["ratio"], r
    # This core's multiply-add rate, measured once for the run (fma_peak.h).
    assert r["fma_peak_gflops"] == rows[0]["fma_peak_gflops"] > 0, r
    assert abs(r["of_peak"] - r["gflops"] / (r["fma_peak_gflops"] * r["threads"])) <= 1e-12 * r["of_peak"], r
    if r["policy"] in presets:
        assert r["path"] == "fast", r
PY

set +e; "$drift" bench gemm --policies a100_fp16 no_such_gpu --shapes 8x8x8 > out.txt 2> err.txt; rc=$?; set -e
[ "$rc" -eq 2 ] || fail "--policies no_such_gpu: exit $rc"
grep -q "'no_such_gpu'" err.txt || fail "--policies no_such_gpu message: $(cat err.txt)"
[ ! -s out.txt ] || fail "--policies no_such_gpu printed rows before refusing: $(cat out.txt)"
echo "bench_gemm: ok"
