// Shared by the workspace tests (test_matmul_workspace, test_quantize_workspace): every value a
// reused workspace holds turned to NaN before a call, so a call that read anything it did not write
// first would show it in its result.
#pragma once

#include <limits>

namespace drift::testing {

template <typename V>
void poison(V& v) {
  for (auto& x : v) x = std::numeric_limits<typename V::value_type>::quiet_NaN();
}

}  // namespace drift::testing
