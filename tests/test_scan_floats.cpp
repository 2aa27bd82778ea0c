// scan_floats (arith/matmul_in_place.h), the in-place route's operand scan whose amax and subnormal
// count become the run's telemetry: on every SIMD target, the same smallest non-zero, largest
// magnitude, subnormal count and non-finite flag as a plain loop, for shapes around the vector
// width and its unrolled pairs, row strides wider than the rows, and values that are zero, signed,
// subnormal, huge, inf and NaN.
#include <doctest/doctest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "arith/matmul.h"
#include "arith/matmul_in_place.h"
#include "arith/random.h"

namespace drift::test_scan_floats {
namespace {

float value(uint64_t stream, uint64_t i, bool specials) {
  const uint32_t r = random_u32(21, stream, i);
  switch (r % 11) {
    case 0: return (r & 64) ? -0.0f : 0.0f;
    case 1: {  // a subnormal
      const uint32_t u = ((r >> 9) & 0x7fffffu) | 1u | (r & 0x80000000u);
      float f;
      std::memcpy(&f, &u, sizeof f);
      return f;
    }
    case 2:
      if (specials && (r >> 20) % 13 == 0) return (r & 128) ? NAN : -INFINITY;
      return (r & 2) ? 0x1.fffffep127f : -0x1p-126f;
    default: return std::ldexp(1.0f + static_cast<float>(r >> 9) / 8388608.0f, static_cast<int>(r % 200) - 100) *
                    ((r & 4) ? -1.0f : 1.0f);
  }
}

}  // namespace

TEST_CASE("scan_floats == a plain loop, every target, shapes around the vector width") {
  const std::vector<int64_t> targets = matmul_fast_targets();
  REQUIRE(!targets.empty());
  struct Reset {
    ~Reset() { hwy::SetSupportedTargetsForTest(0); }
  } reset;
  const size_t cols_list[] = {1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100};
  uint64_t stream = 0;
  for (size_t rows : {size_t{1}, size_t{3}, size_t{8}})
    for (size_t cols : cols_list)
      for (bool specials : {false, true}) {
        ++stream;
        const size_t ld = cols + 5;
        std::vector<float> v(rows * ld);
        for (size_t i = 0; i < v.size(); ++i) v[i] = value(stream, i, specials);
        double mn = INFINITY, mx = 0;
        uint64_t sub = 0;
        bool bad = false;
        for (size_t r = 0; r < rows; ++r)
          for (size_t c = 0; c < cols; ++c) {
            const float x = v[r * ld + c];
            if (!std::isfinite(x)) {
              bad = true;
              continue;
            }
            const double a = std::fabs(static_cast<double>(x));
            mx = std::max(mx, a);
            if (a != 0) mn = std::min(mn, a);
            if (a != 0 && a < 0x1p-126) ++sub;
          }
        for (int64_t target : targets) {
          CAPTURE(hwy::TargetName(target));
          CAPTURE(rows);
          CAPTURE(cols);
          CAPTURE(specials);
          hwy::SetSupportedTargetsForTest(target);
          const FloatScan s = scan_floats(v.data(), rows, cols, ld);
          CHECK((s.nonfinite != 0) == bad);
          CHECK(s.subnormal == sub);  // counted over every finite value
          if (!bad) {
            CHECK(s.max == mx);
            CHECK(s.min_nonzero == mn);
          }
        }
        hwy::SetSupportedTargetsForTest(0);
      }
}

}  // namespace drift::test_scan_floats
