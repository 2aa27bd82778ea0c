// What the engine measures when a diagnostic pass asks for it (MatmulContext::cast_error,
// MatmulContext::check_bound): plain counters, merged over calls like the rest of MatmulTelemetry.
#pragma once

#include <cstdint>

namespace drift {

// Cast error of one quantized operand, size versus direction (arith/cast_error.h).
struct CastErrorStats {
  uint64_t elements = 0;   // finite inputs compared
  uint64_t shrank = 0;     // |Q(x)| < |x|
  double err_sq = 0;       // sum (Q(x) - x)^2
  double x_sq = 0;         // sum x^2
  double signed_err = 0;   // sum (Q(x) - x) * sign(x): negative when magnitudes shrink
  double abs_x = 0;        // sum |x|
  void merge(const CastErrorStats& o);
  // ||Q(x) - x|| / ||x|| (0 when x is all zero).
  double rel_error() const;
  // mean((Q(x) - x) sign(x)) / mean|x|: negative when the cast shrinks magnitudes on balance, 0 when
  // the errors cancel.
  double one_sidedness() const;
  // Fraction of the compared elements whose magnitude shrank.
  double shrank_fraction() const;
};

// The forward-error bound check of matmul outputs (arith/error_bound.h).
struct BoundCheck {
  uint64_t checked = 0;     // output elements compared with their bound
  uint64_t unchecked = 0;   // elements without a finite bound (a format's range reached, non-finite values)
  uint64_t violations = 0;  // |C - C_exact| > bound: a bug in the engine or in the bound
  double max_ratio = 0;     // largest |C - C_exact| / bound over the checked elements
  void merge(const BoundCheck& o);
};

}  // namespace drift
