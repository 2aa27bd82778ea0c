// The CUDA kernels' arithmetic, proven on the host: the per-element bodies the kernels run
// (backend/matmul_element.h: matmul_element, and fast_element where it applies) are looped over
// every output here and compared bit for bit with the CPU engine — the literal reference and the
// default path (fast where it applies) — on random shapes (odd sizes, K not a multiple of the
// block), every matmul preset (every scaling kind), every tensor-core preset, every sum order,
// stochastic rounding of products, sums and outputs with fixed seeds, and the telemetry counts.
// GPU tests (tests/gpu) then only have to show the launches compute these same bodies.
#include <doctest/doctest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/random.h"
#include "arith/tc_presets.h"
#include "backend/backend.h"
#include "backend/matmul_plan.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_backend_element {

using drift::testing::same_bits;

using namespace drift;

namespace {

// Spread-out values with zeros of both signs and, with `extremes`, huge and tiny magnitudes.
std::vector<double> random_values(size_t n, uint64_t seed, bool extremes) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 3, 2 * i), r1 = random_u32(seed, 3, 2 * i + 1);
    double x = (static_cast<double>(r0) / 4294967296.0 - 0.5) * 4.0;
    x = static_cast<float>(x * static_cast<double>(uint64_t{1} << (r1 % 9)) / 16.0);
    switch (r1 >> 28) {
      case 0: x = 0.0; break;
      case 1: x = -0.0; break;
      case 2: if (extremes) x *= 1e30; break;
      case 3: if (extremes) x *= 1e-30; break;
      default: break;
    }
    v[i] = x;
  }
  return v;
}

struct Shape {
  size_t m, k, n;
};

// One call four ways: reference, engine default, element body, fast body (where it applies).
void check_bodies(const MatmulPolicy& p, const Shape& s, uint64_t seed, bool extremes) {
  const auto a = random_values(s.m * s.k, seed, extremes);
  const auto b = random_values(s.k * s.n, seed + 77, extremes);
  const MatView av{a.data(), s.m, s.k, s.k, false};
  const MatView bv{b.data(), s.k, s.n, s.n, false};
  MatmulContext ctx;
  ctx.seed = seed;
  ctx.stream = seed * 0x9e3779b97f4a7c15ull;
  DelayedState da, db;
  ctx.delayed_a = &da;
  ctx.delayed_b = &db;
  ctx.count_swamping = true;
  ctx.force_reference = true;
  std::vector<double> c_ref(s.m * s.n), c_default(s.m * s.n), c_elem(s.m * s.n, 1.5), c_fast(s.m * s.n, 1.5);
  DelayedState da2, db2;
  const MatmulTelemetry t_ref = matmul(av, bv, c_ref.data(), s.n, p, ctx);
  ctx.force_reference = false;
  ctx.delayed_a = &da2;
  ctx.delayed_b = &db2;
  matmul(av, bv, c_default.data(), s.n, p, ctx);
  CHECK(same_bits(c_ref, c_default));

  DelayedState da3, db3;
  ctx.delayed_a = &da3;
  ctx.delayed_b = &db3;
  PreparedOperands ops;
  prepare_operands_into(ops, av, bv, p, ctx);
  ElementPlanStorage storage;
  const ElementPlan plan = make_element_plan(ops, p, ctx, storage);
  ElementCounts counts;
  run_element_plan_host(plan, c_elem.data(), s.n, &counts);
  CHECK(same_bits(c_ref, c_elem));
  CHECK(counts.inner_adds == t_ref.inner_adds);
  CHECK(counts.inner_swamped == t_ref.inner_swamped);
  CHECK(counts.outer_adds == t_ref.outer_adds);
  CHECK(counts.outer_swamped == t_ref.outer_swamped);

  if (fast_plan_applies(ops, p)) {
    FastPlanStorage fs;
    const FastPlan fp = make_fast_plan(ops, p, ctx, fs);
    if (run_fast_plan_host(fp, c_fast.data(), s.n)) CHECK(same_bits(c_ref, c_fast));
  }
}

MatmulPolicy policy_from(const std::string& json) {
  return parse_matmul_policy(nlohmann::json::parse(json), "test");
}

const Shape kShapes[] = {{1, 1, 1}, {3, 33, 5}, {7, 64, 3}, {5, 100, 9}, {2, 257, 4}, {4, 0, 3}, {1, 130, 1}};

void check_policy(const std::string& name, const MatmulPolicy& p) {
  for (size_t si = 0; si < std::size(kShapes); ++si)
    for (int extremes = 0; extremes < 2; ++extremes) {
      CAPTURE(name);
      CAPTURE(si);
      CAPTURE(extremes);
      check_bodies(p, kShapes[si], 1000 * si + 17 * extremes + 3, extremes != 0);
    }
}

}  // namespace

TEST_CASE("element bodies equal the CPU engine: every matmul preset (every scaling kind)") {
  for (const MatmulPreset& mp : matmul_presets()) check_policy(mp.name, *find_matmul_preset(mp.name));
}

