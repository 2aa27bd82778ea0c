// The matmul engine: fast path == literal reference bit for bit, determinism across thread counts,
// and hand-derived cases for each step of the two-level definition.
#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/exact_dot.h"
#include "arith/matmul.h"
#include "arith/random.h"
#include "arith/tc_presets.h"
#include "arith/tcverify.h"
#include "io/tc_vectors.h"
#include "hwy/targets.h"
#include "same_bits.h"
#include "scaled_policy.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_matmul {

using drift::testing::same_bits;
using drift::testing::scaled_policy;

using namespace drift;

namespace {

Format fmt(const char* name) { return *find_format(name); }

// Values of realistic spread with occasional zeros, huge and tiny magnitudes.
std::vector<double> random_matrix(size_t n, uint64_t seed, bool extremes) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 1, 2 * i), r1 = random_u32(seed, 1, 2 * i + 1);
    double x = (static_cast<double>(r0) / 4294967296.0 - 0.5) * 4.0;
    x = static_cast<float>(x * std::ldexp(1.0, static_cast<int>(r1 % 9) - 4));
    if (extremes) {
      switch (r1 >> 28) {
        case 0: x = 0.0; break;
        case 1: x = -0.0; break;
        case 2: x *= 1e30; break;
        case 3: x *= 1e-30; break;
        default: break;
      }
    }
    v[i] = x;
  }
  return v;
}

struct Shape {
  size_t m, k, n;
};

void check_fast_equals_reference(const MatmulPolicy& p, const Shape& s, uint64_t seed, bool ta, bool tb,
                                 bool extremes, bool expect_fast) {
  const auto a = random_matrix(s.m * s.k, seed, extremes);
  const auto b = random_matrix(s.k * s.n, seed + 1000, extremes);
  MatView av{a.data(), s.m, s.k, ta ? s.m : s.k, ta};
  MatView bv{b.data(), s.k, s.n, tb ? s.k : s.n, tb};
  std::vector<double> c_fast(s.m * s.n), c_ref(s.m * s.n);
  MatmulContext ctx;
  ctx.seed = seed;
  ctx.count_swamping = false;  // the plain kernel
  const auto t_plain = matmul(av, bv, c_fast.data(), s.n, p, ctx);
  std::vector<double> c_plain = c_fast;
  ctx.count_swamping = true;   // the counting kernel
  const auto t_fast = matmul(av, bv, c_fast.data(), s.n, p, ctx);
  CHECK(same_bits(c_plain, c_fast));
  // (The counting kernel may run where the plain one cannot and the reverse: only bits and
  // quantization counts must agree.)
  CHECK(t_plain.a.clipped == t_fast.a.clipped);
  CHECK(t_plain.b.clipped == t_fast.b.clipped);
  ctx.force_reference = true;
  const auto t_ref = matmul(av, bv, c_ref.data(), s.n, p, ctx);
  CHECK(!t_ref.fast_path);
  if (expect_fast) CHECK(t_fast.fast_path);
  CHECK(same_bits(c_fast, c_ref));
  CHECK(t_fast.a.clipped == t_ref.a.clipped);
  CHECK(t_fast.inner_adds == t_ref.inner_adds);
  CHECK(t_fast.outer_adds == t_ref.outer_adds);
  CHECK(t_fast.inner_swamped == t_ref.inner_swamped);
  CHECK(t_fast.outer_swamped == t_ref.outer_swamped);
}

}  // namespace

TEST_CASE("fast path equals the literal reference bit for bit") {
  const Shape shapes[] = {{1, 1, 1}, {1, 33, 1}, {3, 64, 3}, {5, 100, 7}, {17, 96, 33}, {4, 65, 1}, {1, 31, 40}, {9, 0, 4}};
  struct Named {
    const char* name;
    MatmulPolicy p;
    bool fast;
  };
  std::vector<Named> policies;
  policies.push_back({"fp32 passthrough", MatmulPolicy{}, true});
  {
    MatmulPolicy p;
    p.a.format = p.b.format = fmt("fp8_e4m3");
    policies.push_back({"fp8_e4m3 operands, fp32 sequential", p, true});
  }
  policies.push_back({"mxfp8_e4m3", scaled_policy("fp8_e4m3", ScaleKind::block, 32), true});
  policies.push_back({"mxfp4", scaled_policy("fp4_e2m1", ScaleKind::block, 32), true});
  policies.push_back({"nvfp4", scaled_policy("fp4_e2m1", ScaleKind::nvfp4, 16), true});
  policies.push_back({"tensor e4m3", scaled_policy("fp8_e4m3", ScaleKind::tensor, 0), true});
  policies.push_back({"tile e4m3", scaled_policy("fp8_e4m3", ScaleKind::tile, 128), true});
  {
    MatmulPolicy p = scaled_policy("fp8_e4m3", ScaleKind::block, 32);
    p.b.scaling.two_d = true;
    p.out_format = fmt("bf16");
    policies.push_back({"mxfp8 2-D weights, bf16 output", p, true});
  }
  {
    MatmulPolicy p;
    p.a.format = p.b.format = fmt("bf16");
    p.inner.promote_every = 16;
    policies.push_back({"bf16 operands, promote every 16", p, true});
  }
  {
    MatmulPolicy p;
    p.inner.format = fmt("bf16");
    policies.push_back({"bf16 accumulation (reference only)", p, false});
  }
  for (const auto& np : policies) {
    for (size_t si = 0; si < std::size(shapes); ++si) {
      for (int t = 0; t < 4; ++t) {
        const std::string policy_name = np.name;
        CAPTURE(policy_name);
        CAPTURE(si);
        CAPTURE(t);
        check_fast_equals_reference(np.p, shapes[si], 11 * si + t, t & 1, t & 2, false,
                                    np.fast && shapes[si].k > 0);
        check_fast_equals_reference(np.p, shapes[si], 101 * si + t, t & 1, t & 2, true, false);
      }
    }
  }
}

TEST_CASE("results do not depend on the number of threads") {
  const Shape s{37, 130, 29};
  const auto a = random_matrix(s.m * s.k, 5, false);
  const auto b = random_matrix(s.k * s.n, 6, false);
  MatView av{a.data(), s.m, s.k, s.k, false};
  MatView bv{b.data(), s.k, s.n, s.n, false};
  std::vector<MatmulPolicy> policies{MatmulPolicy{}, scaled_policy("fp8_e4m3", ScaleKind::block, 32)};
  MatmulPolicy sr;
  sr.inner.format = fmt("bf16");
  sr.inner.round.mode = Rounding::sr;
  sr.inner.order = SumOrder::pairwise;
  policies.push_back(sr);
  for (const auto& p : policies) {
    std::vector<std::vector<double>> results;
    for (int threads : {1, 2, 4}) {
      omp_set_num_threads(threads);
      std::vector<double> c(s.m * s.n);
      MatmulContext ctx;
      ctx.seed = 9;
      matmul(av, bv, c.data(), s.n, p, ctx);
      results.push_back(c);
    }
    omp_set_num_threads(omp_get_num_procs());
    CHECK(same_bits(results[0], results[1]));
    CHECK(same_bits(results[0], results[2]));
  }
}

TEST_CASE("hand-derived: fp16 accumulation swamps small addends; pairwise does not") {
  // 1 + 2^-11 * 2048 terms: with sequential fp16 rne every 2^-11 is half an ulp of 1 (ulp(1) = 2^-10),
  // a tie that rounds to even (1.0), so the sum stays at 1 and 2048 adds swamp. Pairwise adds the small
  // terms among themselves first: they sum exactly to 1, and 1 + 1 = 2.
  const size_t k = 2049;
  std::vector<double> a(k, 1.0), b(k, std::ldexp(1.0, -11));
  b[0] = 1.0;
  MatView av{a.data(), 1, k, k, false};
  MatView bv{b.data(), k, 1, 1, false};
  MatmulPolicy p;
  p.inner.format = fmt("fp16");
  double c = 0;
  MatmulContext ctx;
  auto tel = matmul(av, bv, &c, 1, p, ctx);
  CHECK(c == 1.0);
  CHECK(tel.inner_swamped == 2048);
  p.inner.order = SumOrder::pairwise;
  matmul(av, bv, &c, 1, p, ctx);
  // Pairwise splits [0, 2049) into [0, 1024) and [1024, 2049). The right half is 1025 * 2^-11, every
  // partial sum a multiple of 2^-11 below 1: exact. On the left, the leaf pair 1 + 2^-11 ties and
  // rounds to 1, after which every partial sum 1 + (2^r - 2) * 2^-11 is a multiple of ulp(1) = 2^-10:
  // exact, so the left half is 1 + 1022 * 2^-11. Total 1 + 2047 * 2^-11 = 1 + 1023.5 ulp: a tie between
  // 1 + 1023 * 2^-10 (odd) and 2 (even) -> 2, which is also the exact sum.
  CHECK(c == 2.0);
}

TEST_CASE("hand-derived: MX floor rule clips a block of 0.99 to 0.875") {
  // amax 0.99: floor(log2 0.99) = -1, minus emax(e4m3) = 8 -> scale 2^-9; 0.99 * 2^9 = 506.88 > 448
  // saturates to 448 -> 448 * 2^-9 = 0.875. With rceil: fp32(0.99 * fp32(1/448)) rounded up to a power of
  // two is 2^-8 (0.99/448 ~ 2^-8.82), so 0.99 * 2^8 = 253.44 -> 256 (e4m3 step 32 at [256,448]... 253.44
  // lies in [128,256) with step 16: neighbours 240 and 256, nearer 256) -> 256 * 2^-8 = 1.0.
  std::vector<double> x(32, 0.99);
  Quantizer q;
  q.format = fmt("fp8_e4m3");
  q.scaling.kind = ScaleKind::block;
  auto out = quantize(x.data(), 1, 32, 32, q, 0, 0);
  for (size_t i = 0; i < 32; ++i) CHECK(out.dequant(0, i) == 0.875);
  CHECK(out.stats.clipped == 32);
  q.scaling.rule = ExpRule::rceil;
  out = quantize(x.data(), 1, 32, 32, q, 0, 0);
  for (size_t i = 0; i < 32; ++i) CHECK(out.dequant(0, i) == 1.0);
  CHECK(out.stats.clipped == 0);
}

