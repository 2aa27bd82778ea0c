// The random bits of one matmul call: which Philox sub-stream each rounding site of the definition
// (arith/matmul.h) draws from, and the seeded summation orders. Shared by the literal reference and
// the CUDA kernels so that a stochastic rounding or a permuted order draws the same words on both.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arith/random.h"

namespace drift {

// Sub-streams of a call (xor'ed into the top byte of the call's stream), one per rounding site.
enum : uint64_t {
  kStreamProduct = 1,  // product rounding: element base + product index in K
  kStreamInner = 2,    // inner sums: element base + the inner summer's running add count
  kStreamScale = 3,    // block-scale multiply: element base + block index
  kStreamOuter = 4,    // outer sum: element base + the outer summer's running add count
  kStreamOut = 5,      // output rounding: i*N + j
  kStreamPerm = 6,     // seeded permutations (per call, shared by all elements)
};

// Random words any one output element can draw (its words start at (i*N + j) * this).
DRIFT_HD uint64_t matmul_words_per_element(uint64_t k, uint64_t nblocks) { return 4 * (k + nblocks) + 8; }

// The order in which block `block` (n terms) is summed: the identity, or with `permute` a seeded
// Fisher-Yates shuffle on Philox words keyed by (seed, stream, block * 65536 + i). idx has n slots.
template <typename Index>
DRIFT_HD void fill_block_order(Index* idx, size_t n, bool permute, uint64_t seed, uint64_t stream, uint64_t block) {
  for (size_t i = 0; i < n; ++i) idx[i] = static_cast<Index>(i);
  if (!permute) return;
  for (size_t i = n; i > 1; --i) {
    const uint64_t r = random_u32(seed, stream, block * 65536 + i);
    const Index t = idx[i - 1];
    idx[i - 1] = idx[r % i];
    idx[r % i] = t;
  }
}

// The outer sum's permutation is drawn as block number 2^30 of the permutation stream.
constexpr uint64_t kOuterOrderBlock = uint64_t{1} << 30;

}  // namespace drift
