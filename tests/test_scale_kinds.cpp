// The scaling-kind table (arith/scale_kinds.h): its invariants (names unique and parsed back,
// defaults the presets use, predicates that agree with each other), and that each row's claims
// are what the quantizer does with that kind. The texts and errors built from the table are pinned
// to the wording they had when each kind was a switch case (written out here by hand).
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/quantize.h"
#include "arith/scale_kinds.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"
#include "policy/site_rules.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_scale_kinds {

using namespace drift;
using nlohmann::json;

namespace {

Quantizer quantizer_of(const char* format, ScaleKind kind) {
  Quantizer q;
  q.format = *find_format(format);
  q.scaling.kind = kind;
  q.scaling.block = scale_kind_traits(kind).default_block;
  return q;
}

// rows x k values in [-3, 3], no zero block (every block has a scale to count).
std::vector<double> operand(size_t rows, size_t k) {
  std::vector<double> x(rows * k);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (static_cast<double>(i % 13) - 6.0) / 2.0 + 0.25;
  return x;
}

}  // namespace

TEST_CASE("scale kinds: one row per kind, names unique and parsed back") {
  std::set<std::string> names;
  std::string choices;
  for (size_t i = 0; i < kScaleKindCount; ++i) {
    const ScaleKindTraits& t = kScaleKinds[i];
    CAPTURE(t.name);
    CHECK(static_cast<size_t>(t.kind) == i);
    CHECK(names.insert(t.name).second);
    CHECK(std::string(to_string(t.kind)) == t.name);
    ScaleKind parsed = ScaleKind::none;
    REQUIRE(parse_scale_kind(t.name, &parsed));
    CHECK(parsed == t.kind);
    if (i) choices += '|';
    choices += t.name;
  }
  CHECK(kScaleKindCount == 6);
  CHECK(std::string(scale_kind_choices()) == "none|tensor|delayed|block|tile|nvfp4");
  CHECK(std::string(scale_kind_choices()) == choices);
  ScaleKind k = ScaleKind::tile;
  CHECK_FALSE(parse_scale_kind("blocks", &k));
  CHECK_FALSE(parse_scale_kind("Block", &k));
  CHECK_FALSE(parse_scale_kind("", &k));
  CHECK(k == ScaleKind::tile);  // untouched on failure
}

TEST_CASE("scale kinds: the predicates agree with each other") {
  for (const ScaleKindTraits& t : kScaleKinds) {
    CAPTURE(t.name);
    CHECK(t.default_block >= 1);
    if (!t.blocked()) CHECK(t.default_block == Scaling{}.block);  // unused: Scaling's own default
    if (t.two_level()) CHECK(t.needs_tensor_amax());               // the block scales sit under it
    if (t.keeps_history()) CHECK_FALSE(t.needs_tensor_amax());     // the history gives the scale
    if (t.needs_float_elements) CHECK(t.blocked());
    if (t.fold_element_bits) CHECK(t.blocked());
    if (t.block_in_format) CHECK(t.blocked());
    if (t.native_fp8) CHECK_FALSE(t.blocked());  // cuBLASLt's FP8 GEMM: one scale per tensor
    CHECK(std::string(t.scale_format).empty() == !t.scaled());
  }
  CHECK_FALSE(scale_kind_traits(ScaleKind::none).scaled());
  CHECK(scale_kind_traits(ScaleKind::nvfp4).two_level());
}

TEST_CASE("scale kinds: a kind chosen in JSON starts from its default block, the block every preset uses") {
  for (const ScaleKindTraits& t : kScaleKinds) {
    CAPTURE(t.name);
    const Quantizer q = parse_quantizer(json{{"format", "fp8_e4m3"}, {"scaling", {{"kind", t.name}}}}, "q");
    CHECK(q.scaling.kind == t.kind);
    CHECK(q.scaling.block == t.default_block);
  }
  // Every blocked kind appears in some preset, and every preset's blocks are its kind's default.
  std::set<ScaleKind> seen;
  for (const MatmulPreset& preset : matmul_presets()) {
    const MatmulPolicy p = *find_matmul_preset(preset.name);
    for (const Quantizer* q : {&p.a, &p.b}) {
      const ScaleKindTraits& t = scale_kind_traits(q->scaling.kind);
      if (!t.blocked()) continue;
      CAPTURE(preset.name);
      CHECK(q->scaling.block == t.default_block);
      seen.insert(t.kind);
    }
  }
  for (const ScaleKindTraits& t : kScaleKinds)
    if (t.blocked()) CHECK_MESSAGE(seen.count(t.kind) == 1, t.name << " is in no preset");
  // The defaults themselves: MX 32 (OCP MX v1.0), NVFP4 16, DeepSeek-V3's 128 tiles.
  CHECK(scale_kind_traits(ScaleKind::block).default_block == 32);
  CHECK(scale_kind_traits(ScaleKind::nvfp4).default_block == 16);
  CHECK(scale_kind_traits(ScaleKind::tile).default_block == 128);
}

