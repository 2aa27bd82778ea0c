// The matmul definition (arith/matmul.h) for ONE output element C[i][j] of prepared operands, as a
// host/device function: the body every CUDA matmul thread runs, and what the host tests run in a
// loop and compare bit for bit with the CPU engine (tests/test_backend_element.cpp).
//
// It follows matmul_reference exactly, but keeps no per-element arrays: each block term and each
// product is computed when its sum needs it (every sum order visits each term once), and every
// stochastic rounding draws the Philox word at the index the reference's running counters would
// reach, computed in closed form (arith/matmul_random.h):
//   product (bi, t)         stream kStreamProduct, base + k0 + t
//   inner add number c      stream kStreamInner,   base + bi * inner_adds(kblock) + c
//   block scale multiply    stream kStreamScale,   base + bi
//   outer add number c      stream kStreamOuter,   base + c
//   output                  stream kStreamOut,     i*N + j
// with base = (i*N + j) * matmul_words_per_element(K, nblocks).
//
// A second, float-only body (fast_element) is the CUDA fast kernel's arithmetic for the policies the
// CPU fast path also proves equal (fp32 rne sequential sums, no product rounding): one fmaf per
// product, one fp32 multiply per scale and per block term, one fp32 add per block.
#pragma once

#include <cmath>
#include <cstdint>

#include "arith/fused_accum.h"
#include "arith/matmul.h"
#include "arith/matmul_random.h"
#include "arith/ops.h"

