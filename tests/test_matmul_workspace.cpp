// The matmul engine's workspace (arith/matmul_workspace.h): a caller's workspace is scratch memory
// only. One workspace reused over calls of shrinking and growing shapes, both entries (double and
// float C), both layouts, with the diagnostic passes on and off, gives every call the bits and
// telemetry of the same call made with no workspace (a fresh one of its own), even with everything
// the earlier calls left in the workspace turned to NaN: nothing a call reads is left over. The policies cover every kernel family (fp32, narrow, fused)
// and the reference.
#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "arith/random.h"
#include "policy/presets.h"
#include "workspace_poison.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_matmul_workspace {

using drift::testing::same_bits;

using namespace drift;

namespace {

template <typename T>
std::vector<T> draws(size_t n, uint64_t seed) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<T>((static_cast<double>(random_u32(seed, 11, i)) / 4294967296.0 - 0.5) * 6.0);
  return v;
}

// Every value a workspace holds turned to NaN (workspace_poison.h).
using testing::poison;
void poison(QuantizedOperand& q) {
  poison(q.q);
  poison(q.qf);
  poison(q.block_scale);
}
void poison(MatmulWorkspace& ws) {
  for (PreparedOperands* ops : {&ws.ops_double, &ws.ops_float}) {
    poison(ops->a);
    poison(ops->b);
  }
  for (auto* v : {&ws.wide_c, &ws.wide_a, &ws.wide_b}) poison(*v);
  for (FastScratch* f : {&ws.fast_double, &ws.fast_float}) {
    for (auto* v : {&f->a, &f->b, &f->c, &f->sa, &f->sb, &f->bt}) poison(*v);
    for (auto* v : {&f->bd, &f->aq_wide}) poison(*v);
    poison(f->ea);
    poison(f->eb);
  }
}

struct Shape {
  size_t m, k, n;
  bool ta, tb;
};

// One call of the T entry: C (m x n) and its telemetry.
template <typename T>
std::pair<std::vector<T>, MatmulTelemetry> call(const Shape& s, const MatmulPolicy& p, bool diagnose,
                                                MatmulWorkspace* ws, uint64_t seed) {
  const std::vector<T> a = draws<T>(s.m * s.k, seed), b = draws<T>(s.k * s.n, seed + 1);
  const MatViewOf<T> va{a.data(), s.m, s.k, s.ta ? s.m : s.k, s.ta}, vb{b.data(), s.k, s.n, s.tb ? s.k : s.n, s.tb};
  std::vector<T> c(s.m * s.n, T(7));
  MatmulContext ctx;
  ctx.seed = seed;
  ctx.stream = 3;
  ctx.cast_error = ctx.check_bound = diagnose;
  ctx.workspace = ws;
  const MatmulTelemetry tel = matmul(va, vb, c.data(), s.n, p, ctx);
  return {c, tel};
}

// A preset by name, or "fp32_products_bf16": fp32 with every product rounded to bf16, a policy
// only the reference computes (product formats).
std::optional<MatmulPolicy> test_policy(const std::string& name) {
  if (name != "fp32_products_bf16") return find_matmul_preset(name);
  MatmulPolicy p = *find_matmul_preset("fp32");
  p.product_format = *find_format("bf16");
  return p;
}

template <typename T>
void check_reuse(const char* preset) {
  CAPTURE(std::string(preset));
  const auto p = test_policy(preset);
  REQUIRE(p.has_value());
  // Large, then small (a reused buffer holds stale values beyond the small call's), then other
  // layouts and a larger K (the buffers grow again).
  const Shape shapes[] = {{48, 96, 80, false, false}, {5, 33, 7, false, false}, {17, 64, 31, true, true},
                          {3, 128, 9, false, true},   {64, 160, 40, true, false}};
  MatmulWorkspace ws;
  uint64_t seed = 100;
  for (bool diagnose : {false, true})
    for (const Shape& s : shapes) {
      CAPTURE(s.m);
      CAPTURE(s.k);
      CAPTURE(s.n);
      CAPTURE(diagnose);
      poison(ws);  // what the earlier calls left, poisoned
      const auto [c_ws, tel_ws] = call<T>(s, *p, diagnose, &ws, seed);
      const auto [c_own, tel_own] = call<T>(s, *p, diagnose, nullptr, seed);
      CHECK(same_bits(c_ws, c_own));
      CHECK(std::string(tel_ws.route) == tel_own.route);
      CHECK(tel_ws.fast_path == tel_own.fast_path);
      CHECK(tel_ws.inner_adds == tel_own.inner_adds);
      CHECK(tel_ws.inner_swamped == tel_own.inner_swamped);
      CHECK(tel_ws.outer_swamped == tel_own.outer_swamped);
      CHECK(tel_ws.a.clipped == tel_own.a.clipped);
      CHECK(tel_ws.b.flushed == tel_own.b.flushed);
      CHECK(tel_ws.bound.checked == tel_own.bound.checked);
      CHECK(tel_ws.bound.violations == tel_own.bound.violations);
      ++seed;
    }
}

// fp32: the fp32 kernel; bf16_acc, fp16_acc: the narrow kernels; mxfp8, nvfp4: block scales;
// deepseek_fp8_h100: the fused tensor-core model; b200_nvfp4_folded: the fused model on folded
// block scales; fp32_products_bf16: the reference.
constexpr const char* kPresets[] = {"fp32", "bf16_acc", "fp16_acc", "mxfp8_e4m3", "nvfp4", "deepseek_fp8_h100",
                                    "b200_nvfp4_folded", "fp32_products_bf16"};

}  // namespace

TEST_CASE("matmul workspace: a reused workspace gives each call the bits of a fresh one (double entry)") {
  for (const char* preset : kPresets) check_reuse<double>(preset);
}

TEST_CASE("matmul workspace: a reused workspace gives each call the bits of a fresh one (float entry)") {
  for (const char* preset : kPresets) check_reuse<float>(preset);
}

TEST_CASE("matmul workspace: the calls reach the kernels the test means to cover") {
  MatmulWorkspace ws;
  const Shape s{48, 96, 80, false, false};
  auto route = [&](const char* preset) {
    return std::string(call<float>(s, *test_policy(preset), false, &ws, 1).second.route);
  };
  CHECK(route("fp32") == "fast.fp32");
  CHECK(route("bf16_acc") == "fast.narrow_rne");
  CHECK(route("deepseek_fp8_h100") == "fast.fused");
  CHECK(route("b200_nvfp4_folded") == "fast.fused");
  CHECK(route("fp32_products_bf16") == "reference");
}

}  // namespace test_matmul_workspace
