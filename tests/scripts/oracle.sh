#!/usr/bin/env bash
# The exact oracle: checks `drift arith` bit for bit against scripts/oracle.py (exact rational
# arithmetic, no floating point) over exhaustive 8/6/4-bit pairs, every rounding boundary of fp16,
# bf16 and the narrow formats, random fp16/bf16/fp32 operations and stochastic rounding.
# Usage: bash tests/scripts/oracle.sh <path-to-drift-binary> <source-dir>
# Exits non-zero on any disagreement. ORACLE_ARGS adds options (e.g. --quick, --only GROUP).
set -euo pipefail
drift_bin="${1:?usage: oracle.sh <drift binary> <source dir>}"
src="${2:?usage: oracle.sh <drift binary> <source dir>}"
[ -x "$drift_bin" ] || { echo "oracle.sh: no drift binary at $drift_bin" >&2; exit 2; }
command -v python3 >/dev/null || { echo "oracle.sh: python3 is required" >&2; exit 2; }
# shellcheck disable=SC2086
exec python3 "$src/scripts/oracle.py" --drift "$drift_bin" --jobs "${ORACLE_JOBS:-2}" ${ORACLE_ARGS:-}
