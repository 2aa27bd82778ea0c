// The quantizer's workspace (arith/quantize_workspace.h) is scratch memory only: one workspace
// reused over calls of growing and shrinking shapes, for every scaling kind, double and float input,
// both layouts (the transposed one goes through the staged copy), with a Hadamard transform and with
// microxcaling's element step, gives every call the values, scales, stats and delayed state of the
// same call made without one, even with everything the earlier calls left in it turned to NaN.
// The large shapes run the per-thread scratch of a parallel pass (at least kParallelMinElements).
#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "arith/parallel.h"
#include "arith/quantize_workspace.h"
#include "quant_check.h"
#include "workspace_poison.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_quantize_workspace {

using namespace drift;
using namespace drift::testing;

namespace {

using testing::poison;  // (a vector's: workspace_poison.h)

// Every value the workspace holds turned to NaN (block flags to "NaN block"): a call that read
// anything it did not write first would show it.
void poison(QuantizeWorkspace& ws) {
  poison(ws.staged);
  poison(ws.staged_f);
  poison(ws.rotated);
  for (QuantizeThreadScratch& t : ws.threads) {
    poison(t.scaled);
    poison(t.in);
    poison(t.out);
    poison(t.block_amax);
    for (uint32_t& b : t.block_bad) b = 0xffffffffu;
    for (QuantRowBlock& b : t.blocks) b = QuantRowBlock{true, true, std::numeric_limits<double>::quiet_NaN()};
  }
}

struct Case {
  std::string name;
  Quantizer q;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"none fp32", make_quantizer("fp32", ScaleKind::none)});
  c.push_back({"none e4m3", make_quantizer("fp8_e4m3", ScaleKind::none)});
  c.push_back({"tensor e4m3", make_quantizer("fp8_e4m3", ScaleKind::tensor)});
  c.push_back({"delayed e5m2", make_quantizer("fp8_e5m2", ScaleKind::delayed)});
  c.push_back({"block e4m3", make_quantizer("fp8_e4m3", ScaleKind::block)});
  Case two_d{"block 2-D e4m3 sr", make_quantizer("fp8_e4m3", ScaleKind::block)};
  two_d.q.scaling.two_d = true;
  two_d.q.round.mode = Rounding::sr;
  c.push_back(two_d);
  c.push_back({"block fp64 (no SIMD cast)", make_quantizer("fp64", ScaleKind::block)});
  c.push_back({"tile e4m3", make_quantizer("fp8_e4m3", ScaleKind::tile, 128)});
  c.push_back({"nvfp4", make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16)});
  Case had{"block e2m1 hadamard", make_quantizer("fp4_e2m1", ScaleKind::block)};
  had.q.scaling.hadamard = 32;
  had.q.scaling.hadamard_seed = 5;
  c.push_back(had);
  Case emu{"block e4m3 microxcaling scale_bits", make_quantizer("fp8_e4m3", ScaleKind::block)};
  emu.q.scaling.emulate.scale_bits = 8;
  c.push_back(emu);
  return c;
}

// One quantization with the workspace and one without, from equal delayed states; both must agree.
template <typename T>
void check_call(const Quantizer& q, size_t rows, size_t k, bool transposed, uint64_t seed, QuantizeWorkspace& ws,
                QuantizedOperand& reused, DelayedState& state) {
  const StoredOperand stored = stored_operand(rows, k, transposed, 3, seed, true, std::is_same_v<T, float>);
  const std::vector<T> values(stored.data.begin(), stored.data.end());
  const StridedInputOf<T> x = stored.view(values);
  DelayedState fresh_state = state;
  QuantizedOperand fresh;
  quantize_into(fresh, x, rows, k, q, seed, 7, &fresh_state);
  poison(ws);
  quantize_into(reused, x, rows, k, q, seed, 7, &state, &ws);
  check_same_operand(reused, fresh);
  check_same_state(state, fresh_state);
}

}  // namespace

TEST_CASE("quantize workspace: reused and poisoned, every call as without one") {
  // Large (a parallel pass), small, larger, small again: growing and shrinking.
  const size_t large_rows = kParallelMinElements / 256 + 16;
  const struct {
    size_t rows, k;
  } shapes[] = {{large_rows, 256}, {5, 96}, {large_rows + 40, 320}, {3, 40}};
  REQUIRE(worth_threads_elements(shapes[0].rows * shapes[0].k));
  REQUIRE_FALSE(worth_threads_elements(shapes[1].rows * shapes[1].k));
  for (const Case& c : cases()) {
    for (bool transposed : {false, true}) {
      CAPTURE(c.name);
      CAPTURE(transposed);
      QuantizeWorkspace ws;
      QuantizedOperand reused_d, reused_f;
      DelayedState state_d, state_f;
      uint64_t seed = 1;
      for (const auto& s : shapes) {
        CAPTURE(s.rows);
        check_call<double>(c.q, s.rows, s.k, transposed, ++seed, ws, reused_d, state_d);
        check_call<float>(c.q, s.rows, s.k, transposed, ++seed, ws, reused_f, state_f);
      }
      // The workspace was used: a parallel pass fills one scratch per thread, the staged copy
      // holds a transposed operand.
      CHECK(!ws.threads.empty());
      if (transposed && !c.q.scaling.hadamard) CHECK(ws.staged.size() >= shapes[2].rows * shapes[2].k);
      if (c.q.scaling.hadamard) CHECK(ws.rotated.size() >= shapes[2].rows * shapes[2].k);
    }
  }
}

}  // namespace test_quantize_workspace
