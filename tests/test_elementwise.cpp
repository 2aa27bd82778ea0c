// precision.elementwise: quantizers on LayerNorm γ/β/output, activation input/output and softmax
// probabilities. Known answers derived by hand, the straight-through backward against finite
// differences of its surrogate (the quantization error frozen as a constant), the rule cascade and
// its config errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "model/layers.h"
#include "model/model.h"
#include "policy/elementwise_rules.h"
#include "policy/matmul_json.h"
#include "train/config.h"
#include "train_checks.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_elementwise {

using namespace drift;
using json = nlohmann::json;

namespace {

MatmulPolicy fp64_policy() {
  return parse_matmul_policy(json::parse(R"({"a": {"format": "fp64"}, "b": {"format": "fp64"},
      "product": {"format": "fp64"}, "inner": {"format": "fp64"}, "outer": {"format": "fp64"},
      "output": {"format": "fp64"}})"));
}

// bf16 by round-to-nearest-even on the bits of a finite float: the independent oracle.
float bf16_rne(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);
  u &= 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

std::vector<float> randn_f(size_t n, uint64_t stream, double sd = 1.0) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(sd * normal_draw(11, stream, i));
  return v;
}

// A model small enough for finite differences, with every kind's sizes set so one config serves any kind.
ModelConfig tiny_model(const char* kind, int layers = 2, const char* activation = "tanh") {
  ModelConfig cfg;
  cfg.kind = kind;
  cfg.vocab = 7;
  cfg.context = 4;
  cfg.embed = 4;
  cfg.hidden = 8;
  cfg.hidden_layers = layers;
  cfg.d_model = 8;
  cfg.heads = 2;
  cfg.layers = layers;
  cfg.mlp_mult = 2;
  cfg.input_dim = 5;
  cfg.output_dim = 3;
  cfg.activation = activation;
  return cfg;
}

std::string config_error_path(const json& elementwise) {
  return test::config_error_path({{"precision", {{"elementwise", elementwise}}}});
}

}  // namespace

TEST_CASE("LayerNorm γ = 0.99 under MXFP8 E4M3 with the floor rule is used as 0.875") {
  // By hand: the block's amax is 0.99, floor(log2 0.99) = -1 and E4M3's emax is 8, so the shared
  // scale is 2^(-1-8) = 2^-9; 0.99 * 2^9 = 506.88 exceeds E4M3's largest value 448 and saturates;
  // 448 * 2^-9 = 0.875. Every element of every block becomes 0.875 (and is counted as clipped).
  const size_t n = 3, c = 64;
  ElementwiseSites e;
  const LayerNormSites s = e.add_layernorm("ln");
  resolve_elementwise(json::parse(R"([{"match": {"tensor": "ln_weight"}, "quantizer": "mxfp8_e4m3"}])"),
                      "precision.elementwise", e);
  CHECK(e.active(s.weight));
  CHECK_FALSE(e.active(s.bias));
  CHECK_FALSE(e.active(s.out));
  const std::vector<float> x = randn_f(n * c, 1, 3.0), beta = randn_f(c, 2, 0.1);
  const std::vector<float> gamma(c, 0.99f), gamma_q(c, 0.875f);
  std::vector<float> out(n * c), mean(n), rstd(n), wq, bq;
  layernorm_q_forward(e, s, out.data(), mean.data(), rstd.data(), x.data(), gamma.data(), beta.data(), n, c, wq, bq);
  std::vector<float> expect(n * c), mean2(n), rstd2(n);
  layernorm_forward(expect.data(), mean2.data(), rstd2.data(), x.data(), gamma_q.data(), beta.data(), n, c);
  CHECK(std::memcmp(out.data(), expect.data(), n * c * sizeof(float)) == 0);
  for (float g : wq) CHECK(g == 0.875f);
  // The master γ is untouched; the backward's dx uses Q(γ), dγ and dβ accumulate as for γ itself.
  CHECK(gamma[0] == 0.99f);
  const float* wu = layernorm_weight_used(e, s, gamma.data(), wq);
  CHECK(wu == wq.data());
  const std::vector<float> dy = randn_f(n * c, 3);
  std::vector<float> dx(n * c, 0.f), dg(c, 0.f), db(c, 0.f), dx2(n * c, 0.f), dg2(c, 0.f), db2(c, 0.f);
  layernorm_backward(dx.data(), dg.data(), db.data(), dy.data(), x.data(), wu, mean.data(), rstd.data(), n, c);
  layernorm_backward(dx2.data(), dg2.data(), db2.data(), dy.data(), x.data(), gamma_q.data(), mean2.data(),
                     rstd2.data(), n, c);
  CHECK(std::memcmp(dx.data(), dx2.data(), n * c * sizeof(float)) == 0);
  CHECK(std::memcmp(dg.data(), dg2.data(), c * sizeof(float)) == 0);
  // Telemetry: 64 elements, all clipped, amax 0.99 (as a float), two blocks with scale 2^-9.
  const QuantStats& st = e.sites()[s.weight].stats;
  CHECK(e.sites()[s.weight].calls == 1);
  CHECK(st.elements == c);
  CHECK(st.clipped == c);
  CHECK(st.flushed == 0);
  CHECK(st.amax == static_cast<double>(0.99f));
  CHECK(st.scale_count == 2);
  CHECK(st.scale_exp_min == -9);
  CHECK(st.scale_exp_max == -9);
  CHECK(e.sites()[s.weight].name() == "ln.ln_weight");
}

