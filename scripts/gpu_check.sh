#!/usr/bin/env bash
# The CUDA backend on a real GPU, in one run (under 8 minutes on one H200):
#   1. build with DRIFT_CUDA=ON (build-gpu/, all cores)
#   2. the GPU test suite (drift_gpu_tests) and the host proof of the kernel bodies
#   3. training bit-identity (scripts/backend_identity.sh): mlp and attn under mxfp8_e4m3,
#      nvfp4 and the H100 FP8 tensor-core model, 200 steps, backend cpu vs cuda, metrics.jsonl
#      and summary.json compared byte for
#      byte (timing fields aside)
#   4. native FP8: cuBLASLt FP8 GEMM (fast accumulation off and on) vs the simulator's h100_fp8_e4m3
#      model, on a shape cuBLASLt runs whole and one whose K it splits (the policy follows the split
#      `drift matmul` reports), bit agreement reported (scripts/bit_agreement.py)
#   5. drift bench gemm --backend cuda at 4096^3 with cuBLAS SGEMM (no TF32) as the reference
#   6. Blackwell block-scaled MMA (compute capability 10.x only; skipped on the H200, which lacks
#      it): one MXFP8 GEMM through cuBLASLt (scripts/blackwell_probe.cu) replayed under each
#      hypothesis preset; the one at 100% bit agreement is how the block sums join the accumulator
# and prints a summary table. Exit status: non-zero when a check (2 or 3) failed.
# Usage: scripts/gpu_check.sh [build-dir]   (env: GPU_CHECK_STEPS=200, GPU_CHECK_BENCH_SHAPE=4096x4096x4096)
# GPU_CHECK_PREBUILT=1 skips step 1 and runs the binaries already in the build dir: built on another
# machine with the same nvcc (cmake -DDRIFT_CUDA=ON; the CUDA runtime is linked statically and cuBLAS
# is opened at run time), carried over with the shared libraries they need on LD_LIBRARY_PATH, so
# that a short lease goes to the checks rather than to compiling.
# GPU_CHECK_EMULATE=1 rehearses the script on the CUDA emulator (tests/cuda_emu), on any x86-64
# machine: the same steps with drift_emu and drift_gpu_emu_tests (4 training steps unless
# GPU_CHECK_STEPS says otherwise); cuBLASLt and cuBLAS (steps 4 and 5) are skipped. Device time is
# scarce: rehearse before spending it.
set -uo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$src/build-gpu}"
emulate="${GPU_CHECK_EMULATE:-0}"
prebuilt="${GPU_CHECK_PREBUILT:-0}"
suffix="" gpu_test_args=()
if [ "$emulate" = 1 ]; then
  suffix=_emu gpu_test_args=(--test-case-exclude='*cuda-native*')
  export DRIFT_GPU_TESTS_EMULATED=1
fi
steps="${GPU_CHECK_STEPS:-$([ "$emulate" = 1 ] && echo 4 || echo 200)}"
shape="${GPU_CHECK_BENCH_SHAPE:-4096x4096x4096}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
declare -a rows
row() { rows+=("$(printf '%-50s %-6s %s' "$1" "$2" "$3")"); }
failed=0
t0=$(date +%s)
elapsed() { echo "$(( $(date +%s) - t0 ))s"; }

echo "== 1. build ($build)"
if [ "$prebuilt" = 1 ]; then
  missing=""
  for t in "drift$suffix" drift_tests "drift_gpu${suffix}_tests"; do
    if [ ! -x "$build/$t" ]; then missing+=" $t (absent)";
    elif ldd "$build/$t" | grep -q 'not found'; then missing+=" $t ($(ldd "$build/$t" | grep 'not found' | tr -s ' \t\n' ' '))"; fi
  done
  if [ -n "$missing" ]; then
    row "build (prebuilt, carried)" FAIL "not runnable:$missing"
    printf '%s\n' "${rows[@]}"
    exit 1
  fi
  row "build (prebuilt, carried)" ok "$(elapsed)"
