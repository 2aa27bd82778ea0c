// y = x · w in double where each output is the plain sequential sum: y[i][j] = (((0 + x[i][0] w[0][j])
// + x[i][1] w[1][j]) + ...), every product and every add rounded on its own (never fused). This is
// the arithmetic of a naive triple loop, so its bits are that loop's on every machine; the SIMD
// version runs across j (each lane owns one output) and over register tiles of rows, never
// reassociating a sum. The proxy model's teacher (its data generator) runs on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// A weight w (c x oc, row stride oc) kept with its whole column tiles already copied into the
// kernel's panels for the SIMD target in use, so that a weight many products reuse (the proxy's
// fixed teacher) is laid out once rather than once per call. A product on another target (tests
// switch targets) lays out its own panels for that call: the bits never depend on this.
struct DenseF64Weights {
  DenseF64Weights() = default;
  DenseF64Weights(std::vector<double> w, size_t c, size_t oc);

  std::vector<double> w;       // c x oc, row-major
  size_t c = 0, oc = 0;
  size_t panel_width = 0;      // columns per panel of the target `panels` was laid out for
  std::vector<double> panels;  // (oc / panel_width) panels of c x panel_width contiguous doubles
};

// y (n x oc, row stride oc) = x (n x c, row stride c) · w. OpenMP over rows when the call is large
// enough (rows are independent: any thread count gives the same bits).
void dense_f64(double* y, const double* x, const DenseF64Weights& w, size_t n);
// The same for a weight used once (its panels are laid out for this call).
void dense_f64(double* y, const double* x, const double* w, size_t n, size_t c, size_t oc);

// The same as a scalar triple loop: the definition dense_f64 is tested against.
void dense_f64_scalar(double* y, const double* x, const double* w, size_t n, size_t c, size_t oc);

// The targets compiled in that this CPU supports (hwy target bits), for tests.
std::vector<int64_t> dense_f64_targets();

// The AVX-512 kernel's vectors, for tests (the bits are the same either way): -1 as the CPU suggests
// (half vectors where it splits 512-bit operations, AMD Zen 4; the default), 0 full, 1 half.
void dense_f64_set_avx512_form_for_test(int form);

}  // namespace drift
