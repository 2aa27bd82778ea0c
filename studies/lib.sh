# Shared by every studies/<name>/run.sh: run one of the study's sweeps through `drift sweep`
# (resumable: finished runs are skipped, so a killed study continues where it stopped), then
# `drift compare` and `drift report` over it, and copy the small result files (the compare table in
# markdown, JSON and CSV, and the divergence lead-time table) into studies/<name>/results/.
# Run directories stay under the output folder (default runs/studies/<name>/), never in git.
#
# A study's run.sh sets STUDY_DIR and calls: study_init "$@"; study_sweep PART ARGS...
set -euo pipefail

study_init() {
  STUDY_NAME=$(basename "$STUDY_DIR")
  REPO_DIR=$(cd "$STUDY_DIR/../.." && pwd)
  DRIFT=${DRIFT:-$REPO_DIR/build/drift}
  JOBS=2
  OUT_ROOT=runs/studies/$STUDY_NAME
  ONLY=""
  while [[ $# -gt 0 ]]; do
    case "$1" in
      -j) JOBS=$2; shift 2 ;;
      --out) OUT_ROOT=$2; shift 2 ;;
      --only) ONLY=$2; shift 2 ;;
      -h|--help) sed -n '2,/^$/p' "$STUDY_DIR/run.sh" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) echo "$STUDY_NAME/run.sh: unknown option '$1' (expected -j N, --out DIR, --only PART)" >&2; exit 2 ;;
    esac
  done
  if [[ ! -x "$DRIFT" ]]; then
    echo "$STUDY_NAME/run.sh: no drift binary at $DRIFT (build it: bash scripts/setup.sh, or set DRIFT=...)" >&2
    exit 2
  fi
  mkdir -p "$STUDY_DIR/results"
}

# study_sweep PART [drift sweep options: --config, --seeds, --set, --policies ...]
# Give paths as "$STUDY_DIR/..." (the sweep runs in the current directory).
study_sweep() {
  local part=$1; shift
  if [[ -n "$ONLY" && "$ONLY" != "$part" ]]; then return 0; fi
  local out="$OUT_ROOT/$part"
  echo "== $STUDY_NAME/$part -> $out"
  "$DRIFT" sweep "$@" -j "$JOBS" --out "$out" --progress-every 60
  study_results "$part" "$out"
}

# The result files of one finished (or partly finished) sweep.
study_results() {
  local part=$1 out=$2 res="$STUDY_DIR/results"
  "$DRIFT" compare "$out" --format markdown > "$res/$part.md.tmp" && mv "$res/$part.md.tmp" "$res/$part.md"
  "$DRIFT" compare "$out" --format json > "$res/$part.json.tmp" && mv "$res/$part.json.tmp" "$res/$part.json"
  "$DRIFT" compare "$out" --format csv > "$res/$part.csv.tmp" && mv "$res/$part.csv.tmp" "$res/$part.csv"
  python3 "$REPO_DIR/studies/lead_time.py" "$out" > "$res/$part.lead_time.md.tmp" &&
    mv "$res/$part.lead_time.md.tmp" "$res/$part.lead_time.md"
  "$DRIFT" report "$out" --out "$out/report.html" > /dev/null
  echo "   results: $res/$part.{md,json,csv,lead_time.md}; charts: $out/report.html"
}
