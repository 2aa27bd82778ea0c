// Deep diagnostics: each metric against a hand-built case with a known answer, the error bound
// silent on every real policy and firing on a broken accumulator, and the exact reference gradient
// against one computed here by another route.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "arith/cast_error.h"
#include "arith/catalogue.h"
#include "arith/error_bound.h"
#include "arith/matmul.h"
#include "arith/random.h"
#include "arith/tc_presets.h"
#include "diag/diagnostics.h"
#include "diag/grad_quality.h"
#include "policy/presets.h"
#include "policy/probes.h"
#include "train/config.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_diag {

using namespace drift;

namespace {

Format fmt(const char* name) { return *find_format(name); }

// Uniform in (-2, 2) times 2^(-4..4), rounded to float: values of realistic spread.
std::vector<double> random_values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 9, 2 * i), r1 = random_u32(seed, 9, 2 * i + 1);
    const double x = (static_cast<double>(r0) / 4294967296.0 - 0.5) * 4.0;
    v[i] = static_cast<float>(x * std::ldexp(1.0, static_cast<int>(r1 % 9) - 4));
  }
  return v;
}

// A (m x k) whose rows cancel: pairs (x, -x) of large values against B's equal entries, plus one
// small term per 16, so that the exact result is small against sum |a||b|.
std::vector<double> cancelling_rows(size_t m, size_t k, uint64_t seed) {
  std::vector<double> a = random_values(m * k, seed);
  for (size_t i = 0; i < m; ++i)
    for (size_t t = 0; t + 1 < k; t += 2) {
      a[i * k + t] = std::ldexp(std::fabs(a[i * k + t]) + 1, 3);
      a[i * k + t + 1] = (t % 16 == 0) ? a[i * k + t + 1] : -a[i * k + t];
    }
  return a;
}

// B (k x n) with equal entries in each pair of rows (2t, 2t+1), so cancelling_rows cancels.
std::vector<double> paired_rows(size_t k, size_t n, uint64_t seed) {
  std::vector<double> b = random_values(k * n, seed);
  for (size_t t = 0; t + 1 < k; t += 2)
    for (size_t j = 0; j < n; ++j) b[(t + 1) * n + j] = b[t * n + j];
  return b;
}

MatView view(const std::vector<double>& x, size_t rows, size_t cols) {
  MatView v;
  v.data = x.data(), v.rows = rows, v.cols = cols, v.ld = cols;
  return v;
}

// Runs the engine with the bound check on; returns the merged check over a few calls (delayed
// scaling needs a history first).
BoundCheck engine_check(const MatmulPolicy& p, const std::vector<double>& a, const std::vector<double>& b, size_t m,
                        size_t k, size_t n) {
  DelayedState da, db;
  MatmulContext ctx;
  ctx.seed = 5;
  ctx.delayed_a = &da;
  ctx.delayed_b = &db;
  ctx.check_bound = true;
  std::vector<double> c(m * n);
  BoundCheck total;
  for (uint64_t call = 0; call < 3; ++call) {
    ctx.stream = call;
    for (bool ref : {false, true}) {
      ctx.force_reference = ref;
      total.merge(matmul(view(a, m, k), view(b, k, n), c.data(), n, p, ctx).bound);
    }
  }
  return total;
}

// k = 300 crosses MX (32), NVFP4 (16) and DeepSeek (128) blocks with a partial last one; fp16
// results need a shorter k to stay in range.
void check_silent(const MatmulPolicy& p, const std::string& name, size_t k = 300) {
  const size_t m = 3, n = 5;
  for (int data = 0; data < 2; ++data) {
    const auto a = data ? cancelling_rows(m, k, 11) : random_values(m * k, 11);
    const auto b = data ? paired_rows(k, n, 12) : random_values(k * n, 12);
    const BoundCheck chk = engine_check(p, a, b, m, k, n);
    const std::string what = name + (data ? " (cancellation)" : " (random)");
    INFO(what << ": max ratio " << chk.max_ratio << ", unchecked " << chk.unchecked);
    CHECK(chk.checked > 0);
    CHECK(chk.violations == 0);
    CHECK(chk.max_ratio <= 1.0);
  }
}

