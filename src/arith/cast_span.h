// Batched casts: round every value of a float span to a format, with Highway SIMD (dynamic
// dispatch over the compiled targets), bit-identical to the scalar core `round_to`, and count
// what the telemetry layer needs (clipped, flushed, subnormal, NaN).
//
// Element i of a call uses the random word random_u32(seed, stream, first_index + i) for
// stochastic rounding, so a span can be cut into pieces (threads, chunks, devices) without
// changing a bit, as long as each piece passes its own first_index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arith/round.h"

namespace drift {

// What a cast did, counted per element. The four counts are independent (an element may be in none).
//   clipped:   the input was +-inf, or it was finite and its rounded magnitude exceeded
//              max_finite, so the overflow rule (saturate, inf or NaN) decided the result. An input
//              above max_finite that rounds down onto max_finite is not clipped (no overflow
//              happened); a negative input to an unsigned pow2 format (e8m0) is not clipped (its
//              NaN is counted under `nan`).
//   flushed:   the input was finite and non-zero and the result is zero: underflow to zero by
//              rounding, or flushing of a result below min_normal.
//   subnormal: the result is non-zero, finite and below min_normal in magnitude (never under a flush
//              mode; never for int and pow2 formats, whose min_normal is 0).
//   nan:       the result is NaN: NaN inputs, overflow to NaN in formats without inf, +-inf into a
//              format without inf under Overflow::ieee, and zero/negative inputs to e8m0.
struct CastStats {
  uint64_t clipped = 0;
  uint64_t flushed = 0;
  uint64_t subnormal = 0;
  uint64_t nan = 0;

