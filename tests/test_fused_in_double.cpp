// The fused tensor-core groups in double arithmetic (fused_accum.h, group_in_double) against the
// exact 128-bit integer core (group_at), which is the definition: for every tensor-core preset the
// double route applies to, random groups on the input format's grid (zeros, subnormals, both
// signs, exponents across the whole range) with running sums on the output grid (zero, subnormal,
// near overflow), consecutive and interleaved, one group and whole dot products with promotion.
// Where the double route declines it must say so (NaN, infinities, results it cannot round).
#include <doctest/doctest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <vector>

#include "arith/fused_accum.h"
#include "arith/random.h"
#include "arith/round.h"
#include "arith/tc_presets.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_fused_in_double {

using drift::testing::same_bits;

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

namespace {

// The device spelling of cut_to_integer (hostdevice.h), executed on the host: fma rounded toward
// zero by the FPU's rounding mode (glibc's fma and fmaf honour it), the subtraction of the offset
// (2^52 for doubles, 2^23 for floats) and copysign as written there. volatile keeps the compiler
// from folding across the mode switches.
template <class T>
T device_cut(T p, T scale) {
  volatile T vp = p, vs = scale, big = static_cast<T>(sizeof(T) == 8 ? 0x1p52 : 0x1p23);
  std::fesetround(FE_TOWARDZERO);
  const T u = std::fma(std::fabs(vp), vs, big);
  std::fesetround(FE_TONEAREST);
  volatile T vu = u;
  return std::copysign(vu - big, p);
}

}  // namespace

TEST_CASE("cut_to_integer: trunc(p * scale), and the device's fma-toward-zero spelling of it agrees") {
  // Products of short significands (the fused kernels' terms) scaled by powers of two so that
  // |p * scale| covers [2^-12, 2^22) (floats) and [2^-12, 2^51) (doubles), exact integers included
  // (a product's low bits land anywhere around the binary point).
  size_t checked = 0, wrong_host = 0, wrong_device = 0;
  for (uint64_t i = 0; i < 200000; ++i) {
    const uint32_t r = word(91, 2 * i), s = word(91, 2 * i + 1);
    const float x = static_cast<float>(1 + (r & 0xfff)) * ((r >> 31) ? -1.0f : 1.0f);
    const float y = static_cast<float>(1 + ((r >> 12) & 0xfff));
    const float p = x * y;  // at most 24 significant bits: exact
    // |p| * 2^e in [2^-12, 2^22)
    const float scale = std::ldexp(1.0f, static_cast<int>(s % 34) - std::ilogb(p) - 12);
    const float want = std::trunc(static_cast<float>(static_cast<double>(p) * scale));  // exact product
    const float host = cut_to_integer(p, scale), dev = device_cut(p, scale);
    wrong_host += std::memcmp(&want, &host, sizeof want) != 0;
    wrong_device += std::memcmp(&want, &dev, sizeof want) != 0;
    const double pd = static_cast<double>(p) * static_cast<double>(1 + (s >> 8 & 0xffffff));
    // |pd| * scaled in [2^-12, 2^51)
    const double scaled = std::ldexp(1.0, static_cast<int>(s % 63) - std::ilogb(pd) - 12);
    const double want_d = std::trunc(pd * scaled);
    const double host_d = cut_to_integer(pd, scaled), dev_d = device_cut(pd, scaled);
    wrong_host += std::memcmp(&want_d, &host_d, sizeof want_d) != 0;
    wrong_device += std::memcmp(&want_d, &dev_d, sizeof want_d) != 0;
    checked += 2;
  }
  CHECK(wrong_host == 0);
  CHECK(wrong_device == 0);
  // Hand cases: the signs of zero follow p (trunc(-0.75) = -0), and the edges of the range.
  CHECK(std::signbit(cut_to_integer(-3.0f, 0.25f)));
  CHECK(cut_to_integer(-3.0f, 0.25f) == 0.0f);
  CHECK(cut_to_integer(-3.0f, 0.5f) == -1.0f);
  CHECK(cut_to_integer(4194303.0f, 1.0f) == 4194303.0f);        // 2^22 - 1
  CHECK(cut_to_integer(8388607.0f, 0.5f) == 4194303.0f);        // (2^23 - 1) / 2
  CHECK(device_cut(8388607.0f, 0.5f) == 4194303.0f);
  CHECK(device_cut(-0x1.fffffep-1f, 1.0f) == 0.0f);
  CHECK(std::signbit(device_cut(-0x1.fffffep-1f, 1.0f)));
  CHECK(device_cut(0x1p51 - 0.25, 1.0) == 0x1p51 - 1);
  CHECK(checked == 400000);
}

}  // namespace test_fused_in_double
