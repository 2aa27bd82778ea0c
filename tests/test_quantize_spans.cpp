// 1-D block scaling quantizes rows that lie one after another in memory (row stride k, whole
// blocks) in spans of several rows: one block-amax pass and as few cast calls as the blocks allow,
// across row ends; short float rows apart in memory are copied together into such spans. Spans are
// a speed change only: the same operand as doubles stored with padded rows (read one row at a time,
// the path the oracles check) must give the same values, block scales, stats and, under stochastic
// rounding, the same random word for every element. The inputs include NaN/inf blocks, blocks
// whose scaled values fall below fp32's normal range (the element path) and values that clip; the
// shapes include a last span shorter than the others, a row longer than a span, and an operand
// large enough for a parallel pass.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "arith/parallel.h"
#include "quant_check.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_quantize_spans {

using namespace drift;
using namespace drift::testing;

namespace {

struct Case {
  std::string name;
  Quantizer q;
};

std::vector<Case> span_cases() {
  std::vector<Case> c;
  c.push_back({"mxfp8 e4m3 rne", make_quantizer("fp8_e4m3", ScaleKind::block)});
  Case sr{"mxfp8 e4m3 sr", make_quantizer("fp8_e4m3", ScaleKind::block)};
  sr.q.round.mode = Rounding::sr;
  c.push_back(sr);
  Case rceil{"mxfp8 e5m2 rceil", make_quantizer("fp8_e5m2", ScaleKind::block)};
  rceil.q.scaling.rule = ExpRule::rceil;
  c.push_back(rceil);
  c.push_back({"mxfp4 e2m1", make_quantizer("fp4_e2m1", ScaleKind::block)});
  c.push_back({"nvfp4 (two-level, counted apart)", make_quantizer("fp4_e2m1", ScaleKind::nvfp4, 16)});
  c.push_back({"tile e4m3 (128)", make_quantizer("fp8_e4m3", ScaleKind::tile, 128)});
  return c;
}

// The stats of the quantization, which the caller sums over shapes.
template <typename T>
QuantStats check_spans(const Quantizer& q, size_t rows, size_t k, uint64_t seed) {
  // The same values three ways: T rows adjoining (stride k), T rows padded by 3 unused values, and
  // the padded rows as doubles, which are read one row at a time (float rows apart in memory are
  // copied together into spans: the doubles keep the reference independent of that).
  const StoredOperand padded = stored_operand(rows, k, false, 3, seed, true, std::is_same_v<T, float>);
  std::vector<T> adjoining(rows * k), spaced(padded.data.begin(), padded.data.end());
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < k; ++c) adjoining[r * k + c] = static_cast<T>(padded.data[r * padded.ld + c]);
  QuantizedOperand by_spans, by_spaced_spans, by_rows;
  quantize_into(by_spans, StridedInputOf<T>{adjoining.data(), k, 1}, rows, k, q, seed, 9);
  quantize_into(by_spaced_spans, StridedInputOf<T>{spaced.data(), padded.ld, 1}, rows, k, q, seed, 9);
  quantize_into(by_rows, StridedInput{padded.data.data(), padded.ld, 1}, rows, k, q, seed, 9);
  check_same_operand(by_spans, by_rows);
  check_same_operand(by_spaced_spans, by_rows);
  return by_rows.stats;
}

}  // namespace

TEST_CASE("quantize: rows in spans give what rows one at a time give") {
  const size_t large_rows = kParallelMinElements / 256 + 16;
  const struct {
    size_t rows, k;
  } shapes[] = {{1, 64}, {7, 96}, {100, 128}, {3, 8192}, {large_rows, 256}};
  REQUIRE(worth_threads_elements(shapes[4].rows * shapes[4].k));
  uint64_t seed = 40;
  for (const Case& c : span_cases()) {
    CAPTURE(c.name);
    QuantStats seen;
    for (const auto& s : shapes) {
      if (s.k % static_cast<size_t>(c.q.scaling.block) != 0) continue;
      CAPTURE(s.rows);
      CAPTURE(s.k);
      seen.merge(check_spans<float>(c.q, s.rows, s.k, ++seed));
      seen.merge(check_spans<double>(c.q, s.rows, s.k, ++seed));
    }
    // The inputs reached what a span must keep: NaN blocks, values that flush and, under OCP's floor
    // rule (which can put a block's largest values past the format's top), values that clip.
    CHECK(seen.nonfinite > 0);
    CHECK(seen.flushed > 0);
    if (c.q.scaling.kind == ScaleKind::block && c.q.scaling.rule == ExpRule::floor) CHECK(seen.clipped > 0);
  }
}

}  // namespace test_quantize_spans
