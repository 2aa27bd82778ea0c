// Training-side precision: loss scaling, master-weight rounding, optimizer-state formats,
// checkpoints and the divergence record. Expected values are derived by hand in each case.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "arith/catalogue.h"
#include "train/allreduce.h"
#include "train/checkpoint.h"
#include "train/divergence.h"
#include "train/loss_scale.h"
#include "train/opt_state.h"
#include "train/optimizer.h"
#include "train/telemetry.h"
#include "train/trainer.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_train_precision {

using namespace drift;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& tag) {
  static int n = 0;
  fs::path d = fs::temp_directory_path() / ("drift_tp_" + tag + std::to_string(::getpid()) + "_" + std::to_string(n++));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<json> read_metrics(const fs::path& dir) {
  std::vector<json> v;
  std::ifstream f(dir / "metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) v.push_back(json::parse(line));
  return v;
}

RunConfig tiny_run(const fs::path& dir) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the cat sat on the mat. ";
  std::ofstream(dir / "t.txt") << text;
  RunConfig c = parse_run_config(json::object());
  c.data.path = (dir / "t.txt").string();
  c.model.context = 4;
  c.model.embed = 8;
  c.model.hidden = 32;
  c.train.steps = 40;
  c.train.batch = 16;
  c.train.warmup = 0;
  c.train.eval_every = 20;
  c.train.eval_batches = 2;
  c.train.log_every = 1;
  return c;
}

}  // namespace

TEST_CASE("loss scaler: the dynamic rule, step by step") {
  LossScaleConfig c;
  c.kind = "dynamic";
  c.init = 1024;
  c.interval = 3;
  c.growth = 2;
  c.backoff = 0.5;
  c.min_scale = 256;
  LossScaler s;
  s.start(c);
  CHECK(s.scale == 1024);
  CHECK_FALSE(s.after_backward(c, false));  // overflow: skip, halve
  CHECK(s.scale == 512);
  CHECK(s.after_backward(c, true));
  CHECK(s.after_backward(c, true));
  CHECK(s.scale == 512);
  CHECK(s.after_backward(c, true));  // third finite step in a row: grow
  CHECK(s.scale == 1024);
  CHECK_FALSE(s.after_backward(c, false));
  CHECK_FALSE(s.after_backward(c, false));
  CHECK_FALSE(s.after_backward(c, false));  // 1024 -> 512 -> 256 -> 256 (min)
  CHECK(s.scale == 256);
  CHECK(s.skipped == 4);
  LossScaleConfig st;
  st.kind = "static";
  st.init = 8;
  s.start(st);
  CHECK_FALSE(s.after_backward(st, false));
  CHECK(s.scale == 8);  // static never changes
  LossScaleConfig none;
  s.start(none);
  CHECK(s.after_backward(none, false));  // no scaling: nothing is skipped (divergence decides)
  CHECK(s.scale == 1);
}

TEST_CASE("8-bit dynamic map: 256 distinct codes with the documented construction") {
  for (bool sgn : {true, false}) {
    const auto& m = dynamic_map(sgn);
    for (size_t i = 1; i < 256; ++i) CHECK(m[i - 1] < m[i]);
    CHECK(m[255] == 1.0f);
    // The smallest positive code: decade 10^-6 times the midpoint of the first grid cell over
    // [0.1, 1] with 2 (signed) or 3 (unsigned) points: 0.55e-6 or 0.325e-6.
    const float smallest = *std::upper_bound(m.begin(), m.end(), 0.0f);
    CHECK(smallest == static_cast<float>(sgn ? 0.55e-6 : 0.325e-6));
    // The largest code below 1: the last midpoint of 65 (signed) or 129 (unsigned) points.
    CHECK(m[254] == static_cast<float>(sgn ? 1 - 0.9 / 128 : 1 - 0.9 / 256));
    CHECK(m[0] == (sgn ? -static_cast<float>(1 - 0.9 / 128) : 0.0f));
    for (size_t i = 0; i < 256; ++i) CHECK(encode_dynamic(m[i], m) == i);
  }
  const auto& m = dynamic_map(true);
  // Between two codes the nearer wins; exactly halfway goes to the smaller code.
  const size_t k = 200;
  CHECK(encode_dynamic(m[k] + 0.4f * (m[k + 1] - m[k]), m) == k);
  CHECK(encode_dynamic(m[k] + 0.6f * (m[k + 1] - m[k]), m) == k + 1);
}

