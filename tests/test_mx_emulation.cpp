// microxcaling emulation (scaling.emulate): the float32-log2 exponent model on hand-derived cases
// and against long double, the policy JSON, and the routes (SIMD cast, element path, the CUDA
// quantizer's steps) agreeing bit for bit. The exhaustive check against exact fractions is
// scripts/oracle_microxcaling.py (ctest script_oracle_microxcaling).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/log2_fp32.h"
#include "arith/quantize.h"
#include "backend/quantize_plan.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"
#include "quant_check.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_mx_emulation {

using namespace drift;
using namespace drift::testing;
using nlohmann::json;

namespace {

bool same_bits_all(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

int rn32_floor(double a) { return floor_log2_rn_fp32(a, log2_fp32_table()); }

Quantizer quantizer_of(const char* text) { return parse_quantizer(json::parse(text), "quantizer"); }

}  // namespace

TEST_CASE("float32 log2: one binade up just below a power of two, by hand") {
  // 16 - 2^-20 = 16 (1 - 2^-24): log2 = 4 - 2^-24 / ln 2 = 4 - 8.6e-8. The float32 spacing below 4 is
  // 2^-22 = 2.4e-7, so the nearest float32 is 4 itself: floor 4, where floor(log2) is 3.
  CHECK(rn32_floor(16 - 0x1p-20) == 4);
  // 8 - 2^-21: log2 = 3 - 8.6e-8; the spacing around 3 is 2^-22, half 1.2e-7: rounds to 3.
  CHECK(rn32_floor(8 - 0x1p-21) == 3);
  // 2 - 2^-23: log2 = 1 - 8.6e-8; below 1 the spacing is 2^-24 = 6e-8, half 3e-8: stays below 1.
  CHECK(rn32_floor(2 - 0x1p-23) == 0);
  CHECK(rn32_floor(1.0) == 0);
  CHECK(rn32_floor(0x1p-7) == -7);
  // L = -10: float32s just below -10 are 2^-20 apart, so log2 rounds up to -10 when
  // log2 m > 1 - 2^-21, i.e. m > 2^(1 - 2^-21) = 2 - 2^-20 ln 2 (1 + O(2^-21)) = 2 - 5.545 * 2^-23:
  // m = 2 - 5 * 2^-23 rounds up, m = 2 - 6 * 2^-23 does not.
  CHECK(rn32_floor(0x1p-11 * (2 - 5 * 0x1p-23)) == -10);
  CHECK(rn32_floor(0x1p-11 * (2 - 6 * 0x1p-23)) == -11);
  // Just below 1 (L = 0) float32 is dense: never rounds up.
  CHECK(rn32_floor(1 - 0x1p-53) == -1);
  // Subnormal doubles and the top of the range.
  CHECK(rn32_floor(0x1p-1074) == -1074);
  CHECK(rn32_floor(0x1.fffffffffffffp1023) == 1024);
}

TEST_CASE("float32 log2: each threshold against long double log2") {
  // The table's S is the first significand whose log2 exceeds 1 - 2^-k; long double log2l (64-bit
  // significand, error ~1e-19 near 1) must agree on S and S - 1, which straddle it by ~1e-16.
  const Log2Fp32Table& t = log2_fp32_table();
  for (int k = Log2Fp32Table::kMin; k <= Log2Fp32Table::kMax; ++k) {
    CAPTURE(k);
    const uint64_t s = t.up[k - Log2Fp32Table::kMin];
    const long double bound = 1.0L - std::ldexp(1.0L, -k);
    const long double above = std::log2(std::ldexp(static_cast<long double>(s), -52)) - bound;
    const long double below = std::log2(std::ldexp(static_cast<long double>(s - 1), -52)) - bound;
    CHECK(above > 1e-18L);
    CHECK(below < -1e-18L);
  }
}

TEST_CASE("emulate: JSON fields, defaults left out, errors at their path") {
  const Quantizer q = quantizer_of(
      R"({"format": "fp8_e4m3", "rounding": "rna", "scaling": {"kind": "block", "emulate": {"exponent": "log2_fp32", "scale_bits": 16, "zero": "positive", "nearest_sum": "fp32"}}})");
  CHECK(q.scaling.emulate.exponent == ExpSource::log2_fp32);
  CHECK(q.scaling.emulate.scale_bits == 16);
  CHECK(q.scaling.emulate.positive_zero);
  CHECK(q.scaling.emulate.nearest_sum_fp32);
  const json back = quantizer_to_json(q);
  CHECK(back["scaling"]["emulate"] ==
        json::parse(R"({"exponent": "log2_fp32", "scale_bits": 16, "zero": "positive", "nearest_sum": "fp32"})"));
  CHECK(quantizer_to_json(parse_quantizer(back, "q")) == back);
  // Off: no key, so every existing quantizer's resolved form is unchanged.
  CHECK_FALSE(quantizer_to_json(quantizer_of(R"("mxfp8_e4m3")"))["scaling"].contains("emulate"));
  // The presets: all of microxcaling's Python-path departures on.
  for (const char* name : {"mxfp8_e4m3_microxcaling", "mxfp8_e5m2_microxcaling.b"}) {
    const Quantizer p = *find_quantizer_preset(name);
    CHECK(p.round.mode == Rounding::rna);
    CHECK(p.round.overflow == Overflow::saturate);
    CHECK(p.scaling.emulate.exponent == ExpSource::log2_fp32);
    CHECK(p.scaling.emulate.scale_bits == 16);
    CHECK_FALSE(p.scaling.emulate.positive_zero);
    CHECK(p.scaling.emulate.nearest_sum_fp32);
  }
  auto path_of = [](const char* text) {
    try {
      parse_matmul_policy(json::parse(text), "m");
    } catch (const ConfigError& e) {
      return e.path + ": " + e.message;
    }
    return std::string("no error");
  };
  CHECK(path_of(R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "block", "emulate": {"exponent": "log2"}}}})") ==
        "m.a.scaling.emulate.exponent: unknown exponent source 'log2' (expected exact|log2_fp32)");
  CHECK(path_of(R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "block", "emulate": {"scale_bits": 1}}}})") ==
        "m.a.scaling.emulate.scale_bits: expected 0 (an E8M0 scale) or 2..30, got 1");
  CHECK(path_of(R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "block", "emulate": {"zeros": "positive"}}}})")
            .rfind("m.a.scaling.emulate.zeros", 0) == 0);
  CHECK(path_of(R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "tensor", "emulate": {"zero": "positive"}}}})")
            .find("microxcaling's departures apply to block (MX) scaling only") != std::string::npos);
  CHECK(path_of(R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "block", "rule": "rceil", "emulate": {"exponent": "log2_fp32"}}}})")
            .find("it needs rule floor") != std::string::npos);
  CHECK(path_of(R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "block", "emulate": {"nearest_sum": "fp32"}}}})")
            .find("it needs rounding rna") != std::string::npos);
  CHECK(path_of(R"({"a": {"format": "fp8_e4m3", "scaling": {"kind": "block", "emulate": {"nearest_sum": "float"}}}})") ==
        "m.a.scaling.emulate.nearest_sum: unknown nearest-rounding sum 'float' (expected exact|fp32)");
}

