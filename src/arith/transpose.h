// Moving floats between row-major layouts: the transposes of operand packing (A or B stored the
// other way round) and of writing a product into a transposed C. Values only move (or, with `add`,
// each destination element takes one fp32 add), so every SIMD target gives the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace drift {

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols; with `add`, dst[...] = dst[...] + src[...]
// (one IEEE fp32 add each). src and dst must not overlap. 4 x 4 vector blocks; large calls made outside an
// OpenMP team split their columns over one.
void transpose_floats(const float* src, size_t rows, size_t cols, size_t lds, float* dst, size_t ldd, bool add);

// The same, element by element: the reference transpose_floats is tested against.
void transpose_floats_scalar(const float* src, size_t rows, size_t cols, size_t lds, float* dst, size_t ldd,
                             bool add);

// The targets compiled in that this CPU supports (hwy target bits), for tests.
std::vector<int64_t> transpose_targets();

}  // namespace drift
