// drift's fp32 exp (src/arith/exp_fp32.h): the SIMD span against its scalar twin, bit for bit, on
// every Highway target compiled in that this CPU runs (before and after the rounding to float);
// accuracy against an independent reference (long double expl, rounded to float) and hand values
// from an exact oracle; glibc's special cases.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "arith/exp2_table.h"
#include "arith/exp_fp32.h"
#include "float_span_twins.h"
#include "hwy/targets.h"

namespace drift::test_exp_fp32 {

using testing::check_span_on_every_target;
using testing::check_span_tails_in_place;
using testing::FloatSpanTwins;
using testing::TargetMock;

namespace {

uint32_t bits(float f) { return testing::float_bits(f); }
float from_bits(uint32_t u) { return testing::float_from_bits(u); }
bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

// Inputs that matter beyond the strided sweep: zeros, infinities, NaNs (quiet, signalling, with
// payloads), subnormals, 88.0 (where the special path starts) and its neighbours, glibc's three
// thresholds (overflow above 0x1.62e42ep6, zero below -0x1.9fe368p6, the "may underflow" value
// below -0x1.9d1d9ep6) and their neighbours, the largest float.
std::vector<float> special_values() {
  std::vector<float> out;
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t a : {0x0u, 0x1u, 0x7fffffu, 0x800000u, 0x3f800000u, 0x42afffffu, 0x42b00000u, 0x42b00001u,
                       0x42b17216u, 0x42b17217u, 0x42b17218u, 0x42cff1b3u, 0x42cff1b4u, 0x42cff1b5u, 0x42ce8eceu,
                       0x42ce8ecfu, 0x42ce8ed0u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u, 0x7fffffffu,
                       0x7fa00000u})
      out.push_back(from_bits(sign | a));
  return out;
}

// Every 97th encoding of all 2^32 (both signs, every binade, NaNs included), ~44 million values.
const std::vector<float>& test_values() {
  static const std::vector<float> values = [] {
    std::vector<float> v = special_values();
    for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 97) v.push_back(from_bits(static_cast<uint32_t>(u)));
    return v;
  }();
  return values;
}

// The main path's inputs (|x| < 88), where the unrounded double is defined.
bool main_path(float x) { return (bits(x) & 0x7fffffffu) < 0x42b00000u; }

FloatSpanTwins exp_twins() {
  return {exp_fp32,          exp_fp32_unrounded,    exp_fp32_span, exp_fp32_unrounded_span,
          exp_fp32_target_name, exp_fp32_targets, main_path};
}

}  // namespace

TEST_CASE("exp_fp32_span equals exp_fp32 bit for bit on every SIMD target") {
  check_span_on_every_target(exp_twins(), test_values(), "exp_fp32_span");
}

// A vector holding one special lane and ordinary ones goes lane by lane; the others must not change.
TEST_CASE("exp_fp32_span: every length and offset (tails), in place, special lanes among ordinary ones") {
  std::vector<float> in;
  const std::vector<float> sp = special_values();
  for (size_t i = 0; i < sp.size(); ++i) {
    in.push_back(sp[i]);
    for (int k = 0; k < 5; ++k) in.push_back(static_cast<float>(i) * 0.37f - static_cast<float>(k) * 3.1f);
  }
  check_span_tails_in_place(exp_twins(), in);
}

// Agreement with long double expl (x87 extended: a 64-bit significand, an implementation independent
// of drift's) rounded to float. Arm documents the algorithm's error as under 0.502 ulp, so the two
// may round to different floats only where exp(x) lies within about 0.002 ulp of a float midpoint:
// every disagreement must be between neighbours, with the reference within 2^-31 (relative, about
// 0.004 ulp) of their midpoint. Subnormal results included: the double before rounding is accurate
// to far better than a subnormal's ulp.
TEST_CASE("exp_fp32 is correctly rounded except within 2^-31 of a float midpoint") {
  uint64_t checked = 0, near_ties = 0, bad = 0;
  for (float x : test_values()) {
    if (is_nan_bits(bits(x))) continue;
    const float got = exp_fp32(x);
    const long double r = expl(static_cast<long double>(x));
    const float want = static_cast<float>(r);
    ++checked;
    if (bits(got) == bits(want)) continue;
    const bool neighbours = bits(got) + 1 == bits(want) || bits(want) + 1 == bits(got);
    const long double mid = (static_cast<long double>(got) + static_cast<long double>(want)) / 2;  // exact
    const bool near_tie = neighbours && std::isfinite(got) && std::fabs(r - mid) <= std::ldexp(std::fabs(r), -31);
    if (near_tie) {
      ++near_ties;
    } else if (bad++ < 10) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "x = %a: exp_fp32 %a, (float)expl(x) %a", static_cast<double>(x),
                    static_cast<double>(got), static_cast<double>(want));
      FAIL_CHECK(buf);
    }
  }
  CHECK(bad == 0);
  MESSAGE("exp_fp32 vs (float)expl: " << checked << " inputs, " << near_ties << " near-tie disagreements, " << bad
                                      << " others");
}