elif cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDRIFT_CUDA=ON > "$work/configure.log" 2>&1 &&
   cmake --build "$build" -j"$(nproc)" --target "drift$suffix" drift_tests "drift_gpu${suffix}_tests" \
     > "$work/build.log" 2>&1; then
  row "build (DRIFT_CUDA=ON)" ok "$(elapsed)"
else
  tail -40 "$work/configure.log" "$work/build.log"
  row "build (DRIFT_CUDA=ON)" FAIL "see log above"
  printf '%s\n' "${rows[@]}"
  exit 1
fi
drift="$build/drift$suffix"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

echo "== 2. GPU tests"
"$build/drift_gpu${suffix}_tests" "${gpu_test_args[@]}" > "$work/gpu_tests.log" 2>&1
rc=$?
cat "$work/gpu_tests.log"
if [ $rc -eq 0 ]; then
  row "GPU tests (drift_gpu${suffix}_tests)" ok "$(grep -E '^\[doctest\] (test cases|assertions)' "$work/gpu_tests.log" | tr -s ' \n' ' ')"
elif [ $rc -eq 77 ]; then
  row "GPU tests (drift_gpu${suffix}_tests)" SKIP "$(head -1 "$work/gpu_tests.log")"
  failed=1
else
  row "GPU tests (drift_gpu${suffix}_tests)" FAIL "$(grep -E '^\[doctest\] assertions' "$work/gpu_tests.log")"
  failed=1
fi
if "$build/drift_tests" --source-file='*test_backend_element.cpp,*test_backend_quantize.cpp' > "$work/host.log" 2>&1; then
  row "host proof of the kernel bodies (matmul, quantize)" ok "$(grep -E '^\[doctest\] assertions' "$work/host.log")"
else
  tail -30 "$work/host.log"; row "host proof of the kernel bodies" FAIL ""; failed=1
fi

echo "== 3. training: backend cpu vs cuda, $steps steps"
# The eight runs go in parallel, two OpenMP threads each (results do not depend on thread counts).
JOBS=8 OMP_NUM_THREADS=2 "$src/scripts/backend_identity.sh" "$drift" "$work/identity" "$steps" "$steps" \
  > "$work/identity.log" 2>&1 || failed=1
cat "$work/identity.log"
while read -r line; do
  case "$line" in
    "train "*" ok "*) row "${line%% ok *}" ok "${line#* ok }, $(elapsed)" ;;
    "train "*" FAIL"*) row "${line%% FAIL*}" FAIL "$(elapsed)" ;;
  esac
done < "$work/identity.log"

if [ "$emulate" = 1 ]; then
  row "native FP8 (cuBLASLt), bench gemm (cuBLAS)" skip "not emulated: NVIDIA's libraries need a device"
else
  echo "== 4. native FP8 (cuBLASLt) vs the simulator's h100_fp8_e4m3 model"
  # Two shapes: one cuBLASLt runs whole, one whose K its heuristic splits on an H200 (docs/cuda.md).
  # (The loop's variable is not `shape`: step 5 reads that one.)
  python3 - "$work" <<'PY'
import struct, sys, random
def write(path, rows, cols, seed):
    r = random.Random(seed)
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%dd" % (rows * cols), *[r.gauss(0, 1) * 2.0 ** r.randint(-6, 6) for _ in range(rows * cols)]))
for m, k, n in ((256, 1024, 192), (32, 8192, 32)):
    write("%s/a_%d.npy" % (sys.argv[1], k), m, k, 1)
    write("%s/b_%d.npy" % (sys.argv[1], k), k, n, 2)
