// The CUDA quantizer on a real device against the CPU's quantize_into: values, block scales, tensor
// scale, every QuantStats field and the delayed-scaling state, for every scaling kind (none, tensor,
// delayed over several steps, MX block with every exponent rule and an offset, 1-D and 2-D, tile,
// NVFP4, Hadamard), rne/rtz/sr, IEEE overflow, flushing, inputs with zeros, subnormals, huge values,
// NaN and inf, both storage orders, shapes large enough for many thread blocks (the kernels' warp
// reductions and atomics). Then the matmul: cuda with device quantization against the CPU engine
// and against cuda with CPU quantization, telemetry included.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>
#include <string>
#include <vector>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/random.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"
#include "../quant_check.h"

using namespace drift;
using namespace drift::testing;

namespace {

struct Shape {
  size_t rows, k;
};
const Shape kShapes[] = {{1, 1}, {3, 33}, {17, 45}, {0, 5}, {4, 0}, {130, 257}, {301, 1000}};

// On the CUDA emulator (ctest's gpu_cuda_emulated sets DRIFT_GPU_TESTS_EMULATED) the 301 x 1000 shape
// is left to a device: each emulated thread pays ~60 fiber switches for its warp reductions, and
// 130 x 257 already spreads every kernel over 131 blocks.
bool left_to_device(const Shape& s) { return std::getenv("DRIFT_GPU_TESTS_EMULATED") && s.rows * s.k > 100000; }

void check_quantizer(const std::string& name, const Quantizer& qz, int steps = 1) {
  for (size_t si = 0; si < std::size(kShapes); ++si)
    for (int variant = 0; variant < 8; ++variant) {
      const bool transposed = variant & 1, specials = variant & 2, want_float = variant & 4;
      const Shape s = kShapes[si];
      if (left_to_device(s)) continue;
      CAPTURE(name);
      CAPTURE(si);
      CAPTURE(variant);
      DelayedState cpu_state, gpu_state;
      for (int step = 0; step < steps; ++step) {
        CAPTURE(step);
        const uint64_t seed = 100 * si + 10 * variant + step;
        const StoredOperand stored = stored_operand(s.rows, s.k, transposed, 5, seed, specials, false);
        const StridedInput x = stored.view();
        QuantizedOperand want, got;
        quantize_into(want, x, s.rows, s.k, qz, seed + 1, seed * 977, &cpu_state);
        cuda_quantize(got, x, s.rows, s.k, qz, seed + 1, seed * 977, &gpu_state, want_float);
        CHECK(got.in_float == (want_float && fits_float(qz.format)));
        check_same_operand(got, want);
        check_same_state(gpu_state, cpu_state);
      }
    }
}

}  // namespace

TEST_CASE("cuda quantizer equals quantize_into: no, tensor and delayed scaling") {
  for (const char* f : {"fp8_e4m3", "fp4_e2m1", "bf16", "fp32", "fp64", "int8", "e8m0"})
    check_quantizer(std::string("none ") + f, make_quantizer(f, ScaleKind::none));
  Quantizer q = make_quantizer("fp8_e5m2", ScaleKind::none);
  q.round.overflow = Overflow::ieee;
  q.round.mode = Rounding::sr;
  check_quantizer("none e5m2 sr ieee", q);
  q = make_quantizer("fp16", ScaleKind::none);
  q.round.subnormals = Subnormals::flush;
  q.round.mode = Rounding::rtz;
  check_quantizer("none fp16 flush rtz", q);
  check_quantizer("tensor e4m3", make_quantizer("fp8_e4m3", ScaleKind::tensor));
  q = make_quantizer("fp8_e4m3", ScaleKind::tensor);
  q.scaling.margin = 1;
  q.scaling.pow2 = true;
  q.round.mode = Rounding::sr;
  check_quantizer("tensor e4m3 margin pow2 sr", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::delayed);
  q.scaling.history = 3;
  check_quantizer("delayed e4m3", q, 4);
  q.scaling.algo = AmaxAlgo::most_recent;
  check_quantizer("delayed e4m3 most recent", q, 3);
}

