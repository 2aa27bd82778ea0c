// The engine's float entry (MatViewF operands, float C) against its double entry: the same C (each
// float element is (float) of the double element) and the same telemetry, bit for bit and count for
// count, over shapes, layouts, policies of every scaling kind and inputs with NaN, inf, subnormals
// and zeros. The double entry is the engine the rest of the suite checks against the literal
// reference and the exact oracle; the float entry must add nothing of its own. Also: the sparse
// scale-exponent histogram against hand counts, the float quantizer against the double one, and
// the model's matmul sites with the float entry against the double staging route.
#include <doctest/doctest.h>
#include <hwy/targets.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "arith/cast_span.h"
#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/random.h"
#include "arith/tc_presets.h"
#include "backend/cpu_backend.h"
#include "model/sites.h"
#include "quant_check.h"
#include "scaled_policy.h"
#include "staged_cpu_backend.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_matmul_float_entry {

using namespace drift;
using namespace drift::testing;

namespace {

Format fmt(const char* name) { return *find_format(name); }

// Floats of realistic spread; with `extremes`, also +-0, NaN, +-inf, float subnormals, huge values.
std::vector<float> random_floats(size_t n, uint64_t seed, bool extremes) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 3, 2 * i), r1 = random_u32(seed, 3, 2 * i + 1);
    double x = (static_cast<double>(r0) / 4294967296.0 - 0.5) * 4.0;
    x = std::ldexp(x, static_cast<int>(r1 % 13) - 6);
    float f = static_cast<float>(x);
    if (extremes) {
      switch (r1 >> 27) {
        case 0: f = 0.0f; break;
        case 1: f = -0.0f; break;
        case 2: f = std::numeric_limits<float>::quiet_NaN(); break;
        case 3: f = (r0 & 1) ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity(); break;
        case 4: f = static_cast<float>(std::ldexp(x, -135)); break;  // a float subnormal
        case 5: f = static_cast<float>(std::ldexp(x, 100)); break;
        case 6: f = static_cast<float>(std::ldexp(x, -100)); break;
        default: break;
      }
    }
    v[i] = f;
  }
  return v;
}

// Subnormal-heavy floats (every value below fp32's smallest normal, some zeros): flush modes decide.
std::vector<float> subnormal_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r = random_u32(seed, 4, i);
    const float mag = std::ldexp(static_cast<float>(r & 0xffff), -149 + static_cast<int>((r >> 16) % 8));
    v[i] = (r >> 31) ? -mag : mag;
  }
  return v;
}

void check_same_telemetry(const MatmulTelemetry& f, const MatmulTelemetry& d) {
  check_same_stats(f.a, d.a);
  check_same_stats(f.b, d.b);
  CHECK(f.fast_path == d.fast_path);
  CHECK(f.swamping_counted == d.swamping_counted);
  CHECK(f.inner_adds == d.inner_adds);
  CHECK(f.inner_swamped == d.inner_swamped);
  CHECK(f.outer_adds == d.outer_adds);
  CHECK(f.outer_swamped == d.outer_swamped);
  CHECK(f.a_cast.elements == d.a_cast.elements);
  CHECK(same_bits(f.a_cast.err_sq, d.a_cast.err_sq));
  CHECK(f.b_cast.shrank == d.b_cast.shrank);
  CHECK(f.bound.checked == d.bound.checked);
  CHECK(f.bound.violations == d.bound.violations);
  CHECK(same_bits(f.bound.max_ratio, d.bound.max_ratio));
}

struct Shape {
  size_t m, k, n;
};

