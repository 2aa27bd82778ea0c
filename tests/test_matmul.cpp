// The matmul engine: fast path == literal reference bit for bit, determinism across thread counts,
// and hand-derived cases for each step of the two-level definition.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/random.h"

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

MatmulPolicy scaled_policy(const char* elem, ScaleKind kind, int block) {
  MatmulPolicy p;
  p.a.format = p.b.format = fmt(elem);
  p.a.scaling.kind = p.b.scaling.kind = kind;
  p.a.scaling.block = p.b.scaling.block = block;
  return p;
}

bool same_bits(const std::vector<double>& x, const std::vector<double>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0;
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