TEST_CASE("scale kinds: each row says what the quantizer does") {
  const size_t rows = 4, k = 256;
  const std::vector<double> x = operand(rows, k);
  std::vector<double> x_big = x;
  x_big[3] = 40.0;  // a larger tensor amax (block 0 of row 0 only)
  for (const ScaleKindTraits& t : kScaleKinds) {
    CAPTURE(t.name);
    const Quantizer q = quantizer_of("fp8_e4m3", t.kind);
    DelayedState state, state_big;
    const QuantizedOperand a = quantize(x.data(), rows, k, k, q, 1, 2, &state);
    const QuantizedOperand b = quantize(x_big.data(), rows, k, k, q, 1, 2, &state_big);
    // blocked: one scale per block of default_block along k.
    const size_t b_k = static_cast<size_t>(t.default_block);
    CHECK(a.block_k == (t.blocked() ? b_k : 0));
    CHECK(a.block_scale.size() == (t.blocked() ? rows * ((k + b_k - 1) / b_k) : 0));
    // The scales counted: one per block, or the tensor's one, or none.
    CHECK(a.stats.scale_count == (t.blocked() ? a.block_scale.size() : t.scaled() ? 1 : 0));
    // A tensor-level scale exists for the tensor rules (the delayed rule's first step is 1).
    const bool tensor_level = t.tensor_rule != TensorScaleRule::none;
    CHECK((a.tensor_scale != 1.0) == (tensor_level && !t.keeps_history()));
    // needs_tensor_amax: the tensor scale follows the tensor's amax (another block's amax moves it).
    CHECK((a.tensor_scale != b.tensor_scale) == t.needs_tensor_amax());
    if (t.blocked()) {  // a block far from the changed element keeps its scale unless it is under the tensor's
      const size_t last = a.block_scale.size() - 1;
      CHECK((a.block_scale[last] != b.block_scale[last]) == t.two_level());
    }
    // keeps_history: the state carries this step's amax into the next step's scale.
    CHECK(state.history.size() == (t.keeps_history() ? 1u : 0u));
    if (t.keeps_history()) {
      const QuantizedOperand a2 = quantize(x.data(), rows, k, k, q, 1, 2, &state);
      CHECK(a2.tensor_scale != 1.0);
    }
  }
}

TEST_CASE("scale kinds: checks built from the table keep their wording") {
  // Block scaling on integer elements: tile takes them (its rule reads only max_finite).
  for (const ScaleKindTraits& t : kScaleKinds) {
    CAPTURE(t.name);
    MatmulPolicy p;
    p.a = quantizer_of("int8", t.kind);
    const std::string e = validate_policy(p);
    CHECK(e == (t.needs_float_elements ? "a: block scaling needs a floating-point element format" : ""));
  }
  // Scales folded into the products (inner.scales "products").
  auto folded = [](const char* format, ScaleKind kind) {
    MatmulPolicy p;
    p.inner.fused = FusedModel{};
    p.inner.scales_in_products = true;
    p.a = quantizer_of(format, kind);
    p.b = quantizer_of("fp8_e4m3", ScaleKind::block);
    return validate_policy(p);
  };
  CHECK(folded("fp8_e4m3", ScaleKind::block) == "");
  CHECK(folded("fp4_e2m1", ScaleKind::nvfp4) == "");
  CHECK(folded("fp16", ScaleKind::nvfp4) == "");  // 11 significand bits
  CHECK(folded("fp8_e4m3", ScaleKind::tile) == "a.scaling: inner.scales \"products\" takes block or nvfp4 scaling");
  CHECK(folded("fp32", ScaleKind::nvfp4) ==
        "a.format: inner.scales \"products\" with nvfp4 scales needs elements of at most 20 significand bits");
  CHECK(folded("fp8_e4m3", ScaleKind::tensor) == "");  // no block scales on a: b's fold
}

TEST_CASE("scale kinds: descriptions built from the table") {
  struct Case {
    ScaleKind kind;
    bool pow2, two_d;
    const char* quantizer;  // describe_quantizer
    const char* rounding;   // describe_operand_rounding
  };
  const Case cases[] = {
      {ScaleKind::none, false, false, "fp8_e4m3", "fp8_e4m3 rne saturate"},
      {ScaleKind::tensor, false, false, "fp8_e4m3 tensor", "fp8_e4m3 rne saturate; scale fp32 per tensor (current amax)"},
      {ScaleKind::tensor, true, false, "fp8_e4m3 tensor",
       "fp8_e4m3 rne saturate; scale a power of two per tensor (current amax)"},
      {ScaleKind::delayed, false, false, "fp8_e4m3 delayed",
       "fp8_e4m3 rne saturate; scale fp32 per tensor (amax history 16)"},
      {ScaleKind::block, false, false, "fp8_e4m3 block32 floor",
       "fp8_e4m3 rne saturate; scale e8m0 per 32 along K, floor"},
      {ScaleKind::block, true, true, "fp8_e4m3 block32x32 floor",
       "fp8_e4m3 rne saturate; scale e8m0 per 32x32, floor"},
      {ScaleKind::tile, false, true, "fp8_e4m3 tile128x128", "fp8_e4m3 rne saturate; scale fp32 per 128x128"},
      {ScaleKind::tile, true, false, "fp8_e4m3 tile128", "fp8_e4m3 rne saturate; scale a power of two per 128 along K"},
      {ScaleKind::nvfp4, true, false, "fp8_e4m3 nvfp416",
       "fp8_e4m3 rne saturate; scale fp8_e4m3 per 16 along K under an fp32 tensor scale"},
  };
  for (const Case& c : cases) {
    Quantizer q = quantizer_of("fp8_e4m3", c.kind);
    q.scaling.pow2 = c.pow2;
    q.scaling.two_d = c.two_d;
    CAPTURE(c.quantizer);
    CHECK(describe_quantizer(q) == c.quantizer);
    CHECK(describe_operand_rounding(q) == c.rounding);
  }
  Quantizer q = quantizer_of("fp8_e4m3", ScaleKind::block);
  q.scaling.offset = 1;
  q.scaling.rule = ExpRule::rceil;
  CHECK(describe_operand_rounding(q) == "fp8_e4m3 rne saturate; scale e8m0 per 32 along K, rceil offset 1");
}

}  // namespace test_scale_kinds