// One call through each entry on the same values (a, b stored as the views say); the delayed
// states are copies, so both entries start from the same history.
void check_entries_agree(const MatmulPolicy& p, const Shape& s, const std::vector<float>& a,
                         const std::vector<float>& b, bool ta, bool tb, MatmulContext ctx, DelayedState* da,
                         DelayedState* db) {
  const std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  const size_t lda = ta ? s.m : s.k, ldb = tb ? s.k : s.n;
  DelayedState fa, fb;
  if (da) fa = *da, fb = *db;
  MatmulContext fctx = ctx;
  if (da) fctx.delayed_a = &fa, fctx.delayed_b = &fb, ctx.delayed_a = da, ctx.delayed_b = db;
  // C with a row stride wider than N: the float entry must write only the M x N elements.
  const size_t ldc = s.n + 3;
  std::vector<double> cd(s.m * ldc, 7.0);
  std::vector<float> cf(s.m * ldc, 7.0f);
  const MatmulTelemetry td = matmul(MatView{ad.data(), s.m, s.k, lda, ta}, MatView{bd.data(), s.k, s.n, ldb, tb},
                                    cd.data(), ldc, p, ctx);
  const MatmulTelemetry tf = matmul(MatViewF{a.data(), s.m, s.k, lda, ta}, MatViewF{b.data(), s.k, s.n, ldb, tb},
                                    cf.data(), ldc, p, fctx);
  bool same_c = true;
  for (size_t i = 0; i < s.m; ++i)
    for (size_t j = 0; j < ldc; ++j) {
      const float want = j < s.n ? static_cast<float>(cd[i * ldc + j]) : 7.0f;
      const float got = cf[i * ldc + j];
      same_c = same_c && std::memcmp(&want, &got, sizeof want) == 0;
    }
  CHECK(same_c);
  check_same_telemetry(tf, td);
  if (da) {
    CHECK(same_bits(fa.scale, da->scale));
    CHECK(fa.history.size() == da->history.size());
    CHECK(same_bits(fb.scale, db->scale));
  }
}

struct Named {
  std::string name;
  MatmulPolicy p;
};

std::vector<Named> policies() {
  std::vector<Named> v;
  v.push_back({"fp32 passthrough", MatmulPolicy{}});
  {
    MatmulPolicy p;
    p.a.round.subnormals = p.b.round.subnormals = Subnormals::flush;
    v.push_back({"fp32 operands flushing subnormals", p});
  }
  {
    MatmulPolicy p;
    p.a.format = p.b.format = fmt("fp8_e4m3");
    v.push_back({"fp8_e4m3 unscaled", p});
  }
  v.push_back({"mxfp8_e4m3", scaled_policy("fp8_e4m3", ScaleKind::block, 32)});
  {
    MatmulPolicy p = scaled_policy("fp8_e5m2", ScaleKind::block, 32);
    p.a.scaling.rule = p.b.scaling.rule = ExpRule::rceil;
    p.b.scaling.two_d = true;
    p.out_format = fmt("bf16");
    v.push_back({"mxfp8_e5m2 rceil, 2-D b, bf16 out", p});
  }
  v.push_back({"mxfp4", scaled_policy("fp4_e2m1", ScaleKind::block, 32)});
  v.push_back({"nvfp4", scaled_policy("fp4_e2m1", ScaleKind::nvfp4, 16)});
  v.push_back({"tensor e4m3", scaled_policy("fp8_e4m3", ScaleKind::tensor, 0)});
  v.push_back({"tile e4m3", scaled_policy("fp8_e4m3", ScaleKind::tile, 128)});
  {
    MatmulPolicy p = scaled_policy("fp8_e4m3", ScaleKind::tile, 32);
    p.a.scaling.pow2 = p.b.scaling.pow2 = true;
    v.push_back({"tile e4m3 pow2, block 32", p});
  }
  {
    MatmulPolicy p = scaled_policy("fp4_e2m1", ScaleKind::block, 32);
    p.a.round.mode = Rounding::sr;
    p.a.scaling.hadamard = p.b.scaling.hadamard = 16;
    p.a.scaling.hadamard_seed = p.b.scaling.hadamard_seed = 5;
    v.push_back({"mxfp4, stochastic a, Hadamard 16", p});
  }
  {
    MatmulPolicy p;
    p.a.format = p.b.format = fmt("bf16");
    p.b.round.mode = Rounding::sr;
    p.b.round.sr_bits = 8;
    p.inner.promote_every = 16;
    v.push_back({"bf16, stochastic b, promote every 16", p});
  }
  {
    MatmulPolicy p;
    p.inner.format = fmt("bf16");
    v.push_back({"bf16 accumulation (narrow kernel)", p});
  }
  // One operand read in place (fp32, identity quantizer) beside a quantized one: the in-place route
  // (arith/matmul_in_place.h) must give what quantizing both gives.
  {
    MatmulPolicy p = scaled_policy("fp8_e4m3", ScaleKind::block, 32);
    p.a = MatmulPolicy().a;
    v.push_back({"fp32 a in place, mx-style fp8 b (block 32)", p});
  }
  {
    MatmulPolicy p = scaled_policy("fp8_e5m2", ScaleKind::tensor, 0);
    p.b = MatmulPolicy().b;
    p.b.round.mode = Rounding::sr;  // still the identity on fp32's grid
    v.push_back({"fp8 a tensor-scaled, fp32 b in place (sr: still the identity)", p});
  }
  {
    MatmulPolicy p;
    p.inner.format = fmt("bf16");
    p.a.round.mode = Rounding::rtz;
    v.push_back({"fp32 operands in place, bf16 accumulation (the fast path declines)", p});
  }
  {
    MatmulPolicy p;
    p.inner.format = fmt("fp16");
    p.inner.order = SumOrder::pairwise;
    v.push_back({"fp16 pairwise accumulation (reference)", p});
  }
  {
    MatmulPolicy p;
    p.a.format = p.b.format = fmt("fp16");
    p.out_format = fmt("fp64");
    p.out_round.mode = Rounding::sr;
    v.push_back({"fp16 operands, fp64 output (not a float)", p});
  }
  {
    MatmulPolicy p;
    p.a.format = p.b.format = fmt("fp8_e4m3");
    p.a.round.overflow = p.b.round.overflow = Overflow::ieee;
    p.inner.fused = find_tc_preset("h100_fp8")->model;
    v.push_back({"fp8 into the H100 fused model", p});
  }
  return v;
}

}  // namespace

