// The model kind table (model/model.cpp): every kind builds through make_model in float and double,
// says whether it trains on text as its row does and serves only that interface, and the config
// layer accepts exactly the table's kinds.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/model.h"
#include "train/config.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_model_kinds {

using namespace drift;

namespace {

// A small model of each kind.
ModelConfig small(const std::string& kind) {
  ModelConfig c;
  c.kind = kind;
  c.vocab = 5, c.context = 3;
  c.embed = 2, c.hidden = 4, c.hidden_layers = 1;          // mlp
  c.d_model = 4, c.heads = 2, c.layers = 1, c.mlp_mult = 1;  // attn, proxy
  c.input_dim = 3, c.output_dim = 2;                         // proxy
  return c;
}

template <typename T>
void check_kind(const std::string& name, bool text) {
  auto m = make_model<T>(small(name), 7);
  REQUIRE(m);
  CHECK(m->cfg.kind == name);
  CHECK(m->needs_text() == text);
  CHECK(!m->params.empty());
  CHECK(m->grads.size() == m->params.size());
  CHECK(!m->sites.sites().empty());
  const int32_t windows[2 * 4] = {1, 2, 3, 4, 0, 1, 2, 3};
  if (text) {
    CHECK(std::isfinite(m->forward(windows, 2)));
    m->backward();
    CHECK_THROWS_AS(m->forward_generated(1, 0, 2), std::logic_error);
  } else {
    CHECK(std::isfinite(m->forward_generated(1, 0, 2)));
    m->backward();
    CHECK_THROWS_AS(m->forward(windows, 2), std::logic_error);
  }
}

}  // namespace

TEST_CASE("model kinds: the table's kinds build and serve their interface") {
  const std::vector<std::string> names = model_kind_names();
  CHECK(names == std::vector<std::string>{"mlp", "attn", "proxy"});
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == names.size());
  for (const std::string& name : names) {
    CAPTURE(name);
    const bool text = model_needs_text(small(name));
    CHECK(text == (name != "proxy"));  // the proxy draws its own Gaussian inputs
    check_kind<float>(name, text);
    check_kind<double>(name, text);
  }
  try {
    make_model<float>(small("rnn"), 1);
    FAIL("expected std::invalid_argument");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "unknown model kind 'rnn'");
  }
  CHECK_THROWS_AS(model_needs_text(small("rnn")), std::invalid_argument);
  ModelConfig empty = small("mlp");
  empty.vocab = 0;
  CHECK_THROWS_AS(make_model<float>(empty, 1), std::invalid_argument);
}

// One forward and backward of m on its kind's batch; returns the gradient buffer.
template <typename T>
std::vector<T> gradients_of(Model<T>& m) {
  const int32_t windows[2 * 4] = {1, 2, 3, 4, 0, 1, 2, 3};
  m.begin_step(0);
  if (m.needs_text())
    m.forward(windows, 2);
  else
    m.forward_generated(1, 0, 2);
  m.backward();
  return m.grads;
}

template <typename T>
void check_gradients_written_whole(const ModelConfig& cfg) {
  // backward() clears no buffer up front: each gradient is cleared where it is first added into, a
  // weight's gradient takes its one product as +0 + the product, and what no pass reached is cleared
  // at the end. So whatever the buffer held before (NaNs, infinities, -0, a previous step's
  // gradient), the gradients must be those of a fresh model, bit for bit, and none may be NaN.
  auto fresh = make_model<T>(cfg, 7), stale = make_model<T>(cfg, 7);
  const std::vector<T> want = gradients_of(*fresh);
  gradients_of(*stale);  // a previous step's gradient in the buffer
  const T fill[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::infinity(), T(-0.0), T(3)};
  for (size_t i = 0; i < stale->grads.size(); ++i) stale->grads[i] = fill[i % 4];
  const std::vector<T> got = gradients_of(*stale);
  REQUIRE(got.size() == want.size());
  CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0);
  size_t nonzero = 0;
  for (const T g : want) {
    CHECK(!std::isnan(g));
    nonzero += g != T(0);
  }
  CHECK(nonzero > want.size() / 2);  // a real gradient, not a cleared buffer
  CHECK_THROWS_AS(stale->grad_product(stale->table.specs[0].name), std::logic_error);  // outside backward()
}

TEST_CASE("model kinds: backward writes every gradient whole, whatever the buffer held") {
  std::vector<ModelConfig> configs;
  for (const std::string& name : model_kind_names()) configs.push_back(small(name));
  ModelConfig proxy = small("proxy");
  proxy.fc_bias = false;
  configs.push_back(proxy);
  proxy.student = "bare";  // no input layer, no ln_f, no head
  proxy.input_dim = proxy.output_dim = proxy.d_model;
  configs.push_back(proxy);
  for (const ModelConfig& cfg : configs) {
    CAPTURE(cfg.kind);
    CAPTURE(cfg.student);
    CAPTURE(cfg.fc_bias);
    check_gradients_written_whole<float>(cfg);
    check_gradients_written_whole<double>(cfg);
  }
}

TEST_CASE("model kinds: model.kind in a config takes exactly the table's kinds") {
  for (const std::string& name : model_kind_names()) {
    CAPTURE(name);
    CHECK(parse_run_config({{"model", {{"kind", name}}}}).model.kind == name);
  }
  CHECK_THROWS_AS(parse_run_config({{"model", {{"kind", "rnn"}}}}), ConfigError);
}

}  // namespace test_model_kinds
