// The cuda backend against the CPU engine on a real device: identical bits and telemetry for every
// matmul preset and tensor-core preset, sizes that cross the fast kernel's 128 x 128 tiles and
// K-steps of 8 unevenly, stochastic rounding, counted swamping, and overflow sent to the general
// kernel. Also: cuda-native (cuBLASLt FP8) against the h100 FP8 model, bit for bit on Hopper, split-K
// included.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "arith/hostdevice.h"
#include "arith/random.h"
#include "arith/tc_presets.h"
#include "backend/backend.h"
#include "backend/cuda/native_fp8.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"

using namespace drift;

namespace {

std::vector<double> values(size_t n, uint64_t seed, double scale) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = random_u32(seed, 9, i);
    v[i] = static_cast<float>((static_cast<double>(r) / 4294967296.0 - 0.5) * scale);
    if ((r & 63) == 0) v[i] = (r & 64) ? 0.0 : -0.0;
  }
  return v;
}

struct Shape {
  size_t m, k, n;
};

// Runs cpu and cuda on the same call (A m x k, B k x n, row-major) and compares C and the
// telemetry. Returns cuda's fast_path.
bool compare_on(Backend& gpu, const MatmulPolicy& p, const Shape& s, const std::vector<double>& a,
                const std::vector<double>& b, uint64_t seed, bool count) {
  const MatView av{a.data(), s.m, s.k, s.k, false}, bv{b.data(), s.k, s.n, s.n, false};
  std::vector<double> c_cpu(s.m * s.n), c_gpu(s.m * s.n, 7.0);
  MatmulContext ctx;
  ctx.seed = seed;
  ctx.stream = seed * 31 + 5;
  ctx.count_swamping = count;
  DelayedState d1, d2, d3, d4;
  ctx.delayed_a = &d1, ctx.delayed_b = &d2;
  const MatmulTelemetry tc = matmul(av, bv, c_cpu.data(), s.n, p, ctx);
  ctx.delayed_a = &d3, ctx.delayed_b = &d4;
  const MatmulTelemetry tg = gpu.matmul(av, bv, c_gpu.data(), s.n, p, ctx);
  CHECK(std::memcmp(c_cpu.data(), c_gpu.data(), c_cpu.size() * sizeof(double)) == 0);
  CHECK(tg.a.clipped == tc.a.clipped);
  CHECK(tg.b.flushed == tc.b.flushed);
  CHECK(tg.inner_adds == tc.inner_adds);
  CHECK(tg.outer_adds == tc.outer_adds);
  if (count) {
    CHECK(tg.inner_swamped == tc.inner_swamped);
    CHECK(tg.outer_swamped == tc.outer_swamped);
  }
  return tg.fast_path;
}

bool compare(Backend& gpu, const MatmulPolicy& p, const Shape& s, uint64_t seed, double scale, bool count) {
  return compare_on(gpu, p, s, values(s.m * s.k, seed, scale), values(s.k * s.n, seed + 1, scale), seed, count);
}

const Shape kShapes[] = {{1, 1, 1}, {3, 33, 5}, {129, 70, 131}, {200, 257, 64}, {17, 1000, 9}, {256, 96, 256}};

}  // namespace

TEST_CASE("cuda equals cpu: every matmul preset, several shapes") {
  auto gpu = make_backend("cuda");
  for (const MatmulPreset& mp : matmul_presets()) {
    const MatmulPolicy p = *find_matmul_preset(mp.name);
    if (!gpu->supports(p)) {  // only block scales folded into the products stay on the CPU
      CAPTURE(mp.name);
      CHECK(p.inner.scales_in_products);
      continue;
    }
    for (size_t si = 0; si < std::size(kShapes); ++si) {
      CAPTURE(mp.name);
      CAPTURE(si);
      compare(*gpu, p, kShapes[si], 10 + si, 4.0, false);
      if (kShapes[si].m * kShapes[si].n <= 4096) compare(*gpu, p, kShapes[si], 20 + si, 4.0, true);
    }
  }
}