// Correctly rounded float exp of float inputs, from an oracle independent of any libm: Python's
// decimal (exp correctly rounded at 80 digits) and fractions (exact round-to-nearest-even of that
// value onto the float grid, subnormals included). The expected float is given by its encoding.
// exp2_table.h (glibc's table, shared by exp_fp32 and tanh_fp32's quick route, whose error bound
// takes each entry within half an ulp): T[i] + (i << 47) is the double nearest 2^(i/32). The
// reference is long double exp2l (64-bit significand, within an ulp of its own), so an entry passes
// when no other double is nearer than it, up to 2^-60 relative.
TEST_CASE("exp2_table: each entry is the double nearest 2^(i/32)") {
  for (uint64_t i = 0; i < 32; ++i) {
    const uint64_t b = exp2_table::kTable[i] + (i << (52 - exp2_table::kTableBits));
    double t;
    std::memcpy(&t, &b, sizeof t);
    const long double want = exp2l(static_cast<long double>(i) / 32);
    const long double err = std::fabs(static_cast<long double>(t) - want);
    const long double half_ulp = static_cast<long double>(std::nextafter(t, 2.0) - t) / 2;
    CAPTURE(i);
    CHECK(err <= half_ulp + std::ldexp(want, -60));
    CHECK(t >= 1.0);
    CHECK(t < 2.0);
  }
}

TEST_CASE("exp_fp32 hand values") {
  struct Case {
    uint32_t x;
    uint32_t want;
  };
  const Case cases[] = {
      {0x3f800000u, 0x402df854u},  // exp(1)    = 2.7182818...
      {0xbf800000u, 0x3ebc5ab2u},  // exp(-1)   = 0.36787944...
      {0x3f000000u, 0x3fd3094cu},  // exp(0.5)  = 1.6487212...
      {0x41200000u, 0x46ac14eeu},  // exp(10)   = 22026.465...
      {0xc1200000u, 0x383e6bceu},  // exp(-10)  = 4.5399929e-5
      {0x42a00000u, 0x792abbceu},  // exp(80)   = 5.5406223e34
      {0xc2a00000u, 0x05bfecbau},  // exp(-80)  = 1.8048513e-35
      {0xc2c80000u, 0x0000001bu},  // exp(-100) = 3.72e-44, a subnormal: 27 * 2^-149
      {0x42b00000u, 0x7ef882b7u},  // exp(88)   = 1.6516362e38 (the first input of the special path)
      {0x42b17217u, 0x7f7fff84u},  // exp(0x1.62e42ep6) = 3.4027985e38, the largest input that does not overflow
      {0xc2cf0000u, 0x00000001u},  // exp(-103.5) = 1.12e-45, the "may underflow" range: 2^-149
      {0x3a83126fu, 0x3f8020c9u},  // exp(0.001f) = 1.0010005...
      {0x00000000u, 0x3f800000u},  // exp(0) = 1
      {0x80000000u, 0x3f800000u},  // exp(-0) = 1
  };
  for (const Case& c : cases) {
    INFO("x = " << static_cast<double>(from_bits(c.x)));
    CHECK(bits(exp_fp32(from_bits(c.x))) == c.want);
    float out = 0;
    const float x = from_bits(c.x);
    exp_fp32_span(&x, &out, 1);
    CHECK(bits(out) == c.want);
  }
}

// The fused steps are fused. Among all non-positive floats (the only arguments a softmax passes) one
// input tells glibc's FMA build of expf from its plain build: exp(-63.09946) (0xc27c65d9) lies 2^-37
// (relative) below the midpoint of 0x11fa2992 and 0x11fa2993 (Python decimal at 80 digits). The plain
// build (a multiply, then an add) returns the correctly rounded 0x11fa2992; the FMA build returns
// 0x11fa2993 (measured with glibc 2.36, forcing the plain build by GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA),
// within its 0.502 ulp, and so did every run on an x86-64 CPU with FMA before drift had its own exp.
// exp_fp32 keeps the FMA build's bits on every CPU and target.
TEST_CASE("exp_fp32 gives glibc's FMA build's bits where the two builds differ") {
  const float x = from_bits(0xc27c65d9u);
  CHECK(bits(exp_fp32(x)) == 0x11fa2993u);
  TargetMock mock;
  for (int64_t target : exp_fp32_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << std::string(hwy::TargetName(target)));
    float out = 0;
    exp_fp32_span(&x, &out, 1);
    CHECK(bits(out) == 0x11fa2993u);
  }
}

TEST_CASE("exp_fp32 special values") {
  CHECK(bits(exp_fp32(-INFINITY)) == 0x00000000u);
  CHECK(bits(exp_fp32(INFINITY)) == 0x7f800000u);
  CHECK(bits(exp_fp32(0x1.62e430p6f)) == 0x7f800000u);  // just above the overflow threshold
  CHECK(bits(exp_fp32(-0x1.9fe36ap6f)) == 0x00000000u);  // just below the zero threshold
  CHECK(bits(exp_fp32(-0x1.9fe368p6f)) == 0x00000001u);  // at it: the "may underflow" value
  CHECK(bits(exp_fp32(-FLT_MAX)) == 0x00000000u);
  // NaN in, the same NaN out, quieted: payload and sign kept (x + x).
  CHECK(bits(exp_fp32(from_bits(0x7fc00000u))) == 0x7fc00000u);
  CHECK(bits(exp_fp32(from_bits(0xffc00000u))) == 0xffc00000u);
  CHECK(bits(exp_fp32(from_bits(0x7f800001u))) == 0x7fc00001u);
  CHECK(bits(exp_fp32(from_bits(0xffa00000u))) == 0xffe00000u);
  // Monotone (non-decreasing) across the special path's edges at +-88 and the thresholds.
  for (uint32_t u : {0x42b00000u, 0xc2b00000u, 0x42b17217u, 0xc2cff1b4u, 0xc2ce8ecfu})
    for (uint32_t d = 0; d < 64; ++d) {
      const float a = from_bits(u - 32 + d), b = from_bits(u - 31 + d);  // a < b when positive, a > b when negative
      if (u & 0x80000000u)
        CHECK(exp_fp32(b) <= exp_fp32(a));
      else
        CHECK(exp_fp32(a) <= exp_fp32(b));
    }
}

}  // namespace drift::test_exp_fp32
