#include "train/config_schema.h"

#include <string>
#include <utility>

#include "model/model.h"  // model_kind_names: the kind table

namespace drift {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

constexpr uint64_t kSteps = 100000000;  // the bound of step counts and intervals

// ---- model ----

// The proxy's task forms (model/proxy.cpp): model.student, fc_bias, teacher, teacher_width,
// teacher_depth, init, label_noise. Each is the proxy's alone; a bare student takes input_dim and
// output_dim from d_model when they are not given.
void check_proxy_forms(const json& m, ModelConfig& mc) {
  const ModelConfig defaults;
  const std::pair<const char*, bool> changed[] = {
      {"student", mc.student != defaults.student}, {"fc_bias", mc.fc_bias != defaults.fc_bias},
      {"teacher", mc.teacher != defaults.teacher}, {"teacher_width", mc.teacher_width != 0},
      {"teacher_depth", mc.teacher_depth != 0},    {"init", mc.init != defaults.init},
      {"label_noise", mc.label_noise != 0}};
  for (const auto& [key, set] : changed) {
    if (set && mc.kind != "proxy")
      throw ConfigError(key_path("model", key), "applies to model.kind \"proxy\" only (this model is \"" + mc.kind + "\")");
    if (set && (std::string(key) == "teacher_width" || std::string(key) == "teacher_depth") && mc.teacher != "mlp")
      throw ConfigError(key_path("model", key), "applies to model.teacher \"mlp\" only (0: the student's d_model / layers)");
  }
  const std::string D = std::to_string(mc.d_model);
  if (mc.student == "bare") {  // x is the residual stream and the last block's stream the prediction
    for (const auto& [key, dim] : {std::pair<const char*, size_t*>{"input_dim", &mc.input_dim}, {"output_dim", &mc.output_dim}}) {
      if (m.contains(key) && *dim != mc.d_model)
        throw ConfigError(key_path("model", key), "the bare student (model.student \"bare\") has no input layer or head, so it must "
                                                  "equal model.d_model (" + D + "); leave it out to take d_model");
      *dim = mc.d_model;
    }
  }
  if (mc.teacher == "mlp" && mc.output_dim != mc.input_dim)
    throw ConfigError("model.output_dim", "the mlp teacher (model.teacher \"mlp\") maps input_dim to input_dim, so it must "
                                          "equal model.input_dim (" + std::to_string(mc.input_dim) + ")");
}

void check_model(const json& m, ModelConfig& mc) {
  if (mc.kind == "attn" && mc.d_model % mc.heads)
    throw ConfigError("model.heads", "must divide model.d_model (" + std::to_string(mc.d_model) + ")");
  check_proxy_forms(m, mc);
}

// "vocab" is accepted (a resolved config records it) but always comes from the tokenizer.
Field<ModelConfig> vocab_field() {
  return custom<ModelConfig>(
      "vocab",
      [](const json& v, const std::string& p, ModelConfig&) {
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
          throw ConfigError(p, "expected an integer (informational: the tokenizer sets it)");
      },
      [](const ModelConfig& m) { return ojson(m.vocab); }, "—");
}

const std::vector<Field<ModelConfig>>& model_fields() {
  using M = ModelConfig;
  static const std::vector<Field<M>> t = {
      text("kind", &M::kind, model_kind_names()),
      vocab_field(),
      integer("context", &M::context, 1, 4096),
      integer("embed", &M::embed, 1, 65536),
      integer("hidden", &M::hidden, 1, 65536),
      integer("hidden_layers", &M::hidden_layers, 0, 64),
      integer("d_model", &M::d_model, 1, 65536),
      integer("heads", &M::heads, 1, 1024),
      integer("layers", &M::layers, 0, 64),
      integer("mlp_mult", &M::mlp_mult, 1, 64),
      text("activation", &M::activation, {"tanh", "gelu"}),
      number("init_scale", &M::init_scale, 0, 1e6, true),
      integer("input_dim", &M::input_dim, 1, 65536),
      integer("output_dim", &M::output_dim, 1, 65536),
      seed("teacher_seed", &M::teacher_seed),
      text("student", &M::student, {"projected", "bare"}),
      flag("fc_bias", &M::fc_bias),
      text("teacher", &M::teacher, {"projected", "mlp"}),
      integer("teacher_width", &M::teacher_width, 0, 65536),
      integer("teacher_depth", &M::teacher_depth, 0, 64),
      text("init", &M::init, {"normal", "torch_uniform"}),
      number("label_noise", &M::label_noise, 0, 1e6),
  };
  return t;
}

// ---- data, train ----

void check_data(const json&, DataConfig& d) {
  if (d.path.empty()) throw ConfigError("data.path", "expected a file or directory name");
}

const std::vector<Field<DataConfig>>& data_fields() {
  using D = DataConfig;
  static const std::vector<Field<D>> t = {
      text("path", &D::path),
      text("tokenizer", &D::tokenizer, {"byte", "char"}),
      number("val_fraction", &D::val_fraction, 0, 0.9, true),
  };
  return t;
}

const std::vector<Field<TrainConfig>>& train_fields() {
  using T = TrainConfig;
  static const std::vector<Field<T>> t = {
      integer("steps", &T::steps, 1, kSteps),
      integer("batch", &T::batch, 1, 1 << 20),
      number("lr", &T::lr, 0, 1e3, true),
      text("optimizer", &T::optimizer, {"adamw", "sgd"}),
      number("momentum", &T::momentum, 0, 1),
      // AdamW's bias correction divides by 1 - beta^t: a beta of 1 is not a moment estimate.
      number("beta1", &T::beta1, 0, 1, false, true),
      number("beta2", &T::beta2, 0, 1, false, true),
      number("eps", &T::eps, 0, 1, true),
      text("adam_one_minus_beta", &T::adam_one_minus_beta, {"fp32", "fp64"}),
      number("weight_decay", &T::weight_decay, 0, 1e3),
      number("grad_clip", &T::grad_clip, 0, 1e30),
      integer("warmup", &T::warmup, 0, kSteps),
      text("decay", &T::decay, {"cosine", "linear", "constant", "cosine_torch"}),
      number("min_lr_frac", &T::min_lr_frac, 0, 1),
      integer("eval_every", &T::eval_every, 1, kSteps),
      integer("eval_batches", &T::eval_batches, 1, 100000),
      integer("log_every", &T::log_every, 1, kSteps),
      integer("checkpoint_every", &T::checkpoint_every, 0, kSteps),
      flag("keep_checkpoints", &T::keep_checkpoints),
  };
  return t;
}

}  // namespace