namespace drift {

// One sum of the definition, in plain data (no std::optional) so it can be copied to the device.
struct SumSpec {
  Format format;
  RoundSpec round;
  SumOrder order = SumOrder::sequential;
  int split = 2;
};

// Everything one output element needs. Pointers address host or device memory (the caller's choice).
struct ElementPlan {
  const double* a = nullptr;        // m x k, K-contiguous (QuantizedOperand::q)
  const double* b = nullptr;        // n x k, K-contiguous
  const double* a_scale = nullptr;  // m x a_blocks_per_row, or nullptr (no block scales)
  const double* b_scale = nullptr;
  uint64_t a_block_k = 0, b_block_k = 0, a_blocks_per_row = 0, b_blocks_per_row = 0;
  uint64_t m = 0, n = 0, k = 0, kblock = 1, nblocks = 0;
  bool round_products = false;
  Format product_format;
  RoundSpec product_round;
  SumSpec inner, outer;
  bool fused = false;
  FusedModel model;
  bool fused_in_double = false;        // the model's groups in double arithmetic (fused_accum.h,
                                       // group_in_double): the same values, far fewer operations
  Format out_format;
  RoundSpec out_round;
  double alpha = 1.0;                  // tensor-scale product, applied when != 1
  uint64_t seed = 0, stream = 0;
  const uint32_t* inner_order = nullptr;  // nblocks x kblock (block bi's order at bi*kblock), or nullptr: identity
  const uint32_t* outer_order = nullptr;  // nblocks entries, or nullptr: identity
};

// Rounded adds and swamped adds (an addend lost entirely), as MatmulTelemetry counts them.
struct ElementCounts {
  uint64_t inner_adds = 0, inner_swamped = 0, outer_adds = 0, outer_swamped = 0;
};

namespace element_detail {

// One accumulator's rounded add with an explicit counter (the index of this add in its summer).
struct Summer {
  const SumSpec* spec;
  uint64_t seed, stream, base;
  uint64_t* adds;     // nullptr: no counting
  uint64_t* swamped;
  DRIFT_HD double add(double x, double y, uint64_t counter) const {
    const uint32_t rnd = spec->round.mode == Rounding::sr ? random_u32(seed, stream, base + counter) : 0;
    const double r = op_add(x, y, spec->format, spec->round, rnd);
    if (adds) {
      ++*adds;
      if ((y != 0 && r == x) || (x != 0 && r == y)) ++*swamped;
    }
    return r;
  }
};

// Rounded adds a sum of n terms performs in this spec's order.
DRIFT_HD uint64_t adds_in_sum(const SumSpec& s, uint64_t n) {
  switch (s.order) {
    case SumOrder::pairwise: return n == 0 ? 0 : 2 * n - 1;
    case SumOrder::split:
    case SumOrder::splitk: return n + static_cast<uint64_t>(s.split < 1 ? 1 : s.split) - 1;
    default: return n;
  }
}

// sum(lo..hi) = add(sum(left half), sum(right half)), leaves add(0, term): matmul_reference's
// recursion unrolled onto an explicit stack (device code keeps no recursion), with the same counter
// for every add (the reference counts in post-order: left subtree, right subtree, then the join).
template <class Term, class Pos>
DRIFT_HD double pairwise_sum(const Term& term, const Pos& pos, uint64_t n, const Summer& s, uint64_t start) {
  if (n == 0) return 0.0;
  constexpr int kDepth = 66;  // n < 2^64: depth <= 65
  uint64_t lo[kDepth], hi[kDepth], first[kDepth];
  double left[kDepth];
  bool in_right_half[kDepth];  // the left half is summed (in left[]) and the right half is running
  int sp = 0;
  lo[0] = 0, hi[0] = n, first[0] = start, in_right_half[0] = false;
  double ret = 0.0;
  bool returning = false;
  for (;;) {
    if (returning) {
      if (sp < 0) return ret;
      if (!in_right_half[sp]) {
        left[sp] = ret;
        in_right_half[sp] = true;
        const uint64_t mid = lo[sp] + (hi[sp] - lo[sp]) / 2;
        lo[sp + 1] = mid, hi[sp + 1] = hi[sp], first[sp + 1] = first[sp] + 2 * (mid - lo[sp]) - 1;
        in_right_half[sp + 1] = false;
        ++sp;
        returning = false;
        continue;
      }
      ret = s.add(left[sp], ret, first[sp] + 2 * (hi[sp] - lo[sp]) - 2);
      --sp;
      continue;
    }
    const uint64_t len = hi[sp] - lo[sp];
    if (len == 1) {
      ret = s.add(0.0, term(pos(lo[sp])), first[sp]);
      --sp;
      returning = true;
      continue;
    }
    const uint64_t mid = lo[sp] + len / 2;
    lo[sp + 1] = lo[sp], hi[sp + 1] = mid, first[sp + 1] = first[sp];
    in_right_half[sp + 1] = false;
    ++sp;
  }
}

// Sum of term(pos(0..n)) in the spec's order, the summer's adds numbered from `start`.
template <class Term, class Pos>
DRIFT_HD double ordered_sum(const Term& term, const Pos& pos, uint64_t n, const Summer& s, uint64_t start) {
  switch (s.spec->order) {
    case SumOrder::sequential:
    case SumOrder::permuted: {  // pos carries the permutation
      double acc = 0.0;
      for (uint64_t i = 0; i < n; ++i) acc = s.add(acc, term(pos(i)), start + i);
      return acc;
    }
    case SumOrder::reverse: {
      double acc = 0.0;
      for (uint64_t c = 0; c < n; ++c) acc = s.add(acc, term(pos(n - 1 - c)), start + c);
      return acc;
    }
    case SumOrder::pairwise: return pairwise_sum(term, pos, n, s, start);
    case SumOrder::split:
    case SumOrder::splitk: {
      // Partial p holds terms i = p, p + parts, ... (split) or [p * per_part, (p + 1) * per_part)
      // (splitk), term i with add number i; partial p joins the total with add number n + p - 1.
      // Partials are summed one after another: their adds do not interact.
      const uint64_t parts = static_cast<uint64_t>(s.spec->split < 1 ? 1 : s.spec->split);
      const uint64_t per_part = (n + parts - 1) / parts;
      const bool contiguous = s.spec->order == SumOrder::splitk;
      double total = 0.0;
      for (uint64_t p = 0; p < parts; ++p) {
        const uint64_t first = contiguous ? p * per_part : p, step = contiguous ? 1 : parts;
        const uint64_t end = contiguous && (p + 1) * per_part < n ? (p + 1) * per_part : n;
        double partial = 0.0;
        for (uint64_t i = first; i < end; i += step) partial = s.add(partial, term(pos(i)), start + i);
        total = p == 0 ? partial : s.add(total, partial, start + n + p - 1);
      }
      return total;
    }
  }
  return 0.0;
}

struct Positions {
  const uint32_t* order;  // nullptr: identity
  DRIFT_HD uint64_t operator()(uint64_t i) const { return order ? order[i] : i; }
};

}  // namespace element_detail

// Pieces of one output element that the tiled fused kernel shares with matmul_element.

// The first Philox word index of element (i, j).
DRIFT_HD uint64_t element_base(const ElementPlan& p, uint64_t i, uint64_t j) {
  return (i * p.n + j) * matmul_words_per_element(p.k, p.nblocks);
}

// Element (i, j)'s outer summer (its adds counted into `counts` when given).
DRIFT_HD element_detail::Summer outer_summer(const ElementPlan& p, uint64_t base, ElementCounts* counts) {
  return element_detail::Summer{&p.outer, p.seed, p.stream ^ (kStreamOuter << 56), base,
                                counts ? &counts->outer_adds : nullptr, counts ? &counts->outer_swamped : nullptr};
}

// Block bi's term of the outer sum from its inner sum: times the two block scales when there are any.
DRIFT_HD double block_term_of(const ElementPlan& p, uint64_t i, uint64_t j, uint64_t bi, double inner_sum,
                              uint64_t base) {
  if (!p.a_block_k && !p.b_block_k) return inner_sum;
  const uint64_t k0 = bi * p.kblock;
  const double sa = p.a_block_k ? p.a_scale[i * p.a_blocks_per_row + k0 / p.a_block_k] : 1.0;
  const double sb = p.b_block_k ? p.b_scale[j * p.b_blocks_per_row + k0 / p.b_block_k] : 1.0;
  const double s = op_mul(sa, sb, p.outer.format, p.outer.round);
  const uint32_t rnd = p.outer.round.mode == Rounding::sr
                           ? random_u32(p.seed, p.stream ^ (kStreamScale << 56), base + bi)
                           : 0;
  return op_mul(inner_sum, s, p.outer.format, p.outer.round, rnd);
}

// C[i][j] from the outer sum y: the tensor-scale product, then the output rounding.
DRIFT_HD double element_output(const ElementPlan& p, uint64_t i, uint64_t j, double y) {
  if (p.alpha != 1.0) y = op_mul(y, p.alpha, p.outer.format, p.outer.round);
  const uint32_t rnd = p.out_round.mode == Rounding::sr
                           ? random_u32(p.seed, p.stream ^ (kStreamOut << 56), i * p.n + j)
                           : 0;
  return round_to(y, p.out_format, p.out_round, rnd);
}

// C[i][j] of the definition (before the caller stores it). `counts`: nullptr, or where this
// element's adds and swamped adds are added.
DRIFT_HD double matmul_element(const ElementPlan& p, uint64_t i, uint64_t j, ElementCounts* counts) {
  using namespace element_detail;
  const uint64_t base = element_base(p, i, j);
  const double* arow = p.a + i * p.k;
  const double* brow = p.b + j * p.k;
  uint64_t* inner_adds = counts ? &counts->inner_adds : nullptr;
  uint64_t* inner_sw = counts ? &counts->inner_swamped : nullptr;
  const Summer inner{&p.inner, p.seed, p.stream ^ (kStreamInner << 56), base, inner_adds, inner_sw};
  const Summer outer = outer_summer(p, base, counts);
  const uint64_t inner_adds_per_block = adds_in_sum(p.inner, p.kblock);

  // Block bi's term of the outer sum: its inner sum, times the two block scales when there are any.
  auto block_term = [&](uint64_t bi) -> double {
    const uint64_t k0 = bi * p.kblock;
    const uint64_t len = p.k - k0 < p.kblock ? p.k - k0 : p.kblock;
    double inner_sum;
    if (p.fused) {
      inner_sum = fused_dot(0.0, arow + k0, brow + k0, static_cast<int>(len), p.model, p.fused_in_double);
      if (counts) counts->inner_adds += len;
    } else {
      auto product = [&](uint64_t t) -> double {
        const double x = arow[k0 + t], y = brow[k0 + t];
        if (!p.round_products) return x * y;  // exact: validate_policy bounds the significands
        const uint32_t rnd = p.product_round.mode == Rounding::sr
                                 ? random_u32(p.seed, p.stream ^ (kStreamProduct << 56), base + k0 + t)
                                 : 0;
        return op_mul(x, y, p.product_format, p.product_round, rnd);
      };
      const Positions pos{p.inner_order ? p.inner_order + bi * p.kblock : nullptr};
      inner_sum = ordered_sum(product, pos, len, inner, bi * inner_adds_per_block);
    }
    return block_term_of(p, i, j, bi, inner_sum, base);
  };

  return element_output(p, i, j, ordered_sum(block_term, Positions{p.outer_order}, p.nblocks, outer, 0));
}

// ---- The float fast body -------------------------------------------------------------------------

// Operands of the fast body, all floats (exact copies of the prepared values).
struct FastPlan {
  const float* a = nullptr;   // m x k
  const float* b = nullptr;   // n x k
  const float* sa = nullptr;  // m x nblocks block scales of A per K-block, or nullptr (all 1)
  const float* sb = nullptr;  // n x nblocks
  uint64_t m = 0, n = 0, k = 0, kblock = 1, nblocks = 0;
  bool scaled = false;        // an operand has block scales: every block term is multiplied
  float alpha = 1.0f;
  Format out_format;          // the output rounding, as in ElementPlan
  RoundSpec out_round;
  uint64_t seed = 0, stream = 0;
};

// The end of block bi for the fast body: the block's fp32 sum scaled (fp32(sa*sb), then fp32(sum*s))
// and added into the outer fp32 sum.
DRIFT_HD float fast_block_done(float outer, float inner, bool scaled, float sa, float sb) {
  const float t = scaled ? f32_mul(inner, f32_mul(sa, sb)) : inner;
  return f32_add(outer, t);
}

// The outer sum of row i, column j, alpha applied; fast_output rounds it to the output format.
// Equal to matmul_element's y whenever every value stays finite (the fast path's precondition:
// fp32 rne sequential inner and outer sums, no fused model, no product rounding; each step is then
// one IEEE fp32 operation, and fmaf adds the exact product with one rounding, as op_add does).
DRIFT_HD float fast_element(const FastPlan& p, uint64_t i, uint64_t j) {
  float outer = 0.0f;
  for (uint64_t bi = 0; bi < p.nblocks; ++bi) {
    const uint64_t k0 = bi * p.kblock, k1 = p.k - k0 < p.kblock ? p.k : k0 + p.kblock;
    float acc = 0.0f;
    for (uint64_t t = k0; t < k1; ++t) acc = f32_fma(p.a[i * p.k + t], p.b[j * p.k + t], acc);
    outer = fast_block_done(outer, acc, p.scaled, p.sa ? p.sa[i * p.nblocks + bi] : 1.0f,
                            p.sb ? p.sb[j * p.nblocks + bi] : 1.0f);
  }
  return p.alpha != 1.0f ? f32_mul(outer, p.alpha) : outer;
}

// fast_element's value rounded to the output format (stochastic rounding draws the reference's word).
DRIFT_HD double fast_output(const FastPlan& p, float y, uint64_t i, uint64_t j) {
  const uint32_t rnd = p.out_round.mode == Rounding::sr
                           ? random_u32(p.seed, p.stream ^ (kStreamOut << 56), i * p.n + j)
                           : 0;
  return round_to(y, p.out_format, p.out_round, rnd);
}

}  // namespace drift
