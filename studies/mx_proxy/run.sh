#!/usr/bin/env bash
# The MX instability paper's student-teacher proxy (docs/findings.md, finding 1), in the paper's
# form (model.student "bare", teacher "mlp", torch_uniform init, label noise 0.005, Adam with
# beta2 0.999, constant learning rate, no clipping): does MXFP8 (E4M3 forward, E5M2 gradients,
# LayerNorm affine weights and biases in MXFP8, bf16 elsewhere) fail where fp32 does not?
#
#   bash studies/mx_proxy/run.sh [-j N] [--out DIR] [--only PART]
#
# Parts (each one `drift sweep`, resumable: rerun after an interruption and it continues):
#   search  width 64, batch 128, 2000 steps; lr 0.001, 0.003, 0.01, 0.03 x {fp32, mx,
#           mx_microxcaling} (seed 1)                                 12 runs, ~10 min
#   wide    base.json: width 128, depth 4, batch 256, 6000 steps; lr 0.001, 0.003, 0.01
#           x {fp32, mx} (seed 1)                                      6 runs, ~1.5 h
#   main    every policy in policies/ at width 64, batch 128, lr 0.01 (the edge: the search's
#           fp32 and mx both survive 2000 steps there, both diverge at 0.03), 6000 steps,
#           seeds 1-3                                                  21 runs, ~1 h
#   edge    every policy at width 64, batch 128, lr 0.02 and 0.03 (where the search's fp32 and mx
#           both diverged at 0.03), 2000 steps, seeds 1-3: which policies fail first, and which
#           survive, where training is unstable in any precision      42 runs, ~25 min
#   interventions  mx at lr 0.03 (it diverged on 3/3 seeds at steps 820, 677, 924; fp32 on seeds 1
#           and 3 only) switched in situ (precision.schedule) to fp32, or with LayerNorm's γ and β
#           exempt (bf16), early (step 400, before any gradient-norm onset) or late (step 650,
#           27 steps before seed 2's spike), seeds 1-3, 2000 steps         12 runs, ~10 min
# Each part leaves results/<part>.{md,json,csv,lead_time.md} and <out>/<part>/report.html.
# Needs build/drift (bash scripts/setup.sh builds it), or DRIFT=/path/to/drift.
STUDY_DIR=$(cd "$(dirname "$0")" && pwd)
source "$STUDY_DIR/../lib.sh"
study_init "$@"

study_sweep search --config "$STUDY_DIR/base.json" --seeds 1 \
  --set model.d_model=64 --set train.batch=128 --set train.steps=2000 --set train.eval_every=200 \
  --set train.lr=0.001,0.003,0.01,0.03 \
  --policies "$STUDY_DIR"/policies/fp32.json "$STUDY_DIR"/policies/mx.json "$STUDY_DIR"/policies/mx_microxcaling.json
study_sweep wide --config "$STUDY_DIR/base.json" --seeds 1 --set train.lr=0.001,0.003,0.01 \
  --policies "$STUDY_DIR"/policies/fp32.json "$STUDY_DIR"/policies/mx.json
study_sweep main --config "$STUDY_DIR/base.json" --seeds 1-3 \
  --set model.d_model=64 --set train.batch=128 --set train.lr=0.01 \
  --policies "$STUDY_DIR"/policies/*.json
study_sweep edge --config "$STUDY_DIR/base.json" --seeds 1-3 \
  --set model.d_model=64 --set train.batch=128 --set train.steps=2000 --set train.eval_every=200 \
  --set train.lr=0.02,0.03 --policies "$STUDY_DIR"/policies/*.json
study_sweep interventions --config "$STUDY_DIR/base.json" --seeds 1-3 \
  --set model.d_model=64 --set train.batch=128 --set train.steps=2000 --set train.eval_every=200 \
  --set train.lr=0.03 --policies "$STUDY_DIR"/interventions/*.json
