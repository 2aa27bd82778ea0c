// JSON -> MatmulPolicy (schema in matmul_json.h and docs/policy.md). Every error names the JSON
// path of the offending value and what was expected there.
#include "policy/matmul_json.h"
#include "io/json_read.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <type_traits>

#include "arith/catalogue.h"
#include "arith/enum_names.h"
#include "arith/tc_presets.h"
#include "policy/json_keys.h"
#include "policy/presets.h"

namespace drift {
namespace {

using json = nlohmann::json;

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : key.empty() ? path : path + "." + key;
}

std::string got(const json& j) { return std::string("got ") + j.type_name(); }

void expect_object(const json& j, const std::string& path, const std::string& what) {
  if (!j.is_object()) throw ConfigError(path, "expected " + what + ", " + got(j));
}

std::string get_string(const json& j, const std::string& path, const std::string& what) {
  if (!j.is_string()) throw ConfigError(path, "expected " + what + " (a string), " + got(j));
  return j.get<std::string>();
}

bool get_bool(const json& j, const std::string& path) {
  if (!j.is_boolean()) throw ConfigError(path, "expected true or false, " + got(j));
  return j.get<bool>();
}

int64_t get_int(const json& j, const std::string& path, int64_t lo, int64_t hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  if (!j.is_number_integer()) throw ConfigError(path, "expected an integer in " + range + ", " + got(j));
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi))
    throw ConfigError(path, "expected an integer in " + range + ", got " + j.dump());
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) throw ConfigError(path, "expected an integer in " + range + ", got " + j.dump());
  return v;
}

uint64_t get_uint(const json& j, const std::string& path) {
  if (!j.is_number_unsigned()) throw ConfigError(path, "expected a non-negative integer, " + (j.is_number() ? "got " + j.dump() : got(j)));
  return j.get<uint64_t>();
}

double get_positive(const json& j, const std::string& path) {
  if (!j.is_number()) throw ConfigError(path, "expected a positive number, " + got(j));
  const double v = j.get<double>();
  if (!(v > 0) || !std::isfinite(v)) throw ConfigError(path, "expected a positive finite number, got " + j.dump());
  return v;
}

// `parse` is either shape of drift's name parsers: bool parse(s, &e) or std::optional<E> parse(s).
template <typename E, typename Parse>
E get_enum(const json& j, const std::string& path, const char* what, const char* choices, Parse parse) {
  const std::string s = get_string(j, path, std::string(what) + " (" + choices + ")");
  std::optional<E> e;
  if constexpr (std::is_invocable_r_v<bool, Parse, const std::string&, E*>) {
    E v;
    if (parse(s, &v)) e = v;
  } else {
    e = parse(s);
  }
  if (!e) throw ConfigError(path, "unknown " + std::string(what) + " '" + s + "' (expected " + choices + ")");
  return *e;
}

const char* const kAlgoNames[] = {"max", "most_recent"};
bool parse_algo(const std::string& s, AmaxAlgo* r) { return enum_from_name(s, kAlgoNames, r); }

constexpr const char* kRoundingChoices = "rne|rna|rtz|rup|rdn|rto|sr";
constexpr const char* kOverflowChoices = "saturate|ieee";
constexpr const char* kSubnormalChoices = "keep|flush";
constexpr const char* kFormatExpected =
    "expected a catalogue name or an object {exp_bits, man_bits, bias, inf, nan, subnormals}";

