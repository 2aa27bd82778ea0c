// The Blackwell block-scaled MMA hypotheses (policy/presets.cpp: b200_mxfp8_*_blocksum,
// b200_nvfp4_blocksum): what each encodes, on hand-derived cases and on exactness arguments.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "arith/matmul.h"
#include "arith/random.h"
#include "arith/tc_presets.h"
#include "hwy/targets.h"
#include "policy/presets.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_blackwell_presets {

using namespace drift;
using drift::testing::same_bits;

namespace {

MatmulPolicy preset(const char* name) {
  auto p = find_matmul_preset(name);
  REQUIRE_MESSAGE(p.has_value(), name);
  return *p;
}

// C = A (1 x k) * B (k x 1) under `policy`, through the engine's default route.
double dot(const MatmulPolicy& policy, const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  const size_t k = a.size();
  const MatView av{a.data(), 1, k, k, false}, bv{b.data(), k, 1, 1, false};
  double c = 0;
  matmul(av, bv, &c, 1, policy, MatmulContext{});
  return c;
}

double p2(int e) { return pow2(e); }

}  // namespace

TEST_CASE("blackwell hypotheses: an MXFP8 block's fused partial sum is truncated to fp32 before it is scaled") {
  // Block 0: 1*1 + 2^-12*2^-12 + 2^-12*2^-12 = 1 + 2^-23 exactly (an fp32 number). The MX floor rule
  // gives both operands' block the scale 2^(0 - 8) (amax 1, E4M3 emax 8): elements 256 and 2^-4, on the
  // E4M3 grid, so quantization is exact. The fused group (E = 16 for 256*256, 25 bits kept: cut at
  // 2^-9, the products 2^-8 survive) keeps 1 + 2^-23; plain fp32 sequential addition ties twice to even: 1.
  std::vector<double> a(32, 0.0), b(32, 0.0);
  a[0] = b[0] = 1;
  a[1] = b[1] = a[2] = b[2] = p2(-12);
  CHECK(dot(preset("b200_mxfp8_e4m3_blocksum"), a, b) == 1 + p2(-23));
  CHECK(dot(preset("mxfp8_e4m3"), a, b) == 1);
}

TEST_CASE("blackwell hypotheses: each scaled block joins the fp32 accumulator with one rounding to nearest") {
  // Block 0: 32*32 = 1024. Block 1: 3*2^-9 * 2^-6 = 3*2^-15 (elements 384 and 256 under scales 2^-16 and
  // 2^-14, exact). 1024 + 3*2^-15 lies above the midpoint 1024 + 2^-14 between fp32 neighbours: the
  // accumulator rounds up to 1024 + 2^-13. (A truncating accumulator, as B200TC.m's c-in-group cut,
  // would give 1024.)
  std::vector<double> a(64, 0.0), b(64, 0.0);
  a[0] = b[0] = 32;
  a[32] = 3 * p2(-9);
  b[32] = p2(-6);
  CHECK(dot(preset("b200_mxfp8_e4m3_blocksum"), a, b) == 1024 + p2(-13));
  // With unit block scales (amax in [256, 512): scale 2^0) the hypothesis is the measured unscaled B200
  // FP8 instruction chained over K: the same value as b200_fp8_e4m3 on the raw operands.
  // The other values: j * 2^e with |j| <= 7 and e in [-9, 3], on the E4M3 grid (3 significant bits,
  // steps of 2^-9 at the bottom) and below 256, so quantization leaves every value as it is.
  std::vector<double> x(64), y(64);
  for (size_t i = 0; i < 64; ++i) {
    const uint32_t r = random_u32(11, 0, i);
    const auto value = [](uint32_t j, uint32_t e) {
      return static_cast<double>(static_cast<int>(j % 15) - 7) * pow2(static_cast<int>(e % 13) - 9);
    };
    x[i] = (i % 32 == 0) ? 256 : value(r, r >> 8);
    y[i] = (i % 32 == 0) ? 288 : value(r >> 16, r >> 24);
  }
  const FusedModel m = find_tc_preset("b200_fp8_e4m3")->model;
  CHECK(dot(preset("b200_mxfp8_e4m3_blocksum"), x, y) == fused_dot(0.0, x.data(), y.data(), 64, m));
}

