// The precision section of the config schema (config_schema.h): the rule lists are read into typed
// rules once (policy/site_rules.h, elementwise_rules.h), and the scalar sub-sections by their tables.
#include <string>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "train/config_schema.h"

namespace drift {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// precision.matmul: a rule list; a preset name or one policy object is shorthand for one rule.
Field<PrecisionConfig> matmul_field() {
  return custom<PrecisionConfig>(
      "matmul",
      [](const json& v, const std::string& p, PrecisionConfig& pc) {
        const json rules =
            v.is_string() || v.is_object() ? json::array({v.is_string() ? json{{"preset", v}} : v}) : v;
        // A policy that does not hold on its own is reported here; site-specific failures at resolution.
        pc.matmul = MatmulRules(rules, p);
      },
      [](const PrecisionConfig& pc) { return ojson::parse(pc.matmul.source().dump()); });
}

// precision.schedule: [{"step": N, "matmul": [rules], "elementwise": [rules]}, ...], steps increasing.
std::vector<ScheduleEntry> read_schedule(const json& s, const std::string& path) {
  if (!s.is_array()) throw ConfigError(path, "expected a list [{\"step\": N, \"matmul\": [rules]}]");
  std::vector<ScheduleEntry> out;
  for (size_t i = 0; i < s.size(); ++i) {
    const std::string ep = path + "[" + std::to_string(i) + "]";
    const json& e = s[i];
    check_known_keys(e, ep, {"step", "matmul", "elementwise"});
    const json& step = e.contains("step") ? e["step"] : json();
    if (!(step.is_number_unsigned() || (step.is_number_integer() && step.get<int64_t>() >= 0)) || step.get<uint64_t>() == 0)
      throw ConfigError(key_path(ep, "step"), "expected an integer >= 1 (the first step the rules apply to)");
    ScheduleEntry entry;
    entry.step = step.get<uint64_t>();
    if (i && entry.step <= out.back().step) throw ConfigError(key_path(ep, "step"), "schedule steps must increase");
    if (!e.contains("matmul") && !e.contains("elementwise"))
      throw ConfigError(ep, "expected \"matmul\" and/or \"elementwise\" rules to apply from this step");
    if (e.contains("matmul")) entry.matmul = MatmulRules(e["matmul"], key_path(ep, "matmul"));
    if (e.contains("elementwise")) entry.elementwise = ElementwiseRules(e["elementwise"], key_path(ep, "elementwise"));
    out.push_back(std::move(entry));
  }
  return out;
}

// The schedule as written: each entry's keys in the order config.json has always had them (sorted).
ojson write_schedule(const std::vector<ScheduleEntry>& schedule) {
  json out = json::array();
  for (const auto& e : schedule) {
    json entry = json::object();  // (an unordered json object: its keys sorted)
    entry["step"] = e.step;
    if (e.matmul) entry["matmul"] = e.matmul->source();
    if (e.elementwise) entry["elementwise"] = e.elementwise->source();
    out.push_back(std::move(entry));
  }
  return ojson::parse(out.dump());
}

const std::vector<Field<MasterConfig>>& master_fields() {
  using M = MasterConfig;
  static const std::vector<Field<M>> t = {text("format", &M::format), text("rounding", &M::rounding)};
  return t;
}

// precision.master: a format name, or {"format": F, "rounding": R}.
void read_master(const json& v, const std::string& p, MasterConfig& m) {
  if (v.is_string())
    m.format = v.get<std::string>();
  else if (v.is_object())
    read_fields(v, p, master_fields(), m);
  else
    throw ConfigError(p, "expected a format name or {\"format\": F, \"rounding\": \"rne\"|\"sr\"}");
  const std::string fp = v.is_string() ? p : p + ".format";
  const auto f = find_format(m.format);
  if (!f) throw ConfigError(fp, "unknown format '" + m.format + "'");
  if (!fits_float(*f) || f->kind != Kind::floating)
    throw ConfigError(fp, "master weights need a floating-point format whose values are floats (fp32, bf16, fp16, ...), got '" +
                              m.format + "'");
  if (!parse_rounding(m.rounding))
    throw ConfigError(p + ".rounding", "unknown rounding '" + m.rounding + "' (expected rne, sr, rtz, rna, rup, rdn, rto)");
}

void check_loss_scale(const json&, LossScaleConfig& l) {
  const std::string p = "precision.loss_scale";
  if (l.min_scale > l.max_scale) throw ConfigError(p + ".min", "must not exceed precision.loss_scale.max");
  if (l.init < l.min_scale || l.init > l.max_scale)
    throw ConfigError(p + ".init", "must lie in [min, max] = [" + number_text(l.min_scale) + ", " +
                                       number_text(l.max_scale) + "]");
}

const std::vector<Field<LossScaleConfig>>& loss_scale_fields() {
  using L = LossScaleConfig;
  static const std::vector<Field<L>> t = {
      text("kind", &L::kind, {"none", "static", "dynamic"}),
      number("init", &L::init, 0, 1e38, true),
      number("growth", &L::growth, 1, 1e6),
      number("backoff", &L::backoff, 0, 1, true),
      integer("interval", &L::interval, 1, 100000000),
      number("min", &L::min_scale, 0, 1e38, true),
      number("max", &L::max_scale, 0, 1e38, true),
  };
  return t;
}

void check_allreduce(const json&, AllreduceConfig& a) {
  const auto f = find_format(a.format);
  if (!f) throw ConfigError("precision.allreduce.format", "unknown format '" + a.format + "'");
  if (!fits_float(*f) || f->kind != Kind::floating)
    throw ConfigError("precision.allreduce.format",
                      "expected a floating-point format whose values are floats (fp32, bf16, fp16, fp8_e5m2, ...)");
}

const std::vector<Field<AllreduceConfig>>& allreduce_fields() {
  using A = AllreduceConfig;
  static const std::vector<Field<A>> t = {
      integer("ranks", &A::ranks, 1, 4096),
      text("format", &A::format),
      text("rounding", &A::rounding, {"rne", "rna", "rtz", "rup", "rdn", "rto"}),
      text("order", &A::order, {"ring", "tree"}),
  };
  return t;
}

}  // namespace