TEST_CASE("hand-derived: shared exponent rules from exponent bits") {
  const Format e4m3 = fmt("fp8_e4m3");  // emax 8, max 448
  // Just below a power of two: a float log2 would round 2^-0.0000001 up to 0; the bits say -1.
  const double below_one = std::nextafter(1.0, 0.0);
  CHECK(mx_scale_exponent(below_one, e4m3, ExpRule::floor) == -1 - 8);
  CHECK(mx_scale_exponent(1.0, e4m3, ExpRule::floor) == -8);
  CHECK(mx_scale_exponent(1.0, e4m3, ExpRule::ceil) == -8);
  CHECK(mx_scale_exponent(1.5, e4m3, ExpRule::ceil) == -7);
  // even: 1.9999 rounded to 3 mantissa bits is 2.0 -> floor(log2) = 1 -> 1 - 8.
  CHECK(mx_scale_exponent(1.9999, e4m3, ExpRule::even) == 1 - 8);
  CHECK(mx_scale_exponent(1.9999, e4m3, ExpRule::floor) == -8);
  // rceil: fp32(1/448) = 2^-9 * (1 + 1198373 * 2^-23), above 1/448 by a relative 4.5e-8 (the 23-bit
  // fraction 0.142857.. * 2^23 = 1198372.57 rounds up); 448 * that = 1 + 4.5e-8 < 1 + 2^-24, so fp32
  // rounds the product to exactly 1 and ceil(log2 1) = 0. For 449 the product is ~1.0022 -> 1.
  CHECK(mx_scale_exponent(448.0, e4m3, ExpRule::rceil) == 0);
  CHECK(mx_scale_exponent(449.0, e4m3, ExpRule::rceil) == 1);
}

// ---- The narrow-accumulator fast kernel (bf16/fp16 inner sums rounded at every add) ----

namespace {

// Values on f's grid: random sign, leading-bit exponent uniform in [emin, emax], random fraction
// bits; about one in eight a zero of either sign. Subnormal exponents give f's subnormals.
std::vector<double> grid_matrix(size_t n, uint64_t seed, const Format& f, int emin, int emax) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 3, 2 * i), r1 = random_u32(seed, 3, 2 * i + 1);
    if ((r0 & 7) == 0) {
      v[i] = (r0 & 8) ? -0.0 : 0.0;
      continue;
    }
    const int e = emin + static_cast<int>(r1 % static_cast<uint32_t>(emax - emin + 1));
    const int frac_bits = e >= f.emin ? f.man_bits : f.man_bits - (f.emin - e);  // subnormal: fewer bits
    const uint64_t frac = frac_bits > 0 ? (r0 >> 4) & ((uint64_t{1} << frac_bits) - 1) : 0;
    double x = std::ldexp(1.0 + std::ldexp(static_cast<double>(frac), -std::max(frac_bits, 0)), e);
    v[i] = (r0 & 8) ? -x : x;
  }
  return v;
}

// Small integers in [-range, range]: sums quickly leave the narrow format's exact integers, so
// ties (half an ulp exactly) are frequent.
std::vector<double> small_int_matrix(size_t n, uint64_t seed, int range) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<double>(static_cast<int>(random_u32(seed, 4, i) % static_cast<uint32_t>(2 * range + 1)) - range);
  return v;
}

// A preset's fused model over operands of format `in` (IEEE overflow: the fast path's own range
// checks decide, as the reference's rules).
MatmulPolicy fused_policy(const TcPreset& tp, const Format& in) {
  MatmulPolicy p;
  p.a.format = p.b.format = in;
  p.a.round.overflow = p.b.round.overflow = Overflow::ieee;
  p.inner.fused = tp.model;
  return p;
}

struct TargetMock {
  ~TargetMock() { hwy::SetSupportedTargetsForTest(0); }
};

// Fast (plain and counting kernels) == reference, bits and telemetry, on every compiled SIMD target.
// expect_fast: 1 the fast path must be taken, 0 it must not, -1 either (data that may overflow).
void check_fast_case(const MatmulPolicy& p, const std::vector<double>& a, const std::vector<double>& b,
                       const Shape& s, int expect_fast, const std::string& what) {
  MatView av{a.data(), s.m, s.k, s.k, false};
  MatView bv{b.data(), s.k, s.n, s.n, false};
  std::vector<double> c_ref(s.m * s.n);
  MatmulContext ctx;
  ctx.force_reference = true;
  const auto t_ref = matmul(av, bv, c_ref.data(), s.n, p, ctx);
  ctx.force_reference = false;
  TargetMock mock;
  for (int64_t target : matmul_fast_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string tname = hwy::TargetName(target);
    CAPTURE(what);
    CAPTURE(tname);
    REQUIRE(std::string(matmul_fast_target_name()) == tname);
    for (bool count : {false, true}) {
      CAPTURE(count);
      ctx.count_swamping = count;
      std::vector<double> c(s.m * s.n);
      const auto t = matmul(av, bv, c.data(), s.n, p, ctx);
      if (expect_fast >= 0) CHECK(t.fast_path == (expect_fast == 1));
      CHECK(same_bits(c, c_ref));
      CHECK(t.inner_adds == t_ref.inner_adds);
      CHECK(t.outer_adds == t_ref.outer_adds);
      if (count) {
        CHECK(t.inner_swamped == t_ref.inner_swamped);
        CHECK(t.outer_swamped == t_ref.outer_swamped);
      }
    }
  }
}

MatmulPolicy narrow_policy(const char* operands, const char* acc, Rounding mode) {
  MatmulPolicy p;
  p.a.format = p.b.format = fmt(operands);
  p.a.round.overflow = p.b.round.overflow = Overflow::ieee;
  p.inner.format = fmt(acc);
  p.inner.round.mode = mode;
  return p;
}

}  // namespace

TEST_CASE("narrow accumulators: fast kernel == reference (bf16/fp16, rne/rtz, random, ties, extremes)") {
  const Shape shapes[] = {{1, 1, 1}, {3, 64, 3}, {5, 100, 7}, {17, 96, 33}, {7, 513, 40}, {13, 37, 70}};
  for (Rounding mode : {Rounding::rne, Rounding::rtz}) {
    for (const char* acc : {"bf16", "fp16"}) {
      const std::string mode_name = mode == Rounding::rne ? "rne" : "rtz";
      for (size_t si = 0; si < std::size(shapes); ++si) {
        const Shape& s = shapes[si];
        const std::string base = std::string(acc) + " " + mode_name + " shape " + std::to_string(si);
        // Operands of the accumulator's own format, ordinary magnitudes.
        MatmulPolicy p = narrow_policy(acc, acc, mode);
        check_fast_case(p, grid_matrix(s.m * s.k, 10 + si, p.a.format, -6, 3),
                          grid_matrix(s.k * s.n, 20 + si, p.b.format, -6, 3), s, true, base + " ordinary");
        // Ties: small integers, sums beyond the exact integers of the format.
        check_fast_case(p, small_int_matrix(s.m * s.k, 30 + si, 40), small_int_matrix(s.k * s.n, 40 + si, 40), s,
                          true, base + " ties");
        // Extremes: exponents over the whole range where products stay exact in fp32: subnormal sums,
        // overflow (ieee: inf, then the reference; rtz: max finite), flushing.
        const Format f = fmt(acc);
        const int lo = std::string(acc) == "bf16" ? -67 : f.emin - f.man_bits;
        const int hi = std::string(acc) == "bf16" ? 63 : f.emax;
        const auto xa = grid_matrix(s.m * s.k, 50 + si, f, lo, hi), xb = grid_matrix(s.k * s.n, 60 + si, f, lo, hi);
        const auto ta = grid_matrix(s.m * s.k, 70 + si, f, lo, (lo + hi) / 2 - 4);
        const auto tb = grid_matrix(s.k * s.n, 80 + si, f, lo, (lo + hi) / 2 - 4);
        check_fast_case(p, xa, xb, s, -1, base + " extremes (may overflow)");
        p.inner.round.overflow = Overflow::saturate;
        check_fast_case(p, xa, xb, s, true, base + " extremes, saturating");
        check_fast_case(p, ta, tb, s, true, base + " tiny, saturating");
        p.inner.round.subnormals = Subnormals::flush;
        check_fast_case(p, ta, tb, s, true, base + " tiny, flushing");
        p.inner.round.subnormals = Subnormals::keep;
        // Reverse order, fp8 operands into an fp16 accumulator, mxfp8 block scales.
        p = narrow_policy("fp8_e4m3", acc, mode);
        p.inner.order = SumOrder::reverse;
        check_fast_case(p, grid_matrix(s.m * s.k, 90 + si, p.a.format, -9, 3),
                          grid_matrix(s.k * s.n, 100 + si, p.b.format, -9, 3), s, true, base + " fp8 reverse");
        p = scaled_policy("fp8_e4m3", ScaleKind::block, 32);
        p.inner.format = fmt(acc);
        p.inner.round.mode = mode;
        // (MX elements reach 448, their products 2^17: an fp16 sum overflows, and the reference decides.)
        check_fast_case(p, random_matrix(s.m * s.k, 110 + si, false), random_matrix(s.k * s.n, 120 + si, false), s,
                        std::string(acc) == "bf16" ? 1 : -1, base + " mxfp8");
        // The naive narrow dot product (cuBLAS COMPUTE_16F, the fp16_acc / bf16_acc presets): outer sum
        // and output in the narrow format too (one block: the outer sum is one scalar add).
        p = narrow_policy(acc, acc, mode);
        p.outer.format = p.out_format = fmt(acc);
        p.outer.round.mode = mode;
        check_fast_case(p, xa, xb, s, -1, base + " narrow outer and output");
        check_fast_case(p, ta, tb, s, 1, base + " narrow outer and output, tiny");
        // Stochastic output rounding draws the same words on both paths.
        p = narrow_policy(acc, acc, mode);
        p.out_format = fmt("fp8_e4m3");
        p.out_round.mode = Rounding::sr;
        check_fast_case(p, grid_matrix(s.m * s.k, 150 + si, p.a.format, -6, 3),
                        grid_matrix(s.k * s.n, 160 + si, p.b.format, -6, 3), s, 1, base + " sr output");
        p = narrow_policy(acc, acc, mode);
        p.inner.promote_every = 16;
        p.out_format = fmt("bf16");
        check_fast_case(p, grid_matrix(s.m * s.k, 130 + si, p.a.format, -6, 3),
                          grid_matrix(s.k * s.n, 140 + si, p.b.format, -6, 3), s, true, base + " promote 16, bf16 out");
      }
    }
  }
}