// The rounding keys shared by QUANT, ACC, "product" and "output". `fmt` may be null (no format key).
void apply_round_fields(const json& obj, const std::string& path, Format* fmt, RoundSpec& r) {
  if (fmt && obj.contains("format")) *fmt = parse_format(obj["format"], join(path, "format"));
  if (obj.contains("rounding"))
    r.mode = get_enum<Rounding>(obj["rounding"], join(path, "rounding"), "rounding", kRoundingChoices, parse_rounding);
  if (obj.contains("overflow"))
    r.overflow = get_enum<Overflow>(obj["overflow"], join(path, "overflow"), "overflow", kOverflowChoices, parse_overflow);
  if (obj.contains("subnormals"))
    r.subnormals =
        get_enum<Subnormals>(obj["subnormals"], join(path, "subnormals"), "subnormals", kSubnormalChoices, parse_subnormals);
  if (obj.contains("sr_bits")) r.sr_bits = static_cast<int>(get_int(obj["sr_bits"], join(path, "sr_bits"), 1, 32));
}

json round_fields_json(const RoundSpec& r) {
  return {{"rounding", to_string(r.mode)},
          {"overflow", to_string(r.overflow)},
          {"subnormals", to_string(r.subnormals)},
          {"sr_bits", r.sr_bits}};
}

// microxcaling emulation: each departure from OCP MX a field (docs/policy.md, "microxcaling emulation").
const char* const kZeroSignNames[] = {"signed", "positive"};
bool parse_zero_sign(const std::string& s, bool* positive) { return enum_from_name(s, kZeroSignNames, positive); }
const char* const kNearestSumNames[] = {"exact", "fp32"};
bool parse_nearest_sum(const std::string& s, bool* fp32) { return enum_from_name(s, kNearestSumNames, fp32); }

void apply_emulation(const json& j, const std::string& path, MxEmulation& e) {
  expect_object(j, path, "an emulation object {exponent, scale_bits, zero, nearest_sum}");
  reject_unknown_keys(j, path, {"exponent", "scale_bits", "zero", "nearest_sum"});
  if (j.contains("exponent"))
    e.exponent = get_enum<ExpSource>(j["exponent"], join(path, "exponent"), "exponent source", "exact|log2_fp32",
                                     parse_exp_source);
  if (j.contains("scale_bits")) {
    const int64_t b = get_int(j["scale_bits"], join(path, "scale_bits"), 0, 30);
    if (b == 1) throw ConfigError(join(path, "scale_bits"), "expected 0 (an E8M0 scale) or 2..30, got 1");
    e.scale_bits = static_cast<int>(b);
  }
  if (j.contains("zero"))
    e.positive_zero =
        get_enum<bool>(j["zero"], join(path, "zero"), "zero sign", "signed|positive", parse_zero_sign);
  if (j.contains("nearest_sum"))
    e.nearest_sum_fp32 = get_enum<bool>(j["nearest_sum"], join(path, "nearest_sum"), "nearest-rounding sum",
                                        "exact|fp32", parse_nearest_sum);
}

json emulation_to_json(const MxEmulation& e) {
  return {{"exponent", to_string(e.exponent)},
          {"scale_bits", e.scale_bits},
          {"zero", kZeroSignNames[e.positive_zero ? 1 : 0]},
          {"nearest_sum", kNearestSumNames[e.nearest_sum_fp32 ? 1 : 0]}};
}

