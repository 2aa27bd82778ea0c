// Data the fast matmul kernels share (matmul_fast.cpp and its -inl.h kernels): the packed operands
// of one call and the descriptions of the narrow accumulator and the fused model's groups.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "arith/fused_accum.h"
#include "arith/round.h"

namespace drift {

// How the inner sum of a block is accumulated.
enum class FastInner : uint8_t { fp32, narrow_rne, narrow_rtz, fused };

// The fused tensor-core model's groups over one K-block, in the order fused_dot forms them: chains
// (one per promotion segment, or one for the whole block), each a sequence of groups; a group's
// products are index[first .. first + n) (offsets from the block start).
struct FusedGroup {
  uint32_t first = 0, n = 0;  // into FusedPlan::index
  uint32_t start = 0;         // offset of the group's first product in the block (for the scalar core)
  int half = -1;              // -1: consecutive products; 0/1: FusedModel::interleave's half
};
struct FusedPlan {
  std::vector<uint32_t> index;
  std::vector<FusedGroup> groups;
  std::vector<uint32_t> chain_end;  // groups [chain_end[c-1], chain_end[c]) form chain c
};

// What the fused kernel reads besides the float operands (see FusedBlock).
// An alignment code in both int16 halves of an int32: the kernel broadcasts A's codes to int16
// lanes with a 32-bit broadcast, which x86 does as a plain load.
inline int32_t FusedPairedCode(int16_t code) {
  const uint32_t u = static_cast<uint16_t>(code);
  return static_cast<int32_t>(u | (u << 16));
}

// Narrow alignment codes (FusedOperands::ea8): an int8 code, zero's code (kZeroExp) as -128, the
// lowest, which saturates any sum with it below every sum of two real codes (>= -60).
inline int8_t FusedCode8(int code) { return static_cast<int8_t>(code < -128 ? -128 : code); }
inline int16_t FusedPairedCode8(int8_t lo, int8_t hi) {
  return static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint8_t>(lo) | (static_cast<uint8_t>(hi) << 8)));
}
constexpr int kFusedCode8Limit = 30;  // |code| bound of the int8 pass (sums of two stay within int8)

// The smallest q of the fused kernel's integer route (matmul_fused-inl.h): 2^-q a normal float, and a
// product below 2^-126 (rounded by the float multiply) still below 2^q. (The largest, 125 - kept_bits:
// products below 2^(E+2) <= 2^127.)
constexpr int kIntCutQMin = -125;

struct FusedOperands {
  const FusedModel* model = nullptr;
  // What the kernel reads: A (m x k) and B in strips of W columns, per k, as the route reads them
  // (below); the alignment exponents of A (m x k) and of B (strips of W columns, per k W codes;
  // kZeroExp for zeros).
  // The integer route (matmul_fused-inl.h, FusedIntCutTerms), where int_accs > 0: products exact in
  // float and a group's product cut terms adding exactly in int_accs int32 accumulators (1, 2 or 4),
  // with c's term too where !int_sum_may_wrap. A is read as floats
  // (af), B's strips as W floats per k (bf). It runs in float lanes (float_lanes) on AVX-512 and
  // AVX2 (four accumulators: AVX-512 only), else c and the sums go through double lanes. Otherwise A as doubles (a) and B split by sign, per k W values > 0 then W values
  // < 0, as doubles (b), in double lanes.
  bool float_lanes = false;
  int int_accs = 0;
  bool int_sum_may_wrap = false;
  const double* a = nullptr;
  const float* af = nullptr;
  const double* b = nullptr;
  const float* bf = nullptr;
  const int32_t* ea = nullptr;  // each code twice, in both int16 halves (FusedPairedCode)
  const int16_t* eb = nullptr;
  // What the scalar core reads on rare lanes: A (m x k) and B transposed (n x k), as the caller gave
  // them: doubles (aq, bq) or floats (aqf, bqf); bqf k-major (element (j, t) at bqf[t*n + j]) when
  // B was quantized so (QuantizedOperand::k_major).
  const double* aq = nullptr;
  const float* aqf = nullptr;
  const double* bq = nullptr;
  const float* bqf = nullptr;
  bool bqf_k_major = false;
  // Narrow exponents (AVX-512 and AVX2, every code in [-30, 30]: FP8 and fp16 inputs, or any whose
  // codes span at most 60 binades, shifted: code8_plan): the product exponents in int8 lanes, two rows
  // per vector. eb then holds each column's code twice (two int8 in an int16: FusedPairedCode8) and
  // ea8 each row pair's codes as int8 (first row, second row) twice in an int32; zero codes -128.
  // Null otherwise.
  const int32_t* ea8 = nullptr;
  // What was subtracted from the codes of A and B together (their sums) for the int8 pass; not 0
  // only with direct_scales, whose floor and bias add it back.
  int code8_shift = 0;
  const FusedPlan* plan_full = nullptr;  // blocks of kblock products
  const FusedPlan* plan_tail = nullptr;  // the last, shorter block (or nullptr)
  double min_align = 0;         // max(model.min_align_exp, kFloorExp)
  // Both floors on the alignment exponent E, out.emin (c's) and min_align, lie below kIntCutQMin +
  // kept_bits: a lane either would raise has q below the integer route's range whether raised or not,
  // and goes to the scalar core, so the route may leave both out (every fp32-output preset: out.emin
  // -126, min_align -133 or none).
  bool lean_floors = false;
  // Every non-zero term of a group is at least 2^-126, c included (FusedCutExponents' narrow form):
  // with lean_floors, where 2 in_emin - kept_bits >= -126. A product's exponent is at least
  // 2 in_emin, and c (+0 at the start of each FusedTileBlock chain, then the group results) is +-0 or
  // a group's sum of cut terms, a non-zero multiple of 2^q with q >= E - kept_bits >= 2 in_emin -
  // kept_bits, rounded into a format whose emin lies at or below -126 (lean_floors: every
  // fp32-output preset), so that it stays at least 2^-126 (the fp16 and FP8 inputs; not bf16's or
  // tf32's, whose in_emin is -126).
  bool narrow_terms = false;
  // The float lanes' scales 2^-q straight from the exponent fields (FusedCutScalesDirect), where no
  // lane with a non-zero term can fall below the integer route's range (pack_fused: float_lanes and
  // the int8 pass). Every such lane's E is at least direct_floor: with p the smallest exponent of a
  // non-zero product (2 in_emin, or the sum of the smallest codes of A's and B's non-zero values
  // where code8_plan looked at them), a product's exponent is at least p, and a non-zero c (+0 at
  // each chain's start, then a group result: a rounding, onto the output's grid, of a non-zero
  // multiple of 2^q >= 2^(p - kept_bits)) at least max(p - kept_bits, the output's smallest
  // exponent), a normal float, then clamped at out.emin. direct_floor is the lowest of these, raised
  // to min_align, and no lower than kIntCutQMin + kept_bits allows, nor, less code8_shift, than
  // -98, the largest sum of the int8 pass with a zero's code. The int8 pass floors the product part
  // of E at it: a lane whose products are all zero then reads E = direct_floor, in range, and gives
  // +0 if c = 0 too; the maximum with min_align moves into that floor (it never lowers a real E, and
  // raises exactly what the model raises); and the test against the route's lowest q goes.
  bool direct_scales = false;
  bool direct_clamp_c = false;  // c's exponent clamped at out.emin (out.emin above direct_floor)
  int direct_floor = 0;
};