TEST_CASE("hand-derived: fp16 operands into an fp16 accumulator swamp in the fast kernel as in the reference") {
  // As the fp16 swamping case above, with fp16 operands (products exact in fp32): 1 + 2^-11 is a tie
  // that rounds to even (1), 2048 times.
  const size_t k = 2049;
  std::vector<double> a(k, 1.0), b(k, std::ldexp(1.0, -11));
  b[0] = 1.0;
  MatView av{a.data(), 1, k, k, false};
  MatView bv{b.data(), k, 1, 1, false};
  MatmulPolicy p = narrow_policy("fp16", "fp16", Rounding::rne);
  double c = 0;
  MatmulContext ctx;
  ctx.count_swamping = true;
  auto tel = matmul(av, bv, &c, 1, p, ctx);
  CHECK(tel.fast_path);
  CHECK(c == 1.0);
  CHECK(tel.inner_swamped == 2048);
  // rtz: 1 + 2^-11 truncates to 1 as well; with the small terms first (reverse order) they add exactly
  // (every partial sum a multiple of 2^-11 below 1, exact in fp16), 2048 * 2^-11 = 1, and 1 + 1 = 2.
  p.inner.round.mode = Rounding::rtz;
  tel = matmul(av, bv, &c, 1, p, ctx);
  CHECK(tel.fast_path);
  CHECK(c == 1.0);
  p.inner.order = SumOrder::reverse;
  tel = matmul(av, bv, &c, 1, p, ctx);
  CHECK(tel.fast_path);
  CHECK(c == 2.0);
  CHECK(tel.inner_swamped == 0);
}

TEST_CASE("hand-derived: bf16 accumulator ties in the fast kernel") {
  // bf16 keeps 8 significant bits: in [256, 512) the spacing is 2. 258 = 256 + 2 has an odd last
  // bit, 260 an even one. Sum 258 + 1 + 1 in order:
  //   rne: 259 ties between 258 (odd) and 260 (even) -> 260; 261 ties between 260 (even) and 262 -> 260.
  //   rtz: 259 -> 258; 259 -> 258.
  const std::vector<double> a{1.0, 1.0, 1.0}, b{258.0, 1.0, 1.0};
  MatView av{a.data(), 1, 3, 3, false};
  MatView bv{b.data(), 3, 1, 1, false};
  MatmulContext ctx;
  ctx.count_swamping = true;
  double c = 0;
  MatmulPolicy p = narrow_policy("bf16", "bf16", Rounding::rne);
  auto tel = matmul(av, bv, &c, 1, p, ctx);
  CHECK(tel.fast_path);
  CHECK(c == 260.0);
  CHECK(tel.inner_swamped == 1);  // only the last add returned its first operand
  p.inner.round.mode = Rounding::rtz;
  tel = matmul(av, bv, &c, 1, p, ctx);
  CHECK(tel.fast_path);
  CHECK(c == 258.0);
  CHECK(tel.inner_swamped == 2);
  // Overflow: bf16 max is (2 - 2^-7) * 2^127. Two of them: rne -> inf (IEEE accumulator), the call
  // goes to the reference; rtz -> max finite, computed by the fast kernel's scalar lanes.
  const double big = std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
  const std::vector<double> one{1.0, 1.0}, bigs{big, big};
  MatView ov{one.data(), 1, 2, 2, false};
  MatView bigv{bigs.data(), 2, 1, 1, false};
  tel = matmul(ov, bigv, &c, 1, p, ctx);
  CHECK(tel.fast_path);
  CHECK(c == big);
  p.inner.round.mode = Rounding::rne;
  tel = matmul(ov, bigv, &c, 1, p, ctx);
  CHECK(!tel.fast_path);
  CHECK(std::isinf(c));
}

TEST_CASE("fused tensor-core models: fast kernel == reference for every preset (random, tiny, huge, scaled)") {
  // K values cut groups, interleaved blocks and promotion segments short; N not a multiple of the width.
  // 13 rows: two full row tiles (the kernel takes rows in pairs) and a last odd row; K = 200: several
  // groups and, under promotion every 64, several chains.
  const Shape shapes[] = {{1, 1, 1}, {3, 37, 5}, {7, 100, 19}, {6, 129, 33}, {2, 300, 3}, {13, 200, 70}};
  for (const TcPreset& tp : tc_presets()) {
    const std::string name = tp.name;
    CAPTURE(name);
    const Format& f = tp.in_format;
    const MatmulPolicy p = fused_policy(tp, f);
    // Exponent ranges: ordinary, the whole input range (subnormal inputs, results that overflow the
    // fp16 output), tiny (results below the output's smallest normal).
    const int lo = std::max(f.emin - f.man_bits, -60), hi = std::min(f.emax, 40);
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      const std::string base = name + " shape " + std::to_string(si);
      check_fast_case(p, grid_matrix(s.m * s.k, 200 + si, f, -4, 3), grid_matrix(s.k * s.n, 210 + si, f, -4, 3), s, 1,
                      base + " ordinary");
      check_fast_case(p, grid_matrix(s.m * s.k, 220 + si, f, lo, hi), grid_matrix(s.k * s.n, 230 + si, f, lo, hi), s,
                      -1, base + " whole range");
      check_fast_case(p, grid_matrix(s.m * s.k, 240 + si, f, lo, lo + 6), grid_matrix(s.k * s.n, 250 + si, f, lo, 2), s,
                      1, base + " tiny");
      check_fast_case(p, small_int_matrix(s.m * s.k, 260 + si, 7), small_int_matrix(s.k * s.n, 270 + si, 7), s, 1,
                      base + " small integers");
      MatmulPolicy q = p;
      // K-blocks of 40 (a partial last block in most shapes) into the fp32 outer sum: for the models
      // with fp32 output the fast path runs them as the model's own promotion chains in one block.
      q.inner.promote_every = 40;
      check_fast_case(q, grid_matrix(s.m * s.k, 320 + si, f, -4, 3), grid_matrix(s.k * s.n, 330 + si, f, -4, 3), s, 1,
                      base + " promote 40");
      check_fast_case(q, grid_matrix(s.m * s.k, 340 + si, f, lo, hi), grid_matrix(s.k * s.n, 350 + si, f, lo, hi), s,
                      -1, base + " promote 40, whole range");
      q.inner.promote_every = 64;  // K-blocks of 64 into the fp32 outer sum
      q.out_format = fmt("bf16");
      check_fast_case(q, grid_matrix(s.m * s.k, 280 + si, f, -4, 3), grid_matrix(s.k * s.n, 290 + si, f, -4, 3), s, 1,
                      base + " promote 64, bf16 out");
      if (f.man_bits == 3 || f.man_bits == 2) {  // fp8 inputs: MX block scales around the model
        q = p;
        q.a.scaling.kind = q.b.scaling.kind = ScaleKind::block;
        q.a.round.overflow = q.b.round.overflow = Overflow::saturate;  // MX: clipped elements saturate
        // (fp16 outputs overflow on products of 448-sized MX elements: then the reference decides.)
        check_fast_case(q, random_matrix(s.m * s.k, 300 + si, false), random_matrix(s.k * s.n, 310 + si, false), s,
                        tp.output == "fp16" ? -1 : 1, base + " mx block scales");
      }
    }
  }
}

TEST_CASE("fused models beyond the integer route: fast kernel == reference (double lanes)") {
  // The integer route (every preset) needs products exact in float and cut terms below 2^31. Past
  // it, the kernel cuts each product in double lanes: fp32 inputs (48-bit products) under the H100
  // FP8 model, and bf16 inputs under the H100 bf16 model with 30 kept bits (cut terms up to 2^32).
  struct Case {
    const char* preset;
    const char* input;
    int kept_bits;
  };
  const Case cases[] = {{"h100_fp8_e4m3", "fp32", 13}, {"h100_bf16", "bf16", 30}};
  const Shape shapes[] = {{3, 37, 5}, {13, 200, 70}};
  for (const Case& c : cases) {
    TcPreset tp = *find_tc_preset(c.preset);
    tp.model.kept_bits = c.kept_bits;
    const Format f = fmt(c.input);
    const MatmulPolicy p = fused_policy(tp, f);
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      const std::string base = std::string(c.preset) + " on " + c.input + " shape " + std::to_string(si);
      check_fast_case(p, grid_matrix(s.m * s.k, 400 + si, f, -4, 3), grid_matrix(s.k * s.n, 410 + si, f, -4, 3), s, 1,
                      base + " ordinary");
      check_fast_case(p, small_int_matrix(s.m * s.k, 420 + si, 7), small_int_matrix(s.k * s.n, 430 + si, 7), s, 1,
                      base + " small integers");
      check_fast_case(p, grid_matrix(s.m * s.k, 440 + si, f, -40, 30), grid_matrix(s.k * s.n, 450 + si, f, -40, 30), s,
                      -1, base + " wide");
    }
  }
}

TEST_CASE("fused models writing fewer fraction bits: fast kernel == reference") {
  // The FP8 presets write 13 fraction bits toward zero, which the kernel does by clearing the bits of
  // a sum it converted toward zero. Models a user can write take that form with other counts (a
  // bf16-like 7, fp16's 10 in fp32's range, 1), and to nearest even they must not: each on ordinary,
  // wide (some lanes for the core) and small-integer data, every result the reference's.
  struct Case {
    const char* preset;
    const char* input;
    int out_man_bits;
    Rounding rounding;
  };
  const Case cases[] = {{"h100_bf16", "bf16", 7, Rounding::rtz},
                        {"a100_fp16", "fp16", 10, Rounding::rtz},
                        {"v100_fp16", "fp16", 1, Rounding::rtz},
                        {"h100_fp8_e4m3", "fp8_e4m3", 13, Rounding::rne},
                        {"l40s_fp16", "fp16", 7, Rounding::rne}};
  const Shape shapes[] = {{3, 37, 5}, {13, 200, 70}};
  for (const Case& c : cases) {
    TcPreset tp = *find_tc_preset(c.preset);
    tp.model.out_man_bits = c.out_man_bits;
    tp.model.final_rounding = c.rounding;
    const Format f = fmt(c.input);
    const MatmulPolicy p = fused_policy(tp, f);
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      const std::string base = std::string(c.preset) + " writing " + std::to_string(c.out_man_bits) + " bits, shape " +
                               std::to_string(si);
      const int lo = std::max(f.emin, -20), hi = std::min(f.emax, 20);
      check_fast_case(p, grid_matrix(s.m * s.k, 460 + si, f, -4, 3), grid_matrix(s.k * s.n, 470 + si, f, -4, 3), s, 1,
                      base + " ordinary");
      check_fast_case(p, small_int_matrix(s.m * s.k, 480 + si, 7), small_int_matrix(s.k * s.n, 490 + si, 7), s, 1,
                      base + " small integers");
      check_fast_case(p, grid_matrix(s.m * s.k, 500 + si, f, lo, hi), grid_matrix(s.k * s.n, 510 + si, f, lo, hi), s,
                      -1, base + " wide");
    }
  }
}

