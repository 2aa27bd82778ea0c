// The matmul policy schema: errors name the JSON path, unknown keys are rejected, presets
// round-trip through policy_to_json.
#include <doctest/doctest.h>

#include <string>

#include "arith/catalogue.h"
#include "policy/matmul_json.h"
#include "policy/presets.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_policy_json {

using drift::ConfigError;
using nlohmann::json;

namespace {

// The ConfigError a parse throws (fails the test when none is thrown).
ConfigError error_of(const json& j, const std::string& path = "precision.matmul[0]") {
  try {
    drift::parse_matmul_policy(j, path);
  } catch (const ConfigError& e) {
    return e;
  }
  FAIL("expected a ConfigError for " << j.dump());
  return ConfigError("", "");
}

}  // namespace

TEST_CASE("an unknown format names its path and the accepted forms") {
  const ConfigError e = error_of(json::parse(R"({"a": {"format": "e9m9"}})"));
  CHECK(e.path == "precision.matmul[0].a.format");
  CHECK(e.message ==
        "unknown format 'e9m9' (expected a catalogue name or an object {exp_bits, man_bits, bias, inf, nan, subnormals})");
  CHECK(std::string(e.what()) == "precision.matmul[0].a.format: " + e.message);
}

TEST_CASE("unknown keys are errors at every level") {
  CHECK(error_of(json::parse(R"({"outputs": {}})")).path == "precision.matmul[0].outputs");
  CHECK(error_of(json::parse(R"({"a": {"fromat": "bf16"}})")).path == "precision.matmul[0].a.fromat");
  CHECK(error_of(json::parse(R"({"b": {"scaling": {"kind": "block", "blocks": 32}}})")).path ==
        "precision.matmul[0].b.scaling.blocks");
  CHECK(error_of(json::parse(R"({"inner": {"order": "sequential", "promote": 4}})")).path ==
        "precision.matmul[0].inner.promote");
  CHECK(error_of(json::parse(R"({"a": {"format": {"exp_bits": 4, "man_bits": 3, "sign": 1}}})")).path ==
        "precision.matmul[0].a.format.sign");
  const ConfigError e = error_of(json::parse(R"({"product": {"format": "fp32", "round": "rne"}})"));
  CHECK(e.path == "precision.matmul[0].product.round");
  CHECK(e.message.find("unknown key") != std::string::npos);
  CHECK(e.message.find("rounding") != std::string::npos);  // lists what is accepted
}

TEST_CASE("wrong types and values name the path and what was expected") {
  auto e = error_of(json::parse(R"({"a": {"rounding": "nearest"}})"));
  CHECK(e.path == "precision.matmul[0].a.rounding");
  CHECK(e.message.find("rne|rna|rtz|rup|rdn|rto|sr") != std::string::npos);
  e = error_of(json::parse(R"({"a": {"sr_bits": 40}})"));
  CHECK(e.path == "precision.matmul[0].a.sr_bits");
  CHECK(e.message.find("1..32") != std::string::npos);
  e = error_of(json::parse(R"({"a": {"scaling": {"kind": "block", "block": "32"}}})"));
  CHECK(e.path == "precision.matmul[0].a.scaling.block");
  CHECK(e.message.find("got string") != std::string::npos);
  e = error_of(json::parse(R"({"a": {"scaling": {"hadamard": 8}}})"));
  CHECK(e.path == "precision.matmul[0].a.scaling.hadamard");
  e = error_of(json::parse(R"({"inner": {"order": "split:0"}})"));
  CHECK(e.path == "precision.matmul[0].inner.order");
  e = error_of(json::parse(R"({"inner": {"order": "splitk"}})"));  // no default part count
  CHECK(e.path == "precision.matmul[0].inner.order");
  CHECK(e.message.find("splitk:S") != std::string::npos);
  e = error_of(json::parse(R"({"outer": {"order": "splitk:x"}})"));
  CHECK(e.path == "precision.matmul[0].outer.order");
  CHECK(e.message.find("splitk:S") != std::string::npos);
  e = error_of(json::parse(R"({"inner": {"order": "permuted:2"}})"));
  CHECK(e.path == "precision.matmul[0].inner.order");
  e = error_of(json::parse(R"({"inner": {"order": "zigzag"}})"));
  CHECK(e.path == "precision.matmul[0].inner.order");
  e = error_of(json::parse(R"({"outer": {"fused": "h100"}})"));
  CHECK(e.path == "precision.matmul[0].outer.fused");
  e = error_of(json::parse(R"({"inner": {"fused": "no_such_core"}})"));
  CHECK(e.path == "precision.matmul[0].inner.fused");
  CHECK(e.message.find("unknown tensor-core preset") != std::string::npos);
  e = error_of(json::parse(R"({"preset": "mxfp9"})"));
  CHECK(e.path == "precision.matmul[0].preset");
  CHECK(e.message.find("mxfp8_e4m3") != std::string::npos);  // lists the presets
  e = error_of(json("mxfp9"));
  CHECK(e.path == "precision.matmul[0]");
  e = error_of(json::parse("[1, 2]"));
  CHECK(e.message.find("got array") != std::string::npos);
  e = error_of(json::parse(R"({"product": {"rounding": "rtz"}})"));
  CHECK(e.path == "precision.matmul[0].product");
  CHECK(e.message.find("format") != std::string::npos);
}

