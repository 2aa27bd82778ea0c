// The training step's cheap parts: the one-pass gradient norms against the one-job functions they
// replace on the hot path, and the in-place optimizer update against the scalar rule written out
// here (load the state block, update element by element, store it back, round the master weights).
#include <doctest/doctest.h>
#include <hwy/targets.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/random.h"
#include "train/grad_norms.h"
#include "train/opt_state.h"
#include "train/optimizer.h"
#include "train/telemetry.h"
#include "train/update_rules.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_train_step {

using drift::testing::same_bits;

using namespace drift;

namespace {

// Reproducible test values: a uniform draw in [-scale, scale), some exact zeros and negative zeros.
std::vector<float> draws(size_t n, uint64_t stream, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = random_u32(99, stream, i);
    v[i] = (static_cast<float>(r >> 8) / 8388608.0f - 1.0f) * scale;
    if (r % 97 == 0) v[i] = 0.0f;
    if (r % 89 == 0) v[i] = -0.0f;
  }
  return v;
}

}  // namespace

TEST_CASE("gradient norms: by hand, and bit for bit the definition in train/grad_norms.h") {
  ParamTable tb;
  tb.add("a", {2});
  tb.add("b", {1});
  tb.add("c", {2});
  SUBCASE("by hand") {
    const float g[] = {3.0f, 4.0f, 12.0f, 0.0f, -84.0f};  // tensor norms 5, 12, 84; global sqrt(25+144+7056) = 85
    const GradNorms n = gradient_norms(tb, g);
    CHECK(n.global == 85.0);
    CHECK(n.max_tensor.norm == 84.0);
    CHECK(n.max_tensor.tensor == "c");
  }
  SUBCASE("a non-finite tensor norm is the maximum, the first one found; the global norm is not finite") {
    const float inf = std::numeric_limits<float>::infinity();
    const float g[] = {1.0f, 1.0f, inf, 1e30f, 1e30f};  // "c": (1e30)^2 * 2 is finite in double
    const GradNorms n = gradient_norms(tb, g);
    CHECK(std::isinf(n.global));
    CHECK(std::isinf(n.max_tensor.norm));
    CHECK(n.max_tensor.tensor == "b");
    const float h[] = {NAN, 1.0f, inf, 0.0f, 0.0f};
    CHECK(gradient_norms(tb, h).max_tensor.tensor == "a");
  }
  SUBCASE("the sum runs in 8 interleaved partial sums: a case where that differs from one chain, by hand") {
    ParamTable one;
    one.add("w", {9});
    // Squares: 1, then eight of 2^-54. One chain: 1 + 2^-54 is a tie, rounds to 1, eight times: 1.
    // Partials: p0 = 1 + 2^-54 (index 8) -> 1; p1..p7 = 2^-54. (p0+p1) -> 1 (tie to even),
    // (p2+p3) = 2^-53, their sum 1 + 2^-53 -> 1 (tie to even); (p4+p5)+(p6+p7) = 2^-52; 1 + 2^-52 exact.
    float g[9];
    g[0] = 1.0f;
    for (int i = 1; i < 9; ++i) g[i] = 0x1p-27f;
    CHECK(tensor_sum_squares(g, 9) == 1.0 + 0x1p-52);
    CHECK(gradient_norms(one, g).global == std::sqrt(1.0 + 0x1p-52));
  }
  SUBCASE("the definition, written plainly, on a model-sized buffer (every tensor length mod 8)") {
    ParamTable big;
    big.add("wte", {256, 32});
    big.add("hidden0.w", {512, 512});
    big.add("hidden0.b", {509}, false);
    big.add("head.w", {253, 511});
    big.add("head.b", {7}, false);
    const std::vector<float> g = draws(big.total, 1, 1e-2f);
    const GradNorms n = gradient_norms(big, g.data());
    // Reference: element i of a tensor goes to partial i mod 8; partials combined pairwise; tensor
    // sums added in table order; the largest tensor norm kept (first one on ties).
    double total = 0, best = -1;
    std::string best_name;
    for (const auto& p : big.specs) {
      double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (size_t i = 0; i < p.size; ++i) {
        const double x = g[p.offset + i];
        part[i % 8] = part[i % 8] + x * x;
      }
      const double s = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
      total = total + s;
      if (std::sqrt(s) > best) {
        best = std::sqrt(s);
        best_name = p.name;
      }
    }
    const double ref_global = std::sqrt(total);
    CHECK(std::memcmp(&n.global, &ref_global, sizeof(double)) == 0);
    CHECK(std::memcmp(&n.max_tensor.norm, &best, sizeof(double)) == 0);
    CHECK(n.max_tensor.tensor == best_name);
    // And within a few ulps of the exact value (a sum of 560k positive terms in double).
    long double exact = 0;
    for (float x : g) exact += static_cast<long double>(x) * x;
    CHECK(n.global == doctest::Approx(static_cast<double>(std::sqrt(exact))).epsilon(1e-13));
  }
  SUBCASE("a table that does not tile the buffer is refused") {
    ParamTable gap = tb;
    gap.specs[1].offset = 3;
    const float g[6] = {};
    CHECK_THROWS_AS(gradient_norms(gap, g), std::logic_error);
  }
}