// One measured case as the matmul engine sees it: positions [0, lead) of a row of A (and of B's
// column) give the case's addend c, positions [lead, lead + K) its a and b. The engine starts each
// dot product from 0, so c is made by a leading group of its own: c cut into pieces of at most 8
// significant bits, each the product of an integer below 256 (scaled where need be) and a power of
// two, both normal values of the input format, whose fused sum is c exactly under the model (checked
// with the scalar core; false where it is not, and for c = -0).
bool lead_group_for(double c, const TcPreset& tp, size_t lead, std::vector<double>& a, std::vector<double>& b) {
  a.assign(lead, 0.0);
  b.assign(lead, 0.0);
  if (c == 0) return !std::signbit(c);  // (+0: the engine's own start; -0 cannot be made by a sum)
  const int e = std::ilogb(c);
  double rest = c;
  for (size_t piece = 0; piece < 3 && rest != 0; ++piece) {
    const double unit = std::ldexp(1.0, e - 7 - 8 * static_cast<int>(piece));
    const double top = std::trunc(rest / unit) * unit;  // (exact: power-of-two scaling, truncation)
    const double y = std::max(unit, tp.in_format.min_normal), x = top / y;
    RoundSpec exact;
    exact.overflow = Overflow::ieee;
    if (round_to(x, tp.in_format, exact) != x || round_to(y, tp.in_format, exact) != y) return false;
    a[piece] = x;
    b[piece] = y;
    rest -= top;
  }
  return rest == 0 && fused_dot(0.0, a.data(), b.data(), static_cast<int>(lead), tp.model) == c;
}

TEST_CASE("fused tensor-core models: the fast kernel reproduces the vectors measured on GPUs") {
  // Every shipped set whose model groups plainly (no interleaving, no promotion): 64 cases a call as
  // A (cases x K') times B (K' x cases), whose diagonal holds each case's own result, on every SIMD
  // target, the fast path required. Sets measured with c = 0 run as they are; the others get c from
  // a leading group (lead_group_for). The results are the GPUs', not the scalar core's.
  const std::string root = std::string(DRIFT_SOURCE_DIR) + "/data/tensorcore";
  size_t sets = 0;
  for (const std::string& dir : io::tc_measured_sets(root)) {
    for (const io::TcMeasured& m : io::tc_read_measured(dir)) {
      const TcPreset tp = *find_tc_preset(m.preset);
      if (tp.model.interleave != 0 || tp.model.promote_every != 0) continue;
      CAPTURE(dir);
      CAPTURE(tp.name);
      ++sets;
      const TcVectors v = io::read_tc_vectors(dir, m.output, !m.c_zero);
      const MatmulPolicy p = fused_policy(tp, tp.in_format);
      const size_t k = v.a[0].size();
      const size_t lead = m.c_zero ? 0 : static_cast<size_t>(tp.model.terms);
      REQUIRE(k <= static_cast<size_t>(tp.model.terms));  // (one group: the lead's own ends before it)
      RoundSpec to_out;  // (as tc_verify: the harness converts c to the output format, nearest even)
      to_out.overflow = Overflow::ieee;
      // Each usable case's row: the lead, then a and b.
      std::vector<size_t> cases;
      std::vector<std::vector<double>> rows_a, rows_b;
      for (size_t i = 0; i < v.a.size(); ++i) {
        bool finite = std::isfinite(float_of(v.d[i]));
        for (size_t t = 0; t < k; ++t)
          finite = finite && std::isfinite(float_of(v.a[i][t])) && std::isfinite(float_of(v.b[i][t]));
        std::vector<double> ra, rb;
        const double c = m.c_zero ? 0.0 : round_to(static_cast<double>(float_of(v.c[i])), tp.out_format, to_out);
        if (!finite || !std::isfinite(c) || !lead_group_for(c, tp, lead, ra, rb)) continue;
        for (size_t t = 0; t < k; ++t) {
          ra.push_back(float_of(v.a[i][t]));
          rb.push_back(float_of(v.b[i][t]));
        }
        cases.push_back(i);
        rows_a.push_back(std::move(ra));
        rows_b.push_back(std::move(rb));
      }
      CHECK(cases.size() == v.a.size());  // (every shipped case: finite, its c made by a lead group)
      const size_t kk = lead + k;
      TargetMock mock;
      for (int64_t target : matmul_fast_targets()) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(hwy::TargetName(target));
        size_t matched = 0;
        for (size_t c0 = 0; c0 < cases.size(); c0 += 64) {
          const size_t n = std::min<size_t>(64, cases.size() - c0);
          std::vector<double> a(n * kk), b(kk * n), c(n * n);
          for (size_t r = 0; r < n; ++r)
            for (size_t t = 0; t < kk; ++t) {
              a[r * kk + t] = rows_a[c0 + r][t];
              b[t * n + r] = rows_b[c0 + r][t];
            }
          MatmulContext ctx;
          CHECK(matmul(MatView{a.data(), n, kk, kk, false}, MatView{b.data(), kk, n, n, false}, c.data(), n, p, ctx).fast_path);
          for (size_t r = 0; r < n; ++r) matched += bits_of(static_cast<float>(c[r * n + r])) == v.d[cases[c0 + r]];
        }
        CHECK(matched == cases.size());
      }
      MESSAGE(tp.name << ": " << cases.size() << " of " << v.a.size() << " cases replayed");
    }
  }
  CHECK(sets >= 16);  // (of 22: the FP8 sets with fp16 output interleave, B200's FP8 with fp32 promote)
}

TEST_CASE("hand-derived: the fast fused kernel cuts products of either sign toward zero") {
  // The H100 FP8 model keeps 13 bits below the group's alignment exponent E. With the products
  // 16 * 256 = 2^12 and +-0.25 * 1, E = 4 + 8 = 12, the cut is at 2^(12-13) = 0.5, and 0.25 is cut to
  // (-)0 whatever its sign: every result is +-4096 exactly (13 fraction bits, rtz, hold it). Adding
  // the small product uncut would give +-4095.75 (on the grid of 0.25 there), and a cut toward minus
  // infinity -0.5 for -0.25, hence 4095.5: the signs of x and y cover the kernel's four cases (x's
  // sign picks which half of B each rounding direction reads).
  const MatmulPolicy p = fused_policy(*find_tc_preset("h100_fp8_e4m3"), fmt("fp8_e4m3"));
  const std::vector<double> a{16, -0.25, -16, 0.25};  // 2 x 2
  const std::vector<double> b{256, -256, 1, -1};      // 2 x 2 (K x N)
  const std::vector<double> want{4096, -4096, -4096, 4096};
  MatView av{a.data(), 2, 2, 2, false};
  MatView bv{b.data(), 2, 2, 2, false};
  std::vector<double> c_ref(4, 7.0);
  MatmulContext ref;
  ref.force_reference = true;
  matmul(av, bv, c_ref.data(), 2, p, ref);
  CHECK(c_ref == want);
  TargetMock mock;
  for (int64_t target : matmul_fast_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    CAPTURE(hwy::TargetName(target));
    std::vector<double> c(4, 7.0);
    MatmulContext ctx;
    const auto tel = matmul(av, bv, c.data(), 2, p, ctx);
    CHECK(tel.fast_path);
    CHECK(c == want);
  }
}

// One row: a (1 x k) times b (k x n) under preset `name`, by the reference and on every fast target
// (double and float entries), each checked against `want` (n values).
void check_fused_row(const char* name, const char* input, const std::vector<double>& a, const std::vector<double>& b,
                     const std::vector<double>& want) {
  const MatmulPolicy p = fused_policy(*find_tc_preset(name), fmt(input));
  const size_t k = a.size(), n = want.size();
  REQUIRE(b.size() == k * n);
  MatView av{a.data(), 1, k, k, false};
  MatView bv{b.data(), k, n, n, false};
  auto check_all = [&](const auto& c) {
    for (size_t j = 0; j < n; ++j) {
      CAPTURE(j);
      CHECK(same_bits(static_cast<double>(c[j]), want[j]));
    }
  };
  std::vector<double> c_ref(n, 7.0);
  MatmulContext ref;
  ref.force_reference = true;
  matmul(av, bv, c_ref.data(), n, p, ref);
  check_all(c_ref);
  const std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());  // (exact: values of `input`)
  TargetMock mock;
  for (int64_t target : matmul_fast_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    CAPTURE(hwy::TargetName(target));
    std::vector<double> c(n, 7.0);
    MatmulContext ctx;
    CHECK(matmul(av, bv, c.data(), n, p, ctx).fast_path);
    check_all(c);
    std::vector<float> cf(n, 7.0f);
    CHECK(matmul(MatViewF{af.data(), 1, k, k, false}, MatViewF{bf.data(), k, n, n, false}, cf.data(), n, p, ctx).fast_path);
    check_all(cf);
  }
}

// One column: a (1 x k) times b (k x 1).
void check_fused_column(const char* name, const char* input, const std::vector<double>& a,
                        const std::vector<double>& b, double want) {
  check_fused_row(name, input, a, b, {want});
}

// Under the H100 bf16 model, a group of four products 2^-64 * 2^-63 = 2^-127 and one -2^-76 * 2^-76
// = -2^-152 (positions at..at+4 of a and b; the rest of the group zero), which with c = 0 gives
// 2^-125 - 2^-149 (the test of the c = 0 alignment below derives it).
void tiny_products_at(std::vector<double>& a, std::vector<double>& b, size_t at) {
  for (size_t t = at; t < at + 4; ++t) {
    a[t] = std::ldexp(1.0, -64);
    b[t] = std::ldexp(1.0, -63);
  }
  a[at + 4] = std::ldexp(1.0, -76);
  b[at + 4] = -std::ldexp(1.0, -76);
}

TEST_CASE("hand-derived: the integer route's sum past int32 goes to the scalar core") {
  // H100 bf16: 16-term groups, 25 kept bits, rtz. Group 1: 16 products 1 * 15/128, exact (E = -4,
  // cut at 2^-29), c = 1.875. Group 2: 16 products (255/128)^2 = 65025/16384 (the largest bf16
  // significand squared), E = 0 = c's exponent, q = -25: each cut term 65025 * 2^11 = 133171200,
  // c's 1.875 * 2^25 = 62914560, and the sum 2193653760 is past 2^31 = 2147483648 (the products'
  // alone, 2130739200, are not). 2193653760 * 2^-25 = 66945/1024, a float (17 significant bits).
  std::vector<double> a(32, 1.0), b(32, 15.0 / 128);
  for (size_t t = 16; t < 32; ++t) a[t] = b[t] = 255.0 / 128;
  check_fused_column("h100_bf16", "bf16", a, b, 66945.0 / 1024);
}

