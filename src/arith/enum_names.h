// Enums named by a table of names in enum order (as ggml's type traits): one helper for the value
// of a name and the name of a value, instead of a lookup loop per file.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace drift {

// The value named `s`: its position in `names`, as E (an enum in table order, or bool for a
// two-name table whose second name means true); nullopt when `s` is not in the table.
template <typename E, size_t N>
std::optional<E> enum_from_name(std::string_view s, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

// The same in the shape of the bool-returning parse_* functions: *out is set when found.
template <typename E, size_t N>
bool enum_from_name(std::string_view s, const char* const (&names)[N], E* out) {
  const std::optional<E> e = enum_from_name<E>(s, names);
  if (e) *out = *e;
  return e.has_value();
}

template <typename E, size_t N>
const char* enum_name(E e, const char* const (&names)[N]) {
  return names[static_cast<size_t>(e)];
}

}  // namespace drift