void apply_scaling(const json& j, const std::string& path, Scaling& s) {
  expect_object(j, path, "a scaling object {kind, block, two_d, rule, offset, margin, pow2, amax_floor, history, algo, hadamard, hadamard_seed, emulate}");
  reject_unknown_keys(j, path, {"kind", "block", "two_d", "rule", "offset", "margin", "pow2", "amax_floor", "history", "algo",
                       "hadamard", "hadamard_seed", "emulate"});
  if (j.contains("kind")) {
    const ScaleKind k = get_enum<ScaleKind>(j["kind"], join(path, "kind"), "scaling kind", scale_kind_choices(),
                                            parse_scale_kind);
    if (k != s.kind) {  // a different scheme starts from that scheme's defaults
      s = Scaling{};
      s.kind = k;
      s.block = scale_kind_traits(k).default_block;
    }
  }
  if (j.contains("block")) s.block = static_cast<int>(get_int(j["block"], join(path, "block"), 1, 1 << 20));
  if (j.contains("two_d")) s.two_d = get_bool(j["two_d"], join(path, "two_d"));
  if (j.contains("rule"))
    s.rule = get_enum<ExpRule>(j["rule"], join(path, "rule"), "exponent rule", "floor|rceil|ceil|even", parse_exp_rule);
  if (j.contains("offset")) s.offset = static_cast<int>(get_int(j["offset"], join(path, "offset"), -254, 254));
  if (j.contains("margin")) s.margin = static_cast<int>(get_int(j["margin"], join(path, "margin"), -1000, 1000));
  if (j.contains("pow2")) s.pow2 = get_bool(j["pow2"], join(path, "pow2"));
  if (j.contains("amax_floor")) s.amax_floor = get_positive(j["amax_floor"], join(path, "amax_floor"));
  if (j.contains("history")) s.history = static_cast<int>(get_int(j["history"], join(path, "history"), 1, 1 << 20));
  if (j.contains("algo"))
    s.algo = get_enum<AmaxAlgo>(j["algo"], join(path, "algo"), "amax algorithm", "max|most_recent", parse_algo);
  if (j.contains("hadamard")) {
    const int64_t h = get_int(j["hadamard"], join(path, "hadamard"), 0, 32);
    if (h != 0 && h != 16 && h != 32) throw ConfigError(join(path, "hadamard"), "expected 0, 16 or 32, got " + std::to_string(h));
    s.hadamard = static_cast<int>(h);
  }
  if (j.contains("hadamard_seed")) s.hadamard_seed = get_uint(j["hadamard_seed"], join(path, "hadamard_seed"));
  if (j.contains("emulate")) apply_emulation(j["emulate"], join(path, "emulate"), s.emulate);
}

constexpr const char* kQuantExpected =
    "a quantizer preset name or an object {preset, format, rounding, overflow, subnormals, sr_bits, scaling}";

Quantizer quantizer_preset_or_throw(const std::string& name, const std::string& path) {
  if (auto q = find_quantizer_preset(name)) return *q;
  throw ConfigError(path, "unknown quantizer preset '" + name + "' (expected a catalogue format name or one of: " +
                              quantizer_preset_list() + ")");
}

void apply_quantizer(const json& j, const std::string& path, Quantizer& q) {
  if (j.is_string()) {
    q = quantizer_preset_or_throw(j.get<std::string>(), path);
    return;
  }
  expect_object(j, path, kQuantExpected);
  reject_unknown_keys(j, path, {"preset", "format", "rounding", "overflow", "subnormals", "sr_bits", "scaling"});
  if (j.contains("preset"))
    q = quantizer_preset_or_throw(get_string(j["preset"], join(path, "preset"), "a quantizer preset name"),
                                  join(path, "preset"));
  apply_round_fields(j, path, &q.format, q.round);
  if (j.contains("scaling")) apply_scaling(j["scaling"], join(path, "scaling"), q.scaling);
}

// The fused tensor-core model: a tc preset name (arith/tc_presets.h) or an object of FusedModel's fields.
const char* const kFusedKeys[] = {"preset",        "terms",          "kept_bits",     "align_includes_acc",
                                  "sticky",        "carry_bits",     "final_rounding", "out_man_bits",
                                  "out",           "in_emin",        "in_subnormals", "out_subnormals",
                                  "min_align_exp", "promote_every",  "interleave"};

FusedModel fused_preset_or_throw(const std::string& name, const std::string& path) {
  if (auto t = find_tc_preset(name)) return t->model;
  std::string list;
  for (const auto& t : tc_presets()) list += (list.empty() ? "" : ", ") + t.name;
  throw ConfigError(path, "unknown tensor-core preset '" + name + "' (expected one of: " + list +
                              ", or an object of the model's fields)");
}