// Operands given directly on their grids (no quantization): A as m x k, B as n x k.
PreparedOperands raw_operands(const std::vector<double>& a, const std::vector<double>& bt, size_t m, size_t k,
                              size_t n) {
  PreparedOperands ops;
  ops.a.rows = m, ops.a.k = k, ops.a.q = a;
  ops.b.rows = n, ops.b.k = k, ops.b.q = bt;
  ops.kblock = k;
  return ops;
}

}  // namespace

TEST_CASE("cast error: a block at 0.99 under MXFP8 E4M3 with the floor rule clips every element to 0.875") {
  // amax 0.99: shared exponent floor(log2 0.99) - emax(E4M3) = -1 - 8, so the scale is 2^-9 and
  // 0.99 / 2^-9 = 506.88 saturates at 448: every element dequantises to 448 * 2^-9 = 0.875.
  const MatmulPolicy p = *find_matmul_preset("mxfp8_e4m3");
  std::vector<double> a(32), b(32, 1.0);
  for (size_t i = 0; i < 32; ++i) a[i] = (i % 3 == 1) ? -0.99 : 0.99;  // signs do not change the picture
  MatmulContext ctx;
  ctx.cast_error = true;
  double c = 0;
  const MatmulTelemetry t = matmul(view(a, 1, 32), view(b, 32, 1), &c, 1, p, ctx);
  CHECK(t.a_cast.elements == 32);
  CHECK(t.a_cast.shrank == 32);
  CHECK(t.a_cast.shrank_fraction() == 1.0);
  CHECK(t.a_cast.rel_error() == doctest::Approx(0.115 / 0.99).epsilon(1e-13));
  CHECK(t.a_cast.one_sidedness() == doctest::Approx(-0.115 / 0.99).epsilon(1e-13));
  // b = 1: scale 2^(0 - 8), 1 / 2^-8 = 256 is on the E4M3 grid: no error.
  CHECK(t.b_cast.elements == 32);
  CHECK(t.b_cast.rel_error() == 0.0);
  CHECK(t.b_cast.shrank == 0);
  // Off by default: nothing measured.
  ctx.cast_error = false;
  const MatmulTelemetry off = matmul(view(a, 1, 32), view(b, 32, 1), &c, 1, p, ctx);
  CHECK(off.a_cast.elements == 0);
  CHECK(off.bound.checked == 0);
}

TEST_CASE("cast error: symmetric rounding errors are not one-sided") {
  // bf16 (8 significand bits) spaces values near 1 by 2^-7: 1 + 2^-9 rounds down to 1 and
  // 1 + 3 * 2^-9 up to 1 + 2^-7: errors -2^-9 and +2^-9, equal in size, opposite in direction.
  Quantizer q;
  q.format = fmt("bf16");
  std::vector<double> x = {1 + std::ldexp(1.0, -9), 1 + 3 * std::ldexp(1.0, -9)};
  const QuantizedOperand qo = quantize(x.data(), 1, 2, 2, q, 0, 0);
  CastErrorStats s;
  accumulate_cast_error(s, StridedInput{x.data(), 2, 1}, qo, false);
  CHECK(s.elements == 2);
  CHECK(s.one_sidedness() == 0.0);
  CHECK(s.shrank == 1);
  const double e = std::ldexp(1.0, -9);
  CHECK(s.rel_error() == doctest::Approx(std::sqrt(2 * e * e / (x[0] * x[0] + x[1] * x[1]))).epsilon(1e-14));
}

