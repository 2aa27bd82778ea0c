// How good a gradient g is against the exact one g*: its direction (cosine), its size of error
// (||g - g*|| / ||g*||) and its bias (<g - g*, g*> / ||g*||^2: the signed error component along g*,
// relative to ||g*||). A large error that points nowhere leaves the bias near 0; a small error that
// points one way does not. Reported side by side per parameter tensor and over all of them.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/params.h"

namespace drift {

struct GradQuality {
  double cosine = 0;     // NaN when either gradient is zero
  double rel_error = 0;  // NaN when g* is zero
  double bias = 0;       // NaN when g* is zero
};

// Computed in double over n elements.
GradQuality grad_quality(const float* g, const double* ref, size_t n);

struct NamedGradQuality {
  std::string tensor;  // a parameter name, or "overall"
  GradQuality q;
};

// Every tensor of the table, in table order, then "overall" (the whole parameter vector).
std::vector<NamedGradQuality> grad_quality_by_tensor(const ParamTable& table, const float* g, const double* ref);

}  // namespace drift
