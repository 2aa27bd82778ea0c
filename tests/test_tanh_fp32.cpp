// drift's fp32 tanh (src/arith/tanh_fp32.h): the SIMD span against its scalar twin, bit for bit,
// on every Highway target compiled in that this CPU runs; accuracy against an independent
// reference (glibc's double tanh, rounded to float) and hand values from an exact oracle;
// exact oddness; special values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "arith/tanh_fp32.h"
#include "float_span_twins.h"

namespace drift::test_tanh_fp32 {

using testing::check_span_on_every_target;
using testing::check_span_tails_in_place;
using testing::FloatSpanTwins;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Inputs that matter beyond the strided sweep: zeros, infinities, NaNs (quiet, signalling, with
// payloads), subnormals, the Taylor/exp boundary 2^-6 and its neighbours, the clamp 20 and its
// neighbours, the first floats whose tanh rounds to 1.0f (9.0109...), the largest finite float.
std::vector<float> special_values() {
  std::vector<float> out;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t a : {0x0u, 0x1u, 0x2u, 0x7fffffu, 0x800000u, 0x800001u, 0x3c7ffffeu, 0x3c7fffffu, 0x3c800000u,
                       0x3c800001u, 0x3c000000u, 0x3e800000u, 0x3f000000u, 0x3f800000u, 0x41102cb3u, 0x41102cb4u,
                       0x41a00000u, 0x419fffffu, 0x41a00001u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u,
                       0x7fffffffu, 0x7fa00000u, 0x7f800100u})
      out.push_back(from_bits(sign | a));
  return out;
}

// Every 97th encoding of all 2^32 (both signs, every binade, NaNs included), ~44 million values.
std::vector<float> strided_values() {
  std::vector<float> out;
  out.reserve((uint64_t{1} << 32) / 97 + 1);
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 97) out.push_back(from_bits(static_cast<uint32_t>(u)));
  return out;
}

const std::vector<float>& test_values() {
  static const std::vector<float> values = [] {
    std::vector<float> v = special_values();
    const std::vector<float> s = strided_values();
    v.insert(v.end(), s.begin(), s.end());
    return v;
  }();
  return values;
}

bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

bool not_nan(float x) { return !is_nan_bits(bits(x)); }

FloatSpanTwins tanh_twins() {
  return {tanh_fp32,          tanh_fp32_unrounded,    tanh_fp32_span, tanh_fp32_unrounded_span,
          tanh_fp32_target_name, tanh_fp32_targets, not_nan};
}

}  // namespace

TEST_CASE("tanh_fp32_span equals tanh_fp32 bit for bit on every SIMD target") {
  check_span_on_every_target(tanh_twins(), test_values(), "tanh_fp32_span");
}

TEST_CASE("tanh_fp32_span: every length and offset (tails), in place, equals the scalar twin") {
  const std::vector<float> sp = special_values();
  std::vector<float> in;
  for (int rep = 0; rep < 4; ++rep) in.insert(in.end(), sp.begin(), sp.end());
  check_span_tails_in_place(tanh_twins(), in);
}