TEST_CASE("cuda quantizer equals quantize_into: blocks, tiles, NVFP4, Hadamard") {
  for (ExpRule rule : {ExpRule::floor, ExpRule::rceil, ExpRule::ceil, ExpRule::even}) {
    Quantizer q = make_quantizer("fp8_e4m3", ScaleKind::block);
    q.scaling.rule = rule;
    q.scaling.offset = rule == ExpRule::floor ? 1 : 0;
    check_quantizer(std::string("mx e4m3 ") + to_string(rule), q);
  }
  Quantizer q = make_quantizer("fp4_e2m1", ScaleKind::block);
  q.round.mode = Rounding::sr;
  check_quantizer("mx fp4 sr", q);
  q = make_quantizer("fp8_e5m2", ScaleKind::block, 16);
  q.scaling.two_d = true;
  q.round.overflow = Overflow::ieee;
  check_quantizer("mx e5m2 2-D 16 ieee", q);
  check_quantizer("tile e4m3 128", make_quantizer("fp8_e4m3", ScaleKind::tile, 128));
  q = make_quantizer("fp8_e4m3", ScaleKind::tile, 128);
  q.scaling.two_d = true;
  q.scaling.pow2 = true;
  check_quantizer("tile e4m3 2-D 128 pow2", q);
  check_quantizer("nvfp4", make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16));
  q = make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16);
  q.round.mode = Rounding::sr;
  q.scaling.hadamard = 16;
  q.scaling.hadamard_seed = 3;
  check_quantizer("nvfp4 sr hadamard 16", q);
  q = make_quantizer("fp8_e4m3", ScaleKind::block);
  q.scaling.hadamard = 32;
  check_quantizer("mx e4m3 hadamard 32", q);
}

TEST_CASE("cuda matmul with device quantization equals the CPU engine and CPU-quantized cuda") {
  auto on_device = make_cuda_backend(false, false, true);
  auto on_host = make_cuda_backend(false, false, false);
  const char* policies[] = {
      R"({"preset": "mxfp8_e4m3"})",
      R"({"preset": "nvfp4"})",
      R"({"preset": "fp8_tensor_e4m3"})",
      R"({"preset": "mxfp8_e4m3", "a": {"rounding": "sr", "scaling": {"two_d": true}}, "b": {"rounding": "sr"}})",
      R"({"preset": "fp8_tensor_e4m3", "a": {"scaling": {"kind": "delayed", "history": 4}},
          "b": {"scaling": {"kind": "delayed", "history": 4}}})",
      R"({"preset": "mxfp8_e4m3", "inner": {"format": "bf16", "order": "pairwise"}})",
  };
  for (const char* json : policies) {
    const MatmulPolicy p = parse_matmul_policy(nlohmann::json::parse(json), "test");
    for (const auto& [m, k, n] : {std::tuple<size_t, size_t, size_t>{3, 33, 5}, {129, 70, 131}, {200, 257, 64}}) {
      DelayedState cpu_a, cpu_b, dev_a, dev_b, host_a, host_b;
      for (int step = 0; step < 3; ++step) {  // delayed histories carried across calls
        CAPTURE(json);
        CAPTURE(m);
        CAPTURE(step);
        const auto a = quantizer_inputs(m * k, 40 + step, false, false), b = quantizer_inputs(k * n, 50 + step, false, false);
        const MatView av{a.data(), m, k, k, false}, bv{b.data(), k, n, k, true};  // B stored transposed (k x n, n rows of k)
        std::vector<double> c_cpu(m * n), c_dev(m * n, 7.0), c_host(m * n, 7.0);
        MatmulContext ctx;
        ctx.seed = 9 + step;
        ctx.stream = 1234 + step;
        ctx.delayed_a = &cpu_a, ctx.delayed_b = &cpu_b;
        const MatmulTelemetry tc = matmul(av, bv, c_cpu.data(), n, p, ctx);
        ctx.delayed_a = &dev_a, ctx.delayed_b = &dev_b;
        const MatmulTelemetry td = on_device->matmul(av, bv, c_dev.data(), n, p, ctx);
        ctx.delayed_a = &host_a, ctx.delayed_b = &host_b;
        const MatmulTelemetry th = on_host->matmul(av, bv, c_host.data(), n, p, ctx);
        CHECK(std::memcmp(c_cpu.data(), c_dev.data(), c_cpu.size() * sizeof(double)) == 0);
        CHECK(std::memcmp(c_cpu.data(), c_host.data(), c_cpu.size() * sizeof(double)) == 0);
        check_same_stats(td.a, tc.a);
        check_same_stats(td.b, tc.b);
        check_same_stats(th.a, tc.a);
        check_same_stats(th.b, tc.b);
        CHECK(td.inner_adds == tc.inner_adds);
        CHECK(td.outer_adds == tc.outer_adds);
        CHECK(td.fast_path == th.fast_path);
        check_same_state(dev_a, cpu_a);
        check_same_state(dev_b, cpu_b);
      }
    }
  }
}