TEST_CASE("float entry == double entry: C and telemetry, every scaling kind, layouts, extremes") {
  const Shape shapes[] = {{1, 1, 1}, {1, 40, 1}, {1, 70, 9}, {9, 70, 1}, {5, 33, 7}, {17, 96, 33}, {4, 0, 3}};
  for (const Named& np : policies()) {
    const std::string policy = np.name;
    CAPTURE(policy);
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Shape& s = shapes[si];
      for (int t = 0; t < 4; ++t) {
        for (int data = 0; data < 3; ++data) {
          CAPTURE(si);
          CAPTURE(t);
          CAPTURE(data);
          const uint64_t seed = 1000 * si + 10 * t + data;
          const auto a = data == 2 ? subnormal_floats(s.m * s.k, seed) : random_floats(s.m * s.k, seed, data == 1);
          const auto b = random_floats(s.k * s.n, seed + 7, data == 1);
          MatmulContext ctx;
          ctx.seed = seed;
          ctx.stream = 77 + seed;
          for (int variant = 0; variant < 3; ++variant) {
            ctx.count_swamping = variant == 1;
            ctx.force_reference = variant == 2;
            check_entries_agree(np.p, s, a, b, t & 1, t & 2, ctx, nullptr, nullptr);
          }
        }
      }
    }
  }
}

