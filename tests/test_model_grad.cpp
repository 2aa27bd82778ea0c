// Hand-written backward passes against central finite differences, in fp64 with an fp64
// passthrough policy at every matmul site (the engine is still called: a, b, products, sums and
// output all in fp64, so the only error left is the finite difference's own).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "arith/random.h"
#include "model/layers.h"
#include "model/model.h"
#include "policy/matmul_json.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_model_grad {

using namespace drift;

namespace {

MatmulPolicy fp64_policy() {
  return parse_matmul_policy(nlohmann::json::parse(R"({"a": {"format": "fp64"}, "b": {"format": "fp64"},
      "product": {"format": "fp64"}, "inner": {"format": "fp64"}, "outer": {"format": "fp64"},
      "output": {"format": "fp64"}})"));
}

void set_all(MatmulSites& s, const MatmulPolicy& p) {
  for (auto& site : s.sites()) site.policy = p;
}

std::vector<double> randn(size_t n, uint64_t stream, double sd = 1.0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = sd * normal_draw(7, stream, i);
  return v;
}

// max over i of |analytic - numeric| / max(1e-3, |numeric|), by central differences of loss() in x[i].
double fd_error(std::vector<double>& x, const std::vector<double>& analytic, const std::function<double()>& loss,
                double h = 1e-5) {
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss();
    x[i] = keep - h;
    const double dn = loss();
    x[i] = keep;
    const double num = (up - dn) / (2 * h);
    worst = std::max(worst, std::fabs(analytic[i] - num) / std::max(1e-3, std::fabs(num)));
  }
  return worst;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

TEST_CASE("normal_draw is Box-Muller on words 2i and 2i+1 of its stream, as its definition says") {
  // The definition written out on random_u32's words (a draw takes one Philox block for both).
  for (uint64_t seed : {0ull, 7ull, 0x123456789abcdefull})
    for (uint64_t stream : {0ull, 0x1000ull, 0x7eac0003ull})
      for (uint64_t i : {0ull, 1ull, 2ull, 3ull, 1001ull, (1ull << 33) + 5}) {
        const double u1 = (static_cast<double>(random_u32(seed, stream, 2 * i)) + 1.0) / 4294967296.0;
        const double u2 = static_cast<double>(random_u32(seed, stream, 2 * i + 1)) / 4294967296.0;
        CHECK(normal_draw(seed, stream, i) == std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
      }
}

TEST_CASE("linear: forward is X·Wᵀ + b and backward matches finite differences") {
  MatmulSites s;
  const LinearSites site = s.add_linear("lin");
  set_all(s, fp64_policy());
  const size_t n = 3, c = 5, oc = 4;
  auto x = randn(n * c, 1), w = randn(oc * c, 2), b = randn(oc, 3), r = randn(n * oc, 4);
  std::vector<double> out(n * oc);
  linear_forward(s, site, out.data(), x.data(), w.data(), b.data(), n, c, oc);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < oc; ++j) {
      double e = b[j];
      for (size_t k = 0; k < c; ++k) e += x[i * c + k] * w[j * c + k];
      CHECK(out[i * oc + j] == doctest::Approx(e).epsilon(1e-14));
    }
  auto loss = [&] {
    linear_forward(s, site, out.data(), x.data(), w.data(), b.data(), n, c, oc);
    return dot(out, r);
  };
  std::vector<double> dx(n * c), dw(oc * c, 0.0), db(oc, 0.0);
  linear_backward(s, site, dx.data(), WriteTo<double>{dw.data(), WriteC::add}, db.data(), r.data(), x.data(), w.data(),
                  n, c, oc);
  CHECK(fd_error(x, dx, loss) < 1e-7);
  CHECK(fd_error(w, dw, loss) < 1e-7);
  CHECK(fd_error(b, db, loss) < 1e-7);
  // Telemetry: one forward call per loss evaluation, and both backward sites were called once.
  CHECK(s.sites()[site.gi].calls == 1);
  CHECK(s.sites()[site.gw].calls == 1);
}

TEST_CASE("tanh, gelu and layernorm backward match finite differences") {
  const size_t n = 4, c = 6;
  auto x = randn(n * c, 10), r = randn(n * c, 11);
  std::vector<double> out(n * c), dx(n * c);
  SUBCASE("tanh") {
    auto loss = [&] {
      tanh_forward(out.data(), x.data(), n * c);
      return dot(out, r);
    };
    loss();
    tanh_backward(dx.data(), r.data(), out.data(), n * c);
    CHECK(fd_error(x, dx, loss) < 1e-7);
  }
  SUBCASE("gelu") {
    auto loss = [&] {
      gelu_forward(out.data(), x.data(), n * c);
      return dot(out, r);
    };
    gelu_backward(dx.data(), r.data(), x.data(), n * c);
    CHECK(fd_error(x, dx, loss) < 1e-7);
    // gelu(0) = 0, gelu(large) ~ x
    double z = 0, o = 0, big = 10, ob = 0;
    gelu_forward(&o, &z, 1);
    gelu_forward(&ob, &big, 1);
    CHECK(o == 0.0);
    CHECK(ob == doctest::Approx(10.0));
  }
  SUBCASE("layernorm") {
    auto w = randn(c, 12), b = randn(c, 13);
    std::vector<double> mean(n), rstd(n);
    auto loss = [&] {
      layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c);
      return dot(out, r);
    };
    loss();
    // Each normalised row has mean 0 and variance 1 before the affine map (w = 1, b = 0 check).
    std::vector<double> ones(c, 1.0), zeros(c, 0.0), plain(n * c);
    layernorm_forward(plain.data(), mean.data(), rstd.data(), x.data(), ones.data(), zeros.data(), n, c);
    double m = 0, v = 0;
    for (size_t j = 0; j < c; ++j) m += plain[j];
    for (size_t j = 0; j < c; ++j) v += plain[j] * plain[j];
    CHECK(std::fabs(m) < 1e-12);
    CHECK(v / c == doctest::Approx(1.0).epsilon(1e-4));  // eps = 1e-5 in the variance
    loss();
    std::vector<double> dw(c, 0.0), db(c, 0.0);
    std::fill(dx.begin(), dx.end(), 0.0);
    layernorm_backward(dx.data(), dw.data(), db.data(), r.data(), x.data(), w.data(), mean.data(), rstd.data(), n, c);
    CHECK(fd_error(x, dx, loss) < 1e-6);
    CHECK(fd_error(w, dw, loss) < 1e-7);
    CHECK(fd_error(b, db, loss) < 1e-7);
  }
}