namespace {

// ---- divergence, diagnostics, output ----

// divergence.on: a list of events from nonfinite, spike, departure.
Field<DivergenceConfig> events_field() {
  return custom<DivergenceConfig>(
      "on",
      [](const json& on, const std::string& p, DivergenceConfig& d) {
        const char* expect = "expected a list of events from: nonfinite, spike, departure";
        if (!on.is_array()) throw ConfigError(p, expect);
        d.on.clear();
        for (size_t i = 0; i < on.size(); ++i) {
          const std::string ip = p + "[" + std::to_string(i) + "]";
          if (!on[i].is_string()) throw ConfigError(ip, expect);
          const std::string e = on[i].get<std::string>();
          if (e != "nonfinite" && e != "spike" && e != "departure")
            throw ConfigError(ip, "unknown event '" + e + "' (expected nonfinite, spike or departure)");
          d.on.push_back(e);
        }
      },
      [](const DivergenceConfig& d) { return ojson(d.on); });
}

void check_divergence(const json&, DivergenceConfig& d) {
  if (d.smoothing >= 1) throw ConfigError("divergence.smoothing", "expected a number in [0, 1)");
}

const std::vector<Field<DivergenceConfig>>& divergence_fields() {
  using D = DivergenceConfig;
  static const std::vector<Field<D>> t = {
      flag("enabled", &D::enabled),
      number("factor", &D::factor, 1, 1e30),
      integer("after_step", &D::after_step, 0, kSteps),
      integer("patience", &D::patience, 1, kSteps),
      number("smoothing", &D::smoothing, 0, 1),  // and < 1: check_divergence
      number("departure_tol", &D::departure_tol, 0, 1e30, true),
      integer("departure_steps", &D::departure_steps, 1, kSteps),
      events_field(),
      flag("stop", &D::stop),
      integer("window", &D::window, 2, 100000),
  };
  return t;
}

const std::vector<Field<DiagnosticsConfig>>& diagnostics_fields() {
  using D = DiagnosticsConfig;
  static const std::vector<Field<D>> t = {
      integer("every", &D::every, 0, kSteps),
      custom<D>(
          "probes", [](const json& v, const std::string& p, D& d) { d.probes = parse_probes(v, p); },
          [](const D& d) { return ojson::parse(probes_source(d.probes).dump()); }),
      flag("swamping", &D::swamping),
  };
  return t;
}

void check_output(const json&, OutputConfig& o) {
  if (o.name.empty() || o.name.find('/') != std::string::npos)
    throw ConfigError("output.name", "expected a non-empty name without '/'");
}

const std::vector<Field<OutputConfig>>& output_fields() {
  using O = OutputConfig;
  static const std::vector<Field<O>> t = {
      text("dir", &O::dir),
      documented_as(text("name", &O::name), "config file name"),  // drift train sets it from the file's name
  };
  return t;
}

// ---- the top level ----

// "version": the drift version that wrote the config (a run's config.json records it). Accepted
// when this build reads that version's configs: the same major.minor release and a patch level not
// newer than this build's (the numbers of DRIFT_VERSION).
void check_config_version(const json& v) {
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

// precision reads after model and train: its checks look at model.kind and train.batch.
Field<RunConfig> precision_section() {
  Field<RunConfig> f = section("precision", &RunConfig::precision, &precision_fields);
  f.read = [read = f.read](const json& v, const std::string& p, RunConfig& c) {
    read(v, p, c);
    check_precision_against_run(c);
  };
  return f;
}

}  // namespace

const std::vector<Field<RunConfig>>& run_config_fields() {
  using R = RunConfig;
  static const std::vector<Field<R>> t = {
      custom<R>(
          "version", [](const json& v, const std::string&, R&) { check_config_version(v); },
          [](const R&) { return ojson(DRIFT_VERSION); }, "this build's"),
      seed("seed", &R::seed),
      // Whether the backend can run here (compiled in, a device present) is checked by prepare_run.
      text("backend", &R::backend, {"cpu", "cuda"}),
      section("model", &R::model, &model_fields, &check_model),
      section("data", &R::data, &data_fields, &check_data),
      section("train", &R::train, &train_fields),
      precision_section(),
      section("divergence", &R::divergence, &divergence_fields, &check_divergence),
      section("diagnostics", &R::diagnostics, &diagnostics_fields),
      section("output", &R::output, &output_fields, &check_output),
  };
  return t;
}

std::vector<KeyDoc> config_key_docs() { return field_docs(run_config_fields(), ""); }

}  // namespace drift
