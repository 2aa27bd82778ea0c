// The narrow-accumulator kernel's range tests. narrow_checks decides per call which tests the kernel
// makes at every add (a sum below the format's smallest normal, or beyond its largest finite value,
// goes to the scalar core); its decisions are derived here by hand, and the fast kernel is compared
// with the reference bit for bit, on every compiled SIMD target, on data on both sides of each line,
// and with lanes that leave the range in the middle of a register tile.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/narrow_range.h"
#include "arith/random.h"
#include "hwy/targets.h"
#include "same_bits.h"

// This file's own names: the test binary compiles several files as one (a unity build).
namespace test_matmul_narrow {

using drift::testing::same_bits;

using namespace drift;

namespace {

Format fmt(const char* name) { return *find_format(name); }

struct TargetReset {
  ~TargetReset() { hwy::SetSupportedTargetsForTest(0); }
};

// A (m x k) * B (k x n), both row-major: the fast path (plain and counting kernels) on every compiled
// SIMD target gives the reference's bits and add counts; `fast` says whether it must be taken.
void check_narrow(const MatmulPolicy& p, const std::vector<double>& a, const std::vector<double>& b, size_t m,
                  size_t k, size_t n, bool fast, const std::string& what) {
  MatView av{a.data(), m, k, k, false};
  MatView bv{b.data(), k, n, n, false};
  std::vector<double> c_ref(m * n);
  MatmulContext ctx;
  ctx.force_reference = true;
  const auto t_ref = matmul(av, bv, c_ref.data(), n, p, ctx);
  ctx.force_reference = false;
  TargetReset reset;
  for (int64_t target : matmul_fast_targets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string tname = hwy::TargetName(target);
    CAPTURE(what);
    CAPTURE(tname);
    for (bool count : {false, true}) {
      CAPTURE(count);
      ctx.count_swamping = count;
      std::vector<double> c(m * n);
      const auto t = matmul(av, bv, c.data(), n, p, ctx);
      CHECK(t.fast_path == fast);
      CHECK(same_bits(c, c_ref));
      CHECK(t.inner_adds == t_ref.inner_adds);
      if (count) CHECK(t.inner_swamped == t_ref.inner_swamped);
    }
  }
}

MatmulPolicy narrow_policy(const char* operands, const char* acc, Rounding mode) {
  MatmulPolicy p;
  p.a.format = p.b.format = fmt(operands);
  p.inner.format = fmt(acc);
  p.inner.round.mode = mode;
  p.inner.round.overflow = Overflow::saturate;
  return p;
}

// n values 2^e * (1 + f/2^bits) with e uniform in [emin, emax], `bits` random fraction bits, random
// sign (all positive when `positive`).
std::vector<double> values(size_t n, uint64_t seed, int emin, int emax, int bits, bool positive = false) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t r0 = random_u32(seed, 7, 2 * i), r1 = random_u32(seed, 7, 2 * i + 1);
    const int e = emin + static_cast<int>(r1 % static_cast<uint32_t>(emax - emin + 1));
    const double frac = std::ldexp(static_cast<double>(r0 >> (32 - bits)), -bits);
    const double x = std::ldexp(1.0 + frac, e);
    v[i] = positive || (r1 >> 31) == 0 ? x : -x;
  }
  return v;
}

}  // namespace

TEST_CASE("narrow_checks, tiny: only where the format's subnormals are not a constant shift of fp32's") {
  RoundSpec keep, flush;
  flush.subnormals = Subnormals::flush;
  // bf16: smallest normal 2^-126 as fp32's, subnormal spacing 2^-133 = 2^16 fp32 subnormal units.
  CHECK_FALSE(narrow_checks(fmt("bf16"), keep, 1, 1, 32).tiny);
  CHECK(narrow_checks(fmt("bf16"), flush, 1, 1, 32).tiny);  // flushing: the scalar core decides
  // fp16: smallest normal 2^-14, below which the grid is fixed (2^-24) while fp32's keeps shrinking.
  CHECK(narrow_checks(fmt("fp16"), keep, 1, 1, 32).tiny);
  // A format with bf16's exponent field and no subnormals flushes like a flushing bf16.
  Format e8m7_nosub = fmt("bf16");
  e8m7_nosub.subnormals = false;
  derive_format(e8m7_nosub);
  CHECK(narrow_checks(e8m7_nosub, keep, 1, 1, 32).tiny);
}

