// The fp32 kernel reads its operands where they lie (matmul_fast.cpp, pack_floats): a B stored
// K x N whose columns fill whole strips, in a call of few rows (M <= 96), stepped one row of B at
// a time instead of copied into strips; and an A stored K x M (k-major), stepped one column of A at
// a time instead of transposed into rows. Either is a model's fp32 operand read in place, or one the
// quantizer left in its own order (QuantizedOperand::k_major). The results must be the literal
// reference's bits, for the fma kernel and the counting one, operands wider than the product (ld
// past the edge), every tile shape, and the thread team; a NaN must still send the call to the
// reference; and under a narrow accumulator, whose kernel reads A by rows, A must still come as rows.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "arith/random.h"
#include "same_bits.h"

namespace test_matmul_operands_in_place {

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

// C = A (m x k) * B (k x n) through the float entry, fast and forced to the reference, bit for bit.
// Returns whether the fast path produced C.
bool same_as_reference(const MatmulPolicy& p, bool count, const MatViewF& av, const MatViewF& bv) {
  MatmulWorkspace ws;
  MatmulContext ctx;
  ctx.workspace = &ws;
  ctx.count_swamping = count;
  const size_t m = av.rows, n = bv.cols;
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

// A row-major (m x k) and B stored K x N with row stride ldb.
bool same_as_reference(const MatmulPolicy& p, bool count, size_t m, size_t k, size_t n, size_t ldb,
                       const std::vector<float>& a, const std::vector<float>& b) {
  return same_as_reference(p, count, MatViewF{a.data(), m, k, k, false}, MatViewF{b.data(), k, n, ldb, false});
}

// bf16 operands summed in bf16: the narrow kernel, which reads A by rows (the quantizer then
// leaves A row-major).
MatmulPolicy narrow_bf16_sums() {
  MatmulPolicy p = operands("bf16", false);
  p.inner.format = *find_format("bf16");
  return p;
}

// A policy under test, and whether the counting kernel runs it.
struct Case {
  const char* name;
  MatmulPolicy policy;
  bool count;
};
struct Shape {
  size_t m, k, n;
};

}  // namespace

TEST_CASE("B read where it lies: fast path == reference (fp32, counted, bf16, MX e4m3; ldb > N; every tile)") {
  const Case cases[] = {{"fp32", MatmulPolicy{}, false},
                        {"fp32 counted", MatmulPolicy{}, true},
                        {"bf16 operands", operands("bf16", false), false},
                        {"mxfp8_e4m3", operands("fp8_e4m3", true), false}};
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

TEST_CASE("A stored K x M read where it lies: fast path == reference (fp32, counted, bf16, MX e4m3, bf16 sums)") {
  const Case cases[] = {{"fp32", MatmulPolicy{}, false},
                        {"fp32 counted", MatmulPolicy{}, true},
                        {"bf16 operands", operands("bf16", false), false},
                        {"mxfp8_e4m3", operands("fp8_e4m3", true), false},
                        {"bf16 sums", narrow_bf16_sums(), false}};
  // M: one row (a k-major band of one column), the 6-row tile, the wide tile, tails; K: one step,
  // a block tail, several MX blocks; N: whole strips and not.
  const Shape shapes[] = {{1, 64, 32},   {2, 64, 40},   {6, 7, 64},   {13, 96, 33},
                          {24, 200, 64}, {37, 33, 32}, {130, 64, 64}};
  for (const Case& cs : cases)
    for (const Shape& s : shapes)
      for (size_t pad : {size_t{0}, size_t{3}}) {
        CAPTURE(cs.name);
        CAPTURE(s.m);
        CAPTURE(s.k);
        CAPTURE(s.n);
        CAPTURE(pad);
        const size_t lda = s.m + pad;  // A stored K x M: element (i, t) at at[t * lda + i]
        const std::vector<float> at = values(s.k, s.m, lda, 5 + s.m), b = values(s.k, s.n, s.n, 17 + s.n);
        CHECK(same_as_reference(cs.policy, cs.count, MatViewF{at.data(), s.m, s.k, lda, true},
                                MatViewF{b.data(), s.k, s.n, s.n, false}));
      }
}

TEST_CASE("A stored K x M read where it lies: the thread team, and a NaN in A, give the reference's bits") {
  const size_t m = 300, k = 256, n = 192, lda = 310;
  std::vector<float> at = values(k, m, lda, 3);
  const std::vector<float> b = values(k, n, n, 4);
  const MatViewF av{at.data(), m, k, lda, true}, bv{b.data(), k, n, n, false};
  for (const MatmulPolicy& p : {MatmulPolicy{}, operands("fp8_e4m3", true)})
    CHECK(same_as_reference(p, false, av, bv));
  at[9 * lda + 100] = NAN;
  for (const MatmulPolicy& p : {MatmulPolicy{}, operands("fp8_e4m3", true)})
    CHECK_FALSE(same_as_reference(p, false, av, bv));
}

// A weight gradient's product: K is the batch (a thousand and more), A stored K x M (Xᵀ) or as rows,
// with many row tiles, partial tiles and strips, and blocks that do not divide K (MX: 34 blocks and
// a tail of 12; promotion every 16). The suites above stop at K = 600.
TEST_CASE("a long K over many row tiles: fast path == reference, A as rows and stored K x M") {
  MatmulPolicy promote = operands("bf16", false);
  promote.inner.promote_every = 16;
  const Case cases[] = {{"fp32", MatmulPolicy{}, false},
                        {"fp32 counted", MatmulPolicy{}, true},
                        {"mxfp8_e4m3", operands("fp8_e4m3", true), false},
                        {"bf16 operands, promote every 16", promote, false}};
  const Shape shapes[] = {{50, 1100, 70}, {7, 1500, 33}, {130, 1030, 64}};
  for (const Case& cs : cases)
    for (const Shape& s : shapes)
      for (bool a_k_major : {false, true}) {
        CAPTURE(cs.name);
        CAPTURE(s.m);
        CAPTURE(s.k);
        CAPTURE(s.n);
        CAPTURE(a_k_major);
        const std::vector<float> a = a_k_major ? values(s.k, s.m, s.m, 41 + s.m) : values(s.m, s.k, s.k, 41 + s.m);
        const std::vector<float> b = values(s.k, s.n, s.n, 43 + s.n);
        const MatViewF av{a.data(), s.m, s.k, a_k_major ? s.m : s.k, a_k_major};
        CHECK(same_as_reference(cs.policy, cs.count, av, MatViewF{b.data(), s.k, s.n, s.n, false}));
      }
}

}  // namespace test_matmul_operands_in_place