TEST_CASE("gradient quality: cosine, relative error and bias on hand-built gradients") {
  const std::vector<double> ref = {3, 4};  // ||g*|| = 5
  SUBCASE("a scaled gradient: error all along g*") {
    const std::vector<float> g = {3.75f, 5.0f};  // 1.25 g*
    const GradQuality q = grad_quality(g.data(), ref.data(), 2);
    CHECK(q.cosine == doctest::Approx(1.0).epsilon(1e-15));
    CHECK(q.rel_error == doctest::Approx(0.25).epsilon(1e-15));
    CHECK(q.bias == doctest::Approx(0.25).epsilon(1e-15));
  }
  SUBCASE("an orthogonal error of the same size: no bias") {
    const std::vector<float> g = {4.0f, 3.25f};  // g* + (1, -0.75), (1, -0.75).(3, 4) = 0, |e| = 1.25
    const GradQuality q = grad_quality(g.data(), ref.data(), 2);
    CHECK(q.cosine == doctest::Approx(1 / std::sqrt(1.0625)).epsilon(1e-15));
    CHECK(q.rel_error == doctest::Approx(0.25).epsilon(1e-15));
    CHECK(q.bias == 0.0);
  }
  SUBCASE("a shrunk gradient has negative bias") {
    const std::vector<float> g = {1.5f, 2.0f};
    const GradQuality q = grad_quality(g.data(), ref.data(), 2);
    CHECK(q.bias == doctest::Approx(-0.5).epsilon(1e-15));
  }
  SUBCASE("per tensor and overall") {
    ParamTable t;
    t.add("x", {2});
    t.add("y", {2});
    const std::vector<double> r = {3, 4, 0, 0};
    const std::vector<float> g = {3.75f, 5.0f, 0.0f, 1.0f};
    const auto q = grad_quality_by_tensor(t, g.data(), r.data());
    REQUIRE(q.size() == 3);
    CHECK(q[0].tensor == "x");
    CHECK(q[0].q.bias == doctest::Approx(0.25));
    CHECK(std::isnan(q[1].q.rel_error));  // g* = 0 there: undefined
    CHECK(q[2].tensor == "overall");
    // overall: e = (0.75, 1, 0, 1), ||e||^2 = 2.5625, ||g*|| = 5, <e, g*> = 6.25
    CHECK(q[2].q.rel_error == doctest::Approx(std::sqrt(2.5625) / 5).epsilon(1e-15));
    CHECK(q[2].q.bias == doctest::Approx(0.25).epsilon(1e-15));
  }
}

TEST_CASE("error bound: silent on every matmul preset, on random data and on cancellation") {
  for (const auto& p : matmul_presets()) check_silent(*find_matmul_preset(p.name), p.name);
}

TEST_CASE("error bound: silent on every tensor-core preset") {
  for (const auto& tc : tc_presets()) {
    MatmulPolicy p;
    p.a.format = p.b.format = tc.in_format;
    p.inner.fused = tc.model;
    p.out_format = tc.out_format;
    check_silent(p, tc.name, tc.output == "fp16" ? 64 : 300);
  }
}

TEST_CASE("error bound: silent on accumulator variants (orders, roundings, narrow and flushing formats)") {
  // fp32 sums under MXFP8 operands; the narrow accumulators under bf16 operands (MX products of up
  // to 448^2 would overflow them, leaving nothing to check). An fp8_e5m2 accumulator (3 significand
  // bits) has a bound of (1 + 2^-3)^n - 1: finite, and checked, only for short sums.
  for (const char* acc : {"fp32", "bf16", "fp16", "fp8_e5m2"})
    for (SumOrder order : {SumOrder::sequential, SumOrder::reverse, SumOrder::pairwise, SumOrder::split,
                           SumOrder::permuted, SumOrder::splitk})
      for (Rounding r : {Rounding::rne, Rounding::rtz, Rounding::rup, Rounding::sr, Rounding::rto})
        for (Subnormals sub : {Subnormals::keep, Subnormals::flush}) {
          MatmulPolicy p = *find_matmul_preset(std::string(acc) == "fp32" ? "mxfp8_e4m3" : "bf16");
          p.inner.format = fmt(acc);
          p.inner.order = order;
          p.inner.split = 3;
          p.inner.round.mode = r;
          p.inner.round.subnormals = sub;
          p.outer = p.inner;
          p.product_format = fmt("bf16");
          p.product_round.mode = r;
          p.out_format = fmt("bf16");
          p.out_round.mode = r;
          check_silent(p, std::string(acc) + " " + to_string(order) + " " + to_string(r) + " " + to_string(sub),
                       std::string(acc) == "fp8_e5m2" ? 8 : 300);
        }
}

