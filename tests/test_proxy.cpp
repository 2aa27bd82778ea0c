// The proxy model: student-teacher residual MLP on Gaussian inputs (model/proxy.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "model/layers.h"
#include "model/model.h"
#include "policy/matmul_json.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_proxy {

using namespace drift;

namespace {

ModelConfig small_proxy() {
  ModelConfig cfg;
  cfg.kind = "proxy";
  cfg.input_dim = 6;
  cfg.output_dim = 3;
  cfg.d_model = 8;
  cfg.layers = 2;
  cfg.mlp_mult = 2;
  return cfg;
}

}  // namespace

TEST_CASE("proxy model: every parameter gradient matches central finite differences (fp64)") {
  ModelConfig cfg = small_proxy();
  SUBCASE("tanh, two blocks") {}
  SUBCASE("gelu, one block") {
    cfg.activation = "gelu";
    cfg.layers = 1;
  }
  SUBCASE("no block") { cfg.layers = 0; }
  SUBCASE("the paper's form: bare student, fc without bias, mlp teacher, torch-uniform init, label noise") {
    cfg.d_model = cfg.input_dim = cfg.output_dim = 6;
    cfg.activation = "gelu";
    cfg.student = "bare";
    cfg.fc_bias = false;
    cfg.teacher = "mlp";
    cfg.teacher_width = 5;
    cfg.init = "torch_uniform";
    cfg.label_noise = 0.3;
  }
  auto m = make_model<double>(cfg, 3);
  const MatmulPolicy fp64 = parse_matmul_policy(nlohmann::json::parse(R"({"a": {"format": "fp64"}, "b": {"format": "fp64"},
      "product": {"format": "fp64"}, "inner": {"format": "fp64"}, "outer": {"format": "fp64"}, "output": {"format": "fp64"}})"));
  for (auto& s : m->sites.sites()) s.policy = fp64;
  // Move every parameter off its initial value (γ = 1, β = 0, biases 0).
  for (size_t i = 0; i < m->params.size(); ++i) m->params[i] += 0.3 * normal_draw(7, 40, i);
  const size_t b = 4;
  auto loss = [&] { return m->forward_generated(1, 2, b, 9); };  // the noisy targets (when label_noise > 0)
  loss();
  m->backward();
  const std::vector<double> g = m->grads;
  const double h = 1e-5;
  for (const auto& p : m->table.specs) {
    double worst = 0;
    for (size_t i = 0; i < p.size; ++i) {
      double& x = m->params[p.offset + i];
      const double keep = x;
      x = keep + h;
      const double up = loss();
      x = keep - h;
      const double dn = loss();
      x = keep;
      const double num = (up - dn) / (2 * h);
      worst = std::max(worst, std::fabs(g[p.offset + i] - num) / std::max(1e-4, std::fabs(num)));
    }
    INFO(p.name << " " << p.shape_string() << " max rel err " << worst);
    CHECK(worst < 1e-5);
  }
  // The input layer's grad_input site is never called (the inputs need no gradient); the others are.
  for (const auto& s : m->sites.sites()) {
    INFO(s.name());
    CHECK((s.calls == 0) == (s.name() == "input.grad_input"));
  }
}

