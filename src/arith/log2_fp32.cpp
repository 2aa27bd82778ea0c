#include "arith/log2_fp32.h"

#include <stdexcept>
#include <string>

namespace drift {
namespace {

using u128 = unsigned __int128;

// x^2 for x = X / 2^128 in [0, 1): the high 128 bits of the 256-bit X * X, rounded down (up = false)
// or up. Schoolbook on 64-bit limbs, every carry kept in a 128-bit accumulator.
u128 square_q128(u128 x, bool up) {
  const uint64_t x1 = static_cast<uint64_t>(x >> 64), x0 = static_cast<uint64_t>(x);
  const u128 p00 = static_cast<u128>(x0) * x0, p01 = static_cast<u128>(x0) * x1, p11 = static_cast<u128>(x1) * x1;
  auto lo64 = [](u128 v) { return static_cast<u128>(static_cast<uint64_t>(v)); };
  auto hi64 = [](u128 v) { return v >> 64; };
  const u128 r0 = lo64(p00);
  u128 acc = hi64(p00) + lo64(p01) + lo64(p01);
  const u128 r1 = lo64(acc);
  acc = hi64(acc) + hi64(p01) + hi64(p01) + lo64(p11);
  const u128 r2 = lo64(acc);
  acc = hi64(acc) + hi64(p11);  // < 2^64: X^2 < 2^256
  u128 high = (acc << 64) | r2;
  if (up && (r0 | r1) != 0) ++high;
  return high;
}

// Whether (S / 2^53)^(2^k) > 1/2, i.e. log2(S / 2^52) > 1 - 2^-k, by interval squaring; throws when
// the interval straddles 1/2 (never, for the doubles searched: the bounds are 2^-100 apart).
bool above_threshold(uint64_t s, int k) {
  u128 lo = static_cast<u128>(s) << 75, hi = lo;  // S / 2^53 as a 128-bit fraction, exactly
  for (int i = 0; i < k; ++i) {
    lo = square_q128(lo, false);
    hi = square_q128(hi, true);
  }
  const u128 half = u128{1} << 127;
  if (lo > half) return true;
  if (hi <= half) return false;
  throw std::logic_error("log2_fp32: undecided threshold for k = " + std::to_string(k));
}

Log2Fp32Table build() {
  Log2Fp32Table t;
  for (int k = Log2Fp32Table::kMin; k <= Log2Fp32Table::kMax; ++k) {
    uint64_t lo = uint64_t{1} << 52, hi = (uint64_t{1} << 53) - 1;  // lo below the threshold, hi above
    while (hi - lo > 1) {
      const uint64_t mid = lo + (hi - lo) / 2;
      (above_threshold(mid, k) ? hi : lo) = mid;
    }
    t.up[k - Log2Fp32Table::kMin] = hi;
  }
  return t;
}

}  // namespace

const Log2Fp32Table& log2_fp32_table() {
  static const Log2Fp32Table t = build();
  return t;
}

}  // namespace drift