TEST_CASE("float entry == double entry on every SIMD target: in-place fp32 operands, packing, block amax") {
  // The float entry's own SIMD (the in-place scan, B's 4 x 4 transposing pack, the row block amax,
  // the kernel's ragged last strip) on each compiled target against the double entry's reference.
  const Shape shapes[] = {{5, 33, 7}, {17, 96, 33}, {6, 64, 36}, {13, 70, 65}};
  std::vector<Named> ps;
  ps.push_back({"fp32 passthrough", MatmulPolicy{}});
  ps.push_back({"mxfp8", scaled_policy("fp8_e4m3", ScaleKind::block, 32)});
  {
    MatmulPolicy p = scaled_policy("fp8_e4m3", ScaleKind::block, 32);
    p.a = MatmulPolicy().a;
    ps.push_back({"fp32 a in place, mx b", p});
  }
  // The fused kernel's SIMD packing of float operands (codes, B's transposition, plain or split by
  // sign) on each of its routes: the integer route with one accumulator (float lanes on AVX-512:
  // the H100 FP8 and A100 bf16 models) and with two (double lanes: B200 FP8, 32-term groups), and
  // bf16 under the H100 bf16 model kept to 30 bits, beyond the integer route (double lanes, B split).
  struct Fused {
    const char* preset;
    int kept_bits;  // 0: the preset's
  };
  for (const Fused& f : {Fused{"h100_fp8", 0}, Fused{"a100_bf16", 0}, Fused{"b200_fp8_e4m3", 0}, Fused{"h100_bf16", 30}}) {
    TcPreset tp = *find_tc_preset(f.preset);
    if (f.kept_bits) tp.model.kept_bits = f.kept_bits;
    MatmulPolicy p;
    p.a.format = p.b.format = tp.in_format;
    p.a.round.overflow = p.b.round.overflow = Overflow::ieee;
    p.inner.fused = tp.model;
    ps.push_back({std::string("the fused model ") + f.preset + (f.kept_bits ? ", 30 kept bits" : ""), p});
  }
  const std::vector<int64_t> targets = matmul_fast_targets();
  struct Reset {
    ~Reset() { hwy::SetSupportedTargetsForTest(0); }
  } reset;
  for (const Named& np : ps) {
    const std::string policy = np.name;
    CAPTURE(policy);
    for (const Shape& s : shapes) {
      for (int t = 0; t < 4; ++t) {
        for (int data = 0; data < 3; ++data) {
          CAPTURE(s.m);
          CAPTURE(s.k);
          CAPTURE(s.n);
          CAPTURE(t);
          CAPTURE(data);
          const uint64_t seed = 31 * s.k + 7 * t + data;
          const auto a = data == 2 ? subnormal_floats(s.m * s.k, seed) : random_floats(s.m * s.k, seed, data == 1);
          const auto b = random_floats(s.k * s.n, seed + 5, data == 1);
          for (int64_t target : targets) {
            hwy::SetSupportedTargetsForTest(target);
            CAPTURE(hwy::TargetName(target));
            check_entries_agree(np.p, s, a, b, t & 1, t & 2, MatmulContext{seed, 3}, nullptr, nullptr);
          }
          hwy::SetSupportedTargetsForTest(0);
        }
      }
    }
  }
}

TEST_CASE("float entry == double entry: delayed scaling over several calls") {
  MatmulPolicy p = scaled_policy("fp8_e4m3", ScaleKind::delayed, 0);
  p.b.format = fmt("fp8_e5m2");
  p.a.scaling.history = 3;
  const Shape s{6, 40, 5};
  DelayedState da, db;
  for (int call = 0; call < 6; ++call) {
    CAPTURE(call);
    // Magnitudes that grow and shrink, a call with a NaN (the history takes NaN), and one with inf.
    auto a = random_floats(s.m * s.k, 50 + call, false);
    auto b = random_floats(s.k * s.n, 60 + call, false);
    for (auto& x : a) x *= std::ldexp(1.0f, 3 * (call % 3));
    if (call == 3) a[4] = std::numeric_limits<float>::quiet_NaN();
    if (call == 4) b[2] = -std::numeric_limits<float>::infinity();
    MatmulContext ctx;
    ctx.seed = 3;
    ctx.stream = static_cast<uint64_t>(call);
    check_entries_agree(p, s, a, b, call & 1, false, ctx, &da, &db);
    // check_entries_agree advanced copies for the float entry and these states for the double one.
  }
}

TEST_CASE("float entry == double entry: diagnostics (cast error, error bound)") {
  const Shape s{7, 64, 9};
  for (const Named& np : policies()) {
    const std::string policy = np.name;
    CAPTURE(policy);
    const auto a = random_floats(s.m * s.k, 90, false), b = random_floats(s.k * s.n, 91, false);
    MatmulContext ctx;
    ctx.seed = 4;
    ctx.cast_error = ctx.check_bound = true;
    check_entries_agree(np.p, s, a, b, true, false, ctx, nullptr, nullptr);
  }
}

TEST_CASE("float entry: results do not depend on the number of threads, above the parallel thresholds") {
  // 130 x 600 x 120: 9.4M products and 78000 / 72000 operand elements, so the kernel, the
  // quantization of both operands and the staging transpose of B (stored K x N) run on a team when
  // there is more than one thread.
  const Shape s{130, 600, 120};
  const auto a = random_floats(s.m * s.k, 21, false), b = random_floats(s.k * s.n, 22, false);
  for (const Named& np : policies()) {
    const std::string policy = np.name;
    CAPTURE(policy);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> c(s.m * s.n);
      MatmulContext ctx;
      ctx.seed = 8;
      matmul(MatViewF{a.data(), s.m, s.k, s.k, false}, MatViewF{b.data(), s.k, s.n, s.n, false}, c.data(), s.n,
             np.p, ctx);
      results.push_back(c);
    }
    omp_set_num_threads(omp_get_num_procs());
    CHECK(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)) == 0);
    CHECK(std::memcmp(results[0].data(), results[2].data(), results[0].size() * sizeof(float)) == 0);
    // And the same as the double entry at the default thread count.
    check_entries_agree(np.p, s, a, b, false, false, MatmulContext{8, 0}, nullptr, nullptr);
  }
}

