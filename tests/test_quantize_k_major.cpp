// quantize_into with allow_k_major: a float operand stored k-major (B stored K x N) is quantized in
// its own order and left so, or, where the quantizer or the data does not allow it, in the usual
// order. Either way the values (read through value(), and after to_row_major()), block scales,
// stats and delayed state must be those of the usual order, which the oracles check; and the k-major
// order must really be taken where it is allowed, and declined where it is not (a NaN/inf block,
// stochastic rounding, a Hadamard transform, 2-D blocks, a multiplier that is not a power of two).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "arith/parallel.h"
#include "quant_check.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_quantize_k_major {

using namespace drift;
using namespace drift::testing;

namespace {

struct Case {
  std::string name;
  Quantizer q;
  bool k_major;  // whether clean data (no NaN/inf) is quantized k-major
};

std::vector<Case> k_major_cases() {
  std::vector<Case> c;
  c.push_back({"none e4m3", make_quantizer("fp8_e4m3", ScaleKind::none), true});
  c.push_back({"tensor e4m3", make_quantizer("fp8_e4m3", ScaleKind::tensor), true});
  c.push_back({"delayed e5m2", make_quantizer("fp8_e5m2", ScaleKind::delayed), true});
  c.push_back({"mxfp8 e4m3", make_quantizer("fp8_e4m3", ScaleKind::block), true});
  Case rceil{"mxfp8 e5m2 rceil", make_quantizer("fp8_e5m2", ScaleKind::block), true};
  rceil.q.scaling.rule = ExpRule::rceil;
  c.push_back(rceil);
  c.push_back({"mxfp4", make_quantizer("fp4_e2m1", ScaleKind::block), true});
  c.push_back({"bf16 (no scaling)", make_quantizer("bf16", ScaleKind::none), true});
  // nvfp4's block scales are E4M3 values, not powers of two; tile's are fp32 (pow2 off): declined.
  c.push_back({"nvfp4", make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16), false});
  c.push_back({"tile e4m3", make_quantizer("fp8_e4m3", ScaleKind::tile, 128), false});
  Case tile_pow2{"tile e4m3 pow2, block 32", make_quantizer("fp8_e4m3", ScaleKind::tile, 32), true};
  tile_pow2.q.scaling.pow2 = true;
  c.push_back(tile_pow2);
  Case sr{"mxfp8 e4m3 sr", make_quantizer("fp8_e4m3", ScaleKind::block), false};
  sr.q.round.mode = Rounding::sr;
  c.push_back(sr);
  Case had{"mxfp4 hadamard", make_quantizer("fp4_e2m1", ScaleKind::block), false};
  had.q.scaling.hadamard = 32;
  had.q.scaling.hadamard_seed = 3;
  c.push_back(had);
  Case two_d{"mxfp8 2-D", make_quantizer("fp8_e4m3", ScaleKind::block), false};
  two_d.q.scaling.two_d = true;
  c.push_back(two_d);
  c.push_back({"fp64 (not in float)", make_quantizer("fp64", ScaleKind::none), false});
  return c;
}

// Finite floats of every scale but the extremes: values of 2^-60 .. 2^60 whose blocks scale exactly.
std::vector<float> clean_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = random_u32(seed, 21, i);
    const float unit = static_cast<float>(static_cast<int>(r % 2001) - 1000) / 1000.0f;
    v[i] = std::ldexp(unit, static_cast<int>((r >> 12) % 121) - 60);
  }
  return v;
}

}  // namespace

TEST_CASE("quantize k-major: the usual order's values, scales, stats and state, taken where allowed") {
  const size_t large_rows = kParallelMinElements / 256 + 16;
  const struct {
    size_t rows, k;
  } shapes[] = {{5, 70}, {33, 96}, {64, 128}, {large_rows, 256}};
  REQUIRE(worth_threads_elements(shapes[3].rows * shapes[3].k));
  uint64_t seed = 70;
  for (const Case& c : k_major_cases()) {
    CAPTURE(c.name);
    DelayedState state_k, state_u;  // carried over the calls, as a site's
    for (const auto& s : shapes)
      for (bool specials : {false, true}) {
        CAPTURE(s.rows);
        CAPTURE(s.k);
        CAPTURE(specials);
        ++seed;
        // The operand stored k-major: element (r, i) at x[i * rows + r].
        std::vector<float> x;
        if (specials) {
          const std::vector<double> d = quantizer_inputs(s.rows * s.k, seed, true, true);
          x.assign(d.begin(), d.end());
        } else {
          x = clean_floats(s.rows * s.k, seed);
        }
        const StridedInputF view{x.data(), 1, s.rows};
        QuantizedOperand k_major, usual;
        quantize_into(k_major, view, s.rows, s.k, c.q, seed, 5, &state_k, nullptr, true);
        quantize_into(usual, view, s.rows, s.k, c.q, seed, 5, &state_u, nullptr, false);
        CHECK_FALSE(usual.k_major);
        // NaN/inf among the inputs: the blocked kinds decline (a NaN block takes the element path);
        // the unblocked ones are element-wise and keep the k-major order.
        const bool blocked = c.q.scaling.kind != ScaleKind::none && c.q.scaling.kind != ScaleKind::tensor &&
                             c.q.scaling.kind != ScaleKind::delayed;
        const bool has_bad = usual.stats.nonfinite > 0;
        CHECK(k_major.k_major == (c.k_major && !(blocked && has_bad)));
        check_same_operand(k_major, usual);
        check_same_state(state_k, state_u);
        if (k_major.in_float) {
          std::vector<float> scratch;
          k_major.to_row_major(scratch);
          CHECK_FALSE(k_major.k_major);
          size_t bad = 0;
          for (size_t i = 0; i < s.rows * s.k; ++i) bad += !same_bits(k_major.qf[i], usual.qf[i]);
          CHECK(bad == 0);
        }
      }
  }
}

TEST_CASE("quantize k-major: MX blocks that are all zero, or hold subnormals, stay in the k-major order") {
  // 40 rows stored k-major, k = 96: column blocks of three kinds, each in the usual order's results.
  const size_t rows = 40, k = 96;
  std::vector<float> x = clean_floats(rows * k, 90);
  for (size_t t = 0; t < 32; ++t)
    for (size_t r = 0; r < rows; r += 3) x[t * rows + r] = (t % 2) ? -0.0f : 0.0f;  // band 0: every third row zero
  for (size_t t = 32; t < 64; ++t) x[t * rows + 7] = std::ldexp(static_cast<float>(t), -140);  // subnormal floats
  for (const char* name : {"fp8_e4m3", "fp4_e2m1"}) {
    CAPTURE(std::string(name));
    const Quantizer q = make_quantizer(name, ScaleKind::block);
    QuantizedOperand k_major, usual;
    quantize_into(k_major, StridedInputF{x.data(), 1, rows}, rows, k, q, 1, 5, nullptr, nullptr, true);
    quantize_into(usual, StridedInputF{x.data(), 1, rows}, rows, k, q, 1, 5, nullptr, nullptr, false);
    CHECK(k_major.k_major);
    check_same_operand(k_major, usual);
    CHECK(usual.stats.scale_count == rows * 3 - (rows + 2) / 3);  // the zero blocks have no exponent
  }
}

}  // namespace test_quantize_k_major
