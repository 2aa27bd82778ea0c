// Test data for the matmul suites: values spread over 2^-12 .. 2^12, signed, one in 32 a zero, so
// that block scales differ from block to block and products meet sums many binades apart (ties and
// lost addends included).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "arith/random.h"

namespace drift::testing {

inline std::vector<double> spread_values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 3, 2 * i), r1 = random_u32(seed, 3, 2 * i + 1);
    const double x = (static_cast<double>(r0) / 4294967296.0 - 0.5) * std::ldexp(1.0, static_cast<int>(r1 % 25) - 12);
    v[i] = (r1 >> 27) == 0 ? 0.0 : x;
  }
  return v;
}

}  // namespace drift::testing
