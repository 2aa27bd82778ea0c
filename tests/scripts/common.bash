# The preamble every end-to-end script shares (not a test itself: ctest runs tests/scripts/*.sh).
# Source it first, with the script's arguments:
#   source "$(dirname "$0")/common.bash" "$@"      (the script is run as: script <drift-binary> <source-dir>)
# It sets `drift` and `src` as absolute paths (the checks run elsewhere), moves into a scratch
# directory removed on exit, and defines fail() and no_timing().
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
