// transpose_floats (arith/transpose.h): the same bits as the element-by-element statement of the
// transpose, on every SIMD target, for shapes around the 4 x 4 blocks and the 32-column panels, with
// and without the accumulating add, and with row strides wider than the rows.
#include <doctest/doctest.h>
#include <hwy/targets.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "arith/random.h"
#include "arith/transpose.h"

namespace drift::test_transpose {
namespace {

float draw(uint64_t stream, uint64_t i) {
  const uint32_t r = random_u32(5, stream, i);
  float f;
  const uint32_t u = (r & 0x807fffffu) | ((100u + (r >> 23) % 50u) << 23);  // finite, varied magnitudes
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

TEST_CASE("transpose_floats: a transpose large enough to split over a team gives the statement's bits") {
  // 300 x 250 floats: past the size at which the column panels are split over the threads, with a
  // last panel pair of 10 columns; one thread and two.
  const size_t rows = 300, cols = 250, lds = cols + 5, ldd = rows + 1;
  std::vector<float> src(rows * lds), dst0(cols * ldd);
  for (size_t i = 0; i < src.size(); ++i) src[i] = draw(3, i);
  for (size_t i = 0; i < dst0.size(); ++i) dst0[i] = draw(4, i);
  struct Reset {
    int threads = omp_get_max_threads();
    ~Reset() { omp_set_num_threads(threads); }
  } reset;
  for (bool add : {false, true}) {
    std::vector<float> want = dst0;
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c)
        want[c * ldd + r] = add ? dst0[c * ldd + r] + src[r * lds + c] : src[r * lds + c];
    for (int threads : {1, 2}) {
      CAPTURE(add);
      CAPTURE(threads);
      omp_set_num_threads(threads);
      std::vector<float> got = dst0;
      transpose_floats(src.data(), rows, cols, lds, got.data(), ldd, add);
      CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("transpose_floats == the element-by-element transpose, with and without add, every target") {
  const std::vector<int64_t> targets = transpose_targets();
  REQUIRE(!targets.empty());
  struct Reset {
    ~Reset() { hwy::SetSupportedTargetsForTest(0); }
  } reset;
  const size_t sizes[] = {1, 3, 4, 5, 8, 31, 32, 33, 70};
  for (size_t rows : sizes)
    for (size_t cols : sizes)
      for (bool add : {false, true}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(add);
        const size_t lds = cols + 3, ldd = rows + 2;
        std::vector<float> src(rows * lds), dst0(cols * ldd);
        for (size_t i = 0; i < src.size(); ++i) src[i] = draw(1, i);
        for (size_t i = 0; i < dst0.size(); ++i) dst0[i] = draw(2, i);
        // The statement: dst[c][r] = src[r][c], or dst[c][r] + src[r][c] in fp32; padding untouched.
        std::vector<float> want = dst0;
        for (size_t r = 0; r < rows; ++r)
          for (size_t c = 0; c < cols; ++c)
            want[c * ldd + r] = add ? dst0[c * ldd + r] + src[r * lds + c] : src[r * lds + c];
        std::vector<float> scalar = dst0;
        transpose_floats_scalar(src.data(), rows, cols, lds, scalar.data(), ldd, add);
        CHECK(std::memcmp(scalar.data(), want.data(), want.size() * sizeof(float)) == 0);
        for (int64_t target : targets) {
          hwy::SetSupportedTargetsForTest(target);
          CAPTURE(hwy::TargetName(target));
          std::vector<float> got = dst0;
          transpose_floats(src.data(), rows, cols, lds, got.data(), ldd, add);
          CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
        }
        hwy::SetSupportedTargetsForTest(0);
      }
}

}  // namespace drift::test_transpose