namespace {

// The update rules of Optimizer::step (train/optimizer.h) written out element by element over the
// loaded state, as the documentation states them: the reference the in-place update must equal.
struct ScalarOptimizer {
  TrainConfig t;
  PrecisionConfig pc;
  StateBuffer m, v;
  std::vector<uint8_t> decay;  // per block
  uint64_t steps = 0;

  ScalarOptimizer(const TrainConfig& tc, const PrecisionConfig& p, const ParamTable& tb) : t(tc), pc(p) {
    StateFormat f = StateFormat::fp32;
    REQUIRE(parse_state_format(p.optimizer_state, &f));
    m.init(f, tb, true);
    v.init(f, tb, false);
    for (const auto& s : tb.specs)
      for (size_t b = s.offset; b < s.offset + s.size; b += StateBuffer::kBlock) decay.push_back(s.decay);
  }

  void step(float* params, const float* grads, double lr, double clip, uint64_t seed, uint64_t step_index) {
    ++steps;
    const float flr = static_cast<float>(lr), s = static_cast<float>(clip), wd = static_cast<float>(t.weight_decay);
    const float mu = static_cast<float>(t.momentum), b1 = static_cast<float>(t.beta1), b2 = static_cast<float>(t.beta2);
    const float eps = static_cast<float>(t.eps);
    const float c1 = static_cast<float>(1.0 - std::pow(t.beta1, static_cast<double>(steps)));
    const float c2 = static_cast<float>(1.0 - std::pow(t.beta2, static_cast<double>(steps)));
    float mb[StateBuffer::kBlock], vb[StateBuffer::kBlock];
    for (size_t blk = 0; blk < m.blocks(); ++blk) {
      const size_t lo = m.block_begin(blk), n = m.block_end(blk) - lo;
      m.load(blk, mb);
      v.load(blk, vb);
      for (size_t i = 0; i < n; ++i) {
        float& p = params[lo + i];
        if (t.optimizer == "sgd") {
          float g = grads[lo + i] * s;
          if (decay[blk] && wd != 0.0f) g = g + wd * p;
          mb[i] = mu * mb[i] + g;
          p = p - flr * mb[i];
        } else {
          const float g = grads[lo + i] * s;
          mb[i] = b1 * mb[i] + (1.0f - b1) * g;
          vb[i] = b2 * vb[i] + (1.0f - b2) * (g * g);
          float u = (mb[i] / c1) / (std::sqrt(vb[i] / c2) + eps);
          if (decay[blk]) u = u + wd * p;
          p = p - flr * u;
        }
      }
      m.store(blk, mb);
      v.store(blk, vb);
    }
    // The master rounding over the whole buffer in one call: element i's random word depends on i
    // only, so this is also a check that the optimizer's per-block calls cut the stream correctly.
    if (pc.master.format != "fp32" || pc.master.rounding != "rne") {
      RoundSpec spec;
      spec.mode = *parse_rounding(pc.master.rounding);
      const uint64_t stream = (uint64_t{0x4d53} << 48) + step_index;  // the master rounding's stream (optimizer.cpp)
      cast_span_scalar(params, params, m.block_end(m.blocks() - 1), *find_format(pc.master.format), spec, seed, stream, 0);
    }
  }
};

}  // namespace