TEST_CASE("blackwell hypotheses: under blocksum, NVFP4 equals the plain nvfp4 model (E2M1 block sums are exact)") {
  // 16 products of E2M1 values (significands of 2 bits, exponents 0..2, subnormal 0.5) span at most
  // 2^-2..36 and add exactly within 25 kept bits: the fused group cuts nothing and its sum fits fp32.
  const size_t m = 5, k = 96, n = 7;
  std::vector<double> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = (static_cast<double>(random_u32(21, 1, i)) / 4294967296.0 - 0.5) * p2(static_cast<int>(i % 11) - 5);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = (static_cast<double>(random_u32(22, 1, i)) / 4294967296.0 - 0.5) * p2(static_cast<int>(i % 7) - 3);
  std::vector<double> c1(m * n), c2(m * n);
  const MatView av{a.data(), m, k, k, false}, bv{b.data(), k, n, n, false};
  matmul(av, bv, c1.data(), n, preset("b200_nvfp4_blocksum"), MatmulContext{});
  matmul(av, bv, c2.data(), n, preset("nvfp4"), MatmulContext{});
  CHECK(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(double)) == 0);
}

TEST_CASE("blackwell hypotheses: folded MXFP8 scales align the running sum with the scaled products") {
  // As above: 1024 from block 0, then 3*2^-15 from block 1. Folded, the second group holds c = 1024
  // (E = 10, cut at 2^-15: 3*2^-15 survives), and its exact sum 1024 + 3*2^-15 is truncated to fp32: 1024.
  std::vector<double> a(64, 0.0), b(64, 0.0);
  a[0] = b[0] = 32;
  a[32] = 3 * p2(-9);
  b[32] = p2(-6);
  CHECK(dot(preset("b200_mxfp8_e4m3_folded"), a, b) == 1024);
  CHECK(dot(preset("b200_mxfp8_e4m3_blocksum"), a, b) == 1024 + p2(-13));
}

TEST_CASE("blackwell hypotheses: folded NVFP4 scales truncate a small-scale block against a large one") {
  // K = 64, one instruction. a: 2688, 2688 at k = 0, 1 and 6*2^-9 at k = 16; b: 2688, -2688, 6*2^-9. Both
  // tensors' amax is 2688 = 6 * 448, so the NVFP4 tensor scale is 1; block 0's E4M3 scale is 448 (elements
  // 6, -6), block 1's is 2^-9 (element 6): everything exact. Products: +7225344, -7225344 and 36*2^-18.
  // blocksum: block 0 sums to 0, block 1 to 36 (elements) times 2^-18: 9*2^-16, as plain nvfp4.
  // folded: one group of 64 scaled products, E = 11 + 11 (2688 = 1.3125*2^11), cut at 2^-3: 36*2^-18 is
  // cut to 0 and the big pair cancels: +0.
  std::vector<double> a(64, 0.0), b(64, 0.0);
  a[0] = a[1] = 2688;
  b[0] = 2688;
  b[1] = -2688;
  a[16] = b[16] = 6 * p2(-9);
  CHECK(dot(preset("b200_nvfp4_blocksum"), a, b) == 9 * p2(-16));
  CHECK(dot(preset("nvfp4"), a, b) == 9 * p2(-16));
  const double folded = dot(preset("b200_nvfp4_folded"), a, b);
  CHECK(folded == 0);
  CHECK(!sign_bit(folded));
}

TEST_CASE("blackwell hypotheses: folded scales are the unscaled chain when every block scale is 1") {
  // With unit scales (each block's amax in [256, 448]) folding changes no value: b200_mxfp8_e4m3_folded is
  // b200_fp8_e4m3's groups with c aligned in each (B200TC.m), chained over K, on the raw operands; the
  // exponent clamp differs only for subnormal elements, and these have none (exponents >= -6).
  std::vector<double> x(96), y(96);
  for (size_t i = 0; i < 96; ++i) {
    const uint32_t r = random_u32(12, 0, i);
    const auto value = [](uint32_t j, uint32_t e) {
      return static_cast<double>(8 + static_cast<int>(j % 8)) * pow2(static_cast<int>(e % 12) - 9) * ((j >> 3) & 1 ? -1 : 1);
    };
    x[i] = (i % 32 == 0) ? 256 : value(r, r >> 8);
    y[i] = (i % 32 == 0) ? 320 : value(r >> 16, r >> 24);
  }
  FusedModel m = find_tc_preset("b200_fp8_e4m3")->model;
  m.promote_every = 0;
  CHECK(dot(preset("b200_mxfp8_e4m3_folded"), x, y) == fused_dot(0.0, x.data(), y.data(), 96, m));
}

// The kernel's SIMD target, restored after a test that picks them one by one.
struct TargetMock {
  ~TargetMock() { hwy::SetSupportedTargetsForTest(0); }
};