TEST_CASE("float quantizer == double quantizer: values, scales, stats (strided and transposed input)") {
  const size_t rows = 9, k = 70;
  for (const Named& np : policies()) {
    const std::string policy = np.name;
    CAPTURE(policy);
    if (np.p.a.scaling.kind == ScaleKind::delayed) continue;
    const auto x = random_floats(rows * k, 31, true);
    const std::vector<double> xd(x.begin(), x.end());
    for (bool transposed : {false, true}) {
      CAPTURE(transposed);
      // Element (r, c): row-major with stride k, or stored k x rows (column of the k-axis).
      const StridedInputF xf = transposed ? StridedInputF{x.data(), 1, rows} : StridedInputF{x.data(), k, 1};
      const StridedInput xw = transposed ? StridedInput{xd.data(), 1, rows} : StridedInput{xd.data(), k, 1};
      QuantizedOperand qf, qd;
      quantize_into(qf, xf, rows, k, np.p.a, 5, 6);
      quantize_into(qd, xw, rows, k, np.p.a, 5, 6);
      CHECK(!qd.in_float);
      CHECK(qf.in_float == fits_float(np.p.a.format));
      bool same = true;
      for (size_t i = 0; i < rows * k; ++i) same = same && same_bits(qf.value(i), qd.value(i));
      CHECK(same);
      CHECK(qf.block_k == qd.block_k);
      CHECK(qf.block_scale.size() == qd.block_scale.size());
      for (size_t i = 0; i < qd.block_scale.size(); ++i) CHECK(same_bits(qf.block_scale[i], qd.block_scale[i]));
      CHECK(same_bits(qf.tensor_scale, qd.tensor_scale));
      check_same_stats(qf.stats, qd.stats);
      qf.widen();
      CHECK(!qf.in_float);
      CHECK(qf.q.size() == rows * k);
      same = true;
      for (size_t i = 0; i < rows * k; ++i) same = same && same_bits(qf.q[i], qd.q[i]);
      CHECK(same);
    }
  }
}

TEST_CASE("hand-derived: the scale-exponent histogram keeps counts over the exponents seen") {
  ScaleExpHistogram h;
  CHECK(h.count(0) == 0);
  h.add(-3);
  h.add(-3);
  h.add(2);  // grows upward: [-3, 2]
  ScaleExpHistogram g;
  g.add(-10);  // below h's range
  g.add(2);
  g.add(5);  // above it
  h.merge(g);
  // -10: 1, -3: 2, 2: 1 + 1, 5: 1; everything else 0.
  CHECK(h.count(-10) == 1);
  CHECK(h.count(-3) == 2);
  CHECK(h.count(2) == 2);
  CHECK(h.count(5) == 1);
  CHECK(h.count(-4) == 0);
  CHECK(h.count(6) == 0);
  CHECK(h.count(-11) == 0);
  std::vector<std::pair<int, uint64_t>> seen;
  h.for_each([&](int e, uint64_t n) { seen.emplace_back(e, n); });
  const std::vector<std::pair<int, uint64_t>> want{{-10, 1}, {-3, 2}, {2, 2}, {5, 1}};
  CHECK(seen == want);
  // Merging an empty histogram changes nothing; merging into an empty one copies.
  h.merge(ScaleExpHistogram{});
  ScaleExpHistogram e;
  e.merge(h);
  CHECK(e.count(-10) == 1);
  CHECK(e.count(2) == 2);
}