TEST_CASE("element bodies equal the CPU engine: every tensor-core preset as the inner sum") {
  for (const TcPreset& tc : tc_presets()) {
    const std::string json = R"({"preset": "fp32", "a": {"format": ")" + tc.input + R"("}, "b": {"format": ")" +
                             tc.input + R"("}, "inner": {"fused": ")" + tc.name + R"("}})";
    check_policy(tc.name, policy_from(json));
    const std::string blocked = R"({"preset": "mxfp8_e4m3", "inner": {"fused": ")" + tc.name + R"("}})";
    if (tc.input == "fp8_e4m3") check_policy(tc.name + " mx", policy_from(blocked));
  }
}

TEST_CASE("element bodies equal the CPU engine: every order, stochastic rounding everywhere") {
  const char* orders[] = {"sequential", "reverse", "pairwise", "split:3", "split", "permuted", "splitk:3", "splitk:7"};
  for (const char* inner : orders)
    for (const char* outer : {"sequential", "pairwise", "permuted", "split:2", "splitk:2"}) {
      const std::string name = std::string(inner) + " / " + outer;
      // bf16 sums (where orders matter), sr products in bf16, sr outer sums, sr output to fp16.
      check_policy(name, policy_from(std::string(R"({"preset": "mxfp8_e4m3",
          "product": {"format": "bf16", "rounding": "sr", "sr_bits": 11},
          "inner": {"format": "bf16", "rounding": "sr", "order": ")") + inner + R"("},
          "outer": {"format": "fp32", "rounding": "sr", "order": ")" + outer + R"("},
          "output": {"format": "fp16", "rounding": "sr"}})"));
      check_policy(name + " rtz, promote 16", policy_from(std::string(R"({"preset": "bf16",
          "inner": {"format": "fp16", "rounding": "rtz", "promote_every": 16, "order": ")") + inner + R"("},
          "outer": {"order": ")" + outer + R"("}})"));
    }
}

TEST_CASE("element bodies equal the CPU engine: fast-path policies with sr output and scaled tensors") {
  check_policy("fp8 tensor, sr output", policy_from(R"({"preset": "fp8_tensor_e4m3",
      "output": {"format": "bf16", "rounding": "sr"}})"));
  check_policy("nvfp4 bf16 out", policy_from(R"({"preset": "nvfp4", "output": {"format": "bf16"}})"));
  check_policy("mxfp8 saturating fp32 sums", policy_from(R"({"preset": "mxfp8_e4m3",
      "inner": {"overflow": "saturate"}, "outer": {"overflow": "saturate"}})"));
}

TEST_CASE("fast body: applies to fp32 sequential policies only, and computes the hand-derived value") {
  // 1 x 3 times 3 x 1, fp32 sequential, each step one rounding to fp32 (ulp(1) = 2^-23):
  //   acc = 1;  acc = fl(1 + 2^-24) = 1 (a tie, to even);  acc = fl(1 + 5 * 2^-24) = fl(1 + 2.5 ulp)
  //   = 1 + 2 ulp = 1 + 2^-22 (a tie, to even). The exact sum would be 1 + 3 * 2^-23.
  const std::vector<double> a = {1.0, 0x1p-24, 0x1p-24}, b = {1.0, 1.0, 5.0};
  const MatView av{a.data(), 1, 3, 3, false}, bv{b.data(), 3, 1, 1, false};
  const MatmulPolicy p = *find_matmul_preset("fp32");
  MatmulContext ctx;
  PreparedOperands ops;
  prepare_operands_into(ops, av, bv, p, ctx);
  REQUIRE(fast_plan_applies(ops, p));
  FastPlanStorage fs;
  const FastPlan fp = make_fast_plan(ops, p, ctx, fs);
  double c = 0;
  REQUIRE(run_fast_plan_host(fp, &c, 1));
  CHECK(c == 1.0 + 0x1p-22);
  MatmulPolicy bf16acc = p;
  bf16acc.inner.format = *find_format("bf16");
  CHECK_FALSE(fast_plan_applies(ops, bf16acc));
  MatmulPolicy pairwise = p;
  pairwise.inner.order = SumOrder::pairwise;
  CHECK_FALSE(fast_plan_applies(ops, pairwise));
}

TEST_CASE("backends: cpu runs the engine; unknown or absent backends are refused by name") {
  auto cpu = make_backend("cpu");
  CHECK(std::string(cpu->name()) == "cpu");
  CHECK(cpu->supports(*find_matmul_preset("nvfp4")));
  MatmulPolicy bad = *find_matmul_preset("fp32");
  bad.inner.split = 0;
  bad.inner.order = SumOrder::split;
  CHECK_FALSE(cpu->supports(bad));
  CHECK(cpu->unsupported_reason(bad).find("inner.split") != std::string::npos);
  try {
    make_backend("tpu");
    FAIL("unknown backend accepted");
  } catch (const BackendError& e) {
    CHECK(std::string(e.what()).find("unknown backend 'tpu'") != std::string::npos);
  }
  if (!cuda_backend_compiled()) {
    try {
      make_backend("cuda");
      FAIL("cuda backend created without CUDA");
    } catch (const BackendError& e) {
      CHECK(std::string(e.what()).find("built without CUDA") != std::string::npos);
    }
  }
}

}  // namespace test_backend_element
