// The CUDA quantizer's arithmetic, proven on the host: the per-thread steps the quantize kernels run
// (backend/quantize_steps.h) are driven here in the kernels' passes by run_quantize_plan_host and
// compared bit for bit with the CPU engine's quantize_into (an independent path: OpenMP regions,
// the SIMD span cast, row runs) — values, block scales, tensor scale, every QuantStats field and
// the delayed-scaling state — on inputs with zeros of both signs, subnormals, huge values, NaN and
// inf, odd shapes (rows and k not multiples of the block), both storage orders, double and float
// inputs, every scaling kind and rule, rne/rtz/sr, saturating and IEEE overflow, flushing.
// GPU tests (tests/gpu/test_cuda_quantize.cpp) then only have to show the launches run these steps.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/random.h"
#include "backend/quantize_plan.h"
#include "quant_check.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_backend_quantize {

using namespace drift;
using namespace drift::testing;

namespace {

// Totals over every case, to show the cases reach each count.
struct Coverage {
  uint64_t clipped = 0, flushed = 0, subnormal = 0, nonfinite = 0, scales = 0, nan_blocks = 0;
};
Coverage coverage;

// The shared comparison, plus the storage and the coverage totals.
void check_same(const QuantizedOperand& got, const QuantizedOperand& want) {
  CHECK(got.in_float == want.in_float);
  check_same_operand(got, want);
  for (double s : want.block_scale) coverage.nan_blocks += is_nan(s);
  const QuantStats& w = want.stats;
  coverage.clipped += w.clipped;
  coverage.flushed += w.flushed;
  coverage.subnormal += w.subnormal;
  coverage.nonfinite += w.nonfinite;
  coverage.scales += w.scale_count;
}

struct Shape {
  size_t rows, k;
};
const Shape kShapes[] = {{1, 1}, {3, 33}, {7, 64}, {5, 100}, {17, 45}, {0, 5}, {4, 0}, {9, 130}, {33, 47}, {2, 257}};

// One quantizer on every shape, both storage orders, double and float input, with and without
// NaN/inf; `steps` calls in a row carry a delayed-scaling state.
void check_quantizer(const std::string& name, const Quantizer& qz, int steps = 1) {
  for (size_t si = 0; si < std::size(kShapes); ++si)
    for (int variant = 0; variant < 8; ++variant) {
      const bool transposed = variant & 1, specials = variant & 2, from_float = variant & 4;
      const Shape s = kShapes[si];
      CAPTURE(name);
      CAPTURE(si);
      CAPTURE(variant);
      DelayedState cpu_state, host_state;
      for (int step = 0; step < steps; ++step) {
        CAPTURE(step);
        const uint64_t seed = 100 * si + 10 * variant + step;
        const StoredOperand stored = stored_operand(s.rows, s.k, transposed, 3, seed, specials, from_float);
        const StridedInput x = stored.view();
        const uint64_t qseed = seed * 7 + 1, stream = seed * 0x9e3779b97f4a7c15ull;
        QuantizedOperand want, got;
        if (from_float) {
          const std::vector<float> f(stored.data.begin(), stored.data.end());  // exact: the values are floats
          quantize_into(want, stored.view(f), s.rows, s.k, qz, qseed, stream, &cpu_state);
        } else {
          quantize_into(want, x, s.rows, s.k, qz, qseed, stream, &cpu_state);
        }
        run_quantize_plan_host(got, x, s.rows, s.k, qz, qseed, stream, &host_state, want.in_float);
        check_same(got, want);
        check_same_state(host_state, cpu_state);
      }
    }
}


}  // namespace