TEST_CASE("LayerNorm γ = 0.99 under MXFP8 E4M3 with the rceil rule is used as 1.0") {
  // rceil: the scale is amax / 448 = 0.00221 rounded up to a power of two, 2^-8; 0.99 * 2^8 = 253.44
  // lies between the E4M3 neighbours 240 and 256 (spacing 16 in [128, 256)) and rounds to 256; 256 * 2^-8 = 1.
  ElementwiseSites e;
  const size_t id = e.add("ln", ElemTensor::ln_weight);
  resolve_elementwise(json::parse(R"([{"quantizer": {"preset": "mxfp8_e4m3", "scaling": {"rule": "rceil"}}}])"),
                      "p", e);
  std::vector<float> g(40, 0.99f);
  e.quantize(id, g.data(), 1, g.size());
  for (float v : g) CHECK(v == 1.0f);
  CHECK(e.sites()[id].stats.clipped == 0);
}

TEST_CASE("bf16 on LayerNorm outputs, activations and softmax rounds each value to nearest even") {
  ModelConfig cfg;
  cfg.kind = "attn";
  cfg.vocab = 11;
  cfg.context = 5;
  cfg.d_model = 8;
  cfg.heads = 2;
  cfg.layers = 1;
  cfg.mlp_mult = 2;
  auto m = make_model<float>(cfg, 5);
  resolve_elementwise(json::parse(R"([{"match": {"tensor": "softmax"}, "quantizer": "bf16"}])"), "p", m->elementwise);
  // The softmax of a row is quantized exactly like bf16_rne of each probability: check on a layer.
  ElementwiseSites e;
  const size_t id = e.add("x", ElemTensor::act_out);
  resolve_elementwise(json::parse(R"([{"quantizer": "bf16"}])"), "p", e);
  std::vector<float> v = randn_f(300, 7, 5.0), q = v;
  e.quantize(id, q.data(), 10, 30);
  for (size_t i = 0; i < v.size(); ++i) CHECK(q[i] == bf16_rne(v[i]));
  // In the model: a bf16 softmax changes the loss, and its telemetry counts B*H*T*T probabilities per call.
  std::vector<int32_t> win(2 * 6);
  for (size_t i = 0; i < win.size(); ++i) win[i] = static_cast<int32_t>((i * 5 + 1) % 11);
  m->begin_step(0);
  const double lq = m->forward(win.data(), 2);
  size_t sm = 0;
  for (size_t i = 0; i < m->elementwise.size(); ++i)
    if (m->elementwise.sites()[i].tensor == ElemTensor::softmax) sm = i;
  CHECK(m->elementwise.sites()[sm].stats.elements == 2 * 2 * 5 * 5);
  CHECK(m->elementwise.sites()[sm].calls == 1);
  resolve_elementwise(json::array(), "p", m->elementwise);
  const double l0 = m->forward(win.data(), 2);
  CHECK(lq != l0);
}