TEST_CASE("error bound: fires on a broken accumulator") {
  const size_t m = 2, k = 1024, n = 2;
  std::vector<double> a(m * k), bt(n * k);
  for (size_t i = 0; i < m * k; ++i) a[i] = 1.0 + std::ldexp(static_cast<double>(i % 7), -4);
  for (size_t i = 0; i < n * k; ++i) bt[i] = 0.5 + std::ldexp(static_cast<double>(i % 5), -5);
  const PreparedOperands ops = raw_operands(a, bt, m, k, n);
  MatmulPolicy declared;  // fp32 everything
  MatmulContext ctx;
  std::vector<double> c(m * n);

  SUBCASE("the declared accumulator passes") {
    MatmulTelemetry tel;
    matmul_reference(ops, c.data(), n, declared, ctx, tel);
    const BoundCheck chk = check_matmul_bound(ops, declared, c.data(), n);
    CHECK(chk.checked == m * n);
    CHECK(chk.violations == 0);
  }
  SUBCASE("an accumulator with fewer bits than declared (bf16 sums checked as fp32)") {
    MatmulPolicy broken = declared;
    broken.inner.format = fmt("bf16");
    MatmulTelemetry tel;
    matmul_reference(ops, c.data(), n, broken, ctx, tel);
    const BoundCheck chk = check_matmul_bound(ops, declared, c.data(), n);
    CHECK(chk.violations == m * n);
    CHECK(chk.max_ratio > 1.0);
  }
  SUBCASE("a result perturbed a few ulps beyond the bound") {
    MatmulTelemetry tel;
    matmul_reference(ops, c.data(), n, declared, ctx, tel);
    const MatmulErrorBound eb = matmul_error_bound(ops, declared);
    c[1] = eb.exact[1] + 1.5 * eb.bound[1];
    const BoundCheck chk = check_matmul_bound(ops, declared, c.data(), n);
    CHECK(chk.violations == 1);
    CHECK(chk.max_ratio == doctest::Approx(1.5).epsilon(1e-6));
  }
}

TEST_CASE("error bound: fires on a fused tensor-core model that keeps fewer alignment bits than declared") {
  // One product 256 sets the alignment exponent E = 8 for every group; the other products are
  // 15 * 2^(E - kept_bits): exact under the declared model, cut to zero by one keeping 4 bits fewer.
  // The loss, 15 units of the declared last bit per product, exceeds the declared bound's one unit.
  const FusedModel declared_model = find_tc_preset("h100_fp8_e4m3")->model;
  const int q = 8 - declared_model.kept_bits;
  const size_t k = 128;
  std::vector<double> a(k, 1.0), bt(k, 15 * std::ldexp(1.0, q));
  for (size_t t = 0; t < k; t += static_cast<size_t>(declared_model.terms)) bt[t] = 256;
  const PreparedOperands ops = raw_operands(a, bt, 1, k, 1);
  MatmulPolicy declared;
  declared.inner.fused = declared_model;
  MatmulPolicy broken = declared;
  broken.inner.fused->kept_bits -= 4;
  MatmulContext ctx;
  double c = 0;
  MatmulTelemetry tel;
  matmul_reference(ops, &c, 1, declared, ctx, tel);
  CHECK(check_matmul_bound(ops, declared, &c, 1).violations == 0);
  matmul_reference(ops, &c, 1, broken, ctx, tel);
  CHECK(check_matmul_bound(ops, declared, &c, 1).violations == 1);
}

