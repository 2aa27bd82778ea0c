# The preamble every end-to-end script shares (not a test itself: ctest runs tests/scripts/*.sh).
# Source it first, with the script's arguments:
#   source "$(dirname "$0")/common.bash" "$@"      (the script is run as: script <drift-binary> <source-dir>)
# It sets `drift` and `src` as absolute paths (the checks run elsewhere), moves into a scratch
# directory removed on exit, and defines fail(), no_timing() and same_summary().
set -euo pipefail
drift="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
src="$(cd "${2:-.}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

fail() { echo "FAIL: $*" >&2; exit 1; }

# A metrics.jsonl without its timing: every line ends with ..."tokens_per_s":X,"elapsed_s":Y}, so
# the bytes before "tokens_per_s" are what must be identical between two runs of one config and seed.
# A line without the field is kept whole, so a moved field fails a comparison rather than hiding it.
no_timing() { sed 's/,"tokens_per_s".*//' "$1"; }

# Whether two summary.json files agree apart from their timing fields (wall_s, steps_per_s, tokens_per_s)
# and the routes (which kernels ran: they differ between backends and after a resume).
same_summary() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("wall_s", "steps_per_s", "tokens_per_s", "routes"):
    a.pop(k); b.pop(k)
assert a == b, (a, b)
PY
}