TEST_CASE("an fp32 quantizer on every elementwise tensor changes no bit of a float model") {
  // fp32 rne of a float is the float itself: a check that switching the sites on routes every tensor
  // through the quantized buffers without changing what the forward and backward compute.
  for (const char* kind : {"mlp", "attn", "proxy"}) {
    ModelConfig cfg = tiny_model(kind, 2, std::string(kind) == "attn" ? "gelu" : "tanh");
    cfg.vocab = 13;
    auto a = make_model<float>(cfg, 9), b = make_model<float>(cfg, 9);
    resolve_elementwise(json::parse(R"([{"quantizer": "fp32"}])"), "p", b->elementwise);
    CHECK(b->elementwise.any_active());
    std::vector<int32_t> win(3 * 5);
    for (size_t i = 0; i < win.size(); ++i) win[i] = static_cast<int32_t>((i * 7 + 2) % 13);
    auto run = [&](Model<float>& m) {
      m.begin_step(0);
      const double l = m.needs_text() ? m.forward(win.data(), 3) : m.forward_generated(1, 0, 3);
      m.backward();
      return l;
    };
    INFO(kind);
    CHECK(run(*a) == run(*b));
    CHECK(std::memcmp(a->grads.data(), b->grads.data(), a->grads.size() * sizeof(float)) == 0);
    for (const auto& s : b->elementwise.sites()) CHECK(s.calls == 1);
  }
}

namespace {
std::vector<std::string> site_names_of(const ModelConfig& cfg) {
  const auto m = make_model<float>(cfg, 1);
  std::vector<std::string> names;
  for (const auto& s : m->elementwise.sites()) names.push_back(s.name());
  return names;
}
}  // namespace

TEST_CASE("elementwise tensors are named per layer, as the docs list them") {
  ModelConfig cfg;
  cfg.vocab = 7;
  cfg.context = 3;
  cfg.hidden_layers = 2;
  cfg.kind = "mlp";
  std::vector<std::string> names = site_names_of(cfg);
  CHECK(names == std::vector<std::string>{"hidden0.act_in", "hidden0.act_out", "hidden1.act_in", "hidden1.act_out"});
  cfg.kind = "attn";
  cfg.d_model = 8;
  cfg.heads = 2;
  cfg.layers = 1;
  names = site_names_of(cfg);
  CHECK(names == std::vector<std::string>{"block0.ln1.ln_weight", "block0.ln1.ln_bias", "block0.ln1.ln_out",
                                          "block0.attn.softmax", "block0.ln2.ln_weight", "block0.ln2.ln_bias",
                                          "block0.ln2.ln_out", "block0.mlp.act_in", "block0.mlp.act_out",
                                          "ln_f.ln_weight", "ln_f.ln_bias", "ln_f.ln_out"});
  cfg.kind = "proxy";
  names = site_names_of(cfg);
  CHECK(names == std::vector<std::string>{"block0.ln.ln_weight", "block0.ln.ln_bias", "block0.ln.ln_out",
                                          "block0.mlp.act_in", "block0.mlp.act_out", "ln_f.ln_weight",
                                          "ln_f.ln_bias", "ln_f.ln_out"});
}

TEST_CASE("elementwise rule cascade: later rules win, partial quantizers apply on top, none removes") {
  ElementwiseSites e;
  const LayerNormSites b0 = e.add_layernorm("block0.ln1"), b1 = e.add_layernorm("block1.ln1"),
                       b1b = e.add_layernorm("block1.ln2");
  const size_t sm0 = e.add("block0.attn", ElemTensor::softmax);
  const json rules = json::parse(R"([
      {"quantizer": "bf16"},
      {"match": {"tensor": "softmax"}, "quantizer": "none"},
      {"match": {"layer": "block1.*", "tensor": "ln_weight"}, "quantizer": "mxfp8_e4m3"},
      {"match": {"layer": "block1.ln1"}, "quantizer": {"rounding": "sr"}},
      {"match": {"layer": "block0.*", "tensor": "ln_bias"}, "quantizer": null}])");
  resolve_elementwise(rules, "precision.elementwise", e);
  const auto& s = e.sites();
  const Quantizer bf16 = parse_quantizer("bf16"), mx = parse_quantizer("mxfp8_e4m3");
  auto same = [](const Quantizer& a, const Quantizer& b) { return quantizer_to_json(a) == quantizer_to_json(b); };
  CHECK_FALSE(s[sm0].quantizer.has_value());
  CHECK_FALSE(s[b0.bias].quantizer.has_value());
  REQUIRE(s[b0.weight].quantizer);
  CHECK(same(*s[b0.weight].quantizer, bf16));
  CHECK(same(*s[b0.out].quantizer, bf16));
  REQUIRE(s[b1b.weight].quantizer);
  CHECK(same(*s[b1b.weight].quantizer, mx));
  // block1.ln1: mxfp8 for γ, then sr on top (scaling kept); bf16 with sr for its output.
  Quantizer mx_sr = mx, bf16_sr = bf16;
  mx_sr.round.mode = Rounding::sr;
  bf16_sr.round.mode = Rounding::sr;
  REQUIRE(s[b1.weight].quantizer);
  CHECK(same(*s[b1.weight].quantizer, mx_sr));
  CHECK(same(*s[b1.out].quantizer, bf16_sr));
  CHECK(same(*s[b1.bias].quantizer, bf16_sr));
  // A partial quantizer with nothing before it applies on the fp32 base; an empty list quantizes nothing.
  CHECK(same(*resolve_elementwise_site(json::parse(R"([{"quantizer": {"format": "fp8_e5m2"}}])"), "p", s[0]),
             parse_quantizer(json::parse(R"({"format": "fp8_e5m2"})"))));
  resolve_elementwise(json::array(), "p", e);
  CHECK_FALSE(e.any_active());
}