// The span's quick route (AVX-512) keeps its own approximation t' only where t' settles the float
// rounding. t' and the header's t are each within 2^-46 (relative) of tanh(x), so they lie within
// 2^8 units of t's last bit of each other. Every input whose t lies within 2^11 units of a float
// midpoint (the rounding drops t's 29 low fraction bits; a midpoint is 2^28 there) therefore has t'
// within 2^11 + 2^8 < 2^12 units of it and must be deferred to the header's operations. The inputs:
// every 5th encoding of [2^-6, 9.02), the exp branch short of where every tanh rounds to 1.0f (15
// million; about 2^-17 of them, 110, lie that near, found by the scalar twin). And the route must
// settle nearly everything itself: at most 2^-12 of them deferred.
TEST_CASE("tanh_fp32_span's quick route defers every input near a float midpoint, and few others") {
  std::vector<float> in;
  for (uint32_t u = bits(0x1p-6f); u < bits(9.02f); u += 5) in.push_back(from_bits(u));
  std::vector<uint8_t> deferred(in.size());
  if (!tanh_fp32_quick_deferred_span(in.data(), deferred.data(), in.size())) {
    const std::string target = tanh_fp32_target_name();
    WARN_MESSAGE(false, "the quick route runs on AVX-512 only; this CPU's target is " << target
                                                                                      << ": not checked here");
    return;
  }
  uint64_t near = 0, near_missed = 0, deferred_count = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    deferred_count += deferred[i];
    const double t = tanh_fp32_unrounded(in[i]);
    uint64_t tb;
    std::memcpy(&tb, &t, sizeof tb);
    const int64_t dropped = static_cast<int64_t>(tb & ((uint64_t{1} << 29) - 1));
    if (std::llabs(dropped - (int64_t{1} << 28)) <= (int64_t{1} << 11)) {
      ++near;
      if (!deferred[i] && near_missed++ < 10) FAIL_CHECK("not deferred: x = " << static_cast<double>(in[i]));
    }
  }
  CHECK(near >= 50);
  CHECK(near_missed == 0);
  CHECK(deferred_count * 4096 <= in.size());
  // The Taylor branch's inputs and NaN are never deferred (their lanes do not take t').
  const std::vector<float> others = {0.0f, 0x1p-7f, std::nextafter(0x1p-6f, 0.0f), -0x1p-10f,
                                     std::numeric_limits<float>::quiet_NaN()};
  std::vector<uint8_t> none(others.size(), 1);
  CHECK(tanh_fp32_quick_deferred_span(others.data(), none.data(), others.size()));
  CHECK(std::count(none.begin(), none.end(), 1) == 0);
  MESSAGE("quick route: " << in.size() << " inputs, " << deferred_count << " deferred, " << near
                          << " within 2^11 units of a midpoint");
}

// Agreement with glibc's double tanh (under 2 ulp of double, an implementation independent of
// drift's) rounded to float. The two can round to different floats only where tanh(x) lies near a
// float midpoint: drift's t is within 2^-46 relative of tanh(x), the reference within 2^-51, so a
// disagreement needs the reference within 2^-46 + 2^-51 < 2^-44 (relative) of a midpoint. Every
// disagreement must be such a case, and the two floats must be neighbours.
TEST_CASE("tanh_fp32 is correctly rounded except within 2^-44 of a float midpoint") {
  const std::vector<float>& in = test_values();
  uint64_t checked = 0, near_ties = 0, bad = 0;
  for (float x : in) {
    if (is_nan_bits(bits(x))) continue;
    const float got = tanh_fp32(x);
    const double r = std::tanh(static_cast<double>(x));
    const float want = static_cast<float>(r);
    ++checked;
    if (bits(got) == bits(want)) continue;
    const bool neighbours = bits(got) + 1 == bits(want) || bits(want) + 1 == bits(got);
    const double mid = (static_cast<double>(got) + static_cast<double>(want)) / 2;  // exact: 25 bits
    const bool near_tie = neighbours && std::fabs(r - mid) <= std::ldexp(std::fabs(r), -44);
    if (near_tie) {
      ++near_ties;
    } else if (bad++ < 10) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "x = %a: tanh_fp32 %a, (float)tanh((double)x) %a (double %a)",
                    static_cast<double>(x), static_cast<double>(got), static_cast<double>(want), r);
      FAIL_CHECK(buf);
    }
  }
  CHECK(bad == 0);
  MESSAGE("tanh_fp32 vs (float)tanh(double): " << checked << " inputs, " << near_ties
                                               << " near-tie disagreements, " << bad << " others");
}

TEST_CASE("tanh_fp32 is exactly odd") {
  uint64_t bad = 0;
  for (float x : test_values()) {
    const uint32_t pos = bits(tanh_fp32(x)), neg = bits(tanh_fp32(-x));
    if (neg != (pos ^ 0x80000000u) && bad++ < 10) FAIL_CHECK("x = " << static_cast<double>(x));
  }
  CHECK(bad == 0);
}