TEST_CASE("narrow_checks, huge: the bound K (P + d) exp(K 2^-man) against the largest finite value") {
  const RoundSpec rne;
  // fp16 (man 10, max 65504), K = 1024: exp(1024 * 2^-10) = e = 2.718281828.
  //   P = 23: 1024 * 23 * e = 64021.0 (d = 2^-24 adds 1.7e-4) < 65504: no test.
  //   P = 24: 1024 * 24 * e = 66804.5 > 65504: tested.
  CHECK_FALSE(narrow_checks(fmt("fp16"), rne, 23, 1, 1024).huge);
  CHECK(narrow_checks(fmt("fp16"), rne, 24, 1, 1024).huge);
  CHECK(narrow_checks(fmt("fp16"), rne, 4.8, 5, 1024).huge);  // P = 24 as a product of both maxima
  // bf16 (man 7, max (2 - 2^-7) 2^127 = 2^127.994):
  //   K = 64, P = 2^120: 2^126 * exp(0.5) = 2^126.72: no test; K = 256: 2^128 * exp(2) = 2^130.9: tested.
  CHECK_FALSE(narrow_checks(fmt("bf16"), rne, 0x1p60, 0x1p60, 64).huge);
  CHECK(narrow_checks(fmt("bf16"), rne, 0x1p60, 0x1p60, 256).huge);
  // Long blocks: exp(K 2^-man) overflows double for K = 2^20 in bf16 (exp(8192)): tested, not NaN.
  CHECK(narrow_checks(fmt("bf16"), rne, 1, 1, size_t{1} << 20).huge);
  // All-zero operands: the sums stay zero.
  CHECK_FALSE(narrow_checks(fmt("fp16"), rne, 0, 0, 4096).huge);
}

TEST_CASE("narrow kernel == reference on both sides of the overflow test's line") {
  for (Rounding mode : {Rounding::rne, Rounding::rtz}) {
    const std::string mode_name = mode == Rounding::rne ? "rne" : "rtz";
    CAPTURE(mode_name);
    // fp16 operands into an fp16 accumulator, K = 1024, 7 x 40 (a full tile, a partial one, a partial
    // strip). A holds +-23 or +-24 (plus B's 1): P = 23 needs no test, P = 24 does (see above).
    const size_t m = 7, k = 1024, n = 40;
    const MatmulPolicy p = narrow_policy("fp16", "fp16", mode);
    for (double amax : {23.0, 24.0}) {
      const std::string side = amax == 23 ? "no overflow test" : "overflow tested";
      std::vector<double> a(m * k, amax), b(k * n, 1.0);
      // Mixed signs: the sums wander and stay small.
      const auto signs = values(m * k, 1, 0, 0, 1);
      for (size_t i = 0; i < a.size(); ++i) a[i] = std::copysign(amax, signs[i]);
      check_narrow(p, a, b, m, k, n, true, side + ", mixed signs");
      // All positive: every sum climbs to 1024 * P (23552 or 24576), the largest sums the bound allows
      // for, rounded at every add (fp16's spacing reaches 16 above 16384).
      std::fill(a.begin(), a.end(), amax);
      check_narrow(p, a, b, m, k, n, true, side + ", all positive");
    }
    // Sums that do overflow: P = 64, 1024 adds reach 65536 > 65504. Saturating, the overflowing lanes
    // go to the scalar core (max finite); IEEE rne gives inf and the call goes to the reference.
    std::vector<double> a(m * k, 64.0), b(k * n, 1.0);
    check_narrow(p, a, b, m, k, n, true, "overflowing, saturating");
    MatmulPolicy q = p;
    q.inner.round.overflow = Overflow::ieee;
    check_narrow(q, a, b, m, k, n, mode == Rounding::rtz, "overflowing, ieee");
  }
  // bf16 operands into a bf16 accumulator near 2^128: products 2^120 (A, B = +-2^60 * 1.x), 64 of
  // them need no test, 256 do; all-positive products overflow bf16 in the second case.
  for (Rounding mode : {Rounding::rne, Rounding::rtz}) {
    const MatmulPolicy p = narrow_policy("bf16", "bf16", mode);
    for (size_t k : {64, 256}) {
      CAPTURE(k);
      const size_t m = 6, n = 33;
      check_narrow(p, values(m * k, 2, 59, 59, 7), values(k * n, 3, 60, 60, 7), m, k, n, true, "bf16 mixed signs");
      check_narrow(p, values(m * k, 4, 59, 59, 7, true), values(k * n, 5, 60, 60, 7, true), m, k, n, true,
                   "bf16 all positive");
    }
  }
}

