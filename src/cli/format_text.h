// Printing numbers for people and for scripts.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace drift::cli {

// Shortest decimal that reads back to the same double ("nan", "inf", "-inf" for the specials).
inline std::string shortest(double x) {
  if (x != x) return "nan";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

// A duration for a progress line: "42.5s", "3m07s", "2h05m".
inline std::string duration_text(double s) {
  char b[32];
  if (s >= 3600)
    std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(std::fmod(s, 3600) / 60));
  else if (s >= 60)
    std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(std::fmod(s, 60)));
  else
    std::snprintf(b, sizeof b, "%.1fs", s);
  return b;
}

}  // namespace drift::cli
