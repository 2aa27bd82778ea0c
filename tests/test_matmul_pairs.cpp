// The pair kernel (arith/matmul_pairs.h): which formats it takes, and that its results are the fp32
// kernel's and the literal reference's, bit for bit, on every layout, tile edge and block edge.
#include <doctest/doctest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_pairs.h"
#include "same_bits.h"
#include "scaled_policy.h"
#include "spread_values.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_matmul_pairs {

using drift::testing::same_bits;
using drift::testing::scaled_policy;
using drift::testing::spread_values;
using namespace drift;

namespace {

Format fmt(const char* name) { return *find_format(name); }

// C by the engine's float entry, by the kernel the CPU picks, by the fp32 kernel (pair kernel off)
// and by the literal reference.
struct ThreeWays {
  std::vector<float> picked, fp32_kernel, reference;
  bool fast = false;
  std::string route, fp32_route;  // the picked call's and the pair-less call's
};

ThreeWays three_ways(const MatmulPolicy& p, size_t m, size_t k, size_t n, bool ta, bool tb, uint64_t seed) {
  const auto ad = spread_values(m * k, seed), bd = spread_values(k * n, seed + 1);
  const std::vector<float> a(ad.begin(), ad.end()), b(bd.begin(), bd.end());
  const MatViewF av{a.data(), m, k, ta ? m : k, ta}, bv{b.data(), k, n, tb ? k : n, tb};
  ThreeWays r;
  r.picked.assign(m * n, 0.0f);
  r.fp32_kernel.assign(m * n, 0.0f);
  r.reference.assign(m * n, 0.0f);
  MatmulContext ctx;
  ctx.seed = seed;
  const MatmulTelemetry t = matmul(av, bv, r.picked.data(), n, p, ctx);
  r.fast = t.fast_path;
  r.route = t.route;
  pair_kernel_set_for_test(0);
  r.fp32_route = matmul(av, bv, r.fp32_kernel.data(), n, p, ctx).route;
  pair_kernel_set_for_test(-1);
  ctx.force_reference = true;
  matmul(av, bv, r.reference.data(), n, p, ctx);
  return r;
}

}  // namespace

TEST_CASE("pair kernel: the formats whose values and sums it takes exactly") {
  // FP8, FP6, FP4 and int8 elements: at most 8 significant bits, the smallest value at or above
  // 2^-126, and the grids' product at or above 2^-126 (e4m3: 2^(-6-3) each, 2^-18; e5m2: 2^(-14-2)
  // each, 2^-32).
  for (const char* e : {"fp8_e4m3", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "int8"}) {
    CAPTURE(std::string(e));
    CHECK(pair_formats_exact(fmt(e), fmt(e)));
    CHECK(pair_formats_exact(fmt(e), fmt("fp8_e4m3")));
  }
  // bf16 has 8 significant bits but subnormals down to 2^-133, which the instruction reads as zero;
  // fp16 has 11 bits; fp32 24.
  CHECK_FALSE(pair_formats_exact(fmt("bf16"), fmt("bf16")));
  CHECK_FALSE(pair_formats_exact(fmt("fp8_e4m3"), fmt("bf16")));
  CHECK_FALSE(pair_formats_exact(fmt("fp16"), fmt("fp8_e4m3")));
  CHECK_FALSE(pair_formats_exact(fmt("fp32"), fmt("fp32")));
  // bf16 then goes by its data: at most 8 bits fit; fp16's 11 and fp32's 24 do not.
  CHECK(pair_formats_fit(fmt("bf16"), fmt("bf16")));
  CHECK(pair_formats_fit(fmt("bf16"), fmt("fp8_e4m3")));
  CHECK_FALSE(pair_formats_fit(fmt("fp16"), fmt("bf16")));
  CHECK_FALSE(pair_formats_fit(fmt("fp32"), fmt("bf16")));
  // The data's grids: the smallest values 2^-60 and 2^-59 have their last bf16 bit at 2^-67 and
  // 2^-66, whose product 2^-133 is below 2^-126; 2^-56 and 2^-56 give 2^-63 * 2^-63 = 2^-126.
  CHECK_FALSE(pair_ranges_exact(fmt("bf16"), 0x1p-60, fmt("bf16"), 0x1p-59));
  CHECK(pair_ranges_exact(fmt("bf16"), 0x1p-56, fmt("bf16"), 0x1p-56));
  CHECK_FALSE(pair_ranges_exact(fmt("bf16"), 0x1.fep-57, fmt("bf16"), 0x1p-56));  // (2^-57's binade: 2^-64)
  CHECK_FALSE(pair_ranges_exact(fmt("bf16"), 0x1p-127, fmt("bf16"), 1.0));  // a bf16 subnormal
  CHECK(pair_ranges_exact(fmt("bf16"), INFINITY, fmt("bf16"), 0x1p-140));    // all zeros: every product 0
}