FusedModel parse_fused(const json& j, const std::string& path) {
  if (j.is_string()) return fused_preset_or_throw(j.get<std::string>(), path);
  expect_object(j, path, "a tensor-core preset name, an object of the fused model's fields, or null");
  reject_unknown_keys(j, path, {std::begin(kFusedKeys), std::end(kFusedKeys)});
  FusedModel m;
  m.out = *find_format("fp32");
  if (j.contains("preset"))
    m = fused_preset_or_throw(get_string(j["preset"], join(path, "preset"), "a tensor-core preset name"), join(path, "preset"));
  auto i = [&](const char* k, int& f, int64_t lo, int64_t hi) {
    if (j.contains(k)) f = static_cast<int>(get_int(j[k], join(path, k), lo, hi));
  };
  auto b = [&](const char* k, bool& f) {
    if (j.contains(k)) f = get_bool(j[k], join(path, k));
  };
  i("terms", m.terms, 1, 1 << 20);
  i("kept_bits", m.kept_bits, -8, 100);
  b("align_includes_acc", m.align_includes_acc);
  b("sticky", m.sticky);
  i("carry_bits", m.carry_bits, 0, 100);
  if (j.contains("final_rounding"))
    m.final_rounding = get_enum<Rounding>(j["final_rounding"], join(path, "final_rounding"), "rounding",
                                          kRoundingChoices, parse_rounding);
  i("out_man_bits", m.out_man_bits, 0, 52);
  if (j.contains("out")) m.out = parse_format(j["out"], join(path, "out"));
  i("in_emin", m.in_emin, -1100, 1100);
  b("in_subnormals", m.in_subnormals);
  b("out_subnormals", m.out_subnormals);
  if (j.contains("min_align_exp"))
    m.min_align_exp = j["min_align_exp"].is_null()
                          ? kNoMinAlignExp
                          : static_cast<int>(get_int(j["min_align_exp"], join(path, "min_align_exp"), -100000, 100000));
  i("promote_every", m.promote_every, 0, 1 << 30);
  i("interleave", m.interleave, 0, 1 << 20);
  if (const char* err = fused_model_invalid(m)) throw ConfigError(path, err);
  return m;
}

json fused_fields_json(const FusedModel& m) {
  return {{"terms", m.terms},
          {"kept_bits", m.kept_bits},
          {"align_includes_acc", m.align_includes_acc},
          {"sticky", m.sticky},
          {"carry_bits", m.carry_bits},
          {"final_rounding", to_string(m.final_rounding)},
          {"out_man_bits", m.out_man_bits},
          {"out", format_to_json(m.out)},
          {"in_emin", m.in_emin},
          {"in_subnormals", m.in_subnormals},
          {"out_subnormals", m.out_subnormals},
          {"min_align_exp", m.min_align_exp == kNoMinAlignExp ? json(nullptr) : json(m.min_align_exp)},
          {"promote_every", m.promote_every},
          {"interleave", m.interleave}};
}

// The preset's name where the model is exactly a tc preset's, else every field.
json fused_to_json(const FusedModel& m) {
  const json fields = fused_fields_json(m);
  for (const auto& t : tc_presets())
    if (fused_fields_json(t.model) == fields) return t.name;
  return fields;
}