// Values over 60 binades, so that the order of the adds decides many low bits: a lane that added
// its elements in another order, or into another partial sum, would show. (A fused multiply-add
// would not: the square of a float is exact in double.)
TEST_CASE("tensor_sum_squares: every SIMD target this CPU runs gives the definition's bits") {
  struct Reset {
    ~Reset() { hwy::SetSupportedTargetsForTest(0); }
  } reset;
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  REQUIRE(!targets.empty());
  for (const size_t n : {size_t{0}, size_t{5}, size_t{8}, size_t{13}, size_t{1001}, size_t{65543}}) {
    std::vector<float> g = draws(n, 31, 1.0f);
    for (size_t i = 0; i < n; ++i) g[i] = std::ldexp(g[i], static_cast<int>(random_u32(7, 32, i) % 61) - 30);
    double part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; ++i) {
      const double x = g[i];
      part[i % 8] = part[i % 8] + x * x;
    }
    const double want = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    for (int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      CAPTURE(n);
      CAPTURE(std::string(hwy::TargetName(target)));
      CHECK(same_bits(tensor_sum_squares(g.data(), n), want));
    }
  }
}

TEST_CASE("optimizer: the in-place update gives the scalar rule's bits for every state format and master format") {
  ParamTable tb;
  tb.add("w", {700});       // blocks of 256, 256, 188
  tb.add("b", {37}, false); // no weight decay
  tb.add("u", {256});       // exactly one block
  struct Case {
    const char* optimizer;
    const char* state;
    const char* master;
    const char* rounding;
    double wd;
  };
  const Case cases[] = {
      {"adamw", "fp32", "fp32", "rne", 0.1},  {"adamw", "bf16", "fp32", "rne", 0.1},
      {"adamw", "int8_block", "fp32", "rne", 0.1}, {"adamw", "fp32", "bf16", "sr", 0.1},
      {"adamw", "int8_block", "bf16", "rne", 0.0}, {"sgd", "fp32", "fp32", "rne", 0.1},
      {"sgd", "fp32", "fp32", "rne", 0.0},    {"sgd", "bf16", "bf16", "sr", 0.01},
      {"sgd", "int8_block", "fp32", "rne", 0.1},
  };
  for (const Case& c : cases) {
    const std::string which = std::string(c.optimizer) + ", state " + c.state + ", master " + c.master + " " +
                              c.rounding + ", weight_decay " + std::to_string(c.wd);
    CAPTURE(which);
    TrainConfig t;
    t.optimizer = c.optimizer;
    t.weight_decay = c.wd;
    t.momentum = 0.9;
    PrecisionConfig p;
    p.optimizer_state = c.state;
    p.master.format = c.master;
    p.master.rounding = c.rounding;
    std::vector<float> w = draws(tb.total, 2, 1.0f), w_ref = w;
    Optimizer opt(t, p, tb);
    ScalarOptimizer ref(t, p, tb);
    for (uint64_t s = 0; s < 5; ++s) {
      const std::vector<float> g = draws(tb.total, 10 + s, s == 3 ? 1e-6f : 0.5f);  // one step of tiny gradients
      const double lr = 1e-2 / static_cast<double>(s + 1), clip = s == 2 ? 0.25 : 1.0;
      opt.step(tb, w.data(), g.data(), lr, clip, 7, s);
      ref.step(w_ref.data(), g.data(), lr, clip, 7, s);
      REQUIRE(same_bits(w, w_ref));
    }
    // The state as stored (what a checkpoint holds) is the reference's too.
    BlobWriter a, b;
    opt.save(a);
    b.u64(5);
    ref.m.save(b);
    if (t.optimizer == "adamw") ref.v.save(b);
    CHECK(a.bytes() == b.bytes());
  }
}

