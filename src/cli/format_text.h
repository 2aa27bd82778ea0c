// Printing numbers for people and for scripts.
#pragma once

#include <charconv>
#include <string>

namespace drift::cli {

// Shortest decimal that reads back to the same double ("nan", "inf", "-inf" for the specials).
inline std::string shortest(double x) {
  if (x != x) return "nan";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

}  // namespace drift::cli