// (kZeroExp, kFloorExp: arith/fused_accum.h, shared with group_in_double.)

// A narrow inner accumulator, as float encodings (see the file comment).
struct NarrowAcc {
  int shift = 0;             // 23 - man_bits: float mantissa bits below the format's last bit
  uint32_t min_normal_enc = 0;  // |sum| encodings below this (and above 0) take the scalar core
  uint32_t max_enc = 0;      // rounded encodings above this (overflow, inf, NaN) take the scalar core
  bool reverse = false;      // k descending within each block
  // Range tests the plain kernel makes at every add (TilesOf sets them from narrow_checks).
  bool check_tiny = true, check_huge = true;
  const float* zero_row = nullptr;  // k zeros: the A rows a partial tile is padded with
  const Format* format = nullptr;  // for the scalar core on the rare lanes
  const RoundSpec* round = nullptr;
};

// Packed operands of one call, in floats: A as M x K (row stride lda); B in column strips of 2
// vectors (strip s holds columns [2Ls, 2L(s+1)) as K rows of 2L contiguous floats); scales as floats.
struct FastOperands {
  size_t m = 0, n = 0, npad = 0, k = 0, kblock = 0, nblocks = 0;
  size_t outer_terms = 0;          // the policy's K-blocks (nblocks, unless a fused model chains them)
  const float* a = nullptr;        // m x k: element (i, t) at a[i * lda + t * a_col]
  size_t lda = 0, a_col = 1;       // rows: lda and 1; A read where it lies stored K x M: 1 and its ld
  const float* b = nullptr;        // npad / 2L strips of k x 2L: strip st's row t at b + st * b_strip + t * b_row
  size_t b_row = 0, b_strip = 0;   // packed: 2L and k * 2L; B read where it lies (K x N): its ldb and 2L
  bool b_rows_partial = false;     // B read where it lies with a last strip past n (the pair kernel pads it)
  const float* sa = nullptr;       // m x nblocks (nullptr: all 1)
  const float* sb = nullptr;       // nblocks x npad (nullptr: all 1)
  float alpha = 1.0f;
  double a_max = 0, b_max = 0;     // the largest operand magnitudes (taken while packing)
  FastInner inner = FastInner::fp32;
  NarrowAcc narrow;
  FusedOperands fused;
  bool use_fma = false;            // products exact only inside an fma
  bool count_swamping = false;     // count adds that lost all of an addend (as the reference does)
  bool parallel = true;            // run the row tiles on an OpenMP team (small calls: one thread)
  float* c = nullptr;              // m x n, row i at c + i * ldc (columns n..npad of the last strip are not stored)
  size_t ldc = 0;
  uint64_t inner_swamped = 0, outer_swamped = 0;  // outputs of the counting variant
  bool nonfinite = false;          // output: some result was NaN or inf (the reference must decide)
};
}  // namespace drift