void apply_accumulator(const json& j, const std::string& path, Accumulator& acc, bool inner) {
  expect_object(j, path, "an accumulator object {format, rounding, overflow, subnormals, sr_bits, order, promote_every, fused, scales}");
  reject_unknown_keys(j, path, {"format", "rounding", "overflow", "subnormals", "sr_bits", "order", "promote_every", "fused", "scales"});
  apply_round_fields(j, path, &acc.format, acc.round);
  if (j.contains("order")) {
    const std::string p = join(path, "order");
    const char* const kOrders = "sequential|reverse|pairwise|split|permuted, split:S or splitk:S";
    const std::string s = get_string(j["order"], p, std::string("a sum order (") + kOrders + ")");
    const std::string head = s.substr(0, s.find(':'));
    SumOrder o;
    const bool known = parse_sum_order(head, &o);
    if (!known || (!order_has_parts(o) && head != s))
      throw ConfigError(p, "unknown sum order '" + s + "' (expected " + kOrders + ")");
    // splitk has no default: its part count is what a GEMM library chose for one shape.
    if (o == SumOrder::splitk && head == s)
      throw ConfigError(p, "'splitk' needs its number of parts: splitk:S (e.g. splitk:3, the split cuBLASLt chose)");
    acc.order = o;
    if (s == "split") acc.split = 2;  // a bare split is split:2, whatever a base policy split into
    if (head != s) {  // "split:S" or "splitk:S"
      const std::string n = s.substr(head.size() + 1);
      int v = 0;
      bool ok = !n.empty() && n.size() <= 6 && n.find_first_not_of("0123456789") == std::string::npos;
      if (ok) v = std::stoi(n);
      if (!ok || v < 1)
        throw ConfigError(p, "'" + s + "': expected " + head + ":S with S a positive integer (e.g. " + head + ":4)");
      acc.split = v;
    }
  }
  if (j.contains("promote_every"))
    acc.promote_every = static_cast<int>(get_int(j["promote_every"], join(path, "promote_every"), 0, 1 << 30));
  if (j.contains("fused")) {
    const std::string p = join(path, "fused");
    const json& f = j["fused"];
    if (f.is_null()) {
      acc.fused.reset();
    } else {
      if (!inner) throw ConfigError(p, "the fused tensor-core model applies to the inner sum only (expected null)");
      acc.fused = parse_fused(f, p);
    }
  }
  if (j.contains("scales")) {
    const std::string p = join(path, "scales");
    const std::string s = get_string(j["scales"], p, "block_sum or products");
    if (s != "block_sum" && s != "products")
      throw ConfigError(p, "expected block_sum (each K-block's sum scaled) or products (block scales folded into the "
                           "products the fused model aligns), got '" + s + "'");
    if (!inner && s == "products") throw ConfigError(p, "block scales enter the products of the inner sum only");
    acc.scales_in_products = s == "products";
  }
}

void apply_product(const json& j, const std::string& path, MatmulPolicy& p) {
  if (j.is_null()) {
    p.product_format.reset();
    return;
  }
  expect_object(j, path, "null (exact products) or an object {format, rounding, overflow, subnormals, sr_bits}");
  reject_unknown_keys(j, path, {"format", "rounding", "overflow", "subnormals", "sr_bits"});
  Format f = p.product_format.value_or(Format{});
  if (!p.product_format && !j.contains("format"))
    throw ConfigError(path, "missing key 'format' (products are exact unless a product format is set)");
  apply_round_fields(j, path, &f, p.product_round);
  p.product_format = f;
}

MatmulPolicy matmul_preset_or_throw(const std::string& name, const std::string& path) {
  if (auto p = find_matmul_preset(name)) return *p;
  throw ConfigError(path, "unknown matmul preset '" + name + "' (expected one of: " + matmul_preset_list() + ")");
}

// validate_policy's messages start with the field they are about ("a.scaling.block must be >= 1",
// "a: block scaling needs ..."); that field becomes part of the error's path.
ConfigError located_error(const std::string& err, const std::string& path) {
  const size_t sp = err.find(' ');
  if (sp != std::string::npos && sp > 0) {
    std::string field = err.substr(0, sp);
    const bool colon = field.back() == ':';
    if (colon) field.pop_back();
    const std::string head = field.substr(0, field.find('.'));
    const bool is_field = head == "a" || head == "b" || head == "inner" || head == "outer";
    if (is_field && (colon || field.find('.') != std::string::npos)) return ConfigError(join(path, field), err.substr(sp + 1));
  }
  return ConfigError(path, err);
}

}  // namespace

