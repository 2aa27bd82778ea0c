#!/usr/bin/env bash
# Installs drift's build dependencies (Debian packages only) and builds it into build/.
# Works on a fresh Debian bookworm machine as root; as a normal user it uses sudo when needed.
set -euo pipefail
cd "$(dirname "$0")/.."

# python3-torch and python3-numpy: the independent PyTorch reference (scripts/reference_pytorch.py) and
# its test; they install for Debian's /usr/bin/python3, which is how the scripts call Python for them.
# slurm-wlm and munge: tests/scripts/slurm_sweep.sh starts a single-node Slurm of its own (its own
# key, config and daemons in a scratch directory) to test drift sweep --launcher slurm.
# libjs-dygraphs: the charting library drift report inlines into its page; chromium: the headless
# browser the report test renders it in (tests/scripts/report_browser.sh).
# clang, libclang-rt-14-dev (ASan/UBSan/libFuzzer runtimes) and libomp-dev (clang's OpenMP): the
# sanitizer and fuzzing build of scripts/sanitize.sh.
packages=(g++ cmake make pkg-config python3 libcli11-dev nlohmann-json3-dev libspdlog-dev libhwy-dev
          doctest-dev librandom123-dev libopenblas-dev python3-torch python3-numpy slurm-wlm munge
          libjs-dygraphs chromium clang libclang-rt-14-dev libomp-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build_type="${DRIFT_BUILD_TYPE:-Release}"
cmake -S . -B build -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
cmake --build build -j"$(nproc)"
echo "setup: built build/drift ($(./build/drift --version))"
if [ -e build/libdriftcuda.a ]; then
  echo "setup: CUDA backend built (DRIFT_CUDA; GPU-only tests skip without a device)"
else
  echo "setup: CUDA backend not built (no nvcc, or DRIFT_CUDA=OFF)"
fi