TEST_CASE("emulate: the SIMD cast, the element path and the CUDA quantizer's steps agree") {
  // Float rows whose block amaxes sit just below powers of two (where the float32 log2 moves the
  // scale) and elsewhere. The exponent alone keeps the SIMD cast; adding scale_bits 30 (the same
  // scales for these magnitudes, exact float32 dequantisation) routes the elements one by one.
  const size_t rows = 16, k = 96;
  std::vector<float> x(rows * k);
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < x.size(); ++i) {
    const int e = static_cast<int>(rng() % 40) - 20;
    float v = std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, e);
    if (i % 32 == 5) v = std::nextafter(std::ldexp(1.0f, e + 25), 0.0f) * (rng() % 2 ? 1.0f : -1.0f);
    x[i] = v;
  }
  const Quantizer simd = quantizer_of(
      R"({"format": "fp8_e4m3", "rounding": "rna", "scaling": {"kind": "block", "emulate": {"exponent": "log2_fp32"}}})");
  const Quantizer elem = quantizer_of(
      R"({"format": "fp8_e4m3", "rounding": "rna", "scaling": {"kind": "block", "emulate": {"exponent": "log2_fp32", "scale_bits": 30}}})");
  QuantizedOperand a, b;
  quantize_into(a, StridedInputF{x.data(), k, 1}, rows, k, simd, 1, 2);
  quantize_into(b, StridedInputF{x.data(), k, 1}, rows, k, elem, 1, 2);
  a.widen();
  b.widen();
  CHECK(same_bits_all(a.q, b.q));
  CHECK(same_bits_all(a.block_scale, b.block_scale));
  check_same_stats(a.stats, b.stats);
  // The scales moved somewhere: the OCP quantizer differs on the blocks led by 2^m - ulp.
  QuantizedOperand ocp;
  Quantizer plain = simd;
  plain.scaling.emulate = MxEmulation{};
  quantize_into(ocp, StridedInputF{x.data(), k, 1}, rows, k, plain, 1, 2);
  CHECK_FALSE(same_bits_all(ocp.block_scale, a.block_scale));
  // The CUDA quantizer's steps (run on the host): the exponent option through block_scale_of.
  std::vector<double> xd(x.begin(), x.end());
  QuantizedOperand staged, cpu;
  run_quantize_plan_host(staged, StridedInput{xd.data(), k, 1}, rows, k, simd, 1, 2, nullptr, false);
  quantize_into(cpu, StridedInput{xd.data(), k, 1}, rows, k, simd, 1, 2);
  CHECK(same_bits_all(staged.q, cpu.q));
  CHECK(same_bits_all(staged.block_scale, cpu.block_scale));
  // The element step is the host quantizer's only: the steps refuse it (the CUDA backend then
  // quantizes that operand with quantize_into).
  CHECK_THROWS_AS(run_quantize_plan_host(staged, StridedInput{xd.data(), k, 1}, rows, k, elem, 1, 2, nullptr, false),
                  std::invalid_argument);
}

}  // namespace test_mx_emulation
