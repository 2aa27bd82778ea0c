// drift's double tanh (src/arith/tanh_f64.h): the SIMD span against its scalar twin, bit for bit, on
// every Highway target compiled in that this CPU runs (targets without fused multiply-adds run the
// twin itself); accuracy against an independent reference (long double tanhl, 64-bit significand);
// exact oddness; special values.
//
// Against glibc (2.36, Debian bookworm, x86-64 with FMA: tanh over __expm1_fma): a throwaway
// program, 2026-12, compared 500 million inputs (exponents 2^-60 to 2^6 evenly, uniform on [0, 24)
// and [0, 2), and raw 64-bit encodings, both signs) with std::tanh: the same bits in every case.
// tests/data/tanh_f64_glibc_fma.txt keeps 2,000 of glibc's answers from that machine, chosen where
// the placement of the fused multiply-adds decides the result, and the test below replays them (a
// test cannot call std::tanh for this: which expm1 glibc runs depends on the CPU, which is why drift
// has its own).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "arith/random.h"
#include "arith/tanh_f64.h"
#include "hwy/targets.h"

namespace drift::test_tanh_f64 {
namespace {

uint64_t bits(double x) {
  uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
double from_bits(uint64_t u) {
  double x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Inputs at and beside every boundary of the definition: the tiny, one and saturation bounds of
// tanh; the bounds of expm1's k = 0 and k = +-1 ranges (for y = -2|x|, so at half of them); every
// point where expm1's k changes for y = 2|x| (y * invln2 + 0.5 an integer, k = 3..64, which includes
// the 19/20 and 56/57 case bounds); zeros, subnormals, infinities, NaNs with payloads.
std::vector<double> special_values() {
  std::vector<double> centres = {0x1p-55, 1.0, 22.0, 0x1.62e43p-3, 0x1.0a2b2p-1, 0x1p-1022, 0x1p-1074, 0x1.fffffffffffffp+1023};
  for (int k = 3; k <= 64; ++k) centres.push_back((k - 0.5) * 0x1.62e42fefa39efp-1 / 2);
  std::vector<double> out;
  for (double c : centres)
    for (int step = -3; step <= 3; ++step) out.push_back(from_bits(bits(c) + static_cast<uint64_t>(step)));
  for (uint64_t u : {0x0ull, 0x7ff0000000000000ull, 0x7ff8000000000000ull, 0x7ff0000000000001ull, 0x7ffc000000001234ull})
    out.push_back(from_bits(u));
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) out.push_back(-out[i]);
  return out;
}

// Random significands in every binade from 2^-60 to 2^5 (where every case of the definition lives),
// then raw encodings spread over all 2^64 (huge values, NaNs, subnormals), both signs.
std::vector<double> swept_values() {
  std::vector<double> out;
  for (int e = -60; e <= 5; ++e)
    for (uint64_t i = 0; i < 20000; ++i) {
      const uint64_t mant = (uint64_t{random_u32(11, static_cast<uint64_t>(e + 100), i)} << 20) ^ random_u32(12, 7, i);
      const double m = 1.0 + static_cast<double>(mant & ((uint64_t{1} << 52) - 1)) * 0x1p-52;
      out.push_back((i & 1) ? -std::ldexp(m, e) : std::ldexp(m, e));
    }
  for (uint64_t i = 0; i < 200000; ++i)
    out.push_back(from_bits((uint64_t{random_u32(13, 1, i)} << 32) | random_u32(13, 2, i)));
  return out;
}

const std::vector<double>& test_values() {
  static const std::vector<double> values = [] {
    std::vector<double> v = special_values();
    const std::vector<double> s = swept_values();
    v.insert(v.end(), s.begin(), s.end());
    return v;
  }();
  return values;
}

struct TargetMock {
  ~TargetMock() { hwy::SetSupportedTargetsForTest(0); }
};

}  // namespace

TEST_CASE("tanh_f64_span equals tanh_f64 bit for bit on every SIMD target") {
  const std::vector<double>& x = test_values();
  std::vector<double> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = tanh_f64(x[i]);
  TargetMock mock;
  const std::vector<int64_t> targets = tanh_f64_targets();
  REQUIRE(!targets.empty());
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    CAPTURE(hwy::TargetName(target));
    // An odd length: the last partial vector goes through the padded tail.
    for (size_t len : {x.size(), size_t{13}}) {
      std::vector<double> got(len);
      tanh_f64_span(x.data(), got.data(), len);
      size_t bad = 0;
      for (size_t i = 0; i < len; ++i)
        if (bits(got[i]) != bits(want[i]) && bad++ < 5)
          FAIL_CHECK("x bits " << bits(x[i]) << " span " << bits(got[i]) << " twin " << bits(want[i]));
      CHECK(bad == 0);
    }
    // In place.
    std::vector<double> inplace(x.begin(), x.begin() + 1000);
    tanh_f64_span(inplace.data(), inplace.data(), inplace.size());
    for (size_t i = 0; i < inplace.size(); ++i) REQUIRE(bits(inplace[i]) == bits(want[i]));
  }
}

TEST_CASE("tanh_f64 gives glibc's FMA-build answers on the recorded witnesses, scalar and span") {
  std::ifstream in(DRIFT_SOURCE_DIR "/tests/data/tanh_f64_glibc_fma.txt");
  REQUIRE(in);
  std::vector<double> x, want;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    uint64_t xb = 0, yb = 0;
    fields >> std::hex >> xb >> yb;
    REQUIRE(fields);
    x.push_back(from_bits(xb));
    want.push_back(from_bits(yb));
  }
  REQUIRE(x.size() == 2000);
  std::vector<double> span(x.size());
  tanh_f64_span(x.data(), span.data(), x.size());
  size_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if ((bits(tanh_f64(x[i])) != bits(want[i]) || bits(span[i]) != bits(want[i])) && bad++ < 5)
      FAIL_CHECK("x bits " << bits(x[i]) << " glibc " << bits(want[i]) << " twin " << bits(tanh_f64(x[i]))
                           << " span " << bits(span[i]));
  CHECK(bad == 0);
}

