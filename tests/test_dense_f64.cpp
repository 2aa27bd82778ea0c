// dense_f64 (arith/dense_f64.h): on every SIMD target and at several thread counts, the same bits as
// the naive triple loop with each element's sum in k order; the shapes cover the 4-row tiles, the
// two-vector column tiles and the scalar tails. The values mix magnitudes over a wide range, signs,
// zeros and subnormal products, where any reassociation or fused multiply-add would show.
#include <doctest/doctest.h>
#include <hwy/targets.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "arith/dense_f64.h"
#include "arith/random.h"
#include "same_bits.h"

namespace drift::test_dense_f64 {

using drift::testing::same_bits;

namespace {

double draw(uint64_t stream, uint64_t i) {
  const uint32_t r = random_u32(9, stream, i);
  if (r % 17 == 0) return (r & 32) ? -0.0 : 0.0;
  // Mantissa from the draw, exponent in [-540, 540): products span the subnormal range and beyond.
  const double m = 1.0 + static_cast<double>(r >> 8) / 16777216.0;
  return std::ldexp((r & 1) ? -m : m, static_cast<int>(random_u32(9, stream + 1, i) % 1080) - 540);
}

}  // namespace

TEST_CASE("dense_f64 == the sequential triple loop, bit for bit, every target and thread count") {
  const std::vector<int64_t> targets = dense_f64_targets();
  REQUIRE(!targets.empty());
  struct Reset {
    ~Reset() { hwy::SetSupportedTargetsForTest(0); }
  } reset;
  struct Shape {
    size_t n, c, oc;
  };
  // Among them, on AVX-512 in full vectors (panels of 16 columns, tiles of 6, 3 and 1 rows over
  // pairs of panels, 8, 4 and 1 rows over a last odd panel, row blocks of 48): {17, 3, 80} two pairs
  // and an odd panel, 6 + 6 + 3 + 1 + 1 and 8 + 8 + 1 rows; in half vectors 4 + 4 + 4 + 4 + 1 rows
  // over each panel; {70, 130, 33} a second row block of 22 rows (in half vectors 5 x 4 + 2);
  // columns past the last whole panel in most.
  const Shape shapes[] = {{1, 1, 1},     {3, 5, 7},     {4, 8, 16},  {5, 33, 17}, {9, 64, 40},
                          {70, 130, 33}, {130, 20, 50}, {17, 3, 80}, {2, 0, 9}};
  for (const Shape& s : shapes) {
    CAPTURE(s.n);
    CAPTURE(s.c);
    CAPTURE(s.oc);
    std::vector<double> x(s.n * s.c), w(s.c * s.oc);
    for (size_t i = 0; i < x.size(); ++i) x[i] = draw(1, i);
    for (size_t i = 0; i < w.size(); ++i) w[i] = draw(3, i);
    // The definition, written out here as well: y = 0, then y = y + x*w for k ascending, and in the
    // library's scalar twin.
    std::vector<double> want(s.n * s.oc), scalar(s.n * s.oc, 1.0);
    for (size_t i = 0; i < s.n; ++i)
      for (size_t j = 0; j < s.oc; ++j) {
        volatile double acc = 0.0;  // each step stored: no contraction, no reassociation
        for (size_t k = 0; k < s.c; ++k) {
          const volatile double p = x[i * s.c + k] * w[k * s.oc + j];
          acc = acc + p;
        }
        want[i * s.oc + j] = acc;
      }
    dense_f64_scalar(scalar.data(), x.data(), w.data(), s.n, s.c, s.oc);
    CHECK(same_bits(scalar, want));
    // Weights laid out once on the best target, then used on every target (on the others the call
    // lays out its own panels), and weights laid out on each target itself.
    const DenseF64Weights packed_best(w, s.c, s.oc);
    for (int64_t target : targets) {
      hwy::SetSupportedTargetsForTest(target);
      const DenseF64Weights packed_here(w, s.c, s.oc);
      // (AVX-512's two forms, full and half vectors, whichever this CPU would pick: the other
      // targets have one.)
      for (int form : {0, 1}) {
        dense_f64_set_avx512_form_for_test(form);
        for (int threads : {1, 2, 3}) {
          CAPTURE(hwy::TargetName(target));
          CAPTURE(form);
          CAPTURE(threads);
          omp_set_num_threads(threads);
          std::vector<double> got(s.n * s.oc, 1.0), got_best(s.n * s.oc, 1.0), got_here(s.n * s.oc, 1.0);
          dense_f64(got.data(), x.data(), w.data(), s.n, s.c, s.oc);
          dense_f64(got_best.data(), x.data(), packed_best, s.n);
          dense_f64(got_here.data(), x.data(), packed_here, s.n);
          CHECK(same_bits(got, want));
          CHECK(same_bits(got_best, want));
          CHECK(same_bits(got_here, want));
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
  dense_f64_set_avx512_form_for_test(-1);
  omp_set_num_threads(omp_get_num_procs());
}

TEST_CASE("dense_f64: a large call on a team equals the one-thread result") {
  const size_t n = 256, c = 256, oc = 96;  // n*c*oc above the threading threshold
  std::vector<double> x(n * c), w(c * oc);
  for (size_t i = 0; i < x.size(); ++i) x[i] = draw(5, i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = draw(7, i);
  std::vector<double> one(n * oc), team(n * oc), want(n * oc);
  dense_f64_scalar(want.data(), x.data(), w.data(), n, c, oc);
  omp_set_num_threads(1);
  dense_f64(one.data(), x.data(), w.data(), n, c, oc);
  omp_set_num_threads(4);
  dense_f64(team.data(), x.data(), w.data(), n, c, oc);
  std::vector<double> team_packed(n * oc);
  dense_f64(team_packed.data(), x.data(), DenseF64Weights(w, c, oc), n);
  omp_set_num_threads(omp_get_num_procs());
  CHECK(same_bits(one, want));
  CHECK(same_bits(team, want));
  CHECK(same_bits(team_packed, want));
}

}  // namespace drift::test_dense_f64
