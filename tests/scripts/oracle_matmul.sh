#!/usr/bin/env bash
# The exact matmul oracle: drift matmul must match exact-fraction matmuls bit for bit for a spread
# of policies (scaling kinds, orders, accumulator formats and roundings, the fused model, split-K).
# Usage (ctest): bash tests/scripts/oracle_matmul.sh <drift-binary> <source-dir>
set -euo pipefail
drift="${1:?usage: oracle_matmul.sh DRIFT_BINARY SOURCE_DIR}"
src="${2:?usage: oracle_matmul.sh DRIFT_BINARY SOURCE_DIR}"
exec python3 "$src/scripts/oracle_matmul.py" "$drift"
