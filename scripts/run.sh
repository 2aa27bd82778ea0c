#!/usr/bin/env bash
# Sets everything up and runs drift's main job on the shipped data: a tanh MLP language model trained
# on Jane Austen's novels with every matmul under MXFP8 (E4M3, OCP MX v1.0 block scaling), about a
# minute on 2 cores. Results land in runs/mlp_mxfp8/seed0/ (a rerun replaces them: --force).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/drift train --config configs/mlp_mxfp8.json --out runs/mlp_mxfp8/seed0 --force "$@"