// An m x k operand (row-major; B is passed as its k x n, element (t, j) at t*n + j) whose magnitudes
// move by up to 2^+-12 from one 32-element K-block to the next and from row to row, so that the blocks
// a row's groups meet carry different scales; values from a fixed stream.
std::vector<double> blocky_operand(size_t rows, size_t k, uint64_t seed, bool k_major) {
  std::vector<double> v(rows * k);
  for (size_t r = 0; r < rows; ++r)
    for (size_t t = 0; t < k; ++t) {
      const uint32_t u = random_u32(seed, 3, r * k + t);
      const double x = (static_cast<double>(u) / 4294967296.0 - 0.5) * 4.0;
      const int e = static_cast<int>((r * 7 + (t / 32) * 5 + seed) % 25) - 12;
      v[k_major ? t * rows + r : r * k + t] = static_cast<float>(x * pow2(e));
    }
  return v;
}

// C under `policy` by the fast path (double and float entries, every compiled SIMD target) against
// the reference (float_entry: the operands are floats, so that entry runs too); whether the fast path
// took the call is `expect_fast` (1 or 0; -1: either).
void check_folded_case(const MatmulPolicy& policy, const std::vector<double>& a, const std::vector<double>& b,
                       size_t m, size_t k, size_t n, int expect_fast, bool float_entry = true) {
  CAPTURE(expect_fast);
  const MatView av{a.data(), m, k, k, false}, bv{b.data(), k, n, n, false};
  std::vector<double> c_ref(m * n);
  MatmulContext ref;
  ref.force_reference = true;
  matmul(av, bv, c_ref.data(), n, policy, ref);
  const std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());  // (exact: the values are floats)
  std::vector<float> cf_ref(c_ref.begin(), c_ref.end());
  TargetMock mock;
  for (int64_t target : matmul_fast_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    CAPTURE(hwy::TargetName(target));
    std::vector<double> c(m * n);
    MatmulContext ctx;
    const bool fast = matmul(av, bv, c.data(), n, policy, ctx).fast_path;
    if (expect_fast >= 0) CHECK(fast == (expect_fast == 1));
    CHECK(same_bits(c, c_ref));
    if (!float_entry) continue;
    std::vector<float> cf(m * n);
    const MatViewF afv{af.data(), m, k, k, false}, bfv{bf.data(), k, n, n, false};
    const bool fast_f = matmul(afv, bfv, cf.data(), n, policy, ctx).fast_path;
    if (expect_fast >= 0) CHECK(fast_f == (expect_fast == 1));
    CHECK(same_bits(cf, cf_ref));
  }
}

TEST_CASE("blackwell hypotheses: folded scales on the fast kernel == the reference, and the reference past float") {
  // Folded into the elements, E8M0 scales (a power of two) keep an element's bits and NVFP4's E4M3
  // ones add at most 4 (2-bit E2M1 elements: 6): every folded product is exact in float, so the
  // fused kernel's integer route applies as it does to unscaled operands, wherever the folded values
  // are normal floats. K = 100 and 72 end on partial blocks; blocky_operand's scales differ between
  // the blocks a group meets (NVFP4: four 16-element blocks per 64-product group).
  struct Case {
    size_t m, k, n;
  };
  const Case shapes[] = {{3, 100, 37}, {13, 72, 70}};
  for (const std::string name : {"b200_mxfp8_e4m3_folded", "b200_mxfp8_e5m2_folded", "b200_nvfp4_folded"}) {
    const MatmulPolicy p = preset(name.c_str());
    // NVFP4 folds only the E4M3 block scales (the fp32 tensor scale applies at the end), so its
    // folded values stay within [2^-10, 2688] whatever the data: always the kernel. An MX block's
    // E8M0 scale follows its amax down to 2^-127 and up to 2^127, and the folded values with it.
    const bool mx = name.find("mxfp8") != std::string::npos;
    for (size_t si = 0; si < std::size(shapes); ++si) {
      const Case& s = shapes[si];
      CAPTURE(name);
      CAPTURE(si);
      std::vector<double> a = blocky_operand(s.m, s.k, 40 + si, false), b = blocky_operand(s.n, s.k, 50 + si, true);
      check_folded_case(p, a, b, s.m, s.k, s.n, 1);
      // One block of A's second row near 2^-118 (its E8M0 scale 2^-125 or so: its smaller elements
      // fold below 2^-126, float's smallest normal), and in another case one block of B's second
      // column near 2^131 (folded values past 2^128, beyond float; not floats, so the double entry
      // only): under MX the reference runs. (NVFP4: its tensor scale near 2^120 there: whichever route
      // the call takes, the bits must be the reference's.)
      std::vector<double> tiny = a, huge = b;
      for (size_t t = 32; t < 64; ++t) tiny[s.k + t] = a[s.k + t] * pow2(-118);
      for (size_t t = 0; t < 32; ++t) huge[t * s.n + 1] = b[t * s.n + 1] * pow2(135);
      check_folded_case(p, tiny, b, s.m, s.k, s.n, mx ? 0 : 1);
      check_folded_case(p, a, huge, s.m, s.k, s.n, mx ? 0 : -1, false);
    }
  }
}