TEST_CASE("quantize steps equal quantize_into: no scaling, every rounding and overflow rule") {
  for (const char* f : {"fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "fp6_e3m2", "bf16", "fp16", "fp32", "fp64", "int8", "e8m0"})
    check_quantizer(std::string("none ") + f, make_quantizer(f, ScaleKind::none));
  Quantizer q = make_quantizer("fp8_e5m2", ScaleKind::none);
  q.round.overflow = Overflow::ieee;
  check_quantizer("e5m2 ieee overflow", q);
  q.round.mode = Rounding::rtz;
  check_quantizer("e5m2 rtz ieee", q);
  q = make_quantizer("fp16", ScaleKind::none);
  q.round.subnormals = Subnormals::flush;
  check_quantizer("fp16 flush", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::none);
  q.round.mode = Rounding::sr;
  check_quantizer("e4m3 sr", q);
  q.round.sr_bits = 3;
  check_quantizer("e4m3 sr 3 bits", q);
  q = make_quantizer("fp32", ScaleKind::none);
  q.round.subnormals = Subnormals::flush;
  check_quantizer("fp32 flush", q);
}

TEST_CASE("quantize steps equal quantize_into: tensor and delayed scaling") {
  check_quantizer("tensor e4m3", make_quantizer("fp8_e4m3", ScaleKind::tensor));
  Quantizer q = make_quantizer("fp8_e4m3", ScaleKind::tensor);
  q.scaling.margin = 1;
  q.scaling.pow2 = true;
  check_quantizer("tensor e4m3 margin pow2", q);
  q = make_quantizer("fp8_e5m2", ScaleKind::tensor);
  q.round.mode = Rounding::sr;
  q.round.overflow = Overflow::ieee;
  check_quantizer("tensor e5m2 sr ieee", q);
  q = make_quantizer("int8", ScaleKind::tensor);
  q.round.mode = Rounding::rtz;
  check_quantizer("tensor int8 rtz", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::tensor);
  q.scaling.amax_floor = 1e3;  // the floor decides the scale
  check_quantizer("tensor e4m3 amax floor", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::delayed);
  q.scaling.history = 3;
  check_quantizer("delayed e4m3 max of 3", q, 5);
  q.scaling.algo = AmaxAlgo::most_recent;
  q.scaling.margin = 2;
  check_quantizer("delayed e4m3 most recent", q, 4);
  q = make_quantizer("fp8_e5m2", ScaleKind::delayed);
  q.scaling.pow2 = true;
  q.round.mode = Rounding::sr;
  check_quantizer("delayed e5m2 pow2 sr", q, 3);
}

TEST_CASE("quantize steps equal quantize_into: MX blocks, every exponent rule and offset, 1-D and 2-D") {
  for (ExpRule rule : {ExpRule::floor, ExpRule::rceil, ExpRule::ceil, ExpRule::even})
    for (int offset : {0, 1, -2}) {
      Quantizer q = make_quantizer("fp8_e4m3", ScaleKind::block);
      q.scaling.rule = rule;
      q.scaling.offset = offset;
      check_quantizer(std::string("mx e4m3 ") + to_string(rule) + " " + std::to_string(offset), q);
    }
  Quantizer q = make_quantizer("fp8_e5m2", ScaleKind::block);
  q.round.overflow = Overflow::ieee;
  check_quantizer("mx e5m2 ieee", q);
  q = make_quantizer("fp4_e2m1", ScaleKind::block);
  q.round.mode = Rounding::sr;
  check_quantizer("mx fp4 sr", q);
  q = make_quantizer("fp6_e3m2", ScaleKind::block, 16);
  q.round.mode = Rounding::rtz;
  check_quantizer("mx fp6 block 16 rtz", q);
  q = make_quantizer("fp6_e2m3", ScaleKind::block, 8);
  q.scaling.two_d = true;
  check_quantizer("mx fp6_e2m3 2-D 8", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::block, 16);
  q.scaling.two_d = true;
  q.scaling.rule = ExpRule::even;
  q.round.subnormals = Subnormals::flush;
  check_quantizer("mx e4m3 2-D 16 even flush", q);
  q = make_quantizer("fp64", ScaleKind::block);
  check_quantizer("mx fp64 (no float grid)", q);
}

TEST_CASE("quantize steps equal quantize_into: tiles and NVFP4") {
  check_quantizer("tile e4m3 128", make_quantizer("fp8_e4m3", ScaleKind::tile, 128));
  Quantizer q = make_quantizer("fp8_e4m3", ScaleKind::tile, 16);
  q.scaling.pow2 = true;
  check_quantizer("tile e4m3 16 pow2", q);
  q = make_quantizer("int8", ScaleKind::tile, 32);
  q.scaling.two_d = true;
  check_quantizer("tile int8 2-D 32", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::tile, 8);
  q.scaling.two_d = true;
  q.scaling.amax_floor = 1e-3;
  q.round.mode = Rounding::sr;
  check_quantizer("tile e4m3 2-D 8 floor sr", q);
  check_quantizer("nvfp4", make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16));
  q = make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16);
  q.round.mode = Rounding::sr;
  q.scaling.two_d = true;
  check_quantizer("nvfp4 2-D sr", q);
}