TEST_CASE("matmul sites: the CPU backend's float entry == double staging (layouts, accumulate, telemetry)") {
  // The CPU backend's float entry (every training matmul) against double staging through the
  // engine's double entry (the CUDA backend's route): both must write the same floats.
  CpuBackend cpu;
  test::StagedCpuBackend staged;
  struct Call {
    size_t m, k, n;
    bool ta, tb, tc;
    WriteC how;
  };
  const Call calls[] = {{8, 40, 6, false, true, false, WriteC::store},   {6, 8, 40, false, false, false, WriteC::add},
                        {40, 8, 6, true, false, true, WriteC::add},      {1, 64, 1, true, true, false, WriteC::store},
                        {5, 32, 1, false, false, true, WriteC::store},   {7, 24, 9, false, true, false, WriteC::add_to_zero},
                        {30, 8, 12, true, false, true, WriteC::add_to_zero}};
  for (const Named& np : policies()) {
    const std::string policy = np.name;
    CAPTURE(policy);
    MatmulSites via_float, via_double;
    for (MatmulSites* s : {&via_float, &via_double}) {
      s->add("layer", Role::forward, TensorClass::activation, TensorClass::weight);
      s->sites()[0].policy = np.p;
      s->seed = 12;
      s->begin_step(3);
    }
    via_float.backend = &cpu;
    via_double.backend = &staged;
    for (size_t ci = 0; ci < std::size(calls); ++ci) {
      CAPTURE(ci);
      const Call& c = calls[ci];
      const auto a = random_floats(c.m * c.k, 40 + ci, ci == 2), b = random_floats(c.k * c.n, 50 + ci, false);
      const size_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = (c.tc ? c.m : c.n) + 1;
      const size_t crows = c.tc ? c.n : c.m;
      std::vector<float> cf = random_floats(crows * ldc, 60 + ci, false), cd = cf;
      via_float.matmul<float>(0, c.m, c.k, c.n, a.data(), lda, c.ta, b.data(), ldb, c.tb, cf.data(), ldc, c.tc, c.how);
      via_double.matmul<float>(0, c.m, c.k, c.n, a.data(), lda, c.ta, b.data(), ldb, c.tb, cd.data(), ldc, c.tc, c.how);
      CHECK(std::memcmp(cf.data(), cd.data(), cf.size() * sizeof(float)) == 0);
    }
    CHECK(via_float.sites()[0].calls == via_double.sites()[0].calls);
    check_same_telemetry(via_float.sites()[0].tel, via_double.sites()[0].tel);
  }
}

