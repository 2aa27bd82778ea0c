// arith/layernorm_sums.h: LayerNorm's row sums (tests/test_layernorm_rows.cpp holds the model's
// whole layer to its own one-row statement). The statements (the row-by-row loops) are checked
// against hand-derived rows and against fp64 sums; the float spans, on every SIMD target, against
// the statements bit for bit, over row counts and widths around the 16-row lanes and the 16-column
// blocks, with values at the edges (NaN, infinities, zeros of both signs, subnormals, sums that
// overflow) and rows whose every element differs, so that a value moved to the wrong lane or
// column, or an add taken out of its row's order, shows. A NaN result matches any NaN: IEEE 754
// leaves the payload of an operation on two NaNs (or an invalid one on a NaN) to the implementation,
// and which operand x86 passes on follows the order the compiler wrote the add's operands in, in the
// scalar statement as in the lanes.
#include <doctest/doctest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "arith/layernorm_sums.h"
#include "arith/random.h"
#include "same_bits.h"

namespace drift::test_layernorm_sums {

using drift::testing::same_bits;

namespace {

struct ResetTargets {
  ~ResetTargets() { hwy::SetSupportedTargetsForTest(0); }
};

// Element i: mostly values of ordinary size and both signs (LayerNorm's inputs), with rarer ones of
// any magnitude and, when `edges`, the special values.
float value(uint64_t seed, size_t i, bool edges) {
  const uint32_t r = random_u32(seed, 21, i);
  if (edges) switch (r % 41) {
      case 0: return std::numeric_limits<float>::quiet_NaN();
      case 1: return (r & 64) ? INFINITY : -INFINITY;
      case 2: return (r & 64) ? 0.0f : -0.0f;
      case 3: return (r & 64) ? std::numeric_limits<float>::max() : -std::numeric_limits<float>::denorm_min();
      case 4: {
        const uint32_t u = random_u32(seed, 22, i) & 0x807fffffu;  // a subnormal of either sign
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
      }
      default: break;
    }
  const float unit = static_cast<float>(random_u32(seed, 23, i)) * 0x1p-32f - 0.5f;
  return (r % 7 == 0) ? std::ldexp(unit, static_cast<int>(r % 61) - 30) : 4.0f * unit;
}

std::vector<float> values(uint64_t seed, size_t n, bool edges) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(seed, i, edges);
  return v;
}

// Bit for bit, but any NaN for a NaN.
bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}

const size_t kRowCounts[] = {0, 1, 7, 15, 16, 17, 32, 40, 64};
const size_t kWidths[] = {1, 3, 15, 16, 17, 31, 32, 48, 128, 130};

// fn(edges, n, c, seed) over every row count and width, with and without edge values.
template <class Fn>
void each_case(uint64_t base, Fn fn) {
  for (bool edges : {false, true})
    for (size_t n : kRowCounts)
      for (size_t c : kWidths) {
        CAPTURE(edges);
        CAPTURE(n);
        CAPTURE(c);
        fn(edges, n, c, base + n * 1000 + c + (edges ? 7 : 0));
      }
}

}  // namespace