TEST_CASE("optimizer state formats: int8 block-wise and bf16 storage") {
  ParamTable tb;
  tb.add("w", {300});  // two blocks: 256 + 44
  tb.add("b", {3}, false);
  StateBuffer sb;
  sb.init(StateFormat::int8_block, tb, true);
  CHECK(sb.blocks() == 3);
  CHECK(sb.block_begin(1) == 256);
  CHECK(sb.block_end(1) == 300);
  CHECK(sb.block_begin(2) == 300);
  std::vector<float> in(44), out(44);
  for (size_t i = 0; i < 44; ++i) in[i] = static_cast<float>(std::sin(1.0 + i)) * 0.01f;
  sb.store(1, in.data());
  sb.load(1, out.data());
  float amax = 0;
  for (float x : in) amax = std::max(amax, std::fabs(x));
  const auto& m = dynamic_map(true);
  for (size_t i = 0; i < 44; ++i) {
    // The loaded value is a code value times the block absmax, and no other code is nearer to the
    // normalised input.
    size_t code = 256;
    for (size_t k = 0; k < 256; ++k)
      if (m[k] * amax == out[i]) code = k;
    REQUIRE(code < 256);
    const double x = in[i] / amax;
    const double err = std::fabs(x - m[code]);
    if (code > 0) CHECK(err <= std::fabs(x - m[code - 1]));
    if (code < 255) CHECK(err <= std::fabs(x - m[code + 1]));
  }
  CHECK(*std::max_element(out.begin(), out.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }) ==
        doctest::Approx(amax).epsilon(1e-6));  // the absmax element maps to +-1 exactly (times absmax)

  StateBuffer bf;
  bf.init(StateFormat::bf16, tb, true);
  const float v[3] = {1.0f + 1.0f / 512, 1.0f + 3.0f / 256, -3.0f};  // bf16 ulp at 1 is 2^-7
  bf.store(2, v);
  float back[3];
  bf.load(2, back);
  CHECK(back[0] == 1.0f);                 // 1 + 2^-9: below half an ulp, rounds down
  CHECK(back[1] == 1.0f + 1.0f / 64);     // 1 + 1.5 * 2^-7: a tie, to even (1 + 2^-6)
  CHECK(back[2] == -3.0f);
}

TEST_CASE("master weights in bf16: rne loses small updates, sr keeps them on average") {
  ParamTable tb;
  const size_t n = 100000;
  tb.add("w", {n}, false);
  TrainConfig t;
  t.optimizer = "sgd";
  t.momentum = 0;
  PrecisionConfig p;
  p.master.format = "bf16";
  std::vector<float> w(n, 1.0f), g(n, 1.0f);
  {
    Optimizer o(t, p, tb);
    o.step(tb, w.data(), g.data(), 1e-3, 1.0, 7, 0);  // 1 - 0.001 is nearer 1 than 1 - 2^-8
    for (float x : w) REQUIRE(x == 1.0f);
  }
  p.master.rounding = "sr";
  {
    Optimizer o(t, p, tb);
    o.step(tb, w.data(), g.data(), 1e-3, 1.0, 7, 0);
    // Each weight becomes 1 - 2^-8 with probability q = 0.001f / 2^-8 (fp32 0.999 lies at that
    // fraction of the gap), else 1; the mean is 0.999 within 6 standard errors.
    double mean = 0;
    for (float x : w) {
      REQUIRE((x == 1.0f || x == 1.0f - 1.0f / 256));
      mean += x;
    }
    mean /= n;
    const double q = (1.0 - static_cast<double>(1.0f - 0.001f)) * 256, se = std::sqrt(q * (1 - q) / n) / 256;
    CHECK(std::fabs(mean - (1.0 - q / 256)) < 6 * se);
    CHECK(std::fabs(mean - 0.999) < 1e-5);
  }
}