TEST_CASE("hand-derived: the pair kernel adds each product in K order, each add rounded") {
  // Products 0, 2^16, 2^-8, 2^-7 (a = 1, 256, 2^-4, 2^-4; b = 0, 256, 2^-4, 2^-3: all E4M3 values).
  // In fp32, ulp(2^16) = 2^-7: 2^16 + 2^-8 is a tie, kept at the even 2^16; then + 2^-7 is exact:
  // 65536 + 2^-7. The pair (2^-8, 2^-7) added the other way round gives 2^16 + 2^-7 (odd), then a
  // tie to the even 2^16 + 2^-6; added as one exact sum (3 * 2^-8) and rounded once, also 2^16 + 2^-6.
  const std::vector<float> a{1.0f, 256.0f, 0x1p-4f, 0x1p-4f}, b{0.0f, 256.0f, 0x1p-4f, 0x1p-3f};
  const MatmulPolicy p = scaled_policy("fp8_e4m3", ScaleKind::none, 0);
  float c = -1.0f;
  MatmulContext ctx;
  const MatmulTelemetry t = matmul(MatViewF{a.data(), 1, 4, 4, false}, MatViewF{b.data(), 4, 1, 1, false}, &c, 1, p, ctx);
  CHECK(t.fast_path);
  CHECK(std::string(t.route) == (pair_kernel_available() ? "fast.fp32_pairs" : "fast.fp32"));
  CHECK(same_bits(c, 65536.0f + 0x1p-7f));
  // K = 3 ends on a lone product (the last pair's second half is +0): 2^-8 - 2^-8 cancels to +0 under
  // round to nearest, and +0 + 0 * 2^-4 stays +0.
  const std::vector<float> a3{0x1p-4f, -0x1p-4f, 0.0f}, b3{0x1p-4f, 0x1p-4f, 0x1p-4f};
  CHECK(matmul(MatViewF{a3.data(), 1, 3, 3, false}, MatViewF{b3.data(), 3, 1, 1, false}, &c, 1, p, ctx).fast_path);
  CHECK(same_bits(c, 0.0f));
}

TEST_CASE("pair kernel == fp32 kernel == reference: every layout, tile edge, block edge, 1 and 2 threads") {
  // Whether this CPU has the kernel decides which of the first two the engine picks; both are
  // compared with the reference either way.
  const std::string available = pair_kernel_available() ? "yes" : "no (AVX512_BF16 absent)";
  MESSAGE("pair kernel on this CPU: " << available);
#if defined(__x86_64__) && defined(__GNUC__)
  // A CPU with the instruction runs the kernel: its first-use check (the instruction's order and
  // roundings) passes wherever the instruction is Intel's VDPBF16PS.
  CHECK(pair_kernel_available() == static_cast<bool>(__builtin_cpu_supports("avx512bf16")));
#endif
  struct Named {
    const char* name;
    MatmulPolicy p;
  };
  const Named policies[] = {
      {"mxfp8_e4m3", scaled_policy("fp8_e4m3", ScaleKind::block, 32)},
      {"mxfp8_e5m2", scaled_policy("fp8_e5m2", ScaleKind::block, 32)},
      {"mxfp4", scaled_policy("fp4_e2m1", ScaleKind::block, 32)},
      {"nvfp4", scaled_policy("fp4_e2m1", ScaleKind::nvfp4, 16)},
      {"e4m3 per tensor", scaled_policy("fp8_e4m3", ScaleKind::tensor, 0)},
      {"e4m3 unscaled", scaled_policy("fp8_e4m3", ScaleKind::none, 0)},
      {"int8 per tensor", scaled_policy("int8", ScaleKind::tensor, 0)},
      {"bf16 operands (by their range)", scaled_policy("bf16", ScaleKind::none, 0)},
      {"bf16 x e4m3 per tensor", [] {
         MatmulPolicy p = scaled_policy("bf16", ScaleKind::none, 0);
         p.b.format = fmt("fp8_e4m3");
         p.b.scaling.kind = ScaleKind::tensor;
         return p;
       }()},
  };
  struct Shape {
    size_t m, k, n;
  };
  // Rows past a 6-row tile; K of one pair, an odd K, a block and one more, two blocks; columns past
  // a 32-column strip and a partial 16-column vector; one shape large enough for a thread team.
  const Shape shapes[] = {{1, 1, 1},   {5, 2, 17},   {6, 31, 32},  {7, 32, 33},   {13, 33, 48},
                          {12, 64, 1}, {19, 65, 64}, {3, 130, 100}, {96, 96, 96}, {130, 160, 200}};
  for (const Named& np : policies)
    for (const Shape& s : shapes)
      for (int layout = 0; layout < 4; ++layout)
        for (int threads : {1, 2}) {
          const std::string policy = np.name;
          CAPTURE(policy);
          CAPTURE(s.m);
          CAPTURE(s.k);
          CAPTURE(s.n);
          CAPTURE(layout);
          CAPTURE(threads);
          omp_set_num_threads(threads);
          const ThreeWays r = three_ways(np.p, s.m, s.k, s.n, layout & 1, layout & 2, 7 * s.m + s.k + layout);
          CHECK(r.fast);
          // The pair kernel takes every one of these calls where the CPU has it (bf16's too: a
          // non-zero value of spread_matrix is at least 2^-32 * 2^-12, whose grid 2^-51 squared
          // is 2^-102).
          CHECK(r.route == (pair_kernel_available() ? "fast.fp32_pairs" : "fast.fp32"));
          CHECK(r.fp32_route == "fast.fp32");
          CHECK(same_bits(r.picked, r.fp32_kernel));
          CHECK(same_bits(r.picked, r.reference));
        }
  omp_set_num_threads(omp_get_num_procs());
}