TEST_CASE("exact reference: the gradient of a tiny model computed here by another route") {
  // mlp without hidden layers: logits_i = emb_i . head.w^T + head.b, emb_i the context's embeddings
  // side by side; loss = mean_i CE(softmax(logits_i), target_i). Its gradient, written out:
  //   dlogits_i = (softmax_i - onehot(target_i)) / B
  //   d head.b = sum_i dlogits_i,  d head.w[v][c] = sum_i dlogits_i[v] emb_i[c]
  //   d wte[tok_i,t][e] += sum_v dlogits_i[v] head.w[v][t*E + e]
  ModelConfig cfg;
  cfg.kind = "mlp", cfg.vocab = 7, cfg.context = 2, cfg.embed = 3, cfg.hidden_layers = 0;
  const size_t B = 4, V = 7, ctx = 2, E = 3, IN = ctx * E;
  auto model = make_model<float>(cfg, 42);
  model->sites.seed = 42;
  std::vector<int32_t> windows = {1, 2, 3, 0, 6, 5, 4, 4, 2, 2, 1, 0};
  Diagnostics diag(1, {}, cfg, 42);
  model->sites.begin_step(0);
  diag.begin_step(0, model->sites, model->elementwise);
  model->forward(windows.data(), B);
  model->backward();
  const auto line = diag.run(0, *model, model->grads.data(), 1.0, StepBatch{windows.data(), B});

  const float* wte = model->param("wte");
  const float* hw = model->param("head.w");
  const float* hb = model->param("head.b");
  std::vector<double> ref(model->table.total, 0.0);
  double* dwte = ref.data() + model->table.find("wte")->offset;
  double* dhw = ref.data() + model->table.find("head.w")->offset;
  double* dhb = ref.data() + model->table.find("head.b")->offset;
  for (size_t i = 0; i < B; ++i) {
    std::vector<double> emb(IN), logit(V);
    for (size_t t = 0; t < ctx; ++t)
      for (size_t e = 0; e < E; ++e) emb[t * E + e] = wte[windows[i * (ctx + 1) + t] * E + e];
    double mx = -1e300;
    for (size_t v = 0; v < V; ++v) {
      logit[v] = hb[v];
      for (size_t c = 0; c < IN; ++c) logit[v] += emb[c] * static_cast<double>(hw[v * IN + c]);
      mx = std::max(mx, logit[v]);
    }
    double z = 0;
    for (size_t v = 0; v < V; ++v) z += std::exp(logit[v] - mx);
    const int32_t target = windows[i * (ctx + 1) + ctx];
    for (size_t v = 0; v < V; ++v) {
      const double dl = (std::exp(logit[v] - mx) / z - (static_cast<int32_t>(v) == target ? 1.0 : 0.0)) / B;
      dhb[v] += dl;
      for (size_t c = 0; c < IN; ++c) {
        dhw[v * IN + c] += dl * emb[c];
        dwte[windows[i * (ctx + 1) + c / E] * E + c % E] += dl * static_cast<double>(hw[v * IN + c]);
      }
    }
  }
  const std::vector<double>& exact = diag.exact_grad();
  REQUIRE(exact.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) CHECK(exact[i] == doctest::Approx(ref[i]).epsilon(1e-12).scale(1e-12));
  // The fp32 run is close to it, replays bit for bit, and its bounds hold.
  CHECK(line["replay_identical"] == true);
  CHECK(line["bound_violations"] == 0);
  CHECK(line["bound_checked"].get<uint64_t>() > 0);
  CHECK(line["grad"]["overall"]["cosine"].get<double>() > 0.999999);
  CHECK(std::fabs(line["grad"]["overall"]["bias"].get<double>()) < 1e-5);
  CHECK(line["logits_max_rel_dev"].get<double>() < 1e-4);
  // Per-site forward deviation: with head.b = 0 (its initial value) the logits are head.forward's
  // product itself, so the site's deviation is the logits' one exactly (a misaligned capture would
  // compare other elements); backward sites report none.
  for (size_t v = 0; v < V; ++v) REQUIRE(hb[v] == 0.0f);
  CHECK(line["sites"]["head.forward"]["out_max_rel_dev"].get<double>() == line["logits_max_rel_dev"].get<double>());
  CHECK(line["sites"]["head.grad_weight"]["out_max_rel_dev"].is_null());
  CHECK(line["sites"]["head.grad_weight"]["out_rel_error"].is_null());
  // Its normwise error, recomputed here from the logits (= the products) and the fp64 ones
  // (ordinary fp32 rounding: of the order of 2^-24).
  const std::vector<float>& y = model->last_logits();
  double err = 0, size = 0;
  for (size_t i = 0; i < B; ++i)
    for (size_t v = 0; v < V; ++v) {
      double p = 0;  // the exact product: 6 float products, each exact in double, summed in double
      for (size_t c = 0; c < IN; ++c)
        p += static_cast<double>(wte[windows[i * (ctx + 1) + c / E] * E + c % E]) * static_cast<double>(hw[v * IN + c]);
      err += (y[i * V + v] - p) * (y[i * V + v] - p);
      size += p * p;
    }
  const double out_rel = line["sites"]["head.forward"]["out_rel_error"].get<double>();
  CHECK(out_rel == doctest::Approx(std::sqrt(err / size)).epsilon(1e-6));
  CHECK(out_rel > 0);
  CHECK(out_rel < 1e-6);
  // The reported overall quality is grad_quality against this test's reference.
  const GradQuality q = grad_quality(model->grads.data(), ref.data(), ref.size());
  CHECK(line["grad"]["overall"]["rel_error"].get<double>() == doctest::Approx(q.rel_error).epsilon(1e-6));
}

