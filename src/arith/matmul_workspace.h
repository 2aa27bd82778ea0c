// The matmul engine's scratch memory, owned by the caller and handed down in MatmulContext
// (ctx.workspace) instead of hidden per-thread buffers: the operands as quantized and the
// quantizer's scratch, the fast path's packed operands, block scales and C. It grows to the largest call and is reused, never cleared
// (every element the engine reads is written first), so a caller that makes many calls (the model's
// matmul sites, drift bench) keeps one and pays for its pages once. One workspace serves one call at
// a time. A call without one (ctx.workspace null) uses a fresh workspace of its own: the same
// results, with the allocation in every call.
#pragma once

#include <vector>

#include "arith/matmul.h"
#include "arith/quantize_workspace.h"

namespace drift {

// The fast path's buffers (arith/matmul_fast.cpp), for one output type.
struct FastScratch {
  std::vector<float> a, b, c, sa, sb;                  // A, B in strips, C, the block scales (float kernels)
  std::vector<float> bt;                               // B transposed (the fused kernel's packing)
  std::vector<double> bd, aq_wide;                     // the fused kernel's doubles
  std::vector<int32_t> ea, ea8;                        // and alignment exponents (A's paired, per pair)
  std::vector<int16_t> eb;
  std::vector<uint32_t> a_pairs, b_pairs;             // A and B as bf16 pairs (arith/matmul_pairs.h)
};

struct MatmulWorkspace {
  PreparedOperands ops_double, ops_float;  // the operands of the double and of the float entry
  std::vector<double> wide_c;              // the float entry's C from the double-only paths
  std::vector<double> wide_a, wide_b;      // the float entry's diagnostic passes: A and B as doubles
  FastScratch fast_double, fast_float;     // the fast path writing C as double, as float
  QuantizeWorkspace quantize;              // the operand quantizer's (arith/quantize_workspace.h)
};

}  // namespace drift
