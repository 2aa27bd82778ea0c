// MX block quantization of float input in one pass: each block's amax, its e8m0 scale by the OCP
// floor rule, the block scaled by the inverse power of two and rounded to nearest even, and the
// statistics of all of it. The quantizer's MX presets spend most of their time here; done as
// separate passes (the amaxes, then a scalar loop over the blocks for scales and counts, then the
// scaled cast) the bookkeeping between the passes cost more than the cast itself.
//
// The results are those of the separate steps, bit for bit and count for count: the amax is the
// largest finite |x| (on the encodings), the exponent floor(log2 amax) - shift clamped to
// [-127, 127] (-127 for an all-zero block) as plain_e8m0_exponent computes it, the elements
// cast_span's rne results of fp32(x * 2^-e) where that product is exact. A block that is not
// written (a NaN or inf in it, or a product that would round) is left to the caller's element path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arith/cast_span.h"

namespace drift {

// What one call counted.
struct MxCastTally {
  CastStats cast;          // the rne cast's counts over the blocks written
  uint64_t nonfinite = 0;  // NaN and inf elements (in the blocks marked kMxNonFinite)
  float amax = 0;          // the largest finite magnitude, every block's
  // Exponents of the blocks with a non-zero finite amax: how many, their range and sum, and
  // hist[e + 127] of each exponent e (e8m0: e in [-127, 127]).
  uint64_t scales = 0;
  int e_min = 0, e_max = 0;
  int64_t e_sum = 0;
  uint32_t hist[255] = {};
};

// A block's fate in mx_cast_blocks (status[i]).
enum MxBlockStatus : uint8_t {
  kMxWritten = 0,       // scaled, cast and its scale stored
  kMxNonFinite = 1,     // holds a NaN or inf: neither written nor its scale stored (the caller marks it)
  kMxScaleInexact = 2,  // its scale stored and counted, but some fp32(x * 2^-e) is not exact: not written
};

// Whether the one-pass kernels apply: a round-to-nearest-even cast (has_rne_kernel) and blocks of b
// elements that are whole SIMD vectors on this CPU.
bool mx_cast_applies(const SpanCast& cast, size_t b);

// nblocks blocks of b consecutive floats from `in` into `out`; block i's scale 2^e into scale[i]
// (shift: the element format's emax minus the rule's offset) and its fate into status[i]; the
// counts into *t (zeroed first). Without `tally`, *t keeps only its non-finite count (the other
// counts stay zero); the values, scales and fates are the same.
void mx_cast_blocks(const SpanCast& cast, const float* in, float* out, size_t nblocks, size_t b, int shift,
                    double* scale, uint8_t* status, MxCastTally* t, bool tally = true);

// The same for a band of h rows of n floats (row stride ld) whose blocks are its columns: element
// (t, j) of block j at in[t * ld + j], written to out[t * n + j]; block j's scale into
// scale[j * scale_stride]. All or nothing: false (out, scale and *t then hold garbage) when a block
// holds a NaN or inf or a product would round; the caller then takes the other order. `tally` as
// for mx_cast_blocks.
bool mx_cast_band(const SpanCast& cast, const float* in, size_t ld, size_t h, size_t n, int shift, float* out,
                  double* scale, size_t scale_stride, MxCastTally* t, bool tally = true);

// The SIMD target the kernels run on (for tests that mock the CPU's targets).
const char* mx_cast_target_name();

}  // namespace drift
