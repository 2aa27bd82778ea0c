// The MX presets' block scales in the float quantizer come from plain_e8m0_exponent (amax's bits),
// not from block_scale_of. Two checks that it changes nothing:
// - the exponent against an fp64 derivation (frexp: amax = m * 2^e with m in [0.5, 1), so
//   floor(log2 amax) = e - 1) and against block_scale_of, for every float binade, the edges of each
//   (its first and last mantissa), the subnormals' power-of-two edges, zero, five element formats
//   and offsets that reach both clamps;
// - float operands (the lane) against the same values as doubles (block_scale_of's loop), bit for
//   bit, with blocks whose amax runs from subnormal floats to the largest float, all-zero blocks
//   and NaN/inf blocks.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "quant_check.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_quantize_plain_e8m0 {

using namespace drift;
using namespace drift::testing;

namespace {

float float_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// floor(log2 a) - emax + offset clamped to [-127, 127], -127 for zero: OCP MX v1.0's shared exponent,
// derived in fp64 without the code's bit handling.
int expected_exponent(float amax, int emax, int offset) {
  if (amax == 0) return -127;
  int e;
  std::frexp(static_cast<double>(amax), &e);
  const int x = (e - 1) - emax + offset;
  return x < -127 ? -127 : (x > 127 ? 127 : x);
}

// Every binade's first and last mantissa and a few inside; the subnormals' power-of-two edges.
std::vector<float> amax_values() {
  std::vector<float> v{0.0f};
  std::mt19937 rng(7);
  for (uint32_t biased = 1; biased <= 254; ++biased) {
    for (uint32_t m : {0u, 1u, 0x400000u, 0x7fffffu}) v.push_back(float_of_bits(biased << 23 | m));
    for (int i = 0; i < 4; ++i) v.push_back(float_of_bits(biased << 23 | (rng() & 0x7fffffu)));
  }
  for (int j = 0; j < 23; ++j) {
    v.push_back(float_of_bits(1u << j));
    v.push_back(float_of_bits((2u << j) - 1));
  }
  return v;
}

}  // namespace

TEST_CASE("plain_e8m0_exponent: the OCP floor rule's exponent, from fp64 and from block_scale_of") {
  const std::vector<float> amaxes = amax_values();
  for (const char* name : {"fp8_e4m3", "fp8_e5m2", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1"}) {
    const int emax = find_format(name)->emax;
    for (int offset : {-3, 0, emax + 3}) {  // (the last lifts the largest floats past the top clamp)
      Quantizer q = make_quantizer(name, ScaleKind::block);
      q.scaling.offset = offset;
      const BlockScaleSpec spec = block_scale_spec(q, 1.0);
      REQUIRE(plain_e8m0_floor(spec));
      size_t bad_fp64 = 0, bad_general = 0;
      int lowest = 200, highest = -200;
      for (float a : amaxes) {
        const int e = plain_e8m0_exponent(a, spec);
        lowest = std::min(lowest, e);
        highest = std::max(highest, e);
        bad_fp64 += e != expected_exponent(a, q.format.emax, offset);
        const BlockScale bs = block_scale_of(spec, a);
        bad_general += !(bs.exact && same_bits(bs.stored, std::ldexp(1.0, e)) && same_bits(bs.mult, std::ldexp(1.0, -e)));
      }
      INFO(std::string(name) << " offset " << offset);
      CHECK(bad_fp64 == 0);
      CHECK(bad_general == 0);
      CHECK(lowest == -127);  // the bottom clamp (and zero) reached
      if (offset > emax) CHECK(highest == 127);
    }
  }
}

TEST_CASE("plain_e8m0_floor: only the OCP floor rule without microxcaling's departures") {
  Quantizer q = make_quantizer("fp8_e4m3", ScaleKind::block);
  CHECK(plain_e8m0_floor(block_scale_spec(q, 1.0)));
  for (ExpRule r : {ExpRule::ceil, ExpRule::rceil, ExpRule::even}) {
    Quantizer other = q;
    other.scaling.rule = r;
    CHECK_FALSE(plain_e8m0_floor(block_scale_spec(other, 1.0)));
  }
  Quantizer bits = q;
  bits.scaling.emulate.scale_bits = 8;
  CHECK_FALSE(plain_e8m0_floor(block_scale_spec(bits, 1.0)));
  Quantizer log2 = q;
  log2.scaling.emulate.exponent = ExpSource::log2_fp32;
  CHECK_FALSE(plain_e8m0_floor(block_scale_spec(log2, 1.0)));
  CHECK_FALSE(plain_e8m0_floor(block_scale_spec(make_quantizer("fp8_e4m3", ScaleKind::nvfp4, 16), 1.0)));
}

TEST_CASE("MX quantization of float operands equals that of the same values as doubles") {
  // 64 rows of 96 (three blocks of 32): each block's magnitudes put its amax in a different binade,
  // from the subnormal floats to the top of fp32's range; some blocks are all zero, one holds a NaN
  // and one an inf.
  const size_t rows = 64, k = 96;
  std::vector<float> xf(rows * k);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (size_t blk = 0; blk < rows * k / 32; ++blk) {
    const int binade = static_cast<int>(blk * 7 % 277) - 149;  // 2^-149 .. 2^127
    const bool zero = blk % 23 == 5;
    for (size_t i = 0; i < 32; ++i) {
      const float v = zero ? 0.0f : std::ldexp(unit(rng), binade);
      xf[blk * 32 + i] = std::isfinite(v) ? v : 0.0f;
    }
  }
  xf[17 * 32 + 3] = NAN;
  xf[40 * 32 + 9] = -INFINITY;
  const std::vector<double> xd(xf.begin(), xf.end());
  for (const char* name : {"fp8_e4m3", "fp8_e5m2", "fp4_e2m1"}) {
    for (int offset : {0, -2, -140}) {  // (-140: blocks scaled up past fp32's top take the element path)
      Quantizer q = make_quantizer(name, ScaleKind::block);
      q.scaling.offset = offset;
      INFO(std::string(name) << " offset " << offset);
      QuantizedOperand from_float, from_double;
      quantize_into(from_float, StridedInputF{xf.data(), k, 1}, rows, k, q, 1, 2);
      quantize_into(from_double, StridedInput{xd.data(), k, 1}, rows, k, q, 1, 2);
      check_same_operand(from_float, from_double);
      CHECK(from_float.stats.nonfinite == 2);
      CHECK(from_float.stats.scale_count > 100);
    }
  }
}

}  // namespace test_quantize_plain_e8m0