TEST_CASE("narrow kernel == reference on both sides of the tiny test's line") {
  for (Rounding mode : {Rounding::rne, Rounding::rtz}) {
    const std::string mode_name = mode == Rounding::rne ? "rne" : "rtz";
    CAPTURE(mode_name);
    const size_t m = 13, k = 200, n = 40;
    // bf16 with products between 2^-132 and 2^-120 (operands 2^-66..2^-60, every product exact in
    // fp32: its last bit at or above 2^-146): many sums in bf16's subnormal range. Kept, the kernel
    // rounds them by its constant shift (no test); flushed, each goes to the scalar core.
    MatmulPolicy p = narrow_policy("bf16", "bf16", mode);
    const auto a = values(m * k, 10, -66, -60, 7), b = values(k * n, 11, -66, -60, 7);
    check_narrow(p, a, b, m, k, n, true, "bf16 subnormal sums, kept");
    p.inner.round.subnormals = Subnormals::flush;
    check_narrow(p, a, b, m, k, n, true, "bf16 subnormal sums, flushed");
    // fp16 with products between 2^-24 and 2^-12: sums on both sides of 2^-14 (always tested).
    p = narrow_policy("fp16", "fp16", mode);
    const auto c = values(m * k, 12, -12, -6, 10), d = values(k * n, 13, -12, -6, 10);
    check_narrow(p, c, d, m, k, n, true, "fp16 sums around its smallest normal");
    p.inner.round.subnormals = Subnormals::flush;
    check_narrow(p, c, d, m, k, n, true, "fp16 sums around its smallest normal, flushed");
  }
}

TEST_CASE("a lane leaving the range in the middle of a register tile") {
  // fp16 accumulator, 6 and 13 rows (full register tiles of 6, then a partial one), N = 40, K = 11.
  // Every A is 1 but A[3][5] = -(1 + 2^-10). Columns 23 and 24 of B are zero but for u = 2^-10 and
  // c = 2^-10 - 2^-20 (both exact in fp16): column 23 holds u at t = 4 and c at t = 5, column 24 c at
  // t = 5 and u at t = 6. Row 3's product with c is -(2^-10 - 2^-30), so its sum reaches
  // u - (2^-10 - 2^-30) = 2^-30 in the middle of a step (row 3 of 6) in either order: column 23 at
  // t = 5 (sequential) or t = 4 (reverse), column 24 at t = 6 or t = 5. 2^-30 is below half of fp16's
  // smallest subnormal 2^-24: rne and rtz give +0, which later zero products leave alone (a kernel
  // that kept 2^-30 would show it in C). The other rows' sums stay normal; the other columns hold
  // ordinary values. The sums before are zeros (no test fires on them).
  const double u = std::ldexp(1.0, -10), c = u - std::ldexp(1.0, -20);
  const size_t k = 11, n = 40;
  for (size_t m : {6, 13}) {
    std::vector<double> a(m * k, 1.0);
    a[3 * k + 5] = -(1.0 + std::ldexp(1.0, -10));
    std::vector<double> b = values(k * n, 20, -3, 2, 10);
    for (size_t t = 0; t < k; ++t) b[t * n + 23] = b[t * n + 24] = 0.0;
    b[4 * n + 23] = u;
    b[5 * n + 23] = b[5 * n + 24] = c;
    b[6 * n + 24] = u;
    for (Rounding mode : {Rounding::rne, Rounding::rtz}) {
      for (SumOrder order : {SumOrder::sequential, SumOrder::reverse}) {
        MatmulPolicy p = narrow_policy("fp16", "fp16", mode);
        p.inner.order = order;
        const std::string what = "tiny lane, m " + std::to_string(m) + (mode == Rounding::rne ? " rne" : " rtz") +
                                 (order == SumOrder::reverse ? " reverse" : "");
        check_narrow(p, a, b, m, k, n, true, what);
        // Column 23 overflowing instead (saturating): 2^15 at t = 4 and -2^15 at t = 5 give row 3
        // 2^15 + 2^15 (1 + 2^-10) = 65568 > 65504 in either order, which saturates to 65504; the
        // other rows' sums cancel to 0.
        std::vector<double> big = b;
        big[4 * n + 23] = 32768.0;
        big[5 * n + 23] = -32768.0;
        check_narrow(p, a, big, m, k, n, true, what + ", overflowing");
      }
    }
  }
}

TEST_CASE("narrow kernel: results do not depend on the number of threads") {
  const size_t m = 37, k = 130, n = 29;
  const auto a = values(m * k, 30, -6, 3, 10), b = values(k * n, 31, -6, 3, 10);
  MatView av{a.data(), m, k, k, false};
  MatView bv{b.data(), k, n, n, false};
  for (Rounding mode : {Rounding::rne, Rounding::rtz}) {
    const MatmulPolicy p = narrow_policy("fp16", "fp16", mode);
    std::vector<std::vector<double>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<double> c(m * n);
      MatmulContext ctx;
      CHECK(matmul(av, bv, c.data(), n, p, ctx).fast_path);
      results.push_back(c);
    }
    omp_set_num_threads(omp_get_num_procs());
    CHECK(same_bits(results[0], results[1]));
    CHECK(same_bits(results[0], results[2]));
  }
}

}  // namespace test_matmul_narrow