TEST_CASE("custom formats are validated by make_float_format, the error at the field") {
  auto p = drift::parse_matmul_policy(json::parse(R"({"a": {"format": {"exp_bits": 4, "man_bits": 3, "bias": 7,
      "inf": false, "nan": "ones", "subnormals": true}}})"));
  CHECK(drift::format_name(p.a.format) == "fp8_e4m3");
  p = drift::parse_matmul_policy(json::parse(R"({"a": {"format": {"exp_bits": 3, "man_bits": 4}}})"));
  CHECK(p.a.format.max_finite == 31);  // e3m4, bias 3, no inf/NaN: 1.9375 * 2^(7 - 3)
  auto e = error_of(json::parse(R"({"b": {"format": {"exp_bits": 12, "man_bits": 3}}})"));
  CHECK(e.path == "precision.matmul[0].b.format.exp_bits");
  e = error_of(json::parse(R"({"b": {"format": {"exp_bits": 5, "man_bits": 2, "nan": "ieee"}}})"));
  CHECK(e.path == "precision.matmul[0].b.format.nan");
  e = error_of(json::parse(R"({"b": {"format": {"man_bits": 2}}})"));
  CHECK(e.path == "precision.matmul[0].b.format");
  CHECK(e.message.find("exp_bits") != std::string::npos);
}

TEST_CASE("the fused tensor-core model: a tc preset name or its fields") {
  auto p = drift::parse_matmul_policy(json::parse(R"({"a": {"format": "fp8_e4m3"}, "b": {"format": "fp8_e4m3"},
                                                      "inner": {"fused": "h100_fp8_e4m3"}})"));
  REQUIRE(p.inner.fused);
  CHECK(p.inner.fused->terms == 32);
  json j = drift::policy_to_json(p);
  CHECK(j["inner"]["fused"] == "h100_fp8_e4m3");  // printed by name
  CHECK(drift::policy_to_json(drift::parse_matmul_policy(j)) == j);
  // A variant of a preset is printed field by field and reads back the same.
  p = drift::parse_matmul_policy(json::parse(R"({"inner": {"fused": {"preset": "h100_fp8_e4m3", "kept_bits": 20}}})"));
  REQUIRE(p.inner.fused);
  CHECK(p.inner.fused->kept_bits == 20);
  j = drift::policy_to_json(p);
  CHECK(j["inner"]["fused"].is_object());
  CHECK(j["inner"]["fused"]["kept_bits"] == 20);
  CHECK(drift::policy_to_json(drift::parse_matmul_policy(j)) == j);
  auto e = error_of(json::parse(R"({"inner": {"fused": {"terms": 0}}})"));
  CHECK(e.path == "precision.matmul[0].inner.fused.terms");
  e = error_of(json::parse(R"({"inner": {"fused": {"term": 4}}})"));
  CHECK(e.path == "precision.matmul[0].inner.fused.term");
  CHECK(e.message.find("unknown key") != std::string::npos);
}

