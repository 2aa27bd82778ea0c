// Optimizer::step updates runs of state blocks as one span and splits its groups of blocks over a
// team. Neither may change a bit: here its result is held to the update written out element by
// element (optimizer.h's formulas, in update_rules.h's operation order), on tensors that end inside
// a block and span several groups, at one, two and three threads.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/params.h"
#include "train/config.h"
#include "train/optimizer.h"

using namespace drift;

namespace {

// float -> bf16 -> float, round to nearest even (finite values): the bf16 state's storage.
float bf16_rne(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A weight of 26,000 elements (102 blocks of 256, its last one partial: more than one group of 64
// blocks), a bias of 7 (one partial block), a weight of 150,000 (enough for a team) and a bias.
ParamTable table() {
  ParamTable tb;
  tb.add("a.w", {40, 650});
  tb.add("a.b", {7}, false);
  tb.add("c.w", {300, 500});
  tb.add("c.b", {301}, false);
  return tb;
}

float value(size_t i, uint32_t salt) {  // deterministic, both signs, a spread of magnitudes
  const uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ salt * 40503u;
  return (static_cast<float>(h % 20001u) - 10000.0f) * std::ldexp(1.0f, -static_cast<int>(10 + h % 7));
}

// The element-by-element update: AdamW or SGD-momentum, m and v kept in fp32 or rounded to bf16.
struct ElementwiseOptimizer {
  TrainConfig t;
  bool bf16_state = false;
  std::vector<float> m, v;
  uint64_t steps = 0;

  void step(const ParamTable& tb, float* p, const float* g, double lr_d, double scale_d) {
    ++steps;
    const float lr = static_cast<float>(lr_d), s = static_cast<float>(scale_d);
    const float wd = static_cast<float>(t.weight_decay);
    const float b1 = static_cast<float>(t.beta1), b2 = static_cast<float>(t.beta2), eps = static_cast<float>(t.eps);
    const float c1 = static_cast<float>(1.0 - std::pow(t.beta1, static_cast<double>(steps)));
    const float c2 = static_cast<float>(1.0 - std::pow(t.beta2, static_cast<double>(steps)));
    const float mom = static_cast<float>(t.momentum);
    auto store = [&](float x) { return bf16_state ? bf16_rne(x) : x; };
    for (const ParamSpec& sp : tb.specs)
      for (size_t i = sp.offset; i < sp.offset + sp.size; ++i) {
        const float gs = g[i] * s;
        if (t.optimizer == "sgd") {
          const float gd = sp.decay && wd != 0.0f ? gs + wd * p[i] : gs;
          const float mn = mom * m[i] + gd;
          m[i] = store(mn);
          p[i] = p[i] - lr * mn;  // (the step takes m before its storage rounds it)
          continue;
        }
        const float mn = b1 * m[i] + (1.0f - b1) * gs;
        const float vn = b2 * v[i] + (1.0f - b2) * (gs * gs);
        m[i] = store(mn);
        v[i] = store(vn);
        const float mhat = c1 != 1.0f ? mn / c1 : mn;
        const float vhat = c2 != 1.0f ? vn / c2 : vn;
        float u = mhat / (std::sqrt(vhat) + eps);
        if (sp.decay) u = u + wd * p[i];
        p[i] = p[i] - lr * u;
      }
  }
};

}  // namespace

TEST_CASE("optimizer: spans of state blocks and a team give the element-by-element update's bits") {
  const ParamTable tb = table();
  const int saved = omp_get_max_threads();
  for (const char* opt : {"adamw", "sgd"})
    for (const char* state : {"fp32", "bf16"}) {
      TrainConfig t;
      t.optimizer = opt;
      t.weight_decay = 0.1;
      PrecisionConfig pc;
      pc.optimizer_state = state;
      ElementwiseOptimizer want{t, std::string(state) == "bf16", std::vector<float>(tb.total, 0.0f),
                                std::vector<float>(tb.total, 0.0f)};
      std::vector<float> p_want(tb.total);
      for (size_t i = 0; i < tb.total; ++i) p_want[i] = value(i, 1);
      std::vector<std::vector<float>> p_got(3, p_want);
      std::vector<Optimizer> got;
      for (int k = 0; k < 3; ++k) got.emplace_back(t, pc, tb);
      for (uint32_t step = 0; step < 3; ++step) {  // bias corrections on: every division taken
        std::vector<float> g(tb.total);
        for (size_t i = 0; i < tb.total; ++i) g[i] = value(i, 7 + step);
        want.step(tb, p_want.data(), g.data(), 0.01, 0.5);
        for (int k = 0; k < 3; ++k) {
          omp_set_num_threads(k + 1);
          got[k].step(tb, p_got[k].data(), g.data(), 0.01, 0.5, 0, step);
        }
        for (int k = 0; k < 3; ++k) {
          CAPTURE(opt);
          CAPTURE(state);
          CAPTURE(step);
          CAPTURE(k + 1);
          CHECK(same_bits(p_got[k], p_want));
        }
      }
    }
  omp_set_num_threads(saved);
}

TEST_CASE("optimizer: int8_block state, block by block, gives the same bits on one thread and on a team") {
  const ParamTable tb = table();
  const int saved = omp_get_max_threads();
  TrainConfig t;
  PrecisionConfig pc;
  pc.optimizer_state = "int8_block";
  std::vector<float> p0(tb.total);
  for (size_t i = 0; i < tb.total; ++i) p0[i] = value(i, 3);
  std::vector<std::vector<float>> p(3, p0);
  std::vector<Optimizer> o;
  for (int k = 0; k < 3; ++k) o.emplace_back(t, pc, tb);
  for (uint32_t step = 0; step < 3; ++step) {
    std::vector<float> g(tb.total);
    for (size_t i = 0; i < tb.total; ++i) g[i] = value(i, 11 + step);
    for (int k = 0; k < 3; ++k) {
      omp_set_num_threads(k + 1);
      o[k].step(tb, p[k].data(), g.data(), 0.01, 1.0, 0, step);
    }
    CAPTURE(step);
    CHECK(same_bits(p[1], p[0]));
    CHECK(same_bits(p[2], p[0]));
    CHECK_FALSE(same_bits(p[0], p0));  // (the update moved the weights)
  }
  omp_set_num_threads(saved);
}