  CastStats& operator+=(const CastStats& o) {
    clipped += o.clipped;
    flushed += o.flushed;
    subnormal += o.subnormal;
    nan += o.nan;
    return *this;
  }
  friend bool operator==(const CastStats&, const CastStats&) = default;
};

namespace detail {

// Everything the kernel needs about (format, spec), as float encodings. Index [1] is for negative
// inputs, [0] for positive ones.
struct CastParams {
  int32_t qm = 0;          // quantum_mant, capped at 23 (a finer quantum never discards fp32 bits)
  int32_t qmin = 0;        // quantum_min
  uint32_t max_enc = 0;    // encoding of max_finite
  uint32_t flush_thr = 0;  // results with encodings below this are flushed (0: no flushing)
  uint32_t min_normal_enc = 0;  // for the subnormal count
  uint32_t neg_nan = 0;    // all ones when every negative input becomes NaN (pow2 kinds)
  bool exact_sub_exponent = false;  // subnormal inputs need their true leading-bit exponent
  uint32_t sr_mask = 0;    // 2^sr_bits - 1
  int32_t sr_bits = 0;
  uint32_t res_flush[2] = {0, 0};  // a result flushed below min_normal
  uint32_t res_under[2] = {0, 0};  // a result whose rounded magnitude is zero
  uint32_t res_ovf[2] = {0, 0};    // a finite input whose rounded magnitude exceeds max_finite
  uint32_t res_zero[2] = {0, 0};   // input +-0
  uint32_t res_inf[2] = {0, 0};    // input +-inf
  // The round-to-nearest-even kernel (cast_rne-inl.h), for the floating formats where it applies.
  struct Rne {
    // none: the general kernel; const_shift: every lane discards the same number of encoding bits
    // (bf16, tf32: the format's smallest normal is fp32's); var_shift: the shift grows below the
    // format's smallest normal (fp16, the fp8s, fp6, fp4), where the kernel rounds onto the fixed
    // subnormal grid by a float add instead.
    enum Kind : uint8_t { none, const_shift, var_shift } kind = none;
    int32_t s_norm = 0;       // discarded bits in the format's normal range: 23 - quantum_mant
    uint32_t zero_thr = 1;    // rounded magnitudes below this are zero (min_normal when flushing)
    uint32_t ovf_mag = 0;     // magnitude bits of an overflowed result (res_ovf[0])
    uint32_t ovf_sign = 0;    // 0x80000000 when an overflowed result keeps the input's sign
    uint32_t zero_sign = 0;   // 0x80000000 when a zero result keeps the input's sign (has -0)
    bool ovf_is_nan = false;  // an overflowed result is NaN (counted under nan)
  } rne;
};

}  // namespace detail

// True when every value of f's grid (and f's rounding quanta) is a float: the requirement of the
// span casts, whose output is float. Floating formats need man_bits <= 23, emax <= 127 and
// emin - man_bits >= -149; integer formats man_bits <= 24; pow2 formats -149 <= emin, emax <= 127.
// Every catalogue format except fp64 fits.
bool fits_float(const Format& f);

// True when f is IEEE binary32 (8 exponent bits, 23 mantissa bits, bias 127, inf, subnormals) and
// spec keeps subnormals: then every finite float casts to itself in any rounding mode (no bit is
// discarded, nothing overflows or flushes), counting only as subnormal when it is one.
bool is_fp32_grid_kept(const Format& f, const RoundSpec& spec);

// out[i] = (float)round_to((double)in[i], f, spec, random_u32(seed, stream, first_index + i)) for
// i in [0, n), on the best SIMD target of this CPU. in and out may be the same array (not partially
// overlapping). Single-threaded. Throws std::invalid_argument when !fits_float(f) or
// spec.sr_bits is outside [0, 32].
CastStats cast_span(const float* in, float* out, size_t n, const Format& f, const RoundSpec& spec,
                    uint64_t seed, uint64_t stream, uint64_t first_index);

// cast_span with its per-(format, spec) constants computed once: for callers that cast many short
// spans with one format (a quantizer's blocks). prepare_span_cast throws as cast_span does.
struct SpanCast {
  detail::CastParams params;
  int mode = 0;  // Rounding
};
SpanCast prepare_span_cast(const Format& f, const RoundSpec& spec);
CastStats cast_span(const SpanCast& cast, const float* in, float* out, size_t n, uint64_t seed, uint64_t stream,
                    uint64_t first_index);

// A span of nblocks blocks of b floats, each block multiplied by its power of two mult[i] (inv[i]:
// 1 / mult[i]) and then cast, in one pass, for a round-to-nearest-even cast (the kernel of
// cast_rne-inl.h) with b a whole number of SIMD vectors; false (nothing written) otherwise. Block i
// is written, with the bits and counts cast_span gives its scaled values, when ok[i] is set and
// every fp32(x * mult[i]) is exact (multiplying back by inv[i] returns x); else it is left as it
// was with ok[i] = 0, for the caller to round element by element. *st: the counts of the blocks
// written. (No random words: never stochastic rounding.)
bool cast_blocks_scaled(const SpanCast& cast, const float* in, float* out, size_t nblocks, size_t b, const float* mult,
                        const float* inv, uint8_t* ok, CastStats* st);
// Whether the cast has that kernel (cast_blocks_scaled can then decline only for b).
inline bool has_rne_kernel(const SpanCast& cast) { return cast.params.rne.kind != detail::CastParams::Rne::none; }

// The scalar twin: the same contract, element by element through round_to. It is the reference
// cast_span is tested against, bit for bit and count for count.
CastStats cast_span_scalar(const float* in, float* out, size_t n, const Format& f, const RoundSpec& spec,
                           uint64_t seed, uint64_t stream, uint64_t first_index);

// cast_span split over OpenMP threads in fixed chunks of element indices. Results and counts do
// not depend on the number of threads (the randomness is indexed, the counts are integer sums).
CastStats cast_span_parallel(const float* in, float* out, size_t n, const Format& f, const RoundSpec& spec,
                             uint64_t seed, uint64_t stream, uint64_t first_index);

// The input counts of a row's scale blocks (the pass before a block-scaled cast): for block i of
// the b-element blocks of row[0, n) (the last may be shorter), amax[i] = its largest finite |x| and
// nonfinite[i] = its number of NaN and inf. SIMD; single-threaded.
void block_amax(const float* row, size_t n, size_t b, float* amax, uint32_t* nonfinite);

// out[i] = in[i] for i in [0, n) by SIMD loads and stores on cast_span's target: the memory traffic
// of a cast without its arithmetic, the reference `drift bench cast` measures casts against.
void copy_span(const float* in, float* out, size_t n);

// Name of the Highway target cast_span dispatches to now (e.g. "AVX2"), and the targets compiled
// into cast_span that this CPU supports (hwy target bits), for tests and `drift bench`.
const char* cast_span_target_name();
std::vector<int64_t> cast_span_targets();

}  // namespace drift
