// The operands the matmul benchmarks time (`drift bench gemm`, and `drift bench train`'s replay of a
// step's matmuls on the engine alone): n floats uniform in [-0.5, 0.5) from a fixed random stream,
// so every run and both benchmarks time the same data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arith/random.h"

namespace drift::cli {

inline std::vector<float> bench_operand(uint64_t stream, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(random_u32(1, stream, i)) / 4294967296.0f - 0.5f;
  return v;
}

}  // namespace drift::cli
