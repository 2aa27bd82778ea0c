// Operands the float entry hands the fast path without quantizing them: an fp32 operand whose
// quantizer is the identity (fp32 grid with subnormals kept, no scaling, no transform) quantizes
// every finite float to itself, so its quantized operand IS the caller's tensor. The entry scans it
// once for the telemetry (identity_quant_stats) and the fast kernel reads it where it lies: no copy
// for A stored M x K, one packing pass for B. (An fp32-passthrough training step is mostly these.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "arith/matmul.h"

namespace drift {

// A canonical operand (rows x k, as PreparedOperands holds it) read in place: element (r, t) at
// p[r * rs + t * cs]; every value finite; its magnitude range taken by the entry's scan.
struct InPlaceOperand {
  const float* p = nullptr;
  size_t rs = 0, cs = 1;
  double min_nonzero = 0, max = 0;  // smallest non-zero and largest |value| (min_nonzero inf when all zero)
};

// One read of a rows x cols block of floats (row stride ld): the magnitude range, and the counts an
// identity quantization records.
struct FloatScan {
  double min_nonzero = 0, max = 0;  // smallest non-zero (inf when none) and largest |v|
  uint64_t nonfinite = 0;           // non-zero when a NaN or inf is present (then the range means nothing)
  uint64_t subnormal = 0;           // 0 < |v| < 2^-126
};
FloatScan scan_floats(const float* v, size_t rows, size_t cols, size_t ld);  // SIMD (matmul_fast.cpp)

// True when quantizing with q leaves every finite input unchanged: the identity the in-place route needs.
bool is_identity_quantizer(const Quantizer& q);

// How much of an in-place operand is read before the kernel runs.
enum class InPlaceScan {
  full,  // the magnitude range, the subnormal count (the telemetry's) and a NaN or inf
  none,  // nothing (a call whose telemetry nobody reads and whose kernel, the fp32 one without
         // swamping counts, declines a non-finite result itself): out.max is inf and
         // out.min_nonzero 0, "unknown", and q's statistics are its shape's alone
};

// Scans v, the float entry's A (as_b false) or B, for an in-place read (as `scan` says): with no NaN
// or inf found among its values, fills `out` and sets q to what quantize_into records for an
// identity quantizer (shape, stats; no values) and returns true; else returns false (q untouched).
bool in_place_operand(const MatViewF& v, bool as_b, QuantizedOperand& q, InPlaceOperand& out,
                      InPlaceScan scan = InPlaceScan::full);

// The fast path with either operand read in place (nullptr: from ops, as matmul_fast). ops.a / ops.b
// give the shapes, scales and stats; an in-place operand's values are not in them. Returns false,
// having done nothing the caller keeps, when the fast path cannot produce C (the caller then
// quantizes the operands the ordinary way and runs the reference).
bool matmul_fast_in_place(const PreparedOperands& ops, const InPlaceOperand* a, const InPlaceOperand* b, float* c,
                          size_t ldc, const MatmulPolicy& policy, const MatmulContext& ctx, MatmulTelemetry& tel);

}  // namespace drift
