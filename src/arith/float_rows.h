// Passes over contiguous float rows for the operand quantizer (quantize.cpp): their input counts and
// their scaling by a multiplier; and for a product written onto zero (model/sites.cpp), its +0. By
// SIMD on every target (Highway), with the bits and counts of the element-by-element statements (the
// *_scalar functions, which the tests compare against).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// The input counts of n floats: the largest finite magnitude, the number of NaN/inf and of
// subnormals (0 < |x| < 2^-126).
struct FloatRowCounts {
  float amax = 0;
  uint32_t nonfinite = 0, subnormal = 0;
};
FloatRowCounts float_row_counts(const float* p, size_t n);
FloatRowCounts float_row_counts_scalar(const float* p, size_t n);

// out[i] = fp32(in[i] * mult), one IEEE float multiply each, for a power of two `mult` whose inverse
// `inv` is a float too. Returns whether every product is exact (out[i] * inv == in[i]; a NaN input
// counts as exact): then out[i] is the double product in[i] * mult.
bool scale_floats_pow2(const float* in, float* out, size_t n, float mult, float inv);
bool scale_floats_pow2_scalar(const float* in, float* out, size_t n, float mult, float inv);

// out[i] = fp32(in[i] * mult), one IEEE float multiply each. Returns whether any input is NaN or any
// finite input's product overflowed to infinity.
bool scale_floats(const float* in, float* out, size_t n, float mult);
bool scale_floats_scalar(const float* in, float* out, size_t n, float mult);

// p[i] = +0 + p[i] for n floats, one IEEE add each: what adding each element into a +0 gives. A -0
// becomes +0 and a signalling NaN quiet; every other value stays. Only vectors that change are
// written back (a product's result seldom holds either).
void add_zero_floats(float* p, size_t n);
void add_zero_floats_scalar(float* p, size_t n);

// The input counts of each of n columns over h rows (row t at p + t*ld): amax[j] = the largest
// finite magnitude of column j, nonfinite[j] = its number of NaN/inf (an operand stored k-major:
// one scale block of every column at a time).
void float_column_counts(const float* p, size_t ld, size_t h, size_t n, float* amax, uint32_t* nonfinite);
void float_column_counts_scalar(const float* p, size_t ld, size_t h, size_t n, float* amax, uint32_t* nonfinite);

// out[i] = fp32(in[i] * mult[i]), one IEEE float multiply each, for powers of two mult[i] whose
// inverses inv[i] are floats too (scale_floats_pow2 with a multiplier per element). Returns whether
// every product is exact (out[i] * inv[i] == in[i]; a NaN input counts as exact).
bool scale_floats_pow2_each(const float* in, float* out, size_t n, const float* mult, const float* inv);
bool scale_floats_pow2_each_scalar(const float* in, float* out, size_t n, const float* mult, const float* inv);

// The targets compiled in that this CPU supports (hwy target bits), for tests.
std::vector<int64_t> float_rows_targets();

}  // namespace drift