TEST_CASE("precision.elementwise config errors name the JSON path") {
  CHECK(config_error_path(json::object()) == "precision.elementwise");
  CHECK(config_error_path(json::parse(R"([3])")) == "precision.elementwise[0]");
  CHECK(config_error_path(json::parse(R"([{"quantizer": "bf16", "extra": 1}])")) == "precision.elementwise[0].extra");
  CHECK(config_error_path(json::parse(R"([{"quantizer": "bf16"}, {"match": {"tensor": "gamma"}, "quantizer": "bf16"}])")) ==
        "precision.elementwise[1].match.tensor");
  CHECK(config_error_path(json::parse(R"([{"match": {"role": "forward"}, "quantizer": "bf16"}])")) ==
        "precision.elementwise[0].match.role");
  CHECK(config_error_path(json::parse(R"([{"match": {"layer": 3}, "quantizer": "bf16"}])")) ==
        "precision.elementwise[0].match.layer");
  CHECK(config_error_path(json::parse(R"([{"match": {"layer": "ln_f"}}])")) == "precision.elementwise[0].quantizer");
  CHECK(config_error_path(json::parse(R"([{"quantizer": {"format": "fp9"}}])")) ==
        "precision.elementwise[0].quantizer.format");
  CHECK(config_error_path(json::parse(R"([{"quantizer": "no_such_preset"}])")) == "precision.elementwise[0].quantizer");
  CHECK(config_error_path(json::parse(R"([{"quantizer": {"preset": "mxfp4", "scaling": {"hadamard": 32}}}])")) ==
        "precision.elementwise[0].quantizer.scaling.hadamard");
  // Valid rules parse and are kept as given in the resolved config.
  json j = {{"precision", {{"elementwise", json::parse(R"([{"match": {"tensor": "ln_weight"}, "quantizer": "mxfp8_e4m3"}])")}}}};
  const RunConfig c = parse_run_config(j);
  CHECK(c.precision.elementwise.rules().size() == 1);
  CHECK(resolved_config_json(c)["precision"]["elementwise"].dump() == j["precision"]["elementwise"].dump());
}

TEST_CASE("stochastic rounding draws a distinct stream per (step, tensor, call)") {
  ElementwiseSites e;
  const size_t a = e.add("x", ElemTensor::act_out), b = e.add("y", ElemTensor::act_out);
  resolve_elementwise(json::parse(R"([{"quantizer": {"format": "fp8_e4m3", "rounding": "sr"}}])"), "p", e);
  e.seed = 3;
  const std::vector<float> v = randn_f(256, 9);
  auto q = [&](size_t id) {
    std::vector<float> x = v;
    e.quantize(id, x.data(), 1, x.size());
    return x;
  };
  e.begin_step(4);
  const auto a0 = q(a), a1 = q(a), b0 = q(b);
  CHECK(a0 != a1);  // second call of the step
  CHECK(a0 != b0);  // another tensor
  e.begin_step(4);
  CHECK(q(a) == a0);  // the same (step, tensor, call): the same bits
  e.begin_step(5);
  CHECK(q(a) != a0);
  // Every result is one of the two fp8 neighbours of the input.
  for (size_t i = 0; i < v.size(); ++i) {
    const double lo = round_to(v[i], *find_format("fp8_e4m3"), RoundSpec{Rounding::rdn});
    const double hi = round_to(v[i], *find_format("fp8_e4m3"), RoundSpec{Rounding::rup});
    CHECK((a0[i] == lo || a0[i] == hi));
  }
}