// A broken algorithm (a wrong constant, a case misassigned) is off by far more than an ulp; this
// bounds the error against tanhl (x87, 64-bit significand, an independent implementation). glibc's
// manual lists 2 ulp for tanh, found on its own test inputs; on these inputs, where glibc and
// tanh_f64 give the same bits, the largest is 2.14 ulp (x = 0x1.d3ea828e952fep-3), so the bound is 2.5.
TEST_CASE("tanh_f64 is within 2.5 ulp of long double tanhl") {
  double worst = 0, worst_x = 0;
  for (double x : test_values()) {
    if (!std::isfinite(x)) continue;
    const long double ref = tanhl(static_cast<long double>(x));
    const double got = tanh_f64(x);
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(static_cast<double>(ref)), -1022) - 52);
    const double err = static_cast<double>(std::fabs(static_cast<long double>(got) - ref) / ulp);
    if (err > worst) {
      worst = err;
      worst_x = x;
    }
  }
  std::ostringstream where;
  where << std::hexfloat << worst_x;
  MESSAGE("largest error " << worst << " ulp, at x = " << where.str());
  CHECK(worst <= 2.5);
}

TEST_CASE("tanh_f64: odd, special values, and the saturated and tiny ranges") {
  for (double x : test_values()) {
    if (std::isnan(x)) continue;
    REQUIRE(bits(tanh_f64(-x)) == (bits(tanh_f64(x)) ^ 0x8000000000000000ull));
  }
  CHECK(bits(tanh_f64(0.0)) == bits(0.0));
  CHECK(bits(tanh_f64(-0.0)) == bits(-0.0));
  CHECK(tanh_f64(INFINITY) == 1.0);
  CHECK(tanh_f64(-INFINITY) == -1.0);
  // From 22 on the result is 1 (1 - tanh(22) < 2^-62, far below half an ulp of 1).
  CHECK(tanh_f64(22.0) == 1.0);
  CHECK(tanh_f64(-1e300) == -1.0);
  // Below 2^-55, tanh(x) = x - x^3/3 + ... rounds to x: (1 + x) * x = x.
  for (double x : {0x1p-56, 0x1.8p-60, 0x1p-1022, 0x1p-1074, -0x1p-70})
    CHECK(bits(tanh_f64(x)) == bits(x));
  // NaN: quieted, with its payload and sign.
  const double snan = from_bits(0xfff0000000000123ull);
  CHECK(bits(tanh_f64(snan)) == 0xfff8000000000123ull);
  std::vector<double> out(1);
  tanh_f64_span(&snan, out.data(), 1);
  CHECK(bits(out[0]) == 0xfff8000000000123ull);
  // Monotone across the branch at 1: tanh(1 - ulp) < tanh(1) < tanh(1 + ulp) (tanh' = 0.42 there, so
  // neighbouring inputs may round to the same output, never to a decreasing one).
  CHECK(tanh_f64(std::nextafter(1.0, 0.0)) <= tanh_f64(1.0));
  CHECK(tanh_f64(1.0) <= tanh_f64(std::nextafter(1.0, 2.0)));
}

}  // namespace drift::test_tanh_f64
