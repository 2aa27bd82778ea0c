// JSON has no infinity or NaN: drift's output files write a non-finite number as null, so that
// every reader (Python's json, pandas, jq) parses them; a diverged run's loss reads as null.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>

namespace drift::io {

inline nlohmann::ordered_json finite_or_null(double x) {
  return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json(nullptr);
}

}  // namespace drift::io