TEST_CASE("probes: another policy's gradient, the run untouched") {
  ModelConfig cfg;
  cfg.kind = "mlp", cfg.vocab = 16, cfg.context = 3, cfg.embed = 4, cfg.hidden = 32, cfg.hidden_layers = 1;
  const size_t B = 8;
  auto model = make_model<float>(cfg, 7);
  model->sites.seed = 7;
  for (auto& s : model->sites.sites()) s.policy = *find_matmul_preset("mxfp4");
  std::vector<int32_t> windows(B * (cfg.context + 1));
  for (size_t i = 0; i < windows.size(); ++i) windows[i] = static_cast<int32_t>((i * 7 + 3) % 16);
  const auto probes = parse_probes(nlohmann::json::array({"fp32", nlohmann::json::array({{{"preset", "bf16"}}})}),
                                   "diagnostics.probes");
  Diagnostics diag(1, probes, cfg, 7);
  model->sites.begin_step(3);
  diag.begin_step(3, model->sites, model->elementwise);
  model->forward(windows.data(), B);
  model->backward();
  const std::vector<float> params = model->params, grads = model->grads;
  const auto line = diag.run(3, *model, model->grads.data(), 1.0, StepBatch{windows.data(), B});
  CHECK(model->params == params);
  CHECK(model->grads == grads);
  CHECK(line["replay_identical"] == true);
  CHECK(line["bound_violations"] == 0);
  REQUIRE(line["probes"].size() == 2);
  CHECK(line["probes"][0]["name"] == "fp32");
  CHECK(line["probes"][1]["name"] == "probe1");
  const double run_cos = line["grad"]["overall"]["cosine"].get<double>();
  const double fp32_cos = line["probes"][0]["grad"]["overall"]["cosine"].get<double>();
  const double bf16_cos = line["probes"][1]["grad"]["overall"]["cosine"].get<double>();
  CHECK(fp32_cos > 0.999999);
  CHECK(bf16_cos < fp32_cos);
  CHECK(run_cos < bf16_cos);  // MXFP4 is far coarser than bf16
  // MXFP4 casts lose magnitude and the site's cast error says so; its products stray from fp64.
  CHECK(line["sites"]["hidden0.forward"]["a_cast"]["rel_error"].get<double>() > 0.01);
  CHECK(line["sites"]["hidden0.forward"]["out_max_rel_dev"].get<double>() > 1e-3);
  // The numbers of the line against an independent computation: the cosine and relative error of
  // the run's gradient and of a bf16 gradient computed here (another model, the same weights and
  // batch, every site bf16), against the exact gradient, with plain sums in long double.
  const std::vector<double>& exact = diag.exact_grad();
  REQUIRE(exact.size() == grads.size());
  auto cosine_and_error = [&](const std::vector<float>& g) {
    long double gg = 0, rr = 0, gr = 0, ee = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const long double x = g[i], r = exact[i];
      gg += x * x, rr += r * r, gr += x * r, ee += (x - r) * (x - r);
    }
    return std::pair{static_cast<double>(gr / std::sqrt(gg * rr)), static_cast<double>(std::sqrt(ee / rr))};
  };
  const auto [cos_run, err_run] = cosine_and_error(grads);
  CHECK(run_cos == doctest::Approx(cos_run).epsilon(1e-12));
  CHECK(line["grad"]["overall"]["rel_error"].get<double>() == doctest::Approx(err_run).epsilon(1e-12));
  auto bf16 = make_model<float>(cfg, 7);
  bf16->sites.seed = 7;
  for (auto& s : bf16->sites.sites()) s.policy = *find_matmul_preset("bf16");
  bf16->params = params;
  bf16->sites.begin_step(3);
  bf16->forward(windows.data(), B);
  bf16->backward();
  const auto [cos_bf16, err_bf16] = cosine_and_error(bf16->grads);
  CHECK(bf16_cos == doctest::Approx(cos_bf16).epsilon(1e-12));
  CHECK(line["probes"][1]["grad"]["overall"]["rel_error"].get<double>() == doctest::Approx(err_bf16).epsilon(1e-12));
}