TEST_CASE("checkpoint files: a truncated, corrupted or foreign file is an error naming it") {
  const fs::path d = temp_dir("ck");
  const std::string path = (d / "c.bin").string();
  write_checkpoint(path, std::string(1000, 'x'));
  CHECK(read_checkpoint(path) == std::string(1000, 'x'));
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  auto expect_error = [&](const std::string& content, const std::string& words) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    try {
      read_checkpoint(path);
      FAIL("no error for: " << words);
    } catch (const CheckpointError& e) {
      CHECK(std::string(e.what()).find(path) != std::string::npos);
      CHECK(std::string(e.what()).find(words) != std::string::npos);
    }
  };
  expect_error(bytes.substr(0, 500), "truncated");
  std::string flipped = bytes;
  flipped[100] ^= 1;
  expect_error(flipped, "checksum");
  expect_error("{\"not\": \"a checkpoint\"}", "not a drift checkpoint");
  expect_error(bytes + "x", "trailing");
  fs::remove_all(d);
}

TEST_CASE("divergence record: spike with patience, non-finite, departure from a reference") {
  DivergenceConfig c;
  c.after_step = 2;
  c.factor = 2.0;
  c.patience = 2;
  c.smoothing = 0.0;  // the EMA is the loss itself: best = min loss so far
  c.on = {"nonfinite", "spike", "departure"};
  std::map<uint64_t, double> ref = {{0, 5.0}, {1, 4.0}, {2, 3.0}, {3, 3.0}, {4, 3.0}, {5, 3.0}, {6, 3.0}};
  c.departure_tol = 0.1;
  c.departure_steps = 2;
  DivergenceTracker t(c, &ref);
  CHECK(t.observe(0, 5.0, false).empty());
  CHECK(t.observe(1, 4.0, false).empty());
  CHECK(t.observe(2, 3.0, false).empty());   // best 3
  CHECK(t.observe(3, 3.2, false).empty());   // within 10% of 3: no departure
  CHECK(t.observe(4, 7.0, false).empty());   // above 2 x 3 once; departs once
  CHECK(t.spike_step == -1);
  const std::string r = t.observe(5, 6.5, false);  // second step above: spike at 4; departure at 4 too
  CHECK(t.spike_step == 4);
  CHECK(t.departure_step == 4);
  CHECK(t.divergence_step == 5);
  CHECK(r.find("spike") == std::string::npos);  // the reason text names the loss comparison
  CHECK(r.find("x best smoothed loss") != std::string::npos);
  CHECK(t.observe(6, NAN, false).empty());  // the run already diverged: recorded, not again
  CHECK(t.first_nonfinite_step == 6);

  DivergenceConfig only_nan;
  DivergenceTracker u(only_nan, nullptr);
  CHECK(u.observe(0, 5.0, false).empty());
  CHECK(u.observe(1, 5.0, true) == "non-finite gradient");
  CHECK(u.first_nonfinite_step == 1);
}

TEST_CASE("rolling z-score against the trailing window") {
  RollingZ z(3);
  CHECK(std::isnan(z.z(1.0)));
  z.push(1);
  z.push(2);
  z.push(3);
  // mean 2, population std sqrt(2/3)
  CHECK(z.z(4.0) == doctest::Approx(2.0 / std::sqrt(2.0 / 3.0)));
  z.push(10);  // the window drops 1: {2, 3, 10}
  CHECK(z.z(5.0) == doctest::Approx((5.0 - 5.0) / 1.0));
}

TEST_CASE("loss scaling by a power of two leaves fp32 training bit-identical") {
  // Every backward operation is linear in the loss gradient, and multiplying fp32 values by 2^k
  // commutes with fp32 rounding (no overflow or underflow at these magnitudes), so the unscaled
  // gradients, and every logged number, must be the same bits.
  const fs::path d = temp_dir("ls");
  RunConfig c = tiny_run(d);
  c.output.dir = (d / "plain").string();
  PreparedRun a = prepare_run(c);
  train(a, TrainOptions{}, {});
  c.precision.loss_scale.kind = "static";
  c.precision.loss_scale.init = 1024;
  c.output.dir = (d / "scaled").string();
  PreparedRun b = prepare_run(c);
  train(b, TrainOptions{}, {});
  const auto ma = read_metrics(d / "plain"), mb = read_metrics(d / "scaled");
  REQUIRE(ma.size() == mb.size());
  for (size_t i = 0; i < ma.size(); ++i) {
    CHECK(ma[i]["loss"] == mb[i]["loss"]);
    CHECK(ma[i]["grad_norm"] == mb[i]["grad_norm"]);
    CHECK(ma[i]["val_loss"] == mb[i]["val_loss"]);
    CHECK(mb[i]["loss_scale"] == 1024.0);
  }
  fs::remove_all(d);
}