TEST_CASE("proxy model: loss is the mean squared error against the teacher; a zero student scores mean(y^2)") {
  ModelConfig cfg = small_proxy();
  cfg.d_model = 32;
  cfg.mlp_mult = 4;
  cfg.output_dim = 4;
  auto m = make_model<double>(cfg, 1);
  const MatmulPolicy fp64 = parse_matmul_policy(nlohmann::json::parse(R"({"a": {"format": "fp64"}, "b": {"format": "fp64"},
      "product": {"format": "fp64"}, "inner": {"format": "fp64"}, "outer": {"format": "fp64"}, "output": {"format": "fp64"}})"));
  for (auto& s : m->sites.sites()) s.policy = fp64;
  // With head.w = 0 and head.b = c the prediction is c everywhere, so
  //   loss(c) = mean((c - y)^2) = mean(y^2) - 2 c mean(y) + c^2.
  // Three values of c give mean(y^2) and mean(y) two ways: a check that the loss is this MSE.
  std::fill_n(m->param("head.w"), cfg.output_dim * cfg.d_model, 0.0);
  auto at = [&](double c) {
    std::fill_n(m->param("head.b"), cfg.output_dim, c);
    return m->forward_generated(1, 0, 256);
  };
  const double l0 = at(0), l1 = at(1), lm = at(-1);
  const double mean_y = (lm - l1) / 4, mean_y2 = l0;
  CHECK(l1 == doctest::Approx(mean_y2 - 2 * mean_y + 1).epsilon(1e-12));
  // The teacher's targets have about unit variance (LayerNorm output times N(0, 1/D) rows), mean about 0.
  CHECK(mean_y2 > 0.6);
  CHECK(mean_y2 < 1.6);
  CHECK(std::fabs(mean_y) < 0.2);
  // The MSE gradient: d/dc loss = 2 (c - mean y) when every output has head.b = c.
  std::fill_n(m->param("head.b"), cfg.output_dim, 0.5);
  m->forward_generated(1, 0, 256);
  m->backward();
  double dc = 0;
  for (size_t j = 0; j < cfg.output_dim; ++j) dc += m->grad("head.b")[j];
  CHECK(dc == doctest::Approx(2 * (0.5 - mean_y)).epsilon(1e-10));
}

TEST_CASE("proxy model: batches come from (seed, stream, draw); the teacher from teacher_seed alone") {
  ModelConfig cfg = small_proxy();
  auto a = make_model<float>(cfg, 1), a2 = make_model<float>(cfg, 1), b = make_model<float>(cfg, 2);
  CHECK_FALSE(a->needs_text());
  CHECK_FALSE(model_needs_text(cfg));
  const double l = a->forward_generated(10, 0, 8);
  CHECK(a2->forward_generated(10, 0, 8) == l);  // same seed, stream, draw: same bits
  CHECK(a->forward_generated(11, 0, 8) != l);   // another stream (validation)
  CHECK(a->forward_generated(10, 1, 8) != l);   // another draw (step)
  CHECK(b->forward_generated(10, 0, 8) != l);   // another run seed: other student and inputs
  // Same run seed, another teacher: the student and inputs are identical, the targets are not.
  ModelConfig other = cfg;
  other.teacher_seed = 5;
  auto t = make_model<float>(other, 1);
  CHECK(t->params == a->params);
  CHECK(t->forward_generated(10, 0, 8) != l);
  // The text interface is not the proxy's, and the proxy's is not the text models'.
  int32_t w[4] = {0, 0, 0, 0};
  CHECK_THROWS_AS(a->forward(w, 1), std::logic_error);
  ModelConfig text;
  text.vocab = 5;
  text.context = 3;
  CHECK(make_model<float>(text, 1)->needs_text());
  CHECK_THROWS_AS(make_model<float>(text, 1)->forward_generated(1, 0, 2), std::logic_error);
}

TEST_CASE("proxy model: the student learns the fixed teacher (plain SGD in float, fp32 matmuls)") {
  ModelConfig cfg = small_proxy();
  cfg.input_dim = 8;
  cfg.d_model = 16;
  cfg.output_dim = 2;
  auto m = make_model<float>(cfg, 4);
  // Held-out loss on a validation stream before and after 300 SGD steps on fresh training batches.
  auto val = [&] {
    double s = 0;
    for (uint64_t i = 0; i < 4; ++i) s += m->forward_generated(2, i, 64);
    return s / 4;
  };
  const double before = val();
  for (uint64_t step = 0; step < 300; ++step) {
    m->begin_step(step);
    m->forward_generated(1, step, 32);
    m->backward();
    for (size_t i = 0; i < m->params.size(); ++i) m->params[i] -= 0.05f * m->grads[i];
  }
  const double after = val();
  INFO("validation loss " << before << " -> " << after);
  CHECK(after < 0.5 * before);
}

}  // namespace test_proxy