namespace {

// The straight-through backward against finite differences of its surrogate: the forward with each
// quantizer's error Q(x) - x (recorded at the current parameters) added as a constant. At the
// recorded point the surrogate computes the quantized forward, and its exact gradient is what the
// straight-through backward claims to compute.
void check_ste(ModelConfig cfg, const json& rules) {
  auto m = make_model<double>(cfg, 3);
  for (auto& s : m->sites.sites()) s.policy = fp64_policy();
  const size_t b = 3;
  std::vector<int32_t> windows(b * (cfg.context + 1));
  for (size_t i = 0; i < windows.size(); ++i) windows[i] = static_cast<int32_t>((i * 7 + 3) % cfg.vocab);
  for (size_t i = 0; i < m->params.size(); ++i) m->params[i] += 0.3 * normal_draw(7, 40, i);
  auto forward = [&] {
    m->begin_step(0);
    return m->needs_text() ? m->forward(windows.data(), b) : m->forward_generated(1, 0, b);
  };
  const double plain = forward();
  resolve_elementwise(rules, "p", m->elementwise);
  m->elementwise.record_offsets();
  const double quantized = forward();
  CHECK(quantized != plain);  // the quantizers do something
  m->backward();
  const std::vector<double> g = m->grads;
  m->elementwise.replay_offsets();
  CHECK(forward() == doctest::Approx(quantized).epsilon(1e-12));
  const double h = 1e-5;
  for (const auto& p : m->table.specs) {
    double worst = 0;
    for (size_t i = 0; i < p.size; ++i) {
      double& xi = m->params[p.offset + i];
      const double keep = xi;
      xi = keep + h;
      const double up = forward();
      xi = keep - h;
      const double dn = forward();
      xi = keep;
      const double num = (up - dn) / (2 * h);
      worst = std::max(worst, std::fabs(g[p.offset + i] - num) / std::max(1e-4, std::fabs(num)));
    }
    INFO(cfg.kind << " " << p.name << " max rel err " << worst);
    CHECK(worst < 1e-5);
  }
}

// Coarse formats so the quantization error is large: E4M3 blocks on γ and β, E5M2 (per-tensor
// current scaling) on LayerNorm outputs, E2M1 blocks of 4 on activations, E4M3 on probabilities.
const char* const kCoarseRules = R"([
    {"match": {"tensor": "ln_weight"}, "quantizer": {"preset": "mxfp8_e4m3", "scaling": {"block": 4}}},
    {"match": {"tensor": "ln_bias"}, "quantizer": {"preset": "mxfp8_e4m3", "scaling": {"block": 4}}},
    {"match": {"tensor": "ln_out"}, "quantizer": {"format": "fp8_e5m2", "scaling": {"kind": "tensor"}}},
    {"match": {"tensor": "act_in"}, "quantizer": {"format": "fp4_e2m1", "scaling": {"kind": "block", "block": 4}}},
    {"match": {"tensor": "act_out"}, "quantizer": {"format": "fp4_e2m1", "scaling": {"kind": "block", "block": 4}}},
    {"match": {"tensor": "softmax"}, "quantizer": "fp8_e4m3"}])";

}  // namespace

TEST_CASE("straight-through backward: every parameter gradient is the surrogate's exact gradient") {
  const struct {
    const char* kind;
    int layers;
    const char* activation;
  } models[] = {{"mlp", 2, "tanh"}, {"attn", 2, "tanh"}, {"attn", 1, "gelu"}, {"proxy", 2, "tanh"}};
  for (const auto& m : models) {
    INFO(m.kind, " ", m.layers, " layers, ", m.activation);
    check_ste(tiny_model(m.kind, m.layers, m.activation), json::parse(kCoarseRules));
  }
}

}  // namespace test_elementwise