TEST_CASE("dynamic loss scaling: fp16 gradients that overflow are skipped and the scale backs off") {
  const fs::path d = temp_dir("dyn");
  RunConfig c = tiny_run(d);
  // fp16 operands everywhere with IEEE overflow: a loss scale of 2^40 overflows the backward
  // operands to inf, so the first steps are skipped, halving the scale each time, until it fits.
  c.precision.matmul = MatmulRules(json::array({json{{"a", {{"format", "fp16"}, {"overflow", "ieee"}}},
                                                     {"b", {{"format", "fp16"}, {"overflow", "ieee"}}}}}),
                                  "precision.matmul");
  c.precision.loss_scale.kind = "dynamic";
  c.precision.loss_scale.init = std::ldexp(1.0, 40);
  c.precision.loss_scale.max_scale = std::ldexp(1.0, 40);
  c.precision.loss_scale.interval = 1000;
  c.output.dir = (d / "run").string();
  PreparedRun r = prepare_run(c);
  const RunSummary s = train(r, TrainOptions{}, {});
  CHECK_FALSE(s.diverged);  // overflowed gradients are skipped steps, not a divergence
  const auto m = read_metrics(d / "run");
  uint64_t skipped = 0;
  for (size_t i = 0; i + 1 < m.size(); ++i) {
    const double now = m[i]["loss_scale"], next = m[i + 1]["loss_scale"];
    if (m[i]["skipped"].get<bool>()) {
      ++skipped;
      CHECK(next == now / 2);
      CHECK_FALSE(std::isfinite(m[i]["grad_norm"].is_number() ? m[i]["grad_norm"].get<double>() : NAN));
    } else {
      CHECK(next == now);  // no growth within the interval
    }
  }
  CHECK(skipped > 0);
  CHECK(skipped == s.skipped_steps);
  CHECK(m.back()["skipped"] == false);
  fs::remove_all(d);
}

TEST_CASE("metrics lines: grad_clipped says whether the gradient norm exceeded train.grad_clip") {
  // The flag is named grad_clipped since drift 0.1.1 (0.1.0 wrote "clipped", which inside `sites`
  // and `classes` counts clipped operand elements). It is true exactly on the lines whose
  // grad_norm (logged before clipping) exceeds a positive train.grad_clip.
  const fs::path d = temp_dir("gc");
  auto run = [&](double clip, const char* name) {
    RunConfig c = tiny_run(d);
    c.train.grad_clip = clip;
    c.output.dir = (d / name).string();
    PreparedRun r = prepare_run(c);
    train(r, TrainOptions{}, {});
    return read_metrics(d / name);
  };
  const auto off = run(0, "off"), tiny = run(1e-9, "tiny"), huge = run(1e9, "huge");
  REQUIRE(!off.empty());
  std::vector<double> norms;
  for (const auto& l : off) {
    CHECK_FALSE(l.contains("clipped"));
    CHECK(l["grad_clipped"] == false);  // no clipping configured
    norms.push_back(l["grad_norm"].get<double>());
  }
  for (const auto& l : tiny) CHECK(l["grad_clipped"] == true);  // every norm is above 1e-9
  for (const auto& l : huge) CHECK(l["grad_clipped"] == false);
  // A threshold inside the norms' range: the flag follows each line's own norm.
  std::sort(norms.begin(), norms.end());
  const double mid = norms[norms.size() / 2];
  for (const auto& l : run(mid, "mid")) CHECK(l["grad_clipped"] == (l["grad_norm"].get<double>() > mid));
  fs::remove_all(d);
}

