#!/usr/bin/env bash
# The exact oracle of the microxcaling emulation (scaling.emulate): drift quantize must write what
# microxcaling's Python MX quantizer computes, re-derived with exact fractions, bit for bit.
# Usage (ctest): bash tests/scripts/oracle_microxcaling.sh <drift-binary> <source-dir>
set -euo pipefail
drift="${1:?usage: oracle_microxcaling.sh DRIFT_BINARY SOURCE_DIR}"
src="${2:?usage: oracle_microxcaling.sh DRIFT_BINARY SOURCE_DIR}"
exec python3 "$src/scripts/oracle_microxcaling.py" "$drift" --quick