TEST_CASE("matmul sites: a product computed as Cᵀ = Bᵀ·Aᵀ has the bits and telemetry of the named one") {
  // Two registries on the same seed and step, one made to keep every product as the caller named it:
  // each call whose trade moves fewer elements (dW = Xᵀ·dY's layout and its mirror, with and
  // without accumulation; a forward product of a small batch with a wide weight, written and added)
  // must write the same floats and report the same telemetry whichever orientation ran. Every policy
  // without position-drawn randomness trades; one with stochastic rounding anywhere keeps its
  // orientation. A delayed-scaling policy's states must end where the named product leaves them.
  struct Call {
    size_t m, k, n;
    bool ta, tb, tc;
    WriteC how;
  };
  const Call calls[] = {{160, 24, 130, true, false, true, WriteC::add},           // dW of a layer 160 wide in, 130 out
                        {150, 20, 120, true, false, true, WriteC::store},         // the same written, not added
                        {170, 18, 100, true, false, true, WriteC::add_to_zero},   // the same onto zero
                        {130, 16, 140, false, true, true, WriteC::add},           // A row-major, B stored N x K
                        {40, 300, 420, false, true, false, WriteC::store},        // Y = X·Wᵀ, batch 40, W 420 x 300
                        {48, 200, 400, false, true, false, WriteC::add}};         // the same added into C
  std::vector<Named> named = policies();
  named.push_back({"delayed e4m3", scaled_policy("fp8_e4m3", ScaleKind::delayed, 0)});
  {
    MatmulPolicy p;
    p.out_format = fmt("bf16");
    p.out_round.mode = Rounding::sr;
    named.push_back({"fp32, stochastic bf16 output", p});
  }
  {
    MatmulPolicy p;
    p.inner.format = fmt("bf16");
    p.inner.round.mode = Rounding::sr;
    named.push_back({"stochastic bf16 accumulation", p});
  }
  {
    MatmulPolicy p;
    p.a.format = p.b.format = fmt("bf16");
    p.inner.fused = find_tc_preset("h100_bf16")->model;
    named.push_back({"bf16 into the H100 fused model", p});
  }
  for (const Named& np : named) {
    const std::string policy = np.name;
    CAPTURE(policy);
    const MatmulPolicy& p = np.p;
    auto sr = [](const RoundSpec& r) { return r.mode == Rounding::sr; };
    const bool random = sr(p.a.round) || sr(p.b.round) || (p.product_format && sr(p.product_round)) ||
                        sr(p.inner.round) || sr(p.outer.round) || sr(p.out_round);
    MatmulSites traded, named_way;
    named_way.keep_orientation = true;
    for (MatmulSites* s : {&traded, &named_way}) {
      s->add("layer", Role::grad_weight, TensorClass::activation, TensorClass::gradient);
      s->sites()[0].policy = p;
      s->seed = 21;
      s->begin_step(4);
    }
    for (size_t ci = 0; ci < std::size(calls); ++ci) {
      CAPTURE(ci);
      const Call& c = calls[ci];
      const auto a = random_floats(c.m * c.k, 80 + ci, false), b = random_floats(c.k * c.n, 90 + ci, false);
      const size_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = (c.tc ? c.m : c.n) + 3;
      std::vector<float> ct = random_floats((c.tc ? c.n : c.m) * ldc, 100 + ci, false), cn = ct;
      traded.matmul<float>(0, c.m, c.k, c.n, a.data(), lda, c.ta, b.data(), ldb, c.tb, ct.data(), ldc, c.tc, c.how);
      named_way.matmul<float>(0, c.m, c.k, c.n, a.data(), lda, c.ta, b.data(), ldb, c.tb, cn.data(), ldc, c.tc,
                              c.how);
      CHECK(std::memcmp(ct.data(), cn.data(), ct.size() * sizeof(float)) == 0);
    }
    const MatmulSite &st = traded.sites()[0], &sn = named_way.sites()[0];
    CHECK(sn.traded_calls == 0);
    CHECK(st.traded_calls == (random ? 0u : std::size(calls)));
    check_same_telemetry(st.tel, sn.tel);
    CHECK(same_bits(st.delayed_a.scale, sn.delayed_a.scale));
    CHECK(same_bits(st.delayed_b.scale, sn.delayed_b.scale));
    CHECK(st.delayed_a.history == sn.delayed_a.history);
    CHECK(st.delayed_b.history == sn.delayed_b.history);
  }
}