TEST_CASE("hand-derived: B200 FP8's groups of 32 in two int32 accumulators, their sum past int32 to the core") {
  // B200 FP8 E4M3: one group of 32 products, 25 kept bits, truncated, c = 0. 1.875 = 15/8 is E4M3's
  // largest significand; 1.875 * 1.875 = 225/64 has alignment exponent 0 + 0, so q = -25 and each
  // cut term is 225/64 * 2^25 = 117964800 (exact). Sixteen of them, 1887436800, fit an int32; all
  // 32, 3774873600, are past 2^31 = 2147483648: the integer route keeps two accumulators (the even
  // and the odd positions) and their sum wraps. 32 * 225/64 = 112.5, a float.
  const std::vector<double> big(32, 1.875);
  check_fused_column("b200_fp8_e4m3", "fp8_e4m3", big, big, 112.5);
  // The same magnitudes with b's sign alternating: one accumulator +1887436800, the other
  // -1887436800; with a[0] = 1.75 instead (1.75 * 1.875 = 105/32, cut term exact too) the group
  // sums to 105/32 - 225/64 = -15/64, exact: nothing wraps, and the two sums meet in the lanes.
  std::vector<double> a = big, b = big;
  a[0] = 1.75;
  for (size_t t = 1; t < 32; t += 2) b[t] = -1.875;
  check_fused_column("b200_fp8_e4m3", "fp8_e4m3", a, b, -15.0 / 64);
  // A wrapped sum that float cannot hold: 29 of the products above and three of E4M3's smallest
  // subnormals squared, 2^-9 * 2^-9 = 2^-18 (alignment exponent -12, cut term 2^-18 * 2^25 = 128,
  // exact). The sum 29 * 117964800 + 384 = 3420979584 = (2 * 13363201 + 1) * 128 lies between 2^31 and
  // 2^32, where float's spacing is 256: halfway between 13363201 * 256 and the next float. Truncated
  // (the model) it is 13363201 * 256, times 2^-25: 13363201 / 2^17; to nearest even it would be the
  // next one up.
  std::vector<double> x = big;
  for (size_t t = 29; t < 32; ++t) x[t] = std::ldexp(1.0, -9);
  check_fused_column("b200_fp8_e4m3", "fp8_e4m3", x, x, 13363201.0 / 131072);
}

TEST_CASE("hand-derived: a group's sum just below 2^31, truncated to float") {
  // B200 FP8 E5M2: one group of 32 products, 25 kept bits, the sum truncated to fp32, c = 0 (added
  // after the group). Twenty products 1.75 * 1.75 = 49/16 (E5M2's largest significand squared,
  // alignment exponent 0: q = -25) cut to 49/16 * 2^25 = 102760448 each; seven smaller ones, each
  // exact at 2^-25 and of alignment exponent at most 0 (subnormal operands count at -14):
  //   1.5*2^-14 * 1.75*2^14  = 2.625        -> 88080384
  //   0.75*2^-14 * 1.25*2^11 = 0.9375*2^-3  -> 3932160
  //   0.75*2^-14 * 1.25*2^7  = 0.9375*2^-7  -> 245760
  //   0.75*2^-14 * 1.25*2^3  = 0.9375*2^-11 -> 15360
  //   0.75*2^-14 * 1.25*2^-1 = 0.9375*2^-15 -> 960
  //   0.75*2^-14 * 1.25*2^-5 = 0.9375*2^-19 -> 60
  //   0.25*2^-14 * 1.5*2^-8  = 0.375*2^-22  -> 3
  // The sum 20 * 102760448 + 92274687 = 2147483647 = 2^31 - 1 fits an int32 (no wrap). In [2^30,
  // 2^31) float's spacing is 128: truncated, 2^31 - 128, times 2^-25 = 64 - 2^-18. (Rounded to
  // nearest it would be 2^31, whose conversion back to int32 overflows: AVX2's correction of the
  // nearest conversion must still see it above the sum.)
  std::vector<double> a(32, 0.0), b(32, 0.0);
  for (size_t t = 0; t < 20; ++t) a[t] = b[t] = 1.75;
  const double sub3 = std::ldexp(0.75, -14), sub1 = std::ldexp(0.25, -14);
  const double small[7][2] = {{std::ldexp(1.5, -14), std::ldexp(1.75, 14)},
                              {sub3, std::ldexp(1.25, 11)},
                              {sub3, std::ldexp(1.25, 7)},
                              {sub3, std::ldexp(1.25, 3)},
                              {sub3, 0.625},
                              {sub3, std::ldexp(1.25, -5)},
                              {sub1, std::ldexp(1.5, -8)}};
  for (size_t t = 0; t < 7; ++t) {
    a[21 + t] = small[t][0];
    b[21 + t] = small[t][1];
  }
  check_fused_column("b200_fp8_e5m2", "fp8_e5m2", a, b, 64.0 - std::ldexp(1.0, -18));
}

TEST_CASE("hand-derived: an fp16 output from a sum past int32 is rounded once") {
  // H100 fp16 output: 16-term groups, 25 kept bits, c aligned with the products, the sum rounded to
  // nearest even with 10 fraction bits. K = 32. Group 1: 255.875 * 1 (and zeros) gives c = 255.875 =
  // 2047 * 2^-3, an fp16 value of exponent 7. Group 2: fifteen products (2047 * 2^-6) * (2047 * 2^-7)
  // and one (1958 * 2^-6) * (1923 * 2^-7), exponents 4 + 3 = 7 = c's: E = 7, q = -18, each cut term
  // m_a * m_b * 2^(-13 + 18) (exact), c's 2047 * 2^15. The products' cut terms sum to
  // 15 * 4190209 * 32 + 3765234 * 32 = 2131787808 (below 2^31: one accumulator), and with c's
  // 67076096 to 2198863904, past 2^31. Times 2^-18 that is 8388 + 32 * 2^-18:
  // just above 8388, the midpoint between the fp16 neighbours 8384 and 8392 (spacing 8 there), so
  // the one rounding gives 8392. (Cut to float's 24 bits toward zero first, the sum would lose its
  // last 32 and become that midpoint, which rounds to even: 8384.)
  std::vector<double> a(32, 0.0), b(32, 1.0);
  a[0] = 255.875;
  for (size_t t = 16; t < 32; ++t) {
    a[t] = std::ldexp(2047.0, -6);
    b[t] = std::ldexp(2047.0, -7);
  }
  a[31] = std::ldexp(1958.0, -6);
  b[31] = std::ldexp(1923.0, -7);
  check_fused_column("h100_fp16_out16", "fp16", a, b, 8392.0);
}

TEST_CASE("hand-derived: a group of zero products gives +0, and the next aligns to its own products") {
  // H100 bf16 (25 kept bits, 16-term groups), K = 32. Group 1: a = 0 everywhere, b = 1: every product
  // and c are zero, the group gives +0 whatever its cut (the integer route picks any in its range).
  // Group 2, c = +0: as the test above, four products 2^-64 * 2^-63 = 2^-127 and -2^-76 * 2^-76 =
  // -2^-152; E = -127, q = -152, and 2^-125 - 2^-152 truncates to 2^-125 - 2^-149.
  std::vector<double> a(32, 0.0), b(32, 1.0);
  for (size_t t = 16; t < 32; ++t) b[t] = 0.0;
  tiny_products_at(a, b, 16);
  check_fused_column("h100_bf16", "bf16", a, b, std::ldexp(1.0, -125) - std::ldexp(1.0, -149));
  // K = 16, one group of zero products: +0 (not -0: the sum of no non-zero term starts at +0).
  const std::vector<double> zeros(16, 0.0), minus(16, -1.0);
  check_fused_column("h100_bf16", "bf16", zeros, minus, 0.0);
}

TEST_CASE("hand-derived: fp16 inputs into fp32 (the narrow form): zero groups, then the smallest products") {
  // A100 fp16: 8-term groups, 25 kept bits, rtz into fp32. With fp16 inputs every non-zero product is
  // at least 2^-24 * 2^-24 = 2^-48, so the kernel tells a group with no non-zero term by c's exponent
  // field alone (FusedCutExponents' narrow form). K = 24. Groups 1 and 2: a = 0, b = -1: every product
  // is -0 and c is +0, so both give +0. Group 3, c = +0: 2^-24 * 2^-24 = 2^-48 (the smallest
  // subnormal squared) and 3 * 2^-24 * -(2^-24) = -3 * 2^-48 (E = -47, q = -72: both exact), sum
  // -2^-47, an fp32 normal.
  std::vector<double> a(24, 0.0), b(24, -1.0);
  a[16] = std::ldexp(1.0, -24);
  b[16] = std::ldexp(1.0, -24);
  a[17] = 3 * std::ldexp(1.0, -24);
  b[17] = -std::ldexp(1.0, -24);
  check_fused_column("a100_fp16", "fp16", a, b, -std::ldexp(1.0, -47));
  // K = 8, one group of -0 products: +0.
  const std::vector<double> zeros(8, 0.0), minus(8, -1.0);
  check_fused_column("a100_fp16", "fp16", zeros, minus, 0.0);
  // K = 16: 2^-24 * 2^-24 in group 1 (c = 2^-48 after it), zeros in group 2: c alone, 2^-48.
  std::vector<double> a2(16, 0.0), b2(16, 0.0);
  a2[3] = b2[3] = std::ldexp(1.0, -24);
  check_fused_column("a100_fp16", "fp16", a2, b2, std::ldexp(1.0, -48));
}

