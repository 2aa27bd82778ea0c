// arith/float_rows.h: the quantizer's passes over float rows. The element-by-element statements are
// checked against fp64 and <cmath> classification, and every SIMD target against them, bit for bit,
// over lengths around the vector widths and values at the edges: NaN, infinities, zeros of both signs,
// subnormals, the largest float, products that overflow or fall below fp32's range.
#include <doctest/doctest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "arith/float_rows.h"
#include "arith/random.h"
#include "same_bits.h"

namespace drift::test_float_rows {

using drift::testing::same_bits;

namespace {

// Value i of a row: mostly finite floats of every magnitude (subnormals included), with the edge
// values sprinkled in.
float edge_value(uint64_t seed, size_t i) {
  const uint32_t r = random_u32(seed, 11, i);
  switch (r % 23) {
    case 0: return std::numeric_limits<float>::quiet_NaN();
    case 1: return (r & 32) ? INFINITY : -INFINITY;
    case 2: return (r & 32) ? 0.0f : -0.0f;
    case 3: return (r & 32) ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::denorm_min();
    default: {
      const uint32_t u = random_u32(seed, 12, i) & 0xff7fffffu;  // any sign and exponent but 255
      float f;
      std::memcpy(&f, &u, sizeof f);
      return f;
    }
  }
}

struct ResetTargets {
  ~ResetTargets() { hwy::SetSupportedTargetsForTest(0); }
};

const size_t kLengths[] = {0, 1, 3, 15, 16, 17, 31, 32, 33, 64, 70, 257};

}  // namespace

TEST_CASE("float_row_counts: the statement against <cmath>, every target against the statement") {
  ResetTargets reset;
  for (size_t n : kLengths)
    for (uint64_t seed : {1u, 2u, 3u}) {
      CAPTURE(n);
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = edge_value(seed, i);
      float amax = 0;
      uint32_t nonfinite = 0, subnormal = 0;
      for (float v : x) {
        if (!std::isfinite(v)) {
          ++nonfinite;
          continue;
        }
        if (std::fpclassify(v) == FP_SUBNORMAL) ++subnormal;
        amax = std::max(amax, std::fabs(v));
      }
      const FloatRowCounts s = float_row_counts_scalar(x.data(), n);
      CHECK(s.amax == amax);
      CHECK(s.nonfinite == nonfinite);
      CHECK(s.subnormal == subnormal);
      for (int64_t target : float_rows_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(hwy::TargetName(target));
        const FloatRowCounts v = float_row_counts(x.data(), n);
        CHECK(v.amax == s.amax);
        CHECK(v.nonfinite == s.nonfinite);
        CHECK(v.subnormal == s.subnormal);
      }
      hwy::SetSupportedTargetsForTest(0);
    }
}

TEST_CASE("add_zero_floats: the statement by hand, every target against it") {
  // IEEE 754 (round to nearest): +0 + x is x for every x but -0 (+0 + -0 = +0) and a signalling NaN,
  // which the add quiets (the quiet bit, 0x00400000, set; x86 keeps the payload and sign).
  const uint32_t snan = 0xff800001u, qnan = 0x7fc00005u;
  const uint32_t in[] = {0x80000000u, 0x00000000u, snan, qnan, 0x00000001u, 0x80000001u, 0x7f800000u, 0xff800000u,
                         0x3f800000u, 0xff7fffffu};
  const uint32_t want[] = {0x00000000u, 0x00000000u, snan | 0x00400000u, qnan, 0x00000001u, 0x80000001u, 0x7f800000u,
                           0xff800000u, 0x3f800000u, 0xff7fffffu};
  std::vector<float> x(std::size(in));
  std::memcpy(x.data(), in, sizeof in);
  add_zero_floats_scalar(x.data(), x.size());
  CHECK(std::memcmp(x.data(), want, sizeof want) == 0);
  ResetTargets reset;
  for (size_t n : kLengths)
    for (uint64_t seed : {4u, 5u}) {
      CAPTURE(n);
      std::vector<float> row(n);
      for (size_t i = 0; i < n; ++i) row[i] = edge_value(seed, i);
      if (n > 5) std::memcpy(&row[n - 5], &snan, sizeof snan);  // a signalling NaN, in a vector or the tail
      std::vector<float> statement = row;
      add_zero_floats_scalar(statement.data(), n);
      for (int64_t target : float_rows_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(hwy::TargetName(target));
        std::vector<float> v = row;
        add_zero_floats(v.data(), n);
        CHECK((n == 0 || std::memcmp(v.data(), statement.data(), n * sizeof(float)) == 0));  // (no null to memcmp)
      }
      hwy::SetSupportedTargetsForTest(0);
    }
}

TEST_CASE("scale_floats_pow2 and scale_floats: the statements against fp64, every target against them") {
  ResetTargets reset;
  const float pow2s[] = {0x1p-126f, 0x1p-20f, 0.5f, 1.0f, 0x1p7f, 0x1p126f};
  const float others[] = {3.0f, 0.1f, -7.25f, 1e30f};
  for (size_t n : kLengths)
    for (uint64_t seed : {4u, 5u}) {
      CAPTURE(n);
      std::vector<float> x(n);
      for (size_t i = 0; i < n; ++i) x[i] = edge_value(seed, i);
      for (float m : pow2s) {
        CAPTURE(m);
        const float inv = static_cast<float>(1.0 / m);
        // The statement: each product the float nearest the exact (fp64) product; exact when that is
        // a float (NaN inputs counted as exact).
        std::vector<float> want(n);
        bool exact = true;
        for (size_t i = 0; i < n; ++i) {
          const double p = static_cast<double>(x[i]) * m;  // exact in fp64
          want[i] = static_cast<float>(p);
          exact = exact && (static_cast<double>(want[i]) == p || std::isnan(x[i]));
        }
        std::vector<float> got(n, 7.0f);
        CHECK(scale_floats_pow2_scalar(x.data(), got.data(), n, m, inv) == exact);
        CHECK(same_bits(got, want));
        for (int64_t target : float_rows_targets()) {
          hwy::SetSupportedTargetsForTest(target);
          CAPTURE(hwy::TargetName(target));
          std::vector<float> simd(n, 7.0f);
          CHECK(scale_floats_pow2(x.data(), simd.data(), n, m, inv) == exact);
          CHECK(same_bits(simd, want));
        }
        hwy::SetSupportedTargetsForTest(0);
      }
      for (float m : others) {
        CAPTURE(m);
        // The statement: one IEEE float multiply each (fp64 product rounded once to float: the
        // product of two floats is exact in fp64); flagged: a NaN input or a finite input whose
        // product is infinite.
        std::vector<float> want(n);
        bool flagged = false;
        for (size_t i = 0; i < n; ++i) {
          want[i] = static_cast<float>(static_cast<double>(x[i]) * m);
          flagged = flagged || std::isnan(x[i]) || (std::isinf(want[i]) && std::isfinite(x[i]));
        }
        std::vector<float> got(n, 7.0f);
        CHECK(scale_floats_scalar(x.data(), got.data(), n, m) == flagged);
        CHECK(same_bits(got, want));
        for (int64_t target : float_rows_targets()) {
          hwy::SetSupportedTargetsForTest(target);
          CAPTURE(hwy::TargetName(target));
          std::vector<float> simd(n, 7.0f);
          CHECK(scale_floats(x.data(), simd.data(), n, m) == flagged);
          CHECK(same_bits(simd, want));
        }
        hwy::SetSupportedTargetsForTest(0);
      }
    }
}

TEST_CASE("float_column_counts: the statement against <cmath>, every target against the statement") {
  ResetTargets reset;
  const size_t pad = 5;  // row stride n + pad: the padding must not be read into any column
  for (size_t n : kLengths)
    for (size_t h : {size_t{1}, size_t{16}, size_t{32}}) {
      CAPTURE(n);
      CAPTURE(h);
      const size_t ld = n + pad;
      std::vector<float> x(h * ld);
      for (size_t i = 0; i < x.size(); ++i) x[i] = (i % ld < n) ? edge_value(6, i) : std::numeric_limits<float>::quiet_NaN();
      std::vector<float> amax(n);
      std::vector<uint32_t> bad(n);
      for (size_t j = 0; j < n; ++j)
        for (size_t t = 0; t < h; ++t) {
          const float v = x[t * ld + j];
          if (!std::isfinite(v)) ++bad[j];
          else amax[j] = std::max(amax[j], std::fabs(v));
        }
      std::vector<float> s_amax(n, 7.0f);
      std::vector<uint32_t> s_bad(n, 7);
      float_column_counts_scalar(x.data(), ld, h, n, s_amax.data(), s_bad.data());
      CHECK(same_bits(s_amax, amax));
      CHECK(s_bad == bad);
      for (int64_t target : float_rows_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(hwy::TargetName(target));
        std::vector<float> v_amax(n, 7.0f);
        std::vector<uint32_t> v_bad(n, 7);
        float_column_counts(x.data(), ld, h, n, v_amax.data(), v_bad.data());
        CHECK(same_bits(v_amax, s_amax));
        CHECK(v_bad == s_bad);
      }
      hwy::SetSupportedTargetsForTest(0);
    }
}

TEST_CASE("scale_floats_pow2_each: the statement against fp64, every target against it") {
  ResetTargets reset;
  const float pow2s[] = {0x1p-126f, 0x1p-20f, 0.5f, 1.0f, 0x1p7f, 0x1p126f};
  for (size_t n : kLengths)
    for (uint64_t seed : {7u, 8u}) {
      CAPTURE(n);
      std::vector<float> x(n), mult(n), inv(n);
      for (size_t i = 0; i < n; ++i) {
        x[i] = edge_value(seed, i);
        mult[i] = pow2s[random_u32(seed, 13, i) % 6];
        inv[i] = static_cast<float>(1.0 / mult[i]);
      }
      // Each product the float nearest the exact (fp64) product; exact when that is a float.
      std::vector<float> want(n);
      bool exact = true;
      for (size_t i = 0; i < n; ++i) {
        const double p = static_cast<double>(x[i]) * mult[i];
        want[i] = static_cast<float>(p);
        exact = exact && (static_cast<double>(want[i]) == p || std::isnan(x[i]));
      }
      std::vector<float> got(n, 7.0f);
      CHECK(scale_floats_pow2_each_scalar(x.data(), got.data(), n, mult.data(), inv.data()) == exact);
      CHECK(same_bits(got, want));
      // And a row whose products are all exact: multiples of 1/8 below 2^7 in magnitude, times
      // 2^-20 .. 2^7, stay normal floats with at most 10 significant bits.
      std::vector<float> tame(n), tame_mult(n), tame_inv(n), tame_want(n);
      for (size_t i = 0; i < n; ++i) {
        tame[i] = static_cast<float>(static_cast<int>(random_u32(seed, 14, i) % 2001) - 1000) * 0.125f;
        tame_mult[i] = pow2s[1 + random_u32(seed, 15, i) % 4];
        tame_inv[i] = static_cast<float>(1.0 / tame_mult[i]);
        tame_want[i] = static_cast<float>(static_cast<double>(tame[i]) * tame_mult[i]);
      }
      for (int64_t target : float_rows_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(hwy::TargetName(target));
        std::vector<float> simd(n, 7.0f);
        CHECK(scale_floats_pow2_each(x.data(), simd.data(), n, mult.data(), inv.data()) == exact);
        CHECK(same_bits(simd, want));
        std::vector<float> simd_tame(n, 7.0f);
        CHECK(scale_floats_pow2_each(tame.data(), simd_tame.data(), n, tame_mult.data(), tame_inv.data()));
        CHECK(same_bits(simd_tame, tame_want));
      }
      hwy::SetSupportedTargetsForTest(0);
    }
}

}  // namespace drift::test_float_rows