Format parse_format(const json& j, const std::string& path) {
  if (j.is_string()) {
    const std::string name = j.get<std::string>();
    if (auto f = find_format(name)) return *f;
    throw ConfigError(path, "unknown format '" + name + "' (" + kFormatExpected + ")");
  }
  if (!j.is_object()) throw ConfigError(path, std::string(kFormatExpected) + ", " + got(j));
  reject_unknown_keys(j, path, {"exp_bits", "man_bits", "bias", "inf", "nan", "subnormals"});
  for (const char* req : {"exp_bits", "man_bits"})
    if (!j.contains(req)) throw ConfigError(path, std::string("missing key '") + req + "' (a custom format needs exp_bits and man_bits)");
  const int eb = static_cast<int>(get_int(j["exp_bits"], join(path, "exp_bits"), 1, 11));
  const int mb = static_cast<int>(get_int(j["man_bits"], join(path, "man_bits"), 0, 52));
  std::optional<int> bias;
  if (j.contains("bias")) bias = static_cast<int>(get_int(j["bias"], join(path, "bias"), -100000, 100000));
  const bool inf = j.contains("inf") ? get_bool(j["inf"], join(path, "inf")) : false;
  const NanCode nan = j.contains("nan") ? get_enum<NanCode>(j["nan"], join(path, "nan"), "nan encoding",
                                                            "none|ieee|ones|negzero", parse_nan_code)
                                        : NanCode::none;
  const bool sub = j.contains("subnormals") ? get_bool(j["subnormals"], join(path, "subnormals")) : true;
  std::string err;
  auto f = make_float_format(eb, mb, bias, inf, nan, sub, &err);
  if (!f) {
    // Point at the field the message is about.
    std::string where = path;
    for (const char* key : {"exp_bits", "man_bits", "bias", "inf", "nan"})
      if (err.rfind(key, 0) == 0) {
        where = join(path, key);
        break;
      }
    throw ConfigError(where, err);
  }
  return *f;
}

Quantizer parse_quantizer(const json& j, const std::string& path) {
  Quantizer q;
  q.format = *find_format("fp32");
  return parse_quantizer(j, path, q);
}

Quantizer parse_quantizer(const json& j, const std::string& path, const Quantizer& base) {
  Quantizer q = base;
  apply_quantizer(j, path, q);
  // Checked with the engine's own rules, through a policy whose b mirrors a (the Hadamard pairing holds).
  MatmulPolicy probe;
  probe.a = probe.b = q;
  probe.product_format = *find_format("fp64");
  if (auto err = validate_policy(probe); !err.empty()) {
    ConfigError e = located_error(err, "");
    // Messages about operand "a" are about this quantizer.
    std::string sub = e.path == "a" ? "" : (e.path.rfind("a.", 0) == 0 ? e.path.substr(2) : e.path);
    throw ConfigError(join(path, sub), e.message);
  }
  return q;
}

MatmulPolicy apply_matmul_policy(const json& j, const std::string& path, const MatmulPolicy& base) {
  if (j.is_string()) return matmul_preset_or_throw(j.get<std::string>(), path);
  expect_object(j, path, "a matmul preset name or an object {preset, a, b, product, inner, outer, output}");
  reject_unknown_keys(j, path, {"preset", "a", "b", "product", "inner", "outer", "output"});
  MatmulPolicy p = base;
  if (j.contains("preset"))
    p = matmul_preset_or_throw(get_string(j["preset"], join(path, "preset"), "a matmul preset name"), join(path, "preset"));
  if (j.contains("a")) apply_quantizer(j["a"], join(path, "a"), p.a);
  if (j.contains("b")) apply_quantizer(j["b"], join(path, "b"), p.b);
  if (j.contains("product")) apply_product(j["product"], join(path, "product"), p);
  if (j.contains("inner")) apply_accumulator(j["inner"], join(path, "inner"), p.inner, true);
  if (j.contains("outer")) apply_accumulator(j["outer"], join(path, "outer"), p.outer, false);
  if (j.contains("output")) {
    const std::string op = join(path, "output");
    expect_object(j["output"], op, "an object {format, rounding, overflow, subnormals, sr_bits}");
    reject_unknown_keys(j["output"], op, {"format", "rounding", "overflow", "subnormals", "sr_bits"});
    apply_round_fields(j["output"], op, &p.out_format, p.out_round);
  }
  // The engine's own consistency rules (operand pairing, exact products), reported at this policy's path.
  if (auto err = validate_policy(p); !err.empty()) throw located_error(err, path);
  return p;
}

