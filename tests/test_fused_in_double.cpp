// The fused tensor-core groups in double arithmetic (fused_accum.h, group_in_double) against the
// exact 128-bit integer core (group_at), which is the definition: for every tensor-core preset the
// double route applies to, random groups on the input format's grid (zeros, subnormals, both
// signs, exponents across the whole range) with running sums on the output grid (zero, subnormal,
// near overflow), consecutive and interleaved, one group and whole dot products with promotion.
// Where the double route declines it must say so (NaN, infinities, results it cannot round).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "arith/fused_accum.h"
#include "arith/random.h"
#include "arith/round.h"
#include "arith/tc_presets.h"

using namespace drift;

namespace {

uint32_t word(uint64_t seed, uint64_t i) { return random_u32(seed, 77, i); }

// A value on `f`'s grid: random sign, exponent anywhere in [emin - man_bits, emax] (subnormals
// included), random significand; zero one time in 16.
double grid_value(const Format& f, uint64_t seed, uint64_t i) {
  const uint32_t r = word(seed, 2 * i), s = word(seed, 2 * i + 1);
  if ((r & 15) == 0) return (r & 16) ? -0.0 : 0.0;
  const int lo = f.emin - f.man_bits, span = f.emax - lo + 1;
  const int e = lo + static_cast<int>(s % static_cast<uint32_t>(span));
  const double sig = 1.0 + static_cast<double>(r >> 8) / 16777216.0;
  RoundSpec rs;
  rs.mode = Rounding::rne;
  rs.overflow = Overflow::saturate;
  rs.subnormals = Subnormals::keep;
  const double x = round_to(std::ldexp(sig, e), f, rs, 0);
  return (r & 32) ? -x : x;
}

// A value on f's grid near 2^e (within a factor 4), or zero / a subnormal / the largest finite.
double accumulator(const Format& f, int e, uint64_t seed, uint64_t i) {
  const uint32_t r = word(seed ^ 0x5555, i);
  switch (r % 16) {
    case 0: return 0.0;
    case 1: return std::ldexp(static_cast<double>(1 + r % 7), f.emin - f.man_bits);  // subnormal
    case 2: return (r & 64) ? -f.max_finite : f.max_finite;
    default: break;
  }
  if (e > f.emax) e = f.emax;
  if (e < f.emin) e = f.emin;
  RoundSpec rs;
  rs.mode = Rounding::rne;
  rs.overflow = Overflow::saturate;
  rs.subnormals = Subnormals::keep;
  const double x = round_to(std::ldexp(1.0 + static_cast<double>(r >> 9) / 8388608.0, e - 2 + static_cast<int>(r % 5)),
                            f, rs, 0);
  return (r & 128) ? -x : x;
}

bool same_bits(double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// x's significand (with its sign) times 2^e: on the same grid while 2^e stays in the normal range.
double with_exponent(double x, int e) {
  int unused;
  return x == 0 ? x : std::ldexp(std::frexp(x, &unused), e);
}

}  // namespace

TEST_CASE("fused groups in double equal the exact core on every preset they apply to") {
  int presets = 0;
  for (const TcPreset& tc : tc_presets()) {
    const FusedModel& m = tc.model;
    if (!fused_groups_exact_in_double(m)) continue;
    ++presets;
    CAPTURE(tc.name);
    // Inputs of a narrow exponent band (so that the products of a group are comparable, the common
    // case) and of the format's whole range (alignment shifts of every size).
    size_t band_accepted = 0, band_cases = 0, accepted = 0, mismatches = 0;
    const int terms = m.interleave > 0 ? 2 * m.terms : m.terms;
    for (uint64_t t = 0; t < 4000; ++t) {
      const bool whole_range = t % 2;
      std::vector<double> a(terms), b(terms);
      for (int i = 0; i < terms; ++i) {
        a[i] = grid_value(tc.in_format, t, 2 * i);
        b[i] = grid_value(tc.in_format, t, 2 * i + 1);
        if (!whole_range) {  // magnitudes moved into [1/4, 2)
          a[i] = with_exponent(a[i], static_cast<int>(i % 3) - 1);
          b[i] = with_exponent(b[i], static_cast<int>(i % 2));
        }
      }
      const double c = accumulator(tc.out_format, whole_range ? static_cast<int>(word(t, 99) % 40) - 20 : 2, t, 0);
      const int n = 1 + static_cast<int>(word(t, 98) % static_cast<uint32_t>(m.terms));
      double fast = 0;
      bool ok;
      double exact;
      if (m.interleave > 0) {
        const fused_detail::Interleaved pos{m.interleave, static_cast<int>(t % 2)};
        ok = fused_detail::group_in_double(c, a.data(), 1, b.data(), 1, n, pos, m, &fast);
        exact = fused_detail::group_at(c, a.data(), 1, b.data(), 1, n, pos, m);
      } else {
        ok = fused_detail::group_in_double(c, a.data(), 1, b.data(), 1, n, fused_detail::Consecutive{}, m, &fast);
        exact = fused_detail::group_at(c, a.data(), 1, b.data(), 1, n, fused_detail::Consecutive{}, m);
      }
      band_cases += !whole_range;
      band_accepted += !whole_range && ok;
      if (ok) {
        ++accepted;
        mismatches += !same_bits(fast, exact);
      }
    }
    CHECK(mismatches == 0);
    CHECK(accepted > 1000);  // (the comparison above is not vacuous)
    // The route must carry the ordinary case, products of comparable size: it declines only NaN,
    // infinities, and results below the smallest normal or at the overflow threshold.
    CHECK(band_accepted > band_cases * 9 / 10);
  }
  CHECK(presets >= 5);  // every published NVIDIA model with an fp32 or fp16 output qualifies
}

TEST_CASE("fused dot products in double equal the exact chain, promotion and tails included") {
  for (const TcPreset& tc : tc_presets()) {
    const FusedModel& m = tc.model;
    if (!fused_groups_exact_in_double(m)) continue;
    CAPTURE(tc.name);
    size_t mismatches = 0;
    for (int k : {1, 3, 16, 31, 32, 33, 100, 128, 257}) {
      for (uint64_t t = 0; t < 20; ++t) {
        std::vector<double> a(k), b(k);
        for (int i = 0; i < k; ++i) {
          a[i] = grid_value(tc.in_format, 1000 + t * 7 + k, 2 * i);
          b[i] = grid_value(tc.in_format, 1000 + t * 7 + k, 2 * i + 1);
        }
        const double c = accumulator(tc.out_format, static_cast<int>(t % 9) - 4, t, 1);
        mismatches += !same_bits(fused_dot(c, a.data(), b.data(), k, m, true), fused_dot(c, a.data(), b.data(), k, m));
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("fused groups in double decline NaN, infinities and results they cannot round") {
  const auto tc = find_tc_preset("h100_fp16_out16");  // fp16 inputs, fp16 running sum
  REQUIRE(tc.has_value());
  const FusedModel& m = tc->model;
  REQUIRE(fused_groups_exact_in_double(m));
  const double one[4] = {1, 1, 1, 1};
  double r = 0;
  const double with_nan[4] = {1, quiet_nan(), 1, 1};
  const double with_inf[4] = {1, 1, infinity(false), 1};
  CHECK_FALSE(fused_detail::group_in_double(0.0, with_nan, 1, one, 1, 4, fused_detail::Consecutive{}, m, &r));
  CHECK_FALSE(fused_detail::group_in_double(0.0, with_inf, 1, one, 1, 4, fused_detail::Consecutive{}, m, &r));
  CHECK_FALSE(fused_detail::group_in_double(infinity(true), one, 1, one, 1, 4, fused_detail::Consecutive{}, m, &r));
  // 1 + 1 + 1 + 1 = 4 exactly: accepted, and the sum is 4 (a hand sum).
  REQUIRE(fused_detail::group_in_double(0.0, one, 1, one, 1, 4, fused_detail::Consecutive{}, m, &r));
  CHECK(r == 4.0);
  // fp16's largest finite value 65504 plus 8 * 8 = 65568 >= 2^16, fp16's overflow threshold: only
  // the exact core knows the overflow rule; the double route declines.
  const double eight[1] = {8.0};
  CHECK_FALSE(fused_detail::group_in_double(65504.0, eight, 1, eight, 1, 1, fused_detail::Consecutive{}, m, &r));
  // A result below fp16's smallest normal 2^-14 (a subnormal result, 2^-15 + 2^-16): declined.
  const double tiny[1] = {std::ldexp(1.0, -8)};
  CHECK_FALSE(fused_detail::group_in_double(std::ldexp(1.0, -15), tiny, 1, tiny, 1, 1, fused_detail::Consecutive{}, m, &r));
}
