// Counter-based random bits: Philox4x32-10 (Random123), keyed by (seed, stream) and indexed by
// element. A draw depends only on (seed, stream, index), never on threads or evaluation order,
// and the same header compiles for CUDA device code.
#pragma once

#include <Random123/philox.h>

#include "arith/hostdevice.h"

namespace drift {

// Four 32-bit words for the block of indices [4*block, 4*block+4).
DRIFT_HD r123::Philox4x32::ctr_type philox_block(uint64_t seed, uint64_t stream, uint64_t block) {
  r123::Philox4x32 gen;
  const r123::Philox4x32::key_type key = {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  const r123::Philox4x32::ctr_type ctr = {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                           static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)}};
  return gen(ctr, key);
}

// The random word of element `index` of stream `stream`.
DRIFT_HD uint32_t random_u32(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox_block(seed, stream, index >> 2).v[index & 3];
}

// random_u32's words for an element loop that visits indices in ascending runs: one Philox call per
// four indices (the block last drawn is kept) instead of one per index.
class RandomWords {
 public:
  DRIFT_HD RandomWords(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  DRIFT_HD uint32_t at(uint64_t index) {
    if (!drawn_ || index >> 2 != block_) {
      block_ = index >> 2;
      words_ = philox_block(seed_, stream_, block_);
      drawn_ = true;
    }
    return words_.v[index & 3];
  }

 private:
  uint64_t seed_, stream_;
  uint64_t block_ = 0;
  bool drawn_ = false;
  r123::Philox4x32::ctr_type words_{};
};

// splitmix64's finalizer: a bijective mix, so distinct (step, site, call) keys give distinct random
// streams with overwhelming odds (the models' matmul and elementwise sites derive theirs with it).
DRIFT_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Fills out[0..n) with the words of indices first..first+n (4 per Philox call).
inline void random_fill(uint64_t seed, uint64_t stream, uint64_t first, uint32_t* out, uint64_t n) {
  uint64_t i = 0;
  while (i < n) {
    const uint64_t idx = first + i;
    const auto block = philox_block(seed, stream, idx >> 2);
    for (uint64_t w = idx & 3; w < 4 && i < n; ++w, ++i) out[i] = block.v[w];
  }
}

}  // namespace drift
