// The fast fp32 kernel with fma reads its quantized float operands without scanning their ranges
// (matmul_fast.cpp, pack_floats): MX operands whose block magnitudes reach fp32's bottom and top
// (products that underflow, block sums that overflow, all-zero blocks) and NaN or inf elements must
// still give the literal reference's bits, through both entries of the engine.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "arith/catalogue.h"
#include "arith/matmul.h"
#include "arith/matmul_workspace.h"
#include "arith/random.h"
#include "same_bits.h"

namespace test_matmul_unscanned {

using namespace drift;
using drift::testing::same_bits;

namespace {

MatmulPolicy mx_policy(const char* element) {
  MatmulPolicy p;
  p.a.format = p.b.format = *find_format(element);
  p.a.scaling.kind = p.b.scaling.kind = ScaleKind::block;
  p.a.scaling.block = p.b.scaling.block = 32;
  p.a.round.overflow = p.b.round.overflow = Overflow::saturate;
  return p;
}

// Operand values whose 32-blocks along k have magnitudes about 2^e(row, block), a few significant
// bits each, or are all zero where e is kZeroBlock: element (row r, k index t) at v[r*k + t] (A, or
// Bᵀ).
constexpr int kZeroBlock = 1 << 20;
template <class ExpOf>
std::vector<float> blocked(size_t rows, size_t k, uint64_t seed, ExpOf exp_of) {
  std::vector<float> v(rows * k);
  for (size_t r = 0; r < rows; ++r)
    for (size_t t = 0; t < k; ++t) {
      const int e = exp_of(r, t / 32);
      const uint32_t bits = random_u32(seed, 7, r * k + t);
      const double u = (16 + (bits & 15)) / 16.0 * ((bits >> 4) & 1 ? -1 : 1) / ((bits >> 5) % 3 == 0 ? 64 : 1);
      v[r * k + t] = e == kZeroBlock ? 0.0f : static_cast<float>(std::ldexp(u, e));
    }
  return v;
}

// The fast path against force_reference, through the float entry (A read in place) and the double
// entry (A converted into the engine's scratch), A m x k and B given as Bᵀ.
void check_against_reference(const MatmulPolicy& p, size_t m, size_t k, size_t n, const std::vector<float>& a,
                             const std::vector<float>& bt, int* fast_calls) {
  MatmulWorkspace ws;
  MatmulContext ctx;
  ctx.workspace = &ws;
  const MatViewF af{a.data(), m, k, k, false}, bf{bt.data(), k, n, k, true};
  std::vector<float> cf(m * n), cfr(m * n);
  const std::vector<double> ad(a.begin(), a.end()), btd(bt.begin(), bt.end());
  const MatView av{ad.data(), m, k, k, false}, bv{btd.data(), k, n, k, true};
  std::vector<double> cd(m * n), cdr(m * n);
  const MatmulTelemetry tf = matmul(af, bf, cf.data(), n, p, ctx);
  const MatmulTelemetry td = matmul(av, bv, cd.data(), n, p, ctx);
  MatmulContext ref = ctx;
  ref.force_reference = true;
  matmul(af, bf, cfr.data(), n, p, ref);
  matmul(av, bv, cdr.data(), n, p, ref);
  CHECK(same_bits(cf, cfr));
  CHECK(same_bits(cd, cdr));
  *fast_calls += tf.fast_path + td.fast_path;
}

}  // namespace

TEST_CASE("unscanned operands: fast path == reference across tiny, huge and all-zero MX blocks (e4m3, e5m2, e2m1)") {
  struct Shape {
    size_t m, k, n;
  };
  // Wide tiles (rows past two tiles), the 6-row tile, tails of k and n, one block.
  const Shape shapes[] = {{20, 64, 40}, {7, 96, 33}, {13, 32, 17}, {3, 70, 5}};
  int fast_calls = 0, calls = 0;
  for (const char* element : {"fp8_e4m3", "fp8_e5m2", "fp4_e2m1"}) {
    const MatmulPolicy p = mx_policy(element);
    CAPTURE(element);
    // The two operands' block magnitudes 2^x and 2^y, their sum swept across the bounds: products
    // near fp32's bottom (x + y from -160 to -90) and top (90 to 160), and a few between.
    for (int sum = -160; sum <= 160; sum += (std::abs(sum) >= 90 ? 3 : 60)) {
      for (int skew : {0, 37}) {
        const int x = sum / 2 + skew, y = sum - x;
        if (std::abs(x) > 120 || std::abs(y) > 120) continue;
        for (const Shape& s : shapes) {
          CAPTURE(sum);
          CAPTURE(skew);
          CAPTURE(s.m);
          const uint64_t seed = static_cast<uint64_t>(sum + 1000) * 131 + skew + s.k;
          // Block exponents jitter by -3..3 around the base; one block in seven all zero.
          auto exps = [&](int base, uint64_t salt) {
            return [=](size_t r, size_t b) {
              const uint32_t h = random_u32(seed, salt, r * 64 + b);
              return h % 7 == 0 ? kZeroBlock : base + static_cast<int>(h % 7) - 3;
            };
          };
          check_against_reference(p, s.m, s.k, s.n, blocked(s.m, s.k, seed, exps(x, 1)),
                                  blocked(s.n, s.k, seed + 1, exps(y, 2)), &fast_calls);
          calls += 2;
        }
      }
    }
  }
  // The reference decides only where a result is not finite: most calls stay fast.
  CHECK(fast_calls * 2 > calls);
}

TEST_CASE("unscanned operands: a NaN or inf operand still goes to the reference") {
  // (An MX block with a NaN or inf gets a NaN scale, which the plan itself sends to the reference;
  // unscaled and tensor-scaled fp8 keep finite scales and pass a NaN on to the kernel, and e5m2
  // with IEEE overflow an inf too. E4M3 has no inf: there an inf saturates, and the call is fast.)
  MatmulPolicy plain;
  plain.a.format = plain.b.format = *find_format("fp8_e4m3");
  MatmulPolicy tensor = plain;
  tensor.a.scaling.kind = tensor.b.scaling.kind = ScaleKind::tensor;
  MatmulPolicy e5m2;
  e5m2.a.format = e5m2.b.format = *find_format("fp8_e5m2");
  e5m2.a.round.overflow = e5m2.b.round.overflow = Overflow::ieee;
  for (const MatmulPolicy& p : {plain, tensor, e5m2})
    for (float bad : {NAN, INFINITY, -INFINITY})
      for (int operand = 0; operand < 2; ++operand) {
        std::vector<float> a = blocked(20, 64, 3, [](size_t, size_t) { return 0; });
        std::vector<float> bt = blocked(40, 64, 4, [](size_t, size_t) { return -2; });
        (operand == 0 ? a[5 * 64 + 40] : bt[7 * 64 + 3]) = bad;
        int fast_calls = 0;
        check_against_reference(p, 20, 64, 40, a, bt, &fast_calls);
        if (std::isnan(bad) || p.a.format.inf) CHECK(fast_calls == 0);
      }
}

}  // namespace test_matmul_unscanned
