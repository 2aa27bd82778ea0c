// Bit-for-bit equality, what "the same result" means throughout drift's tests: a NaN equals itself
// when its payload does, and -0 is not +0 (== would say otherwise on both counts).
#pragma once

#include <cstring>
#include <type_traits>
#include <vector>

namespace drift::testing {

template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  // (Empty vectors compare without memcmp, whose pointers must not be null even for no bytes.)
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace drift::testing