TEST_CASE("hand-derived: fp16 output: c's exponent clamped at fp16's emin, and the minimum alignment exponent") {
  // The float lanes take E from c's exponent field and the products' exponents floored once per
  // group (FusedOperands::direct_scales): both floors of the model must survive that. Each case ends
  // on a tie of the fp16 rounding (rne), so that one product cut or kept decides the result.
  // H100 fp16 output (16-term groups, 25 kept bits), K = 32. Group 1: 2^-10 * 2^-10 = 2^-20 (exact),
  // c = 2^-20 = 16 units of 2^-24, an fp16 subnormal. Group 2: 2^-12 * 2^-13 = 2^-25 and
  // 2^-20 * 2^-22 = 2^-42 (codes clamped at -14 each: -28). c's exponent -20 counts as fp16's emin,
  // -14, so E = max(-14, -25, -28) = -14, q = -39: the terms 2^19 (c), 2^14 and trunc(2^-3) = 0.
  // 2^-20 + 2^-25 = 16.5 units, a tie, to even: 2^-20. (With c's own exponent, E = -20 and q = -45,
  // 2^-42 would be kept, 16.5 units plus a little, rounded up to 17 units.)
  std::vector<double> a(32, 0.0), b(32, 0.0);
  a[0] = b[0] = std::ldexp(1.0, -10);
  a[16] = std::ldexp(1.0, -12);
  b[16] = std::ldexp(1.0, -13);
  a[17] = std::ldexp(1.0, -20);
  b[17] = std::ldexp(1.0, -22);
  check_fused_column("h100_fp16_out16", "fp16", a, b, std::ldexp(1.0, -20));
  // B200 fp16 output (16 terms, 25 kept bits, minimum alignment exponent -21), K = 16, c = 0:
  // 2^-12 * 2^-13 = 2^-25 and 2^-24 * 2^-24 = 2^-48 (codes -14 each). E = max(-25, -28, -21) = -21,
  // q = -46: terms 2^21 and trunc(2^-2) = 0; 2^-25 is half a unit of 2^-24, a tie, to even: +0.
  // (Without the minimum, E = -25 and q = -50 would keep 2^-48, and the sum would round up to 2^-24.)
  std::vector<double> h(16, 0.0), k(16, 0.0);
  h[0] = std::ldexp(1.0, -12);
  k[0] = std::ldexp(1.0, -13);
  h[1] = k[1] = std::ldexp(1.0, -24);
  check_fused_column("b200_fp16_out16", "fp16", h, k, 0.0);
}

TEST_CASE("hand-derived: the integer route rounds an fp16 output once (no false tie)") {
  // H100 fp16 output: 25 kept bits, the sum rounded to nearest even with 10 fraction bits. Products
  // 1 * 1, 2^-11 * 1 and 2^-12 * 2^-13: E = 0, q = -25, cut terms 2^25, 2^14 and 1, exact. The sum
  // 1 + 2^-11 + 2^-25 lies above the midpoint 1 + 2^-11 between 1 and 1 + 2^-10, so it rounds up.
  // (Cut to float's 24 bits first, toward zero, it would become that midpoint and round to even, 1.)
  const std::vector<double> a{1.0, std::ldexp(1.0, -11), std::ldexp(1.0, -12)};
  const std::vector<double> b{1.0, 1.0, std::ldexp(1.0, -13)};
  check_fused_column("h100_fp16_out16", "fp16", a, b, 1.0 + std::ldexp(1.0, -10));
}

TEST_CASE("hand-derived: Hopper FP8 writes 13 fraction bits, truncated, beside lanes for the core") {
  // The H100 FP8 model (groups of 32, 13 kept bits, result truncated to 13 fraction bits) on bf16
  // operands, one row: 31 products 1 * 1 and 1.875 * 2^-9. E = 0 (c = 0 takes no part), q = -13: cut
  // terms 31 * 2^13 and trunc(1.875 * 2^4) = 30, exact; the sum 31 + 30 * 2^-13 lies in [16, 32), where
  // 13 fraction bits are multiples of 2^-9 = 16 * 2^-13, so it is truncated to 31 + 2^-9 (the dropped
  // 14 * 2^-13 are float's fraction bits 7, 8 and 9). Every column but 0 holds these products.
  // Column 0's one product 1 * 2^120 puts E at 120 and q = 107, beyond the largest q of a result
  // written from float lanes without an overflow test (fp32's emax - 31 = 96): that lane comes from
  // the scalar core (2^120, exact), so the kernel takes the whole pass of columns lane by lane; with
  // column 0 like the rest, it takes its lean pass. Both must truncate.
  const size_t k = 32, n = 40;
  std::vector<double> a(k, 1.0), b(k * n, 1.0);
  a[31] = 1.875;
  for (size_t j = 0; j < n; ++j) b[31 * n + j] = std::ldexp(1.0, -9);
  std::vector<double> want(n, 31.0 + std::ldexp(1.0, -9));
  check_fused_row("h100_fp8_e4m3", "bf16", a, b, want);
  for (size_t t = 0; t < k; ++t) b[t * n] = 0.0;
  b[0] = std::ldexp(1.0, 120);
  want[0] = std::ldexp(1.0, 120);
  check_fused_row("h100_fp8_e4m3", "bf16", a, b, want);
}

TEST_CASE("hand-derived: a fused group whose c is zero aligns to its products, below the output's emin") {
  // The H100 bf16 model keeps 25 bits below the group's alignment exponent E (16 terms, rtz, minimum
  // alignment exponent -133). Four products 2^-64 * 2^-63 = 2^-127 and one -2^-76 * 2^-76 = -2^-152,
  // with c = 0 (the first group): c takes no part, so E = -127, q = E - 25 = -152, and -2^-152 is kept.
  // The exact sum 2^-125 - 2^-152 truncates to the float below 2^-125: 2^-125 - 2^-149 (normal: no
  // scalar-core lane). Had c = 0 counted with fp32's emin (-126), the cut would be at 2^-151, the
  // small product would vanish, and the result would be 2^-125.
  std::vector<double> a(16, 0.0), b(16, 0.0);  // 1 x 16, 16 x 1
  tiny_products_at(a, b, 0);
  check_fused_column("h100_bf16", "bf16", a, b, std::ldexp(1.0, -125) - std::ldexp(1.0, -149));
}

TEST_CASE("hand-derived: fused results below the output's smallest normal round on its subnormal grid") {
  // The kernel rounds such results itself (the output keeps subnormals): scaled to units of the
  // subnormal spacing, rounded as integers, scaled back.
  // fp32 output, rtz (A100 bf16: 8 terms): one product (1.75 * 2^-75)^2 = 3.0625 * 2^-150 = 1.53125
  // units of 2^-149, exact before the final rounding (E = -150 + 1); toward zero it is 1 unit, where
  // rounding to nearest would give 2.
  std::vector<double> a(8, 0.0), b(8, 0.0);
  a[3] = b[3] = 1.75 * std::ldexp(1.0, -75);
  check_fused_column("a100_bf16", "bf16", a, b, std::ldexp(1.0, -149));
  // The same product less 2^-75 * 2^-80 = 2^-155 (1/64 unit): 1.515625 units, still 1 toward zero.
  a[5] = std::ldexp(1.0, -75);
  b[5] = -std::ldexp(1.0, -80);
  check_fused_column("a100_bf16", "bf16", a, b, std::ldexp(1.0, -149));
  // A negative result toward zero: -1.53125 units -> -1 unit.
  a[5] = b[5] = 0.0;
  b[3] = -b[3];
  check_fused_column("a100_bf16", "bf16", a, b, -std::ldexp(1.0, -149));
  // fp16 output, rne (H100 fp16 out16: 16 terms), spacing 2^-24: 2^-12 * (1.375 * 2^-13) = 1.375 * 2^-25
  // = 0.6875 units -> 1 unit (2^-24); 2^-12 * 2^-13 = 0.5 unit, a tie -> 0 (even), signed as the sum:
  // +0; 2^-12 * (1.5 * 2^-12) = 1.5 units -> 2 units (even); -(1.25 * 2^-12 * 2^-12) = -1.25 -> -1 unit.
  std::vector<double> h(16, 0.0), k(16, 0.0);
  h[0] = std::ldexp(1.0, -12);
  k[0] = 1.375 * std::ldexp(1.0, -13);
  check_fused_column("h100_fp16_out16", "fp16", h, k, std::ldexp(1.0, -24));
  k[0] = std::ldexp(1.0, -13);
  check_fused_column("h100_fp16_out16", "fp16", h, k, 0.0);
  k[0] = 1.5 * std::ldexp(1.0, -12);
  check_fused_column("h100_fp16_out16", "fp16", h, k, std::ldexp(1.0, -23));
  k[0] = -1.25 * std::ldexp(1.0, -12);
  check_fused_column("h100_fp16_out16", "fp16", h, k, -std::ldexp(1.0, -24));
  // 1.9375 units of 2^-24 just under 2^-14 (the smallest normal): 1023.5 units is a tie -> 1024 units
  // = 2^-14, the normal; 2^-12 * (1023.5 * 2^-12) is exact in fp16's product (11 bits: 2047 * 2^-25).
  k[0] = 2047.0 * std::ldexp(1.0, -13);
  check_fused_column("h100_fp16_out16", "fp16", h, k, std::ldexp(1.0, -14));
}

TEST_CASE("fused tensor-core models: results below the output's smallest normal, kernel == reference") {
  // Operands spread so that most results fall below the output's smallest normal: bf16 inputs under
  // the fp32-output rtz models (whose lanes in double round them; in float lanes their alignment
  // exponent leaves the integer route) and fp16 inputs under the fp16-output rne models.
  const Shape s{9, 96, 40};
  int seed = 0;
  for (const char* name : {"a100_bf16", "h100_bf16", "h100_fp16_out16", "a100_fp16_out16"}) {
    CAPTURE(name);
    const TcPreset tp = *find_tc_preset(name);  // (a copy: the optional is a temporary)
    const Format& f = tp.in_format;
    const MatmulPolicy p = fused_policy(tp, f);
    const bool fp16_out = tp.output == "fp16";
    const int lo = fp16_out ? -24 : -80, hi = fp16_out ? -6 : -62;
    check_fast_case(p, grid_matrix(s.m * s.k, 700 + seed, f, lo, hi), grid_matrix(s.k * s.n, 710 + seed, f, lo, hi), s,
                    1, std::string(name) + " below the smallest normal");
    ++seed;
  }
}

TEST_CASE("fused tensor-core models: the integer route hands alignment exponents beyond its range to the core") {
  // The H100 FP8 model (13 kept bits) given bf16 operands, whose products reach 2^±250: where a
  // group's q = E - 13 lies outside the integer route's [-125, 112] (2^-q not a normal float, or
  // products at 2^127 and beyond), those lanes must come out of the scalar core. Values around 2^60 (products 2^120), around 2^-60 (products far below fp32's normal
  // range: results the core rounds) and ordinary ones, in one call and across K so that c carries a
  // huge exponent into the next group.
  const MatmulPolicy p = fused_policy(*find_tc_preset("h100_fp8_e4m3"), fmt("bf16"));
  const Shape s{7, 70, 40};
  std::vector<double> a = grid_matrix(s.m * s.k, 401, fmt("bf16"), -3, 3), b = grid_matrix(s.k * s.n, 402, fmt("bf16"), -3, 3);
  for (size_t i = 0; i < a.size(); i += 5) a[i] = std::ldexp(a[i], 58);
  for (size_t i = 0; i < b.size(); i += 7) b[i] = std::ldexp(b[i], 58);
  for (size_t i = 2; i < a.size(); i += 11) a[i] = std::ldexp(a[i], -62);
  check_fast_case(p, a, b, s, -1, "bf16 under the 13-bit model, huge and tiny");
  // Only huge values: no result is below fp32's normal range, none overflows: the fast path must run.
  std::vector<double> h = grid_matrix(s.m * s.k, 403, fmt("bf16"), 58, 59), hb = grid_matrix(s.k * s.n, 404, fmt("bf16"), 58, 59);
  check_fast_case(p, h, hb, s, 1, "bf16 under the 13-bit model, all huge");
}