PY
  native_policy='{"preset": "fp8_tensor_e4m3"}'
  for dims in 256x1024x192 32x8192x32; do
    k=${dims#*x}; k=${k%x*}
    for acc in "" fastacc; do
      be="cuda-native${acc:+-$acc}"
      if "$drift" matmul --a "$work/a_$k.npy" --b "$work/b_$k.npy" --policy "$native_policy" --backend "$be" \
           --out "$work/native.npy" > "$work/native.json" 2>&1; then
        # The policy that describes the algorithm cuBLASLt ran: the model over 128-product blocks
        # added in fp32 (fast accumulation off) or over all of K (on); where it split K into S
        # parts, the splitk:S order over the blocks, or one block per part (docs/cuda.md).
        sim=$(python3 - "$work/native.json" "$k" "$acc" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["cublaslt"]["splitk"]
k, fast = int(sys.argv[2]), sys.argv[3] == "fastacc"
tiles = k // 128
if fast:
    inner, outer = {"fused": "h100_fp8_e4m3", "promote_every": 128 * -(-tiles // s) if s > 1 else 0}, {}
else:
    inner, outer = {"fused": "h100_fp8_e4m3", "promote_every": 128}, {"order": "splitk:%d" % s} if s > 1 else {}
print(json.dumps({"preset": "fp8_tensor_e4m3", "inner": inner, "outer": outer}))
PY
)
        splitk=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cublaslt"]["splitk"])' "$work/native.json")
        if "$drift" matmul --a "$work/a_$k.npy" --b "$work/b_$k.npy" --policy "$sim" --out "$work/sim.npy" > /dev/null; then
          line=$(python3 "$src/scripts/bit_agreement.py" "$work/native.npy" "$work/sim.npy" --label "$be vs model")
          echo "$line (cuBLASLt split K in $splitk; policy $sim)"
          row "$be vs h100_fp8 model ($dims, splitk $splitk)" info "${line#*: }"
        else
          row "$be vs h100_fp8 model ($dims)" FAIL "the simulator did not run $sim"
        fi
      else
        cat "$work/native.json"
        row "$be vs h100_fp8 model ($dims)" FAIL "did not run"
      fi
    done
  done

  echo "== 5. bench gemm --backend cuda ($shape)"
  if "$drift" bench gemm --backend cuda --shapes "$shape" --min-seconds 0.5 \
       --policies fp32 mxfp8_e4m3 fp8_e4m3-fp32acc h100_fp8 h100_fp8_promote128 > "$work/bench.txt" 2>&1; then
    cat "$work/bench.txt"
    while read -r policy sh kernel call sgemm ratio path; do
      [ "$policy" = policy ] && continue
      row "bench $policy $sh" info "kernel $kernel GF/s, call $call GF/s, cuBLAS SGEMM $sgemm GF/s, ratio $ratio ($path)"
    done < "$work/bench.txt"
  else
    cat "$work/bench.txt"; row "bench gemm --backend cuda" FAIL ""
  fi


  echo "== 6. Blackwell block-scaled MMA: which hypothesis"
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1)
  if [ "${cc%%.*}" -lt 10 ] 2>/dev/null || [ -z "$cc" ]; then
    row "block-scaled MMA hypotheses (MXFP8)" skip "compute capability ${cc:-unknown}: no tcgen05 block-scaled MMA (sm_100)"
  elif nvcc -O2 -arch=sm_100a "$src/scripts/blackwell_probe.cu" -lcublasLt -o "$work/probe" > "$work/probe.log" 2>&1 &&
       "$work/probe" "$work" >> "$work/probe.log" 2>&1; then
    cat "$work/probe.log"
    # The hypotheses, and plain fp32 accumulation for scale.
    for hyp in b200_mxfp8_e4m3_blocksum b200_mxfp8_e4m3_folded mxfp8_e4m3; do
      "$drift" matmul --a "$work/a.npy" --b "$work/b.npy" --policy "$hyp" --out "$work/hyp.npy" > /dev/null &&
        line=$(python3 "$src/scripts/bit_agreement.py" "$work/d.npy" "$work/hyp.npy" --label "MXFP8 MMA vs $hyp")
      echo "$line"
      row "MXFP8 MMA vs $hyp" info "${line#*: }"
    done
  else
    cat "$work/probe.log"; row "block-scaled MMA probe" FAIL "see log above"
  fi
fi

echo
echo "== summary ($(elapsed) total)"
printf '%-50s %-6s %s\n' "check" "result" "detail"
printf '%s\n' "${rows[@]}"
exit $failed
