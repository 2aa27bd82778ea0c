#!/usr/bin/env bash
# drift arith --decimal rounds each decimal operand once, to nearest even, to the operand format:
# not to double first and then to the format (double rounding), which is wrong exactly where the
# double lands on a midpoint of the format that the decimal itself is not on. Operands are added to
# 0, so the printed result is the operand's rounding.
# Usage: arith_decimal.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"

# check FORMAT DECIMAL EXPECTED-HEX WHY
check() {
  local got
  got=$(echo "$2 0" | "$drift" arith --op add --format "$1" --decimal) || fail "$1 '$2': exit $?"
  [ "$got" = "$3" ] || fail "$1 '$2': expected $3 ($4), got $got"
}

# fp8_e4m3 near 1: spacing 1/8, so 1 = 0x38, 1.125 = 0x39, 1.25 = 0x3a; midpoints 1.0625, 1.1875.
check fp8_e4m3 1.0625 38 "exactly the midpoint of 1 and 1.125: ties to even, 1 (mantissa 000)"
check fp8_e4m3 1.0625000000000001 39 "1e-16 above the midpoint 17/16 (strtod gives 17/16 exactly): 1.125"
check fp8_e4m3 1.0624999999999999 38 "below the midpoint: 1"
check fp8_e4m3 1.1875 3a "exactly the midpoint of 1.125 and 1.25: ties to even, 1.25 (mantissa 010)"
check fp8_e4m3 1.1874999999999999 39 "1e-16 below the midpoint 19/16 (strtod gives 19/16 exactly): 1.125, not the even 1.25"
check fp8_e4m3 1.1875000000000001 3a "above the midpoint: 1.25"
check fp8_e4m3 -1.0625 b8 "mirror: ties to even, -1"
check fp8_e4m3 -1.0625000000000001 b9 "mirror: beyond the midpoint in magnitude, -1.125"
check fp8_e4m3 -1.1874999999999999 b9 "mirror: short of the midpoint in magnitude, -1.125"
check fp8_e4m3 -1.1875 ba "mirror: ties to even, -1.25"

# bf16 near 1: spacing 2^-7; the midpoint of 1 (0x3f80) and 1+2^-7 (0x3f81) is 1+2^-8 = 1.00390625.
check bf16 1.00390625 3f80 "exactly the midpoint: ties to even, 1"
check bf16 1.00390625000000001 3f81 "1e-17 above the midpoint (strtod gives the midpoint): 1+2^-7"
check bf16 -1.00390625000000001 bf81 "mirror: -(1+2^-7)"
check bf16 -1.00390625 bf80 "mirror: ties to even, -1"

# fp32 near 1: spacing 2^-23; midpoints 1+2^-24 = 1.000000059604644775390625 (between 0x3f800000
# and 0x3f800001) and 1+3*2^-24 = 1.000000178813934326171875 (between 0x3f800001 and 0x3f800002).
check fp32 1.000000059604644775390625 3f800000 "exactly the midpoint: ties to even"
check fp32 1.0000000596046448 3f800001 "2.5e-17 above the midpoint (strtod gives the midpoint): up"
check fp32 -1.0000000596046448 bf800001 "mirror"
check fp32 1.000000178813934326171875 3f800002 "exactly the midpoint: ties to even (…02)"
check fp32 1.0000001788139343 3f800001 "2.6e-18 below the midpoint (strtod gives the midpoint): down to the odd …01"
check fp32 -1.0000001788139343 bf800001 "mirror"

# Away from midpoints nothing changes; fp64 takes strtod's own correctly rounded value.
check fp32 0.1 3dcccccd "0.1 to nearest"
check fp32 -0.1 bdcccccd "-0.1 to nearest"
check fp64 0.1 3fb999999999999a "strtod's double"
check fp64 1.00000000000000011102230246251565404236316680908203125 3ff0000000000000 "the double midpoint 1+2^-53 exactly: ties to even, 1"
check fp64 1.00000000000000011102230246251565404236316680908203126 3ff0000000000001 "just above the double midpoint: 1+2^-52"
check fp8_e4m3 1e-400 00 "far below every value: +0"
got=$(echo "1e400 0" | "$drift" arith --op add --format fp32 --decimal --overflow ieee)
[ "$got" = 7f800000 ] || fail "fp32 '1e400': expected +inf (beyond double's range, IEEE overflow), got $got"

# The rounding mode is restored: later operations round to nearest as before.
got=$(printf '1.0625000000000001 0\n0x1p-1 0\n' | "$drift" arith --op add --format fp8_e4m3 --decimal | tr '\n' ' ')
[ "$got" = "39 30 " ] || fail "two lines: expected '39 30 ', got '$got'"
echo "arith_decimal: OK"
