// drift's fp32 exp, for the softmax rows of attention and cross-entropy: the algorithm of glibc's
// expf (since glibc 2.27, from Arm's optimized-routines), written out with every multiply-add fused,
// as glibc's FMA build (__expf_fma, the one glibc picks on any x86-64 CPU with FMA) computes it. The
// models called std::exp before; this computes the same bits on such a CPU, eight or sixteen lanes
// at a time instead of one call per value, and on every other CPU too (the fused steps are
// std::fma or a native FMA, never a multiply and an add), so the bits no longer depend on which
// libm build the dynamic loader chose.
//
// Algorithm, for x a float with |x| < 88 (every step in double; fma(a, b, c) = a*b + c rounded once):
//   xd = x (exact)
//   k' = fma(32/ln2, xd, 1.5*2^52)        the low bits of k' hold k = round(x * 32/ln2)
//   kd = k' - 1.5*2^52                    k as a double (exact)
//   r  = fma(32/ln2, xd, -kd)             x*32/ln2 - k, |r| <= 1/2 (plus rounding)
//   s  = 2^(k/32): the double whose bits are T[k mod 32] + (k << 47), T[i] = bits(2^(i/32)) - (i << 47)
//   y  = fma(fma(C0, r, C1), r*r, fma(r, C2, 1)) * s,   2^(r/32) ~ 1 + C2 r + C1 r^2 + C0 r^3
//   result = (float)y, round to nearest even.
// The constants (32/ln2, C0..C2, T) are glibc's __exp2f_data, copied bit for bit and checked against
// the libm.so.6 of Debian bookworm (glibc 2.36). Arm documents the result's error as under 0.502 ulp
// of float: correctly rounded except where exp(x) lies within about 0.002 ulp of a midpoint.
// Outside |x| < 88, as glibc: -inf -> +0; +inf and NaN -> x + x (NaN quieted, payload kept);
// x > 0x1.62e42ep6 (exp overflows) -> +inf; x < -0x1.9fe368p6 -> +0; x < -0x1.9d1d9ep6 -> 0x1p-149
// (glibc's "may underflow" value, 0x1.4p-75f squared); the rest of [-0x1.9d1d9ep6, -88] takes the
// main path (its result a subnormal float).
//
// Measured over all 2^32 floats (a throwaway program, 2026-12): exp_fp32 equals this machine's
// std::exp(float) (glibc 2.36, __expf_fma) on every input, NaN payloads included.
// tests/test_exp_fp32.cpp re-checks the SIMD span against the scalar twin on every target, accuracy
// against long double expl, and the special values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// exp(x) as above. Plain C++ (the scalar twin of exp_fp32_span, the same operations).
float exp_fp32(float x);

// out[i] = exp_fp32(in[i]) for i in [0, n), bit for bit, on the best SIMD target of this CPU
// (Highway dynamic dispatch). in and out may be the same array (not partially overlapping).
// Single-threaded; lanes are independent, so neither vector width nor a caller's split of the span
// changes a bit.
void exp_fp32_span(const float* in, float* out, size_t n);

// For tests: the double y of the header, before its rounding to float (|x| < 88), by the scalar
// twin and by the SIMD code, to show each target performs the same double operations.
double exp_fp32_unrounded(float x);
void exp_fp32_unrounded_span(const float* in, double* out, size_t n);

// Name of the Highway target exp_fp32_span dispatches to now, and the targets compiled into it that
// this CPU supports (hwy target bits), for tests.
const char* exp_fp32_target_name();
std::vector<int64_t> exp_fp32_targets();

}  // namespace drift
