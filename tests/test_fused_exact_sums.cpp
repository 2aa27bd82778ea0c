// Fused tensor-core models whose sums provably cut nothing (fused_sums_exact, arith/fused_accum.h):
// the bound at hand-derived edges, and the calls that take the fp32 kernels for it, which must give
// the bits of the fused model's own reference.
#include <doctest/doctest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_pairs.h"
#include "arith/random.h"
#include "arith/tc_presets.h"
#include "policy/presets.h"
#include "same_bits.h"
#include "scaled_policy.h"
#include "spread_values.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_fused_exact_sums {

using namespace drift;
using drift::testing::same_bits;
using drift::testing::scaled_policy;
using drift::testing::spread_values;

namespace {

FusedModel tc_model(const char* name) {
  const auto p = find_tc_preset(name);
  REQUIRE_MESSAGE(p.has_value(), name);
  return p->model;
}

Format format(const char* name) {
  const auto f = find_format(name);
  REQUIRE_MESSAGE(f.has_value(), name);
  return *f;
}

// Test data of three kinds. 0: spread_values (2^-12 .. 2^12, zeros), which the scalings map over a
// format's whole range (many tiny values). 1: uniform in [-1, 1): once scaled, most elements sit in
// the format's upper binades. 2: uniform in [0, 1): sums that grow with K, so that long ones reach
// the bits a narrow cut drops (E2M1 under 13 kept bits: past 2^12, where the cut at 2^-1 drops the
// quarters of products such as 1.5 * 1.5).
std::vector<float> data(size_t n, uint64_t seed, int kind) {
  if (kind == 0) {
    const std::vector<double> d = spread_values(n, seed);
    return std::vector<float>(d.begin(), d.end());
  }
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(random_u32(seed, 5, i)) / 2147483648.0 - 1.0;
    v[i] = static_cast<float>(kind == 1 ? u : 0.5 * (u + 1.0));
  }
  return v;
}

}  // namespace

TEST_CASE("fused_sums_exact: the bound at hand-derived edges") {
  const Format e2m1 = format("fp4_e2m1");
  const Format e3m2 = format("fp6_e3m2");
  // E2M1: values k * 2^-1 up to 6 (its subnormal 0.5 = 2^-1 carries the grid), so products are
  // multiples of g = 2^-2 up to P = 36, P / g = 144.
  // b200_nvfp4_blocksum's model (B200 FP8: 25 kept bits, fp32 out, in_emin 0): 16 products sum to at
  // most 576 = 2304 g (12 bits); E <= max(2 + 2, ilogb 576 = 9) = 9 and 9 - 25 <= -2.
  FusedModel b200 = tc_model("b200_fp8_e4m3");
  b200.terms = 16;
  b200.promote_every = 16;
  b200.in_emin = 0;
  CHECK(fused_sums_exact(b200, e2m1, e2m1, 16));
  // H100 FP8 (13 kept bits, 13 written): n products sum to at most n * 144 g, which must stay below
  // 2^14 g; n = 113: 16272 (E <= 2^13's exponent - 2 = 11, and 11 - 13 = -2, the grid: nothing cut);
  // n = 114: 16416, past 2^14 (and E = 12 would cut the last bit).
  const FusedModel h100 = tc_model("h100_fp8_e4m3");
  CHECK(fused_sums_exact(h100, e2m1, e2m1, 113));
  CHECK_FALSE(fused_sums_exact(h100, e2m1, e2m1, 114));
  // E3M2 (emin -2, 2 fraction bits, subnormal grid 2^-4, largest 28): g = 2^-8, P / g = 784 * 256 =
  // 200704. Under B200 FP8 the fp32 bound decides: 83 products, 16658432 <= 2^24; 84, 16859136 > 2^24.
  const FusedModel b200_fp8 = tc_model("b200_fp8_e4m3");
  CHECK(fused_sums_exact(b200_fp8, e3m2, e3m2, 32));
  CHECK(fused_sums_exact(b200_fp8, e3m2, e3m2, 83));
  CHECK_FALSE(fused_sums_exact(b200_fp8, e3m2, e3m2, 84));
  // The alignment exponent's other floors: codes clamped at in_emin = 20 make E >= 40, and 40 - 25
  // is far above the grid's -2; so does a minimum alignment exponent of 30.
  FusedModel clamped = b200;
  clamped.in_emin = 20;
  CHECK_FALSE(fused_sums_exact(clamped, e2m1, e2m1, 16));
  FusedModel floored = b200;
  floored.min_align_exp = 30;
  CHECK_FALSE(fused_sums_exact(floored, e2m1, e2m1, 16));
  // Formats with NaN or infinity codes are never taken (their operands may be non-finite), however
  // short the sum; nor inputs read as zero below in_emin (E2M1's 0.5 under in_emin 0), nor the
  // interleaved models.
  CHECK_FALSE(fused_sums_exact(b200_fp8, format("fp8_e4m3"), format("fp8_e4m3"), 1));
  CHECK_FALSE(fused_sums_exact(b200_fp8, format("bf16"), e2m1, 1));
  FusedModel flushing = b200;
  flushing.in_subnormals = false;
  CHECK_FALSE(fused_sums_exact(flushing, e2m1, e2m1, 16));
  CHECK_FALSE(fused_sums_exact(tc_model("h100_fp8_e4m3_out16"), e2m1, e2m1, 16));
  CHECK_FALSE(fused_sums_exact(b200, e2m1, e2m1, 0));
}