TEST_CASE("fused bf16/tf32 models on data of narrow spread anywhere in range: float entry == reference") {
  // bf16 and tf32 share fp32's exponent range, but a training tensor spans far fewer binades (a
  // gradient from 2^-36 to 2^-12, say). Where each operand's non-zero values span at most 60 binades
  // the float entry finds the products' exponents in int8 lanes on codes shifted per operand, and
  // takes the scales from the exponent fields with a floor derived from the data. The ranges below
  // put the shifts far from 0 both ways, the spans at 60 binades (taken), 61 and 100 (not), and the
  // smallest products at the edge of fp32's normal range, where the floor's conditions fail for one
  // kept-bits count and hold for the other; every result must be the reference's. Positions 16-31 of
  // A's rows are zero, so that whole groups (of 4, 8 or 16) have no non-zero product and take their
  // alignment from c alone: there a zero's code must stay below every real one in the int8 pass.
  struct Ranges {
    int a_lo, a_hi, b_lo, b_hi;
    const char* what;
  };
  const Ranges cases[] = {
      {-50, -40, -5, 5, "gradient-sized a"},
      {-30, 30, -30, 30, "spans of 60 binades"},
      {-31, 30, -3, 3, "a spanning 61 binades"},
      {-38, 62, -38, 62, "spans of 100 binades, products from 2^-76 to 2^124"},
      {-51, -45, -51, -45, "products from 2^-102"},
      {-52, -46, -52, -46, "products from 2^-104"},
      {20, 40, -60, -40, "huge a, tiny b"},
  };
  const Shape shapes[] = {{13, 70, 40}, {6, 33, 9}};
  for (const TcPreset& tp : tc_presets()) {
    const Format& f = tp.in_format;
    if (f.emin != -126 || tp.output != "fp32") continue;  // bf16 and tf32 inputs into fp32
    const std::string name = tp.name;
    CAPTURE(name);
    const MatmulPolicy p = fused_policy(tp, f);
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      CAPTURE(si);
      for (const Ranges& r : cases) {
        CAPTURE(r.what);
        std::vector<double> a = grid_matrix(s.m * s.k, 600 + si, f, r.a_lo, r.a_hi);
        std::vector<double> b = grid_matrix(s.k * s.n, 610 + si, f, r.b_lo, r.b_hi);
        // Each end of each range present (grid_matrix draws them, but not surely).
        a[0] = std::ldexp(1.0, r.a_lo);
        a[1] = -std::ldexp(1.0, r.a_hi);
        b[0] = -std::ldexp(1.0, r.b_lo);
        b[1] = std::ldexp(1.5, r.b_hi);
        for (size_t i = 0; i < s.m; ++i) std::fill(a.begin() + i * s.k + 16, a.begin() + i * s.k + 32, 0.0);
        MatView av{a.data(), s.m, s.k, s.k, false};
        MatView bv{b.data(), s.k, s.n, s.n, false};
        std::vector<double> c_ref(s.m * s.n);
        MatmulContext ctx;
        ctx.force_reference = true;
        matmul(av, bv, c_ref.data(), s.n, p, ctx);
        ctx.force_reference = false;
        const std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());  // (exact: values of f)
        const std::vector<float> want(c_ref.begin(), c_ref.end());                // (exact: fp32 results)
        TargetMock mock;
        for (int64_t target : matmul_fast_targets()) {
          hwy::SetSupportedTargetsForTest(target);
          CAPTURE(hwy::TargetName(target));
          std::vector<float> c(s.m * s.n, 7.0f);
          const auto tel = matmul(MatViewF{af.data(), s.m, s.k, s.k, false}, MatViewF{bf.data(), s.k, s.n, s.n, false},
                                  c.data(), s.n, p, ctx);
          CHECK(tel.fast_path);
          CHECK(same_bits(c, want));
        }
      }
    }
  }
}

TEST_CASE("fused fp32-output models at fp32's overflow threshold: kernel == reference") {
  // The models with fp32 output (23 fraction bits) take the kernel's plain results, which look at no
  // result's range: lanes whose group could reach 2^128 (q = E - kept_bits above 127 - 31, the
  // widest int32 sum then past fp32's largest exponent) go to the scalar core instead. bf16 operands
  // around 2^58..2^62 give products of 2^116..2^126, alignment exponents on both sides of that limit
  // (E = 120 for a100, 121 for the 25-bit models) and sums of 12 that stay finite, of mixed signs or
  // of one sign (a sum that passed 2^128 would send the whole call to the
  // reference). The fast path takes the call.
  const Format& bf16 = fmt("bf16");
  const Shape s{5, 12, 37};
  for (const char* name : {"a100_bf16", "h100_bf16", "b200_bf16"}) {
    CAPTURE(name);
    const MatmulPolicy p = fused_policy(*find_tc_preset(name), bf16);
    for (bool one_sign : {false, true}) {
      CAPTURE(one_sign);
      std::vector<double> a = grid_matrix(s.m * s.k, 501, bf16, 58, 62), b = grid_matrix(s.k * s.n, 502, bf16, 58, 62);
      if (one_sign)
        for (auto* v : {&a, &b})
          for (double& x : *v) x = std::fabs(x);
      // Products on both sides of 2^121 (the 25-bit models' limit) and of 2^120 (a100's).
      size_t above = 0, below = 0;
      for (size_t i = 0; i < s.m; ++i)
        for (size_t j = 0; j < s.n; ++j)
          for (size_t t = 0; t < s.k; ++t) {
            const double x = std::fabs(a[i * s.k + t] * b[t * s.n + j]);
            above += x >= std::ldexp(1.0, 122);
            below += x > 0 && x < std::ldexp(1.0, 120);
          }
      CHECK(above > 0);
      CHECK(below > 0);
      // The results the reference gives: finite, some above 2^120.
      std::vector<double> c(s.m * s.n);
      MatmulContext ctx;
      ctx.force_reference = true;
      matmul(MatView{a.data(), s.m, s.k, s.k, false}, MatView{b.data(), s.k, s.n, s.n, false}, c.data(), s.n, p, ctx);
      size_t infinite = 0, huge = 0;
      for (double x : c) {
        infinite += std::isinf(x);
        huge += std::isfinite(x) && std::fabs(x) >= std::ldexp(1.0, 120);
      }
      CHECK(huge > 0);
      CHECK(infinite == 0);
      check_fast_case(p, a, b, s, 1, std::string(name) + (one_sign ? " one sign" : " mixed signs"));
    }
  }
}

// K = 16 and n = 70 columns (both kernel strips and a tail) for the integer targets below 2^16: A's
// row r holds the binary digits of targets[r] with its sign (each a power of two, an fp16 value), B
// is all ones, so that row r's exact sums are targets[r].
constexpr size_t kTargetK = 16, kTargetN = 70;
std::vector<double> fp16_out_target_rows(const std::vector<double>& targets) {
  std::vector<double> a(targets.size() * kTargetK, 0.0);
  for (size_t r = 0; r < targets.size(); ++r) {
    const auto t = static_cast<uint64_t>(std::fabs(targets[r]));
    for (size_t bit = 0; bit < kTargetK; ++bit)
      if (t >> bit & 1) a[r * kTargetK + bit] = std::copysign(std::ldexp(1.0, static_cast<int>(bit)), targets[r]);
  }
  return a;
}

// Row r's results (every column) are the fused model's rounding of targets[r]: want[r] by the
// reference, and the kernel's the reference's.
void check_fp16_out_targets(const MatmulPolicy& p, const std::vector<double>& targets, const std::vector<double>& want,
                            const std::string& what) {
  const size_t k = kTargetK, n = kTargetN, m = targets.size();
  const std::vector<double> a = fp16_out_target_rows(targets), b(k * n, 1.0);
  std::vector<double> c(m * n);
  MatmulContext ctx;
  ctx.force_reference = true;
  matmul(MatView{a.data(), m, k, k, false}, MatView{b.data(), k, n, n, false}, c.data(), n, p, ctx);
  for (size_t r = 0; r < m; ++r) {
    CAPTURE(targets[r]);
    CHECK(same_bits(c[r * n], want[r]));
  }
  check_fast_case(p, a, b, Shape{m, k, n}, 1, what);
}

TEST_CASE("fused fp16-output models: at fp16's overflow threshold, kernel == reference == hand") {
  // The kernel converts an fp16-output group's sum (rounded to odd) to binary16 in one instruction, and
  // hands the lanes whose rounding reaches 2^16 to the scalar core. K = 16 products of exact integers
  // (16 terms: one group; E at most 15, q = E - 25: nothing cut). fp16 keeps 11 significant bits:
  // from 2^15 to 2^16 its grid is 32, its largest value 65504.
  const TcPreset tp = *find_tc_preset("h100_fp16_out16");
  MatmulPolicy rne = fused_policy(tp, fmt("fp16"));
  // To nearest even: 65519 lies below the midpoint 65520 between 65504 and 2^16 (-> 65504); 65488 is
  // the midpoint between 65472 (2046 * 32, even) and 65504 (-> 65472); 49168 = 49152 + 16, a tie to
  // 49152 (1536 * 32, even); 2049 a tie at 2^11 (grid 2), to 2048.
  check_fp16_out_targets(rne, {65519, -65519, 65504, 65488, 49168, -2049, 1},
                         {65504, -65504, 65504, 65472, 49152, -2048, 1}, "rne below the threshold");
  // Toward zero (no preset: the model with its final rounding changed): 65535 -> 65504 in the lanes;
  // 49183 (49152 + 31) -> 49152.
  MatmulPolicy rtz = rne;
  rtz.inner.fused->final_rounding = Rounding::rtz;
  check_fp16_out_targets(rtz, {65535, -65535, 49183, 2049}, {65504, -65504, 49152, 2048}, "rtz below the threshold");
  // At and past the threshold (rne from 65520, rtz from 2^16) the results come from the scalar core,
  // and a call whose results overflow may be redone by the reference: kernel == reference either way.
  for (const MatmulPolicy* p : {&rne, &rtz}) {
    const std::vector<double> targets{65520, 65535, -65535, 65519, 65536, 98304, 65504};
    std::vector<double> a = fp16_out_target_rows(targets);
    // (2^16 and 98304 have a bit past K's 16 digits: made of two and three terms of 2^15 instead.)
    a[4 * kTargetK + 14] = a[4 * kTargetK + 15] = 32768;
    a[5 * kTargetK + 13] = a[5 * kTargetK + 14] = 32768;
    for (size_t r = 0; r < targets.size(); ++r) {
      double sum = 0;  // (exact in double: integers below 2^53)
      for (size_t t = 0; t < kTargetK; ++t) sum += a[r * kTargetK + t];
      CHECK(sum == targets[r]);
    }
    check_fast_case(*p, a, std::vector<double>(kTargetK * kTargetN, 1.0), Shape{targets.size(), kTargetK, kTargetN}, -1,
                    p == &rne ? "rne at the threshold" : "rtz at the threshold");
  }
}