TEST_CASE("the engine's consistency rules are reported at the policy's path") {
  // fp32 x fp64 products are not exact in double.
  auto e = error_of(json::parse(R"({"a": {"format": "fp64"}})"));
  CHECK(e.path == "precision.matmul[0]");
  CHECK(e.message.find("product format") != std::string::npos);
  // Hadamard transforms must match.
  e = error_of(json::parse(R"({"a": {"scaling": {"hadamard": 16}}})"));
  CHECK(e.message.find("Hadamard") != std::string::npos);
  // Block scaling needs a floating-point element format.
  e = error_of(json::parse(R"({"a": {"format": "int8", "scaling": {"kind": "block"}}})"));
  CHECK(e.path == "precision.matmul[0].a");
}

TEST_CASE("a preset is a base that fields override one by one") {
  const auto p = drift::parse_matmul_policy(
      json::parse(R"({"preset": "mxfp8_e4m3", "a": {"rounding": "sr", "sr_bits": 8}, "inner": {"order": "split:4"},
                      "product": {"format": "bf16"}, "output": {"format": "bf16"}})"));
  CHECK(p.a.round.mode == drift::Rounding::sr);
  CHECK(p.a.round.sr_bits == 8);
  CHECK(drift::format_name(p.a.format) == "fp8_e4m3");  // kept from the preset
  CHECK(p.a.scaling.kind == drift::ScaleKind::block);
  CHECK(p.a.scaling.block == 32);
  CHECK(p.b.round.mode == drift::Rounding::rne);
  CHECK(p.inner.order == drift::SumOrder::split);
  CHECK(p.inner.split == 4);
  // A bare split is split:2, also over a base that split into 4 (docs/policy.md).
  const auto bare = drift::parse_matmul_policy(json::parse(R"({"inner": {"order": "split"}})"), "p");
  CHECK(bare.inner.order == drift::SumOrder::split);
  CHECK(bare.inner.split == 2);
  CHECK(drift::apply_matmul_policy(json::parse(R"({"inner": {"order": "split"}})"), "p", p).inner.split == 2);
  // splitk:S keeps its count, and the resolved policy writes it back.
  const auto splitk = drift::parse_matmul_policy(json::parse(R"({"outer": {"order": "splitk:6"}})"), "p");
  CHECK(splitk.outer.order == drift::SumOrder::splitk);
  CHECK(splitk.outer.split == 6);
  CHECK(drift::policy_to_json(splitk)["outer"]["order"] == "splitk:6");
  REQUIRE(p.product_format);
  CHECK(drift::format_name(*p.product_format) == "bf16");
  CHECK(drift::format_name(p.out_format) == "bf16");
  // A new scaling kind starts from that kind's defaults.
  const auto t = drift::parse_matmul_policy(
      json::parse(R"({"preset": "mxfp8_e4m3", "a": {"scaling": {"kind": "tile"}}, "b": {"scaling": {"kind": "tile"}}})"));
  CHECK(t.a.scaling.block == 128);
  CHECK(t.a.scaling.rule == drift::ExpRule::floor);
  // null products go back to exact.
  const auto x = drift::parse_matmul_policy(json::parse(R"({"product": null})"));
  CHECK(!x.product_format);
}

TEST_CASE("every preset parses and round-trips through policy_to_json") {
  for (const auto& preset : drift::matmul_presets()) {
    CAPTURE(preset.name);
    CHECK(std::string(preset.doc).size() > 40);
    const auto p = drift::find_matmul_preset(preset.name);
    REQUIRE(p);
    const json j = drift::policy_to_json(*p);
    // Fully resolved: every section and every field is present.
    for (const char* key : {"a", "b", "product", "inner", "outer", "output"}) CHECK(j.contains(key));
    // (12 fields; "emulate" is written only when a microxcaling departure is on)
    CHECK(j["a"]["scaling"].size() == (j["a"]["scaling"].contains("emulate") ? 13u : 12u));
    CHECK(j["inner"].contains("fused"));
    const auto back = drift::parse_matmul_policy(j, "roundtrip");
    CHECK(drift::policy_to_json(back) == j);
    // The preset name and {"preset": name} give the same policy.
    CHECK(drift::policy_to_json(drift::parse_matmul_policy(json(preset.name))) == j);
    CHECK(drift::policy_to_json(drift::parse_matmul_policy(json{{"preset", preset.name}})) == j);
  }
  CHECK(!drift::find_matmul_preset("no_such_preset"));
}

