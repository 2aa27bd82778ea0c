// Cast error of one quantized operand, size versus direction: how far Q(x) lies from x (relative
// error norm), whether the error leans one way (toward zero or away from it), and how many
// elements lost magnitude. Computed by the engine only when MatmulContext::cast_error is set.
#pragma once

#include <cstdint>

#include "arith/diag_stats.h"
#include "arith/quantize.h"

namespace drift {

// Adds the cast error of q (the quantized x: rows x k, values q.dequant(r, i)) to `stats`. Inputs
// that are not finite are skipped. With a Hadamard transform the operand lives in the rotated
// basis, where x itself is not available: nothing is added (elements stays 0).
void accumulate_cast_error(CastErrorStats& stats, const StridedInput& x, const QuantizedOperand& q, bool hadamard);

}  // namespace drift
