// The model kind table (model/model.cpp): every kind builds through make_model in float and double,
// says whether it trains on text as its row does and serves only that interface, and the config
// layer accepts exactly the table's kinds.
#include <doctest/doctest.h>

#include <cmath>
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

TEST_CASE("model kinds: model.kind in a config takes exactly the table's kinds") {
  for (const std::string& name : model_kind_names()) {
    CAPTURE(name);
    CHECK(parse_run_config({{"model", {{"kind", name}}}}).model.kind == name);
  }
  CHECK_THROWS_AS(parse_run_config({{"model", {{"kind", "rnn"}}}}), ConfigError);
}

}  // namespace test_model_kinds