TEST_CASE("hand-derived: bf16 data the pair kernel would flush goes to the fp32 kernel") {
  // The instruction reads a subnormal bf16 as zero and flushes a subnormal sum to zero; the fp32
  // kernel keeps both. Each case's sum is written out; the pair kernel would give +0 for each.
  const MatmulPolicy p = scaled_policy("bf16", ScaleKind::none, 0);
  MatmulContext ctx;
  auto dot = [&](const std::vector<float>& a, const std::vector<float>& b) {
    float c = -1.0f;
    const MatmulTelemetry t =
        matmul(MatViewF{a.data(), 1, a.size(), a.size(), false}, MatViewF{b.data(), b.size(), 1, 1, false}, &c, 1, p, ctx);
    CHECK(t.fast_path);
    CHECK(std::string(t.route) == "fast.fp32");  // (declined by the ranges)
    return c;
  };
  // 2^-130 is a bf16 subnormal (bf16 keeps fp32's exponent range): times 2^10, 2^-120.
  CHECK(same_bits(dot({0x1p-130f, 0.0f}, {0x1p10f, 1.0f}), 0x1p-120f));
  // Normal operands whose product, 2^-100 * 2^-30 = 2^-130, is a subnormal float: kept exactly.
  CHECK(same_bits(dot({0x1p-100f, 0.0f}, {0x1p-30f, 1.0f}), 0x1p-130f));
  // Normal products whose difference is subnormal: 1.5 * 2^-126 - 2^-126 = 2^-127.
  CHECK(same_bits(dot({0x1.8p-63f, -0x1p-63f}, {0x1p-63f, 0x1p-63f}), 0x1p-127f));
}

TEST_CASE("pair kernel: a C with room past its n columns keeps that room as it was") {
  // n = 31 and 47 end a strip one column short of a whole vector; the columns past n belong to the
  // caller (ldc = n + 9), and so does everything after the last row.
  const MatmulPolicy p = scaled_policy("fp8_e4m3", ScaleKind::block, 32);
  for (size_t n : {31, 47}) {
    CAPTURE(n);
    const size_t m = 7, k = 64, ldc = n + 9;
    const auto ad = spread_values(m * k, 5), bd = spread_values(k * n, 6);
    const std::vector<float> a(ad.begin(), ad.end()), b(bd.begin(), bd.end());
    const float sentinel = -1234.5f;
    std::vector<float> c(m * ldc + 16, sentinel), ref(m * n);
    MatmulContext ctx;
    CHECK(matmul(MatViewF{a.data(), m, k, k, false}, MatViewF{b.data(), k, n, n, false}, c.data(), ldc, p, ctx).fast_path);
    ctx.force_reference = true;
    matmul(MatViewF{a.data(), m, k, k, false}, MatViewF{b.data(), k, n, n, false}, ref.data(), n, p, ctx);
    size_t kept = 0, same = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const size_t row = i / ldc, col = i % ldc;
      if (row < m && col < n) same += same_bits(c[i], ref[row * n + col]);
      else kept += same_bits(c[i], sentinel);
    }
    CHECK(same == m * n);
    CHECK(kept == c.size() - m * n);
  }
}

}  // namespace test_matmul_pairs
