#include "train/config.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stdexcept>
#include <sstream>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "io/json_read.h"
#include "policy/elementwise_rules.h"
#include "policy/probes.h"
#include "policy/site_rules.h"

namespace drift {

using json = nlohmann::json;

namespace {

std::string join(const std::string& p, const std::string& k) { return p.empty() ? k : p + "." + k; }

void check_keys(const json& j, const std::string& path, std::initializer_list<const char*> keys) {
  if (!j.is_object()) throw ConfigError(path, "expected an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : keys) ok = ok || it.key() == k;
    if (!ok) {
      std::string list;
      for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      throw ConfigError(join(path, it.key()), "unknown key (expected one of: " + list + ")");
    }
  }
}

void get_uint(const json& j, const std::string& path, const char* key, size_t* out, size_t lo = 0,
              size_t hi = std::numeric_limits<uint32_t>::max()) {
  if (!j.contains(key)) return;
  const json& v = j[key];
  const std::string p = join(path, key);
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    throw ConfigError(p, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  const uint64_t x = v.get<uint64_t>();
  if (x < lo || x > hi)
    throw ConfigError(p, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                             std::to_string(x));
  *out = static_cast<size_t>(x);
}

std::string num(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

// lo/hi inclusive unless open_lo (x > lo) / open_hi (x < hi).
void get_double(const json& j, const std::string& path, const char* key, double* out, double lo, double hi,
                bool open_lo = false, bool open_hi = false) {
  if (!j.contains(key)) return;
  const json& v = j[key];
  const std::string p = join(path, key);
  const std::string range = std::string(open_lo ? "(" : "[") + num(lo) + ", " + num(hi) + (open_hi ? ")" : "]");
  if (!v.is_number()) throw ConfigError(p, "expected a number in " + range);
  const double x = v.get<double>();
  if (!std::isfinite(x) || (open_lo ? x <= lo : x < lo) || (open_hi ? x >= hi : x > hi))
    throw ConfigError(p, "expected a number in " + range + ", got " + num(x));
  *out = x;
}

void get_bool(const json& j, const std::string& path, const char* key, bool* out) {
  if (!j.contains(key)) return;
  if (!j[key].is_boolean()) throw ConfigError(join(path, key), "expected true or false");
  *out = j[key].get<bool>();
}

void get_string(const json& j, const std::string& path, const char* key, std::string* out,
                std::initializer_list<const char*> choices = {}) {
  if (!j.contains(key)) return;
  const std::string p = join(path, key);
  std::string list;
  for (const char* c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
  if (!j[key].is_string()) throw ConfigError(p, choices.size() ? "expected one of: " + list : "expected a string");
  const std::string s = j[key].get<std::string>();
  if (choices.size()) {
    bool ok = false;
    for (const char* c : choices) ok = ok || s == c;
    if (!ok) throw ConfigError(p, "unknown value '" + s + "' (expected one of: " + list + ")");
  }
  *out = s;
}

bool non_negative_int(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

const json& section(const json& j, const char* key) {
  static const json empty = json::object();
  return j.contains(key) ? j[key] : empty;
}

// precision.master: a format name, or {"format": F, "rounding": R}.
void parse_master(const json& pr, MasterConfig& m) {
  if (!pr.contains("master")) return;
  const json& v = pr["master"];
  const std::string p = "precision.master";
  if (v.is_string()) {
    m.format = v.get<std::string>();
  } else if (v.is_object()) {
    check_keys(v, p, {"format", "rounding"});
    get_string(v, p, "format", &m.format);
    get_string(v, p, "rounding", &m.rounding);
  } else {
    throw ConfigError(p, "expected a format name or {\"format\": F, \"rounding\": \"rne\"|\"sr\"}");
  }
  const auto f = find_format(m.format);
  if (!f) throw ConfigError(v.is_string() ? p : p + ".format", "unknown format '" + m.format + "'");
  if (!fits_float(*f) || f->kind != Kind::floating)
    throw ConfigError(v.is_string() ? p : p + ".format",
                      "master weights need a floating-point format whose values are floats (fp32, bf16, fp16, ...), got '" +
                          m.format + "'");
  if (!parse_rounding(m.rounding))
    throw ConfigError(p + ".rounding", "unknown rounding '" + m.rounding + "' (expected rne, sr, rtz, rna, rup, rdn, rto)");
}

// precision.loss_scale: {"kind": none|static|dynamic, "init", "growth", "backoff", "interval", "min", "max"}.
void parse_loss_scale(const json& pr, LossScaleConfig& l) {
  if (!pr.contains("loss_scale")) return;
  const json& v = pr["loss_scale"];
  const std::string p = "precision.loss_scale";
  check_keys(v, p, {"kind", "init", "growth", "backoff", "interval", "min", "max"});
  get_string(v, p, "kind", &l.kind, {"none", "static", "dynamic"});
  get_double(v, p, "init", &l.init, 0, 1e38, true);
  get_double(v, p, "growth", &l.growth, 1, 1e6);
  get_double(v, p, "backoff", &l.backoff, 0, 1, true);
  size_t interval = l.interval;
  get_uint(v, p, "interval", &interval, 1, 100000000);
  l.interval = interval;
  get_double(v, p, "min", &l.min_scale, 0, 1e38, true);
  get_double(v, p, "max", &l.max_scale, 0, 1e38, true);
  if (l.min_scale > l.max_scale) throw ConfigError(p + ".min", "must not exceed precision.loss_scale.max");
  if (l.init < l.min_scale || l.init > l.max_scale)
    throw ConfigError(p + ".init", "must lie in [min, max] = [" + num(l.min_scale) + ", " + num(l.max_scale) + "]");
}

// precision.allreduce: {"ranks": R, "format": F, "rounding": M, "order": ring|tree}.
void parse_allreduce(const json& pr, AllreduceConfig& a) {
  if (!pr.contains("allreduce")) return;
  const json& v = pr["allreduce"];
  const std::string p = "precision.allreduce";
  check_keys(v, p, {"ranks", "format", "rounding", "order"});
  get_uint(v, p, "ranks", &a.ranks, 1, 4096);
  get_string(v, p, "format", &a.format);
  get_string(v, p, "rounding", &a.rounding, {"rne", "rna", "rtz", "rup", "rdn", "rto"});
  get_string(v, p, "order", &a.order, {"ring", "tree"});
  const auto f = find_format(a.format);
  if (!f) throw ConfigError(p + ".format", "unknown format '" + a.format + "'");
  if (!fits_float(*f) || f->kind != Kind::floating)
    throw ConfigError(p + ".format", "expected a floating-point format whose values are floats (fp32, bf16, fp16, fp8_e5m2, ...)");
}

}  // namespace

std::string RunConfig::run_dir() const {
  if (!output.dir.empty()) return output.dir;
  return "runs/" + output.name + "/seed" + std::to_string(seed);
}

namespace {

// "version": the drift version that wrote the config (a run's config.json records it). Accepted
// when this build reads that version's configs: the same major.minor release and a patch level not
// newer than this build's (the numbers of DRIFT_VERSION).
void check_config_version(const json& j) {
  if (!j.contains("version")) return;
  const json& v = j["version"];
  auto parse = [](const std::string& s, int out[3]) {
    size_t pos = 0;
    for (int i = 0; i < 3; ++i) {
      size_t end = pos;
      while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
      if (end == pos || end - pos > 6) return false;
      out[i] = std::stoi(s.substr(pos, end - pos));
      if (i < 2 && (end >= s.size() || s[end] != '.')) return false;
      pos = end + 1;
      if (i == 2 && end != s.size()) return false;
    }
    return true;
  };
  const std::string self = DRIFT_VERSION;
  int want[3], mine[3];
  if (!v.is_string() || !parse(v.get<std::string>(), want))
    throw ConfigError("version", "expected a drift version string \"MAJOR.MINOR.PATCH\" (this build: " + self + ")");
  if (!parse(self, mine)) return;  // (a build without a numeric version reads any)
  const bool readable = want[0] == mine[0] && want[1] == mine[1] && want[2] <= mine[2];
  if (!readable)
    throw ConfigError("version", "config of drift " + v.get<std::string>() + ", which this build (drift " + self +
                                     ") does not understand; use drift " + std::to_string(want[0]) + "." +
                                     std::to_string(want[1]) + ".x or remove the key");
}

// The proxy's task forms (model/proxy.cpp): model.student, fc_bias, teacher, teacher_width,
// teacher_depth, init, label_noise. Each is the proxy's alone; a bare student takes input_dim and
// output_dim from d_model when they are not given.
void parse_proxy_forms(const json& m, ModelConfig& mc) {
  const std::string p = "model";
  get_string(m, p, "student", &mc.student, {"projected", "bare"});
  get_bool(m, p, "fc_bias", &mc.fc_bias);
  get_string(m, p, "teacher", &mc.teacher, {"projected", "mlp"});
  get_uint(m, p, "teacher_width", &mc.teacher_width, 0, 65536);
  get_uint(m, p, "teacher_depth", &mc.teacher_depth, 0, 64);
  get_string(m, p, "init", &mc.init, {"normal", "torch_uniform"});
  get_double(m, p, "label_noise", &mc.label_noise, 0, 1e6);
  const ModelConfig defaults;
  const std::pair<const char*, bool> changed[] = {
      {"student", mc.student != defaults.student}, {"fc_bias", mc.fc_bias != defaults.fc_bias},
      {"teacher", mc.teacher != defaults.teacher}, {"teacher_width", mc.teacher_width != 0},
      {"teacher_depth", mc.teacher_depth != 0},    {"init", mc.init != defaults.init},
      {"label_noise", mc.label_noise != 0}};
  for (const auto& [key, set] : changed) {
    if (set && mc.kind != "proxy")
      throw ConfigError(join(p, key), "applies to model.kind \"proxy\" only (this model is \"" + mc.kind + "\")");
    if (set && (std::string(key) == "teacher_width" || std::string(key) == "teacher_depth") && mc.teacher != "mlp")
      throw ConfigError(join(p, key), "applies to model.teacher \"mlp\" only (0: the student's d_model / layers)");
  }
  const std::string D = std::to_string(mc.d_model);
  if (mc.student == "bare") {  // x is the residual stream and the last block's stream the prediction
    for (const auto& [key, dim] : {std::pair<const char*, size_t*>{"input_dim", &mc.input_dim}, {"output_dim", &mc.output_dim}}) {
      if (m.contains(key) && *dim != mc.d_model)
        throw ConfigError(join(p, key), "the bare student (model.student \"bare\") has no input layer or head, so it must "
                                        "equal model.d_model (" + D + "); leave it out to take d_model");
      *dim = mc.d_model;
    }
  }
  if (mc.teacher == "mlp" && mc.output_dim != mc.input_dim)
    throw ConfigError("model.output_dim", "the mlp teacher (model.teacher \"mlp\") maps input_dim to input_dim, so it must "
                                          "equal model.input_dim (" + std::to_string(mc.input_dim) + ")");
}

}  // namespace

RunConfig parse_run_config(const json& j) {
  RunConfig c;
  check_keys(j, "", {"version", "seed", "backend", "model", "data", "train", "precision", "divergence", "diagnostics", "output"});
  check_config_version(j);
  if (j.contains("seed")) {
    if (!non_negative_int(j["seed"])) throw ConfigError("seed", "expected an integer >= 0");
    c.seed = j["seed"].get<uint64_t>();
  }
  // Whether the backend can run here (compiled in, a device present) is checked by prepare_run.
  get_string(j, "", "backend", &c.backend, {"cpu", "cuda"});
  {
    const json& m = section(j, "model");
    const std::string p = "model";
    check_keys(m, p, {"kind", "context", "embed", "hidden", "hidden_layers", "d_model", "heads", "layers", "mlp_mult",
                      "activation", "init_scale", "vocab", "input_dim", "output_dim", "teacher_seed", "student",
                      "fc_bias", "teacher", "teacher_width", "teacher_depth", "init", "label_noise"});
    auto& mc = c.model;
    get_string(m, p, "kind", &mc.kind, {"mlp", "attn", "proxy"});
    get_uint(m, p, "context", &mc.context, 1, 4096);
    get_uint(m, p, "embed", &mc.embed, 1, 65536);
    get_uint(m, p, "hidden", &mc.hidden, 1, 65536);
    get_uint(m, p, "hidden_layers", &mc.hidden_layers, 0, 64);
    get_uint(m, p, "d_model", &mc.d_model, 1, 65536);
    get_uint(m, p, "heads", &mc.heads, 1, 1024);
    get_uint(m, p, "layers", &mc.layers, 0, 64);
    get_uint(m, p, "mlp_mult", &mc.mlp_mult, 1, 64);
    get_string(m, p, "activation", &mc.activation, {"tanh", "gelu"});
    get_double(m, p, "init_scale", &mc.init_scale, 0, 1e6, true);
    get_uint(m, p, "input_dim", &mc.input_dim, 1, 65536);
    get_uint(m, p, "output_dim", &mc.output_dim, 1, 65536);
    if (m.contains("teacher_seed")) {
      if (!non_negative_int(m["teacher_seed"])) throw ConfigError("model.teacher_seed", "expected an integer >= 0");
      mc.teacher_seed = m["teacher_seed"].get<uint64_t>();
    }
    // "vocab" is accepted (a resolved config records it) but always comes from the tokenizer.
    if (m.contains("vocab") && !non_negative_int(m["vocab"]))
      throw ConfigError("model.vocab", "expected an integer (informational: the tokenizer sets it)");
    if (mc.kind == "attn" && mc.d_model % mc.heads)
      throw ConfigError("model.heads", "must divide model.d_model (" + std::to_string(mc.d_model) + ")");
    parse_proxy_forms(m, mc);
  }
  {
    const json& d = section(j, "data");
    check_keys(d, "data", {"path", "tokenizer", "val_fraction"});
    get_string(d, "data", "path", &c.data.path);
    if (c.data.path.empty()) throw ConfigError("data.path", "expected a file or directory name");
    get_string(d, "data", "tokenizer", &c.data.tokenizer, {"byte", "char"});
    get_double(d, "data", "val_fraction", &c.data.val_fraction, 0, 0.9, true);
  }
  {
    const json& t = section(j, "train");
    const std::string p = "train";
    check_keys(t, p, {"steps", "batch", "lr", "optimizer", "momentum", "beta1", "beta2", "eps", "adam_one_minus_beta", "weight_decay",
                      "grad_clip", "warmup", "decay", "min_lr_frac", "eval_every", "eval_batches", "log_every",
                      "checkpoint_every", "keep_checkpoints"});
    auto& tc = c.train;
    get_uint(t, p, "steps", &tc.steps, 1, 100000000);
    get_uint(t, p, "batch", &tc.batch, 1, 1 << 20);
    get_double(t, p, "lr", &tc.lr, 0, 1e3, true);
    get_string(t, p, "optimizer", &tc.optimizer, {"adamw", "sgd"});
    get_double(t, p, "momentum", &tc.momentum, 0, 1);
    // AdamW's bias correction divides by 1 - beta^t: a beta of 1 is not a moment estimate.
    get_double(t, p, "beta1", &tc.beta1, 0, 1, false, true);
    get_double(t, p, "beta2", &tc.beta2, 0, 1, false, true);
    get_double(t, p, "eps", &tc.eps, 0, 1, true);
    get_string(t, p, "adam_one_minus_beta", &tc.adam_one_minus_beta, {"fp32", "fp64"});
    get_double(t, p, "weight_decay", &tc.weight_decay, 0, 1e3);
    get_double(t, p, "grad_clip", &tc.grad_clip, 0, 1e30);
    get_uint(t, p, "warmup", &tc.warmup, 0, 100000000);
    get_string(t, p, "decay", &tc.decay, {"cosine", "linear", "constant", "cosine_torch"});
    get_double(t, p, "min_lr_frac", &tc.min_lr_frac, 0, 1);
    get_uint(t, p, "eval_every", &tc.eval_every, 1, 100000000);
    get_uint(t, p, "eval_batches", &tc.eval_batches, 1, 100000);
    get_uint(t, p, "log_every", &tc.log_every, 1, 100000000);
    get_uint(t, p, "checkpoint_every", &tc.checkpoint_every, 0, 100000000);
    get_bool(t, p, "keep_checkpoints", &tc.keep_checkpoints);
  }
  {
    const json& pr = section(j, "precision");
    check_keys(pr, "precision", {"matmul", "schedule", "elementwise", "master", "optimizer_state", "loss_scale",
                                 "allreduce"});
    auto& pc = c.precision;
    if (pr.contains("matmul")) {
      pc.matmul = pr["matmul"].is_string() || (pr["matmul"].is_object())
                      ? json::array({pr["matmul"].is_string() ? json{{"preset", pr["matmul"]}} : pr["matmul"]})
                      : pr["matmul"];
      check_matmul_rules(pc.matmul, "precision.matmul");
      // A policy that does not hold on its own is reported here; site-specific failures at resolution.
    }
    if (pr.contains("schedule")) {
      pc.schedule = pr["schedule"];
      if (!pc.schedule.is_array()) throw ConfigError("precision.schedule", "expected a list [{\"step\": N, \"matmul\": [rules]}]");
      uint64_t prev = 0;
      for (size_t i = 0; i < pc.schedule.size(); ++i) {
        const std::string ep = "precision.schedule[" + std::to_string(i) + "]";
        const json& e = pc.schedule[i];
        check_keys(e, ep, {"step", "matmul", "elementwise"});
        if (!e.contains("step") || !non_negative_int(e["step"]) || e["step"].get<uint64_t>() == 0)
          throw ConfigError(join(ep, "step"), "expected an integer >= 1 (the first step the rules apply to)");
        if (i && e["step"].get<uint64_t>() <= prev)
          throw ConfigError(join(ep, "step"), "schedule steps must increase");
        prev = e["step"].get<uint64_t>();
        if (!e.contains("matmul") && !e.contains("elementwise"))
          throw ConfigError(ep, "expected \"matmul\" and/or \"elementwise\" rules to apply from this step");
        if (e.contains("matmul")) check_matmul_rules(e["matmul"], join(ep, "matmul"));
        if (e.contains("elementwise")) check_elementwise_rules(e["elementwise"], join(ep, "elementwise"));
      }
    }
    if (pr.contains("elementwise")) {
      pc.elementwise = pr["elementwise"];
      check_elementwise_rules(pc.elementwise, "precision.elementwise");
    }
    parse_master(pr, pc.master);
    get_string(pr, "precision", "optimizer_state", &pc.optimizer_state, {"fp32", "bf16", "int8_block"});
    parse_loss_scale(pr, pc.loss_scale);
    parse_allreduce(pr, pc.allreduce);
    if (pc.allreduce.ranks > 1 && c.model.kind == "proxy")
      throw ConfigError("precision.allreduce.ranks", "simulated data parallelism needs a text model (mlp or attn)");
    if (c.train.batch % pc.allreduce.ranks)
      throw ConfigError("precision.allreduce.ranks", "must divide train.batch (" + std::to_string(c.train.batch) + ")");
  }
  {
    const json& d = section(j, "divergence");
    const std::string p = "divergence";
    check_keys(d, p, {"enabled", "factor", "after_step", "patience", "smoothing", "departure_tol", "departure_steps", "on",
                      "stop", "window"});
    get_bool(d, p, "enabled", &c.divergence.enabled);
    get_double(d, p, "factor", &c.divergence.factor, 1, 1e30);
    get_uint(d, p, "after_step", &c.divergence.after_step, 0, 100000000);
    get_uint(d, p, "patience", &c.divergence.patience, 1, 100000000);
    get_double(d, p, "departure_tol", &c.divergence.departure_tol, 0, 1e30, true);
    get_uint(d, p, "departure_steps", &c.divergence.departure_steps, 1, 100000000);
    get_uint(d, p, "window", &c.divergence.window, 2, 100000);
    if (d.contains("on")) {
      const json& on = d["on"];
      const char* expect = "expected a list of events from: nonfinite, spike, departure";
      if (!on.is_array()) throw ConfigError("divergence.on", expect);
      c.divergence.on.clear();
      for (size_t i = 0; i < on.size(); ++i) {
        const std::string ip = "divergence.on[" + std::to_string(i) + "]";
        if (!on[i].is_string()) throw ConfigError(ip, expect);
        const std::string e = on[i].get<std::string>();
        if (e != "nonfinite" && e != "spike" && e != "departure")
          throw ConfigError(ip, "unknown event '" + e + "' (expected nonfinite, spike or departure)");
        c.divergence.on.push_back(e);
      }
    }
    get_double(d, p, "smoothing", &c.divergence.smoothing, 0, 1);
    if (c.divergence.smoothing >= 1) throw ConfigError("divergence.smoothing", "expected a number in [0, 1)");
    get_bool(d, p, "stop", &c.divergence.stop);
  }
  {  // diagnostics (diag/diagnostics.h)
    const json& d = section(j, "diagnostics");
    check_keys(d, "diagnostics", {"every", "probes", "swamping"});
    get_bool(d, "diagnostics", "swamping", &c.diagnostics.swamping);
    get_uint(d, "diagnostics", "every", &c.diagnostics.every, 0, 100000000);
    if (d.contains("probes")) {
      parse_probes(d["probes"], "diagnostics.probes");  // checks every entry
      c.diagnostics.probes = d["probes"];
    }
  }
  {
    const json& o = section(j, "output");
    check_keys(o, "output", {"dir", "name"});
    get_string(o, "output", "dir", &c.output.dir);
    get_string(o, "output", "name", &c.output.name);
    if (c.output.name.empty() || c.output.name.find('/') != std::string::npos)
      throw ConfigError("output.name", "expected a non-empty name without '/'");
  }
  return c;
}

nlohmann::ordered_json resolved_config_json(const RunConfig& c) {
  using oj = nlohmann::ordered_json;
  const auto& m = c.model;
  const auto& t = c.train;
  oj j;
  j["version"] = DRIFT_VERSION;
  j["seed"] = c.seed;
  j["backend"] = c.backend;
  j["model"] = {{"kind", m.kind},         {"vocab", m.vocab},     {"context", m.context},   {"embed", m.embed},
                {"hidden", m.hidden},     {"hidden_layers", m.hidden_layers},               {"d_model", m.d_model},
                {"heads", m.heads},       {"layers", m.layers},   {"mlp_mult", m.mlp_mult}, {"activation", m.activation},
                {"init_scale", m.init_scale}, {"input_dim", m.input_dim}, {"output_dim", m.output_dim},
                {"teacher_seed", m.teacher_seed}, {"student", m.student},         {"fc_bias", m.fc_bias},
                {"teacher", m.teacher},           {"teacher_width", m.teacher_width}, {"teacher_depth", m.teacher_depth},
                {"init", m.init},                 {"label_noise", m.label_noise}};
  j["data"] = {{"path", c.data.path}, {"tokenizer", c.data.tokenizer}, {"val_fraction", c.data.val_fraction}};
  j["train"] = {{"steps", t.steps},         {"batch", t.batch},         {"lr", t.lr},
                {"optimizer", t.optimizer}, {"momentum", t.momentum},   {"beta1", t.beta1},
                {"beta2", t.beta2},         {"eps", t.eps},             {"adam_one_minus_beta", t.adam_one_minus_beta},
                {"weight_decay", t.weight_decay},
                {"grad_clip", t.grad_clip}, {"warmup", t.warmup},       {"decay", t.decay},
                {"min_lr_frac", t.min_lr_frac}, {"eval_every", t.eval_every}, {"eval_batches", t.eval_batches},
                {"log_every", t.log_every}, {"checkpoint_every", t.checkpoint_every},
                {"keep_checkpoints", t.keep_checkpoints}};
  j["precision"] = {{"matmul", oj::parse(c.precision.matmul.dump())},
                    {"schedule", oj::parse(c.precision.schedule.dump())},
                    {"elementwise", oj::parse(c.precision.elementwise.dump())},
                    {"master", {{"format", c.precision.master.format}, {"rounding", c.precision.master.rounding}}},
                    {"optimizer_state", c.precision.optimizer_state},
                    {"loss_scale", {{"kind", c.precision.loss_scale.kind}, {"init", c.precision.loss_scale.init},
                                    {"growth", c.precision.loss_scale.growth}, {"backoff", c.precision.loss_scale.backoff},
                                    {"interval", c.precision.loss_scale.interval}, {"min", c.precision.loss_scale.min_scale},
                                    {"max", c.precision.loss_scale.max_scale}}},
                    {"allreduce", {{"ranks", c.precision.allreduce.ranks}, {"format", c.precision.allreduce.format},
                                   {"rounding", c.precision.allreduce.rounding}, {"order", c.precision.allreduce.order}}}};
  j["divergence"] = {{"enabled", c.divergence.enabled}, {"factor", c.divergence.factor},
                     {"after_step", c.divergence.after_step}, {"patience", c.divergence.patience},
                     {"smoothing", c.divergence.smoothing}, {"departure_tol", c.divergence.departure_tol},
                     {"departure_steps", c.divergence.departure_steps}, {"on", c.divergence.on},
                     {"stop", c.divergence.stop}, {"window", c.divergence.window}};
  j["diagnostics"] = {{"every", c.diagnostics.every}, {"probes", oj::parse(c.diagnostics.probes.dump())},
                      {"swamping", c.diagnostics.swamping}};
  j["output"] = {{"dir", c.output.dir}, {"name", c.output.name}};
  return j;
}

json load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ConfigError("", "config file '" + path + "' is a directory (expected a JSON file, e.g. " +
                              (std::filesystem::path(path) / "config.json").string() + ")");
  try {
    return io::read_json_file(path, "config file");
  } catch (const io::IoError& e) {
    throw ConfigError("", std::string("config file ") + e.what());
  }
}

void require_utf8(const std::string& text, const std::string& path, const std::string& what) {
  try {
    (void)json(text).dump();
  } catch (const json::type_error&) {
    throw ConfigError(path, what + ": " + json(text).dump(-1, ' ', true, json::error_handler_t::replace) +
                                " is not UTF-8 text (it would be written to config.json as a JSON string)");
  }
}

json config_with_overrides(const std::string& file, const std::vector<std::string>& sets, const uint64_t* seed,
                           const std::string& out) {
  json j = load_config_file(file);
  if (!j.is_object()) throw ConfigError("", "config file '" + file + "': expected a JSON object");
  const char* output_expected = "expected an object {\"dir\": DIR, \"name\": NAME}";
  if (j.contains("output") && !j["output"].is_object()) throw ConfigError("output", output_expected);
  if (!j.contains("output") || !j["output"].contains("name")) {
    j["output"]["name"] = std::filesystem::path(file).stem().string();
    require_utf8(j["output"]["name"].get<std::string>(), "output.name", "the config file's name");
  }
  for (const auto& s : sets) apply_set(j, s);
  if (seed) j["seed"] = *seed;
  if (!out.empty()) {
    if (j.contains("output") && !j["output"].is_object()) throw ConfigError("output", output_expected);
    require_utf8(out, "output.dir", "--out");
    j["output"]["dir"] = out;
  }
  return j;
}

void apply_set(json& root, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("", "--set expects path=value (e.g. train.lr=0.01), got '" + assignment + "'");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  require_utf8(assignment, "", "--set");
  json value;
  try {
    if (!io::try_parse_json(text, "--set " + path, value)) value = text;  // not JSON: a bare string
  } catch (const io::IoError& e) {
    throw ConfigError(path, e.what());
  }
  json* cur = &root;
  std::string done;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string seg = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (seg.empty()) throw ConfigError(path, "--set: empty path segment");
    const bool last = dot == std::string::npos;
    if (cur->is_array()) {
      size_t index = 0;
      const auto r = std::from_chars(seg.data(), seg.data() + seg.size(), index);
      if (r.ec != std::errc() || r.ptr != seg.data() + seg.size() || index >= cur->size())
        throw ConfigError(done, "--set: '" + seg + "' is not an index of this list (size " + std::to_string(cur->size()) + ")");
      cur = &(*cur)[index];
    } else {
      if (cur->is_null()) *cur = json::object();
      if (!cur->is_object()) throw ConfigError(done, "--set: not an object, cannot set '" + seg + "' inside it");
      cur = &(*cur)[seg];
    }
    done = join(done, seg);
    if (last) break;
    start = dot + 1;
  }
  *cur = value;
}

void resolve_sites_at_step(const PrecisionConfig& p, uint64_t step, MatmulSites& sites, ElementwiseSites& elementwise) {
  resolve_sites_at_step(p, step, sites);
  // Schedule rules apply on top, and later rules win: the cascade of the concatenated lists.
  json rules = p.elementwise;
  for (const json& e : p.schedule) {
    if (e["step"].get<uint64_t>() > step) break;
    if (e.contains("elementwise"))
      for (const json& r : e["elementwise"]) rules.push_back(r);
  }
  resolve_elementwise(rules, "precision.elementwise", elementwise);
}

void check_run_rules(const RunConfig& c, const MatmulSites& sites, const ElementwiseSites& elementwise) {
  MatmulSites s = sites;
  ElementwiseSites e = elementwise;
  resolve_sites_at_step(c.precision, 0, s, e);
  for (const json& entry : c.precision.schedule)
    resolve_sites_at_step(c.precision, entry["step"].get<uint64_t>(), s, e);
  for (const auto& probe : parse_probes(c.diagnostics.probes, "diagnostics.probes")) {
    MatmulSites ps = sites;
    resolve_sites(probe.rules, probe.path, ps);
  }
}

std::vector<std::string> surprising_settings(const RunConfig& c) {
  std::vector<std::string> w;
  const auto n = [](size_t v) { return std::to_string(v); };
  const auto& t = c.train;
  if (t.warmup > 0 && t.warmup >= t.steps)
    w.push_back("train.warmup (" + n(t.warmup) + ") >= train.steps (" + n(t.steps) +
                "): the whole run is warmup (the learning rate reaches train.lr at the last step at best, and never decays)");
  if (t.eval_every > t.steps)
    w.push_back("train.eval_every (" + n(t.eval_every) + ") > train.steps (" + n(t.steps) +
                "): the validation loss is measured only after the last step");
  if (t.log_every > t.steps)
    w.push_back("train.log_every (" + n(t.log_every) + ") > train.steps (" + n(t.steps) +
                "): metrics.jsonl gets only step 0, evaluation and last-step lines");
  return w;
}

void check_run_rules(const RunConfig& c) {
  ModelConfig m = c.model;
  if (m.vocab == 0) m.vocab = 256;
  std::unique_ptr<Model<float>> model;
  try {
    model = make_model<float>(m, c.seed);
  } catch (const std::invalid_argument& e) {
    throw ConfigError("model", e.what());
  }
  check_run_rules(c, model->sites, model->elementwise);
}

namespace {

// The schedule entries' matmul rule lists in force at `step`, with their paths.
std::vector<std::pair<const json*, std::string>> scheduled_matmul_rules(const PrecisionConfig& p, uint64_t step) {
  std::vector<std::pair<const json*, std::string>> out;
  for (size_t i = 0; i < p.schedule.size(); ++i) {
    const json& e = p.schedule[i];
    if (e["step"].get<uint64_t>() > step) break;
    if (e.contains("matmul")) out.emplace_back(&e["matmul"], "precision.schedule[" + std::to_string(i) + "].matmul");
  }
  return out;
}

}  // namespace

void resolve_sites_at_step(const PrecisionConfig& p, uint64_t step, MatmulSites& sites) {
  resolve_sites(p.matmul, "precision.matmul", sites);
  for (const auto& [rules, path] : scheduled_matmul_rules(p, step))
    for (auto& s : sites.sites()) s.policy = resolve_site_policy(*rules, path, s, s.policy);
}

std::vector<FieldOrigins> site_field_origins(const PrecisionConfig& p, uint64_t step, const MatmulSites& sites) {
  std::vector<FieldOrigins> out;
  for (const auto& s : sites.sites()) {
    FieldOrigins o;
    MatmulPolicy policy = resolve_site_policy_traced(p.matmul, "precision.matmul", s, MatmulPolicy(), o);
    for (const auto& [rules, path] : scheduled_matmul_rules(p, step)) policy = resolve_site_policy_traced(*rules, path, s, policy, o);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace drift