TEST_CASE("the presets say what they model") {
  const auto ds = *drift::find_matmul_preset("deepseek_fp8");
  CHECK(ds.a.scaling.kind == drift::ScaleKind::tile);
  CHECK(ds.a.scaling.block == 128);
  CHECK(!ds.a.scaling.two_d);
  CHECK(ds.b.scaling.two_d);
  CHECK(ds.b.scaling.amax_floor == 1e-4);
  CHECK(ds.inner.promote_every == 128);
  const auto hy = *drift::find_matmul_preset("fp8_delayed_hybrid");
  CHECK(drift::format_name(hy.a.format) == "fp8_e4m3");
  CHECK(drift::format_name(hy.b.format) == "fp8_e5m2");
  CHECK(hy.a.scaling.kind == drift::ScaleKind::delayed);
  CHECK(hy.a.scaling.history == 16);
  const auto nv = *drift::find_matmul_preset("nvfp4");
  CHECK(nv.a.scaling.kind == drift::ScaleKind::nvfp4);
  CHECK(nv.a.scaling.block == 16);
  const auto mx = *drift::find_matmul_preset("mxfp6");
  CHECK(drift::format_name(mx.a.format) == "fp6_e2m3");
  const auto f32 = *drift::find_matmul_preset("fp32");
  CHECK(drift::format_name(f32.inner.format) == "fp32");
  CHECK(f32.inner.round.mode == drift::Rounding::rne);
  CHECK(!f32.product_format);
}

TEST_CASE("quantizer presets and QUANT objects") {
  auto q = drift::parse_quantizer(json("mxfp8_e4m3"), "quantizer");
  CHECK(q.scaling.kind == drift::ScaleKind::block);
  CHECK(drift::format_name(q.format) == "fp8_e4m3");
  q = drift::parse_quantizer(json("deepseek_fp8.b"), "quantizer");
  CHECK(q.scaling.two_d);
  q = drift::parse_quantizer(json("fp8_e5m2"), "quantizer");  // plain cast
  CHECK(q.scaling.kind == drift::ScaleKind::none);
  CHECK(q.round.overflow == drift::Overflow::saturate);
  q = drift::parse_quantizer(json::parse(R"({"preset": "mxfp4", "rounding": "sr"})"), "quantizer");
  CHECK(q.round.mode == drift::Rounding::sr);
  CHECK(drift::format_name(q.format) == "fp4_e2m1");
  const json j = drift::quantizer_to_json(q);
  CHECK(drift::quantizer_to_json(drift::parse_quantizer(j, "q")) == j);
  try {
    drift::parse_quantizer(json::parse(R"({"scaling": {"kind": "blocks"}})"), "quantizer");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.path == "quantizer.scaling.kind");
    CHECK(e.message.find("none|tensor|delayed|block|tile|nvfp4") != std::string::npos);
  }
  try {
    drift::parse_quantizer(json("mxfp3"), "quantizer");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.path == "quantizer");
    CHECK(e.message.find("unknown quantizer preset 'mxfp3'") != std::string::npos);
  }
  try {
    drift::parse_quantizer(json::parse(R"({"format": "int8", "scaling": {"kind": "nvfp4"}})"), "quantizer");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.path == "quantizer");
    CHECK(e.message.find("floating-point") != std::string::npos);
  }
}

TEST_CASE("command-line JSON arguments") {
  CHECK(drift::parse_json_argument(" mxfp4 ", "policy") == json("mxfp4"));
  CHECK(drift::parse_json_argument(R"({"preset": "fp32"})", "policy")["preset"] == "fp32");
  try {
    drift::parse_json_argument("{\"a\": ", "policy");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.path == "policy");
    CHECK(e.message.find("not valid JSON") != std::string::npos);
  }
  try {
    drift::parse_json_argument("@/no/such/file.json", "policy");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.message.find("/no/such/file.json") != std::string::npos);
  }
}

}  // namespace test_policy_json
