// A rigorous forward-error bound for one matmul under its policy, as a pure function of the
// policy and the quantized operands, and the check that compares it with what the engine computed.
// The derivation of every term is in docs/diagnostics.md ("Error-bound checks").
//
// The quantity bounded, per output element (i, j), is |C - E| where C is the engine's result and
//   E = alpha * sum_b S_b * sum_{k in b} a_q[i,k] b_q[k,j]     (S_b = sa(i,b) sb(b,j), alpha = ta tb)
// is the exact product of the dequantised operands. E is evaluated in fp64 (E~), and the bound
// includes the fp64 evaluation's own error, so the check |C - E~| <= bound is rigorous.
#pragma once

#include <cstddef>
#include <vector>

#include "arith/diag_stats.h"
#include "arith/matmul.h"

namespace drift {

struct MatmulErrorBound {
  size_t m = 0, n = 0;
  std::vector<double> bound;  // m x n: bound on |C - E~|; +inf where no finite bound holds
  std::vector<double> exact;  // m x n: E~, the fp64 product of the dequantised operands
};

// The bound for C = matmul(ops) under `policy` (ops as prepare_operands_into made them).
MatmulErrorBound matmul_error_bound(const PreparedOperands& ops, const MatmulPolicy& policy);

// Compares C (m x n, row stride ldc) with the bound, element by element.
BoundCheck check_matmul_bound(const PreparedOperands& ops, const MatmulPolicy& policy, const double* c, size_t ldc);

// Unit roundoff of one rounding to f under r: |round(x) - x| <= u |x| + eta (no overflow).
struct RoundingUnit {
  double u = 0, eta = 0;
};
RoundingUnit rounding_unit(const Format& f, const RoundSpec& r);

}  // namespace drift
