// drift's double tanh: fdlibm's tanh over fdlibm's expm1 (Sun, 1993), the algorithm glibc ships
// as tanh, with the multiply-adds fused exactly where glibc's FMA build of expm1 fuses them. The
// proxy model's float64 teacher and the double models (gradient checks) run on it.
//
// Why not std::tanh: glibc picks its expm1 at load time by the CPU (an FMA build on x86-64 CPUs
// with FMA and AVX2, plain SSE2 code otherwise) and other C libraries use other algorithms, so the
// teacher's targets, and every number trained on them, would depend on the machine. This is one
// definition with the same bits everywhere (std::fma where a SIMD target has no fused multiply-add),
// and it is the bits glibc's tanh gives on the x86-64 machines with FMA this project runs on, so
// results from before it arrived are unchanged (measured: see tests/test_tanh_f64.cpp's header).
// It also runs 8 lanes at a time where std::tanh is one call per element.
//
// Definition, for x a double, a = |x|, sign restored on the result (tanh(-x) = -tanh(x)):
//   NaN -> x + x (quieted, payload and sign kept); a >= 22 (or inf) -> 1; x = +-0 -> x;
//   a < 2^-55 -> (1 + x) * x;
//   a < 1     -> t = expm1(-2a), z = -t / (t + 2);
//   otherwise -> t = expm1(2a),  z = 1 - 2 / (t + 2).
// expm1(y), for the y that reach it (2^-54 <= |y| < 2 negative, 2 <= y < 44 positive):
//   k = 0 when |y| < 0x1.62e43p-2; k = sign(y) when |y| < 0x1.0a2b2p+0; else
//   k = trunc(fl(y * invln2) +- 0.5) (sign of y); then hi = fma(-k, ln2_hi, y), lo = k * ln2_lo,
//   r = hi - lo, c = (hi - r) - lo (for k = 0: r = y);
//   hfx = 0.5 r, hxs = r * hfx, r1 = fma(h2 * h2, R3, fma(h2, R2, R1)) with h2 = hxs * hxs,
//   R1 = fma(hxs, Q1, 1), R2 = fma(hxs, Q3, Q2), R3 = fma(hxs, Q5, Q4);
//   t = fma(-r1, hfx, 3), e = ((r1 - t) / fma(-r, t, 6)) * hxs;
//   k = 0:  y - fma(e, y, -hxs);
//   else e' = fma(r, e - c, -c) - hxs, and
//     k = -1:        fma(0.5, r - e', -0.5);
//     k = 1:         r < -0.25 ? (e' - (r + 0.5)) * -2 : fma(r - e', 2, 1);
//     k <= -2, > 56: (1 - (e' - r)) * 2^k - 1;
//     2 <= k <= 19:  (T - (e' - r)) * 2^k, T = 1 - 2^-k;
//     20 <= k <= 56: ((r - (e' + T)) + 1) * 2^k, T = 2^-k;
//   where * 2^k adds k to the exponent field (the results here are normal: exact).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// tanh(x) as above, one element (plain C++ with std::fma: the scalar twin of tanh_f64_span).
double tanh_f64(double x);

// out[i] = tanh_f64(in[i]) for i in [0, n), bit for bit, on the best SIMD target of this CPU.
// in and out may be the same array (not partially overlapping). Single-threaded; lanes are
// independent, so neither the vector width nor a caller's split of the span changes a bit.
void tanh_f64_span(const double* in, double* out, size_t n);

// The targets compiled in that this CPU supports (hwy target bits), for tests.
std::vector<int64_t> tanh_f64_targets();

}  // namespace drift