TEST_CASE("resume refuses a checkpoint of a different config, naming the first differing key") {
  const fs::path d = temp_dir("rs");
  RunConfig c = tiny_run(d);
  c.train.steps = 10;
  c.output.dir = (d / "run").string();
  PreparedRun r = prepare_run(c);
  train(r, TrainOptions{}, {});
  c.train.lr = 0.01;
  PreparedRun r2 = prepare_run(c);
  TrainOptions o;
  o.resume = true;
  try {
    train(r2, o, {});
    FAIL("resumed with a different config");
  } catch (const CheckpointError& e) {
    CHECK(std::string(e.what()).find("train.lr") != std::string::npos);
  }
  // --resume-from accepts another policy: it starts from the checkpoint's step.
  c.output.dir = (d / "branch").string();
  c.train.steps = 15;
  PreparedRun r3 = prepare_run(c);
  TrainOptions f;
  f.resume_from = (d / "run" / "checkpoint.bin").string();
  train(r3, f, {});
  const auto m = read_metrics(d / "branch");
  CHECK(m.front()["step"] == 10);
  CHECK(m.back()["step"] == 14);
  fs::remove_all(d);
}

TEST_CASE("simulated all-reduce: ring and tree orders in bf16, derived by hand") {
  const Format bf16 = *find_format("bf16");
  const float h = std::ldexp(1.0f, -8);  // half a bf16 ulp at 1
  // Element i: rank i holds 1, the other ranks 2^-8. bf16 has 8 significant bits.
  std::vector<std::vector<float>> parts(4, std::vector<float>(4, h));
  for (size_t i = 0; i < 4; ++i) parts[i][i] = 1.0f;
  std::vector<float> out(4);
  // ring: chunk i is element i; its sum starts at rank i+1 and ends with rank i, so the three small
  // parts add first (2^-7, then 3 x 2^-8, exact) and 1 comes last: 1 + 1.5 ulp, a tie, to even: 1 + 2^-6.
  simulated_allreduce(parts, out.data(), 4, bf16, RoundSpec{}, "ring");
  for (float x : out) CHECK(x == 1.0f + std::ldexp(1.0f, -6));
  // tree: (g0 + g1) + (g2 + g3). The pair holding 1 rounds 1 + 2^-8 (a tie) to 1, the other pair is
  // 2^-7 exactly; 1 + 2^-7 is representable.
  simulated_allreduce(parts, out.data(), 4, bf16, RoundSpec{}, "tree");
  for (float x : out) CHECK(x == 1.0f + std::ldexp(1.0f, -7));
  // fp32 wire: exact here, either order.
  simulated_allreduce(parts, out.data(), 4, *find_format("fp32"), RoundSpec{}, "ring");
  for (float x : out) CHECK(x == 1.0f + 3 * h);
}

TEST_CASE("simulated data parallelism: two ranks give the one-rank loss at step 0 and train") {
  const fs::path d = temp_dir("dp");
  RunConfig c = tiny_run(d);
  c.train.steps = 5;
  c.output.dir = (d / "one").string();
  PreparedRun a = prepare_run(c);
  train(a, TrainOptions{}, {});
  c.precision.allreduce.ranks = 2;
  c.precision.allreduce.format = "bf16";
  c.output.dir = (d / "two").string();
  PreparedRun b = prepare_run(c);
  train(b, TrainOptions{}, {});
  const auto ma = read_metrics(d / "one"), mb = read_metrics(d / "two");
  // Step 0: the forward of each row does not depend on the other rows (fp32 passthrough), so the
  // mean of the two half-batch means is the batch mean up to double rounding.
  CHECK(mb[0]["loss"].get<double>() == doctest::Approx(ma[0]["loss"].get<double>()).epsilon(1e-12));
  // The bf16 reduction changes the gradient: the norms differ but stay close (8 bits).
  const double ga = ma[0]["grad_norm"], gb = mb[0]["grad_norm"];
  CHECK(ga != gb);
  CHECK(std::fabs(ga - gb) < 0.02 * ga);
  fs::remove_all(d);
}

}  // namespace test_train_precision
