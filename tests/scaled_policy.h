// A matmul policy whose operands are both of one element format under one scaling (MX blocks,
// NVFP4, per tensor, ...), everything else the default (fp32 sums): the policies the matmul suites
// run their kernels against the reference with.
#pragma once

#include "arith/catalogue.h"
#include "arith/matmul.h"

namespace drift::testing {

inline MatmulPolicy scaled_policy(const char* elem, ScaleKind kind, int block) {
  MatmulPolicy p;
  p.a.format = p.b.format = *find_format(elem);
  p.a.scaling.kind = p.b.scaling.kind = kind;
  p.a.scaling.block = p.b.scaling.block = block;
  return p;
}

}  // namespace drift::testing