// Correctly rounded float tanh of float inputs, from an oracle independent of any libm: Python's
// decimal (exp correctly rounded at 80 digits, tanh = (e^2x - 1)/(e^2x + 1)) and fractions (exact
// round-to-nearest-even of that value onto the float grid). The expected float is given by its
// encoding.
TEST_CASE("tanh_fp32 hand values") {
  struct Case {
    uint32_t x;
    uint32_t want;
  };
  const Case cases[] = {
      {0x3f000000u, 0x3eec9a9fu},  // tanh(0.5)   = 0.46211716...
      {0x3f800000u, 0x3f42f7d6u},  // tanh(1)     = 0.76159418...
      {0x3e800000u, 0x3e7acbf5u},  // tanh(0.25)  = 0.24491866...
      {0x40000000u, 0x3f76ca83u},  // tanh(2)     = 0.96402758...
      {0x40400000u, 0x3f7ebbe9u},  // tanh(3)     = 0.99505478...
      {0x3c800000u, 0x3c7ffaabu},  // tanh(2^-6)  = 0.015623729 (first input of the exp branch)
      {0x3c000000u, 0x3bfffeabu},  // tanh(2^-7)  = 0.0078123412 (Taylor branch)
      {0x3a83126fu, 0x3a83126cu},  // tanh(0.001f) = 0.00099999970 (Taylor branch)
      {0x3f333333u, 0x3f1ab7d9u},  // tanh(0.7f)  = 0.60436779...
      {0x40b00000u, 0x3f7ffdd0u},  // tanh(5.5)   = 0.99996662...
      {0x41102cb4u, 0x3f800000u},  // 9.0109138: the smallest float whose tanh rounds to 1.0f ...
      {0x41102cb3u, 0x3f7fffffu},  // ... and the float below it: 1 - 2^-24
      {0x41a00000u, 0x3f800000u},  // 20 (the clamp)
      {0x7f7fffffu, 0x3f800000u},  // the largest float
      {0x00000001u, 0x00000001u},  // the smallest subnormal: tanh(x) = x (1 - x^2/3 + ...) rounds to x
      {0x00800000u, 0x00800000u},  // the smallest normal, likewise
  };
  for (const Case& c : cases) {
    INFO("x = " << static_cast<double>(from_bits(c.x)));
    CHECK(bits(tanh_fp32(from_bits(c.x))) == c.want);
    CHECK(bits(tanh_fp32(from_bits(c.x | 0x80000000u))) == (c.want | 0x80000000u));
    float out = 0;
    const float x = from_bits(c.x);
    tanh_fp32_span(&x, &out, 1);
    CHECK(bits(out) == c.want);
  }
}

TEST_CASE("tanh_fp32 special values") {
  CHECK(bits(tanh_fp32(0.0f)) == 0x00000000u);
  CHECK(bits(tanh_fp32(-0.0f)) == 0x80000000u);
  CHECK(tanh_fp32(INFINITY) == 1.0f);
  CHECK(tanh_fp32(-INFINITY) == -1.0f);
  // NaN in, the same NaN out, quieted: payload and sign kept.
  CHECK(bits(tanh_fp32(from_bits(0x7fc00000u))) == 0x7fc00000u);
  CHECK(bits(tanh_fp32(from_bits(0xffc00000u))) == 0xffc00000u);
  CHECK(bits(tanh_fp32(from_bits(0x7f800001u))) == 0x7fc00001u);
  CHECK(bits(tanh_fp32(from_bits(0x7fa00000u))) == 0x7fe00000u);
  // Monotone (non-decreasing) across the branch boundary 2^-6 and the clamp 20.
  for (uint32_t u : {0x3c800000u, 0x41a00000u})
    for (uint32_t d = 0; d < 64; ++d) CHECK(tanh_fp32(from_bits(u - 32 + d)) <= tanh_fp32(from_bits(u - 31 + d)));
}

}  // namespace drift::test_tanh_fp32