MatmulPolicy parse_matmul_policy(const json& j, const std::string& path) {
  return apply_matmul_policy(j, path, MatmulPolicy());
}

json format_to_json(const Format& f) {
  const std::string name = format_name(f);
  if (name != "custom") return name;
  return {{"exp_bits", f.exp_bits}, {"man_bits", f.man_bits}, {"bias", f.bias},
          {"inf", f.inf},           {"nan", to_string(f.nan)}, {"subnormals", f.subnormals}};
}

json quantizer_to_json(const Quantizer& q) {
  json j = round_fields_json(q.round);
  j["format"] = format_to_json(q.format);
  const Scaling& s = q.scaling;
  j["scaling"] = {{"kind", to_string(s.kind)},
                  {"block", s.block},
                  {"two_d", s.two_d},
                  {"rule", to_string(s.rule)},
                  {"offset", s.offset},
                  {"margin", s.margin},
                  {"pow2", s.pow2},
                  {"amax_floor", s.amax_floor},
                  {"history", s.history},
                  {"algo", kAlgoNames[static_cast<int>(s.algo)]},
                  {"hadamard", s.hadamard},
                  {"hadamard_seed", s.hadamard_seed}};
  // Written only when switched on, so that every other quantizer's resolved form (and a run's
  // identity) is what it was before the key existed.
  if (s.emulate.any()) j["scaling"]["emulate"] = emulation_to_json(s.emulate);
  return j;
}

json accumulator_to_json(const Accumulator& acc) {
  json j = round_fields_json(acc.round);
  j["format"] = format_to_json(acc.format);
  j["order"] = std::string(to_string(acc.order)) + (order_has_parts(acc.order) ? ":" + std::to_string(acc.split) : "");
  j["promote_every"] = acc.promote_every;
  j["fused"] = acc.fused ? fused_to_json(*acc.fused) : json(nullptr);
  // Written only when not the default, so that every other policy's resolved form (and a run's
  // identity) is what it was before the key existed.
  if (acc.scales_in_products) j["scales"] = "products";
  return j;
}

json policy_to_json(const MatmulPolicy& p) {
  json j;
  j["a"] = quantizer_to_json(p.a);
  j["b"] = quantizer_to_json(p.b);
  if (p.product_format) {
    j["product"] = round_fields_json(p.product_round);
    j["product"]["format"] = format_to_json(*p.product_format);
  } else {
    j["product"] = nullptr;
  }
  j["inner"] = accumulator_to_json(p.inner);
  j["outer"] = accumulator_to_json(p.outer);
  j["output"] = round_fields_json(p.out_round);
  j["output"]["format"] = format_to_json(p.out_format);
  return j;
}

json parse_json_argument(const std::string& text, const std::string& path) {
  const size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) throw ConfigError(path, "empty (expected JSON or a preset name)");
  const std::string t = text.substr(b, text.find_last_not_of(" \t\r\n") - b + 1);
  std::string body = t, source;
  if (t[0] == '@') {
    source = t.substr(1);
    try {
      body = io::read_regular_file(source, "policy file", io::kMaxJsonBytes);
    } catch (const io::IoError& e) {
      throw ConfigError(path, e.what());
    }
  } else if (t[0] != '{' && t[0] != '[' && t[0] != '"') {
    return json(t);  // a bare preset name
  }
  try {
    return io::parse_json(body, source);
  } catch (const io::IoError& e) {
    throw ConfigError(path, e.what());
  }
}

}  // namespace drift