TEST_CASE("cuda equals cpu: microxcaling's float32-log2 exponent on the device quantizer") {
  // The exponent option alone runs in the device quantizer (block_scale_of with the threshold
  // table); operands whose block amaxes sit just below powers of two, where it moves the scale.
  auto gpu = make_backend("cuda");
  const MatmulPolicy p = parse_matmul_policy(nlohmann::json::parse(
      R"({"preset": "mxfp8_e4m3", "a": {"rounding": "rna", "scaling": {"emulate": {"exponent": "log2_fp32"}}},
          "b": {"scaling": {"emulate": {"exponent": "log2_fp32"}}}})"));
  const Shape s{33, 96, 17};
  std::vector<double> a = values(s.m * s.k, 41, 4.0), b = values(s.k * s.n, 42, 4.0);
  for (size_t i = 0; i < a.size(); i += 32) a[i] = std::nextafter(8.0f, 0.0f);  // 8 - 2^-21: log2 rounds to 3
  for (size_t i = 0; i < b.size(); i += 7) b[i] = -std::nextafter(16.0f, 0.0f);
  compare_on(*gpu, p, s, a, b, 5, false);
}

TEST_CASE("cuda equals cpu: tensor-core presets, orders, stochastic rounding") {
  auto gpu = make_backend("cuda");
  for (const TcPreset& tc : tc_presets()) {
    const MatmulPolicy p = parse_matmul_policy(nlohmann::json::parse(
        R"({"preset": "fp32", "a": {"format": ")" + tc.input + R"("}, "b": {"format": ")" + tc.input +
        R"("}, "inner": {"fused": ")" + tc.name + R"("}})"));
    CAPTURE(tc.name);
    compare(*gpu, p, {67, 130, 45}, 3, 2.0, false);
  }
  for (const char* order : {"reverse", "pairwise", "split:4", "permuted"}) {
    const MatmulPolicy p = parse_matmul_policy(nlohmann::json::parse(std::string(R"({"preset": "mxfp8_e4m3",
        "product": {"format": "bf16", "rounding": "sr"},
        "inner": {"format": "bf16", "rounding": "sr", "order": ")") + order + R"("},
        "outer": {"rounding": "sr", "order": ")" + order + R"("}, "output": {"format": "bf16", "rounding": "sr"}})"));
    CAPTURE(order);
    compare(*gpu, p, {40, 100, 33}, 4, 2.0, true);
  }
}

TEST_CASE("cuda equals cpu: tensor-core models in the tiled kernel (uneven tiles, block scales, promotion)") {
  // Shapes that cut the tiled kernel's 64 x 64 output tiles and its K-tiles of 32 unevenly.
  auto gpu = make_backend("cuda");
  const Shape shapes[] = {{1, 1, 1}, {65, 33, 129}, {130, 300, 70}, {64, 64, 64}, {7, 1000, 3}};
  for (const char* json : {
           R"({"preset": "fp8_tensor_e4m3", "inner": {"fused": "h100_fp8_e4m3"}})",
           R"({"preset": "mxfp8_e4m3", "inner": {"fused": "h100_fp8_e4m3"}})",
           R"({"preset": "fp8_tensor_e4m3", "inner": {"fused": "h100_fp8_promote128"}})",
           R"({"preset": "fp32", "a": {"format": "fp16"}, "b": {"format": "fp16"}, "inner": {"fused": "a100_fp16"},
               "outer": {"rounding": "sr"}, "output": {"format": "bf16", "rounding": "sr"}})",
           R"({"preset": "fp32", "a": {"format": "bf16"}, "b": {"format": "bf16"}, "inner": {"fused": "h100_bf16",
               "promote_every": 80}})"}) {
    const MatmulPolicy p = parse_matmul_policy(nlohmann::json::parse(json));
    const std::string policy_json = json;
    CAPTURE(policy_json);
    for (size_t si = 0; si < std::size(shapes); ++si) {
      CAPTURE(si);
      compare(*gpu, p, shapes[si], 30 + si, 8.0, true);
    }
  }
}

