// fp32_div_sat and fp32_mul_sat (quantize_element.h: NVFP4's block scale arithmetic) give op_div's
// and op_mul's bits into fp32 under nearest_saturating: one IEEE float operation where both operands
// are finite floats, else those routes themselves. Checked two ways on float pairs that reach every
// binade, the subnormals, results that underflow and results that overflow:
// - against op_div / op_mul (the double-double route, tested against the exact oracles elsewhere);
// - against a derivation of its own: the quotient or product of two floats formed in double and
//   rounded once to float is the correctly rounded float result (a double keeps more than 2 * 24 + 2
//   bits, so the first rounding never decides the second), an overflow to infinity then saturating
//   to the largest float with the result's sign.
#include <doctest/doctest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

#include "arith/catalogue.h"
#include "arith/ops.h"
#include "arith/quantize_element.h"
#include "arith/random.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_fp32_scale_ops {

using namespace drift;
using namespace drift::testing;

namespace {

// A finite float with a uniformly drawn exponent field (subnormals and zero included) and random
// fraction bits and sign.
float random_finite_float(uint64_t seed, uint64_t i) {
  const uint32_t r0 = random_u32(seed, 21, 2 * i), r1 = random_u32(seed, 21, 2 * i + 1);
  const uint32_t field = r1 % 255;  // (255: inf and NaN, left out)
  return std::bit_cast<float>((r0 & 0x807fffffu) | (field << 23));
}

// The independent derivation: one double operation (exact for a product of floats; correctly
// rounded for a quotient) rounded once to float, overflow saturating.
double expected(double exact_or_rounded) {
  const float f = static_cast<float>(exact_or_rounded);
  if (std::isinf(f)) return std::copysign(static_cast<double>(FLT_MAX), exact_or_rounded);
  return f;
}

}  // namespace

TEST_CASE("fp32_div_sat and fp32_mul_sat: op_div's and op_mul's bits, and the correctly rounded float") {
  const Format fp32 = *find_format("fp32");
  const RoundSpec rn = quant::nearest_saturating();
  uint64_t checked = 0, overflowed = 0, subnormal = 0;
  for (uint64_t i = 0; i < 400000; ++i) {
    float a = random_finite_float(1, i), b = random_finite_float(2, i);
    if (i % 4 == 1) b = std::ldexp(1.0f + static_cast<float>(i % 7) / 8.0f, static_cast<int>(i % 60) - 30);  // ordinary
    const double da = a, db = b;
    const double mul = fp32_mul_sat(da, db, fp32);
    CHECK(same_bits(mul, op_mul(da, db, fp32, rn)));
    CHECK(same_bits(mul, expected(da * db)));
    if (b != 0) {
      const double div = fp32_div_sat(da, db, fp32);
      CHECK(same_bits(div, op_div(da, db, fp32, rn)));
      CHECK(same_bits(div, expected(da / db)));
      overflowed += std::fabs(div) == FLT_MAX && std::fabs(da / db) > FLT_MAX;
      subnormal += div != 0 && std::fabs(div) < FLT_MIN;
    }
    ++checked;
  }
  // The draw reaches both ends of the range.
  CHECK(overflowed > 1000);
  CHECK(subnormal > 1000);
  CHECK(checked == 400000);
}

TEST_CASE("fp32_div_sat and fp32_mul_sat: hand cases and the operands they hand to op_div and op_mul") {
  const Format fp32 = *find_format("fp32");
  const RoundSpec rn = quant::nearest_saturating();
  // NVFP4's block decode scale amax / 6: 1 / 6 = 0x3e2aaaab (0.1666666716...), rounded up: the
  // remainder 1/6 - 0x3e2aaaaa's value is more than half an ulp.
  CHECK(same_bits(fp32_div_sat(1.0, 6.0, fp32), static_cast<double>(std::bit_cast<float>(0x3e2aaaabu))));
  // Overflow saturates with the sign: FLT_MAX * 2 and -FLT_MAX / 0.5.
  CHECK(fp32_mul_sat(FLT_MAX, 2.0, fp32) == FLT_MAX);
  CHECK(fp32_div_sat(-FLT_MAX, 0.5, fp32) == -FLT_MAX);
  // Gradual underflow: 2^-126 / 2^4 = 2^-130, a subnormal float, exact; the smallest subnormal
  // halved is a tie between 0 and 2^-149, to even: +0.
  CHECK(fp32_div_sat(std::ldexp(1.0, -126), 16.0, fp32) == std::ldexp(1.0, -130));
  CHECK(same_bits(fp32_div_sat(std::ldexp(1.0, -149), 2.0, fp32), 0.0));
  CHECK(same_bits(fp32_mul_sat(-std::ldexp(1.0, -149), 0.5, fp32), -0.0));
  // Three halves of the smallest subnormal: 1.5 units, a tie, to even: 2 units.
  CHECK(fp32_mul_sat(std::ldexp(1.0, -149), 1.5, fp32) == std::ldexp(1.0, -148));
  // Operands the float operation does not take go to op_div / op_mul: a double that is no float, a
  // zero divisor, infinities and NaN.
  const double not_float = 1.0 + std::ldexp(1.0, -40);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double cases[][2] = {{not_float, 3.0}, {3.0, not_float}, {1.0, 0.0}, {-1.0, 0.0}, {0.0, 0.0},
                             {inf, 2.0},       {2.0, inf},       {nan, 2.0}, {2.0, nan}, {inf, inf}};
  for (const auto& c : cases) {
    CAPTURE(c[0]);
    CAPTURE(c[1]);
    CHECK(same_bits(fp32_div_sat(c[0], c[1], fp32), op_div(c[0], c[1], fp32, rn)));
    CHECK(same_bits(fp32_mul_sat(c[0], c[1], fp32), op_mul(c[0], c[1], fp32, rn)));
  }
}

}  // namespace test_fp32_scale_ops