TEST_CASE("hand-derived: folded NVFP4's groups of 64 in four int32 accumulators, their sum past int32 to the core") {
  // b200_nvfp4_folded: one group of 64 scaled products, 25 kept bits, truncated. Every value of A and
  // B is +-2688 = 6 * 448 (or 1792 = 4 * 448 below): the tensors' amax 2688 makes the NVFP4 tensor scale
  // 1 and every block scale 448 (E4M3's largest), elements +-6 (and 4), all exact. 2688 = 1.3125 * 2^11,
  // so 2688^2 = 7225344 has alignment exponent 22, q = 22 - 25 = -3, and each cut term is
  // 7225344 * 8 = 57802752, exact. Sixteen of them, 924844032, fit an int32, 64 (3699376128) do not:
  // the kernel keeps four accumulators (positions t mod 4), and their sum passes 2^31 at the third.
  // The group's sum 64 * 7225344 = 462422016 = 1.72265625 * 2^28 is a float; added to c = 0 it is C.
  const MatmulPolicy p = preset("b200_nvfp4_folded");
  const size_t m = 2, k = 64, n = 40;  // (n: a whole strip and a tail on every target)
  std::vector<double> a(m * k, 2688.0), b(k * n, 2688.0);
  check_folded_case(p, a, b, m, k, n, 1);
  CHECK(dot(p, std::vector<double>(a.begin(), a.begin() + k), std::vector<double>(k, 2688.0)) == 462422016.0);
  // B's sign alternating with t: accumulators 0 and 2 hold +924844032, 1 and 3 -924844032. With
  // a[0] = 1792 = 1.75 * 2^10 (1792 * 2688 = 4816896, cut term 38535168, exact too) the group sums to
  // 4816896 - 7225344 = -2408448: no add wraps, and the four sums meet in the lanes.
  for (size_t i = 0; i < m; ++i) a[i * k] = 1792.0;
  for (size_t t = 1; t < k; t += 2)
    for (size_t j = 0; j < n; ++j) b[t * n + j] = -2688.0;
  check_folded_case(p, a, b, m, k, n, 1);
  std::vector<double> column(k);
  for (size_t t = 0; t < k; ++t) column[t] = b[t * n];
  CHECK(dot(p, std::vector<double>(a.begin(), a.begin() + k), column) == -2408448.0);
  // A wrapped sum that float cannot hold (the vector summed again in double lanes): 48 of the
  // products above (three blocks) and, in the fourth block, three products 4 * 4 = 16 (cut term 128;
  // that block's amax 6, from an element whose partner is 0, keeps its scale 1 and the 4s exact). The
  // sum 48 * 57802752 + 384 = 2774532480 = (2 * 10838017 + 1) * 128 lies between 2^31 and 2^32, where
  // float's spacing is 256: halfway between 10838017 * 256 and the next float. Truncated (the model)
  // it is 10838017 * 256, times 2^-3: 346816544; to nearest even it would be 346816576.
  std::vector<double> x(m * k, 0.0), y(k * n, 0.0);
  for (size_t i = 0; i < m; ++i)
    for (size_t t = 0; t < k; ++t) x[i * k + t] = t < 48 ? 2688.0 : t == 49 ? 6.0 : t >= 61 ? 4.0 : 0.0;
  for (size_t t = 0; t < k; ++t)
    for (size_t j = 0; j < n; ++j) y[t * n + j] = t < 48 ? 2688.0 : t == 48 ? 6.0 : t >= 61 ? 4.0 : 0.0;
  check_folded_case(p, x, y, m, k, n, 1);
  for (size_t t = 0; t < k; ++t) column[t] = y[t * n];
  CHECK(dot(p, std::vector<double>(x.begin(), x.begin() + k), column) == 346816544.0);
}

TEST_CASE("blackwell hypotheses: inner.scales checks") {
  MatmulPolicy p = preset("b200_nvfp4_folded");
  CHECK(validate_policy(p).empty());
  p.inner.fused.reset();
  CHECK(validate_policy(p).find("needs inner.fused") != std::string::npos);
  MatmulPolicy q = preset("b200_mxfp8_e4m3_folded");
  q.a.scaling.kind = q.b.scaling.kind = ScaleKind::none;
  CHECK(validate_policy(q).find("needs block-scaled operands") != std::string::npos);
}

}  // namespace test_blackwell_presets