TEST_CASE("cuda equals cpu: the register-blocked tiled kernel's fallbacks") {
  // fused_cut_tile_kernel (float route: the fp8 models keeping 13 bits; double route: the others)
  // hands a K-tile holding an operand outside its exact range to fused_dot, and a group whose
  // result it cannot round to group_of; zero groups below the float route's scales give +0.
  auto gpu = make_backend("cuda");
  auto policy = [](const std::string& json) { return parse_matmul_policy(nlohmann::json::parse(json)); };
  const Shape s{70, 200, 66};
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  SUBCASE("fp32 operands: 8-bit significands except in some K-tiles (wide or far out of range)") {
    // Products of 24-bit significands are not exact in float: those tiles must leave the float route.
    auto narrow = [](double v) { return static_cast<double>(float_of(bits_of(static_cast<float>(v)) & 0xffff0000u)); };
    auto a = values(s.m * s.k, 41, 4.0), b = values(s.k * s.n, 42, 4.0);
    for (size_t i = 0; i < s.m; ++i)
      for (size_t k = 0; k < s.k; ++k) {
        double& x = a[i * s.k + k];
        if (i < 40 && k >= 32 && k < 50) continue;       // full fp32 significands
        if (i >= 64 && k >= 100 && k < 110) x *= 0x1p-70;  // below the float route's exponents
        x = narrow(x);
      }
    for (double& y : b) y = narrow(y);
    for (const char* model : {"h100_fp8_e4m3", "l40s_fp8_e4m3", "b200_fp8_e4m3", "h100_fp8_promote128"}) {
      const std::string name = model;
      CAPTURE(name);
      compare_on(*gpu, policy(R"({"preset": "fp32", "inner": {"fused": ")" + name + R"("}})"), s, a, b, 43, true);
    }
  }
  SUBCASE("NaN and infinities; fp16 results that overflow, and infinite running sums") {
    auto a = values(s.m * s.k, 51, 512.0), b = values(s.k * s.n, 52, 512.0);
    a[3 * s.k + 40] = inf;
    a[65 * s.k + 150] = -inf;
    b[7 * s.n + 2] = nan;
    b[190 * s.n + 65] = inf;
    for (const char* model : {"l40s_fp8_e4m3_out16", "h100_fp16_out16", "h100_fp8_e4m3_out16", "h100_fp8_e4m3",
                              "h100_fp8_promote128"}) {
      const std::string name = model;
      CAPTURE(name);
      compare_on(*gpu, policy(R"({"preset": "fp32", "a": {"format": "fp16"}, "b": {"format": "fp16"},
          "inner": {"fused": ")" + name + R"("}})"), s, a, b, 53, true);
    }
  }
  SUBCASE("whole K-tiles of zeros, zero rows and columns, tiny values") {
    auto a = values(s.m * s.k, 61, 2.0), b = values(s.k * s.n, 62, 2.0);
    for (size_t i = 0; i < s.m; ++i)
      for (size_t k = 0; k < s.k; ++k)
        if (k / 32 % 2 == 0 || i == 5) a[i * s.k + k] = (k & 1) ? -0.0 : 0.0;
    for (size_t k = 0; k < s.k; ++k) {
      b[k * s.n + 9] = 0.0;
      b[k * s.n + 10] *= 0x1p-20;
    }
    for (const char* model : {"h100_fp8_e4m3", "h100_fp8_promote128", "l40s_fp8_e5m2", "a100_fp16"}) {
      const std::string name = model;
      CAPTURE(name);
      compare_on(*gpu, policy(R"({"preset": "fp32", "a": {"format": "fp16"}, "b": {"format": "fp16"},
          "inner": {"fused": ")" + name + R"("}})"), s, a, b, 63, true);
    }
  }
}

TEST_CASE("cuda: the fast kernel runs where it applies; overflow falls back to the general kernel") {
  auto gpu = make_backend("cuda");
  CHECK(compare(*gpu, *find_matmul_preset("mxfp8_e4m3"), {300, 512, 200}, 1, 4.0, false));
  CHECK(compare(*gpu, *find_matmul_preset("fp32"), {130, 77, 129}, 2, 4.0, false));
  // fp32 operands near the top of the range: sums overflow, only the general kernel models that.
  CHECK_FALSE(compare(*gpu, *find_matmul_preset("fp32"), {16, 64, 16}, 3, 1e38, false));
}