TEST_CASE("causal attention: probabilities are causal and backward matches finite differences") {
  MatmulSites s;
  const LinearSites score = s.add_bilinear("score"), value = s.add_bilinear("value");
  set_all(s, fp64_policy());
  const size_t b = 2, t = 4, c = 6, nh = 2;
  auto qkv = randn(b * t * 3 * c, 20), r = randn(b * t * c, 21);
  std::vector<double> out(b * t * c), att(b * nh * t * t), dqkv(b * t * 3 * c), datt(t * t);
  auto loss = [&] {
    // The model's path (model.cpp): the probabilities, then (unquantized here) the values product.
    attention_probs_forward(s, score, att.data(), qkv.data(), b, t, c, nh);
    attention_values_forward(s, value, out.data(), att.data(), qkv.data(), b, t, c, nh);
    return dot(out, r);
  };
  loss();
  for (size_t bh = 0; bh < b * nh; ++bh)
    for (size_t i = 0; i < t; ++i) {
      double sum = 0;
      for (size_t j = 0; j < t; ++j) {
        const double p = att[(bh * t + i) * t + j];
        if (j > i) CHECK(p == 0.0);
        sum += p;
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-14));
    }
  // The first position attends only to itself: its output is its own value vector.
  for (size_t k = 0; k < c; ++k) CHECK(out[k] == doctest::Approx(qkv[2 * c + k]).epsilon(1e-14));
  attention_backward(s, score, value, dqkv.data(), datt.data(), r.data(), qkv.data(), att.data(), b, t, c, nh);
  CHECK(fd_error(qkv, dqkv, loss) < 1e-6);
}

TEST_CASE("cross-entropy: loss is -log softmax and the gradient matches finite differences") {
  const size_t n = 3, v = 5;
  auto logits = randn(n * v, 30);
  const int32_t targets[] = {0, 4, 2};
  std::vector<double> probs(n * v), losses(n), dl(n * v);
  const double mean = crossentropy_forward(probs.data(), losses.data(), logits.data(), targets, n, v);
  double expect = 0;
  for (size_t i = 0; i < n; ++i) {
    double z = 0;
    for (size_t j = 0; j < v; ++j) z += std::exp(logits[i * v + j]);
    expect += -std::log(std::exp(logits[i * v + targets[i]]) / z);
  }
  CHECK(mean == doctest::Approx(expect / n).epsilon(1e-13));
  crossentropy_backward(dl.data(), probs.data(), targets, n, v);
  auto loss = [&] { return crossentropy_forward(probs.data(), losses.data(), logits.data(), targets, n, v); };
  CHECK(fd_error(logits, dl, loss) < 1e-7);
}

