// 2^(i/32) for i in [0, 32): glibc's __exp2f_data table (sysdeps/ieee754/flt-32/e_exp2f_data.c,
// EXP2F_TABLE_BITS = 5), copied bit for bit. Each entry is the double nearest 2^(i/32), stored
// minus (i << 47), so that adding k << 47 to T[k mod 32] gives the bits of 2^(k/32) for any integer
// k whose result is a normal double: the low bits of k land in the exponent field as floor(k/32).
// drift's fp32 exp (exp_fp32) and the quick route of its fp32 tanh (tanh_fp32) look it up.
#pragma once

#include <cstdint>

namespace drift::exp2_table {

constexpr int kTableBits = 5;
constexpr uint64_t kTableMask = (uint64_t{1} << kTableBits) - 1;
alignas(64) constexpr uint64_t kTable[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

}  // namespace drift::exp2_table
