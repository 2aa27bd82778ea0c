// drift's own fp32 tanh: computed in double, rounded once to float. The same sequence of IEEE
// double operations (no fused multiply-add anywhere, no library call) on every machine and every
// SIMD target, so the bits do not depend on the CPU, the glibc version or the vector width. glibc's
// tanhf is neither correctly rounded nor stable across glibc versions: it is not a definition.
//
// Algorithm, for x a float (a = |x| as double; the sign bit of x is put back on the float result,
// so tanh(-x) = -tanh(x) exactly and -0 -> -0; NaN -> x with its quiet bit set; +-inf -> +-1):
//   a < 2^-6:  t = a + a * (z * p(z)), z = a^2, p(z) = c3 + z (c5 + z (c7 + z c9)) by Horner, the
//              Taylor series a - a^3/3 + 2a^5/15 - 17a^7/315 + 62a^9/2835 (c3 = -1/3, c5 = 2/15,
//              c7 = -17/315, c9 = 62/2835, each the double nearest). The first omitted term is
//              -1382 a^11/155925 and the series alternates with decreasing terms here, so the
//              truncation error is < 0.009 a^11, relative < 0.009 * 2^-60 < 2^-66. Rounding: a*(z*p)
//              is below 2^-12 a, so its errors cost < 2^-64 a; the final addition costs 2^-53 t.
//   otherwise: a' = min(a, 20) (1 - tanh(20) < 1e-17, far below half an ulp of 1.0f, and the double
//              t below is then exactly 1.0), y = 2a' (exact), e = exp(y) by drift's own exp:
//                n = round-to-nearest-even(y * (1/ln2)), via (v + 1.5*2^52) - 1.5*2^52 (n in [0, 58]);
//                r = (y - n*ln2_hi) - n*ln2_lo, Cody-Waite: ln2_hi has 32 significant bits, so
//                  n*ln2_hi is exact for |n| < 2^21; y is a multiple of 2^-28 and n*ln2_hi of 2^-32,
//                  so y - n*ln2_hi is exact too; |r| <= ln2/2 + tiny < 0.35;
//                exp(r) = sum_{k=0}^{13} r^k/k! by Horner (coefficients: the double nearest 1/k!);
//                  truncation < 1.03 * 0.35^14/14! < 2^-57 relative;
//                e = exp(r) * 2^n, 2^n built from exponent bits (exact, no overflow).
//              t = (e - 1) / (e + 1).
// Error of t (u = 2^-53, first order):
//   n = 0 (y < ln2/2): r = y exactly, e in [1, 1.42). Horner's last step fl(1 + r*p1) is off by at
//     most u (half an ulp in [1, 2)), the rest of the evaluation by < 2.5u * (e - 1) (|r| < 0.35
//     scales each earlier step's error down); e - 1 is then exact (Sterbenz). Since e - 1 >= y, the
//     relative error of e - 1 is < u/y + 2.5u <= (2^5 + 2.5)u for y >= 2^-5: the cancellation costs
//     the factor 1/(2a) <= 2^5. e + 1 adds < 2u, the division u: relative error of t < 38u < 2^-47.
//   n >= 1 (y >= ln2/2): exp(r) has relative error < 5u (evaluation 3.5u, r's rounding 0.25u,
//     truncation and coefficients 0.1u), e - 1 amplifies it by e/(e-1) <= 3.42 and rounds (u), e + 1
//     and the division add 6u and u: < 25u.
//   So |t - tanh(a)| < 2^-46 tanh(a) everywhere (the Taylor branch: < 2^-52). The float result is
//   therefore tanh(x) correctly rounded (to nearest even) except possibly where tanh(x) lies within
//   2^-46 (relative) of a midpoint between two floats. Measured over all 2^32 floats (a throwaway
//   program, 2026-11): the result equals glibc's double tanh rounded to float for every input. 414
//   inputs have tanh(x) within 2^-44 of a midpoint, none closer than 2^-50.3, so glibc's double tanh
//   (documented error <= 2 ulp, < 2^-51 relative) is on the correct side of every midpoint, and
//   tanh_fp32 is correctly rounded on all floats. tests/test_tanh_fp32.cpp re-checks a sweep.
// Because the float result is the correctly rounded tanh, the span may reach it by another route:
// on AVX-512 it computes a cheaper approximation (a table-driven exp, 2^-46 relative) and keeps its
// rounding wherever that approximation lies clear of every float midpoint (by 2^-42), leaving the
// rest (about 2^-16 of inputs) to the operations above (tanh_fp32.cpp, TanhExpQuick): 0.83 against
// 1.47 ns a value (1 thread, this project's 2-core AVX-512 machine). Measured over all 2^32 floats
// (a throwaway program, 2026-12): the span equals the scalar twin on every input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// tanh(x) as above. Plain C++ (the scalar twin of tanh_fp32_span, the same operations).
float tanh_fp32(float x);

// out[i] = tanh_fp32(in[i]) for i in [0, n), bit for bit, on the best SIMD target of this CPU
// (Highway dynamic dispatch). in and out may be the same array (not partially overlapping).
// Single-threaded; lanes are independent, so neither vector width nor a caller's split of the span
// changes a bit.
void tanh_fp32_span(const float* in, float* out, size_t n);

// For tests: the double t(|x|) that tanh_fp32 rounds to float (x not NaN), by the scalar twin and
// by the SIMD code. Comparing these bit for bit across targets shows every target performs the same
// double operations: a difference there (say, one fused multiply-add) changes the float result only
// for rare inputs near a rounding tie, which a sweep of outputs would likely miss.
double tanh_fp32_unrounded(float x);
void tanh_fp32_unrounded_span(const float* in, double* out, size_t n);

// For tests: on a target with the span's quick route (AVX-512: tanh_fp32.cpp, TanhExpQuick),
// deferred[i] = 1 where that route left in[i] to the operations above (its own approximation too
// near a float midpoint to settle the rounding), else 0; false, writing nothing, on other targets.
bool tanh_fp32_quick_deferred_span(const float* in, uint8_t* deferred, size_t n);

// Name of the Highway target tanh_fp32_span dispatches to now, and the targets compiled into it
// that this CPU supports (hwy target bits), for tests.
const char* tanh_fp32_target_name();
std::vector<int64_t> tanh_fp32_targets();

}  // namespace drift