namespace {

// Every parameter's gradient of a small model against central differences.
void check_model(ModelConfig cfg) {
  auto m = make_model<double>(cfg, 3);
  set_all(m->sites, fp64_policy());
  const size_t b = 3, w = cfg.context + 1;
  std::vector<int32_t> windows(b * w);
  for (size_t i = 0; i < windows.size(); ++i) windows[i] = static_cast<int32_t>((i * 7 + 3) % cfg.vocab);
  // Perturb every parameter away from its (possibly all-zero / all-one) initial value.
  auto noise = randn(m->params.size(), 40, 0.3);
  for (size_t i = 0; i < noise.size(); ++i) m->params[i] += noise[i];
  m->forward(windows.data(), b);
  m->backward();
  const std::vector<double> g = m->grads;
  auto loss = [&] { return m->forward(windows.data(), b); };
  for (const auto& p : m->table.specs) {
    std::vector<double> x(m->params.begin() + p.offset, m->params.begin() + p.offset + p.size);
    std::vector<double> ga(g.begin() + p.offset, g.begin() + p.offset + p.size);
    // fd_error perturbs x; mirror it into the model.
    double worst = 0;
    const double h = 1e-5;
    for (size_t i = 0; i < p.size; ++i) {
      double& xi = m->params[p.offset + i];
      const double keep = xi;
      xi = keep + h;
      const double up = loss();
      xi = keep - h;
      const double dn = loss();
      xi = keep;
      const double num = (up - dn) / (2 * h);
      worst = std::max(worst, std::fabs(ga[i] - num) / std::max(1e-4, std::fabs(num)));
    }
    INFO(cfg.kind << " " << p.name << " " << p.shape_string() << " max rel err " << worst);
    CHECK(worst < 1e-5);
  }
}

}  // namespace

TEST_CASE("mlp model: every parameter gradient matches finite differences") {
  ModelConfig cfg;
  cfg.kind = "mlp";
  cfg.vocab = 7;
  cfg.context = 3;
  cfg.embed = 4;
  cfg.hidden = 5;
  SUBCASE("one hidden layer") { cfg.hidden_layers = 1; }
  SUBCASE("two hidden layers") { cfg.hidden_layers = 2; }
  SUBCASE("no hidden layer") { cfg.hidden_layers = 0; }
  check_model(cfg);
}

TEST_CASE("attn model: every parameter gradient matches finite differences") {
  ModelConfig cfg;
  cfg.kind = "attn";
  cfg.vocab = 7;
  cfg.context = 4;
  cfg.d_model = 8;
  cfg.heads = 2;
  cfg.layers = 2;
  cfg.mlp_mult = 2;
  SUBCASE("tanh") { cfg.activation = "tanh"; }
  SUBCASE("gelu") { cfg.activation = "gelu"; }
  check_model(cfg);
}

TEST_CASE("models: initial loss of the float model is near ln(V), sites are named per layer and role") {
  ModelConfig cfg;
  cfg.vocab = 256;
  cfg.context = 8;
  cfg.embed = 8;
  cfg.hidden = 32;
  auto m = make_model<float>(cfg, 1);
  std::vector<int32_t> windows(16 * 9);
  for (size_t i = 0; i < windows.size(); ++i) windows[i] = static_cast<int32_t>((i * 31) % 256);
  const double loss = m->forward(windows.data(), 16);
  CHECK(loss == doctest::Approx(std::log(256.0)).epsilon(0.05));
  std::vector<std::string> names;
  for (const auto& s : m->sites.sites()) names.push_back(s.name());
  CHECK(names == std::vector<std::string>{"hidden0.forward", "hidden0.grad_input", "hidden0.grad_weight", "head.forward",
                                          "head.grad_input", "head.grad_weight"});
}

TEST_CASE("linear sites cast both operands along the reduction axis (MXFP8, checked by hand in float)") {
  // forward: Y = X·Wᵀ, both X (N x C) and W (OC x C) quantized in 32-element blocks along C.
  MatmulSites s;
  const LinearSites site = s.add_linear("lin");
  for (auto& st : s.sites()) st.policy = parse_matmul_policy("mxfp8_e4m3");
  const size_t n = 3, c = 64, oc = 5;
  std::vector<float> x(n * c), w(oc * c), y(n * oc);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(normal_draw(1, 50, i) * (i % 7 == 0 ? 9.0 : 1.0));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(normal_draw(1, 51, i) * 0.1);
  linear_forward(s, site, y.data(), x.data(), w.data(), static_cast<const float*>(nullptr), n, c, oc);
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end());
  const Quantizer qz = parse_quantizer("mxfp8_e4m3");
  const QuantizedOperand qx = quantize(xd.data(), n, c, c, qz, 0, 0), qw = quantize(wd.data(), oc, c, c, qz, 0, 0);
  REQUIRE(qx.block_k == 32);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < oc; ++j) {
      float outer = 0.0f;
      for (size_t blk = 0; blk < c / 32; ++blk) {
        float inner = 0.0f;
        for (size_t k = blk * 32; k < blk * 32 + 32; ++k)
          inner += static_cast<float>(qx.q[i * c + k]) * static_cast<float>(qw.q[j * c + k]);  // e4m3 products: exact
        const float scale = static_cast<float>(qx.block_scale[i * 2 + blk] * qw.block_scale[j * 2 + blk]);
        outer += inner * scale;
      }
      CHECK(y[i * oc + j] == outer);
    }
  // The telemetry of the call is the quantizers': X's elements and W's elements.
  CHECK(s.sites()[site.fwd].tel.a.elements == n * c);
  CHECK(s.sites()[site.fwd].tel.b.elements == oc * c);
}

}  // namespace test_model_grad