TEST_CASE("fused models with exact sums take the fp32 kernels, with the model's reference bits") {
  struct Case {
    const char* name;
    MatmulPolicy policy;
    bool exact;  // fused_sums_exact over the policy's K-blocks, at every K below
  };
  std::vector<Case> cases;
  cases.push_back({"b200_nvfp4_blocksum", *find_matmul_preset("b200_nvfp4_blocksum"), true});
  MatmulPolicy mxfp4 = scaled_policy("fp4_e2m1", ScaleKind::block, 32);
  mxfp4.inner.fused = tc_model("b200_fp8_e4m3");
  cases.push_back({"MXFP4, B200 FP8 fused", mxfp4, true});
  MatmulPolicy mxfp6 = scaled_policy("fp6_e3m2", ScaleKind::block, 32);
  mxfp6.inner.fused = tc_model("b200_fp8_e4m3");
  cases.push_back({"MXFP6 E3M2, B200 FP8 fused", mxfp6, true});
  // Per-tensor E2M1 under H100 FP8: K is one block, exact up to 113 products (above).
  MatmulPolicy tensor_fp4 = scaled_policy("fp4_e2m1", ScaleKind::tensor, 0);
  tensor_fp4.inner.fused = tc_model("h100_fp8_e4m3");
  cases.push_back({"E2M1 per tensor, H100 FP8 fused, K <= 113", tensor_fp4, true});
  // The same past 113 products, and MXFP8 (E4M3 has a NaN code): the fused kernel.
  cases.push_back({"E2M1 per tensor, H100 FP8 fused, K > 113", tensor_fp4, false});
  cases.push_back({"b200_mxfp8_e4m3_blocksum", *find_matmul_preset("b200_mxfp8_e4m3_blocksum"), false});
  struct Shape {
    size_t m, k, n;
  };
  const Shape short_k[] = {{1, 1, 1}, {5, 17, 33}, {7, 32, 48}, {13, 64, 17}, {19, 96, 64}, {70, 113, 70}};
  const Shape long_k[] = {{3, 114, 5}, {9, 160, 40}, {19, 256, 64}, {8, 512, 24}};
  for (const Case& c : cases) {
    const bool long_case = std::string(c.name).find("K > 113") != std::string::npos;
    const bool k_bounded = std::string(c.name).find("K <= 113") != std::string::npos;
    const Shape* shapes = long_case ? long_k : short_k;
    const size_t count = long_case ? std::size(long_k) : std::size(short_k);
    for (size_t si = 0; si < count; ++si)
      for (int run = 0; run < 6; ++run) {
        const Shape s = shapes[si];
        const int threads = 1 + run % 2, kind = run / 2;
        CAPTURE(c.name);
        CAPTURE(s.m);
        CAPTURE(s.k);
        CAPTURE(s.n);
        CAPTURE(threads);
        CAPTURE(kind);
        if (k_bounded) REQUIRE(s.k <= 113);
        omp_set_num_threads(threads);
        const auto a = data(s.m * s.k, 11 * s.m + s.k, kind), b = data(s.k * s.n, 13 * s.n + s.k, kind);
        const MatViewF av{a.data(), s.m, s.k, s.k, false}, bv{b.data(), s.k, s.n, s.n, false};
        std::vector<float> fast(s.m * s.n, -1.0f), reference(s.m * s.n, -2.0f);
        MatmulContext ctx;
        const MatmulTelemetry t = matmul(av, bv, fast.data(), s.n, c.policy, ctx);
        ctx.force_reference = true;
        matmul(av, bv, reference.data(), s.n, c.policy, ctx);
        CHECK(t.fast_path);
        const std::string route = t.route;
        if (c.exact)
          CHECK((route == "fast.fp32" || route == "fast.fp32_pairs"));
        else
          CHECK(route == "fast.fused");
        CHECK(same_bits(fast, reference));
      }
  }
  omp_set_num_threads(omp_get_num_procs());
}

}  // namespace test_fused_exact_sums
