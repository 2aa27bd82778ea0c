#!/usr/bin/env bash
# The tanh-MLP study (docs/findings.md, finding 2a): how often MXFP8's floor rule clips tanh
# outputs, whether one more bit of exponent headroom (ceil, rceil) removes it, and what each cast
# does to the gradient: per-tensor FP8 against MXFP8 floor, the size (rel_error) and direction
# (bias, cosine) of the gradient error against the exact fp64 gradient (diagnostics every 250 steps).
#
#   bash studies/mlp_tanh/run.sh [-j N] [--out DIR]
#
# Part main: 5 policies x seeds 1-3, 2000 steps each (15 runs, about 5 minutes on 2 cores).
# Leaves results/main.{md,json,csv,lead_time.md} and <out>/main/report.html.
STUDY_DIR=$(cd "$(dirname "$0")" && pwd)
source "$STUDY_DIR/../lib.sh"
study_init "$@"

study_sweep main --config "$STUDY_DIR/base.json" --seeds 1-3 --policies "$STUDY_DIR"/policies/*.json