TEST_CASE("proxy model: the exact reference draws the float run's batch in fp64") {
  ModelConfig cfg;
  cfg.kind = "proxy", cfg.input_dim = 6, cfg.output_dim = 3, cfg.d_model = 8, cfg.layers = 1, cfg.mlp_mult = 2;
  const StepBatch batch{nullptr, 16, 10, 2};  // (stream, draw) = (10, 2): the trainer's key of step 2
  auto exact_line = [&](const char* preset, Model<float>& model, Diagnostics& diag) {
    model.sites.seed = 5;
    for (auto& s : model.sites.sites()) s.policy = *find_matmul_preset(preset);
    model.sites.begin_step(2);
    diag.begin_step(2, model.sites, model.elementwise);
    model.forward_generated(batch.stream, batch.draw, batch.size);
    model.backward();
    return diag.run(2, model, model.grads.data(), 1.0, batch);
  };
  auto model = make_model<float>(cfg, 5);
  Diagnostics diag(1, {}, cfg, 5);
  const auto line = exact_line("fp32", *model, diag);
  CHECK(line["replay_identical"] == true);
  CHECK(line["bound_violations"] == 0);
  CHECK(line["grad"]["overall"]["cosine"].get<double>() > 0.999999);
  CHECK(line["exact_loss"].get<double>() == doctest::Approx(line["loss"].get<double>()).epsilon(1e-5));
  CHECK(line["logits_max_rel_dev"].get<double>() < 1e-3);  // the predictions stand in for logits

  // The reference is an fp64 proxy with float_data at the run's weights: the same gradient, bit for
  // bit. Without float_data the batch (inputs and teacher targets kept in double) is another one, so
  // the flag is what makes the reference the gradient of the float run's batch.
  auto reference = [&](bool float_data) {
    auto m = make_model<double>(cfg, 5);
    m->float_data = float_data;
    for (auto& s : m->sites.sites()) s.policy = exact_fp64_policy();
    std::copy(model->params.begin(), model->params.end(), m->params.begin());
    const double loss = m->forward_generated(batch.stream, batch.draw, batch.size);
    m->backward();
    return std::pair{loss, m->grads};
  };
  const auto [loss_f, grads_f] = reference(true);
  const auto [loss_d, grads_d] = reference(false);
  CHECK(line["exact_loss"].get<double>() == loss_f);
  CHECK(diag.exact_grad() == grads_f);
  CHECK(loss_d != loss_f);
  CHECK(grads_d != grads_f);

  // An MXFP4 run of the same step: the diagnostics see its gradient degrade.
  auto coarse = make_model<float>(cfg, 5);
  Diagnostics diag4(1, {}, cfg, 5);
  const auto line4 = exact_line("mxfp4", *coarse, diag4);
  CHECK(line4["replay_identical"] == true);
  CHECK(line4["grad"]["overall"]["cosine"].get<double>() < 0.9999);
  CHECK(diag4.exact_grad() == grads_f);  // same weights and batch, same exact gradient
}

TEST_CASE("probes: bad entries are config errors naming the entry") {
  try {
    parse_probes(nlohmann::json::array({"fp32", "no_such"}), "diagnostics.probes");
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("diagnostics.probes[1]") != std::string::npos);
    CHECK(std::string(e.what()).find("no_such") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_probes(nlohmann::json::array({42}), "diagnostics.probes"), ConfigError);
  CHECK_THROWS_AS(parse_probes(nlohmann::json("fp32"), "diagnostics.probes"), ConfigError);
}

TEST_CASE("diagnostics config: defaults, bad values name the key, the resolved config reads back") {
  const RunConfig def = parse_run_config(nlohmann::json::object());
  CHECK(def.diagnostics.every == 0);
  CHECK(def.diagnostics.probes.empty());
  auto error_path = [](const nlohmann::json& j) {
    try {
      parse_run_config(j);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_path({{"diagnostics", {{"every", -1}}}}).find("diagnostics.every") != std::string::npos);
  CHECK(error_path({{"diagnostics", {{"bogus", 1}}}}).find("diagnostics.bogus") != std::string::npos);
  CHECK(error_path({{"diagnostics", {{"probes", {"bf16", "nope"}}}}}).find("diagnostics.probes[1]") !=
        std::string::npos);
  const nlohmann::json j = {{"diagnostics", {{"every", 25}, {"probes", {"fp32", {{{"preset", "bf16"}}}}}}}};
  const RunConfig c = parse_run_config(j);
  CHECK(c.diagnostics.every == 25);
  nlohmann::json back = nlohmann::json::parse(resolved_config_json(c).dump());
  back.erase("version");
  const RunConfig c2 = parse_run_config(back);
  CHECK(c2.diagnostics.every == 25);
  CHECK(c2.diagnostics.probes == c.diagnostics.probes);
}

}  // namespace test_diag
