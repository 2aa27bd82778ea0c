// The fast fp32 kernel's sums computed by pairs of products: AVX512_BF16's VDPBF16PS takes two
// bf16 products into each fp32 lane as acc = fl(fl(acc + odd product) + even product), each product
// exact, each add rounded to nearest even. Where every operand value is exact in bf16, every product
// is exact in fp32 and no sum can be subnormal (the instruction flushes those), that is the fp32
// kernel's own sequence of fma steps, two at a time, at twice its products per instruction. MX and
// the other narrow element formats (FP8, FP6, FP4, int8 elements, their block scales applied after
// each block's sum) qualify by their formats (pair_formats_exact), bf16 by its data's range
// (pair_ranges_exact). matmul_fast decides per call and falls back to the float kernel wherever this
// one is not provably the same.
#pragma once
#include <cstddef>

#include "arith/format.h"
#include "arith/matmul_fast_shared.h"
#include "arith/matmul_workspace.h"

namespace drift {

// Whether this CPU runs the pair kernel: AVX512_BF16, and the AVX-512 target that packs the float
// kernel's strips 32 columns wide. A test hook (pair_kernel_set_for_test) overrides it.
bool pair_kernel_available();

// -1: as the CPU allows (the default); 0: never. (Tests compare the two kernels bit for bit.)
void pair_kernel_set_for_test(int mode);

// Whether products of values of formats fa and fb, summed in fp32 from +0, take the pair kernel's
// steps exactly: each value has at most 8 significant bits and lies in bf16's normal range (the
// instruction reads bf16 subnormals as zero), and the values' grids (multiples of 2^(emin -
// man_bits); integers: 1) multiply to at least 2^-126, so that every running sum, a multiple of that
// product, is 0 or at least fp32's smallest normal (the instruction flushes subnormal sums).
bool pair_formats_exact(const Format& fa, const Format& fb);

// Whether the values of formats fa and fb are exact in bf16 wherever they lie in its normal range:
// at most 8 significant bits and below 2^128. Calls on such formats (bf16 itself) take the pair
// kernel where their data pass pair_ranges_exact.
bool pair_formats_fit(const Format& fa, const Format& fb);

// pair_formats_exact's conditions on the data instead of the formats (fa, fb satisfying
// pair_formats_fit), from the smallest non-zero magnitude of each operand (INFINITY: all zero): no
// value below 2^-126, and the last bits of the smallest values (2^(max(ilogb(min), emin) -
// man_bits); integers 2^0; no finer for any larger value) multiplying to at least 2^-126.
bool pair_ranges_exact(const Format& fa, double a_min, const Format& fb, double b_min);

// C = A·B by the pair kernel for the packed float operands of the fp32 kernel (op: inner fp32, not
// counting, B in strips of 32 columns, kblock even unless one block), the same bits as that kernel.
// Packs A and B into bf16 pairs in s; returns false, computing nothing, where some operand value
// is not exact in bf16 (a value the formats do not bound: the caller then runs the float kernel).
bool pair_matmul(FastOperands& op, FastScratch& s);

}  // namespace drift
