// Operand quantization (arith/quantize.h) cut into the per-thread steps of the CUDA quantize
// kernels, as host/device functions: what each kernel thread runs, and what the host tests run in
// plain loops and compare bit for bit with quantize_into (tests/test_backend_quantize.cpp).
//
// One operand (rows x k, element (r, c) at x[r*rs + c*cs]) takes up to three passes:
//   1. input counts  tensor, nvfp4: largest finite |x| and NaN/inf count of the tensor (its amax
//                    sets the tensor-level scale, computed on the host: quantize_plan.h);
//                    block kinds: the same per row block (row r, block bi along k), kept for pass 2
//   2. region scales block kinds: one thread per scale region (1 x block, or block x block when 2-D):
//                    the region's amax from its row blocks, then block_scale_of (the CPU's own step)
//   3. elements      every element scaled by its region's (or the tensor's) multiplier and rounded
//                    by quantize_scaled; stochastic rounding draws word r*k + c of (seed, stream),
//                    the word the CPU quantizer draws for it
// Every count is an integer sum, extremum or maximum, so any reduction order (threads, atomics)
// gives the CPU's totals exactly (QuantCounts).
#pragma once

#include <cstdint>

#include "arith/quantize_element.h"

namespace drift {

// Region states written by pass 2.
enum : uint8_t { kRegionScaled = 0, kRegionExact = 1, kRegionNan = 2 };

// Everything the passes of one operand read and write. Pointers address host or device memory.
struct QuantizePlan {
  const double* x = nullptr;  // the input (after the Hadamard transform, when there is one)
  uint64_t rs = 0, cs = 0;    // element (r, c) at x[r*rs + c*cs]
  uint64_t rows = 0, k = 0;
  Format format;              // element format and rounding
  RoundSpec round;
  Format fp32;                // IEEE binary32 (scaled_value's exact route)
  uint64_t seed = 0, stream = 0;
  // none, tensor, delayed: one multiplier for every element (none: 1, exact).
  double mult = 1.0;
  bool mult_exact = true;
  bool count_in_pass3 = false;  // none, delayed: the input counts come from the element pass
  // block, tile, nvfp4:
  uint64_t block = 0;           // k extent of a scale block
  uint64_t blocks_per_row = 0;
  uint64_t region_rows = 1;     // rows of a scale region: block when 2-D, else 1
  BlockScaleSpec spec;
  double* rb_amax = nullptr;          // pass 1 -> 2: rows x blocks_per_row, largest finite |x|
  uint32_t* rb_nonfinite = nullptr;   //              rows x blocks_per_row, NaN/inf count
  double* region_mult = nullptr;      // pass 2 -> 3: groups x blocks_per_row
  uint8_t* region_state = nullptr;    //              kRegionScaled / kRegionExact / kRegionNan
  double* block_scale = nullptr;      // pass 2 output: rows x blocks_per_row (QuantizedOperand::block_scale)
  // Pass 3 output, rows x k: q (doubles) or, when set, qf (floats: the element format fits in float).
  double* q = nullptr;
  float* qf = nullptr;
};

// The input counts of some elements: largest finite magnitude, number of NaN/inf.
struct InputCounts {
  double amax = 0;
  uint64_t nonfinite = 0;
  DRIFT_HD void add(double v) {
    if (!quant::finite(v)) ++nonfinite;
    else if (abs_of(v) > amax) amax = abs_of(v);
  }
};

// Everything the passes add up for one operand: integer sums and maxima (any order gives the same
// totals). The CUDA kernels add into one of these in device memory with atomics.
struct QuantCounts {
  static constexpr int kHistOffset = 160;  // QuantStats::kScaleExpOffset
  unsigned long long clipped = 0, flushed = 0, subnormal = 0;
  unsigned long long nonfinite = 0;          // NaN/inf inputs
  unsigned long long nonfinite_values = 0;   // NaN/inf results (for the matmul's fast-path check)
  unsigned long long amax_bits = 0;          // largest finite |input|, as its encoding: non-negative
                                             // doubles order as their encodings, so an integer max works
  unsigned long long scale_count = 0;
  long long scale_exp_sum = 0;               // an integer sum (QuantStats keeps it as a double)
  int scale_exp_min = 2147483647, scale_exp_max = -2147483647 - 1;
  unsigned long long scale_exp_hist[2 * kHistOffset + 1] = {};
};

// Element (r, c) of the e-th element in memory order (reads coalesce whichever way x is stored).
DRIFT_HD void element_at(const QuantizePlan& p, uint64_t e, uint64_t* r, uint64_t* c) {
  if (p.cs == 1 || p.rs != 1) {
    *r = e / p.k;
    *c = e % p.k;
  } else {
    *r = e % p.rows;
    *c = e / p.rows;
  }
}

DRIFT_HD double input_at(const QuantizePlan& p, uint64_t r, uint64_t c) { return p.x[r * p.rs + c * p.cs]; }

// Row block (r, bi) of the i-th pass-1 thread: neighbouring threads take neighbouring rows when x is
// stored column by column (their reads then coalesce), else neighbouring blocks of one row.
DRIFT_HD void row_block_at(const QuantizePlan& p, uint64_t i, uint64_t* r, uint64_t* bi) {
  if (p.cs == 1 || p.rs != 1) {
    *r = i / p.blocks_per_row;
    *bi = i % p.blocks_per_row;
  } else {
    *r = i % p.rows;
    *bi = i / p.rows;
  }
}

// Pass 1, block kinds: the counts of row block (r, bi), stored for pass 2 and returned for the totals.
DRIFT_HD InputCounts row_block_counts(const QuantizePlan& p, uint64_t r, uint64_t bi) {
  InputCounts n;
  const uint64_t c0 = bi * p.block, c1 = p.k - c0 < p.block ? p.k : c0 + p.block;
  for (uint64_t c = c0; c < c1; ++c) n.add(input_at(p, r, c));
  p.rb_amax[r * p.blocks_per_row + bi] = n.amax;
  p.rb_nonfinite[r * p.blocks_per_row + bi] = static_cast<uint32_t>(n.nonfinite ? 1 : 0);
  return n;
}

// Scale regions of a block-scaled operand (pass 2 has one thread per region).
DRIFT_HD uint64_t region_count(const QuantizePlan& p) {
  return (p.rows + p.region_rows - 1) / p.region_rows * p.blocks_per_row;
}

// Pass 2: region number `region` (row group g = region / blocks_per_row, block bi): its amax from
// its row blocks, its scale written to every row of it, its multiplier kept for pass 3. A region
// with a NaN or inf has a NaN scale and reads as NaN (as quantize_into marks it). Returns true and
// sets *e when the scale counts in the scale statistics (a finite non-zero amax, as the CPU records).
DRIFT_HD bool region_scale_step(const QuantizePlan& p, uint64_t region, int* e) {
  const uint64_t g = region / p.blocks_per_row, bi = region % p.blocks_per_row;
  const uint64_t r0 = g * p.region_rows, r1 = p.rows - r0 < p.region_rows ? p.rows : r0 + p.region_rows;
  double amax = 0;
  bool nonfinite = false;
  for (uint64_t r = r0; r < r1; ++r) {
    const uint64_t i = r * p.blocks_per_row + bi;
    nonfinite = nonfinite || p.rb_nonfinite[i] != 0;
    if (p.rb_amax[i] > amax) amax = p.rb_amax[i];
  }
  if (nonfinite) {
    for (uint64_t r = r0; r < r1; ++r) p.block_scale[r * p.blocks_per_row + bi] = quiet_nan();
    p.region_state[region] = kRegionNan;
    return false;
  }
  const BlockScale bs = block_scale_of(p.spec, amax);
  for (uint64_t r = r0; r < r1; ++r) p.block_scale[r * p.blocks_per_row + bi] = bs.stored;
  p.region_mult[region] = bs.mult;
  p.region_state[region] = bs.exact ? kRegionExact : kRegionScaled;
  return amax != 0 && scale_exponent_of(bs.stored, e);
}

// Flag of a NaN or inf result (not a QuantStats count: it tells the matmul whether its fast path may run).
enum : uint8_t { kElemNonfiniteValue = 8 };

// Pass 3: element (r, c) scaled, rounded and stored; returns the kElem* flags of what happened.
// The input value (for pass-3 input counts) is left in *v.
DRIFT_HD uint8_t quantize_step(const QuantizePlan& p, uint64_t r, uint64_t c, double* v) {
  *v = input_at(p, r, c);
  double mult = p.mult;
  bool exact = p.mult_exact;
  const uint64_t idx = r * p.k + c;
  if (p.block) {
    const uint64_t region = (r / p.region_rows) * p.blocks_per_row + c / p.block;
    const uint8_t state = p.region_state[region];
    if (state == kRegionNan) {  // marked NaN, not rounded (no element counts)
      if (p.qf) p.qf[idx] = static_cast<float>(quiet_nan());
      else p.q[idx] = quiet_nan();
      return kElemNonfiniteValue;
    }
    mult = p.region_mult[region];
    exact = state == kRegionExact;
  }
  const double scaled = scaled_value(*v, mult, exact, p.fp32);
  const uint32_t rnd = p.round.mode == Rounding::sr ? random_u32(p.seed, p.stream, idx) : 0;
  const ElementOutcome o = quantize_scaled(scaled, p.format, p.round, rnd);
  if (p.qf) p.qf[idx] = static_cast<float>(o.value);  // exact: the grid fits in float
  else p.q[idx] = o.value;
  return static_cast<uint8_t>(o.flags | (quant::finite(o.value) ? 0 : kElemNonfiniteValue));
}

// The random Hadamard transform of an operand before it is quantized: group g (n values along k)
// of row r read from the input and written transformed into out (rows x k, k contiguous); a
// trailing partial group is copied as is (as hadamard_rows leaves it).
struct HadamardPlan {
  const double* x = nullptr;
  uint64_t rs = 0, cs = 0, rows = 0, k = 0;
  int n = 16;
  uint64_t seed = 0;
  double* out = nullptr;
};

DRIFT_HD uint64_t hadamard_groups_per_row(const HadamardPlan& p) { return (p.k + p.n - 1) / p.n; }

DRIFT_HD void hadamard_step(const HadamardPlan& p, uint64_t r, uint64_t g) {
  double v[32];
  const uint64_t c0 = g * p.n, len = p.k - c0 < static_cast<uint64_t>(p.n) ? p.k - c0 : p.n;
  for (uint64_t i = 0; i < len; ++i) v[i] = p.x[r * p.rs + (c0 + i) * p.cs];
  if (len == static_cast<uint64_t>(p.n)) hadamard_group(v, p.n, p.seed);
  for (uint64_t i = 0; i < len; ++i) p.out[r * p.k + c0 + i] = v[i];
}

}  // namespace drift