TEST_CASE("quantize steps equal quantize_into: random Hadamard transform before quantizing") {
  Quantizer q = make_quantizer("fp8_e4m3", ScaleKind::block);
  q.scaling.hadamard = 32;
  q.scaling.hadamard_seed = 99;
  check_quantizer("mx e4m3 hadamard 32", q);
  q = make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16);
  q.scaling.hadamard = 16;
  q.scaling.hadamard_seed = 5;
  check_quantizer("nvfp4 hadamard 16", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::tensor);
  q.scaling.hadamard = 16;
  check_quantizer("tensor e4m3 hadamard 16", q);
}

TEST_CASE("quantize steps: the cases reach every count, and errors are the CPU's") {
  // Runs after the cases above in this file (doctest keeps file order): every count was exercised.
  CHECK(coverage.clipped > 0);
  CHECK(coverage.flushed > 0);
  CHECK(coverage.subnormal > 0);
  CHECK(coverage.nonfinite > 0);
  CHECK(coverage.scales > 0);
  CHECK(coverage.nan_blocks > 0);
  const std::vector<double> x(12, 1.0);
  QuantizedOperand out;
  CHECK_THROWS_WITH_AS(run_quantize_plan_host(out, StridedInput{x.data(), 4, 1}, 3, 4,
                                              make_quantizer("fp8_e4m3", ScaleKind::delayed), 1, 2, nullptr, false),
                       "delayed scaling needs a DelayedState", std::invalid_argument);
}

TEST_CASE("quantize steps: hand-checked MX block") {
  // One e4m3 block of 4 (floor rule): amax 10 -> floor(log2 10) = 3, emax(e4m3) = 8, so the scale is
  // 2^(3-8) = 2^-5 and the elements are x * 32 rounded to e4m3: 10*32 = 320 (1.25 * 2^8, on the grid),
  // 1*32 = 32, 0.3*32 = 9.6, where the grid step is 1 (3 mantissa bits in [8, 16)): 10; -0 stays -0.
  const std::vector<double> x = {10.0, 1.0, 0.3, -0.0};
  Quantizer q = make_quantizer("fp8_e4m3", ScaleKind::block, 4);
  QuantizedOperand out;
  run_quantize_plan_host(out, StridedInput{x.data(), 4, 1}, 1, 4, q, 0, 0, nullptr, false);
  REQUIRE(out.block_scale.size() == 1);
  CHECK(out.block_scale[0] == 0x1p-5);
  CHECK(out.q[0] == 320.0);
  CHECK(out.q[1] == 32.0);
  CHECK(out.q[2] == 10.0);
  CHECK(out.q[3] == 0.0);
  CHECK(sign_bit(out.q[3]));
  CHECK(out.stats.scale_count == 1);
  CHECK(out.stats.scale_exp_min == -5);
  CHECK(out.stats.scale_exp_sum == -5.0);
  CHECK(out.stats.amax == 10.0);
}

}  // namespace test_backend_quantize
