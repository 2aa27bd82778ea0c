// The exact dot product of doubles, rounded once: the reference `drift matmul --exact-error`
// measures a policy's result against.
#pragma once

#include <cstddef>

#include "arith/format.h"

namespace drift {

// sum over k of a[k * a_stride] * b[k * b_stride], computed exactly and rounded once to the nearest
// double (ties to even). Each product is split exactly into two doubles with a fused multiply-add
// (std::fma, called by name: the low part is a*b - hi, exact), and the 2K terms are added without
// error as Shewchuk's non-overlapping expansion (the algorithm of Python's math.fsum), then rounded
// once. Exact while no product underflows below 2^-969 (its low part would round) and no partial sum
// overflows; with a non-finite product the result is the IEEE sum of the products (inf or NaN).
double exact_dot(const double* a, size_t a_stride, const double* b, size_t b_stride, size_t k);

// The spacing of format f's grid at x (the value of one unit in the last place): 2^(e - man_bits)
// with e = max(floor(log2 |x|), emin), e capped at the largest finite exponent; 1 for integer formats.
double ulp_of(double x, const Format& f);

}  // namespace drift