TEST_CASE("update rules: every SIMD target this CPU runs gives the scalar rule's bits, on one thread or two") {
  // 1001: not a multiple of any vector width (the loops' tails run too); 70001: past the size at
  // which the update splits its chunks over a team, whose last chunk is partial.
  for (const size_t n : {size_t{1001}, size_t{70001}})
    for (const int threads : {1, 2}) {
      CAPTURE(n);
      CAPTURE(threads);
      std::vector<float> g = draws(n, 20, 0.5f), p0 = draws(n, 21, 1.0f), m0 = draws(n, 22, 0.1f);
      std::vector<float> v0 = draws(n, 23, 0.01f);
      for (float& x : v0) x = std::fabs(x);
      // Signed zeros, subnormal moments, a square that overflows, a NaN gradient: a division by
      // 1.0f (skipped from the step where 1 - beta^t rounds to one) returns each unchanged.
      m0[0] = -0.0f, g[0] = -0.0f, v0[0] = 0.0f;
      m0[1] = 0x1p-140f, v0[1] = 0x1p-146f, g[1] = 0.0f;
      g[2] = 3e19f;
      g[3] = std::numeric_limits<float>::quiet_NaN();
      const std::vector<int64_t> targets = update_rule_targets();
      REQUIRE(!targets.empty());
      struct Reset {
        int threads = omp_get_max_threads();  // (the team size before this case)
        ~Reset() {
          hwy::SetSupportedTargetsForTest(0);
          omp_set_num_threads(threads);
        }
      } reset;
      omp_set_num_threads(threads);
      for (int64_t target : targets) {
        hwy::SetSupportedTargetsForTest(target);
        CAPTURE(std::string(hwy::TargetName(target)));
        // Bias corrections below one (early steps) and equal to one (later), each way round.
        const std::pair<float, float> biases[] = {{0.271f, 0.142625f}, {1.0f, 0.142625f}, {0.271f, 1.0f}, {1.0f, 1.0f}};
        for (size_t variant = 0; variant < 2 * std::size(biases); ++variant) {
          const bool decay = variant % 2 == 1;
          const float bias1 = biases[variant / 2].first, bias2 = biases[variant / 2].second;
          CAPTURE(decay);
          CAPTURE(bias1);
          CAPTURE(bias2);
          AdamwCoeffs a;
          a.lr = 1e-3f, a.grad_scale = 0.75f, a.weight_decay = 0.1f, a.beta1 = 0.9f, a.beta2 = 0.95f, a.eps = 1e-8f;
          a.one_minus_beta1 = 1.0f - a.beta1, a.one_minus_beta2 = 1.0f - a.beta2;
          a.bias1 = bias1, a.bias2 = bias2;
          std::vector<float> p = p0, m = m0, v = v0, pr = p0, mr = m0, vr = v0;
          adamw_update(p.data(), g.data(), m.data(), v.data(), n, a, decay);
          for (size_t i = 0; i < n; ++i) {
            const float gi = g[i] * a.grad_scale;
            mr[i] = a.beta1 * mr[i] + (1.0f - a.beta1) * gi;
            vr[i] = a.beta2 * vr[i] + (1.0f - a.beta2) * (gi * gi);
            float u = (mr[i] / a.bias1) / (std::sqrt(vr[i] / a.bias2) + a.eps);
            if (decay) u = u + a.weight_decay * pr[i];
            pr[i] = pr[i] - a.lr * u;
          }
          CHECK(same_bits(p, pr));
          CHECK(same_bits(m, mr));
          CHECK(same_bits(v, vr));

          SgdCoeffs s;
          s.lr = 1e-2f, s.grad_scale = 0.5f, s.weight_decay = 0.01f, s.momentum = 0.9f;
          p = p0, m = m0, pr = p0, mr = m0;
          sgd_update(p.data(), g.data(), m.data(), n, s, decay);
          for (size_t i = 0; i < n; ++i) {
            float gi = g[i] * s.grad_scale;
            if (decay) gi = gi + s.weight_decay * pr[i];
            mr[i] = s.momentum * mr[i] + gi;
            pr[i] = pr[i] - s.lr * mr[i];
          }
          CHECK(same_bits(p, pr));
          CHECK(same_bits(m, mr));
        }
      }
    }
}

}  // namespace test_train_step
