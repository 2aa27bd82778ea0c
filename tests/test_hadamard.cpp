// The random Hadamard transform of quantize.h (hadamard_rows) against its definition, written out
// here from the documentation rather than from the code: value i of every group of n is negated
// where random word i of the stream "HADAMARD" (0x4841444d41524400) under the seed is odd; then the
// fast Walsh-Hadamard butterflies, h = 1, 2, 4, ... and within each the pairs (j, j + h) in index
// order, a + b and a - b in double; then each value times 1.0 / sqrt(n) computed in double. Bit for
// bit; and, with no operation order shared, within a few ulps of the product with the Sylvester
// Hadamard matrix (entries (-1)^popcount(i & j)) computed in long double.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "arith/quantize.h"
#include "arith/random.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_hadamard {

using namespace drift;
using namespace drift::testing;

namespace {

constexpr uint64_t kSignStream = 0x4841444d41524400ull;

void defined_transform(double* v, int n, uint64_t seed) {
  for (int i = 0; i < n; ++i)
    if (random_u32(seed, kSignStream, static_cast<uint64_t>(i)) % 2 == 1) v[i] = -v[i];
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const double a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
  // 1.0 / sqrt(n) in double, as a recipe's Python computes 1 / math.sqrt(n): for 32 one ulp below
  // the correctly rounded 1/sqrt(32) (0x1.6a09e667f3bccp-3 against ...bcdp-3).
  const double norm = 1.0 / std::sqrt(static_cast<double>(n));
  for (int i = 0; i < n; ++i) v[i] *= norm;
}

}  // namespace

TEST_CASE("hadamard_rows: the transform's definition, bit for bit, and the Hadamard matrix product") {
  for (const int n : {16, 32}) {
    for (const uint64_t seed : {uint64_t{0}, uint64_t{1}, uint64_t{77}, uint64_t{0x123456789abcdefull}}) {
      CAPTURE(n);
      CAPTURE(seed);
      const size_t rows = 5, k = 4 * static_cast<size_t>(n), ld = k + 3;
      std::vector<double> x(rows * ld);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = std::ldexp(static_cast<double>(random_u32(seed + 9, 3, i)) / 4294967296.0 - 0.5, static_cast<int>(i % 9) - 4);
      std::vector<double> got = x, want = x;
      hadamard_rows(got.data(), rows, k, ld, n, seed);
      int negated = 0;
      for (size_t r = 0; r < rows; ++r)
        for (size_t g = 0; g < k / n; ++g) {
          double* w = want.data() + r * ld + g * n;
          const double* in = x.data() + r * ld + g * n;
          // The matrix product first, from the untransformed values.
          for (int i = 0; i < n; ++i) {
            long double s = 0;
            for (int j = 0; j < n; ++j) {
              const bool flip = random_u32(seed, kSignStream, static_cast<uint64_t>(j)) % 2 == 1;
              const long double xj = flip ? -static_cast<long double>(in[j]) : in[j];
              s += std::popcount(static_cast<unsigned>(i & j)) % 2 ? -xj : xj;
            }
            const double product = static_cast<double>(s / std::sqrt(static_cast<long double>(n)));
            const double g_i = got[r * ld + g * n + static_cast<size_t>(i)];
            CHECK(std::fabs(g_i - product) <= 1e-14 * (std::fabs(product) + 1e-3));
          }
          defined_transform(w, n, seed);
        }
      for (int i = 0; i < n; ++i) negated += random_u32(seed, kSignStream, static_cast<uint64_t>(i)) % 2;
      CHECK(negated > 0);  // (the draw negates some and keeps some)
      CHECK(negated < n);
      CHECK(same_bits(got, want));  // the padding past k untouched too
    }
  }
}

}  // namespace test_hadamard
