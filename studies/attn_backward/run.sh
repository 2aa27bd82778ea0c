#!/usr/bin/env bash
# The attention study (docs/findings.md, finding 2): which casts of the attention language model's
# matmuls make it diverge where fp32 does not, and which rescue it.
#
#   bash studies/attn_backward/run.sh [-j N] [--out DIR] [--only PART]
#
# Parts (each one `drift sweep`, resumable: rerun after an interruption and it continues):
#   search     the recorded search for the phenomenon: fp32 and mx_bwd_both over learning rates
#              0.003, 0.01, 0.02, 0.03 (seed 1)                                8 runs
#   main       every policy in policies/ at base.json (lr 0.03), seeds 1-3      21 runs
#   mechanism  mx_bwd_both, seed 1, with diagnostics every 50 steps and two probes
#              (diagnostics.json: the rceil rescue and fp32) up to its divergence  1 run
#   interventions  mx_bwd_both switched in situ (precision.schedule) to fp32 or to rceil,
#              early (step 60: gradient norm already growing, loss still near fp32's) or
#              late (step 150: 20-50 steps before the spike), seeds 1-3  12 runs
# Each part leaves results/<part>.{md,json,csv,lead_time.md} and <out>/<part>/report.html.
# Time on 2 cores (-j 2): about 25 minutes for all three (600 steps: ~45 s a run).
# Needs build/drift (bash scripts/setup.sh builds it), or DRIFT=/path/to/drift.
STUDY_DIR=$(cd "$(dirname "$0")" && pwd)
source "$STUDY_DIR/../lib.sh"
study_init "$@"

study_sweep search --config "$STUDY_DIR/base.json" --seeds 1 --set train.lr=0.003,0.01,0.02,0.03 \
  --policies "$STUDY_DIR"/policies/fp32.json "$STUDY_DIR"/policies/mx_bwd_both.json
study_sweep main --config "$STUDY_DIR/base.json" --seeds 1-3 --policies "$STUDY_DIR"/policies/*.json
# mechanism: the diverging policy again, seed 1, with diagnostics every 50 steps: its gradient's
# cosine, relative error and bias against the exact fp64 gradient, and the same at the run's own
# weights for two probes (the rceil rescue and fp32), up to the divergence    1 run, ~25 minutes (an fp64 attention step is slow)
study_sweep mechanism --config "$STUDY_DIR/base.json" --seeds 1 \
  --set "diagnostics=$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["diagnostics"], separators=(",", ":")))' "$STUDY_DIR/diagnostics.json")" \
  --policies "$STUDY_DIR"/policies/mx_bwd_both.json
# interventions: the in-situ switches of the MX instability paper, on this study's failure
study_sweep interventions --config "$STUDY_DIR/base.json" --seeds 1-3 \
  --policies "$STUDY_DIR"/interventions/*.json