namespace {

// Operands spanning 2^-12..2^12 around their seeds' values, so that the groups' alignment and
// truncation matter and the per-tensor scale sends the smallest to E4M3's subnormals and to zero.
std::vector<double> wide_values(size_t n, uint64_t seed) {
  std::vector<double> v = values(n, seed, 2.0);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(v[i], static_cast<int>(random_u32(seed, 99, i) % 25) - 12);
  return v;
}

size_t bit_identical(const std::vector<double>& x, const std::vector<double>& y) {
  size_t same = 0;
  for (size_t i = 0; i < x.size(); ++i) same += std::memcmp(&x[i], &y[i], sizeof(double)) == 0;
  return same;
}

// The policy that describes cuBLASLt's FP8 GEMM on Hopper, for the algorithm it ran, as measured on
// an H200 (2026-12-04): the h100_fp8_e4m3 model over 128-product blocks added in fp32 (fast
// accumulation off: the promotion CUTLASS and cuBLAS are documented to do), or over all of K
// (fast accumulation on). Where the heuristic split K into S parts, each part is ceil(T/S) of the
// T = K/128 tiles, accumulated apart, and the parts' fp32 results are added in order: the outer
// sum's splitk:S order over the 128-blocks, or with fast accumulation one block per part.
MatmulPolicy hopper_fp8_policy(bool fast_accum, const NativeFp8Algorithm& algo, size_t k) {
  const size_t parts = static_cast<size_t>(std::max(algo.splitk, 1)), tiles = k / 128;
  std::string inner = R"("inner": {"fused": "h100_fp8_e4m3", "promote_every": )", outer;
  if (!fast_accum) {
    inner += "128}";
    outer = R"(, "outer": {"order": "splitk:)" + std::to_string(parts) + "\"}";
  } else {
    inner += std::to_string(parts > 1 ? 128 * ((tiles + parts - 1) / parts) : 0) + "}";
  }
  return parse_matmul_policy(nlohmann::json::parse(R"({"preset": "fp8_tensor_e4m3", )" + inner + outer + "}"));
}

}  // namespace

// Hopper only: Ada and Blackwell are other models. The last two shapes are ones where cuBLASLt's
// heuristic splits K on an H200 (into 3 and 6 parts); the others are not split.
TEST_CASE("cuda-native: on Hopper, cuBLASLt's FP8 GEMM gives the h100_fp8 model's bits, split K included") {
  const int cc = native_fp8_compute_capability();
  const bool hopper = cc / 10 == 9;
  if (!hopper) MESSAGE("compute capability " << cc << ": not Hopper, agreement is reported, not asserted");
  const Shape shapes[] = {{64, 256, 48}, {256, 1024, 192}, {128, 4096, 64}, {512, 512, 512},
                          {32, 8192, 32}, {16, 16384, 64}};
  for (const bool fast_accum : {false, true}) {
    auto native = make_backend(fast_accum ? "cuda-native-fastacc" : "cuda-native");
    CHECK(native->supports(hopper_fp8_policy(fast_accum, {}, 256)));
    CHECK_FALSE(native->supports(*find_matmul_preset("mxfp8_e4m3")));
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      const std::vector<double> a = wide_values(s.m * s.k, 70 + si), b = wide_values(s.k * s.n, 80 + si);
      const MatView av{a.data(), s.m, s.k, s.k, false}, bv{b.data(), s.k, s.n, s.n, false};
      std::vector<double> c_hw(s.m * s.n), c_sim(s.m * s.n);
      MatmulContext ctx;
      // The policy only decides the operands' quantization here; the algorithm decides the rest.
      native->matmul(av, bv, c_hw.data(), s.n, hopper_fp8_policy(fast_accum, {}, s.k), ctx);
      const NativeFp8Algorithm algo = native_fp8_last_algorithm(*native);
      const MatmulPolicy sim = hopper_fp8_policy(fast_accum, algo, s.k);
      matmul(av, bv, c_sim.data(), s.n, sim, ctx);
      const size_t same = bit_identical(c_hw, c_sim);
      std::printf("%s, %zux%zux%zu (algo %d, tile %d, splitk %d, reduction %d): %zu / %zu bit-identical to the "
                  "model with promote_every %d, outer order %s\n",
                  native->name(), s.m, s.k, s.n, algo.id, algo.tile, algo.splitk, algo.reduction, same, c_hw.size(),
                  sim.inner.promote_every, policy_to_json(sim)["outer"]["order"].get<std::string>().c_str());
      CAPTURE(fast_accum);
      CAPTURE(si);
      CHECK(algo.id >= 0);
      if (hopper) CHECK(same == c_hw.size());
    }
  }
}