TEST_CASE("matmul sites: a product written onto zero has the bits of one added into +0, whatever C held") {
  // WriteC::add_to_zero (a weight gradient's one product) must give c = +0 + product, as WriteC::add
  // gives into a C cleared to +0, without reading C: from a C full of NaNs, infinities and -0, in
  // every layout (row-major and transposed C, traded or not) and under every policy. The columns past
  // N (ldc is wider) must keep what they held. Under a bf16 output the product itself holds a -0:
  // C[0][0] is the fp32 sum -2^-140, below half of bf16's smallest subnormal (2^-133), so it rounds
  // to -0 (the store shows it), and the add into +0 gives +0. C[1][0] sums only -0 products (row 1
  // of A is -0 throughout, column 0 of B non-negative): a sum begun at +0 is +0 under every policy,
  // which is what lets the fast kernels' direct write skip the +0 pass (no_negative_zero).
  struct Call {
    size_t m, k, n;
    bool ta, tb, tc;
  };
  const Call calls[] = {{9, 33, 7, false, false, false},      {12, 16, 20, true, false, true},
                        {160, 24, 130, true, false, true},   // dW, traded (moves fewer elements)
                        {40, 300, 420, false, true, false},  // Y = X·Wᵀ, traded
                        {5, 8, 3, false, true, true}};
  std::vector<Named> named = policies();
  {
    MatmulPolicy p;
    p.out_format = fmt("bf16");
    named.push_back({"fp32, bf16 output", p});
  }
  const float tiny = std::ldexp(1.0f, -70);
  for (const Named& np : named) {
    const std::string policy = np.name;
    CAPTURE(policy);
    const bool bf16_out = policy == "fp32, bf16 output";
    MatmulSites onto, added, stored;
    for (MatmulSites* s : {&onto, &added, &stored}) {
      s->add("layer", Role::grad_weight, TensorClass::activation, TensorClass::gradient);
      s->sites()[0].policy = np.p;
      s->seed = 33;
      s->begin_step(5);
    }
    for (size_t ci = 0; ci < std::size(calls); ++ci) {
      CAPTURE(ci);
      const Call& c = calls[ci];
      auto a = random_floats(c.m * c.k, 110 + ci, false), b = random_floats(c.k * c.n, 120 + ci, false);
      const size_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = (c.tc ? c.m : c.n) + 2;
      // Row 0 of A: -2^-70, then zeros; row 1: -0; column 0 of B: 2^-70, then zeros. C[0][0] = -2^-140.
      for (size_t t = 0; t < c.k; ++t) {
        a[c.ta ? t * lda : t] = t ? 0.0f : -tiny;
        a[c.ta ? t * lda + 1 : lda + t] = -0.0f;
        b[c.tb ? t : t * ldb] = t ? 0.0f : tiny;
      }
      const size_t crows = c.tc ? c.n : c.m, ccols = c.tc ? c.m : c.n;
      std::vector<float> c_onto = random_floats(crows * ldc, 130 + ci, true), c_added = c_onto, c_stored = c_onto;
      for (size_t r = 0; r < crows; ++r)
        for (size_t j = 0; j < ccols; ++j) c_added[r * ldc + j] = 0.0f;
      onto.matmul<float>(0, c.m, c.k, c.n, a.data(), lda, c.ta, b.data(), ldb, c.tb, c_onto.data(), ldc, c.tc,
                         WriteC::add_to_zero);
      added.matmul<float>(0, c.m, c.k, c.n, a.data(), lda, c.ta, b.data(), ldb, c.tb, c_added.data(), ldc, c.tc,
                          WriteC::add);
      stored.matmul<float>(0, c.m, c.k, c.n, a.data(), lda, c.ta, b.data(), ldb, c.tb, c_stored.data(), ldc, c.tc,
                           WriteC::store);
      CHECK(std::memcmp(c_onto.data(), c_added.data(), c_onto.size() * sizeof(float)) == 0);
      CHECK(same_bits(c_stored[c.tc ? 1 : ldc], 0.0f));
      if (bf16_out) {
        CHECK(same_bits(c_stored[0], -0.0f));
        CHECK(same_bits(c_onto[0], 0.0f));
      }
    }
    check_same_telemetry(onto.sites()[0].tel, added.sites()[0].tel);
    CHECK(onto.sites()[0].traded_calls == added.sites()[0].traded_calls);
  }
}

TEST_CASE("hand-derived: fp32 operands keeping subnormals are copied, and only subnormals counted") {
  // Row 0: 1.5, 2^-130 (a float subnormal), -0, -3: every value is on fp32's grid, so the cast keeps
  // each bit; one subnormal, amax 3, nothing flushed. Row 1 holds an inf, which the quantizer's
  // default saturating overflow turns into the largest float (clipped), and a NaN (stays NaN).
  const float sub = std::ldexp(1.0f, -130);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x{1.5f, sub, -0.0f, -3.0f, 2.0f, inf, nan, 0.25f};
  Quantizer qz;
  qz.format = fmt("fp32");
  QuantizedOperand q;
  quantize_into(q, StridedInputF{x.data(), 4, 1}, 2, 4, qz, 1, 2);
  REQUIRE(q.in_float);
  CHECK(std::memcmp(q.qf.data(), x.data(), 5 * sizeof(float)) == 0);  // -0 keeps its sign
  CHECK(q.qf[5] == std::numeric_limits<float>::max());
  CHECK(std::isnan(q.qf[6]));
  CHECK(q.qf[7] == 0.25f);
  CHECK(q.stats.elements == 8);
  CHECK(q.stats.subnormal == 1);
  CHECK(q.stats.nonfinite == 2);
  CHECK(q.stats.clipped == 1);
  CHECK(q.stats.amax == 3.0);
  CHECK(q.stats.flushed == 0);
  // Flushing subnormals: 2^-130 becomes +0 and counts as flushed, not subnormal.
  qz.round.subnormals = Subnormals::flush;
  quantize_into(q, StridedInputF{x.data(), 4, 1}, 2, 4, qz, 1, 2);
  CHECK(q.qf[1] == 0.0f);
  CHECK(!std::signbit(q.qf[1]));
  CHECK(q.stats.subnormal == 0);
  CHECK(q.stats.flushed == 1);
}

}  // namespace test_matmul_float_entry