TEST_CASE("fused fp16-output models: rtz on the subnormal grid, and every fp16-output model, kernel == reference") {
  // The model with fp16 output toward zero (h100_fp16_out16 with its final rounding changed), spacing
  // 2^-24 below 2^-14: 2^-12 * (1.375 * 2^-13) = 0.6875 units -> +0; 2^-12 * (1.5 * 2^-12) = 1.5
  // units -> 1 unit; -(1.25 * 2^-12 * 2^-12) = -1.25 units -> -1 unit; 1023.5 units -> 1023 units,
  // the largest subnormal (to nearest it would be 2^-14).
  MatmulPolicy rtz = fused_policy(*find_tc_preset("h100_fp16_out16"), fmt("fp16"));
  rtz.inner.fused->final_rounding = Rounding::rtz;
  const std::vector<double> h{std::ldexp(1.0, -12), std::ldexp(1.0, -12), -std::ldexp(1.0, -12), std::ldexp(1.0, -12)};
  const std::vector<double> k{1.375 * std::ldexp(1.0, -13), 1.5 * std::ldexp(1.0, -12), 1.25 * std::ldexp(1.0, -12),
                              2047.0 * std::ldexp(1.0, -13)};
  const std::vector<double> want{0.0, std::ldexp(1.0, -24), -std::ldexp(1.0, -24), 1023.0 * std::ldexp(1.0, -24)};
  for (size_t t = 0; t < h.size(); ++t) {
    CAPTURE(t);
    std::vector<double> col_a(16, 0.0);
    col_a[3] = h[t];
    const size_t n = 70;  // (every column the same: both kernel strips and a tail)
    std::vector<double> b(16 * n, 0.0);
    for (size_t j = 0; j < n; ++j) b[3 * n + j] = k[t];
    std::vector<double> c(n);
    MatmulContext ctx;
    ctx.force_reference = true;
    matmul(MatView{col_a.data(), 1, 16, 16, false}, MatView{b.data(), 16, n, n, false}, c.data(), n, rtz, ctx);
    CHECK(same_bits(c[0], want[t]));
    check_fast_case(rtz, col_a, b, Shape{1, 16, n}, 1, "rtz subnormal");
  }
  // At fp16's overflow threshold, under this rtz model (16-product groups, 25 kept bits) and A100's
  // fp16-output model (8-product groups, 24 kept bits), each to nearest even and toward zero.
  // 2047 * 32 = 65504 (fp16's largest) and 16 * 1: E = 10 + 5 = 15, q = 15 - 25 or 15 - 24, nothing
  // cut, the sum 65520 = 65504 + half its last place. Toward zero it is 65504; to nearest even it
  // ties up to 2^16, whose exponent is fp16's infinity field: +inf (fused_accum.h, step 4).
  // 2 * (256 * 128) = 65536 = 2^16 is +inf under both: the model makes an infinity of any result
  // with that exponent, where IEEE rtz (and F16C's conversion toward zero) would stop at 65504. (A
  // non-finite result may send the call to the reference: the kernel's part is to hand those lanes
  // on, not to keep them.)
  const MatmulPolicy rne = fused_policy(*find_tc_preset("h100_fp16_out16"), fmt("fp16"));
  const MatmulPolicy a100_rne = fused_policy(*find_tc_preset("a100_fp16_out16"), fmt("fp16"));
  MatmulPolicy a100_rtz = a100_rne;
  a100_rtz.inner.fused->final_rounding = Rounding::rtz;
  struct Edge {
    double a0, b0, a1, b1;
    const MatmulPolicy* p;
    double want;
    const char* what;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Edge edges[] = {{2047, 32, 16, 1, &rtz, 65504, "rtz 65520"},
                        {2047, 32, 16, 1, &rne, inf, "rne 65520"},
                        {256, 128, 256, 128, &rtz, inf, "rtz 65536"},
                        {256, 128, 256, 128, &rne, inf, "rne 65536"},
                        {2047, 32, 16, 1, &a100_rtz, 65504, "a100 rtz 65520"},
                        {2047, 32, 16, 1, &a100_rne, inf, "a100 rne 65520"},
                        {256, 128, 256, 128, &a100_rtz, inf, "a100 rtz 65536"},
                        {256, 128, 256, 128, &a100_rne, inf, "a100 rne 65536"}};
  for (const Edge& e : edges) {
    CAPTURE(e.what);
    std::vector<double> col_a(16, 0.0);
    col_a[0] = e.a0;
    col_a[1] = e.a1;
    const size_t n = 70;
    std::vector<double> b(16 * n, 0.0);
    for (size_t j = 0; j < n; ++j) {
      b[j] = e.b0;
      b[n + j] = e.b1;
    }
    std::vector<double> c(n);
    MatmulContext ctx;
    ctx.force_reference = true;
    matmul(MatView{col_a.data(), 1, 16, 16, false}, MatView{b.data(), 16, n, n, false}, c.data(), n, *e.p, ctx);
    CHECK(same_bits(c[0], e.want));
    check_fast_case(*e.p, col_a, b, Shape{1, 16, n}, std::isinf(e.want) ? -1 : 1, e.what);
  }
  // Random operands whose results span fp16's subnormals to its overflow threshold, under every
  // fp16-output preset (FP8 ones included: their groups start from zero and promote in fp16) and the
  // rtz model.
  const Shape s{9, 96, 70};
  int seed = 0;
  std::vector<std::pair<std::string, MatmulPolicy>> policies{{"h100_fp16_out16 rtz", rtz}};
  for (const TcPreset& tp : tc_presets())
    if (tp.output == "fp16") policies.emplace_back(tp.name, fused_policy(tp, tp.in_format));
  CHECK(policies.size() >= 8);
  for (const auto& named : policies) {  // (no structured bindings: clang's CAPTURE cannot take them)
    const std::string& name = named.first;
    const MatmulPolicy& p = named.second;
    CAPTURE(name);
    const Format& f = p.a.format;
    for (const std::pair<int, int>& range : {std::pair{-24, -6}, std::pair{-4, 4}, std::pair{2, 8}}) {
      const int lo = range.first, hi = range.second;
      CAPTURE(lo);
      const int l = std::max(lo, f.emin - f.man_bits), u = std::min(hi, f.emax);
      check_fast_case(p, grid_matrix(s.m * s.k, 900 + seed, f, l, u), grid_matrix(s.k * s.n, 950 + seed, f, l, u), s, -1,
                      name + " random");
      ++seed;
    }
  }
}

TEST_CASE("hand-derived: a narrow inner sum that rounds to -0 leaves +0 after the outer sum") {
  // (-2^-15) * 2^-15 = -2^-30, below half of fp16's smallest subnormal 2^-24: rne gives -0. The outer
  // fp32 sum starts at +0, and +0 + -0 = +0 (IEEE, round to nearest): the output is +0.
  const std::vector<double> a{-std::ldexp(1.0, -15)}, b{std::ldexp(1.0, -15)};
  MatView av{a.data(), 1, 1, 1, false};
  MatView bv{b.data(), 1, 1, 1, false};
  MatmulPolicy p = narrow_policy("fp16", "fp16", Rounding::rne);
  double c = 1;
  MatmulContext ctx;
  auto tel = matmul(av, bv, &c, 1, p, ctx);
  CHECK(tel.fast_path);
  CHECK(c == 0.0);
  CHECK(!std::signbit(c));
}

TEST_CASE("exact_dot: the exact dot product rounded once, where fp64 sums lose everything") {
  // 1e16 + 1 - 1e16: in fp64, 1e16 + 1 rounds back to 1e16 (ulp 2), so the sum in order is 0.
  const double a[] = {1e16, 1, -1e16}, ones[] = {1, 1, 1};
  CHECK(exact_dot(a, 1, ones, 1, 3) == 1);
  // (1 + 2^-30)(1 - 2^-30) - 1 = -2^-60 exactly; the fp64 product rounds to 1 and the sum to 0.
  const double x[] = {1 + std::ldexp(1, -30), -1}, y[] = {1 - std::ldexp(1, -30), 1};
  CHECK(exact_dot(x, 1, y, 1, 2) == -std::ldexp(1, -60));
  // Strides: a 2x2 row-major matrix's column 1 against a vector.
  const double m[] = {1, 2, 3, 4}, v[] = {10, 100};
  CHECK(exact_dot(m + 1, 2, v, 1, 2) == 2 * 10 + 4 * 100);
  // Round once, ties to even: 1 + 2^-53 is a tie between 1 and 1 + 2^-52 -> 1; a term of 2^-80
  // more breaks the tie upward -> 1 + 2^-52 (two roundings in order would give 1).
  const double t[] = {1, std::ldexp(1, -53), std::ldexp(1, -80)}, o[] = {1, 1, 1};
  CHECK(exact_dot(t, 1, o, 1, 2) == 1);
  CHECK(exact_dot(t, 1, o, 1, 3) == 1 + std::ldexp(1, -52));
  const double inf[] = {INFINITY, 1};
  CHECK(std::isinf(exact_dot(inf, 1, o, 1, 2)));
}

TEST_CASE("ulp_of: the grid spacing of a format at a value") {
  const Format fp16 = *find_format("fp16");
  CHECK(ulp_of(1.0, fp16) == std::ldexp(1, -10));
  CHECK(ulp_of(1.5, fp16) == std::ldexp(1, -10));
  CHECK(ulp_of(-1024.0, fp16) == 1);
  CHECK(ulp_of(0.0, fp16) == std::ldexp(1, -24));    // subnormal spacing 2^(-14-10)
  CHECK(ulp_of(1e-7, fp16) == std::ldexp(1, -24));
  CHECK(ulp_of(1e6, fp16) == std::ldexp(1, 15 - 10));  // beyond max: the top binade's spacing
}

}  // namespace test_matmul
