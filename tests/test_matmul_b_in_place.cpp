// The fp32 kernel reads B where it lies in a call of few rows (M <= 96) when B is floats stored
// K x N whose columns fill whole strips (matmul_fast.cpp, pack_floats): a model's fp32 operand read in place, or a quantized one
// the quantizer left K x N (QuantizedOperand::k_major), stepped one row of B (its ldb, or N) at a
// time instead of copied into strips. The results must be the literal reference's bits, for the
// fma kernel and the counting one, B wider than the product (ldb > N), every tile shape, and the
// thread team; and a NaN in B must still send the call to the reference.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "arith/random.h"
#include "same_bits.h"

namespace test_matmul_b_in_place {

using namespace drift;
using drift::testing::same_bits;

namespace {

// rows x cols floats (row stride ld) with a few significant bits each, over about 2^-20 ... 2^20.
std::vector<float> values(size_t rows, size_t cols, size_t ld, uint64_t seed) {
  std::vector<float> v(rows * ld, 0.0f);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const uint32_t bits = random_u32(seed, 3, r * ld + c);
      const double u = (1 + (bits & 255) / 256.0) * ((bits >> 8) & 1 ? -1 : 1);
      v[r * ld + c] = static_cast<float>(std::ldexp(u, static_cast<int>((bits >> 9) % 41) - 20));
    }
  return v;
}

MatmulPolicy operands(const char* format, bool mx) {
  MatmulPolicy p;
  p.a.format = p.b.format = *find_format(format);
  if (mx) {
    p.a.scaling.kind = p.b.scaling.kind = ScaleKind::block;
    p.a.scaling.block = p.b.scaling.block = 32;
    p.a.round.overflow = p.b.round.overflow = Overflow::saturate;
  }
  return p;
}

// C = A (m x k) * B (k x n, stored K x N with row stride ldb) through the float entry, fast and
// forced to the reference, bit for bit. Returns whether the fast path produced C.
bool same_as_reference(const MatmulPolicy& p, bool count, size_t m, size_t k, size_t n, size_t ldb,
                       const std::vector<float>& a, const std::vector<float>& b) {
  MatmulWorkspace ws;
  MatmulContext ctx;
  ctx.workspace = &ws;
  ctx.count_swamping = count;
  const MatViewF av{a.data(), m, k, k, false}, bv{b.data(), k, n, ldb, false};
  std::vector<float> c(m * n, 7.0f), cr(m * n, 9.0f);
  const MatmulTelemetry t = matmul(av, bv, c.data(), n, p, ctx);
  MatmulContext ref = ctx;
  ref.force_reference = true;
  const MatmulTelemetry tr = matmul(av, bv, cr.data(), n, p, ref);
  CHECK(same_bits(c, cr));
  if (count) {
    CHECK(t.inner_adds == tr.inner_adds);
    CHECK(t.inner_swamped == tr.inner_swamped);
  }
  return t.fast_path;
}

}  // namespace

TEST_CASE("B read where it lies: fast path == reference (fp32, counted, bf16, MX e4m3; ldb > N; every tile)") {
  struct Case {
    const char* name;
    MatmulPolicy policy;
    bool count;
  };
  const Case cases[] = {{"fp32", MatmulPolicy{}, false},
                        {"fp32 counted", MatmulPolicy{}, true},
                        {"bf16 operands", operands("bf16", false), false},
                        {"mxfp8_e4m3", operands("fp8_e4m3", true), false}};
  struct Shape {
    size_t m, k, n;
  };
  // N: whole strips on every target (32, 64, 96) and not (40, 17: packed as before); M: one row, a
  // short tile, the 6-row tile's multiples and the 12-row wide tile's, a tail, the most read in
  // place (96) and more (100: packed); K: one step, a block tail, several blocks.
  const Shape shapes[] = {{1, 64, 32}, {5, 7, 64}, {13, 64, 96}, {24, 200, 32}, {37, 33, 64},
                          {96, 64, 64}, {12, 96, 40}, {30, 64, 17}, {100, 128, 128}};
  for (const Case& cs : cases)
    for (const Shape& s : shapes)
      for (size_t pad : {size_t{0}, size_t{5}}) {
        CAPTURE(cs.name);
        CAPTURE(s.m);
        CAPTURE(s.k);
        CAPTURE(s.n);
        CAPTURE(pad);
        const size_t ldb = s.n + pad;
        const std::vector<float> a = values(s.m, s.k, s.k, 11 + s.m), b = values(s.k, s.n, ldb, 29 + s.n);
        CHECK(same_as_reference(cs.policy, cs.count, s.m, s.k, s.n, ldb, a, b));
      }
}

TEST_CASE("B read where it lies: a call on the thread team, and a NaN in B, give the reference's bits") {
  const size_t m = 90, k = 512, n = 512, ldb = 520;
  const std::vector<float> a = values(m, k, k, 1);
  std::vector<float> b = values(k, n, ldb, 2);
  for (const MatmulPolicy& p : {MatmulPolicy{}, operands("fp8_e4m3", true)})
    CHECK(same_as_reference(p, false, m, k, n, ldb, a, b));
  b[7 * ldb + 40] = NAN;
  // (A NaN gives a non-finite result, which the reference computes; the bits still agree.)
  for (const MatmulPolicy& p : {MatmulPolicy{}, operands("fp8_e4m3", true)})
    CHECK_FALSE(same_as_reference(p, false, m, k, n, ldb, a, b));
}

}  // namespace test_matmul_b_in_place