TEST_CASE("layernorm_stats_rows: a row by hand, and rows against fp64") {
  // x = 1, 2, 3, 4: the sum 10 and the mean 2.5 are exact; the squared deviations 2.25, 0.25, 0.25,
  // 2.25 add to 5 exactly, so v = 1.25 and rstd = fp32(1 / fp32(sqrt(fp32(1.25 + fp32(1e-5))))).
  const float x[4] = {1, 2, 3, 4};
  float mean = 0, rstd = 0;
  layernorm_stats_rows<1>(x, 4, &mean, &rstd);
  CHECK(mean == 2.5f);
  const volatile float var_eps = 1.25f + static_cast<float>(1e-5);  // (one float add, as the statement)
  CHECK(rstd == 1.0f / std::sqrt(static_cast<float>(var_eps)));
  CHECK(std::fabs(static_cast<double>(rstd) - 1.0 / std::sqrt(1.25)) < 1e-5);
  // Ordinary rows (values in [-2, 2)): within the error bound of a float sum in index order,
  // (c - 1) * 2^-24 * sum |x| (first order), of the fp64 statistics.
  const size_t c = 128;
  std::vector<float> rows(8 * c);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(random_u32(5, 24, i)) * 0x1p-30f - 2.0f;
  float m[8], s[8];
  layernorm_stats_rows<8>(rows.data(), c, m, s);
  for (size_t r = 0; r < 8; ++r) {
    double sum = 0, sum_abs = 0, sq = 0;
    for (size_t j = 0; j < c; ++j) sum += rows[r * c + j], sum_abs += std::fabs(rows[r * c + j]);
    const double mu = sum / c;
    for (size_t j = 0; j < c; ++j) sq += (rows[r * c + j] - mu) * (rows[r * c + j] - mu);
    CHECK(std::fabs(m[r] - mu) <= 2.0 * c * 0x1p-24 * sum_abs / c);
    // The variance's sum bounds its own error the same way (its terms are squares, all positive).
    CHECK(std::fabs(s[r] * std::sqrt(sq / c + 1e-5) - 1.0) <= 4.0 * c * 0x1p-24);
  }
}

TEST_CASE("layernorm_backward_means_rows: a row by hand") {
  // x = 1, 3 (mean 2, rstd 1: norm = -1, 1), w = 2, 0.5, dy = 3, 4: dnorm = 6, 2, whose mean is 4;
  // dnorm * norm = -6, 2, whose mean is -2. Every step is exact.
  const float x[2] = {1, 3}, dy[2] = {3, 4}, w[2] = {2, 0.5f}, mean = 2, rstd = 1;
  float dm = 0, dnm = 0;
  layernorm_backward_means_rows<1>(x, dy, w, &mean, &rstd, 2, &dm, &dnm);
  CHECK(dm == 4.0f);
  CHECK(dnm == -2.0f);
}

TEST_CASE("layernorm_stats_floats: every target gives the statement's bits") {
  ResetTargets reset;
  each_case(100, [](bool edges, size_t n, size_t c, uint64_t seed) {
    const std::vector<float> x = values(seed, n * c, edges);
    std::vector<float> mean_ref(n), rstd_ref(n);
    layernorm_stats_scalar(x.data(), n, c, mean_ref.data(), rstd_ref.data());
    for (int64_t target : layernorm_sums_targets()) {
      CAPTURE(hwy::TargetName(target));
      hwy::SetSupportedTargetsForTest(target);
      std::vector<float> mean(n, -1.0f), rstd(n, -1.0f);
      layernorm_stats_floats(x.data(), n, c, mean.data(), rstd.data());
      CHECK(same_values(mean, mean_ref));
      CHECK(same_values(rstd, rstd_ref));
    }
    hwy::SetSupportedTargetsForTest(0);
  });
}

TEST_CASE("layernorm_backward_means_floats: every target gives the statement's bits") {
  ResetTargets reset;
  each_case(200, [](bool edges, size_t n, size_t c, uint64_t seed) {
    const std::vector<float> x = values(seed, n * c, edges), dy = values(seed + 1, n * c, edges);
    const std::vector<float> w = values(seed + 2, c, edges);
    std::vector<float> mean(n), rstd(n);
    layernorm_stats_scalar(x.data(), n, c, mean.data(), rstd.data());
    std::vector<float> dm_ref(n), dnm_ref(n);
    layernorm_backward_means_scalar(x.data(), dy.data(), w.data(), mean.data(), rstd.data(), n, c, dm_ref.data(),
                                    dnm_ref.data());
    for (int64_t target : layernorm_sums_targets()) {
      CAPTURE(hwy::TargetName(target));
      hwy::SetSupportedTargetsForTest(target);
      std::vector<float> dm(n, -1.0f), dnm(n, -1.0f);
      layernorm_backward_means_floats(x.data(), dy.data(), w.data(), mean.data(), rstd.data(), n, c, dm.data(),
                                      dnm.data());
      CHECK(same_values(dm, dm_ref));
      CHECK(same_values(dnm, dnm_ref));
    }
    hwy::SetSupportedTargetsForTest(0);
  });
}

}  // namespace drift::test_layernorm_sums
