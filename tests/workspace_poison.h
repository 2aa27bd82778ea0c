// Shared by the workspace tests (test_matmul_workspace, test_quantize_workspace): every value a
// reused workspace holds turned to NaN (integers: half their largest value, an alignment exponent
// far above any real one) before a call, so a call that read anything it did not write first would
// show it in its result.
#pragma once

#include <limits>
#include <type_traits>

namespace drift::testing {

template <typename V>
void poison(V& v) {
  using T = typename V::value_type;
  const T bad = std::is_floating_point_v<T> ? std::numeric_limits<T>::quiet_NaN() : std::numeric_limits<T>::max() / 2;
  for (auto& x : v) x = bad;
}

}  // namespace drift::testing
