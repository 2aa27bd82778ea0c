// The layers' elementwise passes that split over a team when large (model/layers.h): the bias's
// column sums, each column added in row order, must give the plain loop's bits at any thread count.
#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/layers.h"

using namespace drift;

TEST_CASE("layers: a bias gradient's column sums on a team equal the row-order loop, bit for bit") {
  // 1000 columns (not a multiple of the 256-column chunks) x 300 rows: above the team threshold.
  const size_t n = 300, oc = 1000;
  std::vector<float> dout(n * oc), start(oc);
  // Each row's scale differs from its neighbours' (2^-12 .. 2^12, both signs), so the sums round and
  // their order shows in the bits.
  for (size_t r = 0; r < n; ++r)
    for (size_t j = 0; j < oc; ++j) {
      const size_t i = r * oc + j;
      const int exponent = static_cast<int>((r * 7 + j * 3) % 25) - 12;
      dout[i] = static_cast<float>((i * 7919) % 4001 + 1) * (i % 3 ? 1.0f : -1.0f) * std::ldexp(1.0f, exponent);
    }
  for (size_t j = 0; j < oc; ++j) start[j] = 0.5f * static_cast<float>(j);
  std::vector<float> want = start;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < oc; ++j) want[j] += dout[i * oc + j];
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> got = start;
    add_column_sums(got.data(), dout.data(), n, oc);
    CAPTURE(threads);
    CHECK(std::memcmp(got.data(), want.data(), oc * sizeof(float)) == 0);
  }
  omp_set_num_threads(saved);
  // (The sums in another order would differ: the check above can fail.)
  std::vector<float> reversed = start;
  for (size_t i = n; i-- > 0;)
    for (size_t j = 0; j < oc; ++j) reversed[j] += dout[i * oc + j];
  CHECK(std::memcmp(reversed.data(), want.data(), oc * sizeof(float)) != 0);
}