const std::vector<Field<PrecisionConfig>>& precision_fields() {
  using P = PrecisionConfig;
  static const std::vector<Field<P>> t = {
      matmul_field(),
      custom<P>(
          "schedule", [](const json& v, const std::string& p, P& pc) { pc.schedule = read_schedule(v, p); },
          [](const P& pc) { return write_schedule(pc.schedule); }),
      custom<P>(
          "elementwise", [](const json& v, const std::string& p, P& pc) { pc.elementwise = ElementwiseRules(v, p); },
          [](const P& pc) { return ojson::parse(pc.elementwise.source().dump()); }),
      custom<P>(
          "master", [](const json& v, const std::string& p, P& pc) { read_master(v, p, pc.master); },
          [](const P& pc) { return write_fields(master_fields(), pc.master); }, "\"fp32\""),
      text("optimizer_state", &P::optimizer_state, {"fp32", "bf16", "int8_block"}),
      section("loss_scale", &P::loss_scale, &loss_scale_fields, &check_loss_scale, false),
      section("allreduce", &P::allreduce, &allreduce_fields, &check_allreduce, false),
  };
  return t;
}

void check_precision_against_run(const RunConfig& c) {
  const AllreduceConfig& a = c.precision.allreduce;
  if (a.ranks > 1 && c.model.kind == "proxy")
    throw ConfigError("precision.allreduce.ranks", "simulated data parallelism needs a text model (mlp or attn)");
  if (c.train.batch % a.ranks)
    throw ConfigError("precision.allreduce.ranks", "must divide train.batch (" + std::to_string(c.train.batch) + ")");
}

}  // namespace drift
